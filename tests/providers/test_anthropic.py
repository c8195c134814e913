"""The Anthropic Messages wire against the scripted server's Messages endpoint, and a conversation
that moves between providers (issue 3, must show 2)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tether import Agent, RunState, run_sync
from tether.errors import ResponseError, RetryableError
from tether.messages import AssistantMessage, ImagePart, ReasoningPart, TextPart, ToolCallPart, ToolMessage, UserMessage
from tether.providers.anthropic import AnthropicProvider, MessagesAssembler, wire_messages
from tether.providers.base import ModelRequest
from tether.providers.openai_chat import OpenAIChatProvider
from tether.testing import ScriptedServer
from tether.testing.validate import check_anthropic, check_openai
from tether.tools.files import FILE_TOOLS
from tether.usage import Price

THINKING = {"thinking": {"type": "enabled", "budget_tokens": 1024}}
PRICE = Price(input=3.0, output=15.0, cached_input=0.3)


@pytest.fixture
def server() -> Iterator[ScriptedServer]:
    with ScriptedServer() as s:
        yield s


def provider(server: ScriptedServer, scenario: str, kind: str = "anthropic") -> Any:
    p = (
        AnthropicProvider(base_url=server.root_url)
        if kind == "anthropic"
        else OpenAIChatProvider(base_url=server.base_url)
    )
    p.model_id = scenario
    return p


@pytest.mark.parametrize("stream", [True, False])
def test_plan_with_thinking_and_tool_use(server: ScriptedServer, workspace: Path, stream: bool) -> None:
    state = RunState()
    agent = Agent(
        provider(server, "plan"),
        tools=FILE_TOOLS,
        cwd=workspace,
        stream=stream,
        price=PRICE,
        request_extra=THINKING,
        instructions="Be brief.",
    )
    r = run_sync(agent, "Which file mentions a timeout?", state=state)
    assert r.status == "completed", r.reason
    assert "worker 7 timed out" in r.output
    thinking = [
        p for m in state.messages if isinstance(m, AssistantMessage) for p in m.content if isinstance(p, ReasoningPart)
    ]
    assert len(thinking) == 3 and all(p.signature for p in thinking)
    calls = [c for m in state.messages if isinstance(m, AssistantMessage) for c in m.tool_calls]
    assert json.loads(calls[1].arguments) == {"path": "errors.log"}  # assembled from partial JSON
    # Every later request sent the thinking blocks back, signed, and the server accepted them.
    bodies = [b for path, b, _ in server.received if path == "/v1/messages"]
    assert len(bodies) == 3
    sent_back = [blk for m in bodies[2]["messages"] for blk in m["content"] if blk["type"] == "thinking"]
    assert len(sent_back) == 2


def test_cache_breakpoints_and_cached_usage_priced_at_cache_rate(server: ScriptedServer, workspace: Path) -> None:
    state = RunState()
    r = run_sync(
        Agent(provider(server, "plan"), tools=FILE_TOOLS, cwd=workspace, price=PRICE, instructions="Be brief."),
        "q",
        state=state,
    )
    body = [b for path, b, _ in server.received if path == "/v1/messages"][-1]
    assert body["system"][-1]["cache_control"] == {"type": "ephemeral"}
    assert body["tools"][-1]["cache_control"] == {"type": "ephemeral"}
    assert body["messages"][-1]["content"][-1]["cache_control"] == {"type": "ephemeral"}
    assert r.usage.cached_tokens > 0
    expected = sum(PRICE.cost(m.usage) for m in state.messages if isinstance(m, AssistantMessage) and m.usage)
    uncached = sum(
        m.usage.prompt_tokens * 3.0 / 1e6 + m.usage.completion_tokens * 15.0 / 1e6
        for m in state.messages
        if isinstance(m, AssistantMessage) and m.usage
    )
    assert r.cost_usd == pytest.approx(expected) and r.cost_usd < uncached


def test_error_event_mid_stream_is_classified_and_retried(server: ScriptedServer) -> None:
    server.set_faults(["error_event"])
    r = run_sync(Agent(provider(server, "hello")), "hi")
    assert r.status == "completed"
    a = MessagesAssembler("m")
    with pytest.raises(RetryableError, match="overloaded"):
        a.feed({"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}})
    with pytest.raises(ResponseError):
        a.feed(["nope"])


def test_stream_without_message_stop_is_retryable() -> None:
    a = MessagesAssembler("m")
    a.feed({"type": "message_start", "message": {"usage": {"input_tokens": 3}}})
    with pytest.raises(RetryableError, match="message_stop"):
        a.message()


def test_cross_provider_conversation_sends_valid_requests(server: ScriptedServer, workspace: Path) -> None:
    """OpenAI, then Anthropic (thinking), then OpenAI, then Anthropic again, on one transcript."""
    state = RunState()
    plan = {"openai/plan": PRICE, "anthropic/plan": PRICE}

    def turn(kind: str, max_turns: int, prompt: str | None = None, scenario: str = "plan") -> Any:
        extra = THINKING if kind == "anthropic" else {}
        agent = Agent(
            provider(server, scenario, kind),
            tools=FILE_TOOLS,
            cwd=workspace,
            max_turns=max_turns,
            request_extra=extra,
            prices=plan,
        )
        return run_sync(agent, prompt, state=state)

    assert turn("openai", 1, "Which file mentions a timeout?").status == "max_turns_exceeded"
    assert turn("anthropic", 2).status == "max_turns_exceeded"
    r = turn("openai", 3)
    assert r.status == "completed" and "worker 7" in r.output
    r = turn("anthropic", 9, "Thanks. Anything else?", scenario="hello")
    assert r.status == "completed"
    assert [m.model for m in state.messages if isinstance(m, AssistantMessage)] == [
        "openai/plan",
        "anthropic/plan",
        "openai/plan",
        "anthropic/hello",
    ]
    for path, body, _ in server.received:
        assert (check_anthropic(body) if path == "/v1/messages" else check_openai(body)) is None
    # The OpenAI request after the Anthropic turn carried no reasoning; the last Anthropic request
    # dropped the other model's thinking (its signature would not verify for anthropic/hello).
    openai_last = [b for p, b, _ in server.received if p.endswith("/chat/completions")][-1]
    assert all("reasoning" not in json.dumps(m) for m in openai_last["messages"])
    anthropic_last = [b for p, b, _ in server.received if p == "/v1/messages"][-1]
    assert not [blk for m in anthropic_last["messages"] for blk in m["content"] if blk["type"] == "thinking"]


def test_wire_merges_tool_results_keeps_images_and_sanitises_ids() -> None:
    messages = [
        UserMessage.text("look"),
        AssistantMessage(
            content=(ToolCallPart(id="call.1/x", name="shot"), ToolCallPart(id="c2", name="ls")), model="anthropic/m"
        ),
        ToolMessage(call_id="call.1/x", name="shot", content=(TextPart(text="png"), ImagePart(data="AAAA"))),
        ToolMessage(call_id="c2", name="ls", content=(TextPart(text="a"),), status="error"),
        UserMessage.text("and now?"),
    ]
    wire = wire_messages(messages, "anthropic/m")
    assert [m["role"] for m in wire] == ["user", "assistant", "user"]
    first, second, text = wire[2]["content"]
    assert first["type"] == "tool_result" and first["content"][1]["type"] == "image"
    assert first["tool_use_id"] == wire[1]["content"][0]["id"] != "call.1/x"
    assert second["is_error"] is True and text == {"type": "text", "text": "and now?"}
    body = {"model": "m", "max_tokens": 10, "messages": wire}
    assert check_anthropic(body) is None


def test_validator_rejects_what_the_api_rejects() -> None:
    ok = [{"role": "user", "content": [{"type": "text", "text": "hi"}]}]
    assert check_anthropic({"model": "m", "messages": ok}) is not None  # no max_tokens
    assert check_anthropic({"model": "m", "max_tokens": 5, "messages": ok * 2}) is not None  # not alternating
    bad_sig = [*ok, {"role": "assistant", "content": [{"type": "thinking", "thinking": "x", "signature": "forged"}]}]
    assert "signature" in (check_anthropic({"model": "m", "max_tokens": 5, "messages": bad_sig}) or "")
    orphan = [
        {"role": "user", "content": "x"},
        {"role": "assistant", "content": [{"type": "text", "text": "a"}]},
        {"role": "tool", "tool_call_id": "c9", "content": "r"},
    ]
    assert check_openai({"messages": orphan}) is not None


def test_complete_against_the_messages_endpoint(server: ScriptedServer) -> None:
    p = AnthropicProvider(base_url=server.root_url)

    async def go() -> Any:
        try:
            return await p.complete(ModelRequest(model="hello", messages=[UserMessage.text("hi")], max_tokens=50))
        finally:
            await p.aclose()

    response = asyncio.run(go())
    assert response.message.text.startswith("Hello!") and response.message.finish_reason == "stop"
    assert response.message.usage is not None and response.message.usage.prompt_tokens > 0


@pytest.mark.parametrize("kind", ["anthropic", "openai"])
def test_arguments_nested_100000_deep_are_the_same_tool_error_on_both_wires(
    server: ScriptedServer, kind: str, tmp_path: Path
) -> None:
    """A call whose arguments nest 100,000 levels is answered with "nested too deeply" (a tool
    error the model reads); the conversation then goes on over either wire, never ending in
    "unexpected error: RecursionError" when the next request is built."""
    from tether.testing import FunctionModel

    deep = '{"pattern": ' + "[" * 100_000 + "]" * 100_000 + "}"

    def hostile(messages: list[Any], request: Any) -> Any:
        if not any(isinstance(m, ToolMessage) for m in messages):
            return AssistantMessage(content=(ToolCallPart(id="c1", name="list_files", arguments=deep),))
        return "gave up"

    state = RunState()
    first = run_sync(Agent(FunctionModel(hostile), tools=FILE_TOOLS, cwd=tmp_path), "go", state=state)
    (result,) = [m for m in state.messages if isinstance(m, ToolMessage)]
    assert first.status == "completed" and "nested too deeply" in result.text
    again = run_sync(Agent(provider(server, "hello", kind), tools=FILE_TOOLS, cwd=tmp_path), "and now?", state=state)
    assert again.status == "completed", again.reason
