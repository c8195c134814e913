"""tether's MCP connectors against hostile peers, round three: answers nested past what a JSON parser
reads, over stdio and HTTP, and more. Each test says what it proves; "was:" says how it failed
before the fix it came with."""

from __future__ import annotations

import asyncio
import json
import sys
import threading
from collections.abc import Iterator
from http.server import ThreadingHTTPServer
from pathlib import Path
from typing import Any, ClassVar

import pytest

from tests.connectors.raw import JsonHandler, write_server
from tests.connectors.raw import raw as raw_connector
from tests.connectors.test_attack_mcp_round2 import Wire
from tether.cancel import CancelSignal
from tether.connectors import McpConnector
from tether.errors import ConfigError
from tether.messages import ImagePart, TextPart
from tether.tools.base import ToolContext, ToolResult

# A stdio MCP server in plain JSON-RPC lines; argv[1] picks how it misbehaves.
RAW_SERVER = """

    def nest(levels):
        node = {"type": "object"}
        for _ in range(levels):
            node = {"type": "object", "properties": {"a": node}}
        return node

    def schema():
        return nest(300) if MODE == "deep_schema" else {"type": "object"}

    listed = 0
    for line in sys.stdin:
        message = json.loads(line)
        method, ident = message.get("method"), message.get("id")
        if ident is None:
            continue
        if method == "initialize":
            send({"jsonrpc": "2.0", "id": ident, "result": {
                "protocolVersion": message["params"]["protocolVersion"],
                "capabilities": {"tools": {"listChanged": MODE == "changed"}},
                "serverInfo": {"name": "raw", "version": "1"}}})
        elif method == "tools/list":
            listed += 1
            tools = [{"name": n, "inputSchema": schema(), "annotations": {"readOnlyHint": True}} for n in ("go", "count")]
            send({"jsonrpc": "2.0", "id": ident, "result": {"tools": tools}})
        elif method == "tools/call" and message["params"]["name"] == "count":
            send({"jsonrpc": "2.0", "id": ident, "result": {"content": [{"type": "text", "text": str(listed)}]}})
        elif method == "tools/call":
            result = {"content": [{"type": "text", "text": "fine"}]}
            if MODE == "deep_result":
                result["structuredContent"] = nest(300)
            if MODE == "images":
                png = "iVBORw0KGgo="
                result = {"content": [
                    {"type": "image", "data": png, "mimeType": "image/svg+xml"},
                    {"type": "image", "data": png, "mimeType": "Image/PNG; charset=x"},
                    {"type": "resource", "resource": {"uri": "x://t", "blob": png, "mimeType": "image/tiff"}},
                ]}
            if MODE == "changed":
                for _ in range(2000):
                    send({"jsonrpc": "2.0", "method": "notifications/tools/list_changed"})
            send({"jsonrpc": "2.0", "id": ident, "result": result})
        else:
            send({"jsonrpc": "2.0", "id": ident, "error": {"code": -32601, "message": "no such method"}})
    """


@pytest.fixture(scope="module")
def raw_server(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_server(tmp_path_factory.mktemp("raw3"), RAW_SERVER)


def raw(server: Path, mode: str, *extra: str, **config: Any) -> McpConnector:
    return raw_connector(server, mode, *extra, start_timeout_s=30, **config)


def text(result: ToolResult) -> str:
    return "".join(p.text for p in result.parts() if isinstance(p, TextPart))


def call_each(connector: McpConnector, tmp_path: Path, *names: str) -> list[ToolResult]:
    """What each call answered, in turn, in one session; the server is stopped after."""

    async def go() -> list[ToolResult]:
        await connector.start()
        try:
            tools = {t.name: t for t in connector.tools()}
            return [await tools[name].execute({}, ToolContext(cwd=tmp_path, signal=CancelSignal())) for name in names]
        finally:
            await connector.stop()

    return asyncio.run(asyncio.wait_for(go(), 120))  # a guard against a hang, not a measurement


def call_once(connector: McpConnector, tmp_path: Path, name: str) -> ToolResult:
    return call_each(connector, tmp_path, name)[0]


# --- 1. answers nested past the SDK parser's recursion limit ---------------------------------------


def test_a_stdio_tool_list_nested_too_deep_fails_the_start_at_once_saying_why(raw_server: Path) -> None:
    """Was: the SDK's parser could not read the answer (a schema 300 levels deep), only logged that,
    and the start waited for its timeout, then said "it did not finish connecting"."""
    with pytest.raises(ConfigError) as err:
        asyncio.run(asyncio.wait_for(raw(raw_server, "deep_schema").start(), 120))
    assert str(err.value).startswith("MCP server raw did not start: its answer could not be read (")
    assert "recursion limit" in str(err.value)


def test_a_stdio_result_nested_too_deep_ends_its_call_at_once_saying_why(raw_server: Path, tmp_path: Path) -> None:
    """Was: the call waited for its timeout (here 30 s), then said it timed out."""
    result = call_once(raw(raw_server, "deep_result", timeout_s=30), tmp_path, "raw__go")
    assert result.is_error
    assert text(result).startswith(
        "Error: the call to raw__go failed on the MCP server raw: its answer could not be read ("
    )
    assert "timed out" not in text(result)


class _Deep(JsonHandler):
    """A streamable-HTTP server whose tools/call answer is nested ``levels`` deep (from the path)."""

    initialized: ClassVar[list[str]] = []  # the path of each handshake

    def do_GET(self) -> None:
        self._json(405, b"")

    def do_DELETE(self) -> None:
        self._json(200, b"")

    def do_POST(self) -> None:
        message = json.loads(self.rfile.read(int(self.headers.get("content-length") or 0)))
        method, ident = message.get("method"), message.get("id")
        if ident is None:
            self._json(202, b"")
        elif method == "initialize":
            self.initialized.append(self.path)
            info = {"name": "web", "version": "1"}
            result = {"protocolVersion": "2025-06-18", "capabilities": {"tools": {}}, "serverInfo": info}
            self._json(200, json.dumps({"jsonrpc": "2.0", "id": ident, "result": result}).encode())
        elif method == "tools/list":
            tools = [
                {"name": name, "inputSchema": {"type": "object"}, "annotations": {"readOnlyHint": True}}
                for name in ("go", "ok")
            ]
            self._json(200, json.dumps({"jsonrpc": "2.0", "id": ident, "result": {"tools": tools}}).encode())
        elif method != "tools/call":
            error = {"code": -32601, "message": "no such method"}
            self._json(200, json.dumps({"jsonrpc": "2.0", "id": ident, "error": error}).encode())
        else:
            _, levels, how = self.path.rsplit("/", 2)
            deep = '{"a": ' * int(levels) + "1" + "}" * int(levels)
            if message["params"]["name"] == "ok":
                deep = "{}"
            body = (
                f'{{"jsonrpc": "2.0", "id": {json.dumps(ident)}, "result": '
                f'{{"content": [{{"type": "text", "text": "x"}}], "structuredContent": {deep}}}}}'
            )
            if how == "json" or (how == "header" and message["params"]["name"] == "ok"):
                self._json(200, body.encode())
                return
            if how == "header":  # past what an HTTP client reads of a header (h11: 64 KiB)
                self.send_response(200)
                self.send_header("content-type", "application/json")
                self.send_header("x-junk", "j" * 200_000)
                self.send_header("content-length", str(len(body)))
                self.end_headers()
                self.wfile.write(body.encode())
                return
            event = f"event: message\ndata: {body}\n\n".encode()
            self.send_response(200)
            self.send_header("content-type", "text/event-stream")
            self.send_header("content-length", str(len(event)))
            self.end_headers()
            self.wfile.write(event)


@pytest.fixture(scope="module")
def deep_web() -> Iterator[str]:
    http = ThreadingHTTPServer(("127.0.0.1", 0), _Deep)
    http.daemon_threads = True
    thread = threading.Thread(target=http.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{http.server_address[1]}/mcp"
    finally:
        http.shutdown()
        http.server_close()
        thread.join(30)


@pytest.mark.parametrize("how", ["json", "sse"])
@pytest.mark.parametrize("levels", [300, 5000])
def test_an_http_result_nested_too_deep_ends_its_call_at_once_saying_why_and_the_session_goes_on(
    deep_web: str, tmp_path: Path, levels: int, how: str
) -> None:
    """Was: 300 levels gave the SDK's pydantic dump over several lines, quoting the answer (json), or
    the call waited for its timeout (sse); 5,000 levels closed the whole session ("Connection
    closed"), its RecursionError raised inside the transport."""
    connector = McpConnector("web", {"url": f"{deep_web}/{levels}/{how}", "timeout_s": 30}, start_timeout_s=30)
    deep, fine = call_each(connector, tmp_path, "web__go", "web__ok")
    assert deep.is_error
    assert text(deep).startswith(
        "Error: the call to web__go failed on the MCP server web: its answer could not be read ("
    )
    assert "\n" not in text(deep) and '{"a"' not in text(deep)
    assert not fine.is_error and text(fine) == "x"


def test_a_flood_of_tool_list_changes_lists_the_tools_again_once_not_once_each(
    raw_server: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Was: each of 2,000 notifications/tools/list_changed started its own tools/list (2,000 requests
    at once, the oldest answer able to overwrite the newest), none of them stopped with the server,
    so a warning per request followed the run's end."""
    go, count = call_each(raw(raw_server, "changed"), tmp_path, "raw__go", "raw__count")
    assert text(go) == "fine"
    assert 1 <= int(text(count)) <= 3  # the start's listing, one reading, at most one more after it
    assert not [r for r in caplog.records if "could not be read again" in r.getMessage()]


def test_an_http_answer_with_a_header_too_large_is_an_error_saying_so_and_the_session_goes_on(
    deep_web: str, tmp_path: Path
) -> None:
    """Was: "Connection closed", the server taken for dead and started again (the next call said it
    was down when that failed)."""
    connector = McpConnector("web", {"url": f"{deep_web}/1/header", "timeout_s": 30}, start_timeout_s=30)
    broken, fine = call_each(connector, tmp_path, "web__go", "web__ok")
    assert broken.is_error
    assert text(broken) == (
        "Error: the call to web__go failed on the MCP server web: its answer broke the HTTP protocol "
        "(RemoteProtocolError), so it was not read"
    )
    assert not fine.is_error and text(fine) == "x"
    assert _Deep.initialized.count("/mcp/1/header") == 1  # not started again


def test_images_of_a_type_no_provider_takes_are_described_and_a_types_parameters_dropped(
    raw_server: Path, tmp_path: Path
) -> None:
    """Was: an SVG or TIFF image (an image type, but not one a provider takes) and "Image/PNG;
    charset=x" were sent to the model as they were, and the provider refused the run's next request."""
    result = call_once(raw(raw_server, "images"), tmp_path, "raw__go")
    images = [p for p in result.parts() if isinstance(p, ImagePart)]
    assert [(p.media_type, p.data) for p in images] == [("image/png", "iVBORw0KGgo=")]
    words = text(result)
    assert "[image (image/svg+xml): not shown, models are sent only PNG, JPEG, GIF and WebP images]" in words
    assert "[resource x://t (image/tiff): not shown, models are sent only PNG, JPEG, GIF and WebP images]" in words


# --- 2. what a server asks a person at the terminal ------------------------------------------------


def test_an_elicitation_at_the_terminal_shows_the_servers_control_characters_as_escapes() -> None:
    """Was: the server's message, field names and descriptions reached the terminal raw, so an
    escape in them could write the clipboard (OSC 52), hide lines or fake tether's own prompt."""
    import mcp_types as types

    from tether.connectors._client_side import Asker, ClientSide

    params = types.ElicitRequestFormParams(
        message="Your name?\x1b]52;c;ZXZpbA==\x07\x1b[2K\rThe MCP server mail asks: allow? [y/N]",
        requested_schema={
            "type": "object",
            "properties": {"na\x1b[8mme": {"type": "string", "description": "hidden\x1b[8m text\u202e"}},
        },
    )
    asked: list[str] = []

    async def ask(question: str) -> str | None:
        asked.append(question)
        return "Ana"

    side = ClientSide("srv", {}, Asker(ask))
    answer = asyncio.run(side.elicitation(params))
    assert answer.action == "accept"
    assert asked and not any(c in q for q in asked for c in ("\x1b", "\x07", "\r", "\u202e"))
    assert "\\x1b]52;c;ZXZpbA==\\x07" in asked[0]
    url = types.ElicitRequestURLParams(message="Sign in\x1b[2K", url="https://x.example/\x1b[8m", elicitation_id="e1")
    asked.clear()
    asyncio.run(side.elicitation(url))
    assert asked and "\x1b" not in asked[0] and "\\x1b[2K" in asked[0]


def test_a_server_that_dies_at_start_with_escapes_on_stderr_is_reported_with_them_written_out(tmp_path: Path) -> None:
    """Was: its last words reached `tether run` and `tether mcp list` raw, so a server could set the
    terminal's clipboard or overwrite the line that says it failed."""
    server = tmp_path / "dies.py"
    server.write_text(
        'import sys\nsys.stderr.write("boom \\x1b]52;c;ZXZpbA==\\x07\\x1b[2K\\rall fine\\n")\nsys.exit(3)\n'
    )
    connector = McpConnector("dies", {"command": sys.executable, "args": [str(server)]}, start_timeout_s=30)
    with pytest.raises(ConfigError) as err:
        asyncio.run(asyncio.wait_for(connector.start(), 120))
    assert str(err.value) == (
        "MCP server dies did not start: the process exited with status 3 "
        "(its last words: boom \\x1b]52;c;ZXZpbA==\\x07\\x1b[2K\\x0dall fine)"
    )


# --- 3. a hostile client of `tether mcp serve` ------------------------------------------------------


@pytest.fixture(scope="module")
def serve_home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("serve3")
    (root / "workspace").mkdir()
    home = root / "home"
    home.mkdir()
    (home / "config.toml").write_text(f'[agents.scanner]\nmodel = "scripted/slow"\ncwd = "{root / "workspace"}"\n')
    return home


def test_serve_answers_a_request_nested_too_deep_and_goes_on(serve_home: Path) -> None:
    """Was: 300 levels passed tether's check but not the SDK's parser, which only logged it, so the
    client waited for ever; 5,000 levels raised a RecursionError in the line reader that ended the
    whole server with a traceback."""
    wire = Wire(serve_home)
    answers = []
    try:
        wire.handshake()
        for ident, levels in ((5, 300), (6, 5000)):
            deep = '{"a": ' * levels + "1" + "}" * levels
            arguments = f'{{"task": "scan", "x": {deep}}}'
            line = f'{{"jsonrpc": "2.0", "id": {ident}, "method": "tools/call", "params": {{"name": "agent_scanner", "arguments": {arguments}}}}}'
            wire.send(line.encode())
            answers.append(wire.answer())
        wire.send({"jsonrpc": "2.0", "id": 7, "method": "tools/list"})
        after = wire.answer()
    finally:
        code, _, err = wire.close()
    assert [(a or {}).get("id") for a in answers] == [5, 6]
    for answer in answers:
        assert answer is not None and answer["error"]["code"] == -32600
        assert "nested too deeply" in answer["error"]["message"]
    assert after is not None and after["id"] == 7 and "result" in after
    assert code == 0 and "Traceback" not in err


# --- 4. sampling inside the run's budget -------------------------------------------------------------


def test_a_sampling_request_that_could_cost_more_than_the_budget_left_is_refused_before_it_is_sent() -> None:
    """Was: only a budget already spent was checked, so one request with a 2,000,000-character
    prompt (about $1 of input on the scripted model's prices) was sent with $0.01 left; and the
    budget left was the call's snapshot, so ten requests of one call each counted on all of it."""
    import mcp_types as types

    from tether import RunState
    from tether.connectors._client_side import Asker, ClientSide

    def request(chars: int) -> types.CreateMessageRequestParams:
        message = types.SamplingMessage(
            role="user", content=types.TextContent(type="text", text="word " * (chars // 5))
        )
        return types.CreateMessageRequestParams(messages=[message], max_tokens=100)

    side = ClientSide("srv", {"sampling": "allow", "sampling_model": "scripted/hello"}, Asker())
    state = RunState()
    side.begin(ToolContext(cwd=Path("."), signal=CancelSignal(), state=state, budget_left_usd=0.01, call_id="c1"), "t")
    huge = asyncio.run(side.sampling(request(2_000_000)))
    assert isinstance(huge, types.ErrorData)
    assert "more than the $0.010000 left of the run's budget" in huge.message
    assert state.cost_usd == 0.0  # nothing was sent
    side.end(side.calls[0])
    state = RunState()
    side.begin(ToolContext(cwd=Path("."), signal=CancelSignal(), state=state, budget_left_usd=0.004, call_id="c2"), "t")
    answered = 0
    for _ in range(10):  # each fits alone ($0.0032 at most); together they may not pass $0.004
        if isinstance(asyncio.run(side.sampling(request(1_000))), types.CreateMessageResult):
            answered += 1
    assert 1 <= answered < 10
    assert 0 < state.cost_usd <= 0.004
