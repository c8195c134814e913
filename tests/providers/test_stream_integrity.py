"""Both wires under a hostile transport (issue 8): a reply is whole only when the provider says it
finished, every third-party failure comes out classified, lone surrogates never reach the caller,
and a reply without usage is estimated and marked."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tether import Agent, run_stream
from tether.errors import ProviderError, ResponseError, RetryableError
from tether.events import ToolStart
from tether.harness.retry import RetryPolicy
from tether.messages import AssistantMessage, UserMessage
from tether.providers.anthropic import AnthropicProvider
from tether.providers.base import (
    IncompleteStreamError,
    ModelRequest,
    ModelResponse,
    ResponseDone,
    StreamEvent,
    StreamText,
    ToolDefinition,
    estimate_usage,
)
from tether.providers.openai_chat import OpenAIChatProvider
from tether.testing import ScriptedServer
from tether.tools.files import FILE_TOOLS
from tether.usage import Price

FAST = RetryPolicy(base_delay_s=0.01, max_delay_s=0.05)
WIRES = ("openai", "anthropic")
CUT = "the stream was cut before the provider finished"


@pytest.fixture
def server() -> Iterator[ScriptedServer]:
    with ScriptedServer() as s:
        yield s


def wire(kind: str, server: ScriptedServer | None = None, *, transport: Any = None) -> Any:
    if kind == "openai":
        return OpenAIChatProvider(base_url=server.base_url if server else "http://127.0.0.1:9/v1", transport=transport)
    return AnthropicProvider(base_url=server.root_url if server else "http://127.0.0.1:9", transport=transport)


def request(scenario: str = "hello") -> ModelRequest:
    return ModelRequest(
        model=scenario,
        messages=[UserMessage.text("Which file mentions a timeout?")],
        tools=[ToolDefinition("read_file", "Read a file.", {"type": "object"})],
    )


async def _consume(provider: Any, req: ModelRequest, stream: bool) -> tuple[list[StreamEvent], ModelResponse]:
    events: list[StreamEvent] = []
    try:
        if not stream:
            return events, await provider.complete(req)
        async for event in provider.stream(req):
            events.append(event)
            if isinstance(event, ResponseDone):
                return events, event.response
        raise AssertionError("the stream ended without ResponseDone")
    finally:
        await provider.aclose()


def consume(provider: Any, req: ModelRequest, stream: bool = True) -> tuple[list[StreamEvent], ModelResponse]:
    return asyncio.run(_consume(provider, req, stream))


def failure(provider: Any, req: ModelRequest, stream: bool = True) -> tuple[list[StreamEvent], BaseException]:
    """What the caller saw before the call failed, and the exception."""
    seen: list[StreamEvent] = []

    async def go() -> None:
        try:
            if not stream:
                await provider.complete(req)
            else:
                async for event in provider.stream(req):
                    seen.append(event)
        finally:
            await provider.aclose()

    try:
        asyncio.run(go())
    except BaseException as exc:  # the test inspects whatever escaped
        return seen, exc
    raise AssertionError(f"the call succeeded: {seen[-1] if seen else None}")


def shown_chars(events: list[StreamEvent]) -> int:
    return sum(len(e.text) for e in events if not isinstance(e, ResponseDone))


# --- a stream is finished only when the provider says so ------------------------------------------


@pytest.mark.parametrize("kind", WIRES)
@pytest.mark.parametrize(
    ("fault", "scenario"),
    [
        ("end_before_content", "hello"),  # a clean end with nothing said: not an empty answer
        ("end_after_text", "hello"),  # half an answer
        ("end_in_arguments", "single_read"),  # a tool call cut to {"path": "e
        ("cut_in_arguments", "single_read"),
        ("no_finish", "hello"),  # every word, but no end marker
        ("no_finish", "single_read"),
    ],
)
def test_a_stream_without_its_end_marker_is_never_a_reply(
    server: ScriptedServer, kind: str, fault: str, scenario: str
) -> None:
    server.set_faults([fault])
    seen, exc = failure(wire(kind, server), request(scenario))
    assert not any(isinstance(e, ResponseDone) for e in seen)
    assert isinstance(exc, IncompleteStreamError) and isinstance(exc, RetryableError)
    assert CUT in str(exc)
    assert exc.chars_shown == shown_chars(seen)
    if exc.chars_shown:
        assert f"after {exc.chars_shown} characters" in str(exc)


@pytest.mark.parametrize("kind", WIRES)
def test_the_same_streams_complete_without_the_fault(server: ScriptedServer, kind: str) -> None:
    _, response = consume(wire(kind, server), request("single_read"))
    (call,) = response.message.tool_calls
    assert json.loads(call.arguments) == {"path": "errors.log"}


def test_a_missing_done_line_is_not_a_cut_when_finish_reason_arrived(server: ScriptedServer) -> None:
    server.set_faults(["no_done"])  # some compatible servers never send [DONE]
    _, response = consume(wire("openai", server), request("hello"))
    assert response.message.text.startswith("Hello!") and response.message.finish_reason == "stop"


def _sse(lines: list[str], then: BaseException | None = None, *, encoding: str = "") -> Callable[..., Any]:
    """A mock transport handler answering every request with these SSE lines, then ``then``."""

    class Body(httpx.AsyncByteStream):
        async def __aiter__(self) -> AsyncIterator[bytes]:
            for line in lines:
                yield f"{line}\n\n".encode()
            if then is not None:
                raise then

    def handler(req: httpx.Request) -> httpx.Response:
        headers = {"content-type": "text/event-stream", **({"content-encoding": encoding} if encoding else {})}
        return httpx.Response(200, headers=headers, stream=Body())

    return handler


def _chunk(delta: dict[str, Any], finish: str | None = None, **extra: Any) -> str:
    return "data: " + json.dumps({"choices": [{"index": 0, "delta": delta, "finish_reason": finish}], **extra})


def test_a_drop_after_finish_reason_loses_only_the_usage_chunk() -> None:
    lines = [_chunk({"role": "assistant", "content": "All done."}), _chunk({}, "stop")]
    transport = httpx.MockTransport(_sse(lines, httpx.RemoteProtocolError("peer closed connection")))
    _, response = consume(wire("openai", transport=transport), request())
    assert response.message.text == "All done."
    assert response.message.usage is not None and response.message.usage.estimated


@pytest.mark.parametrize("kind", WIRES)
def test_a_reply_cut_by_max_tokens_inside_tool_arguments_comes_back_as_it_got(kind: str) -> None:
    # The loop, not the wire, decides: it never runs the cut call (tests/harness/test_length.py).
    if kind == "openai":
        lines = [
            _chunk(
                {
                    "role": "assistant",
                    "tool_calls": [
                        {"index": 0, "id": "c1", "type": "function", "function": {"name": "read_file", "arguments": ""}}
                    ],
                }
            ),
            _chunk({"tool_calls": [{"index": 0, "function": {"arguments": '{"path": "e'}}]}),
            _chunk({}, "length"),
            "data: [DONE]",
        ]
    else:
        lines = [
            _event({"type": "message_start", "message": {"usage": {"input_tokens": 9, "output_tokens": 1}}}),
            _event(
                {
                    "type": "content_block_start",
                    "index": 0,
                    "content_block": {"type": "tool_use", "id": "c1", "name": "read_file", "input": {}},
                }
            ),
            _event(
                {
                    "type": "content_block_delta",
                    "index": 0,
                    "delta": {"type": "input_json_delta", "partial_json": '{"path": "e'},
                }
            ),
            _event({"type": "content_block_stop", "index": 0}),
            _event({"type": "message_delta", "delta": {"stop_reason": "max_tokens"}, "usage": {"output_tokens": 9}}),
            _event({"type": "message_stop"}),
        ]
    _, response = consume(wire(kind, transport=httpx.MockTransport(_sse(lines))), request())
    message = response.message
    assert message.finish_reason == "length"
    assert [(c.id, c.name, c.arguments) for c in message.tool_calls] == [("c1", "read_file", '{"path": "e')]


def _event(data: dict[str, Any]) -> str:
    return f"event: {data['type']}\ndata: {json.dumps(data)}"


# --- every third-party failure comes out classified -----------------------------------------------

TRANSIENT = [
    httpx.RemoteProtocolError("peer closed"),
    httpx.ReadError("reset"),
    httpx.ReadTimeout("slow"),
    httpx.ConnectError("refused"),
    ConnectionResetError(104, "reset by peer"),
    OSError(5, "EIO"),
]
GARBAGE = [httpx.DecodingError("bad gzip"), httpx.TooManyRedirects("loop")]


@pytest.mark.parametrize("kind", WIRES)
@pytest.mark.parametrize("stream", [True, False])
@pytest.mark.parametrize("exc", TRANSIENT + GARBAGE, ids=lambda e: type(e).__name__)
def test_a_failure_while_sending_is_classified(kind: str, stream: bool, exc: BaseException) -> None:
    def handler(req: httpx.Request) -> httpx.Response:
        raise exc

    _, raised = failure(wire(kind, transport=httpx.MockTransport(handler)), request(), stream)
    assert isinstance(raised, RetryableError if exc in TRANSIENT else ResponseError), repr(raised)
    assert not isinstance(raised, IncompleteStreamError)
    assert raised.__cause__ is exc


@pytest.mark.parametrize("kind", WIRES)
@pytest.mark.parametrize("exc", TRANSIENT + GARBAGE, ids=lambda e: type(e).__name__)
def test_a_failure_while_reading_the_stream_is_classified(kind: str, exc: BaseException) -> None:
    if kind == "openai":
        lines = [_chunk({"role": "assistant", "content": "Half an"})]
    else:
        lines = [
            _event({"type": "message_start", "message": {"usage": {"input_tokens": 9}}}),
            _event({"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}),
            _event({"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "Half an"}}),
        ]
    seen, raised = failure(wire(kind, transport=httpx.MockTransport(_sse(lines, exc))), request())
    assert [e.text for e in seen if isinstance(e, StreamText)] == ["Half an"]
    if exc in TRANSIENT:  # retryable, and it says how much the user already saw
        assert isinstance(raised, IncompleteStreamError) and "after 7 characters" in str(raised)
    else:
        assert isinstance(raised, ResponseError)
    assert raised.__cause__ is exc


@pytest.mark.parametrize("kind", WIRES)
@pytest.mark.parametrize("stream", [True, False])
def test_a_garbled_gzip_body_is_a_response_error(server: ScriptedServer, kind: str, stream: bool) -> None:
    server.set_faults(["garbled_gzip"])
    _, exc = failure(wire(kind, server), request(), stream)
    assert isinstance(exc, ResponseError) and isinstance(exc.__cause__, httpx.DecodingError)


@pytest.mark.parametrize("kind", WIRES)
def test_a_garbled_error_body_still_reports_the_status(kind: str) -> None:
    class Body(httpx.AsyncByteStream):
        async def __aiter__(self) -> AsyncIterator[bytes]:
            yield b"\x1f\x8bnot gzip at all"

    def handler(req: httpx.Request) -> httpx.Response:
        return httpx.Response(503, headers={"content-encoding": "gzip"}, stream=Body())

    _, exc = failure(wire(kind, transport=httpx.MockTransport(handler)), request())
    assert isinstance(exc, RetryableError) and exc.status == 503


@pytest.mark.parametrize("kind", WIRES)
def test_a_non_json_body_is_a_response_error(kind: str) -> None:
    def handler(req: httpx.Request) -> httpx.Response:
        return httpx.Response(200, content=b"\xff\xfe<html>upstream says hi</html>")

    _, exc = failure(wire(kind, transport=httpx.MockTransport(handler)), request(), stream=False)
    assert isinstance(exc, ResponseError)


# --- lone surrogates become U+FFFD where replies are decoded ------------------------------------


def _persistable(message: AssistantMessage) -> str:
    dumped = message.model_dump_json()
    dumped.encode("utf-8")  # what a session file does; a lone surrogate raises here
    return json.dumps(json.loads(dumped), ensure_ascii=False)


@pytest.mark.parametrize("kind", WIRES)
@pytest.mark.parametrize("stream", [True, False])
def test_a_lone_surrogate_in_the_reply_becomes_a_replacement_character(
    server: ScriptedServer, kind: str, stream: bool
) -> None:
    server.set_faults(["lone_surrogate"])
    events, response = consume(wire(kind, server), request("hello"), stream)
    assert "\ufffd" in response.message.text
    assert "\ufffd" in _persistable(response.message)
    for e in events:
        if isinstance(e, StreamText):
            e.text.encode("utf-8")


def test_surrogates_in_reasoning_tool_names_and_arguments_are_replaced() -> None:
    # Escaped surrogates as a server writes them: lone ones inside the chunk, inside the arguments'
    # own JSON, and a valid pair (an emoji) that must survive.
    lines = [
        'data: {"choices":[{"index":0,"delta":{"role":"assistant","reasoning_content":"think \\ud800"}}]}',
        'data: {"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"c\\udc00","type":"function",'
        '"function":{"name":"read_\\udfff","arguments":"{\\"path\\": \\"a\\\\ud800b\\ud83d\\ude00\\"}"}}]}}]}',
        'data: {"choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}',
        "data: [DONE]",
    ]
    _, response = consume(wire("openai", transport=httpx.MockTransport(_sse(lines))), request())
    text = _persistable(response.message)
    (call,) = response.message.tool_calls
    assert call.name == "read_\ufffd" and call.id == "c\ufffd"
    assert json.loads(call.arguments) == {"path": "a\ufffdb\U0001f600"}
    assert "think \ufffd" in text


def test_surrogates_in_anthropic_thinking_and_tool_input_are_replaced() -> None:
    lines = [
        _event({"type": "message_start", "message": {"usage": {"input_tokens": 9, "output_tokens": 1}}}),
        _event({"type": "content_block_start", "index": 0, "content_block": {"type": "thinking", "thinking": ""}}),
        _event({"type": "content_block_delta", "index": 0, "delta": {"type": "thinking_delta", "thinking": "x\ud800"}}),
        _event(
            {
                "type": "content_block_start",
                "index": 1,
                "content_block": {"type": "tool_use", "id": "c1", "name": "read_file", "input": {}},
            }
        ),
        _event(
            {
                "type": "content_block_delta",
                "index": 1,
                "delta": {"type": "input_json_delta", "partial_json": '{"path": "\\udc00'},
            }
        ),
        _event(
            {"type": "content_block_delta", "index": 1, "delta": {"type": "input_json_delta", "partial_json": '"}'}}
        ),
        _event({"type": "message_delta", "delta": {"stop_reason": "tool_use"}, "usage": {"output_tokens": 9}}),
        _event({"type": "message_stop"}),
    ]
    _, response = consume(wire("anthropic", transport=httpx.MockTransport(_sse(lines))), request())
    _persistable(response.message)
    (call,) = response.message.tool_calls
    assert json.loads(call.arguments) == {"path": "\ufffd"}


# --- usage the server did not send is estimated on both wires -----------------------------------


@pytest.mark.parametrize("kind", WIRES)
@pytest.mark.parametrize("stream", [True, False])
@pytest.mark.parametrize("scenario", ["hello", "single_read"])
def test_missing_usage_is_estimated_and_marked(server: ScriptedServer, kind: str, stream: bool, scenario: str) -> None:
    server.set_faults(["no_usage"])
    _, response = consume(wire(kind, server), request(scenario), stream)
    usage = response.message.usage
    assert usage is not None and usage.estimated
    assert usage.prompt_tokens > 10 and usage.completion_tokens > 0


@pytest.mark.parametrize("kind", WIRES)
def test_reported_usage_is_not_marked_estimated(server: ScriptedServer, kind: str) -> None:
    _, response = consume(wire(kind, server), request("hello"))
    usage = response.message.usage
    assert usage is not None and not usage.estimated and usage.prompt_tokens > 0


def test_the_estimate_counts_texts_and_schemas_not_the_json_body() -> None:
    def count(text: str) -> int:
        return len(text)

    schema = {"type": "object", "properties": {"path": {"type": "string"}}}
    quoted = '"\\\n' * 1000  # JSON escaping would double this text's size
    req = ModelRequest(
        model="m",
        system="sys",
        messages=[UserMessage.text(quoted)],
        tools=[ToolDefinition("read_file", "Read.", schema)],
    )
    reply = AssistantMessage.model_validate({"role": "assistant", "content": [{"type": "text", "text": "hi"}]})
    usage = estimate_usage(req, reply, count)
    texts = len("sys") + len(quoted) + len("read_file") + len("Read.") + len(json.dumps(schema))
    assert usage.estimated and usage.completion_tokens == 2
    assert texts < usage.prompt_tokens < texts + 64  # a small overhead per message and tool


# --- through the loop -----------------------------------------------------------------------------


def _events(agent: Agent, prompt: str) -> list[Any]:
    async def go() -> list[Any]:
        return [e async for e in run_stream(agent, prompt)]

    return asyncio.run(go())


def test_a_tool_call_cut_mid_arguments_is_retried_not_run(server: ScriptedServer, workspace: Path) -> None:
    provider = wire("openai", server)
    provider.model_id = "single_read"
    server.set_faults(["end_in_arguments"])
    events = _events(
        Agent(
            provider,
            tools=FILE_TOOLS,
            cwd=workspace,
            retry=FAST,
            prices={"openai/single_read": Price(input=2.0, output=12.0)},
        ),
        "q",
    )
    starts = [e for e in events if isinstance(e, ToolStart)]
    assert [json.loads(e.args) for e in starts] == [{"path": "errors.log"}]
    assert events[-1].result.status == "completed"


def test_half_an_answer_ends_the_run_with_the_reason(server: ScriptedServer) -> None:
    provider = wire("openai", server)
    provider.model_id = "hello"
    server.set_faults(["end_after_text"])
    events = _events(Agent(provider, retry=FAST), "hi")
    result = events[-1].result
    assert result.status == "failed" and CUT in (result.reason or "")


def test_incomplete_stream_error_is_a_provider_error() -> None:
    assert issubclass(IncompleteStreamError, RetryableError) and issubclass(IncompleteStreamError, ProviderError)
