"""Running the pending tool calls, one by one in declared order.

Every call ends in exactly one result written to the transcript, whatever happens: an unknown
tool, arguments that are not JSON or fail the schema, a raising tool, a rejection, an answer from
the read-only cache. Only three things leave a call pending: a needed approval, an intent found
without a result after a crash (outcome unknown), and cancellation. Each is a stop with a reason.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from dataclasses import dataclass
from typing import Any

from tether.errors import ConfigError, RunCancelled
from tether.events import ApprovalRequired, Decision, Event, ToolProgress, ToolResultEvent, ToolStart
from tether.harness.agent import Stop
from tether.harness.context import RunContext, told, without_secrets
from tether.harness.length import cut_answer, cut_call, too_many_cuts
from tether.harness.middleware import before_tool_call, chain_tool
from tether.harness.pump import Finished, Internal, pump
from tether.harness.state import (
    ENDED_BY_TOOL,
    Intent,
    RunState,
    ToolStats,
    args_hash,
    latest_reply,
    pending_tool_calls,
)
from tether.messages import (
    NOT_JSON,
    AssistantMessage,
    ImagePart,
    TextPart,
    ToolCallPart,
    ToolMessage,
    ToolResultStatus,
    canonical_arguments,
    clean_text,
    dump_message,
    parse_arguments,
)
from tether.status import ApprovalInterruption, OutcomeUnknownInterruption
from tether.tools.base import ToolContext, ToolError, ToolInputError, ToolInterrupt, ToolResult, validate_arguments

__all__ = ["answer_only", "ended_turn", "ends_turn", "result_is_answer", "run_pending"]


# How deep a call's arguments may nest to be kept parsed with the call a person is asked about;
# deeper ones are kept as the text the model sent. The saved state nests them a few levels further,
# and its serialiser refuses past 255 levels: the run could not be saved, and ended failed.
_SHOWN_DEPTH = 100


def _args_value(arguments: str) -> Any:
    value = parse_arguments(arguments)
    return arguments if value is NOT_JSON or _deeper_than(value, _SHOWN_DEPTH) else value


def _deeper_than(value: Any, limit: int) -> bool:
    """Whether parsed JSON nests more than ``limit`` lists or objects deep (without recursion)."""
    level: list[Any] = [value]
    for _ in range(limit + 1):
        level = [v for c in level if isinstance(c, dict | list) for v in (c.values() if isinstance(c, dict) else c)]
        if not level:
            return False
    return True


def _record(
    rc: RunContext,
    call: ToolCallPart,
    text_or_result: str | ToolResult,
    status: ToolResultStatus,
    ms: float = 0.0,
    cached_from: str | None = None,
    *,
    save: bool = True,
    message: ToolMessage | None = None,
) -> ToolResultEvent:
    """Append the call's one result (``message``, when it was made before: see ``Intent.landed``),
    update statistics, persist (unless the caller saves several at once), and describe it as an
    event."""
    state = rc.state
    message = message or _message(rc, call, text_or_result, status, cached_from)
    status = message.status
    state.approved_reasons.pop(call.id, None)
    state.messages.append(message)
    state.intents.pop(call.id, None)
    # A decision is for this call's one run: a later call that reuses the id (a model or server
    # that numbers its calls anew each turn) is asked about again, never run on this "yes".
    state.approved.pop(call.id, None)
    state.rejected.pop(call.id, None)
    stats = state.tool_stats.setdefault(call.name if call.name in rc.tools else _cut_name(call.name), ToolStats())
    stats.calls += 1
    stats.total_ms += ms
    stats.errors += status == "error"
    stats.cached += status == "cached"
    canon = canonical_arguments(call.arguments)
    rc.remember(message, (call.name, canon) if canon is not None else None)
    if save:
        rc.persist(durable=False)  # made durable before any side effect or the next request
    widget = text_or_result.widget if isinstance(text_or_result, ToolResult) else None
    return ToolResultEvent(
        state.run_id, call.id, call.name, ok=not message.is_error, ms=round(ms, 3), status=status, widget=widget
    )


# Providers take tool names of at most 64 characters; a longer one is no tool of the agent's. The
# name a model made up is quoted back, and counted in the run's statistics (saved with each
# commit), only this far: a reply of a thousand names of 50,000 characters made every save of
# the run write them all again (20 s for 400), and each error quoted its name whole.
_NAME_SHOWN = 64


def _message(
    rc: RunContext,
    call: ToolCallPart,
    text_or_result: str | ToolResult,
    status: ToolResultStatus,
    cached_from: str | None,
) -> ToolMessage:
    """The call's one result as the transcript holds it."""
    if isinstance(text_or_result, ToolResult):
        parts = tuple(_clean(p) for p in text_or_result.parts())
        if text_or_result.is_error:  # an error may quote a key (an MCP server's "bad token sk-..."): not kept
            parts = tuple(TextPart(text=without_secrets(p.text)) if isinstance(p, TextPart) else p for p in parts)
        if text_or_result.is_error and status == "ok":
            status = "error"
    else:
        parts = (TextPart(text=clean_text(text_or_result)),)
    words = rc.state.approved_reasons.get(call.id)
    if words:  # law 4: the person's words with their approval, where the model reads them
        parts = (TextPart(text=clean_text(f"[The user approved this call to {call.name}. Reason: {words}]\n")), *parts)
    withheld = text_or_result.args_withheld if isinstance(text_or_result, ToolResult) else None
    return ToolMessage(
        call_id=call.id, name=call.name, content=parts, status=status, cached_from=cached_from, args_withheld=withheld
    )


def _cut_name(name: str) -> str:
    return name if len(name) <= _NAME_SHOWN else f"{name[:_NAME_SHOWN]}… ({len(name)} characters)"


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
    """Run ``calls``; on a stop, set ``rc.halt`` and return with the rest still pending.

    Adjacent calls that may run alongside others form one batch and run at the same time; any
    other call is a barrier that waits for what came before it. Once a terminal tool of the reply
    has succeeded (in this process or before a crash), the calls still pending are skipped."""
    ended = ended_turn(rc)  # a terminal call that succeeded before a crash
    for batch in _batches(rc, calls):
        if ended is not None:
            break
        since = len(rc.state.messages)
        if len(batch) == 1:
            async for event in _run_one(rc, batch[0]):
                yield event
        else:
            async for event in _run_batch(rc, batch):
                yield event
        if rc.halt is not None:
            break
        ended = _ended_by(rc, batch, since)
    _in_declared_order(rc)
    if rc.halt is not None:
        return
    cuts = too_many_cuts(rc.state.messages, rc.agent.max_tokens)
    if cuts is not None:
        rc.stop(cuts)
        return
    ended = ended_turn(rc)
    if ended is not None:
        for event in _end_turn(rc, *ended):
            yield event


def _in_declared_order(rc: RunContext) -> None:
    """Put the latest reply's results in the order of its calls (law 1), where a Stop left them
    out of it: a call of a batch that finished while one before it still ran was recorded, and the
    one before got its result on resume, after it. Checked once a reply's calls have run, before
    any request shows them to a model."""
    state = rc.state
    i = latest_reply(state)
    reply = state.messages[i] if i >= 0 else None
    results = state.messages[i + 1 :]
    if not isinstance(reply, AssistantMessage) or not all(isinstance(m, ToolMessage) for m in results):
        return
    order = {c.id: k for k, c in enumerate(reply.tool_calls)}
    keys = [order.get(m.call_id, len(order)) for m in results if isinstance(m, ToolMessage)]
    if keys == sorted(keys):
        return
    state.messages[i + 1 :] = [m for _, m in sorted(zip(keys, results, strict=True), key=lambda pair: pair[0])]
    rc.persist(rewrite=True, durable=False)  # made durable before any side effect or the next request


def _batches(rc: RunContext, calls: list[ToolCallPart]) -> list[list[ToolCallPart]]:
    out: list[list[ToolCallPart]] = []
    for call in calls:
        if out and rc.agent.max_parallel_tools > 1 and _parallel(rc, call) and _parallel(rc, out[-1][-1]):
            out[-1].append(call)
        else:
            out.append([call])
    return out


def _parallel(rc: RunContext, call: ToolCallPart) -> bool:
    """Whether ``call`` may run at the same time as its neighbours: its tool says so, or is
    read-only and says nothing. A call that may end the turn never does (what follows it may be
    skipped); a call with no tool only gets an error, so it joins any batch."""
    tool = rc.tools.get(call.name)
    if tool is None:
        return True
    if ends_turn(rc, tool) is not None:
        return False
    flag = getattr(tool, "parallel", None)
    return bool(tool.read_only) if flag is None else bool(flag)


def ends_turn(rc: RunContext, tool: Any) -> str | None:
    """``"result"`` when a successful call of ``tool`` ends the run with its result as the answer,
    ``"answer"`` when one more model call (no tools offered) writes it, None otherwise."""
    if tool.name in rc.agent.stop_at_tools:
        return "result"
    terminal = getattr(tool, "terminal", False)
    if terminal == "answer":
        return "answer"
    return "result" if terminal is True else None


def ended_turn(rc: RunContext) -> tuple[ToolMessage, str] | None:
    """The result of the last reply's terminal call that succeeded, and how it ends the turn
    (see :func:`ends_turn`); None when the last message is an answer or no terminal call
    succeeded. Worked out from the transcript, so a resume ends the turn the same way."""
    messages = rc.state.messages
    for i in range(len(messages) - 1, -1, -1):
        m = messages[i]
        if isinstance(m, AssistantMessage):
            ok = {r.call_id: r for r in messages[i + 1 :] if isinstance(r, ToolMessage) and r.status == "ok"}
            for c in m.tool_calls:
                tool = rc.tools.get(c.name)
                mode = ends_turn(rc, tool) if tool is not None and c.id in ok else None
                if mode is not None:
                    return ok[c.id], mode
            return None
    return None


def _ended_by(rc: RunContext, batch: list[ToolCallPart], since: int) -> tuple[ToolMessage, str] | None:
    """:func:`ended_turn` once ``batch`` has run, when none of the reply's calls before it had
    ended the turn: only the batch's own results (recorded from ``since`` on) are looked at. A
    look at the whole reply after every batch made a reply of n calls cost n² steps."""
    messages = rc.state.messages
    if len(messages) < since:  # the transcript was rewritten meanwhile: look at all of it
        return ended_turn(rc)
    ok = {m.call_id: m for m in messages[since:] if isinstance(m, ToolMessage) and m.status == "ok"}
    for call in batch:
        tool = rc.tools.get(call.name)
        mode = ends_turn(rc, tool) if tool is not None and call.id in ok else None
        if mode is not None:
            return ok[call.id], mode
    return None


def result_is_answer(rc: RunContext) -> bool:
    """Whether a terminal call's result is to become the answer and is not written yet (the
    process may have died between the two): :func:`run_pending` writes it."""
    ended = ended_turn(rc)
    return ended is not None and ended[1] == "result"


def answer_only(rc: RunContext) -> bool:
    """Whether the next model call is offered no tools: a terminal call with
    ``terminal="answer"`` succeeded, and only the answer is left to write."""
    ended = ended_turn(rc)
    return ended is not None and ended[1] == "answer"


def _end_turn(rc: RunContext, result: ToolMessage, mode: str) -> Iterator[Event]:
    """The calls still pending get a result saying why they did not run; with ``"result"`` the
    terminal call's result becomes the answer (an assistant message tether writes). One save for
    all of it: a crash leaves the turn before or after, and either ends the same way."""
    events = [
        _record(
            rc,
            call,
            f"Not run: {result.name} ended the turn before this call to {call.name} could run.",
            "skipped",
            save=False,
        )
        for call in pending_tool_calls(rc.state)
    ]
    if mode == "result":
        answer = AssistantMessage(
            content=(TextPart(text=result.text),), model=f"tool/{result.name}", finish_reason=ENDED_BY_TOOL
        )
        rc.state.messages.append(answer)
    rc.persist(durable=False)
    yield from events


@dataclass(slots=True)
class _Answered:
    """A call settled without running: its result, and the events that go before it."""

    result: str | ToolResult
    status: ToolResultStatus
    cached_from: str | None = None
    events: tuple[Event, ...] = ()
    halt: Stop | None = None  # a middleware ended the run at this call (its result says why)
    message: ToolMessage | None = None  # the result as recorded before a crash (``Intent.landed``)


@dataclass(slots=True)
class _Waiting:
    """A call that needs a person's decision before it may run."""

    halt: Stop
    event: ApprovalRequired


@dataclass(slots=True)
class _Ready:
    tool: Any
    args: dict[str, Any]


async def _admitted(
    rc: RunContext, calls: list[ToolCallPart], into: list[_Answered | _Waiting | _Ready]
) -> AsyncIterator[Event]:
    """What happens to each of ``calls`` before anything runs (:func:`_admit`), added to ``into``;
    yields the events the middleware emitted meanwhile."""

    async def admit_all() -> list[_Answered | _Waiting | _Ready]:
        return [await _admit(rc, call) for call in calls]

    # Stop cuts it at once, as it cuts a tool (a hook's model call is noted before it is sent).
    async for item in pump(admit_all, rc.sink, rc.signal):
        if isinstance(item, Finished):
            into.extend(item.value)
        else:
            yield item


async def _run_one(rc: RunContext, call: ToolCallPart) -> AsyncIterator[Event]:
    into: list[_Answered | _Waiting | _Ready] = []
    async for event in _admitted(rc, [call], into):
        yield event
    (admitted,) = into
    if isinstance(admitted, _Answered):
        for event in _settle(rc, call, admitted):
            yield event
        return
    if isinstance(admitted, _Waiting):
        yield admitted.event
        rc.stop(admitted.halt)
        return
    earlier = call.id in rc.state.intents
    if _note_intent(rc, call, admitted.tool):
        await rc.persist_durably()  # the intent is on disk before the side effect can happen
    if rc.signal.cancelled:  # Stop came while the intent was saved: the call never started
        if not earlier:
            rc.state.intents.pop(call.id, None)
        rc.stop(Stop.cancelled(rc.signal.reason or "cancelled"))
        return
    decided = _approved_event(rc, call, admitted.tool)
    if decided is not None:
        yield decided
    async for event in _execute(rc, call, admitted.tool, admitted.args):
        yield event


async def _admit(rc: RunContext, call: ToolCallPart) -> _Answered | _Waiting | _Ready:
    """What happens to ``call`` before anything runs: a result without running (a rejection, an
    unknown tool, bad arguments, the read-only cache, a middleware's answer), a stop for a person,
    or ready to run. The middleware answers before a person is asked: a call it refuses is never
    put to one."""
    state, tool = rc.state, rc.tools.get(call.name)
    intent = state.intents.get(call.id)
    if intent is not None and intent.landed is not None and intent.landed.call_id == call.id:  # it ran and finished
        return _Answered(intent.landed.text, intent.landed.status, message=intent.landed)
    if call.id in state.rejected:
        text = _rejection_text(call.name, state.rejected[call.id], call.id in state.intents)
        decision = Decision(state.run_id, call.id, call.name, "rejected", state.rejected[call.id])
        return _Answered(text, "rejected", events=(decision,))
    cut = cut_answer(state.messages, call, rc.agent.max_tokens) if _is_cut(state, call) else None
    if cut is not None:  # the output limit cut it: never run, whatever its arguments look like
        return _Answered(cut, "error")
    if tool is None:
        return _Answered(_no_such_tool(rc, call.name), "error")
    try:
        args = validate_arguments(tool, call.arguments)
    except ToolInputError as exc:
        return _Answered(f"Error: {exc}", "error")
    cached = _from_cache(rc, call, tool, args)
    if cached is not None:
        return cached
    answer = await before_tool_call(rc.agent.middleware, rc, call, args)
    if isinstance(answer, Stop):
        return _Answered(f"Not run: {answer.reason}", "error", halt=answer)
    if answer is not None:
        return _Answered(answer, "ok")
    halt = _gate(rc, call, tool)
    if halt is not None:
        kind = "outcome_unknown" if isinstance(halt.interruption, OutcomeUnknownInterruption) else "approval"
        return _Waiting(halt, ApprovalRequired(state.run_id, call.id, call.name, call.arguments, kind))
    return _Ready(tool, args)


def _no_such_tool(rc: RunContext, name: str) -> str:
    """What the model reads for a call to no tool of the run's. A call with no name (left out, or
    only spaces, on any wire) is told so, not that a tool named '' is missing."""
    known = ", ".join(sorted(rc.tools)) or "none"
    if not name.strip():
        return f"Error: this call named no tool (its name was empty), so nothing was run. Tools by name: {known}."
    return f"Error: there is no tool named {_cut_name(name)!r}. Available tools: {known}."


def _is_cut(state: RunState, call: ToolCallPart) -> bool:
    """Whether ``call`` ends a reply the output limit cut (found without a look back over the
    reply's results, which every call of a long reply would pay)."""
    i = latest_reply(state)
    reply = state.messages[i] if i >= 0 else None
    cut = cut_call(reply) if isinstance(reply, AssistantMessage) else None
    return cut is not None and cut.id == call.id


def _from_cache(rc: RunContext, call: ToolCallPart, tool: Any, args: dict[str, Any]) -> _Answered | None:
    if not (tool.read_only and rc.agent.dedupe_read_only and getattr(tool, "cacheable", True)):
        return None
    canon = canonical_arguments(call.arguments)
    earlier = rc.read_cache.get((call.name, canon)) if canon is not None else None
    # A tool whose answer follows the world (a file's size and mtime) says how the world stood.
    mark = getattr(tool, "cache_token", None)
    if mark is not None:
        token = mark(args, rc.cwd)
        if earlier is not None and (token is None or rc.read_marks.get(earlier.call_id) != token):
            earlier = None
        rc.read_marks[call.id] = token
    if earlier is None:
        return None
    note = (
        f"[Same call as {earlier.call_id} earlier in this run: its result is repeated here; "
        "the tool was not run again.]\n"
    )
    return _Answered(ToolResult([TextPart(text=note), *earlier.content]), "cached", cached_from=earlier.call_id)


def _approved_event(rc: RunContext, call: ToolCallPart, tool: Any) -> Decision | None:
    state = rc.state
    if call.id in state.approved and (getattr(tool, "needs_approval", False) or call.id in state.intents):
        return Decision(state.run_id, call.id, call.name, "approved", state.approved_reasons.get(call.id, ""))
    return None


def _gate(rc: RunContext, call: ToolCallPart, tool: Any) -> Stop | None:
    """Approval and crash checks before a call runs.

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
    return None


def _note_intent(rc: RunContext, call: ToolCallPart, tool: Any) -> bool:
    """Record the intent of a call with side effects about to run; True when the caller must make
    it durable first (it is new, or a rerun's)."""
    intent = rc.state.intents.get(call.id)
    if intent is not None:
        # The person's "run it again" is for one attempt: a crash during the rerun is a new
        # unknown outcome, asked about again, never a second rerun on its own.
        intent.rerun = False
        return True
    if tool.read_only or getattr(tool, "idempotent", False):
        return False
    rc.state.intents[call.id] = Intent(key=f"{rc.state.run_id}:{call.id}")
    return True


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
        reserve=lambda: _reserve(rc),
        turns_left=None if agent.max_turns is None else agent.max_turns - state.turns - state.delegated_turns,
        tokens_left=None if agent.max_run_tokens is None else agent.max_run_tokens - state.spent_tokens,
        token_reserve=lambda: _reserve_tokens(rc),
        on_save=lambda durable: rc.persist(durable=durable),
        run_agent=rc.run_agent,
        runs=getattr(rc.store, "runs", rc.store),  # a run inside another saves with the outermost's store
        tools=rc.tools,
        deps=rc.deps,
    )


def _work(rc: RunContext, call: ToolCallPart, tool: Any, args: dict[str, Any]) -> Callable[[], Awaitable[Any]]:
    """The call's work: the tool inside the middleware's ``wrap_tool_call`` chain."""
    key = None if tool.read_only else f"{rc.state.run_id}:{call.id}"
    started = False

    async def work() -> ToolResult | str | Stop | _Begun:
        async def innermost() -> ToolResult | str | Stop:
            nonlocal started
            if not started:  # once, as the tool itself starts: a call a middleware answered (a
                # policy that judged its arguments, a limit) never started, and its arguments are
                # not shown as a running call's
                started = True
                rc.emit(ToolStart(rc.state.run_id, call.id, call.name, call.arguments))
            # The run's limits left as the tool starts: a middleware may have waited while calls beside it spent.
            try:
                result: ToolResult | str = await tool.execute(args, _tool_context(rc, call, key))
            except ConfigError as exc:
                # The person's to fix (a key not set, a setting that names nothing), not the model's:
                # told to it as a call's error, it would only be retried or worked around. The run
                # ends failed saying what to change, as a misconfigured sub-agent's call does (its
                # tool returns the same Stop).
                return Stop.not_configured(f"the tool {call.name}", told(exc))
            except asyncio.CancelledError:
                task = asyncio.current_task()
                if rc.signal.cancelled or task is None or task.cancelling():
                    raise  # Stop, or the run's caller gone: the call stays pending
                # Nothing cancelled this call: a task or future the tool awaited was cancelled
                # inside it. It used to end the run as if Stop had been pressed (run_sync raised
                # CancelledError), the calls beside it in a batch left without results.
                raise ToolError(
                    "it raised asyncio.CancelledError though nothing stopped the run (a task or "
                    "future it awaited was cancelled)"
                ) from None
            except SystemExit as exc:
                # A tool's library that ends the process on bad input (argparse does, on arguments
                # it does not know) is the call's failure: it used to end tether's own process
                # (the CLI, a server's run) with the run left `running`.
                raise ToolError(
                    f"it tried to end the process (sys.exit({exc.code!r}), as a command-line parser does "
                    "on arguments it refuses); nothing else was stopped"
                ) from None
            return result

        value = await chain_tool(rc.agent.middleware, rc, call, args, innermost)()
        # A stop once the tool had started (its own, or a middleware's after it): its result may
        # not say the call did not run.
        return _Begun(value) if isinstance(value, Stop) and started else value

    return work


@dataclass(frozen=True)
class _Begun:
    """A call's stop that came after its tool started."""

    stop: Stop


# Room the run keeps for its own next call: the prompt grows by a tool's result, and the answer.
_ANSWER_ROOM = 1000


def _next_call(rc: RunContext) -> tuple[int, int]:
    """The run's own next model call at its largest, prompt and answer: the prompt as it stands (an
    upper bound, no tokenizer) plus room for this call's result, and an answer of up to
    ``_ANSWER_ROOM`` tokens (``max_tokens`` if smaller)."""
    return rc.prompt_bound() + _ANSWER_ROOM, min(rc.agent.max_tokens, _ANSWER_ROOM)


def _reserve(rc: RunContext) -> float:
    """What the run's own next model call may cost (:func:`_next_call`) at the model's price. 0
    without a budget or a price."""
    if rc.agent.max_budget_usd is None or rc.price is None:
        return 0.0
    return rc.price.worst_case(*_next_call(rc))


def _reserve_tokens(rc: RunContext) -> int:
    """The tokens the run's own next model call may take (:func:`_next_call`). 0 without a token
    limit."""
    if rc.agent.max_run_tokens is None:
        return 0
    return sum(_next_call(rc))


async def _execute(rc: RunContext, call: ToolCallPart, tool: Any, args: dict[str, Any]) -> AsyncIterator[Event]:
    started = time.perf_counter()
    # Only the tool's own work is inside the try: a failure to record its result (the store) is
    # not the tool's failure, and must not give the call a second result.
    value: ToolResult | str | Stop | _Begun | Exception
    try:
        work = _work(rc, call, tool, args)
        async for item in pump(work, rc.sink, rc.signal, cancel_work=not getattr(tool, "ends_on_cancel", False)):
            if isinstance(item, Finished):
                value = item.value
                break
            yield item
    except (ToolInterrupt, RunCancelled) as exc:
        yield _held(rc, call, exc, (time.perf_counter() - started) * 1000)
        return
    except Exception as exc:
        value = exc
    yield _outcome(rc, call, value, (time.perf_counter() - started) * 1000)


def _held(rc: RunContext, call: ToolCallPart, exc: ToolInterrupt | RunCancelled, ms: float) -> ToolResultEvent:
    """The call stays pending (a resume runs it, or asks about it): a sub-agent waits for a
    person, so does this run; or Stop cut it. The trace says which."""
    if rc.halt is None:  # the first reason in a batch is the run's
        if isinstance(exc, ToolInterrupt):
            rc.stop(Stop("interrupted", exc.reason, exc.interruption))
        else:
            rc.stop(Stop.cancelled(exc.reason))
    if isinstance(exc, ToolInterrupt) and exc.ended:
        rc.state.intents.pop(call.id, None)  # not an unknown outcome: the attempt ended to ask
    status = "interrupted" if isinstance(exc, ToolInterrupt) else "cancelled"
    return ToolResultEvent(rc.state.run_id, call.id, call.name, ok=False, ms=round(ms, 3), status=status)


@dataclass(slots=True)
class _Landed(Internal):
    """A call of a parallel batch finished (its value, or what it raised)."""

    index: int
    value: Any
    ms: float


async def _run_batch(rc: RunContext, batch: list[ToolCallPart]) -> AsyncIterator[Event]:
    """Run a batch of calls at the same time; their results enter the transcript in call order,
    each as soon as every call before it has its own. Decisions are asked together, before any
    call of the batch runs; each call with side effects keeps its own intent record."""
    admitted: list[_Answered | _Waiting | _Ready] = []
    async for event in _admit_batch(rc, batch, admitted):
        yield event
    if rc.halt is not None:  # a decision is needed first: the calls wait, asked about together
        return
    ready = [(i, call, a) for i, (call, a) in enumerate(zip(batch, admitted, strict=True)) if isinstance(a, _Ready)]
    earlier = set(rc.state.intents)  # an intent from before (a crash's) stays, whatever happens now
    for decided in await _open_batch(rc, ready):
        yield decided
    order = _InOrder(rc, batch, {i: a for i, a in enumerate(admitted) if isinstance(a, _Answered)})
    order.fresh = set(rc.state.intents) - earlier
    limit = asyncio.Semaphore(rc.agent.max_parallel_tools)

    async def together() -> None:
        await asyncio.gather(*(_one(rc, order, limit, i, call, a) for i, call, a in ready))

    listens = any(getattr(a.tool, "ends_on_cancel", False) for _, _, a in ready)
    for event in order.saved(list(order.flush())):
        yield event
    async for event in _landing(rc, order, together, listens):
        yield event


async def _landing(
    rc: RunContext, order: _InOrder, together: Callable[[], Awaitable[None]], listens: bool
) -> AsyncIterator[Event]:
    """The batch's events as its calls land. The results in hand at one moment (every call that
    landed before the loop looked again) are saved together, before any of their events is passed
    on: one save per result made a batch of n calls, whose header carries every intent still open,
    write n² intents."""
    held: list[Event] = []
    try:
        async for item in pump(together, rc.sink, rc.signal, cancel_work=not listens):
            if isinstance(item, Finished):
                break
            held += order.take(item)
            if rc.sink.queue.empty():  # nothing more in hand: save what landed, then tell it
                for event in order.saved(held):
                    yield event
                held = []
        if rc.signal.cancelled:  # Stop came as the last running call ended: what it kept from starting waits
            raise RunCancelled(rc.signal.reason or "cancelled")
    except RunCancelled as exc:
        held += order.cut(exc)
    for event in order.saved(held):
        yield event


async def _open_batch(rc: RunContext, ready: list[tuple[int, ToolCallPart, _Ready]]) -> list[Decision]:
    """Note every intent of the batch and make them durable before any of its calls runs; the
    approvals the person gave, as events."""
    if any([_note_intent(rc, call, a.tool) for _, call, a in ready]):  # a list: every intent is noted
        await rc.persist_durably()
    return [d for d in (_approved_event(rc, call, a.tool) for _, call, a in ready) if d is not None]


async def _one(
    rc: RunContext, order: _InOrder, limit: asyncio.Semaphore, i: int, call: ToolCallPart, ready: _Ready
) -> None:
    async with limit:
        if rc.signal.cancelled:  # Stop came before its turn: it never starts (a resume runs it)
            return
        order.started.add(i)
        started = time.perf_counter()
        value: Any
        try:
            value = await _work(rc, call, ready.tool, ready.args)()
        except (ToolInterrupt, RunCancelled, Exception) as exc:  # one call's failure is its own
            value = exc
        rc.sink.put(_Landed(i, value, (time.perf_counter() - started) * 1000))


# How much of a batch's results may wait with their intents at once (see _InOrder._keep). The run's
# header carries them, and is written again at each save while they wait: a thousand results of
# 2 KB behind one slow call made every save of the batch write 2 MB.
_KEPT_MAX = 256 * 1024


class _InOrder:
    """Records a batch's results in call order as they become available."""

    def __init__(self, rc: RunContext, batch: list[ToolCallPart], settled: dict[int, Any]) -> None:
        self.rc, self.batch, self.settled = rc, batch, settled
        self.next = 0
        self.started: set[int] = set()
        self.fresh: set[str] = set()  # the calls whose intents this batch noted
        self.unsaved = False  # results recorded and not saved yet (see saved)
        self.kept: dict[int, int] = {}  # the calls whose results wait with their intents: their sizes

    def take(self, item: Any) -> Iterator[Event]:
        """What the batch's pump yielded: a call that finished (its result, and any after it now
        in order), or an event to pass on."""
        if not isinstance(item, _Landed):
            yield item
            return
        self.settled[item.index] = item
        if item.index > self.next:
            self._keep(item)
        yield from self.flush()

    def _keep(self, item: _Landed) -> None:
        """A call that finished while one before it still runs: its result cannot enter the
        transcript yet, and is kept with its intent (saved with the next save, before its event
        is told), so a crash meanwhile leaves it finished, not of unknown outcome."""
        call = self.batch[item.index]
        intent = self.rc.state.intents.get(call.id)
        held = isinstance(item.value, ToolInterrupt | RunCancelled)  # a person or Stop holds it: pending
        settled = None if held else _plain(self.rc, call, item.value)
        if intent is None or settled is None:
            return
        message = _message(self.rc, call, *settled, None)
        size = len(dump_message(message))
        if sum(self.kept.values()) + size > _KEPT_MAX:  # it waits in the process, as a result in hand does
            return
        intent.landed, self.kept[item.index] = message, size
        self.unsaved = True

    def flush(self) -> Iterator[Event]:
        while self.next < len(self.batch) and self.next in self.settled:
            self.kept.pop(self.next, None)
            self.next += 1
            self.unsaved = True
            yield from _settle(self.rc, self.batch[self.next - 1], self.settled[self.next - 1], save=False)

    def saved(self, events: list[Event]) -> list[Event]:
        """``events``, once the results recorded before them are saved (in one save)."""
        if self.unsaved:
            self.rc.persist(durable=False)  # made durable before any side effect or the next request
            self.unsaved = False
        return events

    def cut(self, exc: RunCancelled) -> Iterator[Event]:
        """Stop fired: what finished is recorded, in order, also what finished while the Stop was
        being heard (its result waits in the sink behind the Stop); what was running stays pending;
        what never started leaves no intent, so a resume runs it without asking."""
        for item in self.rc.sink.take_all():
            if isinstance(item, _Landed):
                self.settled[item.index] = item
            else:
                self.rc.sink.put(item)  # yielded before `done`, as any late event
        for i in range(self.next, len(self.batch)):
            call = self.batch[i]
            if i in self.settled:
                self.unsaved = True
                yield from _settle(self.rc, call, self.settled[i], save=False)
            elif i in self.started:
                yield _held(self.rc, call, exc, 0.0)
            elif call.id in self.fresh:
                self.rc.state.intents.pop(call.id, None)
        if self.rc.halt is None:
            self.rc.stop(Stop.cancelled(exc.reason))


def _settle(rc: RunContext, call: ToolCallPart, item: _Answered | _Landed, *, save: bool = True) -> Iterator[Event]:
    """Record a call's one result from how it was settled: without running, or by its work (a
    call a person or Stop holds stays pending). Saved unless the caller saves several at once."""
    if isinstance(item, _Answered):
        yield from item.events
        yield _record(rc, call, item.result, item.status, cached_from=item.cached_from, save=save, message=item.message)
        if item.halt is not None and rc.halt is None:  # the first reason in a batch is the run's
            rc.stop(item.halt)
    elif isinstance(item.value, ToolInterrupt | RunCancelled):
        yield _held(rc, call, item.value, item.ms)
    else:
        yield _outcome(rc, call, item.value, item.ms, save=save)


async def _admit_batch(
    rc: RunContext, batch: list[ToolCallPart], into: list[_Answered | _Waiting | _Ready]
) -> AsyncIterator[Event]:
    """:func:`_admitted` for a batch: when any of its calls needs a decision, they are asked about
    together and the run stops."""
    async for event in _admitted(rc, batch, into):
        yield event
    stops = [(i, a.halt) for i, a in enumerate(into) if isinstance(a, _Answered) and a.halt is not None]
    if stops:  # the run stops at this batch: no person is asked to approve a call of it
        at, halt = stops[0]
        into[:] = [_unasked(a, halt, i > at) for i, a in enumerate(into)]
    if any(isinstance(a, _Waiting) for a in into):
        for event in _ask_together(rc, into):
            yield event


def _unasked(admitted: _Answered | _Waiting | _Ready, halt: Stop, after: bool) -> _Answered | _Waiting | _Ready:
    """A call of a batch a middleware stopped the run at. One waiting for approval is not asked
    about (the person's "yes" would be wasted), and told so; an unknown outcome is still asked
    about. One ready to run ``after`` the call the run stopped at does not run, as it would not
    one by one, and is told so: the batch's calls start together, or it would have."""
    if isinstance(admitted, _Ready) and after:
        return _Answered(f"Not run: the run stopped at an earlier call of this reply ({halt.reason}).", "skipped")
    if not isinstance(admitted, _Waiting) or admitted.event.reason != "approval":
        return admitted
    return _Answered(f"Not run: the run stopped before a person was asked about this call ({halt.reason}).", "skipped")


def _ask_together(rc: RunContext, admitted: list[_Answered | _Waiting | _Ready]) -> Iterator[Event]:
    waiting = [a for a in admitted if isinstance(a, _Waiting)]
    for w in waiting:
        yield w.event
    rc.stop(_together([w.halt for w in waiting]))


def _together(halts: list[Stop]) -> Stop:
    """One stop for every decision a batch needs: the first's, with the others beside it."""
    first = halts[0]
    if len(halts) == 1:
        return first
    assert isinstance(first.interruption, ApprovalInterruption | OutcomeUnknownInterruption)
    others = tuple(
        h.interruption
        for h in halts[1:]
        if isinstance(h.interruption, ApprovalInterruption | OutcomeUnknownInterruption)
    )
    names = ", ".join(
        h.interruption.tool_name
        for h in halts
        if isinstance(h.interruption, ApprovalInterruption | OutcomeUnknownInterruption)
    )
    reason = f"{len(halts)} calls of one batch wait for a decision ({names}): {first.reason}"
    return Stop(first.status, reason, first.interruption.model_copy(update={"together": others}))


def _outcome(
    rc: RunContext,
    call: ToolCallPart,
    value: ToolResult | str | Stop | _Begun | Exception,
    ms: float,
    *,
    save: bool = True,
) -> ToolResultEvent:
    """The call's one result, from what its work ended with (a policy's stop, a failure, a result)."""
    if isinstance(value, Stop | _Begun):  # a policy ended the run: the call still gets its result
        stop, said = (value.stop, "Stopped") if isinstance(value, _Begun) else (value, "Not run")
        event = _record(rc, call, f"{said}: {stop.reason}", "error", ms, save=save)
        rc.stop(stop)
        return event
    if isinstance(value, Exception) and rc.agent.tool_errors_are_fatal:
        event = _record(rc, call, _error_text(rc, call, value), "error", ms, save=save)
        rc.stop(Stop("failed", f"tool {call.name} failed: {told(value)}"))
        return event
    plain = _plain(rc, call, value)
    assert plain is not None
    return _record(rc, call, *plain, ms, save=save)


def _plain(rc: RunContext, call: ToolCallPart, value: Any) -> tuple[str | ToolResult, ToolResultStatus] | None:
    """The call's result and status when what its work ended with ends nothing else (a result, or
    a failure that is only the call's); None for a stop (a policy's, or a failure that ends the
    run)."""
    if isinstance(value, Stop | _Begun):
        return None
    if isinstance(value, Exception):
        return None if rc.agent.tool_errors_are_fatal else (_error_text(rc, call, value), "error")
    wrong = _not_a_result(value)
    if wrong is not None:
        return (
            f"Error: the tool {call.name} returned {wrong}; this is a bug in the tool, not in your arguments.",
            "error",
        )
    return value, "ok"


def _error_text(rc: RunContext, call: ToolCallPart, exc: Exception) -> str:
    # The model reads it, the session and trace keep it: no key the tool quoted goes along.
    return without_secrets(rc.agent.tool_error_text(call.name, exc))


def _not_a_result(value: Any) -> str | None:
    """What is wrong with a tool's return value, in words; None when it is one the transcript holds
    (a ToolResult whose content is not text or parts would fail the run as it was recorded)."""
    if isinstance(value, str):
        return None
    if not isinstance(value, ToolResult):
        return f"{type(value).__name__}, not text or a ToolResult"
    content = value.content
    if isinstance(content, str) or (
        isinstance(content, list | tuple) and all(isinstance(p, TextPart | ImagePart) for p in content)
    ):
        return None
    return f"a ToolResult whose content is {type(content).__name__}, not text or a list of TextPart and ImagePart"
