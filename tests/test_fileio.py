"""atomic_write: the whole file or the old one, private, and never through a planted link; private_dir;
open_private; open_own and read_own, which never wait on a named pipe put where a file was."""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import Any

import pytest

from tests.planted import promptly
from tether.fileio import atomic_write, open_own, open_private, read_own


@pytest.mark.parametrize("fsync", [True, False])
@pytest.mark.parametrize("planted", ["link", "pipe"])
def test_a_link_planted_at_the_temporary_name_is_refused_and_its_target_untouched(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fsync: bool, planted: str
) -> None:
    """Another user who can write in the folder plants a link (opening it with O_TRUNC would empty
    whatever it points at) or a named pipe (opening it would wait forever) where the temporary file
    goes. The name was predictable (the file's name and the pid): now it holds random bytes, so the
    old name is never opened; and the open is exclusive, so even a name guessed right is an error,
    at once, never something written through."""
    home = tmp_path / "home"
    home.mkdir()
    target = tmp_path / "precious"
    target.write_text("keep me")
    path = home / "state.json"
    path.write_text("old")

    def plant(name: str) -> Path:
        spot = home / name
        if planted == "link":
            spot.symlink_to(target)
        else:
            os.mkfifo(spot)
        return spot

    old_name = plant(f".{path.name}.{os.getpid()}.tmp")
    promptly(lambda: atomic_write(path, b"new", fsync=fsync))
    assert path.read_bytes() == b"new" and target.read_text() == "keep me"
    assert old_name.is_symlink() if planted == "link" else stat.S_ISFIFO(old_name.lstat().st_mode)

    import tether.fileio

    monkeypatch.setattr(tether.fileio, "_temporary", lambda p: p.with_name(f".{p.name}.guessed.tmp"))
    guessed = plant(f".{path.name}.guessed.tmp")
    with pytest.raises(FileExistsError):
        promptly(lambda: atomic_write(path, b"newer", fsync=fsync))
    assert path.read_bytes() == b"new" and target.read_text() == "keep me"
    assert guessed.is_symlink() if planted == "link" else stat.S_ISFIFO(guessed.lstat().st_mode)


def test_a_write_replaces_the_file_whole_and_private(tmp_path: Path) -> None:
    path = tmp_path / "state.json"
    path.write_text("old")
    os.chmod(path, 0o644)
    atomic_write(path, b"new", fsync=False)
    assert path.read_bytes() == b"new" and stat.S_IMODE(path.stat().st_mode) == 0o600
    assert [p.name for p in tmp_path.iterdir()] == ["state.json"]  # no temporary file left


def test_private_dir_makes_every_missing_level_0700_and_leaves_existing_ones_alone(tmp_path: Path) -> None:
    from tether.fileio import private_dir

    (tmp_path / "home").mkdir(mode=0o755)
    (tmp_path / "home").chmod(0o755)
    old = os.umask(0o022)
    try:
        private_dir(tmp_path / "home" / "runs" / "run_1")
        private_dir(tmp_path / "home" / "runs" / "run_1")  # again: nothing changes
    finally:
        os.umask(old)
    mode = {p.name: oct(stat.S_IMODE(p.stat().st_mode)) for p in (tmp_path / "home").rglob("*")}
    assert mode == {"runs": "0o700", "run_1": "0o700"}
    assert oct(stat.S_IMODE((tmp_path / "home").stat().st_mode)) == "0o755"


def test_a_link_planted_where_a_knowledge_base_goes_is_refused_and_nothing_is_made_where_it_points(
    tmp_path: Path,
) -> None:
    """Another user who can write in the folder plants a link at the base's name, pointing where
    they can read: SQLite would follow it and create the base, the documents' text, over there."""
    from tether.errors import ConfigError
    from tether.knowledge.store import SqliteKnowledgeStore

    elsewhere = tmp_path / "theirs" / "stolen.db"
    elsewhere.parent.mkdir()
    (tmp_path / "kb").mkdir()
    os.symlink(elsewhere, tmp_path / "kb" / "default.db")
    with pytest.raises(ConfigError, match="cannot open the knowledge base"):
        SqliteKnowledgeStore(tmp_path / "kb" / "default.db")
    assert list(elsewhere.parent.iterdir()) == []


def test_open_private_makes_a_missing_folder_private_and_refuses_a_planted_link(tmp_path: Path) -> None:
    path = tmp_path / "made" / "deeper" / "events.log"
    os.close(open_private(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND))
    assert (path.stat().st_mode & 0o777) == 0o600
    assert (path.parent.stat().st_mode & 0o777) == 0o700 and (path.parent.parent.stat().st_mode & 0o777) == 0o700
    target = tmp_path / "elsewhere"
    target.write_text("untouched")
    (path.parent / "planted.log").symlink_to(target)
    with pytest.raises(OSError):
        open_private(path.parent / "planted.log", os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
    assert target.read_text() == "untouched"


def test_read_own_and_open_own_refuse_what_is_not_a_regular_file_without_waiting(tmp_path: Path) -> None:
    """A named pipe with no writer would block open() for reading forever, and one opened for
    writing blocks once full; a link is refused; a directory is not a file. Each is an OSError at once."""
    (tmp_path / "real").write_bytes(b"mine")
    assert read_own(tmp_path / "real") == b"mine"
    fd = open_own(tmp_path / "real", os.O_RDWR | os.O_APPEND)
    os.write(fd, b"+")
    os.close(fd)
    assert (tmp_path / "real").read_bytes() == b"mine+"
    os.mkfifo(tmp_path / "pipe")
    (tmp_path / "dir").mkdir()
    (tmp_path / "link").symlink_to(tmp_path / "real")
    for name in ("pipe", "dir", "link"):
        with pytest.raises(OSError):
            read_own(tmp_path / name)
        with pytest.raises(OSError):
            open_own(tmp_path / name, os.O_RDWR | os.O_APPEND)
    assert (tmp_path / "real").read_bytes() == b"mine+"
    with pytest.raises(FileNotFoundError):
        read_own(tmp_path / "missing")


def test_a_write_that_fails_before_the_rename_leaves_no_temporary_file(tmp_path: Path) -> None:
    """The rename cannot put a file over a folder that holds something: the error reaches the
    caller, and the temporary file (a copy of the data, under a random name) is gone."""
    path = tmp_path / "state.json"
    path.mkdir()
    (path / "inside").write_text("x")
    with pytest.raises(OSError):
        atomic_write(path, b"secret", fsync=False)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["state.json"]
    assert [p.name for p in path.iterdir()] == ["inside"]


@pytest.mark.parametrize("planted", ["pipe", "folder", "link", "dangling link"])
def test_private_file_refuses_what_is_not_a_regular_file_at_once_and_names_it(tmp_path: Path, planted: str) -> None:
    """A database's name (serve/server.db, sessions.db, kb/NAME.db) with a named pipe put there:
    opening it to write would wait for a reader forever, at start-up. Each planted thing is an
    OSError that names the file; a link's target is neither written nor made."""
    from tether.fileio import private_file

    target = tmp_path / "elsewhere"
    if planted == "link":
        target.write_text("untouched")
    path = tmp_path / "serve" / "server.db"
    path.parent.mkdir()
    if planted == "pipe":
        os.mkfifo(path, 0o600)
    elif planted == "folder":
        path.mkdir()
    else:
        path.symlink_to(target)
    with pytest.raises(OSError, match="not a regular file") as caught:
        promptly(lambda: private_file(path))
    assert str(path) in str(caught.value)
    if planted == "link":
        assert target.read_text() == "untouched"
    else:
        assert not target.exists()
    private_file(tmp_path / "fresh" / "ok.db")  # the ordinary case: made empty, private
    assert (tmp_path / "fresh" / "ok.db").read_bytes() == b""
    assert stat.S_IMODE((tmp_path / "fresh" / "ok.db").stat().st_mode) == 0o600


def test_a_named_pipe_at_a_database_stops_start_up_with_an_error_not_a_hang(tmp_path: Path) -> None:
    """The stores that open SQLite files in the home: each says which file, at once."""
    from tether.errors import ConfigError
    from tether.knowledge.store import SqliteKnowledgeStore
    from tether.server.store import SqliteServerStore
    from tether.sessions import SqliteSessionStore

    for name in ("server.db", "sessions.db", "default.db"):
        os.mkfifo(tmp_path / name, 0o600)
    with pytest.raises(ConfigError, match="cannot open the server's database .*not a regular file") as server:
        promptly(lambda: SqliteServerStore(tmp_path / "server.db"))
    assert str(tmp_path / "server.db") in str(server.value)
    with pytest.raises(ConfigError, match="cannot open the session database .*not a regular file"):
        promptly(lambda: SqliteSessionStore(tmp_path / "sessions.db"))
    with pytest.raises(ConfigError, match="cannot open the knowledge base .*not a regular file"):
        promptly(lambda: SqliteKnowledgeStore(tmp_path / "default.db"))


@pytest.mark.parametrize("planted", ["link", "pipe"])
def test_the_background_fill_log_is_never_a_planted_link_or_pipe(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, planted: str
) -> None:
    """`tether kb fill --background` sends the filler's output to kb/NAME.fill.log: a link planted
    there would have it appended to the file the link points at, and a named pipe would block the
    command. Either is a clear error, and no filler is started."""
    import subprocess

    import tether.cli.kb as kb
    from tether.config import load_settings
    from tether.errors import ConfigError

    home = tmp_path / "home"
    started: list[Any] = []

    class FakeFiller:
        pid = 4242

        def __init__(self, args: Any, **kw: Any) -> None:
            started.append(kw["stdout"])
            os.write(kw["stdout"].fileno(), b"written by the background filler\n")

    monkeypatch.setattr(subprocess, "Popen", FakeFiller)
    settings = load_settings(home)
    target = tmp_path / "users-file.txt"
    target.write_text("user's file\n")
    log = home / "kb" / "default.fill.log"
    log.parent.mkdir(parents=True)
    if planted == "link":
        log.symlink_to(target)
    else:
        os.mkfifo(log, 0o600)
    with pytest.raises(ConfigError, match="fill log") as caught:
        promptly(lambda: kb._fill_in_background(settings, "default"))
    assert str(log) in str(caught.value) and "move it away" in str(caught.value)
    assert started == [] and target.read_text() == "user's file\n"

    log.unlink()  # the ordinary case: a private log, appended to
    assert kb._fill_in_background(settings, "default") == 0
    assert kb._fill_in_background(settings, "default") == 0
    assert log.read_text() == "written by the background filler\n" * 2 and stat.S_IMODE(log.stat().st_mode) == 0o600
