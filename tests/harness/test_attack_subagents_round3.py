"""Sub-agents (``agent.as_tool``) attacked from outside, round three: a child whose answer is
enormous, and more. Each test says what it proves; "was:" says how it failed before its fix."""

from __future__ import annotations

import asyncio
import json
from typing import Any

from tether import Agent, RunState, run_stream
from tether.events import Done, Event
from tether.harness.subagent import children
from tether.messages import AssistantMessage, Message, TextPart, ToolCallPart, ToolMessage, UserMessage
from tether.providers.base import ModelRequest
from tether.status import RunResult
from tether.testing import FunctionModel
from tether.usage import Price, Usage

PRICE = Price(input=2.0, output=12.0)
USAGE = Usage(prompt_tokens=100, completion_tokens=10)


def reply(text: str = "", calls: tuple[tuple[str, str, dict[str, Any]], ...] = ()) -> AssistantMessage:
    parts: list[TextPart | ToolCallPart] = [TextPart(text=text)] if text else []
    parts += [ToolCallPart(id=cid, name=name, arguments=json.dumps(args)) for cid, name, args in calls]
    return AssistantMessage(content=tuple(parts), usage=USAGE, finish_reason="tool_calls" if calls else "stop")


def go(agent: Agent, prompt: str | None, state: RunState) -> list[Event]:
    async def main() -> list[Event]:
        return [e async for e in run_stream(agent, prompt, state=state)]

    return asyncio.run(asyncio.wait_for(main(), 120))  # a guard against a hang, not a measurement


def result_of(events: list[Event]) -> RunResult:
    done = events[-1]
    assert isinstance(done, Done)
    return done.result


def test_a_childs_enormous_answer_reaches_the_parent_bounded_head_and_tail() -> None:
    """Was: a child's 3,000,000-character answer went whole into the parent's transcript (and its
    saved state, twice), so the parent's next request could not fit any model's context."""
    huge = "HEAD" + "z" * 3_000_000 + "TAIL"
    child = Agent(FunctionModel(lambda m, r: reply(huge), model_id="child", price=PRICE))
    seen: list[str] = []

    def parent(messages: list[Message], request: ModelRequest) -> AssistantMessage:
        results = [m.text for m in messages if isinstance(m, ToolMessage)]
        if not results:
            return reply(calls=(("c1", "helper", {"task": "write a lot"}),))
        seen.extend(results)
        return reply("done")

    lead = Agent(FunctionModel(parent, model_id="parent", price=PRICE), tools=[child.as_tool("helper", "Helps.")])
    state = RunState()
    result = result_of(go(lead, "go", state))
    assert result.status == "completed"
    (answer,) = seen
    assert len(answer) < 101_000
    assert answer.startswith("HEAD") and answer.endswith("TAIL")
    assert "characters cut here" in answer
    assert len(json.dumps(state.model_dump(mode="json"))) < 400_000
    assert children(state)["c1"]["done"] is True


def test_two_children_side_by_side_that_both_ask_are_each_decided_once_and_each_wipe_runs_once() -> None:
    """Two sub-agent calls in one reply (a parallel tool), each stopping for a person: each question
    reaches the person in turn, each approval reaches its own child, and nothing runs twice."""
    from tether import approve, tool

    wiped: list[str] = []

    @tool(needs_approval=True)
    def wipe(path: str) -> str:
        """Delete a folder."""
        wiped.append(path)
        return f"wiped {path}"

    def child(messages: list[Message], request: ModelRequest) -> AssistantMessage:
        results = [m for m in messages if isinstance(m, ToolMessage)]
        if not results:
            task = next(
                p.text for m in messages if isinstance(m, UserMessage) for p in m.content if isinstance(p, TextPart)
            )
            return reply(calls=(("w1", "wipe", {"path": task}),))
        return reply(f"child: {results[-1].text}")

    helper = Agent(FunctionModel(child, model_id="child", price=PRICE), tools=[wipe]).as_tool("helper", "Wipes.")
    helper.parallel = True

    def parent(messages: list[Message], request: ModelRequest) -> AssistantMessage:
        results = [m.text for m in messages if isinstance(m, ToolMessage)]
        if not results:
            return reply(calls=(("c1", "helper", {"task": "a"}), ("c2", "helper", {"task": "b"})))
        return reply(" | ".join(results))

    lead = Agent(FunctionModel(parent, model_id="parent", price=PRICE), tools=[helper])
    state = RunState()
    questions = []
    result = result_of(go(lead, "go", state))
    for _ in range(4):
        if result.status != "interrupted":
            break
        questions.append(getattr(result.interruption, "call_id", None))
        approve(state)
        result = result_of(go(lead, None, state))
    assert result.status == "completed", result.reason
    assert sorted(wiped) == ["a", "b"]
    assert sorted(questions) == ["c1", "c2"]
    assert result.output == "child: wiped a | child: wiped b"


class _Form:
    """A child's tool that stops for a form (as an MCP server's elicitation does in a served run)
    and, on resume, answers with the values the person gave."""

    name = "form"
    description = "Asks the person for their name."
    input_schema: dict[str, Any] = {"type": "object", "properties": {}}
    read_only = True
    needs_approval = False

    async def execute(self, input: dict[str, Any], ctx: Any) -> str:
        from tether.status import ElicitationInterruption
        from tether.tools.base import ToolInterrupt

        answer = ctx.state.answer
        if answer is not None and isinstance(answer.question, ElicitationInterruption):
            ctx.state.answer = None
            return f"accepted={answer.approved} content={json.dumps(answer.content)}"
        schema = {"type": "object", "properties": {"name": {"type": "string"}}}
        question = ElicitationInterruption(
            call_id=ctx.call_id, tool_name="form", server="crm", message="Your name?", requested_schema=schema, key="k"
        )
        raise ToolInterrupt("the server asks for a form", question, ended=True)


def test_a_forms_values_given_on_the_parent_reach_the_child_that_asked() -> None:
    """Was: approve(parent, content={...}) reached the child as an approval without the values:
    the child's form was accepted empty."""
    from tether import approve
    from tether.status import ElicitationInterruption, SubagentInterruption

    def child(messages: list[Message], request: ModelRequest) -> AssistantMessage:
        results = [m for m in messages if isinstance(m, ToolMessage)]
        return reply(calls=(("f1", "form", {}),)) if not results else reply(results[-1].text)

    helper = Agent(FunctionModel(child, model_id="child", price=PRICE), tools=[_Form()]).as_tool("helper", "Asks.")

    def parent(messages: list[Message], request: ModelRequest) -> AssistantMessage:
        results = [m.text for m in messages if isinstance(m, ToolMessage)]
        return reply(calls=(("c1", "helper", {"task": "ask"}),)) if not results else reply(results[-1])

    lead = Agent(FunctionModel(parent, model_id="parent", price=PRICE), tools=[helper])
    state = RunState()
    first = result_of(go(lead, "go", state))
    assert first.status == "interrupted"
    assert isinstance(first.interruption, SubagentInterruption)
    assert isinstance(first.interruption.child, ElicitationInterruption)
    approve(state, content={"name": "Ana"})
    final = result_of(go(lead, None, state))
    assert final.status == "completed", final.reason
    assert final.output == 'accepted=True content={"name": "Ana"}'
