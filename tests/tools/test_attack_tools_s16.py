"""Round s16 of attacks on the tools and the sandbox.

- ``web_search`` against a SearXNG that is down, or that answers with what is not its JSON, gave
  the model the library's own words (``All connection attempts failed``, ``Expecting value: line 1
  column 1 (char 0)``, ``'list' object has no attribute 'get'``) instead of what happened and
  what to do.
"""

from __future__ import annotations

import asyncio
import json
import socket
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from tether.cancel import CancelSignal
from tether.tools.base import ToolContext, ToolError, validate_arguments
from tether.tools.web import SearxngBackend, WebSearch


def call(t: Any, cwd: Path, arguments: dict[str, Any]) -> Any:
    ctx = ToolContext(cwd=cwd, signal=CancelSignal())
    return asyncio.run(t.execute(validate_arguments(t, json.dumps(arguments)), ctx))


# --- web_search: a SearXNG that is down or answers nonsense --------------------------------------


@pytest.fixture
def searxng() -> Iterator[tuple[dict[str, Any], str]]:
    """A loopback server answering /search with ``answer["body"]`` (bytes) and ``answer["status"]``."""
    answer: dict[str, Any] = {"status": 200, "body": b"{}"}

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *a: Any) -> None:
            return

        def do_GET(self) -> None:
            self.send_response(answer["status"])
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(answer["body"])))
            self.end_headers()
            self.wfile.write(answer["body"])

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield answer, f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


@pytest.mark.parametrize(
    "body",
    [b"<html>Too many requests</html>", b'["a", "b"]', b'{"results": "none"}', b'{"results": {"a": 1}}'],
)
def test_a_search_backend_answering_what_is_not_its_json_is_a_message(
    searxng: tuple[dict[str, Any], str], body: bytes
) -> None:
    answer, url = searxng
    answer["body"] = body
    with pytest.raises(ToolError, match=r"not SearXNG's JSON .*\[tools\.web_search\] url"):
        call(WebSearch(SearxngBackend(url)), Path("."), {"query": "tether"})


def test_odd_results_from_the_search_backend_are_skipped_not_a_crash(searxng: tuple[dict[str, Any], str]) -> None:
    answer, url = searxng
    answer["body"] = json.dumps(
        {"results": ["text", {"title": None, "url": "https://e.org/a", "content": 3}, {"title": "B", "url": "u"}]}
    ).encode()
    found = call(WebSearch(SearxngBackend(url)), Path("."), {"query": "tether"})
    assert found == "1. \n   https://e.org/a\n   \n\n2. B\n   u\n   "


def test_a_search_backend_that_is_down_is_a_message_without_its_password() -> None:
    with socket.socket() as s:  # a free port, closed again: nothing listens there
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    backend = SearxngBackend(f"http://user:hunter2-secret@127.0.0.1:{port}")
    with pytest.raises(ToolError) as raised:
        call(WebSearch(backend), Path("."), {"query": "tether"})
    said = str(raised.value)
    assert f"SearXNG at http://127.0.0.1:{port}) could not be reached" in said
    assert "web_fetch" in said and "hunter2" not in said
