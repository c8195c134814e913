"""Round 4 of attacks on the built-in tools: what rounds 1-3 left alone.

- a regex whose repetitions overlap ((a|aa)+$, (.*a){12}x) slipped past the nested-repeat check and
  held the whole process for hours: the search now ends at its deadline, or at Stop;
- a file name that is not UTF-8 reached the model as U+FFFD, a name it could not give back, and a
  line break in a name split a listing's row in two;
- a write through a hard link said nothing of the other names that keep the old content;
- web_fetch: gzip inside gzip expanded in one call to whatever the server liked (memory), an
  international domain name failed with a raw UnicodeEncodeError, and a page of unclosed tags or
  of spaces held the GIL in quadratic regexes for hours (the fetch's timeout could not fire);
  loopback spelled as a number or inside IPv6 stays refused.
"""

from __future__ import annotations

import asyncio
import gzip
import json
import os
import subprocess
import sys
import threading
import tracemalloc
import zlib
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
from tether.tools.files import (
    EDIT_TOOLS,
    FILE_TOOLS,
    edit_file,
    list_files,
    read_file,
    search_files,
    write_file,
)
from tether.tools.web import WebFetch, WebSettings

HANG = 60.0  # seconds: reached only when something is broken


def run_tool(tool: Any, cwd: Path, **args: Any) -> Any:
    ctx = ToolContext(cwd=cwd, signal=CancelSignal())

    async def call() -> Any:
        return await asyncio.wait_for(tool.execute(validate_arguments(tool, json.dumps(args)), ctx), HANG)

    return asyncio.run(call())


# --- search_files: a deadline and Stop ------------------------------------------------------------

SEARCHES = """
import asyncio, resource, sys, threading
from pathlib import Path
from tether.cancel import CancelSignal
from tether.tools import files
from tether.tools.base import ToolContext, ToolError

resource.setrlimit(resource.RLIMIT_CPU, (60, 60))  # a CPU limit below the matcher's own: it keeps this one

def search(pattern, signal):
    try:
        return asyncio.run(files.search_files.execute({"pattern": pattern}, ToolContext(cwd=Path(sys.argv[1]), signal=signal)))
    except ToolError as exc:
        return f"ToolError: {exc}"

files.SEARCH_TIME_S = 1.0
print(search("(a|aa)+$", CancelSignal()))
files.SEARCH_TIME_S = 600.0
signal = CancelSignal()
threading.Timer(0.5, signal.cancel_threadsafe, ("the user pressed Stop",)).start()
print(search("(.*a){12}x", signal))
print(search("a{3}!$", CancelSignal()))
"""


def test_a_regex_whose_repetitions_overlap_ends_at_the_deadline_or_at_stop(tmp_path: Path) -> None:
    """(a|aa)+$ repeats no repetition, so the round-3 check let it through; on a 40-character line
    Python's re backtracks for hours in C, holding the GIL: no timeout or Stop in the process could
    end it. Run in a child process, since before the fix only another process could time it out."""
    (tmp_path / "line.txt").write_text("a" * 40 + "!\n")
    try:
        done = subprocess.run(
            [sys.executable, "-c", SEARCHES, str(tmp_path)], capture_output=True, text=True, timeout=HANG
        )
    except subprocess.TimeoutExpired:
        pytest.fail(f"search_files still ran after {HANG:g} s, holding the whole process")
    assert done.returncode == 0, done.stderr
    deadline, stopped, ordinary = done.stdout.splitlines()
    assert deadline.startswith("ToolError: search_files stopped after 1 s, still matching '(a|aa)+$' against line.txt")
    assert stopped == "ToolError: search_files was stopped (the user pressed Stop) while matching line.txt."
    assert ordinary == "line.txt:1: " + "a" * 40 + "!"


def test_search_results_are_unchanged_by_the_matcher_process(tmp_path: Path) -> None:
    """What the search finds, across batches, CRLF lines, binary and non-UTF-8 files, is as before."""
    (tmp_path / "big").mkdir()
    for i in range(3):  # three files of 600 kB: more than one batch
        (tmp_path / "big" / f"{i}.txt").write_bytes(b"filler line\n" * 50_000 + f"needle {i}\r\n".encode())
    (tmp_path / "latin1.txt").write_bytes(b"caf\xe9 needle\n")
    (tmp_path / "blob.bin").write_bytes(b"\x00needle")
    found = run_tool(search_files, tmp_path, pattern=r"needle( \d)?$")
    assert found.splitlines() == [
        "big/0.txt:50001: needle 0",
        "big/1.txt:50001: needle 1",
        "big/2.txt:50001: needle 2",
        "latin1.txt:1: caf\ufffd needle",
    ]
    capped = run_tool(search_files, tmp_path, pattern="needle", max_results=2)
    assert capped.splitlines()[-1] == "[stopped at 2 matches: narrow the pattern or the glob]"
    assert len(capped.splitlines()) == 3


def test_a_matcher_that_cannot_start_is_a_message(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "a.txt").write_text("x\n")
    monkeypatch.setattr(sys, "executable", str(tmp_path / "no-python"))
    with pytest.raises(ToolError, match="could not start the process that matches lines"):
        run_tool(search_files, tmp_path, pattern="x")


# --- names that are not UTF-8 ---------------------------------------------------------------------


def test_a_name_that_is_not_utf8_can_be_named_back_by_the_model(tmp_path: Path) -> None:
    """The listing gave the name as a lone surrogate, which reaches the model as U+FFFD: read_file
    with the name it was shown found nothing. The model reads the name from what it was sent."""
    os.mkdir(os.fsencode(tmp_path) + b"/d\xff")
    with open(os.fsencode(tmp_path) + b"/d\xff/caf\xe9.txt", "wb") as f:
        f.write(b"the timeout is 30 s\n")
    seen: list[str] = []

    def reply(messages: list[Message], request: Any) -> Reply | str:
        n = sum(isinstance(m, AssistantMessage) for m in messages)
        if n == 0:
            return Reply(calls=(("c0", "list_files", {}),))
        seen.append(messages[-1].text if isinstance(messages[-1], ToolMessage) else "")
        name = seen[0].split("\t")[0]
        calls = {
            1: ("read_file", {"path": name}),
            2: ("search_files", {"pattern": "timeout", "glob": name.split("/")[0] + "/*.txt"}),
            3: ("edit_file", {"path": name, "old_text": "30 s", "new_text": "60 s"}),
        }
        return Reply(calls=((f"c{n}", *calls[n]),)) if n in calls else "done"

    state = RunState()
    agent = Agent(FunctionModel(reply), tools=[*FILE_TOOLS, *EDIT_TOOLS], cwd=tmp_path)
    asyncio.run(run(agent, "go", state=state))
    listing, read, search, edit = seen
    assert listing == "d\\xff/caf\\xe9.txt\t20 bytes"
    assert read == "the timeout is 30 s"
    assert search == "d\\xff/caf\\xe9.txt:1: the timeout is 30 s"
    assert edit == "edited d\\xff/caf\\xe9.txt: replaced 1 occurrence"
    assert os.listdir(os.fsencode(tmp_path) + b"/d\xff") == [b"caf\xe9.txt"]


def test_a_line_break_in_a_name_does_not_split_the_listing(tmp_path: Path) -> None:
    """A name holding a line break (or an escape sequence) was listed as is: two rows, the second
    a file that does not exist, which a planted name can use to forge entries."""
    (tmp_path / "notes\nfake.txt\t999 bytes").write_text("real\n")
    (tmp_path / "red\x1b[31m.txt").write_text("ansi\n")
    listing = run_tool(list_files, tmp_path)
    assert listing.splitlines() == ["notes\\x0afake.txt\\x09999 bytes\t5 bytes", "red\\x1b[31m.txt\t5 bytes"]
    assert run_tool(read_file, tmp_path, path="notes\\x0afake.txt\\x09999 bytes") == "real"
    assert run_tool(search_files, tmp_path, pattern="ansi") == "red\\x1b[31m.txt:1: ansi"


def test_a_name_really_spelled_with_a_backslash_x_is_still_its_own(tmp_path: Path) -> None:
    (tmp_path / "caf\\xe9.txt").write_text("literal\n")
    with open(os.fsencode(tmp_path) + b"/caf\xe9.txt", "wb") as f:
        f.write(b"latin-1\n")
    assert run_tool(read_file, tmp_path, path="caf\\xe9.txt") == "literal"
    (tmp_path / "caf\\xe9.txt").unlink()
    assert run_tool(read_file, tmp_path, path="caf\\xe9.txt") == "latin-1"


# --- hard links -----------------------------------------------------------------------------------


@pytest.mark.parametrize("tool", ["write_file", "edit_file"])
def test_a_write_through_a_hard_link_leaves_the_outside_file_and_says_so(tmp_path: Path, tool: str) -> None:
    """A hard link is the file itself; the tools replace the file rather than write into it, so the
    outside name keeps its content. The model was not told that the link no longer joins them."""
    outside = tmp_path / "outside.conf"
    outside.write_text("port = 80\n")
    workspace = tmp_path / "ws"
    workspace.mkdir()
    os.link(outside, workspace / "shared.conf")
    if tool == "write_file":
        out = run_tool(write_file, workspace, path="shared.conf", content="port = 8080\n")
    else:
        out = run_tool(edit_file, workspace, path="shared.conf", old_text="80", new_text="8080")
    assert "1 other name (hard link), which keep the old content" in out, out
    assert outside.read_text() == "port = 80\n"
    assert (workspace / "shared.conf").read_text() == "port = 8080\n"
    assert "hard link" not in run_tool(write_file, workspace, path="shared.conf", content="again\n")


# --- web_fetch ------------------------------------------------------------------------------------


def _gzip_of_zeros(size: int) -> bytes:
    """gzip of ``size`` zero bytes, made in pieces (never ``size`` bytes in memory)."""
    packer = zlib.compressobj(9, zlib.DEFLATED, 16 + zlib.MAX_WBITS)
    piece = bytes(1 << 20)
    out = [packer.compress(piece) for _ in range(size >> 20)]
    return b"".join([*out, packer.flush()])


@pytest.fixture(scope="module")
def bombs() -> Iterator[int]:
    """A loopback server whose /bomb is 120 MB of zeros as gzip inside gzip (361 bytes on the
    wire), /deflate a small raw-deflate page, /gzip a small gzip page, /br an encoding never asked
    for, and images: an icon, a page served as a PNG, a JPEG served as a PNG, an SVG."""
    inner = _gzip_of_zeros(120 << 20)
    raw = zlib.compressobj(6, zlib.DEFLATED, -zlib.MAX_WBITS)
    routes = {
        "/bomb": ("text/plain", "gzip, gzip", gzip.compress(inner)),
        "/deflate": ("text/plain", "deflate", raw.compress(b"deflated page\n" * 3) + raw.flush()),
        "/gzip": ("text/plain", "gzip", gzip.compress(b"zipped page\n")),
        "/br": ("text/plain", "br", b"\x0b\x02\x80hello\x03"),
        "/favicon.ico": ("image/x-icon", "identity", b"\x00\x00\x01\x00\x01\x00\x10\x10" + bytes(40)),
        "/fake.png": ("image/png", "identity", b"<html><body>Sign in</body></html>"),
        "/photo.png": ("image/png", "identity", b"\xff\xd8\xff\xe0\x00\x10JFIF" + bytes(20)),
        "/logo.svg": (
            "image/svg+xml",
            "identity",
            b'<svg xmlns="http://www.w3.org/2000/svg"><title>Logo</title></svg>',
        ),
    }

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *a: Any) -> None:
            return

        def do_GET(self) -> None:
            kind, encoding, body = routes[self.path]
            self.send_response(200)
            self.send_header("content-type", kind)
            self.send_header("content-encoding", encoding)
            self.send_header("content-length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield server.server_address[1]
    server.shutdown()


def test_gzip_inside_gzip_is_capped_without_expanding_it_whole(bombs: int) -> None:
    """httpx undid each network chunk whole: 361 bytes on the wire became 120 MB in one call before
    max_bytes was looked at (and a few kB more, gigabytes: the process is killed for memory)."""
    fetch = WebFetch(WebSettings(allow=(f"127.0.0.1:{bombs}",), max_chars=1000))
    tracemalloc.start()
    try:
        text = run_tool(fetch, Path("."), url=f"http://127.0.0.1:{bombs}/bomb")
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert "[download stopped at 2,000,000 bytes]" in text
    assert peak < 50_000_000, f"{peak:,} bytes held to read a 2 MB page"


def test_ordinary_encodings_still_read_and_an_unasked_one_is_a_message(bombs: int) -> None:
    fetch = WebFetch(WebSettings(allow=(f"127.0.0.1:{bombs}",)))
    assert run_tool(fetch, Path("."), url=f"http://127.0.0.1:{bombs}/gzip") == "zipped page\n"
    assert run_tool(fetch, Path("."), url=f"http://127.0.0.1:{bombs}/deflate") == "deflated page\n" * 3
    with pytest.raises(ToolError, match="Content-Encoding 'br', which web_fetch did not ask for"):
        run_tool(fetch, Path("."), url=f"http://127.0.0.1:{bombs}/br")


def test_an_international_domain_name_is_fetched_by_its_ascii_form(bombs: int) -> None:
    """A host that is not ASCII (bücher.de, 例え.jp; here 127。0。0。1, with ideographic full stops)
    went into the Host header as it was written: a raw UnicodeEncodeError, not a fetch."""
    fetch = WebFetch(WebSettings(allow=(f"127.0.0.1:{bombs}",)))
    assert run_tool(fetch, Path("."), url=f"http://127\u30020\u30020\u30021:{bombs}/gzip") == "zipped page\n"
    with pytest.raises(ToolError, match="is not a valid URL"):
        run_tool(fetch, Path("."), url=f"http://\u2460\u2461\u2466.0.0.1:{bombs}/gzip")
    with pytest.raises(ToolError, match="private or local"):  # and still judged by the address
        run_tool(WebFetch(), Path("."), url=f"http://127\u30020\u30020\u30021:{bombs}/gzip")


WALLS = """
from tether.tools._walls import wall_reason
for unit in ("<script/>", "<title/>", "<h1 ", "<"):
    html = "<html><body><p>An article.</p>" + unit * (2_000_000 // len(unit))
    print(wall_reason(200, {}, html, "An article."))
"""


def test_a_page_of_unclosed_tags_is_judged_in_linear_time() -> None:
    """The wall checks used <x.*?</x> and <[^>]+>: each unclosed start rescanned the rest of the page,
    so 2 MB of <script/> took hours in re, holding the GIL: the fetch's timeout could not fire and
    every run in the process stood still (180 kB: a 39 s freeze of the event loop, measured). Run in
    a child process, the only place such a freeze can be timed out."""
    try:
        done = subprocess.run([sys.executable, "-c", WALLS], capture_output=True, text=True, timeout=HANG)
    except subprocess.TimeoutExpired:
        pytest.fail(f"judging a 2 MB page still ran after {HANG:g} s, holding the whole process")
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == ["None"] * 4


MARKDOWN = """
from tether.tools.web import html_to_markdown
print(repr(html_to_markdown("<p>spaced" + " " * 2_000_000 + "out</p>")))
print(repr(html_to_markdown("<pre>" + " " * 2_000_000 + "x</pre>")))
print(repr(html_to_markdown("<p>a  b\\n\\n c</p><pre>  x\\n\\n    y</pre>")))
"""


def test_a_page_of_white_space_is_converted_in_linear_time() -> None:
    """markdownify's whitespace regexes rescan a run of spaces from each of its characters: 40 kB of
    spaces held the GIL 33 s (the fetch's timeout could not fire, every run stood still), 2 MB about
    a day. In a child process, the only place such a freeze can be timed out."""
    try:
        done = subprocess.run([sys.executable, "-c", MARKDOWN], capture_output=True, text=True, timeout=HANG)
    except subprocess.TimeoutExpired:
        pytest.fail(f"converting a 2 MB page still ran after {HANG:g} s, holding the whole process")
    assert done.returncode == 0, done.stderr
    spaced, pre, ordinary = done.stdout.splitlines()
    assert spaced == repr("spaced out")
    assert pre == repr("```\n" + " " * 64 + "x\n```")  # a run inside <pre> is cut to 64
    assert ordinary == repr("a b\nc\n\n```\n  x\n\n    y\n```")  # shorter runs are as markdownify makes them


def test_only_images_a_model_can_be_shown_become_images(bombs: int) -> None:
    """web_fetch passed any image/* on as an image with the server's type: an icon (or a login page
    served as image/png) then made the model's API refuse every later request of the run, since the
    image stays in the transcript (Anthropic and OpenAI take PNG, JPEG, GIF and WebP only)."""
    fetch = WebFetch(WebSettings(allow=(f"127.0.0.1:{bombs}",)))
    for path in ("/favicon.ico", "/fake.png"):
        with pytest.raises(ToolError, match="not a PNG, JPEG, GIF or WebP image"):
            run_tool(fetch, Path("."), url=f"http://127.0.0.1:{bombs}{path}")
    photo = run_tool(fetch, Path("."), url=f"http://127.0.0.1:{bombs}/photo.png")
    assert isinstance(photo, ToolResult) and photo.content[1].media_type == "image/jpeg"  # what the bytes are
    svg = run_tool(fetch, Path("."), url=f"http://127.0.0.1:{bombs}/logo.svg")
    assert svg.startswith("<svg") and "<title>Logo</title>" in svg  # SVG is text


@pytest.mark.parametrize(
    "host",
    ["2130706433", "0177.0.0.1", "0x7f000001", "127.1", "0", "[::ffff:127.0.0.1]", "[::ffff:7f00:1]", "[::127.0.0.1]"],
)
def test_loopback_spelled_as_a_number_or_inside_ipv6_is_refused(bombs: int, host: str) -> None:
    """The spellings an attacker tries for 127.0.0.1 (decimal, octal, hex, short, IPv4-mapped and
    -compatible IPv6) resolve to it and are judged as it, or are not URLs at all (httpx reads 0177
    as no address): refused either way."""
    with pytest.raises(ToolError, match="private or local|is not a valid URL"):
        run_tool(WebFetch(), Path("."), url=f"http://{host}:{bombs}/gzip")


# --- the sandbox's proxy --------------------------------------------------------------------------


def ask_proxy(allow: tuple[str, ...], request: bytes) -> bytes:
    """What the sandbox's proxy answers ``request`` with (its whole answer, until it closes)."""
    from tether.tools._netproxy import SOCKET_NAME, NetProxy

    async def main() -> bytes:
        proxy = NetProxy(allow)
        where = await proxy.start()
        try:
            reader, writer = await asyncio.open_unix_connection(str(where / SOCKET_NAME))
            writer.write(request)
            answer = await asyncio.wait_for(reader.read(), HANG)
            writer.close()
            return answer
        finally:
            await proxy.close()

    return asyncio.run(main())


@pytest.mark.parametrize(
    "request_line", [b"CONNECT 127.0.0.1:99999 HTTP/1.1", b"GET http://127.0.0.1:99999/ HTTP/1.1", b"CONNECT x"]
)
def test_a_request_the_proxy_cannot_read_is_answered_with_why(request_line: bytes) -> None:
    """A port past 65535 on an allowed host passed every check and then raised OverflowError from
    connect, unhandled (a traceback in the log; the command saw its connection drop); a request line
    that was not one closed the connection without a word."""
    answer = ask_proxy(("127.0.0.1:99999",), request_line + b"\r\nHost: x\r\n\r\n")
    assert answer.startswith(b"HTTP/1.1 400 Bad Request\r\n"), answer
    assert b"tether's sandbox proxy could not read the request" in answer
