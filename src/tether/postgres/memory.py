"""Memory on Postgres: ``PgTextStore`` keeps one memory store (the profile or the notes of one
scope) as one row of ``memory_texts``, holding the same Markdown text the file would, so what a
person exports or edits reads as it does on one machine.

``edit()`` is one transaction: it makes the row if it is missing (``INSERT ... ON CONFLICT DO
NOTHING``), locks it (``SELECT ... FOR UPDATE``), lets the caller change the entries and writes
them back. A second writer, in this process or on another machine, waits on the row lock and then
reads what the first wrote, so neither loses the other's change. Readers take no lock and see the
last committed text.
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Iterator
from typing import Any

from tether.memory.store import MemoryRefused, StoreName, StoreUsage, chars, parse, render
from tether.postgres.db import Database, Migration, _reason, _transient, redact

_log = logging.getLogger("tether.memory")

__all__ = ["MIGRATIONS", "PgTextStore"]

MIGRATIONS = [
    Migration(
        1,
        "memory texts",
        """
CREATE TABLE memory_texts (
    scope text NOT NULL, store text NOT NULL CHECK (store IN ('profile', 'notes')),
    body text NOT NULL DEFAULT '', updated_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (scope, store));
""",
    ),
]


class PgTextStore:
    """One memory store in Postgres, keyed by (``scope``, ``name``); ``limit`` bounds its characters."""

    def __init__(self, db: Database, name: StoreName, scope: str, limit: int) -> None:
        self.db = db
        self.name: StoreName = name
        self.scope = scope
        self.limit = limit
        db.migrate("memory", MIGRATIONS)

    @property
    def path(self) -> str:
        """Where the entries live, for ``tether memory show`` (the URL without its password)."""
        return f"{redact(self.db.url)} memory_texts ({self.scope}, {self.name})"

    def entries(self) -> list[str]:
        rows = self.db.execute("SELECT body FROM memory_texts WHERE scope = %s AND store = %s", (self.scope, self.name))
        return parse(_text(rows[0][0])) if rows else []

    def usage(self, entries: list[str] | None = None) -> StoreUsage:
        return StoreUsage(self.name, chars(self.entries() if entries is None else entries), self.limit)

    @contextlib.contextmanager
    def edit(self) -> Iterator[list[str]]:
        """Lock the row, read the entries, let the caller change the list, write it back if it changed.

        A database away for a moment (a restart, a failover, the connection killed) is waited for
        as a run's saves wait (:meth:`Database.transact`): before the caller has the entries, the
        row is read again; once it changed them, they are written again in a new transaction if
        the row still holds what the caller changed (or already holds the change, a commit whose
        answer was lost); a row another writer changed meanwhile is not overwritten."""
        key = (self.scope, self.name)
        deadline = time.monotonic() + self.db.retry_s
        pause = 0.05
        while True:  # the row, locked, in a transaction kept open while the caller changes the entries
            held = contextlib.ExitStack()
            try:
                conn = held.enter_context(self.db.tx())
                conn.execute("INSERT INTO memory_texts (scope, store) VALUES (%s, %s) ON CONFLICT DO NOTHING", key)
                (body,) = conn.execute(
                    "SELECT body FROM memory_texts WHERE scope = %s AND store = %s FOR UPDATE", key
                ).fetchone()
                break
            except Exception as exc:
                held.__exit__(type(exc), exc, exc.__traceback__)
                if not _transient(exc) or time.monotonic() + pause > deadline:
                    raise
                _log.warning("the database is away (%s); reading memory again", _reason(exc))
                time.sleep(pause)
                pause = min(pause * 2, 2.0)
        text: str | None = None
        try:
            with held:
                entries = parse(_text(body))
                before = list(entries)
                yield entries
                if entries != before:
                    text = render(entries)
                    if "\x00" in text:  # a file could hold it; Postgres text cannot
                        raise MemoryRefused(
                            "Not saved: the entry holds a NUL character (\\x00), which the database "
                            "cannot store. Save it without that character.",
                            "nul",
                        )
                    conn.execute(
                        "UPDATE memory_texts SET body = %s, updated_at = now() WHERE scope = %s AND store = %s",
                        (text, *key),
                    )
        except Exception as exc:
            if text is None or not _transient(exc):  # the caller's own error, or nothing to write
                raise
            _log.warning("the database is away (%s); saving memory again", _reason(exc))
            self._write_again(key, body, text, exc)

    def _write_again(self, key: tuple[str, str], body: str, text: str, away: Exception) -> None:
        """Write ``text`` where the row held ``body`` when the caller changed it: its transaction
        met the database away before its commit was known."""

        def write(conn: Any) -> None:
            row = conn.execute("SELECT body FROM memory_texts WHERE scope = %s AND store = %s FOR UPDATE", key)
            now = row.fetchone()
            if now is not None and now[0] == text:  # its commit had landed
                return
            if now is None or now[0] != body:
                raise MemoryRefused(
                    f"Not saved: the database connection broke while this was saved, and {self.name} was "
                    "changed by another writer meanwhile. Read it again and make the change again.",
                    "conflict",
                ) from away
            conn.execute(
                "UPDATE memory_texts SET body = %s, updated_at = now() WHERE scope = %s AND store = %s",
                (text, *key),
            )

        self.db.transact(write)


def _text(body: str) -> str:
    return body.removeprefix("\ufeff")  # as a file saved with a byte-order mark reads
