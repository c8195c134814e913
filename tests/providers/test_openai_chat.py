"""The OpenAI Chat Completions wire and provider, against the scripted server on loopback."""

from __future__ import annotations

import asyncio
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from tether import Agent, RunState, run_sync
from tether.errors import AuthError, ConfigError, ResponseError
from tether.messages import ImagePart, TextPart, ToolMessage, UserMessage
from tether.providers.base import ModelRequest
from tether.providers.openai_chat import OpenAIChatProvider, StreamAssembler, WireCache
from tether.testing import ScriptedServer
from tether.tools.files import FILE_TOOLS
from tether.usage import Price

PRICES = {f"openai/{s}": Price(input=2.0, output=12.0) for s in ("plan", "runaway", "recover")}


@pytest.mark.parametrize("stream", [True, False])
def test_plan_through_http_matches_in_process_cost(scripted_server: ScriptedServer, workspace: Path,
                                                   monkeypatch: pytest.MonkeyPatch, stream: bool) -> None:
    monkeypatch.setenv("LLM_BASE_URL", scripted_server.base_url)
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    over_http = run_sync(Agent("openai/plan", tools=FILE_TOOLS, cwd=workspace, stream=stream, prices=PRICES,
                               max_budget_usd=1.0), "Which file mentions a timeout?")
    in_process = run_sync(Agent("scripted/plan", tools=FILE_TOOLS, cwd=workspace), "Which file mentions a timeout?")
    assert over_http.status == "completed" and over_http.turns == 3
    assert over_http.output == in_process.output
    assert over_http.usage == in_process.usage
    assert over_http.cost_usd == pytest.approx(in_process.cost_usd)


def test_stream_assembler_joins_split_arguments_and_repeated_ids() -> None:
    a = StreamAssembler("m")
    chunks = [
        {"choices": [{"index": 0, "delta": {"role": "assistant", "content": None}}]},
        {"choices": [{"index": 0, "delta": {"tool_calls": [{"index": 0, "id": "x1", "type": "function",
                                                            "function": {"name": "read_file", "arguments": ""}}]}}]},
        {"choices": [{"index": 0, "delta": {"tool_calls": [{"index": 0, "id": "x1", "function": {"name": "read_file",
                                                                                                "arguments": '{"pa'}}]}}]},
        {"choices": [{"index": 0, "delta": {"tool_calls": [{"index": 0, "function": {"arguments": 'th": "a'}}]}}]},
        {"choices": [{"index": 0, "delta": {"tool_calls": [{"index": 0, "function": {"arguments": '.txt"}'}}]}}]},
        {"choices": [{"index": 0, "delta": {}, "finish_reason": "function_call"}]},
    ]
    for c in chunks:
        a.feed(c)
    msg = a.message()
    (call,) = msg.tool_calls
    assert (call.id, call.name, json.loads(call.arguments)) == ("x1", "read_file", {"path": "a.txt"})
    assert msg.finish_reason == "function_call"
    assert msg.usage is not None and msg.usage.estimated  # no usage chunk arrived


def test_stream_assembler_rejects_garbage() -> None:
    with pytest.raises(ResponseError):
        StreamAssembler("m").feed(["not", "an", "object"])
    with pytest.raises(ResponseError, match="mid-stream"):
        StreamAssembler("m").feed({"error": {"message": "overloaded"}})


def test_tool_images_follow_as_a_user_message() -> None:
    wire = WireCache().messages("sys", [
        UserMessage.text("look"),
        ToolMessage(call_id="a", name="shot", content=(TextPart(text="see image"), ImagePart(data="AAAA"))),
    ])
    assert [m["role"] for m in wire] == ["system", "user", "tool", "user"]
    assert wire[3]["content"][0]["image_url"]["url"] == "data:image/png;base64,AAAA"


class _FixedHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    status = 200
    body = b""
    content_type = "application/json"
    hits = 0

    def log_message(self, *args: Any) -> None:
        return

    def do_POST(self) -> None:
        type(self).hits += 1
        self.rfile.read(int(self.headers.get("content-length") or 0))
        self.send_response(self.status)
        self.send_header("content-type", self.content_type)
        self.send_header("content-length", str(len(self.body)))
        self.end_headers()
        self.wfile.write(self.body)

    do_GET = do_POST


def serve(status: int, body: bytes, content_type: str = "application/json") -> tuple[ThreadingHTTPServer, type]:
    handler = type("H", (_FixedHandler,), {"status": status, "body": body, "content_type": content_type, "hits": 0})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, handler


def test_401_fails_the_run_at_once_naming_the_key(monkeypatch: pytest.MonkeyPatch) -> None:
    server, handler = serve(401, b'{"error":{"message":"bad key"}}')
    try:
        monkeypatch.setenv("LLM_BASE_URL", f"http://127.0.0.1:{server.server_address[1]}/v1")
        monkeypatch.setenv("OPENAI_API_KEY", "sk-test-secret-value")
        r = run_sync(Agent("openai/gpt-4.1-mini"), "hi")
        assert r.status == "failed" and "OPENAI_API_KEY" in (r.reason or "")
        assert "sk-test-secret-value" not in (r.reason or "")
        assert handler.hits == 1
    finally:
        server.shutdown()


def test_malformed_stream_chunk_is_a_failed_run_not_a_crash(monkeypatch: pytest.MonkeyPatch) -> None:
    body = b'data: {"choices":[{"index":0,"delta":{"content":"hi"}}]}\n\ndata: {oops\n\n'
    server, _ = serve(200, body, "text/event-stream")
    try:
        monkeypatch.setenv("LLM_BASE_URL", f"http://127.0.0.1:{server.server_address[1]}/v1")
        state = RunState()
        r = run_sync(Agent("openai/gpt-4.1-mini"), "hi", state=state)
        assert r.status == "failed" and "malformed" in (r.reason or "")
        assert state.turns == 0  # nothing half-parsed entered the transcript
    finally:
        server.shutdown()


def test_missing_key_for_a_remote_server_is_a_config_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("LLM_BASE_URL", raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    with pytest.raises(ConfigError, match="OPENAI_API_KEY"):
        OpenAIChatProvider()


def test_model_name_after_the_prefix_is_what_is_sent(scripted_server: ScriptedServer) -> None:
    provider = OpenAIChatProvider(base_url=scripted_server.base_url)

    async def go() -> Any:
        try:
            return await provider.complete(ModelRequest(model="hello", messages=[UserMessage.text("hi")]))
        finally:
            await provider.aclose()

    response = asyncio.run(go())
    assert response.message.text.startswith("Hello! I am the scripted model")


def test_validate_auth_against_models_endpoint(scripted_server: ScriptedServer) -> None:
    provider = OpenAIChatProvider(base_url=scripted_server.base_url)
    asyncio.run(provider.validate_auth())
    server, _ = serve(401, b"{}")
    try:
        bad = OpenAIChatProvider(base_url=f"http://127.0.0.1:{server.server_address[1]}/v1", api_key="k")
        with pytest.raises(AuthError):
            asyncio.run(bad.validate_auth())
    finally:
        server.shutdown()
