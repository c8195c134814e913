"""Two small stores of plain text that a person can read and edit: the user profile and fact notes.

Each is a Markdown file of entries, one ``- `` bullet per entry (a continuation line is indented
two spaces). Any other line a person writes by hand is kept as an entry of its own, so loading
never loses text. Every change reads, edits and rewrites its file under an advisory lock
(``fcntl.flock``) with an atomic replace, so two processes never lose each other's writes, and a
reader sees the old file or the new, never half of one.

``MemoryStore`` is the seam ``Memory`` uses; ``TextStore`` (a file) is the default and
``tether.postgres.memory.PgTextStore`` keeps the same Markdown text in a Postgres row.

A link, named pipe or folder put at a memory file's name (or its lock's) is an error that names
it, never read through, written through or waited on.

A file that is not valid UTF-8 is read with replacement characters; before the first write
replaces it, its bytes are copied beside it (``profile.md.damaged-<time>``), so nothing is lost
(unless the write empties it: a clear keeps no copy of what it cleared, and removes the copies
kept before), and a warning (logger ``tether.memory``) names the file and the copy.
"""

from __future__ import annotations

import contextlib
import errno
import logging
import os
import re
import time
from collections.abc import Iterator
from contextlib import AbstractContextManager
from dataclasses import dataclass
from pathlib import Path
from typing import Literal, Protocol

from tether.errors import ConfigError, TetherError
from tether.fileio import atomic_write, in_the_way, open_own, planted, read_own

__all__ = ["STORES", "Change", "MemoryRefused", "MemoryStore", "StoreName", "StoreUsage", "TextStore"]

_log = logging.getLogger("tether.memory")

StoreName = Literal["profile", "notes"]
STORES: tuple[StoreName, ...] = ("profile", "notes")


class MemoryRefused(TetherError):
    """A write that was not made; ``rule`` names the check, the message says what to do."""

    def __init__(self, message: str, rule: str) -> None:
        super().__init__(message)
        self.rule = rule


@dataclass(frozen=True)
class StoreUsage:
    store: str
    chars: int
    limit: int

    @property
    def percent(self) -> int:
        return int(100 * self.chars / self.limit + 0.5) if self.limit else 100  # half up: 2.5 → 3

    def label(self) -> str:
        """``[profile 62 % — 870/1,400 chars]``."""
        return f"[{self.store} {self.percent} % \u2014 {self.chars:,}/{self.limit:,} chars]"


@dataclass(frozen=True)
class Change:
    """What a write did: ``changed`` is False for a no-op (an exact duplicate)."""

    store: str
    action: str
    text: str
    changed: bool
    usage: StoreUsage
    message: str


def clean_entry(text: str) -> str:
    """One entry as stored: trimmed lines, no blank lines, no leading bullet."""
    lines = [line.strip() for line in text.strip().splitlines()]  # as parse() reads them back
    lines = [line for line in lines if line]
    if lines and re.match(r"[-*](?: |$)", lines[0]):
        lines[0] = lines[0][1:].lstrip()
    return "\n".join(line for line in lines if line)


def parse(text: str) -> list[str]:
    """Entries in a memory file; every non-blank line ends up in exactly one entry."""
    entries: list[list[str]] = []
    open_entry = False
    for raw in text.splitlines():
        line = raw.lstrip("\ufeff").rstrip()  # a byte-order mark is no text (two files joined with cat)
        if not line.strip():
            open_entry = False
            continue
        bullet = re.match(r"[-*] (.*)", line)
        if bullet:
            entries.append([bullet.group(1).strip()])
            open_entry = True
        elif open_entry and line[:1] in (" ", "\t"):
            entries[-1].append(line.strip())
        else:  # a line written by hand without a bullet: an entry of its own
            entries.append([line.strip()])
            open_entry = True
    return ["\n".join(lines) for lines in entries if any(lines)]


def render(entries: list[str]) -> str:
    out = []
    for entry in entries:
        first, *rest = entry.split("\n")
        out.append("- " + first)
        out.extend("  " + line for line in rest)
    return "\n".join(out) + ("\n" if out else "")


def chars(entries: list[str]) -> int:
    """What a store's entries weigh against its limit: their text, one newline between each."""
    return len("\n".join(entries))


def _private_dirs(path: Path) -> None:
    """Create ``path`` and any missing parents as 0700: memory is about a person."""
    missing = []
    while not path.exists():
        missing.append(path)
        path = path.parent
    for d in reversed(missing):
        d.mkdir(mode=0o700, exist_ok=True)


class MemoryStore(Protocol):
    """One store of entries as ``Memory`` uses it. ``edit()`` yields the entries to change in
    place and saves them when the block ends, so that no other writer's change is lost between the
    read and the write; an exception in the block saves nothing."""

    @property
    def name(self) -> StoreName: ...
    @property
    def limit(self) -> int: ...
    @property
    def path(self) -> Path | str:
        """Where the entries live, as a person would look for them (a file, or a database row)."""
        ...

    def entries(self) -> list[str]: ...
    def usage(self, entries: list[str] | None = None) -> StoreUsage: ...
    def edit(self) -> AbstractContextManager[list[str]]: ...


class TextStore:
    """One memory file: ``path`` holds the entries, ``limit`` bounds their characters."""

    def __init__(self, name: StoreName, path: Path, limit: int) -> None:
        self.name = name
        self.path = path
        self.limit = limit
        self.damaged_copy: Path | None = None  # where a file that was not UTF-8 was copied

    # -- reading -----------------------------------------------------------------------------

    def _read(self) -> tuple[str, bool]:
        """The file's text, and whether it had bytes that are not UTF-8. No symlinks: a planted
        link must not pour another file into the system prompt; nor a named pipe, which would make
        the read wait for a writer forever."""
        try:
            data = read_own(self.path)
        except FileNotFoundError:
            return "", False
        except OSError as exc:
            if exc.errno == errno.ELOOP:
                raise ConfigError(
                    f"{self.path} is a symbolic link; memory files must be plain files. "
                    "Remove the link (tether memory clear recreates the file)"
                ) from exc
            kind = planted(self.path)
            if kind is not None:
                raise ConfigError(
                    f"{self.path} is {kind}; memory files must be plain files. "
                    "Remove it (tether memory clear recreates the file)"
                ) from exc
            raise ConfigError(f"cannot read {self.path}: {in_the_way(self.path.parent) or exc.strerror}") from exc
        try:
            return data.decode("utf-8-sig"), False  # an editor's byte-order mark is not text
        except UnicodeDecodeError:
            return data.decode("utf-8-sig", errors="replace"), True

    def entries(self) -> list[str]:
        text, _ = self._read()
        return parse(text)

    def usage(self, entries: list[str] | None = None) -> StoreUsage:
        return StoreUsage(self.name, chars(self.entries() if entries is None else entries), self.limit)

    # -- writing -----------------------------------------------------------------------------

    @contextlib.contextmanager
    def edit(self) -> Iterator[list[str]]:
        """Lock, read the entries, let the caller change the list, write it back if it changed."""
        import fcntl

        # O_NOFOLLOW: a link planted at the lock's name is refused, never followed to create a file
        # outside the memory folder; a named pipe there is refused at once, never waited on.
        lock_path = self.path.with_name(f".{self.path.name}.lock")
        try:
            _private_dirs(self.path.parent)
            lock = open_own(lock_path, os.O_WRONLY | os.O_CREAT | os.O_CLOEXEC)
        except OSError as exc:
            if os.path.islink(lock_path):
                raise ConfigError(
                    f"cannot write memory: {lock_path} is a symbolic link, and tether does not follow links "
                    "for its lock file; remove it and try again"
                ) from exc
            kind = planted(lock_path)
            if kind is not None:
                raise ConfigError(
                    f"cannot write memory: {lock_path} is {kind}, not the lock file tether makes; "
                    "remove it and try again"
                ) from exc
            why = in_the_way(self.path.parent) or exc.strerror
            raise ConfigError(f"cannot write memory under {self.path.parent}: {why}") from exc
        try:
            fcntl.flock(lock, fcntl.LOCK_EX)
            self._drop_stale_temporaries()
            text, damaged = self._read()
            entries = parse(text)
            before = list(entries)
            yield entries
            if entries != before or (damaged and entries):
                if damaged and entries:  # a store emptied on purpose (clear) keeps no copy of what it held
                    self._keep_damaged()
                atomic_write(self.path, render(entries).encode("utf-8"))
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)
            os.close(lock)

    def _drop_stale_temporaries(self) -> None:
        """A writer killed between writing its temporary and renaming it (kill -9) left a whole copy
        of the store beside the file (``.notes.md.<random>.tmp``). Every writer writes under the
        lock, so with the lock held each one is stale: removed, so that what a clear or a remove
        deletes is not kept on disk there."""
        stale = re.compile(rf"\.{re.escape(self.path.name)}\.[0-9a-f]{{16}}\.tmp")
        try:
            names = [entry.name for entry in os.scandir(self.path.parent) if stale.fullmatch(entry.name)]
        except OSError:
            return
        for name in names:
            with contextlib.suppress(OSError):
                os.unlink(self.path.parent / name)

    def drop_damaged_copies(self) -> list[Path]:
        """Remove the copies :meth:`_keep_damaged` made of this file (``notes.md.damaged-<time>``):
        what a clear is asked to forget, they hold too. Returns what was removed."""
        copy = re.compile(rf"{re.escape(self.path.name)}\.damaged-\d{{8}}-\d{{6}}-[0-9a-f]{{8}}")
        try:
            names = sorted(entry.name for entry in os.scandir(self.path.parent) if copy.fullmatch(entry.name))
        except FileNotFoundError:
            return []
        removed = []
        for name in names:
            with contextlib.suppress(FileNotFoundError):  # another clear got there first
                os.unlink(self.path.parent / name)
                removed.append(self.path.parent / name)
        return removed

    def _keep_damaged(self) -> None:
        # Random, not the pid: one process (a server, a chat) may meet a damaged file twice in a second.
        copy = self.path.with_name(f"{self.path.name}.damaged-{time.strftime('%Y%m%d-%H%M%S')}-{os.urandom(4).hex()}")
        data = read_own(self.path)  # read just now under the lock: a plain file, not a link
        fd = os.open(copy, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0), 0o600)
        try:
            os.write(fd, data)
            os.fsync(fd)
        finally:
            os.close(fd)
        self.damaged_copy = copy
        # Said, as a session's repair is: the write puts the replacement characters in the file for
        # good, and the person should learn which of their lines changed and where the bytes went.
        _log.warning(
            "%s was not valid UTF-8: its undecodable bytes are now replacement characters (U+FFFD) there; "
            "the file as it was is kept in %s",
            self.path,
            copy,
        )
