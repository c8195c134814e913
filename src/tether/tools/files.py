"""Built-in file tools, confined to the run's working directory.

``..``, absolute paths and symlinks that lead outside the working directory are refused with a
message that says why. The messages are written for the model: they say what to do next.
"""

from __future__ import annotations

import os
from pathlib import Path

from tether.tools.base import FunctionTool, ToolContext, ToolError, tool

__all__ = [
    "EDIT_TOOLS",
    "FILE_TOOLS",
    "delete_file",
    "edit_file",
    "list_files",
    "read_file",
    "resolve_inside",
    "scan_archive",
    "search_files",
    "write_file",
]

_IGNORED = frozenset({".git", ".hg", ".svn", "__pycache__", "node_modules", ".venv", ".tox"})
READ_CAP_BYTES = 100_000


def _check_glob(pattern: str) -> None:
    if pattern.startswith(("/", "\\")) or ".." in Path(pattern).parts:
        raise ToolError(f"refused: the pattern {pattern!r} reaches outside the working directory; "
                        "use a pattern relative to it, without '..'.")


def _inside(root: Path, p: Path) -> bool:
    try:
        resolved = p.resolve()
    except (RuntimeError, OSError):
        return False
    return resolved == root or root in resolved.parents


def resolve_inside(cwd: Path, path: str) -> Path:
    """``path`` resolved under ``cwd``; a :class:`ToolError` if it leads anywhere else."""
    root = cwd.resolve()
    if "\x00" in path:
        raise ToolError("refused: the path contains a NUL byte")
    candidate = Path(path)
    try:
        target = (candidate if candidate.is_absolute() else root / candidate).resolve()
    except (RuntimeError, OSError) as exc:  # a symlink loop, a name too long
        raise ToolError(f"refused: {path!r} cannot be resolved ({exc}); it may be a symlink loop.") from exc
    if target != root and root not in target.parents:
        raise ToolError(
            f"refused: {path!r} is outside the working directory {root}. Only paths inside it "
            "can be used; this cannot be fixed by retrying. Call list_files to see what exists."
        )
    return target


@tool(read_only=True)
def list_files(ctx: ToolContext, pattern: str = "**/*") -> str:
    """List the files in the working directory with their sizes in bytes.

    `pattern` is a glob relative to the working directory (default: every file).
    """
    _check_glob(pattern)
    root = ctx.cwd.resolve()
    rows: list[str] = []
    for p in sorted(root.glob(pattern)):
        rel = p.relative_to(root)
        if any(part in _IGNORED for part in rel.parts) or not _inside(root, p) or not p.is_file():
            continue
        rows.append(f"{rel.as_posix()}\t{p.stat().st_size} bytes")
        if len(rows) >= 1000:
            rows.append("(stopped at 1000 entries: narrow the pattern to see more)")
            break
    return "\n".join(rows) if rows else f"no files match {pattern!r}"


@tool(read_only=True)
def read_file(ctx: ToolContext, path: str, start_line: int = 1, max_lines: int = 2000) -> str:
    """Read a text file in the working directory.

    `start_line` (1-based) and `max_lines` select a range of lines for large files.
    """
    target = resolve_inside(ctx.cwd, path)
    if not target.exists():
        raise ToolError(f"no such file: {path}. Call list_files to see what exists.")
    if target.is_dir():
        raise ToolError(f"{path} is a directory. Call list_files with a pattern to see inside it.")
    data = target.read_bytes()
    if b"\x00" in data[:8192]:
        raise ToolError(f"{path} is a binary file ({len(data)} bytes); read_file only reads text.")
    lines = data.decode("utf-8", errors="replace").splitlines()
    first = max(start_line, 1) - 1
    chosen = lines[first : first + max(max_lines, 1)]
    text = "\n".join(chosen)
    notes: list[str] = []
    if len(text) > READ_CAP_BYTES:
        text = text[:READ_CAP_BYTES]
        shown = text.count("\n") + 1
        notes.append(
            f"[cut at {READ_CAP_BYTES} characters; call read_file with start_line={first + shown} "
            "to read further]"
        )
    elif first + len(chosen) < len(lines):
        notes.append(
            f"[lines {first + 1}-{first + len(chosen)} of {len(lines)}; call read_file with "
            f"start_line={first + len(chosen) + 1} to read further]"
        )
    return "\n".join([text, *notes]) if notes else text


@tool
def write_file(ctx: ToolContext, path: str, content: str) -> str:
    """Create or overwrite a text file in the working directory with `content`."""
    target = resolve_inside(ctx.cwd, path)
    if target.is_dir():
        raise ToolError(f"{path} is a directory; give a file path.")
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_name(f".{target.name}.tether-tmp")
    tmp.write_text(content, encoding="utf-8")
    os.replace(tmp, target)  # a reader never sees half a file
    return f"wrote {path} ({len(content.encode())} bytes)"


@tool
def edit_file(ctx: ToolContext, path: str, old_text: str, new_text: str) -> str:
    """Replace `old_text` with `new_text` in a file. `old_text` must appear exactly once: include
    enough surrounding lines to make it unique."""
    target = resolve_inside(ctx.cwd, path)
    if not target.is_file():
        raise ToolError(f"no such file: {path}. Call list_files to see what exists.")
    text = target.read_text(encoding="utf-8", errors="strict")
    if not old_text:
        raise ToolError("old_text is empty; give the exact text to replace (use write_file to create a file).")
    count = text.count(old_text)
    if count == 0:
        raise ToolError(f"old_text was not found in {path}. Read the file first and copy the text exactly, "
                        "including spaces and line breaks.")
    if count > 1:
        raise ToolError(f"old_text appears {count} times in {path}; include more surrounding lines so it "
                        "matches exactly one place.")
    tmp = target.with_name(f".{target.name}.tether-tmp")
    tmp.write_text(text.replace(old_text, new_text, 1), encoding="utf-8")
    os.replace(tmp, target)
    return f"edited {path}: replaced 1 occurrence"


@tool(read_only=True)
def search_files(ctx: ToolContext, pattern: str, glob: str = "**/*", max_results: int = 100) -> str:
    """Search file contents with a regular expression; returns `path:line: text` for each match."""
    import re

    try:
        regex = re.compile(pattern)
    except re.error as exc:
        raise ToolError(f"not a valid regular expression: {exc}. Escape special characters like ( [ . *"
                        ) from exc
    _check_glob(glob)
    root = ctx.cwd.resolve()
    limit = max(1, min(max_results, 1000))
    hits: list[str] = []
    for p in sorted(root.glob(glob)):
        rel = p.relative_to(root)
        if any(part in _IGNORED for part in rel.parts) or not p.is_file() or p.is_symlink():
            continue
        try:
            data = p.read_bytes()[:2_000_000]
        except OSError:
            continue
        if b"\x00" in data[:8192]:
            continue
        for number, line in enumerate(data.decode("utf-8", errors="replace").splitlines(), start=1):
            if regex.search(line):
                hits.append(f"{rel.as_posix()}:{number}: {line[:300]}")
                if len(hits) >= limit:
                    return "\n".join([*hits, f"[stopped at {limit} matches: narrow the pattern or the glob]"])
    return "\n".join(hits) if hits else f"no matches for {pattern!r}"


@tool(needs_approval=True)
def delete_file(ctx: ToolContext, path: str) -> str:
    """Delete a file in the working directory. A person approves each deletion."""
    target = resolve_inside(ctx.cwd, path)
    if not target.is_file():
        raise ToolError(f"no such file: {path}. Call list_files to see what exists.")
    os.remove(target)
    return f"deleted {path}"


@tool(read_only=True)
async def scan_archive(ctx: ToolContext, files: int = 1200, seconds: float = 3.0) -> str:
    """Scan the archive for problems. Slow: reports progress while it works."""
    steps = 6
    for step in range(1, steps + 1):
        await ctx.signal.sleep(seconds / steps)
        ctx.progress(f"scanned {files * step // steps} of {files} files")
    return f"scanned {files} files: no problems found"


FILE_TOOLS: tuple[FunctionTool, ...] = (list_files, read_file, delete_file, scan_archive)
EDIT_TOOLS: tuple[FunctionTool, ...] = (write_file, edit_file, search_files)
