"""Limits checked before every model call (law 6): turns, stop conditions, and the budget.

The budget check is about the call about to be made, not the calls already made: the call is
allowed only as many output tokens as the remaining budget can pay for after its estimated
prompt, so a run never ends above its budget. The prompt estimate starts from the provider's own
count for the previous call and adds the messages since, counted at the rate the provider's counts
of the step before showed, so it costs O(new messages) per turn.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

from tether.errors import ConfigError
from tether.harness.agent import Agent, Stop
from tether.harness.state import RunState, steps
from tether.messages import AssistantMessage, Message
from tether.status import (
    TOKEN_LIMIT,
    MaxBudgetInterruption,
    MaxTurnsInterruption,
)
from tether.tokens import PER_MESSAGE, count_tokens, message_tokens
from tether.usage import Price

__all__ = [
    "CallPlan",
    "estimate_prompt_tokens",
    "least_output",
    "message_tokens",
    "output_left",
    "plan_call",
    "plans_calls",
    "with_margin",
]

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
    counted = _counted(messages, model) if trust_last_usage else []
    if not counted:
        return with_margin(fixed_tokens + sum(message_tokens(m, count) for m in messages))
    last = counted[0]
    m = messages[last]
    assert isinstance(m, AssistantMessage) and m.usage is not None
    # The reply goes back in the next prompt whatever its count said: a server that reported 1
    # token for a reply of 20,000 (usage per chunk, not in all) had the next call planned without them.
    reply = max(m.usage.completion_tokens + PER_MESSAGE, message_tokens(m, count))
    since = sum(message_tokens(x, count) for x in messages[last + 1 :])
    rate = _rate(messages, counted, fixed_tokens, count)
    return with_margin(m.usage.prompt_tokens + reply + math.ceil(since * rate))


def _counted(messages: list[Message], model: str | None) -> list[int]:
    """The indexes of the last two replies (newest first) with the provider's count of their prompt,
    back to the first reply by another model than ``model`` (another tokenizer's count)."""
    found: list[int] = []
    for i in range(len(messages) - 1, -1, -1):
        m = messages[i]
        if isinstance(m, AssistantMessage) and m.usage is not None and m.usage.prompt_tokens > 0:
            if model is not None and m.model not in (None, model):
                break
            found.append(i)
            if len(found) == 2:
                break
    return found


def _rate(messages: list[Message], counted: list[int], fixed_tokens: int, count: Callable[[str], int]) -> float:
    """How many tokens the provider counts for each one tether counts, from the last step: what
    the last call's prompt grew by over the one before (less that one's reply), against tether's
    count of the messages sent in between; with no call before it, the last call's whole prompt
    against tether's count of it. A model tether has no tokenizer for is counted at about four
    characters a token, and its own tokenizer may count half as many more (code, JSON): a run
    planned on the estimate alone ended above its budget. Never under 1 (the estimate's own lean
    stays), never over 4 (a byte-level BPE's bound), and 1 when the step sent too little to tell (a
    reply's framing is a few tokens either way)."""
    last = messages[counted[0]]
    assert isinstance(last, AssistantMessage) and last.usage is not None
    if len(counted) == 2:
        earlier = messages[counted[1]]
        assert isinstance(earlier, AssistantMessage) and earlier.usage is not None
        sent = sum(message_tokens(m, count) for m in messages[counted[1] + 1 : counted[0]])
        grew = last.usage.prompt_tokens - earlier.usage.prompt_tokens - earlier.usage.completion_tokens
    else:
        sent = fixed_tokens + sum(message_tokens(m, count) for m in messages[: counted[0]])
        grew = last.usage.prompt_tokens
    if sent < _CALIBRATES:
        return 1.0
    return min(max(grew / sent, 1.0), 4.0)


# Tokens a step must send for its provider's count of them to calibrate the estimate.
_CALIBRATES = 256


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
    if agent.max_budget_usd is None and agent.max_run_tokens is None:
        return CallPlan(agent.max_tokens, 0)
    prompt = prompt_tokens()
    least = least_output(agent)
    left = output_left(agent, state, prompt)
    if left is not None and left < least:
        lost = (
            f"; {state.tokens_unknown:,} more counted, the worst case, for requests lost in a crash"
            if state.tokens_unknown
            else ""
        )
        return Stop(
            "budget_exceeded",
            f"{TOKEN_LIMIT} ({agent.max_run_tokens:,}, {state.usage.total_tokens:,} used) leaves too few for "
            f"another call: ~{prompt:,} prompt tokens plus at least {least} output tokens{lost}",
        )
    max_tokens = agent.max_tokens if left is None else min(agent.max_tokens, left)
    if agent.max_budget_usd is None:
        return CallPlan(max_tokens, prompt)
    if price is None:  # checked when the run starts; kept here for direct callers
        raise ConfigError("max_budget_usd is set but the price of this model is unknown")
    remaining = agent.max_budget_usd - state.spent_usd
    affordable = price.affordable_output_tokens(prompt, remaining)
    max_tokens = min(max_tokens, affordable)
    # 0 affordable: the prompt alone costs more than is left; a max_tokens below the minimum is the agent's own.
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


def stopped_at_token_limit(state: RunState) -> bool:
    """Whether ``max_run_tokens``, not the dollar budget, stopped the run (``budget_exceeded``)."""
    return state.status == "budget_exceeded" and (state.reason or "").startswith(TOKEN_LIMIT)


def output_left(agent: Agent, state: RunState, prompt: int, pending: int = 0) -> int | None:
    """The output tokens ``max_run_tokens`` leaves a call whose prompt is ``prompt`` tokens (None: no
    limit): the limit less every token the run's usage counts (its turns, retries, summaries, a
    policy's calls, what a call cut short consumed, and its sub-agents' tokens, all charged there
    as they are to the cost) and the worst case of requests lost in a crash (``tokens_unknown``,
    as ``cost_unknown_usd`` for the budget), less ``pending`` tokens not charged yet (a request already out,
    replies of the turn) and those promised to work running beside the call (a sub-agent's share)."""
    if agent.max_run_tokens is None:
        return None
    return agent.max_run_tokens - state.spent_tokens - pending - state.held_tokens - prompt


def least_output(agent: Agent) -> int:
    """The fewest output tokens a turn's call is worth sending for: ``min_output_tokens``, at most
    ``max_tokens``, at least one (a prompt no limit can answer is never sent)."""
    return max(min(agent.min_output_tokens, agent.max_tokens), 1)


def plans_calls(agent: Agent) -> bool:
    """Whether each call is planned against a limit (the budget, the token limit): its prompt is
    then counted exactly (the tokenizer loaded, the system prompt and tools counted) first."""
    return agent.max_budget_usd is not None or agent.max_run_tokens is not None
