"""The loop: ``step = run_pending_tools() or ask_model()``, limits before every call, persistence
after every change, exactly one of five exits at the end.

``run_stream`` is the implementation; ``run`` and ``run_sync`` consume it.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import functools
import logging
import math
import threading
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import Any, Never

from tether.cancel import CancelSignal
from tether.errors import ConfigError, RunCancelled, TetherError, UserError
from tether.events import Done, Event, SpentUnknown, TraceOnly, Turn
from tether.harness.agent import Agent, Stop, refuse_keywords
from tether.harness.compaction import check_compaction_config, compact, context_window, should_compact
from tether.harness.context import (
    Candidate,
    EventSink,
    RunContext,
    StateStore,
    Tracer,
    told,
    tool_definitions,
    without_secrets,
)
from tether.harness.extension import snapshot_blocks, start_extensions, starting_in, stop_extensions, system_prompt
from tether.harness.length import CUT, Continuation, continues, is_cut
from tether.harness.limits import CallPlan, plan_call, plans_calls
from tether.harness.model_call import ask_model
from tether.harness.pump import Finished, late_events, pump
from tether.harness.retry import RetryPolicy, check_first_token_timeout
from tether.harness.state import (
    ENDED_BY_TOOL,
    WRITTEN_BY_POLICY,
    RunState,
    conversation_turns,
    is_empty_answer,
    latest_reply,
    pending_tool_calls,
)
from tether.harness.structured import check_answer, check_output_config, final_data
from tether.harness.tool_exec import result_is_answer, run_pending
from tether.harness.view import keep_latest_images
from tether.harness.waiting import forget_waiting, note_waiting, unwaited
from tether.messages import AssistantMessage, UserMessage, clean_text
from tether.providers.base import STOPPED_BY_PROVIDER
from tether.providers.registry import instance_model, resolve_provider
from tether.sessions import SessionStore, check_session_id
from tether.status import EMPTY_ANSWER, RESUMABLE, RunResult
from tether.tokens import count_tokens, counter_for, encoding, encoding_loaded
from tether.usage import Usage, lookup_price, unknown_price

__all__ = ["run", "run_stream", "run_sync"]

_log = logging.getLogger("tether")


def _candidate(agent: Agent, model: Any, primary: bool) -> Candidate:
    # Not the primary: a fallback, or another model the run calls (a middleware's own classifier).
    fallback = not primary and any(m is model or m == model for m in agent.fallback_models)
    if isinstance(model, str):
        try:
            resolved = resolve_provider(model, agent.settings)
        except ConfigError as exc:
            if not fallback:
                raise
            # A fallback (maybe from the config file's fallback_models) the person did not think of
            # as needing a key: say which entry asked for it.
            raise ConfigError(f"fallback_models: {model}: {exc}") from exc
        provider, model_id, name = resolved.provider, resolved.model_id, resolved.name
    elif hasattr(model, "complete") or hasattr(model, "stream"):
        provider = model
        model_id, name = instance_model(provider)
    else:
        where = "fallback_models" if fallback else "model"
        raise ConfigError(f"{where}: {model!r} is neither a model string (provider/model) nor a Provider")
    overrides = dict(getattr(agent.settings, "prices", None) or {}) | dict(agent.prices)
    price = (agent.price if primary else None) or getattr(provider, "price", None) or lookup_price(name, overrides)
    if agent.max_budget_usd is not None and price is None:
        raise ConfigError(unknown_price(name, primary=primary, fallback=fallback))
    return Candidate(provider, model_id, name, price)


def _context(agent: Agent, state: RunState, signal: CancelSignal, store: StateStore | None) -> RunContext:
    candidates, tools = check_agent(agent)
    defs = tool_definitions(tools)
    cwd = Path(agent.cwd or Path.cwd()).absolute()
    rc = RunContext(
        agent=agent,
        state=state,
        candidates=candidates,
        signal=signal,
        cwd=cwd,
        tools=tools,
        sink=EventSink(),
        store=store,
        tool_defs=defs,
        system=agent.instructions,
        run_agent=run_stream,
    )
    rc.count = counter_for(rc.model_name)
    state.model = rc.model_name
    state.agent = agent.name or None
    return rc


def check_agent(agent: Agent, seen: set[int] | None = None) -> tuple[list[Candidate], dict[str, Any]]:
    """What refuses ``agent`` before anything runs (:class:`ConfigError`): its limits and settings,
    its models, its tools, and those of the agents it hands tasks to (a tool's ``check_config``;
    each once, in ``seen``). Its models and tools, checked."""
    _check_limits(agent.max_budget_usd, agent.max_turns, agent.max_run_tokens)
    _check_instructions(agent.instructions, agent.name)
    _check_tokens(agent.max_tokens, agent.min_output_tokens)
    if agent.cwd is not None and not Path(agent.cwd).is_dir():  # as `tether run --cwd` refuses it
        raise ConfigError(
            f"cwd {str(agent.cwd)!r} is not a directory: the agent's file and shell tools work there, and "
            "every call would fail; create it, or give a directory that exists"
        )
    check_first_token_timeout(agent.first_token_timeout_s)
    check_first_token_timeout(agent.reply_timeout_s, "reply_timeout_s")
    if not isinstance(agent.retry, RetryPolicy):  # read at the first error: refused before the first request
        raise ConfigError(
            f"retry must be a RetryPolicy (got {agent.retry!r}); RetryPolicy(max_attempts=1) retries nothing"
        )
    if isinstance(agent.fallback_models, str):  # one model, not its letters
        raise ConfigError(f"fallback_models is a list of models: write fallback_models=[{agent.fallback_models!r}]")
    if not isinstance(agent.fallback_models, Sequence):
        raise ConfigError(f"fallback_models is a list of models (got {agent.fallback_models!r}); [] for none")
    candidates = [_candidate(agent, agent.model, True)]
    candidates += [_candidate(agent, m, False) for m in agent.fallback_models]
    tools = agent.tool_map()
    check_output_config(agent, tools)
    check_compaction_config(agent)
    seen = set() if seen is None else seen
    for tool in tools.values():
        check = getattr(tool, "check_config", None)
        if callable(check):
            check(agent, seen, check_agent)  # the checker passed, not imported: no cycle
    for ext in agent.extensions:  # those that cannot work beside the others (two giving one tool name)
        together = getattr(ext, "check_together", None)
        if callable(together):
            together(agent.extensions)
    for mw in agent.middleware:  # a policy that cannot serve this agent (a canned reply that is no typed answer)
        fits = getattr(mw, "check_config", None)
        if callable(fits):
            fits(agent)
    return candidates, tools


def _check_limits(budget: object, turns: object, tokens: object = None) -> None:
    """A limit that is no amount would be no limit (NaN compares false) or stop every run."""
    amount = isinstance(budget, int | float) and not isinstance(budget, bool) and math.isfinite(budget)
    if budget is not None and not (amount and budget >= 0):  # type: ignore[operator]
        raise ConfigError(
            f"max_budget_usd must be a finite number of dollars, zero or more (got {budget!r}); "
            "leave it None for no budget"
        )
    if turns is not None and not _whole(turns, 0):
        raise ConfigError(f"max_turns must be a whole number, zero or more (got {turns!r}); leave it None for no limit")
    if tokens is not None and not _whole(tokens, 0):
        raise ConfigError(
            f"max_run_tokens must be a whole number of tokens, zero or more (got {tokens!r}); "
            "leave it None for no limit"
        )


def _check_tokens(max_tokens: object, least: object) -> None:
    """A reply's limits that are no count: ``max_tokens=0`` stopped every run with a budget
    "cannot pay for another call" with all of it left (and without one was sent: a Messages
    request then took its default of 4,096); NaN ended the run with a validation error."""
    if not _whole(max_tokens, 1):
        raise ConfigError(f"max_tokens must be a whole number of tokens, 1 or more (got {max_tokens!r})")
    if not _whole(least, 0):
        raise ConfigError(f"min_output_tokens must be a whole number of tokens, 0 or more (got {least!r})")


def _whole(value: object, least: int) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= least


def _start_counter(rc: RunContext) -> None:
    """Start loading the tokenizer (~0.1 s and ~70 MB the first time in a process) in a worker
    thread, when a decision first needs exact counts: at the start of a run with a budget (its
    first plan waits for it, :meth:`RunContext.counter_ready`), or when the context nears the
    compaction threshold (:func:`_past_threshold`)."""
    if rc.count is not count_tokens or rc.counter_task is not None or encoding_loaded():
        return  # nothing to load: later runs in a process start no thread
    loop = asyncio.get_running_loop()
    done: asyncio.Future[None] = loop.create_future()

    def load() -> None:
        with contextlib.suppress(Exception):  # counting falls back to the estimate on its own
            encoding()
        with contextlib.suppress(RuntimeError):  # the loop may be gone: nobody waits any more
            loop.call_soon_threadsafe(_finish_future, done)

    # A daemon thread, not the loop's executor: a run that never needed a count does not wait for
    # the load when its loop shuts down.
    threading.Thread(target=load, name="tether-tokenizer", daemon=True).start()
    rc.counter_task = done


def _finish_future(done: asyncio.Future[None]) -> None:
    if not done.done():
        done.set_result(None)


def _check_instructions(instructions: Any, name: object = "") -> None:
    if not isinstance(name, str):  # recorded with each run and written to its trace as text
        raise ConfigError(f"name is the agent's name as text (got {name!r:.60}); leave it out for none")
    if not isinstance(instructions, str):  # a function failed deep in the token count, the run `failed`
        raise ConfigError(
            f"instructions is the system prompt as text (got {instructions!r:.60}). For instructions made "
            "when a run begins (Pydantic AI's @agent.instructions, an OpenAI Agents SDK instructions "
            "function), give Agent(extensions=[...]) an Extension whose prompt_block() returns them "
            "(tether.harness.extension; see docs/harness.md), or build the text before making the Agent"
        )


def _check_open(state: RunState, prompt: str | None) -> None:
    if prompt is not None and not isinstance(prompt, str):  # it failed as an AttributeError in clean_text
        raise UserError(
            f"the prompt is the person's new message as text (got {type(prompt).__name__}). To go on "
            "from earlier messages, pass the run's state (run_sync(agent, 'next question', state=state)) "
            "or a session (session=..., session_id=...); see docs/harness.md"
        )
    if prompt is None and not state.messages and state.session_id is None:
        raise UserError('nothing to answer: give a prompt (run_sync(agent, "...")), or the state of a run to resume')
    if prompt is None and state.status in ("completed", "failed"):
        raise UserError(
            f"run {state.run_id} already ended ({state.status}); give a new prompt to continue the conversation"
        )


def _prepare(state: RunState, prompt: str | None, session: SessionStore | None) -> RunState:
    if session is not None and state.session_id:
        _bind_session(state, session, answers=prompt is not None)
    if prompt is not None:
        _add_prompt(state, clean_text(prompt))
    state.status, state.interruption, state.reason = "running", None, None
    state.misconfiguration = None
    return state


# Why a call that waited is not run when a person writes instead of deciding.
INSTEAD = "they sent a new message instead of deciding on it"


def _add_prompt(state: RunState, text: str) -> None:
    """A new message from the person. While calls of the last reply wait (for a decision, or behind
    a stop), it is an answer to them: each is declined (not run) and the message follows their
    results, as a transcript must have it. A call that started before a crash and left no result
    (its outcome unknown) still waits for a person's decision: it may have taken effect."""
    waiting = pending_tool_calls(state)
    if not waiting:
        state.messages.append(UserMessage.text(text))
        return
    answered = getattr(state.answer.question, "call_id", None) if state.answer is not None else None
    for call in waiting:
        if call.id not in state.intents:
            state.approved.pop(call.id, None)
            state.approved_reasons.pop(call.id, None)
            state.rejected.setdefault(call.id, INSTEAD)
            if call.id == answered:  # a plug-in's question on it (a sub-agent's) is gone with it
                state.answer = None
    earlier = state.prompt_after_calls
    state.prompt_after_calls = text if earlier is None else f"{earlier}\n\n{text}"


def _prompt_after_calls(rc: RunContext) -> None:
    """The person's message that waited for the calls it answered, once each has its result."""
    state = rc.state
    if state.prompt_after_calls is not None and not pending_tool_calls(state):
        state.messages.append(UserMessage.text(state.prompt_after_calls))
        state.prompt_after_calls = None
        rc.persist(durable=False)  # the next request's save makes it durable


_TAKES = "prompt, state, store, tracer, signal, session, session_id, deps"


async def run_stream(
    agent: Agent,
    prompt: str | None = None,
    *,
    state: RunState | None = None,
    store: StateStore | None = None,
    tracer: Tracer | None = None,
    signal: CancelSignal | None = None,
    session: SessionStore | None = None,
    session_id: str | None = None,
    deps: Any = None,
    **peer: Never,
) -> AsyncIterator[Event]:
    """Run ``agent`` on ``prompt`` (a new run), or resume ``state``; yield every event.

    The last event is always :class:`~tether.events.Done` with the :class:`RunResult`, whatever
    fails on the way (law 5): a configuration error raises before anything runs; after that, an
    exception from any part (provider, tool, store, middleware, tokenizer) ends the run ``failed``
    with the reason in words, and the state is saved.
    ``store`` persists the state after every change; ``tracer`` receives every event.
    ``session`` (with ``session_id``, or a state that has one) continues a conversation: its
    repaired history starts the run, and every new message is appended to it as it happens.
    ``deps`` is any object the tools need for this run (a database handle, a client): each call
    reads it as ``ctx.deps``, and so do the calls of its sub-agents. It is not saved with the run:
    give it again to resume. Any other keyword (``peer``: a peer's ``message_history=``,
    ``context=``, ``model_settings=``) is a TypeError that says what tether writes instead.
    """
    refuse_keywords("run_stream", peer, _TAKES)
    if state is None and session is not None and session_id is not None:
        state = RunState(session_id=check_session_id(session_id))
    state = state or RunState()
    held = _hold(store, state, session)  # before anything reads or writes the run or its session
    try:
        _check_open(state, prompt)
        signal = signal or CancelSignal()
        with starting_in(agent.cwd):  # the run's workspace, for extensions that announce it (MCP roots)
            opened, stopped = await _opening(agent.extensions, signal)  # what they start lives as long as this call
    except BaseException:
        held.close()
        raise
    if stopped:  # Stop came while they started: the run ends stopped at once, with none of them
        agent = dataclasses.replace(agent, extensions=())
    try:
        # What may refuse the agent (its configuration, its extensions' blocks) leaves the state as it was.
        rc = _context(agent, state, signal, store)
        rc.deps = deps
        rc.system = _system_prompt(agent, state, session)
        state = _prepare(state, prompt, session)
        rc.rebuild_read_cache()  # after the prompt: a new message starts the cache's window
        rc.session = session
    except BaseException:
        held.close()
        await _closing_extensions(opened)
        raise
    trace = _SafeTracer(tracer)
    restored = _untraced_turn(state)
    if restored is not None:
        trace.write(restored)
    try:
        async for event in _guarded(rc):
            if isinstance(event, TraceOnly):
                trace.write(event.event)
                continue
            trace.write(event)
            if isinstance(event, Turn) and event.run_id == state.run_id:
                state.traced_turns = event.turn  # saved with the run's next save
            if isinstance(event, Done) and event.run_id == state.run_id:
                # The run is over and saved: let go of it and its session now. A caller that stops
                # reading at the end (returns at ``done``) would otherwise hold them until this
                # generator is collected, and its next message on the session would be refused.
                held.close()
            yield event
    except (GeneratorExit, asyncio.CancelledError):
        _abandoned(rc, trace)
        raise
    finally:
        held.close()
        for candidate in rc.candidates:
            with contextlib.suppress(Exception):
                await candidate.provider.aclose()
        trace.close()
        await _closing_extensions(opened)


async def _opening(extensions: Sequence[Any], signal: CancelSignal) -> tuple[asyncio.Future[list[Any]], bool]:
    """Start the extensions (the future of those started), unless Stop comes first: a start (a
    handshake with a slow server) does not hear it. Then the start is cancelled and True says so:
    the run ends stopped at once, and the cancelled start, which stops what it had started, is
    awaited when the ``run_stream`` call ends (:func:`_closing_extensions`), after the run's end is
    yielded, so that nothing it started outlives the call."""
    loop = asyncio.get_running_loop()
    if not extensions or signal.cancelled:  # nothing to start, or Stop came first: none is started
        none: asyncio.Future[list[Any]] = loop.create_future()
        none.set_result([])
        return none, signal.cancelled
    starting = asyncio.ensure_future(start_extensions(extensions))
    heard = asyncio.Event()

    def on_cancel(_reason: str) -> None:
        with contextlib.suppress(RuntimeError):  # the loop is closed: nobody waits any more
            loop.call_soon_threadsafe(heard.set)

    stop = asyncio.ensure_future(heard.wait())
    signal.add_callback(on_cancel)
    try:
        await asyncio.wait({starting, stop}, return_when=asyncio.FIRST_COMPLETED)
    except asyncio.CancelledError:  # the caller's task: what started is stopped before that goes on
        starting.cancel()
        await asyncio.wait({starting})
        raise
    finally:
        stop.cancel()
        signal.remove_callback(on_cancel)
    if not starting.done():
        starting.cancel()
        return starting, True
    starting.result()
    return starting, False


async def _closing_extensions(starting: asyncio.Future[list[Any]]) -> None:
    """Stop the extensions a run started; a start cancelled by Stop stops its own as it ends."""
    if not starting.done():
        await asyncio.wait({starting})
    if not starting.cancelled() and starting.exception() is None:
        await stop_extensions(starting.result())


def _hold(store: StateStore | None, state: RunState, session: SessionStore | None) -> contextlib.ExitStack:
    """The run held for this process (a second process resuming it is refused), and its session,
    so that no other run continues the conversation at the same time (the run store's lock, for
    every machine with Postgres, and the session store's own, which holds with no run store too);
    then a copy of the run behind the run as saved is refused (it would do again what was done
    since). With the stores that can (RunStore, PgRunStore; the JSONL and in-process session
    stores); let go when the run stops."""
    held = contextlib.ExitStack()
    try:
        lock = getattr(store, "lock", None)
        if lock is not None:
            held.enter_context(lock(state.run_id))
        lock_session = getattr(store, "lock_session", None)
        if lock_session is not None and session is not None and state.session_id:
            held.enter_context(lock_session(check_session_id(state.session_id), state.run_id))
        hold = getattr(session, "hold", None)  # with no run store too (the Python API's runs)
        if hold is not None and state.session_id:
            held.enter_context(hold(check_session_id(state.session_id), state.run_id))
        current = getattr(store, "check_current", None)
        if current is not None:
            current(state)
    except BaseException:
        held.close()
        raise
    return held


def _abandoned(rc: RunContext, trace: _SafeTracer) -> None:
    """The caller stopped reading, or its task was cancelled: nothing can be yielded any more, but
    the run is recorded as stopped, and resumable, rather than left ``running``."""
    state, signal = rc.state, rc.signal
    if rc.halt is not None and state.status != "running":
        return
    # A sub-agent's task is cancelled when the Stop it shares with its parent fires: that Stop is
    # the reason, not the caller.
    why = signal.reason if signal.cancelled else "the caller stopped reading the run's events"
    lost = state.call_in_flight
    if lost is not None:  # cut mid-request: billed for its prompt at least, as any cut request
        from tether.harness.accounting import charge

        charge(rc, Usage(prompt_tokens=lost.prompt_tokens, completion_tokens=0, estimated=True))
    rc.stop(rc.halt or Stop.cancelled(why or "cancelled"))
    trace.write(_done(rc))


def _untraced_turn(state: RunState) -> Turn | None:
    """The ``turn`` event of the run's last reply, when the process that saved the reply was
    killed before it was known to be traced (the trace keeps one line per turn: see
    :class:`~tether.tracing.JsonlTracer`). A run saved before this was kept counts as traced."""
    turns = state.turns
    traced, state.traced_turns = state.traced_turns, turns
    if not 0 <= traced < turns:
        return None
    index = latest_reply(state)
    if index < 0:
        return None
    reply = state.messages[index]
    assert isinstance(reply, AssistantMessage)
    cost = None if state.unpriced_models else state.cost_usd
    model = reply.model or state.model or ""
    return Turn(state.run_id, turns, model, reply.usage or Usage(), cost, reply.finish_reason, restored=True)


class _SafeTracer:
    """The trace is a view of the run, not the run: a tracer that fails is logged and dropped
    instead of ending a run that is otherwise fine (the saved state stays the record)."""

    def __init__(self, tracer: Tracer | None) -> None:
        self.tracer = tracer

    def write(self, event: Event) -> None:
        if self.tracer is None:
            return
        try:
            self.tracer.write(event)
        except Exception:
            _log.exception("run %s: the tracer failed; no more trace lines are written for this run", event.run_id)
            self.close()
            self.tracer = None

    def close(self) -> None:
        if self.tracer is not None:
            with contextlib.suppress(Exception):
                self.tracer.close()


async def _guarded(rc: RunContext) -> AsyncIterator[Event]:
    """The one place where anything escaping the loop becomes one of the five exits (law 5)."""
    try:
        async for event in _loop(rc):
            yield event
    except RunCancelled as exc:
        rc.stop(Stop.cancelled(exc.reason))
    except Exception as exc:
        rc.stop(_crashed(rc, exc))
    try:
        async for event in _after_agent(rc):
            yield event
    except RunCancelled as exc:
        rc.stop(Stop.cancelled(exc.reason))
    except Exception as exc:
        rc.stop(_crashed(rc, exc))
    for event in late_events(rc.sink):
        yield event
    yield await _done_async(rc)


def _crashed(rc: RunContext, exc: Exception) -> Stop:
    detail = told(exc) or "(no message)"
    _log.error("run %s stopped by an unexpected error", rc.state.run_id, exc_info=exc)
    rc.state.call_in_flight = None  # whatever was being asked is not coming back
    if isinstance(exc, TetherError):
        return Stop("failed", detail)
    return Stop(
        "failed",
        f"unexpected error: {type(exc).__name__}: {detail}. The run was saved as it "
        "was; resuming it will not continue (start a new run or session from it). If this "
        "looks like tether's fault, report it with the trace.",
    )


def _system_prompt(agent: Agent, state: RunState, session: SessionStore | None) -> str:
    """Instructions plus the extensions' blocks, as snapshotted when the session began: a resumed
    run keeps its own; a new run in a session takes the session's; a fresh read only for what
    neither has. A new snapshot is saved with the session for its later runs."""
    if not agent.extensions:
        return agent.instructions
    sid = state.session_id
    load_meta = getattr(session, "load_meta", None) if sid else None
    meta: dict[str, Any] = load_meta(sid) if load_meta is not None else {}
    shared = meta.get("prompt_blocks")
    shared = {k: v for k, v in shared.items() if isinstance(v, str)} if isinstance(shared, dict) else {}
    blocks = snapshot_blocks(agent.extensions, state.prompt_blocks if state.prompt_blocks is not None else shared)
    state.prompt_blocks = blocks
    if load_meta is not None and sid and any(shared.get(k) != v for k, v in blocks.items()):
        # Blocks of extensions this run lacks stay in the session for runs that have them.
        session.save_meta(sid, {**meta, "prompt_blocks": {**shared, **blocks}})  # type: ignore[union-attr]
    return system_prompt(agent.instructions, blocks)


def _bind_session(state: RunState, session: SessionStore, *, answers: bool = False) -> None:
    """Start from the session's history, or reconcile it with a run being resumed. ``answers``: a
    new message starts the run, an answer to calls the last run left waiting for a decision."""
    assert state.session_id is not None
    history = session.load(state.session_id)
    waiting = forget_waiting(session, state.session_id)
    if not state.messages:
        # Calls that waited for a decision never ran: pending again, the message declines them
        # (see _add_prompt), where the placeholder of a load said their outcome was unknown.
        unknown = unwaited(history, waiting) if answers else None
        if unknown is not None:
            session.rewrite(state.session_id, unknown)
            history = unknown
        state.messages = history
        state.session_synced = len(history)
        state.history_turns = conversation_turns(history)
    elif len(history) != state.session_synced:
        if went_on(state, history):
            raise UserError(
                f"session {state.session_id} went on after run {state.run_id} stopped: a later run added "
                f"{len(history) - state.session_synced} messages, which resuming this run would remove; "
                "nothing was changed. Continue the conversation with a new message instead (this run's "
                f"transcript stays readable: tether show {state.run_id})"
            )
        # A crash left the session ahead of (or behind) the run's last save: the run is the truth.
        session.rewrite(state.session_id, state.messages[: state.session_synced])


def went_on(state: RunState, history: list[Any]) -> bool:
    """Whether the session's ``history`` holds, past the stopped run's share of it, another
    exchange (a person's message and a reply to it): a later run continued the conversation, and
    resuming the run would remove it. What a crash leaves there is the run's own unsaved step, or
    the prompt of a run that died before a reply."""
    asked = False
    for m in history[state.session_synced :]:
        asked = asked or isinstance(m, UserMessage)
        if asked and isinstance(m, AssistantMessage):
            return True
    return False


async def _loop(rc: RunContext) -> AsyncIterator[Event]:
    state = rc.state
    rc.persist(durable=False)  # the first request's save makes it durable
    async for event in _start(rc):
        yield event
    while rc.halt is None:
        if rc.signal.cancelled:  # heard between steps (the step before ended as Stop came)
            rc.stop(Stop.cancelled(rc.signal.reason or "cancelled"))
            break
        pending = pending_tool_calls(state)
        if pending or result_is_answer(rc):
            async for event in run_pending(rc, pending):
                yield event
            _keep_latest_images(rc)
            _prompt_after_calls(rc)
            async for event in _compact_if_due(rc):
                yield event
            continue
        last = state.messages[-1] if state.messages else None
        if isinstance(last, AssistantMessage) and _to_continue(rc, last):
            async for event in ask_model(rc, Continuation(last)):  # once, with no tools: merged into it
                yield event
            continue
        if isinstance(last, AssistantMessage):
            halt = _finish(rc, last)
            if halt is None:
                continue  # structured output: a correction was written; ask again
            rc.stop(halt)
            break
        async for event in ask_model(rc):
            yield event


def _keep_latest_images(rc: RunContext) -> None:
    """Older images from tools leave the transcript (the process, the session, the next request) once
    there are more than ``max_images``; a cached answer that held one is forgotten with it."""
    if rc.agent.max_images is None:
        return
    replaced = keep_latest_images(rc.state.messages, rc.agent.max_images)
    if replaced:
        rc.read_cache = {k: v for k, v in rc.read_cache.items() if id(v) not in replaced}
        rc.persist(rewrite=True, durable=False)  # the next request's save makes it durable


async def _compact_if_due(rc: RunContext) -> AsyncIterator[Event]:
    if rc.halt is None and rc.agent.compaction and context_window(rc) is not None and await _past_threshold(rc):
        async for event in compact(rc):
            yield event


async def _past_threshold(rc: RunContext) -> bool:
    """Whether the context passed the compaction threshold. An upper bound that needs no
    tokenizer settles the check while the context is well below it; near it, exact counts do."""
    window = context_window(rc)
    if window is not None and rc.count is count_tokens and rc.prompt_bound() <= rc.agent.compaction_threshold * window:
        return False
    _start_counter(rc)
    return await rc.counter_ready() and should_compact(rc)


async def _start(rc: RunContext) -> AsyncIterator[Event]:
    """Before the first step: count a request lost in a crash, start the tokenizer, run every
    middleware's ``before_agent`` (which may stop the run); then, for a run that goes on from
    earlier turns (resumed, or a session's new message), compact if the window asks for it: a
    crash may have cut the compaction it was in."""
    state = rc.state
    lost = state.call_in_flight
    if lost is not None:  # the process died while a request was out: billed, never counted
        state.call_in_flight = None
        state.cost_unknown_usd += lost.max_cost_usd or 0.0
        state.tokens_unknown += lost.worst_tokens
        rc.persist(durable=False)
        yield SpentUnknown(state.run_id, lost.model, lost.prompt_tokens, lost.max_tokens, lost.max_cost_usd)
    if plans_calls(rc.agent):
        _start_counter(rc)  # the first plan waits for exact counts: start them now
    for mw in rc.agent.middleware:
        verdict = None
        # A hook's model calls listen to Stop and count what they cost: let it end its own way.
        async for item in pump(functools.partial(mw.before_agent, rc), rc.sink, rc.signal, cancel_work=False):
            if isinstance(item, Finished):
                verdict = item.value
            else:
                yield item
        if isinstance(verdict, Stop):
            rc.stop(verdict)
            return
        if rc.halt is not None:
            return
    if any(isinstance(m, AssistantMessage) for m in state.messages) and not pending_tool_calls(state):
        async for event in _compact_if_due(rc):
            yield event


def _capped(rc: RunContext, last: AssistantMessage) -> bool:
    """Whether the budget (or the token limit), not ``max_tokens``, cut the reply (its plan allowed
    fewer tokens)."""
    capped = plans_calls(rc.agent) and last.finish_reason == CUT
    return capped and (last.usage is None or last.usage.completion_tokens < rc.agent.max_tokens)


def _to_continue(rc: RunContext, last: AssistantMessage) -> bool:
    """A cut text answer is continued; a cut typed answer is not (a JSON document is asked for
    again whole, by the correction the schema check writes). One the budget cut short is continued
    when the budget can now pay for a longer reply (it was raised, and the run resumed), however
    often it was: the output limit did not cut it."""
    typed = rc.agent.output_type is not None
    if not rc.agent.continue_cut_text or typed:
        return False
    if _capped(rc, last):
        return not last.tool_calls and _budget_allows_more(rc, last)
    return continues(last)


def _budget_allows_more(rc: RunContext, last: AssistantMessage) -> bool:
    plan = plan_call(rc.agent, rc.state, rc.price, rc.prompt_estimate)
    return isinstance(plan, CallPlan) and plan.max_tokens > (last.usage.completion_tokens if last.usage else 0)


def _finish(rc: RunContext, last: AssistantMessage) -> Stop | None:
    """How a final answer ends the run; None when it was sent back for a correction."""
    if _capped(rc, last):
        return Stop(
            "budget_exceeded",
            "the last reply was cut short: the remaining budget (or token limit) could not pay for a longer one",
        )
    if last.finish_reason == ENDED_BY_TOOL:
        return Stop(
            "completed", f"{(last.model or 'a tool').removeprefix('tool/')} ended the run; its result is the answer"
        )
    if rc.agent.output_type is not None and last.finish_reason != WRITTEN_BY_POLICY:
        return check_answer(rc, last)  # a policy's note in words is not the model's answer
    empty = is_empty_answer(last)
    if is_cut(last) and last.continuations:
        kept = "it has no text" if empty else "the text so far is kept"
        return Stop(
            "failed",
            f"incomplete: the answer reached max_tokens ({rc.agent.max_tokens}) and its continuation did "
            f"not finish it (cut again, it wrote nothing new, or it called a tool instead); {kept}. Raise "
            "max_tokens, or ask for less at once",
        )
    if is_cut(last):
        cut = f"the reply reached max_tokens ({rc.agent.max_tokens}) and was cut"
        return Stop("completed", f"{cut}: {EMPTY_ANSWER}" if empty else cut)
    stopped = STOPPED_BY_PROVIDER.get(last.finish_reason or "")  # its text may be cut short: say so
    return Stop("completed", stopped or (EMPTY_ANSWER if empty else "the model answered"))


async def _after_agent(rc: RunContext) -> AsyncIterator[Event]:
    assert rc.halt is not None
    for mw in reversed(rc.agent.middleware):
        verdict = None
        async for item in pump(functools.partial(mw.after_agent, rc, rc.halt.status), rc.sink, CancelSignal()):
            if isinstance(item, Finished):
                verdict = item.value
            else:
                yield item
        if isinstance(verdict, Stop):
            rc.halt = verdict


def _done(rc: RunContext) -> Done:
    """The run's exit, saved (durably) on this thread: for a run whose caller is gone."""
    _closing(rc)
    for attempt in (1, 2):  # once more: a passing fault of the store should not leave `running`
        try:
            rc.persist()
            break
        except Exception as exc:
            _unsaved(rc, exc, attempt)
    return _done_event(rc)


async def _done_async(rc: RunContext) -> Done:
    """:func:`_done` with the final commit awaited off the event loop (its fsync shared with the
    other runs' in a server), so the loop serves them meanwhile."""
    _closing(rc)
    for attempt in (1, 2):
        try:
            await rc.persist_durably()
            break
        except asyncio.CancelledError:
            rc.persist()  # the commit may not have started: the exit is saved before the cancel goes on
            raise
        except Exception as exc:
            _unsaved(rc, exc, attempt)
    return _done_event(rc)


def _closing(rc: RunContext) -> None:
    state, halt = rc.state, rc.halt
    assert halt is not None
    # Whoever worded the stop (a middleware, a policy, a stop condition), no key it quoted is kept.
    state.status, state.reason, state.interruption = halt.status, without_secrets(halt.reason), halt.interruption
    wrong = halt.misconfiguration
    state.misconfiguration = wrong and wrong.model_copy(update={"why": without_secrets(wrong.why)})
    if rc.session is not None:
        note_waiting(rc.session, state)


def _unsaved(rc: RunContext, exc: Exception, attempt: int) -> None:
    state, halt = rc.state, rc.halt
    assert halt is not None
    _log.error("run %s: the final state could not be saved", state.run_id, exc_info=exc)
    if attempt == 2:  # the store itself is what failed: say so, still end the stream
        state.status, state.interruption = "failed", None
        state.reason = f"{halt.reason}; then the run could not be saved ({type(exc).__name__}: {told(exc)})"


def _done_event(rc: RunContext) -> Done:
    state = rc.state
    result = state.result()
    if state.status == "completed" and rc.agent.output_type is not None:
        data = final_data(rc.agent, state.messages)
        if data is not None:
            result = result.model_copy(update={"output": data, "typed": True})
    return Done(state.run_id, result)


async def run(
    agent: Agent,
    prompt: str | None = None,
    *,
    state: RunState | None = None,
    store: StateStore | None = None,
    tracer: Tracer | None = None,
    signal: CancelSignal | None = None,
    session: SessionStore | None = None,
    session_id: str | None = None,
    deps: Any = None,
    **peer: Never,
) -> RunResult:
    """Run to one of the five exits and return the result (consumes :func:`run_stream`)."""
    refuse_keywords("run", peer, _TAKES)
    result: RunResult | None = None
    async for event in run_stream(
        agent,
        prompt,
        state=state,
        store=store,
        tracer=tracer,
        signal=signal,
        session=session,
        session_id=session_id,
        deps=deps,
    ):
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
    signal: CancelSignal | None = None,
    session: SessionStore | None = None,
    session_id: str | None = None,
    deps: Any = None,
    **peer: Never,
) -> RunResult:
    """:func:`run` for code that is not async. ``signal`` stops the run from another thread:
    ``signal.cancel_threadsafe(reason)``."""
    from tether.providers.http import close_clients

    refuse_keywords("run_sync", peer, _TAKES)

    try:
        asyncio.get_running_loop()
    except RuntimeError:
        pass  # no loop running here: run_sync starts one
    else:
        raise UserError(
            "run_sync() was called inside a running event loop (an async function, a notebook): "
            "use `await run(agent, ...)` there instead"
        )

    async def main() -> RunResult:
        try:
            return await run(
                agent,
                prompt,
                state=state,
                store=store,
                tracer=tracer,
                signal=signal,
                session=session,
                session_id=session_id,
                deps=deps,
            )
        finally:
            await close_clients()  # the loop ends here: its pooled connections go with it

    return asyncio.run(main())


def is_resumable(result: RunResult) -> bool:
    return result.status in RESUMABLE
