"""Round 3 of attacks on the built-in tools: what the earlier attack files (confinement, sandbox,
security, web walls) left out.

- a command that closes (or redirects) its own output still has the rest of its timeout;
- the read cache is not fooled by a rewrite in place that puts the old mtime back;
- a web page that trickles bytes forever ends at the fetch's timeout; converting a page does not
  hold the event loop, and a page nested thousands deep is read (it failed with a reason);
- a directory tree deeper than Python's recursion limit is listed and searched;
- edit_file refuses a file too large to hold in memory instead of reading all of it.
"""

from __future__ import annotations

import asyncio
import json
import os
import socket
import subprocess
import sys
import threading
import tracemalloc
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from tether import Agent, run
from tether.cancel import CancelSignal
from tether.harness.state import RunState
from tether.messages import AssistantMessage, Message, ToolMessage
from tether.providers.scripted import Reply
from tether.testing import FunctionModel
from tether.tools.base import ToolContext, ToolError, ToolResult, validate_arguments
from tether.tools.files import delete_file, edit_file, list_files, read_file, search_files, write_file
from tether.tools.shell import RunCommand, ShellSettings, blocked_reason
from tether.tools.web import WebFetch, WebSettings

HANG = 60.0  # seconds: reached only when something is broken


def run_tool(tool: Any, cwd: Path, **args: Any) -> Any:
    ctx = ToolContext(cwd=cwd, signal=CancelSignal())

    async def call() -> Any:
        return await asyncio.wait_for(tool.execute(validate_arguments(tool, json.dumps(args)), ctx), HANG)

    return asyncio.run(call())


# --- the shell -----------------------------------------------------------------------------------


@pytest.mark.skipif(not sys.platform.startswith(("linux", "darwin")), reason="run_command needs POSIX")
def test_a_command_that_closes_its_output_keeps_the_rest_of_its_timeout(tmp_path: Path) -> None:
    """Without namespaces (the keeper, or macOS), the end of the output was taken for the end of the
    command: 5 s later it was killed and reported as timed out after 30 s, its work undone."""
    settings = ShellSettings(sandbox="off", namespaces=False, timeout_s=HANG)
    command = "exec >/dev/null 2>&1; sleep 5.5; echo finished > marker"
    out = run_tool(RunCommand(settings), tmp_path, command=command)
    assert isinstance(out, ToolResult)
    assert isinstance(out.content, str) and out.content.startswith("exit code 0"), out.content
    assert "timed out" not in out.content
    assert (tmp_path / "marker").read_text() == "finished\n"


@pytest.mark.parametrize("word", ["/", "f(){ x", "function x{ "])
def test_the_blocklist_reads_a_long_word_in_linear_time(word: str) -> None:
    """The fork-bomb pattern was tried at every character of a word, each try scanning to the end: a
    10,000-character command (the tool's limit) took 1-3.4 s to check, on the event loop and holding
    the GIL, so every stream, Stop and tool thread of a server stood still; 300,000 took minutes.
    Judged in a child process (a regex holds the GIL: a thread's join could not time out), with a
    hang detector only."""
    judge = "import sys; from tether.tools.shell import blocked_reason; print(blocked_reason((sys.argv[1] * 300_000)[:300_000]))"
    try:
        done = subprocess.run(
            [sys.executable, "-c", judge, word], capture_output=True, text=True, timeout=HANG, check=False
        )
    except subprocess.TimeoutExpired:
        pytest.fail(f"still judging a 300,000-character command after {HANG:g} s")
    assert (done.returncode, done.stdout.strip()) == (0, "None"), done.stderr
    assert blocked_reason("x" * 9000 + "; :(){ :|:& };:") == "a fork bomb is blocked"


# --- the read cache ------------------------------------------------------------------------------


def test_read_file_is_read_again_after_a_rewrite_in_place_that_restores_the_mtime(tmp_path: Path) -> None:
    """``cp -p``, ``touch -r`` and ``tar x`` put an old mtime back on a file they rewrote in place (same
    inode, same size): the cache handed the model the old text as the file's."""
    notes = tmp_path / "notes.txt"
    notes.write_text("version 1\n")

    def reply(messages: list[Message], request: Any) -> Reply | str:
        n = sum(isinstance(m, AssistantMessage) for m in messages)
        if n == 1:  # another process rewrites the file and puts its times back
            before = notes.stat()
            with notes.open("r+") as f:
                f.write("version 2\n")
            os.utime(notes, ns=(before.st_atime_ns, before.st_mtime_ns))
        return Reply(calls=((f"c{n}", "read_file", {"path": "notes.txt"}),)) if n < 2 else "done"

    state = RunState()
    asyncio.run(run(Agent(FunctionModel(reply), tools=[read_file], cwd=tmp_path), "go", state=state))
    results = [m for m in state.messages if isinstance(m, ToolMessage)]
    assert [m.status for m in results] == ["ok", "ok"]
    assert "version 2" in results[1].text


# --- the web -------------------------------------------------------------------------------------


@pytest.fixture
def trickle() -> Iterator[int]:
    """A loopback server that answers 200 and then sends one byte every 50 ms, forever."""
    server = socket.create_server(("127.0.0.1", 0))
    stop = threading.Event()

    def serve() -> None:
        conn, _ = server.accept()
        with conn:
            conn.recv(65536)
            try:
                conn.sendall(b"HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\n\r\n")
                while not stop.wait(0.05):
                    conn.sendall(b"x")
            except OSError:  # the client went away: what the test wants
                return

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    yield server.getsockname()[1]
    stop.set()
    server.close()
    thread.join(HANG)


def test_a_page_that_trickles_forever_ends_at_the_fetch_timeout(trickle: int) -> None:
    """httpx's timeout is per read, so a byte now and then held web_fetch (and the run) for ever."""
    fetch = WebFetch(WebSettings(allow=(f"127.0.0.1:{trickle}",), timeout_s=1))
    with pytest.raises(ToolError, match=r"did not finish within 1 s"):
        run_tool(fetch, Path("."), url=f"http://127.0.0.1:{trickle}/")


@pytest.fixture
def pages() -> Iterator[str]:
    """A loopback server with an ordinary page and one whose tags nest 5,000 deep; its base URL."""
    routes = {
        "/page": b"<html><head><title>Docs</title></head><body><main><p>Hello.</p></main></body></html>",
        "/nested": b"<html><body>" + b"<div>" * 5000 + b"deep" + b"</div>" * 5000 + b"</body></html>",
    }

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *a: Any) -> None:
            return

        def do_GET(self) -> None:
            body = routes[self.path]
            self.send_response(200)
            self.send_header("content-type", "text/html; charset=utf-8")
            self.send_header("content-length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def test_converting_a_page_leaves_the_event_loop_free(pages: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """HTML was parsed and converted on the event loop: a 2 MB page held it for seconds (11 s measured
    on a busy machine), stalling every stream, Stop and run sharing the loop. Here the conversion
    waits for the loop to move; on the loop itself it could only give up."""
    from tether.tools import web

    started, moved = threading.Event(), threading.Event()
    convert = web.html_to_markdown

    def slow_convert(html: str) -> str:
        started.set()
        return convert(html) if moved.wait(10) else "the event loop stood still while the page converted"

    monkeypatch.setattr(web, "html_to_markdown", slow_convert)

    async def fetch_while_the_loop_ticks() -> Any:
        fetching = asyncio.ensure_future(
            WebFetch(WebSettings(allow=(pages,))).execute(
                {"url": f"http://{pages}/page"}, ToolContext(cwd=Path("."), signal=CancelSignal())
            )
        )
        while not fetching.done():
            await asyncio.sleep(0.01)
            if started.is_set():  # the conversion has begun, and the loop still moves
                moved.set()
        return await fetching

    out = asyncio.run(asyncio.wait_for(fetch_while_the_loop_ticks(), HANG))
    assert "Hello." in out and "stood still" not in out


def test_a_page_nested_thousands_deep_is_read(pages: str) -> None:
    """It was a failed fetch ("nests its HTML too deeply"); what is that deep comes as its words."""
    out = run_tool(WebFetch(WebSettings(allow=(pages,))), Path("."), url=f"http://{pages}/nested")
    assert "deep" in str(out)


# --- the file tools ------------------------------------------------------------------------------


def test_a_tree_deeper_than_the_recursion_limit_is_listed_and_searched(tmp_path: Path) -> None:
    """A cloned repository can carry a directory 1,500 levels deep: list_files and search_files
    failed with RecursionError, so not even the files at the top could be listed."""
    (tmp_path / "top.txt").write_text("timeout at the top\n")
    fd = os.open(tmp_path, os.O_RDONLY)
    try:
        for _ in range(1500):  # beneath descriptors: the whole path is longer than PATH_MAX
            os.mkdir("d", dir_fd=fd)
            child = os.open("d", os.O_RDONLY, dir_fd=fd)
            os.close(fd)
            fd = child
        with open(os.open("deep.txt", os.O_WRONLY | os.O_CREAT, 0o644, dir_fd=fd), "w") as f:
            f.write("timeout at the bottom\n")
    finally:
        os.close(fd)
    deep = "d/" * 1500 + "deep.txt"
    try:
        listing = run_tool(list_files, tmp_path)
        assert "top.txt\t19 bytes" in listing and f"{deep}\t22 bytes" in listing
        found = run_tool(search_files, tmp_path, pattern="timeout")
        assert "top.txt:1: timeout at the top" in found and f"{deep}:1: timeout at the bottom" in found
    finally:
        remove_deep_tree(tmp_path, 1500)


def remove_deep_tree(top: Path, depth: int) -> None:
    """From the bottom up, beneath descriptors (shutil.rmtree recurses, and gives up at this depth)."""
    fds = [os.open(top, os.O_RDONLY)]
    for _ in range(depth):
        fds.append(os.open("d", os.O_RDONLY, dir_fd=fds[-1]))
    os.unlink("deep.txt", dir_fd=fds[-1])
    while len(fds) > 1:
        os.close(fds.pop())
        os.rmdir("d", dir_fd=fds[-1])
    os.close(fds[0])


def test_edit_file_refuses_a_file_too_large_to_hold_without_reading_it_all(tmp_path: Path) -> None:
    """edit_file read the whole file into memory (several times over): one call on a big log could
    take a server's memory. Now it says what to use instead, and the file is left as it was."""
    big = tmp_path / "big.log"
    with big.open("wb") as f:
        f.write(b"needle\n")
        f.truncate(200 * 1024 * 1024)  # sparse: no disk used
    before = big.stat()
    tracemalloc.start()
    try:
        with pytest.raises(ToolError, match=r"edit_file only edits files up to .*run_command") as refused:
            run_tool(edit_file, tmp_path, path="big.log", old_text="needle", new_text="pin")
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert "big.log" in str(refused.value)
    assert peak < 100 * 1024 * 1024, f"{peak:,} bytes held"
    after = big.stat()
    assert (after.st_ino, after.st_size, after.st_mtime_ns) == (before.st_ino, before.st_size, before.st_mtime_ns)


LONG = "a" * 300  # one name over the 255 bytes a file system allows


@pytest.mark.parametrize(
    ("tool", "args"),
    [
        (read_file, {"path": LONG}),
        (read_file, {"path": f"{LONG}/notes.txt"}),
        (write_file, {"path": LONG, "content": "x"}),
        (write_file, {"path": f"sub/{LONG}/notes.txt", "content": "x"}),
        (edit_file, {"path": LONG, "old_text": "a", "new_text": "b"}),
        (delete_file, {"path": LONG}),
    ],
    ids=lambda x: getattr(x, "name", ""),
)
def test_a_name_too_long_for_the_file_system_is_a_message_not_an_os_error(
    tmp_path: Path, tool: Any, args: dict[str, Any]
) -> None:
    """The model saw '[Errno 36] File name too long: 'aaaa...'' (an OSError, 300 characters of it)."""
    with pytest.raises(ToolError, match=r"cannot use 'a{40}\.\.\.a{20} \(300 characters\)': File name too long\. Give"):
        run_tool(tool, tmp_path, **args)


def test_edit_file_changes_only_the_text_it_replaces_in_a_crlf_file(tmp_path: Path) -> None:
    """edit_file turned every line break of the file into '\\n': one line edited in a Windows project's
    file rewrote all of its lines (and a lone '\\r' inside a line became a line break)."""
    script = tmp_path / "build.bat"
    script.write_bytes(b"@echo off\r\nset A=1\r\nset B=2\r\necho %A%\rnot a break\r\n")
    run_tool(edit_file, tmp_path, path="build.bat", old_text="set A=1\nset B=2", new_text="set A=3\nset B=4\nset C=5")
    assert script.read_bytes() == b"@echo off\r\nset A=3\r\nset B=4\r\nset C=5\r\necho %A%\rnot a break\r\n"
    # what the model reads is what it can match; the one occurrence rule still holds
    with pytest.raises(ToolError, match="appears 3 times"):
        run_tool(edit_file, tmp_path, path="build.bat", old_text="set ", new_text="SET ")
    unix = tmp_path / "notes.txt"
    unix.write_bytes(b"one\ntwo\n")
    run_tool(edit_file, tmp_path, path="notes.txt", old_text="one\ntwo", new_text="1\r\n2")
    assert unix.read_bytes() == b"1\n2\n"


SEARCH = """
import asyncio, sys
from pathlib import Path
from tether.cancel import CancelSignal
from tether.tools.base import ToolContext, ToolError
from tether.tools.files import search_files
try:
    print(asyncio.run(search_files.execute({"pattern": sys.argv[2]}, ToolContext(cwd=Path(sys.argv[1]), signal=CancelSignal()))))
except ToolError as exc:
    print("ToolError:", exc)
"""


def search_in_a_child(cwd: Path, pattern: str) -> str:
    """A runaway regex holds the GIL: only another process can time it out."""
    try:
        done = subprocess.run(
            [sys.executable, "-c", SEARCH, str(cwd), pattern], capture_output=True, text=True, timeout=HANG
        )
    except subprocess.TimeoutExpired:
        pytest.fail(f"search_files({pattern!r}) still ran after {HANG:g} s, holding the whole process")
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_a_regex_that_backtracks_for_hours_is_refused_before_it_runs(tmp_path: Path) -> None:
    """A model (or an injection it read) could pass (a+)+$: on a 40-character line Python's re
    backtracks for hours holding the GIL, so the event loop, every run and Stop froze with it."""
    (tmp_path / "line.txt").write_text("a" * 40 + "b\n")
    refused = search_in_a_child(tmp_path, "(a+)+$")
    assert refused.startswith("ToolError: refused: '(a+)+$' repeats a repetition"), refused
    assert search_in_a_child(tmp_path, "(a|b)+$").startswith("line.txt:1: aaaa")  # alternation stays allowed
