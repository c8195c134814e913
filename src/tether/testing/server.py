"""A scripted OpenAI-compatible HTTP server, for tests and benchmarks with no network and no key.

``POST /v1/chat/completions`` (with and without ``stream``) answers with the scripted model; the
request's ``model`` names the scenario (``plan`` or ``scripted/plan``). ``GET /v1/models`` lists
the scenarios. ``GET /_stats`` reports requests served and seconds spent serving them, so a
benchmark can subtract server time from client wall time; ``POST /_stats/reset`` zeroes them.

Run it with ``tether scripted serve --port 0``; it prints its base URL.
"""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from tether.errors import ConfigError
from tether.providers.scripted import SCENARIOS, scripted_completion, split_text

__all__ = ["ScriptedServer"]


def _stream_chunks(body: dict[str, Any], include_usage: bool) -> list[dict[str, Any]]:
    """A completion body as the SSE chunks a Chat Completions server sends."""
    base = {"id": body["id"], "object": "chat.completion.chunk", "created": body["created"],
            "model": body["model"]}
    choice = body["choices"][0]
    message = choice["message"]

    def chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
        return {**base, "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}

    out = [chunk({"role": "assistant", "content": ""})]
    out.extend(chunk({"content": piece}) for piece in split_text(message.get("content") or ""))
    for index, call in enumerate(message.get("tool_calls") or []):
        args = call["function"]["arguments"]
        head = {"index": index, "id": call["id"], "type": "function",
                "function": {"name": call["function"]["name"], "arguments": ""}}
        out.append(chunk({"tool_calls": [head]}))
        cut = len(args) // 2  # arguments arrive in pieces, split anywhere
        for piece in (args[:cut], args[cut:]):
            if piece:
                out.append(chunk({"tool_calls": [{"index": index, "function": {"arguments": piece}}]}))
    out.append(chunk({}, choice["finish_reason"]))
    if include_usage:
        out.append({**base, "choices": [], "usage": body["usage"]})
    return out


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    # Headers and body leave in one segment: with Nagle and delayed ACKs, two small writes per
    # response would add ~40 ms to every request on loopback.
    disable_nagle_algorithm = True
    wbufsize = -1
    server: _Server

    def log_message(self, format: str, *args: Any) -> None:  # quiet: tests read stdout
        return

    def _json(self, status: int, payload: Any) -> None:
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)
        self.wfile.flush()

    def _error(self, status: int, message: str, kind: str = "invalid_request_error") -> None:
        self._json(status, {"error": {"message": message, "type": kind, "code": None}})

    def do_GET(self) -> None:
        if self.path.rstrip("/") in ("/v1/models", "/models"):
            created = int(time.time())
            self._json(200, {"object": "list", "data": [
                {"id": name, "object": "model", "created": created, "owned_by": "tether-scripted"}
                for name in SCENARIOS]})
        elif self.path == "/_stats":
            self._json(200, self.server.stats())
        else:
            self._error(404, f"no route {self.path}")

    def do_POST(self) -> None:
        length = int(self.headers.get("content-length") or 0)
        raw = self.rfile.read(length)
        started = time.perf_counter()
        if self.path == "/_stats/reset":
            self.server.reset()
            self._json(200, self.server.stats())
            return
        if self.path.rstrip("/") not in ("/v1/chat/completions", "/chat/completions"):
            self._error(404, f"no route {self.path}")
            return
        try:
            request = json.loads(raw)
            scenario = str(request.get("model", "")).removeprefix("scripted/")
            body = scripted_completion(scenario, request["messages"], request.get("tools") or (),
                                       request.get("max_tokens") or request.get("max_completion_tokens"),
                                       model=scenario)
        except (ValueError, KeyError, TypeError, ConfigError) as exc:
            self._error(400, f"bad request: {exc}")
            return
        if request.get("stream"):
            include = bool((request.get("stream_options") or {}).get("include_usage"))
            self._stream(_stream_chunks(body, include))
        else:
            self._json(200, body)
        self.server.record(time.perf_counter() - started)

    def _stream(self, chunks: list[dict[str, Any]]) -> None:
        self.send_response(200)
        self.send_header("content-type", "text/event-stream")
        self.send_header("cache-control", "no-cache")
        self.send_header("transfer-encoding", "chunked")
        self.end_headers()
        events = [f"data: {json.dumps(c)}\n\n" for c in chunks] + ["data: [DONE]\n\n"]
        for event in events:
            data = event.encode()
            self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
        self.wfile.write(b"0\r\n\r\n")
        self.wfile.flush()


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, address: tuple[str, int]) -> None:
        super().__init__(address, _Handler)
        self._lock = threading.Lock()
        self.requests = 0
        self.server_s = 0.0

    def handle_error(self, request: Any, client_address: Any) -> None:
        # A client that hangs up (a cancelled run, a killed process) is not the server's error.
        import sys

        if not isinstance(sys.exc_info()[1], ConnectionError):
            super().handle_error(request, client_address)

    def record(self, seconds: float) -> None:
        with self._lock:
            self.requests += 1
            self.server_s += seconds

    def reset(self) -> None:
        with self._lock:
            self.requests, self.server_s = 0, 0.0

    def stats(self) -> dict[str, Any]:
        with self._lock:
            return {"requests": self.requests, "server_s": self.server_s}


class ScriptedServer:
    """The scripted model behind HTTP on loopback. ``with ScriptedServer() as s: s.base_url``."""

    def __init__(self, host: str = "127.0.0.1", port: int = 0) -> None:
        self._server = _Server((host, port))
        self._thread: threading.Thread | None = None

    @property
    def port(self) -> int:
        return int(self._server.server_address[1])

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def start(self) -> ScriptedServer:
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()
        return self

    def serve_forever(self) -> None:
        self._server.serve_forever()

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()

    def stats(self) -> dict[str, Any]:
        return self._server.stats()

    def __enter__(self) -> ScriptedServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
