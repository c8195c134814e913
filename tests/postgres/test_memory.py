"""What only the Postgres memory store has: its rows and keys, its migration, readers that never
wait for a writer, and URLs that never show their password. The behaviour it shares with files is
tested on both in tests/memory."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest

from tether.errors import ConfigError
from tether.memory import Memory, MemoryRefused
from tether.memory.core import project_dir
from tether.postgres.db import database
from tether.postgres.memory import PgTextStore


def rows(url: str) -> dict[tuple[str, str], str]:
    return {(s, n): b for s, n, b in database(url).execute("SELECT scope, store, body FROM memory_texts")}


def test_each_store_is_one_markdown_row_keyed_by_scope_and_name(pg_url: str, tmp_path: Path) -> None:
    project = tmp_path / "my app"
    project.mkdir()
    link = tmp_path / "link"
    link.symlink_to(project)
    Memory.open_postgres(pg_url).add("profile", "Likes tea.")
    Memory.open_postgres(pg_url, user="alice").add("notes", "Release steps:\n1. tag\n2. push")
    Memory.open_postgres(pg_url, scope="project", project=project).add("notes", "Uses Django.")
    Memory.open_postgres(pg_url, scope="project", project=link).add("notes", "Deploys on Tuesdays.")
    folder = project_dir(Path("user"), project).name
    assert rows(pg_url) == {
        ("user", "profile"): "- Likes tea.\n",
        ("users/alice", "notes"): "- Release steps:\n  1. tag\n  2. push\n",
        (f"user/projects/{folder}", "notes"): "- Uses Django.\n- Deploys on Tuesdays.\n",  # a link is its target
    }
    assert database(pg_url).versions()["memory"] == 1


def test_a_reader_does_not_wait_for_a_writer(pg_url: str) -> None:
    mem = Memory.open_postgres(pg_url)
    mem.add("notes", "First.")
    store = mem.store("notes")
    inside, release = threading.Event(), threading.Event()

    def slow_writer() -> None:
        with store.edit() as entries:
            entries.append("Second.")
            inside.set()
            release.wait(10)

    writer = threading.Thread(target=slow_writer)
    writer.start()
    try:
        assert inside.wait(10)
        assert mem.entries("notes") == ["First."]  # the last committed text, while the row is locked
    finally:
        release.set()
        writer.join()
    assert mem.entries("notes") == ["First.", "Second."]


def test_a_nul_character_is_refused_and_nothing_is_stored(pg_url: str) -> None:
    mem = Memory.open_postgres(pg_url, scanners=[])
    mem.add("notes", "Kept.")
    with pytest.raises(MemoryRefused) as err:
        mem.add("notes", "before\x00after")
    # Refused by Memory before the store is asked, as on every backend (the store refuses too).
    assert err.value.rule == "control" and "control character ('\\x00')" in str(err.value)
    assert mem.entries("notes") == ["Kept."]


def test_the_url_shown_for_a_store_has_no_password() -> None:
    class Db:
        url = "postgresql://tether:hunter2@db.internal:5432/tether"

        def migrate(self, *_: Any) -> None:
            pass

    store = PgTextStore(Db(), "profile", "users/alice", 100)  # type: ignore[arg-type]
    assert "hunter2" not in store.path
    assert "db.internal" in store.path and "users/alice" in store.path and "profile" in store.path


def test_a_database_that_cannot_be_reached_is_a_config_error_without_the_password() -> None:
    with pytest.raises(ConfigError) as err:
        Memory.open_postgres("postgresql://tether:hunter2@127.0.0.1:1/tether")
    assert "hunter2" not in str(err.value) and "database_url" in str(err.value)
