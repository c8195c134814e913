"""tether.connectors._client_side: what tether answers when a server asks for a completion
(sampling) or for input (elicitation), without a server: the limits and the person's word."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import mcp_types as types

from tether.cancel import CancelSignal
from tether.connectors._client_side import MAX_PER_CALL, Asker, ClientSide
from tether.harness.state import RunState
from tether.tools.base import ToolContext

REQUEST = types.CreateMessageRequestParams(
    messages=[types.SamplingMessage(role="user", content=types.TextContent(type="text", text="Say hi"))],
    max_tokens=50,
)


def side(config: dict[str, Any], *, answer: str | None = None, budget: float | None = None) -> ClientSide:
    async def ask(question: str) -> str | None:
        return answer

    s = ClientSide("srv", {"sampling_model": "scripted/hello", **config}, Asker(ask if answer is not None else None))
    s.begin(ToolContext(cwd=Path("."), signal=CancelSignal(), state=RunState(), budget_left_usd=budget), "tool")
    return s


def sample(s: ClientSide) -> types.CreateMessageResult | types.ErrorData:
    return asyncio.run(s.sampling(REQUEST))


def test_sampling_is_answered_by_the_model_and_charged_to_the_run() -> None:
    s = side({"sampling": "allow"})
    result = sample(s)
    assert isinstance(result, types.CreateMessageResult) and result.model == "scripted/hello"
    assert s.current is not None and s.current.state.usage.completion_tokens > 0


def test_sampling_is_refused_with_the_reason_when_it_may_not_run() -> None:
    cases = [
        (side({"sampling": "deny"}), 'sampling = "deny"'),
        (side({"sampling": "allow"}, budget=0.0), "budget is spent"),
        (side({}), "none is at a terminal"),  # "ask", and nobody to ask
        (side({}, answer="n"), "declined"),
    ]
    for s, words in cases:
        result = sample(s)
        assert isinstance(result, types.ErrorData) and words in result.message, (words, result)
    outside = side({"sampling": "allow"})
    outside.calls.clear()  # no tool call in flight
    result = sample(outside)
    assert isinstance(result, types.ErrorData) and "only during one of this server's tool calls" in result.message


def test_at_most_a_few_samplings_per_tool_call() -> None:
    s = side({"sampling": "allow"})
    results = [sample(s) for _ in range(MAX_PER_CALL + 1)]
    assert all(isinstance(r, types.CreateMessageResult) for r in results[:MAX_PER_CALL])
    assert isinstance(results[-1], types.ErrorData) and "limit per call" in results[-1].message


def test_elicitation_without_a_person_is_declined() -> None:
    params = types.ElicitRequestFormParams(
        message="Your name?", requested_schema={"type": "object", "properties": {"name": {"type": "string"}}}
    )
    assert asyncio.run(side({}).elicitation(params)) == types.ElicitResult(action="decline")
    accepted = asyncio.run(side({}, answer="Ada").elicitation(params))
    assert isinstance(accepted, types.ElicitResult) and accepted.action == "accept"
    assert accepted.content == {"name": "Ada"}


def test_a_served_run_never_asks_at_the_servers_terminal() -> None:
    """`tether serve` started from a terminal: its users are elsewhere, so a server's request for
    input is declined (with the reason logged) and sampling under "ask" is refused, saying why."""
    from tether.connectors._acting import acting_as

    params = types.ElicitRequestFormParams(
        message="Your name?", requested_schema={"type": "object", "properties": {"name": {"type": "string"}}}
    )
    asked: list[str] = []

    async def ask(question: str) -> str | None:
        asked.append(question)
        return "y"

    s = ClientSide("srv", {"sampling_model": "scripted/hello"}, Asker(ask))
    call = ToolContext(cwd=Path("."), signal=CancelSignal(), state=RunState(), call_id="c1")
    s.begin(call, "tool")

    async def served() -> tuple[Any, Any]:
        with acting_as("alice"):
            return await s.elicitation(params), await s.sampling(REQUEST)

    elicited, sampled = asyncio.run(served())
    assert elicited == types.ElicitResult(action="cancel")  # the run stops to ask its user instead
    assert isinstance(sampled, types.ErrorData) and "the person is asked first" in sampled.message
    assert asked == []
    s.end(call)
    assert asyncio.run(served())[0] == types.ElicitResult(action="decline")  # no call to stop
    assert "outside a tool call of a run" in s.log[-1]
    s.begin(ToolContext(cwd=Path("."), signal=CancelSignal(), state=RunState()), "tool")
    assert asyncio.run(s.elicitation(params)).action == "accept"  # outside a served run: asked
