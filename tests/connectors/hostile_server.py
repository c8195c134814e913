"""A streamable-HTTP MCP server that misbehaves on purpose, in a thread of the test process on a
free loopback port: enough of the protocol to connect and list tools, then each tool fails its own
way. It echoes the caller's ``authorization`` header into what it breaks, as a hostile or careless
server might, so the tests can check that no token reaches the model, the run or the logs.

Tools (each read-only, so tether may say it is safe to call again):

* ``ok``: answers ``fine``;
* ``status_500``: HTTP 500 with an HTML page holding the header;
* ``garbage``: HTTP 200, ``application/json``, a body that is not JSON;
* ``not_jsonrpc``: HTTP 200, valid JSON that is not a JSON-RPC message;
* ``drop``: starts an event stream, writes half an event, and closes the connection;
* ``drop_json``: a JSON answer whose connection closes before the length it announced;
* ``stall``: never answers (until the server stops);
* ``huge``: a valid result of ``HUGE_BYTES`` of text, as JSON;
* ``huge_stream``: the same as one server-sent event;
* ``echo_error``: a JSON-RPC error whose message quotes the header;
* ``forbidden``: HTTP 403 ``insufficient_scope``, naming the scopes it needs;
* ``rotate``: the server forgets the token it accepts (as after a revocation), so this call gets 401
  until tether refreshes the token at ``POST /token``; then it answers ``rotated``.

``/token`` grants ``refresh_token=refresh-h`` a new access token ``hostile-K`` each time.
"""

from __future__ import annotations

import json
import socket
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs

__all__ = ["HUGE_BYTES", "HostileServer"]

HUGE_BYTES = 20 * 1024 * 1024  # past tether's 16 MiB
TOOLS = [
    "ok",
    "status_500",
    "garbage",
    "not_jsonrpc",
    "drop",
    "drop_json",
    "stall",
    "huge",
    "huge_stream",
    "echo_error",
    "rotate",
    "forbidden",
]


class HostileServer:
    def __init__(self) -> None:
        self.valid = "hostile-0"  # the access token /mcp accepts
        self.grants = 0
        self.rotated = False
        self.calls: list[str] = []
        self.sessions = 0  # initialize requests: a reconnection would make it 2
        self.release = threading.Event()  # lets stalled calls end when the server stops
        self._lock = threading.Lock()
        self._http = ThreadingHTTPServer(("127.0.0.1", 0), type("Handler", (_Handler,), {"hostile": self}))
        self._http.daemon_threads = True
        self._thread = threading.Thread(target=self._http.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._http.server_address[1]}"

    def __enter__(self) -> HostileServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.release.set()
        self._http.shutdown()
        self._http.server_close()
        self._thread.join(30)

    def grant(self) -> str:
        with self._lock:
            self.grants += 1
            self.valid = f"hostile-{self.grants}"
            return self.valid


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    hostile: HostileServer

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def _send(
        self, status: int, body: bytes, content_type: str = "application/json", headers: dict[str, str] | None = None
    ) -> None:
        self.send_response(status)
        self.send_header("content-type", content_type)
        self.send_header("content-length", str(len(body)))
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(body)

    def _result(self, id_: Any, result: dict[str, Any], headers: dict[str, str] | None = None) -> None:
        self._send(200, json.dumps({"jsonrpc": "2.0", "id": id_, "result": result}).encode(), headers=headers)

    def do_GET(self) -> None:  # no server-to-client stream
        self._send(405, b"", "text/plain")

    def do_DELETE(self) -> None:
        self._send(200, b"", "text/plain")

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers.get("content-length") or 0))
        if self.path == "/token":
            form = parse_qs(body.decode())
            if form.get("refresh_token") != ["refresh-h"]:
                self._send(400, b'{"error": "invalid_grant"}')
                return
            self._send(200, json.dumps({"access_token": self.hostile.grant(), "expires_in": 3600}).encode())
            return
        said = self.headers.get("authorization", "")
        if said != f"Bearer {self.hostile.valid}":
            self._send(
                401,
                json.dumps({"error": "invalid_token", "you_sent": said}).encode(),
                headers={"www-authenticate": 'Bearer error="invalid_token"'},
            )
            return
        message = json.loads(body)
        method, id_ = message.get("method"), message.get("id")
        if id_ is None:  # a notification
            self._send(202, b"", "text/plain")
        elif method == "initialize":
            self.hostile.sessions += 1
            self._result(
                id_,
                {
                    "protocolVersion": "2025-06-18",
                    "capabilities": {"tools": {}},
                    "serverInfo": {"name": "hostile", "version": "1"},
                },
                headers={"mcp-session-id": "s-1"},
            )
        elif method == "tools/list":
            self._result(
                id_,
                {
                    "tools": [
                        {"name": n, "inputSchema": {"type": "object"}, "annotations": {"readOnlyHint": True}}
                        for n in TOOLS
                    ]
                },
            )
        elif method == "tools/call":
            name = message["params"]["name"]
            self.hostile.calls.append(name)
            getattr(self, f"_tool_{name}")(id_, said)
        else:
            self._send(
                200,
                json.dumps(
                    {"jsonrpc": "2.0", "id": id_, "error": {"code": -32601, "message": "no such method"}}
                ).encode(),
            )

    def _tool_ok(self, id_: Any, said: str) -> None:
        self._result(id_, {"content": [{"type": "text", "text": "fine"}]})

    def _tool_status_500(self, id_: Any, said: str) -> None:
        self._send(500, f"<html><h1>Internal Server Error</h1><pre>{said}</pre></html>".encode(), "text/html")

    def _tool_garbage(self, id_: Any, said: str) -> None:
        self._send(200, f'{{"jsonrpc": "2.0", "id": {id_}, "result": {{"oops {said}'.encode())

    def _tool_not_jsonrpc(self, id_: Any, said: str) -> None:
        self._send(200, json.dumps({"hello": said, "id": id_}).encode())

    def _tool_drop(self, id_: Any, said: str) -> None:
        self.send_response(200)
        self.send_header("content-type", "text/event-stream")
        self.end_headers()
        self.wfile.write(f'event: message\ndata: {{"jsonrpc": "2.0", "id": {id_}, "result": {{"cont'.encode())
        self.wfile.flush()
        self.connection.shutdown(socket.SHUT_RDWR)
        self.close_connection = True

    def _tool_drop_json(self, id_: Any, said: str) -> None:
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", "1000")
        self.end_headers()
        self.wfile.write(f'{{"jsonrpc": "2.0", "id": {id_}, "result": {{"cont'.encode())
        self.wfile.flush()
        self.connection.shutdown(socket.SHUT_RDWR)
        self.close_connection = True

    def _tool_stall(self, id_: Any, said: str) -> None:
        self.hostile.release.wait()
        self.close_connection = True

    def _tool_huge(self, id_: Any, said: str) -> None:
        self._result(id_, {"content": [{"type": "text", "text": "x" * HUGE_BYTES}]})

    def _tool_huge_stream(self, id_: Any, said: str) -> None:
        event = json.dumps(
            {"jsonrpc": "2.0", "id": id_, "result": {"content": [{"type": "text", "text": "y" * HUGE_BYTES}]}}
        )
        self._send(200, f"event: message\ndata: {event}\n\n".encode(), "text/event-stream")

    def _tool_rotate(self, id_: Any, said: str) -> None:
        if not self.hostile.rotated:  # the first time: the token is revoked before the call is answered
            self.hostile.rotated, self.hostile.valid = True, "revoked"
            self._send(
                401,
                json.dumps({"error": "invalid_token", "you_sent": said}).encode(),
                headers={"www-authenticate": 'Bearer error="invalid_token"'},
            )
            return
        self._result(id_, {"content": [{"type": "text", "text": "rotated"}]})

    def _tool_echo_error(self, id_: Any, said: str) -> None:
        self._send(
            200,
            json.dumps(
                {"jsonrpc": "2.0", "id": id_, "error": {"code": -32000, "message": f"bad token {said}?"}}
            ).encode(),
        )

    def _tool_forbidden(self, id_: Any, said: str) -> None:
        self._send(
            403,
            json.dumps({"error": "insufficient_scope"}).encode(),
            headers={"www-authenticate": 'Bearer error="insufficient_scope", scope="stock.read stock.admin"'},
        )
