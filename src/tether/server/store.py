"""What the server keeps beside the library's stores: who owns which session and run, which run
answered which message (and its trace id), feedback, and API tokens (hashed).

``ServerStore`` is the seam; ``SqliteServerStore`` (one file under ``$TETHER_HOME/serve``) is the
default. Transcripts and run states stay in the session and run stores the command line uses.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import hmac
import json
import secrets
import sqlite3
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Protocol

from tether.errors import ConfigError
from tether.fileio import keep_from_commands, planted, private_file, set_up_sqlite

__all__ = [
    "FeedbackRecord",
    "ServerStore",
    "SessionRecord",
    "SqliteServerStore",
    "TurnRecord",
    "hash_token",
    "text_digest",
]


@dataclass
class SessionRecord:
    session_id: str
    owner: str
    agent: str
    title: str
    created: float
    updated: float
    chosen: dict[str, Any] = field(default_factory=dict)  # values of the forms submitted so far

    def public(self) -> dict[str, Any]:
        return {k: v for k, v in asdict(self).items() if k not in ("owner", "chosen")}

    def row(self) -> tuple[Any, ...]:
        """The record as a stored row: its fields in order, the choices as JSON."""
        return (
            self.session_id,
            self.owner,
            self.agent,
            self.title,
            self.created,
            self.updated,
            json.dumps(self.chosen),
        )


@dataclass
class TurnRecord:
    """One user message and the run that answers it."""

    message_id: str
    run_id: str
    session_id: str
    owner: str
    agent: str
    trace_id: str
    text: str  # the message's first 500 characters (what a listing shows)
    created: float
    digest: str = ""  # text_digest of the whole message ("": recorded before digests were kept)

    def same_text(self, text: str) -> bool:
        """Whether ``text`` is this turn's message, whole: its digest, or (a turn recorded before
        digests were kept) its first 500 characters, so only for a text no longer than that."""
        if self.digest:
            return hmac.compare_digest(self.digest, text_digest(self.run_id, text))
        return len(text) <= 500 and self.text == text


def text_digest(run_id: str, text: str) -> str:
    """SHA-256 of a message, salted with its run's id (the same words in two turns do not match):
    how a message sent again is known whole, without a second copy of its text."""
    return hashlib.sha256(f"{run_id}\n{text}".encode("utf-8", "surrogatepass")).hexdigest()


@dataclass
class FeedbackRecord:
    message_id: str
    run_id: str
    trace_id: str
    owner: str
    score: str
    comment: str | None
    created: float

    def public(self) -> dict[str, Any]:
        return {k: v for k, v in asdict(self).items() if k != "owner"}


class ServerStore(Protocol):
    def add_session(self, record: SessionRecord) -> None: ...
    def session(self, session_id: str, owner: str) -> SessionRecord | None: ...
    def sessions(self, owner: str, *, limit: int | None = None) -> list[SessionRecord]: ...
    def touch_session(self, session_id: str, *, chosen: dict[str, Any] | None = None) -> None: ...
    def rename_session(self, session_id: str, title: str) -> None: ...
    def delete_session(self, session_id: str, owner: str) -> bool: ...
    def delete_turn(self, message_id: str, owner: str) -> None: ...
    def add_turn(self, record: TurnRecord) -> TurnRecord: ...
    def turn(self, message_id: str, owner: str) -> TurnRecord | None: ...
    def turn_for_run(self, run_id: str, owner: str | None) -> TurnRecord | None: ...
    def turns(self, owner: str, session_id: str | None = None, *, limit: int | None = None) -> list[TurnRecord]: ...
    def put_feedback(self, record: FeedbackRecord) -> None: ...
    def feedback(self, owner: str, *, limit: int | None = None) -> list[FeedbackRecord]: ...
    def add_token(self, name: str) -> str: ...
    def user_for_token(self, token: str) -> str | None: ...
    def token_names(self) -> list[tuple[str, float]]: ...
    def revoke_token(self, name: str) -> bool: ...
    def has_tokens(self) -> bool: ...
    def auth_required(self) -> bool: ...
    def close(self) -> None: ...


def hash_token(token: str) -> str:
    """Tokens are random (256 bits), so one round of SHA-256 is what stores them safely."""
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


_SCHEMA = """
CREATE TABLE IF NOT EXISTS sessions (
    session_id TEXT PRIMARY KEY, owner TEXT NOT NULL, agent TEXT NOT NULL, title TEXT NOT NULL,
    created REAL NOT NULL, updated REAL NOT NULL, chosen TEXT NOT NULL DEFAULT '{}');
CREATE INDEX IF NOT EXISTS sessions_owner ON sessions(owner, updated);
CREATE TABLE IF NOT EXISTS turns (
    message_id TEXT NOT NULL, run_id TEXT NOT NULL UNIQUE, session_id TEXT NOT NULL, owner TEXT NOT NULL,
    agent TEXT NOT NULL, trace_id TEXT NOT NULL, text TEXT NOT NULL, created REAL NOT NULL,
    digest TEXT NOT NULL DEFAULT '', PRIMARY KEY (owner, message_id));
CREATE INDEX IF NOT EXISTS turns_session ON turns(session_id, created);
CREATE INDEX IF NOT EXISTS turns_owner ON turns(owner, created);
CREATE TABLE IF NOT EXISTS feedback (
    message_id TEXT NOT NULL, owner TEXT NOT NULL, run_id TEXT NOT NULL, trace_id TEXT NOT NULL,
    score TEXT NOT NULL, comment TEXT, created REAL NOT NULL, PRIMARY KEY (owner, message_id));
CREATE INDEX IF NOT EXISTS feedback_owner ON feedback(owner, created, message_id);
CREATE TABLE IF NOT EXISTS tokens (
    name TEXT PRIMARY KEY, hash TEXT NOT NULL UNIQUE, created REAL NOT NULL);
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
"""


def _cap(limit: int | None) -> int:
    """A LIMIT for SQLite, where -1 is none."""
    return -1 if limit is None else limit


def _set_up(db: sqlite3.Connection) -> None:
    db.execute("PRAGMA journal_mode=WAL")
    db.execute("PRAGMA busy_timeout=5000")
    # WAL with NORMAL: a commit survives the process being killed; a power cut may lose the last
    # few (the runs themselves are in the run store, saved durably).
    db.execute("PRAGMA synchronous=NORMAL")
    db.executescript(_SCHEMA)


class SqliteServerStore:
    """The server's records in one SQLite file (WAL; one connection shared under a lock)."""

    # Its queries are local and take microseconds: the server asks them on its event loop
    # instead of a worker thread (a thread hop per request cost more than the query).
    answers_inline = True

    def __init__(self, path: Path | str) -> None:
        self.path = Path(path)
        self._lock = threading.Lock()
        self._required = False  # auth_required() once it said yes (it never goes back)
        try:
            if str(path) != ":memory:":
                keep_from_commands(self.path, database=True)  # token hashes: never readable by a sandboxed command
                private_file(self.path)
                self.path.chmod(0o600)  # even one made earlier: it holds token hashes
                for side in ("-wal", "-shm"):  # SQLite would fail later, on every write, naming none
                    kind = planted(Path(f"{self.path}{side}"))
                    if kind is not None:
                        raise OSError(errno.EINVAL, f"its {side} file beside it is {kind}: move it away")
            self._db = set_up_sqlite(
                lambda: sqlite3.connect(str(path), check_same_thread=False, isolation_level=None), _set_up
            )
            self._add_digests()
        except OSError as exc:  # its own name: what was put there, and what to do (fileio)
            raise ConfigError(f"cannot open the server's database {path}: {exc.strerror or exc}") from None
        except sqlite3.Error as exc:
            raise ConfigError(
                f"cannot open the server's database {path}: {exc}. If its -wal or -shm file beside it "
                "is not a file tether made (a link, a named pipe, a folder), move it away; if the "
                "database is damaged, restore it from a backup"
            ) from None
        if str(path) != ":memory:":  # it holds token hashes and feedback comments
            for side in ("-wal", "-shm"):
                with contextlib.suppress(FileNotFoundError):
                    Path(f"{self.path}{side}").chmod(0o600)

    def _add_digests(self) -> None:
        """A file made before turns kept their message's digest gets the column (empty for them)."""
        if "digest" not in {row[1] for row in self._db.execute("PRAGMA table_info(turns)")}:
            with contextlib.suppress(sqlite3.OperationalError):  # another process added it a moment ago
                self._db.execute("ALTER TABLE turns ADD COLUMN digest TEXT NOT NULL DEFAULT ''")

    @contextmanager
    def _tx(self) -> Iterator[sqlite3.Connection]:
        with self._lock:
            self._db.execute("BEGIN IMMEDIATE")
            try:
                yield self._db
                self._db.execute("COMMIT")
            except BaseException:
                # A COMMIT refused too (busy, full): left open, the transaction would hold the
                # database's write lock, against every process, until this one ends.
                with contextlib.suppress(sqlite3.Error):  # SQLite may have rolled back itself
                    self._db.execute("ROLLBACK")
                raise

    def _one(self, sql: str, args: tuple[Any, ...]) -> sqlite3.Cursor:
        """One statement, a transaction by itself (autocommit): no BEGIN and COMMIT around it."""
        with self._lock:
            return self._db.execute(sql, args)

    def _rows(self, sql: str, args: tuple[Any, ...]) -> list[tuple[Any, ...]]:
        with self._lock:
            return self._db.execute(sql, args).fetchall()

    # --- sessions

    def add_session(self, record: SessionRecord) -> None:
        self._one("INSERT INTO sessions VALUES (?,?,?,?,?,?,?)", record.row())

    @staticmethod
    def _session(row: tuple[Any, ...]) -> SessionRecord:
        return SessionRecord(
            session_id=row[0],
            owner=row[1],
            agent=row[2],
            title=row[3],
            created=row[4],
            updated=row[5],
            chosen=json.loads(row[6]),
        )

    def session(self, session_id: str, owner: str) -> SessionRecord | None:
        rows = self._rows("SELECT * FROM sessions WHERE session_id=? AND owner=?", (session_id, owner))
        return self._session(rows[0]) if rows else None

    def sessions(self, owner: str, *, limit: int | None = None) -> list[SessionRecord]:
        """The owner's sessions, last touched first: the first ``limit`` (all: None) read off the
        index on (owner, updated), so a page costs the same whatever the owner has."""
        rows = self._rows(
            "SELECT * FROM sessions WHERE owner=? ORDER BY updated DESC, rowid DESC LIMIT ?", (owner, _cap(limit))
        )
        return [self._session(r) for r in rows]

    def touch_session(self, session_id: str, *, chosen: dict[str, Any] | None = None) -> None:
        if not chosen:
            self._one("UPDATE sessions SET updated=? WHERE session_id=?", (time.time(), session_id))
            return
        with self._tx() as db:
            row = db.execute("SELECT chosen FROM sessions WHERE session_id=?", (session_id,)).fetchone()
            merged = (json.loads(row[0]) if row else {}) | chosen
            db.execute(
                "UPDATE sessions SET chosen=?, updated=? WHERE session_id=?",
                (json.dumps(merged), time.time(), session_id),
            )

    def rename_session(self, session_id: str, title: str) -> None:
        self._one("UPDATE sessions SET title=? WHERE session_id=?", (title, session_id))

    def delete_turn(self, message_id: str, owner: str) -> None:
        """Forget a turn whose run was refused before it began (the message was answered 409)."""
        with self._tx() as db:
            db.execute("DELETE FROM turns WHERE message_id=? AND owner=?", (message_id, owner))

    def delete_session(self, session_id: str, owner: str) -> bool:
        """Forget the session, its turns and their feedback (the runs stay in the run store)."""
        with self._tx() as db:
            db.execute(
                "DELETE FROM feedback WHERE owner=? AND message_id IN "
                "(SELECT message_id FROM turns WHERE session_id=? AND owner=?)",
                (owner, session_id, owner),
            )
            db.execute("DELETE FROM turns WHERE session_id=? AND owner=?", (session_id, owner))
            return db.execute("DELETE FROM sessions WHERE session_id=? AND owner=?", (session_id, owner)).rowcount > 0

    # --- turns

    def add_turn(self, record: TurnRecord) -> TurnRecord:
        """Record the turn; when ``message_id`` is already taken for this owner, the earlier one.
        One statement on the common path (each is a hand-off of the interpreter lock under load)."""
        with self._lock:
            while True:
                if self._db.execute(
                    "INSERT INTO turns VALUES (?,?,?,?,?,?,?,?,?) ON CONFLICT (owner, message_id) DO NOTHING",
                    tuple(asdict(record).values()),
                ).rowcount:
                    return record
                # Another request got there first: its insert has committed, so this read finds it
                # (unless its turn was removed in between, after a 409: then this one is recorded).
                row = self._db.execute(
                    "SELECT * FROM turns WHERE owner=? AND message_id=?", (record.owner, record.message_id)
                ).fetchone()
                if row is not None:
                    return TurnRecord(*row)

    def turn(self, message_id: str, owner: str) -> TurnRecord | None:
        rows = self._rows("SELECT * FROM turns WHERE owner=? AND message_id=?", (owner, message_id))
        return TurnRecord(*rows[0]) if rows else None

    def turn_for_run(self, run_id: str, owner: str | None) -> TurnRecord | None:
        if owner is None:
            rows = self._rows("SELECT * FROM turns WHERE run_id=?", (run_id,))
        else:
            rows = self._rows("SELECT * FROM turns WHERE run_id=? AND owner=?", (run_id, owner))
        return TurnRecord(*rows[0]) if rows else None

    def turns(self, owner: str, session_id: str | None = None, *, limit: int | None = None) -> list[TurnRecord]:
        """A session's turns, oldest first; or (``session_id`` None) all the owner's, newest first,
        the first ``limit`` of them read off the index on (owner, created)."""
        if session_id is None:
            rows = self._rows(
                "SELECT * FROM turns WHERE owner=? ORDER BY created DESC, rowid DESC LIMIT ?", (owner, _cap(limit))
            )
        else:
            rows = self._rows(
                "SELECT * FROM turns WHERE owner=? AND session_id=? ORDER BY created, rowid LIMIT ?",
                (owner, session_id, _cap(limit)),
            )
        return [TurnRecord(*r) for r in rows]

    # --- feedback

    def put_feedback(self, record: FeedbackRecord) -> None:
        with self._tx() as db:
            db.execute(
                "INSERT OR REPLACE INTO feedback (message_id, owner, run_id, trace_id, score, comment, "
                "created) VALUES (?,?,?,?,?,?,?)",
                (
                    record.message_id,
                    record.owner,
                    record.run_id,
                    record.trace_id,
                    record.score,
                    record.comment,
                    record.created,
                ),
            )

    def feedback(self, owner: str, *, limit: int | None = None) -> list[FeedbackRecord]:
        rows = self._rows(
            "SELECT message_id, run_id, trace_id, owner, score, comment, created FROM feedback "
            "WHERE owner=? ORDER BY created DESC, message_id DESC LIMIT ?",
            (owner, _cap(limit)),
        )
        return [FeedbackRecord(*r) for r in rows]

    # --- tokens

    def add_token(self, name: str) -> str:
        """A new token for user ``name`` (shown once; only its hash is kept). Replaces an earlier one."""
        token = "tt_" + secrets.token_urlsafe(32)
        with self._tx() as db:
            db.execute("INSERT OR REPLACE INTO tokens VALUES (?,?,?)", (name, hash_token(token), time.time()))
            db.execute("INSERT OR REPLACE INTO meta VALUES ('auth', 'required')")
        return token

    def user_for_token(self, token: str) -> str | None:
        rows = self._rows("SELECT name FROM tokens WHERE hash=?", (hash_token(token),))
        return str(rows[0][0]) if rows else None

    def token_names(self) -> list[tuple[str, float]]:
        return [(str(n), float(c)) for n, c in self._rows("SELECT name, created FROM tokens ORDER BY name", ())]

    def revoke_token(self, name: str) -> bool:
        with self._tx() as db:
            return db.execute("DELETE FROM tokens WHERE name=?", (name,)).rowcount > 0

    def has_tokens(self) -> bool:
        return bool(self._rows("SELECT 1 FROM tokens LIMIT 1", ()))

    def auth_required(self) -> bool:
        """Once a token has existed, always: revoking the last one locks everyone out rather than
        opening the server to anyone. So a yes is remembered (a query fewer per request), and a no
        is asked again each time (a token made by ``tether serve token create`` counts at once)."""
        if not self._required:
            self._required = bool(
                self._rows("SELECT 1 FROM meta WHERE key='auth' UNION ALL SELECT 1 FROM tokens LIMIT 1", ())
            )
        return self._required

    def close(self) -> None:
        with self._lock:
            self._db.close()
