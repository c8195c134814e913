"""Known defects left alone in earlier rounds, each proved by a test that failed before its fix:
MCP answers whose ``result`` is not an object, a server that lists half a million tools, error
chunks mid-stream that say what they are only in their message or status, blocking work of the MCP
client and the memory tool on asyncio's default executor, and damaged rows of the SQLite session
store dropped without a copy (with ``tether sessions list`` counting lines, not messages)."""

from __future__ import annotations

import asyncio
import json
import os
import sqlite3
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from tests.connectors.raw import raw as raw_connector
from tests.connectors.raw import write_server
from tests.providers.test_attack_wire_round2 import KEY as WIRE_KEY
from tests.providers.test_attack_wire_round2 import Reply as WireReply
from tests.providers.test_attack_wire_round2 import WireServer
from tether import Agent, run_sync
from tether import sessions as sessions_module
from tether.cancel import CancelSignal
from tether.connectors import McpConnector
from tether.connectors._client_side import Asker
from tether.errors import (
    AuthError,
    BadRequestError,
    ConfigError,
    ContextOverflowError,
    ModelNotFoundError,
    ProviderError,
    RetryableError,
)
from tether.harness.retry import RetryPolicy
from tether.memory import Memory
from tether.messages import AssistantMessage, Message, TextPart, ToolMessage, UserMessage, dump_message, text_of
from tether.providers.openai_chat import OpenAIChatProvider, StreamAssembler
from tether.sessions import JsonlSessionStore, SqliteSessionStore
from tether.testing import FunctionModel
from tether.testing import Reply as FunctionReply
from tether.tools.base import ToolContext, ToolResult

# A stdio MCP server in plain JSON-RPC lines; argv[1] picks how it misbehaves, argv[2] (when given)
# is a file it appends a line to for each tools/list request.
RAW_SERVER = """

    BAD = {"string": "a" * 12, "list": [1, 2, 3], "null": None, "number": 5}

    def spec(name):
        return {"name": name, "description": "d" * 30, "inputSchema": {"type": "object"},
                "annotations": {"readOnlyHint": True}}

    for line in sys.stdin:
        message = json.loads(line)
        method, ident = message.get("method"), message.get("id")
        if ident is None:
            continue
        if method == "initialize":
            send({"jsonrpc": "2.0", "id": ident, "result": {
                "protocolVersion": message["params"]["protocolVersion"], "capabilities": {"tools": {}},
                "serverInfo": {"name": "raw", "version": "1"}}})
        elif method == "tools/list" and MODE == "list_null":
            send({"jsonrpc": "2.0", "id": ident, "result": None})
        elif method == "tools/list" and MODE == "pages":  # 100 pages of 5,000 tools
            with open(sys.argv[2], "a") as f:
                f.write("page\\n")
            page = int((message.get("params") or {}).get("cursor") or 0)
            result = {"tools": [spec(f"p{page}_t{i}") for i in range(5000)]}
            if page < 99:
                result["nextCursor"] = str(page + 1)
            send({"jsonrpc": "2.0", "id": ident, "result": result})
        elif method == "tools/list":
            send({"jsonrpc": "2.0", "id": ident, "result": {"tools": [spec("go")]}})
        elif method == "tools/call" and MODE in BAD:
            send({"jsonrpc": "2.0", "id": ident, "result": BAD[MODE]})
        elif method == "tools/call":
            send({"jsonrpc": "2.0", "id": ident, "result": {"content": [{"type": "text", "text": "fine"}]}})
        else:
            send({"jsonrpc": "2.0", "id": ident, "error": {"code": -32601, "message": "no such method"}})
    """


@pytest.fixture(scope="module")
def raw_server(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_server(tmp_path_factory.mktemp("raw"), RAW_SERVER)


def raw(server: Path, mode: str, *extra: str, **config: Any) -> McpConnector:
    return raw_connector(server, mode, *extra, start_timeout_s=60, **config)


def text(result: ToolResult) -> str:
    return "".join(p.text for p in result.parts() if isinstance(p, TextPart))


def call_once(connector: McpConnector, tmp_path: Path, name: str = "raw__go") -> ToolResult:
    async def go() -> ToolResult:
        await connector.start()
        try:
            tool = next(t for t in connector.tools() if t.name == name)
            return await tool.execute({}, ToolContext(cwd=tmp_path, signal=CancelSignal()))
        finally:
            await connector.stop()

    return asyncio.run(asyncio.wait_for(go(), 120))  # a guard against a hang, not a measurement


# --- 1. an MCP answer whose result is not an object -----------------------------------------------


@pytest.mark.parametrize(
    ("mode", "sent"),
    [("string", "a string of 12 characters"), ("list", "a list of 3 items"), ("null", "null"), ("number", "a number")],
)
def test_a_stdio_answer_whose_result_is_not_an_object_fails_the_call_at_once_saying_so(
    raw_server: Path, tmp_path: Path, mode: str, sent: str
) -> None:
    """Was: the line was only logged by the SDK's session, and the call waited its whole timeout_s
    ("did not answer within 600 s")."""
    result = call_once(raw(raw_server, mode, timeout_s=600), tmp_path)
    assert result.is_error
    assert text(result) == (
        f"Error: the call to raw__go failed on the MCP server raw: its answer's result is {sent}, "
        "not an object as JSON-RPC and MCP require"
    )


def test_a_tool_list_whose_result_is_null_fails_the_start_at_once_saying_so(raw_server: Path) -> None:
    connector = McpConnector(
        "raw", {"command": sys.executable, "args": [str(raw_server), "list_null"]}, start_timeout_s=600
    )
    with pytest.raises(ConfigError) as err:
        asyncio.run(asyncio.wait_for(connector.start(), 120))
    assert str(err.value) == (
        "MCP server raw did not start: its answer's result is null, not an object as JSON-RPC and MCP require"
    )


class _NotAnObject(BaseHTTPRequestHandler):
    """A streamable-HTTP server whose tools/call answer has a list for its result."""

    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def _json(self, status: int, message: Any) -> None:
        body = json.dumps(message).encode() if message is not None else b""
        self.send_response(status)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self) -> None:
        self._json(405, None)

    def do_DELETE(self) -> None:
        self._json(200, None)

    def do_POST(self) -> None:
        message = json.loads(self.rfile.read(int(self.headers.get("content-length") or 0)))
        method, ident = message.get("method"), message.get("id")
        if ident is None:
            self._json(202, None)
        elif method == "initialize":
            info = {"name": "web", "version": "1"}
            result = {"protocolVersion": "2025-06-18", "capabilities": {"tools": {}}, "serverInfo": info}
            self._json(200, {"jsonrpc": "2.0", "id": ident, "result": result})
        elif method == "tools/list":
            tools = [
                {"name": name, "inputSchema": {"type": "object"}, "annotations": {"readOnlyHint": True}}
                for name in ("go", "go_stream")
            ]
            self._json(200, {"jsonrpc": "2.0", "id": ident, "result": {"tools": tools}})
        elif method == "tools/call" and message["params"]["name"] == "go_stream":  # the answer as an event stream
            event = json.dumps({"jsonrpc": "2.0", "id": ident, "result": "a string, in an event"})
            body = f"event: message\ndata: {event}\n\n".encode()
            self.send_response(200)
            self.send_header("content-type", "text/event-stream")
            self.send_header("content-length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
        else:
            self._json(200, {"jsonrpc": "2.0", "id": ident, "result": ["secret-looking", "stuff"]})


@pytest.fixture
def web_server() -> Iterator[str]:
    http = ThreadingHTTPServer(("127.0.0.1", 0), _NotAnObject)
    http.daemon_threads = True
    thread = threading.Thread(target=http.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{http.server_address[1]}/mcp"
    finally:
        http.shutdown()
        http.server_close()
        thread.join(30)


def test_an_http_answer_whose_result_is_not_an_object_is_one_line_naming_what_it_was(
    web_server: str, tmp_path: Path
) -> None:
    """Was: the SDK's pydantic dump, over many lines and quoting the answer."""
    result = call_once(McpConnector("web", {"url": web_server}, start_timeout_s=60), tmp_path, "web__go")
    assert result.is_error
    assert text(result) == (
        "Error: the call to web__go failed on the MCP server web: its answer's result is a list of 2 items, "
        "not an object as JSON-RPC and MCP require"
    )


# --- 2. a server that lists 100 pages of 5,000 tools ------------------------------------------------


def test_half_a_million_tools_are_not_all_read_and_leave_one_warning(
    raw_server: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Was: all 100 pages were read and checked on the event loop (seconds with nothing else run)
    and 495,834 warnings were logged, one a tool left out."""
    pages = tmp_path / "pages.log"
    connector = raw(raw_server, "pages", str(pages))
    ticks = 0

    async def go() -> list[str]:
        nonlocal ticks

        async def ticker() -> None:  # another coroutine of the same loop
            nonlocal ticks
            while True:
                await asyncio.sleep(0)
                ticks += 1

        other = asyncio.ensure_future(ticker())
        try:
            await connector.start()
            try:
                return [t.name for t in connector.tools()]
            finally:
                await connector.stop()
        finally:
            other.cancel()

    with caplog.at_level("WARNING", logger="tether.connectors"):
        names = asyncio.run(asyncio.wait_for(go(), 120))
    assert pages.read_text().splitlines() == ["page", "page"]  # 10,000 tools read, no more pages asked for
    assert 1000 < len(names) < 10_000 and len(names) + len(connector.refused) == 10_001
    assert connector.refused["(the rest of its tools)"] == (
        "the server lists more than 10,000 tools; tether reads the first 10,000 and leaves out the rest unread"
    )
    warnings = [r for r in caplog.records if r.name == "tether.connectors"]
    assert len(warnings) == 1, [r.getMessage()[:200] for r in warnings[:5]]
    said = warnings[0].getMessage()
    assert said.startswith(f"[mcp.raw] {10_000 - len(names):,} of the server's tools are left out; ")
    assert "max_tools_chars" in said and "more than 10,000 tools" in said and "`tether mcp list`" in said
    assert ticks > 0  # the loop ran the other coroutine meanwhile


# --- 3. an error chunk mid-stream without a type or a code -----------------------------------------


@pytest.mark.parametrize(
    ("error", "kind"),
    [
        ({"message": "This model's maximum context length is 8192 tokens, you asked for 9000"}, ContextOverflowError),
        ({"message": "Invalid API key provided."}, AuthError),
        ({"message": "The model `gpt-9` does not exist or you do not have access to it."}, ModelNotFoundError),
        ({"message": "Rate limit reached for requests"}, RetryableError),
        ({"message": "no", "status": 400}, BadRequestError),
        ({"message": "no", "status": "403"}, AuthError),
        ({"message": "Request contains an invalid argument.", "status": "INVALID_ARGUMENT"}, BadRequestError),
        ({"message": "Resource has been exhausted", "status": "RESOURCE_EXHAUSTED"}, RetryableError),
        ("Incorrect API key", AuthError),
        # Nothing says what it is: the server's own failure, retried, as docs/providers.md promises.
        ({"message": "upstream went away"}, RetryableError),
        ({}, RetryableError),
    ],
)
def test_an_error_chunk_without_type_or_code_is_classified_by_its_status_or_message(error: Any, kind: type) -> None:
    """Was: each of these was a 500, the server's failure, retried four times (a context overflow
    was never compacted, a bad key was asked again and again)."""
    with pytest.raises(ProviderError) as err:
        StreamAssembler("m").feed({"error": error})
    assert type(err.value) is kind, (error, err.value)
    assert "\n" not in str(err.value)


def test_a_streamed_error_naming_a_model_that_does_not_exist_fails_the_run_at_once(tmp_path: Path) -> None:
    """End to end against a loopback server: was four requests, and "a server error" after them."""
    error = {"error": {"message": "The model `gpt-9` does not exist or you do not have access to it."}}
    reply = WireReply(200, [b"data: " + json.dumps(error).encode() + b"\n\n"])
    server = WireServer([reply] * 4)
    threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
    try:
        model = OpenAIChatProvider(server.url + "/v1", WIRE_KEY, name="openai", timeout_s=10)
        result = run_sync(Agent(model, retry=RetryPolicy(base_delay_s=0.01, max_delay_s=0.02)), "hi")
    finally:
        server.shutdown()
        server.server_close()
    assert len(server.requests) == 1
    assert result.status == "failed" and "does not exist" in (result.reason or "")


# --- 4. blocking work of the MCP client and the memory tool, at Stop ----------------------------------


def test_run_sync_returns_at_stop_while_the_memory_tools_scanner_blocks(tmp_path: Path) -> None:
    """A memory write runs its scanners (a model-based one may block). Was: the tool ran on the
    loop's default executor, so run_sync's shutdown waited for the scanner however long it blocked."""
    release, started, finished = threading.Event(), threading.Event(), threading.Event()

    class Blocking:
        def scan(self, text: str) -> None:
            started.set()
            release.wait(10)  # a hang guard, not a timing
            finished.set()

    def model(messages: list[Message], request: Any) -> FunctionReply | str:
        if any(isinstance(m, ToolMessage) for m in messages):
            return "ok"
        return FunctionReply(calls=(("c1", "memory", {"action": "add", "store": "notes", "text": "a fact"}),))

    signal = CancelSignal()

    def stop_when_started() -> None:
        if started.wait(10):
            signal.cancel_threadsafe("user pressed Stop")

    threading.Thread(target=stop_when_started, daemon=True).start()
    memory = Memory.open(tmp_path, scanners=[Blocking()])
    try:
        result = run_sync(Agent(FunctionModel(model), extensions=[memory]), "go", signal=signal)
        assert not finished.is_set(), "run_sync waited for the blocked memory write"
    finally:
        release.set()
    assert result.status == "interrupted" and "user pressed Stop" in (result.reason or "")


class _Terminal:
    """A stdin that says it is a terminal and whose person never answers (until released)."""

    def __init__(self) -> None:
        self.asked, self.release, self.finished = threading.Event(), threading.Event(), threading.Event()

    def isatty(self) -> bool:
        return True

    def readline(self, *args: Any) -> str:
        self.asked.set()
        self.release.wait(10)  # a hang guard, not a timing
        self.finished.set()
        return "y\n"


def test_a_question_at_the_terminal_nobody_answers_does_not_hold_up_the_loops_end(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """An MCP server's sampling or elicitation question is read at the terminal. Was: read on the
    loop's default executor, so a Stop (the task cancelled) still waited at asyncio.run's end for
    the person to answer."""
    terminal = _Terminal()
    monkeypatch.setattr(sys, "stdin", terminal)
    asker = Asker.terminal()
    assert asker.ask is not None

    async def stop_while_asking() -> None:
        question = asyncio.ensure_future(asker.ask("allow? "))
        while not terminal.asked.is_set():
            await asyncio.sleep(0.01)
        question.cancel()  # Stop

    try:
        asyncio.run(stop_while_asking())
        assert not terminal.finished.is_set(), "asyncio.run waited for the unanswered question"
    finally:
        terminal.release.set()


# --- 5. damaged rows of the SQLite session store; what `tether sessions list` counts -----------------


def _three() -> list[Message]:
    return [UserMessage.text("one"), AssistantMessage(content=(TextPart(text="two"),)), UserMessage.text("three")]


def test_a_damaged_sqlite_row_is_kept_where_the_warning_says_before_the_repair_drops_it(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Was: the row was deleted by the repair with no copy anywhere and no word of it."""
    db = tmp_path / "sessions.db"
    store = SqliteSessionStore(db)
    store.append("s1", _three())
    garbled = '{"role": "assistant", "content": [{"type": "text", "text": "two"  <- edited by hand'
    with sqlite3.connect(db) as raw_db:
        raw_db.execute("UPDATE messages SET body = ? WHERE session_id = 's1' AND seq = 1", (garbled,))
    with caplog.at_level("WARNING", logger="tether.sessions"):
        loaded = store.load("s1")
    assert [text_of([m]) for m in loaded] == ["one", "three"]
    (warning,) = [r.getMessage() for r in caplog.records if r.name == "tether.sessions"]
    assert f"1 row(s) of {db} hold no message" in warning and "damaged_messages" in warning
    with sqlite3.connect(db) as raw_db:
        kept = raw_db.execute("SELECT session_id, seq, body FROM damaged_messages").fetchall()
    assert kept == [("s1", 1, garbled)]
    caplog.clear()
    with caplog.at_level("WARNING", logger="tether.sessions"):
        assert store.load("s1") == loaded  # repaired once: nothing more to keep or say
    assert not [r for r in caplog.records if r.name == "tether.sessions"]
    store.close()


def test_sessions_list_counts_messages_not_lines_and_reads_only_what_was_appended(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Was: every newline counted, so blank and damaged lines were messages (and a torn last line,
    once appended after, too); and the listing read every transcript whole."""
    home = tmp_path / "home"
    store = JsonlSessionStore(home / "sessions", fsync=False)
    store.append("s1", _three())
    path = store.path("s1")
    with path.open("ab") as f:  # a blank line, a line edited by hand, and a torn write
        f.write(b"\n   \n{not a message}\n" + dump_message(UserMessage.text("torn")).encode()[:20])
    env = {**{k: v for k, v in os.environ.items() if k != "TETHER_SESSION_STORE"}, "TETHER_HOME": str(home)}
    listed = subprocess.run(
        [sys.executable, "-m", "tether", "sessions", "list", "--json"], env=env, capture_output=True, text=True
    )
    assert listed.returncode == 0, listed.stderr
    assert [(s["session_id"], s["messages"]) for s in json.loads(listed.stdout)] == [("s1", 3)]

    store.load("s1")  # repaired (the damaged line kept beside): the whole file was just read
    store.append("s1", [UserMessage.text("four")])
    parsed: list[object] = []
    real = sessions_module.load_message

    def counting(line: Any) -> Message:
        parsed.append(line)
        return real(line)

    monkeypatch.setattr(sessions_module, "load_message", counting)
    assert [(i.session_id, i.messages) for i in store.list()] == [("s1", 4)]
    assert len(parsed) == 1  # only the appended line was read
    parsed.clear()
    assert [(i.session_id, i.messages) for i in store.list()] == [("s1", 4)]
    assert parsed == []  # nothing appended since: nothing read


def test_an_event_stream_answer_whose_result_is_not_an_object_is_one_line_too(web_server: str, tmp_path: Path) -> None:
    """Was: "Failed to parse SSE message: 4 validation errors for union[...]", many lines quoting
    the answer."""
    result = call_once(McpConnector("web", {"url": web_server}, start_timeout_s=60), tmp_path, "web__go_stream")
    assert result.is_error
    assert text(result) == (
        "Error: the call to web__go_stream failed on the MCP server web: its answer's result is a string of 21 "
        "characters, not an object as JSON-RPC and MCP require"
    )
