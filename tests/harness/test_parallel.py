"""Parallel tool batches and terminal tools (src/tether/harness/tool_exec.py).

Overlap is proven without clocks: the probes of one batch meet at a barrier that only opens when
all of them are running at once; calls run one after another never get there together."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import assert_pairing, scripted_anthropic, scripted_openai
from tether import Agent, RunState, run_sync
from tether.cancel import CancelSignal
from tether.events import ApprovalRequired, ToolResultEvent, ToolStart
from tether.harness.loop import run_stream
from tether.harness.state import approve
from tether.harness.store import RunStore
from tether.messages import AssistantMessage, TextPart, ToolCallPart, ToolMessage, UserMessage
from tether.providers.scripted import Reply
from tether.status import ApprovalInterruption
from tether.testing import FunctionModel, ScriptedServer
from tether.tools.base import ToolContext, tool
from tether.tools.files import FILE_TOOLS


class Meeting:
    """Counts calls running at once; ``meet`` waits until ``size`` of them are in together."""

    def __init__(self, size: int, timeout: float = 5.0) -> None:
        self.size, self.inside, self.most, self.timeout = size, 0, 0, timeout
        self.log: list[str] = []
        self.everyone: asyncio.Event | None = None

    async def meet(self, name: str, delay: float = 0.0) -> bool:
        if self.everyone is None:
            self.everyone = asyncio.Event()
        self.inside += 1
        self.most = max(self.most, self.inside)
        self.log.append(f"start {name}")
        if self.inside >= self.size:
            self.everyone.set()
        try:
            met = True
            try:
                await asyncio.wait_for(self.everyone.wait(), self.timeout)
            except TimeoutError:
                met = False
            await asyncio.sleep(delay)
            return met
        finally:
            self.inside -= 1
            self.log.append(f"end {name}")


def probe_tool(meeting: Meeting, *, fail: int | None = None, **flags: Any) -> Any:
    @tool(read_only=True, **flags)
    async def probe(n: int) -> str:
        """Probe number n."""
        met = await meeting.meet(f"probe{n}", delay=0.05 * (4 - n))  # the first finishes last
        if n == fail:
            raise RuntimeError(f"probe {n} broke")
        return f"probe {n} ok" + ("" if met else " (alone)")

    return probe


def three_probes(n: int = 3) -> FunctionModel:
    def reply(messages: list[Any], request: Any) -> Reply | str:
        if not any(isinstance(m, ToolMessage) for m in messages):
            return Reply(calls=tuple((f"c{i}", "probe", {"n": i}) for i in range(1, n + 1)))
        return "done: " + " | ".join(m.text for m in messages if isinstance(m, ToolMessage))

    return FunctionModel(reply)


def results(state: RunState) -> list[ToolMessage]:
    return [m for m in state.messages if isinstance(m, ToolMessage)]


def test_read_only_calls_overlap_and_results_keep_call_order() -> None:
    meeting = Meeting(3)
    state = RunState()
    events: list[Any] = []

    async def main() -> None:
        agent = Agent(three_probes(), tools=[probe_tool(meeting)])
        async for event in run_stream(agent, "probe", state=state):
            events.append(event)

    asyncio.run(main())
    assert state.status == "completed"
    assert [m.call_id for m in results(state)] == ["c1", "c2", "c3"]  # not completion order (c3 first)
    assert [m.text for m in results(state)] == ["probe 1 ok", "probe 2 ok", "probe 3 ok"]  # all met
    assert meeting.most == 3
    assert meeting.log.index("end probe3") < meeting.log.index("end probe1")  # c3 really finished first
    starts = [e.call_id for e in events if isinstance(e, ToolStart)]
    ends = [e.call_id for e in events if isinstance(e, ToolResultEvent)]
    assert sorted(starts) == ["c1", "c2", "c3"] and ends == ["c1", "c2", "c3"]
    assert_pairing(state.messages)


def test_not_parallel_runs_one_at_a_time() -> None:
    meeting = Meeting(3, timeout=0.1)
    state = RunState()
    result = run_sync(Agent(three_probes(), tools=[probe_tool(meeting, parallel=False)]), "probe", state=state)
    assert result.status == "completed"
    assert meeting.most == 1
    assert all(m.text.endswith("(alone)") for m in results(state))


def test_max_parallel_tools_bounds_the_batch() -> None:
    meeting = Meeting(2, timeout=0.2)
    run_sync(Agent(three_probes(4), tools=[probe_tool(meeting)], max_parallel_tools=2), "probe")
    assert meeting.most == 2


def test_one_failure_does_not_cancel_siblings() -> None:
    meeting = Meeting(3)
    state = RunState()
    result = run_sync(Agent(three_probes(), tools=[probe_tool(meeting, fail=2)]), "probe", state=state)
    assert result.status == "completed"
    got = results(state)
    assert [m.status for m in got] == ["ok", "error", "ok"]
    assert "probe 2 broke" in got[1].text and got[0].text == "probe 1 ok" and got[2].text == "probe 3 ok"


def test_a_call_with_side_effects_is_a_barrier() -> None:
    """(read, read) -> write -> read: the reads overlap, the write waits for both, the last read
    waits for the write."""
    log: list[str] = []
    meeting = Meeting(2, timeout=0.3)

    @tool(read_only=True)
    async def look(name: str) -> str:
        """Look."""
        log.append(f"start {name}")
        met = await meeting.meet(name)
        log.append(f"end {name}")
        return f"{name} {'met' if met else 'alone'}"

    @tool
    async def write(text: str) -> str:
        """Write."""
        log.append("start write")
        await asyncio.sleep(0.05)
        log.append("end write")
        return "written"

    calls = (("a", "look", {"name": "r1"}), ("b", "look", {"name": "r2"}), ("c", "write", {"text": "x"}))
    calls += (("d", "look", {"name": "r3"}),)

    def reply(messages: list[Any], request: Any) -> Reply | str:
        return "ok" if any(isinstance(m, ToolMessage) for m in messages) else Reply(calls=calls)

    state = RunState()
    run_sync(Agent(FunctionModel(reply), tools=[look, write]), "go", state=state)
    assert [m.text for m in results(state)][:2] == ["r1 met", "r2 met"]
    assert log.index("start write") > max(log.index("end r1"), log.index("end r2"))
    assert log.index("start r3") > log.index("end write")


def test_parallel_side_effects_each_keep_a_durable_intent(tmp_path: Path) -> None:
    """Every intent of a batch is on disk before any of its calls runs."""
    store = RunStore(tmp_path / "runs")
    seen: list[list[str]] = []
    state = RunState()

    @tool(parallel=True)
    async def send(n: int, ctx: ToolContext) -> str:
        """Send message n."""
        on_disk = store.load(state.run_id)
        seen.append(sorted(on_disk.intents))
        return f"sent {n}"

    def reply(messages: list[Any], request: Any) -> Reply | str:
        if any(isinstance(m, ToolMessage) for m in messages):
            return "sent"
        return Reply(calls=tuple((f"c{i}", "send", {"n": i}) for i in (1, 2, 3)))

    result = run_sync(Agent(FunctionModel(reply), tools=[send]), "send three", state=state, store=store)
    assert result.status == "completed"
    assert seen == [["c1", "c2", "c3"]] * 3
    assert store.load(state.run_id).intents == {}  # every result recorded: no intent left


def test_cancellation_reaches_every_call_and_they_stay_pending(tmp_path: Path) -> None:
    cancelled: list[int] = []
    started = 0

    @tool(read_only=True)
    async def probe(n: int) -> str:
        """Hang until cancelled."""
        nonlocal started
        started += 1
        if started == 3:
            signal.cancel("stop now")
        try:
            await asyncio.sleep(30)
        except asyncio.CancelledError:
            cancelled.append(n)
            raise
        return "never"

    signal = CancelSignal()
    state = RunState()
    store = RunStore(tmp_path / "runs")
    result = run_sync(Agent(three_probes(), tools=[probe]), "probe", state=state, store=store, signal=signal)
    assert result.status == "interrupted" and "stop now" in (result.reason or "")
    assert sorted(cancelled) == [1, 2, 3]
    assert results(state) == []  # nothing ran to the end: all three are still pending

    meeting = Meeting(3)
    again = run_sync(Agent(three_probes(), tools=[probe_tool(meeting)]), state=store.load(state.run_id), store=store)
    assert again.status == "completed"
    assert [m.text for m in results(store.load(state.run_id))] == ["probe 1 ok", "probe 2 ok", "probe 3 ok"]


def test_approvals_of_one_batch_are_asked_together() -> None:
    ran: list[int] = []

    @tool(read_only=True, needs_approval=True)
    async def peek(n: int) -> str:
        """Read a private record."""
        ran.append(n)
        return f"record {n}"

    def reply(messages: list[Any], request: Any) -> Reply | str:
        if any(isinstance(m, ToolMessage) for m in messages):
            return "read"
        return Reply(calls=(("c1", "peek", {"n": 1}), ("c2", "peek", {"n": 2})))

    state = RunState()
    events: list[Any] = []

    async def main(prompt: str | None) -> None:
        async for event in run_stream(Agent(FunctionModel(reply), tools=[peek]), prompt, state=state):
            events.append(event)

    asyncio.run(main("read both"))
    assert state.status == "interrupted" and ran == []
    asked = [e.call_id for e in events if isinstance(e, ApprovalRequired)]
    assert asked == ["c1", "c2"]
    waiting = state.interruption
    assert isinstance(waiting, ApprovalInterruption)
    assert waiting.call_id == "c1" and [w.call_id for w in waiting.together] == ["c2"]
    assert "2 calls" in (state.reason or "")
    approve(state, "c1")
    approve(state, "c2")
    asyncio.run(main(None))
    assert state.status == "completed" and sorted(ran) == [1, 2]


def test_terminal_tool_result_is_the_answer_and_later_calls_are_skipped() -> None:
    model = FunctionModel(lambda m, r: Reply(calls=(("c1", "finish", {"answer": "42"}), ("c2", "list_files", {}))))

    @tool(terminal=True)
    def finish(answer: str) -> str:
        """Give the final answer."""
        return f"The answer is {answer}."

    state = RunState()
    result = run_sync(Agent(model, tools=[finish, *FILE_TOOLS]), "answer", state=state)
    assert result.status == "completed" and result.text == "The answer is 42."
    assert "finish ended the run" in (result.reason or "")
    assert len(model.requests) == 1  # no model call after the terminal tool
    skipped = results(state)[1]
    assert skipped.status == "skipped" and "finish ended the turn" in skipped.text
    assert_pairing(state.messages)


def test_a_failed_terminal_call_goes_back_to_the_model() -> None:
    def reply(messages: list[Any], request: Any) -> Reply | str:
        if any(isinstance(m, ToolMessage) for m in messages):
            return "could not finish"
        return Reply(calls=(("c1", "finish", {"answer": ""}),))

    @tool
    def finish(answer: str) -> str:
        """Give the final answer."""
        if not answer:
            raise ValueError("empty answer")
        return answer

    result = run_sync(Agent(FunctionModel(reply), tools=[finish], stop_at_tools=["finish"]), "answer")
    assert result.text == "could not finish"


def test_stop_at_tools_names_a_tool_from_outside() -> None:
    model = FunctionModel(lambda m, r: Reply(calls=(("c1", "list_files", {}),)))
    result = run_sync(Agent(model, tools=FILE_TOOLS, stop_at_tools=["list_files"], cwd=Path.cwd()), "list")
    assert result.status == "completed" and len(model.requests) == 1 and result.text


def test_answer_mode_asks_once_more_without_tools_and_refuses_calls_in_it() -> None:
    def reply(messages: list[Any], request: Any) -> Reply | str:
        if any(isinstance(m, ToolMessage) for m in messages):
            # Hostile: calls a tool although none was offered.
            return Reply(text="Filed ticket 7.", calls=(("c9", "file_ticket", {"title": "again"}),))
        return Reply(calls=(("c1", "file_ticket", {"title": "disk full"}),))

    filed: list[str] = []

    @tool(terminal="answer")
    def file_ticket(title: str) -> str:
        """File a ticket."""
        filed.append(title)
        return "ticket 7"

    model = FunctionModel(reply)
    state = RunState()
    result = run_sync(Agent(model, tools=[file_ticket]), "file it", state=state)
    assert result.status == "completed"
    assert filed == ["disk full"]  # the call in the tool-less reply never ran
    assert model.requests[1].tools == ()
    assert result.text.startswith("Filed ticket 7.") and "no tools were offered" in result.text
    last = state.messages[-1]
    assert isinstance(last, AssistantMessage) and last.tool_calls == []


@pytest.mark.parametrize("wire", ["openai", "anthropic"])
@pytest.mark.parametrize("stream", [True, False])
def test_parallel_batch_on_both_wires(scripted_server: ScriptedServer, wire: str, stream: bool) -> None:
    scripted_server.set_faults([])
    make = scripted_openai if wire == "openai" else scripted_anthropic
    meeting = Meeting(3)
    state = RunState()
    agent = Agent(make(scripted_server, "parallel"), tools=[probe_tool(meeting)], stream=stream)
    result = run_sync(agent, "probe", state=state)
    assert result.status == "completed", result.reason
    assert result.text == "Probes answered: probe 1 ok, probe 2 ok, probe 3 ok"
    assert meeting.most == 3
    body = scripted_server.received[-1][1]
    if wire == "openai":
        sent = [m["tool_call_id"] for m in body["messages"] if m["role"] == "tool"]
    else:
        sent = [b["tool_use_id"] for m in body["messages"] for b in m["content"] if b.get("type") == "tool_result"]
    assert sent == ["c1", "c2", "c3"]


@pytest.mark.parametrize("wire", ["openai", "anthropic"])
@pytest.mark.parametrize("stream", [True, False])
@pytest.mark.parametrize("mode", [True, "answer"])
def test_terminal_tool_on_both_wires(
    scripted_server: ScriptedServer, workspace: Path, wire: str, stream: bool, mode: Any
) -> None:
    scripted_server.set_faults([])
    make = scripted_openai if wire == "openai" else scripted_anthropic

    @tool(terminal=mode)
    def file_ticket(title: str) -> str:
        """File a ticket."""
        return f"ticket T-1 ({title})"

    state = RunState()
    agent = Agent(make(scripted_server, "terminal"), tools=[file_ticket, *FILE_TOOLS], cwd=workspace, stream=stream)
    result = run_sync(agent, "file a ticket", state=state)
    assert result.status == "completed", result.reason
    bodies = [body for _, body, _ in scripted_server.received]
    assert results(state)[1].status == "skipped"
    if mode is True:
        assert result.text == "ticket T-1 (disk full)" and len(bodies) == 1
    else:
        assert result.text.startswith("The ticket was filed:") and len(bodies) == 2
        assert not bodies[1].get("tools")  # the answer call offers no tools
    assert_pairing(state.messages)


@pytest.mark.parametrize("rest", [True, False])
def test_a_crash_after_the_terminal_result_ends_the_turn_on_resume(tmp_path: Path, rest: bool) -> None:
    """The process dies right after the terminal call's result is saved (its siblings still
    pending, or its answer not yet written): the resume ends the turn the same way, running
    nothing else and asking the model nothing."""
    listed: list[str] = []

    @tool(terminal=True)
    def finish(answer: str) -> str:
        """Give the final answer."""
        return f"The answer is {answer}."

    @tool(read_only=True)
    def list_files() -> str:
        """List files."""
        listed.append("ran")
        return "a.txt"

    calls = [ToolCallPart(id="c1", name="finish", arguments='{"answer": "42"}')]
    if rest:
        calls.append(ToolCallPart(id="c2", name="list_files", arguments="{}"))
    state = RunState(status="interrupted")
    state.messages = [
        UserMessage.text("answer"),
        AssistantMessage(content=tuple(calls), finish_reason="tool_calls"),
        ToolMessage(call_id="c1", name="finish", content=(TextPart(text="The answer is 42."),)),
    ]
    store = RunStore(tmp_path / "runs")
    store.save(state)
    model = FunctionModel(lambda m, r: "the model should not be asked")
    result = run_sync(Agent(model, tools=[finish, list_files]), state=store.load(state.run_id), store=store)
    assert result.status == "completed" and result.text == "The answer is 42."
    assert model.requests == [] and listed == []
    saved = store.load(state.run_id)
    assert [m.status for m in saved.messages if isinstance(m, ToolMessage)] == (["ok", "skipped"] if rest else ["ok"])
    assert_pairing(saved.messages)
