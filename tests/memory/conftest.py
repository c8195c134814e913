"""Memory on either backend, as a test sees it: ``backend`` is ``sqlite`` (the single-machine
store, which for memory is a Markdown file) or ``postgres`` (a row of ``memory_texts``)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tether.memory import Memory
from tether.memory.store import TextStore


class Stores:
    """Open memory on one backend, read the text it stores, and write that text by hand."""

    def __init__(self, kind: str, home: Path, url: str | None) -> None:
        self.kind, self.home, self.url = kind, home, url

    @property
    def files(self) -> bool:
        return self.kind == "sqlite"

    def open(self, **kw: Any) -> Memory:
        if self.files:
            return Memory.open(self.home, **kw)
        assert self.url is not None
        return Memory.open_postgres(self.url, **kw)

    def spec(self) -> str:
        """What a child process needs to open the same memory: the home or the database URL."""
        return str(self.home) if self.files else str(self.url)

    def stored(self, mem: Memory, store: str) -> str:
        """The Markdown text the store holds ('' when nothing was ever written)."""
        s: Any = mem.stores[store]
        if isinstance(s, TextStore):
            return s.path.read_text(encoding="utf-8") if s.path.exists() else ""
        rows = s.db.execute("SELECT body FROM memory_texts WHERE scope = %s AND store = %s", (s.scope, s.name))
        return str(rows[0][0]) if rows else ""

    def write_by_hand(self, mem: Memory, store: str, text: str) -> None:
        """What a person does with an editor (files) or with ``UPDATE`` (Postgres)."""
        s: Any = mem.stores[store]
        if isinstance(s, TextStore):
            s.path.parent.mkdir(parents=True, exist_ok=True)
            s.path.write_bytes(text.encode("utf-8"))
            return
        s.db.execute(
            "INSERT INTO memory_texts (scope, store, body) VALUES (%s, %s, %s) "
            "ON CONFLICT (scope, store) DO UPDATE SET body = excluded.body",
            (s.scope, s.name, text),
        )


@pytest.fixture(scope="module")
def memory_database(pg_server: Any) -> Iterator[str]:
    """One database for a module's Postgres memory tests: a fresh one per test costs a third of
    a second to make (and more to stop the server), emptying the table costs nothing."""
    from tether.postgres.db import close_all

    yield pg_server.fresh_database()
    close_all()


@pytest.fixture
def stores(backend: str, request: pytest.FixtureRequest, tmp_path: Path) -> Stores:
    url = None
    if backend == "postgres":
        from tether.postgres.db import database
        from tether.postgres.memory import MIGRATIONS

        url = request.getfixturevalue("memory_database")
        db = database(url)
        db.migrate("memory", MIGRATIONS)
        db.execute("DELETE FROM memory_texts")
    return Stores(backend, tmp_path / "home", url)
