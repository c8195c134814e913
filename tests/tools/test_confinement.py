"""The file tools cannot be led outside the working directory: not by links planted in it, not by a
thread that swaps a directory for a link while they work, not by FIFOs or huge files (issue 8)."""

from __future__ import annotations

import asyncio
import json
import os
import stat
import sys
import threading
import tracemalloc
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.planted import promptly
from tether.cancel import CancelSignal
from tether.tools.base import ToolContext, ToolError, validate_arguments
from tether.tools.files import delete_file, edit_file, list_files, read_file, search_files, write_file

SECRET = "SECRET-d41d8cd9"


def run_tool(tool: Any, cwd: Path, **args: Any) -> str:
    ctx = ToolContext(cwd=cwd, signal=CancelSignal())
    return str(asyncio.run(tool.execute(validate_arguments(tool, json.dumps(args)), ctx)))


def call_direct(tool: Any, cwd: Path, **args: Any) -> str:
    """The tool's function in this thread (no event loop): the race test calls it thousands of times."""
    return str(tool.fn(ToolContext(cwd=cwd, signal=CancelSignal()), **args))


def snapshot(directory: Path) -> dict[str, tuple[str, bytes]]:
    """Every entry under ``directory`` with its kind and content (files) or target (links)."""
    out: dict[str, tuple[str, bytes]] = {}
    for dirpath, dirnames, filenames in os.walk(directory):
        for name in dirnames + filenames:
            p = Path(dirpath) / name
            if p.is_symlink():
                out[str(p.relative_to(directory))] = ("link", os.readlink(p).encode())
            elif p.is_file():
                out[str(p.relative_to(directory))] = ("file", p.read_bytes())
            else:
                out[str(p.relative_to(directory))] = ("dir", b"")
    return out


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    """A directory beside the workspace holding a secret and a file an escape would overwrite."""
    d = tmp_path / "outside"
    d.mkdir()
    (d / "inside.txt").write_text(f"{SECRET}\nharmless\n")
    (d / "secret-name.txt").write_text(f"{SECRET}\n")
    return d


# --- 1. globs through a symlinked directory ------------------------------------------------------


def test_search_glob_does_not_read_through_a_symlinked_directory(workspace: Path, outside: Path) -> None:
    os.symlink(outside, workspace / "link")
    for glob in ("link/*", "link/**/*", "*/*", "**/*", "l*/inside.txt"):
        assert SECRET not in run_tool(search_files, workspace, pattern="SECRET", glob=glob)


def test_list_glob_does_not_list_through_a_symlinked_directory(workspace: Path, outside: Path) -> None:
    os.symlink(outside, workspace / "link")
    for pattern in ("link/*", "*/*", "**/*", "link/secret-name.txt"):
        assert "secret-name.txt\t" not in run_tool(list_files, workspace, pattern=pattern)


def test_relative_link_to_a_directory_inside_is_not_descended_but_named(workspace: Path) -> None:
    (workspace / "docs").mkdir()
    (workspace / "docs" / "guide.md").write_text("hello")
    os.symlink("docs", workspace / "docs-link")
    out = run_tool(list_files, workspace, pattern="docs-link/*")
    assert "docs-link" in out and "docs" in out and "guide.md" not in out
    listing = run_tool(list_files, workspace)
    assert "docs/guide.md" in listing and "docs-link/guide.md" not in listing


@pytest.mark.parametrize(
    "pattern",
    [
        "**/*",
        "*",
        "*.txt",
        "a/*",
        "a/**/*.py",
        "**/b/*",
        "?/*",
        "[ab]/**/*",
        "**/*.py",
        "a/b/c.py",
        ".*",
        "**/.hidden/*",
    ],
)
def test_globs_list_what_pathlib_lists(tmp_path: Path, pattern: str) -> None:
    for rel in ["x.txt", "y.py", "a/z.txt", "a/b/c.py", "a/b/d/e.py", "b/f.txt", "b/.hidden/g", ".env", "c/b/h.py"]:
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text("1")
    expected = [p.relative_to(tmp_path).as_posix() for p in sorted(tmp_path.glob(pattern)) if p.is_file()]
    listed = run_tool(list_files, tmp_path, pattern=pattern)
    assert [row.split("\t")[0] for row in listed.splitlines() if "\t" in row] == expected


# --- 2. planted temp-file links ------------------------------------------------------------------


@pytest.mark.parametrize("tool", ["write_file", "edit_file"])
def test_planted_temp_link_cannot_redirect_a_write(workspace: Path, outside: Path, tool: str) -> None:
    target = outside / "inside.txt"
    os.symlink(target, workspace / ".notes.txt.tether-tmp")
    os.symlink(target, workspace / ".notes.txt.tether-tmp.tmp")
    before = snapshot(outside)
    if tool == "write_file":
        run_tool(write_file, workspace, path="notes.txt", content="rewritten")
        expected = "rewritten"
    else:
        original = (workspace / "notes.txt").read_text()
        word = original.split()[0]
        run_tool(edit_file, workspace, path="notes.txt", old_text=word, new_text="EDITED")
        expected = original.replace(word, "EDITED", 1)
    assert snapshot(outside) == before
    notes = workspace / "notes.txt"
    assert not notes.is_symlink() and notes.read_text() == expected
    assert [p.name for p in workspace.iterdir() if p.name.endswith(".tether-tmp") and not p.is_symlink()] == []


def test_write_keeps_the_mode_of_the_file_it_replaces(workspace: Path) -> None:
    script = workspace / "run.sh"
    script.write_text("echo hi\n")
    script.chmod(0o750)
    run_tool(edit_file, workspace, path="run.sh", old_text="hi", new_text="there")
    assert stat.S_IMODE(script.stat().st_mode) == 0o750 and script.read_text() == "echo there\n"


# --- links inside the workspace ------------------------------------------------------------------


def test_links_that_stay_inside_are_followed(workspace: Path) -> None:
    (workspace / "docs").mkdir()
    os.symlink("../notes.txt", workspace / "docs" / "notes-link.txt")
    os.symlink(workspace / "errors.log", workspace / "abs-link.log")  # absolute, but inside
    os.symlink("docs", workspace / "docs-link")
    notes = (workspace / "notes.txt").read_text()
    assert run_tool(read_file, workspace, path="docs/notes-link.txt") == notes.rstrip("\n")
    assert run_tool(read_file, workspace, path="docs-link/notes-link.txt") == notes.rstrip("\n")
    assert run_tool(read_file, workspace, path="abs-link.log").startswith(
        (workspace / "errors.log").read_text().splitlines()[0]
    )
    assert run_tool(read_file, workspace, path="docs/../notes.txt") == notes.rstrip("\n")
    run_tool(write_file, workspace, path="docs/notes-link.txt", content="via link")
    assert (workspace / "docs" / "notes-link.txt").is_symlink() and (workspace / "notes.txt").read_text() == "via link"
    listing = run_tool(list_files, workspace)
    assert "docs/notes-link.txt\t8 bytes (symbolic link to ../notes.txt)" in listing


def test_delete_removes_the_link_not_the_file_it_points_to(workspace: Path) -> None:
    os.symlink("notes.txt", workspace / "notes-link.txt")
    out = run_tool(delete_file, workspace, path="notes-link.txt")
    assert "symbolic link" in out
    assert not (workspace / "notes-link.txt").is_symlink() and (workspace / "notes.txt").is_file()


def test_absolute_path_inside_the_workspace_is_accepted(workspace: Path) -> None:
    assert run_tool(read_file, workspace, path=str(workspace / "notes.txt")) == (
        (workspace / "notes.txt").read_text().rstrip("\n")
    )


def test_link_leading_outside_says_which_link_and_where(workspace: Path, outside: Path) -> None:
    (workspace / "sub").mkdir()
    os.symlink("../../outside", workspace / "sub" / "out")
    with pytest.raises(ToolError) as info:
        run_tool(read_file, workspace, path="sub/out/inside.txt")
    message = str(info.value)
    assert "outside the working directory" in message and "sub/out" in message and "../../outside" in message


def test_write_creates_directories_and_refuses_a_file_in_the_way(workspace: Path) -> None:
    run_tool(write_file, workspace, path="a/b/c.txt", content="deep")
    assert (workspace / "a" / "b" / "c.txt").read_text() == "deep"
    with pytest.raises(ToolError, match="not a directory"):
        run_tool(write_file, workspace, path="notes.txt/x.txt", content="no")
    with pytest.raises(ToolError, match="is a directory"):
        run_tool(write_file, workspace, path="a/b", content="no")


# --- 4. FIFOs, devices, memory -------------------------------------------------------------------


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs on this platform")
def test_fifo_is_refused_without_blocking(workspace: Path) -> None:
    fifo = workspace / "pipe"
    os.mkfifo(fifo)
    for tool, args in [
        (read_file, {"path": "pipe"}),
        (read_file, {"path": "pipe", "start_line": 5, "max_lines": 1}),
        (edit_file, {"path": "pipe", "old_text": "a", "new_text": "b"}),
    ]:
        with pytest.raises(ToolError, match="FIFO") as info:
            promptly(lambda t=tool, a=args: run_tool(t, workspace, **a), fifo, seconds=10)
        assert "only reads regular files" in str(info.value) or "only edits regular files" in str(info.value)
    with pytest.raises(ToolError, match="FIFO"):
        promptly(lambda: run_tool(write_file, workspace, path="pipe", content="x"), fifo, seconds=10)
    assert "pipe" not in promptly(lambda: run_tool(list_files, workspace), fifo, seconds=10)
    assert "no matches" in promptly(
        lambda: run_tool(search_files, workspace, pattern="x", glob="pipe"), fifo, seconds=10
    )
    assert stat.S_ISFIFO(fifo.lstat().st_mode)


def test_socket_is_refused(workspace: Path) -> None:
    import socket

    path = workspace / "s"
    if len(str(path)) > 100:
        pytest.skip("the workspace path is too long for a unix socket")
    with socket.socket(socket.AF_UNIX) as sock:
        sock.bind(str(path))
        with pytest.raises(ToolError, match="socket"):
            run_tool(read_file, workspace, path="s")
        assert "no matches" in run_tool(search_files, workspace, pattern="x", glob="s")


@pytest.fixture
def big_file(tmp_path: Path) -> Iterator[Path]:
    """About 50 MB of numbered lines."""
    ws = tmp_path / "big"
    ws.mkdir()
    line = b"%08d " + b"x" * 90 + b"\n"
    with open(ws / "big.log", "wb") as f:
        for block in range(500):
            f.write(b"".join(line % (block * 1000 + i + 1) for i in range(1000)))
    yield ws


def test_reading_ten_lines_of_a_big_file_keeps_memory_small(big_file: Path) -> None:
    tracemalloc.start()
    try:
        out = call_direct(read_file, big_file, path="big.log", start_line=250_000, max_lines=10)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert out.startswith("00250000 x") and "00250009 x" in out and "00250010" not in out.split("[")[0]
    assert "start_line=250010" in out and "of 500000" in out
    assert peak < 5_000_000, f"peak {peak} bytes"


def test_one_enormous_line_is_cut_without_reading_it_all(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    with open(ws / "one-line.txt", "wb") as f:
        for _ in range(40):
            f.write(b"y" * 1_000_000)
    tracemalloc.start()
    try:
        out = call_direct(read_file, ws, path="one-line.txt", max_lines=3)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert out.startswith("yyyy") and "[cut at 100000 characters: line 1 alone is longer" in out
    assert peak < 5_000_000, f"peak {peak} bytes"


def test_line_notes_count_lines_and_ranges_are_exact(workspace: Path) -> None:
    (workspace / "n.txt").write_text("".join(f"l{i}\r\n" for i in range(1, 8)))
    assert run_tool(read_file, workspace, path="n.txt", start_line=2, max_lines=3) == (
        "l2\nl3\nl4\n[lines 2-4 of 7; call read_file with start_line=5 to read further]"
    )
    assert run_tool(read_file, workspace, path="n.txt", start_line=6) == "l6\nl7"
    assert "past the end" in run_tool(read_file, workspace, path="n.txt", start_line=50)
    (workspace / "empty.txt").write_text("")
    assert run_tool(read_file, workspace, path="empty.txt") == ""


def test_binary_detection_and_utf8_replacement_still_hold(workspace: Path) -> None:
    (workspace / "blob.bin").write_bytes(b"text\x00more" * 10)
    with pytest.raises(ToolError, match=r"binary file \(90 bytes\)"):
        run_tool(read_file, workspace, path="blob.bin")
    (workspace / "latin1.txt").write_bytes(b"caf\xe9\nna\xefve\n")
    assert run_tool(read_file, workspace, path="latin1.txt") == "caf\ufffd\nna\ufffdve"
    assert "latin1.txt:1: caf\ufffd" in run_tool(search_files, workspace, pattern="caf")


# --- 3. a thread swapping a directory for a link -------------------------------------------------


def exchange_function() -> Callable[[Path, Path], None] | None:
    """Atomically exchange two names (Linux ``renameat2``, macOS ``renamex_np``), or None."""
    import ctypes
    import ctypes.util

    libc = ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True)
    if sys.platform.startswith("linux") and hasattr(libc, "renameat2"):

        def call(a: Path, b: Path) -> int:
            return int(libc.renameat2(-100, os.fsencode(a), -100, os.fsencode(b), 2))  # AT_FDCWD, RENAME_EXCHANGE
    elif sys.platform == "darwin" and hasattr(libc, "renamex_np"):

        def call(a: Path, b: Path) -> int:
            return int(libc.renamex_np(os.fsencode(a), os.fsencode(b), 2))  # RENAME_SWAP
    else:
        return None

    def exchange(a: Path, b: Path) -> None:
        if call(a, b) != 0:
            err = ctypes.get_errno()
            raise OSError(err, os.strerror(err))

    return exchange


class Swapper:
    """Keeps turning ``workspace/swap`` from a real directory into a link to ``outside`` and back
    with an atomic exchange (``mode="dir"``), or from a link to a directory inside into a link to
    ``outside`` and back with an atomic rename (``mode="link"``): ``swap`` always exists."""

    def __init__(self, workspace: Path, outside: Path, mode: str) -> None:
        self.ws, self.outside, self.mode, self.swaps = workspace, outside, mode, 0
        self.stop = threading.Event()
        self.exchange = exchange_function()
        real = workspace / ("swap" if mode == "dir" else "real")
        real.mkdir()
        (real / "inside.txt").write_text("harmless\n")
        os.symlink(outside, workspace / ".evil")
        if mode == "link":
            os.symlink("real", workspace / ".good")
            os.symlink("real", workspace / "swap")
        self.thread = threading.Thread(target=self.run, daemon=True)

    def run(self) -> None:
        ws = self.ws
        while not self.stop.is_set():
            if self.mode == "dir":
                assert self.exchange is not None
                self.exchange(ws / "swap", ws / ".evil")
            else:
                os.rename(ws / ".evil", ws / "swap")  # swap now leads outside
                os.symlink(self.outside, ws / ".evil")
                os.rename(ws / ".good", ws / "swap")  # and back inside
                os.symlink("real", ws / ".good")
            self.swaps += 1

    def __enter__(self) -> Swapper:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        self.thread.join(10)


CALLS: list[tuple[Any, dict[str, Any]]] = [
    (read_file, {"path": "swap/inside.txt"}),
    (read_file, {"path": "swap/inside.txt", "start_line": 1, "max_lines": 1}),
    (write_file, {"path": "swap/inside.txt", "content": "harmless\n"}),
    (write_file, {"path": "swap/new.txt", "content": "new\n"}),
    (edit_file, {"path": "swap/inside.txt", "old_text": "harmless", "new_text": "harmless"}),
    (delete_file, {"path": "swap/new.txt"}),
    (search_files, {"pattern": "SECRET|harmless", "glob": "swap/*"}),
    (search_files, {"pattern": "SECRET", "glob": "**/*"}),
    (list_files, {"pattern": "swap/*"}),
    (list_files, {}),
]


@pytest.mark.parametrize("mode", ["dir", "link"])
def test_a_racing_thread_never_leads_a_tool_outside(
    workspace: Path, outside: Path, mode: str, capsys: pytest.CaptureFixture[str]
) -> None:
    if mode == "dir" and exchange_function() is None:
        pytest.skip("no atomic exchange of two names on this platform")
    before = snapshot(outside)
    results = {"ok": 0, "refused": 0}
    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-5)  # switch threads often so the swaps land between system calls
    try:
        with Swapper(workspace, outside, mode) as swapper:
            # How often a swap lands inside a call depends on the machine's scheduling: go on until
            # both outcomes have been seen often enough (bounded), rather than for a fixed count.
            i = 0
            while i < 40_000 and (i < 1000 or results["ok"] <= 100 or results["refused"] <= 100):
                tool, args = CALLS[i % len(CALLS)]
                i += 1
                try:
                    out = call_direct(tool, workspace, **args)
                except ToolError as exc:
                    out = str(exc)
                    results["refused"] += 1
                else:
                    results["ok"] += 1
                assert SECRET not in out and "secret-name" not in out, (tool.name, args, out)
                if i % 50 == 0:
                    assert snapshot(outside) == before, (tool.name, args)
    finally:
        sys.setswitchinterval(interval)
    assert snapshot(outside) == before
    assert swapper.swaps > 50 and results["ok"] > 100 and results["refused"] > 100
    with capsys.disabled():
        print(f"\n[race {mode}] swaps={swapper.swaps} ok={results['ok']} refused={results['refused']}")


# Root ignores directory permissions, so this one runs only unprivileged; the disk-full test below
# checks the same promise for everyone, CI's root included.
@pytest.mark.skipif(os.geteuid() == 0, reason="root writes into read-only directories")
def test_a_failed_write_is_a_message_and_leaves_the_file(workspace: Path) -> None:
    (workspace / "locked").mkdir()
    (workspace / "locked" / "a.txt").write_text("before")
    (workspace / "locked").chmod(0o555)
    try:
        with pytest.raises(ToolError, match="could not write locked/a.txt: Permission denied. Nothing was changed"):
            run_tool(write_file, workspace, path="locked/a.txt", content="after")
    finally:
        (workspace / "locked").chmod(0o755)
    assert (workspace / "locked" / "a.txt").read_text() == "before"


def test_a_disk_that_fills_mid_write_is_a_message_and_leaves_the_file(
    workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import errno

    from tether.tools import _confine

    (workspace / "a.txt").write_text("before")
    real_write, calls = os.write, []

    def filling(fd: int, data: Any) -> int:
        calls.append(1)
        if len(calls) > 1:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        return real_write(fd, bytes(data[:10]))  # the first chunk fits, the disk fills after

    monkeypatch.setattr(_confine.os, "write", filling)
    with pytest.raises(ToolError, match="could not write a.txt: No space left on device. Nothing was changed"):
        run_tool(write_file, workspace, path="a.txt", content="after " * 100)
    monkeypatch.undo()
    assert (workspace / "a.txt").read_text() == "before"
    assert [p.name for p in workspace.iterdir() if "tether-tmp" in p.name] == [], "no temporary file is left"


def test_a_directory_swapped_in_before_the_rename_is_a_message(
    workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from tether.tools import _confine

    real_rename = os.rename

    def swap_then_rename(src: str, dst: str, **kw: Any) -> None:
        os.unlink(workspace / "notes.txt")
        os.mkdir(workspace / "notes.txt")
        real_rename(src, dst, **kw)

    monkeypatch.setattr(_confine.os, "rename", swap_then_rename)
    with pytest.raises(ToolError, match="could not write notes.txt: Is a directory. Nothing was changed"):
        run_tool(write_file, workspace, path="notes.txt", content="after")
    assert [p.name for p in workspace.iterdir() if "tether-tmp" in p.name] == []


def test_without_the_system_calls_the_tools_refuse_instead_of_walking_unsafely(
    workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from tether.tools import _confine

    monkeypatch.setattr(_confine, "SUPPORTED", False)
    with pytest.raises(ToolError, match="not available on this platform"):
        run_tool(read_file, workspace, path="notes.txt")
