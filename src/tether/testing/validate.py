"""Strict checks of request bodies, as the real APIs enforce them, for the scripted server.

A request that a real provider would reject gets a 400 here too, so a test that passes against
the scripted server sends requests that are valid for the API they claim to speak.
"""

from __future__ import annotations

import hashlib
import hmac
import re
from typing import Any

__all__ = ["assistant_content_problem", "check_anthropic", "check_openai", "sign_thinking"]

_SECRET = b"tether-scripted-thinking"
_NAME = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")
_HISTORY_NAME = re.compile(r"^[a-zA-Z0-9_-]+$")


def sign_thinking(model: str, text: str) -> str:
    """The signature the scripted server gives a thinking block: valid only for that model."""
    return hmac.new(_SECRET, f"{model}\x00{text}".encode(), hashlib.sha256).hexdigest()


def check_openai(body: Any) -> str | None:
    """Why a Chat Completions request is invalid, or None."""
    if not isinstance(body, dict) or not isinstance(body.get("messages"), list) or not body["messages"]:
        return "'messages' must be a non-empty array"
    waiting: list[str] = []
    for i, m in enumerate(body["messages"]):
        role = m.get("role") if isinstance(m, dict) else None
        if role not in ("system", "developer", "user", "assistant", "tool"):
            return f"messages[{i}]: invalid role {role!r}"
        if role == "tool":
            if not waiting or m.get("tool_call_id") != waiting[0]:
                return (
                    f"messages[{i}]: a 'tool' message must answer a preceding tool_call "
                    f"(expected {waiting[:1]}, got {m.get('tool_call_id')!r})"
                )
            waiting.pop(0)
            continue
        if waiting:
            return f"messages[{i}]: tool_call_ids {waiting} have no response messages"
        if role == "assistant":
            problem = _assistant_content(i, m) or _call_names(i, m)
            if problem:
                return problem
            waiting = [c["id"] for c in m.get("tool_calls") or []]
        elif m.get("content") in (None, ""):
            return f"messages[{i}]: {role} message needs content"
    if waiting:
        return f"tool_call_ids {waiting} have no response messages"
    return _response_format(body.get("response_format"))


def _response_format(value: Any) -> str | None:
    """Why a ``response_format`` is refused, or None (as OpenAI checks it, strict mode included)."""
    if value is None:
        return None
    kind = value.get("type") if isinstance(value, dict) else None
    if kind in ("text", "json_object"):
        return None
    if kind != "json_schema":
        return f"response_format.type: invalid value {kind!r} (expected 'text', 'json_object' or 'json_schema')"
    spec = value.get("json_schema")
    if not isinstance(spec, dict):
        return "response_format.json_schema: Missing required parameter"
    if not isinstance(spec.get("name"), str) or not _NAME.match(spec["name"]):
        return (
            "response_format.json_schema.name: must be a-z, A-Z, 0-9, underscores or dashes, "
            f"at most 64 characters (got {spec.get('name')!r})"
        )
    schema = spec.get("schema")
    if schema is not None and not isinstance(schema, dict):
        return "response_format.json_schema.schema: must be an object"
    if spec.get("strict") is True:
        return _strict_problem(spec["name"], schema or {}, "()")
    return None


def _strict_problem(name: str, node: Any, where: str) -> str | None:
    """Strict mode's rule for every object: all properties required, ``additionalProperties: false``."""
    if not isinstance(node, dict):
        return None
    if where == "()" and node.get("type") != "object":
        return f"Invalid schema for response_format '{name}': schema must be a JSON Schema of 'type: \"object\"'"
    if node.get("type") == "object" or "properties" in node:
        if node.get("additionalProperties") is not False:
            return (
                f"Invalid schema for response_format '{name}': In context={where}, 'additionalProperties' "
                "is required to be supplied and to be false."
            )
        missing = [k for k in node.get("properties") or {} if k not in (node.get("required") or ())]
        if missing:
            return (
                f"Invalid schema for response_format '{name}': In context={where}, 'required' is required "
                f"to be supplied and to be an array including every key in properties. Missing {missing[0]!r}."
            )
    children = [
        *(node.get("properties") or {}).values(),
        *(node.get("$defs") or {}).values(),
        *(node.get("anyOf") or ()),
        *([node["items"]] if "items" in node else []),
    ]
    for child in children:
        problem = _strict_problem(name, child, where + ".")
        if problem:
            return problem
    return None


def assistant_content_problem(body: Any) -> str | None:
    """Why an assistant message's ``content`` in a Chat Completions body is refused, or None."""
    messages = body.get("messages") if isinstance(body, dict) else None
    for i, m in enumerate(messages if isinstance(messages, list) else []):
        if isinstance(m, dict) and m.get("role") == "assistant":
            problem = _assistant_content(i, m)
            if problem:
                return problem
    return None


def _assistant_content(i: int, m: dict[str, Any]) -> str | None:
    """An assistant message's content must be a string (``""`` when it has only tool calls) or a
    list of parts. OpenAI also takes null beside tool calls, but llama.cpp's servers answer null
    or a missing field with HTTP 500: the strictest rule any common server keeps is checked here,
    so a request that passes works with all of them."""
    if "content" not in m:
        return f"messages[{i}]: assistant message has no 'content' (send \"\" when it has only tool_calls)"
    if not isinstance(m["content"], str | list):
        return (
            f"messages[{i}]: assistant 'content' must be a string or an array, not "
            f"{type(m['content']).__name__ if m['content'] is not None else 'null'} "
            '(llama.cpp\'s servers refuse null; send "" when it has only tool_calls)'
        )
    return None


def _call_names(i: int, m: dict[str, Any]) -> str | None:
    """OpenAI checks the names of the calls in the history as it checks a tool's."""
    for k, call in enumerate(m.get("tool_calls") or []):
        name = (call.get("function") or {}).get("name") if isinstance(call, dict) else None
        if not isinstance(name, str) or not _HISTORY_NAME.match(name):
            return (
                f"Invalid 'messages[{i}].tool_calls[{k}].function.name': string does not match pattern. "
                "Expected a string that matches the pattern '^[a-zA-Z0-9_-]+$'."
            )
    return None


def _check_block(where: str, block: Any, model: str) -> str | None:
    kind = block.get("type") if isinstance(block, dict) else None
    if kind == "text":
        if not block.get("text"):
            return f"{where}: text content blocks must be non-empty"
    elif kind == "thinking":
        if block.get("signature") != sign_thinking(model, block.get("thinking", "")):
            return f"{where}: Invalid `signature` in `thinking` block"
    elif kind == "redacted_thinking":
        if not block.get("data"):
            return f"{where}: redacted_thinking needs data"
    elif kind == "tool_use":
        if not block.get("name"):
            return f"{where}.tool_use.name: String should have at least 1 character"
    elif kind not in ("image", "tool_result"):
        return f"{where}: unknown content block type {kind!r}"
    return None


def check_anthropic(body: Any) -> str | None:
    """Why a Messages request is invalid, or None."""
    if not isinstance(body, dict):
        return "body must be an object"
    if not isinstance(body.get("max_tokens"), int) or body["max_tokens"] < 1:
        return "max_tokens: Field required (a positive integer)"
    thinking = body.get("thinking")
    if isinstance(thinking, dict) and thinking.get("type") == "enabled":
        budget = thinking.get("budget_tokens")
        if not isinstance(budget, int) or budget >= body["max_tokens"]:
            return "`max_tokens` must be greater than `thinking.budget_tokens`"
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        return "messages: at least one message is required"
    breakpoints = sum(1 for t in body.get("tools") or [] if "cache_control" in t)
    breakpoints += sum(1 for b in body.get("system") or [] if isinstance(b, dict) and "cache_control" in b)
    pending: list[str] = []
    for i, m in enumerate(messages):
        problem = _check_turn(i, m, pending, str(body.get("model", "")))
        if problem:
            return problem
        content = m["content"] if isinstance(m["content"], list) else []
        breakpoints += sum("cache_control" in b for b in content)
        pending = [b["id"] for b in content if b.get("type") == "tool_use"]
    if pending:
        return "the last assistant message has tool_use blocks without results"
    if breakpoints > 4:
        return f"A maximum of 4 blocks with cache_control may be provided. Found {breakpoints}."
    return _tools_problem(body)


def _tools_problem(body: dict[str, Any]) -> str | None:
    """Why the tools or the tool choice are refused, or None."""
    tools = body.get("tools") or []
    for i, t in enumerate(tools):
        if not isinstance(t, dict) or not isinstance(t.get("name"), str) or not _NAME.match(t["name"]):
            return f"tools.{i}.name: String should match pattern '^[a-zA-Z0-9_-]{{1,64}}$'"
        schema = t.get("input_schema")
        if not isinstance(schema, dict) or schema.get("type") != "object":
            return f"tools.{i}.custom.input_schema.type: Input should be 'object'"
    choice = body.get("tool_choice")
    if choice is None:
        return None
    kind = choice.get("type") if isinstance(choice, dict) else None
    if kind not in ("auto", "any", "tool", "none"):
        return f"tool_choice.type: Input should be 'auto', 'any', 'tool' or 'none' (got {kind!r})"
    if kind == "tool" and choice.get("name") not in {t["name"] for t in tools}:
        return f"tool_choice.name: no tool named {choice.get('name')!r} in tools"
    if kind in ("any", "tool") and not tools:
        return "tool_choice: a forced tool choice needs tools"
    thinking = body.get("thinking")
    if kind in ("any", "tool") and isinstance(thinking, dict) and thinking.get("type") == "enabled":
        return "Thinking may not be enabled when tool_choice forces tool use."
    return None


def _check_turn(i: int, m: Any, pending: list[str], model: str) -> str | None:
    expected = "user" if i % 2 == 0 else "assistant"
    if not isinstance(m, dict) or m.get("role") != expected:
        return f'messages: roles must alternate between "user" and "assistant", starting with user (messages.{i})'
    content = m.get("content")
    if isinstance(content, str):
        return None if content else f"messages.{i}: content must not be empty"
    if not isinstance(content, list) or not content:
        return f"messages.{i}: content must be a non-empty list"
    results = [b.get("tool_use_id") for b in content if b.get("type") == "tool_result"]
    if sorted(results) != sorted(pending):
        return (
            f"messages.{i}: each `tool_use` needs a `tool_result` in the next message and no other "
            f"(expected {sorted(pending)}, got {sorted(results)})"
        )
    if results and any(b.get("type") != "tool_result" for b in content[: len(results)]):
        return f"messages.{i}: tool_result blocks must come first in the user message"
    for j, block in enumerate(content):
        problem = _check_block(f"messages.{i}.content.{j}", block, model)
        if problem:
            return problem
    return None
