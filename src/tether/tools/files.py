"""Built-in file tools, confined to the run's working directory.

``..``, absolute paths and symlinks that lead outside the working directory are refused with a
message that says why. The messages are written for the model: they say what to do next.
"""

from __future__ import annotations

import os
from pathlib import Path

from tether.tools.base import FunctionTool, ToolContext, ToolError, tool

__all__ = ["FILE_TOOLS", "delete_file", "list_files", "read_file", "resolve_inside", "scan_archive"]

_IGNORED = frozenset({".git", ".hg", ".svn", "__pycache__", "node_modules", ".venv", ".tox"})
READ_CAP_BYTES = 100_000


def resolve_inside(cwd: Path, path: str) -> Path:
    """``path`` resolved under ``cwd``; a :class:`ToolError` if it leads anywhere else."""
    root = cwd.resolve()
    candidate = Path(path)
    target = (candidate if candidate.is_absolute() else root / candidate).resolve()
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
    root = ctx.cwd.resolve()
    rows: list[str] = []
    for p in sorted(root.glob(pattern)):
        rel = p.relative_to(root)
        if any(part in _IGNORED for part in rel.parts) or not p.is_file():
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
