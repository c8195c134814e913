"""A run's start and its sub-agents, defects left alone by earlier rounds: Stop while a plain run
starts its extensions, and a sub-agent whose configuration cannot work. From outside: the Python
API, a real run store on disk, a real MCP server process."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path
from typing import Any

import pytest

from tether import Agent, CancelSignal, RunState, run_stream
from tether.events import Done
from tether.harness.extension import Extension
from tether.harness.store import RunStore
from tether.messages import Message, text_of
from tether.providers.base import ModelRequest
from tether.testing import FunctionModel


class Starts(Extension):
    """An extension that starts at once, and says when it started and stopped."""

    def __init__(self, name: str, log: list[str]) -> None:
        self.name, self.log = name, log

    async def start(self) -> None:
        self.log.append(f"start {self.name}")

    async def stop(self) -> None:
        self.log.append(f"stop {self.name}")


class Slow(Extension):
    """An extension whose start takes long (a server slow to answer its handshake): ten seconds,
    unless it is cancelled."""

    name = "slow"

    def __init__(self, log: list[str]) -> None:
        self.log = log
        self.starting = asyncio.Event()

    async def start(self) -> None:
        self.log.append("start slow")
        self.starting.set()
        try:
            await asyncio.sleep(10)
        except asyncio.CancelledError:
            self.log.append("slow cancelled")
            raise
        self.log.append("slow started")

    async def stop(self) -> None:
        self.log.append("stop slow")


def counting(asked: list[int]) -> FunctionModel:
    def answer(messages: list[Message], request: ModelRequest) -> str:
        asked.append(1)
        return "hi"

    return FunctionModel(answer)


async def stop_when(ready: asyncio.Event, signal: CancelSignal) -> None:
    await ready.wait()
    signal.cancel("user pressed Stop")


def test_stop_while_an_extension_starts_ends_the_run_stopped_and_stops_those_that_started(tmp_path: Path) -> None:
    """Stop comes while a plain run's extension is still starting. The run ends interrupted
    (cancelled) at once, saved and resumable, with no model call paid; the extension that had
    started is stopped, the slow start cancelled (before: Stop was not heard until every start
    ended, here after ten seconds)."""
    log: list[str] = []
    asked: list[int] = []
    slow = Slow(log)
    agent = Agent(counting(asked), extensions=[Starts("fast", log), slow])
    store = RunStore(tmp_path / "runs", fsync=False)
    state = RunState()
    signal = CancelSignal()

    async def main() -> list[Any]:
        presser = asyncio.create_task(stop_when(slow.starting, signal))
        events = [e async for e in run_stream(agent, "go", state=state, store=store, signal=signal)]
        await presser
        return events

    events = asyncio.run(main())
    assert isinstance(events[-1], Done)
    result = events[-1].result
    assert result.status == "interrupted" and result.interruption.type == "cancelled"
    assert "user pressed Stop" in (result.reason or "")
    assert asked == [] and result.cost_usd == 0
    assert log == ["start fast", "start slow", "slow cancelled", "stop fast"]
    saved = store.load(state.run_id)
    assert saved.status == "interrupted" and saved.reason == result.reason
    assert text_of(saved.messages) == "go"  # the prompt is kept: a resume answers it

    resumed = asyncio.run(_drain(Agent(counting(asked)), saved, store))
    assert resumed.status == "completed" and resumed.output == "hi" and asked == [1]


async def _drain(agent: Agent, state: RunState, store: RunStore) -> Any:
    result = None
    async for event in run_stream(agent, state=state, store=store):
        if isinstance(event, Done):
            result = event.result
    return result


def test_stop_before_the_run_starts_starts_no_extension() -> None:
    """A signal fired before the run begins (Stop pressed as it was being started): no extension
    is started only to be stopped again (before: each was started, a server's process spawned)."""
    log: list[str] = []
    asked: list[int] = []
    signal = CancelSignal()
    signal.cancel("user pressed Stop")

    async def main() -> list[Any]:
        agent = Agent(counting(asked), extensions=[Starts("a", log), Starts("b", log)])
        return [e async for e in run_stream(agent, "go", signal=signal)]

    result = asyncio.run(main())[-1].result
    assert result.status == "interrupted" and result.interruption.type == "cancelled"
    assert log == [] and asked == []


# Reads the handshake, says so in a file, and never answers (it ends when its stdin closes).
SILENT_SERVER = "import pathlib, sys\nsys.stdin.readline()\npathlib.Path(sys.argv[1]).touch()\nsys.stdin.read()\n"


def test_stop_while_an_mcp_server_is_slow_to_answer_its_handshake_kills_it(tmp_path: Path) -> None:
    """The same with a real MCP server process that reads the handshake and does not answer: Stop
    ends the run stopped and no process of the server is left (before: the run waited for the
    connector's start timeout, then failed with its error)."""
    pytest.importorskip("mcp")
    from tests.connectors.conftest import live_processes
    from tether.connectors.mcp import McpConnector

    script = tmp_path / "silent.py"
    script.write_text(SILENT_SERVER, encoding="utf-8")
    asked_to_start = tmp_path / "handshake-read"
    config = {"command": sys.executable, "args": [str(script), str(asked_to_start)]}
    connector = McpConnector("silent", config, start_timeout_s=10)
    asked: list[int] = []
    signal = CancelSignal()

    async def main() -> Any:
        async def press() -> None:
            while not asked_to_start.exists():  # the server read the handshake, and will not answer
                await asyncio.sleep(0.01)
            signal.cancel("user pressed Stop")

        presser = asyncio.create_task(press())
        events = [e async for e in run_stream(Agent(counting(asked), extensions=[connector]), "go", signal=signal)]
        await presser
        return events[-1].result

    result = asyncio.run(main())
    assert result.status == "interrupted" and result.interruption.type == "cancelled"
    assert asked == []
    assert connector.pids and live_processes(connector.pids) == []
