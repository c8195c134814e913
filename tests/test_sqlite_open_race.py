"""Processes that make one new SQLite database at the same moment (two first `tether kb add` runs,
two `tether run`s on a new session database, two servers or token commands on a new server
database): one of them was told "cannot open the knowledge base …: database is locked. If it is
damaged, remove it and add the documents again" (SQLite answers one of two connections that would
wait for each other at once, its busy timeout unused). Every one opens it now (tether.fileio's
set_up_sqlite), and a knowledge base records one embedder."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest

OPEN = """
import os, sys
from tether.knowledge.store import SqliteKnowledgeStore
from tether.server.store import SqliteServerStore
from tether.sessions import SqliteSessionStore
path, go, kind = sys.argv[1:4]
while not os.path.exists(go):
    pass  # spinning, not sleeping: they start within microseconds of each other
if kind == "kb":
    print(SqliteKnowledgeStore(path).claim_meta("embedder", "hashing/" + str(os.getpid())))
else:
    (SqliteSessionStore if kind == "sessions" else SqliteServerStore)(path)
"""


@pytest.mark.parametrize("kind", ["kb", "sessions", "server"])
def test_processes_making_one_new_database_at_once_all_open_it(tmp_path: Path, kind: str) -> None:
    for round_ in range(5):
        where = tmp_path / str(round_)
        where.mkdir()
        base, go = where / "kb.db", where / "go"
        children = [
            subprocess.Popen(
                [sys.executable, "-c", OPEN, str(base), str(go), kind],
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
            for _ in range(4)
        ]
        time.sleep(0.3)  # most of them waiting for the word: they open together (where they land is free)
        go.touch()
        done = [(child.wait(timeout=60), *child.communicate()) for child in children]
        assert all(code == 0 for code, _, _ in done), [err for _, _, err in done]
        assert len({out.strip() for _, out, _ in done}) == 1, done  # one embedder, the first one's
