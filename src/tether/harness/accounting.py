"""What a model call costs the run: the note saved before it is sent, the charge after it, and a
call besides the turns (a summary, a policy's verdict) accounted like one (law 6).

Below the turn (:mod:`tether.harness.model_call`) and compaction, which both use it.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from tether.errors import ProviderError, RunCancelled
from tether.harness.context import Candidate, RunContext
from tether.harness.limits import output_left
from tether.harness.state import CallInFlight, RunState
from tether.providers.base import (
    ModelRequest,
    ModelResponse,
    ResponseDone,
    complete_usage,
    prompt_tokens,
    reply_tokens,
)
from tether.status import TOKEN_LIMIT
from tether.tokens import estimate_tokens
from tether.usage import Usage

__all__ = [
    "CallBounds",
    "accounted",
    "charge",
    "count_abandoned",
    "join_in_flight",
    "leave_in_flight",
    "note_in_flight",
    "side_call",
]


async def note_in_flight(rc: RunContext, prompt_tokens: int, max_tokens: int) -> CallInFlight:
    """Save what is about to be asked before asking (every model call: turns and summaries): a
    request the process dies during is billed by the provider, and a resume counts its worst case
    as spent-unknown (see the loop)."""
    price = rc.price
    worst = price.worst_case(prompt_tokens, max_tokens) if price else None
    rc.state.call_in_flight = CallInFlight(
        model=rc.model_name, prompt_tokens=prompt_tokens, max_tokens=max_tokens, max_cost_usd=worst
    )
    in_flight = rc.state.call_in_flight
    await rc.persist_durably()  # the step's one durable save: the reply and results before it, and this note
    return in_flight


def accounted(response: ModelResponse, request: ModelRequest, model: str, planned: int = 0) -> ModelResponse:
    """The reply with usage the run can be charged for: what the provider left out estimated, and a
    count no call can have taken for one left out (:func:`~tether.providers.base.complete_usage`,
    which the wires apply themselves). A provider passed as ``Agent(model=...)`` that reported no
    usage made its calls free, and a negative count paid the budget back.

    ``planned``: the prompt the call's plan estimated (its note in flight). A reported prompt under
    half of it, and under half of what the request sent counts, is one the server left out (a
    server that said 1 token for every prompt had the history left out of the next call's plan,
    and of what the run was charged): the request's own count stands for it, marked estimated,
    and the next plan starts from it."""
    message = response.message
    usage = complete_usage(message.usage, request, message, model)
    if planned and usage.prompt_tokens * _IMPLAUSIBLE < planned:
        counted = prompt_tokens(request, _counter_for(model))
        if usage.prompt_tokens * _IMPLAUSIBLE < counted:
            usage = usage.model_copy(update={"prompt_tokens": counted, "estimated": True})
    # The reply is in hand: a count under half of what it wrote is one the server left out (usage
    # per chunk, the last chunk's 1 for a reply of thousands), and a run charged that went on to
    # 2.5 times its budget. Never more than the call allowed: its plan priced that much.
    written = min(reply_tokens(message, _counter_for(model)), request.max_tokens or _NO_LIMIT)
    if usage.completion_tokens * _IMPLAUSIBLE < written and written - usage.completion_tokens > _SLACK:
        usage = usage.model_copy(update={"completion_tokens": written, "estimated": True})
    if usage == message.usage:
        return response
    from dataclasses import replace

    return replace(response, message=message.model_copy(update={"usage": usage}))


# A reported prompt under 1/this of tether's own count of the request is taken for one left out:
# tokenizers and chat templates differ by tens of per cent, not by half.
_IMPLAUSIBLE = 2
# ... and short of it by more than this: servers frame a short reply's calls in a few tokens more or less.
_SLACK = 16
_NO_LIMIT = 1 << 62


def _counter_for(model: str) -> Callable[[str], int]:
    """``model``'s counter, or the estimate while its BPE is not loaded (never waited for here)."""
    from tether.tokens import count_tokens, counter_for, encoding_loaded

    count = counter_for(model)
    return estimate_tokens if count is count_tokens and not encoding_loaded() else count


def charge(rc: RunContext, usage: Usage | None, model: Candidate | None = None) -> None:
    """Add one call's usage and its cost to the run (the call's note in flight is over); a model
    without a known price makes the run's cost unknown, never zero. ``model``: the one that
    answered, when it is not the run's (a policy's classifier, say)."""
    state = rc.state
    price, name = (model.price, model.name) if model is not None else (rc.price, rc.model_name)
    state.call_in_flight = None
    if usage is not None:
        state.usage = state.usage + usage
        if price is not None:
            state.cost_usd += price.cost(usage)
    if price is None and name not in state.unpriced_models:
        state.unpriced_models.append(name)


async def side_call(
    rc: RunContext, request: ModelRequest, model: Candidate | None = None, bounds: CallBounds | None = None
) -> ModelResponse:
    """A model call besides the run's turns (a summary, a policy's verdict), accounted like one:
    noted in flight before it is sent, charged after, counted if it is cut (law 6). With
    ``bounds`` it is streamed, and stopped when nothing new comes for ``idle_s`` or it runs past
    ``limit_s``: a :class:`ProviderError` that says which, the call charged as far as it got."""
    from tether.harness.limits import with_margin

    candidate = model or rc.model
    count = _counter(rc, candidate.name)
    # The whole prompt as the server counts it (its schema, tools and markers too), with the
    # margin a turn's plan keeps: text alone fell ~80 tokens short of a verdict's prompt, and the
    # call the budget allowed ended the run above it.
    prompt = with_margin(prompt_tokens(request, count))
    max_tokens = request.max_tokens or rc.agent.max_tokens
    price = candidate.price
    budget = rc.agent.max_budget_usd
    # A request already out (the turn whose reply a policy judges, or a call beside this one) is
    # not charged yet: its worst case counts as spent, so the two together stay inside the budget;
    # so does what is promised to work running beside it (a sub-agent's budget, not spent yet).
    outer = rc.state.call_in_flight
    if budget is not None and price is not None:
        pending = (outer.max_cost_usd or 0.0) if outer is not None else 0.0
        left = budget - rc.state.spent_usd - pending - rc.state.held_usd
        affordable = price.affordable_output_tokens(prompt, left)
        if affordable < min(max_tokens, max(rc.agent.min_output_tokens, 1)):  # 0: not even the prompt
            raise ProviderError(f"the remaining budget cannot pay for a call to {candidate.name}")
        if affordable < max_tokens:
            from dataclasses import replace

            max_tokens = affordable
            request = replace(request, max_tokens=max_tokens)
    request = _within_tokens(rc, request, prompt, max_tokens, candidate.name)
    max_tokens = request.max_tokens or max_tokens
    worst = price.worst_case(prompt, max_tokens) if price else None
    own = CallInFlight(model=candidate.name, prompt_tokens=prompt, max_tokens=max_tokens, max_cost_usd=worst)
    join_in_flight(rc.state, own)  # a kill now counts both
    await rc.persist_durably()
    if rc.signal.cancelled:  # Stop while the note was saved: nothing was sent, nothing is billed
        _over(rc, own)
        rc.signal.raise_if_cancelled()
    streamed: list[str] = []
    whole = bounds is None or not rc.agent.stream
    sent = time.monotonic()  # the trace's span of the call runs from here to its end
    try:
        if bounds is None or whole:
            limit = None if bounds is None else bounds.limit_s
            response = await rc.signal.race(_within(candidate.provider.complete(request), limit, candidate.name))
        else:
            response = await rc.signal.race(_bounded(candidate.provider, request, bounds, streamed, candidate.name))
    except (RunCancelled, _Stopped, asyncio.CancelledError) as exc:
        # Stopped, a reply not streamed goes on being written (and billed) unread: charged whole,
        # as a turn's is; a streamed one as far as it got. Never more output than it allowed.
        # (CancelledError: its caller stopped waiting for it, under a time limit of its own.)
        streamed_tokens = sum(estimate_tokens(t) for t in streamed)
        completion = max_tokens if whole else min(streamed_tokens, max_tokens)
        _over(rc, own, Usage(prompt_tokens=prompt, completion_tokens=completion, estimated=True), candidate, sent)
        if isinstance(exc, _Stopped):
            raise ProviderError(str(exc)) from None
        raise
    except BaseException:
        if streamed:  # cut after it streamed, as a turn's can be: billed as far as it got
            completion = min(sum(estimate_tokens(t) for t in streamed), max_tokens)  # no more than it allowed
            _over(rc, own, Usage(prompt_tokens=prompt, completion_tokens=completion, estimated=True), candidate, sent)
        else:
            _over(rc, own)  # a refused request is not billed
        raise
    response = accounted(response, request, candidate.name, prompt)
    _over(rc, own, response.message.usage, candidate, sent)
    return response


def _within_tokens(rc: RunContext, request: ModelRequest, prompt: int, max_tokens: int, name: str) -> ModelRequest:
    """``request`` allowed the output the run's token limit leaves (``max_run_tokens``), the
    request already out counted at its worst; a ProviderError when it leaves too few to ask."""
    tokens = output_left(rc.agent, rc.state, prompt, rc.state.tokens_in_flight)
    if tokens is None:
        return request
    if tokens < min(max_tokens, max(rc.agent.min_output_tokens, 1)):
        raise ProviderError(f"{TOKEN_LIMIT} leaves too few tokens for a call to {name}")
    if tokens >= max_tokens:
        return request
    from dataclasses import replace

    return replace(request, max_tokens=tokens)


def _counter(rc: RunContext, model: str) -> Callable[[str], int]:
    """How to count a prompt for ``model``: the run's counter for its own model, else that model's
    own (a verdict from a Claude model in a run of an OpenAI one is counted as Claude's prompts
    are, which is more); the estimate while a BPE is not loaded (a side call never waits for one)."""
    if model == rc.model_name:
        return rc.count if rc.counter_loaded() else estimate_tokens
    return _counter_for(model)


def join_in_flight(state: RunState, own: CallInFlight) -> None:
    """Note ``own`` as out, beside whatever request is already out: a kill then counts both, and a
    budget check of a third counts both worst cases as spent. Saving the note is the caller's."""
    outer = state.call_in_flight
    state.call_in_flight = own if outer is None else _joined(outer, own)


def leave_in_flight(state: RunState, own: CallInFlight) -> None:
    """``own`` is over (charged, or refused): its part of the note is taken out, leaving what
    else is still out."""
    state.call_in_flight = _without(state.call_in_flight, own)


def _joined(a: CallInFlight, b: CallInFlight) -> CallInFlight:
    """One note for two requests out at once: a resume after a kill counts both."""
    costs = [c for c in (a.max_cost_usd, b.max_cost_usd) if c is not None]
    return CallInFlight(
        model=f"{a.model} + {b.model}",
        prompt_tokens=a.prompt_tokens + b.prompt_tokens,
        max_tokens=a.max_tokens + b.max_tokens,
        max_cost_usd=sum(costs) if costs else None,
    )


def _over(
    rc: RunContext,
    own: CallInFlight,
    usage: Usage | None = None,
    model: Candidate | None = None,
    sent: float | None = None,
) -> None:
    """A side call is over: charged (with ``model``; a failed request is not), and its part of the
    note in flight taken out, leaving what else is still out. ``sent``: when it was sent
    (``time.monotonic()``), for the trace's line to say how long it took."""
    rest = _without(rc.state.call_in_flight, own)
    if model is not None:
        charge(rc, usage, model)
        if usage is not None:  # the trace's line for it: a chat span's cost is then that call's own
            from tether.events import SideCall, TraceOnly

            cost = None if model.price is None else model.price.cost(usage)
            rc.sink.put(  # trace only: not an event of the stream
                TraceOnly(
                    SideCall(
                        rc.state.run_id,
                        model.name,
                        usage.prompt_tokens,
                        usage.completion_tokens,
                        cost,
                        usage.estimated,
                        0.0 if sent is None else round(time.monotonic() - sent, 6),
                    )
                )
            )
    rc.state.call_in_flight = rest


def _without(note: CallInFlight | None, own: CallInFlight) -> CallInFlight | None:
    """``note`` with ``own``'s part taken out (None when nothing else is out)."""
    if note is None or note == own:
        return None
    models = note.model.split(" + ")
    if own.model in models:
        models.remove(own.model)
    if not models:
        return None
    cost = None if note.max_cost_usd is None else max(0.0, note.max_cost_usd - (own.max_cost_usd or 0.0))
    return CallInFlight(
        model=" + ".join(models),
        prompt_tokens=max(0, note.prompt_tokens - own.prompt_tokens),
        max_tokens=max(0, note.max_tokens - own.max_tokens),
        max_cost_usd=cost,
    )


@dataclass(frozen=True, slots=True)
class CallBounds:
    """How long a side call may go: ``idle_s`` without anything new, ``limit_s`` in all."""

    idle_s: float
    limit_s: float


class _Stopped(Exception):
    """A bounded call stopped by its bounds (billed as far as it got)."""


async def _within(call: Awaitable[ModelResponse], limit_s: float | None, name: str) -> ModelResponse:
    try:
        return await asyncio.wait_for(call, limit_s)
    except TimeoutError:
        raise _Stopped(f"{name}: the call ran past its limit of {limit_s or 0:g} s and was stopped") from None


async def _bounded(
    provider: Any, request: ModelRequest, bounds: CallBounds, streamed: list[str], name: str
) -> ModelResponse:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + bounds.limit_s
    stream = provider.stream(request).__aiter__()
    try:
        while True:
            left = deadline - loop.time()
            try:
                event = await asyncio.wait_for(anext(stream), min(bounds.idle_s, max(left, 0.0)))
            except TimeoutError:
                why = (
                    f"ran past its limit of {bounds.limit_s:g} s"
                    if left <= bounds.idle_s
                    else f"sent nothing new for {bounds.idle_s:g} s"
                )
                raise _Stopped(f"{name}: the call {why} and was stopped") from None
            except StopAsyncIteration:
                raise ProviderError(f"{name}: the stream ended without a final response") from None
            if isinstance(event, ResponseDone):
                return event.response
            text = getattr(event, "text", None)
            if isinstance(text, str):
                streamed.append(text + str(getattr(event, "unshown", "")))
    finally:
        aclose = getattr(stream, "aclose", None)
        if aclose is not None:
            with contextlib.suppress(Exception):
                await aclose()


def count_abandoned(rc: RunContext, in_flight: CallInFlight, streamed: list[str], *, sent: bool) -> None:
    """A request that ended without a reply (Stop, or a stream cut after text) was still billed for
    what it consumed: count its prompt and what it streamed, marked estimated; never more output
    than the request allowed (an estimate past it would take the run past its budget)."""
    if not sent:
        rc.state.call_in_flight = None
        return
    count = rc.count if rc.counter_loaded() else estimate_tokens  # a Stop never waits for a tokenizer
    completion = min(count("".join(streamed)), in_flight.max_tokens)
    charge(rc, Usage(prompt_tokens=in_flight.prompt_tokens, completion_tokens=completion, estimated=True))
