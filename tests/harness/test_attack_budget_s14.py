"""The promise "a run never ends above its budget" attacked (session fourteen): what reaches the
server besides the plan (the request's extra fields), and where spending meets a budget carved for a
sub-agent.

A model here writes all it is allowed: every reply is as long as the request's limit, so a limit
raised past the plan shows as a cost past the budget.
"""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest

from tether import Agent, run_sync
from tether.providers.anthropic import AnthropicProvider
from tether.providers.openai_chat import OpenAIChatProvider
from tether.usage import Price

PRICE = Price(input=10.0, output=10.0)  # dollars per million tokens: 5,000 output tokens are $0.05


def _limit(body: dict[str, Any]) -> int:
    """The reply's limit as a server reads it: the smaller of the fields it was given."""
    given = [body[k] for k in ("max_tokens", "max_completion_tokens") if isinstance(body.get(k), int)]
    return min(given) if given else 100_000


def _openai(sent: list[dict[str, Any]]) -> OpenAIChatProvider:
    def handler(request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content)
        sent.append({k: v for k, v in body.items() if k not in ("messages", "tools")})
        n = _limit(body)
        return httpx.Response(
            200,
            json={
                "id": "r1",
                "object": "chat.completion",
                "model": body["model"],
                "choices": [
                    {"index": 0, "message": {"role": "assistant", "content": "word " * n}, "finish_reason": "length"}
                ],
                "usage": {"prompt_tokens": 50, "completion_tokens": n, "total_tokens": 50 + n},
            },
        )

    return OpenAIChatProvider(base_url="http://127.0.0.1:9/v1", api_key="k", transport=httpx.MockTransport(handler))


def _anthropic(sent: list[dict[str, Any]]) -> AnthropicProvider:
    def handler(request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content)
        sent.append({k: v for k, v in body.items() if k not in ("messages", "tools", "system")})
        n = _limit(body)
        return httpx.Response(
            200,
            json={
                "id": "m1",
                "type": "message",
                "role": "assistant",
                "model": body["model"],
                "content": [{"type": "text", "text": "word " * n}],
                "stop_reason": "max_tokens",
                "usage": {"input_tokens": 50, "output_tokens": n},
            },
        )

    return AnthropicProvider(base_url="http://127.0.0.1:9", api_key="k", transport=httpx.MockTransport(handler))


@pytest.mark.parametrize(
    ("wire", "extra"),
    [
        ("openai", {"max_tokens": 20_000}),
        ("openai", {"max_completion_tokens": 20_000}),  # a reasoning model's field
        ("openai", {"max_tokens": None}),  # "no limit"
        ("anthropic", {"max_tokens": 20_000}),
    ],
)
def test_a_limit_in_request_extra_never_raises_the_one_the_budget_planned(wire: str, extra: dict[str, Any]) -> None:
    """``Agent(request_extra=...)`` was laid over the body after the planned ``max_tokens``, so a
    limit named there replaced the budget's (or, as ``max_completion_tokens``, was read beside it):
    a run of $0.05 ended at $0.20, ``completed``."""
    sent: list[dict[str, Any]] = []
    provider = _openai(sent) if wire == "openai" else _anthropic(sent)
    agent = Agent(
        provider, price=PRICE, max_budget_usd=0.05, request_extra=extra, stream=False, continue_cut_text=False
    )
    result = run_sync(agent, "hi")
    assert result.cost_usd is not None and result.cost_usd <= 0.05, (result.cost_usd, sent)
    assert sent and _limit(sent[0]) < 5_000  # the plan's limit, cut to what $0.05 pays for
    if "max_completion_tokens" in extra:  # sent under the name asked for, alone (o3 refuses max_tokens)
        assert "max_tokens" not in sent[0] and sent[0]["max_completion_tokens"] < 5_000


def test_a_lower_limit_in_request_extra_is_kept() -> None:
    sent: list[dict[str, Any]] = []
    agent = Agent(_openai(sent), price=PRICE, request_extra={"max_completion_tokens": 300}, stream=False)
    run_sync(agent, "hi")
    assert sent[0]["max_completion_tokens"] == 300 and "max_tokens" not in sent[0]
