"""tether's MCP connectors against hostile peers, round two: stdio servers written by hand (raw
JSON-RPC, so they can break the protocol the SDK would not let them), loopback HTTP servers that fail
the handshake, and hostile clients of ``tether mcp serve``. Each test says what it proves; the ones
marked "was:" failed before the fix they came with."""

from __future__ import annotations

import asyncio
import json
import os
import select
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from tests.connectors.conftest import live_processes
from tests.connectors.raw import raw as raw_connector
from tests.connectors.raw import write_server
from tether import Agent, run
from tether.cancel import CancelSignal
from tether.connectors import McpConnector
from tether.errors import ConfigError
from tether.messages import ImagePart, Message, TextPart, ToolMessage
from tether.providers.scripted import Reply
from tether.testing import FunctionModel
from tether.tools.base import ToolContext, ToolResult

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="leftovers are found in /proc (Linux)")

# A stdio MCP server in plain JSON-RPC lines; argv[1] picks how it misbehaves, argv[2] (when given)
# is a file it writes the pid of a process it leaves behind to.
RAW_SERVER = """

    grown = False

    def spec(name, **extra):
        return {"name": name, "inputSchema": {"type": "object"}, "annotations": {"readOnlyHint": True}, **extra}

    def tools():
        if MODE == "names":  # one name thrice, and a name that is another's digested form
            return [spec(n) for n in ["dup", "dup", "dup", "a.b", "a_b_afc94b4e", "a_b", "read_file", "x" * 300]]
        if MODE == "badtool":  # one tool without an input schema: the whole list is not valid MCP
            return [spec("ok"), {"name": "bad"}]
        if MODE == "many":
            return [spec(f"t{i}", description="d" * 30) for i in range(5000)]
        if MODE == "relist" and grown:
            return [spec(n) for n in ("go", "mcp_resources", "mcp_read_resource")]
        return [spec("go")]

    def leave_a_process_behind():
        # Its own session: no longer in the server's group, nor its descendant once the server exits.
        child = subprocess.Popen(["sleep", "300"], start_new_session=True)
        with open(sys.argv[2], "w") as f:
            f.write(str(child.pid))

    def result():
        if MODE == "content":
            return {"content": [
                {"type": "image", "data": "!!! not base64 !!!", "mimeType": "image/png"},
                {"type": "image", "data": "PGh0bWw+", "mimeType": "text/html"},
                {"type": "image", "data": "iVBORw0KGgo=", "mimeType": "image/png"},
                {"type": "resource", "resource": {"uri": "x://bin", "blob": "AAECAwQ=", "mimeType": "image/png"}},
                {"type": "resource", "resource": {"uri": "x://raw", "blob": "AAECAwQ=", "mimeType": "application/zip"}},
                {"type": "text", "text": "end"},
            ]}
        if MODE == "badresult":
            return {"content": [{"type": "text"}]}
        if MODE == "big":
            return {"content": [{"type": "text", "text": "z" * (20 * 1024 * 1024)}]}
        return {"content": [{"type": "text", "text": "fine"}]}

    if MODE == "orphan_exit":
        leave_a_process_behind()
        print("cannot open the database", file=sys.stderr)
        sys.exit(5)
    if MODE == "hang_call":
        signal.signal(signal.SIGTERM, signal.SIG_IGN)  # so only SIGKILL ends it

    for line in sys.stdin:
        message = json.loads(line)
        method, ident = message.get("method"), message.get("id")
        if ident is None:
            continue
        if method == "initialize":
            if MODE == "hang_init":
                continue
            if MODE == "garbage":
                sys.stdout.write("a banner\\n\\x00 not json {{{\\n[1, 2]\\n{\\"jsonrpc\\": \\"2.0\\"}\\n")
            capabilities = {"tools": {"listChanged": True}, "resources": {}} if MODE in ("relist", "badres") else {"tools": {}}
            send({"jsonrpc": "2.0", "id": ident, "result": {
                "protocolVersion": message["params"]["protocolVersion"], "capabilities": capabilities,
                "serverInfo": {"name": "raw", "version": "1"}}})
        elif method == "tools/list":
            send({"jsonrpc": "2.0", "id": ident, "result": {"tools": tools()}})
        elif method == "resources/list" and MODE == "badres":
            send({"jsonrpc": "2.0", "id": ident, "result": {"resources": [{"uri": 5}]}})
        elif method == "resources/list":
            send({"jsonrpc": "2.0", "id": ident, "result": {"resources": [{"uri": "x://a", "name": "a"}]}})
        elif method == "tools/call":
            if MODE == "hang_call":
                continue
            if MODE == "orphan_call":
                leave_a_process_behind()
                os._exit(7)
            if MODE == "wrong_id":
                send({"jsonrpc": "2.0", "id": 987654, "result": {"content": [{"type": "text", "text": "stray"}]}})
                send({"jsonrpc": "2.0", "id": "nope", "error": {"code": -1, "message": "stray"}})
                continue
            if MODE == "garbage":
                sys.stdout.write("garbage\\n{\\"jsonrpc\\": \\"2.0\\", \\"id\\": {\\"x\\": 1}}\\n")
            if MODE == "storm":
                for i in range(20000):
                    send({"jsonrpc": "2.0", "method": "notifications/message", "params": {"level": "info", "data": i}})
            if MODE == "relist":
                grown = True
                send({"jsonrpc": "2.0", "method": "notifications/tools/list_changed"})
            send({"jsonrpc": "2.0", "id": ident, "result": result()})
        else:
            send({"jsonrpc": "2.0", "id": ident, "error": {"code": -32601, "message": "no such method"}})
    """


@pytest.fixture(scope="module")
def raw_server(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_server(tmp_path_factory.mktemp("raw"), RAW_SERVER)


def raw(server: Path, mode: str, *extra: str, **config: Any) -> McpConnector:
    return raw_connector(server, mode, *extra, start_timeout_s=20, **config)


def ctx(tmp_path: Path) -> ToolContext:
    return ToolContext(cwd=tmp_path, signal=CancelSignal())


def text(result: ToolResult) -> str:
    return "".join(p.text for p in result.parts() if isinstance(p, TextPart))


def call_once(connector: McpConnector, tmp_path: Path, name: str = "raw__go") -> tuple[list[str], ToolResult]:
    """The connector's tool names, and what one call of ``name`` answered; the server is stopped after."""

    async def go() -> tuple[list[str], ToolResult]:
        await connector.start()
        try:
            tools = {t.name: t for t in connector.tools()}
            return list(tools), await tools[name].execute({}, ctx(tmp_path))
        finally:
            await connector.stop()

    return asyncio.run(asyncio.wait_for(go(), 60))  # a guard against a hang, not a measurement


def alive(pid: int) -> bool:
    return bool(live_processes([pid]))


# --- hostile stdio servers: defects found and fixed ---------------------------------------------------


def test_a_server_that_lists_one_name_thrice_or_forges_a_digested_name_still_gives_unique_names(
    raw_server: Path, tmp_path: Path
) -> None:
    """Was: the second and third ``dup`` both became ``raw__dup_034169c2`` (the digest was of the
    server and tool names only), and every run of the agent failed "two tools are named ..."."""
    connector = raw(raw_server, "names")
    asked: list[list[str]] = []

    def reply(messages: list[Message], request: Any) -> Reply | str:
        if not asked:
            asked.append([t.name for t in request.tools])
            return Reply(calls=(("c1", asked[0][2], {}),))
        return "done: " + next(m for m in messages if isinstance(m, ToolMessage)).text

    agent = Agent(FunctionModel(reply), extensions=[connector], cwd=tmp_path)
    result = asyncio.run(asyncio.wait_for(run(agent, "go"), 60))
    assert result.status == "completed" and result.output == "done: fine"
    names = [n for n in asked[0] if n.startswith("raw__")]
    assert len(names) == 8 and len(set(names)) == 8 and all(len(n) <= 64 for n in names)
    assert "raw__dup" in names and "raw__read_file" in names and "read_file" not in names
    assert live_processes(connector.pids) == []


def test_a_new_tool_named_like_a_resource_tool_does_not_break_the_next_run(raw_server: Path, tmp_path: Path) -> None:
    """A server with resources gets ``raw__mcp_resources``; when its tool list later grows a tool
    ``mcp_resources``, that tool needs another name. Was: both were ``raw__mcp_resources`` and the
    next run (the next message of a chat) failed "two tools are named 'raw__mcp_resources'"."""
    connector = raw(raw_server, "relist")

    async def go() -> list[str]:
        await connector.start()
        try:
            tools = {t.name: t for t in connector.tools()}
            assert set(tools) == {"raw__go", "raw__mcp_resources", "raw__mcp_read_resource"}
            assert text(await tools["raw__go"].execute({}, ctx(tmp_path))) == "fine"
            for _ in range(400):  # the notification is handled as it comes: wait for the new list
                if len(connector.tools()) == 5:
                    break
                await asyncio.sleep(0.05)
            return list(Agent(FunctionModel(lambda m, r: "hi"), extensions=[connector]).tool_map())
        finally:
            await connector.stop()

    names = asyncio.run(asyncio.wait_for(go(), 60))
    assert len(names) == 5 and len(set(names)) == 5
    assert "raw__mcp_resources" in names and "raw__mcp_read_resource" in names  # the resource tools keep theirs
    assert live_processes(connector.pids) == []


def test_an_image_that_is_not_one_is_described_not_sent_to_the_model(raw_server: Path, tmp_path: Path) -> None:
    """Was: data that is not base64, and an "image" of type text/html, went to the model as images,
    which a provider refuses with a 400 that ends the run."""
    _, result = call_once(raw(raw_server, "content"), tmp_path)
    assert not result.is_error
    images = [p for p in result.parts() if isinstance(p, ImagePart)]
    assert [(p.media_type, p.data) for p in images] == [("image/png", "iVBORw0KGgo="), ("image/png", "AAECAwQ=")]
    words = text(result)
    assert "[image (image/png): not shown, its data is not valid base64]" in words
    assert "[image (text/html): not shown, its type is not an image type]" in words
    assert "[resource x://raw (application/zip): 6 bytes of binary data, not shown]" in words
    assert words.endswith("end")


def test_a_server_that_exits_leaving_a_process_on_its_stdout_fails_at_once_and_leaves_nothing(
    raw_server: Path, tmp_path: Path
) -> None:
    """The server starts a process in a session of its own (so it is neither in the server's group
    nor, once the server has exited, its descendant), which keeps the server's stdout open. Was: the
    start waited its whole start timeout, and that process was left running."""
    leftover = tmp_path / "leftover.pid"
    connector = McpConnector(
        "raw", {"command": sys.executable, "args": [str(raw_server), "orphan_exit", str(leftover)]}, start_timeout_s=600
    )

    async def go() -> str:
        try:
            await connector.start()
        except ConfigError as exc:
            return str(exc)
        await connector.stop()
        return "started"

    said = asyncio.run(asyncio.wait_for(go(), 60))  # a guard: the old way waited the 600 s
    assert said == (
        "MCP server raw did not start: the process exited with status 5 (its last words: cannot open the database)"
    )
    assert not alive(int(leftover.read_text())) and live_processes(connector.pids) == []


def test_a_server_that_dies_mid_call_leaving_a_process_on_its_stdout_is_restarted_not_waited_for(
    raw_server: Path, tmp_path: Path
) -> None:
    """Was: the call waited out its timeout_s (the stdout never ended), and the process stayed."""
    leftover = tmp_path / "leftover.pid"
    _, result = call_once(raw(raw_server, "orphan_call", str(leftover), timeout_s=600), tmp_path)
    assert result.is_error and "did not answer" not in text(result)
    assert "stopped during this call to raw__go (the process exited with status 7) and was restarted" in text(result)
    assert not alive(int(leftover.read_text()))


def test_answers_that_are_not_valid_mcp_are_the_servers_mistake_said_in_one_line(
    raw_server: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Was: the SDK's pydantic ValidationError escaped: out of a tool's execute (a run showed the
    model a 24-error dump quoting the answer), out of ``start`` when the resource list was malformed
    (``tether mcp list`` ended in a traceback, a run failed with no ConfigError), and a malformed
    tool list failed the start with only "ValidationError: 2 validation errors for ListToolsResult"."""
    _, result = call_once(raw(raw_server, "badresult"), tmp_path)
    assert result.is_error and text(result).startswith(
        "Error: the call to raw__go failed on the MCP server raw: its answer is not a valid CallToolResult: "
        "content.0.TextContent.text: Field required (and "  # the union's other members' errors, counted
    )
    assert "\n" not in text(result) and "input_value" not in text(result)
    connector = raw(raw_server, "badres")
    with caplog.at_level("WARNING", logger="tether.connectors"):
        names, result = call_once(connector, tmp_path)
    assert names == ["raw__go"] and text(result) == "fine"  # started, without the resource tools
    assert "its resources could not be listed: its answer is not a valid ListResourcesResult" in caplog.text
    with pytest.raises(ConfigError) as err:
        asyncio.run(asyncio.wait_for(raw(raw_server, "badtool").start(), 60))
    assert str(err.value) == (
        "MCP server raw did not start: its answer is not a valid ListToolsResult: tools.1.inputSchema: Field required"
    )


# --- hostile stdio servers: what holds ---------------------------------------------------------------


def test_lines_that_are_not_json_rpc_around_the_handshake_and_an_answer_are_passed_over(
    raw_server: Path, tmp_path: Path
) -> None:
    connector = raw(raw_server, "garbage")
    names, result = call_once(connector, tmp_path)
    assert names == ["raw__go"] and not result.is_error and text(result) == "fine"
    assert live_processes(connector.pids) == []


def test_answers_with_ids_nobody_asked_for_leave_the_call_to_its_timeout_and_the_server_up(
    raw_server: Path, tmp_path: Path
) -> None:
    connector = raw(raw_server, "wrong_id", timeout_s=1)

    async def go() -> tuple[ToolResult, ToolResult]:
        await connector.start()
        try:
            tool = connector.tools()[0]
            return await tool.execute({}, ctx(tmp_path)), await tool.execute({}, ctx(tmp_path))
        finally:
            await connector.stop()

    first, second = asyncio.run(asyncio.wait_for(go(), 60))
    for result in (first, second):  # the stray answers were neither taken as the call's nor a crash
        assert result.is_error and "did not answer within 1 s" in text(result) and "stray" not in text(result)
    assert len(connector.pids) == 1 and live_processes(connector.pids) == []  # never restarted


def test_a_storm_of_notifications_before_the_answer_does_not_lose_it(raw_server: Path, tmp_path: Path) -> None:
    _, result = call_once(raw(raw_server, "storm", timeout_s=60), tmp_path)
    assert not result.is_error and text(result) == "fine"


def test_a_20_mb_answer_over_stdio_is_cut_to_max_result_chars(raw_server: Path, tmp_path: Path) -> None:
    _, result = call_once(raw(raw_server, "big", timeout_s=60), tmp_path)
    words = text(result)
    assert not result.is_error and len(words) < 101_000
    assert f"of {20 * 1024 * 1024:,} characters cut here" in words and words.startswith("zzz") and words.endswith("zzz")


def test_5000_tools_are_bounded_by_max_tools_chars_and_the_rest_are_named_as_left_out(
    raw_server: Path, tmp_path: Path
) -> None:
    connector = raw(raw_server, "many")
    names, result = call_once(connector, tmp_path, "raw__t0")
    assert not result.is_error and 1000 < len(names) < 5000
    assert len(names) + len(connector.refused) == 5000
    assert all("max_tools_chars" in why for why in connector.refused.values())


def test_a_server_that_never_answers_initialize_fails_at_its_start_timeout_and_is_stopped(raw_server: Path) -> None:
    connector = McpConnector(
        "raw", {"command": sys.executable, "args": [str(raw_server), "hang_init"]}, start_timeout_s=2
    )
    with pytest.raises(ConfigError) as err:
        asyncio.run(asyncio.wait_for(connector.start(), 60))
    assert str(err.value) == "MCP server raw did not start: it did not finish connecting within 2 s"
    assert len(connector.pids) == 1 and live_processes(connector.pids) == []


def test_a_call_that_hangs_on_a_server_that_ignores_sigterm_times_out_and_the_server_is_killed(
    raw_server: Path, tmp_path: Path
) -> None:
    connector = raw(raw_server, "hang_call", timeout_s=1)
    _, result = call_once(connector, tmp_path)
    assert result.is_error and "did not answer within 1 s (timeout_s of [mcp.raw])" in text(result)
    assert live_processes(connector.pids) == []


def test_a_command_that_does_not_exist_stops_the_run_before_the_model_is_asked(tmp_path: Path) -> None:
    missing = McpConnector("ghost", {"command": str(tmp_path / "no-such-server")})
    asked: list[int] = []
    agent = Agent(FunctionModel(lambda m, r: asked.append(1) or "hi"), extensions=[missing], cwd=tmp_path)
    with pytest.raises(ConfigError) as err:
        asyncio.run(asyncio.wait_for(run(agent, "hello"), 60))
    assert str(err.value) == f"MCP server ghost did not start: No such file or directory: {tmp_path / 'no-such-server'}"
    assert asked == []


# --- hostile HTTP servers at the handshake -----------------------------------------------------------


class _Handshake(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    seen: list[tuple[str, str | None, str | None]]
    release: threading.Event

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def _empty(self, status: int, headers: dict[str, str] | None = None) -> None:
        self.send_response(status)
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.send_header("content-length", "0")
        self.end_headers()

    def do_GET(self) -> None:
        self._empty(405)

    def do_DELETE(self) -> None:
        self._empty(405)

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("content-length") or 0))
        self.seen.append((self.path, self.headers.get("x-api-key"), self.headers.get("host")))
        port = self.server.server_address[1]
        if self.path == "/500":
            body = b"<h1>Internal Server Error</h1><pre>key-s3cret</pre>"
            self.send_response(500)
            self.send_header("content-type", "text/html")
            self.send_header("content-length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
        elif self.path == "/redirect":  # to another host name: the key must not follow
            self._empty(307, {"location": f"http://localhost:{port}/500"})
        elif self.path == "/cut":
            self.send_response(200)
            self.send_header("content-type", "text/event-stream")
            self.end_headers()
            self.wfile.write(b'event: message\ndata: {"jsonrpc": "2.0", "id": 0, "resu')
            self.wfile.flush()
            self.close_connection = True
        elif self.path == "/silent":
            self.release.wait(30)
            self.close_connection = True


@pytest.fixture(scope="module")
def handshake() -> Iterator[tuple[str, list[tuple[str, str | None, str | None]]]]:
    seen: list[tuple[str, str | None, str | None]] = []
    release = threading.Event()
    http = ThreadingHTTPServer(("127.0.0.1", 0), type("H", (_Handshake,), {"seen": seen, "release": release}))
    http.daemon_threads = True
    thread = threading.Thread(target=http.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{http.server_address[1]}", seen
    finally:
        release.set()
        http.shutdown()
        http.server_close()
        thread.join(30)


@pytest.mark.parametrize(
    ("path", "says"),
    [
        ("/500", "MCP server web did not start: the server answered HTTP 500"),
        ("/redirect", "MCP server web did not start: Redirect to http://localhost:"),
        ("/cut", "MCP server web did not start: SSE stream ended without a response"),
        ("/silent", "MCP server web did not start: it did not finish connecting within 2 s"),
    ],
)
def test_an_http_server_that_fails_the_handshake_stops_the_run_with_why_and_keeps_the_key(
    handshake: tuple[str, list[tuple[str, str | None, str | None]]], path: str, says: str
) -> None:
    url, seen = handshake
    seen.clear()
    connector = McpConnector("web", {"url": url + path, "headers": {"x-api-key": "key-s3cret"}}, start_timeout_s=2)
    with pytest.raises(ConfigError) as err:
        asyncio.run(asyncio.wait_for(connector.start(), 60))
    assert str(err.value).startswith(says) and "key-s3cret" not in str(err.value)
    assert seen and all(p == path for p, _, _ in seen)  # a redirect is not followed: localhost saw nothing
    assert all(host is not None and host.startswith("127.0.0.1:") for _, _, host in seen)


# --- hostile clients of `tether mcp serve` -------------------------------------------------------------


@pytest.fixture(scope="module")
def serve_home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("serve")
    (root / "workspace").mkdir()
    home = root / "home"
    home.mkdir()
    (home / "config.toml").write_text(
        f'[serve.agents.scanner]\nmodel = "scripted/slow"\ncwd = "{root / "workspace"}"\n'
    )
    return home


class Wire:
    """`tether mcp serve` over stdio, written to and read from a line at a time."""

    def __init__(self, home: Path) -> None:
        drop = ("OPENAI_API_KEY", "LLM_BASE_URL", "TETHER_MODEL")
        env = {**{k: v for k, v in os.environ.items() if k not in drop}, "TETHER_HOME": str(home)}
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "tether", "mcp", "serve"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=env,
        )

    def send(self, message: dict[str, Any] | bytes) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(message if isinstance(message, bytes) else json.dumps(message).encode())
        self.proc.stdin.write(b"\n")
        self.proc.stdin.flush()

    def answer(self) -> dict[str, Any] | None:
        """The next line it writes, or None when none comes within 30 s (a hang guard)."""
        assert self.proc.stdout is not None
        ready, _, _ = select.select([self.proc.stdout], [], [], 30)
        if not ready:
            return None
        line = self.proc.stdout.readline()
        return json.loads(line) if line else None

    def handshake(self) -> None:
        params = {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}
        self.send({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": params})
        init = self.answer()
        assert init is not None and init["id"] == 0 and "result" in init
        self.send({"jsonrpc": "2.0", "method": "notifications/initialized"})

    def close(self) -> tuple[int, bytes, str]:
        """Its stdin closed (the client is gone): its exit code, the rest of its stdout, its stderr."""
        assert self.proc.stdin is not None and self.proc.stdout is not None and self.proc.stderr is not None
        self.proc.stdin.close()
        try:
            code = self.proc.wait(60)
        finally:
            if self.proc.poll() is None:
                self.proc.kill()
        return code, self.proc.stdout.read(), self.proc.stderr.read().decode(errors="replace")


def test_serve_answers_requests_whose_id_is_unusable_instead_of_taking_them_for_notifications(
    serve_home: Path,
) -> None:
    """Was: the SDK read a request whose id is an object, a list, a float, a bool or null as a
    notification and answered nothing, so its client waited for ever."""
    wire = Wire(serve_home)
    try:
        wire.handshake()
        answers = []
        for ident in [{"a": 1}, [1], 1.5, True, None]:
            wire.send({"jsonrpc": "2.0", "id": ident, "method": "tools/list"})
            answers.append(wire.answer())
        wire.send({"jsonrpc": "2.0", "id": 9, "method": "tools/list"})
        after = wire.answer()
    finally:
        code, rest, err = wire.close()
    assert all(a is not None for a in answers), answers
    assert [(a["id"], a["error"]["code"]) for a in answers if a is not None] == [(None, -32600)] * 5
    assert 'an id is a string or an integer, not {"a": 1}' in answers[0]["error"]["message"]  # type: ignore[index]
    assert after is not None and after["id"] == 9 and "agent_scanner" in {t["name"] for t in after["result"]["tools"]}
    assert code == 0 and rest == b"" and "Traceback" not in err


def test_serve_refuses_calls_before_initialize_and_a_client_that_vanishes_mid_run_ends_it_cleanly(
    serve_home: Path,
) -> None:
    wire = Wire(serve_home)
    try:
        wire.send({"jsonrpc": "2.0", "id": 1, "method": "tools/list"})
        early = wire.answer()
        wire.send(b"\xff\xfe not utf-8, not json")
        broken = wire.answer()
        wire.handshake()
        wire.send(
            {
                "jsonrpc": "2.0",
                "id": 2,
                "method": "tools/call",
                "params": {"name": "agent_scanner", "arguments": {"task": "scan"}},
            }
        )
        time.sleep(1)  # the run is under way; then the client goes
    finally:
        code, rest, err = wire.close()
    assert early is not None and early["id"] == 1 and "error" in early
    assert broken is not None and broken["error"]["code"] == -32700
    assert code == 0 and "Traceback" not in err
    for line in rest.splitlines():  # whatever it still wrote is JSON-RPC, never a traceback
        assert json.loads(line)["jsonrpc"] == "2.0"
