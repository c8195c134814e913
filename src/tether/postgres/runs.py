"""Persisted runs in Postgres: the interface and promises of :class:`tether.harness.store.RunStore`,
for runs that any machine may continue.

A run is a row of ``tether_runs`` (the state without its messages, and how many messages belong to
it) and one row per message in ``tether_run_messages``. A save is one transaction: it locks the
run's row, reads how many messages are committed, inserts only the new ones (or replaces them all
after a rewrite), then updates the row. A load reads the row and its messages in one statement, so
it sees one commit whole. Nothing committed is cached between calls: another machine may have
continued the run since.

``lock(run_id)`` holds a session-level advisory lock on a connection of its own. Postgres releases
it when that connection ends, so a worker that is killed, or whose machine vanishes, lets go of
its runs without anyone cleaning up.

The lock also fences the holder's saves. A lock connection can end while its process lives on (a
proxy or ``idle_session_timeout`` closing an idle connection, an operator's
``pg_terminate_backend``), and another process may then take the run. So a save by the holder
checks, in its own transaction with the run's row locked, that the lock is still held by its
connection. If it is not, the save takes it again, but only if no one else holds it and no one
else has saved the run since this process last read or wrote it; otherwise it raises
:class:`RunLockLost` and writes nothing, so a process that lost its run cannot record an intent
and then act on it. Every write to a session the run holds is fenced the same way
(:func:`fence_session`), checking also that no one else wrote the session meanwhile.
"""

from __future__ import annotations

import contextlib
import json
import logging
import threading
import time
import weakref
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from pydantic import ValidationError

from tether.errors import StaleRunError, StoreError, UserError
from tether.harness.state import RunState
from tether.messages import Message, dump_message, load_message
from tether.postgres.db import Database, Migration, redact

__all__ = ["MIGRATIONS", "PgRunStore", "RunHeld", "RunLockLost", "holds_session", "session_held"]

# Append-only: a change to the tables is a new Migration at the end, never an edit.
MIGRATIONS = [
    Migration(
        1,
        "runs and their messages",
        """
CREATE TABLE tether_runs (
    run_id text PRIMARY KEY,
    header text NOT NULL,
    message_count integer NOT NULL CHECK (message_count >= 0),
    created_at double precision NOT NULL,
    updated_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX tether_runs_created_at ON tether_runs (created_at DESC);
CREATE TABLE tether_run_messages (
    run_id text NOT NULL REFERENCES tether_runs ON DELETE CASCADE,
    seq integer NOT NULL CHECK (seq >= 0),
    body text NOT NULL,
    PRIMARY KEY (run_id, seq)
);
""",
    ),
    # The number of the run's last commit: a save from a copy behind it is refused (see
    # RunState.commit_seq). Rows saved before count from 0.
    Migration(2, "runs' commit numbers", "ALTER TABLE tether_runs ADD COLUMN commit_seq bigint NOT NULL DEFAULT 0;"),
]
# The header is JSON kept as text, not jsonb: jsonb refuses "\\u0000", which a tool's output or a
# reason may hold, and text gives back exactly what was saved.


class RunHeld(StoreError):
    """Another process (on this machine or another) holds the run right now."""


class RunLockLost(StoreError):
    """This process no longer holds the run: its lock's connection ended and another process took
    the run, or saved it, in the meantime. Nothing was written; the other process goes on."""


@dataclass
class _Held:
    conn: Any  # the connection whose session holds the advisory lock
    count: int  # how many ``with store.lock(run_id)`` blocks of this process are inside it
    version: str | None = None  # the run row's xmin as this process last read or wrote it
    lost: bool = False  # another process took the run: every later save is refused
    sessions: list[str] = field(default_factory=list)  # the session locks ``conn`` holds for the run
    # Each held session's row version (xmin of tether_sessions) as this process last read or wrote
    # it: a session another process wrote while the lock was gone is not written into (None: no row).
    session_versions: dict[str, str | None] = field(default_factory=dict)

    @property
    def pid(self) -> int:
        return int(self.conn.info.backend_pid)


_LOCK_PREFIX = "tether.run:"
# So the server notices within about two minutes a machine that vanished with a lock it held.
_KEEPALIVES = "SET tcp_keepalives_idle = 60; SET tcp_keepalives_interval = 10; SET tcp_keepalives_count = 6"
_SESSION_PREFIX = "tether.session:"
_log = logging.getLogger(__name__)

# Runs this process holds, per pool. Every store on one pool shares them: a worker that locked a run
# can hand it to ``run_stream``, which locks it again, whatever store each of them was given.
_held: weakref.WeakKeyDictionary[Database, dict[str, _Held]] = weakref.WeakKeyDictionary()
# Sessions this process holds with no run (session_held), per pool.
_own_sessions: weakref.WeakKeyDictionary[Database, dict[str, _Held]] = weakref.WeakKeyDictionary()
_held_lock = threading.Lock()


def _check_run_id(run_id: str) -> str:
    # The ids RunStore accepts, so a run can move between the two stores.
    if not run_id or "/" in run_id or "\\" in run_id or run_id.startswith(".") or "\x00" in run_id:
        raise UserError(f"not a run id: {run_id!r}")
    return run_id


def _reason(exc: BaseException) -> str:
    return redact(" ".join(str(exc).split()) or type(exc).__name__)[:300]


@contextlib.contextmanager
def _translated(db: Database, doing: str) -> Iterator[None]:
    """Database failures as StoreError, naming the database without its password."""
    import psycopg

    try:
        yield
    except psycopg.Error as exc:
        raise StoreError(f"could not {doing} in the database {redact(db.url)}: {_reason(exc)}") from exc


def holds_session(db: Database, session_id: str, run_id: str) -> bool:
    """Whether this process holds ``session_id`` for ``run_id`` on ``db``'s database already, with
    the run's lock (:meth:`PgRunStore.lock_session`), whatever pool of that database the run store
    was given."""
    key = _SESSION_PREFIX + session_id
    with _held_lock:
        for pool, runs in _held.items():
            held = runs.get(run_id)
            if held is not None and pool.url == db.url and key in held.sessions:
                return True
    return False


@contextlib.contextmanager
def session_held(db: Database, session_id: str, holder: str, then: str = "") -> Iterator[None]:
    """Hold ``session_id`` on a connection of its own (a process that dies lets go with it), or
    refuse, naming its holder; ``holder`` names this one in another's refusal (``run r_1``,
    ``tether sessions delete``), ``then`` says what a refusal tells the person to do."""
    import psycopg

    with _translated(db, f"lock session {session_id}"):
        conn = psycopg.connect(db.url, autocommit=True, connect_timeout=10, application_name=f"tether: {holder}"[:63])
    key = _SESSION_PREFIX + session_id
    held = _Held(conn, 1, sessions=[key])
    try:
        with _translated(db, f"lock session {session_id}"):
            conn.execute(_KEEPALIVES)  # a machine that vanished lets go within about two minutes
            _lock_session(conn, session_id, then)
            held.session_versions[key] = _session_version(conn, session_id)
        with _held_lock:
            _own_sessions.setdefault(db, {})[session_id] = held
        try:
            yield
        finally:
            with _held_lock:
                if _own_sessions.get(db, {}).get(session_id) is held:
                    del _own_sessions[db][session_id]
    finally:
        held.conn.close()  # and with it the lock (a connection taken again by a write included)


def fence_session(conn: Any, db: Database, session_id: str) -> _Held | None:
    """Before a write to ``session_id`` commits (in its transaction ``conn``): if this process holds
    the session (a run's lock, or :func:`session_held`), make sure it still does. Its lock's
    connection may have ended (a proxy, ``idle_session_timeout``, ``pg_terminate_backend``) while
    another process took the session: then :class:`RunLockLost` is raised and nothing is written
    into the other's conversation. When no one else holds it, nor wrote it meanwhile, the lock is
    taken again (with the run's, which ended with it) and the write goes on. Returns the hold, whose
    version :func:`session_written` moves on once the write committed (None: not held here)."""
    key = _SESSION_PREFIX + session_id
    holds = _session_holds(db, session_id)
    if not holds:
        return None
    row = conn.execute("SELECT xmin::text FROM tether_sessions WHERE session_id = %s FOR UPDATE", (session_id,))
    version = None if (found := row.fetchone()) is None else str(found[0])
    for _, held in holds:  # a run of this process that holds it (another may have lost it)
        if not held.lost and _holds(conn, held.pid, key):
            return held
    run_id, held = holds[0]
    if held.lost:
        raise _lost(run_id, session_id=session_id)
    _log.warning("session %s: the connection holding its lock ended; taking the lock again", session_id)
    if version != held.session_versions.get(key):  # another process continued the conversation meanwhile
        held.lost = True
        raise _lost(run_id, session_id=session_id)
    if run_id is not None:  # the run's lock ended with the same connection: taken again first
        row = conn.execute("SELECT xmin::text FROM tether_runs WHERE run_id = %s FOR UPDATE", (run_id,)).fetchone()
        _fence(conn, db, run_id, held, None if row is None else str(row[0]))
        return held
    conn_again = _connect(db, f"session {session_id}")
    if not _try_advisory_lock(conn_again, key):
        conn_again.close()
        held.lost = True
        raise _lost(None, session_id=session_id)
    with contextlib.suppress(Exception):
        held.conn.close()
    held.conn = conn_again
    return held


def _session_holds(db: Database, session_id: str) -> list[tuple[str | None, _Held]]:
    """This process's holds of ``session_id`` (with the run holding each; None: held with no run):
    those made on ``db``'s own pool, else those on another pool of the same database."""
    key = _SESSION_PREFIX + session_id
    with _held_lock:
        found: dict[bool, list[tuple[str | None, _Held]]] = {True: [], False: []}
        for pool, runs in _held.items():
            if pool.url == db.url:
                found[pool is db] += [(run_id, held) for run_id, held in runs.items() if key in held.sessions]
        for pool, sessions in _own_sessions.items():
            if pool.url == db.url and session_id in sessions:
                found[pool is db].append((None, sessions[session_id]))
    return found[True] or found[False]


def session_written(held: _Held | None, session_id: str, version: str) -> None:
    """Note the session's row version a committed write of this process left (see :func:`fence_session`)."""
    if held is not None:
        held.session_versions[_SESSION_PREFIX + session_id] = version


class PgRunStore:
    """Runs in the Postgres database behind ``db`` (see :func:`tether.postgres.database`)."""

    def __init__(self, db: Database) -> None:
        self.db = db
        with self._translated("create the runs tables"):
            db.migrate("runs", MIGRATIONS)

    def _translated(self, doing: str) -> contextlib.AbstractContextManager[None]:
        """Database failures as StoreError, naming the database without its password."""
        return _translated(self.db, doing)

    def exists(self, run_id: str) -> bool:
        """Whether the run was saved (its first save committed)."""
        _check_run_id(run_id)
        with self._translated(f"look up run {run_id}"):
            return bool(self.db.execute("SELECT 1 FROM tether_runs WHERE run_id = %s", (run_id,)))

    def save(self, state: RunState, *, rewrite: bool = False, durable: bool = True) -> None:
        """Persist ``state`` in one transaction: the messages not yet in the database, then the header.

        ``rewrite=True`` (or a transcript shorter than the committed one) replaces every message.
        ``durable=False`` commits without waiting for the server's WAL flush
        (``synchronous_commit = off``): the save survives this process being killed, but a crash of
        the database server may undo the last such saves, never part of one.
        """
        run_id = _check_run_id(state.run_id)
        header = state.model_dump(mode="json", exclude={"messages", "commit_seq"})
        messages = state.messages
        held = self._holding(run_id)

        def commit(conn: Any) -> tuple[int, str]:
            if not durable:
                conn.execute("SET LOCAL synchronous_commit = off")
            count, version, seq = _locked_count(conn, run_id, state.created_at)
            if held is not None:
                _fence(conn, self.db, run_id, held, version)
            if state.commit_seq != seq:
                raise StaleRunError(run_id, state.commit_seq, seq)
            if rewrite or len(messages) < count:
                conn.execute("DELETE FROM tether_run_messages WHERE run_id = %s", (run_id,))
                count = 0
            _insert(conn, run_id, count, messages[count:])
            row = conn.execute(
                "UPDATE tether_runs SET header = %s, message_count = %s, created_at = %s, "
                "commit_seq = %s, updated_at = now() WHERE run_id = %s RETURNING xmin::text",
                (_header_text(header), len(messages), state.created_at, seq + 1, run_id),
            ).fetchone()
            return seq + 1, str(row[0])

        # A database that went away for a moment (a restart, a killed connection) is waited for; a
        # commit that landed before the connection broke counts once (Database.transact).
        with self._translated(f"save run {run_id}"):
            state.commit_seq, saved = self.db.transact(commit)
        if held is not None:
            held.version = saved

    def _holding(self, run_id: str) -> _Held | None:
        """This process's hold on the run, if it holds it (refused if it was lost)."""
        with _held_lock:
            held = _held.get(self.db, {}).get(run_id)
        if held is not None and held.lost:
            raise _lost(run_id)
        return held

    def load(self, run_id: str) -> RunState:
        _check_run_id(run_id)
        with self._translated(f"load run {run_id}"):
            # One statement, one snapshot: the header and the messages of the same commit.
            rows = self.db.execute(
                "SELECT header, message_count, ARRAY(SELECT body FROM tether_run_messages m WHERE m.run_id = r.run_id "
                "AND m.seq < r.message_count ORDER BY m.seq), xmin::text, commit_seq FROM tether_runs r "
                "WHERE run_id = %s",
                (run_id,),
            )
        if not rows:
            raise UserError(
                f"no run {run_id!r} in the database {redact(self.db.url)}. `tether runs` lists the runs there."
            )
        text, count, bodies, version, seq = rows[0]
        held = self._holding(run_id)
        if held is not None:
            held.version = str(version)
        if len(bodies) != count:
            raise StoreError(
                f"run {run_id} has {len(bodies)} of the {count} messages its header counts in the "
                "database: message rows were deleted or edited. Restore the run from a backup or "
                "delete it."
            )
        state = _state(run_id, text)
        state.messages = [_message(run_id, number, body) for number, body in enumerate(bodies, start=1)]
        state.commit_seq = int(seq)
        return state

    def header_state(self, run_id: str) -> tuple[RunState, int | None] | None:
        """The run as its header says it, its messages not read (``messages`` is empty), and its
        model turns as saved (None: the header does not count them): what a view of a run needs
        but for the call it waits for (see :func:`tether.server.runs.saved_header`). None: never saved."""
        _check_run_id(run_id)
        with self._translated(f"read the header of run {run_id}"):
            rows = self.db.execute("SELECT header, commit_seq FROM tether_runs WHERE run_id = %s", (run_id,))
        if not rows:
            return None
        state = _state(run_id, rows[0][0])
        state.commit_seq = int(rows[0][1])
        turns = json.loads(rows[0][0]).get("turns")  # _state checked it is a JSON object
        return state, turns if isinstance(turns, int) else None

    def check_current(self, state: RunState) -> None:
        """Refuse ``state`` if it is behind the run as saved (see
        :meth:`tether.harness.store.RunStore.check_current`)."""
        run_id = _check_run_id(state.run_id)
        with self._translated(f"look up run {run_id}"):
            rows = self.db.execute("SELECT commit_seq FROM tether_runs WHERE run_id = %s", (run_id,))
        current = int(rows[0][0]) if rows else 0
        if state.commit_seq != current:
            raise StaleRunError(run_id, state.commit_seq, current)

    @contextlib.contextmanager
    def lock(self, run_id: str) -> Iterator[None]:
        """Hold the run for this process while it runs: two processes (or machines) resuming one run
        at once would both run its pending calls. Re-entrant within the process; a process that dies
        lets go (its connection ends)."""
        _check_run_id(run_id)
        with _held_lock:
            runs = _held.setdefault(self.db, {})
            held = runs.get(run_id)
            if held is None:
                held = runs[run_id] = _Held(self._take(run_id), 0)
            held.count += 1
        try:
            yield
        finally:
            with _held_lock:
                held.count -= 1
                if held.count == 0:
                    del runs[run_id]
                    held.conn.close()  # ending the session releases its advisory lock

    @contextlib.contextmanager
    def lock_session(self, session_id: str, run_id: str, *, holder: str = "", then: str = "") -> Iterator[None]:
        """Hold the conversation ``session_id`` for ``run_id`` (which this process holds, see
        :meth:`lock`) while it runs, on any machine using the database: two runs continuing one
        session at once would interleave their messages. The lock is an advisory lock of the run's
        own connection, so a process that dies lets go of both. ``holder``: the words that name
        another holder than a run (``tether sessions delete``), which holds the session on a
        connection of its own; ``then``: what a refusal tells the person to do."""
        with _held_lock:
            held = _held.get(self.db, {}).get(run_id)
        if held is None and holder:
            with session_held(self.db, session_id, holder, then):
                yield
            return
        if held is None:
            raise StoreError(f"run {run_id} must be held (store.lock) before its session is")
        key = _SESSION_PREFIX + session_id
        with self._translated(f"lock session {session_id}"):
            _lock_session(held.conn, session_id, then)
            held.session_versions[key] = _session_version(held.conn, session_id)
        held.sessions.append(key)
        try:
            yield
        finally:
            held.sessions.remove(key)
            held.session_versions.pop(key, None)
            with contextlib.suppress(Exception):  # a connection that ended has let go already
                held.conn.execute("SELECT pg_advisory_unlock(hashtextextended(%s, 0))", (key,))

    def _take(self, run_id: str) -> Any:
        return _take(self.db, run_id)

    def list(self) -> list[dict[str, Any]]:
        """Headers of every run, newest first (messages are not read), each with its ``message_count``."""
        with self._translated("list the runs"):
            rows = self.db.execute("SELECT header, message_count FROM tether_runs ORDER BY created_at DESC, run_id")
        out = []
        for text, count in rows:
            try:
                header = json.loads(text)
            except ValueError:
                continue  # damaged: load() says so
            if isinstance(header, dict):
                out.append({**header, "message_count": count})
        return out

    def held(self, run_id: str) -> bool:
        """Whether a process (on any machine using the database) holds the run now (:meth:`lock`):
        a run saved as ``running`` that nobody holds was left so by a process that stopped or was
        killed. Asked of the database's locks; takes none."""
        with self._translated(f"look up run {_check_run_id(run_id)}"):
            rows = self.db.execute(_HELD, (_LOCK_PREFIX + run_id,))
        return bool(rows and rows[0][0])

    def session_holder(self, session_id: str) -> str | None:
        """The run a process holds the session ``session_id`` for now (:meth:`lock_session`): the
        one its lock's connection is named for; None when nobody holds it, or a holder that is no run."""
        with self._translated(f"look up session {session_id}"):
            rows = self.db.execute(_HOLDER, (_SESSION_PREFIX + session_id,))
        name = str(rows[0][0]) if rows and rows[0][0] else ""
        return name.removeprefix("tether: run ") if name.startswith("tether: run ") else None

    def lost(self, run_id: str) -> bool:
        """Whether this process held the run and another process has taken it since."""
        with _held_lock:
            held = _held.get(self.db, {}).get(run_id)
        return held is not None and held.lost

    def close(self) -> None:
        """Nothing to release: the pool is the process's (:func:`tether.postgres.db.close_all`)."""


_HOLDER = (  # the connection's name (``tether: run ...``) of whoever holds an advisory lock
    "SELECT a.application_name FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid "
    "WHERE l.locktype = 'advisory' AND l.granted AND l.objsubid = 1 "
    "AND ((l.classid::bigint << 32) | l.objid::bigint) = hashtextextended(%s, 0)"
)
_HELD = (
    "SELECT EXISTS (SELECT 1 FROM pg_locks WHERE locktype = 'advisory' AND granted AND objsubid = 1 "
    "AND ((classid::bigint << 32) | objid::bigint) = hashtextextended(%s, 0))"
)


def _holds(conn: Any, pid: int, key: str) -> bool:
    """Whether the backend ``pid`` holds ``key``'s advisory lock."""
    return bool(
        conn.execute(
            "SELECT EXISTS (SELECT 1 FROM pg_locks WHERE locktype = 'advisory' AND granted "
            "AND pid = %s AND objsubid = 1 AND ((classid::bigint << 32) | objid::bigint) = "
            "hashtextextended(%s, 0))",
            (pid, key),
        ).fetchone()[0]
    )


def _fence(conn: Any, db: Database, run_id: str, held: _Held, version: str | None) -> None:
    """Make sure this process still holds the run before its save commits (the run's row is
    locked by ``conn``'s transaction, so no other save can slip in meanwhile); ``version``: the
    run row's as ``conn`` read it."""
    if _holds(conn, held.pid, _LOCK_PREFIX + run_id):
        return
    _log.warning("run %s: the connection holding its lock ended; taking the lock again", run_id)
    try:
        conn_again = _take(db, run_id)
    except RunHeld:
        held.lost = True
        raise _lost(run_id) from None
    if version is not None and held.version is not None and version != held.version:
        conn_again.close()  # another process saved the run while this one had let go
        held.lost = True
        raise _lost(run_id)
    for key in held.sessions:  # they ended with the connection too
        session_id = key.removeprefix(_SESSION_PREFIX)
        # another run continues the conversation now, or did while the lock was gone
        if not _try_advisory_lock(conn_again, key) or (
            key in held.session_versions and _session_version(conn, session_id) != held.session_versions[key]
        ):
            conn_again.close()
            held.lost = True
            raise _lost(run_id, f"'s session {session_id}")
    with contextlib.suppress(Exception):
        held.conn.close()
    held.conn = conn_again


def _session_version(conn: Any, session_id: str) -> str | None:
    """The session's row version (its xmin), None when it has no row (or there are no session tables)."""
    if not conn.execute("SELECT to_regclass('tether_sessions') IS NOT NULL").fetchone()[0]:
        return None
    row = conn.execute("SELECT xmin::text FROM tether_sessions WHERE session_id = %s", (session_id,)).fetchone()
    return None if row is None else str(row[0])


def _connect(db: Database, what: str) -> Any:
    """A connection of its own (not pooled) for an advisory lock held as long as ``what`` runs."""
    import psycopg

    conn = psycopg.connect(db.url, autocommit=True, connect_timeout=10, application_name=f"tether: {what}"[:63])
    try:
        conn.execute(_KEEPALIVES)
    except BaseException:
        conn.close()
        raise
    return conn


def _take(db: Database, run_id: str) -> Any:
    """A new connection holding the run's advisory lock (not a pooled one: a lock held for a
    whole run would keep a pool connection out of use, and go back to the pool still held)."""
    with _translated(db, f"lock run {run_id}"):
        conn = _connect(db, f"run {run_id}")
        try:
            taken = _try_advisory_lock(conn, _LOCK_PREFIX + run_id)
        except BaseException:
            conn.close()
            raise
    if not taken:
        conn.close()
        raise RunHeld(
            f"run {run_id} is running in another process right now (on this machine or another "
            "one using the same database); wait for it to stop (or stop it) before resuming it "
            "here"
        )
    return conn


def _locked_count(conn: Any, run_id: str, created_at: float) -> tuple[int, str | None, int]:
    """How many messages of the run are committed, the version (xmin) of that commit and its number,
    with its row locked until the transaction ends (made now, empty and with no version, when it is
    new)."""
    query = "SELECT message_count, xmin::text, commit_seq FROM tether_runs WHERE run_id = %s FOR UPDATE"
    row = conn.execute(query, (run_id,)).fetchone()
    if row is not None:
        return int(row[0]), str(row[1]), int(row[2])
    cur = conn.execute(
        "INSERT INTO tether_runs (run_id, header, message_count, created_at) VALUES (%s, '{}', 0, %s) "
        "ON CONFLICT (run_id) DO NOTHING",
        (run_id, created_at),
    )
    if cur.rowcount == 1:
        return 0, None, 0
    # Another transaction made the row first; its commit is what we wait for and then count from.
    row = conn.execute(query, (run_id,)).fetchone()
    return int(row[0]), str(row[1]), int(row[2])


# A holder lets go of its advisory locks by ending its connection, which the server takes in after
# the holder's close has returned: on a busy machine a run resumed the moment its last process ended
# was refused as "running in another process". A lock still held is asked again for this long.
_RELEASE_GRACE_S = 2.0


def _try_advisory_lock(conn: Any, key: str) -> bool:
    """Take ``key``'s advisory lock on ``conn``: whether it was free, or came free within
    ``_RELEASE_GRACE_S`` (a holder whose connection was ending)."""
    deadline = time.monotonic() + _RELEASE_GRACE_S
    while True:
        row = conn.execute("SELECT pg_try_advisory_lock(hashtextextended(%s, 0))", (key,)).fetchone()
        if row and row[0]:
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.05)


def _lock_session(conn: Any, session_id: str, then: str) -> None:
    """Take the session's advisory lock on ``conn``, or refuse, naming who holds it."""
    key = _SESSION_PREFIX + session_id
    if _try_advisory_lock(conn, key):
        return
    holder = conn.execute(_HOLDER, (key,)).fetchone()
    name = str(holder[0]).removeprefix("tether: ") if holder and holder[0] else "another run"
    then = then or (
        "nothing was sent or run. Wait for that run to stop (or stop it), then send this message again, or use "
        "another session"
    )
    raise StoreError(
        f"session {session_id} is being continued by {name} in another process right now "
        f"(on this machine or another one using the same database); {then}"
    )


def _lost(run_id: str | None, what: str = "", *, session_id: str = "") -> RunLockLost:
    """What a process that lost the run ``run_id`` (or, with no run, the session ``session_id``) is told."""
    if session_id:
        what = f"'s session {session_id}" if run_id is not None else f"session {session_id}"
    name = f"run {run_id}{what}" if run_id is not None else what
    lock = "the run's" if run_id is not None else "the session's"
    return RunLockLost(
        f"{name} was taken over by another process after this one lost its hold on it (the "
        f"database connection holding {lock} lock ended): nothing more is saved or done here, "
        "the other process goes on. If connections are closed when idle (a proxy, "
        "idle_session_timeout), exempt tether's or lengthen the limit."
    )


def _insert(conn: Any, run_id: str, first: int, messages: list[Message]) -> None:
    if messages:
        conn.cursor().executemany(
            "INSERT INTO tether_run_messages (run_id, seq, body) VALUES (%s, %s, %s)",
            [(run_id, first + i, dump_message(m)) for i, m in enumerate(messages)],
        )


def _header_text(header: dict[str, Any]) -> str:
    """The header as JSON text Postgres can hold: a lone surrogate (half a pair, in a reason an error
    or a client wrote) is kept escaped, as it was, since UTF-8 cannot carry it."""
    text = json.dumps(header, ensure_ascii=False)
    try:
        text.encode()
    except UnicodeEncodeError:
        return json.dumps(header)
    return text


def _state(run_id: str, text: str) -> RunState:
    try:
        header = json.loads(text)
    except ValueError:
        header = None
    if not isinstance(header, dict):
        raise _damaged_header(run_id, "it is not a JSON object")
    if header.get("run_id", run_id) != run_id:  # its saves would go to the run it names
        raise _damaged_header(run_id, f"it names run {header['run_id']!r}, as a copy of that run's row would")
    header.pop("turns", None)  # derived from the messages, kept in the row for list()
    try:
        return RunState.model_validate({**header, "messages": []})
    except ValidationError as exc:
        problem = exc.errors()[0]
        raise _damaged_header(run_id, f"{'.'.join(str(x) for x in problem['loc'])}: {problem['msg']}") from exc


def _damaged_header(run_id: str, why: str) -> StoreError:
    return StoreError(
        f"the header of run {run_id} in the database does not describe a run ({why}). It was "
        "edited or damaged; restore the run from a backup or delete it."
    )


def _message(run_id: str, number: int, body: str) -> Message:
    try:
        return load_message(body)
    except ValidationError as exc:
        raise StoreError(
            f"run {run_id}, message {number} in the database is not a message "
            f"({exc.errors()[0]['msg']}): the row was edited or damaged. Restore the run from a "
            "backup or delete it."
        ) from exc
