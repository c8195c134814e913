"""A run's start and its sub-agents, defects left alone by earlier rounds: Stop while a plain run
starts its extensions, and a sub-agent whose configuration cannot work. From outside: the Python
API, a real run store on disk, a real MCP server process."""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import assert_pairing
from tests.harness.test_attack_subagents_round5 import own_cost
from tether import Agent, CancelSignal, RunState, run_stream, run_sync, tool
from tether.errors import ConfigError
from tether.events import Done, Subagent
from tether.harness.extension import Extension
from tether.harness.store import RunStore
from tether.harness.subagent import children
from tether.messages import Message, ToolMessage, text_of
from tether.providers.base import ModelRequest
from tether.testing import FunctionModel, Reply


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
    pytest.importorskip(
        "mcp", reason="needs tether[mcp] (the [test] extra installs it)"
    )  # an optional extra, not a missing feature
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


def lead_calls(name: str = "worker", args: dict[str, Any] | None = None) -> tuple[FunctionModel, list[int]]:
    """A model that calls ``name`` (a sub-agent: ``{"task": "find it"}``, else ``args``) as long as
    it gets errors back (a model that retries), three times at most, then answers with the last result."""
    asked: list[int] = []
    args = {"task": "find it"} if args is None else args

    def lead(messages: list[Message], request: ModelRequest) -> Reply | str:
        asked.append(1)
        results = [m.text for m in messages if isinstance(m, ToolMessage)]
        if len(results) < 3:
            return Reply(calls=((f"c{len(results)}", name, args),))
        return f"worked around it: {results[-1]}"

    return FunctionModel(lead), asked


def test_a_subagent_whose_model_names_no_known_provider_refuses_the_parent_run_before_anything_runs() -> None:
    """The child's model string names a provider that does not exist. That is the person's to fix:
    the parent's run is refused as it starts, as for its own model, naming the sub-agent (before:
    each call was a tool error with config.toml advice fed to the parent's model, which retried
    and then answered without it, the run 'completed')."""
    model, asked = lead_calls()
    worker = Agent("nosuch/model").as_tool("worker", "Finds things.")
    state = RunState()
    with pytest.raises(ConfigError, match=r"the sub-agent worker: unknown provider 'nosuch'.*config\.toml"):
        run_sync(Agent(model, tools=[worker]), "go", state=state)
    assert asked == [] and state.messages == [] and state.status != "completed"


def test_a_misconfigured_subagent_two_levels_down_is_named_by_its_path() -> None:
    """A grandchild whose max_turns is no amount: the parent's run is refused, the message saying
    which sub-agent of which (an agent given itself as a tool beside it is checked once, not for
    ever)."""
    model, asked = lead_calls()
    leaf = Agent(FunctionModel(lambda messages, request: "leaf"), max_turns=-1).as_tool("leaf", "L.")
    middle = Agent(FunctionModel(lambda messages, request: "mid"), tools=[leaf])
    middle_tool = middle.as_tool("middle", "M.")
    middle.tools = [leaf, middle_tool]  # it may hand tasks to itself
    with pytest.raises(ConfigError, match=r"the sub-agent middle: the sub-agent leaf: max_turns must be"):
        run_sync(Agent(model, tools=[middle_tool]), "go")
    assert asked == []


def test_a_subagent_without_a_price_under_the_parents_budget_is_refused_before_anything_runs() -> None:
    """A parent with a budget gives each child a share of it, which a child whose model has no
    known price cannot keep to: refused as the parent starts, saying how to give the price
    (before: the parent's model was told so at each call, and paid for each attempt)."""
    model, asked = lead_calls()
    unpriced = FunctionModel(lambda messages, request: "hi", model_id="unpriced")
    unpriced.price = None
    worker = Agent(unpriced).as_tool("worker", "Finds things.")
    with pytest.raises(ConfigError, match=r"the sub-agent worker: max_budget_usd is set but the price of"):
        run_sync(Agent(model, tools=[worker], max_budget_usd=1.0), "go")
    assert asked == []


class Refuses(Extension):
    """An extension whose start finds its configuration wrong (a server table with no command)."""

    name = "refuses"

    async def start(self) -> None:
        raise ConfigError("[mcp.files] needs command or url: set one in config.toml")


def test_a_subagent_whose_extensions_refuse_to_start_ends_the_parent_failed_with_the_reason() -> None:
    """What only the child's start finds (its extension's configuration) ends the parent run
    failed, saying which sub-agent and why, the call's result saying it was not run; the parent's
    model is not asked again (before: it read the advice as a tool error, retried three times and
    worked around it)."""
    model, asked = lead_calls()
    worker = Agent(FunctionModel(lambda messages, request: "hi"), extensions=[Refuses()]).as_tool("worker", "W.")
    state = RunState()

    async def main() -> list[Any]:
        return [e async for e in run_stream(Agent(model, tools=[worker]), "go", state=state)]

    events = asyncio.run(main())
    result = events[-1].result
    assert result.status == "failed"
    assert (
        result.reason
        == "the sub-agent worker could not start: [mcp.files] needs command or url: set one in config.toml"
    )
    assert asked == [1]
    (answer,) = [m for m in state.messages if isinstance(m, ToolMessage)]
    assert answer.status == "error" and answer.text.startswith("Stopped: the sub-agent worker could not start")
    assert_pairing(state.messages)
    links = [(e.call_id, e.status) for e in events if isinstance(e, Subagent)]
    assert links == [("c0", "started"), ("c0", "failed")]


def test_a_subagent_whose_extension_brings_a_tool_name_it_already_has_ends_the_parent_failed() -> None:
    """The same when the child's tools and its extension's clash (two tools of one name), which only
    its start can tell: side by side with a sibling that works, the parent ends failed once, saying
    so, and the sibling's answer is kept."""

    @tool(read_only=True)
    def lookup() -> str:
        """Look something up."""
        return "found"

    class Brings(Extension):
        name = "brings"

        def tools(self) -> list[Any]:
            return [lookup]

    broken = Agent(FunctionModel(lambda messages, request: "hi"), tools=[lookup], extensions=[Brings()])
    fine = Agent(FunctionModel(lambda messages, request: "fine answer"))
    broken_tool, fine_tool = broken.as_tool("broken", "B."), fine.as_tool("fine", "F.")
    broken_tool.parallel = fine_tool.parallel = True

    def lead(messages: list[Message], request: ModelRequest) -> Reply | str:
        if any(isinstance(m, ToolMessage) for m in messages):
            return "went on"
        return Reply(calls=(("c0", "fine", {"task": "a"}), ("c1", "broken", {"task": "b"})))

    state = RunState()
    result = run_sync(Agent(FunctionModel(lead), tools=[broken_tool, fine_tool]), "go", state=state)
    assert result.status == "failed"
    assert result.reason == (
        "the sub-agent broken could not start: two tools are named 'lookup': the agent's tool from "
        f"{__name__}.{lookup.fn.__qualname__} (in Agent.tools), and a tool of the extension 'brings'. Tool names must be unique: rename one of "
        "them or leave it out"
    )
    texts = {m.call_id: m.text for m in state.messages if isinstance(m, ToolMessage)}
    assert texts["c0"] == "fine answer" and texts["c1"].startswith("Stopped: the sub-agent broken")
    assert_pairing(state.messages)


def test_a_childs_long_reason_for_stopping_reaches_the_parent_cut_short() -> None:
    """A child ends failed quoting a tool's whole error (200,000 characters): the parent's model
    reads its reason cut to a few thousand characters, saying how much was cut, and the kept
    record and the trace hold the same (before: the whole error, in the parent's context and in
    every save of its state after)."""

    @tool()
    def explode() -> str:
        """Fails loudly."""
        raise RuntimeError("boom " * 40_000)

    def child(messages: list[Message], request: ModelRequest) -> Reply:
        return Reply(calls=(("x1", "explode", {}),))

    worker = Agent(FunctionModel(child), tools=[explode], tool_errors_are_fatal=True).as_tool("worker", "W.")
    model, _ = lead_calls()
    state = RunState()

    async def main() -> list[Any]:
        return [e async for e in run_stream(Agent(model, tools=[worker], max_turns=3), "go", state=state)]

    events = asyncio.run(main())
    answers = [m.text for m in state.messages if isinstance(m, ToolMessage)]
    assert answers and all(len(a) < 5_000 for a in answers)
    assert "worker stopped without finishing (failed: tool explode failed: boom boom" in answers[0]
    assert "more characters of the reason cut" in answers[0]
    assert all(len(c["reason"]) < 5_000 for c in children(state).values())
    ended = [e for e in events if isinstance(e, Subagent) and e.status == "failed"]
    assert ended and all(len(e.reason or "") < 5_000 for e in ended)


class FailsAtOnce(Extension):
    """An extension whose start finds at once that it cannot work."""

    name = "fails"

    async def start(self) -> None:
        raise ConfigError("[mcp.files] needs command or url: set one in config.toml")


def test_an_extension_that_fails_at_once_is_not_kept_waiting_by_a_slow_one_and_the_slow_start_is_given_up() -> None:
    """One extension's start fails at once, another's is slow: the run is refused with the failure
    as soon as it comes, the slow start given up, nothing left started (before: the failure waited
    for the slow start to end, ten seconds here, which was then stopped again)."""
    log: list[str] = []
    asked: list[int] = []
    agent = Agent(counting(asked), extensions=[Starts("fast", log), Slow(log), FailsAtOnce()])
    with pytest.raises(ConfigError, match=r"\[mcp\.files\] needs command or url"):
        run_sync(agent, "go")
    assert log == ["start fast", "start slow", "slow cancelled", "stop fast"]
    assert asked == []


def test_answers_of_many_subagent_calls_are_not_saved_again_with_every_save(tmp_path: Path) -> None:
    """A parent hands 30 tasks in turn to a child answering 50,000 characters each. Each answer is
    in the transcript once; the parent's saved state keeps what each child spent, not its text
    (before: every answer was kept in the state too, and each later save, each step of a later
    child among them, rewrote them all: a run of 40 such calls took 25 s instead of 2)."""
    worker = Agent(FunctionModel(lambda messages, request: "y" * 50_000)).as_tool("worker", "W.")

    def lead(messages: list[Message], request: ModelRequest) -> Reply | str:
        done = sum(isinstance(m, ToolMessage) for m in messages)
        return "all done" if done >= 30 else Reply(calls=((f"c{done}", "worker", {"task": f"part {done}"}),))

    store = RunStore(tmp_path / "runs", fsync=False)
    state = RunState()
    parent = Agent(FunctionModel(lead), tools=[worker], max_turns=100, context_window=10**8, compaction=False)
    result = run_sync(parent, "go", state=state, store=store)
    assert result.status == "completed" and result.output == "all done"
    saved = store.load(state.run_id)
    answers = [m.text for m in saved.messages if isinstance(m, ToolMessage)]
    assert len(answers) == 30 and all(a == "y" * 50_000 for a in answers)
    assert len(json.dumps(saved.ext)) < 100_000  # one answer at most, not thirty
    kept = children(saved)
    assert len(kept) == 30 and all(
        k["done"] and k["status"] == "completed" and k["cost_usd"] > 0 for k in kept.values()
    )
    assert saved.delegated_turns == 30
    assert result.cost_usd == pytest.approx(own_cost(saved.messages) + sum(k["cost_usd"] for k in kept.values()))


def test_a_stopped_childs_state_is_let_go_once_its_call_was_declined() -> None:
    """A child waits for a person's approval; the person writes something else instead, which
    declines the call. At the next sub-agent call, the waiting child's whole saved state is let go
    from the parent's, what it spent kept (before: it stayed in every save of the parent)."""

    @tool(needs_approval=True)
    def wipe(path: str) -> str:
        """Delete a folder."""
        return f"wiped {path}"

    def asks(messages: list[Message], request: ModelRequest) -> Reply:
        return Reply(text="about to wipe " + "z" * 20_000, calls=(("w1", "wipe", {"path": "cache"}),))

    cleaner = Agent(FunctionModel(asks), tools=[wipe]).as_tool("cleaner", "Frees space.")
    helper = Agent(FunctionModel(lambda messages, request: "helped")).as_tool("helper", "Helps.")

    def lead(messages: list[Message], request: ModelRequest) -> Reply | str:
        results = [m for m in messages if isinstance(m, ToolMessage)]
        if not results:
            return Reply(calls=(("c0", "cleaner", {"task": "free space"}),))
        if len(results) == 1:
            return Reply(calls=(("c1", "helper", {"task": "help"}),))
        return "done"

    state = RunState()
    parent = Agent(FunctionModel(lead), tools=[cleaner, helper])
    assert run_sync(parent, "go", state=state).status == "interrupted"
    spent = children(state)["c0"]["cost_usd"]
    assert spent > 0 and "messages" in children(state)["c0"]
    result = run_sync(parent, "never mind, do something else", state=state)
    assert result.status == "completed" and result.output == "done"
    kept = children(state)
    assert kept["c0"]["done"] and kept["c0"]["status"] == "interrupted" and "messages" not in kept["c0"]
    assert kept["c0"]["cost_usd"] == spent and len(json.dumps(state.ext)) < 5_000
    assert result.cost_usd == pytest.approx(own_cost(state.messages) + spent + kept["c1"]["cost_usd"])
