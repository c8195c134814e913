"""The loop: ``step = run_pending_tools() or ask_model()``, limits before every call, persistence
after every change, exactly one of five exits at the end.

``run_stream`` is the implementation; ``run`` and ``run_sync`` consume it.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

from tether.cancel import CancelSignal
from tether.errors import ProviderError, RunCancelled, UserError
from tether.events import Done, Event, ReasoningDelta, TextDelta, Turn
from tether.harness.agent import Agent
from tether.harness.context import (
    RunContext,
    StateStore,
    Tracer,
    fixed_prompt_tokens,
    tool_definitions,
)
from tether.harness.limits import CallPlan, Halt, plan_call
from tether.harness.pump import Finished, pump
from tether.harness.state import RunState, pending_tool_calls
from tether.harness.tool_exec import run_pending
from tether.messages import AssistantMessage, UserMessage
from tether.providers.base import ModelRequest, ModelResponse, ResponseDone, StreamReasoning, StreamText
from tether.providers.registry import resolve_provider
from tether.status import RESUMABLE, CancelledInterruption, RunResult
from tether.usage import lookup_price

__all__ = ["run", "run_stream", "run_sync"]


def _context(agent: Agent, state: RunState, signal: CancelSignal, store: StateStore | None) -> RunContext:
    if isinstance(agent.model, str):
        resolved = resolve_provider(agent.model)
        provider, model_id, name = resolved.provider, resolved.model_id, resolved.name
    else:
        provider = agent.model
        model_id = str(getattr(provider, "model_id", provider.name))
        name = f"{provider.name}/{model_id}"
    price = agent.price or getattr(provider, "price", None) or lookup_price(name, agent.prices)
    tools = agent.tool_map()
    defs = tool_definitions(tools)
    cwd = Path(agent.cwd or state.config.get("cwd") or Path.cwd())
    rc = RunContext(agent=agent, state=state, provider=provider, model_id=model_id, model_name=name,
                    price=price, signal=signal, cwd=cwd, tools=tools, store=store, tool_defs=defs)
    if agent.max_budget_usd is not None:
        rc.fixed_tokens = fixed_prompt_tokens(agent.instructions, defs)
    rc.rebuild_read_cache()
    state.model = name
    return rc


def _prepare(state: RunState | None, prompt: str | None) -> RunState:
    if state is None:
        state = RunState()
    elif prompt is None and state.status in ("completed", "failed"):
        raise UserError(
            f"run {state.run_id} already ended ({state.status}); give a new prompt to continue "
            "the conversation"
        )
    if prompt is not None:
        state.messages.append(UserMessage.text(prompt))
    state.status, state.interruption, state.reason = "running", None, None
    return state


async def run_stream(
    agent: Agent,
    prompt: str | None = None,
    *,
    state: RunState | None = None,
    store: StateStore | None = None,
    tracer: Tracer | None = None,
    signal: CancelSignal | None = None,
) -> AsyncIterator[Event]:
    """Run ``agent`` on ``prompt`` (a new run), or resume ``state``; yield every event.

    The last event is always :class:`~tether.events.Done` with the :class:`RunResult`.
    ``store`` persists the state after every change; ``tracer`` receives every event.
    """
    state = _prepare(state, prompt)
    signal = signal or CancelSignal()
    rc = _context(agent, state, signal, store)
    rc.persist()
    try:
        async for event in _loop(rc):
            if tracer is not None:
                tracer.write(event)
            yield event
    finally:
        await rc.provider.aclose()
        if tracer is not None:
            tracer.close()


async def _loop(rc: RunContext) -> AsyncIterator[Event]:
    state = rc.state
    while rc.halt is None:
        pending = pending_tool_calls(state)
        if pending:
            async for event in run_pending(rc, pending):
                yield event
            continue
        last = state.messages[-1] if state.messages else None
        if isinstance(last, AssistantMessage):
            rc.stop(_finish(rc, last))
            break
        plan = plan_call(rc.agent, state, rc.price, rc.fixed_tokens)
        if isinstance(plan, Halt):
            rc.stop(plan)
            break
        async for event in _ask_model(rc, plan):
            yield event
    yield _done(rc)


def _finish(rc: RunContext, last: AssistantMessage) -> Halt:
    capped = rc.agent.max_budget_usd is not None and last.finish_reason == "length"
    if capped and (last.usage is None or last.usage.completion_tokens < rc.agent.max_tokens):
        return Halt("budget_exceeded", "the last reply was cut short: the remaining budget could "
                    "not pay for a longer one")
    if last.finish_reason == "length":
        return Halt("completed", f"the reply reached max_tokens ({rc.agent.max_tokens}) and was cut")
    return Halt("completed", "the model answered")


def _done(rc: RunContext) -> Done:
    state, halt = rc.state, rc.halt
    assert halt is not None
    state.status, state.reason, state.interruption = halt.status, halt.reason, halt.interruption
    rc.persist()
    return Done(state.run_id, state.result())


async def _ask_model(rc: RunContext, plan: CallPlan) -> AsyncIterator[Event]:
    state, run_id = rc.state, rc.state.run_id
    request = ModelRequest(model=rc.model_id, messages=state.messages, system=rc.agent.instructions or None,
                           tools=rc.tool_defs, max_tokens=plan.max_tokens)
    response: ModelResponse | None = None
    try:
        async for item in pump(lambda emit: _call_model(rc, request, emit), rc.signal):
            if isinstance(item, Finished):
                response = item.value
            elif isinstance(item, StreamText):
                yield TextDelta(run_id, item.text)
            elif isinstance(item, StreamReasoning):
                yield ReasoningDelta(run_id, item.text)
    except RunCancelled as exc:
        rc.stop(Halt("interrupted", f"cancelled: {exc.reason}", CancelledInterruption(reason=exc.reason)))
        return
    except ProviderError as exc:
        rc.stop(Halt("failed", str(exc)))
        return
    assert response is not None
    message = response.message
    if message.model != rc.model_name:
        message = message.model_copy(update={"model": rc.model_name})
    usage = message.usage
    state.messages.append(message)
    if usage is not None:
        state.usage = state.usage + usage
        if rc.price is not None:
            state.cost_usd += rc.price.cost(usage)
    rc.persist()
    yield Turn(run_id, state.turns, rc.model_name, usage or state.usage.model_copy(update={}),
               state.cost_usd, message.finish_reason, plan.max_tokens)


async def _call_model(rc: RunContext, request: ModelRequest, emit: object) -> ModelResponse:
    if not rc.agent.stream:
        return await rc.provider.complete(request)
    assert callable(emit)
    async for event in rc.provider.stream(request):
        if isinstance(event, ResponseDone):
            return event.response
        emit(event)
    from tether.errors import ResponseError

    raise ResponseError(f"{rc.model_name}: the stream ended without a final response")


async def run(
    agent: Agent,
    prompt: str | None = None,
    *,
    state: RunState | None = None,
    store: StateStore | None = None,
    tracer: Tracer | None = None,
    signal: CancelSignal | None = None,
) -> RunResult:
    """Run to one of the five exits and return the result (consumes :func:`run_stream`)."""
    result: RunResult | None = None
    async for event in run_stream(agent, prompt, state=state, store=store, tracer=tracer, signal=signal):
        if isinstance(event, Done):
            result = event.result
    assert result is not None
    return result


def run_sync(
    agent: Agent,
    prompt: str | None = None,
    *,
    state: RunState | None = None,
    store: StateStore | None = None,
    tracer: Tracer | None = None,
) -> RunResult:
    """:func:`run` for code that is not async."""
    return asyncio.run(run(agent, prompt, state=state, store=store, tracer=tracer))


def is_resumable(result: RunResult) -> bool:
    return result.status in RESUMABLE
