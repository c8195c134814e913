"""Trying, and failing, to escape the built-in tools (issue 5, must show 1)."""

from __future__ import annotations

import asyncio
import json
import os
import secrets
import subprocess
import threading
import time
import tracemalloc
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from tether.cancel import CancelSignal
from tether.errors import RunCancelled
from tether.tools.base import ToolContext, ToolError, ToolResult, validate_arguments
from tether.tools.files import delete_file, edit_file, list_files, read_file, search_files, write_file
from tether.tools.shell import RunCommand, ShellSettings, blocked_reason
from tether.tools.web import WebFetch, WebSettings, check_address


def run_tool(tool: Any, cwd: Path, signal: CancelSignal | None = None, **args: Any) -> Any:
    ctx = ToolContext(cwd=cwd, signal=signal or CancelSignal())
    return asyncio.run(tool.execute(validate_arguments(tool, json.dumps(args)), ctx))


# --- files ---------------------------------------------------------------------------------------

ESCAPES = ["../outside.txt", "/etc/passwd", "sub/../../outside.txt", "./../outside.txt"]
FILE_CALLS = [
    (read_file, lambda p: {"path": p}),
    (write_file, lambda p: {"path": p, "content": "pwned"}),
    (edit_file, lambda p: {"path": p, "old_text": "secret", "new_text": "pwned"}),
    (delete_file, lambda p: {"path": p}),
]


@pytest.mark.parametrize("path", ESCAPES)
@pytest.mark.parametrize(("tool", "args"), FILE_CALLS, ids=lambda x: getattr(x, "name", ""))
def test_paths_outside_are_refused_by_every_file_tool(workspace: Path, tool: Any, args: Any, path: str) -> None:
    outside = workspace.parent / "outside.txt"
    outside.write_text("secret")
    with pytest.raises(ToolError, match="outside the working directory"):
        run_tool(tool, workspace, **args(path))
    assert outside.read_text() == "secret"


@pytest.mark.parametrize("pattern", ["../*", "/etc/*", "sub/../../*"])
def test_globs_outside_are_refused(workspace: Path, pattern: str) -> None:
    with pytest.raises(ToolError, match="outside the working directory"):
        run_tool(list_files, workspace, pattern=pattern)
    with pytest.raises(ToolError, match="outside the working directory"):
        run_tool(search_files, workspace, pattern="root", glob=pattern)


def test_symlink_to_etc_is_refused_everywhere(workspace: Path) -> None:
    os.symlink("/etc", workspace / "etc")
    os.symlink("/etc/passwd", workspace / "passwd")
    for tool, args in FILE_CALLS:
        for path in ("etc/passwd", "passwd"):
            with pytest.raises(ToolError, match="outside"):
                run_tool(tool, workspace, **args(path))
    listing = run_tool(list_files, workspace)
    assert "passwd" not in listing
    assert "root:" not in run_tool(search_files, workspace, pattern="root")


def test_symlink_loop_is_refused_with_a_reason(workspace: Path) -> None:
    os.symlink(workspace / "b", workspace / "a")
    os.symlink(workspace / "a", workspace / "b")
    with pytest.raises(ToolError, match="symlink loop|outside"):
        run_tool(read_file, workspace, path="a")
    assert "errors.log" in run_tool(list_files, workspace)  # listing survives the loop


# --- shell ---------------------------------------------------------------------------------------

OBFUSCATED = [
    "sudo touch MARK",
    "  sudo   touch MARK",
    "'sudo' touch MARK",
    "s\\udo touch MARK",
    "/usr/bin/sudo touch MARK",
    "bash -c 'sudo touch MARK'",
    'sh -c "doas touch MARK"',
    "true && su -c 'touch MARK'",
    "echo ok; reboot",
    "env X=1 shutdown -h now",
    "$(echo hi; mkfs.ext4 /dev/null)",
    "`halt`",
    "nice -n 5 poweroff",
    "rm -rf /",
    "rm -r -f ~",
    "bash -c \"bash -c 'dd if=/dev/zero of=MARK'\"",
]


@pytest.mark.parametrize("command", OBFUSCATED)
def test_blocked_commands_with_obfuscations_are_not_run(workspace: Path, command: str) -> None:
    assert blocked_reason(command) is not None
    with pytest.raises(ToolError, match="refused"):
        run_tool(RunCommand(), workspace, command=command)
    assert not (workspace / "MARK").exists()


def test_ordinary_commands_run_in_the_pinned_directory_without_stdin(workspace: Path) -> None:
    out = run_tool(RunCommand(), workspace, command="pwd; cat; echo done")
    assert isinstance(out, ToolResult) and not out.is_error
    assert str(workspace.resolve()) in out.content and "done" in out.content  # cat saw a closed stdin


def test_environment_is_built_not_inherited(workspace: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-leak-me-not")
    before = dict(os.environ)
    out = run_tool(RunCommand(ShellSettings(env={"DEPLOY_FLAG": "on"})), workspace, command="env")
    assert "sk-leak-me-not" not in out.content and "DEPLOY_FLAG=on" in out.content
    assert dict(os.environ) == before  # tether's own environment was not touched


FORK_BOMBLET = "trap '' TERM; for i in 1 2 3; do (trap '' TERM; exec sleep 61.{tag}) & done; exec sleep 61.{tag}"


def _tag() -> str:
    """A sleep duration of this test's own: no other test, nor another test run on the machine, sleeps it."""
    return f"{secrets.randbelow(10**9):09d}"


def _survivors(tag: str) -> list[str]:
    """Processes still running the tagged sleep, given a few seconds for SIGKILL to land."""
    for _ in range(50):
        out = subprocess.run(["pgrep", "-f", f"sleep 61\\.{tag}"], capture_output=True, text=True)
        if not out.stdout.split():
            return []
        time.sleep(0.1)
    return out.stdout.split()


def test_timeout_kills_children_that_ignore_sigterm(workspace: Path) -> None:
    tool = RunCommand(ShellSettings(timeout_s=0.5))
    tag = _tag()
    out = run_tool(tool, workspace, command=FORK_BOMBLET.format(tag=tag))
    assert "timed out" in out.content and out.is_error
    assert _survivors(tag) == []


def test_stop_kills_children_that_ignore_sigterm(workspace: Path) -> None:
    tag = _tag()

    async def go() -> None:
        signal = CancelSignal()
        asyncio.get_running_loop().call_later(0.5, signal.cancel, "user pressed Stop")
        ctx = ToolContext(cwd=workspace, signal=signal)
        await RunCommand().execute({"command": FORK_BOMBLET.format(tag=tag)}, ctx)

    with pytest.raises(RunCancelled):
        asyncio.run(go())
    assert _survivors(tag) == []


def test_a_100_mb_flood_is_capped_and_memory_stays_bounded(workspace: Path) -> None:
    tracemalloc.start()
    out = run_tool(RunCommand(), workspace, command="head -c 100000000 /dev/zero | tr '\\0' x")
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert "[output truncated at 1,000,000 bytes" in out.content
    assert "970,000 characters (0 lines) of the output left out" in out.content  # given 30,000 of them
    assert len(out.content) < 31_000
    assert peak < 20_000_000  # nowhere near the 100 MB the command tried to print


def test_a_long_output_gives_the_model_its_start_and_its_end(workspace: Path) -> None:
    """A build that prints 100,000 lines and then its error: the model was given all 589 kB of
    it (about 150,000 tokens, past many a context window) and the error only at its end. It gets the start and the end, cut at
    line ends, with what lies between counted; a short output is given whole."""
    command = "seq 1 100000; echo 'error: the build failed' >&2; exit 2"
    out = run_tool(RunCommand(), workspace, command=command)
    text = out.content
    assert out.is_error and text.startswith("exit code 2\n1\n2\n3\n")
    assert text.rstrip().endswith("99999\n100000\nerror: the build failed")
    assert 29_000 < len(text) < 31_000 and "lines) of the output left out here" in text
    whole = {"exit code 2", "error: the build failed"}
    numbers = [int(line) for line in text.splitlines() if line not in whole and "left out" not in line]
    head = numbers[: next(i for i, n in enumerate(numbers) if n != i + 1)]
    assert numbers == head + list(range(100_001 - (len(numbers) - len(head)), 100_001))  # no line cut in two
    settings = ShellSettings(shown_chars=100_000)
    assert len(run_tool(RunCommand(settings), workspace, command=command).content) > 99_000
    assert run_tool(RunCommand(), workspace, command="seq 1 5").content == "exit code 0\n1\n2\n3\n4\n5\n"


# --- web -----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "ip",
    [
        "127.0.0.1",
        "127.8.9.10",
        "10.1.2.3",
        "172.16.0.1",
        "172.31.255.254",
        "192.168.1.1",
        "169.254.169.254",
        "100.64.0.1",
        "0.0.0.0",
        "::1",
        "fc00::1",
        "fd12:3456::1",
        "fe80::1",
        "::ffff:127.0.0.1",
        "::ffff:10.0.0.1",
    ],
)
def test_every_private_range_is_refused(ip: str) -> None:
    with pytest.raises(ToolError, match="private or local"):
        check_address(ip, "example.test", 80, allow=())


@pytest.mark.parametrize("ip", ["93.184.216.34", "2606:4700::1111", "172.32.0.1", "11.0.0.1"])
def test_public_addresses_pass(ip: str) -> None:
    check_address(ip, "example.test", 80, allow=())


class _Site:
    def __init__(self, routes: dict[str, tuple[int, dict[str, str], bytes]]) -> None:
        self.hits: list[str] = []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *a: Any) -> None:
                return

            def do_GET(self) -> None:
                outer.hits.append(self.path)
                status, headers, body = routes.get(self.path, (404, {}, b"no"))
                self.send_response(status)
                for k, v in headers.items():
                    self.send_header(k, v)
                self.send_header("content-length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def url(self, path: str) -> str:
        return f"http://127.0.0.1:{self.port}{path}"


@pytest.fixture
def sites() -> Iterator[tuple[_Site, _Site]]:
    secret = _Site({"/secret": (200, {"content-type": "text/plain"}, b"internal token")})
    page = b"<html><head><title>Docs</title><script>x()</script></head><body><main><h1>Hello</h1><p>A <b>page</b>.</p></main></body></html>"
    public = _Site(
        {
            "/page": (200, {"content-type": "text/html; charset=utf-8"}, page),
            "/to-secret": (302, {"location": secret.url("/secret")}, b""),
            "/to-metadata": (301, {"location": "http://169.254.169.254/latest/meta-data/"}, b""),
            "/to-localhost": (302, {"location": f"http://localhost:{secret.port}/secret"}, b""),
            "/image": (200, {"content-type": "image/png"}, b"\x89PNG\r\n\x1a\nfake"),
            "/blob": (200, {"content-type": "application/octet-stream"}, b"\x00\x01"),
            "/big": (200, {"content-type": "text/plain"}, b"y" * 300_000),
        }
    )
    yield public, secret
    public.server.shutdown()
    secret.server.shutdown()


def fetch(site: _Site, path: str, **kw: Any) -> Any:
    return run_tool(WebFetch(WebSettings(allow=(f"127.0.0.1:{site.port}",), **kw)), Path("."), url=site.url(path))


def test_loopback_is_refused_by_address_and_by_name(sites: Any) -> None:
    _, secret = sites
    for url in (secret.url("/secret"), f"http://localhost:{secret.port}/secret"):
        with pytest.raises(ToolError, match="private or local"):
            run_tool(WebFetch(), Path("."), url=url)
    assert secret.hits == []


@pytest.mark.parametrize("path", ["/to-secret", "/to-metadata", "/to-localhost"])
def test_a_redirect_from_an_allowed_url_to_a_private_one_is_refused(sites: Any, path: str) -> None:
    public, secret = sites
    with pytest.raises(ToolError, match="private or local"):
        fetch(public, path)
    assert public.hits == [path] and secret.hits == []


def test_allowed_pages_become_markdown_images_images_and_binaries_are_refused(sites: Any) -> None:
    public, _ = sites
    text = fetch(public, "/page")
    assert text.startswith("# Docs") and "# Hello" in text and "**page**" in text and "x()" not in text
    image = fetch(public, "/image")
    assert isinstance(image, ToolResult) and image.content[1].media_type == "image/png"
    with pytest.raises(ToolError, match="cannot read as text"):
        fetch(public, "/blob")
    capped = fetch(public, "/big", max_bytes=100_000, max_chars=50_000)
    assert "[download stopped at 100,000 bytes]" in capped and "[cut at 50,000 characters]" in capped
    with pytest.raises(ToolError, match="not an http"):
        run_tool(WebFetch(), Path("."), url="file:///etc/passwd")
