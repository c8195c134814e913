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
from collections.abc import Iterator

from tether.memory.store import MemoryRefused, StoreName, StoreUsage, chars, parse, render
from tether.postgres.db import Database, Migration, redact

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
        """Lock the row, read the entries, let the caller change the list, write it back if it changed."""
        key = (self.scope, self.name)
        with self.db.tx() as conn:
            conn.execute("INSERT INTO memory_texts (scope, store) VALUES (%s, %s) ON CONFLICT DO NOTHING", key)
            (body,) = conn.execute(
                "SELECT body FROM memory_texts WHERE scope = %s AND store = %s FOR UPDATE", key
            ).fetchone()
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


def _text(body: str) -> str:
    return body.removeprefix("\ufeff")  # as a file saved with a byte-order mark reads
