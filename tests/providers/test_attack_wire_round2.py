"""Hostile and broken provider servers, second round: each attack is a whole run through
``run_sync`` against a server on loopback that writes exactly the bytes the test scripts (both
wires), and each checks the exit, its reason, the saved run and that the key never lands in a file.

A server may echo the key back in an error body; answer a stream request with an HTML page or a
JSON document; end its body inside an event; number parallel tool calls alike; report usage no
call can have; ask to retry at an HTTP date ten hours away.
"""

from __future__ import annotations

import email.utils
import json
import math
import socket
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from tether import Agent, JsonlTracer, Price, RunResult, RunStore, run_sync, tool
from tether.errors import classify_http_error
from tether.harness.retry import RetryPolicy
from tether.providers.anthropic import AnthropicProvider
from tether.providers.openai_chat import OpenAIChatProvider

KEY = "sk-test-SECRET123"
FAST = RetryPolicy(base_delay_s=0.01, max_delay_s=0.02, max_retry_after_s=5)
PRICE = Price(input=2.0, output=10.0, cached_input=0.5, cache_write=3.75)
CUT = "cut"  # a part of a reply: drop the connection here, without the chunked body's end


@dataclass
class Reply:
    status: int = 200
    # bytes, a pause in seconds, CUT, or a pause until the event is set (a stall that outlasts any
    # timeout, however late a loaded machine fires it; 60 s at most, a hang guard)
    parts: Sequence[bytes | float | str | threading.Event] = field(default_factory=list)
    headers: dict[str, str] = field(default_factory=dict)


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: WireServer

    def log_message(self, *args: Any) -> None:
        pass

    def do_GET(self) -> None:
        self._answer()

    def do_POST(self) -> None:
        self._answer()

    def _answer(self) -> None:
        body = self.rfile.read(int(self.headers.get("content-length") or 0))
        with self.server.lock:
            self.server.requests.append((self.path, body))
            reply = self.server.script.pop(0) if self.server.script else Reply(500, [b"script exhausted"])
        self.send_response(reply.status)
        for name, value in {"content-type": "text/event-stream", **reply.headers}.items():
            self.send_header(name, value)
        self.send_header("transfer-encoding", "chunked")
        self.send_header("connection", "close")
        self.end_headers()
        self.close_connection = True
        try:
            for part in reply.parts:
                if part == CUT:
                    self.wfile.flush()
                    self.connection.shutdown(socket.SHUT_RDWR)
                    return
                if isinstance(part, float):
                    time.sleep(part)
                    continue
                if isinstance(part, threading.Event):
                    part.wait(60)
                    continue
                assert isinstance(part, bytes)
                self.wfile.write(b"%x\r\n%s\r\n" % (len(part), part))
                self.wfile.flush()
            self.wfile.write(b"0\r\n\r\n")
            self.wfile.flush()
        except OSError:
            pass  # the client went away (a timeout it was told to have)


class WireServer(ThreadingHTTPServer):
    """Answers each request with the next scripted :class:`Reply`, byte for byte."""

    daemon_threads = True

    def __init__(self, script: list[Reply]) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.script = list(script)
        self.requests: list[tuple[str, bytes]] = []
        self.lock = threading.Lock()
        self.url = f"http://127.0.0.1:{self.server_address[1]}"


def provider(kind: str, server: WireServer, *, name: str | None = None, timeout_s: float = 10.0) -> Any:
    if kind == "openai":
        return OpenAIChatProvider(server.url + "/v1", KEY, name=name or "openai", timeout_s=timeout_s)
    return AnthropicProvider(server.url, KEY, name=name or "anthropic", timeout_s=timeout_s)


@dataclass
class Outcome:
    result: RunResult
    files: dict[str, str]  # every file the run store and the tracer wrote, by path
    store: RunStore


def run_against(kind: str, server: WireServer, tmp_path: Path, prompt: str = "hi", **agent: Any) -> Outcome:
    agent.setdefault("retry", FAST)
    agent.setdefault("price", PRICE)
    store = RunStore(tmp_path / "runs", fsync=False)
    model = agent.pop("model", None) or provider(kind, server)
    result = run_sync(Agent(model, **agent), prompt, store=store, tracer=JsonlTracer(tmp_path / "traces"))
    files = {str(p): p.read_text(errors="replace") for p in tmp_path.rglob("*") if p.is_file()}
    return Outcome(result, files, store)


def assert_sound(out: Outcome) -> None:
    """A documented exit, a reason a person can read, the same on disk, and no key anywhere."""
    result = out.result
    assert result.status in ("completed", "failed", "max_turns_exceeded", "budget_exceeded", "interrupted")
    reason = result.reason or ""
    assert "Traceback" not in reason and "unexpected error" not in reason, reason
    assert KEY not in reason and KEY not in result.text
    leaked = [path for path, text in out.files.items() if KEY in text]
    assert not leaked, f"the key was written to {leaked}"
    saved = out.store.load(result.run_id)
    assert saved.status == result.status and saved.call_in_flight is None
    assert result.cost_usd is not None and math.isfinite(result.cost_usd) and result.cost_usd >= 0
    assert saved.cost_usd == pytest.approx(result.cost_usd)


# --- the wire's bytes ---------------------------------------------------------------------------


def sse(data: Any) -> bytes:
    return b"data: " + json.dumps(data).encode() + b"\n\n"


def chunk(delta: dict[str, Any], finish: str | None = None) -> bytes:
    return sse(
        {
            "id": "c",
            "object": "chat.completion.chunk",
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
        }
    )


def usage_chunk(usage: Any) -> bytes:
    return (
        b'data: {"choices": [], "usage": '
        + (usage if isinstance(usage, bytes) else json.dumps(usage).encode())
        + b"}\n\n"
    )


def openai_text(text: str, usage: Any = None) -> list[bytes | float | str]:
    tail = [usage_chunk(usage if usage is not None else {"prompt_tokens": 100, "completion_tokens": 10})]
    return [
        chunk({"role": "assistant", "content": ""}),
        chunk({"content": text}),
        chunk({}, "stop"),
        *tail,
        b"data: [DONE]\n\n",
    ]


def call_delta(index: int, call_id: str | None, name: str | None, arguments: str) -> bytes:
    call: dict[str, Any] = {"index": index, "function": {"arguments": arguments}}
    if call_id:
        call.update(id=call_id, type="function")
    if name:
        call["function"]["name"] = name
    return chunk({"tool_calls": [call]})


def event(name: str, data: dict[str, Any]) -> bytes:
    return f"event: {name}\ndata: {json.dumps(data)}\n\n".encode()


def anthropic_text(text: str, usage: Any = None, output_tokens: Any = 10) -> list[bytes | float | str]:
    start_usage = usage if usage is not None else {"input_tokens": 100, "output_tokens": 1}
    message: dict[str, Any] = {
        "id": "m",
        "type": "message",
        "role": "assistant",
        "content": [],
        "model": "c",
        "usage": start_usage,
    }
    delta = {"type": "text_delta", "text": text}
    return [
        event("message_start", {"type": "message_start", "message": message}),
        event(
            "content_block_start",
            {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
        ),
        event("content_block_delta", {"type": "content_block_delta", "index": 0, "delta": delta}),
        event("content_block_stop", {"type": "content_block_stop", "index": 0}),
        event(
            "message_delta",
            {"type": "message_delta", "delta": {"stop_reason": "end_turn"}, "usage": {"output_tokens": output_tokens}},
        ),
        event("message_stop", {"type": "message_stop"}),
    ]


def text_reply(kind: str, text: str) -> Reply:
    return Reply(200, openai_text(text) if kind == "openai" else anthropic_text(text))


WIRES = ("openai", "anthropic")


# --- the key a server echoes back ---------------------------------------------------------------

ECHO = json.dumps(
    {"error": {"message": f"Incorrect API key provided: {KEY}", "type": "invalid_request_error"}}
).encode()


@pytest.mark.parametrize("kind", WIRES)
@pytest.mark.parametrize(
    ("reply", "requests", "words"),
    [
        (Reply(503, [ECHO], {"content-type": "application/json", "retry-after": "0"}), 4, "HTTP 503"),
        (Reply(400, [ECHO], {"content-type": "application/json"}), 1, "HTTP 400"),
        (Reply(401, [ECHO], {"content-type": "application/json"}), 1, "authentication failed"),
    ],
)
def test_a_key_the_server_echoes_in_an_error_reaches_no_reason_trace_or_run_file(
    serve: Callable[[list[Reply]], WireServer], tmp_path: Path, kind: str, reply: Reply, requests: int, words: str
) -> None:
    server = serve([reply] * 5)
    out = run_against(kind, server, tmp_path)
    assert out.result.status == "failed" and words in (out.result.reason or "")
    assert len(server.requests) == requests  # 401 and 400 are not retried; the 503 is, four times
    assert_sound(out)
    if reply.status != 401:  # the body is kept as detail, with the key taken out
        assert "Incorrect API key provided: ***" in (out.result.reason or "")


@pytest.mark.parametrize("kind", WIRES)
def test_a_key_echoed_inside_the_stream_is_taken_out_too(
    serve: Callable[[list[Reply]], WireServer], tmp_path: Path, kind: str
) -> None:
    if kind == "openai":
        parts: list[bytes | float | str] = [
            chunk({"role": "assistant"}),
            sse({"error": {"message": f"key {KEY} revoked", "type": "invalid_request_error"}}),
        ]
    else:
        error = {"type": "error", "error": {"type": "invalid_request_error", "message": f"key {KEY} revoked"}}
        parts = [anthropic_text("x")[0], event("error", error)]
    out = run_against(kind, serve([Reply(200, parts)]), tmp_path)
    assert out.result.status == "failed" and "key *** revoked" in (out.result.reason or "")
    assert_sound(out)


# --- a body that is not an event stream ---------------------------------------------------------


@pytest.mark.parametrize("kind", WIRES)
@pytest.mark.parametrize(
    ("content_type", "body"),
    [
        ("text/html; charset=utf-8", b"<!DOCTYPE html>\n<html><body>Sign in to continue</body></html>\n"),
        ("application/json", b'{"id": "x", "choices": [{"message": {"content": "hi"}}]}'),
    ],
)
def test_a_200_that_is_not_an_event_stream_fails_once_naming_what_came(
    serve: Callable[[list[Reply]], WireServer], tmp_path: Path, kind: str, content_type: str, body: bytes
) -> None:
    server = serve([Reply(200, [body], {"content-type": content_type})] * 5)
    out = run_against(kind, server, tmp_path)
    reason = out.result.reason or ""
    assert out.result.status == "failed"
    assert content_type in reason and "not an event stream" in reason and "base URL" in reason
    assert len(server.requests) == 1, "the same page would come again: it is not retried (nor paid for again)"
    assert out.result.turns == 0
    assert_sound(out)


# --- a body that ends inside an event -----------------------------------------------------------

HALF_EVENT = b'data: {"choices": [{"index": 0, "delta": {"content": "h\xc3'  # ends inside "é", too
HALF_ANTHROPIC = b'event: content_block_delta\ndata: {"type": "content_block_delta", "index": 0, "del'


@pytest.mark.parametrize("kind", WIRES)
@pytest.mark.parametrize("dropped", [False, True], ids=["clean end", "dropped"])
def test_a_body_that_ends_inside_an_event_before_any_text_is_retried(
    serve: Callable[[list[Reply]], WireServer], tmp_path: Path, kind: str, dropped: bool
) -> None:
    start = [chunk({"role": "assistant"}), HALF_EVENT] if kind == "openai" else [anthropic_text("x")[0], HALF_ANTHROPIC]
    server = serve([Reply(200, [*start, *([CUT] if dropped else [])]), text_reply(kind, "whole answer")])
    out = run_against(kind, server, tmp_path)
    assert (out.result.status, out.result.text) == ("completed", "whole answer")
    assert len(server.requests) == 2 and out.result.turns == 1
    assert_sound(out)


@pytest.mark.parametrize("kind", WIRES)
def test_a_body_that_ends_inside_an_event_after_text_fails_as_a_cut(
    serve: Callable[[list[Reply]], WireServer], tmp_path: Path, kind: str
) -> None:
    if kind == "openai":
        start: list[bytes | float | str] = [chunk({"content": "Hello "}), HALF_EVENT]
    else:
        start = [*anthropic_text("Hello ")[:3], HALF_ANTHROPIC]
    server = serve([Reply(200, start), text_reply(kind, "a second, different answer")])
    out = run_against(kind, server, tmp_path)
    assert out.result.status == "failed"
    assert "the stream was cut before the provider finished (after 6 characters" in (out.result.reason or "")
    assert len(server.requests) == 1, "text reached the user: no second answer"
    assert out.result.cost_usd and out.result.cost_usd > 0  # what streamed was billed, and is counted
    assert_sound(out)


# --- stalls longer than the read timeout --------------------------------------------------------


@pytest.mark.parametrize("kind", WIRES)
def test_a_stall_past_the_read_timeout_is_retried_before_text_and_fails_after(
    serve: Callable[[list[Reply]], WireServer], tmp_path: Path, kind: str
) -> None:
    first = openai_text("late") if kind == "openai" else anthropic_text("late")
    # A timeout well above a loaded machine's pauses (three test workers on two cores), a stall
    # well above the timeout.
    server = serve([Reply(200, [4.0, *first]), text_reply(kind, "in time")])
    out = run_against(kind, server, tmp_path / "before", model=provider(kind, server, timeout_s=1.0))
    assert (out.result.status, out.result.text, len(server.requests)) == ("completed", "in time", 2)
    assert_sound(out)

    shown = [chunk({"content": "Hel"})] if kind == "openai" else anthropic_text("Hel")[:3]
    server = serve([Reply(200, [*shown, 4.0, *first[2:]]), text_reply(kind, "another answer")])
    out = run_against(kind, server, tmp_path / "after", model=provider(kind, server, timeout_s=1.0))
    assert out.result.status == "failed" and "ReadTimeout" in (out.result.reason or "")
    assert "after 3 characters" in (out.result.reason or "") and len(server.requests) == 1
    assert_sound(out)


# --- tool calls ---------------------------------------------------------------------------------

ran: list[str] = []


@tool(read_only=True)
def lookup(city: str) -> str:
    """The weather in a city."""
    ran.append(city)
    return f"{city}: sunny"


def test_parallel_calls_a_server_numbers_alike_stay_two_calls(
    serve: Callable[[list[Reply]], WireServer], tmp_path: Path
) -> None:
    """Ollama behind LiteLLM and some vLLM tool parsers send every parallel call at index 0."""
    ran.clear()
    calls = [
        call_delta(0, "call_a", "lookup", ""),
        call_delta(0, None, None, '{"city": "Oslo"}'),
        call_delta(0, "call_b", "lookup", '{"city":'),
        call_delta(0, None, None, ' "Rome"}'),
        chunk({}, "tool_calls"),
        usage_chunk({"prompt_tokens": 100, "completion_tokens": 20}),
    ]
    server = serve([Reply(200, calls), text_reply("openai", "both sunny")])
    out = run_against("openai", server, tmp_path, tools=[lookup])
    assert out.result.status == "completed" and ran == ["Oslo", "Rome"]
    sent = json.loads(server.requests[1][1])["messages"]
    assert [c["id"] for c in sent[-3]["tool_calls"]] == ["call_a", "call_b"]
    assert [(m["tool_call_id"], m["content"]) for m in sent[-2:]] == [
        ("call_a", "Oslo: sunny"),
        ("call_b", "Rome: sunny"),
    ]
    assert_sound(out)


def test_a_repeated_id_at_one_index_is_still_one_call(
    serve: Callable[[list[Reply]], WireServer], tmp_path: Path
) -> None:
    """llama.cpp repeats the id in every chunk of a call: the split above must not split that."""
    ran.clear()
    calls = [
        call_delta(0, "call_a", "lookup", '{"city":'),
        call_delta(0, "call_a", None, ' "Oslo"}'),
        call_delta(1, "call_b", "lookup", '{"city": "Rome"}'),
        call_delta(1, "call_b", None, ""),
        chunk({}, "tool_calls"),
    ]
    server = serve([Reply(200, calls), text_reply("openai", "done")])
    out = run_against("openai", server, tmp_path, tools=[lookup])
    assert out.result.status == "completed" and ran == ["Oslo", "Rome"]
    assert_sound(out)


# --- usage no call can have ---------------------------------------------------------------------


@pytest.mark.parametrize(
    "usage",
    [
        b'{"prompt_tokens": Infinity, "completion_tokens": 10}',
        b'{"prompt_tokens": NaN, "completion_tokens": 10}',
        b'{"prompt_tokens": 1e308, "completion_tokens": 1e308}',
        b'{"prompt_tokens": 1' + b"0" * 400 + b', "completion_tokens": 10}',
        b'{"prompt_tokens": "lots", "completion_tokens": -7}',
        b'{"prompt_tokens": 100, "completion_tokens": 10, "prompt_tokens_details": {"cached_tokens": -1000000000}}',
    ],
    ids=["infinity", "nan", "1e308", "400 digits", "words and negative", "negative cached"],
)
def test_openai_usage_no_call_can_have_is_estimated_never_a_crash_or_a_wrong_cost(
    serve: Callable[[list[Reply]], WireServer], tmp_path: Path, usage: bytes
) -> None:
    out = run_against("openai", serve([Reply(200, openai_text("fine", usage))]), tmp_path)
    assert (out.result.status, out.result.text) == ("completed", "fine")
    saved = out.store.load(out.result.run_id).usage
    assert all(0 <= n < 10**9 for n in (saved.prompt_tokens, saved.completion_tokens, saved.cached_tokens))
    assert out.result.cost_usd and out.result.cost_usd < 0.01
    assert_sound(out)


@pytest.mark.parametrize(
    ("start_usage", "output_tokens"),
    [
        ({"input_tokens": 5, "cache_creation_input_tokens": -1_000_000, "output_tokens": 1}, 10),
        ({"input_tokens": 100, "cache_read_input_tokens": -1_000_000, "output_tokens": 1}, 10),
        ({"input_tokens": 100, "output_tokens": 1}, 10**400),
        ({"input_tokens": "many", "output_tokens": 1}, -3),
    ],
    ids=["negative cache write", "negative cache read", "huge output", "words and negative"],
)
def test_anthropic_usage_no_call_can_have_is_estimated_never_a_crash_or_a_wrong_cost(
    serve: Callable[[list[Reply]], WireServer], tmp_path: Path, start_usage: dict[str, Any], output_tokens: Any
) -> None:
    server = serve([Reply(200, anthropic_text("fine", start_usage, output_tokens))])
    out = run_against("anthropic", server, tmp_path)
    assert (out.result.status, out.result.text) == ("completed", "fine")
    saved = out.store.load(out.result.run_id).usage
    assert saved.cache_write_tokens >= 0 and saved.cached_tokens >= 0 and 0 < saved.prompt_tokens < 10**9
    assert out.result.cost_usd and out.result.cost_usd < 0.01  # never negative, never absurd
    assert_sound(out)


def test_absurd_but_finite_usage_is_charged_and_the_budget_stops_the_next_call(
    serve: Callable[[list[Reply]], WireServer], tmp_path: Path
) -> None:
    ran.clear()
    calls = [
        call_delta(0, "call_a", "lookup", '{"city": "Oslo"}'),
        chunk({}, "tool_calls"),
        usage_chunk({"prompt_tokens": 10**12, "completion_tokens": 10}),
    ]
    server = serve([Reply(200, calls), text_reply("openai", "never asked")])
    out = run_against("openai", server, tmp_path, tools=[lookup], max_budget_usd=1.0)
    assert out.result.status == "budget_exceeded" and len(server.requests) == 1
    assert out.result.cost_usd == pytest.approx(10**12 * 2.0 / 1e6 + 10 * 10.0 / 1e6)
    assert_sound(out)


# --- Retry-After --------------------------------------------------------------------------------


def test_retry_after_as_an_http_date_is_read_as_the_seconds_until_it() -> None:
    soon = email.utils.formatdate(time.time() + 30, usegmt=True)
    error = classify_http_error("openai", 503, "busy", {"Retry-After": soon})
    assert error.retry_after is not None and 28 <= error.retry_after <= 31
    past = classify_http_error("openai", 503, "busy", {"retry-after": "Wed, 21 Oct 2015 07:28:00 GMT"})
    assert past.retry_after == 0.0
    assert classify_http_error("openai", 503, "busy", {"retry-after": "soon-ish"}).retry_after is None


@pytest.mark.parametrize("kind", WIRES)
@pytest.mark.parametrize("as_date", [False, True], ids=["seconds", "http date"])
def test_a_retry_after_of_ten_hours_fails_at_once_saying_so(
    serve: Callable[[list[Reply]], WireServer], tmp_path: Path, kind: str, as_date: bool
) -> None:
    later = email.utils.formatdate(time.time() + 36_000, usegmt=True) if as_date else "36000"
    server = serve([Reply(429, [b"slow down"], {"retry-after": later})] * 5 + [text_reply(kind, "too late")])
    out = run_against(kind, server, tmp_path)
    reason = out.result.reason or ""
    assert out.result.status == "failed" and "asked to wait" in reason and "max_retry_after_s=5" in reason
    assert len(server.requests) == 1, "not hammered with our own short backoff either"
    assert_sound(out)


def test_a_retry_after_of_ten_hours_falls_back_at_once_and_nothing_is_paid_twice(
    serve: Callable[[list[Reply]], WireServer], tmp_path: Path
) -> None:
    ran.clear()
    first_turn = [
        call_delta(0, "call_a", "lookup", '{"city": "Oslo"}'),
        chunk({}, "tool_calls"),
        usage_chunk({"prompt_tokens": 1000, "completion_tokens": 100}),
    ]
    later = email.utils.formatdate(time.time() + 36_000, usegmt=True)
    primary = serve([Reply(200, first_turn), Reply(429, [ECHO], {"retry-after": later})])
    second = Price(input=1.0, output=1.0)
    backup = serve([Reply(200, openai_text("from the backup", {"prompt_tokens": 2000, "completion_tokens": 50}))])
    out = run_against(
        "openai",
        primary,
        tmp_path,
        tools=[lookup],
        fallback_models=[provider("openai", backup, name="backup")],
        prices={"backup/backup": second},
        max_budget_usd=1.0,
    )
    result = out.result
    assert (result.status, result.text, result.turns) == ("completed", "from the backup", 2)
    assert ran == ["Oslo"] and (len(primary.requests), len(backup.requests)) == (2, 1)
    # The primary's turn at its price, the backup's at its own; the refused request costs nothing.
    assert result.cost_usd == pytest.approx((1000 * 2.0 + 100 * 10.0 + 2000 * 1.0 + 50 * 1.0) / 1e6)
    assert (result.usage.prompt_tokens, result.usage.completion_tokens) == (3000, 150)
    trace = next(text for path, text in out.files.items() if path.endswith(".jsonl"))
    lines = [json.loads(line) for line in trace.splitlines()]
    (fallback,) = [x for x in lines if x["type"] == "fallback"]
    assert "***" in fallback["reason"]
    assert [x["model"] for x in lines if x["type"] == "turn"] == ["openai/openai", "backup/backup"]
    assert_sound(out)


# --- an error inside a Chat Completions stream ------------------------------------------------------


def error_chunk(error: Any) -> bytes:
    return sse({"error": error})


@pytest.mark.parametrize(
    "error",
    [
        {"message": "The server had an error while processing your request.", "type": "server_error", "code": None},
        {"message": "Provider returned error", "code": 502},  # OpenRouter
        {"message": "Overloaded", "type": "overloaded", "code": "overloaded"},
        {"message": "Rate limit reached", "type": "rate_limit_exceeded", "code": 429},
    ],
)
def test_a_servers_error_inside_the_stream_before_any_text_is_retried(
    serve: Callable[[list[Reply]], WireServer], tmp_path: Path, error: dict[str, Any]
) -> None:
    """OpenAI, vLLM and OpenRouter send ``data: {"error": ...}`` when the model fails after the
    200: one the server may get over is retried like the HTTP status it stands for, naming the
    provider; the second attempt's answer is the run's."""
    server = serve(
        [Reply(200, [chunk({"role": "assistant", "content": ""}), error_chunk(error)]), text_reply("openai", "ok")]
    )
    out = run_against("openai", server, tmp_path)
    assert_sound(out)
    assert out.result.status == "completed" and out.result.text == "ok" and len(server.requests) == 2


@pytest.mark.parametrize(
    ("error", "words"),
    [
        (
            {
                "message": "This model's maximum context length is 8192 tokens.",
                "type": "invalid_request_error",
                "code": 400,
            },
            "context",
        ),
        (
            {"message": "You exceeded your current quota", "type": "insufficient_quota", "code": "insufficient_quota"},
            "quota",
        ),
        ({"message": "bad tool schema", "type": "BadRequestError", "code": 400}, "bad tool schema"),
    ],
)
def test_a_servers_error_inside_the_stream_that_asking_again_cannot_fix_fails_once(
    serve: Callable[[list[Reply]], WireServer], tmp_path: Path, error: dict[str, Any], words: str
) -> None:
    server = serve([Reply(200, [error_chunk(error)])] * 4)
    out = run_against("openai", server, tmp_path)
    assert_sound(out)
    reason = out.result.reason or ""
    assert out.result.status == "failed" and "openai" in reason and words in reason.lower(), reason
    assert len(server.requests) <= 2  # (a context overflow is retried once after trimming old tool output)


def test_a_servers_error_inside_the_stream_after_text_fails_without_a_second_answer(
    serve: Callable[[list[Reply]], WireServer], tmp_path: Path
) -> None:
    error = {"message": "The server had an error", "type": "server_error"}
    server = serve([Reply(200, [chunk({"content": "Half an ans"}), error_chunk(error)]), text_reply("openai", "other")])
    out = run_against("openai", server, tmp_path)
    assert_sound(out)
    assert out.result.status == "failed" and "not retried" in (out.result.reason or "")
    assert len(server.requests) == 1
