"""Both wires against what real servers do (issue 9): llama.cpp's server (assistant content must be
a string; tool-call ids repeated in every chunk; no usage in streams), a tool input that is not
JSON on the Messages wire, base URLs written with or without ``/v1``, hosts that cannot be reached,
and the models a server lists."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.conftest import scripted_anthropic as anthropic
from tests.conftest import scripted_openai as openai
from tests.server.conftest import unused_port
from tether import Agent, run
from tether.errors import AuthError, BadRequestError, RetryableError, UnreachableError
from tether.harness.retry import RetryPolicy
from tether.messages import AssistantMessage, TextPart, ToolCallPart, ToolMessage, UserMessage
from tether.providers.anthropic import AnthropicProvider
from tether.providers.base import ModelLister, ModelRequest, ResponseDone, ToolDefinition
from tether.providers.openai_chat import OpenAIChatProvider, StreamAssembler, message_to_wire
from tether.providers.scripted import SCENARIOS, ScriptedModel
from tether.testing import ScriptedServer
from tether.tools.files import FILE_TOOLS
from tether.usage import Price

FAST = RetryPolicy(base_delay_s=0.01, max_delay_s=0.05)
PRICE = Price(input=2.0, output=12.0)


@pytest.fixture
def server() -> Iterator[ScriptedServer]:
    with ScriptedServer() as s:
        yield s


@pytest.fixture
def llama_cpp() -> Iterator[ScriptedServer]:
    with ScriptedServer(dialect="llama.cpp") as s:
        yield s


def chat_bodies(server: ScriptedServer) -> list[dict[str, Any]]:
    return [body for _, body, _ in server.received]


def go(agent: Agent, prompt: str = "Which file mentions a timeout?") -> Any:
    return asyncio.run(run(agent, prompt))


# --- 1. an assistant message with only tool calls carries "content": "" ---------------------------


def test_a_tool_only_assistant_message_has_empty_string_content() -> None:
    message = AssistantMessage(content=(ToolCallPart(id="c1", name="list_files", arguments="{}"),))
    wire = message_to_wire(message)
    assert wire["content"] == "" and "content" in wire
    assert message_to_wire(AssistantMessage(content=()))["content"] == ""  # an empty answer too
    text = AssistantMessage(content=(TextPart(text="Looking."), ToolCallPart(id="c1", name="x", arguments="{}")))
    assert message_to_wire(text)["content"] == "Looking."


@pytest.mark.parametrize("stream", [True, False])
def test_a_tool_round_trip_with_a_llama_cpp_server(llama_cpp: ScriptedServer, workspace: Path, stream: bool) -> None:
    result = go(Agent(openai(llama_cpp), tools=FILE_TOOLS, cwd=workspace, price=PRICE, retry=FAST, stream=stream))
    assert result.status == "completed", result.reason
    assert result.turns == 3 and "timeout" in result.output
    bodies = chat_bodies(llama_cpp)
    assert len(bodies) == 3  # nothing was retried
    sent = [m for body in bodies for m in body["messages"] if m["role"] == "assistant"]
    assert sent and all(m["content"] == "" for m in sent)


@pytest.mark.parametrize(("content", "present"), [(None, True), (None, False)])
def test_the_scripted_server_refuses_null_or_missing_assistant_content(
    server: ScriptedServer, llama_cpp: ScriptedServer, content: Any, present: bool
) -> None:
    assistant: dict[str, Any] = {
        "role": "assistant",
        "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "list_files", "arguments": "{}"}}],
    }
    if present:
        assistant["content"] = content
    body = {
        "model": "plan",
        "messages": [
            {"role": "user", "content": "go"},
            assistant,
            {"role": "tool", "tool_call_id": "c1", "content": "errors.log"},
        ],
    }
    strict = httpx.post(f"{server.base_url}/chat/completions", json=body)
    assert strict.status_code == 400 and "content" in strict.json()["error"]["message"]
    real = httpx.post(f"{llama_cpp.base_url}/chat/completions", json=body)
    assert real.status_code == 500  # what the real server answers
    assistant["content"] = ""
    assert httpx.post(f"{server.base_url}/chat/completions", json=body).status_code == 200
    assert httpx.post(f"{llama_cpp.base_url}/chat/completions", json=body).status_code == 200


# --- 2. a tool-call id repeated in every chunk is one call ----------------------------------------


def _call_chunk(index: int | None, call_id: str | None, name: str | None, args: str) -> dict[str, Any]:
    tc: dict[str, Any] = {"type": "function", "function": {"name": name, "arguments": args}}
    if index is not None:
        tc["index"] = index
    if call_id is not None:
        tc["id"] = call_id
    return {"choices": [{"index": 0, "delta": {"role": None, "content": None, "tool_calls": [tc]}}]}


@pytest.mark.parametrize("with_index", [True, False])
def test_repeated_ids_in_every_chunk_are_the_same_call(with_index: bool) -> None:
    a = StreamAssembler("m")
    i0, i1 = (0, 1) if with_index else (None, None)
    for chunk in [
        _call_chunk(i0, "call_a", "read_file", ""),
        _call_chunk(i0, "call_a", None, '{"path": '),
        _call_chunk(i0, "call_a", None, '"errors.log"}'),
        _call_chunk(i1, "call_b", "list_files", ""),
        _call_chunk(i1, "call_b", None, "{}"),
        {"choices": [{"index": 0, "delta": {"tool_calls": None}, "finish_reason": "tool_calls"}]},
    ]:
        a.feed(chunk)
    calls = a.message().tool_calls
    assert [(c.id, c.name, json.loads(c.arguments)) for c in calls] == [
        ("call_a", "read_file", {"path": "errors.log"}),
        ("call_b", "list_files", {}),
    ]


def test_the_llama_cpp_dialect_streams_repeated_ids_without_usage(llama_cpp: ScriptedServer) -> None:
    body = {
        "model": "single_read",
        "stream": True,
        "stream_options": {"include_usage": True},
        "messages": [{"role": "user", "content": "go"}],
    }
    with httpx.stream("POST", f"{llama_cpp.base_url}/chat/completions", json=body) as response:
        chunks = [
            json.loads(line[5:])
            for line in response.iter_lines()
            if line.startswith("data:") and line != "data: [DONE]"
        ]
    deltas = [tc for c in chunks for ch in c["choices"] for tc in ch["delta"].get("tool_calls") or []]
    assert len(deltas) >= 3 and {tc["id"] for tc in deltas} == {"c1"}  # the id in every chunk
    assert not any(c.get("usage") for c in chunks)


def test_the_repeat_ids_fault_and_no_usage_through_the_loop(server: ScriptedServer, workspace: Path) -> None:
    server.set_faults(["repeat_ids", "no_usage"])
    result = go(Agent(openai(server, "single_read"), tools=FILE_TOOLS, cwd=workspace, price=PRICE, retry=FAST))
    assert result.status == "completed" and result.turns == 2
    assert result.usage.estimated
    tool_messages = [m for m in chat_bodies(server)[1]["messages"] if m["role"] == "tool"]
    assert [m["tool_call_id"] for m in tool_messages] == ["c1"]


# --- 4. a tool input that is not JSON on the Messages wire is the model's to fix --------------------


@pytest.mark.parametrize("make", [anthropic, openai])
@pytest.mark.parametrize("stream", [True, False])
def test_tool_input_that_is_not_json_becomes_a_tool_error(
    server: ScriptedServer, workspace: Path, make: Any, stream: bool
) -> None:
    server.set_faults(["bad_tool_json"])
    result = go(
        Agent(make(server, "single_read"), tools=FILE_TOOLS, cwd=workspace, price=PRICE, retry=FAST, stream=stream)
    )
    assert result.status == "completed", result.reason
    assert result.turns == 2 and result.tool_stats["read_file"]["errors"] == 1
    second = chat_bodies(server)[1]
    told = json.dumps(second["messages"])
    assert "not valid JSON" in told  # the model read what was wrong


def test_a_non_object_tool_input_reaches_the_tool_layer_as_arguments() -> None:
    from tether.providers.anthropic import parse_message

    def block(value: Any) -> dict[str, Any]:
        return {
            "content": [{"type": "tool_use", "id": "t1", "name": "read_file", "input": value}],
            "stop_reason": "tool_use",
            "usage": {"input_tokens": 5, "output_tokens": 3},
        }

    assert parse_message(block('{"path": "a.txt"'), "m").tool_calls[0].arguments == '{"path": "a.txt"'
    assert parse_message(block('{"path": "a.txt"}'), "m").tool_calls[0].arguments == '{"path": "a.txt"}'
    assert parse_message(block([1, 2]), "m").tool_calls[0].arguments == "[1, 2]"
    assert parse_message(block(None), "m").tool_calls[0].arguments == "{}"
    assert json.loads(parse_message(block({"path": "a"}), "m").tool_calls[0].arguments) == {"path": "a"}


# --- 5. base URLs: with or without /v1, with or without a trailing slash ---------------------------


@pytest.mark.parametrize("suffix", ["", "/", "/v1", "/v1/", "/v1/messages"])
def test_anthropic_base_url_with_or_without_v1(server: ScriptedServer, suffix: str) -> None:
    provider = AnthropicProvider(base_url=server.root_url + suffix, api_key="unused")
    assert provider.base_url == server.root_url
    response = asyncio.run(_complete(provider, "hello"))
    assert "scripted model" in response


@pytest.mark.parametrize("suffix", ["/v1", "/v1/", "/v1/chat/completions"])
def test_openai_base_url_forms(server: ScriptedServer, suffix: str) -> None:
    provider = OpenAIChatProvider(base_url=server.root_url + suffix, api_key="unused")
    assert provider.base_url == server.base_url
    assert "scripted model" in asyncio.run(_complete(provider, "hello"))


def test_an_openai_base_url_without_v1_is_kept_and_a_404_says_what_to_try() -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(404, json={"error": "not found"})

    provider = OpenAIChatProvider(
        base_url="http://127.0.0.1:8080", api_key="unused", transport=httpx.MockTransport(handler)
    )
    assert provider.base_url == "http://127.0.0.1:8080"  # not guessed: some servers serve the root
    with pytest.raises(BadRequestError) as caught:
        asyncio.run(_complete(provider, "hello"))
    message = str(caught.value)
    assert "http://127.0.0.1:8080/chat/completions" in message and "/v1" in message


async def _complete(provider: Any, scenario: str) -> str:
    try:
        response = await provider.complete(ModelRequest(model=scenario, messages=[UserMessage.text("hi")]))
        return str(response.message.text)
    finally:
        await provider.aclose()


# --- 6. cannot reach the host is not an auth failure; servers list their models ---------------------


@pytest.mark.parametrize("kind", ["openai", "anthropic"])
def test_validate_auth_names_a_host_that_cannot_be_reached(kind: str) -> None:
    with unused_port() as port, pytest.raises(UnreachableError) as caught:
        base = f"http://127.0.0.1:{port}"
        provider: Any = (
            OpenAIChatProvider(base_url=base + "/v1", api_key="k")
            if kind == "openai"
            else AnthropicProvider(base_url=base, api_key="k")
        )
        asyncio.run(_validate(provider))
    assert isinstance(caught.value, RetryableError) and not isinstance(caught.value, AuthError)
    assert f"127.0.0.1:{port}" in str(caught.value) and "cannot reach" in str(caught.value)
    assert caught.value.host == f"127.0.0.1:{port}"


def test_a_dns_failure_is_unreachable_not_auth() -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("[Errno -2] Name or service not known", request=request)

    provider = OpenAIChatProvider(
        base_url="https://nosuch.invalid/v1", api_key="k", transport=httpx.MockTransport(handler)
    )
    with pytest.raises(UnreachableError, match="cannot reach nosuch.invalid"):
        asyncio.run(_validate(provider))


def test_validate_auth_still_reports_a_wrong_key(server: ScriptedServer) -> None:
    server.set_faults(["401"])
    with pytest.raises(AuthError):
        asyncio.run(_validate(openai(server)))


async def _validate(provider: Any) -> None:
    try:
        await provider.validate_auth()
    finally:
        await provider.aclose()


async def _models(provider: Any) -> list[str]:
    try:
        result: list[str] = await provider.list_models()
        return result
    finally:
        await provider.aclose()


@pytest.mark.parametrize("make", [openai, anthropic])
def test_providers_list_the_servers_models(server: ScriptedServer, make: Any) -> None:
    provider = make(server)
    assert isinstance(provider, ModelLister)
    assert asyncio.run(_models(provider)) == list(SCENARIOS)
    assert asyncio.run(_models(ScriptedModel("plan"))) == list(SCENARIOS)


def test_anthropic_model_list_follows_pages(server: ScriptedServer) -> None:
    provider = anthropic(server)
    provider.models_page_size = 5  # type: ignore[attr-defined]
    assert asyncio.run(_models(provider)) == list(SCENARIOS)


def test_the_scripted_server_answers_each_api_in_its_own_shape(server: ScriptedServer) -> None:
    openai_list = httpx.get(f"{server.base_url}/models").json()
    assert openai_list["object"] == "list" and openai_list["data"][0]["object"] == "model"
    page = httpx.get(f"{server.root_url}/v1/models?limit=2", headers={"anthropic-version": "2023-06-01"}).json()
    assert [m["type"] for m in page["data"]] == ["model", "model"] and page["has_more"] is True
    rest = httpx.get(
        f"{server.root_url}/v1/models?limit=100&after_id={page['last_id']}", headers={"anthropic-version": "2023-06-01"}
    ).json()
    assert [m["id"] for m in page["data"] + rest["data"]] == list(SCENARIOS) and rest["has_more"] is False


def test_a_listing_failure_is_classified(server: ScriptedServer) -> None:
    server.set_faults(["401"])
    with pytest.raises(AuthError):
        asyncio.run(_models(anthropic(server)))
    with unused_port() as port, pytest.raises(UnreachableError):
        asyncio.run(_models(OpenAIChatProvider(base_url=f"http://127.0.0.1:{port}/v1", api_key="k")))


# --- 7. the server's own count wins whenever a response carries one -------------------------------


def test_anthropic_usage_in_message_delta_is_the_servers_count() -> None:
    from tether.providers.anthropic import MessagesAssembler

    a = MessagesAssembler("anthropic/m")
    for event in [
        {"type": "message_start", "message": {"usage": {"input_tokens": 0, "output_tokens": 0}}},
        {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
        {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "hi"}},
        {
            "type": "message_delta",
            "delta": {"stop_reason": "end_turn"},
            "usage": {"input_tokens": 120, "cache_read_input_tokens": 30, "output_tokens": 7},
        },
        {"type": "message_stop"},
    ]:
        a.feed(event)
    usage = a.message().usage
    assert usage is not None and (usage.prompt_tokens, usage.cached_tokens, usage.completion_tokens) == (150, 30, 7)


@pytest.mark.parametrize("stream", [True, False])
def test_server_usage_is_used_and_never_marked_estimated(llama_cpp: ScriptedServer, stream: bool) -> None:
    """The llama.cpp dialect sends usage in non-stream bodies only: the stream is estimated, the
    body's own count is used as it is."""
    req = ModelRequest(
        model="hello",
        messages=[UserMessage.text("hi")],
        tools=[ToolDefinition("read_file", "Read a file.", {"type": "object"})],
    )
    provider = openai(llama_cpp)

    async def once() -> Any:
        try:
            if not stream:
                return (await provider.complete(req)).message.usage
            async for event in provider.stream(req):
                if isinstance(event, ResponseDone):
                    return event.response.message.usage
        finally:
            await provider.aclose()

    usage = asyncio.run(once())
    assert usage.estimated is stream and usage.prompt_tokens > 0


def test_a_tool_message_round_trips_through_the_strict_server(server: ScriptedServer) -> None:
    """Every assistant message tether writes passes the strict check, with or without text."""
    from tether.testing.validate import check_openai

    calls = (ToolCallPart(id="c1", name="list_files", arguments="{}"),)
    for assistant in (AssistantMessage(content=calls), AssistantMessage(content=(TextPart(text="ok"), *calls))):
        body = {
            "model": "plan",
            "messages": [
                {"role": "user", "content": "go"},
                message_to_wire(assistant),
                message_to_wire(ToolMessage(call_id="c1", name="list_files", content=(TextPart(text="errors.log"),))),
            ],
        }
        assert check_openai(body) is None
