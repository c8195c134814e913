"""Agent(max_run_tokens=...) over a tree of agents: a sub-agent's tokens count toward its parent's
limit, and a sub-agent is given only its share of what the parent's limit leaves (its own
``max_run_tokens`` planned against that before each of its calls), as its dollars count toward the
parent's ``max_budget_usd``. Every model here reports a usage of its own (a helper's the whole
``max_tokens`` it was allowed, as a model that writes all it may): the tests add up what the models
reported, never tether's totals alone."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tether import Agent, RunState, RunStore, run_sync, tool
from tether.harness.state import approve
from tether.messages import AssistantMessage, TextPart, ToolMessage
from tether.providers.base import ModelRequest, ModelResponse, estimate_usage
from tether.testing import FunctionModel, Reply, call
from tether.tokens import estimate_tokens


def greedy(request: Any, out: Any) -> AssistantMessage:
    """``out`` (text or a Reply) as a reply that wrote all it was allowed: its usage says
    ``max_tokens`` of output, its prompt counted as tether counts a model it has no tokenizer for."""
    if isinstance(out, str):
        message = AssistantMessage(content=(TextPart(text=out),), finish_reason="stop")
    else:
        message = FunctionModel(lambda m, r: out)._to_message(out)
    usage = estimate_usage(request, message, estimate_tokens)
    return message.model_copy(update={"usage": usage.model_copy(update={"completion_tokens": request.max_tokens})})


class Reported(FunctionModel):
    """A FunctionModel that keeps what each of its replies reported: the truth the tests add up."""

    def __init__(self, fn: Any, reported: list[int], **kw: Any) -> None:
        super().__init__(fn, **kw)
        self.reported = reported

    async def complete(self, request: ModelRequest) -> ModelResponse:
        response = await super().complete(request)
        assert response.message.usage is not None
        self.reported.append(response.message.usage.total_tokens)
        return response


@tool
def note(text: str) -> str:
    """Take a note."""
    return "noted: " + text * 20


def tree(limit: int, reported: list[int], *, calls: int = 1, child_limit: int | None = None) -> Agent:
    """A parent whose first reply hands ``calls`` tasks to a helper that never stops taking notes
    (ten turns at most), then answers with what it got."""

    def parent(messages: list[Any], request: Any) -> str | Reply:
        if any(isinstance(m, ToolMessage) for m in messages):
            return "done"
        return Reply(calls=tuple((f"p{i}", "helper", {"task": "take notes"}) for i in range(calls)))

    def child(messages: list[Any], request: Any) -> AssistantMessage:
        return greedy(request, call(f"n{len(messages)}", "note", {"text": "more "}))

    helper = Agent(Reported(child, reported, model_id="child"), tools=[note], max_turns=10, max_run_tokens=child_limit)
    tool_ = helper.as_tool("helper", "Takes notes.")
    tool_.parallel = calls > 1
    return Agent(Reported(parent, reported, model_id="parent"), tools=[tool_], max_run_tokens=limit)


def test_a_sub_agents_tokens_count_toward_its_parents_limit() -> None:
    """Was: a sub-agent's tokens were not counted against the parent's max_run_tokens, and the
    child was not limited by what the parent had left: a parent limited to 20,000 tokens handed a
    task to a greedy helper (a limit of its own of a million) and the run used 44,186 (the helper
    went on for its ten turns), while ``result.usage`` showed only the parent's 241."""
    reported: list[int] = []
    state = RunState()
    result = run_sync(tree(20_000, reported, child_limit=1_000_000), "go", state=state)
    assert result.status == "completed" and result.output == "done", result.reason
    assert sum(reported) <= 20_000, reported
    assert len(reported) > 3  # the helper did work before it was stopped
    # Counted once, the child's with the parent's, as its dollars are in result.cost_usd.
    assert result.usage.total_tokens == sum(reported)
    (answer,) = [m for m in state.messages if isinstance(m, ToolMessage)]
    assert "budget_exceeded" in answer.text and "token limit" in answer.text, answer.text


def test_sub_agents_side_by_side_share_what_the_parents_limit_leaves() -> None:
    """Was: two helpers running side by side (``parallel``) each spent as it liked: the run used
    88,200 tokens of its 24,000."""
    reported: list[int] = []
    state = RunState()
    result = run_sync(tree(24_000, reported, calls=2), "go", state=state)
    assert result.status == "completed" and result.output == "done", result.reason
    assert sum(reported) <= 24_000, reported
    assert result.usage.total_tokens == sum(reported)
    answers = [m for m in state.messages if isinstance(m, ToolMessage)]
    assert len(answers) == 2 and all("token limit" in m.text for m in answers), [m.text for m in answers]


def test_a_sub_agent_is_not_started_when_the_parents_limit_leaves_it_nothing() -> None:
    """Was: with 2,200 tokens and ~100 used by its first reply, the parent's helper still started
    and used ~44,000, though what was left was no more than the parent's own answer is kept."""
    reported: list[int] = []
    state = RunState()
    result = run_sync(tree(2_200, reported), "go", state=state)
    assert result.status == "completed" and result.output == "done", result.reason
    assert len(reported) == 2 and sum(reported) <= 2_200  # the parent's two replies, the helper's none
    (answer,) = [m for m in state.messages if isinstance(m, ToolMessage)]
    assert answer.text.startswith("Not run") and "token limit" in answer.text, answer.text


@tool(needs_approval=True)
def publish(text: str) -> str:
    """Publish a note (a person approves it first)."""
    return "published"


@pytest.mark.parametrize("saved_apart", [False, True])
def test_a_sub_agents_tokens_are_counted_once_across_a_stop_for_a_person(tmp_path: Path, saved_apart: bool) -> None:
    """Was: a sub-agent's tokens were never added to its parent's usage, so neither was what it
    used before it stopped for a person and after the parent's resume: the parent's limit did not
    see them. Now they are added as its dollars are, once (the child's record says what was), in
    the parent's record or saved as a run of its own."""
    reported: list[int] = []

    def parent(messages: list[Any], request: Any) -> str | Reply:
        if any(isinstance(m, ToolMessage) for m in messages):
            return "done"
        return Reply(calls=(("p1", "helper", {"task": "publish a note"}),))

    def child(messages: list[Any], request: Any) -> str | Reply:
        if any(isinstance(m, ToolMessage) for m in messages):
            return "published it"
        return Reply(calls=(("n1", "publish", {"text": "hello"}),))

    helper = Agent(Reported(child, reported), tools=[publish]).as_tool("helper", "Publishes notes.")
    agent = Agent(Reported(parent, reported), tools=[helper], max_run_tokens=100_000)
    store = RunStore(tmp_path / "runs") if saved_apart else None
    state = RunState()
    first = run_sync(agent, "go", state=state, store=store)
    assert first.status == "interrupted" and len(reported) == 2, first.reason
    assert first.usage.total_tokens == sum(reported)  # the child's first call in the parent's usage
    if store is not None:
        state = store.load(state.run_id)
    approve(state)
    result = run_sync(agent, state=state, store=store)
    assert result.status == "completed" and result.output == "done", result.reason
    assert len(reported) == 4 and result.usage.total_tokens == sum(reported)  # each counted once
