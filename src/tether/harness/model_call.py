"""One model turn: limits, the call (streamed), retries, fallback, overflow recovery, accounting.

See :mod:`tether.harness.retry` for the policy. The reply is recorded (transcript, usage, cost)
and persisted before the ``turn`` event is yielded, so a recorded turn is never paid for twice.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import AsyncIterator
from dataclasses import replace

from tether.errors import (
    AuthError,
    BadRequestError,
    ContextOverflowError,
    ModelNotFoundError,
    ProviderError,
    QuotaExceededError,
    ResponseError,
    RetryableError,
    RunCancelled,
)
from tether.events import Event, Fallback, ReasoningDelta, Retry, TextDelta, Turn
from tether.harness.accounting import (
    accounted,
    charge,
    count_abandoned,
    join_in_flight,
    note_in_flight,
    side_call,
)
from tether.harness.agent import Stop
from tether.harness.context import RunContext, fixed_prompt_tokens, without_secrets
from tether.harness.length import UNFINISHED, Continuation
from tether.harness.limits import CallPlan, estimate_prompt_tokens, least_output, output_left, plan_call, plans_calls
from tether.harness.middleware import StreamKind, chain_model, filter_stream, flush_stream, hook_result
from tether.harness.pump import Finished, pump
from tether.harness.retry import FirstTokenTimeout
from tether.harness.state import CallInFlight
from tether.harness.structured import request_schema
from tether.harness.tool_exec import answer_only
from tether.harness.view import model_view
from tether.messages import AssistantMessage, TextPart, ToolCallPart, ToolMessage, clean_message
from tether.providers.base import (
    ModelRequest,
    ModelResponse,
    ResponseDone,
    StreamEvent,
    StreamReasoning,
    StreamText,
    distinct_call_ids,
)
from tether.providers.http import AnswerTimedOut
from tether.status import TOKEN_LIMIT, MaxBudgetInterruption
from tether.tokens import estimate_tokens
from tether.usage import Usage

__all__ = ["ask_model", "charge", "count_abandoned", "note_in_flight", "side_call"]


class _ReplyTimeout(RetryableError):
    """A reply not streamed (``stream=False``) that was not back whole within ``reply_timeout_s``.
    The server may have written all of it and billed it: it is charged as such, and not asked again
    of the same model (a slow but healthy reply would be paid for at every attempt)."""


class _Attempt:
    """State of one turn across its attempts."""

    def __init__(self) -> None:
        self.emitted = False  # has any token of this turn reached the user?
        self.overflow_retried = False
        self.attempt = 0
        self.sent = False  # has this attempt's request been handed to the provider?
        self.given_up: list[str] = []  # models this turn fell back from, with why
        self.planned_prompt = 0  # the attempt's prompt as its note in flight estimated it


async def ask_model(rc: RunContext, continuation: Continuation | None = None) -> AsyncIterator[Event]:
    """Make one model call (with retries and fallback) or set ``rc.halt``. With ``continuation``
    the call continues the cut reply at the end of the transcript, and is merged into it."""
    turn = _Attempt()
    if plans_calls(rc.agent):
        await rc.counter_ready()  # the budget plans with exact counts
    while rc.halt is None:
        begun = await _begin(rc, turn)
        if begun is None:
            return
        plan, in_flight = begun
        streamed: list[str] = []  # what the provider streamed in this attempt, counted if its reply is lost
        replies: list[ModelResponse] = []  # what it answered (a middleware may ask it twice)
        try:
            response = None
            call = functools.partial(_call, rc, turn, plan, streamed, replies, continuation)
            async for item in pump(call, rc.sink, rc.signal):
                if isinstance(item, Finished):
                    response = item.value
                    continue
                if isinstance(item, TextDelta | ReasoningDelta):
                    turn.emitted = True  # part of this turn reached the caller
                yield item
        except RunCancelled as exc:
            # Stop while a policy still checked the request (before_model, wrap_model_call): not sent.
            # A reply not streamed that was sent goes on being written (and billed) unread: whole.
            _lost(rc, in_flight, streamed, replies, sent=turn.sent, whole=turn.sent and not rc.agent.stream)
            rc.stop(Stop.cancelled(exc.reason))
            return
        except ProviderError as exc:
            # Text streamed, or a request tether gave up waiting on (as a Stop would): billed.
            sent = bool(streamed) or isinstance(exc, FirstTokenTimeout)
            _lost(rc, in_flight, streamed, replies, sent=sent, whole=isinstance(exc, _ReplyTimeout))
            rc.persist(durable=False)  # a kill while waiting to retry must not find the note still in flight
            async for event in _recover(rc, turn, exc):
                yield event
            continue
        except Exception:
            # Anything else (a middleware that raises) ends the run; a request that went out is billed.
            _lost(rc, in_flight, streamed, replies, sent=bool(streamed))
            raise
        if isinstance(response, Stop):
            # A policy answered: before anything was sent, or after the provider's replies, which
            # were billed (a reply a wrap_model_call read and then stopped the run on is charged).
            _lost(rc, in_flight, streamed, replies, sent=bool(streamed))
            rc.stop(response)
            return
        assert response is not None
        yield _record(rc, response, plan, continuation, replies)
        return


async def _begin(rc: RunContext, turn: _Attempt) -> tuple[CallPlan, CallInFlight] | None:
    """Plan the attempt and save its note in flight; None when the run stops instead: a limit,
    or Stop heard while the note was saved (nothing was sent, nothing is billed)."""
    plan = plan_call(rc.agent, rc.state, rc.price, rc.prompt_estimate)
    if isinstance(plan, Stop):
        rc.stop(plan)
        return None
    turn.attempt += 1
    turn.sent = False
    in_flight = await _send_intent(rc, plan)
    turn.planned_prompt = in_flight.prompt_tokens
    if rc.signal.cancelled:
        count_abandoned(rc, in_flight, [], sent=False)
        rc.stop(Stop.cancelled(rc.signal.reason or "cancelled"))
        return None
    return plan, in_flight


def _lost(
    rc: RunContext,
    in_flight: CallInFlight,
    streamed: list[str],
    replies: list[ModelResponse],
    *,
    sent: bool,
    whole: bool = False,
) -> None:
    """An attempt that ended without its reply recorded: the replies the provider gave (a
    middleware failed, or Stop came, after them) are charged as it reported them; otherwise the
    request is counted as far as it streamed, when it went out, or (``whole``: a reply not streamed
    that was given up) as the whole answer the server may have written."""
    if whole and not replies:
        usage = Usage(prompt_tokens=in_flight.prompt_tokens, completion_tokens=in_flight.max_tokens, estimated=True)
        charge(rc, usage)
    elif not replies:
        count_abandoned(rc, in_flight, streamed, sent=sent)
    for reply in replies:
        charge(rc, reply.message.usage)


def _hide_secrets(exc: ProviderError) -> None:
    """A provider of one's own (``Agent(model=...)``) may quote a key tether holds in its error, as
    a server may (:meth:`~tether.providers.http.HttpTransport.scrubbing` takes out only the key it
    sent): it is out before a reason, a retry or a fallback says the error."""
    exc.args = (without_secrets(str(exc)),)
    exc.body = without_secrets(exc.body)
    exc.headers = {k: without_secrets(v) for k, v in exc.headers.items()}


async def _recover(rc: RunContext, turn: _Attempt, exc: ProviderError) -> AsyncIterator[Event]:
    """Decide what a failed attempt leads to: wait and retry, trim and retry, fall back, or fail."""
    _hide_secrets(exc)
    if isinstance(exc, ContextOverflowError):
        async for event in _overflowed(rc, turn, exc):
            yield event
        return
    if _account_or_model_refused(exc) and rc.active + 1 < len(rc.candidates) and not turn.emitted:
        # This model cannot answer for this account (out of credit, a key refused, a model that
        # is not there): waiting will not help, the next model may. The fallback event says why.
        async for event in _fall_back(rc, turn, exc):
            yield event
        return
    if not isinstance(exc, RetryableError):
        _fail(rc, turn, str(exc))
        return
    if turn.emitted:
        _fail(rc, turn, f"{exc} (after part of the reply reached the user; not retried)")
        return
    stalled = isinstance(exc, FirstTokenTimeout | _ReplyTimeout)
    policy = rc.agent.retry
    wait = policy.delay(turn.attempt, exc)
    spent = turn.attempt >= policy.max_attempts or wait is None
    if (stalled or spent) and rc.active + 1 < len(rc.candidates):
        async for event in _fall_back(rc, turn, exc):
            yield event
        return
    if isinstance(exc, _ReplyTimeout) or spent:
        _fail(rc, turn, _not_again(exc, turn.attempt, policy.max_retry_after_s, wait))
        return
    assert wait is not None  # a wait asked for past max_retry_after_s counts as spent
    async for event in _wait_to_retry(rc, turn, exc, wait):
        yield event


def _account_or_model_refused(exc: ProviderError) -> bool:
    """Out of quota, a key refused (401/403), or a model or URL that is not there (a 404, or a 400
    that says the model does not exist: :class:`ModelNotFoundError`)."""
    missing = isinstance(exc, ModelNotFoundError) or (isinstance(exc, BadRequestError) and exc.status == 404)
    return missing or isinstance(exc, QuotaExceededError | AuthError)


def _not_again(exc: ProviderError, attempts: int, max_retry_after_s: float, wait: float | None) -> str:
    """Why a failed attempt is not tried again on its model, with nothing to fall back on."""
    if isinstance(exc, _ReplyTimeout):
        return (
            f"{exc}; not asked again, since the server may have written (and billed) the whole reply: "
            "allow it longer (reply_timeout_s, the provider's timeout_s), or stream the reply (stream=True), "
            "whose stalls first_token_timeout_s bounds"
        )
    if wait is None:
        return (
            f"{exc} (the provider asked to wait {exc.retry_after} s; more than max_retry_after_s={max_retry_after_s})"
        )
    return f"{exc} (gave up after {attempts} attempts)"


async def _wait_to_retry(rc: RunContext, turn: _Attempt, exc: ProviderError, wait: float) -> AsyncIterator[Event]:
    """Wait before the next attempt (a ``retry`` event; Stop ends the wait), unless the limits
    already stop it (what the failed attempt cost may have left too little budget): then at once,
    with no retry announced and waited for in vain."""
    plan = plan_call(rc.agent, rc.state, rc.price, rc.prompt_estimate)
    if isinstance(plan, Stop):
        rc.stop(plan)
        return
    yield Retry(rc.state.run_id, turn.attempt, str(exc), round(wait, 3))
    try:
        await rc.signal.sleep(wait)
    except RunCancelled as cancelled:
        rc.stop(Stop.cancelled(cancelled.reason))


def _fail(rc: RunContext, turn: _Attempt, reason: str) -> None:
    """End the run ``failed``; the reason also says which models this turn fell back from, and why,
    and to which one it failed on (an error names its provider, not its model: two models of one
    provider, or two endpoints of one wire, read alike)."""
    if turn.given_up:
        reason += "; this turn had fallen back from " + ", then from ".join(turn.given_up) + f", to {rc.model_name}"
    rc.stop(Stop("failed", reason))


async def _overflowed(rc: RunContext, turn: _Attempt, exc: ContextOverflowError) -> AsyncIterator[Event]:
    """The first overflow of a turn compacts what can be compacted, for one more try; the second
    fails. With compaction off (``Agent(compaction=False)``) the first fails: the person chose no
    summary calls and no rewritten transcript, and the same request would overflow again."""
    if not rc.agent.compaction:
        _fail(rc, turn, f"{exc}; the context is full and compaction is off{_COMPACTION_OFF_HELP}")
        return
    if turn.overflow_retried:
        _fail(rc, turn, _overflow_reason(rc, exc))
        return
    turn.overflow_retried = True
    from tether.harness.compaction import compact

    async for event in compact(rc, reason="overflow"):
        yield event


_COMPACTION_OFF_HELP = (
    " (Agent(compaction=False)): turn it on (compaction=True) to have the older turns summarised, add "
    "ContextOverflowCleanup() (tether.harness.middleware) to the middleware to drop old tool outputs "
    "from the request, start a new session, or use a model with a larger context window"
)


def _overflow_reason(rc: RunContext, exc: ContextOverflowError) -> str:
    """Why a second overflow ends the run, and what the person can change: compaction cannot cut
    the latest turn, so name what in it fills the window."""
    from tether.harness.compaction import context_window
    from tether.tokens import message_tokens

    messages = rc.state.messages
    last = max((i for i, m in enumerate(messages) if isinstance(m, AssistantMessage)), default=-1)
    count = rc.count if rc.counter_loaded() else estimate_tokens  # the tokenizer is not waited for here
    sizes = [(message_tokens(m, count), True, m.name) for m in messages[last + 1 :] if isinstance(m, ToolMessage)]
    # The latest reply's calls are kept too: a call whose arguments fill the window (a long file
    # written in one call) was taken for its few-token result, and the advice was to trim outputs.
    reply = messages[last] if last >= 0 else None
    if isinstance(reply, AssistantMessage):
        sizes += [(count(c.arguments), False, c.name) for c in reply.tool_calls]
    window = context_window(rc)
    of = f" (this one holds {window} tokens)" if window else ""
    reason = f"{exc}; it still did not fit after compacting what could be compacted"
    if not sizes:
        return f"{reason}. Start a new session, send a shorter message, or use a model with a larger context window{of}"
    tokens, output, name = max(sizes)
    if not output:
        return (
            f"{reason}: the arguments the model wrote for its call to {name} in the latest turn are alone "
            f"about {tokens} tokens. Ask for less in one call (a long file in parts), or use a model with a "
            f"larger context window{of}"
        )
    return (
        f"{reason}: the output of {name} in the latest turn alone is about {tokens} tokens. Cut tool "
        "outputs to size (ToolOutputTrimmer(max_chars=...) in the agent's middleware), or use a model "
        f"with a larger context window{of}"
    )


async def _fall_back(rc: RunContext, turn: _Attempt, exc: ProviderError) -> AsyncIterator[Event]:
    before = rc.model_name
    rc.active += 1
    rc.count_as(rc.model_name)  # the budget plans the fallback's prompts as the fallback counts them
    if plans_calls(rc.agent):
        await rc.counter_ready()
    turn.attempt = 0
    turn.given_up.append(f"{before} ({exc})")
    yield Fallback(rc.state.run_id, before, rc.model_name, str(exc))


async def _send_intent(rc: RunContext, plan: CallPlan) -> CallInFlight:
    # Without a budget there is no plan's estimate; while the tokenizer still loads, the
    # tokenizer-free estimate is enough for this record of a worst case. The system prompt and
    # tools are counted too (rc.fixed_tokens is counted only for a budget).
    prompt = plan.prompt_estimate
    if not prompt:
        count = rc.count if rc.counter_loaded() else estimate_tokens
        fixed = rc.fixed_tokens or fixed_prompt_tokens(rc.system, rc.tool_defs, count)
        prompt = estimate_prompt_tokens(
            rc.state, fixed, count=count, trust_last_usage=not rc.stale_usage, model=rc.model_name
        )
    return await note_in_flight(rc, prompt, plan.max_tokens)


def _record(
    rc: RunContext,
    response: ModelResponse,
    plan: CallPlan,
    continuation: Continuation | None,
    replies: list[ModelResponse],
) -> Turn:
    state = rc.state
    # No two calls of the conversation share an id, whatever the provider (the wires see to it for
    # theirs; an in-process model may number its calls anew each reply): decisions and results are
    # kept by call id, and a person's decision quotes it (a retried or stale decision on an earlier
    # call must not answer a later one that has the same id and arguments). A continuation's calls
    # are the cut reply's own.
    earlier = state.messages if continuation is None else state.messages[:-1]
    message = distinct_call_ids(clean_message(response.message), earlier)
    if message.model != rc.model_name:
        message = message.model_copy(update={"model": rc.model_name})
    if continuation is not None:
        state.messages[-1] = message = continuation.merge(message)
    else:
        state.messages.append(message)
    rc.stale_usage = False  # this reply's prompt count describes the history as it is now
    # What the provider billed: every reply it gave this attempt (a wrap_model_call may have asked
    # twice and kept one), or, when a middleware answered in its place, the answer's own usage.
    usage = sum((r.message.usage or Usage() for r in replies), Usage()) if replies else message.usage
    charge(rc, usage)  # saved with the reply, in one commit
    if continuation is not None:
        # The merged reply replaces the cut one already on disk (and in the session): a rewrite.
        rc.persist(rewrite=True)
    else:
        rc.persist(durable=False)  # made durable before any side effect or the next request
    cost = None if state.unpriced_models else state.cost_usd
    return Turn(
        state.run_id,
        state.turns,
        rc.model_name,
        usage or type(state.usage)(),
        cost,
        message.finish_reason,
        plan.max_tokens,
    )


def _refuse_calls(message: AssistantMessage, continuing: bool) -> AssistantMessage:
    """Fail closed: a reply to a request that offered no tools (a terminal tool's answer, a
    governor's status report) that calls one anyway keeps its words, not its calls.

    A continuation's words are kept as they came (they join the cut text, maybe at a space); one
    that wrote none, only calls, left the answer as cut as it was, and stays cut."""
    names = ", ".join(sorted({c.name for c in message.tool_calls}))
    note = f"[tether: this reply called {names}, but no tools were offered for it; the calls were not run.]"
    kept = tuple(p for p in message.content if not isinstance(p, ToolCallPart | TextPart))  # reasoning
    if continuing:
        words = TextPart(text=f"{message.text}\n\n{note}")
        finish = message.finish_reason if message.text.strip() else UNFINISHED
        return message.model_copy(update={"content": (*kept, words), "finish_reason": finish})
    text = message.text.strip()
    return message.model_copy(update={"content": (*kept, TextPart(text=f"{text}\n\n{note}" if text else note))})


async def _call(
    rc: RunContext,
    turn: _Attempt,
    plan: CallPlan,
    streamed: list[str],
    replies: list[ModelResponse],
    continuation: Continuation | None,
) -> ModelResponse | Stop:
    state = rc.state
    # For this call only; a middleware may set it too (a governor). A continuation finishes text.
    rc.answer_only = continuation is not None or answer_only(rc)
    request: ModelRequest | Stop = ModelRequest(
        model=rc.model.model_id,
        messages=continuation.request(state.messages) if continuation is not None else state.messages,
        system=rc.system or None,
        tools=() if rc.answer_only else rc.tool_defs,
        max_tokens=plan.max_tokens,
        cache_key=state.session_id or state.run_id,
        extra=rc.agent.request_extra,
        output_schema=request_schema(rc.agent),
    )
    stack = rc.agent.middleware
    for mw in stack:
        assert isinstance(request, ModelRequest)
        request = hook_result(mw, "before_model", await mw.before_model(rc, request), ModelRequest | Stop, _REQUEST)
        if isinstance(request, Stop):
            return request
    assert isinstance(request, ModelRequest)
    result = await chain_model(
        stack, rc, lambda req: _send(rc, turn, _shown(rc, req), streamed, replies, continuation)
    )(request)
    if isinstance(result, ModelResponse) and rc.answer_only and result.message.tool_calls:
        result = ModelResponse(_refuse_calls(result.message, continuation is not None))  # nothing offered, nothing runs
    if isinstance(result, ModelResponse) and rc.halt is None:
        for kind in ("reasoning", "text"):  # what the middleware held back, now checked
            _emit_delta(rc, kind, await flush_stream(stack, rc, kind))
    return result


_REQUEST = "the request to send (or a Stop)"


def _shown(rc: RunContext, request: ModelRequest) -> ModelRequest:
    """The request as the provider gets it: the transcript as the model is shown it
    (tether.harness.view), after every middleware had its say."""
    shown = model_view(request.messages, rc.agent.completed_turns, rc.shown_as)
    return request if shown is request.messages else replace(request, messages=shown)


async def _send(
    rc: RunContext,
    turn: _Attempt,
    request: ModelRequest,
    streamed: list[str],
    replies: list[ModelResponse],
    continuation: Continuation | None,
) -> ModelResponse | Stop:
    """The innermost ``call_next``: the provider's reply (a ``wrap_model_call`` that asks again in
    this attempt sends a request the turn's plan did not price: :func:`_ask_again` plans it)."""
    if replies:
        again = await _ask_again(rc, turn, request, replies)
        if isinstance(again, Stop):
            return again
        request = again
    return await _provider_call(rc, turn, request, streamed, replies, continuation)


async def _ask_again(
    rc: RunContext, turn: _Attempt, request: ModelRequest, replies: list[ModelResponse]
) -> ModelRequest | Stop:
    """A further request in one attempt (law 6): allowed the output the budget can pay for after
    the replies this attempt already had (not charged yet: they are when the turn is recorded), or
    not sent (``budget_exceeded``); noted in flight beside them, so a kill during it counts both."""
    price, budget = rc.price, rc.agent.max_budget_usd
    prompt = max([turn.planned_prompt, *(r.message.usage.prompt_tokens for r in replies if r.message.usage)])
    had = sum(price.cost(r.message.usage) for r in replies if r.message.usage) if price else 0.0
    max_tokens = request.max_tokens or rc.agent.max_tokens
    if budget is not None and price is not None:
        left = budget - rc.state.spent_usd - had
        affordable = price.affordable_output_tokens(prompt, left)
        least = least_output(rc.agent)
        if min(max_tokens, affordable) < least:
            return Stop(
                "budget_exceeded",
                f"a middleware asked {rc.model_name} again in one turn, and the remaining budget "
                f"(${max(left, 0.0):.6f} of ${budget:.6f}, after the replies it already had) cannot pay for "
                f"another call: ~{prompt} prompt tokens plus at least {least} output tokens",
                MaxBudgetInterruption(max_budget_usd=budget, spent_usd=rc.state.spent_usd + had),
            )
        if affordable < max_tokens:
            max_tokens = affordable
            request = replace(request, max_tokens=max_tokens)
    # The token limit, after the replies it already had, counted as the budget counts them.
    tokens = output_left(
        rc.agent, rc.state, prompt, sum(r.message.usage.total_tokens for r in replies if r.message.usage)
    )
    if tokens is not None:
        if tokens < least_output(rc.agent):
            return Stop(
                "budget_exceeded",
                f"{TOKEN_LIMIT} ({rc.agent.max_run_tokens:,}) leaves too few for another call after a middleware "
                f"asked {rc.model_name} again in one turn: ~{prompt:,} prompt tokens",
            )
        if tokens < max_tokens:
            max_tokens = tokens
            request = replace(request, max_tokens=max_tokens)
    worst = price.worst_case(prompt, max_tokens) if price else None
    own = CallInFlight(model=rc.model_name, prompt_tokens=prompt, max_tokens=max_tokens, max_cost_usd=worst)
    join_in_flight(rc.state, own)
    await rc.persist_durably()
    return request


def _emit_delta(rc: RunContext, kind: StreamKind, text: str) -> None:
    if text:
        rc.emit((TextDelta if kind == "text" else ReasoningDelta)(rc.state.run_id, text))


async def _next_within(rc: RunContext, stream: AsyncIterator[StreamEvent], timeout: float) -> StreamEvent:
    """The stream's next event; a stream that then sends nothing for ``timeout`` has stalled, as
    one whose first token never comes (retried or fallen back from while nothing was shown)."""
    try:
        return await asyncio.wait_for(anext(stream), timeout)
    except TimeoutError as exc:
        raise FirstTokenTimeout(f"{rc.model_name}: the stream stalled (nothing new for {timeout} s)") from exc


class _Overrun:
    """Watches a stream for a reply far past the request's output limit: a server that does not
    honour ``max_tokens`` (or never ends its reply) would otherwise be read for ever, and held,
    past the budget that sized the limit. Counted at each doubling of what streamed (linear in all);
    cut only far past the limit (64 times, and a million tokens), since the estimate is no tokenizer
    and a test double (or a provider of one's own) may answer at any length."""

    def __init__(self, model: str, max_tokens: int | None) -> None:
        self.model, self.max_tokens = model, max_tokens
        self.chars = 0
        self.next_count = 4 * max_tokens if max_tokens else 0

    def check(self, streamed: list[str]) -> None:
        if not self.max_tokens:
            return
        self.chars += len(streamed[-1])
        if self.chars < self.next_count:
            return
        self.next_count *= 2
        tokens = estimate_tokens("".join(streamed))
        if tokens > max(64 * self.max_tokens, 1_000_000):
            raise ResponseError(
                f"{self.model}: the reply went on far past its output limit (about {tokens:,} tokens streamed "
                f"for max_tokens={self.max_tokens}), so the rest was not read: the server does not honour "
                "max_tokens"
            )


async def _provider_call(
    rc: RunContext,
    turn: _Attempt,
    request: ModelRequest,
    streamed: list[str],
    replies: list[ModelResponse],
    continuation: Continuation | None,
) -> ModelResponse:
    """The provider's reply; its streamed text goes to the caller through the middleware's
    ``filter_stream`` (which may hold some back), and a continuation's without what it repeats."""
    timeout = rc.agent.first_token_timeout_s
    turn.sent = True  # from here the provider may bill it
    if not rc.agent.stream:
        # A reply not streamed has no first token: only the whole of it can be waited for.
        limit = rc.agent.reply_timeout_s
        try:
            reply = await asyncio.wait_for(rc.provider.complete(request), limit)
        except TimeoutError as exc:
            raise _ReplyTimeout(f"{rc.model_name}: no reply within reply_timeout_s={limit} s") from exc
        except AnswerTimedOut as exc:  # the provider's own read timeout (timeout_s) came first
            raise _ReplyTimeout(f"{rc.model_name}: no reply within the provider's timeout ({exc})") from exc
        replies.append(accounted(reply, request, rc.model_name, turn.planned_prompt))
        return replies[-1]
    if continuation is not None:
        continuation.start()  # a retry streams the repeat again
    stream = rc.provider.stream(request).__aiter__()
    stack = rc.agent.middleware
    overrun = _Overrun(rc.model_name, request.max_tokens)
    try:
        try:
            event = await asyncio.wait_for(anext(stream), timeout)
        except TimeoutError as exc:
            raise FirstTokenTimeout(f"{rc.model_name}: no first token within {timeout} s") from exc
        while not isinstance(event, ResponseDone):
            if isinstance(event, StreamText | StreamReasoning):
                streamed.append(event.text if isinstance(event, StreamReasoning) else event.text + event.unshown)
                overrun.check(streamed)
                if event.text:  # an empty one only says the reply began (with a call, which streams no text)
                    kind: StreamKind = "text" if isinstance(event, StreamText) else "reasoning"
                    text = continuation.feed(event.text) if continuation is not None and kind == "text" else event.text
                    _emit_delta(rc, kind, await filter_stream(stack, rc, text, kind))
            else:
                rc.emit(event)
            event = await (anext(stream) if timeout is None else _next_within(rc, stream, timeout))
        replies.append(accounted(event.response, request, rc.model_name, turn.planned_prompt))
        if continuation is not None:
            _emit_delta(rc, "text", await filter_stream(stack, rc, continuation.flush(), "text"))
        return replies[-1]
    except StopAsyncIteration:
        raise ResponseError(f"{rc.model_name}: the stream ended without a final response") from None
    finally:
        aclose = getattr(stream, "aclose", None)
        if aclose is not None:
            await aclose()
