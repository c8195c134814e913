"""An extension's start and stop bracket every run_stream call, however the run ends; a start that
fails stops the ones already started and raises before anything runs."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from tether import Agent, CancelSignal, run_stream, run_sync, tool
from tether.harness.extension import Extension
from tether.tools.demo import DEMO_TOOLS
from tether.tools.files import FILE_TOOLS


class Recorder(Extension):
    def __init__(self, name: str, log: list[str], fail_start: bool = False) -> None:
        self.name, self.log, self.fail_start = name, log, fail_start
        self.up = False

    async def start(self) -> None:
        self.log.append(f"start {self.name}")
        if self.fail_start:
            raise RuntimeError(f"{self.name} cannot start")
        self.up = True

    async def stop(self) -> None:
        self.log.append(f"stop {self.name}")
        self.up = False

    def tools(self) -> list[Any]:
        up = self

        @tool(read_only=True, name=f"{self.name}_ping")
        def ping() -> str:
            """Is the extension up?"""
            return "up" if up.up else "down"

        return [ping]


def test_start_before_tools_are_read_and_stop_after_a_completed_run(workspace: Path) -> None:
    log: list[str] = []
    agent = Agent("scripted/plan", tools=FILE_TOOLS, cwd=workspace, extensions=[Recorder("a", log), Recorder("b", log)])
    assert run_sync(agent, "timeout?").status == "completed"
    assert log == ["start a", "start b", "stop b", "stop a"]


def test_a_failing_start_stops_the_started_ones_and_raises(workspace: Path) -> None:
    log: list[str] = []
    agent = Agent(
        "scripted/plan",
        tools=FILE_TOOLS,
        cwd=workspace,
        extensions=[Recorder("a", log), Recorder("b", log, fail_start=True), Recorder("c", log)],
    )
    with pytest.raises(RuntimeError, match="b cannot start"):
        run_sync(agent, "timeout?")
    assert log == ["start a", "start b", "start c", "stop c", "stop a"]  # started together; the started ones stopped


def test_stop_runs_when_the_run_is_cancelled_or_the_caller_stops_reading(workspace: Path) -> None:
    log: list[str] = []
    agent = Agent("scripted/slow", tools=[*FILE_TOOLS, *DEMO_TOOLS], cwd=workspace, extensions=[Recorder("a", log)])

    async def cancelled() -> str:
        signal = CancelSignal()
        status = ""
        async for event in run_stream(agent, "scan", signal=signal):
            if event.type == "tool_start":
                signal.cancel("stop")
            if event.type == "done":
                status = event.result.status
        return status

    assert asyncio.run(cancelled()) == "interrupted"
    assert log == ["start a", "stop a"]

    async def abandoned() -> None:
        stream = run_stream(agent, "scan")
        async for event in stream:
            if event.type == "tool_start":
                break
        await stream.aclose()  # type: ignore[attr-defined]

    asyncio.run(abandoned())
    assert log == ["start a", "stop a", "start a", "stop a"]
