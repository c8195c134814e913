"""Sessions in Postgres: the :class:`tether.sessions.SessionStore` protocol, like
:class:`tether.sessions.SqliteSessionStore`, for conversations that any machine may continue.

One row per session in ``tether_sessions``, one per message in ``tether_session_messages``, the
session's few extra values in ``tether_session_meta``. Every write is one transaction that first
locks the session's row, so appends from many processes or machines queue up: none interleaves
with another or loses a message. A load repairs (law 1) and writes a repaired history back, under
the same lock, only when there is something to repair; a row the repair drops (one that holds no
message, or a tool result no call can pair with) is first copied, as it was, to
``tether_session_damaged``, in the same transaction. A process that holds the session (a run's lock,
or :meth:`PgSessionStore.hold`) checks in each write's transaction that it still does
(:func:`tether.postgres.runs.fence_session`): one whose lock's connection ended while another
process continued the conversation writes nothing into it.
"""

from __future__ import annotations

import contextlib
import json
import logging
import time
from collections.abc import Iterator, Sequence
from typing import Any

from pydantic import ValidationError

from tether.errors import StoreError
from tether.messages import Message, dump_message, load_message
from tether.postgres.db import Database, Migration, redact
from tether.sessions import SessionInfo, check_session_id, repaired

__all__ = ["MIGRATIONS", "PgSessionStore"]

_log = logging.getLogger("tether.sessions")

# Append-only: a change to the tables is a new Migration at the end, never an edit.
MIGRATIONS = [
    Migration(
        1,
        "sessions, their messages and meta",
        """
CREATE TABLE tether_sessions (
    session_id text PRIMARY KEY,
    updated_at double precision NOT NULL
);
CREATE TABLE tether_session_messages (
    session_id text NOT NULL REFERENCES tether_sessions ON DELETE CASCADE,
    seq integer NOT NULL,
    body text NOT NULL,
    PRIMARY KEY (session_id, seq)
);
CREATE TABLE tether_session_meta (
    session_id text PRIMARY KEY,
    body text NOT NULL
);
""",
    ),
    # A row that holds no message is copied here, as it was, by the repair that drops it.
    Migration(
        2,
        "damaged session rows",
        """
CREATE TABLE tether_session_damaged (
    session_id text NOT NULL,
    seq integer NOT NULL,
    body text NOT NULL,
    found_at timestamptz NOT NULL DEFAULT now()
);
""",
    ),
]


class PgSessionStore:
    """Sessions in the Postgres database behind ``db`` (see :func:`tether.postgres.database`)."""

    def __init__(self, db: Database) -> None:
        self.db = db
        with self._translated("create the sessions tables"):
            db.migrate("sessions", MIGRATIONS)

    @contextlib.contextmanager
    def _translated(self, doing: str) -> Iterator[None]:
        """Database failures as StoreError, naming the database without its password."""
        import psycopg

        try:
            yield
        except psycopg.Error as exc:
            reason = redact(" ".join(str(exc).split()) or type(exc).__name__)[:300]
            raise StoreError(f"could not {doing} in the database {redact(self.db.url)}: {reason}") from exc

    @contextlib.contextmanager
    def _write(self, session_id: str, doing: str) -> Iterator[Any]:
        """A transaction holding the session's row (made now when new, its time of change set)."""
        from tether.postgres.runs import fence_session, session_written

        with self._translated(f"{doing} session {session_id}"):
            with self.db.tx() as conn:
                held = fence_session(conn, self.db, session_id)
                version = _touch(conn, session_id)
                yield conn
            session_written(held, session_id, version)

    def load(self, session_id: str) -> list[Message]:
        check_session_id(session_id)
        with self._translated(f"load session {session_id}"), self.db.connection() as conn:
            fixed, damaged, changed = _repaired(_rows(conn, session_id))
        if not changed:
            return fixed
        with self._write(session_id, "repair") as conn:  # again, under the lock: it may have grown since
            fixed, damaged, _ = _repaired(_rows(conn, session_id))
            if damaged:  # kept as they were, in the transaction that drops them
                conn.cursor().executemany(
                    "INSERT INTO tether_session_damaged (session_id, seq, body) VALUES (%s, %s, %s)",
                    [(session_id, seq, body) for seq, body in damaged],
                )
            _replace(conn, session_id, fixed)
        if damaged:
            _log.warning(
                "session %s: %d row(s) hold no message (or a tool result that answers no call) and were dropped; "
                "they are kept as they were in the table tether_session_damaged "
                "(SELECT seq, body FROM tether_session_damaged WHERE session_id = '%s')",
                session_id,
                len(damaged),
                session_id,
            )
        return fixed

    @contextlib.contextmanager
    def hold(self, session_id: str, run_id: str) -> Iterator[None]:
        """Hold ``session_id`` for ``run_id`` while the run continues it, against every other run on
        any machine using the database (two at once would interleave their turns): the second is
        refused (:class:`StoreError`, naming the run) before it reads or writes anything. A run on a
        :class:`~tether.postgres.PgRunStore` holds it already with the run's lock; one with no run
        store (or another) holds it with an advisory lock on a connection of its own, which a
        process that dies lets go."""
        from tether.postgres.runs import holds_session, session_held

        if holds_session(self.db, check_session_id(session_id), run_id):
            yield
            return
        with session_held(self.db, session_id, f"run {run_id}"):
            yield

    def append(self, session_id: str, messages: Sequence[Message]) -> None:
        from tether.postgres.runs import fence_session, session_written

        check_session_id(session_id)
        if not messages:
            return
        bodies = [dump_message(m) for m in messages]

        def append(conn: Any) -> tuple[Any, str]:
            held = fence_session(conn, self.db, session_id)  # a run that lost the session writes nothing into it
            version = _touch(conn, session_id)
            # A statement after the row lock sees every append committed before it.
            conn.execute(
                "INSERT INTO tether_session_messages (session_id, seq, body) "
                "SELECT %(s)s, base.n + t.i, t.body FROM unnest(%(bodies)s::text[]) WITH ORDINALITY "
                "AS t(body, i), (SELECT COALESCE(MAX(seq), 0) AS n FROM tether_session_messages "
                "WHERE session_id = %(s)s) AS base",
                {"s": session_id, "bodies": bodies},
            )
            return held, version

        # Waits for a database away for a moment; an append that landed before the connection
        # broke is not made twice (Database.transact).
        with self._translated(f"append to session {session_id}"):
            held, version = self.db.transact(append)
            session_written(held, session_id, version)

    def rewrite(self, session_id: str, messages: Sequence[Message]) -> None:
        from tether.postgres.runs import fence_session, session_written

        check_session_id(session_id)

        def rewrite(conn: Any) -> tuple[Any, str]:
            held = fence_session(conn, self.db, session_id)
            version = _touch(conn, session_id)
            _replace(conn, session_id, messages)
            return held, version

        with self._translated(f"rewrite session {session_id}"):
            held, version = self.db.transact(rewrite)
            session_written(held, session_id, version)

    def list(self) -> list[SessionInfo]:
        with self._translated("list the sessions"):
            rows = self.db.execute(
                "SELECT s.session_id, COUNT(m.seq), s.updated_at FROM tether_sessions s "
                "LEFT JOIN tether_session_messages m USING (session_id) "
                "GROUP BY s.session_id ORDER BY s.session_id"
            )
        return [SessionInfo(str(sid), int(n), float(ts)) for sid, n, ts in rows]

    def delete(self, session_id: str) -> None:
        check_session_id(session_id)
        with self._translated(f"delete session {session_id}"), self.db.tx() as conn:
            conn.execute("DELETE FROM tether_sessions WHERE session_id = %s", (session_id,))  # messages cascade
            conn.execute("DELETE FROM tether_session_meta WHERE session_id = %s", (session_id,))
            # the rows a repair kept aside are the session's words too: deleted with it
            conn.execute("DELETE FROM tether_session_damaged WHERE session_id = %s", (session_id,))

    def load_meta(self, session_id: str) -> dict[str, Any]:
        """The session's extra values; ones that cannot be read count as empty (they are rewritten)."""
        check_session_id(session_id)
        with self._translated(f"load the meta of session {session_id}"):
            rows = self.db.execute("SELECT body FROM tether_session_meta WHERE session_id = %s", (session_id,))
        try:
            meta = json.loads(rows[0][0]) if rows else {}
        except ValueError:
            return {}
        return meta if isinstance(meta, dict) else {}

    def save_meta(self, session_id: str, meta: dict[str, Any]) -> None:
        check_session_id(session_id)
        with self._translated(f"save the meta of session {session_id}"):
            self.db.execute(
                "INSERT INTO tether_session_meta (session_id, body) VALUES (%s, %s) "
                "ON CONFLICT (session_id) DO UPDATE SET body = excluded.body",
                (session_id, json.dumps(meta, ensure_ascii=False)),
            )

    def close(self) -> None:
        """Nothing to release: the pool is the process's (:func:`tether.postgres.db.close_all`)."""


def _touch(conn: Any, session_id: str) -> str:
    """Lock the session's row (made now when new) and set its time of change; the row's new version."""
    row = conn.execute(
        "INSERT INTO tether_sessions (session_id, updated_at) VALUES (%s, %s) ON CONFLICT "
        "(session_id) DO UPDATE SET updated_at = excluded.updated_at RETURNING xmin::text",
        (session_id, time.time()),
    ).fetchone()
    return str(row[0])


def _rows(conn: Any, session_id: str) -> list[tuple[int, str]]:
    rows = conn.execute(
        "SELECT seq, body FROM tether_session_messages WHERE session_id = %s ORDER BY seq", (session_id,)
    )
    return [(int(seq), str(body)) for seq, body in rows]


def _repaired(rows: list[tuple[int, str]]) -> tuple[list[Message], list[tuple[int, str]], bool]:
    """The rows' repaired history (law 1), the rows it drops (their numbers and bodies, to keep
    aside first: rows that hold no message, and tool results that no call can pair with), and
    whether it differs from what the rows hold."""
    messages, read, damaged = [], [], []
    for seq, body in rows:
        try:
            messages.append(load_message(body))
            read.append((seq, body))
        except ValidationError:
            damaged.append((seq, body))
    fixed, dropped = repaired(messages)
    damaged += [read[i] for i in dropped]
    return fixed, damaged, bool(damaged) or fixed != messages


def _replace(conn: Any, session_id: str, messages: Sequence[Message]) -> None:
    conn.execute("DELETE FROM tether_session_messages WHERE session_id = %s", (session_id,))
    if messages:
        conn.cursor().executemany(
            "INSERT INTO tether_session_messages (session_id, seq, body) VALUES (%s, %s, %s)",
            [(session_id, i + 1, dump_message(m)) for i, m in enumerate(messages)],
        )
