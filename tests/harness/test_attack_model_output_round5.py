"""Hostile model output end to end through the loop (a helper's fifth round): what a model can
send that the run must survive, ending in one of the five exits with a reason in words, nothing
lost, and the saved run resumable.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from tests.conftest import assert_pairing
from tether import Agent, RunStore, approve, run, tool
from tether.messages import AssistantMessage, Message, ToolCallPart, ToolMessage, UserMessage
from tether.providers.base import ModelRequest, StreamEvent, StreamText
from tether.providers.scripted import InProcessModel
from tether.status import ApprovalInterruption
from tether.testing import FunctionModel
from tether.usage import Price


def nested(levels: int) -> str:
    return '{"data": ' + "[" * levels + "]" * levels + "}"


def test_arguments_nested_hundreds_deep_to_a_call_that_needs_approval_stop_to_ask(tmp_path: Path) -> None:
    """Valid JSON nested 300 deep (Python parses it) to a tool that needs approval: the run stops
    for the person, saved, and once approved the tool gets the arguments the model sent. Before:
    the parsed arguments kept with the question nested past the saved state's serialiser's limit
    (255 levels), and the run ended failed, 'post needs approval; then the run could not be saved
    (ValueError: Maximum serialization depth exceeded)', with nothing to approve."""
    got: list[Any] = []

    @tool(needs_approval=True)
    def post(data: Any) -> str:
        """Post data."""
        got.append(data)
        return "posted"

    arguments = nested(300)

    def reply(messages: list[Message], request: ModelRequest) -> AssistantMessage | str:
        if any(isinstance(m, ToolMessage) for m in messages):
            return "done"
        return AssistantMessage(content=(ToolCallPart(id="c1", name="post", arguments=arguments),))

    agent = Agent(FunctionModel(reply), tools=[post])
    store = RunStore(tmp_path / "runs")
    first = asyncio.run(run(agent, "post it", store=store))
    assert first.status == "interrupted" and first.reason == "post needs approval"
    saved = store.load(first.run_id)
    waiting = saved.interruption
    assert isinstance(waiting, ApprovalInterruption) and waiting.call_id == "c1"
    assert waiting.args == arguments  # too deep to keep parsed: the person sees what the model sent
    approve(saved, "c1")
    second = asyncio.run(run(agent, state=saved, store=store))
    assert second.status == "completed" and second.output == "done"
    depth, value = 0, got[0]
    while value:
        depth, value = depth + 1, value[0]
    assert depth == 299  # the outermost list plus 299 inside it
    assert_pairing(store.load(first.run_id).messages)


def test_a_structured_answer_nested_thousands_deep_is_corrected_not_a_crash() -> None:
    """An answer for an output type that is JSON nested 100,000 levels deep: the model is told it
    is nested too deeply and answers again. Before: the run ended failed, 'unexpected error:
    RecursionError ... If this looks like tether's fault, report it', and could not be resumed."""
    answers = iter(['{"a": ' + "[" * 100_000 + "]" * 100_000 + "}", '{"a": 1}'])
    told: list[str] = []

    def reply(messages: list[Message], request: ModelRequest) -> str:
        last = messages[-1]
        if isinstance(last, UserMessage) and len(messages) > 1:
            told.append(last.content[0].text)  # type: ignore[union-attr]
        return next(answers)

    result = asyncio.run(run(Agent(FunctionModel(reply), output_type=dict[str, Any]), "answer"))
    assert result.status == "completed" and result.output == {"a": 1}
    assert len(told) == 1 and "nested too deeply" in told[0]


def test_made_up_tool_names_of_any_length_are_quoted_and_counted_in_a_few_words(tmp_path: Path) -> None:
    """A reply calling 50 tools the agent does not have, each named with 20,000 characters: each
    call is an error the model reads, counted in the run's statistics, and neither quotes the name
    whole. Before: each error quoted its name whole (20,000 characters back to the model with every
    later request), and the statistics (saved with each commit) kept every name whole: a reply of
    400 names of 50,000 characters made every save of the run write 20 MB again."""
    names = [f"{i:02}" + "z" * 20_000 for i in range(50)]

    def reply(messages: list[Message], request: ModelRequest) -> AssistantMessage | str:
        if any(isinstance(m, ToolMessage) for m in messages):
            return "done"
        return AssistantMessage(content=tuple(ToolCallPart(id=f"c{i}", name=n) for i, n in enumerate(names)))

    @tool
    def count(n: int) -> str:
        """Count to n."""
        return str(n)

    store = RunStore(tmp_path / "runs")
    result = asyncio.run(run(Agent(FunctionModel(reply), tools=[count]), "go", store=store))
    assert result.status == "completed" and result.output == "done"
    saved = store.load(result.run_id)
    assert_pairing(saved.messages)
    errors = [m for m in saved.messages if isinstance(m, ToolMessage)]
    assert [m.status for m in errors] == ["error"] * 50
    assert all(len(m.text) < 300 and "(20002 characters)" in m.text for m in errors)
    assert "no tool named '00zzz" in errors[0].text and "Available tools: count." in errors[0].text
    assert sum(s.calls for s in saved.tool_stats.values()) == 50
    assert max(len(name) for name in saved.tool_stats) < 100


class _Endless(InProcessModel):
    """A server that does not honour max_tokens: its reply streams on and never ends."""

    model_id = "endless"

    def __init__(self) -> None:
        self.sent = 0

    async def stream(self, request: ModelRequest) -> AsyncIterator[StreamEvent]:
        while self.sent < 50_000:  # bounded only so that the test cannot hang
            self.sent += 1
            yield StreamText("x " * 1000)
            if self.sent % 100 == 0:
                await asyncio.sleep(0)
        raise AssertionError("the harness read 100 MB of a reply of at most 100 tokens")


def test_a_reply_streaming_on_past_its_output_limit_is_cut_within_the_budget(tmp_path: Path) -> None:
    """A reply that streams on and on, past max_tokens=100: the run stops reading it (once far past
    the limit: 64 times, and a million tokens), ends failed saying the server does not honour max_tokens, charges no more
    than the budget, and is saved with nothing in flight. Before: the stream was read for ever (all
    of it kept in memory), with the budget never checked."""
    model = _Endless()
    store = RunStore(tmp_path / "runs")
    agent = Agent(model, max_tokens=100, max_budget_usd=1.0, price=Price(input=1, output=100))
    result = asyncio.run(run(agent, "go", store=store))
    assert result.status == "failed"
    assert result.reason is not None and "the server does not honour max_tokens" in result.reason
    assert model.sent < 10_000  # 20 MB
    saved = store.load(result.run_id)
    assert saved.status == "failed" and saved.call_in_flight is None
    assert 0 < saved.cost_usd <= 1.0
