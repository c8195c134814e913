"""Sub-agents (``agent.as_tool``): a whole agent behind a tool, inside the parent's run.

The child has its own transcript (the parent sees only its answer), its own limits, the parent's
cancellation signal and a budget carved from what the parent has left; its state is kept inside
the parent's, its cost is added to the parent's, and a person's decision reaches it through the
parent. Models are FunctionModels that report a fixed usage per call, so every cost below is
computed from prices and call counts, independently of what tether adds up.
"""

from __future__ import annotations

import asyncio
import copy
import json
import re
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import assert_pairing
from tether import (
    Agent,
    CancelSignal,
    JsonlTracer,
    RunState,
    RunStore,
    approve,
    pending_tool_calls,
    reject,
    run_stream,
    tool,
)
from tether.events import ApprovalRequired, Decision, Done, Event, Subagent, TextDelta, ToolResultEvent, Turn
from tether.harness.subagent import children, parent_of, saved_child
from tether.messages import AssistantMessage, Message, TextPart, ToolCallPart, ToolMessage, UserMessage
from tether.providers.base import ModelRequest
from tether.status import ApprovalInterruption, RunResult, SubagentInterruption
from tether.testing import FunctionModel
from tether.tools.base import ToolContext
from tether.tools.files import FILE_TOOLS
from tether.tracing import read_trace
from tether.usage import Price, Usage

PARENT = Price(input=2.0, output=12.0)
ALPHA = Price(input=1.0, output=5.0)
BETA = Price(input=3.0, output=15.0)
U_PARENT = Usage(prompt_tokens=1200, completion_tokens=80)
U_ALPHA = Usage(prompt_tokens=700, completion_tokens=40)
U_BETA = Usage(prompt_tokens=900, completion_tokens=60)

Calls = tuple[tuple[str, str, dict[str, Any]], ...]
Script = Callable[[int, list[Message]], "AssistantMessage | Awaitable[AssistantMessage]"]


def reply(usage: Usage, text: str = "", calls: Calls = ()) -> AssistantMessage:
    parts: list[TextPart | ToolCallPart] = [TextPart(text=text)] if text else []
    parts += [ToolCallPart(id=cid, name=name, arguments=json.dumps(args)) for cid, name, args in calls]
    return AssistantMessage(content=tuple(parts), usage=usage, finish_reason="tool_calls" if calls else "stop")


def turn_of(messages: list[Message]) -> int:
    return sum(1 for m in messages if isinstance(m, AssistantMessage))


def tool_texts(messages: list[Message]) -> list[str]:
    return [m.text for m in messages if isinstance(m, ToolMessage)]


class Model:
    """A FunctionModel driven by ``script(turn, messages)``, remembering which turns it was asked."""

    def __init__(self, script: Script, price: Price, name: str = "function") -> None:
        self.script = script
        self.turns: list[int] = []

        async def fn(messages: list[Message], request: ModelRequest) -> AssistantMessage:
            t = turn_of(messages)
            self.turns.append(t)
            out = self.script(t, messages)
            return await out if isinstance(out, Awaitable) else out

        self.provider = FunctionModel(fn, model_id=name, price=price)

    @property
    def requests(self) -> list[ModelRequest]:
        return self.provider.requests


def parent_model(calls: Calls, answer: Callable[[list[Message]], str] | None = None) -> Model:
    """Turn 0 makes ``calls``; turn 1 answers (by default with the tool results joined)."""

    def script(t: int, messages: list[Message]) -> AssistantMessage:
        if t == 0:
            return reply(U_PARENT, calls=calls)
        return reply(U_PARENT, text=answer(messages) if answer else "summary: " + " | ".join(tool_texts(messages)))

    return Model(script, PARENT, "parent")


def go(agent: Agent, prompt: str | None, state: RunState, **kw: Any) -> list[Event]:
    async def main() -> list[Event]:
        return [e async for e in run_stream(agent, prompt, state=state, **kw)]

    return asyncio.run(main())


def result_of(events: list[Event]) -> RunResult:
    done = events[-1]
    assert isinstance(done, Done)
    return done.result


def subagent_events(events: list[Event]) -> list[Subagent]:
    return [e for e in events if isinstance(e, Subagent)]


# --------------------------------------------------------------------------- two children


def test_two_subagents_keep_separate_transcripts_and_their_costs_add_up(tmp_path: Path) -> None:
    store = RunStore(tmp_path / "runs")
    state = RunState()
    seen: dict[str, dict[str, Any]] = {}  # parent call id → what the parent held while that child ran

    @tool(read_only=True)
    def lookup(ctx: ToolContext, topic: str) -> str:
        """Look a topic up."""
        mine = ctx.state  # the child's own state
        seen[parent_of(mine)[1]] = {
            "memory": copy.deepcopy(children(state).get(parent_of(mine)[1])),
            "disk": children(RunStore(tmp_path / "runs").load(state.run_id)).get(parent_of(mine)[1]),
            "saved": saved_child(state, parent_of(mine)[1], RunStore(tmp_path / "runs")),
            "run_id": mine.run_id,
            "parent_run_id": parent_of(mine)[0],
            "finished": sorted(k for k, v in children(state).items() if v.get("done")),
        }
        return f"NOTE on {topic}: private detail {topic}-7731"

    def child_script(name: str, usage: Usage) -> Script:
        def script(t: int, messages: list[Message]) -> AssistantMessage:
            if t == 0:
                return reply(usage, calls=((f"{name}-1", "lookup", {"topic": name}),))
            assert "private detail" in tool_texts(messages)[-1]
            return reply(usage, text=f"{name} is fine")

        return script

    alpha, beta = (
        Model(child_script("alpha", U_ALPHA), ALPHA, "alpha"),
        Model(child_script("beta", U_BETA), BETA, "beta"),
    )
    parent = parent_model((("p1", "alpha", {"task": "look into alpha"}), ("p2", "beta", {"task": "look into beta"})))
    agent = Agent(
        parent.provider,
        instructions="PARENT INSTRUCTIONS",
        tools=[
            Agent(alpha.provider, instructions="You look alpha up.", tools=[lookup]).as_tool(
                "alpha", "Looks alpha up."
            ),
            Agent(beta.provider, instructions="You look beta up.", tools=[lookup]).as_tool("beta", "Looks beta up."),
        ],
    )
    events = go(agent, "PARENT PROMPT: check alpha and beta", state, store=store)
    result = result_of(events)

    assert result.status == "completed"
    assert result.output == "summary: alpha is fine | beta is fine"
    assert result.turns == 2  # the parent's own turns
    # The parent's transcript: its calls and the children's answers, nothing of their work.
    assert [m.role for m in state.messages] == ["user", "assistant", "tool", "tool", "assistant"]
    assert tool_texts(state.messages) == ["alpha is fine", "beta is fine"]
    assert_pairing(state.messages)
    assert "private detail" not in json.dumps([m.model_dump(mode="json") for m in state.messages])
    assert len(parent.requests) == 2
    assert all(
        "private detail" not in json.dumps([m.model_dump(mode="json") for m in r.messages]) for r in parent.requests
    )
    # Each child saw only its task: not the parent's prompt, instructions, nor the other child.
    for model, task, instructions in (
        (alpha, "look into alpha", "You look alpha up."),
        (beta, "look into beta", "You look beta up."),
    ):
        first = model.requests[0]
        assert first.messages == [UserMessage.text(task)]
        assert first.system == instructions
        assert model.turns == [0, 1]
        sent = json.dumps([[m.model_dump(mode="json") for m in r.messages] for r in model.requests])
        assert "PARENT" not in sent
    assert "beta" not in json.dumps([m.model_dump(mode="json") for r in alpha.requests for m in r.messages])

    # While a child ran, its state was saved as a run of its own in the parent's store (its
    # transcript appended there), the parent's record, in memory and on disk, pointing to it.
    for call_id in ("p1", "p2"):
        snap = seen[call_id]
        assert snap["parent_run_id"] == state.run_id
        running = snap["memory"]
        assert running is not None and not running.get("done") and "messages" not in running
        assert snap["disk"] is not None and snap["disk"]["run_id"] == running["run_id"] == snap["run_id"]
        child = snap["saved"]
        assert child.run_id == snap["run_id"] and parent_of(child)[1] == call_id
        assert [m.role for m in child.messages] == ["user", "assistant"]
        assert child.messages[1].tool_calls[0].name == "lookup"  # type: ignore[union-attr]
    assert seen["p1"]["finished"] == [] and seen["p2"]["finished"] == ["p1"]  # alpha's answer kept before beta ran

    # After: each child's answer is kept, not its transcript.
    for call_id, name, price, usage in (("p1", "alpha", ALPHA, U_ALPHA), ("p2", "beta", BETA, U_BETA)):
        kept = children(state)[call_id]
        assert "messages" not in kept
        assert kept["done"] is True and kept["status"] == "completed" and kept["turns"] == 2
        assert kept["run_id"] == seen[call_id]["run_id"]
        # The answer itself only until the transcript holds it (then let go: tests/harness/test_left_alone_run_start.py).
        assert kept.get("output", f"{name} is fine") == f"{name} is fine"
        assert kept["cost_usd"] == pytest.approx(2 * price.cost(usage), abs=1e-12)
    assert children(RunStore(tmp_path / "runs").load(state.run_id)) == children(state)

    # Cost: the parent's own calls plus each child's, each part computed on its own.
    own = sum(PARENT.cost(m.usage) for m in state.messages if isinstance(m, AssistantMessage) and m.usage)
    assert own == pytest.approx(2 * PARENT.cost(U_PARENT), abs=1e-12)
    expected = 2 * PARENT.cost(U_PARENT) + 2 * ALPHA.cost(U_ALPHA) + 2 * BETA.cost(U_BETA)
    assert result.cost_usd == pytest.approx(expected, abs=1e-12)
    assert result.cost_usd == pytest.approx(
        own + children(state)["p1"]["cost_usd"] + children(state)["p2"]["cost_usd"], abs=1e-12
    )

    # The stream: the children's steps under their own run ids, their text deltas withheld.
    turns_by_run: dict[str, int] = {}
    for e in events:
        if isinstance(e, Turn):
            turns_by_run[e.run_id] = turns_by_run.get(e.run_id, 0) + 1
    assert turns_by_run == {state.run_id: 2, seen["p1"]["run_id"]: 2, seen["p2"]["run_id"]: 2}
    assert all(e.run_id == state.run_id for e in events if isinstance(e, TextDelta))
    links = [(e.call_id, e.name, e.child_run_id, e.status) for e in subagent_events(events)]
    assert links == [
        ("p1", "alpha", seen["p1"]["run_id"], "started"),
        ("p1", "alpha", seen["p1"]["run_id"], "completed"),
        ("p2", "beta", seen["p2"]["run_id"], "started"),
        ("p2", "beta", seen["p2"]["run_id"], "completed"),
    ]


# --------------------------------------------------------------------------- limits


def test_a_runaway_child_is_stopped_by_its_budget_and_the_parent_completes(workspace: Path) -> None:
    budget = 0.05
    child = Agent("scripted/runaway", tools=FILE_TOOLS, cwd=workspace, max_turns=None, max_budget_usd=0.01)
    parent = parent_model(
        (("p1", "explorer", {"task": "list the files until you are done"}),),
        answer=lambda messages: "went on without the explorer",
    )
    state = RunState()
    events = go(
        Agent(parent.provider, tools=[child.as_tool("explorer", "Explores.")], max_budget_usd=budget), "explore", state
    )
    result = result_of(events)

    kept = children(state)["p1"]
    assert kept["status"] == "budget_exceeded"
    left_at_start = budget - PARENT.cost(U_PARENT)
    assert 0 < kept["cost_usd"] <= 0.01 <= left_at_start
    (answer,) = [m for m in state.messages if isinstance(m, ToolMessage)]
    assert answer.status == "error"
    assert "budget_exceeded" in answer.text and "Carry on without it" in answer.text
    # The parent goes on: its own next call, within its own budget.
    assert result.status == "completed" and result.output == "went on without the explorer"
    assert parent.turns == [0, 1]
    assert result.cost_usd == pytest.approx(2 * PARENT.cost(U_PARENT) + kept["cost_usd"], abs=1e-12)
    assert result.cost_usd is not None and result.cost_usd <= budget
    assert [(e.status, e.cost_usd) for e in subagent_events(events)][-1] == ("budget_exceeded", kept["cost_usd"])


def test_a_childs_budget_is_carved_from_what_the_parent_has_left(workspace: Path) -> None:
    budget = 0.03
    greeter = Agent("scripted/hello", cwd=workspace)
    # No budget of its own (the turn cap only keeps a broken carve from running for ever).
    runaway = Agent("scripted/runaway", tools=FILE_TOOLS, cwd=workspace, max_turns=100)
    parent = parent_model((("p1", "greeter", {"task": "say hello"}), ("p2", "explorer", {"task": "explore"})))
    state = RunState()
    result = result_of(
        go(
            Agent(
                parent.provider,
                tools=[greeter.as_tool("greeter", "Greets."), runaway.as_tool("explorer", "Explores.")],
                max_budget_usd=budget,
            ),
            "go",
            state,
        )
    )

    first, second = children(state)["p1"], children(state)["p2"]
    assert first["status"] == "completed" and first["cost_usd"] > 0
    # What the parent had left when the second call started: its first turn and the first child paid.
    left = budget - PARENT.cost(U_PARENT) - first["cost_usd"]
    assert second["status"] == "budget_exceeded"
    # The child's limit was that, less the parent's reserve for its own next call.
    carved = float(re.search(r"of \$([0-9.]+)\)", second["reason"]).group(1))  # type: ignore[union-attr]
    assert 0 < carved < left
    assert 0.5 * carved < second["cost_usd"] <= carved
    # The greedy child did not starve its parent: the parent answered, within its budget.
    assert result.status == "completed" and result.output
    own = sum(PARENT.cost(m.usage) for m in state.messages if isinstance(m, AssistantMessage) and m.usage)
    assert result.cost_usd == pytest.approx(own + first["cost_usd"] + second["cost_usd"], abs=1e-12)
    assert result.cost_usd is not None and result.cost_usd <= budget


def test_a_child_resumed_after_a_stop_keeps_the_budget_it_was_given(tmp_path: Path) -> None:
    # The carve is what the parent had left when the call started. A Stop and a resume in the
    # middle of the child must not shrink it by what the child itself has spent meanwhile (that
    # spend is already counted against the child's limit), nor grow it.
    budget, hold = 0.04, {"turn": 2}
    inside: list[asyncio.Event] = []

    @tool(read_only=True)
    async def probe(ctx: ToolContext, n: int) -> str:
        """Probe once more."""
        if n == hold["turn"]:
            inside[0].set()
            await ctx.signal.sleep(HOLD_S)
        return f"probe {n}: nothing yet"

    child = Model(lambda t, m: reply(U_CHILD, calls=((f"k{t}", "probe", {"n": t}),)), CHILD, "child")
    parent = parent_model((("p1", "prober", {"task": "probe until you run out"}),))
    agent = Agent(
        parent.provider,
        tools=[Agent(child.provider, tools=[probe], max_turns=None).as_tool("prober", "Probes.")],
        max_budget_usd=budget,
    )
    state = RunState()

    async def first() -> None:
        signal = CancelSignal()
        inside.append(asyncio.Event())

        async def press() -> None:
            await inside[0].wait()
            signal.cancel("user pressed Stop")

        presser = asyncio.create_task(press())
        async for _ in run_stream(agent, "probe", state=state, signal=signal):
            pass
        await presser

    asyncio.run(first())
    assert state.status == "interrupted" and child.turns == [0, 1, 2]
    hold["turn"] = -1
    go(agent, None, state)
    kept = children(state)["p1"]
    given = budget - PARENT.cost(U_PARENT)  # what the parent had left when it called the child
    assert kept["status"] == "budget_exceeded"
    # Less the parent's reserve for its own next call (an answer of up to 1,000 tokens at $12/M).
    carved = float(re.search(r"of \$([0-9.]+)\)", kept["reason"]).group(1))  # type: ignore[union-attr]
    assert given - 0.02 < carved < given - 0.012, kept["reason"]
    assert child.turns == list(range(kept["turns"]))  # nothing asked twice across the stop
    assert 0.5 * carved < kept["cost_usd"] <= carved
    own = sum(PARENT.cost(m.usage) for m in state.messages if isinstance(m, AssistantMessage) and m.usage)
    assert state.result().cost_usd == pytest.approx(own + kept["cost_usd"], abs=1e-12)
    assert own + kept["cost_usd"] <= budget


def test_a_child_has_its_own_turn_limit(workspace: Path) -> None:
    child = Agent("scripted/runaway", tools=FILE_TOOLS, cwd=workspace, max_turns=3)
    parent = parent_model((("p1", "explorer", {"task": "explore"}),), answer=lambda m: "done anyway")
    state = RunState()
    result = result_of(
        go(Agent(parent.provider, tools=[child.as_tool("explorer", "Explores.")], max_turns=5), "go", state)
    )
    assert children(state)["p1"]["status"] == "max_turns_exceeded" and children(state)["p1"]["turns"] == 3
    assert result.status == "completed" and result.turns == 2


# --------------------------------------------------------------------------- Stop


U_CHILD = Usage(prompt_tokens=500, completion_tokens=30)
CHILD = Price(input=1.0, output=4.0)


# How long the slow part waits for Stop: only a bound, so that a Stop that never arrives fails the
# test (the run completes instead of stopping) rather than hanging it.
HOLD_S = 20


class SlowChild:
    """A child whose tool (``where="tool"``) or second model call (``where="model"``) waits until
    the run is stopped, the first time; after that it is quick."""

    def __init__(self, where: str) -> None:
        self.where = where
        self.slow = True
        self.inside: asyncio.Event | None = None  # set once the child is inside the slow part
        self.log: list[str] = []

        @tool(read_only=True)
        async def scan(ctx: ToolContext) -> str:
            """Scan the archive (slow)."""
            self.log.append("scan start")
            if self.where == "tool" and self.slow:
                assert self.inside is not None
                self.inside.set()
                try:
                    await ctx.signal.sleep(HOLD_S)
                except BaseException:
                    self.log.append("scan cut")
                    raise
            self.log.append("scan end")
            return "scan: no problems"

        async def script(t: int, messages: list[Message]) -> AssistantMessage:
            if t == 0:
                return reply(U_CHILD, calls=(("k1", "scan", {}),))
            if self.where == "model" and self.slow:
                assert self.inside is not None
                self.inside.set()
                try:
                    await asyncio.sleep(HOLD_S)
                except BaseException:
                    self.log.append("model cut")
                    raise
            return reply(U_CHILD, text=tool_texts(messages)[-1])

        self.model = Model(script, CHILD, "child")
        self.agent = Agent(self.model.provider, tools=[scan])


def stop_inside_child(agent: Agent, slow: SlowChild, state: RunState, store: RunStore) -> list[Event]:
    """Run, and press Stop from another task once the child is inside its slow part."""

    async def main() -> list[Event]:
        signal = CancelSignal()
        slow.inside = asyncio.Event()

        async def press() -> None:
            assert slow.inside is not None
            await slow.inside.wait()
            signal.cancel("user pressed Stop")

        presser = asyncio.create_task(press())
        events = [e async for e in run_stream(agent, "scan the archive", state=state, store=store, signal=signal)]
        await presser
        return events

    return asyncio.run(main())


@pytest.mark.parametrize("where", ["tool", "model"])
def test_stop_during_a_child_ends_the_tree_and_a_resume_pays_nothing_twice(tmp_path: Path, where: str) -> None:
    slow = SlowChild(where)
    parent = parent_model((("p1", "scanner", {"task": "scan the archive"}),))
    agent = Agent(parent.provider, tools=[slow.agent.as_tool("scanner", "Scans the archive.")])
    state = RunState()
    events = stop_inside_child(agent, slow, state, RunStore(tmp_path / "runs"))
    result = result_of(events)

    # The whole tree stopped: the parent cancelled, its call to the child pending, the child cut.
    assert result.status == "interrupted"
    assert result.interruption is not None and result.interruption.type == "cancelled"
    assert "user pressed Stop" in (result.reason or "")
    assert [c.id for c in pending_tool_calls(state)] == ["p1"]
    assert tool_texts(state.messages) == []
    assert [e.status for e in events if isinstance(e, ToolResultEvent) and e.call_id == "p1"] == ["cancelled"]
    assert ("scan cut" if where == "tool" else "model cut") in slow.log
    saved = children(state)["p1"]
    assert not saved.get("done")
    child = RunState.model_validate(saved)
    assert child.status == "interrupted"
    assert child.interruption is not None and child.interruption.type == "cancelled"
    assert parent.turns == [0]
    assert slow.model.turns == ([0] if where == "tool" else [0, 1])
    assert child.turns == 1  # recorded: turn 0
    # A request cut by Stop was billed: counted either at the stop (estimated, in cost_usd) or, if
    # it was left in flight, at its worst case on resume (cost_unknown_usd). Never twice, never zero.
    abandoned = child.cost_usd - CHILD.cost(U_CHILD)
    lost = (child.call_in_flight.max_cost_usd or 0.0) if child.call_in_flight else 0.0
    if where == "tool":
        assert abandoned == pytest.approx(0.0, abs=1e-12) and lost == 0.0
    else:
        assert (abandoned > 0) != (lost > 0)
    on_disk = RunStore(tmp_path / "runs").load(state.run_id)
    assert on_disk.status == "interrupted" and children(on_disk)["p1"] == saved

    # A later resume, in a new store as another process would: completes, re-asks nothing recorded.
    slow.slow = False
    resumed = RunStore(tmp_path / "runs").load(state.run_id)
    final = result_of(go(agent, None, resumed, store=RunStore(tmp_path / "runs")))
    assert final.status == "completed" and final.output == "summary: scan: no problems"
    assert parent.turns == [0, 1]
    # The child's recorded turn 0 is not asked again; a turn cut by Stop (never recorded) is.
    assert slow.model.turns == ([0, 1] if where == "tool" else [0, 1, 1])
    kept = children(resumed)["p1"]
    assert kept["done"] is True and kept["run_id"] == child.run_id and kept["turns"] == 2
    assert kept["cost_usd"] == pytest.approx(2 * CHILD.cost(U_CHILD) + abandoned, abs=1e-12)
    assert final.cost_usd == pytest.approx(2 * PARENT.cost(U_PARENT) + 2 * CHILD.cost(U_CHILD) + abandoned, abs=1e-12)
    assert final.cost_unknown_usd == pytest.approx(lost, abs=1e-12)
    assert_pairing(resumed.messages)


def test_stop_during_a_childs_model_request_is_counted_as_in_a_plain_run(tmp_path: Path) -> None:
    # In a plain run, a request cut by Stop is charged at once for its prompt (estimated) and the
    # stop's reason is the person's. Inside a child it should be the same: not left "in flight" to
    # be charged at its worst case (max_tokens of output) on resume, nor recorded as "the caller
    # stopped reading".
    slow = SlowChild("model")
    parent = parent_model((("p1", "scanner", {"task": "scan the archive"}),))
    agent = Agent(parent.provider, tools=[slow.agent.as_tool("scanner", "Scans the archive.")])
    state = RunState()
    stop_inside_child(agent, slow, state, RunStore(tmp_path / "runs"))
    child = RunState.model_validate(children(state)["p1"])
    assert "user pressed Stop" in (child.reason or "")
    assert child.call_in_flight is None
    assert child.cost_usd > CHILD.cost(U_CHILD)  # turn 0 and the cut request's prompt
    slow.slow = False
    final = result_of(go(agent, None, state))
    assert final.status == "completed" and final.cost_unknown_usd == 0.0


def test_one_stop_ends_a_tree_two_levels_deep_and_the_resume_finishes_it(tmp_path: Path) -> None:
    grand = SlowChild("tool")  # the grandchild's tool waits until Stop
    mid = Model(
        lambda t, m: (
            reply(U_ALPHA, calls=(("g1", "scanner", {"task": "scan"}),))
            if t == 0
            else reply(U_ALPHA, text="mid: " + tool_texts(m)[-1])
        ),
        ALPHA,
        "mid",
    )
    middle = Agent(mid.provider, tools=[grand.agent.as_tool("scanner", "Scans.")])
    parent = parent_model((("p1", "manager", {"task": "get the archive scanned"}),))
    agent = Agent(parent.provider, tools=[middle.as_tool("manager", "Delegates.")])
    state = RunState()
    result = result_of(stop_inside_child(agent, grand, state, RunStore(tmp_path / "runs")))

    assert result.status == "interrupted" and result.interruption is not None
    assert result.interruption.type == "cancelled"
    assert "scan cut" in grand.log
    # Every level stopped with its call pending, each saved inside the one above it, on disk too.
    saved = RunStore(tmp_path / "runs").load(state.run_id)
    middle_state = RunState.model_validate(children(saved)["p1"])
    grand_state = RunState.model_validate(children(middle_state)["g1"])
    assert [c.id for c in pending_tool_calls(saved)] == ["p1"]
    assert [c.id for c in pending_tool_calls(middle_state)] == ["g1"]
    assert [c.id for c in pending_tool_calls(grand_state)] == ["k1"]
    assert middle_state.status == grand_state.status == "interrupted"
    assert parent_of(grand_state)[0] == middle_state.run_id and parent_of(middle_state)[0] == state.run_id

    grand.slow = False
    final = result_of(go(agent, None, saved, store=RunStore(tmp_path / "runs")))
    assert final.status == "completed" and final.output == "summary: mid: scan: no problems"
    assert (parent.turns, mid.turns, grand.model.turns) == ([0, 1], [0, 1], [0, 1])  # nothing asked twice
    assert final.cost_usd == pytest.approx(
        2 * PARENT.cost(U_PARENT) + 2 * ALPHA.cost(U_ALPHA) + 2 * CHILD.cost(U_CHILD), abs=1e-12
    )


@pytest.mark.parametrize("stop", ["Stop", "approval"])
def test_the_cost_reported_at_a_stop_includes_what_the_child_spent(tmp_path: Path, stop: str) -> None:
    # The child's first call was paid when the tree stops; the parent's result is what a person
    # (or `tether runs`) sees, and must not report less than was spent.
    state = RunState()
    parent = parent_model((("p1", "helper", {"task": "do it"}),))
    if stop == "Stop":
        slow = SlowChild("tool")
        agent = Agent(parent.provider, tools=[slow.agent.as_tool("helper", "Helps.")])
        result = result_of(stop_inside_child(agent, slow, state, RunStore(tmp_path / "runs")))
    else:

        @tool(needs_approval=True)
        def wipe(path: str) -> str:
            """Delete a directory."""
            return f"wiped {path}"

        child = Model(lambda t, m: reply(U_CHILD, calls=(("w1", "wipe", {"path": "cache"}),)), CHILD, "child")
        agent = Agent(parent.provider, tools=[Agent(child.provider, tools=[wipe]).as_tool("helper", "Helps.")])
        result = result_of(go(agent, "go", state))
    assert result.status == "interrupted"
    assert RunState.model_validate(children(state)["p1"]).cost_usd == pytest.approx(CHILD.cost(U_CHILD))
    assert result.cost_usd == pytest.approx(PARENT.cost(U_PARENT) + CHILD.cost(U_CHILD), abs=1e-12)


# --------------------------------------------------------------------------- approvals


class Cleaner:
    """A child that asks to wipe a directory (a tool that needs approval), then reports."""

    def __init__(self) -> None:
        self.wiped: list[str] = []

        @tool(needs_approval=True)
        def wipe(path: str) -> str:
            """Delete a directory. A person approves each one."""
            self.wiped.append(path)
            return f"wiped {path}"

        def script(t: int, messages: list[Message]) -> AssistantMessage:
            if t == 0:
                return reply(U_CHILD, calls=(("w1", "wipe", {"path": "cache"}),))
            return reply(U_CHILD, text="cleaner: " + tool_texts(messages)[-1])

        self.model = Model(script, CHILD, "child")
        self.agent = Agent(self.model.provider, tools=[wipe])


@pytest.mark.parametrize("decision", ["approve", "reject"])
def test_an_approval_inside_a_child_surfaces_through_the_parent(tmp_path: Path, decision: str) -> None:
    root, traces = tmp_path / "runs", tmp_path / "traces"
    cleaner = Cleaner()
    parent = parent_model((("p1", "cleaner", {"task": "free some space"}),))
    agent = Agent(parent.provider, tools=[cleaner.agent.as_tool("cleaner", "Cleans up.")])
    state = RunState()
    events = go(agent, "free some space", state, store=RunStore(root), tracer=JsonlTracer(traces))
    first = result_of(events)

    # The parent stops for the person, carrying the child's question.
    assert first.status == "interrupted"
    waiting = first.interruption
    assert isinstance(waiting, SubagentInterruption)
    (started, stopped) = subagent_events(events)
    child_run_id = started.child_run_id
    assert (waiting.call_id, waiting.tool_name, waiting.child_run_id) == ("p1", "cleaner", child_run_id)
    assert waiting.child == ApprovalInterruption(call_id="w1", tool_name="wipe", args={"path": "cache"})
    assert "wipe needs approval" in (first.reason or "")
    assert stopped.status == "interrupted" and stopped.child_run_id == child_run_id
    asked = [e for e in events if isinstance(e, ApprovalRequired)]
    assert [(e.run_id, e.call_id, e.tool_name) for e in asked] == [(child_run_id, "w1", "wipe")]
    assert [c.id for c in pending_tool_calls(state)] == ["p1"]
    assert cleaner.wiped == [] and cleaner.model.turns == [0] and parent.turns == [0]

    # Resumed without a decision (from disk, as another process would): the same question again.
    again_state = RunStore(root).load(state.run_id)
    again = result_of(go(agent, None, again_state, store=RunStore(root), tracer=JsonlTracer(traces)))
    assert again.status == "interrupted" and again.interruption == waiting
    assert cleaner.wiped == [] and cleaner.model.turns == [0] and parent.turns == [0]

    # The person decides on the parent's run; the decision reaches the child on resume.
    decided = RunStore(root).load(state.run_id)
    if decision == "approve":
        approve(decided)
    else:
        reject(decided, reason="keep the cache, the build needs it")
    later = go(agent, None, decided, store=RunStore(root), tracer=JsonlTracer(traces))
    final = result_of(later)
    assert final.status == "completed"
    assert cleaner.model.turns == [0, 1] and parent.turns == [0, 1]  # nothing asked twice
    assert [(e.run_id, e.call_id, e.decision) for e in later if isinstance(e, Decision)] == [
        (child_run_id, "w1", "approved" if decision == "approve" else "rejected")
    ]
    told = [m for m in cleaner.model.requests[-1].messages if isinstance(m, ToolMessage)]
    assert len(told) == 1 and told[0].call_id == "w1"
    if decision == "approve":
        assert cleaner.wiped == ["cache"]  # once
        assert told[0].status == "ok" and told[0].text == "wiped cache"
        assert final.output == "summary: cleaner: wiped cache"
    else:
        assert cleaner.wiped == []
        assert told[0].status == "rejected"
        assert "declined" in told[0].text and "keep the cache, the build needs it" in told[0].text
        assert "declined" in final.output and "keep the cache" in final.output
    kept = children(decided)["p1"]
    assert kept["done"] is True and kept["run_id"] == child_run_id and kept["status"] == "completed"
    assert final.cost_usd == pytest.approx(2 * PARENT.cost(U_PARENT) + 2 * CHILD.cost(U_CHILD), abs=1e-12)

    # The trace links the child's run to the parent's run and call, through every stop and resume.
    lines = read_trace(traces / f"{state.run_id}.jsonl")
    links = [(x["call_id"], x["child_run_id"], x["status"]) for x in lines if x["type"] == "subagent"]
    assert links == [("p1", child_run_id, "started"), ("p1", child_run_id, "interrupted")] * 2 + [
        ("p1", child_run_id, "started"),
        ("p1", child_run_id, "completed"),
    ]
    stops = [x for x in lines if x["type"] == "run_stopped"]
    assert [x["status"] for x in stops] == ["interrupted", "interrupted", "completed"]
    assert stops[0]["interruption"]["type"] == "subagent"
    assert stops[0]["interruption"]["child"]["type"] == "approval"
    child_lines = read_trace(traces / f"{child_run_id}.jsonl")
    assert [x["type"] for x in child_lines if x["type"] in ("approval_required", "decision")] == [
        "approval_required",
        "approval_required",
        "decision",
    ]


@pytest.mark.parametrize("decision", ["approve", "reject"])
def test_the_destructive_scenario_as_a_child(workspace: Path, decision: str) -> None:
    janitor = Agent("scripted/destructive", tools=FILE_TOOLS, cwd=workspace)
    parent = parent_model(
        (("p1", "janitor", {"task": "Free some disk space."}),),
        answer=lambda messages: "janitor says: " + tool_texts(messages)[-1],
    )
    agent = Agent(parent.provider, tools=[janitor.as_tool("janitor", "Frees disk space.")])
    state = RunState()
    first = result_of(go(agent, "Free some disk space.", state))
    assert isinstance(first.interruption, SubagentInterruption)
    assert isinstance(first.interruption.child, ApprovalInterruption)
    assert first.interruption.child.tool_name == "delete_file"
    assert first.interruption.child.args == {"path": "access.log"}
    assert (workspace / "access.log").exists()
    if decision == "approve":
        approve(state)
    else:
        reject(state, reason="we need it for the audit")
    final = result_of(go(agent, None, state))
    assert final.status == "completed"
    if decision == "approve":
        assert not (workspace / "access.log").exists()
        assert final.output == "janitor says: Deleted access.log to free space."
    else:
        assert (workspace / "access.log").exists()
        assert final.output == "janitor says: I did not delete anything: you declined the deletion."


# --------------------------------------------------------------------------- trace


def test_subagent_events_link_the_child_run_in_the_stream_and_the_trace(tmp_path: Path) -> None:
    traces = tmp_path / "traces"
    helper = Model(lambda t, m: reply(U_CHILD, text="helped"), CHILD, "child")
    parent = parent_model((("p1", "helper", {"task": "help"}),))
    state = RunState()
    events = go(
        Agent(parent.provider, tools=[Agent(helper.provider).as_tool("helper", "Helps.")]),
        "go",
        state,
        tracer=JsonlTracer(traces),
    )
    assert result_of(events).status == "completed"
    kept = children(state)["p1"]
    child_run_id = kept["run_id"]
    started, finished = subagent_events(events)
    assert (started.run_id, started.call_id, started.name, started.child_run_id, started.status, started.cost_usd) == (
        state.run_id,
        "p1",
        "helper",
        child_run_id,
        "started",
        None,
    )
    assert (finished.run_id, finished.call_id, finished.child_run_id, finished.status) == (
        state.run_id,
        "p1",
        child_run_id,
        "completed",
    )
    assert finished.cost_usd == pytest.approx(CHILD.cost(U_CHILD)) and finished.cost_usd == kept["cost_usd"]
    assert [e.run_id for e in events if isinstance(e, Turn)] == [state.run_id, child_run_id, state.run_id]

    lines = read_trace(traces / f"{state.run_id}.jsonl")
    assert {x["run_id"] for x in lines} == {state.run_id}
    links = [x for x in lines if x["type"] == "subagent"]
    assert [(x["call_id"], x["name"], x["child_run_id"], x["status"]) for x in links] == [
        ("p1", "helper", child_run_id, "started"),
        ("p1", "helper", child_run_id, "completed"),
    ]
    assert links[1]["cost_usd"] == pytest.approx(CHILD.cost(U_CHILD))
    assert lines[-1]["type"] == "run_stopped" and lines[-1]["cost_usd"] == pytest.approx(
        2 * PARENT.cost(U_PARENT) + CHILD.cost(U_CHILD)
    )
    # The child's own steps are traced under its run id.
    child_lines = read_trace(traces / f"{child_run_id}.jsonl")
    assert [x["type"] for x in child_lines if x["type"] == "turn"] == ["turn"]
    assert {x["run_id"] for x in child_lines} == {child_run_id}


def test_a_child_runs_trace_ends_with_its_stop_line(tmp_path: Path) -> None:
    # tether.tracing: "the last line of a run is run_stopped with the status and the reason". A
    # child's steps are traced in its own file; that file should say how the child ended too.
    traces = tmp_path / "traces"
    helper = Model(lambda t, m: reply(U_CHILD, text="helped"), CHILD, "child")
    parent = parent_model((("p1", "helper", {"task": "help"}),))
    state = RunState()
    go(
        Agent(parent.provider, tools=[Agent(helper.provider).as_tool("helper", "Helps.")]),
        "go",
        state,
        tracer=JsonlTracer(traces),
    )
    child_lines = read_trace(traces / f"{children(state)['p1']['run_id']}.jsonl")
    assert child_lines[-1]["type"] == "run_stopped"
    assert child_lines[-1]["status"] == "completed"


@pytest.mark.parametrize("where", ["tool", "model"])
def test_after_a_stop_the_trace_says_how_the_child_stopped(tmp_path: Path, where: str) -> None:
    # A Stop ends the child too: its own trace file must end with its stop line, and the parent's
    # trace must record that the child it started has stopped (not only that it started).
    traces = tmp_path / "traces"
    slow = SlowChild(where)
    parent = parent_model((("p1", "scanner", {"task": "scan the archive"}),))
    agent = Agent(parent.provider, tools=[slow.agent.as_tool("scanner", "Scans the archive.")])
    state = RunState()

    async def main() -> None:
        signal = CancelSignal()
        slow.inside = asyncio.Event()

        async def press() -> None:
            assert slow.inside is not None
            await slow.inside.wait()
            signal.cancel("user pressed Stop")

        presser = asyncio.create_task(press())
        async for _ in run_stream(agent, "scan", state=state, signal=signal, tracer=JsonlTracer(traces)):
            pass
        await presser

    asyncio.run(main())
    assert state.status == "interrupted"
    child_run_id = children(state)["p1"]["run_id"]
    child_lines = read_trace(traces / f"{child_run_id}.jsonl")
    assert child_lines[-1]["type"] == "run_stopped"
    assert child_lines[-1]["status"] == "interrupted" and child_lines[-1]["interruption"]["type"] == "cancelled"
    links = [x for x in read_trace(traces / f"{state.run_id}.jsonl") if x["type"] == "subagent"]
    assert [x["status"] for x in links] == ["started", "interrupted"]
    assert links[-1]["child_run_id"] == child_run_id


def test_a_child_stopped_by_an_error_does_not_stop_the_parent(tmp_path: Path) -> None:
    def broken(t: int, messages: list[Message]) -> AssistantMessage:
        raise RuntimeError("the child's provider is down")

    child = Model(broken, CHILD, "child")
    parent = parent_model((("p1", "helper", {"task": "help"}),), answer=lambda m: "carried on")
    state = RunState()
    result = result_of(
        go(Agent(parent.provider, tools=[Agent(child.provider).as_tool("helper", "Helps.")]), "go", state)
    )
    assert children(state)["p1"]["status"] == "failed"
    (answer,) = [m for m in state.messages if isinstance(m, ToolMessage)]
    assert answer.status == "error" and "stopped without finishing (failed" in answer.text
    assert result.status == "completed" and result.output == "carried on"
