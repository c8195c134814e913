"""Attacks on parallel tool batches and on answers cut off by the output limit (session 15).

Each test names what a user saw before its fix; all run in process against ``FunctionModel``."""

from __future__ import annotations

from typing import Any

from tests.conftest import assert_pairing
from tether import Agent, RunState, run_sync, tool
from tether.harness.agent import Stop
from tether.harness.middleware import Middleware
from tether.messages import ToolCallPart, ToolMessage
from tether.providers.scripted import Reply
from tether.testing import FunctionModel


def _results(state: RunState) -> dict[str, ToolMessage]:
    return {m.call_id: m for m in state.messages if isinstance(m, ToolMessage)}


# -- a policy that ends the run at one call of a batch ----------------------------------------------


class _NoSpam(Middleware):
    """Ends the run at the call that would send message 2."""

    async def before_tool_call(self, ctx: Any, call: ToolCallPart, args: dict[str, Any]) -> Stop | None:
        return Stop("failed", "message 2 is spam: the run stops") if args.get("n") == 2 else None


def test_a_policy_that_ends_the_run_at_a_call_of_a_batch_lets_no_later_call_of_it_run() -> None:
    """Before: in a batch of parallel sends, a policy that ended the run at the second call still
    let the third one run (message 3 was sent after the run was told to stop); one by one, it
    never ran. Now it does not run either, and its result says why."""
    sent: list[int] = []

    @tool(parallel=True)
    async def send(n: int) -> str:
        """Send message n."""
        sent.append(n)
        return f"sent {n}"

    def model(messages: list[Any], request: Any) -> Reply | str:
        if any(isinstance(m, ToolMessage) for m in messages):
            return "done"
        return Reply(calls=tuple((f"c{i}", "send", {"n": i}) for i in (1, 2, 3)))

    state = RunState()
    result = run_sync(Agent(FunctionModel(model), tools=[send], middleware=[_NoSpam()]), "send three", state=state)
    assert (result.status, result.reason) == ("failed", "message 2 is spam: the run stops")
    assert sent == [1]
    results = _results(state)
    assert [(r.call_id, r.status) for r in results.values()] == [("c1", "ok"), ("c2", "error"), ("c3", "skipped")]
    assert (
        results["c3"].text
        == "Not run: the run stopped at an earlier call of this reply (message 2 is spam: the run stops)."
    )
    assert_pairing(state.messages)
