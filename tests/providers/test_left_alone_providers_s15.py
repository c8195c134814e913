"""Providers, fallback and the budget's request fields, session 15: what the last review left
alone, each attacked from outside through real HTTP on loopback (the byte-for-byte server of the
second round) or a model of one's own.

A model a server does not have, answered with 400 (OpenRouter, LiteLLM, Mistral, DeepSeek); a tool
call with no name, on every path; a stream that sends only keep-alives; a thinking budget the
budget's ``max_tokens`` cut below; the reply limit OpenAI's reasoning models read.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.providers.test_attack_wire_round2 import (
    KEY,
    PRICE,
    WIRES,
    Reply,
    WireServer,
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
from tests.providers.test_attack_wire_round4 import done
from tether import Agent, run_sync, tool
from tether.harness.retry import RetryPolicy
from tether.providers.anthropic import AnthropicProvider
from tether.providers.openai_chat import OpenAIChatProvider
from tether.testing import FunctionModel
from tether.testing import Reply as Reply_
from tether.testing.validate import check_anthropic, check_openai

Serve = Callable[[list[Reply]], WireServer]
JSON = {"content-type": "application/json"}
PRICES = {"backup/backup": PRICE}


# --- a model the server does not have, answered with 400 -----------------------------------------

# The bodies these servers answer an unknown model with (HTTP 400, where OpenAI answers 404).
UNKNOWN_MODEL = {
    "OpenRouter": {"error": {"message": "openai/gpt-9 is not a valid model ID", "code": 400}, "user_id": "user_1"},
    "LiteLLM": {
        "error": {
            "message": "/chat/completions: Invalid model name passed in model=gpt-9. Call `/v1/models` to view "
            "available models for your key.",
            "type": "invalid_request_error",
            "param": "model",
            "code": "400",
        }
    },
    "Gemini (OpenAI-compatible)": {
        "error": {
            "code": 400,
            "message": "models/gemini-9 is not found for API version v1main, or is not supported for generateContent.",
            "status": "NOT_FOUND",
        }
    },
    "Mistral": {"object": "error", "message": "Invalid model: mistral-huge-9", "type": "invalid_model", "code": "1500"},
    "DeepSeek": {
        "error": {
            "message": "Model Not Exist",
            "type": "invalid_request_error",
            "param": None,
            "code": "invalid_request_error",
        }
    },
}
# Requests refused for their shape: every server would refuse them, so no fallback is asked.
MALFORMED = {
    "bad content": {
        "error": {
            "message": "Invalid type for 'messages[0].content': expected a string",
            "type": "invalid_request_error",
            "param": "messages",
        }
    },
    "a limit this model reads under another name": {
        "error": {
            "message": "Unsupported parameter: 'max_tokens' is not supported with this model. Use "
            "'max_completion_tokens' instead.",
            "type": "invalid_request_error",
            "param": "max_tokens",
            "code": "unsupported_parameter",
        }
    },
    "a parameter this model lacks": {
        "error": {
            "message": "Unsupported parameter: 'temperature' is not supported with this model.",
            "type": "invalid_request_error",
            "code": "unsupported_parameter",
        }
    },
}


@pytest.mark.parametrize("where", ["status", "stream"])
@pytest.mark.parametrize("server", sorted(UNKNOWN_MODEL))
def test_a_model_the_server_does_not_have_falls_back_when_it_answers_400(
    serve: Serve, tmp_path: Path, server: str, where: str
) -> None:
    """Before: only a 404 moved the turn to the next model; these servers' 400 for a model they do
    not have failed the run at once, with a fallback configured that would have answered."""
    body: dict[str, Any] = UNKNOWN_MODEL[server]
    if where == "status":
        reply = Reply(400, [json.dumps(body).encode()], JSON)
    else:  # the same error as a chunk after the 200 (what a gateway learns once it has begun)
        reply = Reply(200, [chunk({"role": "assistant"}), sse(body if "error" in body else {"error": body})])
    primary, backup = serve([reply]), serve([text_reply("openai", "from the backup")])
    out = run_against(
        "openai", primary, tmp_path, fallback_models=[provider("openai", backup, name="backup")], prices=PRICES
    )
    assert (out.result.status, out.result.text) == ("completed", "from the backup"), out.result.reason
    assert len(primary.requests) == 1 and len(backup.requests) == 1  # not retried: asked of the next model
    trace = "".join(text for path, text in out.files.items() if "traces" in path)
    (fallback,) = [json.loads(line) for line in trace.splitlines() if '"fallback"' in line]
    assert (fallback["from_model"], fallback["to_model"]) == ("openai/openai", "backup/backup")
    assert_sound(out)


@pytest.mark.parametrize("body", sorted(MALFORMED))
def test_a_malformed_request_answered_400_does_not_fall_back(serve: Serve, tmp_path: Path, body: str) -> None:
    """The other side of the line: a request refused for its shape fails at once, in the server's
    words, and the fallback is not asked (it would refuse it too, and be paid for nothing)."""
    primary = serve([Reply(400, [json.dumps(MALFORMED[body]).encode()], JSON)])
    backup = serve([text_reply("openai", "from the backup")])
    out = run_against("openai", primary, tmp_path, fallback_models=[provider("openai", backup, name="backup")])
    assert out.result.status == "failed" and "HTTP 400" in (out.result.reason or "")
    assert backup.requests == []
    assert_sound(out)


# --- the reply limit OpenAI's reasoning models read -----------------------------------------------


def _openai_at(base_url: str, model: str, sent: list[dict[str, Any]]) -> OpenAIChatProvider:
    """An OpenAI provider at ``base_url`` that answers in process (no network), keeping each body."""

    def answer(request: httpx.Request) -> httpx.Response:
        sent.append(json.loads(request.content))
        message = {"role": "assistant", "content": "ok"}
        usage = {"prompt_tokens": 40, "completion_tokens": 2}
        return httpx.Response(200, json={"choices": [{"message": message, "finish_reason": "stop"}], "usage": usage})

    made = OpenAIChatProvider(base_url, KEY, transport=httpx.MockTransport(answer))
    made.model_id = model  # type: ignore[attr-defined]
    return made


@pytest.mark.parametrize(
    ("base_url", "model", "field"),
    [
        ("https://api.openai.com/v1", "o3-mini", "max_completion_tokens"),
        ("https://api.openai.com/v1", "gpt-5-mini", "max_completion_tokens"),
        ("https://api.openai.com/v1", "gpt-4.1-mini", "max_completion_tokens"),  # deprecated there for all
        ("https://gateway.example/v1", "openai/o4-mini", "max_completion_tokens"),  # a router's name for one
        ("http://127.0.0.1:11434/v1", "qwen2.5", "max_tokens"),  # a local server reads max_tokens
    ],
)
def test_the_budgets_reply_limit_goes_under_the_field_the_model_reads(base_url: str, model: str, field: str) -> None:
    """Before: ``max_tokens`` was sent unless request_extra named the other field, so a run on o3
    or gpt-5 failed at its first call ("Unsupported parameter: 'max_tokens' is not supported with
    this model. Use 'max_completion_tokens' instead."). The limit the budget planned is sent under
    the one name the model reads, and only under it."""
    sent: list[dict[str, Any]] = []
    agent = Agent(_openai_at(base_url, model, sent), price=PRICE, max_budget_usd=0.01, max_tokens=4000, stream=False)
    result = run_sync(agent, "hi")
    assert result.status == "completed", result.reason
    other = "max_tokens" if field == "max_completion_tokens" else "max_completion_tokens"
    assert other not in sent[0] and 0 < sent[0][field] <= 4000


def test_request_extra_naming_max_tokens_is_sent_under_that_name_alone() -> None:
    """The way out for a server that reads only one of them: the name request_extra gives wins."""
    sent: list[dict[str, Any]] = []
    model = _openai_at("https://api.openai.com/v1", "o3", sent)
    run_sync(Agent(model, price=PRICE, request_extra={"max_tokens": 300}, stream=False), "hi")
    assert sent[0]["max_tokens"] == 300 and "max_completion_tokens" not in sent[0]


# --- a thinking budget the budget's max_tokens cut below -----------------------------------------

THINKING = {"thinking": {"type": "enabled", "budget_tokens": 2048}}


def _anthropic_checking(sent: list[dict[str, Any]]) -> AnthropicProvider:
    """A Messages endpoint in process that checks extended thinking as the API does: a
    ``budget_tokens`` under 1024, or at or above ``max_tokens``, is refused with its 400."""

    def answer(request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content)
        sent.append(body)
        budget = (body.get("thinking") or {}).get("budget_tokens")
        if budget is not None and not 1024 <= budget < body["max_tokens"]:
            message = "`max_tokens` must be greater than `thinking.budget_tokens`"
            return httpx.Response(
                400, json={"type": "error", "error": {"type": "invalid_request_error", "message": message}}
            )
        usage = {"input_tokens": 60, "output_tokens": 5}
        content = [{"type": "text", "text": "ok"}]
        return httpx.Response(200, json={"content": content, "stop_reason": "end_turn", "usage": usage})

    return AnthropicProvider("https://api.anthropic.com", KEY, transport=httpx.MockTransport(answer))


@pytest.mark.parametrize("budget_usd", [0.016, 0.009], ids=["room to think less", "no room to think"])
def test_a_thinking_budget_the_budget_cut_max_tokens_below_is_made_valid(budget_usd: float) -> None:
    """Before: the budget lowered the call's ``max_tokens`` below the thinking budget of
    ``request_extra`` (2048), the API refused the call ("max_tokens must be greater than
    thinking.budget_tokens") and the run ended ``failed`` where it could answer. The thinking budget
    is lowered under ``max_tokens`` (never below 1024, the API's least), or thinking is left out of
    the call when there is no room for that."""
    sent: list[dict[str, Any]] = []
    agent = Agent(
        _anthropic_checking(sent), price=PRICE, max_budget_usd=budget_usd, request_extra=THINKING, stream=False
    )
    result = run_sync(agent, "hi")
    assert (result.status, result.text) == ("completed", "ok"), result.reason
    (body,) = sent
    assert body["max_tokens"] < 2048  # the budget cut it below the thinking budget
    if body["max_tokens"] > 1024:
        assert 1024 <= body["thinking"]["budget_tokens"] < body["max_tokens"]
    else:
        assert "thinking" not in body
    assert result.cost_usd is not None and result.cost_usd <= budget_usd


# --- a stream that sends only keep-alives ----------------------------------------------------------

KEEP_ALIVE = {"openai": b": OPENROUTER PROCESSING\n\n", "anthropic": event("ping", {"type": "ping"})}
IDLE_S = 1.5  # the pinging provider's timeout_s


def _pinging(kind: str, server: WireServer) -> Any:
    return provider(kind, server, name="pinging", timeout_s=IDLE_S)


@pytest.mark.parametrize("kind", WIRES)
def test_a_stream_of_keep_alives_alone_is_abandoned_after_the_providers_timeout(
    serve: Serve, tmp_path: Path, kind: str
) -> None:
    """Before: with ``first_token_timeout_s`` None (the default), a server that sent only
    keep-alives (a gateway whose upstream hung) was read for ever: each one restarted the read
    timeout. A stream with nothing else for the provider's ``timeout_s`` is now a cut one: nothing
    of it was shown, so the turn goes to the fallback (or is retried)."""
    start = [] if kind == "openai" else [anthropic_text("")[0]]  # Anthropic's pings follow message_start
    primary = serve([Reply(200, [*start, *[KEEP_ALIVE[kind], 0.05] * 300])])  # 15 s at most
    backup = serve([text_reply(kind, "from the backup")])
    out = run_against(
        kind,
        primary,
        tmp_path,
        model=_pinging(kind, primary),
        fallback_models=[provider(kind, backup, name="backup")],
        prices={"backup/backup": PRICE},
        retry=RetryPolicy(max_attempts=1),
    )
    assert (out.result.status, out.result.text) == ("completed", "from the backup"), out.result.reason
    trace = "".join(text for path, text in out.files.items() if "traces" in path)
    (fallback,) = [json.loads(line) for line in trace.splitlines() if '"fallback"' in line]
    assert "nothing but keep-alives for 1.5 s" in fallback["reason"]
    assert_sound(out)


def test_a_slow_stream_with_keep_alives_between_its_pieces_is_read_to_its_end(serve: Serve, tmp_path: Path) -> None:
    """The bound is on keep-alives alone: a reply whose pieces come slowly, pings between them,
    for longer in all than the timeout, is read whole."""
    first, *rest = anthropic_text("")
    piece = event(
        "content_block_delta", {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "a"}}
    )
    slow = [part for _ in range(8) for part in (KEEP_ALIVE["anthropic"], 0.25, piece)]
    primary = serve([Reply(200, [first, rest[0], *slow, *rest[2:]])])
    out = run_against("anthropic", primary, tmp_path, model=_pinging("anthropic", primary))
    assert (out.result.status, out.result.text) == ("completed", "a" * 8), out.result.reason
    assert len(primary.requests) == 1


# --- a tool call with no name ---------------------------------------------------------------------

NAMELESS = "this call named no tool (its name was empty), so nothing was run. Tools by name: look."
LEFT_OUT = object()  # the name field is not there at all


@tool(read_only=True)
def look(x: int) -> str:
    """Look at x."""
    return f"x={x}"


def _nameless_call(kind: str, stream: bool, name: Any) -> Reply:
    """A reply with one call whose name is ``name`` (or no name field, LEFT_OUT)."""
    named = {} if name is LEFT_OUT else {"name": name}
    usage = (
        {"prompt_tokens": 50, "completion_tokens": 9} if kind == "openai" else {"input_tokens": 50, "output_tokens": 9}
    )
    if kind == "openai":
        call = {"id": "c1", "type": "function", "function": {**named, "arguments": '{"x": 1}'}}
        if not stream:
            message = {"role": "assistant", "content": None, "tool_calls": [call]}
            body = {"choices": [{"message": message, "finish_reason": "tool_calls"}], "usage": usage}
            return Reply(200, [json.dumps(body).encode()], JSON)
        parts: list[bytes | float | str] = [chunk({"role": "assistant", "content": ""})]
        parts += [chunk({"tool_calls": [{"index": 0, **call}]}), chunk({}, "tool_calls"), usage_chunk(usage)]
        return Reply(200, parts)
    block = {"type": "tool_use", "id": "c1", **named, "input": {"x": 1}}
    if not stream:
        body = {"content": [block], "stop_reason": "tool_use", "usage": usage}
        return Reply(200, [json.dumps(body).encode()], JSON)
    delta = {"type": "input_json_delta", "partial_json": '{"x": 1}'}
    return Reply(
        200,
        [
            anthropic_text("")[0],
            event(
                "content_block_start",
                {"type": "content_block_start", "index": 0, "content_block": {**block, "input": {}}},
            ),
            event("content_block_delta", {"type": "content_block_delta", "index": 0, "delta": delta}),
            event("message_delta", {"type": "message_delta", "delta": {"stop_reason": "tool_use"}, "usage": usage}),
            event("message_stop", {"type": "message_stop"}),
        ],
    )


@pytest.mark.parametrize("name", [LEFT_OUT, "", "  "], ids=["left out", "empty", "spaces"])
@pytest.mark.parametrize("stream", [True, False], ids=["stream", "complete"])
@pytest.mark.parametrize("kind", WIRES)
def test_a_call_with_no_name_is_answered_in_words_on_every_wire(
    serve: Serve, tmp_path: Path, kind: str, stream: bool, name: Any
) -> None:
    """Before, one hostile reply, five outcomes: the run failed (a streamed Chat Completions call
    with no name; any call whose name field was left out, as a KeyError), or the model read "there
    is no tool named ''" and the next request carried the empty name, which both APIs refuse
    ("Expected a string with minimum length 1"; "tool_use.name: String should have at least 1
    character"). Now the model is told the call had no name and which tools there are, and the
    call goes back under a name the APIs take."""
    server = serve([_nameless_call(kind, stream, name), done(kind, stream, "answered")])
    out = run_against(kind, server, tmp_path, tools=[look], stream=stream)
    assert (out.result.status, out.result.text) == ("completed", "answered"), out.result.reason
    results = [m for m in out.store.load(out.result.run_id).messages if m.role == "tool"]
    assert [(m.text, m.is_error) for m in results] == [(f"Error: {NAMELESS}", True)]  # type: ignore[union-attr]
    history = json.loads(server.requests[1][1])["messages"]
    if kind == "openai":
        sent = [c["function"]["name"] for m in history for c in m.get("tool_calls") or ()]
    else:
        sent = [b["name"] for m in history for b in m["content"] if b["type"] == "tool_use"]
    assert sent == ["no_tool_name"] and all(re.fullmatch(r"[a-zA-Z0-9_-]{1,64}", n) for n in sent)
    assert_sound(out)


def test_a_call_with_no_name_in_a_parallel_batch_is_answered_as_one_alone() -> None:
    """A model of one's own (no wire between): a nameless call beside a read-only one runs in
    their batch and is told the same words as alone; the other call runs."""
    seen: list[Any] = []

    def reply(messages: list[Any], request: Any) -> Any:
        seen[:] = messages
        if len(messages) == 1:
            return Reply_(calls=[("a", "look", {"x": 1}), ("b", " ", {"x": 2})])
        if len(messages) == 4:
            return Reply_(calls=[("c", "", {})])
        return "done"

    result = run_sync(Agent(FunctionModel(reply), tools=[look]), "go")
    assert (result.status, result.text) == ("completed", "done"), result.reason
    texts = [m.text for m in seen if m.role == "tool"]
    assert texts == ["x=1", f"Error: {NAMELESS}", f"Error: {NAMELESS}"]


@pytest.mark.parametrize(
    ("name", "sent"),
    [("multi_tool_use.parallel", "multi_tool_use_parallel"), ("git diff", "git_diff"), ("x" * 80, "x" * 64)],
    ids=["dotted", "spaced", "too long"],
)
@pytest.mark.parametrize("kind", WIRES)
def test_a_made_up_tool_name_goes_back_under_a_name_the_apis_take(
    serve: Serve, tmp_path: Path, kind: str, name: str, sent: str
) -> None:
    """A name the model made up that the APIs refuse (GPT's ``multi_tool_use.parallel``; OpenAI
    checks the history's names against ``^[a-zA-Z0-9_-]+$``): the model was told there is no such
    tool, and then the next request carried the name as written, was refused, and the run failed.
    The model reads its own name in the answer; the server gets one it takes."""
    server = serve([_nameless_call(kind, True, name), done(kind, True, "answered")])
    out = run_against(kind, server, tmp_path, tools=[look])
    assert (out.result.status, out.result.text) == ("completed", "answered"), out.result.reason
    (result,) = [m for m in out.store.load(out.result.run_id).messages if m.role == "tool"]
    assert f"there is no tool named {name[:40]}" in result.text.replace("'", "")  # type: ignore[union-attr]
    history = json.loads(server.requests[1][1])["messages"]
    if kind == "openai":
        names = [c["function"]["name"] for m in history for c in m.get("tool_calls") or ()]
    else:
        names = [b["name"] for m in history for b in m["content"] if b["type"] == "tool_use"]
    assert names == [sent]


# --- the scripted server refuses what the APIs refuse here -----------------------------------------


def test_the_scripted_server_refuses_the_requests_these_apis_refuse() -> None:
    """tether.testing's server answers 400 to what a real API refuses, so that a test against it
    sends valid requests: before, it took all three of these, which the APIs refuse."""
    call = {"id": "c1", "type": "function", "function": {"name": "", "arguments": "{}"}}
    history = [
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": "", "tool_calls": [call]},
        {"role": "tool", "tool_call_id": "c1", "content": "Error: this call named no tool"},
    ]
    assert "tool_calls[0].function.name" in (check_openai({"messages": history}) or "")
    dotted = {**call, "function": {"name": "multi_tool_use.parallel", "arguments": "{}"}}
    assert "does not match pattern" in (
        check_openai({"messages": [*history[:1], {**history[1], "tool_calls": [dotted]}, history[2]]}) or ""
    )
    blocks = [
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": [{"type": "tool_use", "id": "c1", "name": "", "input": {}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "c1", "content": "no name"}]},
    ]
    assert "tool_use.name" in (check_anthropic({"max_tokens": 100, "messages": blocks}) or "")
    thinking = {"type": "enabled", "budget_tokens": 2048}
    refused = check_anthropic({"max_tokens": 1500, "thinking": thinking, "messages": blocks[:1]})
    assert refused == "`max_tokens` must be greater than `thinking.budget_tokens`"
    assert check_anthropic({"max_tokens": 4096, "thinking": thinking, "messages": blocks[:1]}) is None
