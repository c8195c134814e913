"""The OpenAI Chat Completions wire and provider, against the scripted server on loopback."""

from __future__ import annotations

import asyncio
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tether import Agent, RunState, run_sync
from tether.errors import AuthError, ConfigError, ResponseError, RetryableError
from tether.messages import AssistantMessage, ImagePart, Message, TextPart, ToolCallPart, ToolMessage, UserMessage
from tether.providers import openai_chat
from tether.providers.base import ModelRequest
from tether.providers.openai_chat import OpenAIChatProvider, StreamAssembler, WireCache, message_to_wire
from tether.testing import ScriptedServer
from tether.tools.files import FILE_TOOLS
from tether.usage import Price

PRICES = {f"openai/{s}": Price(input=2.0, output=12.0) for s in ("plan", "runaway", "recover")}


@pytest.mark.parametrize("stream", [True, False])
def test_plan_through_http_matches_in_process_cost(
    scripted_server: ScriptedServer, workspace: Path, monkeypatch: pytest.MonkeyPatch, stream: bool
) -> None:
    monkeypatch.setenv("LLM_BASE_URL", scripted_server.base_url)
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    over_http = run_sync(
        Agent("openai/plan", tools=FILE_TOOLS, cwd=workspace, stream=stream, prices=PRICES, max_budget_usd=1.0),
        "Which file mentions a timeout?",
    )
    in_process = run_sync(Agent("scripted/plan", tools=FILE_TOOLS, cwd=workspace), "Which file mentions a timeout?")
    assert over_http.status == "completed" and over_http.turns == 3
    assert over_http.output == in_process.output
    assert over_http.usage == in_process.usage
    assert over_http.cost_usd == pytest.approx(in_process.cost_usd)


def test_stream_assembler_joins_split_arguments_and_repeated_ids() -> None:
    a = StreamAssembler("m")
    chunks = [
        {"choices": [{"index": 0, "delta": {"role": "assistant", "content": None}}]},
        {
            "choices": [
                {
                    "index": 0,
                    "delta": {
                        "tool_calls": [
                            {
                                "index": 0,
                                "id": "x1",
                                "type": "function",
                                "function": {"name": "read_file", "arguments": ""},
                            }
                        ]
                    },
                }
            ]
        },
        {
            "choices": [
                {
                    "index": 0,
                    "delta": {
                        "tool_calls": [{"index": 0, "id": "x1", "function": {"name": "read_file", "arguments": '{"pa'}}]
                    },
                }
            ]
        },
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
    with pytest.raises(RetryableError, match="mid-stream: overloaded"):  # the server's own failure: asked again
        StreamAssembler("m").feed({"error": {"message": "overloaded"}})
    with pytest.raises(AuthError, match="mid-stream"):
        StreamAssembler("m").feed({"error": {"message": "no", "type": "invalid_api_key"}})


def test_tool_images_follow_as_a_user_message() -> None:
    wire = WireCache().messages(
        "sys",
        [
            UserMessage.text("look"),
            ToolMessage(call_id="a", name="shot", content=(TextPart(text="see image"), ImagePart(data="AAAA"))),
        ],
    )
    assert [m["role"] for m in wire] == ["system", "user", "tool", "user"]
    assert wire[3]["content"][0]["image_url"]["url"] == "data:image/png;base64,AAAA"


def _reference_wire(system: str | None, messages: list[Message]) -> list[dict[str, Any]]:
    """The Chat Completions history, translated from scratch (what the cache must always equal)."""
    out: list[dict[str, Any]] = [{"role": "system", "content": system}] if system else []
    images: list[dict[str, Any]] = []
    for m in messages:
        if images and m.role != "tool":
            out.append({"role": "user", "content": images})
            images = []
        out.append(message_to_wire(m))
        if isinstance(m, ToolMessage):
            images += [
                {"type": "image_url", "image_url": {"url": f"data:{p.media_type};base64,{p.data}"}}
                for p in m.content
                if isinstance(p, ImagePart)
            ]
    return out + ([{"role": "user", "content": images}] if images else [])


def _call(i: int, image: bool = False) -> list[Message]:
    content: tuple[TextPart | ImagePart, ...] = (TextPart(text=f"result {i}"),)
    if image:
        content += (ImagePart(data=f"IMG{i}"),)
    return [
        AssistantMessage(content=(ToolCallPart(id=f"c{i}", name="read", arguments=f'{{"n": {i}}}'),)),
        ToolMessage(call_id=f"c{i}", name="read", content=content),
    ]


def test_wire_cache_translates_only_what_was_appended(monkeypatch: pytest.MonkeyPatch) -> None:
    translated: list[Message] = []
    original = openai_chat.message_to_wire

    def counting(m: Message) -> dict[str, Any]:
        translated.append(m)
        return original(m)

    monkeypatch.setattr(openai_chat, "message_to_wire", counting)
    cache, history = WireCache(), [UserMessage.text("go"), *_call(1), *_call(2)]
    cache.messages("sys", history)
    assert len(translated) == 5
    history += _call(3)
    assert cache.messages("sys", history) == _reference_wire("sys", history)
    assert translated[5:] == history[5:], "only the two new messages are translated"


def test_wire_cache_is_never_stale_after_an_edit_a_compaction_or_a_cut() -> None:
    cache = WireCache()
    history = [UserMessage.text("go"), *_call(1), *_call(2, image=True), *_call(3)]
    assert cache.messages("sys", history) == _reference_wire("sys", history)
    # A middle message replaced in place (trimming an old tool output): same length, same last one.
    history[4] = ToolMessage(call_id="c2", name="read", content=(TextPart(text="[trimmed]"),))
    wire = cache.messages("sys", history)
    assert wire == _reference_wire("sys", history) and "[trimmed]" in json.dumps(wire)
    assert "IMG2" not in json.dumps(wire), "the trimmed result's image left with it"
    # An edit and an append in the same turn.
    history[2] = ToolMessage(call_id="c1", name="read", content=(TextPart(text="edited"),))
    history += _call(4, image=True)
    assert cache.messages("sys", history) == _reference_wire("sys", history)
    # Compaction: a summary replaces the older part, a shorter list in its place.
    compacted: list[Message] = [UserMessage(content=(TextPart(text="summary"),), summary_turns=3), *history[-2:]]
    assert cache.messages("sys", compacted) == _reference_wire("sys", compacted)
    # Cut back (a resumed run's repair), then grown again from the cut.
    assert cache.messages(None, compacted[:1]) == _reference_wire(None, compacted[:1])
    grown = [*compacted[:1], *_call(5, image=True), UserMessage.text("and?")]
    assert cache.messages("sys", grown) == _reference_wire("sys", grown)


edit = st.one_of(
    st.tuples(st.just("append"), st.integers(0, 40), st.booleans()),
    st.tuples(st.just("replace"), st.integers(0, 40), st.booleans()),
    st.tuples(st.just("delete"), st.integers(0, 40), st.booleans()),
    st.tuples(st.just("truncate"), st.integers(0, 40), st.booleans()),
)


@settings(max_examples=80, deadline=None)
@given(edits=st.lists(edit, max_size=25))
def test_wire_cache_equals_a_fresh_translation_after_any_edits(edits: list[tuple[str, int, bool]]) -> None:
    cache, history = WireCache(), [UserMessage.text("start")]
    for step, (kind, at, image) in enumerate(edits):
        if kind == "append":
            history += _call(step, image) if at % 3 else [UserMessage.text(f"user {step}")]
        elif history and kind == "replace":
            i = at % len(history)
            old = history[i]
            history[i] = (
                ToolMessage(call_id=old.call_id, name=old.name, content=_call(step, image)[1].content)
                if isinstance(old, ToolMessage)
                else UserMessage.text(f"new {step}")
            )
        elif history and kind == "delete":
            del history[at % len(history)]
        elif kind == "truncate":
            del history[at % (len(history) + 1) :]
        assert cache.messages("sys", history) == _reference_wire("sys", history)


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
