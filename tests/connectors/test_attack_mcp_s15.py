"""tether as an MCP client against hostile servers, round fifteen: real server processes
(raw_s15_server.py) and real HTTP servers on a loopback port. Each test says what it proves; "was:"
says how it failed before the fix it came with."""

from __future__ import annotations

import asyncio
import json
import re
import sys
import threading
import time
from http.server import ThreadingHTTPServer
from pathlib import Path

import pytest

from tests.connectors.conftest import live_processes
from tests.connectors.raw import JsonHandler, handshake
from tether import RunState
from tether.cancel import CancelSignal
from tether.connectors import McpConnector
from tether.connectors._client_side import Asker
from tether.errors import ConfigError
from tether.messages import TextPart
from tether.tools.base import ToolContext, ToolResult

SERVER = Path(__file__).resolve().parent / "raw_s15_server.py"

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="leftovers are found in /proc (Linux)")


def raw(mode: str, **config: object) -> McpConnector:
    return McpConnector("raw", {"command": sys.executable, "args": [str(SERVER), mode], **config})


# --- a server's stderr ---------------------------------------------------------------------------


def test_a_server_that_floods_stderr_without_a_newline_still_has_its_last_words_read() -> None:
    """A server writes 65 MiB to stderr on one line (a progress bar redrawn with ``\\r`` for
    hours writes that), then why it stops, and exits. Was: the line passed the 64 MiB a stderr
    line was read to, the reading of stderr ended there, and the error said only "exited with
    status 3": its last words were never read (and, the pipe no longer drained, a server still up
    would have blocked on its next write to stderr)."""
    connector = raw("flood_then_die")
    with pytest.raises(ConfigError) as err:
        asyncio.run(asyncio.wait_for(connector.start(), 60))  # a guard against a hang, not a measurement
    assert str(err.value) == (
        "MCP server raw did not start: the process exited with status 3 "
        "(its last words: fatal: cannot open the stock database)"
    )
    assert live_processes(connector.pids) == []


# --- sampling inside the run's budget -----------------------------------------------------------------


def test_a_sampling_request_with_a_negative_max_tokens_is_refused_not_let_past_the_budget(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A server asks for a completion with ``maxTokens: -1``, which llama.cpp's OpenAI-compatible
    server (here a FunctionModel that does the same) takes for "no limit". Was: the worst case was
    priced with -1 tokens to answer, below zero, so the request passed the budget check with $0.001
    left, and its answer of thousands of tokens took the run past its budget."""
    import mcp_types as types

    from tether.connectors._client_side import ClientSide
    from tether.providers import registry
    from tether.providers.base import ModelRequest
    from tether.testing import FunctionModel

    def reply(messages: object, request: ModelRequest) -> str:
        limit = request.max_tokens if request.max_tokens is not None and request.max_tokens > 0 else 20_000
        return "word " * limit

    model = FunctionModel(reply)
    monkeypatch.setattr(
        registry,
        "resolve_provider",
        lambda name, settings=None: registry.ResolvedModel(model, "function", "scripted/hello"),
    )
    side = ClientSide("srv", {"sampling": "allow", "sampling_model": "scripted/hello"}, Asker())
    state = RunState()
    side.begin(ToolContext(cwd=Path("."), signal=CancelSignal(), state=state, budget_left_usd=0.001, call_id="c1"), "t")
    message = types.SamplingMessage(role="user", content=types.TextContent(type="text", text="write it all"))
    answer = asyncio.run(side.sampling(types.CreateMessageRequestParams(messages=[message], max_tokens=-1)))
    assert isinstance(answer, types.ErrorData)
    assert answer.message == "its maxTokens is -1: the most tokens the answer may take cannot be below 0"
    assert model.requests == [] and state.cost_usd == 0.0
    answer = asyncio.run(side.sampling(types.CreateMessageRequestParams(messages=[message], max_tokens=5)))
    assert isinstance(answer, types.CreateMessageResult) and 0 < state.cost_usd <= 0.001  # a fair one still is


# --- elicitation ----------------------------------------------------------------------------------


def test_a_question_too_long_to_put_to_a_person_is_refused_saying_why() -> None:
    """A server asks the person a question of 198,000 characters, then one whose only field is
    described in 200,000. Was: both were put to the person whole (the terminal filled with it; in a served run it was kept
    in the run's state and its trace, saved at each change, and sent to the page), where a form's
    fields were bounded (30) but its words were not. Now each is refused without asking, the
    server told why."""
    asked: list[str] = []

    async def person(question: str) -> str:
        asked.append(question)
        return "y"

    connector = McpConnector(
        "raw", {"command": sys.executable, "args": [str(SERVER), "long_question"]}, asker=Asker(person)
    )

    async def go() -> ToolResult:
        await connector.start()
        try:
            ctx = ToolContext(cwd=Path("."), signal=CancelSignal(), state=RunState(), call_id="c1")
            return await connector.tools()[0].execute({}, ctx)
        finally:
            await connector.stop()

    result = asyncio.run(asyncio.wait_for(go(), 60))  # a guard against a hang, not a measurement
    told = "".join(p.text for p in result.parts() if isinstance(p, TextPart)).split(" | ")
    refused = (
        r"the question is (198|200),\d{3} characters \(its message, URL and form\); "
        "tether puts at most 20,000 to a person: ask in fewer words"
    )
    assert len(told) == 2 and all(re.fullmatch(refused, said) for said in told), told
    assert asked == []
    assert live_processes(connector.pids) == []


# --- a remote server that ignores a cancellation --------------------------------------------------


class _Flood(JsonHandler):
    """A streamable-HTTP MCP server whose tool answers with an event stream of progress
    notifications that never ends, whatever the client says, until the client closes it."""

    closed: threading.Event  # the client closed a call's stream
    stop: threading.Event  # the test is over

    def do_POST(self) -> None:
        message = self._message()
        method, ident = message.get("method"), message.get("id")
        if ident is None:  # a notification (notifications/cancelled among them): heard, not heeded
            self.send_response(202)
            self.send_header("content-length", "0")
            self.end_headers()
        elif method == "initialize":  # with a session, which the client ends with a DELETE
            body = json.dumps({"jsonrpc": "2.0", "id": ident, "result": handshake("flood")}).encode()
            self.send_response(200)
            self.send_header("content-type", "application/json")
            self.send_header("mcp-session-id", "s15")
            self.send_header("content-length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
        elif method == "tools/list":
            spec = {"name": "scan", "inputSchema": {"type": "object"}, "annotations": {"readOnlyHint": True}}
            self._result(ident, {"tools": [spec]})
        elif method != "tools/call":  # server/discover (MCP 2026-07-28) among them: an older server
            error = {"code": -32601, "message": "no such method"}
            self._json(200, json.dumps({"jsonrpc": "2.0", "id": ident, "error": error}).encode())
        else:
            token = (message["params"].get("_meta") or {}).get("progressToken")
            self.send_response(200)
            self.send_header("content-type", "text/event-stream")
            self.end_headers()
            self.close_connection = True
            n = 0
            try:
                while not self.stop.is_set():
                    n += 1
                    note = {"progressToken": token, "progress": n, "message": f"scanning {n}"}
                    event = {"jsonrpc": "2.0", "method": "notifications/progress", "params": note}
                    self.wfile.write(b"data: " + json.dumps(event).encode() + b"\n\n")
                    self.wfile.flush()
                    time.sleep(0.002)
            except OSError:
                self.closed.set()

    def do_GET(self) -> None:  # no stream for the server's own messages
        self.send_response(405)
        self.send_header("content-length", "0")
        self.end_headers()

    def do_DELETE(self) -> None:
        self.send_response(200)
        self.send_header("content-length", "0")
        self.end_headers()


def test_a_cancelled_calls_event_stream_is_closed_though_its_server_goes_on_writing(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A remote tool answers with progress notifications without end and ignores MCP's
    cancellation. Was: after the call's timeout_s, tether went on reading and parsing that stream
    for the rest of the session (each such call one more stream), and as the session closed the
    SDK logged "Error parsing SSE message" with a traceback for each event still coming, which
    ``tether run`` printed. Now the stream is closed once the call is cancelled."""
    handler = type("Flood", (_Flood,), {"closed": threading.Event(), "stop": threading.Event()})
    http = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    http.daemon_threads = True
    threading.Thread(target=http.serve_forever, daemon=True).start()
    connector = McpConnector("flood", {"url": f"http://127.0.0.1:{http.server_address[1]}/mcp", "timeout_s": 1})

    async def go() -> tuple[ToolResult, bool]:
        await connector.start()
        try:
            result = await connector.tools()[0].execute({}, ToolContext(cwd=Path("."), signal=CancelSignal()))
            return result, await asyncio.to_thread(handler.closed.wait, 30)  # closed while the session lives
        finally:
            await connector.stop()

    try:
        result, closed = asyncio.run(asyncio.wait_for(go(), 90))  # a guard against a hang, not a measurement
    finally:
        handler.stop.set()
        http.shutdown()
        http.server_close()
    words = "".join(p.text for p in result.parts() if isinstance(p, TextPart))
    assert result.is_error and "flood__scan did not answer within 1 s" in words
    assert closed
    assert not [r for r in caplog.records if r.exc_info]


class _Mute(_Flood):
    """The same server, which never answers the DELETE that ends a session (a hung process behind a
    proxy that holds the connection)."""

    def do_DELETE(self) -> None:
        self.stop.wait(60)


def test_a_remote_server_that_never_answers_the_end_of_its_session_does_not_hold_the_run_end(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Was: stopping the connector waited for the answer to the session's DELETE until the
    connection's own bound cut it, 15 s later, so each run (each message of a chat) using such a
    server ended 15 s late. Now the DELETE is waited for 2 s, as a stdio server's close is. (The 12 s
    is the bound the old code could not meet, not a measurement: the stop takes about 2 s.)"""
    handler = type("Mute", (_Mute,), {"closed": threading.Event(), "stop": threading.Event()})
    http = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    http.daemon_threads = True
    threading.Thread(target=http.serve_forever, daemon=True).start()
    connector = McpConnector("mute", {"url": f"http://127.0.0.1:{http.server_address[1]}/mcp"})

    async def go() -> None:
        await connector.start()
        await asyncio.wait_for(connector.stop(), 12)

    try:
        asyncio.run(go())
    finally:
        handler.stop.set()
        http.shutdown()
        http.server_close()
    assert not [r for r in caplog.records if "Session termination failed" in r.getMessage()]
