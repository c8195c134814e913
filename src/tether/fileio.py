"""Writing a file so that a reader sees the old content or the new, never half of it; and making
the directories and database files that hold conversations private to their owner."""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

__all__ = ["atomic_write", "open_private", "private_dir", "private_file"]


def private_dir(path: Path) -> None:
    """Make ``path`` if it is not there, and any missing parent, each mode 0700 (pathlib would give
    the parents the umask's), so other users cannot list the runs, traces or sessions in them. An
    existing directory keeps its mode."""
    missing = []
    while not path.is_dir():
        missing.append(path)
        if path.parent == path:
            break
        path = path.parent
    for directory in reversed(missing):
        directory.mkdir(mode=0o700, exist_ok=True)


def open_private(path: Path, flags: int) -> int:
    """``os.open`` of ``path`` with mode 0600, a link planted at the name refused (``O_NOFOLLOW``);
    a missing folder is made private first, only when the open says it is missing (one system
    call on the common path)."""
    flags |= os.O_NOFOLLOW
    try:
        return os.open(path, flags, 0o600)
    except FileNotFoundError:
        private_dir(path.parent)
        return os.open(path, flags, 0o600)


def private_file(path: Path) -> None:
    """Create ``path`` empty with mode 0600 if it is not there, before SQLite opens it: its -wal and
    -shm files take the database's mode. An existing file keeps its mode; a link planted at the
    name is refused."""
    private_dir(path.parent)
    os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_NOFOLLOW, 0o600))


def atomic_write(path: Path, data: bytes, *, fsync: bool = True) -> None:
    """Write ``data`` to a temporary file beside ``path`` (mode 0600), fsync it, rename it over
    ``path``, and fsync the directory so the rename itself survives a power cut."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)  # a planted link is refused
    try:
        os.write(fd, data)
        if fsync:
            os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, path)
    if fsync:
        with contextlib.suppress(OSError):  # not every platform can fsync a directory
            dir_fd = os.open(path.parent, os.O_RDONLY)
            try:
                os.fsync(dir_fd)
            finally:
                os.close(dir_fd)
