"""Writing a file so that a reader sees the old content or the new, never half of it; and making
the directories and database files that hold conversations private to their owner."""

from __future__ import annotations

import contextlib
import errno
import os
import stat
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

if TYPE_CHECKING:
    import sqlite3

__all__ = [
    "PLANTED",
    "atomic_write",
    "keep_from_commands",
    "kept_from_commands",
    "open_own",
    "open_private",
    "planted",
    "private_dir",
    "private_file",
    "read_own",
    "read_regular",
    "set_up_sqlite",
]

# The errors an open gives when something else than what tether made is at its name: a link
# (ELOOP: O_NOFOLLOW; ENOTDIR with O_DIRECTORY), a named pipe with no reader (ENXIO: O_WRONLY |
# O_NONBLOCK), a folder (EISDIR), anything else but a regular file (EINVAL: the check of open_own and
# read_own).
PLANTED = frozenset({errno.ELOOP, errno.ENOTDIR, errno.ENXIO, errno.EISDIR, errno.EINVAL})


_KEPT: dict[str, None] = {}  # see keep_from_commands


def keep_from_commands(path: Path | str, *, database: bool = False) -> None:
    """Mark ``path`` (a folder, or with ``database`` an SQLite file and its ``-wal``, ``-shm`` and
    ``-journal``) as tether's own data: conversations, runs, traces, tokens. The OS sandbox hides
    it from every shell command, wherever it is (``tether.tools._jail``): a store configured
    outside tether's home (``session_store = "sqlite:/srv/tether/sessions.db"``) was readable."""
    where = os.path.abspath(path)
    for name in (where, *((f"{where}-wal", f"{where}-shm", f"{where}-journal") if database else ())):
        _KEPT[name] = None


def kept_from_commands() -> list[Path]:
    """The paths :func:`keep_from_commands` marked in this process."""
    return [Path(p) for p in list(_KEPT)]


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


def in_the_way(folder: Path) -> str | None:
    """Why ``folder`` cannot be made or used, when it or one of its parents is there but is not a
    folder (a file, a link, a pipe): the error alone (``File exists``, ``Not a directory``) would
    send the person to the wrong name. None when nothing is in the way."""
    for where in (folder, *folder.parents):
        if os.path.lexists(where):
            return None if where.is_dir() else f"{where} is {planted(where) or 'a file'}, not a folder: move it away"
    return None


def planted(path: Path) -> str | None:
    """What was put at ``path`` in place of a file tether writes, in words (a symbolic link, a
    named pipe, a folder, a device or socket), or None for a regular file or nothing."""
    try:
        mode = os.lstat(path).st_mode
    except OSError:
        return None
    if stat.S_ISREG(mode):
        return None
    if stat.S_ISLNK(mode):
        return "a symbolic link"
    if stat.S_ISFIFO(mode):
        return "a named pipe"
    return "a folder" if stat.S_ISDIR(mode) else "a device or socket"


def _refused(path: Path, code: int = errno.EINVAL) -> OSError:
    """The error for a name where something else than tether's file was put: which thing, and what
    to do. Every caller of :func:`open_own`, :func:`read_own` and :func:`private_file` gets these
    words, and turns them into its own error type if it has one."""
    kind = planted(path) or "something else than a file"
    return OSError(
        code,
        f"not a regular file ({kind} was put at its name; tether neither follows a link nor waits "
        "on a pipe): move it away",
        str(path),
    )


@contextlib.contextmanager
def _refusing(path: Path) -> Iterator[None]:
    try:
        yield
    except OSError as exc:
        if exc.errno not in PLANTED:
            raise
        raise _refused(path, exc.errno) from None


def _regular(fd: int, path: Path) -> int:
    """``fd`` if it is a regular file; else it is closed and the error says what is there."""
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise _refused(path)
    except BaseException:
        os.close(fd)
        raise
    return fd


def open_own(path: Path, flags: int) -> int:
    """:func:`open_private` for a file tether wrote and opens again: a link, a named pipe, a
    directory or a device put at the name is an ``OSError`` that says which (:data:`PLANTED`), never
    followed or waited on (``O_NONBLOCK``: opening a pipe does not wait for a writer, and it changes
    nothing for a regular file on Linux)."""
    with _refusing(path):
        return _regular(open_private(path, flags | getattr(os, "O_NONBLOCK", 0)), path)


def read_own(path: Path) -> bytes:
    """The content of a file tether wrote: a link put at the name is refused (``O_NOFOLLOW``), and
    anything but a regular file is an ``OSError`` (see :func:`open_own`)."""
    return _read(path, getattr(os, "O_NOFOLLOW", 0))


def read_regular(path: Path) -> bytes:
    """The content of a file a person keeps (``config.toml``), through a link if it is one (a
    dotfiles setup), but never waiting on a named pipe: anything but a regular file is an ``OSError``."""
    return _read(path, 0)


def _read(path: Path, flags: int) -> bytes:
    flags |= os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0)
    with _refusing(path):
        fd = _regular(os.open(path, flags), path)
    with os.fdopen(fd, "rb") as f:
        return f.read()


def private_file(path: Path) -> None:
    """Create ``path`` empty with mode 0600 if it is not there, before SQLite opens it: its -wal and
    -shm files take the database's mode. An existing file keeps its mode; a link planted at the
    name is refused, and anything but a regular file (a named pipe, which would otherwise hang the
    open, a directory, a device) is an ``OSError`` that names it."""
    private_dir(path.parent)
    flags = os.O_WRONLY | os.O_CREAT | os.O_NOFOLLOW | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0)
    with _refusing(path):
        os.close(_regular(os.open(path, flags, 0o600), path))


def _temporary(path: Path) -> Path:
    """A name beside ``path`` that no one can guess in advance."""
    return path.with_name(f".{path.name}.{os.urandom(8).hex()}.tmp")


def atomic_write(path: Path, data: bytes, *, fsync: bool = True) -> None:
    """Write ``data`` to a temporary file beside ``path`` (mode 0600), fsync it, rename it over
    ``path``, and fsync the directory so the rename itself survives a power cut.

    The temporary name holds random bytes, and it is made with ``O_EXCL | O_NOFOLLOW``: nothing put
    beside the file in advance (a link, a named pipe) can be opened in its place; a name taken is
    an error, never something written through. It is removed when anything fails before the rename."""
    tmp = _temporary(path)
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0)
    fd = os.open(tmp, flags, 0o600)  # exclusive: never a file, link or pipe that was already there
    try:
        try:
            view = memoryview(data)
            while view:  # os.write may write less than asked
                written = os.write(fd, view)
                if not written:  # nothing taken (a file system out of room that says so this way): never a loop
                    raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(path))
                view = view[written:]
            if fsync:
                os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    if fsync:
        with contextlib.suppress(OSError):  # not every platform can fsync a directory
            dir_fd = os.open(path.parent, os.O_RDONLY)
            try:
                os.fsync(dir_fd)
            finally:
                os.close(dir_fd)


_Db = TypeVar("_Db", bound="sqlite3.Connection")


def set_up_sqlite(connect: Callable[[], _Db], set_up: Callable[[_Db], Any], wait_s: float = 30.0) -> _Db:
    """A connection from ``connect`` with ``set_up`` done on it (WAL mode, the tables made).
    Processes making one new database at the same moment meet in SQLite's locks, and one of two
    that would wait for each other is told "database is locked" at once, its busy timeout unused
    (two first ``kb add`` runs: one stopped, saying to remove a base that was fine): it tries again,
    on a new connection, for up to ``wait_s``."""
    import random
    import sqlite3
    import time

    deadline = time.monotonic() + wait_s
    while True:
        db = connect()
        try:
            set_up(db)
            return db
        except sqlite3.OperationalError as exc:
            db.close()
            if "locked" not in str(exc) or time.monotonic() > deadline:
                raise
        except BaseException:
            db.close()
            raise
        time.sleep(random.uniform(0.005, 0.05))
