"""Issue 27, item 8: delegation had no depth limit (an agent given itself as a tool recursed 89
levels in 15 s and kept going), and a parent's ``max_turns`` bounded only its own turns (with
``max_turns=2`` the children made 100 model calls). Now a depth limit is checked before a child
starts, and a run's ``max_turns`` (as its budget) bounds the whole tree below it."""

from __future__ import annotations

from typing import Any

from tether import Agent, RunState, run_sync
from tether.harness.subagent import DEFAULT_MAX_DEPTH, depth_of
from tether.messages import ToolMessage
from tether.testing import FunctionModel, call

RUNAWAY = 60  # a recursion that is not stopped makes more calls than this: the model refuses then


def recursive(max_turns: int | None, **as_tool: Any) -> tuple[Agent, list[str]]:
    """An agent whose only tool is itself: it delegates on its first turn, answers after. The
    list grows by the tool results each call read (one entry per model call)."""
    calls: list[str] = []

    def fn(messages: list[Any], request: Any) -> Any:
        calls.append("".join(m.text for m in messages if isinstance(m, ToolMessage)))
        if len(calls) > RUNAWAY:
            raise RuntimeError("runaway delegation")
        if any(m.role == "tool" for m in messages):
            return "done"
        return call(f"d{len(calls)}", "delegate", {"task": "do it"})

    agent = Agent(FunctionModel(fn), max_turns=max_turns)
    agent.tools = [agent.as_tool("delegate", "Hands the task to a helper.", **as_tool)]
    return agent, calls


def test_an_agent_given_itself_stops_delegating_at_the_depth_limit() -> None:
    agent, calls = recursive(None)
    state = RunState()
    r = run_sync(agent, "go", state=state)
    assert r.status == "completed" and r.output == "done"
    levels = DEFAULT_MAX_DEPTH + 1  # the first run and four below it, two model calls each
    assert len(calls) == 2 * levels
    (refused,) = [read for read in calls if "levels of delegation deep" in read]  # read once, by the deepest
    assert f"would be {levels} levels of delegation deep, past the limit of {DEFAULT_MAX_DEPTH}" in refused


def test_the_depth_limit_is_a_setting() -> None:
    agent, calls = recursive(None, max_depth=1)
    r = run_sync(agent, "go")
    assert r.status == "completed" and len(calls) == 4  # the first run and one child


def test_a_parents_max_turns_bounds_the_turns_of_the_whole_tree() -> None:
    agent, calls = recursive(3, max_depth=50)
    state = RunState()
    r = run_sync(agent, "go", state=state)
    # Not 3 for the parent plus as many as the children liked: the child is given the one turn
    # left beside the parent's last, which the parent keeps for its answer.
    assert len(calls) == 3
    assert r.status == "completed" and r.output == "done"
    assert state.delegated_turns == 1 and r.turns == 2


def test_turns_a_child_made_are_charged_once_across_a_resume() -> None:
    agent, calls = recursive(4, max_depth=1)
    state = RunState()
    r = run_sync(agent, "go", state=state)
    assert r.status == "completed" and len(calls) == 4
    assert state.delegated_turns == 2 and r.turns == 2  # the child's two turns, counted once
    again = RunState.model_validate_json(state.model_dump_json())
    assert again.delegated_turns == 2 and depth_of(again) == 0
