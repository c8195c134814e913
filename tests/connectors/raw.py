"""MCP servers written raw, line by line over stdio, for answers the SDK would never send: each test
file gives the body of its own (the head below defines ``MODE``, the first argument, and ``send``).
``JsonHandler`` is the same for a streamable-HTTP server written raw."""

from __future__ import annotations

import json
import sys
import textwrap
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any

from tether.connectors import McpConnector

HEAD = """\
import json, os, signal, subprocess, sys, time

MODE = sys.argv[1]

def send(message):
    sys.stdout.write(json.dumps(message) + "\\n")
    sys.stdout.flush()
"""


def write_server(folder: Path, body: str) -> Path:
    """The server's script in ``folder``: the head, then ``body`` (dedented)."""
    path = folder / "raw_server.py"
    path.write_text(HEAD + textwrap.dedent(body))
    return path


def raw(server: Path, mode: str, *extra: str, start_timeout_s: float = 30, **config: Any) -> McpConnector:
    """A connector that starts ``server`` in ``mode`` (with ``extra`` arguments)."""
    return McpConnector(
        "raw",
        {"command": sys.executable, "args": [str(server), mode, *extra], **config},
        start_timeout_s=start_timeout_s,
    )


class JsonHandler(BaseHTTPRequestHandler):
    """An HTTP/1.1 handler that logs nothing and answers JSON bodies (``_json``)."""

    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def _json(self, status: int, body: bytes) -> None:
        self.send_response(status)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def _message(self) -> dict[str, Any]:
        """The JSON-RPC message the request carries."""
        message: dict[str, Any] = json.loads(self.rfile.read(int(self.headers.get("content-length") or 0)))
        return message

    def _result(self, ident: Any, result: Any) -> None:
        """Answer request ``ident`` with ``result``, as JSON."""
        self._json(200, json.dumps({"jsonrpc": "2.0", "id": ident, "result": result}).encode())


def handshake(name: str) -> dict[str, Any]:
    """What a server of tools answers ``initialize`` with (the 2025-06-18 revision)."""
    return {
        "protocolVersion": "2025-06-18",
        "capabilities": {"tools": {}},
        "serverInfo": {"name": name, "version": "1"},
    }
