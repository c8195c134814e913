"""Limits checked before every model call (law 6): turns, stop conditions, and the budget.

The budget check is about the call about to be made, not the calls already made: the call is
allowed only as many output tokens as the remaining budget can pay for after its estimated
prompt, so a run never ends above its budget. The prompt estimate starts from the provider's own
count for the previous call and adds the messages since, so it costs O(new messages) per turn.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from tether.errors import ConfigError
from tether.harness.agent import Agent, Stop
from tether.harness.state import RunState, steps
from tether.messages import AssistantMessage
from tether.status import (
    MaxBudgetInterruption,
    MaxTurnsInterruption,
)
from tether.tokens import PER_MESSAGE, count_tokens, message_tokens
from tether.usage import Price

__all__ = ["CallPlan", "estimate_prompt_tokens", "message_tokens", "plan_call", "with_margin"]

_SAFETY = 1.02


@dataclass(frozen=True, slots=True)
class CallPlan:
    max_tokens: int
    prompt_estimate: int


def estimate_prompt_tokens(
    state: RunState,
    fixed_tokens: int,
    *,
    count: Callable[[str], int] = count_tokens,
    trust_last_usage: bool = True,
    model: str | None = None,
) -> int:
    """An upper-leaning estimate of the next call's prompt tokens.

    ``fixed_tokens`` is the cost of what every call sends besides the messages (system prompt,
    tool definitions). The provider's own count for the previous call is the base when it can be
    trusted — not after the transcript was rewritten (compaction), when everything is counted, nor
    when another model than ``model`` (the one to be asked) answered it: its count is another
    tokenizer's (a fallback's, or the primary's on a resume), smaller for all we know.
    """
    messages = state.messages
    base, start = fixed_tokens, 0
    for i in range(len(messages) - 1, -1, -1) if trust_last_usage else ():
        m = messages[i]
        if isinstance(m, AssistantMessage) and m.usage is not None and m.usage.prompt_tokens > 0:
            if model is not None and m.model not in (None, model):
                break
            # The reply goes back in the next prompt whatever its count said: a server that
            # reported 1 token for a reply of 20,000 (usage per chunk, not in all) had the next
            # call planned without them.
            reply = max(m.usage.completion_tokens + PER_MESSAGE, message_tokens(m, count))
            base = m.usage.prompt_tokens + reply
            start = i + 1
            break
    return with_margin(base + sum(message_tokens(m, count) for m in messages[start:]))


def with_margin(tokens: int) -> int:
    """An estimate of a prompt made upper-leaning for a budget: 2 % more, plus 16."""
    return int(tokens * _SAFETY) + 16


def plan_call(agent: Agent, state: RunState, price: Price | None, prompt_tokens: Callable[[], int]) -> Stop | CallPlan:
    """Decide, before asking the model, whether the run may make another call, and how big.

    ``prompt_tokens`` estimates the next prompt; it is only called when a budget is set."""
    if agent.max_turns is not None and state.turns + state.delegated_turns >= agent.max_turns:
        theirs = f", {state.delegated_turns} of them by runs it delegated to" if state.delegated_turns else ""
        return Stop(
            "max_turns_exceeded",
            f"reached the turn limit ({agent.max_turns}{theirs}) before the model finished",
            MaxTurnsInterruption(max_turns=agent.max_turns),
        )
    if agent.stop_when:
        done = steps(state.messages)
        for condition in agent.stop_when:
            verdict = condition(done)
            if verdict is True:
                return Stop("completed", f"stop condition {getattr(condition, '__name__', '')} met")
            if isinstance(verdict, Stop):
                return verdict
    if agent.max_budget_usd is None:
        return CallPlan(agent.max_tokens, 0)
    if price is None:  # checked when the run starts; kept here for direct callers
        raise ConfigError("max_budget_usd is set but the price of this model is unknown")
    prompt = prompt_tokens()
    remaining = agent.max_budget_usd - state.spent_usd
    affordable = price.affordable_output_tokens(prompt, remaining)
    max_tokens = min(agent.max_tokens, affordable)
    # 0 affordable: the prompt alone costs more than is left; a max_tokens below the minimum is the agent's own.
    least = max(min(agent.min_output_tokens, agent.max_tokens), 1)
    if max_tokens < least:
        lost = (
            f"; what was spent counts ${state.cost_unknown_usd:.6f}, the worst case, for requests lost in a crash"
            if state.cost_unknown_usd
            else ""
        )
        return Stop(
            "budget_exceeded",
            f"the remaining budget (${max(remaining, 0):.6f} of ${agent.max_budget_usd:.6f}) cannot "
            f"pay for another call: ~{prompt} prompt tokens plus at least "
            f"{least} output tokens{lost}",
            MaxBudgetInterruption(max_budget_usd=agent.max_budget_usd, spent_usd=state.spent_usd),
        )
    return CallPlan(max_tokens, prompt)
