"""A request lost in a crash counts against ``max_run_tokens`` at its worst case, as against the budget."""

from __future__ import annotations

from typing import Any

from tests.harness.test_attack_limits_round2 import Snapshots, deleting_child
from tether import Agent, RunState, approve, run_sync
from tether.harness.state import CallInFlight
from tether.harness.subagent import children
from tether.messages import Message, ToolMessage, UserMessage
from tether.providers.base import ModelRequest
from tether.status import SubagentInterruption
from tether.testing import FunctionModel, Reply


def _crashed(prompt: int, max_tokens: int) -> RunState:
    state = RunState(messages=[UserMessage.text("go")])
    state.call_in_flight = CallInFlight(
        model="function", prompt_tokens=prompt, max_tokens=max_tokens, max_cost_usd=None
    )
    return state


def test_a_request_lost_in_a_crash_counts_its_worst_case_against_the_token_limit() -> None:
    """Was: a request in flight at a kill counted no tokens (its dollars counted their worst case),
    so each kill mid-request could take a run past max_run_tokens by a whole call: a resume planned
    its next call as if nothing had been sent."""
    fm = FunctionModel(lambda m, r: "done")
    r = run_sync(Agent(fm, max_run_tokens=3000), state=_crashed(500, 2400))
    assert r.status == "budget_exceeded" and fm.requests == []  # 2,900 counted: no call fits
    assert r.tokens_unknown == 2900 and r.usage.total_tokens == 0  # kept apart from what providers reported
    assert r.reason is not None and "2,900 more counted, the worst case, for requests lost in a crash" in r.reason

    fm = FunctionModel(lambda m, r: "done")
    r = run_sync(Agent(fm, max_run_tokens=8000), state=_crashed(500, 2400))
    (request,) = fm.requests
    # 8,000 less the lost 2,900 less this call's prompt: its max_tokens is what is left of 5,100.
    assert request.max_tokens is not None and request.max_tokens < 5100
    assert r.status == "completed" and r.usage.total_tokens + r.tokens_unknown <= 8000


def test_a_childs_request_lost_in_a_kill_counts_against_the_parents_token_limit_once() -> None:
    """Was: the worst case of a child's request lost in a kill reached neither the child's share nor
    the parent's count; now it is counted once in the parent, across two resumes."""
    ran: list[str] = []

    def lead(messages: list[Message], request: ModelRequest) -> Reply | str:
        if any(isinstance(m, ToolMessage) for m in messages):
            return "lead done"
        return Reply(calls=(("c1", "cleaner", {"task": "a.log"}),))

    parent = Agent(
        FunctionModel(lead), tools=[deleting_child(ran).as_tool("cleaner", "Cleans.")], max_run_tokens=60_000
    )
    store = Snapshots()
    run_sync(parent, "clean", state=RunState(), store=store)

    def child_in_flight(s: dict[str, Any]) -> Any:
        return (s["ext"].get("subagents", {}).get("children", {}).get("c1") or {}).get("call_in_flight")

    lost = next(s for s in store.saved if child_in_flight(s))
    worst = child_in_flight(lost)["prompt_tokens"] + child_in_flight(lost)["max_tokens"]
    state = RunState.model_validate(lost)  # as loaded after the kill
    first = run_sync(parent, state=state)
    assert isinstance(first.interruption, SubagentInterruption)
    assert state.tokens_unknown == worst
    approve(state)
    again = run_sync(parent, state=state)
    assert again.status == "completed" and ran == ["a.log"]
    assert again.tokens_unknown == worst  # once, not at each resume
    assert children(state)["c1"]["tokens_unknown"] == worst
