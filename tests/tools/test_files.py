"""Built-in file tools stay inside the working directory and say what to do on failure."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path
from typing import Any

import pytest

from tether.cancel import CancelSignal
from tether.tools.base import ToolContext, ToolError, validate_arguments
from tether.tools.files import delete_file, list_files, read_file


def ctx(cwd: Path) -> ToolContext:
    return ToolContext(cwd=cwd, signal=CancelSignal())


def call(tool: Any, cwd: Path, **args: Any) -> str:
    return str(asyncio.run(tool.execute(validate_arguments(tool, __import__("json").dumps(args)), ctx(cwd))))


@pytest.mark.parametrize("path", ["../outside.txt", "/etc/passwd", "sub/../../outside.txt"])
def test_paths_outside_are_refused(workspace: Path, path: str) -> None:
    (workspace.parent / "outside.txt").write_text("secret")
    with pytest.raises(ToolError, match="outside the working directory"):
        call(read_file, workspace, path=path)


def test_symlink_leading_outside_is_refused(workspace: Path) -> None:
    os.symlink("/etc", workspace / "etc-link")
    with pytest.raises(ToolError, match="outside"):
        call(read_file, workspace, path="etc-link/passwd")
    with pytest.raises(ToolError, match="outside"):
        call(delete_file, workspace, path="etc-link/hostname")


def test_missing_file_says_to_list_files(workspace: Path) -> None:
    with pytest.raises(ToolError, match="Call list_files"):
        call(read_file, workspace, path="timeout.log")


def test_binary_file_is_refused(workspace: Path) -> None:
    (workspace / "blob.bin").write_bytes(b"\x00\x01\x02")
    with pytest.raises(ToolError, match="binary"):
        call(read_file, workspace, path="blob.bin")


def test_line_ranges_and_invalid_utf8(workspace: Path) -> None:
    (workspace / "big.txt").write_bytes(b"\n".join(b"line %d \xff" % i for i in range(10)))
    out = call(read_file, workspace, path="big.txt", start_line=3, max_lines=2)
    assert out.startswith("line 2 \ufffd\nline 3") and "start_line=5" in out


def test_list_files_ignores_git_and_reports_sizes(workspace: Path) -> None:
    (workspace / ".git").mkdir()
    (workspace / ".git" / "HEAD").write_text("x")
    out = call(list_files, workspace)
    assert "errors.log\t" in out and ".git" not in out and "bytes" in out


def test_delete_file_needs_approval_flag_and_deletes(workspace: Path) -> None:
    assert delete_file.needs_approval and not delete_file.read_only
    assert call(delete_file, workspace, path="notes.txt") == "deleted notes.txt"
    assert not (workspace / "notes.txt").exists()
