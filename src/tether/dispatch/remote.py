"""The server's side of external workers: :class:`RemoteRuns` starts, follows, stops and resumes
runs that workers drive, with the same methods the server uses for runs in its own process.

Nothing about a run lives in the node: its job, state and events are in Postgres, so any node
answers for any run, a node restarted loses nothing, and a client reconnecting with
``Last-Event-ID`` to another node reads on from the events table. One connection per node
LISTENs for new events and job changes and wakes the streams that wait for them.

The server's routes call :meth:`RemoteRuns.begin` and :meth:`RemoteRuns.carry_on`, which write a
run's job (and a decision's save, with its wait for the worker that just stopped the run to let go
of it) on a thread, never on the node's event loop. The local runs keep one run per session because
nothing is awaited between a request's checks and the run's start; here the session is taken
instead, on the loop, before the first await (:class:`_Starting`): until the job is written, this
node's other requests find the run in the session (and wait for its job), and a stop asked
meanwhile is asked of the job as soon as it exists. Across nodes the job table's unique index
keeps one live run per session.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import logging
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import Any

from tether.dispatch.engine import Dispatcher
from tether.dispatch.jobs import EVENTS_CHANNEL, JOBS_CHANNEL, AlreadyQueued, Job, Jobs, Listener, SessionBusy
from tether.errors import StaleRunError, StoreError
from tether.harness.state import RunState
from tether.postgres.db import SCHEMA_CHANNEL
from tether.server.events import EventLog
from tether.server.runs import resume_changes
from tether.server.store import TurnRecord
from tether.sessions import SessionStore

__all__ = ["NotContinued", "QueueAway", "RemoteLog", "RemoteRuns", "StillHeld"]

_log = logging.getLogger("tether.dispatch")


class QueueAway(StoreError):
    """The broker could not be reached: the run's job was withdrawn and nothing was started (the
    server answers 503: send the message again in a moment)."""

    unavailable = True


class StillHeld(StoreError):
    """A decision's or a resume's run still held by another process (a worker slow to let go of it)
    once the node has waited for it: nothing was saved (the server answers 503)."""

    unavailable = True

    def __init__(self, run_id: str, waited_s: float) -> None:
        super().__init__(
            f"run {run_id} is still held by another process (a worker stopping it) after {waited_s:g} s; "
            "nothing was decided or run: send the decision (or the resume) again in a moment"
        )


class NotContinued(SessionBusy):
    """A decision's or a resume's continuation the job table refused: another node started a run
    in the session while this one waited for the run (the server answers 409)."""

    conflict = True

    def __init__(self, turn: TurnRecord, busy: str | None) -> None:
        which = f" (run {busy})" if busy else ""
        super().__init__(
            f"run {turn.run_id} was not continued: session {turn.session_id} is answering another message"
            f"{which}, sent meanwhile (to another server); wait for that run's done event, then read "
            f"GET /v1/runs/{turn.run_id} for what it waits for, if it can still go on"
        )


def _job_config(turn: TurnRecord, text: str) -> dict[str, Any]:
    """What a job carries of the message it answers: the worker's turn (its trace id) and the
    run's config."""
    return {
        "agent": turn.agent,
        "message_id": turn.message_id,
        "trace_id": turn.trace_id,
        "served": True,
        "prompt": text[:200],  # what `tether runs` shows, as for a run from the command line
    }


@dataclass
class _Starting:
    """A run whose job this node is writing (a message's start, a decision's or a resume's
    continuation): its session is its own from the request's checks on, before anything is awaited."""

    run_id: str
    session_id: str
    done: asyncio.Event = field(default_factory=asyncio.Event)  # set once the job is written, or refused
    stops: list[str] = field(default_factory=list)  # stops asked meanwhile, asked of the job once it exists


class RemoteRuns:
    let_go_s = 10.0  # how long a decision waits for the worker that just stopped its run to let go

    def __init__(
        self, *, jobs: Jobs, runs: Any, sessions: SessionStore, dispatcher: Dispatcher, poll_s: float = 2.0
    ) -> None:
        self.jobs = jobs
        self.runs = runs
        self.sessions = sessions  # the conversations the workers keep: a deleted session's go too
        self.dispatcher = dispatcher
        self.poll_s = poll_s
        self.closing = False
        self._waiters: dict[str, set[asyncio.Event]] = {}
        self._loop: asyncio.AbstractEventLoop | None = None
        self._listener: Listener | None = None
        self._redelivered: set[tuple[str, float]] = set()  # stale jobs this node handed on again
        self._starting: dict[str, _Starting] = {}  # by run id (read by threads too: a key's lookup only)
        self._starting_in: dict[str, str] = {}  # session id -> the run id starting in it
        # A pool of their own for the queuing threads: a decision may wait 10 s there for a worker to
        # let go, and in the loop's default pool (a few threads) it would hold up the streams' reads.
        self._queuing = concurrent.futures.ThreadPoolExecutor(32, thread_name_prefix="tether-queue")

    def _listen(self) -> None:
        if self._listener is None:
            self._loop = asyncio.get_running_loop()
            self._listener = Listener(self.jobs.db.url, (EVENTS_CHANNEL, JOBS_CHANNEL, SCHEMA_CHANNEL), self._notified)

    def _notified(self, channel: str, run_id: str | None) -> None:  # on the listener's thread
        if channel == SCHEMA_CHANNEL:  # a newer tether migrated the database (or a notice may be lost)
            self.jobs.db.schema_changed()
            return
        if self._loop is not None and not self._loop.is_closed():
            with contextlib.suppress(RuntimeError):
                self._loop.call_soon_threadsafe(self._wake, run_id)

    def _wake(self, run_id: str | None) -> None:
        targets = list(self._waiters.values()) if run_id is None else [self._waiters.get(run_id, set())]
        for events in targets:
            for e in events:
                e.set()

    async def wait_for(self, run_id: str, timeout: float) -> None:
        """Until something happens to the run (an event, a job change), or ``timeout``."""
        self._listen()
        wake = asyncio.Event()
        self._waiters.setdefault(run_id, set()).add(wake)
        try:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(wake.wait(), timeout)
        finally:
            waiters = self._waiters.get(run_id)
            if waiters is not None:
                waiters.discard(wake)
                if not waiters:
                    del self._waiters[run_id]

    # --- what the API asks

    def is_live(self, run_id: str) -> bool:
        if run_id in self._starting:
            return True
        job = self.jobs.get(run_id)
        return job is not None and job.live

    def is_starting(self, run_id: str) -> bool:
        """Whether this node is writing the run's job right now (see :meth:`begin`)."""
        return run_id in self._starting

    def live_count(self) -> int:
        return self.jobs.live_count()

    def live_run_of(self, session_id: str) -> str | None:
        return self._starting_in.get(session_id) or self.jobs.live_run_of(session_id)

    def state(self, run_id: str) -> RunState | None:
        if not self.runs.exists(run_id):
            return None
        state: RunState = self.runs.load(run_id)
        return state

    def log(self, run_id: str) -> RemoteLog:
        return RemoteLog(self, run_id)

    async def begin(self, turn: TurnRecord, text: str, chosen: dict[str, Any]) -> None:
        """:meth:`start`, on a thread: the session is the run's from this call on."""
        await self._off_loop(turn, lambda: self.start(turn, text, chosen))

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
        """:meth:`resume`, on a thread (its wait for the worker to let go too): the session is the
        run's from this call on. ``log`` is not read: the events are in the table."""
        await self._off_loop(
            turn,
            lambda: self.resume(
                turn, state, chosen, more_turns=more_turns, max_budget_usd=max_budget_usd, max_run_tokens=max_run_tokens
            ),
        )

    async def _off_loop(self, turn: TurnRecord, queue: Callable[[], None]) -> None:
        """Run ``queue`` (a job's writes) on a thread, the session taken for the run first, on the
        loop: the request that checked the session was free awaits nothing before this."""
        if (other := self._starting_in.get(turn.session_id)) is not None:  # the caller checked: a bug's guard
            raise SessionBusy(f"session {turn.session_id} is still answering (run {other})")
        starting = _Starting(turn.run_id, turn.session_id)
        self._starting[turn.run_id] = starting
        self._starting_in[turn.session_id] = turn.run_id
        queued = asyncio.get_running_loop().run_in_executor(self._queuing, queue)
        try:
            await asyncio.shield(queued)  # a request cut meanwhile: the thread goes on, and the session stays taken
            while starting.stops:  # asked after the thread looked: checked again here, on the loop, till none is left
                await asyncio.to_thread(self._stop_if_asked, turn.run_id)
        finally:
            if queued.done():
                self._started(starting)
            else:
                queued.add_done_callback(lambda _: self._started(starting))

    def _started(self, starting: _Starting) -> None:
        """The run's job is written (or was refused): its session is the job table's to answer for."""
        del self._starting[starting.run_id], self._starting_in[starting.session_id]
        starting.done.set()
        self._wake(starting.run_id)

    def _stop_if_asked(self, run_id: str) -> None:
        """Stops asked while the job was being written, asked of it before it is handed on (on the
        queuing thread: the run starts already stopped), and of those asked after (:meth:`_off_loop`)."""
        starting = self._starting.get(run_id)
        while starting is not None and starting.stops:
            reason = starting.stops.pop(0)
            try:
                self.jobs.request_cancel(run_id, reason)
            except Exception as exc:  # the job is queued: it is handed on all the same
                _log.warning("run %s: the stop asked as it was queued was not passed on: %s", run_id, exc)

    def start(self, turn: TurnRecord, text: str, chosen: dict[str, Any]) -> None:
        """Queue the run that answers ``turn`` and hand it to the workers (blocking: the server
        calls :meth:`begin`)."""
        try:
            self._queue_start(turn, text, chosen)
        except AlreadyQueued:
            return  # queued by another request for the same message a moment ago, which handed it on
        self._stop_if_asked(turn.run_id)
        self._dispatch(turn.run_id, "nothing was started: send the message again in a moment")

    def _queue_start(self, turn: TurnRecord, text: str, chosen: dict[str, Any]) -> None:
        self.jobs.enqueue(
            run_id=turn.run_id,
            session_id=turn.session_id,
            owner=turn.owner,
            agent=turn.agent,
            kind="start",
            prompt=text,
            chosen=chosen,
            config=_job_config(turn, text),
        )

    def unsent(self, run_id: str) -> bool:
        """Whether the run of a recorded turn never reached the workers: its node met the database
        away while it queued the job, and could not take the turn back then. Sending the message
        again queues it. A job such a node left queued (its commit landed unseen) is handed to the
        workers again here; a worker drives a run once, however many times it is delivered."""
        if run_id in self._starting:  # being queued by this node right now
            return False
        job = self.jobs.get(run_id)
        if job is None or (job.state == "done" and job.worker is None):  # never queued, or withdrawn
            return not self.runs.exists(run_id)
        self._redeliver_stale(job)
        return False

    def left_behind(self, run_id: str) -> bool:
        """Whether the run's job waits, untaken, longer than its node waits for the database: one
        whose node met the database away after its commit landed (and answered 503), or died."""
        job = self.jobs.get(run_id)
        return job is not None and self._stale(job)

    def _stale(self, job: Job) -> bool:
        return job.state == "queued" and job.worker is None and time.time() - job.updated_at > self.jobs.queue_retry_s

    def _redeliver_stale(self, job: Job) -> None:
        """Hand a job to the workers again (once per node) when it has waited, untaken, longer than
        its node waits for the database: it may be one whose node met the database away after its
        commit landed, or died, and never sent it. Asked only when a person acts on the job's session
        (a message sent again, another message): a second delivery of a job that did go is stepped
        past by the worker, but holds a slot of it meanwhile."""
        if not self._stale(job) or (job.run_id, job.updated_at) in self._redelivered:  # once per node and queuing
            return
        if len(self._redelivered) > 10_000:
            self._redelivered.clear()
        self._redelivered.add((job.run_id, job.updated_at))
        with contextlib.suppress(Exception):  # the broker away: the job stays as it was
            self.dispatcher.enqueue(job.run_id)

    def _dispatch(self, run_id: str, then: str) -> None:
        """Hand the queued job to the workers, or withdraw it: a job no message will ever deliver
        would hold its session ("still answering") for ever."""
        try:
            self.dispatcher.enqueue(run_id)
        except Exception as exc:
            if self.jobs.withdraw(run_id):  # else a worker has it already: the message did go
                from tether.postgres.db import redact

                why = redact(" ".join(str(exc).split()))[:200]
                raise QueueAway(f"the run could not be handed to the workers (the broker: {why}); {then}") from exc

    def resume(
        self,
        turn: TurnRecord,
        state: RunState,
        chosen: dict[str, Any],
        *,
        more_turns: int | None = None,
        max_budget_usd: float | None = None,
        max_run_tokens: int | None = None,
    ) -> None:
        """Save the decided state and queue the run's continuation (blocking, up to ``let_go_s`` while
        the worker that stopped the run lets go of it: the server calls :meth:`carry_on`)."""
        changes = resume_changes(state, more_turns, max_budget_usd, max_run_tokens)
        from tether.postgres.runs import RunHeld

        deadline = time.monotonic() + self.let_go_s
        while True:  # the worker that just stopped the run may not have let go of it yet
            try:
                with self.runs.lock(turn.run_id):  # a decision written into the state is saved before it is queued
                    self.runs.save(state)
                break
            except StaleRunError:
                raise  # the run was saved since the decision was made on it: waiting cannot help
            except StoreError as exc:
                if time.monotonic() > deadline:
                    if isinstance(exc, RunHeld):  # else a bare 500
                        raise StillHeld(turn.run_id, self.let_go_s) from exc
                    raise
                time.sleep(0.05)
        try:
            self.jobs.enqueue(
                run_id=turn.run_id,
                session_id=turn.session_id,
                owner=turn.owner,
                agent=turn.agent,
                kind="continue",
                prompt=None,
                chosen=chosen,
                changes=changes,
                # Kept from the start's job while its row is; a row forgotten since (a run that waited
                # for a person longer than [dispatch] keep_events_days) left the part without the
                # message's trace id, and a worker with telemetry refused to run it.
                config=_job_config(turn, turn.text),
            )
        except AlreadyQueued:
            raise
        except SessionBusy:  # another node started a run in the session while this one waited
            raise NotContinued(turn, self.jobs.live_run_of(turn.session_id)) from None
        self._stop_if_asked(turn.run_id)
        self._dispatch(turn.run_id, "the run was not continued: send the decision (or the resume) again in a moment")

    def cancel(self, run_id: str, reason: str) -> bool:
        starting = self._starting.get(run_id)
        if starting is not None:  # its job is being written: the stop goes with it
            starting.stops.append(reason)
            return True
        return self.jobs.request_cancel(run_id, reason)

    async def wait_ended(self, run_id: str, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while await asyncio.to_thread(self.is_live, run_id) and time.monotonic() < deadline:
            await self.wait_for(run_id, min(self.poll_s, max(0.0, deadline - time.monotonic())))

    async def settled(self, run_id: str) -> bool:
        """Whether the run is not live, after letting one whose part has written its ``done`` end
        its job (the tables read off the event loop, as a stream's are). A run whose job this node
        is writing is waited for first."""
        starting = self._starting.get(run_id)
        if starting is not None:
            await starting.done.wait()
        job = await asyncio.to_thread(self.jobs.get, run_id)
        if job is None or not job.live:
            return True
        await asyncio.to_thread(
            self._redeliver_stale, job
        )  # else it could hold its session ("still answering") for ever
        last_id, last_kind = await asyncio.to_thread(self.jobs.last_event, run_id)
        if last_kind == "done" and last_id > job.began_after:  # this part's, not the one a decision followed
            await self.wait_ended(run_id, 5)
        return not await asyncio.to_thread(self.is_live, run_id)

    async def shutdown(self, grace_s: float = 10.0) -> None:
        self.closing = True  # the runs go on on the workers; only this node's streams end

    def close(self) -> None:
        if self._listener is not None:
            self._listener.close()
        self._queuing.shutdown(wait=False)
        self.dispatcher.close()


class RemoteLog:
    """A run's events from the table, then new ones as they are written, until the run's job
    is over and its last event is a ``done``."""

    def __init__(self, runs: RemoteRuns, run_id: str) -> None:
        self.runs = runs
        self.run_id = run_id

    def ready(self, after: int) -> list[tuple[int, str, str]]:
        """None here: the events are in the table, read by :meth:`follow` (not on the event loop)."""
        return []

    async def follow(
        self, after: int, *, keepalive_s: float = 15.0
    ) -> AsyncIterator[list[tuple[int, str, str]] | None]:
        # Every read of the tables is made off the event loop: a database slow or away (the pool waits
        # 30 s for a connection) held the node's every stream, request and /healthz meanwhile.
        jobs = self.runs.jobs
        i = max(0, after)
        quiet = 0.0
        last_kind: str | None = None
        while True:
            batch = await asyncio.to_thread(jobs.events_after, self.run_id, i)
            if batch:
                i, last_kind = batch[-1][0], batch[-1][1]
                yield batch
                quiet = 0.0
                if len(batch) >= 500:
                    continue
            if last_kind is None:
                last_kind = (await asyncio.to_thread(jobs.last_event, self.run_id))[1] if i else None
            job = await asyncio.to_thread(jobs.get, self.run_id)
            if (job is None or not job.live) and not self.runs.is_starting(self.run_id):
                # Over: unless events were written between the read above and the job's end.
                if not await asyncio.to_thread(jobs.events_after, self.run_id, i, 1):
                    return
                continue
            if self.runs.closing:  # this node is stopping: the client reconnects to another
                return
            started = time.monotonic()
            await self.runs.wait_for(self.run_id, self.runs.poll_s)
            quiet += time.monotonic() - started
            if quiet >= keepalive_s:
                quiet = 0.0
                yield None
