"""Processes that make one new knowledge base at the same moment (two first `tether kb add` runs):
one of them was told "cannot open the knowledge base …: database is locked. If it is damaged,
remove it and add the documents again" (SQLite answers one of two connections that would wait for
each other at once, its busy timeout unused). Every one opens it now, and one embedder is recorded."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

OPEN = """
import os, sys, time
from tether.knowledge.store import SqliteKnowledgeStore
path, go = sys.argv[1], sys.argv[2]
while not os.path.exists(go):
    pass  # spinning, not sleeping: they start within microseconds of each other
store = SqliteKnowledgeStore(path)
print(store.claim_meta("embedder", "hashing/" + str(os.getpid())))
"""


def test_processes_making_one_new_base_at_once_all_open_it(tmp_path: Path) -> None:
    for round_ in range(8):
        where = tmp_path / str(round_)
        where.mkdir()
        base, go = where / "kb.db", where / "go"
        children = [
            subprocess.Popen(
                [sys.executable, "-c", OPEN, str(base), str(go)],
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
