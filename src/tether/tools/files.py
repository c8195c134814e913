"""Built-in file tools, confined to the run's working directory.

``..`` above the working directory, absolute paths elsewhere and symbolic links that lead outside
(or loop) are refused with a message that says why; the messages are written for the model: they
say what to do next. Every path is resolved and opened in one step beneath a descriptor held on the
working directory (see :mod:`tether.tools._confine`), so a link swapped in while a tool works cannot
lead it outside either. Links that stay inside are followed; listings do not descend into linked
directories.
"""

from __future__ import annotations

import itertools
import os
import re
import shlex
import stat
import warnings
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

from tether.tools._confine import (
    FILE_FLAGS,
    IGNORED,
    Glob,
    Location,
    Walk,
    Workspace,
    entries,
    kind_of,
    printable,
    replace_file,
)
from tether.tools._gitguard import tree_paths
from tether.tools._jail import inside, real
from tether.tools._search import BATCH_BYTES, Matcher
from tether.tools.base import FunctionTool, ToolContext, ToolError, tool

__all__ = [
    "EDIT_TOOLS",
    "FILE_TOOLS",
    "delete_file",
    "edit_file",
    "edit_tools",
    "list_files",
    "read_file",
    "resolve_inside",
    "search_files",
    "write_file",
]

READ_CAP_BYTES = 100_000  # characters, despite the name: the cap on what read_file returns
_CHUNK = 256 * 1024
_RAW_CAP = 4 * READ_CAP_BYTES + 8  # bytes that always decode to more than READ_CAP_BYTES characters
_COUNT_CAP = 64 * 1024 * 1024  # bytes read past a range to count the file's lines; past it, no total
_SEARCH_CAP = 2_000_000  # bytes of each file that search_files reads
_EDIT_CAP = 32 * 1024 * 1024  # bytes: the largest file edit_file rewrites
_LINKS_NOTED = 5
SEARCH_TIME_S = 30.0  # seconds a search may take before it gives up (Stop ends it sooner)


def _check_glob(pattern: str) -> Glob:
    if pattern.startswith(("/", "\\")) or ".." in Path(pattern).parts:
        raise ToolError(
            f"refused: the pattern {pattern!r} reaches outside the working directory; "
            "use a pattern relative to it, without '..'."
        )
    if "\x00" in pattern:
        raise ToolError("refused: the pattern contains a NUL byte")
    return Glob(pattern)


def resolve_inside(cwd: Path, path: str) -> Path:
    """``path`` resolved under ``cwd``; a :class:`ToolError` if it leads anywhere else.

    For messages and display only: the answer can be stale by the time it is used, so never open
    the returned path. The file tools resolve and open in one step beneath a descriptor instead.
    """
    with Workspace(cwd) as ws, ws.walk(path, missing_ok=True) as walk:
        return ws.root / walk.rel if walk.rel != "." else ws.root


def _utf8(text: str, what: str) -> bytes:
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise ToolError(
            f"{what} holds {text[exc.start]!r} at position {exc.start}, which cannot be written as "
            "UTF-8 (a lone surrogate); remove it and call again."
        ) from exc


def _link_note(skipped: list[str]) -> str:
    shown = ", ".join(skipped[:_LINKS_NOTED]) + (" and more" if len(skipped) > _LINKS_NOTED else "")
    return (
        f"(not entered: {shown}: symbolic links to directories are not followed here; use the path "
        "of the directory they point to)"
    )


def _link_target(ws: Workspace, loc: Location) -> tuple[str, os.stat_result] | None:
    """Where the link ``loc`` leads, if inside the working directory: its path and ``lstat``."""
    with Walk(ws, loc.rel, list(loc.stack), list(loc.names)) as walk:
        try:
            walk.run((loc.name,))
        except ToolError:  # leads outside, or loops: not listed, as if it were not there
            return None
        if ws.secrets and ws.secret(tuple(walk.rel.split("/"))) is not None:  # nor into a secret
            return None
        if walk.name is None:
            return walk.rel, os.fstat(walk.dir_fd)
        return (walk.rel, walk.stat) if walk.stat is not None else None


def _linked_directory(ws: Workspace, loc: Location) -> str | None:
    """``"link -> target"`` when ``loc`` is a link to a directory inside that the glob could have
    reached beneath, for the note that says it was not entered."""
    if not loc.descends:
        return None
    found = _link_target(ws, loc)
    return (
        f"{printable(loc.rel)} -> {printable(found[0])}"
        if found is not None and stat.S_ISDIR(found[1].st_mode)
        else None
    )


@tool(read_only=True)
def list_files(ctx: ToolContext, pattern: str = "**/*") -> str:
    """List the files in the working directory with their sizes in bytes.

    `pattern` is a glob relative to the working directory (default: every file).
    """
    glob = _check_glob(pattern)
    rows: list[str] = []
    skipped: list[str] = []
    with Workspace(ctx.cwd) as ws:
        for loc in entries(ws, glob, IGNORED):
            if loc.kind == "file":
                try:
                    size = os.stat(loc.name, dir_fd=loc.stack[-1], follow_symlinks=False).st_size
                except OSError:
                    continue
                rows.append(f"{printable(loc.rel)}\t{size} bytes")
            else:
                found = _link_target(ws, loc)
                if found is not None and stat.S_ISDIR(found[1].st_mode) and loc.descends:
                    skipped.append(f"{printable(loc.rel)} -> {printable(found[0])}")
                elif found is not None and stat.S_ISREG(found[1].st_mode) and loc.matches:
                    rows.append(
                        f"{printable(loc.rel)}\t{found[1].st_size} bytes (symbolic link to {printable(_readlink(loc))})"
                    )
            if len(rows) > 1000:  # one more than shown: there are more (exactly 1000 is not cut)
                rows[1000:] = ["(stopped at 1000 entries: narrow the pattern to see more)"]
                break
    if skipped:
        rows.append(_link_note(skipped))
    secret = _secrets_note(ws)
    if not rows:
        return "\n".join([f"no files match {pattern!r}{_passed_over(pattern)}", *secret])
    return "\n".join([*rows, *secret])


def _secrets_note(ws: Workspace) -> list[str]:
    """The line that says which secrets a listing passed over (none: no line)."""
    if not ws.secrets_passed:
        return []
    return [
        f"(not looked into: {', '.join(printable(s) for s in ws.secrets_passed)}, where keys and "
        "credentials are kept; the file tools do not read there, and commands cannot see them)"
    ]


def _passed_over(glob: str) -> str:
    """Why a glob that names a folder the listing passes over (``node_modules/**``) found nothing."""
    if not IGNORED.intersection(Path(glob).parts):
        return ""
    return (
        f" (list_files and search_files never look inside {', '.join(sorted(IGNORED))}: read_file "
        "reads a file there by its path, and run_command (ls, grep -r) lists or searches them)"
    )


def _readlink(loc: Location) -> str:
    try:
        return os.readlink(loc.name, dir_fd=loc.stack[-1])
    except OSError:
        return "?"


@dataclass(slots=True)
class _Range:
    lines: list[bytes]
    cut: bool = False  # stopped inside the range at the byte cap
    total: int | None = None  # lines in the file, when counting them was cheap
    more: bool = False  # lines exist after the range


def _skip_lines(f: BinaryIO, count: int) -> tuple[bytes, int]:
    """Read past ``count`` lines; the bytes already read after them, and how many lines there were
    (fewer than ``count`` when the file ends first)."""
    seen = 0
    last = b""
    while seen < count:
        chunk = f.read(_CHUNK)
        if not chunk:
            return b"", seen + (1 if last and not last.endswith(b"\n") else 0)
        newlines = chunk.count(b"\n")
        if seen + newlines >= count:
            pos = -1
            for _ in range(count - seen):
                pos = chunk.index(b"\n", pos + 1)
            return chunk[pos + 1 :], count
        seen, last = seen + newlines, chunk
    return b"", seen


def _take_lines(f: BinaryIO, buf: bytes, count: int) -> tuple[list[bytes], bytes, bool, bool]:
    """Up to ``count`` lines from ``buf`` and then ``f``, at most ``_RAW_CAP`` bytes in all:
    the lines, the bytes read after them, whether the cap cut the range, whether the file ended."""
    lines: list[bytes] = []
    size = pos = 0
    while len(lines) < count:
        end = buf.find(b"\n", pos)
        if end >= 0:
            lines.append(buf[pos:end])
            size += end + 1 - pos
            pos = end + 1
            if size > _RAW_CAP:
                return lines, buf[pos:], True, False
            continue
        if size + len(buf) - pos > _RAW_CAP:
            lines.append(buf[pos : pos + _RAW_CAP - size + 1])
            return lines, b"", True, False
        chunk = f.read(_CHUNK)
        buf, pos = buf[pos:] + chunk, 0
        if not chunk:
            if buf:
                lines.append(buf)
            return lines, b"", False, True
    return lines, buf[pos:], False, False


def _count_lines(f: BinaryIO, rest: bytes, ended: bool) -> int | None:
    """The lines in ``rest`` and what is left of ``f``; None past ``_COUNT_CAP`` bytes."""
    newlines, read, last = rest.count(b"\n"), len(rest), rest
    while not ended:
        if read > _COUNT_CAP:
            return None
        chunk = f.read(_CHUNK)
        if not chunk:
            break
        newlines, read, last = newlines + chunk.count(b"\n"), read + len(chunk), chunk
    return newlines + (1 if last and not last.endswith(b"\n") else 0)


def _read_range(f: BinaryIO, first: int, count: int) -> _Range:
    """Lines ``first`` (0-based) to ``first + count``, streamed: memory stays near ``_RAW_CAP``
    whatever the size of the file."""
    buf, skipped = _skip_lines(f, first)
    if skipped < first:
        return _Range([], total=skipped)
    lines, rest, cut, ended = _take_lines(f, buf, count)
    if cut:
        return _Range(lines, cut=True, more=True)
    remaining = _count_lines(f, rest, ended)
    total = None if remaining is None else first + len(lines) + remaining
    return _Range(lines, total=total, more=remaining != 0)


def _range_text(path: str, start_line: int, first: int, found: _Range, size: int) -> str:
    if not found.lines and first > 0:
        return (
            f"[{path} has {found.total} lines; start_line={start_line} is past the end. Call read_file "
            "with a smaller start_line.]"
        )
    raw = b"\n".join(line[:-1] if line.endswith(b"\r") else line for line in found.lines)
    text = raw.decode("utf-8", errors="replace")
    if len(text) > READ_CAP_BYTES:
        text = text[:READ_CAP_BYTES]
        shown = text.count("\n") + 1
        if shown == 1:  # the range's first line alone is longer: start_line cannot reach its rest
            line = first + 1
            after = (
                f", or call read_file with start_line={line + 1} for the lines after it"
                if found.more or len(found.lines) > 1
                else ""
            )
            note = (
                f"[cut at {READ_CAP_BYTES} characters: line {line} alone is longer, and read_file "
                f"shows no more of it; read its rest through run_command (sed -n '{line}p' "
                f"{shlex.quote(path)} | cut -c {READ_CAP_BYTES + 1}-){after}]"
            )
        else:
            note = (
                f"[cut at {READ_CAP_BYTES} characters; call read_file with start_line={first + shown} to read further]"
            )
    elif found.more:
        last = first + len(found.lines)
        of = f" of {found.total}" if found.total is not None else f" of a {size:,}-byte file"
        note = f"[lines {first + 1}-{last}{of}; call read_file with start_line={last + 1} to read further]"
    else:
        return text
    return f"{text}\n{note}"


@tool(read_only=True)
def read_file(ctx: ToolContext, path: str, start_line: int = 1, max_lines: int = 2000) -> str:
    """Read a text file in the working directory.

    `start_line` (1-based) and `max_lines` select a range of lines for large files.
    """
    with Workspace(ctx.cwd) as ws, ws.walk(path) as walk:
        fd, st = walk.open_last("read_file only reads")
    with os.fdopen(fd, "rb") as f:
        head = os.pread(fd, 8192, 0)
        if b"\x00" in head:
            raise ToolError(f"{path} is a binary file ({st.st_size} bytes); read_file only reads text.")
        first = max(start_line, 1) - 1
        found = _read_range(f, first, max(max_lines, 1))
    return _range_text(path, start_line, first, found, st.st_size)


def _write_target(walk: Walk, path: str) -> int | None:
    """The mode of the file ``walk`` names (to keep it), None if it does not exist yet."""
    if walk.name is None or (walk.stat is not None and stat.S_ISDIR(walk.stat.st_mode)):
        raise ToolError(f"{path} is a directory; give a file path.")
    if walk.stat is None:
        return None
    if not stat.S_ISREG(walk.stat.st_mode):
        raise ToolError(
            f"{path} is {kind_of(walk.stat.st_mode)}, not a file; write_file only replaces regular "
            "files. Choose another path."
        )
    _refuse_read_only(walk.stat, path)
    return walk.stat.st_mode


# .git and .tether, at any depth, which the shell's sandbox keeps read-only too (the working
# directory's own): git runs what .git/config and .git/hooks name (core.fsmonitor, core.pager, a
# pre-commit hook) outside any sandbox at the user's next git command, in a sub-repository
# (vendor/lib/.git) as well, and .tether/skills is read into later runs' prompts.
_PROTECTED = (".git", ".tether")


def _named_protected(rel: str) -> str | None:
    """The part of ``rel`` up to its first component named .git or .tether (.GIT is .git on a file
    system that ignores case), None if it has none."""
    parts = rel.split("/")
    for i, part in enumerate(parts):
        if part.casefold() in _PROTECTED:
            return "/".join([*parts[:i], part.casefold()])
    return None


def _is_git_dir(fd: int) -> bool:
    """Whether the directory ``fd`` is a repository's own folder by git's test (``is_git_directory``):
    a HEAD with objects and refs folders, or with a commondir (a worktree's). It finds the folder
    a ``.git`` file (``gitdir: ...``, a submodule or worktree) or a ``.git`` link leads to under
    another name, and a bare repository, by looking only at the directories on the path."""

    def mode(name: str) -> int | None:
        try:
            return os.stat(name, dir_fd=fd).st_mode
        except OSError:
            return None

    if mode("HEAD") is None:
        return False
    objects, refs = mode("objects"), mode("refs")
    both = objects is not None and refs is not None and stat.S_ISDIR(objects) and stat.S_ISDIR(refs)
    return both or mode("commondir") is not None


def _refuse_protected(rel: str, path: str, tool: str, walk: Walk | None = None) -> None:
    """``rel`` (the path as given, or from the working directory with links resolved) inside a
    ``.git`` or ``.tether``, or, with ``walk``, inside a directory that is a git repository's folder."""
    where = _named_protected(rel)
    if where is None and walk is not None:  # stack[i] is the directory names[:i]; [0] the working directory
        depth = next((i for i, fd in enumerate(walk.stack) if i and _is_git_dir(fd)), None)
        if depth is not None:
            where = f"{'/'.join(walk.names[:depth])} (a git repository's folder: HEAD, objects, refs)"
    if where is not None:
        raise ToolError(
            f"refused: {path} is inside {printable(where)}, which {tool} does not change: git runs what a "
            "repository's .git holds (config, hooks) outside the sandbox, and tether reads .tether into "
            "later runs. Nothing was changed. Use git's own commands for the repository, or tell the "
            "user what to change."
        )


class _GitReads:
    """What the configs of the repositories around a path point git at in the working directory
    (``core.hooksPath``, an included file, a script a setting runs: :func:`_gitguard.tree_paths`,
    which keeps them read-only to sandboxed commands), read once per call; the ``writable`` paths
    the person listed for the sandbox (relative: in the working directory) are left out, as there."""

    def __init__(self, root: Path, rel: str, cwd: Path, writable: tuple[str, ...]) -> None:
        parts = rel.split("/")[:-1] if rel != "." else []
        folders = [root, *(root.joinpath(*parts[: i + 1]) for i in range(len(parts)))]
        listed = [real(cwd / Path(p).expanduser()) for p in writable]
        self.root = root
        self.paths = [(str(t.bound or real(t.path)), t) for t in tree_paths(root, folders, listed)]

    def refuse(self, rel: str, path: str, tool: str) -> None:
        """Refuse ``rel`` (from the working directory, links resolved) at or in one of them; a
        script's path only itself (a folder made there runs nothing)."""
        target = str(self.root / rel)
        for where, item in self.paths:
            if target == where or (not item.program and target.startswith(where.rstrip("/") + "/")):
                shown = printable(
                    os.path.relpath(item.path, self.root) if inside(item.path, self.root) else str(item.path)
                )
                if target != where:
                    said = f"{path} is inside {shown}"
                else:
                    said = path if path == shown else f"{path} is {shown}"
                raise ToolError(
                    f"refused: {said} ({item.why}), which {tool} does not change: the user's own git runs or "
                    "reads it outside the sandbox, with their rights, at their next git command. Nothing was "
                    "changed. If the task needs it changed, tell the user what and why."
                )


def _given(cwd: Path, path: str) -> str:
    """``path`` as given, from the working directory, before any link is followed."""
    return os.path.relpath(path, cwd) if os.path.isabs(path) else os.path.normpath(path)


def _refuse_read_only(st: os.stat_result, path: str) -> None:
    """A file nobody may write was made so on purpose: replacing it by a rename (which needs only the
    directory) would go round that, as no editor or shell redirection does."""
    if not st.st_mode & 0o222:
        raise ToolError(
            f"{path} is read-only (mode {stat.S_IMODE(st.st_mode):04o}); it was not changed. If it "
            f"should change, ask the user to make it writable (chmod u+w {path})."
        )


def _owner(st: os.stat_result | None) -> tuple[int, int] | None:
    return (st.st_uid, st.st_gid) if st is not None else None


@tool
def write_file(ctx: ToolContext, path: str, content: str) -> str:
    """Create or overwrite a text file in the working directory with `content`."""
    return _write(ctx, path, content, ())


def _write(ctx: ToolContext, path: str, content: str, writable: tuple[str, ...]) -> str:
    data = _utf8(content, "content")
    _refuse_protected(_given(ctx.cwd, path), path, "write_file")
    with Workspace(ctx.cwd) as ws:
        with ws.walk(path, missing_ok=True) as probe:  # before the walk below makes any directory
            _refuse_protected(probe.rel, path, "write_file", probe)
            git_reads = _GitReads(ws.root, probe.rel, ctx.cwd, writable)
            git_reads.refuse(probe.rel, path, "write_file")
        with ws.walk(path, create_dirs=True) as walk:
            _refuse_protected(walk.rel, path, "write_file", walk)  # again: it may have changed meanwhile
            git_reads.refuse(walk.rel, path, "write_file")
            mode = _write_target(walk, path)
            assert walk.name is not None
            replace_file(walk.dir_fd, walk.name, data, mode, shown=path, owner=_owner(walk.stat))
    return f"wrote {path} ({len(data)} bytes){_hard_link_note(walk.stat)}"


def _hard_link_note(replaced: os.stat_result | None) -> str:
    """A file with other names (hard links, perhaps outside the working directory) is replaced, never
    written through: say that those names keep the old content."""
    if replaced is None or replaced.st_nlink < 2:
        return ""
    others = replaced.st_nlink - 1
    return (
        f"; it had {others} other name{'s' if others > 1 else ''} (hard link{'s' if others > 1 else ''}), "
        "which keep the old content: the file tools replace a file, never write through a link"
    )


def _read_text_for_edit(fd: int, path: str) -> str:
    with os.fdopen(fd, "rb") as f:
        data = f.read(_EDIT_CAP + 1)  # an edit holds the file several times over: bounded, not the whole disk
    if len(data) > _EDIT_CAP:
        raise ToolError(
            f"{path} is larger than {_EDIT_CAP:,} bytes; edit_file only edits files up to that size "
            "(it holds the whole file in memory). Use run_command (sed, for example) for a file this "
            "large, or read_file to look at part of it."
        )
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ToolError(
            f"{path} is not valid UTF-8 (at byte {exc.start}); edit_file only edits UTF-8 text. Use "
            "write_file to replace the whole file."
        ) from exc
    return text


_BREAK = re.compile(r"\r\n|\r|\n")


def _lines(text: str) -> list[str]:
    return _BREAK.split(text)


def _replace_once(text: str, old_text: str, new_text: str, path: str) -> str:
    """``text`` with the one occurrence of ``old_text`` replaced, matching a line break in
    ``old_text`` to any line break (``\r\n``, ``\r``, ``\n``), as read_file shows them all as one. The
    rest of the file keeps its own line breaks, and ``new_text`` takes those of the place it goes."""
    pattern = re.compile("(?:\r\n|\r|\n)".join(re.escape(line) for line in _lines(old_text)))
    found = list(itertools.islice(pattern.finditer(text), 2))
    if not found:
        raise ToolError(
            f"old_text was not found in {path}. Read the file first and copy the text exactly, "
            "including spaces and line breaks."
        )
    if len(found) > 1:
        raise ToolError(
            f"old_text appears {sum(1 for _ in pattern.finditer(text))} times in {path}; include more "
            "surrounding lines so it matches exactly one place."
        )
    match = found[0]
    breaks = _BREAK.search(match.group(0)) or _BREAK.search(text)
    eol = breaks.group(0) if breaks is not None else "\n"
    return text[: match.start()] + eol.join(_lines(new_text)) + text[match.end() :]


@tool
def edit_file(ctx: ToolContext, path: str, old_text: str, new_text: str) -> str:
    """Replace `old_text` with `new_text` in a file. `old_text` must appear exactly once: include
    enough surrounding lines to make it unique."""
    return _edit(ctx, path, old_text, new_text, ())


def _edit(ctx: ToolContext, path: str, old_text: str, new_text: str, writable: tuple[str, ...]) -> str:
    _refuse_protected(_given(ctx.cwd, path), path, "edit_file")
    with Workspace(ctx.cwd) as ws, ws.walk(path) as walk:
        _refuse_protected(walk.rel, path, "edit_file", walk)  # reached through a link, or by an absolute path
        _GitReads(ws.root, walk.rel, ctx.cwd, writable).refuse(walk.rel, path, "edit_file")
        fd, st = walk.open_last("edit_file only edits")
        try:
            _refuse_read_only(st, path)
        except ToolError:
            os.close(fd)
            raise
        text = _read_text_for_edit(fd, path)
        if not old_text:
            raise ToolError("old_text is empty; give the exact text to replace (use write_file to create a file).")
        data = _utf8(_replace_once(text, old_text, new_text, path), "new_text")
        assert walk.name is not None
        replace_file(walk.dir_fd, walk.name, data, st.st_mode, shown=path, owner=_owner(st), unchanged=st)
    return f"edited {path}: replaced 1 occurrence{_hard_link_note(st)}"


def _search_one(dir_fd: int, name: str) -> tuple[bytes, int] | None:
    """The first ``_SEARCH_CAP`` bytes of a regular, non-binary file and the file's size, else None."""
    try:
        fd = os.open(name, FILE_FLAGS, dir_fd=dir_fd)
    except OSError:  # gone, or swapped for a link since it was listed
        return None
    with os.fdopen(fd, "rb") as f:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            return None
        os.set_blocking(fd, True)
        data = f.read(_SEARCH_CAP)
    if b"\x00" in data[:8192]:
        return None
    return data, max(st.st_size, len(data))


def _partial_note(partial: list[str]) -> str:
    """What a search did not look at: the files longer than ``_SEARCH_CAP``, past it."""
    shown = ", ".join(partial[:_LINKS_NOTED]) + (
        f" and {len(partial) - _LINKS_NOTED} more" if len(partial) > _LINKS_NOTED else ""
    )
    return (
        f"(searched only the first {_SEARCH_CAP:,} bytes of {shown}: a match after that is not "
        "listed; read further with read_file's start_line, or search with grep through run_command)"
    )


def _repeats_a_repetition(pattern: str) -> bool:
    """Whether an unbounded repetition holds another, as ``(a+)+`` or ``(\\w+\\s?)*``: on a line that
    almost matches, Python's ``re`` backtracks exponentially, holding the GIL (a 27-character line
    froze the whole process for 4.6 s; 40 characters, for hours), and no thread or signal can stop it."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        import sre_constants
        import sre_parse

    repeats = (sre_constants.MAX_REPEAT, sre_constants.MIN_REPEAT)

    def walk(node: Any, inside: bool) -> bool:
        if isinstance(node, tuple) and len(node) == 2 and node[0] in repeats:
            many = node[1][1] == sre_constants.MAXREPEAT
            return (many and inside) or walk(node[1][2], inside or many)
        if isinstance(node, sre_parse.SubPattern):
            node = node.data
        if isinstance(node, tuple | list):
            return any(walk(part, inside) for part in node)
        return False

    return walk(sre_parse.parse(pattern), False)


def _batches(ws: Workspace, glob: Glob, skipped: list[str], partial: list[str]) -> Iterator[list[tuple[str, bytes]]]:
    """The searchable files ``glob`` finds, as ``(path, contents)``, about ``BATCH_BYTES`` at a
    time; links to directories inside are added to ``skipped``, and the files searched only in
    part (longer than ``_SEARCH_CAP``) to ``partial``, with their sizes."""
    batch: list[tuple[str, bytes]] = []
    size = 0
    for loc in entries(ws, glob, IGNORED):
        if loc.kind == "link":  # a linked file is searched under its own name; a directory is noted
            linked = _linked_directory(ws, loc)
            if linked is not None:
                skipped.append(linked)
            continue
        found = _search_one(loc.stack[-1], loc.name)
        if found is None:
            continue
        data, size = found
        if size > len(data):
            partial.append(f"{printable(loc.rel)} ({size:,} bytes)")
        batch.append((printable(loc.rel), data))
        size += len(data)
        if size >= BATCH_BYTES:
            yield batch
            batch, size = [], 0
    if batch:
        yield batch


@tool(read_only=True)
def search_files(ctx: ToolContext, pattern: str, glob: str = "**/*", max_results: int = 100) -> str:
    """Search file contents with a regular expression; returns `path:line: text` for each match."""
    try:
        re.compile(pattern)
    except re.error as exc:
        raise ToolError(f"not a valid regular expression: {exc}. Escape special characters like ( [ . *") from exc
    if _repeats_a_repetition(pattern):
        raise ToolError(
            f"refused: {pattern!r} repeats a repetition (like (a+)+ or (\\w+\\s?)*), which can take hours "
            "on one line and stall everything meanwhile. Write it without the nesting (a+ for (a+)+)."
        )
    matcher = _check_glob(glob)
    limit = max(1, min(max_results, 1000))
    hits: list[str] = []
    skipped: list[str] = []
    partial: list[str] = []
    with Workspace(ctx.cwd) as ws, Matcher(pattern, ctx.signal, SEARCH_TIME_S) as match:
        for batch in _batches(ws, matcher, skipped, partial):
            where = batch[0][0] if len(batch) == 1 else f"{len(batch)} files from {batch[0][0]}"
            # one match more than shown says there are more (exactly `limit` is not cut)
            for index, number, line in match.match([data for _, data in batch], limit + 1 - len(hits), where):
                hits.append(f"{batch[index][0]}:{number}: {line}")
            if len(hits) > limit:
                return "\n".join([*hits[:limit], f"[stopped at {limit} matches: narrow the pattern or the glob]"])
    notes = [_link_note(skipped)] if skipped else []
    if partial:
        notes.append(_partial_note(partial))
    notes += _secrets_note(ws)
    if not hits:
        return "\n".join([f"no matches for {pattern!r}{_passed_over(glob)}", *notes])
    return "\n".join([*hits, *notes])


@tool(needs_approval=True)
def delete_file(ctx: ToolContext, path: str) -> str:
    """Delete a file in the working directory. A person approves each deletion."""
    with Workspace(ctx.cwd) as ws, ws.walk(path, follow_last=False) as walk:
        if walk.name is None or (walk.stat is not None and stat.S_ISDIR(walk.stat.st_mode)):
            raise ToolError(f"{path} is a directory; delete_file only deletes files.")
        if walk.stat is None:
            raise ToolError(f"no such file: {path}. Call list_files to see what exists.")
        note = ""
        if stat.S_ISLNK(walk.stat.st_mode):  # removing a link is harmless, but one leading outside is refused
            with Walk(ws, path, list(walk.stack), list(walk.names)) as check:
                check.run((walk.name,), missing_ok=True)
            target = os.readlink(walk.name, dir_fd=walk.dir_fd)
            note = f" (a symbolic link to {printable(target)}; what it pointed to is untouched)"
        try:
            os.unlink(walk.name, dir_fd=walk.dir_fd)  # never follows a link: removes the entry itself
        except OSError as exc:  # a directory swapped in meanwhile, or no permission
            raise ToolError(f"cannot delete {path}: {exc.strerror}. delete_file only deletes files.") from None
    return f"deleted {path}{note}"


def _file_state(args: dict[str, Any], cwd: Path) -> str | None:
    """read_file's answer holds while the file's inode, size, mtime and ctime do (None: it cannot be
    told). The ctime too: ``touch -r``, ``cp -p`` or ``tar x`` put an old mtime back, never a ctime."""
    try:
        with Workspace(cwd) as ws, ws.walk(str(args.get("path", ""))) as walk:
            st = walk.stat
    except (ToolError, OSError, ValueError):
        return None
    return None if st is None else f"{st.st_dev}:{st.st_ino}:{st.st_size}:{st.st_mtime_ns}:{st.st_ctime_ns}"


# What a listing or a search finds changes with any file: only read_file's answer may be reused.
read_file.cache_token = _file_state
list_files.cacheable = search_files.cacheable = False

FILE_TOOLS: tuple[FunctionTool, ...] = (list_files, read_file, delete_file)
EDIT_TOOLS: tuple[FunctionTool, ...] = (write_file, edit_file, search_files)


def edit_tools(writable: tuple[str, ...] = ()) -> tuple[FunctionTool, ...]:
    """``EDIT_TOOLS`` for a sandbox with these ``writable`` paths (``[tools.shell.sandbox]``):
    what a git config points at there stays writable to write_file and edit_file too."""
    if not writable:
        return EDIT_TOOLS

    def write(ctx: ToolContext, path: str, content: str) -> str:
        return _write(ctx, path, content, writable)

    def edit(ctx: ToolContext, path: str, old_text: str, new_text: str) -> str:
        return _edit(ctx, path, old_text, new_text, writable)

    return (
        FunctionTool(write, name=write_file.name, description=write_file.description),
        FunctionTool(edit, name=edit_file.name, description=edit_file.description),
        search_files,
    )
