"""Runs in the server's process: each one a task that outlives the request that started it, with
its events numbered in an :class:`EventLog` any number of clients can follow and rejoin.

A run is the library's run: saved after every change in the run store, traced, resumable. The
server adds ownership (who may see it), one live run per session, and a clean stop on shutdown
(every live run is cancelled and saved as ``interrupted``, resumable).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import dataclasses
import json
import logging
import os
import re
import stat
import sys
import threading
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from tether.cancel import CancelSignal
from tether.errors import StoreError
from tether.events import Done, Event, ToolResultEvent, ToolStart
from tether.fileio import atomic_write, open_private, read_own
from tether.harness.agent import Agent
from tether.harness.context import without_secrets
from tether.harness.loop import run_stream
from tether.harness.state import RunState, pending_tool_calls
from tether.harness.store import RunStore, read_header
from tether.messages import ToolMessage
from tether.server.events import EventLog, LogFile, args_hash, event_data, for_clients, pruned_line
from tether.server.store import ServerStore, TurnRecord
from tether.sessions import SessionStore
from tether.status import ApprovalInterruption, CancelledInterruption, OutcomeUnknownInterruption, Stop
from tether.tracing import JsonlTracer

__all__ = [
    "AWAY_WAIT_S",
    "CUT",
    "NEVER_BEGAN",
    "NOT_BEGUN",
    "YOUNG_COLLECT_EVERY",
    "Lateness",
    "LiveRun",
    "NotRecorded",
    "RunLoops",
    "RunManager",
    "StillAway",
    "refused",
    "run_parts",
    "run_tracer",
    "tune_collector",
    "waiting",
]

_log = logging.getLogger("tether.server")


@dataclass
class LiveRun:
    run_id: str
    session_id: str
    signal: CancelSignal
    log: EventLog
    loop: asyncio.AbstractEventLoop | None = None  # the run loop it runs on
    task: asyncio.Future[None] | None = None  # done when the run has ended (on the server's loop)
    state: RunState | None = field(default=None, repr=False)
    began_after: int = 0  # the last event id before this part of the run (a resume goes on from it)
    halt: Callable[[str, bool], None] | None = None  # how to stop it when it runs in another process
    turn: TurnRecord | None = field(default=None, repr=False)  # the message it answers (and who sent it)
    # Set at Stop, on the stopper's thread: a save waiting for the database hears it (the run's
    # loop, busy in that save, would hear the signal only once the save is over).
    stopping: threading.Event = field(default_factory=threading.Event, repr=False)

    @property
    def ended(self) -> bool:
        """Whether this part of the run has said its ``done`` (not a resume's earlier one)."""
        return self.log.last_id > self.began_after and self.log.items[-1][1] == "done"

    @property
    def asking(self) -> bool:
        """Whether this part of the run has put a question to a person (``approval_required``): it
        is ending, to wait for the answer (a call beside the asked one may still run; its last saves)."""
        for event_id, kind, _ in reversed(self.log.items):
            if event_id <= self.began_after:
                return False
            if kind == "approval_required":
                return True
        return False

    def stop(self, reason: str, *, now: bool = True) -> None:
        """Stop the run. ``now``: a save of it that waits for the database stops waiting (the run
        ends at once, saved once the database is back); a shutdown's stop lets it wait, so that
        what the run did is saved before the process ends."""
        if now:
            self.stopping.set()
        if self.halt is not None:
            self.halt(reason, now)
        elif self.loop is not None and self.loop.is_running():
            self.loop.call_soon_threadsafe(self.signal.cancel, reason)
        else:
            self.signal.cancel(reason)


# The cyclic collector's youngest generation in a process that serves runs: collected after this many
# new objects (Python's default is 700). See tune_collector.
YOUNG_COLLECT_EVERY = 10_000


def tune_collector() -> None:
    """The cyclic garbage collector as a process that serves runs needs it (``tether serve`` once it
    listens, a run process once it is built). Under load the collector took about 8 % of the
    server's CPU (perf, 500 streams): with Python's default, the youngest generation is walked
    after every 700 new objects, and what hundreds of live requests and runs hold for a moment is
    walked again and again and moved on to the older generations, whose full walks then cross
    everything the imports made (pydantic's schemas, the app). Here what exists at start is
    frozen, never walked again (it lives as long as the process; not collected first: a full
    collection there cost 40 ms of start-up and freed nothing), and the youngest generation is
    collected every :data:`YOUNG_COLLECT_EVERY` new objects, so that most of a request's objects
    are freed by their reference counts before a walk sees them. Garbage in cycles is still
    collected; at most that many more objects wait for it."""
    import gc

    gc.freeze()
    _, middle, oldest = gc.get_threshold()
    gc.set_threshold(YOUNG_COLLECT_EVERY, middle, oldest)


def resume_changes(
    state: RunState, more_turns: int | None, max_budget_usd: float | None, max_run_tokens: int | None = None
) -> dict[str, Any]:
    """What a resume asks of the agent's limits: ``more_turns`` beyond the turns already taken, a
    new budget in dollars, a new token limit (both totals; for :meth:`Runs.resume`, wherever the
    runs are driven), over those an earlier resume raised. Kept in the run's config (saved with
    it), so every later continuation of the run (a decision's) goes on under them too, as
    ``tether resume`` keeps what it raised: it went on under the agent's own limits again, and a
    run resumed with more turns stopped at once after its next approval."""
    raised = state.config.get(_RAISED)
    changes: dict[str, Any] = dict(raised) if isinstance(raised, dict) else {}
    if more_turns is not None:
        changes["max_turns"] = state.turns + more_turns
    if max_budget_usd is not None:
        changes["max_budget_usd"] = max_budget_usd
    if max_run_tokens is not None:
        changes["max_run_tokens"] = max_run_tokens
    changes = {k: v for k, v in changes.items() if k in _LIMITS}  # a hand-edited header raises nothing else
    if changes:
        state.config[_RAISED] = changes
    return changes


_RAISED = "raised_limits"  # the run's config key of the limits its resumes raised
_LIMITS = ("max_turns", "max_budget_usd", "max_run_tokens")


class Lateness:
    """Whether the server's HTTP loop is running late, so the run loops give way to it.

    Runs and requests share one interpreter lock. Under load a run loop busy with hundreds of runs
    keeps it, and every request waits for it at each system call (a SQLite query, a socket write):
    a new message's first event then comes after seconds. While runs are live, a tick on the HTTP
    loop every ``every_s`` notes how late it fired; while it is late by more than ``late_s``, an
    event a run emits first sleeps ``cede_s``, handing the lock to the requests, at most once per
    ``cede_s`` of the run loops' own time (so a stream of tokens is slowed by half at worst, and
    only while requests wait). A server with nothing live does not tick."""

    def __init__(
        self, live: Callable[[], bool], every_s: float = 0.005, late_s: float = 0.002, cede_s: float = 0.001
    ) -> None:
        self.live = live  # whether any run is live
        self.every_s, self.late_s, self.cede_s = every_s, late_s, cede_s
        self.late = False
        self._ticking = False
        self._ceded = 0.0  # when a run loop last woke from giving way

    def wake(self, loop: asyncio.AbstractEventLoop) -> None:
        """Start ticking on ``loop`` (the HTTP loop) if it is not already."""
        if not self._ticking:
            self._ticking = True
            loop.call_later(self.every_s, self._tick, loop, loop.time() + self.every_s)

    def _tick(self, loop: asyncio.AbstractEventLoop, due: float) -> None:
        now = loop.time()
        self.late = now - due > self.late_s
        if self.live():
            loop.call_later(self.every_s, self._tick, loop, now + self.every_s)
        else:
            self._ticking = self.late = False

    def cede(self) -> None:  # on a run loop
        if self.late and time.monotonic() - self._ceded >= self.cede_s:
            time.sleep(self.cede_s)
            self._ceded = time.monotonic()


class _Courier:
    """Carries a run's events from its run loop to the server's loop, in order. Events that come
    while a delivery is pending ride with it: one wake-up of the server's loop per batch, not per
    event (under load, each wake-up is a thread switch and a write to the loop's pipe). Before
    each, the run gives way to a late HTTP loop (:class:`Lateness`)."""

    def __init__(self, home: asyncio.AbstractEventLoop, deliver: Any, lateness: Lateness) -> None:
        self.home, self.deliver, self.lateness = home, deliver, lateness
        self.pending: list[tuple[str, dict[str, Any]]] = []
        self.lock = threading.Lock()

    def send(self, kind: str, data: dict[str, Any]) -> None:  # on the run's loop
        self.lateness.cede()
        with self.lock:
            self.pending.append((kind, data))
            if len(self.pending) > 1:
                return  # a delivery is scheduled and takes this one too
        self.home.call_soon_threadsafe(self._drain)

    def _drain(self) -> None:  # on the server's loop
        with self.lock:
            batch, self.pending = self.pending, []
        self.deliver(batch)


class RunLoops:
    """Threads (one by default), each running an event loop for the runs given to it, apart from
    the server's HTTP loop; each keeps its pooled model connections across runs. A run's durable
    saves are awaited off its loop (group commit), so one loop serves many runs; more loops only add
    GIL hand-offs (at 500 streams one loop reached the first event in half the time of four).
    Events go back to the server's loop in order, in batches."""

    def __init__(self, threads: int) -> None:
        self.size = max(1, threads)
        self.loops: list[asyncio.AbstractEventLoop] = []
        self.load: list[int] = []
        self._threads: list[threading.Thread] = []
        self._lock = threading.Lock()

    def _start(self) -> None:
        for i in range(self.size):
            loop = asyncio.new_event_loop()
            thread = threading.Thread(target=loop.run_forever, name=f"tether-runs-{i}", daemon=True)
            thread.start()
            self.loops.append(loop)
            self.load.append(0)
            self._threads.append(thread)

    def submit(self, make: Any) -> tuple[asyncio.AbstractEventLoop, concurrent.futures.Future[None]]:
        """Run ``make()`` (a coroutine) on the least busy loop."""
        with self._lock:
            if not self.loops:
                self._start()
            i = min(range(self.size), key=self.load.__getitem__)
            self.load[i] += 1
        loop = self.loops[i]
        future = asyncio.run_coroutine_threadsafe(make(), loop)
        future.add_done_callback(lambda _: self._release(i))
        return loop, future

    def _release(self, i: int) -> None:
        with self._lock:
            self.load[i] -= 1

    def close(self) -> None:
        from tether.providers.http import close_clients

        for loop in self.loops:
            with contextlib.suppress(Exception):
                asyncio.run_coroutine_threadsafe(close_clients(), loop).result(5)
            loop.call_soon_threadsafe(loop.stop)
        for thread in self._threads:
            thread.join(5)
        self.loops.clear()
        self._threads.clear()


def run_tracer(home: Path, telemetry: Any, turn: TurnRecord, *, resumed: bool, cost_usd: float = 0.0) -> Any:
    """The tracers of a served run: its trace file, and its span tree when telemetry is on
    (``cost_usd``: what a resumed run had spent, so its first chat span gets only its own cost)."""
    tracers: list[Any] = [JsonlTracer(home / "traces")]
    if telemetry is not None:  # the message's trace: its id derived from session_id:message_id
        tracers.append(
            telemetry.tracer(
                trace_id=turn.trace_id,
                resumed=resumed,
                cost_usd=cost_usd,
                attributes={
                    "tether.run_id": turn.run_id,
                    "tether.session_id": turn.session_id,
                    "tether.message_id": turn.message_id,
                    "gen_ai.agent.name": turn.agent,
                },
            )
        )
    if len(tracers) == 1:
        return tracers[0]
    from tether.tracing import FanoutTracer

    return FanoutTracer(*tracers)


def refused(state: RunState, runs: Any, new: bool, reason: str, tracer: Any = None) -> dict[str, Any]:
    """The ``done`` event of a run that could not start; a new one is saved ``failed`` so it is
    not left without an exit, a resume that was refused leaves the saved run as it is. What the
    failure quoted of a key (an extension that could not sign in) is taken out. ``tracer``, the
    one made for the run that did not take it: a new run's end is its trace's last line and its
    span's status (the span was started and never ended, so a thumbs-down on the answer found no
    run in its trace)."""
    reason = without_secrets(reason)
    if new:
        state.status, state.reason = "failed", reason
        with contextlib.suppress(Exception):
            runs.save(state)
        result = state.result()
    else:
        result = state.result().model_copy(update={"reason": reason})
    done = Done(state.run_id, result)
    if new and tracer is not None:
        with contextlib.suppress(Exception):  # the trace is a view of the run
            tracer.write(done)
            tracer.close()
    return event_data(done)


def waiting(state: RunState) -> dict[str, Any] | None:
    """What the run waits for, as a decision must quote it: the call, its arguments and their hash."""
    w = state.interruption
    if w is None or state.status != "interrupted":
        return None
    if isinstance(w, ApprovalInterruption | OutcomeUnknownInterruption):
        call = next((c for c in pending_tool_calls(state) if c.id == w.call_id), None)
        raw = call.arguments if call is not None else ""
        return {
            "type": w.type,
            "call_id": w.call_id,
            "tool_name": w.tool_name,
            "args": w.args,
            "arguments": raw,  # as the model wrote them (what args_hash is of; args is them parsed)
            "args_hash": args_hash(raw),
            "still_running": getattr(w, "still_running", False),
        }
    data = w.model_dump(mode="json")
    if w.type == "guardrail":
        data |= {"call_id": f"guardrail:{data['key']}", "args_hash": args_hash(data["key"])}
    elif w.type in ("subagent", "elicitation", "sampling"):
        call = next((c for c in pending_tool_calls(state) if c.id == data["call_id"]), None)
        data["args_hash"] = args_hash(call.arguments if call is not None else "")
    if w.type in ("elicitation", "sampling"):  # one call may ask several questions: bound to this one
        data["args_hash"] = args_hash(f"{data['args_hash']}\n{w.key}")
    if w.type == "subagent":  # what the person decides is the child's question: shown, and quoted
        asked = _childs_question(state, w.call_id)
        if asked is not None:
            data["asked"] = asked
            data["args_hash"] = args_hash(f"{data['args_hash']}\n{asked.get('call_id')}\n{asked.get('args_hash')}")
    if w.type == "elicitation" and w.requested_schema is not None:
        from tether.connectors.forms import schema_form

        data["form"] = schema_form(w.requested_schema, title=w.message)
    return data


def saved_header(runs: Any, run_id: str) -> tuple[RunState, int | None] | None:
    """The run as its last commit's header says it (status, stop, usage, cost), its messages not
    read, and its model turns as saved: what a view of a run needs but for the call it waits for,
    in one small read. A served session's k-th run holds the conversation up to it, so loading each
    whole made a session of n turns read n²/2 turns. The turns are None when the state is the run
    loaded whole instead: a store with no header of its own, a header that does not count its
    turns, or a transcript shorter than its header counts (after a power cut the run is an earlier
    commit, which the load finds). None: never saved; ``StoreError``: damaged."""
    header_state = getattr(runs, "header_state", None)  # PgRunStore: the row's header, no messages
    if header_state is not None:
        found: tuple[RunState, int | None] | None = header_state(run_id)
        if found is None or found[1] is not None:
            return found
    elif isinstance(runs, RunStore):
        state = _header_of(runs.root, run_id)
        if state is not None or not runs.exists(run_id):
            return state
    return (runs.load(run_id), None) if runs.exists(run_id) else None


def _header_of(root: Path, run_id: str) -> tuple[RunState, int] | None:
    """:func:`saved_header` in a :class:`RunStore`'s folder; None: read the run whole."""
    d = root / run_id
    if "/" in run_id or "\\" in run_id or run_id.startswith(".") or os.path.islink(d):
        raise StoreError(f"{d} is not a run's folder (a link, or not a run id): it is not read through")
    header = read_header(d)
    if header is None or header.get("run_id", run_id) != run_id:  # a copied folder: the load says so
        return None
    turns, name = header.pop("turns", None), header.get("messages_file", "messages.jsonl")
    # The header counts messages_bytes of its transcript; one that carries the bytes since the last
    # fsync (synced_bytes) needs only those on disk. Shorter, or not a plain file: the load decides.
    needed = header.get("synced_bytes", header.get("messages_bytes", 0))
    if not isinstance(turns, int) or not isinstance(name, str) or not re.fullmatch(r"messages(-\d+)?\.jsonl", name):
        return None
    if needed:
        try:
            found = os.stat(d / name, follow_symlinks=False)
        except OSError:
            return None
        if not stat.S_ISREG(found.st_mode) or found.st_size < needed:
            return None
    try:
        return RunState.model_validate({**header, "messages": []}), turns
    except ValueError as exc:
        raise StoreError(f"the header of {d} does not describe a run: {exc}") from None


def _childs_question(state: RunState, call_id: str) -> dict[str, Any] | None:
    """The question of the sub-agent that call ``call_id`` runs, as :func:`waiting` says it (its
    call, its arguments as the child's model wrote them, a form), read from the child's state the
    parent keeps; None when that state is not there."""
    from tether.harness.subagent import children

    saved = children(state).get(call_id)
    if not isinstance(saved, dict) or saved.get("done"):
        return None
    try:
        child = RunState.model_validate(saved)
    except ValueError:
        return None
    return waiting(child)


# How long a worker's run that met the database away waits for it, to save what it did (as its events
# do, in the database too). A server's own runs keep their events in files: they wait as long as it takes.
AWAY_WAIT_S = 120.0

_AWAY_REASON = (
    "the database could not be reached while the run saved its progress; it goes on from here "
    "once the database is back (resume it if it does not)"
)


class NotRecorded(StoreError):
    """A run stopped while the database was away is resumed before its stop could be saved (503)."""

    unavailable = True


class StillAway(StoreError):
    """The database stayed away longer than the run waits to save what it did (``AWAY_WAIT_S``): the
    run is left as last saved (a worker's job stays running, to be driven again from there)."""


async def run_parts(
    agent: Agent,
    prompt: str | None,
    *,
    state: RunState,
    runs: Any,
    sessions: SessionStore,
    signal: CancelSignal,
    tracer_of: Callable[[bool], Any],
    away_wait_s: float | None = AWAY_WAIT_S,
    unrecorded: Callable[[RunState, concurrent.futures.Future[None]], None] | None = None,
    stopping: threading.Event | None = None,
) -> AsyncIterator[Event]:
    """``run_stream``, going on through the database away. On Postgres, a run whose save met the
    database away for longer than the save waits ends ``failed`` in the loop, while its saved state
    still says ``running``: that end is the database's, not the run's, and is not told. What the run
    did (a reply paid for, a tool's result) is saved as soon as the database is back, and the run
    goes on from there (:class:`StillAway` when it is not back within ``away_wait_s``; None: as long
    as it takes). A Stop meanwhile ends the run at once, ``interrupted`` with its reason, nothing
    more started: that end is saved once the database is back (``unrecorded(state, saving)`` hears
    of it, ``saving`` done when it is). ``stopping``, set with the Stop from any thread, ends a save's
    wait for the database at once (the run's loop is busy in it, deaf to ``signal``): the run then
    stops the same way. ``tracer_of(resumed)`` makes each part's tracer."""
    prompt_of_part = prompt
    while True:
        watch, store, session = _watching(runs, sessions, stopping)
        held = False
        open_calls: set[str] = set()  # started in this part, their result not told yet
        async for event in run_stream(
            agent,
            prompt_of_part,
            state=state,
            store=store,
            tracer=tracer_of(prompt_of_part is None),
            signal=signal,
            session=session,
        ):
            lost = getattr(runs, "lost", None)  # another process took the run over: the end is its own
            if (
                isinstance(event, Done)
                and watch is not None
                and watch.away is not None
                and event.result.status == "failed"
                and not (lost is not None and lost(state.run_id))
            ):
                held = True
                continue
            if isinstance(event, ToolStart | ToolResultEvent):
                (open_calls.add if isinstance(event, ToolStart) else open_calls.discard)(event.call_id)
            yield event
        if not held or watch is None or watch.away is None:
            return
        saving = await _record_when_back(runs, sessions, state, watch.away, away_wait_s, signal)
        for event in _results_kept(state, open_calls):  # recorded, their save met the database away
            yield event
        if saving is not None:  # stopped while it waited
            if unrecorded is not None:
                unrecorded(state, saving)
            done = Done(state.run_id, state.result())
            with contextlib.suppress(Exception):  # the trace's last line says why it stopped, as ever
                tracer = tracer_of(True)
                tracer.write(done)
                tracer.close()
            yield done
            return
        prompt_of_part = None


def _results_kept(state: RunState, calls: set[str]) -> list[ToolResultEvent]:
    """The ``tool_result`` events of ``calls`` whose result the state holds: the save after a result
    is recorded comes before its event, and a save that met the database away ended the part first."""
    return [
        ToolResultEvent(state.run_id, m.call_id, m.name, ok=not m.is_error, ms=0.0, status=m.status)
        for m in state.messages
        if isinstance(m, ToolMessage) and m.call_id in calls
    ]


def _watching(
    runs: Any, sessions: SessionStore, stopping: threading.Event | None = None
) -> tuple[Any, Any, SessionStore]:
    """A watch and the Postgres stores that report to it (their waits for the database end when
    ``stopping`` is set); other stores, as they are, unwatched."""
    if type(runs).__module__ != "tether.postgres.runs":
        return None, runs, sessions
    from tether.postgres.away import Watch, WatchedRuns, WatchedSessions
    from tether.postgres.sessions import PgSessionStore

    watch = Watch(stopping)
    session = WatchedSessions(sessions.db, watch) if isinstance(sessions, PgSessionStore) else sessions
    return watch, WatchedRuns(runs.db, watch), session


def _interrupt(state: RunState, why: str) -> None:
    state.status, state.reason, state.interruption = "interrupted", why, CancelledInterruption(reason=why)
    state.call_in_flight = None


async def _record_when_back(
    runs: Any, sessions: SessionStore, state: RunState, away: Exception, wait_s: float | None, signal: CancelSignal
) -> concurrent.futures.Future[None] | None:
    """Save ``state`` (what the run did before the database went away) as soon as it is back:
    ``interrupted`` and resumable, should nothing drive it on from there. None once it is saved;
    when Stop comes first, the run is stopped now (as the loop stops it) and the save of that goes
    on: returned, done once the database is back."""
    _interrupt(state, _AWAY_REASON)
    _log.warning("run %s: %s; what it did is saved once the database is back", state.run_id, away)
    saving = _save_when_back(runs, state, wait_s, sessions=sessions)
    loop = asyncio.get_running_loop()
    stop: asyncio.Future[None] = loop.create_future()

    def heard(_: str) -> None:  # on whichever thread fired the signal
        loop.call_soon_threadsafe(_settle, stop)

    signal.add_callback(heard)
    try:
        if not signal.cancelled:
            saved = asyncio.wrap_future(saving)
            saved.add_done_callback(lambda f: f.cancelled() or f.exception())  # read later, or not at all
            await asyncio.wait((saved, stop), return_when=asyncio.FIRST_COMPLETED)
    finally:
        signal.remove_callback(heard)
    if saving.done() and not signal.cancelled:
        saving.result()  # StillAway: not back in time
        return None
    halt = Stop.cancelled(signal.reason or "cancelled")
    state.status, state.reason, state.interruption = halt.status, halt.reason, halt.interruption
    _log.warning("run %s: %s while it waited for the database; saved once it is back", state.run_id, halt.reason)
    return _save_when_back(runs, state, None, after=saving, sessions=sessions)


def _sync_session(sessions: SessionStore, state: RunState) -> None:
    """Give the run's session what the run did since it was last synced (an append that met the
    database away; a load meanwhile put a placeholder for the call's result there): the run is the
    truth, as when it is resumed, unless the conversation went on in the session since."""
    from tether.harness.loop import went_on

    if state.session_id is None:
        return
    history = sessions.load(state.session_id)
    if went_on(state, history):
        _log.warning("run %s: its session went on meanwhile; its last messages stay in the run only", state.run_id)
        return
    if history != state.messages:
        sessions.rewrite(state.session_id, state.messages)
    state.session_synced = len(state.messages)


def _settle(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_result(None)


def _save_when_back(
    runs: Any,
    state: RunState,
    wait_s: float | None,
    after: concurrent.futures.Future[None] | None = None,
    sessions: SessionStore | None = None,
) -> concurrent.futures.Future[None]:
    """Save ``state`` on a thread of its own, again and again while the database is away (for
    ``wait_s`` at most; None: as long as the process lives), once ``after`` (an earlier save) is over.
    With ``sessions``, the run's session gets what it lacks of the run first (should no later part
    of the run give it, a next message's run would read a call without its result)."""
    from tether.postgres.db import unreachable

    saving: concurrent.futures.Future[None] = concurrent.futures.Future()

    def save() -> None:
        if after is not None:
            concurrent.futures.wait([after])
        deadline = None if wait_s is None else time.monotonic() + wait_s
        while True:
            try:
                if sessions is not None:
                    _sync_session(sessions, state)
                runs.save(state)
            except Exception as exc:
                closed = runs.db.pool.closed  # this process is ending: what it did stays unsaved
                if unreachable(exc) and not closed and (deadline is None or time.monotonic() < deadline):
                    time.sleep(0.2)  # each save waits for the database itself first (Database.retry_s)
                    continue
                if after is not None:
                    _log.warning("run %s: its stop could not be saved: %s", state.run_id, exc)
                saving.set_exception(StillAway(f"run {state.run_id} waits for the database: {exc}"))
                return
            saving.set_result(None)
            return

    threading.Thread(target=save, name=f"tether-save-{state.run_id}", daemon=True).start()
    return saving


async def drive(
    turn: TurnRecord,
    agent: Agent,
    state: RunState,
    prompt: str | None,
    chosen: dict[str, Any],
    emit: Callable[[str, dict[str, Any]], None],
    signal: CancelSignal,
    runs: Any,
    sessions: SessionStore,
    tracer_of: Callable[[TurnRecord, bool, float], Any],
    unrecorded: Callable[[RunState, concurrent.futures.Future[None]], None] | None = None,
    stopping: threading.Event | None = None,
) -> None:
    """One served run (or one part of it, after a decision), on the loop that drives it, acting for
    its user (their own MCP accounts): each event goes to ``emit`` as ``(kind, data)``, and a run
    refused before it began still ends with a ``done``. The same in the server's process and in a
    run process of its own. Its events are not in the database: a run that meets the database away
    waits for it as long as it takes, or until Stop (``unrecorded``, ``stopping``: :func:`run_parts`)."""
    from tether.connectors._acting import acting_for

    saw_done = False
    tracers: list[Any] = []  # the last is the one a run that could not start did not take

    def part_tracer(resumed: bool) -> Any:
        tracers.append(tracer_of(turn, resumed, state.cost_usd))
        return tracers[-1]

    with acting_for(turn.owner):
        try:
            async for event in run_parts(
                agent,
                prompt,
                state=state,
                runs=runs,
                sessions=sessions,
                signal=signal,
                tracer_of=part_tracer,
                away_wait_s=None,
                unrecorded=unrecorded,
                stopping=stopping,
            ):
                emit(event.type, event_data(event, chosen))
                saw_done = saw_done or event.type == "done"
        except (
            StillAway
        ) as exc:  # what it did is not saved: its end says so, and to resume it once the database is back
            _log.error("%s", exc)
            emit("done", event_data(Done(state.run_id, state.result())))
        except Exception as exc:  # refused before it began: a configuration error, a run held elsewhere
            _log.warning("run %s could not start: %s", turn.run_id, exc)
            if not saw_done:
                reason = f"the run could not start: {exc}"
                emit("done", refused(state, runs, prompt is not None, reason, tracers[-1] if tracers else None))
        except asyncio.CancelledError:  # cut after the shutdown's grace: run_stream saved the stop
            if not saw_done:
                emit("done", event_data(Done(state.run_id, state.result())))
            raise


def _database_away(exc: BaseException) -> bool:
    if "psycopg" not in sys.modules:  # never imported: no store of this process uses Postgres
        return False
    from tether.postgres.db import unreachable

    return unreachable(exc)


# What a run cut by the server's stop says (its view, and the done it is given at the next start).
CUT = "the server stopped while this run was running; resume it to continue"
NOT_BEGUN = "the server stopped before this run began (nothing was sent to the model); resume it to start it"
NEVER_BEGAN = (
    "this run never began (the server stopped before its first save, and its message was not kept); "
    "send the message again"
)


class RunLog(Protocol):
    """A run's events as a stream reads them (:class:`EventLog` here; a cluster node's reads them
    from the table)."""

    def ready(self, after: int) -> list[tuple[int, str, str]]: ...
    def follow(self, after: int, *, keepalive_s: float = 15.0) -> AsyncIterator[list[tuple[int, str, str]] | None]: ...


class Runs(Protocol):
    """Who runs the server's runs, as its routes use them: :class:`RunManager` (this process's
    threads, or run processes of its own) or ``tether.dispatch.remote.RemoteRuns`` (workers behind
    a queue). Typed, so that a route cannot use what one of them lacks."""

    closing: bool
    sessions: SessionStore  # the conversations the runs keep

    def log(self, run_id: str) -> RunLog: ...
    def state(self, run_id: str) -> RunState | None: ...
    def live_run_of(self, session_id: str) -> str | None: ...
    def is_live(self, run_id: str) -> bool: ...
    def live_count(self) -> int: ...
    # Start (continue) the run: from the call on, live_run_of names it in its session (a request
    # that checked the session was free awaits nothing before the call, so no other starts a run
    # there), and a stop reaches it. Awaited: a remote run's job is written off the event loop.
    async def begin(self, turn: TurnRecord, text: str, chosen: dict[str, Any]) -> None: ...
    async def carry_on(
        self,
        turn: TurnRecord,
        state: RunState,
        chosen: dict[str, Any],
        *,
        more_turns: int | None = None,
        max_budget_usd: float | None = None,
        max_run_tokens: int | None = None,
        log: EventLog | None = None,
    ) -> None: ...
    def cancel(self, run_id: str, reason: str) -> bool: ...
    async def settled(self, run_id: str) -> bool: ...
    async def wait_ended(self, run_id: str, timeout: float) -> None: ...
    async def shutdown(self, grace_s: float = 10.0) -> None: ...
    def close(self) -> None: ...


class RunManager:
    """Starts, follows, cancels and resumes the server's runs."""

    def __init__(
        self,
        *,
        home: Path,
        agents: dict[str, Agent],
        runs: RunStore,
        sessions: SessionStore,
        store: ServerStore,
        telemetry: Any = None,
        threads: int = 1,
        processes: Any = None,
    ) -> None:
        self.home = home
        self.agents = agents
        self.runs = runs
        self.sessions = sessions
        self.store = store
        self.telemetry = telemetry
        self.live: dict[str, LiveRun] = {}
        self.by_session: dict[str, str] = {}
        self.closing = False
        self.loops = RunLoops(threads)
        self.lateness = Lateness(lambda: bool(self.live))
        self.processes = processes  # RunProcesses: runs driven in processes of their own (run_processes)
        # Runs stopped while the database was away, until what they did is saved (their sessions wait too).
        self.unrecorded: dict[str, tuple[RunState, concurrent.futures.Future[None]]] = {}
        self._watching: asyncio.Task[None] | None = None  # _watch_stops, while runs are live here

    def log_path(self, run_id: str) -> Path:
        return self.home / "serve" / "events" / f"{run_id}.log"

    def start_path(self, run_id: str) -> Path:
        return self.home / "serve" / "starts" / f"{run_id}.json"

    def stop_path(self, run_id: str) -> Path:
        """Where a Stop of the run, taken by another process on this home, waits for the one
        that drives it (:meth:`_watch_stops`)."""
        return self.home / "serve" / "stops" / f"{run_id}.json"

    def accept(self, run_id: str, text: str) -> None:
        """Keep the message of a run about to be recorded until the run saves itself: a server
        killed in between (while an extension starts, say) leaves the run resumable from this,
        not a turn with nothing behind it. Call it before the turn is recorded."""
        path = self.start_path(run_id)
        # One write to a file of its own (the run id is new), no fsync and no rename: a killed
        # process leaves what it wrote to the kernel; a cut that leaves it empty or torn reads as
        # not kept (the run shows failed with a reason), as a power cut does. On the HTTP loop,
        # every system call saved is a hand-off of the interpreter lock saved under load.
        try:
            fd = open_private(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)  # a planted link is refused
            try:
                os.write(fd, json.dumps({"text": text}).encode())
            finally:
                os.close(fd)
        except OSError as exc:  # the run goes on; only a kill before its first save would lose it
            _log.warning(
                "could not keep the message of run %s in %s (%s): if the server stops before the "
                "run's first save, the run shows failed and the message must be sent again",
                run_id,
                path,
                exc.strerror or exc,
            )

    def _mark_live(self, run_id: str, prompt: str | None, began_after: int) -> None:
        """A run continued (or begun after a restart) keeps a start record too while it is live,
        saying where its part's events begin: a server killed meanwhile ends the part at its next
        start (:meth:`end_cut_runs`). One small write, as :meth:`accept`'s."""
        record = {"began_after": began_after} | ({"text": prompt} if prompt is not None else {})
        try:
            fd = open_private(self.start_path(run_id), os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
            try:
                os.write(fd, json.dumps(record).encode())
            finally:
                os.close(fd)
        except OSError as exc:  # the run goes on; only a kill would leave its stream without its end
            _log.warning("could not note run %s as live in %s: %s", run_id, self.start_path(run_id), exc)

    def end_cut_runs(self) -> int:
        """At start, before any request: each run a killed server left live (its start record is
        still there) whose events lack the ``done`` of its last part gets one, as of its last save
        (``interrupted`` and resumable when it was running, as :meth:`RunProcesses.cut_short` ends a
        run whose process died). Without it the run's stream ended with nothing said, and a client
        that reconnects (a browser's EventSource) read it again and again. How many were ended."""
        try:
            names = os.listdir(self.home / "serve" / "starts")
        except OSError:
            return 0
        ended = 0
        for name in names:
            run_id = name.removesuffix(".json")
            if not name.endswith(".json") or run_id in self.live:
                continue
            try:
                began_after = int(json.loads(read_own(self.start_path(run_id))).get("began_after", 0))
            except (OSError, ValueError, TypeError, AttributeError):
                began_after = 0
            log = EventLog.load(self.log_path(run_id))
            try:
                # No stream to end (or a pruned one), or one that has its end: nothing to add.
                if log.items and not (log.last_id > began_after and log.items[-1][1] == "done"):
                    if self._held_elsewhere(run_id):  # live in another process (a second server on
                        continue  # this home): its own events go on in the log, numbered by it
                    log.append("done", for_clients(self._cut_done(run_id), self.home))
                    ended += 1
                if self.runs.exists(run_id):  # its record is not read again (a resume notes it anew)
                    self.forget(run_id)
            except Exception as exc:  # one run's damaged files do not keep the server from starting
                _log.error("could not end the events of run %s, cut by the server's stop: %s", run_id, exc)
                if _database_away(exc):  # each run would wait for it in turn: the next start ends them
                    break
            finally:
                log.close()
        return ended

    def _held_elsewhere(self, run_id: str) -> bool:
        held = getattr(self.runs, "held", None)  # a run store on this machine's files can say
        if held is None or run_id in self.live:
            return False
        try:
            return bool(held(run_id))
        except Exception:  # a run id no store has (a bad path): held by nobody
            return False

    def _cut_done(self, run_id: str) -> dict[str, Any]:
        """The ``done`` of a run the server's stop cut, as of its last save."""
        state = self.runs.load(run_id) if self.runs.exists(run_id) else None
        if state is None:
            state = RunState(run_id=run_id, status="failed", reason=NEVER_BEGAN)
            if self.unstarted(run_id) is not None:
                state.status, state.reason = "interrupted", NOT_BEGUN
        result = state.result()
        if result.status == "running":
            result = result.model_copy(update={"status": "interrupted", "reason": CUT})
        return event_data(Done(run_id, result))

    def unstarted(self, run_id: str) -> str | None:
        """The message of a run that was accepted and never saved (the server stopped first)."""
        try:
            text = json.loads(read_own(self.start_path(run_id))).get("text")  # not a planted link or pipe
        except (OSError, ValueError, AttributeError):
            return None
        return text if isinstance(text, str) and not self.runs.exists(run_id) else None

    def prune_events(self, keep_s: float, *, now: float | None = None) -> int:
        """Empty the event logs of runs that are not live and were last written more than
        ``keep_s`` seconds ago, down to one line with the last event id (a run resumed later
        numbers on from it); their transcripts stay, and a replay of one is made from it.
        Returns how many were pruned."""
        cutoff = (time.time() if now is None else now) - keep_s
        deleted = 0
        folder = self.home / "serve" / "events"
        try:
            entries = list(os.scandir(folder))
        except FileNotFoundError:
            return 0
        for entry in entries:
            run_id = entry.name.removesuffix(".log")
            if not entry.name.endswith(".log") or run_id in self.live:
                continue
            with contextlib.suppress(FileNotFoundError):
                if not entry.is_file(follow_symlinks=False) or entry.stat(follow_symlinks=False).st_mtime >= cutoff:
                    continue
                if self._held_elsewhere(run_id):  # live in another process on this home (quiet a while)
                    continue
                log = EventLog.load(Path(entry.path))
                if not log.items:
                    continue  # pruned already (or empty)
                atomic_write(Path(entry.path), pruned_line(log.last_id), fsync=False)
                deleted += 1
        return deleted

    def forget(self, run_id: str) -> None:
        with contextlib.suppress(OSError):
            self.start_path(run_id).unlink()

    def log(self, run_id: str) -> RunLog:
        live = self.live.get(run_id)
        if live is not None:
            return live.log
        # Not live here: followed as another process on this home writes it while that one holds the run.
        return LogFile(
            self.log_path(run_id),
            held=lambda: self._held_elsewhere(run_id),
            started=lambda: self.start_path(run_id).exists(),
        )

    def _unrecorded(self, state: RunState, saving: concurrent.futures.Future[None]) -> None:
        """A run stopped while it waited for the database: what it did and its stop are told as
        they are (not as last saved) until they are saved."""
        self.unrecorded[state.run_id] = (state, saving)
        saving.add_done_callback(lambda _: self.unrecorded.pop(state.run_id, None))

    def state(self, run_id: str) -> RunState | None:
        unrecorded = self.unrecorded.get(run_id)
        if unrecorded is not None and run_id not in self.live:
            return unrecorded[0]
        live = self.live.get(run_id)
        if live is not None and live.state is not None:
            if self.processes is None or not self.runs.exists(run_id):
                return live.state  # the very state the run changes, or its start before the first save
            with contextlib.suppress(Exception):  # driven elsewhere: as of its last save
                return self.runs.load(run_id)
            return live.state
        if not self.runs.exists(run_id):
            return None
        return self.runs.load(run_id)

    def live_run_of(self, session_id: str) -> str | None:
        busy = self.by_session.get(session_id)
        if busy is None:  # a run stopped while the database was away holds its session until saved
            busy = next((r for r, (state, _) in list(self.unrecorded.items()) if state.session_id == session_id), None)
        if busy is None:  # a run another process on this home drives there (uvicorn --workers 2)
            holder = getattr(self.runs, "session_holder", None)
            with contextlib.suppress(Exception):
                busy = holder(session_id) if holder is not None else None
        return busy

    def start(self, turn: TurnRecord, text: str, chosen: dict[str, Any]) -> LiveRun:
        """Start the run that answers ``turn``: it begins now and goes on whoever listens."""
        state = RunState(
            run_id=turn.run_id,
            session_id=turn.session_id,
            ext={
                "config": {
                    "agent": turn.agent,
                    "message_id": turn.message_id,
                    "trace_id": turn.trace_id,
                    "served": True,
                    "prompt": text[:200],  # what `tether runs` shows, as for a run from the command line
                }
            },
        )
        return self._launch(turn, state, text, {}, chosen)

    def resume(
        self,
        turn: TurnRecord,
        state: RunState,
        chosen: dict[str, Any],
        *,
        more_turns: int | None = None,
        max_budget_usd: float | None = None,
        max_run_tokens: int | None = None,
        log: EventLog | None = None,
    ) -> LiveRun:
        """Continue a stopped run. ``log``: its events as :meth:`read_log` read them (off the event
        loop) since it stopped; else they are read here."""
        if turn.run_id in self.unrecorded:  # resumed from it, the run would be saved twice from one state
            raise NotRecorded(
                f"run {turn.run_id} was stopped while the database was away and its stop is saved once it "
                "is back; resume it in a moment"
            )
        changes = resume_changes(state, more_turns, max_budget_usd, max_run_tokens)
        return self._launch(turn, state, None, changes, chosen, log)

    async def begin(self, turn: TurnRecord, text: str, chosen: dict[str, Any]) -> None:
        """:meth:`start`, as the server's routes call it (nothing awaited: the run is live at once)."""
        self.start(turn, text, chosen)

    async def carry_on(
        self,
        turn: TurnRecord,
        state: RunState,
        chosen: dict[str, Any],
        *,
        more_turns: int | None = None,
        max_budget_usd: float | None = None,
        max_run_tokens: int | None = None,
        log: EventLog | None = None,
    ) -> None:
        """:meth:`resume`, as the server's routes call it (nothing awaited: the run is live at once)."""
        self.resume(
            turn,
            state,
            chosen,
            more_turns=more_turns,
            max_budget_usd=max_budget_usd,
            max_run_tokens=max_run_tokens,
            log=log,
        )

    async def read_log(self, run_id: str) -> EventLog:
        """A stopped run's events, for :meth:`resume`: read off the event loop, since a long run's
        log is megabytes, and parsing it on the loop held every other request of the server."""
        return await asyncio.to_thread(EventLog.load, self.log_path(run_id))

    def _launch(
        self,
        turn: TurnRecord,
        state: RunState,
        prompt: str | None,
        changes: dict[str, Any],
        chosen: dict[str, Any],
        log: EventLog | None = None,
    ) -> LiveRun:
        agent = self.agents[turn.agent]  # an unknown agent is refused before anything is written or registered
        log = log if log is not None else EventLog.load(self.log_path(turn.run_id))
        log.live = True
        live = LiveRun(
            turn.run_id, turn.session_id, CancelSignal(), log, state=state, began_after=log.last_id, turn=turn
        )
        if prompt is not None:
            # A new run's first event, at once: the client knows its run (to cancel it, or read it
            # again from any node) before the first step, which waits for a durable save and a model.
            ids = {"run_id": turn.run_id, "message_id": turn.message_id, "trace_id": turn.trace_id}
            log.append("started", {"type": "started", **ids})
        with contextlib.suppress(OSError):  # a Stop sent elsewhere for an earlier part of it
            self.stop_path(turn.run_id).unlink()
        self.live[turn.run_id] = live
        self.by_session[turn.session_id] = turn.run_id
        if self._watching is None or self._watching.done():
            with contextlib.suppress(RuntimeError):  # no loop running (a test's direct call): none to watch on
                self._watching = asyncio.get_running_loop().create_task(self._watch_stops())
        if self.processes is not None:
            try:
                live.task = self.processes.begin(live, turn, state, prompt, changes, chosen)
            except BaseException:  # no run process to be had (out of processes, of memory): nothing started
                del self.live[turn.run_id], self.by_session[turn.session_id]
                log.close()
                raise
        else:
            if changes:
                agent = dataclasses.replace(agent, **changes)
            home = asyncio.get_running_loop()
            send = _Courier(home, log.extend, self.lateness).send

            def emit(kind: str, data: dict[str, Any]) -> None:
                send(kind, for_clients(data, self.home))

            self.lateness.wake(home)
            parts = (live.signal, self.runs, self.sessions, self._tracer, self._unrecorded, live.stopping)
            live.loop, future = self.loops.submit(lambda: drive(turn, agent, state, prompt, chosen, emit, *parts))
            live.task = asyncio.wrap_future(future)
        if live.began_after:  # a part after others (a new run's start record is its accept())
            self._mark_live(turn.run_id, prompt, live.began_after)
        live.task.add_done_callback(lambda _: self._finished(live, turn))
        return live

    def _finished(self, live: LiveRun, turn: TurnRecord) -> None:
        if self.live.get(turn.run_id) is live:
            del self.live[turn.run_id]
        if self.by_session.get(turn.session_id) == turn.run_id:
            del self.by_session[turn.session_id]
        live.log.close()
        unrecorded = self.unrecorded.get(turn.run_id)
        if unrecorded is not None:  # stopped while the database was away: asked once it is back, off this loop
            unrecorded[1].add_done_callback(lambda _: self._recorded(turn))
        else:
            self._recorded(turn)

    def _recorded(self, turn: TurnRecord) -> None:
        """A run's start file forgotten, and its session touched, once the run has ended."""
        with contextlib.suppress(Exception):
            if self.runs.exists(turn.run_id):  # not when it was cut before its first save
                self.forget(turn.run_id)
        with contextlib.suppress(Exception):
            self.store.touch_session(turn.session_id)

    def _tracer(self, turn: TurnRecord, resumed: bool, cost_usd: float) -> Any:
        return run_tracer(self.home, self.telemetry, turn, resumed=resumed, cost_usd=cost_usd)

    async def settled(self, run_id: str) -> bool:
        """Whether the run is not live, after letting one whose ``done`` is out end its bookkeeping
        (a client may decide the moment it reads the ``done`` event), and one that has asked a
        person end (the page shows the question, and a person may answer, before the run has
        stopped to wait for it)."""
        unrecorded = self.unrecorded.get(run_id)
        if unrecorded is not None and run_id not in self.live:  # its save, once the database is back
            with contextlib.suppress(Exception):
                await asyncio.wait_for(asyncio.shield(asyncio.wrap_future(unrecorded[1])), 30)
            return run_id not in self.unrecorded
        live = self.live.get(run_id)
        if live is None:  # live nowhere, or driven by another process (its end is not awaited here)
            return not self._held_elsewhere(run_id)
        if live.task is not None and (live.ended or live.asking):  # its last saves: a busy disk can take seconds
            with contextlib.suppress(Exception):
                await asyncio.wait_for(asyncio.shield(live.task), 30)
        return run_id not in self.live

    def cancel(self, run_id: str, reason: str) -> bool:
        live = self.live.get(run_id)
        if live is not None:
            live.stop(reason)
            return True
        if not self.start_path(run_id).exists() or not self._held_elsewhere(run_id):
            return False  # live nowhere, or in a process on another home (another machine's), out of reach
        # Driven by another process on this home (its start record is here): the Stop is left where it looks.
        try:
            fd = open_private(self.stop_path(run_id), os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
            try:
                os.write(fd, json.dumps({"reason": reason}).encode())
            finally:
                os.close(fd)
        except OSError as exc:
            _log.error("could not pass the Stop of run %s to the process driving it: %s", run_id, exc)
            return False
        return True

    STOP_POLL_S = 0.25

    async def _watch_stops(self) -> None:
        """While runs are live here: a Stop of one that another process on this home took (its
        client reached that one) stops it. One look at a folder, mostly empty, every
        :attr:`STOP_POLL_S`."""
        folder = self.home / "serve" / "stops"
        while self.live:
            await asyncio.sleep(self.STOP_POLL_S)
            try:
                names = os.listdir(folder)
            except OSError:
                continue
            for name in names:
                run_id = name.removesuffix(".json")
                live = self.live.get(run_id)
                if live is None or not name.endswith(".json"):
                    continue
                try:
                    reason = json.loads(read_own(self.stop_path(run_id))).get("reason")
                except (OSError, ValueError, AttributeError):
                    reason = None
                with contextlib.suppress(OSError):
                    self.stop_path(run_id).unlink()
                live.stop(reason if isinstance(reason, str) and reason else "stopped by the user")

    def is_live(self, run_id: str) -> bool:
        """Whether the run is running now: here, or in another process on this home that holds it
        (a second server on the same ``$TETHER_HOME``, ``uvicorn --workers 2``). A run saved as
        running that nobody holds is one a stop or a kill cut."""
        return run_id in self.live or self._held_elsewhere(run_id)

    def cut_reason(self, run_id: str) -> str:
        """Why a run saved as running is live nowhere: its run process died under it (the reason
        its ``done`` gave), else the server stopped while it ran."""
        cut = self.processes.cut.get(run_id) if self.processes is not None else None
        return cut or CUT

    def live_turn(self, run_id: str, owner: str) -> TurnRecord | None:
        """The turn of a run live here, when ``owner`` sent its message (no database asked)."""
        live = self.live.get(run_id)
        turn = live.turn if live is not None else None
        return turn if turn is not None and turn.owner == owner else None

    def live_count(self) -> int:
        return len(self.live)

    async def wait_ended(self, run_id: str, timeout: float) -> None:
        live = self.live.get(run_id)
        if live is not None and live.task is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(asyncio.shield(live.task), timeout)
            return
        deadline = time.monotonic() + timeout  # driven elsewhere: until that process lets it go
        while time.monotonic() < deadline and await asyncio.to_thread(self._held_elsewhere, run_id):
            await asyncio.sleep(0.05)

    async def shutdown(self, grace_s: float = 10.0) -> None:
        """Stop every live run (saved ``interrupted``, resumable) and wait for them to end."""
        self.closing = True
        running = list(self.live.values())
        for r in running:
            r.stop("the server is shutting down; resume the run to continue it", now=False)
        tasks = [r.task for r in running if r.task is not None]
        if tasks:
            _, pending = await asyncio.wait(tasks, timeout=grace_s)
            for t in pending:
                t.cancel()  # cancels the run's task on its loop
            if pending:
                await asyncio.wait(pending, timeout=2.0)
        await asyncio.sleep(0)  # let the last appends and done-callbacks land
        if self._watching is not None:
            self._watching.cancel()
        if self.processes is not None:
            await self.processes.aclose()

    def close(self) -> None:
        self.loops.close()
        if self.processes is not None:
            self.processes.close()
