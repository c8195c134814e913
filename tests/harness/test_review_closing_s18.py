"""Closing review of session 18 (the harness): each test fails before its fix."""

from __future__ import annotations

from typing import Any

from tests.harness.test_attack_limits_round2 import Snapshots, deleting_child
from tether import Agent, RunState, approve, run_sync
from tether.harness.subagent import children
from tether.messages import Message, ToolMessage
from tether.providers.base import ModelRequest
from tether.status import SubagentInterruption
from tether.testing import FunctionModel, Reply


def _childs_tokens_after_a_kill(lost_answer_tokens: int) -> tuple[int, int]:
    """A parent (token limit 60,000) killed while its sub-agent had a request out whose answer may
    take ``lost_answer_tokens``, resumed, and resumed again once the sub-agent's question is
    approved: the sub-agent's token limit then, and what it lost."""
    ran: list[str] = []

    def lead(messages: list[Message], request: ModelRequest) -> Reply | str:
        if any(isinstance(m, ToolMessage) for m in messages):
            return "lead done"
        return Reply(calls=(("c1", "cleaner", {"task": "a.log"}),))

    cleaner = deleting_child(ran).as_tool("cleaner", "Cleans.")
    cleaner.parallel = True  # its limits are kept in the parent's state (what calls beside it may not count on)
    parent = Agent(FunctionModel(lead), tools=[cleaner], max_run_tokens=60_000)
    store = Snapshots()
    run_sync(parent, "clean", state=RunState(), store=store)

    def child_in_flight(s: dict[str, Any]) -> Any:
        return (s["ext"].get("subagents", {}).get("children", {}).get("c1") or {}).get("call_in_flight")

    lost = next(s for s in store.saved if child_in_flight(s))
    child_in_flight(lost)["max_tokens"] = lost_answer_tokens
    state = RunState.model_validate(lost)  # as loaded after the kill
    result = run_sync(parent, state=state)
    assert isinstance(result.interruption, SubagentInterruption)  # the child asks for its approval
    approve(state)
    again = run_sync(parent, state=state, store=store)  # the child's limit is set again as it goes on
    assert again.status == "completed" and ran == ["a.log"], again.reason
    last = next(s for s in reversed(store.saved) if "c1" in s["ext"]["subagents"].get("given", {}))
    return int(last["ext"]["subagents"]["given"]["c1"]["tokens"]), int(children(state)["c1"]["tokens_unknown"])


def test_a_sub_agents_request_lost_in_a_kill_is_not_taken_from_its_share_twice() -> None:
    """Was: the worst case of a sub-agent's request lost in a kill was counted in the parent's
    tokens (what its share is cut from) and in the child's own, but only the child's usage was given
    back to its share on resume (its dollars are given back whole, lost requests included): its
    token limit shrank by that request a second time, so a larger lost request left it less to use
    of what the parent's limit still left."""
    small, lost_small = _childs_tokens_after_a_kill(500)
    large, lost_large = _childs_tokens_after_a_kill(3500)
    assert lost_large - lost_small == 3000  # the child counts the larger loss...
    assert large == small  # ...and its limit holds it once: what it may still use shrinks by it, once
