"""The server's records on Postgres: ``PgServerStore`` keeps what ``SqliteServerStore`` keeps
(sessions and who owns them, turns, feedback, hashed API tokens), so many server machines share it.

Every write is one statement or one transaction, so two machines never undo each other:

* ``add_turn``: ``INSERT ... ON CONFLICT (owner, message_id) DO NOTHING``, then a read of the
  row that won. The loser's insert waits for the winner's commit, so both get the same record.
* ``touch_session``: merges ``chosen`` inside the ``UPDATE`` (``chosen || new``), not by a read
  and a write, so two forms submitted at once both count.
* ``add_token``: the token and the sticky ``auth = required`` mark in one transaction; only the
  token's SHA-256 is stored.
"""

from __future__ import annotations

import json
import secrets
import time
from dataclasses import astuple
from typing import Any

from tether.postgres.db import Database, Migration, storable
from tether.server.store import FeedbackRecord, SessionRecord, TurnRecord, hash_token

__all__ = ["MIGRATIONS", "PgServerStore"]

MIGRATIONS = [
    Migration(
        1,
        "server records",
        """
CREATE TABLE server_sessions (
    session_id text PRIMARY KEY, owner text NOT NULL, agent text NOT NULL, title text NOT NULL,
    created double precision NOT NULL, updated double precision NOT NULL,
    chosen jsonb NOT NULL DEFAULT '{}'::jsonb, seq bigint GENERATED ALWAYS AS IDENTITY);
CREATE INDEX server_sessions_owner ON server_sessions (owner, updated);
CREATE TABLE server_turns (
    message_id text NOT NULL, run_id text NOT NULL UNIQUE, session_id text NOT NULL, owner text NOT NULL,
    agent text NOT NULL, trace_id text NOT NULL, text text NOT NULL, created double precision NOT NULL,
    seq bigint GENERATED ALWAYS AS IDENTITY, PRIMARY KEY (owner, message_id));
CREATE INDEX server_turns_session ON server_turns (session_id, created);
CREATE INDEX server_turns_owner ON server_turns (owner, created);
CREATE TABLE server_feedback (
    message_id text NOT NULL, owner text NOT NULL, run_id text NOT NULL, trace_id text NOT NULL,
    score text NOT NULL, comment text, created double precision NOT NULL, PRIMARY KEY (owner, message_id));
CREATE TABLE server_tokens (name text PRIMARY KEY, hash text NOT NULL UNIQUE, created double precision NOT NULL);
CREATE TABLE server_meta (key text PRIMARY KEY, value text NOT NULL);
""",
    ),
    Migration(
        2,
        "a turn's message digest",
        "ALTER TABLE server_turns ADD COLUMN digest text NOT NULL DEFAULT '';",
    ),
    Migration(
        3,
        "a user's feedback, newest first",  # a page of GET /v1/feedback reads its rows alone
        "CREATE INDEX server_feedback_owner ON server_feedback (owner, created, message_id);",
    ),
]

_SESSION = "session_id, owner, agent, title, created, updated, chosen"
_TURN = "message_id, run_id, session_id, owner, agent, trace_id, text, created, digest"
_FEEDBACK = "message_id, run_id, trace_id, owner, score, comment, created"


class PgServerStore:
    """The server's records in Postgres tables prefixed ``server_`` (component ``server``)."""

    def __init__(self, db: Database) -> None:
        self.db = db
        self._required = False  # auth_required() once it said yes (it never goes back)
        self._answered = False  # whether auth_required() was answered by the database yet
        self._callers: dict[str, str] = {}  # token hash -> user, as last looked up (known_caller)
        self._revoked: str | None = None  # the database's mark of its last revocation, as last read
        db.migrate("server", MIGRATIONS)

    def _execute(self, sql: str, args: Any = ()) -> list[tuple[Any, ...]]:
        # What clients send may hold a NUL, which Postgres text refuses: stored, and looked up, as U+FFFD.
        return self.db.execute(sql, storable(list(args)))

    # --- sessions

    def add_session(self, record: SessionRecord) -> None:
        self._execute(
            f"INSERT INTO server_sessions ({_SESSION}) VALUES (%s, %s, %s, %s, %s, %s, %s::jsonb)",
            (*record.row()[:-1], json.dumps(storable(record.chosen))),
        )

    @staticmethod
    def _session(row: tuple[Any, ...]) -> SessionRecord:
        return SessionRecord(
            session_id=row[0],
            owner=row[1],
            agent=row[2],
            title=row[3],
            created=row[4],
            updated=row[5],
            chosen=dict(row[6]),
        )

    def session(self, session_id: str, owner: str) -> SessionRecord | None:
        rows = self._execute(
            f"SELECT {_SESSION} FROM server_sessions WHERE session_id = %s AND owner = %s", (session_id, owner)
        )
        return self._session(rows[0]) if rows else None

    def sessions(self, owner: str, *, limit: int | None = None) -> list[SessionRecord]:
        """The owner's sessions, last touched first: the first ``limit`` (all: None), read off the
        index on (owner, updated)."""
        rows = self._execute(
            f"SELECT {_SESSION} FROM server_sessions WHERE owner = %s ORDER BY updated DESC, seq DESC LIMIT %s",
            (owner, limit),
        )
        return [self._session(r) for r in rows]

    def touch_session(self, session_id: str, *, chosen: dict[str, Any] | None = None) -> None:
        # `||` merges top-level keys as dict `|` does, inside the row lock the UPDATE takes.
        self._execute(
            "UPDATE server_sessions SET chosen = chosen || %s::jsonb, updated = %s WHERE session_id = %s",
            (json.dumps(storable(chosen or {})), time.time(), session_id),
        )

    def rename_session(self, session_id: str, title: str) -> None:
        self._execute("UPDATE server_sessions SET title = %s WHERE session_id = %s", (title, session_id))

    def delete_turn(self, message_id: str, owner: str) -> None:
        """Forget a turn whose run was refused before it began (the message was answered 409)."""
        self._execute("DELETE FROM server_turns WHERE message_id = %s AND owner = %s", (message_id, owner))

    def delete_session(self, session_id: str, owner: str) -> bool:
        """Forget the session, its turns and their feedback (the runs stay in the run store)."""
        session_id, owner = storable(session_id), storable(owner)
        with self.db.tx() as conn:
            conn.execute(
                "DELETE FROM server_feedback WHERE owner = %s AND message_id IN "
                "(SELECT message_id FROM server_turns WHERE session_id = %s AND owner = %s)",
                (owner, session_id, owner),
            )
            conn.execute("DELETE FROM server_turns WHERE session_id = %s AND owner = %s", (session_id, owner))
            deleted = conn.execute(
                "DELETE FROM server_sessions WHERE session_id = %s AND owner = %s", (session_id, owner)
            )
            return bool(deleted.rowcount)

    # --- turns

    def add_turn(self, record: TurnRecord) -> TurnRecord:
        """Record the turn; when ``message_id`` is already taken for this owner, the earlier one."""
        inserted = self._execute(
            f"INSERT INTO server_turns ({_TURN}) VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s) "
            "ON CONFLICT (owner, message_id) DO NOTHING RETURNING message_id",
            astuple(record),
        )
        if inserted:
            return record
        # Another request won: its insert has committed (ours waited for it), so this read finds it.
        earlier = self.turn(record.message_id, record.owner)
        assert earlier is not None, "a conflicting turn is committed before ON CONFLICT gives way"
        return earlier

    def turn(self, message_id: str, owner: str) -> TurnRecord | None:
        rows = self._execute(
            f"SELECT {_TURN} FROM server_turns WHERE owner = %s AND message_id = %s", (owner, message_id)
        )
        return TurnRecord(*rows[0]) if rows else None

    def turn_for_run(self, run_id: str, owner: str | None) -> TurnRecord | None:
        if owner is None:
            rows = self._execute(f"SELECT {_TURN} FROM server_turns WHERE run_id = %s", (run_id,))
        else:
            rows = self._execute(f"SELECT {_TURN} FROM server_turns WHERE run_id = %s AND owner = %s", (run_id, owner))
        return TurnRecord(*rows[0]) if rows else None

    def turns(self, owner: str, session_id: str | None = None, *, limit: int | None = None) -> list[TurnRecord]:
        """A session's turns, oldest first; or (``session_id`` None) all the owner's, newest first,
        the first ``limit`` of them read off the index on (owner, created)."""
        if session_id is None:
            rows = self._execute(
                f"SELECT {_TURN} FROM server_turns WHERE owner = %s ORDER BY created DESC, seq DESC LIMIT %s",
                (owner, limit),
            )
        else:
            rows = self._execute(
                f"SELECT {_TURN} FROM server_turns WHERE owner = %s AND session_id = %s ORDER BY created, seq LIMIT %s",
                (owner, session_id, limit),
            )
        return [TurnRecord(*r) for r in rows]

    # --- feedback

    def put_feedback(self, record: FeedbackRecord) -> None:
        self._execute(
            f"INSERT INTO server_feedback ({_FEEDBACK}) VALUES (%s, %s, %s, %s, %s, %s, %s) "
            "ON CONFLICT (owner, message_id) DO UPDATE SET run_id = excluded.run_id, "
            "trace_id = excluded.trace_id, score = excluded.score, comment = excluded.comment, "
            "created = excluded.created",
            astuple(record),
        )

    def feedback(self, owner: str, *, limit: int | None = None) -> list[FeedbackRecord]:
        rows = self._execute(
            f"SELECT {_FEEDBACK} FROM server_feedback WHERE owner = %s ORDER BY created DESC, message_id DESC LIMIT %s",
            (owner, limit),
        )
        return [FeedbackRecord(*r) for r in rows]

    # --- tokens

    def add_token(self, name: str) -> str:
        """A new token for user ``name`` (shown once; only its hash is kept). Replaces an earlier one."""
        token, name = "tt_" + secrets.token_urlsafe(32), storable(name)
        with self.db.tx() as conn:
            conn.execute(
                "INSERT INTO server_tokens (name, hash, created) VALUES (%s, %s, %s) ON CONFLICT (name) "
                "DO UPDATE SET hash = excluded.hash, created = excluded.created",
                (name, hash_token(token), time.time()),
            )
            conn.execute(
                "INSERT INTO server_meta (key, value) VALUES ('auth', 'required'), ('revoked', %s) "
                "ON CONFLICT (key) DO UPDATE SET value = excluded.value",
                (secrets.token_hex(8),),  # the token it replaces is revoked (see user_for_token)
            )
        return token

    def user_for_token(self, token: str) -> str | None:
        digest = hash_token(token)
        # With the token, the mark of the last revocation (made by any process: the CLI's own):
        # a token known here from before it is forgotten, so a revoked one cannot Stop later.
        name, revoked = self._execute(
            "SELECT (SELECT name FROM server_tokens WHERE hash = %s), "
            "(SELECT value FROM server_meta WHERE key = 'revoked')",
            (digest,),
        )[0]
        if revoked != self._revoked or len(self._callers) >= 10_000:
            self._callers = {}
        self._revoked = revoked
        if name is None:
            self._callers.pop(digest, None)
            return None
        self._callers[digest] = user = str(name)
        return user

    def known_caller(self, token: str) -> str | None:
        """The user of ``token`` as this process last looked it up (None: never, or a token was
        revoked or replaced since, by any process, as this process's last look-up read): for a Stop
        of a run this server drives while the database is away, and nothing else."""
        return self._callers.get(hash_token(token))

    def known_local(self) -> bool | None:
        """Whether the server had no tokens at the database's last answer (None: it never answered),
        for the same Stop."""
        return not self._required if self._answered or self._required else None

    def token_names(self) -> list[tuple[str, float]]:
        rows = self._execute('SELECT name, created FROM server_tokens ORDER BY name COLLATE "C"')
        return [(str(n), float(c)) for n, c in rows]

    def revoke_token(self, name: str) -> bool:
        self._callers = {k: v for k, v in self._callers.items() if v != name}
        with self.db.tx() as conn:  # the mark tells every server that tokens it knows may be gone
            gone = conn.execute(
                "DELETE FROM server_tokens WHERE name = %s RETURNING name", (storable(name),)
            ).fetchall()
            conn.execute(
                "INSERT INTO server_meta (key, value) VALUES ('revoked', %s) "
                "ON CONFLICT (key) DO UPDATE SET value = excluded.value",
                (secrets.token_hex(8),),
            )
        return bool(gone)

    def has_tokens(self) -> bool:
        return bool(self._execute("SELECT 1 FROM server_tokens LIMIT 1"))

    def auth_required(self) -> bool:
        """Once a token has existed, always: revoking the last one locks everyone out rather than
        opening the server to anyone. So a yes is remembered, and a no asked again each time."""
        if not self._required:
            self._required = bool(
                self._execute(
                    "SELECT 1 FROM server_meta WHERE key = 'auth' UNION ALL SELECT 1 FROM server_tokens LIMIT 1"
                )
            )
            self._answered = True
        return self._required

    def close(self) -> None:
        """Nothing to do: the pool is the process's, shared with the other stores on this database
        (``tether.postgres.db.close_all`` closes it)."""
