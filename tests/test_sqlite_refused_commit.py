"""A COMMIT that SQLite refuses (the database busy past its wait, the disk full) rolls the
transaction back in every store that writes in transactions: left open, it held the database's
write lock against every other process (the server, runs, a kb add) until this one ended, and the
connection refused every later call ("cannot start a transaction within a transaction")."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import CommitRefusedOnce
from tether.knowledge.store import SqliteKnowledgeStore
from tether.server.store import SqliteServerStore

STORES: dict[str, Callable[[Path], Any]] = {
    "server": lambda folder: SqliteServerStore(folder / "server.db"),
    "knowledge": lambda folder: SqliteKnowledgeStore(folder / "kb.db"),
}


@pytest.mark.parametrize("kind", sorted(STORES))
def test_a_refused_commit_leaves_no_transaction_open(kind: str, tmp_path: Path) -> None:
    store = STORES[kind](tmp_path)
    path = tmp_path / ("server.db" if kind == "server" else "kb.db")
    real = store._db
    store._db = CommitRefusedOnce(real)
    with pytest.raises(sqlite3.OperationalError, match="database is locked"), store._tx() as db:
        db.execute("CREATE TABLE lost (a)")
    with store._tx() as db:  # the same connection goes on
        db.execute("CREATE TABLE kept (a)")
    other = sqlite3.connect(path, timeout=0)  # another process's connection
    other.execute("BEGIN IMMEDIATE")  # the write lock is free
    other.execute("ROLLBACK")
    tables = {name for (name,) in other.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    other.close()
    assert "kept" in tables and "lost" not in tables
