"""What every node and worker shares about the runs in flight, in Postgres.

``tether_jobs`` holds one row per run: what its next part is (start with a prompt, or continue),
whether it waits in the queue, runs on a worker, or is done, and a stop asked for it. A partial
unique index allows one live job per session, across every node. ``tether_events`` holds each
run's numbered events, written by the worker that holds the run; every write is announced with
``NOTIFY tether_events`` so the node streaming to a client wakes at once, and a client that
reconnects to any node with ``Last-Event-ID`` reads what it missed from the table.
"""

from __future__ import annotations

import contextlib
import json
import logging
import queue
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from tether.errors import StoreError
from tether.postgres.db import Database, Migration, SchemaNewer, storable
from tether.server.events import PRUNED, encode_event

__all__ = ["EVENTS_CHANNEL", "JOBS_CHANNEL", "EventWriter", "Job", "Jobs", "Listener"]

_log = logging.getLogger("tether.dispatch")

EVENTS_CHANNEL = "tether_events"  # payload: run id (new events)
JOBS_CHANNEL = "tether_jobs"  # payload: run id (a job changed state)
CANCEL_CHANNEL = "tether_cancel"  # payload: run id (a stop was asked)
LIVE = ("queued", "running")

MIGRATIONS = [
    Migration(
        1,
        "jobs and events",
        """
CREATE TABLE tether_jobs (
    run_id text PRIMARY KEY,
    session_id text NOT NULL,
    owner text NOT NULL,
    agent text NOT NULL,
    kind text NOT NULL,              -- start | continue
    prompt text,
    chosen jsonb NOT NULL DEFAULT '{}',
    changes jsonb NOT NULL DEFAULT '{}',  -- max_turns / max_budget_usd raised by a resume
    config jsonb NOT NULL DEFAULT '{}',   -- the new run's config (message id, trace id)
    state text NOT NULL,             -- queued | running | done
    attempts integer NOT NULL DEFAULT 0,
    worker text,
    cancel text,
    began_after integer NOT NULL DEFAULT 0,  -- the run's last event id when this part was queued
    updated_at double precision NOT NULL
);
CREATE UNIQUE INDEX tether_jobs_one_live_per_session ON tether_jobs (session_id)
    WHERE state IN ('queued', 'running');
CREATE TABLE tether_events (
    run_id text NOT NULL,
    id integer NOT NULL,
    kind text NOT NULL,
    data text NOT NULL,
    PRIMARY KEY (run_id, id)
);
""",
    ),
]


@dataclass
class Job:
    run_id: str
    session_id: str
    owner: str
    agent: str
    kind: str
    prompt: str | None
    chosen: dict[str, Any]
    changes: dict[str, Any]
    config: dict[str, Any]
    state: str
    attempts: int
    worker: str | None
    cancel: str | None
    began_after: int = 0
    updated_at: float = field(default=0.0)

    @property
    def live(self) -> bool:
        return self.state in LIVE


_COLUMNS = (
    "run_id, session_id, owner, agent, kind, prompt, chosen, changes, config, state, attempts, worker, "
    "cancel, began_after, updated_at"
)


class SessionBusy(StoreError):
    """The session already has a live run (on this node or another)."""


class AlreadyQueued(SessionBusy):
    """This very run is queued or running already: another request for the same message queued it."""


class DatabaseAway(StoreError):
    """The database could not be reached for as long as a node waits while it queues a job (a
    restart, a failover): the server answers 503, and the message sent again with the same
    message_id is queued then, once."""

    unavailable = True
    database_away = True  # nothing can be taken back now: the message's turn stays, unsent


class Jobs:
    """The job and event tables of one database."""

    queue_retry_s = 5.0  # how long a node queueing a job waits for a database that went away

    def __init__(self, db: Database) -> None:
        self.db = db
        db.migrate("dispatch", MIGRATIONS)

    @staticmethod
    def _job(row: tuple[Any, ...]) -> Job:
        return Job(*row)

    def get(self, run_id: str) -> Job | None:
        rows = self.db.execute(f"SELECT {_COLUMNS} FROM tether_jobs WHERE run_id = %s", (run_id,))
        return self._job(rows[0]) if rows else None

    def live_run_of(self, session_id: str) -> str | None:
        rows = self.db.execute(
            "SELECT run_id FROM tether_jobs WHERE session_id = %s AND state IN ('queued', 'running')", (session_id,)
        )
        return str(rows[0][0]) if rows else None

    def live_count(self) -> int:
        return int(self.db.execute("SELECT count(*) FROM tether_jobs WHERE state IN ('queued', 'running')")[0][0])

    def enqueue(
        self,
        *,
        run_id: str,
        session_id: str,
        owner: str,
        agent: str,
        kind: str,
        prompt: str | None,
        chosen: dict[str, Any],
        changes: dict[str, Any] | None = None,
        config: dict[str, Any] | None = None,
    ) -> None:
        """Queue the run's next part; :class:`SessionBusy` when its session has a live job already."""
        psycopg = _psycopg()

        def queue(conn: Any) -> None:
            cur = conn.execute(
                "INSERT INTO tether_jobs (run_id, session_id, owner, agent, kind, prompt, chosen, changes, config, "
                "state, attempts, worker, cancel, began_after, updated_at) VALUES (%s,%s,%s,%s,%s,%s,%s,%s,%s,"
                "'queued',0,NULL,NULL,(SELECT coalesce(max(id), 0) FROM tether_events WHERE run_id = %s),%s) "
                "ON CONFLICT (run_id) DO UPDATE SET kind = excluded.kind, prompt = excluded.prompt, "
                "chosen = excluded.chosen, changes = excluded.changes, state = 'queued', worker = NULL, "
                "cancel = NULL, began_after = excluded.began_after, updated_at = excluded.updated_at "
                "WHERE tether_jobs.state = 'done' RETURNING run_id",
                (
                    run_id,
                    session_id,
                    owner,
                    agent,
                    kind,
                    None if prompt is None else storable(prompt),  # a NUL a client sent
                    json.dumps(storable(chosen)),
                    json.dumps(changes or {}),
                    json.dumps(storable(config or {})),
                    run_id,
                    time.time(),
                ),
            )
            if cur.fetchone() is None:
                raise AlreadyQueued(f"run {run_id} is already queued or running")
            conn.execute("SELECT pg_notify(%s, %s)", (JOBS_CHANNEL, run_id))

        # A connection that breaks is replaced and a commit that landed counts once (Database.transact);
        # briefly, as a server's request waits on it.
        try:
            self.db.transact(queue, retry_s=self.queue_retry_s)
        except psycopg.errors.UniqueViolation:
            busy = self.live_run_of(session_id)
            if busy == run_id:  # the same run, queued at the same moment (its message sent again)
                raise AlreadyQueued(f"run {run_id} is already queued or running") from None
            raise SessionBusy(f"session {session_id} is still answering (run {busy})") from None
        except psycopg.OperationalError as exc:
            from tether.postgres.db import redact

            why = redact(" ".join(str(exc).split()))[:200]
            raise DatabaseAway(
                f"the database could not be reached for {self.queue_retry_s:g} s ({why}), so this may not "
                "have been queued: send it again in a moment"
            ) from exc

    def claim(self, run_id: str, worker: str) -> Job | None:
        """Mark the job running on ``worker`` (the caller holds the run's lock); None when it is done."""
        rows = self.db.execute(
            f"UPDATE tether_jobs SET state = 'running', worker = %s, attempts = attempts + 1, updated_at = %s "
            f"WHERE run_id = %s AND state IN ('queued', 'running') RETURNING {_COLUMNS}",
            (worker, time.time(), run_id),
        )
        if rows:
            self.db.execute("SELECT pg_notify(%s, %s)", (JOBS_CHANNEL, run_id))
        return self._job(rows[0]) if rows else None

    def finish(self, run_id: str, attempt: int | None = None) -> None:
        """Mark the job done; with ``attempt``, only if no later claim took it over since."""
        with self.db.tx() as conn:
            conn.execute(
                "UPDATE tether_jobs SET state = 'done', updated_at = %s WHERE run_id = %s"
                + (" AND attempts = %s" if attempt is not None else ""),
                (time.time(), run_id, *(() if attempt is None else (attempt,))),
            )
            conn.execute("SELECT pg_notify(%s, %s)", (JOBS_CHANNEL, run_id))

    def withdraw(self, run_id: str) -> bool:
        """End a job that no worker has taken (its message could not be sent); False when one has."""
        with self.db.tx() as conn:
            rows = conn.execute(
                "UPDATE tether_jobs SET state = 'done', updated_at = %s WHERE run_id = %s AND state = 'queued' "
                "AND worker IS NULL RETURNING run_id",
                (time.time(), run_id),
            ).fetchall()
            conn.execute("SELECT pg_notify(%s, %s)", (JOBS_CHANNEL, run_id))
        return bool(rows)

    def request_cancel(self, run_id: str, reason: str) -> bool:
        """Ask the run to stop, wherever it is; False when it is not live."""
        with self.db.tx() as conn:
            rows = conn.execute(
                "UPDATE tether_jobs SET cancel = %s WHERE run_id = %s AND state IN ('queued', "
                "'running') RETURNING run_id",
                (reason, run_id),
            ).fetchall()
            if rows:
                conn.execute("SELECT pg_notify(%s, %s)", (CANCEL_CHANNEL, run_id))
        return bool(rows)

    def prune(self, keep_s: float, *, now: float | None = None) -> int:
        """Forget runs whose job ended more than ``keep_s`` seconds ago: their numbered events
        (every text delta is one) and their job rows. Their transcripts, traces and feedback stay in
        the run store; a client that reconnects to one gets its answer and exit made from the
        transcript. The last event's row stays as a ``pruned`` marker with its id, so a run resumed
        later numbers its new events after the old ones. Safe on any number of workers at once.
        Returns the number of events forgotten."""
        cutoff = (time.time() if now is None else now) - keep_s
        with self.db.tx() as conn:
            done = [
                r[0]
                for r in conn.execute(
                    "DELETE FROM tether_jobs WHERE state = 'done' AND updated_at < %s RETURNING run_id", (cutoff,)
                ).fetchall()
            ]
            if not done:
                return 0
            cur = conn.execute(
                "DELETE FROM tether_events e WHERE e.run_id = ANY(%s) AND e.id < "
                "(SELECT max(m.id) FROM tether_events m WHERE m.run_id = e.run_id)",
                (done,),
            )
            deleted = int(cur.rowcount or 0)
            cur = conn.execute(
                f"UPDATE tether_events SET kind = '{PRUNED}', data = '{{}}' WHERE run_id = ANY(%s) "
                f"AND kind <> '{PRUNED}'",
                (done,),
            )
            return deleted + int(cur.rowcount or 0)

    # --- events

    def ended_since(self, run_id: str, after: int) -> bool:
        """Whether a ``done`` event was written after event ``after``: the part of the run that a job
        stands for is over, even if the worker died before it could mark the job done."""
        return bool(
            self.db.execute(
                "SELECT 1 FROM tether_events WHERE run_id = %s AND id > %s AND kind = 'done' LIMIT 1", (run_id, after)
            )
        )

    def last_event(self, run_id: str) -> tuple[int, str | None]:
        rows = self.db.execute(
            "SELECT id, kind FROM tether_events WHERE run_id = %s ORDER BY id DESC LIMIT 1", (run_id,)
        )
        return (int(rows[0][0]), str(rows[0][1])) if rows else (0, None)

    def events_after(self, run_id: str, after: int, limit: int = 500) -> list[tuple[int, str, str]]:
        rows = self.db.execute(
            "SELECT id, kind, data FROM tether_events WHERE run_id = %s AND id > %s "
            f"AND kind <> '{PRUNED}' ORDER BY id LIMIT %s",
            (run_id, after, limit),
        )
        return [(int(i), str(k), str(d)) for i, k, d in rows]


def _psycopg() -> Any:
    import psycopg

    return psycopg


class EventWriter:
    """A run's events, written in order by a thread of their own (the run never waits on the
    database for a text delta), a batch per transaction, each batch announced with NOTIFY. A
    database that is away (a restart, a failover) is waited for, up to ``give_up_s``: a batch
    dropped after a few tries left a gap in every client's stream, its ``done`` too."""

    retry_s = 0.2  # the first wait after a failed write; each next one longer, up to 5 s
    give_up_s = 120.0

    def __init__(self, jobs: Jobs, run_id: str, attempt: int | None = None) -> None:
        self.jobs = jobs
        self.run_id = run_id
        self.attempt = attempt  # the claim this writer's worker made: a later claim's stream is not its own
        self.last_id = jobs.last_event(run_id)[0]
        self._queue: queue.Queue[tuple[str, str] | None] = queue.Queue()
        self._thread = threading.Thread(target=self._write, name=f"tether-events-{run_id}", daemon=True)
        self._thread.start()
        self.failed: Exception | None = None

    def append(self, kind: str, data: dict[str, Any]) -> None:
        self._queue.put((kind, encode_event(data)))

    def _write(self) -> None:
        done = False
        while not done:
            batch = [self._queue.get()]
            while len(batch) < 200:
                try:
                    batch.append(self._queue.get_nowait())
                except queue.Empty:
                    break
            if batch[-1] is None or None in batch:
                done = True
            items = [b for b in batch if b is not None]
            if not items:
                continue
            rows = []
            for kind, text in items:
                self.last_id += 1
                rows.append((self.run_id, self.last_id, kind, text))
            waited, tries = 0.0, 0
            while True:
                try:
                    with self.jobs.db.tx() as conn:
                        # Nothing once another worker has claimed the run since (this one lost its
                        # hold): the stream is the new worker's, and so are its numbers. The job's row
                        # is held until the commit, so a claim waits for this batch, and the new worker
                        # numbers its events after it.
                        if (
                            self.attempt is None
                            or conn.execute(
                                "SELECT 1 FROM tether_jobs WHERE run_id = %s AND attempts = %s FOR SHARE",
                                (self.run_id, self.attempt),
                            ).fetchone()
                        ):
                            with conn.cursor() as cur:
                                cur.executemany(
                                    "INSERT INTO tether_events (run_id, id, kind, data) VALUES (%s,%s,%s,%s) "
                                    "ON CONFLICT DO NOTHING",
                                    rows,
                                )
                            conn.execute("SELECT pg_notify(%s, %s)", (EVENTS_CHANNEL, self.run_id))
                    break
                except Exception as exc:  # the database is away (a restart, a failover): try again
                    self.failed = exc
                    if waited >= self.give_up_s or isinstance(exc, SchemaNewer):  # waiting cannot help that
                        _log.error(
                            "events %d to %d of run %s could not be written in %.0f s (%s): its streams miss them",
                            rows[0][1],
                            rows[-1][1],
                            self.run_id,
                            waited,
                            exc,
                        )
                        break
                    _log.warning("events of run %s not written yet (%s); retrying", self.run_id, exc)
                    tries += 1
                    pause = min(self.retry_s * tries, 5.0)
                    time.sleep(pause)
                    waited += pause

    def close(self, timeout: float = 30) -> None:
        """Write what is queued, then stop."""
        self._queue.put(None)
        self._thread.join(timeout)


class Listener:
    """One connection per process that LISTENs and calls ``on(channel, run_id)`` for each
    notification (on its own thread). Each time it connects (the first time, and again after the
    connection dropped), it calls ``on(channel, None)``: something may have been missed, every
    follower should look again. Making one does not wait for the database (a node makes its
    listener on its event loop, as its first stream starts)."""

    connect_timeout_s = 10  # a database that does not answer is tried again after this long

    def __init__(self, url: str, channels: tuple[str, ...], on: Callable[[str, str | None], None]) -> None:
        self.url = url
        self.channels = channels
        self.on = on
        self._stop = threading.Event()
        self._conn: Any = None
        self._thread = threading.Thread(target=self._run, name="tether-listen", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        import psycopg

        while not self._stop.is_set():
            try:
                # It sits idle between notifications: keepalives find a peer that vanished (and keep a
                # load balancer or NAT from dropping the idle connection without a word).
                with psycopg.connect(
                    self.url,
                    autocommit=True,
                    connect_timeout=self.connect_timeout_s,
                    keepalives=1,
                    keepalives_idle=30,
                    keepalives_interval=10,
                    keepalives_count=3,
                ) as conn:
                    self._conn = conn
                    for channel in self.channels:
                        conn.execute(f"LISTEN {channel}")
                    for channel in self.channels:  # what was sent before LISTEN took effect is looked for
                        self.on(channel, None)
                    while not self._stop.is_set():
                        for note in conn.notifies(timeout=0.5):
                            self.on(note.channel, note.payload)
            except Exception as exc:
                if self._stop.is_set():
                    return
                _log.warning("listening for run events failed (%s); reconnecting", exc)
                self._stop.wait(0.5)

    def close(self) -> None:
        self._stop.set()
        self._thread.join(5)
        with contextlib.suppress(Exception):
            if self._conn is not None:
                self._conn.close()
