"""An embeddings gateway behind HTTP Basic auth (``https://user:password@host/v1``): the same
rules as a model provider's base URL (tether.providers.http.basic_auth)."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from tether.errors import ConfigError
from tether.knowledge.embed import OpenAIEmbedder


class _Records(BaseHTTPRequestHandler):
    seen: list[str] = []

    def do_POST(self) -> None:
        texts = json.loads(self.rfile.read(int(self.headers["Content-Length"])))["input"]
        type(self).seen.append(self.headers.get("Authorization", ""))
        data = json.dumps({"data": [{"index": i, "embedding": [1.0, float(len(t))]} for i, t in enumerate(texts)]})
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data.encode())

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def port() -> Iterator[int]:
    _Records.seen = []
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _Records)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    yield httpd.server_address[1]
    httpd.shutdown()


def test_a_key_given_beside_a_password_in_the_url_is_refused_before_any_request(port: int) -> None:
    """Both go in the Authorization header, so one of them was silently not sent (the key)."""
    with pytest.raises(ConfigError) as caught:
        OpenAIEmbedder("m", base_url=f"http://svc:hunter2-Pa55word@127.0.0.1:{port}/v1", api_key="sk-proj-given-key")
    said = str(caught.value)
    assert "user:password@" in said and "hunter2" not in said and "sk-proj" not in said, said
    assert _Records.seen == []


def test_the_urls_own_credentials_are_sent_though_openai_api_key_is_set(
    port: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """OPENAI_API_KEY, set for the chat model, gives way to the gateway's user and password."""
    monkeypatch.setenv("OPENAI_API_KEY", "sk-proj-for-the-chat-model")
    embedder = OpenAIEmbedder("m", base_url=f"http://svc:hunter2-Pa55word@127.0.0.1:{port}/v1")
    assert embedder.embed(["one", "three"]).shape == (2, 2)
    assert _Records.seen == ["Basic c3ZjOmh1bnRlcjItUGE1NXdvcmQ="]  # svc:hunter2-Pa55word
