"""Running the pending tool calls, one by one in declared order.

Every call ends in exactly one result written to the transcript, whatever happens: an unknown
tool, arguments that are not JSON or fail the schema, a raising tool, a rejection, an answer from
the read-only cache. Only three things leave a call pending: a needed approval, an intent found
without a result after a crash (outcome unknown), and cancellation. Each is a stop with a reason.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from typing import Any

from tether.errors import RunCancelled
from tether.events import ApprovalRequired, Decision, Event, ToolProgress, ToolResultEvent, ToolStart
from tether.harness.agent import Stop
from tether.harness.context import RunContext
from tether.harness.middleware import chain_tool
from tether.harness.pump import Finished, pump
from tether.harness.state import Intent, ToolStats, args_hash
from tether.messages import (
    NOT_JSON,
    ImagePart,
    TextPart,
    ToolCallPart,
    ToolMessage,
    ToolResultStatus,
    canonical_arguments,
    clean_text,
    parse_arguments,
)
from tether.status import ApprovalInterruption, OutcomeUnknownInterruption
from tether.tools.base import ToolContext, ToolInputError, ToolInterrupt, ToolResult, validate_arguments

__all__ = ["run_pending"]


def _args_value(arguments: str) -> Any:
    value = parse_arguments(arguments)
    return arguments if value is NOT_JSON else value


def _record(
    rc: RunContext,
    call: ToolCallPart,
    text_or_result: str | ToolResult,
    status: ToolResultStatus,
    ms: float = 0.0,
    cached_from: str | None = None,
) -> ToolResultEvent:
    """Append the call's one result, update statistics, persist, and describe it as an event."""
    if isinstance(text_or_result, ToolResult):
        parts = tuple(_clean(p) for p in text_or_result.parts())
        if text_or_result.is_error and status == "ok":
            status = "error"
    else:
        parts = (TextPart(text=clean_text(text_or_result)),)
    state = rc.state
    words = state.approved_reasons.pop(call.id, None)
    if words:  # law 4: the person's words with their approval, where the model reads them
        parts = (TextPart(text=clean_text(f"[The user approved this call to {call.name}. Reason: {words}]\n")), *parts)
    message = ToolMessage(call_id=call.id, name=call.name, content=parts, status=status, cached_from=cached_from)
    state.messages.append(message)
    state.intents.pop(call.id, None)
    stats = state.tool_stats.setdefault(call.name, ToolStats())
    stats.calls += 1
    stats.total_ms += ms
    stats.errors += status == "error"
    stats.cached += status == "cached"
    canon = canonical_arguments(call.arguments)
    rc.remember(message, (call.name, canon) if canon is not None else None)
    rc.persist(durable=False)  # made durable before any side effect or the next request
    widget = text_or_result.widget if isinstance(text_or_result, ToolResult) else None
    return ToolResultEvent(
        state.run_id, call.id, call.name, ok=not message.is_error, ms=round(ms, 3), status=status, widget=widget
    )


def _clean(part: TextPart | ImagePart) -> TextPart | ImagePart:
    if isinstance(part, TextPart):
        text = clean_text(part.text)
        return part if text is part.text else TextPart(text=text)
    return part


def _rejection_text(name: str, reason: str, outcome_unknown: bool) -> str:
    if outcome_unknown:
        # The call did start: "it was not run" would be false. The person's words are the record.
        text = (
            f"This call to {name} started before tether's process stopped and left no result, so "
            "tether could not tell whether it took effect. A person checked and decided not to run "
            "it again."
        )
        return (
            f"{text} What they found: {reason}"
            if reason
            else f"{text} They gave no account of what happened: do not assume it succeeded."
        )
    text = f"The user declined this call to {name}; it was not run."
    return f"{text} Reason: {reason}" if reason else text


async def run_pending(rc: RunContext, calls: list[ToolCallPart]) -> AsyncIterator[Event]:
    """Run ``calls``; on a stop, set ``rc.halt`` and return with the rest still pending."""
    for call in calls:
        async for event in _run_one(rc, call):
            yield event
        if rc.halt is not None:
            return


async def _run_one(rc: RunContext, call: ToolCallPart) -> AsyncIterator[Event]:
    state, tool = rc.state, rc.tools.get(call.name)
    if call.id in state.rejected:
        text = _rejection_text(call.name, state.rejected[call.id], call.id in state.intents)
        yield Decision(state.run_id, call.id, call.name, "rejected", state.rejected[call.id])
        yield _record(rc, call, text, "rejected")
        return
    if tool is None:
        known = ", ".join(sorted(rc.tools)) or "none"
        yield _record(rc, call, f"Error: there is no tool named {call.name!r}. Available tools: {known}.", "error")
        return
    try:
        args = validate_arguments(tool, call.arguments)
    except ToolInputError as exc:
        yield _record(rc, call, f"Error: {exc}", "error")
        return
    if tool.read_only and rc.agent.dedupe_read_only and getattr(tool, "cacheable", True):
        canon = canonical_arguments(call.arguments)
        earlier = rc.read_cache.get((call.name, canon)) if canon is not None else None
        # A tool whose answer follows the world (a file's size and mtime) says how the world stood.
        mark = getattr(tool, "cache_token", None)
        if mark is not None:
            token = mark(args, rc.cwd)
            if earlier is not None and (token is None or rc.read_marks.get(earlier.call_id) != token):
                earlier = None
            rc.read_marks[call.id] = token
        if earlier is not None:
            note = (
                f"[Same call as {earlier.call_id} earlier in this run: its result is repeated "
                "here; the tool was not run again.]\n"
            )
            result = ToolResult([TextPart(text=note), *earlier.content])
            yield _record(rc, call, result, "cached", cached_from=earlier.call_id)
            return
    halt = _gate(rc, call, tool)
    if halt is not None:
        kind = "outcome_unknown" if isinstance(halt.interruption, OutcomeUnknownInterruption) else "approval"
        yield ApprovalRequired(state.run_id, call.id, call.name, call.arguments, kind)
        rc.stop(halt)
        return
    if call.id in state.intents:
        await rc.persist_durably()  # the intent is on disk before the side effect can happen
    if call.id in state.approved and (getattr(tool, "needs_approval", False) or call.id in state.intents):
        yield Decision(state.run_id, call.id, call.name, "approved", state.approved_reasons.get(call.id, ""))
    async for event in _execute(rc, call, tool, args):
        yield event


def _gate(rc: RunContext, call: ToolCallPart, tool: Any) -> Stop | None:
    """Approval and crash checks before a call runs; records the intent when it may run.

    An intent without a result means the call started and the process died (law 3): the run stops
    for a person whatever was approved before, and a rerun the person approved waits while the
    process the first attempt started is still alive."""
    state = rc.state
    approved = state.approved.get(call.id) == args_hash(call.arguments)
    intent = state.intents.get(call.id)
    if intent is not None and not (intent.rerun and approved):
        return _outcome_unknown(rc, call, intent)
    if intent is not None and _still_running(intent):
        return Stop(
            "interrupted",
            f"{call.name} from before the crash is still running as process "
            f"{intent.pid}; a second copy will not be started while it lives. Wait for it "
            f"(`tether resume {state.run_id} --wait`), stop it (`--kill`), or reject with what "
            "happened",
            _outcome_interruption(rc, call, intent),
        )
    if getattr(tool, "needs_approval", False) and not approved:
        return Stop(
            "interrupted",
            f"{call.name} needs approval",
            ApprovalInterruption(call_id=call.id, tool_name=call.name, args=_args_value(call.arguments)),
        )
    if tool.read_only or getattr(tool, "idempotent", False):
        return None
    state.intents[call.id] = Intent(key=f"{state.run_id}:{call.id}")  # saved durably by the caller
    return None


def _outcome_interruption(rc: RunContext, call: ToolCallPart, intent: Intent) -> OutcomeUnknownInterruption:
    return OutcomeUnknownInterruption(
        call_id=call.id,
        tool_name=call.name,
        args=_args_value(call.arguments),
        idempotency_key=intent.key,
        pid=intent.pid,
        still_running=_still_running(intent),
    )


def _outcome_unknown(rc: RunContext, call: ToolCallPart, intent: Intent) -> Stop:
    running = (
        f" Its process {intent.pid} is still running: wait for it (`tether resume {rc.state.run_id} "
        "--wait`) or stop it (`--kill`) before deciding."
        if _still_running(intent)
        else ""
    )
    return Stop(
        "interrupted",
        f"outcome unknown: {call.name} started before the process stopped and left "
        f"no result.{running} Approve to run it again, or reject with what happened",
        _outcome_interruption(rc, call, intent),
    )


def _still_running(intent: Intent) -> bool:
    if intent.pid is None:
        return False
    from tether.processes import process_alive

    return process_alive(intent.pid, intent.process)


def _on_process(rc: RunContext, call_id: str) -> Any:
    """What a tool calls with the pid of a process it started: saved with the intent at once."""

    def record(pid: int) -> None:
        intent = rc.state.intents.get(call_id)
        if intent is None:
            return
        from tether.processes import process_identity

        intent.pid, intent.process = pid, process_identity(pid)
        rc.persist(durable=False)  # it matters only while the process can outlive tether

    return record


def _tool_context(rc: RunContext, call: ToolCallPart, key: str | None) -> ToolContext:
    """What the tool may use: where to work, the signal, the run's limits left, the event sink."""
    state, agent, run_id = rc.state, rc.agent, rc.state.run_id
    return ToolContext(
        cwd=rc.cwd,
        signal=rc.signal,
        run_id=run_id,
        call_id=call.id,
        idempotency_key=key,
        state=state,
        on_progress=lambda label: rc.emit(ToolProgress(run_id, call.id, call.name, label)),
        on_process=_on_process(rc, call.id),
        on_event=rc.emit,
        budget_left_usd=None if agent.max_budget_usd is None else agent.max_budget_usd - state.spent_usd,
        turns_left=None if agent.max_turns is None else agent.max_turns - state.turns - state.delegated_turns,
        on_save=lambda durable: rc.persist(durable=durable),
        run_agent=rc.run_agent,
    )


async def _execute(rc: RunContext, call: ToolCallPart, tool: Any, args: dict[str, Any]) -> AsyncIterator[Event]:
    state = rc.state
    run_id = state.run_id
    key = None if tool.read_only else f"{run_id}:{call.id}"
    yield ToolStart(run_id, call.id, call.name, call.arguments)
    started = time.perf_counter()

    async def work() -> ToolResult | str | Stop:
        ctx = _tool_context(rc, call, key)

        async def innermost() -> ToolResult | str | Stop:
            result: ToolResult | str = await tool.execute(args, ctx)
            return result

        return await chain_tool(rc.agent.middleware, rc, call, args, innermost)()

    # Only the tool's own work is inside the try: a failure to record its result (the store) is
    # not the tool's failure, and must not give the call a second result.
    value: ToolResult | str | Stop | Exception
    try:
        async for item in pump(work, rc.sink, rc.signal, cancel_work=not getattr(tool, "ends_on_cancel", False)):
            if isinstance(item, Finished):
                value = item.value
                break
            yield item
    except (ToolInterrupt, RunCancelled) as exc:
        # The call stays pending (a resume runs it, or asks about it): a sub-agent waits for a
        # person, so does this run; or Stop cut it. The trace says which.
        interrupted = isinstance(exc, ToolInterrupt)
        if isinstance(exc, ToolInterrupt):
            rc.stop(Stop("interrupted", exc.reason, exc.interruption))
        else:
            rc.stop(Stop.cancelled(exc.reason))
        ms = round((time.perf_counter() - started) * 1000, 3)
        status = "interrupted" if interrupted else "cancelled"
        yield ToolResultEvent(run_id, call.id, call.name, ok=False, ms=ms, status=status)
        return
    except Exception as exc:
        value = exc
    yield _outcome(rc, call, value, (time.perf_counter() - started) * 1000)


def _outcome(
    rc: RunContext, call: ToolCallPart, value: ToolResult | str | Stop | Exception, ms: float
) -> ToolResultEvent:
    """The call's one result, from what its work ended with (a policy's stop, a failure, a result)."""
    if isinstance(value, Stop):  # a policy ended the run: the call still gets its result
        event = _record(rc, call, f"Not run: {value.reason}", "error", ms)
        rc.stop(value)
        return event
    if isinstance(value, Exception):
        event = _record(rc, call, rc.agent.tool_error_text(call.name, value), "error", ms)
        if rc.agent.tool_errors_are_fatal:
            rc.stop(Stop("failed", f"tool {call.name} failed: {value}"))
        return event
    if not isinstance(value, str | ToolResult):
        return _record(
            rc,
            call,
            f"Error: the tool {call.name} returned {type(value).__name__}, not text or a "
            "ToolResult; this is a bug in the tool, not in your arguments.",
            "error",
            ms,
        )
    return _record(rc, call, value, "ok", ms)
