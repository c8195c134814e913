"""Hostile model output end to end through the loop (a helper's fifth round): what a model can
send that the run must survive, ending in one of the five exits with a reason in words, nothing
lost, and the saved run resumable.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from tests.conftest import assert_pairing
from tether import Agent, RunStore, approve, run, tool
from tether.messages import AssistantMessage, Message, ToolCallPart, ToolMessage, UserMessage
from tether.providers.base import ModelRequest
from tether.status import ApprovalInterruption
from tether.testing import FunctionModel


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
