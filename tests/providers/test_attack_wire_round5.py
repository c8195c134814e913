"""Providers not streamed, timeouts, and wire features not attacked before, fifth round, through
real HTTP on loopback (the byte-for-byte server of the second round): a reply not streamed that is
slow but healthy; structured output a server wraps in a code fence; a 200 with no choices; a call
whose arguments are not JSON, or cut by the token limit, in a reply not streamed; Anthropic's
``pause_turn`` and ``refusal``; a stream that trickles; a kept-alive connection the server closed.
"""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

from tests.providers.test_attack_wire_round2 import (
    PRICE,
    Reply,
    WireServer,
    assert_sound,
    chunk,
    provider,
    run_against,  # the fixture: scripted servers, shut down after the test
)
from tether import tool
from tether.errors import ConfigError
from tether.messages import ImagePart, TextPart
from tether.tools import ToolResult

Serve = Callable[[list[Reply]], WireServer]
JSON = {"content-type": "application/json"}


def completion(message: dict[str, Any], finish: str = "stop", usage: Any = None) -> bytes:
    return json.dumps(
        {
            "id": "c",
            "object": "chat.completion",
            "choices": [{"index": 0, "message": {"role": "assistant", **message}, "finish_reason": finish}],
            "usage": usage if usage is not None else {"prompt_tokens": 100, "completion_tokens": 10},
        }
    ).encode()


# --- a reply not streamed has no first token ------------------------------------------------------


def read(server: WireServer) -> int:
    """How many requests ``server`` has read, once it has read one: a request whose reply stalls is
    read on the server's own thread, which a loaded machine may run after the client gave up (30 s:
    a hang guard only)."""
    deadline = time.monotonic() + 30
    while not server.requests and time.monotonic() < deadline:
        time.sleep(0.01)
    return len(server.requests)


def test_a_slow_reply_not_streamed_is_not_given_up_at_the_first_token_timeout(serve: Serve, tmp_path: Path) -> None:
    """Before: with stream=False, first_token_timeout_s bounded the whole reply: a healthy reply
    that took longer was given up, charged its prompt only, and asked four times (each billed in
    full by the server)."""
    server = serve([Reply(200, [0.6, completion({"content": "slow but whole"})], JSON)] * 4)
    out = run_against("openai", server, tmp_path, stream=False, first_token_timeout_s=0.2)
    assert_sound(out)
    assert out.result.status == "completed", out.result.reason
    assert out.result.text == "slow but whole"
    assert len(server.requests) == 1


def test_a_reply_not_streamed_past_reply_timeout_is_charged_whole_and_not_asked_again(
    serve: Serve, tmp_path: Path
) -> None:
    # The request must be sent before the timeout fires (the timeout runs from the call, before the
    # client is made and connected): a timeout well above a loaded machine's pauses (three test
    # workers on two cores). The reply comes once the run is over: however late the timeout fires.
    late = threading.Event()
    server = serve([Reply(200, [late, completion({"content": "too late"})], JSON)] * 4)
    out = run_against("openai", server, tmp_path, stream=False, reply_timeout_s=5.0, max_tokens=1000)
    late.set()
    assert_sound(out)
    result = out.result
    assert result.status == "failed"
    assert "reply_timeout_s=5.0" in (result.reason or "") and "stream" in (result.reason or "")
    assert read(server) == 1  # one bill, not four
    # Charged as the whole answer the server may have written: its prompt and max_tokens of output.
    assert result.usage.completion_tokens == 1000 and result.usage.estimated
    assert result.cost_usd >= PRICE.cost(result.usage.model_copy(update={"prompt_tokens": 0}))


def test_a_reply_not_streamed_past_reply_timeout_falls_back(serve: Serve, tmp_path: Path) -> None:
    # The fallback's reply must come within reply_timeout_s too: a timeout well above a loaded
    # machine's pauses (three test workers on two cores); the slow reply comes once the run is over.
    late = threading.Event()
    slow = serve([Reply(200, [late, completion({"content": "too late"})], JSON)])
    fast = serve([Reply(200, [completion({"content": "from the fallback"})], JSON)])
    out = run_against(
        "openai",
        slow,
        tmp_path,
        stream=False,
        reply_timeout_s=5.0,
        fallback_models=[provider("openai", fast, name="backup")],
        prices={"backup/": PRICE},
    )
    late.set()
    assert out.result.status == "completed", out.result.reason
    assert out.result.text == "from the fallback"
    assert read(slow) == 1


@pytest.mark.parametrize("value", [0, -1.0, float("nan"), "10"])
def test_a_reply_timeout_that_is_no_number_of_seconds_is_a_config_error(
    serve: Serve, tmp_path: Path, value: Any
) -> None:
    server = serve([])
    with pytest.raises(ConfigError, match="reply_timeout_s"):
        run_against("openai", server, tmp_path, stream=False, reply_timeout_s=value)
    assert server.requests == []


# --- a refusal ----------------------------------------------------------------------------------


class Answer(BaseModel):
    city: str
    n: int


REFUSAL = "I can't help with that."


def anthropic_message(stop: str, content: list[dict[str, Any]]) -> bytes:
    return json.dumps(
        {
            "id": "m",
            "type": "message",
            "role": "assistant",
            "model": "c",
            "content": content,
            "stop_reason": stop,
            "usage": {"input_tokens": 10, "output_tokens": 5},
        }
    ).encode()


REFUSALS = {
    "openai, not streamed": (
        "openai",
        False,
        Reply(200, [completion({"content": None, "refusal": REFUSAL})], JSON),
    ),
    "openai, streamed": (
        "openai",
        True,
        Reply(
            200,
            [
                chunk({"role": "assistant", "content": None, "refusal": ""}),
                chunk({"refusal": REFUSAL}),
                chunk({}, "stop"),
                b"data: [DONE]\n\n",
            ],
        ),
    ),
    "anthropic, not streamed": (
        "anthropic",
        False,
        Reply(200, [anthropic_message("refusal", [{"type": "text", "text": REFUSAL}])], JSON),
    ),
}


@pytest.mark.parametrize("case", list(REFUSALS))
def test_a_refusal_is_said_in_its_words_and_a_structured_answer_is_not_asked_again(
    serve: Serve, tmp_path: Path, case: str
) -> None:
    """Before: OpenAI's ``refusal`` field was not read (the reply was empty), and with an output
    type every refusal was sent back for a correction and paid for three times, the run failing
    "the answer is empty" or "not valid JSON" with the model's words nowhere."""
    kind, stream, reply = REFUSALS[case]
    server = serve([reply] * 3)
    out = run_against(kind, server, tmp_path, stream=stream, output_type=Answer)
    assert_sound(out)
    assert out.result.status == "failed"
    assert REFUSAL in (out.result.reason or "") and "refused" in (out.result.reason or "")
    assert len(server.requests) == 1


@pytest.mark.parametrize("stream", [False, True])
def test_an_openai_refusal_without_an_output_type_is_the_answer_in_its_words(
    serve: Serve, tmp_path: Path, stream: bool
) -> None:
    reply = REFUSALS["openai, streamed" if stream else "openai, not streamed"][2]
    out = run_against("openai", serve([reply]), tmp_path, stream=stream)
    assert out.result.status == "completed"
    assert out.result.text == REFUSAL
    assert out.result.reason == "the model refused to answer"


@pytest.mark.parametrize("text", [None, "Here is how to"])
def test_a_reply_a_content_filter_stopped_says_so_and_is_not_corrected(
    serve: Serve, tmp_path: Path, text: str | None
) -> None:
    """Before: a reply Azure's or OpenAI's content filter cut short completed as "the model
    answered" (half a sentence passed for the whole answer), and with an output type it was sent
    back for correction and paid for three times."""
    reply = Reply(200, [completion({"content": text}, "content_filter")], JSON)
    out = run_against("openai", serve([reply]), tmp_path, stream=False)
    assert out.result.status == "completed"
    assert out.result.reason == "the provider's content filter stopped the reply"
    assert out.result.text == (text or "")
    server = serve([reply] * 3)
    typed = run_against("openai", server, tmp_path / "typed", stream=False, output_type=Answer)
    assert typed.result.status == "failed"
    assert "content filter" in (typed.result.reason or "") and "Answer" in (typed.result.reason or "")
    assert len(server.requests) == 1


# --- images a model does not read ---------------------------------------------------------------


@tool
def screenshot() -> ToolResult:
    """Take a screenshot."""
    return ToolResult(content=[TextPart(text="the screen"), ImagePart(data="iVBORw0KGgo=", media_type="image/png")])


def _call_screenshot(kind: str) -> bytes:
    if kind == "openai":
        call = {"id": "a", "type": "function", "function": {"name": "screenshot", "arguments": "{}"}}
        return completion({"content": None, "tool_calls": [call]}, "tool_calls")
    return anthropic_message("tool_use", [{"type": "tool_use", "id": "a", "name": "screenshot", "input": {}}])


IMAGE_REFUSALS = {
    # vLLM serving a model without vision
    "vllm": ("openai", 400, {"object": "error", "message": "At most 0 image(s) may be provided in one request."}),
    # llama.cpp's server without an mmproj answers 500
    "llama.cpp": (
        "openai",
        500,
        {"error": {"code": 500, "message": "image input is not supported - hint: provide the mmproj"}},
    ),
    "anthropic-compatible": (
        "anthropic",
        400,
        {"type": "error", "error": {"type": "invalid_request_error", "message": "this model does not support images"}},
    ),
}


@pytest.mark.parametrize("case", list(IMAGE_REFUSALS))
def test_images_a_model_does_not_read_fail_once_naming_the_model_and_what_to_do(
    serve: Serve, tmp_path: Path, case: str
) -> None:
    """Before: the server's JSON was the reason ("HTTP 400: {"object": "error", ...}"), or, for
    llama.cpp's 500, the request was sent four times before failing "HTTP 500"."""
    kind, status, error = IMAGE_REFUSALS[case]
    refused = Reply(status, [json.dumps(error).encode()], JSON)
    server = serve([Reply(200, [_call_screenshot(kind)], JSON), refused, refused, refused, refused])
    out = run_against(
        kind, server, tmp_path, stream=False, tools=[screenshot], model=provider(kind, server, name="local")
    )
    assert_sound(out)
    reason = out.result.reason or ""
    assert out.result.status == "failed"
    assert "the model local/" in reason and "images" in reason and "Use a model that does" in reason, reason
    assert len(server.requests) == 2  # the call, then the one refusal: not retried


def test_an_error_about_images_in_a_request_without_any_is_left_as_the_server_said(
    serve: Serve, tmp_path: Path
) -> None:
    error = {"object": "error", "message": "image_url is not a valid field"}
    server = serve([Reply(400, [json.dumps(error).encode()], JSON)])
    out = run_against("openai", server, tmp_path, stream=False)
    assert out.result.status == "failed"
    assert "refused the request's images" not in (out.result.reason or "")
    assert "image_url is not a valid field" in (out.result.reason or "")


def test_a_reply_not_streamed_past_the_providers_read_timeout_is_charged_whole_and_not_asked_again(
    serve: Serve, tmp_path: Path
) -> None:
    """Before: the provider's read timeout (timeout_s, 600 s by default) on a reply not streamed
    was a dropped connection: charged nothing, and asked four times, each billed by the server."""
    late = threading.Event()  # the reply comes once the run is over: past the timeout however late it fires
    server = serve([Reply(200, [late, completion({"content": "too late"})], JSON)] * 4)
    model = provider("openai", server, timeout_s=0.2)
    out = run_against("openai", server, tmp_path, stream=False, model=model, max_tokens=1000)
    late.set()
    assert_sound(out)
    assert out.result.status == "failed"
    assert "timeout" in (out.result.reason or "") and "not asked again" in (out.result.reason or "")
    assert read(server) == 1
    assert out.result.usage.completion_tokens == 1000 and out.result.usage.estimated


# --- a 200 with nothing in it -------------------------------------------------------------------


def test_a_reply_with_no_choices_says_so_not_an_index_error(serve: Serve, tmp_path: Path) -> None:
    body = {
        "id": "c",
        "object": "chat.completion",
        "choices": [],
        "usage": {"prompt_tokens": 5, "completion_tokens": 0},
    }
    server = serve([Reply(200, [json.dumps(body).encode()], JSON)])
    out = run_against("openai", server, tmp_path, stream=False)
    assert_sound(out)
    reason = out.result.reason or ""
    assert out.result.status == "failed"
    assert "no choices" in reason and "IndexError" not in reason, reason


def test_a_turn_the_server_paused_is_not_taken_for_the_answer(serve: Serve, tmp_path: Path) -> None:
    """Before: Anthropic's ``stop_reason: pause_turn`` (a server tool running long) completed the
    run as "the model returned an empty answer", as if the model had nothing to say."""
    search = {"type": "server_tool_use", "id": "s1", "name": "web_search", "input": {"query": "x"}}
    reply = Reply(200, [anthropic_message("pause_turn", [search])], JSON)
    out = run_against("anthropic", serve([reply]), tmp_path, stream=False)
    assert out.result.status == "completed"
    assert "paused the turn" in (out.result.reason or "")


# --- a kept-alive connection the server closed --------------------------------------------------


class _KeepAlive(BaseHTTPRequestHandler):
    """Keeps each connection open after its answer, and closes one reused for a second request
    without answering it (a server's idle timeout racing the client's next request)."""

    protocol_version = "HTTP/1.1"
    server: Any

    def log_message(self, *args: Any) -> None:
        pass

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("content-length") or 0))
        self.answered = getattr(self, "answered", 0) + 1
        with self.server.lock:
            self.server.posts += 1
            first = self.server.posts == 1
        if self.answered > 1:
            self.server.dropped += 1
            self.close_connection = True
            self.connection.shutdown(socket.SHUT_RDWR)
            return
        call = {"id": "a", "type": "function", "function": {"name": "ping", "arguments": "{}"}}
        body = (
            completion({"content": None, "tool_calls": [call]}, "tool_calls")
            if first
            else completion({"content": "done"})
        )
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


@tool
def ping() -> str:
    """Ping."""
    return "pong"


def test_a_kept_alive_connection_the_server_closed_is_asked_again_on_a_new_one_and_not_charged(
    tmp_path: Path,
) -> None:
    server: Any = ThreadingHTTPServer(("127.0.0.1", 0), _KeepAlive)
    server.daemon_threads = True
    server.lock, server.posts, server.dropped = threading.Lock(), 0, 0
    server.url = f"http://127.0.0.1:{server.server_address[1]}"
    threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
    try:
        out = run_against("openai", server, tmp_path, stream=False, tools=[ping])
    finally:
        server.shutdown()
        server.server_close()
    assert_sound(out)
    assert out.result.status == "completed" and out.result.text == "done"
    assert server.dropped == 1 and server.posts == 3
    # The two answers as reported; the request the server dropped unanswered costs nothing.
    assert out.result.usage.prompt_tokens == 200 and not out.result.usage.estimated
