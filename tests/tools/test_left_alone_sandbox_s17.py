"""Defects earlier sessions noticed in the sandbox and left alone (session 17): a hidden path that
vanishes while a command's sandbox is being built."""

from __future__ import annotations

import asyncio
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.tools.sandboxed import needs_sandbox
from tether.cancel import CancelSignal
from tether.fileio import keep_from_commands
from tether.tools import _jail
from tether.tools.base import ToolContext
from tether.tools.shell import RunCommand, ShellSettings


@pytest.fixture
def places(monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[Path, Path]]:
    """(a store's SQLite file, kept from commands, with a -journal beside it; a workspace), outside
    /tmp (the sandbox's /tmp is its own) and outside the workspace, as a server's store is."""
    root = Path(tempfile.mkdtemp(prefix="tether-s17-", dir="/var/tmp"))
    try:
        (root / "home").mkdir()
        (root / "srv").mkdir()
        (root / "ws").mkdir()
        monkeypatch.setenv("TETHER_HOME", str(root / "home"))
        db = root / "srv" / "sessions.db"
        db.write_bytes(b"SQLITE-CONVERSATION-SECRET")
        Path(f"{db}-journal").write_bytes(b"JOURNAL-SECRET")
        keep_from_commands(db, database=True)
        yield db, root / "ws"
    finally:
        shutil.rmtree(root, ignore_errors=True)


def ran(cwd: Path, command: str) -> Any:
    return asyncio.run(
        RunCommand(ShellSettings()).execute({"command": command}, ToolContext(cwd=cwd, signal=CancelSignal()))
    )


@needs_sandbox
def test_a_hidden_file_gone_after_the_listing_does_not_fail_the_command(
    places: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Was: a store's -journal listed to be hidden and removed before the sandbox was built (SQLite
    removes it when a transaction ends, a -wal when the last connection closes) made bubblewrap fail
    ("Can't create file at ...-journal: Read-only file system"): the command did not run, and the
    model was told it had written outside the workspace."""
    db, ws = places
    listing = _jail.secret_paths

    def listed_then_gone(*args: Any, **kwargs: Any) -> list[Path]:
        found = listing(*args, **kwargs)
        assert Path(f"{db}-journal") in found
        os.unlink(f"{db}-journal")  # the transaction ends while the sandbox is being built
        return found

    monkeypatch.setattr(_jail, "secret_paths", listed_then_gone)
    out = ran(ws, f"echo ran >> count; cat {db} {db}-journal; true")
    assert not out.is_error, out.content
    assert "SECRET" not in out.content  # what is still there is still hidden
    assert (ws / "count").read_text() == "ran\n"
    assert not os.path.lexists(f"{db}-journal")  # and nothing was made in its place


@needs_sandbox
def test_a_hidden_file_gone_as_bubblewrap_starts_is_listed_again_and_the_command_runs_once(
    places: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Was: a hidden path removed after the sandbox's arguments were made, as bubblewrap started,
    failed the command with bubblewrap's setup error. Now bubblewrap's setup error naming a hidden
    path that is gone (the command never ran) builds the sandbox again from a new listing, once."""
    db, ws = places
    build = _jail.jail_args
    built: list[list[str]] = []

    def built_then_gone(*args: Any, **kwargs: Any) -> list[str]:
        argv = build(*args, **kwargs)
        built.append(argv)
        if os.path.lexists(f"{db}-journal"):
            os.unlink(f"{db}-journal")  # between the arguments and bubblewrap's start
        return argv

    monkeypatch.setattr(_jail, "jail_args", built_then_gone)
    out = ran(ws, f"echo ran >> count; cat {db} {db}-journal; true")
    assert not out.is_error, out.content
    assert "SECRET" not in out.content
    assert (ws / "count").read_text() == "ran\n"  # run once: the first sandbox never ran it
    assert len(built) == 2 and f"{db}-journal" in built[0] and f"{db}-journal" not in built[1]


@needs_sandbox
def test_a_command_that_fails_as_bubblewrap_would_is_not_run_again(
    places: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The retry is for bubblewrap's own setup error only: a command that prints such a line itself
    and exits 1, with every hidden path still there, ran, and is not run a second time."""
    db, ws = places
    out = ran(ws, f'echo ran >> count; echo "bwrap: Can\'t create file at {db}-journal: Read-only file system"; exit 1')
    assert out.is_error
    assert (ws / "count").read_text() == "ran\n"
