"""Hostile and broken provider servers, fourth round, on both wires, through real HTTP on loopback
(the byte-for-byte server of the second round): a key pasted with its line break, or with a
character no header can carry; a redirect to another host; a base URL with a query (Azure's
``?api-version=``); llama.cpp's ``error:`` lines and ``event: error`` frames whose data is the
error itself; ``"error": null`` beside a chunk; parallel calls a server gives one id (DeepSeek,
GLM, Kimi); calls without an id, or with their arguments as an object.
"""

from __future__ import annotations

import asyncio
import json
import socket
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.providers.test_attack_wire_round2 import (
    FAST,
    KEY,
    PRICE,
    WIRES,
    Reply,
    WireServer,
    _Handler,
    anthropic_text,
    assert_sound,
    chunk,
    event,
    provider,
    run_against,
    sse,
    text_reply,
    usage_chunk,
)
from tests.server.conftest import unused_port
from tether import Agent, RunState, run_sync, tool
from tether.config import load_settings
from tether.errors import BadRequestError, ConfigError, ContextOverflowError, ResponseError, classify_http_error
from tether.harness.state import reject
from tether.messages import AssistantMessage, ToolMessage
from tether.providers.anthropic import AnthropicProvider
from tether.providers.auth import save_oauth_tokens
from tether.providers.openai_chat import OpenAIChatProvider

Serve = Callable[[list[Reply]], WireServer]
JSON = {"content-type": "application/json"}


class _HeadersHandler(_Handler):
    def _answer(self) -> None:
        self.server.headers_seen.append({k.lower(): v for k, v in self.headers.items()})  # type: ignore[attr-defined]
        super()._answer()


async def validate_auth(kind: str, server: Any) -> None:
    """What ``tether models`` asks the provider of ``kind`` at ``server``."""
    model = provider(kind, server)
    try:
        await model.validate_auth()
    finally:
        await model.aclose()


def recording(server: WireServer) -> WireServer:
    """``server``, keeping each request's headers in ``server.headers_seen``."""
    server.headers_seen = []  # type: ignore[attr-defined]
    server.RequestHandlerClass = _HeadersHandler
    return server


# --- a key as people paste it -------------------------------------------------------------------


@pytest.mark.parametrize("kind", WIRES)
@pytest.mark.parametrize("pasted", [KEY + "\n", KEY + "\r", f"  {KEY}\r\n"], ids=["LF", "CRLF .env", "spaces"])
def test_a_key_pasted_with_its_line_break_is_sent_without_it(
    serve: Serve, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, kind: str, pasted: str
) -> None:
    """A key read from a file, or from a ``.env`` saved with CRLF line ends, ends in a line break.
    Sent as it was, every request failed before it left ("Illegal header value"), was retried
    four times as a dropped connection, and the error quoted the key into the reason, the trace
    and the saved run."""
    variable = "OPENAI_API_KEY" if kind == "openai" else "ANTHROPIC_API_KEY"
    monkeypatch.setenv(variable, pasted)
    monkeypatch.delenv("LLM_BASE_URL", raising=False)
    server = recording(serve([text_reply(kind, "hello")]))
    model = OpenAIChatProvider(server.url + "/v1") if kind == "openai" else AnthropicProvider(server.url)
    out = run_against(kind, server, tmp_path, model=model)
    assert (out.result.status, out.result.text) == ("completed", "hello")
    sent = server.headers_seen[0]  # type: ignore[attr-defined]
    assert (sent.get("authorization") or sent.get("x-api-key")) in (f"Bearer {KEY}", KEY)
    assert_sound(out)


@pytest.mark.parametrize("kind", WIRES)
@pytest.mark.parametrize("bad", [KEY[:8] + " " + KEY[8:], KEY + "\u201d", KEY[:8] + "\n" + KEY[8:]])
def test_a_key_no_header_can_carry_is_a_config_error_naming_where_it_came_from(
    monkeypatch: pytest.MonkeyPatch, kind: str, bad: str
) -> None:
    """A key with a space, a line break or a curly quote inside was sent anyway: a line break
    failed as a retried "connection failure" quoting the key; a non-ASCII character as "the
    answer could not be read (UnicodeEncodeError ...)". Now the provider is refused where it is
    made, naming the variable, never the key."""
    variable = "OPENAI_API_KEY" if kind == "openai" else "ANTHROPIC_API_KEY"
    monkeypatch.setenv(variable, bad)
    monkeypatch.delenv("LLM_BASE_URL", raising=False)
    with pytest.raises(ConfigError) as caught:
        OpenAIChatProvider("https://api.example.com/v1") if kind == "openai" else AnthropicProvider()
    message = str(caught.value)
    assert f"the key in {variable}" in message and "copy the key again" in message
    assert KEY[:8] not in message and KEY[8:] not in message


class _UnsendableToken:
    """Credentials whose header cannot be sent (a token with its line break, from a custom source)."""

    hint = "the token from the vault"

    async def headers(self) -> dict[str, str]:
        return {"authorization": f"Bearer {KEY}\n"}

    async def refresh(self) -> bool:
        return False


@pytest.mark.parametrize("kind", WIRES)
def test_a_header_that_cannot_be_sent_is_not_quoted_with_its_secret(serve: Serve, tmp_path: Path, kind: str) -> None:
    """httpx refuses the header and quotes it, line break escaped (``b'Bearer sk-...\\n'``): the
    secret as sent (with its real line break) was not in that text, so it was not taken out."""
    server = serve([text_reply(kind, "never")] * 5)
    cls = OpenAIChatProvider if kind == "openai" else AnthropicProvider
    base = server.url + ("/v1" if kind == "openai" else "")
    out = run_against(kind, server, tmp_path, model=cls(base, credentials=_UnsendableToken()))
    assert out.result.status == "failed" and "***" in (out.result.reason or "")
    assert server.requests == []
    assert_sound(out)


# --- redirects ----------------------------------------------------------------------------------


@pytest.mark.parametrize("kind", WIRES)
@pytest.mark.parametrize("stream", [True, False], ids=["stream", "complete"])
@pytest.mark.parametrize(
    ("status", "body"), [(301, b""), (307, b"<html>Moved</html>"), (308, b"")], ids=["301", "307", "308"]
)
def test_a_redirect_is_not_followed_nor_retried_and_names_where_it_points(
    serve: Serve, tmp_path: Path, kind: str, stream: bool, status: int, body: bytes
) -> None:
    """A 3xx was taken as a success: with an empty body (a 301 from http to https, FastAPI's 307
    for a trailing slash) the stream "was cut before the provider finished" and was asked four
    times over. The redirect is never followed (the key would go to the other host)."""
    elsewhere = serve([text_reply(kind, "the key went along")] * 5)
    target = elsewhere.url + "/v1/elsewhere"
    server = serve([Reply(status, [body] if body else [], {"location": target, "content-type": "text/html"})] * 5)
    out = run_against(kind, server, tmp_path, stream=stream)
    reason = out.result.reason or ""
    assert out.result.status == "failed" and f"HTTP {status}" in reason
    assert f"redirects to {target}" in reason and "base URL" in reason
    assert len(server.requests) == 1 and elsewhere.requests == []
    assert_sound(out)


@pytest.mark.parametrize("kind", WIRES)
def test_a_redirect_does_not_pass_the_credentials_check(serve: Serve, kind: str) -> None:
    """``tether models`` said "ok" for a server that only redirects: nothing was checked."""
    server = serve([Reply(302, [], {"location": "https://login.example.com/"})] * 2)

    with pytest.raises(BadRequestError, match=r"HTTP 302: .* redirects to https://login\.example\.com/"):
        asyncio.run(validate_auth(kind, server))


# --- a base URL with a query --------------------------------------------------------------------


@pytest.mark.parametrize(
    ("kind", "suffix", "path"),
    [
        ("openai", "/v1?api-version=2024-10-21", "/v1/chat/completions?api-version=2024-10-21"),
        ("openai", "/v1/chat/completions?api-version=2024-10-21", "/v1/chat/completions?api-version=2024-10-21"),
        ("openai", "/v1/?api-version=2024-10-21", "/v1/chat/completions?api-version=2024-10-21"),
        ("anthropic", "/v1?beta=true", "/v1/messages?beta=true"),
        ("anthropic", "?beta=true", "/v1/messages?beta=true"),
    ],
)
def test_a_base_url_with_a_query_sends_it_with_every_request(
    serve: Serve, tmp_path: Path, kind: str, suffix: str, path: str
) -> None:
    """Azure's deployments want ``?api-version=``: joined to the URL as written, the path landed
    inside the query (``/v1?api-version=2024-10-21/chat/completions``)."""
    server = serve([text_reply(kind, "hello")])
    cls = OpenAIChatProvider if kind == "openai" else AnthropicProvider
    out = run_against(kind, server, tmp_path, model=cls(server.url + suffix, KEY))
    assert (out.result.status, out.result.text) == ("completed", "hello")
    assert server.requests[0][0] == path
    assert_sound(out)


def test_a_query_in_the_base_url_joins_the_query_of_the_request(serve: Serve) -> None:
    page = json.dumps({"data": [{"id": "claude-x"}], "has_more": False}).encode()
    server = serve([Reply(200, [page], {"content-type": "application/json"})])

    async def listed() -> list[str]:
        model = AnthropicProvider(server.url + "?beta=true", KEY)
        try:
            return await model.list_models()
        finally:
            await model.aclose()

    assert asyncio.run(listed()) == ["claude-x"]
    assert server.requests[0][0] == "/v1/models?limit=1000&beta=true"


# --- errors inside the stream, as servers write them ----------------------------------------------

LLAMA_OVERFLOW = {
    "code": 400,
    "message": "request (9000 tokens) exceeds the available context size (4096 tokens), try increasing it",
    "type": "exceed_context_size_error",
    "n_prompt_tokens": 9000,
    "n_ctx": 4096,
}
LLAMA_FAILURE = {"code": 500, "message": "llama_decode failed: out of KV cache slots", "type": "server_error"}


@pytest.mark.parametrize(
    "frame",
    [
        b"error: " + json.dumps(LLAMA_FAILURE).encode() + b"\n\n",  # llama.cpp's servers
        b"event: error\ndata: " + json.dumps(LLAMA_FAILURE).encode() + b"\n\n",
        b"event: error\ndata: " + LLAMA_FAILURE["message"].encode() + b"\n\n",  # in words
    ],
    ids=["error field", "error event", "error in words"],
)
@pytest.mark.parametrize("first", [True, False], ids=["first line", "after a chunk"])
def test_an_error_frame_carrying_the_error_itself_is_the_servers_error(
    serve: Serve, tmp_path: Path, frame: bytes, first: bool
) -> None:
    """llama.cpp writes a failure after the 200 as ``error: {"code": 500, "message": ...}``. As the
    first line it was "not an event stream"; after a chunk it was skipped and the stream ended
    "cut", four times over, its message never shown. It is the server's error now: retried as a
    500, and its words are the reason when every attempt fails."""
    parts: list[bytes | float | str] = [frame] if first else [chunk({"role": "assistant", "content": ""}), frame]
    server = serve([Reply(200, parts)] * 4)
    out = run_against("openai", server, tmp_path)
    reason = out.result.reason or ""
    assert out.result.status == "failed" and "out of KV cache slots" in reason, reason
    assert len(server.requests) == 4
    assert_sound(out)


def test_llama_cpps_context_overflow_is_a_context_overflow(serve: Serve, tmp_path: Path) -> None:
    """Its type, ``exceed_context_size_error``, named no overflow tether knew: the run failed as a
    bad request ("HTTP 400") instead of trimming old tool output and asking again."""
    body = json.dumps({"error": LLAMA_OVERFLOW})
    assert isinstance(classify_http_error("local", 400, body, {}), ContextOverflowError)
    frame = b"error: " + json.dumps(LLAMA_OVERFLOW).encode() + b"\n\n"
    server = serve([Reply(200, [frame])] * 4)
    out = run_against("openai", server, tmp_path)
    assert out.result.status == "failed" and "context window" in (out.result.reason or ""), out.result.reason
    assert_sound(out)


def test_an_error_event_on_the_anthropic_wire_whose_data_is_the_error_itself(serve: Serve, tmp_path: Path) -> None:
    """A compatible server's ``event: error`` without the API's ``{"type": "error", "error": ...}``
    envelope was skipped: the run failed as a stream "cut" (no message_stop), its words unsaid."""
    frame = b'event: error\ndata: {"type": "overloaded_error", "message": "Overloaded: 12 requests queued"}\n\n'
    server = serve([Reply(200, [anthropic_text("x")[0], frame])] * 4)
    out = run_against("anthropic", server, tmp_path)
    reason = out.result.reason or ""
    assert out.result.status == "failed" and "overloaded_error mid-stream: Overloaded: 12 requests queued" in reason
    assert len(server.requests) == 4  # overloaded: retried
    assert_sound(out)


def test_error_null_beside_a_chunk_is_no_error(serve: Serve, tmp_path: Path) -> None:
    """A gateway that writes every field of its chunk model sends ``"error": null``: that was a
    failure "an error mid-stream: None", four times over."""
    parts = [
        sse({"choices": [{"index": 0, "delta": {"content": "hel"}, "finish_reason": None}], "error": None}),
        sse({"choices": [{"index": 0, "delta": {"content": "lo"}, "finish_reason": "stop"}], "error": None}),
        usage_chunk({"prompt_tokens": 100, "completion_tokens": 10}),
        b"data: [DONE]\n\n",
    ]
    server = serve([Reply(200, parts)])
    out = run_against("openai", server, tmp_path)
    assert (out.result.status, out.result.text, len(server.requests)) == ("completed", "hello", 1)
    assert_sound(out)


# --- tool calls as some servers send them ---------------------------------------------------------


@tool(read_only=True)
def echo(x: int) -> str:
    """Say x back."""
    return f"x={x}"


def _openai_calls(calls: list[tuple[str | None, Any]], stream: bool) -> Reply:
    """One reply calling ``echo`` once per (id, arguments); arguments as they go on the wire."""
    if not stream:
        wire = [
            {"type": "function", "function": {"name": "echo", "arguments": args}, **({"id": cid} if cid else {})}
            for cid, args in calls
        ]
        message = {"role": "assistant", "content": None, "tool_calls": wire}
        body = {"choices": [{"index": 0, "message": message, "finish_reason": "tool_calls"}]}
        usage = {"prompt_tokens": 50, "completion_tokens": 9}
        return Reply(200, [json.dumps({**body, "usage": usage}).encode()], JSON)
    parts: list[bytes | float | str] = [chunk({"role": "assistant", "content": ""})]
    for index, (cid, args) in enumerate(calls):
        call = {"index": index, "type": "function", "function": {"name": "echo", "arguments": args}}
        parts.append(chunk({"tool_calls": [{**call, **({"id": cid} if cid else {})}]}))
    parts += [chunk({}, "tool_calls"), usage_chunk({"prompt_tokens": 50, "completion_tokens": 9}), b"data: [DONE]\n\n"]
    return Reply(200, parts)


def _anthropic_calls(calls: list[tuple[str, dict[str, Any]]], stream: bool) -> Reply:
    usage = {"input_tokens": 50, "output_tokens": 9}
    if not stream:
        blocks = [{"type": "tool_use", "id": cid, "name": "echo", "input": args} for cid, args in calls]
        body = {"id": "m", "type": "message", "role": "assistant", "content": blocks, "model": "c"}
        return Reply(200, [json.dumps({**body, "stop_reason": "tool_use", "usage": usage}).encode()], JSON)
    parts = [anthropic_text("")[0]]
    for index, (cid, args) in enumerate(calls):
        block = {"type": "tool_use", "id": cid, "name": "echo", "input": {}}
        delta = {"type": "input_json_delta", "partial_json": json.dumps(args)}
        parts += [
            event("content_block_start", {"type": "content_block_start", "index": index, "content_block": block}),
            event("content_block_delta", {"type": "content_block_delta", "index": index, "delta": delta}),
            event("content_block_stop", {"type": "content_block_stop", "index": index}),
        ]
    stop = {"type": "message_delta", "delta": {"stop_reason": "tool_use"}, "usage": {"output_tokens": 9}}
    parts += [event("message_delta", stop), event("message_stop", {"type": "message_stop"})]
    return Reply(200, parts)


def done(kind: str, stream: bool, text: str = "done") -> Reply:
    """A reply that answers ``text``, streamed or as one body."""
    if stream:
        return text_reply(kind, text)
    if kind == "openai":
        body: dict[str, Any] = {"choices": [{"index": 0, "message": {"content": text}, "finish_reason": "stop"}]}
    else:
        body = {"content": [{"type": "text", "text": text}], "stop_reason": "end_turn"}
    return Reply(200, [json.dumps(body).encode()], JSON)


def _sent_ids(kind: str, body: bytes) -> tuple[list[str], list[str]]:
    """The call ids and the result ids of the last request's history."""
    messages = json.loads(body)["messages"]
    if kind == "openai":
        calls = [c["id"] for m in messages for c in m.get("tool_calls") or ()]
        return calls, [m["tool_call_id"] for m in messages if m["role"] == "tool"]
    blocks = [b for m in messages for b in m["content"]]
    return [b["id"] for b in blocks if b["type"] == "tool_use"], [
        b["tool_use_id"] for b in blocks if b["type"] == "tool_result"
    ]


@pytest.mark.parametrize("kind", WIRES)
@pytest.mark.parametrize("stream", [True, False], ids=["stream", "complete"])
def test_parallel_calls_under_one_id_get_ids_of_their_own(
    serve: Serve, tmp_path: Path, kind: str, stream: bool
) -> None:
    """DeepSeek and GLM (and Kimi's Anthropic-compatible endpoint) may give parallel calls one id.
    Kept, two results answered one id, and the next request carried the id twice, which the APIs
    refuse ("Duplicate value for 'tool_call_id'", "tool_use ids must be unique")."""
    if kind == "openai":
        first = _openai_calls([("call_0", '{"x": 1}'), ("call_0", '{"x": 2}')], stream)
    else:
        first = _anthropic_calls([("toolu_0", {"x": 1}), ("toolu_0", {"x": 2})], stream)
    server = serve([first, done(kind, stream)])
    out = run_against(kind, server, tmp_path, tools=[echo], stream=stream)
    assert (out.result.status, out.result.text) == ("completed", "done"), out.result.reason
    calls, results = _sent_ids(kind, server.requests[1][1])
    assert len(set(calls)) == 2 and results == calls
    saved = out.store.load(out.result.run_id).messages
    by_id = {c.id: c.arguments for c in saved[1].tool_calls}  # type: ignore[union-attr]
    answers = {m.call_id: m.text for m in saved[2:4]}  # type: ignore[union-attr]
    assert {cid: json.loads(args)["x"] for cid, args in by_id.items()} == {
        cid: int(text.removeprefix("x=")) for cid, text in answers.items()
    }
    assert_sound(out)


@pytest.mark.parametrize("stream", [True, False], ids=["stream", "complete"])
def test_a_call_without_an_id_and_with_its_arguments_as_an_object_runs(
    serve: Serve, tmp_path: Path, stream: bool
) -> None:
    """A call sent with its ``arguments`` as a JSON object (not the JSON text the API specifies)
    failed the run, on both paths ("expected str instance, dict found"); one without an ``id``
    failed a non-streamed reply ("KeyError('id')") while a streamed one got ``call_0``."""
    server = serve([_openai_calls([(None, {"x": 7})], stream), done("openai", stream, "seven")])
    out = run_against("openai", server, tmp_path, tools=[echo], stream=stream)
    assert (out.result.status, out.result.text) == ("completed", "seven"), out.result.reason
    saved = out.store.load(out.result.run_id).messages
    assert saved[2].text == "x=7"  # type: ignore[union-attr]
    assert_sound(out)


# --- proxies from the environment ---------------------------------------------------------------


@pytest.fixture
def dead_port() -> Iterator[int]:
    """A loopback port that refuses connections for the whole test."""
    with unused_port() as port:
        yield port


@pytest.mark.parametrize("kind", WIRES)
@pytest.mark.parametrize("variable", ["HTTP_PROXY", "ALL_PROXY", "http_proxy"])
def test_a_server_on_this_machine_is_reached_directly_whatever_proxy_is_set(
    serve: Serve, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, kind: str, variable: str, dead_port: int
) -> None:
    """With a proxy in the environment (a company's, a dev container's), a local Ollama or
    llama.cpp was asked through it: a proxy elsewhere reaches its own 127.0.0.1, not this
    machine's, and a dead one failed the run as "cannot reach 127.0.0.1:PORT ... check that the
    server is running" while it was."""
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "NO_PROXY"):
        monkeypatch.delenv(name, raising=False)
        monkeypatch.delenv(name.lower(), raising=False)
    monkeypatch.setenv(variable, f"http://127.0.0.1:{dead_port}")
    server = serve([text_reply(kind, "local answer")])
    out = run_against(kind, server, tmp_path)
    assert (out.result.status, out.result.text) == ("completed", "local answer"), out.result.reason
    assert len(server.requests) == 1
    assert_sound(out)


def test_a_proxy_that_cannot_be_reached_is_named_not_the_host(
    serve: Serve, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, dead_port: int
) -> None:
    """The reason said "cannot reach models.tether-test.invalid:80 ... Check the host name": the
    host was never tried; the proxy the environment set was the one that did not answer. Its
    password is not shown."""
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "NO_PROXY"):
        monkeypatch.delenv(name, raising=False)
        monkeypatch.delenv(name.lower(), raising=False)
    port = dead_port
    monkeypatch.setenv("HTTP_PROXY", f"http://alice:proxy-pass-123@127.0.0.1:{port}")
    model = OpenAIChatProvider("http://models.tether-test.invalid/v1", KEY)
    out = run_against("openai", serve([]), tmp_path, model=model)
    reason = out.result.reason or ""
    assert out.result.status == "failed"
    assert f"cannot reach the proxy http://127.0.0.1:{port}" in reason and "models.tether-test.invalid" in reason
    assert "NO_PROXY" in reason and "proxy-pass-123" not in reason and "alice" not in reason
    assert_sound(out)


# --- reasoning and content as compatible servers send them ----------------------------------------


def _delta(**fields: Any) -> bytes:
    return sse({"choices": [{"index": 0, "delta": fields, "finish_reason": None}]})


def _thinking(text: str) -> list[dict[str, Any]]:
    return [{"type": "thinking", "thinking": [{"type": "text", "text": text}]}]


@pytest.mark.parametrize(
    ("pieces", "message"),
    [
        # Mistral's reasoning models: content is a list of parts, thinking parts first.
        (
            [
                _delta(content=_thinking("Greeting; ")),
                _delta(content=_thinking("answer kindly.")),
                _delta(content=[{"type": "text", "text": "Hel"}]),
                _delta(content="lo"),
            ],
            {"content": [*_thinking("Greeting; answer kindly."), {"type": "text", "text": "Hello"}]},
        ),
        # OpenRouter, Ollama and newer vLLM: the field is `reasoning`.
        (
            [_delta(reasoning="Greeting; "), _delta(reasoning="answer kindly."), _delta(content="Hello")],
            {"reasoning": "Greeting; answer kindly.", "content": "Hello"},
        ),
    ],
    ids=["mistral thinking parts", "reasoning field"],
)
@pytest.mark.parametrize("stream", [True, False], ids=["stream", "complete"])
def test_reasoning_and_content_parts_are_read_not_shown_as_a_list(
    serve: Serve, tmp_path: Path, pieces: list[bytes], message: dict[str, Any], stream: bool
) -> None:
    """Mistral's content parts reached the user as a Python list ("[{'type': 'thinking', ...}]"),
    saved as the answer; reasoning in a `reasoning` field was dropped (a model thinking for long
    sent nothing the first-token timeout could see)."""
    if stream:
        parts = [*pieces, chunk({}, "stop"), usage_chunk({"prompt_tokens": 20, "completion_tokens": 9})]
        reply = Reply(200, parts)
    else:
        body = {"choices": [{"index": 0, "message": {"role": "assistant", **message}, "finish_reason": "stop"}]}
        reply = Reply(200, [json.dumps(body).encode()], JSON)
    server = serve([reply])
    out = run_against("openai", server, tmp_path, stream=stream)
    assert (out.result.status, out.result.text) == ("completed", "Hello"), out.result.reason
    saved = out.store.load(out.result.run_id).messages[-1]
    assert [getattr(p, "text", None) for p in saved.content] == ["Greeting; answer kindly.", "Hello"]
    assert_sound(out)


@pytest.mark.parametrize("kind", WIRES)
def test_a_page_answered_to_a_request_not_streamed_is_named_with_the_advice(
    serve: Serve, tmp_path: Path, kind: str
) -> None:
    """Streamed, a login page is named by its content type with "check the base URL"; not
    streamed (``Agent(stream=False)``, ``tether models``' listing) it was only "malformed response
    (not JSON)"."""
    page = b"<!DOCTYPE html>\n<html><body>Sign in to continue</body></html>\n"
    server = serve([Reply(200, [page], {"content-type": "text/html; charset=utf-8"})] * 4)
    out = run_against(kind, server, tmp_path, stream=False)
    reason = out.result.reason or ""
    assert out.result.status == "failed" and len(server.requests) == 1
    assert "text/html" in reason and "Sign in to continue" in reason and "Check the base URL" in reason
    assert_sound(out)


class _RefusingProxy:
    """A proxy on loopback that answers every CONNECT with ``status``, keeping what it was sent."""

    def __init__(self, status: bytes) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(8)
        self.port = self.sock.getsockname()[1]
        self.seen: list[bytes] = []
        self.status = status
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            with conn:
                self.seen.append(conn.recv(65536))
                conn.sendall(
                    b"HTTP/1.1 " + self.status + b"\r\nProxy-Authenticate: Basic realm=x\r\nContent-Length: 0\r\n\r\n"
                )


@pytest.mark.parametrize(("status", "attempts"), [(b"407 Proxy Authentication Required", 1), (b"502 Bad Gateway", 4)])
def test_a_proxy_that_refuses_the_tunnel_is_named_and_a_refusal_not_retried(
    serve: Serve, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, status: bytes, attempts: int
) -> None:
    """A proxy that wants a password (407) was "the connection failed (ProxyError ...)", asked four
    times, the proxy never named. Its refusal is now said once, with what to check; a 502 is
    retried. The API key stays inside the tunnel: the proxy never sees it."""
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "NO_PROXY"):
        monkeypatch.delenv(name, raising=False)
        monkeypatch.delenv(name.lower(), raising=False)
    proxy = _RefusingProxy(status)
    try:
        monkeypatch.setenv("HTTPS_PROXY", f"http://bob:proxy-pass-123@127.0.0.1:{proxy.port}")
        model = OpenAIChatProvider("https://api.tether-test.invalid/v1", KEY)
        out = run_against("openai", serve([]), tmp_path, model=model)
    finally:
        proxy.sock.close()
    reason = out.result.reason or ""
    assert out.result.status == "failed" and len(proxy.seen) == attempts
    assert f"the proxy http://127.0.0.1:{proxy.port} answered {status.decode()}" in reason
    assert "api.tether-test.invalid:443" in reason and "proxy-pass-123" not in reason
    assert ("retrying will not help" in reason) == (attempts == 1)
    assert all(b"CONNECT api.tether-test.invalid:443" in sent and KEY.encode() not in sent for sent in proxy.seen)
    assert_sound(out)


@pytest.mark.parametrize("stream", [True, False], ids=["stream", "complete"])
def test_a_reply_the_context_window_cut_is_a_cut_reply(serve: Serve, tmp_path: Path, stream: bool) -> None:
    """Anthropic's ``model_context_window_exceeded`` stops a reply where the window ended it, as
    ``max_tokens`` does. It passed as a finished answer: the cut text was the run's output (and a
    cut call would have been run). It is a cut now: the text is continued once, and merged."""
    if stream:
        cut = anthropic_text("The answer is forty")
        cut[4] = event(
            "message_delta",
            {
                "type": "message_delta",
                "delta": {"stop_reason": "model_context_window_exceeded"},
                "usage": {"output_tokens": 10},
            },
        )
        first = Reply(200, cut)
    else:
        body = {
            "content": [{"type": "text", "text": "The answer is forty"}],
            "stop_reason": "model_context_window_exceeded",
            "usage": {"input_tokens": 100, "output_tokens": 10},
        }
        first = Reply(200, [json.dumps(body).encode()], JSON)
    server = serve([first, done("anthropic", stream, "-two.")])
    out = run_against("anthropic", server, tmp_path, stream=stream)
    assert out.result.status == "completed" and out.result.text == "The answer is forty-two.", out.result
    assert len(server.requests) == 2
    assert_sound(out)


# --- a key quoted where the preview of an error cuts it ------------------------------------------

LONG_KEY = "sk-proj-Q7vX2mN9pL4kR8sT1wY6zA3bC5dE0fG2hJ4kL6mN8pQ1rS3tU5vW7xY9zA2bC4dE6"


@pytest.mark.parametrize("kind", WIRES)
@pytest.mark.parametrize(
    ("status", "content_type"),
    [(503, "text/plain"), (400, "text/plain"), (200, "text/html")],
    ids=["503", "400", "a page for a stream"],
)
@pytest.mark.parametrize("cut", [40])
def test_a_key_quoted_where_an_errors_preview_ends_leaves_none_of_it(
    serve: Serve, tmp_path: Path, kind: str, status: int, content_type: str, cut: int
) -> None:
    """An error shows the first 200 or 300 characters of what the server sent. A gateway that
    quotes the request's headers puts the key anywhere in that; where the preview ended inside it,
    the key was not found whole, and all of it but its end went to the reason, the trace and the
    saved run."""
    body = f"upstream refused the request; it carried the header Authorization: Bearer {LONG_KEY} and more"
    preview = 200 if status == 200 else 300  # where the message cuts the body (a page's first line: 200)
    start = body.index(LONG_KEY)
    body = "x" * (preview - start - cut) + body  # the preview ends `cut` characters into the key
    server = serve([Reply(status, [body.encode()], {"content-type": content_type, "retry-after": "0"})] * 4)
    cls = OpenAIChatProvider if kind == "openai" else AnthropicProvider
    out = run_against(kind, server, tmp_path, model=cls(server.url + ("/v1" if kind == "openai" else ""), LONG_KEY))
    reason = out.result.reason or ""
    assert out.result.status == "failed" and "***" in reason, reason
    leaked = [path for path, text in out.files.items() if LONG_KEY[:12] in text] + (
        ["reason"] if LONG_KEY[:12] in reason else []
    )
    assert not leaked, f"the start of the key was written to {leaked}"
    assert_sound(out)


# --- an OAuth token endpoint's answer --------------------------------------------------------------


def _oauth_run(serve: Serve, home: Path, lifetime: Any = 3600) -> tuple[WireServer, list[str]]:
    """Two runs of an endpoint whose expired access token is refreshed at a token endpoint that
    rotates the refresh token (r0 → r1) and says it lives ``lifetime``; the token endpoint and
    each run's status."""
    grant = {"access_token": "tok-1", "token_type": "Bearer", "refresh_token": "r1", "expires_in": lifetime}
    token = Reply(200, [json.dumps(grant).encode()], JSON)
    tokens = serve([token, Reply(400, [b'{"error": "invalid_grant"}'], JSON)])  # r0 is good once
    provider = serve([text_reply("openai", "one"), text_reply("openai", "two")])
    home.mkdir(parents=True, exist_ok=True)
    (home / "config.toml").write_text(
        f'[endpoints.corp]\nkind = "openai"\nbase_url = "{provider.url}/v1"\nauth = "oauth"\n'
        f'token_url = "{tokens.url}/token"\n'
    )
    save_oauth_tokens(
        home / "auth" / "corp.json", {"access_token": "old", "refresh_token": "r0", "expires_at": time.time() - 10}
    )
    settings = load_settings(home)
    statuses = [run_sync(Agent("corp/hello", settings=settings), prompt).status for prompt in ("hi", "hi again")]
    return tokens, statuses


@pytest.mark.parametrize("lifetime", ["one hour", float("nan")])
def test_a_token_lifetime_that_is_no_number_keeps_the_rotated_refresh_token(
    serve: Serve, tmp_path: Path, lifetime: Any
) -> None:
    """``expires_in`` that was no number ("one hour") raised after the endpoint had rotated the
    refresh token and before the answer was saved: the run failed ("the answer could not be read
    sending the request (ValueError ...)") and the file kept a refresh token the endpoint had
    spent, locking every later run out. NaN made every request refresh. Such a lifetime is taken
    as an hour."""
    tokens, statuses = _oauth_run(serve, tmp_path, lifetime)
    assert statuses == ["completed", "completed"]
    saved = json.loads((tmp_path / "auth" / "corp.json").read_text())
    assert saved["refresh_token"] == "r1" and len(tokens.requests) == 1
    assert 3000 < saved["expires_at"] - time.time() <= 3600


def test_a_token_endpoint_on_this_machine_is_reached_directly_whatever_proxy_is_set(
    serve: Serve, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, dead_port: int
) -> None:
    """As for a provider on this machine: the refresh went to the environment's proxy, which
    reaches its own loopback, and a dead one failed the run ("could not reach the token
    endpoint")."""
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "NO_PROXY"):
        monkeypatch.delenv(name, raising=False)
        monkeypatch.delenv(name.lower(), raising=False)
    monkeypatch.setenv("ALL_PROXY", f"http://127.0.0.1:{dead_port}")
    tokens, statuses = _oauth_run(serve, tmp_path)
    assert statuses == ["completed", "completed"] and len(tokens.requests) == 1


# --- event stream framing -------------------------------------------------------------------------


@pytest.mark.parametrize("kind", WIRES)
def test_a_byte_order_mark_before_the_first_event_loses_nothing(serve: Serve, tmp_path: Path, kind: str) -> None:
    """A stream that starts with a BOM (a server writing UTF-8 "with signature") had its first
    field read as ``\\ufeffdata:``, not a data line: the first event was dropped, and with it the
    first words of the answer ("lo" for "Hello")."""
    if kind == "openai":
        parts = [chunk({"role": "assistant", "content": "Hel"}), chunk({"content": "lo"}), chunk({}, "stop")]
        parts.append(usage_chunk({"prompt_tokens": 20, "completion_tokens": 2}))
    else:
        parts = anthropic_text("Hello", usage={"input_tokens": 20, "output_tokens": 1}, output_tokens=2)
        parts[0] = parts[0].removeprefix(b"event: message_start\n")  # the data line comes first
    parts[0] = b"\xef\xbb\xbf" + parts[0]
    out = run_against(kind, serve([Reply(200, parts)]), tmp_path)
    assert (out.result.status, out.result.text) == ("completed", "Hello"), out.result.reason
    assert out.result.usage.prompt_tokens == 20  # the first event's count, not an estimate
    assert_sound(out)


def _one_call(name: str, args: dict[str, Any], call_id: str | None) -> Reply:
    call: dict[str, Any] = {"index": 0, "type": "function", "function": {"name": name, "arguments": json.dumps(args)}}
    if call_id:
        call["id"] = call_id
    return Reply(
        200,
        [
            chunk({"role": "assistant", "content": ""}),
            chunk({"tool_calls": [call]}),
            chunk({}, "tool_calls"),
            usage_chunk({"prompt_tokens": 10, "completion_tokens": 5}),
        ],
    )


@pytest.mark.parametrize("same_id", [None, "call_0"], ids=["no id", "the same id each turn"])
def test_a_decision_on_one_call_never_answers_a_later_call_that_reused_its_id(
    serve: Serve, tmp_path: Path, same_id: str | None
) -> None:
    """A server that sends no call ids (tether then numbered them ``call_0`` each turn) or numbers
    them anew each turn reused an id across turns. A person's decision is kept by call id: the
    model's next call, a harmless read, was answered "The user declined this call to look" (a
    decision nobody made) and never ran. Each call now has an id of its own in the conversation."""
    ran: list[str] = []

    @tool(needs_approval=True)
    def delete(path: str) -> str:
        """Delete a file."""
        ran.append(f"delete {path}")
        return "deleted"

    @tool(read_only=True)
    def look(path: str) -> str:
        """Read a file."""
        ran.append(f"look {path}")
        return "its contents"

    first, second = _one_call("delete", {"path": "a.log"}, same_id), _one_call("look", {"path": "b.txt"}, same_id)
    server = serve([first, second, text_reply("openai", "done")])
    agent = Agent(provider("openai", server), tools=[delete, look], retry=FAST, price=PRICE)
    state = RunState()
    assert run_sync(agent, "tidy up", state=state).status == "interrupted"
    reject(state, reason="not that one")
    assert run_sync(agent, state=state).status == "completed"
    assert ran == ["look b.txt"]
    results = [m.text for m in state.messages if isinstance(m, ToolMessage)]
    assert results[1] == "its contents" and "declined" in results[0]
    calls = [c.id for m in state.messages if isinstance(m, AssistantMessage) for c in m.tool_calls]
    assert len(set(calls)) == 2 and all(calls)


@pytest.mark.parametrize("kind", WIRES)
@pytest.mark.parametrize("charset", ["iso-8859-1", "GBK"])
def test_an_event_stream_is_read_as_utf8_whatever_charset_its_header_names(
    serve: Serve, tmp_path: Path, kind: str, charset: str
) -> None:
    """An event stream is always UTF-8 (browsers read it so, whatever the header says). A gateway
    that labels its stream ``charset=iso-8859-1`` (a Java server's default) showed every answer
    that is not plain English as mojibake ("hÃ©llo" for "héllo"), and saved it so."""
    escaped = text_reply(kind, "héllo 世界").parts  # json.dumps writes \\u escapes; servers write UTF-8
    parts = [p.replace(rb"\u00e9", "é".encode()).replace(rb"\u4e16\u754c", "世界".encode()) for p in escaped]  # type: ignore[union-attr]
    assert any("世界".encode() in p for p in parts)  # type: ignore[operator]
    out = run_against(
        kind, serve([Reply(200, parts, {"content-type": f"text/event-stream; charset={charset}"})]), tmp_path
    )
    assert (out.result.status, out.result.text) == ("completed", "héllo 世界"), out.result.reason
    assert_sound(out)


# --- base URLs requests cannot be sent to ---------------------------------------------------------


@pytest.mark.parametrize(
    ("variable", "url"),
    [
        ("LLM_BASE_URL", "localhost:11434/v1"),  # no scheme: the slip people make most
        ("OPENAI_BASE_URL", "127.0.0.1:8000/v1"),
        ("LLM_BASE_URL", "http://localhost:99999/v1"),  # this one crashed the run with a traceback
        ("ANTHROPIC_BASE_URL", "api.anthropic.com"),
        ("ANTHROPIC_BASE_URL", "https://user:s3cret@proxy.example.com:0/anthropic"),
    ],
)
def test_a_base_url_requests_cannot_go_to_is_a_config_error_naming_where_it_was_set(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, variable: str, url: str
) -> None:
    """Without a scheme every request failed as "the connection failed (UnsupportedProtocol ...)"
    and was retried four times; a port past 65535 ended the run as "unexpected error:
    ExceptionGroup" with a traceback. Now the run does not start: the error names the variable
    and says how to write it (a password in it is not shown)."""
    for name in ("LLM_BASE_URL", "OPENAI_BASE_URL", "ANTHROPIC_BASE_URL"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv(variable, url)
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    monkeypatch.setenv("ANTHROPIC_API_KEY", KEY)
    model = "anthropic/claude-x" if variable.startswith("ANTHROPIC") else "openai/gpt-x"
    with pytest.raises(ConfigError) as caught:
        run_sync(Agent(model), "hi")
    message = str(caught.value)
    assert message.startswith(f"{variable} is ") and "http://" in message and "s3cret" not in message
    with pytest.raises(ConfigError, match="the base URL given to the local provider"):
        (OpenAIChatProvider if model.startswith("openai") else AnthropicProvider)(url, KEY, name="local")


# --- a reply the server gave up on ----------------------------------------------------------------


@pytest.mark.parametrize("reason", ["abort", "error"])
@pytest.mark.parametrize("stream", [True, False], ids=["stream", "complete"])
def test_a_reply_the_server_aborted_is_asked_again_not_taken_as_the_answer(
    serve: Serve, tmp_path: Path, reason: str, stream: bool
) -> None:
    """vLLM and SGLang end a request they preempt or abort with ``finish_reason: "abort"`` (and
    "error" when generation failed): that was a finished reply, so the run completed with an
    empty or half answer. Before anything was shown it is asked again, like a cut stream."""
    if stream:
        parts = [chunk({"role": "assistant", "content": ""}), chunk({}, reason)]
        first = Reply(200, [*parts, usage_chunk({"prompt_tokens": 20, "completion_tokens": 0})])
    else:
        body = {"choices": [{"index": 0, "message": {"role": "assistant", "content": ""}, "finish_reason": reason}]}
        first = Reply(200, [json.dumps(body).encode()], JSON)
    server = serve([first, done("openai", stream, "the whole answer")])
    out = run_against("openai", server, tmp_path, stream=stream)
    assert (out.result.status, out.result.text) == ("completed", "the whole answer"), out.result.reason
    assert len(server.requests) == 2
    assert_sound(out)


def test_a_reply_aborted_after_text_fails_rather_than_ending_half_said(serve: Serve, tmp_path: Path) -> None:
    parts = [chunk({"role": "assistant", "content": "The answer is "}), chunk({}, "abort")]
    server = serve([Reply(200, parts), text_reply("openai", "another answer")])
    out = run_against("openai", server, tmp_path)
    assert out.result.status == "failed" and "'abort'" in (out.result.reason or ""), out.result.reason
    assert len(server.requests) == 1
    assert_sound(out)


@pytest.mark.parametrize("kind", WIRES)
def test_a_login_page_does_not_pass_the_credentials_check(serve: Serve, kind: str) -> None:
    """``tether models`` asks ``validate_auth``; a proxy's login page (200, HTML) passed it: "ok"
    for credentials nobody checked."""
    page = b"<!DOCTYPE html>\n<html><body>Sign in to the network</body></html>\n"
    server = serve([Reply(200, [page], {"content-type": "text/html"})])

    with pytest.raises(ResponseError, match=r"text/html, not JSON: <!DOCTYPE html> <html><body>Sign in"):
        asyncio.run(validate_auth(kind, server))


def test_a_tool_input_sent_whole_at_the_block_start_survives_an_empty_delta(serve: Serve, tmp_path: Path) -> None:
    """A compatible server that sends a call's whole input in ``content_block_start`` and then an
    empty ``input_json_delta`` (the API's first delta is often empty) had the input replaced by
    the empty stream: the tool got ``{}`` and the model an error for arguments it had given."""
    block = {"type": "tool_use", "id": "toolu_1", "name": "echo", "input": {"x": 5}}
    empty = {"type": "input_json_delta", "partial_json": ""}
    stop = {"type": "message_delta", "delta": {"stop_reason": "tool_use"}, "usage": {"output_tokens": 9}}
    parts = [
        anthropic_text("")[0],
        event("content_block_start", {"type": "content_block_start", "index": 0, "content_block": block}),
        event("content_block_delta", {"type": "content_block_delta", "index": 0, "delta": empty}),
        event("content_block_stop", {"type": "content_block_stop", "index": 0}),
        event("message_delta", stop),
        event("message_stop", {"type": "message_stop"}),
    ]
    server = serve([Reply(200, parts), text_reply("anthropic", "five")])
    out = run_against("anthropic", server, tmp_path, tools=[echo])
    assert (out.result.status, out.result.text) == ("completed", "five"), out.result.reason
    assert out.store.load(out.result.run_id).messages[2].text == "x=5"  # type: ignore[union-attr]
    assert_sound(out)
