"""Writing a file so that a reader sees the old content or the new, never half of it."""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

__all__ = ["atomic_write"]


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
