"""How each wire asks for a structured answer (src/tether/providers/openai_chat.py,
src/tether/providers/anthropic.py) and how the scripted server checks it
(src/tether/testing/validate.py)."""

from __future__ import annotations

from typing import Any

import httpx
import pytest
from pydantic import BaseModel

from tether.messages import AssistantMessage, ReasoningPart, TextPart, ToolCallPart, UserMessage
from tether.providers.anthropic import MessagesAssembler, answer_as_text, messages_body, parse_message
from tether.providers.base import ModelRequest, OutputSchema, ToolDefinition, estimate_usage
from tether.providers.openai_chat import response_format, strict_schema
from tether.testing import ScriptedServer
from tether.testing.validate import check_anthropic, check_openai


class Item(BaseModel):
    name: str
    qty: int


class Order(BaseModel):
    id: str
    items: list[Item]
    note: str | None  # nullable, still required: strict mode takes it


class Loose(BaseModel):
    id: str
    note: str = ""  # optional: strict mode would make it required


REPORT = OutputSchema("Report", {"type": "object", "properties": {"x": {"type": "integer"}}, "required": ["x"]})
READ = ToolDefinition("read_file", "Read a file.", {"type": "object", "properties": {"path": {"type": "string"}}})


def request(
    output: OutputSchema | None = REPORT, tools: tuple[ToolDefinition, ...] = (), extra: dict[str, Any] | None = None
) -> ModelRequest:
    return ModelRequest(
        model="m",
        messages=[UserMessage.text("q")],
        system="Be brief.",
        tools=tools,
        output_schema=output,
        extra=extra or {},
    )


# --- Chat Completions: response_format -------------------------------------------------------


def test_strict_schema_adds_additional_properties_everywhere() -> None:
    strict = strict_schema(Order.model_json_schema())
    assert strict is not None
    assert strict["additionalProperties"] is False
    assert strict["$defs"]["Item"]["additionalProperties"] is False
    assert (
        check_openai(
            {
                "messages": [{"role": "user", "content": "q"}],
                "response_format": {
                    "type": "json_schema",
                    "json_schema": {"name": "Order", "schema": strict, "strict": True},
                },
            }
        )
        is None
    )


@pytest.mark.parametrize(
    "schema",
    [
        Loose.model_json_schema(),  # an optional property
        {"type": "object", "properties": {"a": {"type": "string"}}, "required": ["a"], "additionalProperties": True},
        {
            "type": "object",
            "properties": {"a": {"type": "string", "minLength": 2}},
            "required": ["a"],
        },  # a keyword outside the subset
        {"type": "array", "items": {"type": "string"}},  # not an object at the root
    ],
)
def test_schemas_strict_mode_cannot_take_go_as_guidance(schema: dict[str, Any]) -> None:
    assert strict_schema(schema) is None
    fmt = response_format(OutputSchema("X", schema))
    assert fmt["json_schema"]["strict"] is False and fmt["json_schema"]["schema"] == schema


def test_openai_validator_refuses_what_openai_refuses() -> None:
    base: dict[str, Any] = {"messages": [{"role": "user", "content": "q"}]}
    loose = {"type": "object", "properties": {"a": {"type": "string"}}, "required": ["a"]}
    problem = check_openai(
        {
            **base,
            "response_format": {"type": "json_schema", "json_schema": {"name": "X", "schema": loose, "strict": True}},
        }
    )
    assert problem is not None and "additionalProperties" in problem
    problem = check_openai(
        {
            **base,
            "response_format": {
                "type": "json_schema",
                "json_schema": {
                    "name": "X",
                    "schema": {**loose, "required": [], "additionalProperties": False},
                    "strict": True,
                },
            },
        }
    )
    assert problem is not None and "Missing 'a'" in problem
    problem = check_openai(
        {**base, "response_format": {"type": "json_schema", "json_schema": {"name": "bad name", "schema": loose}}}
    )
    assert problem is not None and "name" in problem
    assert check_openai({**base, "response_format": {"type": "json"}}) is not None


def test_scripted_server_answers_an_invalid_response_format_with_400() -> None:
    with ScriptedServer() as server:
        body = {
            "model": "hello",
            "messages": [{"role": "user", "content": "q"}],
            "response_format": {
                "type": "json_schema",
                "json_schema": {
                    "name": "X",
                    "strict": True,
                    "schema": {"type": "object", "properties": {"a": {"type": "string"}}},
                },
            },
        }
        r = httpx.post(f"{server.base_url}/chat/completions", json=body)
        assert r.status_code == 400 and "additionalProperties" in r.text


def test_the_schema_counts_in_estimated_usage() -> None:
    reply = AssistantMessage(content=(TextPart(text="{}"),))
    with_schema = estimate_usage(request(), reply, len).prompt_tokens
    assert with_schema > estimate_usage(request(None), reply, len).prompt_tokens


# --- Messages: the final_answer tool ---------------------------------------------------------


def test_only_the_answer_tool_is_forced_by_name() -> None:
    body = messages_body(request(), "anthropic/m", stream=False)
    assert body["tools"][-1]["name"] == "final_answer" and body["tools"][-1]["input_schema"] == REPORT.schema
    assert body["tool_choice"] == {"type": "tool", "name": "final_answer"}
    assert check_anthropic(body) is None


def test_with_other_tools_any_tool_is_forced() -> None:
    body = messages_body(request(tools=(READ,)), "anthropic/m", stream=False)
    assert [t["name"] for t in body["tools"]] == ["read_file", "final_answer"]
    assert "cache_control" in body["tools"][-1] and "cache_control" not in body["tools"][0]
    assert body["tool_choice"] == {"type": "any"}
    assert check_anthropic(body) is None


def test_with_thinking_the_choice_stays_auto_and_the_prompt_says_why() -> None:
    thinking = {"thinking": {"type": "enabled", "budget_tokens": 1024}}
    body = messages_body(request(extra=thinking), "anthropic/m", stream=False)
    assert "tool_choice" not in body
    assert body["system"][0]["text"].startswith("Be brief.") and "final_answer tool" in body["system"][0]["text"]
    assert check_anthropic(body) is None
    forced = {**body, "tool_choice": {"type": "any"}}
    assert check_anthropic(forced) == "Thinking may not be enabled when tool_choice forces tool use."


def test_without_an_output_schema_nothing_changes() -> None:
    body = messages_body(request(None, tools=(READ,)), "anthropic/m", stream=False)
    assert [t["name"] for t in body["tools"]] == ["read_file"] and "tool_choice" not in body


def test_anthropic_validator_checks_tool_choice_and_schemas() -> None:
    body = messages_body(request(), "anthropic/m", stream=False)
    assert "no tool named" in (check_anthropic({**body, "tool_choice": {"type": "tool", "name": "nope"}}) or "")
    bad_tool = {**body, "tools": [{"name": "final_answer", "input_schema": {"type": "array"}}]}
    assert "input_schema" in (check_anthropic(bad_tool) or "")


def test_the_answer_call_becomes_the_answer_text() -> None:
    message = AssistantMessage(
        content=(
            ReasoningPart(text="hm", signature="s"),
            TextPart(text="Here it is:"),
            ToolCallPart(id="t1", name="final_answer", arguments='{"x": 1}'),
        ),
        finish_reason="tool_calls",
    )
    answer = answer_as_text(message)
    assert answer.text == '{"x": 1}' and not answer.tool_calls and answer.finish_reason == "stop"
    assert isinstance(answer.content[0], ReasoningPart)  # reasoning stays, first


def test_other_calls_beside_the_answer_stay_calls() -> None:
    message = AssistantMessage(
        content=(
            ToolCallPart(id="t1", name="read_file", arguments='{"path": "a"}'),
            ToolCallPart(id="t2", name="final_answer", arguments='{"x": 1}'),
        ),
        finish_reason="tool_calls",
    )
    answer = answer_as_text(message)
    assert [c.id for c in answer.tool_calls] == ["t1"] and answer.finish_reason == "tool_calls"


def test_an_answer_cut_by_max_tokens_is_text_not_a_refused_call() -> None:
    data = {
        "content": [{"type": "tool_use", "id": "t1", "name": "final_answer", "input": '{"x": 1'}],
        "stop_reason": "max_tokens",
        "usage": {"input_tokens": 5, "output_tokens": 5},
    }
    message = parse_message(data, "anthropic/m", answers=True)
    assert message.text == '{"x": 1' and message.finish_reason == "length"
    assembler = MessagesAssembler("anthropic/m", answers=True)
    events = [
        {"type": "message_start", "message": {"usage": {"input_tokens": 5}}},
        {
            "type": "content_block_start",
            "index": 0,
            "content_block": {"type": "tool_use", "id": "t1", "name": "final_answer", "input": {}},
        },
        {"type": "content_block_delta", "index": 0, "delta": {"type": "input_json_delta", "partial_json": '{"x": '}},
        {"type": "content_block_delta", "index": 0, "delta": {"type": "input_json_delta", "partial_json": "1"}},
        {"type": "message_delta", "delta": {"stop_reason": "max_tokens"}, "usage": {"output_tokens": 5}},
        {"type": "message_stop"},
    ]
    streamed = [d.text for e in events for d in assembler.feed(e)]
    assert streamed == ['{"x": ', "1"]
    assert assembler.message().text == '{"x": 1'


def test_scripted_server_turns_a_forced_reply_into_the_call() -> None:
    with ScriptedServer() as server:
        body = messages_body(request(), "anthropic/m", stream=False)
        body["model"] = "structured"
        body["messages"] = [
            {"role": "user", "content": "q"},
            {"role": "assistant", "content": "(read)"},
            {"role": "user", "content": "go on"},
        ]
        r = httpx.post(f"{server.root_url}/v1/messages", json=body, headers={"anthropic-version": "2023-06-01"})
        assert r.status_code == 200, r.text
        [block] = r.json()["content"]
        assert block["type"] == "tool_use" and block["name"] == "final_answer"
        assert block["input"]["file"] == "errors.log"
        assert r.json()["stop_reason"] == "tool_use"
