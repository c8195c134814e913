"""A skill's files, read and listed without leaving the skill's folder.

The walk is :mod:`tether.tools._confine`'s, with the skill's folder as its root: every component is
opened beneath a descriptor held on the folder with ``O_NOFOLLOW``, links are followed only while
they stay inside, and the file read is the one that was opened. On top of it, paths the model gives
must be relative and free of ``..`` (nothing in a skill needs either), and a file is read whole,
as UTF-8 text, up to a size limit.
"""

from __future__ import annotations

import os
import re
import stat
from pathlib import Path

from tether.tools._confine import SUPPORTED, Glob, Location, Walk, Workspace, entries
from tether.tools.base import ToolError

__all__ = ["SkillFileError", "list_files", "read_text", "same_but_case"]

MAX_LISTED = 200
_IGNORED = frozenset({".git", ".hg", ".svn", "__pycache__", "node_modules", ".venv", ".DS_Store"})
_WINDOWS_DRIVE = re.compile(r"[A-Za-z]:[\\/]")
# _confine's messages point the model at list_files, which lists the working directory, not a skill.
_HINTS = (
    "Call list_files to see what exists.",
    "Call list_files with a pattern to see inside it.",
    "Call list_files to see the files.",
)


class SkillFileError(ValueError):
    """A file of a skill that cannot be read; the message says why, for the model or a person."""


class _SkillFolder(Workspace):
    def __init__(self, folder: Path, same_as: tuple[int, int] | None = None) -> None:
        try:
            super().__init__(folder)
        except ToolError:
            if not SUPPORTED:
                raise
            raise ToolError(f"the skill's folder {folder} cannot be opened (it was moved or removed).") from None
        # The folder opened must be the one found: a link put in its place (or in place of a folder
        # above it) since then leads anywhere, and in a project the agent's own tools can put one.
        if same_as is not None and ((st := os.fstat(self.fd)).st_dev, st.st_ino) != same_as:
            os.close(self.fd)
            raise ToolError(
                f"refused: the skill's folder {folder} changed since the skills were found (it was replaced, "
                "or a link was put in its place). The skills are found again when a new session begins."
            )

    def outside_message(self, path: str, link: tuple[str, str] | None = None) -> str:
        how = f": {link[0]!r} is a symbolic link to {link[1]!r}" if link else ""
        return (
            f"refused: {path!r} leads outside the skill's folder{how}. A skill's files are read only from "
            "inside its own folder; load_skill lists them."
        )


def _reword(message: str) -> str:
    for hint in _HINTS:
        message = message.replace(hint, "load_skill lists the skill's files.")
    return message


def check_path(path: str) -> None:
    """Refuse what no file of a skill needs: an empty or absolute path, ``..``, a NUL byte."""
    if not isinstance(path, str) or not path.strip():
        raise SkillFileError("give the path of a file of the skill, as load_skill lists it (e.g. 'template.md').")
    if "\x00" in path:
        raise SkillFileError("refused: the path contains a NUL byte.")
    if path.startswith(("/", "\\", "~")) or _WINDOWS_DRIVE.match(path):
        raise SkillFileError(
            f"refused: {path!r} is absolute; give a path relative to the skill's folder, as load_skill lists its files."
        )
    if ".." in re.split(r"[\\/]", path):
        raise SkillFileError(
            f"refused: {path!r} climbs with '..'; give a path inside the skill's folder, as load_skill lists its files."
        )


def read_text(folder: Path, path: str, *, limit: int, same_as: tuple[int, int] | None = None) -> str:
    """The UTF-8 text of the file ``path`` inside ``folder`` (a BOM dropped), read whole.

    Raises :class:`SkillFileError` for a path that leaves the folder, a missing, special, binary,
    non-UTF-8 or unreadable file, one larger than ``limit`` bytes, or a folder that is no longer
    the one whose ``(st_dev, st_ino)`` is ``same_as``."""
    check_path(path)
    try:
        with _SkillFolder(folder, same_as) as ws, ws.walk(path) as walk:
            fd, st = walk.open_last("a skill's files are read only if they are")
    except ToolError as exc:
        raise SkillFileError(_reword(str(exc))) from None
    except OSError as exc:
        raise SkillFileError(f"cannot read {path}: {exc.strerror or exc}.") from None
    with os.fdopen(fd, "rb") as f:
        try:
            data = f.read(limit + 1)
        except OSError as exc:
            raise SkillFileError(f"cannot read {path}: {exc.strerror or exc}.") from None
    if len(data) > limit:
        raise SkillFileError(
            f"{path} is {max(st.st_size, len(data)):,} bytes; files of a skill are read whole, "
            f"up to {limit:,} bytes. Split it into smaller files."
        )
    if b"\x00" in data[:8192]:
        raise SkillFileError(f"{path} is a binary file ({len(data):,} bytes); only text files of a skill can be read.")
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise SkillFileError(
            f"{path} is not UTF-8 text (byte 0x{data[exc.start]:02x} at offset {exc.start}); "
            "only UTF-8 text files of a skill can be read."
        ) from None


def list_files(folder: Path, skip: str = "", same_as: tuple[int, int] | None = None) -> list[tuple[str, int]]:
    """``(path, size)`` of the regular files in ``folder`` and beneath, sorted, at most
    :data:`MAX_LISTED` and one more when there are more (the callers say so); links only when they
    lead to a regular file inside; ``skip`` left out; none when the folder is no longer the one
    ``same_as`` identifies."""
    out: list[tuple[str, int]] = []
    try:
        with _SkillFolder(folder, same_as) as ws:
            for loc in entries(ws, Glob("**/*"), _IGNORED):
                if loc.rel == skip or not loc.matches:
                    continue
                size = _size(ws, loc) if loc.kind == "link" else _plain_size(loc.name, loc.stack[-1])
                if size is not None:
                    out.append((loc.rel, size))
                if len(out) > MAX_LISTED:
                    break
    except ToolError:
        return []
    return out


def _plain_size(name: str, dir_fd: int) -> int | None:
    try:
        return os.stat(name, dir_fd=dir_fd, follow_symlinks=False).st_size
    except OSError:
        return None


def _size(ws: Workspace, loc: Location) -> int | None:
    """The size of the regular file a link leads to inside the folder; None for anything else."""
    with Walk(ws, loc.rel, list(loc.stack), list(loc.names)) as walk:
        try:
            walk.run((loc.name,))
        except ToolError:  # leads outside, or loops: not a file of this skill
            return None
        if walk.name is None or walk.stat is None or not stat.S_ISREG(walk.stat.st_mode):
            return None
        return walk.stat.st_size


def same_but_case(wanted: str, files: list[str]) -> str | None:
    """The file of ``files`` whose name is ``wanted`` but for letter case (``REFERENCE.md`` for
    ``reference.md``): names are case-sensitive here, and skills written elsewhere often are not."""
    if wanted in files:
        return None
    folded = wanted.strip().removeprefix("./").casefold()
    return next((f for f in files if f.casefold() == folded), None)
