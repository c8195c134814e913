"""``tool_start`` says a tool started, after every middleware let the call through.

It was emitted before the middleware chain: a call the ``tool_args`` guardrail refused was
announced to the caller as running, its arguments with it (a system prompt the model was told to
pass to a search, say), and a call a limit answered without running read as run. The event now
comes as the tool itself starts; a call answered by a middleware has its verdict and its result.
"""

from __future__ import annotations

from typing import Any

from tests.guardrails.common import collect, result_of, verdicts
from tether import Agent, RunState, tool
from tether.guardrails import Guardrail, Rule, RuleClassifier, Thresholds
from tether.harness.middleware import ToolCallLimitPerTurn
from tether.providers.scripted import Reply
from tether.testing import FunctionModel

SECRET = "INTERNAL-PROMPT-7731"
ran: list[str] = []


@tool(read_only=True)
def search(query: str) -> str:
    """Search the catalogue."""
    ran.append(query)
    return f"results for {query}"


def model(queries: list[str]) -> Any:
    def reply(messages: Any, request: Any) -> Any:
        if any(m.role == "tool" for m in messages):
            return "Done."
        return Reply(calls=tuple((f"c{i}", "search", {"query": q}) for i, q in enumerate(queries)))

    return reply


def test_a_call_the_tool_args_guardrail_refuses_is_never_announced_with_its_arguments() -> None:
    ran.clear()
    guard = Guardrail(
        RuleClassifier([Rule(SECRET, 0.0, "leak", "the system prompt's marker")]),
        stages=("tool_args",),
        thresholds=Thresholds(block=0.5),
    )
    agent = Agent(FunctionModel(model([f"valves {SECRET}", "seal kits"])), tools=[search], middleware=[guard])

    events = collect(agent, "find seals", state=RunState())

    assert result_of(events).status == "completed"
    assert ran == ["seal kits"]  # the refused call did not run
    starts = [e for e in events if e.type == "tool_start"]
    assert [e.call_id for e in starts] == ["c1"] and all(SECRET not in e.args for e in starts)
    results = {e.call_id: e for e in events if e.type == "tool_result"}
    assert not results["c0"].ok and results["c1"].ok
    (refused,) = [v for v in verdicts(events, "tool_args") if v.decision == "block"]
    assert events.index(refused) < events.index(results["c0"])


def test_a_call_a_limit_answers_without_running_is_not_announced_as_running() -> None:
    ran.clear()
    agent = Agent(FunctionModel(model(["a", "b", "c"])), tools=[search], middleware=[ToolCallLimitPerTurn(limit=1)])

    events = collect(agent, "search three times", state=RunState())

    assert ran == ["a"]
    assert [e.call_id for e in events if e.type == "tool_start"] == ["c0"]
    assert [e.call_id for e in events if e.type == "tool_result"] == ["c0", "c1", "c2"]
    first = next(e for e in events if e.type == "tool_start")
    assert events.index(first) < next(i for i, e in enumerate(events) if e.type == "tool_result")
