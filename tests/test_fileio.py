"""atomic_write: the whole file or the old one, private, and never through a planted link; private_dir;
open_private; open_own and read_own, which never wait on a named pipe put where a file was."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from tether.fileio import atomic_write, open_own, open_private, read_own


@pytest.mark.parametrize("fsync", [True, False])
def test_a_link_planted_at_the_temporary_name_is_refused_and_its_target_untouched(tmp_path: Path, fsync: bool) -> None:
    """The temporary name is predictable (the file's name and the pid): another user who can write
    in the folder could plant a link there, and opening it with O_TRUNC would empty whatever it
    points at before the rename."""
    home = tmp_path / "home"
    home.mkdir()
    target = tmp_path / "precious"
    target.write_text("keep me")
    path = home / "state.json"
    path.write_text("old")
    planted = home / f".{path.name}.{os.getpid()}.tmp"
    planted.symlink_to(target)
    with pytest.raises(OSError):
        atomic_write(path, b"new", fsync=fsync)
    assert target.read_text() == "keep me" and path.read_text() == "old"


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
