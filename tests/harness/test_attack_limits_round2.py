"""Run limits attacked from outside (a helper's second round): budgets and turns with sub-agents
running side by side, Stop while they run and while a sync tool blocks, resumes, approvals, bad
calls by the hundred and typed answers that never come right.

Models are FunctionModels; costs are checked against sums computed here from each reply's usage
and the price, not against tether's own totals.
"""

from __future__ import annotations

import json
import threading
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import assert_pairing
from tether import Agent, CancelSignal, RunState, RunStore, approve, reject, run_sync, tool
from tether.errors import UserError
from tether.harness.subagent import children
from tether.messages import AssistantMessage, Message, ToolCallPart, ToolMessage, UserMessage, text_of
from tether.providers.base import ModelRequest
from tether.status import ApprovalInterruption, OutcomeUnknownInterruption, SubagentInterruption
from tether.testing import FunctionModel, Reply
from tether.usage import Price

PRICE = Price(input=2.0, output=12.0)  # FunctionModel's default


def own_cost(messages: list[Message]) -> float:
    """What a run's own replies cost at PRICE, from their usage."""
    return sum(PRICE.cost(m.usage) for m in messages if isinstance(m, AssistantMessage) and m.usage is not None)


def results(state: RunState) -> list[ToolMessage]:
    return [m for m in state.messages if isinstance(m, ToolMessage)]


def fan_out(n: int, answer: str = "done") -> FunctionModel:
    """A parent that hands the same task to ``n`` workers in one reply, then answers."""

    def lead(messages: list[Message], request: ModelRequest) -> Reply | str:
        if any(isinstance(m, ToolMessage) for m in messages):
            return answer
        return Reply(calls=tuple((f"c{i}", "worker", {"task": "spend"}) for i in range(n)))

    return FunctionModel(lead)


def side_by_side(child: Agent) -> Any:
    """``child`` as a tool whose calls may run at the same time (a tool class's ``parallel``)."""
    worker = child.as_tool("worker", "Does a task.")
    worker.parallel = True
    return worker


# --- budget and turns: sub-agents side by side ------------------------------------------------


def test_subagents_running_side_by_side_never_take_the_parent_past_its_budget() -> None:
    """Each of four children would spend all it is given: together they must still fit the
    parent's budget (before: each was given what the parent had left, and the run ended at $0.07
    of $0.05)."""

    def greedy(messages: list[Message], request: ModelRequest) -> str:
        return "x " * (request.max_tokens - 8)  # as long as the call is allowed

    state = RunState()
    parent = Agent(fan_out(4), tools=[side_by_side(Agent(FunctionModel(greedy)))], max_budget_usd=0.05)
    result = run_sync(parent, "go", state=state)
    assert result.cost_usd is not None and result.cost_usd <= 0.05
    kids = children(state)
    assert kids, "at least one child ran"
    assert result.cost_usd == pytest.approx(own_cost(state.messages) + sum(c["cost_usd"] for c in kids.values()))
    assert len(results(state)) == 4  # every call has its one result: ran, or refused in words
    refused = [m.text for m in results(state) if m.text.startswith("Not run")]
    assert all("budget" in text for text in refused)
    assert_pairing(state.messages)


def test_subagents_running_side_by_side_never_take_the_tree_past_max_turns() -> None:
    """Four children that would loop forever, side by side under a parent with max_turns=10: the
    whole tree makes at most 10 turns (before: 37), the last of them the parent's answer."""
    asked = 0

    @tool(read_only=True, parallel=False)
    def tick(n: int) -> str:
        """A step of work."""
        return f"tick {n}"

    def forever(messages: list[Message], request: ModelRequest) -> Reply:
        nonlocal asked
        asked += 1
        return Reply(calls=((f"t{len(messages)}", "tick", {"n": len(messages)}),))

    state = RunState()
    parent = Agent(fan_out(4), tools=[side_by_side(Agent(FunctionModel(forever), tools=[tick]))], max_turns=10)
    result = run_sync(parent, "go", state=state)
    assert result.status == "completed" and result.output == "done"
    assert state.turns + state.delegated_turns <= 10
    assert asked == state.delegated_turns  # every child turn is counted, once
    assert state.delegated_turns == sum(c["turns"] for c in children(state).values())
    assert len(results(state)) == 4


def test_stop_while_subagents_run_side_by_side_resumes_each_child_and_pays_nothing_twice(tmp_path: Path) -> None:
    """Stop fires while three children wait in a slow tool; the resume finishes each child where it
    stopped: no child turn asked twice, the parent's cost is its turns plus the children's."""
    signal = CancelSignal()
    asked: list[str] = []  # the task of each child model call
    waiting = 0

    @tool(read_only=True)
    async def slow(ctx: Any) -> str:
        """Wait a while."""
        nonlocal waiting
        waiting += 1
        if waiting == 3:
            signal.cancel("user pressed Stop")
        await ctx.signal.sleep(30)
        return "slow done"

    def child(messages: list[Message], request: ModelRequest) -> Reply | str:
        task = text_of([messages[0]])
        asked.append(task)
        if any(isinstance(m, ToolMessage) for m in messages):
            return f"finished {task}"
        return Reply(calls=(("s1", "slow", {}),))

    def lead(messages: list[Message], request: ModelRequest) -> Reply | str:
        if any(isinstance(m, ToolMessage) for m in messages):
            return "all done"
        return Reply(calls=tuple((f"c{i}", "worker", {"task": f"task {i}"}) for i in range(3)))

    store = RunStore(tmp_path / "runs", fsync=False)
    parent = Agent(FunctionModel(lead), tools=[side_by_side(Agent(FunctionModel(child), tools=[slow]))])
    parent = replace(parent, max_budget_usd=1.0)
    state = RunState()
    first = run_sync(parent, "go", state=state, store=store, signal=signal)
    assert first.status == "interrupted" and first.interruption is not None
    assert first.interruption.type == "cancelled"
    assert sorted(asked) == ["task 0", "task 1", "task 2"]

    @tool(read_only=True)
    async def quick() -> str:
        """Wait a while."""
        return "slow done"

    quick.name = "slow"
    again_parent = replace(parent, tools=[side_by_side(Agent(FunctionModel(child), tools=[quick]))])
    again = run_sync(again_parent, state=store.load(state.run_id), store=store)
    assert again.status == "completed" and again.text == "all done"
    assert sorted(asked) == [
        "task 0",
        "task 0",
        "task 1",
        "task 1",
        "task 2",
        "task 2",
    ]  # a turn before Stop, one after: none asked again
    saved = store.load(state.run_id)
    kids = children(saved)
    assert all(c["done"] and c["status"] == "completed" for c in kids.values())
    assert again.cost_usd == pytest.approx(own_cost(saved.messages) + sum(c["cost_usd"] for c in kids.values()))
    assert_pairing(saved.messages)


def test_a_resume_with_a_larger_budget_counts_every_turn_once(tmp_path: Path) -> None:
    """budget_exceeded with sub-agents, then resumed with a larger budget: the cost reported is
    the parent's turns plus each child's, nothing counted twice across the resume."""

    def child(messages: list[Message], request: ModelRequest) -> str:
        return "x " * 3000

    def lead(messages: list[Message], request: ModelRequest) -> Reply | str:
        done = sum(isinstance(m, ToolMessage) and m.status == "ok" for m in messages)
        if done >= 3:
            return "done"
        return Reply(calls=((f"c{len(messages)}", "worker", {"task": "spend"}),))

    store = RunStore(tmp_path / "runs", fsync=False)
    parent = Agent(FunctionModel(lead), tools=[Agent(FunctionModel(child)).as_tool("worker", "Spends.")])
    first = run_sync(replace(parent, max_budget_usd=0.06), "go", store=store)
    assert first.status == "budget_exceeded" and first.cost_usd is not None and first.cost_usd <= 0.06
    store_before = store.load(first.run_id)
    again = run_sync(replace(parent, max_budget_usd=1.0), state=store.load(first.run_id), store=store)
    assert again.status == "completed"
    saved = store.load(first.run_id)
    kids = children(saved)
    assert len(kids) == 3 and len(children(store_before)) < 3  # a child ran after the resume
    assert again.cost_usd == pytest.approx(own_cost(saved.messages) + sum(c["cost_usd"] for c in kids.values()))


def test_min_output_tokens_zero_never_sends_a_prompt_the_budget_cannot_pay_for() -> None:
    """min_output_tokens=0 ("never stop early"): a call whose prompt alone costs more than what is
    left must not be made (before: it went out with max_tokens=0, and a run with a $0.01 budget
    that reads long pages ended at $2.20, stopped only by max_turns)."""

    @tool(read_only=True)
    def page(n: int) -> str:
        """Read a long page."""
        return "word " * 2000

    def reader(messages: list[Message], request: ModelRequest) -> Reply:
        return Reply(calls=((f"c{len(messages)}", "page", {"n": len(messages)}),))

    state = RunState()
    agent = Agent(FunctionModel(reader), tools=[page], max_budget_usd=0.01, min_output_tokens=0, max_turns=30)
    result = run_sync(agent, "read everything", state=state)
    assert result.status == "budget_exceeded"
    assert result.cost_usd is not None and result.cost_usd <= 0.01
    assert result.cost_usd == pytest.approx(own_cost(state.messages))


# --- Stop and a sync tool that cannot hear it ---------------------------------------------------


def test_run_sync_returns_at_stop_while_a_blocking_sync_tool_is_left_behind() -> None:
    """A sync tool blocks in its thread and cannot hear Stop. run_sync must return without waiting
    for it (before: asyncio.run's shutdown waited for the default executor's thread, so Stop
    waited for the tool however long it blocked)."""
    release = threading.Event()
    started = threading.Event()
    finished = threading.Event()

    @tool(read_only=True)
    def block() -> str:
        """Block until released."""
        started.set()
        release.wait(10)  # a hang guard, not a timing
        finished.set()
        return "unblocked"

    def model(messages: list[Message], request: ModelRequest) -> Reply | str:
        if any(isinstance(m, ToolMessage) for m in messages):
            return "ok"
        return Reply(calls=(("c1", "block", {}),))

    signal = CancelSignal()

    def stop_when_started() -> None:
        if started.wait(10):
            signal.cancel_threadsafe("user pressed Stop")

    threading.Thread(target=stop_when_started, daemon=True).start()
    try:
        result = run_sync(Agent(FunctionModel(model), tools=[block]), "go", signal=signal)
        assert not finished.is_set(), "run_sync waited for the blocked tool"
    finally:
        release.set()
    assert result.status == "interrupted" and "user pressed Stop" in (result.reason or "")


def test_blocking_side_effects_stopped_mid_batch_are_asked_about_never_run_again(tmp_path: Path) -> None:
    """Three blocking sync posts in one batch, Stop while they block: the run is saved resumable,
    and the resume asks a person about each (outcome unknown) instead of posting twice."""
    release = threading.Event()
    posted: list[int] = []
    lock = threading.Lock()
    signal = CancelSignal()

    @tool(parallel=True)
    def post(n: int) -> str:
        """Post a message."""
        with lock:
            posted.append(n)
            if len(posted) == 3:
                signal.cancel_threadsafe("user pressed Stop")
        release.wait(10)
        return f"posted {n}"

    def model(messages: list[Message], request: ModelRequest) -> Reply | str:
        if any(isinstance(m, ToolMessage) for m in messages):
            return "ok"
        return Reply(calls=tuple((f"c{i}", "post", {"n": i}) for i in range(3)))

    store = RunStore(tmp_path / "runs", fsync=False)
    agent = Agent(FunctionModel(model), tools=[post])
    try:
        first = run_sync(agent, "go", store=store, signal=signal)
    finally:
        release.set()
    assert first.status == "interrupted" and first.interruption is not None
    assert first.interruption.type == "cancelled"
    state = store.load(first.run_id)
    again = run_sync(agent, state=state, store=store)
    waiting = again.interruption
    assert isinstance(waiting, OutcomeUnknownInterruption)
    assert [waiting.call_id, *(w.call_id for w in waiting.together)] == ["c0", "c1", "c2"]
    assert sorted(posted) == [0, 1, 2]  # each ran once
    for call_id in ("c0", "c1", "c2"):
        reject(state, call_id, reason="it was posted")
    done = run_sync(agent, state=state, store=store)
    assert done.status == "completed" and sorted(posted) == [0, 1, 2]
    assert_pairing(state.messages)


# --- max_turns and bad calls ----------------------------------------------------------------


def test_max_turns_one_runs_the_calls_then_stops_and_a_resume_does_not_run_them_again(tmp_path: Path) -> None:
    ran: list[int] = []

    @tool
    def write(n: int) -> str:
        """Write a record."""
        ran.append(n)
        return f"wrote {n}"

    def model(messages: list[Message], request: ModelRequest) -> Reply | str:
        if any(isinstance(m, ToolMessage) for m in messages):
            return "written"
        return Reply(calls=(("c1", "write", {"n": 1}), ("c2", "write", {"n": 2})))

    store = RunStore(tmp_path / "runs", fsync=False)
    agent = Agent(FunctionModel(model), tools=[write], max_turns=1)
    first = run_sync(agent, "go", store=store)
    assert first.status == "max_turns_exceeded" and first.turns == 1 and ran == [1, 2]
    assert first.interruption is not None and first.interruption.type == "max_turns"
    assert "turn limit (1)" in (first.reason or "")
    again = run_sync(replace(agent, max_turns=2), state=store.load(first.run_id), store=store)
    assert again.status == "completed" and again.turns == 2 and ran == [1, 2]


def test_five_hundred_bad_and_good_calls_in_one_reply_each_get_one_result_that_says_what_to_fix() -> None:
    @tool(read_only=True)
    def lookup(n: int) -> str:
        """Look up a number."""
        return f"value {n}"

    calls: list[tuple[str, str, str]] = []
    for i in range(500):
        kind = i % 5
        if kind == 0:
            calls.append((f"c{i}", "lookup", json.dumps({"n": i})))
        elif kind == 1:
            calls.append((f"c{i}", "no_such_tool", "{}"))
        elif kind == 2:
            calls.append((f"c{i}", "lookup", '{"n": 1,'))  # not JSON
        elif kind == 3:
            calls.append((f"c{i}", "lookup", json.dumps({"n": "many"})))  # the wrong type
        else:
            calls.append((f"c{i}", "lookup", json.dumps({"m": 1})))  # a missing argument

    def model(messages: list[Message], request: ModelRequest) -> AssistantMessage | str:
        if any(isinstance(m, ToolMessage) for m in messages):
            return "checked"
        parts = tuple(ToolCallPart(id=cid, name=name, arguments=args) for cid, name, args in calls)
        return AssistantMessage(content=parts, finish_reason="tool_calls")

    state = RunState()
    result = run_sync(Agent(FunctionModel(model), tools=[lookup]), "go", state=state)
    assert result.status == "completed" and result.text == "checked"
    got = results(state)
    assert [m.call_id for m in got] == [c[0] for c in calls]  # one each, in call order
    for i, m in enumerate(got):
        kind = i % 5
        if kind == 0:
            assert m.status == "ok" and m.text == f"value {i}"
        elif kind == 1:
            assert m.is_error and "no tool named 'no_such_tool'" in m.text and "lookup" in m.text
        else:
            assert m.is_error and ("Fix" in m.text or "JSON" in m.text), m.text
    assert_pairing(state.messages)


# --- approvals ----------------------------------------------------------------------------------


def deleting_agent() -> tuple[Agent, list[str]]:
    """An agent whose model asks once to delete a.log (a call that needs approval), and the paths
    the tool deleted."""
    ran: list[str] = []

    @tool(needs_approval=True)
    def delete(path: str) -> str:
        """Delete a file."""
        ran.append(path)
        return f"deleted {path}"

    def model(messages: list[Message], request: ModelRequest) -> Reply | str:
        if any(isinstance(m, ToolMessage) for m in messages):
            return "deleted"
        return Reply(calls=(("c1", "delete", {"path": "a.log"}),))

    return Agent(FunctionModel(model), tools=[delete]), ran


def test_approvals_refuse_the_wrong_call_and_a_second_decision_after_the_call_ran() -> None:
    agent, ran = deleting_agent()
    state = RunState()
    first = run_sync(agent, "clean up", state=state)
    assert isinstance(first.interruption, ApprovalInterruption)
    with pytest.raises(UserError, match="not waiting for a decision"):
        approve(state, "c9")
    with pytest.raises(UserError, match="not waiting for a decision"):
        reject(state, "c9", reason="no")
    approve(state)
    approve(state)  # twice: still one run of the call
    assert run_sync(agent, state=state).status == "completed"
    assert ran == ["a.log"]
    with pytest.raises(UserError):
        approve(state, "c1")
    with pytest.raises(UserError, match="already ended"):
        run_sync(agent, state=state)
    assert ran == ["a.log"]


def test_an_approval_does_not_cover_arguments_changed_after_it() -> None:
    """The approval binds to the arguments' hash: a call whose arguments changed after the person
    approved (a stale approval) stops for a decision again and does not run."""
    agent, ran = deleting_agent()
    state = RunState()
    run_sync(agent, "clean up", state=state)
    approve(state)
    last = state.messages[-1]
    assert isinstance(last, AssistantMessage)
    changed = last.tool_calls[0].model_copy(update={"arguments": json.dumps({"path": "/etc/passwd"})})
    state.messages[-1] = last.model_copy(update={"content": (changed,)})
    again = run_sync(agent, state=state)
    assert again.status == "interrupted" and isinstance(again.interruption, ApprovalInterruption)
    assert again.interruption.args == {"path": "/etc/passwd"}
    assert ran == []


# --- typed answers ------------------------------------------------------------------------------


def test_a_schema_the_model_cannot_satisfy_fails_after_the_retries_saying_why() -> None:
    schema = {
        "type": "object",
        "properties": {"code": {"type": "string", "minLength": 5, "maxLength": 2}},
        "required": ["code"],
    }
    asked: list[list[Message]] = []

    def model(messages: list[Message], request: ModelRequest) -> str:
        asked.append(messages)
        return json.dumps({"code": "abc"})

    result = run_sync(Agent(FunctionModel(model), output_type=schema, output_retries=3), "give a code")
    assert result.status == "failed" and not result.typed
    assert len(asked) == 4 and result.turns == 4  # the answer, then three corrections
    assert "code" in (result.reason or "")
    corrections = [text_of([m]) for m in asked[-1] if isinstance(m, UserMessage)][1:]
    assert len(corrections) == 3 and all("does not match the required output schema" in t for t in corrections)


def test_a_model_that_never_answers_in_json_fails_within_the_retries_and_the_budget() -> None:
    asked = 0

    def model(messages: list[Message], request: ModelRequest) -> str:
        nonlocal asked
        asked += 1
        return "I think the answer is seven."

    from pydantic import BaseModel

    class Answer(BaseModel):
        value: int

    result = run_sync(
        Agent(FunctionModel(model), output_type=Answer, output_retries=2, max_budget_usd=0.5), "what is it?"
    )
    assert result.status == "failed" and asked == 3
    assert result.cost_usd is not None and result.cost_usd <= 0.5


def test_a_sync_tools_result_and_its_error_still_reach_the_run() -> None:
    """A sync tool runs on a thread of its own now: what it returns, and what it raises, reach the
    run as they did from the loop's executor."""

    @tool(read_only=True)
    def fine(n: int) -> str:
        """Fine."""
        return f"fine {n}"

    @tool(read_only=True)
    def broken() -> str:
        """Broken."""
        raise ValueError("the disk is on fire")

    def model(messages: list[Message], request: ModelRequest) -> Reply | str:
        if any(isinstance(m, ToolMessage) for m in messages):
            return "seen"
        return Reply(calls=(("c1", "fine", {"n": 1}), ("c2", "broken", {})))

    state = RunState()
    result = run_sync(Agent(FunctionModel(model), tools=[fine, broken]), "go", state=state)
    assert result.status == "completed"
    assert results(state)[0].text == "fine 1"
    assert "the disk is on fire" in results(state)[1].text and results(state)[1].is_error


# --- approvals that go through a sub-agent ------------------------------------------------------


def deleting_child(ran: list[str]) -> Agent:
    @tool(needs_approval=True)
    def delete(path: str) -> str:
        """Delete a file."""
        ran.append(path)
        return f"deleted {path}"

    def child(messages: list[Message], request: ModelRequest) -> Reply | str:
        if any(isinstance(m, ToolMessage) for m in messages):
            return "child: " + [m for m in messages if isinstance(m, ToolMessage)][-1].text
        return Reply(calls=(("k1", "delete", {"path": text_of([messages[0]])}),))

    return Agent(FunctionModel(child), tools=[delete])


@pytest.mark.parametrize("decide", ["approve", "reject"])
def test_a_subagents_question_decided_by_the_call_id_it_carries_reaches_the_child(decide: str) -> None:
    """The parent stops with a SubagentInterruption whose call_id is the parent's call. Deciding by
    that id is deciding that question (before: approve(state, "c1") was taken as an approval of the
    sub-agent call itself, which needs none; the child never heard it and the run stopped for the
    same question again, forever)."""
    ran: list[str] = []

    def lead(messages: list[Message], request: ModelRequest) -> Reply | str:
        if any(isinstance(m, ToolMessage) for m in messages):
            return "lead: " + [m for m in messages if isinstance(m, ToolMessage)][-1].text
        return Reply(calls=(("c1", "cleaner", {"task": "a.log"}),))

    parent = Agent(FunctionModel(lead), tools=[deleting_child(ran).as_tool("cleaner", "Cleans.")])
    state = RunState()
    first = run_sync(parent, "clean", state=state)
    waiting = first.interruption
    assert isinstance(waiting, SubagentInterruption) and waiting.call_id == "c1"
    with pytest.raises(UserError, match="not waiting for a decision"):
        approve(state, "k1")  # the child's own call id is not the parent's to decide
    if decide == "approve":
        approve(state, waiting.call_id)
    else:
        reject(state, waiting.call_id, reason="keep it")
    again = run_sync(parent, state=state)
    assert again.status == "completed", again.reason
    assert ran == (["a.log"] if decide == "approve" else [])
    assert ("deleted a.log" if decide == "approve" else "keep it") in again.text
    assert state.approved == {} and state.rejected == {}  # the decision was the child's, not on the call
    kept = children(state)["c1"]
    assert kept["done"] and kept["status"] == "completed"  # the child heard it and finished


def test_two_children_side_by_side_that_both_ask_are_decided_in_turn_and_each_runs_once() -> None:
    ran: list[str] = []

    def lead(messages: list[Message], request: ModelRequest) -> Reply | str:
        if any(isinstance(m, ToolMessage) for m in messages):
            return "lead: " + " | ".join(m.text for m in messages if isinstance(m, ToolMessage))
        return Reply(calls=(("c1", "worker", {"task": "a.log"}), ("c2", "worker", {"task": "b.log"})))

    parent = Agent(FunctionModel(lead), tools=[side_by_side(deleting_child(ran))])
    state = RunState()
    result = run_sync(parent, "clean", state=state)
    asked: list[str] = []
    for _ in range(4):  # a hang guard: two questions, then the answer
        if result.status != "interrupted":
            break
        waiting = result.interruption
        assert isinstance(waiting, SubagentInterruption)
        asked.append(waiting.call_id)
        approve(state)
        result = run_sync(parent, state=state)
    assert result.status == "completed"
    assert sorted(asked) == ["c1", "c2"]
    assert sorted(ran) == ["a.log", "b.log"]
    assert "deleted a.log" in result.text and "deleted b.log" in result.text


class Snapshots:
    """A store that keeps a copy of every save: what the disk would hold if the process were
    killed right after it."""

    def __init__(self) -> None:
        self.saved: list[dict[str, Any]] = []

    def save(self, state: RunState, *, rewrite: bool = False, durable: bool = True) -> None:
        self.saved.append(state.model_dump(mode="json"))


def test_a_childs_request_lost_in_a_kill_is_counted_once_across_two_resumes() -> None:
    """The parent is killed while its child's request is out. The resume counts that request's
    worst case once, against the parent's budget too, even when the run stops again (for an
    approval) and is resumed a second time; the cost is the parent's turns plus the child's."""
    ran: list[str] = []
    parent = Agent(
        FunctionModel(
            lambda messages, request: (
                "lead done"
                if any(isinstance(m, ToolMessage) for m in messages)
                else Reply(calls=(("c1", "cleaner", {"task": "a.log"}),))
            )
        ),
        tools=[deleting_child(ran).as_tool("cleaner", "Cleans.")],
        max_budget_usd=1.0,
    )
    store = Snapshots()
    run_sync(parent, "clean", state=RunState(), store=store)
    lost = next(
        s
        for s in store.saved
        if (s["ext"].get("subagents", {}).get("children", {}).get("c1") or {}).get("call_in_flight")
    )
    worst = lost["ext"]["subagents"]["children"]["c1"]["call_in_flight"]["max_cost_usd"]
    assert worst > 0
    state = RunState.model_validate(lost)  # as loaded after the kill
    first = run_sync(parent, state=state)
    assert isinstance(first.interruption, SubagentInterruption)
    assert state.cost_unknown_usd == pytest.approx(worst)
    approve(state)
    again = run_sync(parent, state=state)
    assert again.status == "completed" and ran == ["a.log"]
    assert again.cost_unknown_usd == pytest.approx(worst)  # once, not at each resume
    kept = children(state)["c1"]
    assert kept["cost_unknown_usd"] == pytest.approx(worst)
    assert again.cost_usd == pytest.approx(own_cost(state.messages) + kept["cost_usd"])
