"""A model tether has no tokenizer for (Claude, a local model) is counted at about four characters
a token; its own tokenizer may count many more (code, JSON). The budget's plan of each call counts
what was sent since the last call at the rate the provider's own counts of the step before showed."""

from __future__ import annotations

import json
from typing import Any

from tether import Agent, RunState, run_sync, tool
from tether.messages import AssistantMessage, TextPart, ToolCallPart
from tether.providers.base import ModelRequest
from tether.testing import FunctionModel
from tether.usage import Price, Usage


@tool(read_only=True)
def fetch(page: int) -> str:
    """Fetch a page of the log."""
    return "\n".join(
        f'{{"line": {page * 100 + i}, "level": "ERROR", "msg": "timeout after 30000 ms"}}' for i in range(60)
    )


def _dense(messages: list[Any], request: ModelRequest) -> AssistantMessage:
    """A model whose tokenizer counts a token for every 2.5 characters, and that writes as much as
    it is allowed (up to 600 tokens) before it asks for the next page."""
    sent = len(request.system or "") + sum(
        len(p.text) if p.type == "text" else len(getattr(p, "arguments", "")) for m in messages for p in m.content
    )
    out = min(request.max_tokens or 600, 600)
    page = sum(m.role == "assistant" for m in messages)
    call = ToolCallPart(id=f"c{page}", name="fetch", arguments=json.dumps({"page": page}))
    return AssistantMessage(
        content=(TextPart(text=("ab " * out)[: int(out * 2.5)]), call),
        finish_reason="tool_calls",
        usage=Usage(prompt_tokens=int(sent / 2.5), completion_tokens=out),
    )


def test_a_run_on_a_model_that_counts_more_tokens_than_tether_never_ends_above_its_budget() -> None:
    """Was: 19 of 60 budgets ended above themselves (by up to 3 %), the last call's prompt planned
    at four characters a token. The budgets here run out at the third call or later, once a step
    has shown the provider's rate."""
    over = []
    for k in range(30):
        budget = round(0.045 + 0.0015 * k, 5)
        state = RunState()
        agent = Agent(FunctionModel(_dense, price=Price(input=3.0, output=15.0)), tools=[fetch], max_budget_usd=budget)
        result = run_sync(agent, "Read the log", state=state)
        assert result.status == "budget_exceeded" and state.turns >= 3, (budget, result.status, state.turns)
        if state.cost_usd > budget:
            over.append((budget, state.cost_usd))
    assert over == []
