"""Attacks on retries, fallback and the dollar budget across them (round 5).

A provider of one's own (``Agent(model=<Provider>)``), scripted HTTP servers on loopback, and
``FunctionModel``.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Any

import pytest

from tether import Agent, run_stream, run_sync, tool
from tether.harness.retry import RetryPolicy
from tether.messages import AssistantMessage, TextPart, ToolCallPart
from tether.providers.base import ModelRequest, ModelResponse, ResponseDone, StreamEvent, StreamText
from tether.usage import Price, Usage

FAST = RetryPolicy(base_delay_s=0.01, max_delay_s=0.05)
PRICE = Price(input=2.0, output=12.0)
ANSWER = "The timeout is set in config/worker.toml. " * 40


def collect(agent: Agent, prompt: str | None, **kw: Any) -> list[Any]:
    async def go() -> list[Any]:
        return [e async for e in run_stream(agent, prompt, **kw)]

    return asyncio.run(go())


@tool(read_only=True)
def look(n: int) -> str:
    """Look at page n."""
    return f"page {n}: " + "nothing about timeouts here. " * 30


class OwnProvider:
    """A provider of one's own, as ``Agent(model=...)`` accepts: it answers ``ANSWER`` with the
    usage it is given (None: it reports none, as many self-written adapters do)."""

    name = "mine"
    model_id = "m1"

    def __init__(self, usage: Usage | None, *, call_tool: bool = False) -> None:
        self.usage = usage
        self.call_tool = call_tool
        self.calls = 0

    async def complete(self, request: ModelRequest) -> ModelResponse:
        self.calls += 1
        if self.call_tool:  # never done: looks again, and again
            call = ToolCallPart(id=f"c{self.calls}", name="look", arguments=json.dumps({"n": self.calls}))
            message = AssistantMessage(content=(call,), finish_reason="tool_calls", usage=self.usage)
        else:
            message = AssistantMessage(content=(TextPart(text=ANSWER),), finish_reason="stop", usage=self.usage)
        return ModelResponse(message)

    async def stream(self, request: ModelRequest) -> AsyncIterator[StreamEvent]:
        response = await self.complete(request)
        yield StreamText(response.message.text)
        yield ResponseDone(response)

    async def validate_auth(self) -> None:
        return None

    async def aclose(self) -> None:
        return None


# -- usage a provider of one's own reports, or does not ---------------------------------------------


@pytest.mark.parametrize(
    "usage",
    [
        None,  # no usage at all
        Usage(),  # zeros
        Usage(prompt_tokens=-1_000_000, completion_tokens=-1_000_000),  # would pay the budget back
        Usage(prompt_tokens=10**400, completion_tokens=10**30),  # no float can price it
        Usage(prompt_tokens=900, completion_tokens=400, cached_tokens=-(10**7), cache_write_tokens=-(10**7)),
    ],
    ids=["none", "zeros", "negative", "astronomic", "negative-cache"],
)
@pytest.mark.parametrize("stream", [True, False])
def test_a_reply_from_ones_own_provider_is_never_free_and_never_pays_the_budget_back(
    usage: Usage | None, stream: bool
) -> None:
    """The docs: usage a server does not send is estimated, a count no call can have is treated as
    not sent, and "budgets and costs never treat it as free". A provider passed as ``Agent(model=)``
    that left usage out made every reply cost $0 (a budget never stopped it); one that reported
    negative counts made the run's cost negative, refilling the budget."""
    provider = OwnProvider(usage)
    agent = Agent(provider, price=PRICE, max_budget_usd=1.0, stream=stream, retry=FAST)  # type: ignore[arg-type]
    result = run_sync(agent, "Where is the timeout set?")
    assert result.status == "completed", result.reason
    at_least = PRICE.cost(Usage(prompt_tokens=5, completion_tokens=300))  # the answer alone is ~400 tokens
    assert result.cost_usd >= at_least
    assert result.cost_usd < 1.0
    assert result.usage.prompt_tokens > 0 and result.usage.completion_tokens > 0
    assert result.usage.cached_tokens >= 0 and result.usage.cache_write_tokens >= 0
    if usage is None or usage.prompt_tokens <= 0 or usage.prompt_tokens > 2**53:
        assert result.usage.estimated


def test_a_budget_stops_a_provider_that_reports_no_usage() -> None:
    """Without usage the budget must still count each call: a model that keeps calling a tool on a
    provider that reports no usage stops at its budget, not at the turn limit, having paid $0."""
    provider = OwnProvider(None, call_tool=True)
    budget = PRICE.cost(Usage(prompt_tokens=2_000, completion_tokens=500)) * 3  # a few turns' worth
    agent = Agent(provider, tools=[look], price=PRICE, max_budget_usd=budget, max_turns=40, max_tokens=500)  # type: ignore[arg-type]
    result = run_sync(agent, "Where is the timeout set?")
    assert result.status == "budget_exceeded", (result.status, result.turns, result.cost_usd)
    assert 0 < result.cost_usd <= budget
    assert provider.calls < 40
