"""The server's side of external workers: :class:`RemoteRuns` starts, follows, stops and resumes
runs that workers drive, with the same methods the server uses for runs in its own process.

Nothing about a run lives in the node: its job, state and events are in Postgres, so any node
answers for any run, a node restarted loses nothing, and a client reconnecting with
``Last-Event-ID`` to another node reads on from the events table. One connection per node
LISTENs for new events and job changes and wakes the streams that wait for them.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator
from typing import Any

from tether.dispatch.engine import Dispatcher
from tether.dispatch.jobs import EVENTS_CHANNEL, JOBS_CHANNEL, AlreadyQueued, Job, Jobs, Listener
from tether.errors import StaleRunError, StoreError
from tether.harness.state import RunState
from tether.postgres.db import SCHEMA_CHANNEL
from tether.server.runs import resume_changes
from tether.server.store import TurnRecord
from tether.sessions import SessionStore

__all__ = ["QueueAway", "RemoteLog", "RemoteRuns"]


class QueueAway(StoreError):
    """The broker could not be reached: the run's job was withdrawn and nothing was started (the
    server answers 503: send the message again in a moment)."""

    unavailable = True


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


class RemoteRuns:
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
        job = self.jobs.get(run_id)
        return job is not None and job.live

    def live_count(self) -> int:
        return self.jobs.live_count()

    def live_run_of(self, session_id: str) -> str | None:
        return self.jobs.live_run_of(session_id)

    def state(self, run_id: str) -> RunState | None:
        if not self.runs.exists(run_id):
            return None
        state: RunState = self.runs.load(run_id)
        return state

    def log(self, run_id: str) -> RemoteLog:
        return RemoteLog(self, run_id)

    def start(self, turn: TurnRecord, text: str, chosen: dict[str, Any]) -> None:
        try:
            self._queue_start(turn, text, chosen)
        except AlreadyQueued:
            return  # queued by another request for the same message a moment ago, which handed it on
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
    ) -> None:
        changes = resume_changes(state, more_turns, max_budget_usd)
        deadline = time.monotonic() + 10
        while True:  # the worker that just stopped the run may not have let go of it yet
            try:
                with self.runs.lock(turn.run_id):  # a decision written into the state is saved before it is queued
                    self.runs.save(state)
                break
            except StaleRunError:
                raise  # the run was saved since the decision was made on it: waiting cannot help
            except StoreError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.05)
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
        self._dispatch(turn.run_id, "the run was not continued: send the decision (or the resume) again in a moment")

    def cancel(self, run_id: str, reason: str) -> bool:
        return self.jobs.request_cancel(run_id, reason)

    async def wait_ended(self, run_id: str, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while await asyncio.to_thread(self.is_live, run_id) and time.monotonic() < deadline:
            await self.wait_for(run_id, min(self.poll_s, max(0.0, deadline - time.monotonic())))

    async def settled(self, run_id: str) -> bool:
        """Whether the run is not live, after letting one whose ``done`` is written end its job
        (the tables read off the event loop, as a stream's are)."""
        job = await asyncio.to_thread(self.jobs.get, run_id)
        if job is None or not job.live:
            return True
        await asyncio.to_thread(
            self._redeliver_stale, job
        )  # else it could hold its session ("still answering") for ever
        if (await asyncio.to_thread(self.jobs.last_event, run_id))[1] == "done":
            await self.wait_ended(run_id, 5)
        return not await asyncio.to_thread(self.is_live, run_id)

    async def shutdown(self, grace_s: float = 10.0) -> None:
        self.closing = True  # the runs go on on the workers; only this node's streams end

    def close(self) -> None:
        if self._listener is not None:
            self._listener.close()
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
            if job is None or not job.live:
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
