"""Paths opened beneath a descriptor held on the working directory, one component at a time.

Checking a path and then opening it by name loses to anyone who swaps a directory for a symbolic
link in between (a thread, a shell command the model started, a process in the background). So
nothing here checks a path and opens it later: every component is opened with ``O_NOFOLLOW``
relative to the descriptor of the directory before it, starting from a descriptor held on the
working directory, and the file is read or written through the descriptor that was opened. Whatever
the filesystem does meanwhile, what is opened was reached from the working directory without the
kernel following a link.

Symbolic links inside the working directory are followed, but by this module, not by the kernel:
a link is read (``readlink`` beneath its directory's descriptor) and its target's components are
walked the same way, so ``..`` in a target pops a descriptor already held, and climbing above the
working directory, or an absolute target that does not name a place inside it, is refused. This is
the rule of Linux's ``openat2(RESOLVE_BENEATH)``, kept in Python so it holds on macOS too, and
chosen over refusing every link because repositories carry links that stay inside (``CLAUDE.md ->
AGENTS.md``, ``docs/README.md -> ../README.md``) and refusing them would only send the model round
in circles. Links swapped in the middle of a walk cannot win either way: each one is re-read and
re-walked under the same rule. ``openat2`` itself is not used: it would be a second resolver with a
different rule for absolute links, the walk costs a few system calls per component, and one path
through the code on every platform is the path that the tests exercise.

What it does not cover: a directory that is moved (not linked) from inside the working directory to
outside it while a tool works beneath it, which needs write access outside the working directory in
the first place; hard links, which are the file itself; and mount points, which only a privileged
user can create. Listings never descend into linked directories, so a link cannot make a search loop
or read a directory twice.

POSIX only (``O_NOFOLLOW``, ``O_DIRECTORY`` and ``*at`` system calls): elsewhere the module imports,
and :class:`Workspace` refuses with a message instead of walking without them.
"""

from __future__ import annotations

import contextlib
import errno
import os
import re
import secrets
import stat
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass
from fnmatch import fnmatchcase
from pathlib import Path, PurePosixPath

from tether.tools._jail import secrets_inside
from tether.tools.base import ToolError

__all__ = [
    "FILE_FLAGS",
    "IGNORED",
    "Glob",
    "Location",
    "Walk",
    "Workspace",
    "entries",
    "kind_of",
    "printable",
    "refuse_special",
    "replace_file",
]

# Folders the listings, searches and the git guard's walk pass over (a .git is found, not walked).
IGNORED = frozenset({".git", ".hg", ".svn", "__pycache__", "node_modules", ".venv", ".tox"})
MAX_LINKS = 40  # as the kernel: more than this many links in one path is a loop
MAX_PATH_CHARS = 4096
# getattr: importing must work everywhere (Windows has none of these); Workspace refuses to start
# where the walk cannot be done safely.
_O_NOFOLLOW, _O_DIRECTORY = getattr(os, "O_NOFOLLOW", 0), getattr(os, "O_DIRECTORY", 0)
_O_CLOEXEC, _O_NONBLOCK, _O_NOCTTY = (getattr(os, f, 0) for f in ("O_CLOEXEC", "O_NONBLOCK", "O_NOCTTY"))
SUPPORTED = (
    bool(_O_NOFOLLOW and _O_DIRECTORY)
    and {os.open, os.stat, os.mkdir, os.readlink, os.rename, os.unlink} <= os.supports_dir_fd
)
DIR_FLAGS = os.O_RDONLY | _O_DIRECTORY | _O_NOFOLLOW | _O_CLOEXEC | _O_NONBLOCK
# O_NONBLOCK: opening a FIFO never waits for a writer. Cleared again on regular files.
FILE_FLAGS = os.O_RDONLY | _O_NOFOLLOW | _O_CLOEXEC | _O_NONBLOCK | _O_NOCTTY
_LINK_ERRNOS = frozenset({errno.ELOOP, errno.EMLINK, errno.ENOTDIR})  # what O_NOFOLLOW gives a link

_KINDS = {
    stat.S_IFIFO: "a FIFO (named pipe)",
    stat.S_IFSOCK: "a socket",
    stat.S_IFCHR: "a character device",
    stat.S_IFBLK: "a block device",
    stat.S_IFDIR: "a directory",
    stat.S_IFLNK: "a symbolic link",
    stat.S_IFREG: "a regular file",
}


def kind_of(mode: int) -> str:
    """``"a FIFO (named pipe)"``, ``"a directory"``... for messages."""
    return _KINDS.get(stat.S_IFMT(mode), "not a regular file")


_ESCAPED = re.compile(r"\\x([01][0-9a-fA-F]|7[fF]|[89a-fA-F][0-9a-fA-F])")
_UNPRINTABLE = re.compile(r"[\x00-\x1f\x7f\udc80-\udcff]")


def printable(name: str) -> str:
    """``name`` as tools show it: each byte that is not UTF-8 (``os`` gives it as a lone surrogate,
    which a message to the model would turn into U+FFFD, a name nobody can give back) and each
    control character (a line break in a name would split a listing's row in two) as ``\\xNN``.
    The walk takes that form back: ``caf\\xe9.txt`` names the file whose name is ``caf`` and the
    byte 0xE9, unless a file is really called ``caf\\xe9.txt``."""
    return _UNPRINTABLE.sub(lambda m: f"\\x{_byte(m.group())}", name)


def _byte(char: str) -> str:
    code = ord(char)
    return f"{code - 0xDC00 if code >= 0xDC80 else code:02x}"


def _unescape(match: re.Match[str]) -> str:
    byte = int(match.group(1), 16)
    return chr(0xDC00 + byte) if byte >= 0x80 else chr(byte)


def _climbs_out(parts: tuple[str, ...]) -> bool:
    """Whether ``..`` climbs above the start, read as written (links are judged by the walk)."""
    depth = 0
    for part in parts:
        if part == "..":
            depth -= 1
            if depth < 0:
                return True
        elif part not in ("", "."):
            depth += 1
    return False


def _lstat(name: str, dir_fd: int) -> os.stat_result | None:
    try:
        return os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
    except FileNotFoundError:
        return None
    except OSError as exc:  # a name over 255 bytes, a directory that cannot be searched...
        shown = name if len(name) <= 80 else f"{name[:40]}...{name[-20:]} ({len(name)} characters)"
        raise ToolError(
            f"cannot use {shown!r}: {exc.strerror}. Give a shorter or different path; call list_files "
            "to see what exists."
        ) from None


class Workspace:
    """A descriptor held on the working directory for the length of one tool call.

    Use as a context manager; :meth:`walk` resolves a path the model gave beneath it.
    """

    def __init__(self, cwd: Path) -> None:
        self.root = cwd.resolve()
        # Absolute paths and link targets are accepted when they name a place inside: by the real
        # path, or by the path as given (macOS's /var is /private/var).
        self._prefixes = {self.root.parts[1:], PurePosixPath(os.path.abspath(cwd)).parts[1:]}
        if not SUPPORTED:
            raise ToolError(
                "the file tools need O_NOFOLLOW and *at system calls (Linux, macOS, BSD) to stay "
                "inside the working directory; they are not available on this platform."
            )
        try:
            self.fd = os.open(cwd, os.O_RDONLY | _O_DIRECTORY | _O_CLOEXEC)
        except OSError as exc:
            raise ToolError(
                f"the working directory {cwd} cannot be opened: {exc.strerror}. The file tools "
                "cannot work until it exists; tell the user."
            ) from None
        # The keys the sandbox hides from commands, where the working directory holds them (tether
        # run in the home): refused by name and passed over by listings, as commands cannot see them.
        self.secrets = frozenset(secrets_inside(self.root))
        self.secrets_passed: list[str] = []  # what a listing passed over, for its note

    def __enter__(self) -> Workspace:
        return self

    def __exit__(self, *exc: object) -> None:
        os.close(self.fd)

    def relative_parts(self, absolute: str) -> tuple[str, ...] | None:
        """The components of an absolute path below the working directory, or None if it is not
        lexically inside it (``..`` is left in place for the walk to judge)."""
        parts = PurePosixPath(absolute).parts[1:]
        for prefix in self._prefixes:
            if parts[: len(prefix)] == prefix:
                return parts[len(prefix) :]
        return None

    def walk(self, path: str, *, follow_last: bool = True, create_dirs: bool = False, missing_ok: bool = False) -> Walk:
        """Resolve ``path``: every directory is opened; the last component is named, not opened.

        ``follow_last`` follows a link in the last component too (read, write, edit);
        ``create_dirs`` makes missing directories (write); ``missing_ok`` continues lexically past
        a missing directory (only :func:`resolve_inside`, which opens nothing).
        """
        if "\x00" in path:
            raise ToolError("refused: the path contains a NUL byte")
        if len(path) > MAX_PATH_CHARS:
            raise ToolError(f"refused: the path is {len(path)} characters long; the limit is {MAX_PATH_CHARS}.")
        if path.startswith("/"):
            parts = self.relative_parts(path)
            if parts is None:
                raise ToolError(self.outside_message(path))
        else:
            parts = tuple(path.split("/"))
        if _climbs_out(parts):  # refused before anything is opened or created
            raise ToolError(self.outside_message(path))
        walk = Walk(self, path, [self.fd], [])
        try:
            walk.run(parts, follow_last=follow_last, create_dirs=create_dirs, missing_ok=missing_ok)
            self._refuse_secret(walk.rel, path)
        except BaseException:
            walk.close()
            raise
        return walk

    def secret(self, parts: tuple[str, ...]) -> str | None:
        """The secret folder or file (relative to the working directory) ``parts`` is or is in."""
        found = next((s for s in self.secrets if parts[: len(s)] == s), None)
        return "/".join(found) if found is not None else None

    def passes_over(self, parts: tuple[str, ...], glob: Glob, here: frozenset[int]) -> bool:
        """Whether a listing passes over ``parts``, a secret (noted when ``glob`` reaches it)."""
        if self.secret(parts) is None:
            return False
        if glob.matches(here) or glob.may_descend(here):
            self.secrets_passed.append("/".join(parts))
        return True

    def _refuse_secret(self, rel: str, path: str) -> None:
        secret = self.secret(tuple(rel.split("/"))) if self.secrets else None
        if secret is not None:
            raise ToolError(
                f"refused: {path!r} is {'in ' if rel != secret else ''}{secret}, where keys and "
                "credentials are kept; the file tools do not read or write there, and commands cannot "
                "see it. If the task really needs it, ask the user."
            )

    def outside_message(self, path: str, link: tuple[str, str] | None = None) -> str:
        how = f": {link[0]!r} is a symbolic link to {link[1]!r}" if link else ""
        links = ", and links are followed only while they stay inside it" if link else ""
        return (
            f"refused: {path!r} leads outside the working directory {self.root}{how}. Only paths "
            f"inside it can be used{links}; this cannot be fixed by retrying. Call list_files to see "
            "what exists."
        )


class Walk:
    """The directories opened while resolving one path, closed together with :meth:`close`.

    After :meth:`run`, ``dir_fd`` is the directory holding the last component, ``name`` that
    component (``None`` when the path names a directory on the stack, such as ``.``), ``stat`` its
    ``lstat`` (``None`` when it does not exist) and ``rel`` its path from the working directory.
    """

    def __init__(self, ws: Workspace, shown: str, stack: list[int], names: list[str]) -> None:
        self.ws, self.shown = ws, shown
        self.stack, self.names = stack, names  # stack[0] is the working directory; names are parallel
        self._owned: set[int] = set()  # descriptors this walk opened (the first ones may be borrowed)
        # components still to walk, each with the link whose target it came from (for messages)
        self._pending: deque[tuple[str, tuple[str, str] | None]] = deque()
        self._links = 0
        self._retries = 0
        self._created = 0
        self._missing_from: int | None = None  # index in names where a missing directory began
        self.name: str | None = None
        self.stat: os.stat_result | None = None

    def __enter__(self) -> Walk:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        for fd in self._owned:
            os.close(fd)
        self._owned.clear()

    @property
    def dir_fd(self) -> int:
        return self.stack[-1]

    @property
    def rel(self) -> str:
        parts = [*self.names, self.name] if self.name is not None else self.names
        return "/".join(parts) or "."

    def run(
        self,
        parts: tuple[str, ...] | list[str],
        *,
        follow_last: bool = True,
        create_dirs: bool = False,
        missing_ok: bool = False,
    ) -> None:
        """Walk ``parts`` from where this walk stands; see :meth:`Workspace.walk`."""
        self._queue(parts, None)
        self.name, self.stat = None, None
        while self._pending:
            name, via = self._pending.popleft()
            if name == "..":
                self._up(via)
            elif self._missing_from is not None:
                self.names.append(name)
            elif self._pending:
                self._down(self._raw_name(name, via), create_dirs=create_dirs, missing_ok=missing_ok)
            else:
                self._last(self._raw_name(name, via), follow=follow_last)
        if self._missing_from is not None and self.names:
            self.name = self.names.pop()

    def _raw_name(self, name: str, via: tuple[str, str] | None) -> str:
        """The name ``name`` (from the path given, not a link) stands for: itself if it exists, else
        the name whose bytes that are not UTF-8 it shows as ``\\xNN`` (:func:`printable`), if that
        one exists."""
        if via is not None or "\\x" not in name:
            return name
        raw = _ESCAPED.sub(_unescape, name)
        if raw != name and _lstat(name, self.dir_fd) is None and _lstat(raw, self.dir_fd) is not None:
            return raw
        return name

    def _queue(self, parts: tuple[str, ...] | list[str], via: tuple[str, str] | None) -> None:
        self._pending.extendleft(reversed([(p, via) for p in parts if p not in ("", ".")]))

    def reopen_last(self) -> None:
        """Walk the last component again: it changed between ``lstat`` and ``open``."""
        if self.name is None:
            return
        self._retry()
        self.run((self.name,))

    def _retry(self) -> None:
        self._retries += 1
        if self._retries > MAX_LINKS:
            raise ToolError(
                f"refused: {self.shown!r} kept changing while it was being opened; try again "
                "when nothing else is renaming files there."
            )

    def _up(self, via: tuple[str, str] | None = None) -> None:
        if self._missing_from is not None:  # beneath a directory that does not exist: lexical
            self.names.pop()
            if len(self.names) == self._missing_from:
                self._missing_from = None
            return
        if len(self.stack) == 1:
            raise ToolError(self.ws.outside_message(self.shown, via))
        fd = self.stack.pop()
        self.names.pop()
        if fd in self._owned:
            self._owned.discard(fd)
            os.close(fd)

    def _push(self, fd: int, name: str) -> None:
        self._owned.add(fd)
        self.stack.append(fd)
        self.names.append(name)

    def _down(self, name: str, *, create_dirs: bool, missing_ok: bool) -> None:
        try:
            fd = os.open(name, DIR_FLAGS, dir_fd=self.dir_fd)
        except FileNotFoundError:
            if missing_ok:
                self._missing_from = len(self.names)
                self.names.append(name)
                return
            if not create_dirs:
                raise ToolError(self._no_such(name)) from None
            self._make_directory(name)
            return
        except OSError as exc:
            self._not_a_directory(name, exc)
            return
        self._push(fd, name)

    def _make_directory(self, name: str) -> None:
        try:
            os.mkdir(name, 0o777, dir_fd=self.dir_fd)
        except FileExistsError:  # someone else made it (or a link) meanwhile: judge it again
            self._retry()
        else:
            self._created += 1
            if self._created > MAX_PATH_CHARS:
                self._retry()
        self._pending.appendleft((name, None))

    def _not_a_directory(self, name: str, exc: OSError) -> None:
        st = _lstat(name, self.dir_fd)
        if st is not None and stat.S_ISLNK(st.st_mode):
            self._follow(name)
            return
        if st is None:  # removed since the open: try once more
            self._retry()
            self._pending.appendleft((name, None))
            return
        here = "/".join([*self.names, name])
        if exc.errno in _LINK_ERRNOS:
            raise ToolError(
                f"{here!r} is {kind_of(st.st_mode)}, not a directory, so {self.shown!r} cannot "
                "exist. Call list_files to see what exists."
            ) from None
        raise ToolError(f"cannot open {here!r}: {exc.strerror}.") from None

    def _last(self, name: str, *, follow: bool) -> None:
        st = _lstat(name, self.dir_fd)
        if follow and st is not None and stat.S_ISLNK(st.st_mode):
            self._follow(name)
            return
        self.name, self.stat = name, st

    def _follow(self, name: str) -> None:
        self._links += 1
        link = "/".join([*self.names, name])
        if self._links > MAX_LINKS:
            raise ToolError(
                f"refused: {self.shown!r} cannot be resolved: it passes through more than "
                f"{MAX_LINKS} symbolic links, which is a symlink loop. Use the real path of "
                "the file; call list_files to see what exists."
            )
        try:
            target = os.readlink(name, dir_fd=self.dir_fd)
        except OSError:  # no longer a link: walk the name again
            self._pending.appendleft((name, None))
            return
        via = (link, target)
        if target.startswith("/"):
            parts = self.ws.relative_parts(target)
            if parts is None:
                raise ToolError(self.ws.outside_message(self.shown, via))
            while len(self.stack) > 1:  # an absolute target restarts from the working directory
                self._up()
        else:
            parts = tuple(target.split("/"))
        self._queue(parts, via)

    def _no_such(self, name: str) -> str:
        here = "/".join([*self.names, name])
        missing = f" (there is no directory {here!r})" if here != self.shown else ""
        return f"no such file: {self.shown}{missing}. Call list_files to see what exists."

    def open_last(self, what: str) -> tuple[int, os.stat_result]:
        """Open the last component for reading; refuse anything but a regular file.

        ``what`` names the tool's purpose in messages ("read_file only reads").
        """
        while True:
            if self.name is None or (self.stat is not None and stat.S_ISDIR(self.stat.st_mode)):
                raise ToolError(f"{self.shown} is a directory. Call list_files with a pattern to see inside it.")
            if self.stat is None:
                raise ToolError(f"no such file: {self.shown}. Call list_files to see what exists.")
            refuse_special(self.shown, self.stat.st_mode, what)
            try:
                fd = os.open(self.name, FILE_FLAGS, dir_fd=self.dir_fd)
            except OSError as exc:
                if exc.errno in (errno.ELOOP, errno.EMLINK, errno.ENOENT, errno.ENXIO):
                    self.reopen_last()  # it changed since the lstat: judge it again
                    continue
                raise ToolError(f"cannot open {self.shown}: {exc.strerror}.") from None
            st = os.fstat(fd)
            try:
                refuse_special(self.shown, st.st_mode, what)
                if stat.S_ISDIR(st.st_mode):
                    raise ToolError(f"{self.shown} is a directory. Call list_files with a pattern to see inside it.")
            except BaseException:
                os.close(fd)
                raise
            os.set_blocking(fd, True)
            return fd, st


def refuse_special(shown: str, mode: int, what: str) -> None:
    """A clear refusal for FIFOs, sockets and devices: reading one can block or have effects."""
    if stat.S_ISREG(mode) or stat.S_ISDIR(mode) or stat.S_ISLNK(mode):
        return
    raise ToolError(
        f"{shown} is {kind_of(mode)}, not a file; {what} regular files, because reading this "
        "could block forever or have side effects. Call list_files to see the files."
    )


def replace_file(
    dir_fd: int,
    name: str,
    data: bytes,
    mode: int | None = None,
    *,
    shown: str = "",
    owner: tuple[int, int] | None = None,
    unchanged: os.stat_result | None = None,
) -> None:
    """Write ``data`` to a new temporary file beside ``name`` and rename it over ``name``.

    The temporary file has a random name and is created with ``O_EXCL | O_NOFOLLOW`` beneath
    ``dir_fd``, so nothing planted in the directory can redirect the write; the file and then the
    directory are fsynced, as :func:`tether.fileio.atomic_write` does. ``mode`` keeps the
    permissions of a file being replaced (``None``: the default for a new file, after the umask), and
    ``owner`` its (uid, gid) where this process may give them (tether as root would otherwise hand
    each file it edits to root, and its owner could no longer change it).
    ``unchanged`` is the file as it was read (an edit): if another program wrote or replaced it
    since, the new content, made from the old, would silently drop what that program wrote, so
    nothing is renamed and the :class:`ToolError` says so.
    A failure (disk full, no permission, a directory put there meanwhile) is a :class:`ToolError`
    naming ``shown``, and leaves the old file as it was.
    """
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | _O_NOFOLLOW | _O_CLOEXEC
    for _ in range(100):
        tmp = f".{name[:80]}.{secrets.token_hex(8)}.tether-tmp"
        try:
            fd = os.open(tmp, flags, 0o666, dir_fd=dir_fd)
            break
        except FileExistsError:
            continue
        except OSError as exc:
            raise ToolError(f"could not write {shown or name}: {exc.strerror}. Nothing was changed.") from None
    else:
        raise ToolError(f"could not create a temporary file beside {name!r}; try again.")
    try:
        try:
            if owner is not None:
                with contextlib.suppress(OSError):  # only root gives a file away; a group of one's own
                    os.fchown(fd, *owner)
            if mode is not None:
                os.fchmod(fd, stat.S_IMODE(mode) & 0o777)
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
            os.fsync(fd)
        finally:
            os.close(fd)
        if unchanged is not None:  # checked last, after the fsync: the window left is a rename's
            _refuse_changed(dir_fd, name, unchanged, shown or name)
        os.rename(tmp, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)  # a reader never sees half a file
    except BaseException as exc:
        with contextlib.suppress(OSError):
            os.unlink(tmp, dir_fd=dir_fd)
        if isinstance(exc, OSError):
            raise ToolError(f"could not write {shown or name}: {exc.strerror}. Nothing was changed.") from None
        raise
    with contextlib.suppress(OSError):  # not every platform can fsync a directory
        os.fsync(dir_fd)


def _refuse_changed(dir_fd: int, name: str, read: os.stat_result, shown: str) -> None:
    """A :class:`ToolError` when ``name`` is no longer the file ``read`` describes: another inode
    (an editor saved it by renaming), or another size or modification time (a program wrote to it)."""
    try:
        now = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
    except OSError:
        now = None
    if now is not None and (now.st_dev, now.st_ino, now.st_size, now.st_mtime_ns) == (
        read.st_dev,
        read.st_ino,
        read.st_size,
        read.st_mtime_ns,
    ):
        return
    raise ToolError(
        f"{shown} changed while it was being edited (another program wrote, replaced or removed it "
        "meanwhile); nothing was changed, so what that program wrote is kept. Read the file again "
        "and redo the edit on what it holds now."
    )


# --- globs and listings --------------------------------------------------------------------------


class Glob:
    """A pathlib-style pattern (``*``, ``?``, ``[...]``, ``**`` for any number of directories),
    matched one path component at a time so a walk can skip directories that cannot match."""

    def __init__(self, pattern: str) -> None:
        parts = PurePosixPath(pattern).parts
        if not parts:
            raise ToolError("the pattern is empty; use '**/*' for every file.")
        self.parts: tuple[str, ...] = parts
        self.start = self._closure({0})

    def _closure(self, states: set[int]) -> frozenset[int]:
        out = set(states)
        todo = list(states)
        while todo:
            i = todo.pop()
            if i < len(self.parts) and self.parts[i] == "**" and i + 1 not in out:
                out.add(i + 1)
                todo.append(i + 1)
        return frozenset(out)

    def step(self, states: frozenset[int], name: str) -> frozenset[int]:
        """The states after one more component ``name``."""
        nxt: set[int] = set()
        for i in states:
            if i == len(self.parts):
                continue
            if self.parts[i] == "**":
                nxt.add(i)
            elif fnmatchcase(name, self.parts[i]) or (
                _UNPRINTABLE.search(name) is not None and fnmatchcase(printable(name), self.parts[i])
            ):
                nxt.add(i + 1)
        return self._closure(nxt)

    def matches(self, states: frozenset[int]) -> bool:
        return len(self.parts) in states

    def may_descend(self, states: frozenset[int]) -> bool:
        return any(i < len(self.parts) for i in states)


@dataclass(slots=True)
class Location:
    """One entry met by :func:`entries`: ``name`` in the directory ``stack[-1]``."""

    names: list[str]
    stack: list[int]
    name: str
    kind: str  # "file" | "link"
    matches: bool  # the glob matches this path
    descends: bool = False  # the glob could match paths beneath it (for a link to a directory)

    @property
    def rel(self) -> str:
        return "/".join([*self.names, self.name])


def entries(ws: Workspace, glob: Glob, ignored: frozenset[str]) -> Iterator[Location]:
    """Regular files and links whose path matches ``glob`` or that the glob could reach beneath,
    in sorted path order, without following a link.

    Directories are opened beneath their parent's descriptor with ``O_NOFOLLOW``: a directory
    swapped for a link during the walk is skipped, never entered. The walk keeps its own stack
    rather than recursing, so a tree deeper than Python's recursion limit (a cloned repository can
    carry one) is listed too.
    """
    levels = [_Level([ws.fd], [], glob.start, _listing(ws.fd, ignored))]
    try:
        while levels:
            level = levels[-1]
            item = next(level.found, None)
            if item is None:
                levels.pop()
                if len(level.stack) > 1:
                    os.close(level.stack[-1])
                continue
            name, kind = item
            here = glob.step(level.states, name)
            if ws.secrets and ws.passes_over((*level.names, name), glob, here):
                continue
            if kind == "dir":
                if glob.may_descend(here):
                    child = _open_directory(level.stack[-1], name)
                    if child is not None:
                        found = _listing(child, ignored)
                        levels.append(_Level([*level.stack, child], [*level.names, name], here, found))
            elif kind == "file" and glob.matches(here):
                yield Location(level.names, level.stack, name, "file", True)
            elif kind == "link" and (glob.matches(here) or glob.may_descend(here)):
                yield Location(level.names, level.stack, name, "link", glob.matches(here), glob.may_descend(here))
    finally:
        for level in levels:
            if len(level.stack) > 1:
                os.close(level.stack[-1])


@dataclass(slots=True)
class _Level:
    """One directory of :func:`entries`' walk: its descriptors from the top, and what is left in it."""

    stack: list[int]
    names: list[str]
    states: frozenset[int]
    found: Iterator[tuple[str, str]]


def _listing(fd: int, ignored: frozenset[str]) -> Iterator[tuple[str, str]]:
    try:
        with os.scandir(fd) as it:
            return iter(sorted((e.name, _entry_kind(e)) for e in it if e.name not in ignored))
    except OSError:
        return iter(())


def _open_directory(fd: int, name: str) -> int | None:
    try:
        return os.open(name, DIR_FLAGS, dir_fd=fd)
    except OSError:  # gone, or swapped for a link since it was listed
        return None


def _entry_kind(entry: os.DirEntry[str]) -> str:
    try:
        if entry.is_symlink():
            return "link"
        if entry.is_dir(follow_symlinks=False):
            return "dir"
        if entry.is_file(follow_symlinks=False):
            return "file"
    except OSError:
        pass
    return "other"
