"""OpenAI Chat Completions: the wire translation and an httpx provider for any compatible server.

The translation of each (frozen) message is cached by identity, so a 200-turn run encodes each
message once and each request costs one ``json.dumps`` of the body: the request path stays lean.
Reasoning parts are not sent: Chat Completions has no field that accepts them back.
"""

from __future__ import annotations

import json
import os
from collections.abc import AsyncIterator, Sequence
from typing import Any
from urllib.parse import urlsplit

from tether.errors import ConfigError, ResponseError, RetryableError
from tether.messages import (
    AssistantMessage,
    ImagePart,
    Message,
    ReasoningPart,
    TextPart,
    ToolCallPart,
    ToolMessage,
    UserMessage,
)
from tether.providers.auth import ApiKey, Credentials, NoAuth
from tether.providers.base import (
    ModelRequest,
    ModelResponse,
    ResponseDone,
    StreamEvent,
    StreamReasoning,
    StreamText,
    ToolDefinition,
)
from tether.providers.http import HttpTransport, sse_events
from tether.usage import Usage

__all__ = [
    "OpenAIChatProvider",
    "WireCache",
    "parse_completion",
    "tools_to_wire",
]

DEFAULT_BASE_URL = "https://api.openai.com/v1"
_LOCAL_HOSTS = ("127.", "localhost", "[::1]", "::1", "0.0.0.0")


def _image_url(part: ImagePart) -> dict[str, Any]:
    url = part.url or f"data:{part.media_type};base64,{part.data}"
    return {"type": "image_url", "image_url": {"url": url}}


def _user_content(parts: Sequence[TextPart | ImagePart]) -> str | list[dict[str, Any]]:
    if all(isinstance(p, TextPart) for p in parts):
        return "".join(p.text for p in parts if isinstance(p, TextPart))
    return [
        {"type": "text", "text": p.text} if isinstance(p, TextPart) else _image_url(p)
        for p in parts
    ]


def message_to_wire(message: Message) -> dict[str, Any]:
    if isinstance(message, UserMessage):
        return {"role": "user", "content": _user_content(message.content)}
    if isinstance(message, ToolMessage):
        return {"role": "tool", "tool_call_id": message.call_id, "content": message.text}
    wire: dict[str, Any] = {"role": "assistant", "content": message.text or None}
    calls = message.tool_calls
    if calls:
        wire["tool_calls"] = [
            {"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}}
            for c in calls
        ]
    return wire


class WireCache:
    """Translations of messages, kept by identity for as long as the messages are in use."""

    def __init__(self) -> None:
        # id(message) → (message, its wire dict, image parts a tool result carries)
        self._cache: dict[int, tuple[Message, dict[str, Any], list[dict[str, Any]]]] = {}

    def _entry(self, m: Message) -> tuple[Message, dict[str, Any], list[dict[str, Any]]]:
        images: list[dict[str, Any]] = []
        if isinstance(m, ToolMessage):
            images = [_image_url(p) for p in m.content if isinstance(p, ImagePart)]
        return (m, message_to_wire(m), images)

    def messages(self, system: str | None, messages: Sequence[Message]) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = [{"role": "system", "content": system}] if system else []
        cache = self._cache
        fresh: dict[int, tuple[Message, dict[str, Any], list[dict[str, Any]]]] = {}
        pending_images: list[dict[str, Any]] = []
        for m in messages:
            hit = cache.get(id(m))
            if hit is None or hit[0] is not m:
                hit = self._entry(m)
            fresh[id(m)] = hit
            if pending_images and m.role != "tool":
                out.append({"role": "user", "content": pending_images})
                pending_images = []
            out.append(hit[1])
            if hit[2]:
                # Chat Completions takes no images in tool results: they follow as a user turn.
                pending_images = pending_images + hit[2]
        if pending_images:
            out.append({"role": "user", "content": pending_images})
        self._cache = fresh
        return out


def tools_to_wire(tools: Sequence[ToolDefinition]) -> list[dict[str, Any]]:
    return [
        {
            "type": "function",
            "function": {"name": t.name, "description": t.description, "parameters": t.input_schema},
        }
        for t in tools
    ]


def _usage(data: Any, fallback: Usage | None = None) -> Usage:
    if not isinstance(data, dict):
        return fallback or Usage(estimated=True)
    details = data.get("prompt_tokens_details") or {}
    return Usage(
        prompt_tokens=int(data.get("prompt_tokens") or 0),
        completion_tokens=int(data.get("completion_tokens") or 0),
        cached_tokens=int(details.get("cached_tokens") or 0) if isinstance(details, dict) else 0,
    )


def parse_completion(data: Any, model: str) -> AssistantMessage:
    """A non-streaming Chat Completions body → one assistant message."""
    try:
        choice = data["choices"][0]
        msg = choice["message"]
        parts: list[TextPart | ToolCallPart | ReasoningPart] = []
        if msg.get("reasoning_content"):
            parts.append(ReasoningPart(text=str(msg["reasoning_content"])))
        if msg.get("content"):
            parts.append(TextPart(text=str(msg["content"])))
        for c in msg.get("tool_calls") or []:
            fn = c["function"]
            parts.append(ToolCallPart(id=c["id"], name=fn["name"], arguments=fn.get("arguments") or "{}"))
        return AssistantMessage(
            content=tuple(parts),
            model=model,
            usage=_usage(data.get("usage")),
            finish_reason=choice.get("finish_reason"),
        )
    except (KeyError, IndexError, TypeError, AttributeError, ValueError) as exc:
        raise ResponseError(
            f"the response is not a Chat Completions body: {exc!r}", body=str(data)[:500]
        ) from exc


class StreamAssembler:
    """Collects SSE chunks into one assistant message: text, tool-call deltas, usage."""

    def __init__(self, model: str) -> None:
        self.model = model
        self.started = False
        self.reasoning: list[str] = []
        self.text: list[str] = []
        self.calls: dict[int, dict[str, Any]] = {}
        self.finish_reason: str | None = None
        self.usage: Usage | None = None

    def feed(self, chunk: Any) -> list[StreamText | StreamReasoning]:
        """Take one parsed chunk; return the deltas it carries for the user."""
        if not isinstance(chunk, dict):
            raise ResponseError(f"stream chunk is not an object: {str(chunk)[:200]}")
        if "error" in chunk:
            raise ResponseError(f"the provider sent an error mid-stream: {chunk['error']}")
        self.started = True
        if chunk.get("usage"):
            self.usage = _usage(chunk["usage"])
        out: list[StreamText | StreamReasoning] = []
        choices = chunk.get("choices") or []
        if not isinstance(choices, list):
            raise ResponseError(f"stream chunk has malformed choices: {str(chunk)[:200]}")
        for choice in choices:
            delta = choice.get("delta") or {}
            # reasoning_content: DeepSeek, vLLM and llama.cpp stream reasoning in this field.
            if delta.get("reasoning_content"):
                self.reasoning.append(str(delta["reasoning_content"]))
                out.append(StreamReasoning(self.reasoning[-1]))
            if delta.get("content"):
                self.text.append(str(delta["content"]))
                out.append(StreamText(self.text[-1]))
            for tc in delta.get("tool_calls") or []:
                self._feed_call(tc)
            if choice.get("finish_reason"):
                self.finish_reason = choice["finish_reason"]
        return out

    def _feed_call(self, tc: dict[str, Any]) -> None:
        slot = self.calls.setdefault(int(tc.get("index", len(self.calls))), {"args": []})
        if tc.get("id"):
            slot["id"] = tc["id"]
        fn = tc.get("function") or {}
        if fn.get("name"):
            slot["name"] = fn["name"]
        if fn.get("arguments"):
            slot["args"].append(fn["arguments"])

    def message(self) -> AssistantMessage:
        parts: list[TextPart | ToolCallPart | ReasoningPart] = []
        if self.reasoning:
            parts.append(ReasoningPart(text="".join(self.reasoning)))
        if self.text:
            parts.append(TextPart(text="".join(self.text)))
        for index in sorted(self.calls):
            slot = self.calls[index]
            if "name" not in slot:
                raise ResponseError(f"stream ended with a tool call without a name (index {index})")
            call_id = slot.get("id") or f"call_{index}"
            parts.append(ToolCallPart(id=call_id, name=slot["name"], arguments="".join(slot["args"]) or "{}"))
        return AssistantMessage(
            content=tuple(parts),
            model=self.model,
            usage=self.usage or Usage(estimated=True),
            finish_reason=self.finish_reason,
        )


def estimate_usage(body: bytes, text: str, calls: dict[int, dict[str, Any]]) -> Usage:
    """Token counts for a call the server did not report, marked ``estimated``."""
    from tether.tokens import count_tokens

    call_text = "".join(s.get("name", "") + "".join(s["args"]) for s in calls.values())
    return Usage(
        prompt_tokens=count_tokens(body.decode(errors="replace")),
        completion_tokens=count_tokens(text) + count_tokens(call_text),
        estimated=True,
    )


def is_local_url(base_url: str) -> bool:
    host = urlsplit(base_url).hostname or ""
    return host.startswith(_LOCAL_HOSTS) or host in _LOCAL_HOSTS


CACHE_KEY_LIMIT = 64  # OpenAI's prompt_cache_key length limit


def clamp_cache_key(key: str) -> str:
    """A key within the provider's limit: kept when short, else a stable hash (never a cut that
    could make two sessions share a key)."""
    if len(key) <= CACHE_KEY_LIMIT:
        return key
    import hashlib

    return "h-" + hashlib.sha256(key.encode()).hexdigest()[: CACHE_KEY_LIMIT - 2]


class OpenAIChatProvider:
    """Chat Completions over httpx, for api.openai.com or any compatible server."""

    def __init__(
        self,
        base_url: str | None = None,
        api_key: str | None = None,
        *,
        credentials: Credentials | None = None,
        name: str = "openai",
        key_variable: str = "OPENAI_API_KEY",
        send_cache_key: bool | None = None,
        timeout_s: float = 600.0,
    ) -> None:
        base = base_url or os.environ.get("LLM_BASE_URL") or os.environ.get("OPENAI_BASE_URL")
        self.base_url = (base or DEFAULT_BASE_URL).rstrip("/")
        self.name = name
        if credentials is None:
            key = api_key if api_key is not None else os.environ.get(key_variable)
            if key:
                credentials = ApiKey(key, hint=f"the key in {key_variable}")
            elif is_local_url(self.base_url):
                credentials = NoAuth()
            else:
                raise ConfigError(
                    f"{key_variable} is not set: export it, or point LLM_BASE_URL at a local "
                    "OpenAI-compatible server (no key needed on loopback)."
                )
        self._http = HttpTransport(name, self.base_url, credentials, timeout_s=timeout_s)
        # prompt_cache_key is OpenAI's; other compatible servers may reject unknown fields.
        self.send_cache_key = self.base_url == DEFAULT_BASE_URL if send_cache_key is None else send_cache_key
        self._wire = WireCache()

    def _body(self, request: ModelRequest, stream: bool) -> bytes:
        body: dict[str, Any] = {
            "model": request.model,
            "messages": self._wire.messages(request.system, request.messages),
        }
        if request.tools:
            body["tools"] = tools_to_wire(request.tools)
        if request.max_tokens is not None:
            body["max_tokens"] = request.max_tokens
        if stream:
            body["stream"] = True
            body["stream_options"] = {"include_usage": True}
        if self.send_cache_key and request.cache_key:
            body["prompt_cache_key"] = clamp_cache_key(request.cache_key)
        body.update(request.extra)
        return json.dumps(body, separators=(",", ":"), ensure_ascii=False).encode()

    async def complete(self, request: ModelRequest) -> ModelResponse:
        body = self._body(request, stream=False)
        response = await self._http.request("POST", "/chat/completions", body)
        try:
            data = response.json()
        except ValueError as exc:
            raise ResponseError(f"{self.name}: response is not JSON: {response.text[:200]}",
                                provider=self.name) from exc
        message = parse_completion(data, request.model)
        if not isinstance(data.get("usage"), dict):
            usage = estimate_usage(body, message.text, {})
            message = message.model_copy(update={"usage": usage})
        return ModelResponse(message)

    async def stream(self, request: ModelRequest) -> AsyncIterator[StreamEvent]:
        body = self._body(request, stream=True)
        response = await self._http.request("POST", "/chat/completions", body, stream=True)
        assembler = StreamAssembler(request.model)
        async for payload in sse_events(response, self.name):
            if payload == "[DONE]":
                continue  # read to the end so the connection goes back to the pool
            try:
                chunk = json.loads(payload)
            except ValueError as exc:
                raise ResponseError(f"{self.name}: malformed stream chunk: {payload[:200]}",
                                    provider=self.name) from exc
            for event in assembler.feed(chunk):
                yield event
        if not assembler.started:
            raise RetryableError(f"{self.name}: the stream ended before any chunk", provider=self.name)
        if assembler.usage is None:
            # Some compatible servers never send usage: count it, and say it was counted.
            assembler.usage = estimate_usage(body, "".join(assembler.text), assembler.calls)
        yield ResponseDone(ModelResponse(assembler.message()))

    async def validate_auth(self) -> None:
        await self._http.request("GET", "/models")

    async def aclose(self) -> None:
        await self._http.aclose()
