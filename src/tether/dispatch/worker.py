"""``tether worker``: takes runs from the queue and drives them to their next stop.

A delivery names a run. The worker takes the run's lock in the Postgres run store (a session
advisory lock, held on a connection of its own: a worker that dies lets go the moment its
connection closes), marks the job running, and drives the run with the library's own loop:
a new run from its prompt, any other from its saved state, which is how a run whose worker was
killed continues where its last commit left it, without paying again for a recorded turn or
repeating a recorded side effect. A second delivery of a run that another live worker holds
steps aside. A run that stops for a decision ends its job: it holds no worker while it waits.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import os
import socket
import threading
import time
from collections.abc import AsyncIterator, Iterator
from typing import Any

from tether.cancel import CancelSignal
from tether.dispatch.engine import HELD
from tether.dispatch.jobs import CANCEL_CHANNEL, EventWriter, Job, Jobs, Listener
from tether.errors import StoreError
from tether.events import Done, Event
from tether.harness.agent import Agent
from tether.harness.state import RunState
from tether.postgres.db import SCHEMA_CHANNEL, Database, SchemaNewer, unreachable
from tether.postgres.runs import PgRunStore, RunHeld
from tether.postgres.sessions import PgSessionStore
from tether.server.runs import AWAY_WAIT_S, StillAway, run_parts, run_tracer

__all__ = ["HELD", "Worker", "run_worker"]

_log = logging.getLogger("tether.dispatch")


class Worker:
    """Drives runs for this process; ``drive(run_id)`` is the task body, safe on many threads."""

    away_wait_s = AWAY_WAIT_S  # how long a run that met the database away waits for it (run_parts)

    def __init__(
        self,
        *,
        home: Any,
        agents: dict[str, Agent],
        db: Database,
        telemetry: Any = None,
        name: str | None = None,
        lock_wait_s: float = 15.0,
    ) -> None:
        self.home = home
        self.agents = agents
        self.db = db
        self.telemetry = telemetry
        self.name = name or f"{socket.gethostname()}:{os.getpid()}"
        self.lock_wait_s = lock_wait_s
        self.jobs = Jobs(db)
        self.runs = PgRunStore(db)
        self.sessions = PgSessionStore(db)
        self._held: dict[str, tuple[asyncio.AbstractEventLoop, CancelSignal]] = {}
        self._held_lock = threading.Lock()
        self._driving: set[str] = set()  # runs a thread of this worker is inside drive() for
        self._local = threading.local()
        self._loops: list[asyncio.AbstractEventLoop] = []
        self.listener = Listener(db.url, (CANCEL_CHANNEL, SCHEMA_CHANNEL), self._on_cancel)

    # --- stops asked from any node

    def _on_cancel(self, channel: str, run_id: str | None) -> None:
        if channel == SCHEMA_CHANNEL:  # a newer tether migrated the database (or a notice may be lost)
            self.db.schema_changed()
            return
        with self._held_lock:
            held = dict(self._held) if run_id is None else {run_id: self._held[run_id]} if run_id in self._held else {}
        for rid, (loop, signal) in held.items():
            job = self.jobs.get(rid)
            if job is not None and job.cancel:
                loop.call_soon_threadsafe(signal.cancel, job.cancel)

    # --- the task

    def drive(self, run_id: str) -> str:
        """Drive ``run_id``'s job to the run's next stop; what happened, in a word."""
        job = self.jobs.get(run_id)
        if job is None or not job.live:
            return "nothing to do"
        deadline = time.monotonic() + self.lock_wait_s
        while True:
            with contextlib.ExitStack() as held:
                try:
                    held.enter_context(self._driving_here(run_id))
                    held.enter_context(self.runs.lock(run_id))
                except RunHeld:
                    # Held by another worker: a second delivery of a run that is running, or the run
                    # of a worker that just died and whose connection the database has not closed yet.
                    if time.monotonic() > deadline:
                        return HELD
                    time.sleep(0.25)
                    continue
                claimed = self.jobs.claim(run_id, self.name)
                if claimed is None:
                    return "done already"
                if self.jobs.ended_since(run_id, claimed.began_after):  # its worker died after the done
                    self.jobs.finish(run_id, claimed.attempts)
                    return "done already"
                self._loop().run_until_complete(self._run(claimed))
                return "driven"

    @contextlib.contextmanager
    def _driving_here(self, run_id: str) -> Iterator[None]:
        """The run for this thread alone among this worker's: the run lock is re-entrant within a
        process, so a second delivery of a run this worker drives (RabbitMQ handing it back past its
        consumer_timeout, a look-again) would otherwise drive it a second time at once."""
        with self._held_lock:
            if run_id in self._driving:
                raise RunHeld(f"run {run_id} is being driven by this worker already")
            self._driving.add(run_id)
        try:
            yield
        finally:
            with self._held_lock:
                self._driving.discard(run_id)

    def _loop(self) -> asyncio.AbstractEventLoop:
        """This thread's event loop, kept across runs (and so are its pooled model connections)."""
        loop: asyncio.AbstractEventLoop | None = getattr(self._local, "loop", None)
        if loop is None:
            loop = self._local.loop = asyncio.new_event_loop()
            self._loops.append(loop)
        return loop

    async def _run(self, job: Job) -> None:
        from tether.connectors._acting import acting_for
        from tether.server.events import Replayed, event_data, for_clients
        from tether.server.runs import refused
        from tether.server.store import TurnRecord

        writer = EventWriter(self.jobs, job.run_id, job.attempts)
        signal = CancelSignal()
        with self._held_lock:
            self._held[job.run_id] = (asyncio.get_running_loop(), signal)
        state: RunState | None = None
        new = False
        saw_done = away = False
        tracers: list[Any] = []  # the last is the one a run that could not start did not take
        try:
            state = self.runs.load(job.run_id) if self.runs.exists(job.run_id) else None
            new = state is None
            if state is None:
                state = RunState(run_id=job.run_id, session_id=job.session_id, ext={"config": job.config})
            # A stop asked after the claim and before the run was held above found nothing to stop.
            asked = self.jobs.get(job.run_id)
            if asked is not None and asked.cancel:
                signal.cancel(asked.cancel)
            agent = self._agent(job)
            turn = TurnRecord(
                message_id=str(job.config.get("message_id", "")),
                run_id=job.run_id,
                session_id=job.session_id,
                owner=job.owner,
                agent=job.agent,
                trace_id=str(job.config.get("trace_id", "")),
                text="",
                created=0.0,
            )
            shown = self._replay(state, writer) if not new else _Shown(job.run_id, Replayed(()), "")
            # As a server's own runs: its MCP connectors act for the job's user (their own sealed
            # tokens, never this machine's `tether mcp login`), and nobody is asked at this terminal.
            with acting_for(job.owner):
                async for event in self._parts(agent, job, state, new, turn, signal, tracers):
                    if event is None:  # the run's end, another worker's to write
                        saw_done = True
                        continue
                    data = event_data(event, job.chosen)
                    for kind, out in shown.live(event.type, data):  # what the stream lacks of it
                        writer.append(kind, for_clients(out, self.home))
                    saw_done = saw_done or event.type == "done"
        except StillAway:
            away = True  # the job stays running: the dispatcher looks again, and the run goes on from its last save
            raise
        except Exception as exc:  # refused before it began: an agent no longer offered, a bad config
            if unreachable(exc) and not saw_done:
                # The database away as the run started (its load, its session's): not the run's end.
                # The job stays running, and the delivery is put back to look again (run_worker).
                away = True
                raise
            _log.warning("run %s could not start: %s", job.run_id, exc)
            if not saw_done:
                reason = f"the run could not start: {exc}"
                if state is None:  # it could not be loaded: say why, and leave the saved run for a person
                    state = RunState(run_id=job.run_id, session_id=job.session_id, status="failed")
                done = refused(state, self.runs, new, reason, tracers[-1] if tracers else None)
                writer.append("done", for_clients(done, self.home))
        finally:
            writer.close()
            with self._held_lock:
                self._held.pop(job.run_id, None)
            if not away:
                self.jobs.finish(job.run_id, job.attempts)

    async def _parts(
        self,
        agent: Agent,
        job: Job,
        state: RunState,
        new: bool,
        turn: Any,
        signal: CancelSignal,
        tracers: list[Any],
    ) -> AsyncIterator[Event | None]:
        """The run's events to its end (None for an end that another worker, which took the run
        over, writes); through the database away (:func:`~tether.server.runs.run_parts`). Each
        part's tracer is added to ``tracers``."""

        def part_tracer(resumed: bool) -> Any:
            tracers.append(run_tracer(self.home, self.telemetry, turn, resumed=resumed, cost_usd=state.cost_usd))
            return tracers[-1]

        if not new and state.status in ("completed", "failed"):
            # Its worker died after the run's end was saved, before its ``done`` reached the stream: the
            # end is told as saved (``run_stream`` refuses to resume an ended run, and the refusal read
            # "the run could not start").
            yield Done(state.run_id, state.result())
            return

        async for event in run_parts(
            agent,
            job.prompt if new else None,
            state=state,
            runs=self.runs,
            sessions=self.sessions,
            signal=signal,
            tracer_of=part_tracer,
            away_wait_s=self.away_wait_s,
        ):
            # Another worker took the run while this one had lost its hold: the end is its own to write.
            if isinstance(event, Done) and self.runs.lost(job.run_id):
                _log.warning("run %s: another worker took it over; this one stops", job.run_id)
                yield None
            else:
                yield event

    def _replay(self, state: RunState, writer: EventWriter) -> _Shown:
        """Write the events ``state`` implies that the run's stream lacks (a worker killed after a
        save, before its events reached the database), and return what the stream holds."""
        import json

        from tether.server.events import Replayed, implied_events

        kept: list[tuple[str, dict[str, Any]]] = []
        after = 0
        ended = False  # whether the stream's last turn or end is an end (a part of the run over)
        while rows := self.jobs.events_after(state.run_id, after, 500):
            kept += [
                (kind, json.loads(data))
                for _, kind, data in rows
                if kind in ("turn", "tool_start", "tool_result", "text_delta")
            ]
            ended = next((kind == "done" for _, kind, _ in reversed(rows) if kind in ("turn", "done")), ended)
            after = rows[-1][0]
        replayed = Replayed(kept)
        for data in implied_events(state, replayed):
            writer.append(data["type"], data)
            ended = ended and data["type"] != "turn"
        # Text streamed that no saved reply holds: a worker killed while its model's answer streamed.
        return _Shown(state.run_id, replayed, "" if ended else replayed.streamed)

    def _agent(self, job: Job) -> Agent:
        agent = self.agents.get(job.agent)
        if agent is None:
            raise StoreError(
                f"this worker does not serve agent {job.agent!r} (it serves {', '.join(self.agents)}); "
                "start workers with the same --agent as the servers"
            )
        changes = {k: v for k, v in job.changes.items() if k in ("max_turns", "max_budget_usd", "max_run_tokens")}
        return dataclasses.replace(agent, **changes) if changes else agent

    def close(self) -> None:
        self.listener.close()
        from tether.providers.http import close_clients

        loops, self._loops = self._loops, []  # closed once (run_worker closes the worker it was given)
        for loop in loops:
            with contextlib.suppress(Exception):
                loop.run_until_complete(close_clients())
                loop.close()


class _Shown:
    """What a resumed run's stream shows already (``replayed``: its turns and calls), and ``text`` of
    a reply its last worker never saved (killed while the answer streamed): that reply, asked again,
    is streamed without what the clients show of it already; one that says something else follows a
    ``retry`` event saying so, and is streamed whole."""

    def __init__(self, run_id: str, replayed: Any, text: str) -> None:
        self.run_id = run_id
        self.replayed = replayed
        self.text = text  # shown, not yet matched by the new reply's text
        self.matched = ""  # the new reply's text so far, all of it shown already

    def live(self, kind: str, data: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
        """The events to write for the live event ``kind`` (``data``)."""
        if self.replayed.repeats(kind, data):  # a call cut short and run again starts once
            return []
        if not self.text:
            return [(kind, data)]
        if kind == "text_delta" and isinstance(data.get("text"), str):
            text: str = data["text"]
            if self.text.startswith(text):  # shown already
                self.text, self.matched = self.text[len(text) :], self.matched + text
                return []
            if text.startswith(self.text):  # the rest of it is new
                rest, self.text = text[len(self.text) :], ""
                return [(kind, {**data, "text": rest})] if rest else []
            return [*self._again(), (kind, {**data, "text": self.matched + text})]
        if kind in ("turn", "tool_start", "approval_required", "done"):  # the reply ended short of it
            return [
                *self._again(),
                *([("text_delta", {**_delta(self.run_id), "text": self.matched})] if self.matched else []),
                (kind, data),
            ]
        return [(kind, data)]  # (its reasoning, a retry, a fallback: no text of the reply)

    def _again(self) -> list[tuple[str, dict[str, Any]]]:
        from tether.events import Retry
        from tether.server.events import event_data

        self.text = ""
        reason = "the answer was asked again: the worker that streamed the text above stopped before it was saved"
        return [("retry", event_data(Retry(self.run_id, 1, reason, 0.0)))]


def _delta(run_id: str) -> dict[str, Any]:
    from tether.events import TextDelta
    from tether.server.events import event_data

    return event_data(TextDelta(run_id, ""))


KEEP_EVENTS_DAYS = 7.0
PRUNE_EVERY_S = 3600.0


class Pruner:
    """Deletes, now and every hour, the replayable events of runs that ended more than
    ``keep_days`` ago (``[dispatch] keep_events_days``): without it ``tether_events`` grows by
    every text delta of every run, for ever. Every worker runs one; the deletes are idempotent."""

    def __init__(self, jobs: Jobs, keep_days: float = KEEP_EVENTS_DAYS, every_s: float = PRUNE_EVERY_S) -> None:
        self.jobs, self.keep_s, self.every_s = jobs, keep_days * 86400.0, every_s
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, name="tether-prune", daemon=True)

    def _run(self) -> None:
        while True:
            try:
                deleted = self.jobs.prune(self.keep_s)
                if deleted:
                    _log.info("pruned %d events of runs that ended over %.1f days ago", deleted, self.keep_s / 86400)
            except Exception as exc:  # a database that is away now is pruned next time
                _log.warning("could not prune old run events: %s", exc)
            if self.stop.wait(self.every_s):
                return

    def __enter__(self) -> Pruner:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        self.thread.join(5)


def run_worker(
    worker: Worker, dispatcher_app: Any, *, queue: str, concurrency: int, keep_events_days: float = KEEP_EVENTS_DAYS
) -> None:
    """Serve the queue with Celery's worker (threads: each run is mostly waiting on the network)."""
    from tether.dispatch.engine import TASK

    refused: list[SchemaNewer] = []

    @dispatcher_app.task(name=TASK, acks_late=True)  # type: ignore[untyped-decorator]
    def drive(run_id: str) -> str:
        try:
            outcome = worker.drive(run_id)
        except SchemaNewer as exc:  # a newer tether migrated the database: its workers take the run
            drive.apply_async(args=[run_id], queue=queue, countdown=1)
            if not refused:
                refused.append(exc)
                import signal

                os.kill(os.getpid(), signal.SIGTERM)  # Celery's warm shutdown: this worker takes no more
            return "refused: the database is newer than this worker"
        except Exception as exc:  # the database away: a message acknowledged now would leave the job live for ever
            _log.warning("run %s: %s; looking again in 5 s", run_id, exc)
            drive.apply_async(args=[run_id], queue=queue, countdown=5)
            return "database away"
        if outcome == HELD:
            # Another worker holds the run: a live one (this is a second delivery), or a machine that
            # vanished and whose connection the database has not dropped yet. Look again later, so
            # the run is not left behind in the second case.
            drive.apply_async(args=[run_id], queue=queue, countdown=5)
        return outcome

    try:
        with Pruner(worker.jobs, keep_events_days):
            dispatcher_app.worker_main(
                [
                    "worker",
                    "--pool=threads",
                    f"--concurrency={concurrency}",
                    "-Q",
                    queue,
                    "-n",
                    f"tether-{os.getpid()}@%h",
                    "--without-gossip",
                    "--without-mingle",
                    "--without-heartbeat",
                    "--loglevel=WARNING",
                ]
            )
    finally:
        worker.close()
    if refused:
        raise refused[0]
