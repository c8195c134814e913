"""OpenAI Chat Completions: the wire translation and an httpx provider for any compatible server.

The translation of a run's history is kept between requests and extended by the messages appended
since (:class:`WireCache`), so a 200-turn run encodes each message once and each request costs one
``json.dumps`` of the body: the request path stays lean.
Reasoning parts are not sent: Chat Completions has no field that accepts them back.

A streamed reply is complete when a chunk carries its ``finish_reason``: every server we know
sends one (OpenAI, vLLM, llama.cpp, Ollama), while ``data: [DONE]`` is left out by some compatible
servers and, alone, says only that the server stopped writing, not that the model finished.
"""

from __future__ import annotations

import json
import operator
import os
import re
from collections.abc import AsyncIterator, Sequence
from typing import Any
from urllib.parse import urlsplit

from tether.errors import (
    _OVERFLOW_MARKERS,
    ConfigError,
    ContextOverflowError,
    ProviderError,
    QuotaExceededError,
    ResponseError,
    RetryableError,
)
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
    OutputSchema,
    ResponseDone,
    StreamEvent,
    StreamReasoning,
    StreamText,
    ToolDefinition,
    body_extra,
    call_name,
    complete_usage,
    distinct_call_ids,
    incomplete_stream,
    sent_call_name,
    token_count,
)
from tether.providers.http import (
    HttpTransport,
    assembled,
    checked_base_url,
    clean_arguments,
    images_refused,
    model_ids,
    read_json,
    stream_reply,
)
from tether.usage import Usage

__all__ = [
    "OpenAIChatProvider",
    "WireCache",
    "normalise_base_url",
    "parse_completion",
    "response_format",
    "strict_schema",
    "tools_to_wire",
]

DEFAULT_BASE_URL = "https://api.openai.com/v1"
_LOCAL_HOSTS = ("127.", "localhost", "[::1]", "::1", "0.0.0.0")
# The body's fields for the reply's token limit (request_extra may name either, never raise it).
_LIMITS = ("max_tokens", "max_completion_tokens")
_OPENAI_HOST = "api.openai.com"
# OpenAI's reasoning models, by name, behind any prefix a gateway adds (``openai/o3``, ``azure/o4-mini``).
_REASONING_MODEL = re.compile(r"^(?:[\w.-]+/)*(?:o\d|gpt-5)", re.IGNORECASE)


def _image_url(part: ImagePart) -> dict[str, Any]:
    url = part.url or f"data:{part.media_type};base64,{part.data}"
    return {"type": "image_url", "image_url": {"url": url}}


def _user_content(parts: Sequence[TextPart | ImagePart]) -> str | list[dict[str, Any]]:
    if all(isinstance(p, TextPart) for p in parts):
        return "".join(p.text for p in parts if isinstance(p, TextPart))
    return [{"type": "text", "text": p.text} if isinstance(p, TextPart) else _image_url(p) for p in parts]


def message_to_wire(message: Message) -> dict[str, Any]:
    if isinstance(message, UserMessage):
        return {"role": "user", "content": _user_content(message.content)}
    if isinstance(message, ToolMessage):
        return {"role": "tool", "tool_call_id": message.call_id, "content": message.text}
    # "" and not null (nor a missing field) when there is no text: OpenAI, vLLM, Ollama, LM Studio
    # and OpenRouter accept all three, but llama.cpp's servers answer null or a missing field with
    # HTTP 500 (their chat templates read the content as a string).
    wire: dict[str, Any] = {"role": "assistant", "content": message.text}
    calls = message.tool_calls
    if calls:
        wire["tool_calls"] = [
            {"id": c.id, "type": "function", "function": {"name": sent_call_name(c.name), "arguments": c.arguments}}
            for c in calls
        ]
    return wire


class WireCache:
    """The Chat Completions history of a transcript, built incrementally.

    A run's transcript only grows between turns, so the previous request's translation is kept and
    only the messages appended since are translated. The kept prefix is confirmed message by message
    by identity (one comparison in C per message, no translation); a transcript changed anywhere
    (compacted, trimmed, a message replaced or removed) is translated again from its first change.
    Returned lists are new each call and never mutated afterwards.
    """

    def __init__(self) -> None:
        self._source: list[Message] = []  # the messages translated so far, in order
        self._out: list[dict[str, Any]] = []  # their wire messages, without images still pending
        # After each message: len(self._out) and the images of the tool results since the last
        # non-tool message (Chat Completions takes no images in tool results: they follow as a
        # user turn). A cut at message i resumes from marks[i - 1].
        self._marks: list[tuple[int, list[dict[str, Any]]]] = []

    def messages(self, system: str | None, messages: Sequence[Message]) -> list[dict[str, Any]]:
        keep = self._kept(messages)
        del self._source[keep:], self._marks[keep:]
        out_len, pending = self._marks[-1] if self._marks else (0, [])
        out = self._out
        del out[out_len:]
        for m in messages[keep:]:
            if pending and m.role != "tool":
                out.append({"role": "user", "content": pending})
                pending = []
            out.append(message_to_wire(m))
            if isinstance(m, ToolMessage):
                images = [_image_url(p) for p in m.content if isinstance(p, ImagePart)]
                if images:
                    pending = pending + images
            self._source.append(m)
            self._marks.append((len(out), pending))
        head: list[dict[str, Any]] = [{"role": "system", "content": system}] if system else []
        tail: list[dict[str, Any]] = [{"role": "user", "content": pending}] if pending else []
        return head + out + tail

    def _kept(self, messages: Sequence[Message]) -> int:
        """How many leading messages are the very ones translated before."""
        source = self._source
        if len(messages) >= len(source) and all(map(operator.is_, source, messages)):
            return len(source)
        for i, (old, new) in enumerate(zip(source, messages, strict=False)):
            if old is not new:
                return i
        return len(messages)


def tools_to_wire(tools: Sequence[ToolDefinition]) -> list[dict[str, Any]]:
    return [
        {
            "type": "function",
            "function": {"name": t.name, "description": t.description, "parameters": t.input_schema},
        }
        for t in tools
    ]


# What a schema may say and still be sent with ``strict: true``: a conservative part of the subset
# OpenAI's strict mode accepts (the subset has grown over time, and compatible servers accept less).
# A schema with anything else goes with ``strict: false``, as guidance: the harness validates the
# answer either way, so strictness only saves retries.
_STRICT_KEYWORDS = frozenset(
    {
        "type",
        "properties",
        "required",
        "additionalProperties",
        "items",
        "enum",
        "const",
        "anyOf",
        "$ref",
        "$defs",
        "definitions",
        "title",
        "description",
    }
)


def strict_schema(schema: dict[str, Any]) -> dict[str, Any] | None:
    """``schema`` as strict mode takes it, or None when it cannot be made strict without accepting
    something it refused. Strict mode wants every object to require all its properties and to
    allow no others: ``additionalProperties: false`` is added where it was left out (that only
    narrows what the model may send); an object with an optional property, or one that allows
    more properties, keeps the schema non-strict. The root must be an object."""
    if schema.get("type") != "object":
        return None
    try:
        return _strict_node(schema)
    except _NotStrict:
        return None


class _NotStrict(Exception):
    pass


def _strict_node(node: Any) -> dict[str, Any]:
    if not isinstance(node, dict) or set(node) - _STRICT_KEYWORDS:
        raise _NotStrict
    out = dict(node)
    if "properties" in node or node.get("type") == "object":
        props = node.get("properties") or {}
        if (
            not isinstance(props, dict)
            or set(node.get("required") or ()) != set(props)
            or node.get("additionalProperties", False) is not False
        ):
            raise _NotStrict
        out.update(
            properties={k: _strict_node(v) for k, v in props.items()}, required=list(props), additionalProperties=False
        )
    for key in ("$defs", "definitions"):
        if isinstance(node.get(key), dict):
            out[key] = {k: _strict_node(v) for k, v in node[key].items()}
    if "anyOf" in node:
        out["anyOf"] = [_strict_node(v) for v in node["anyOf"]]
    if "items" in node:
        out["items"] = _strict_node(node["items"])
    return out


def response_format(output: OutputSchema) -> dict[str, Any]:
    """The native ``response_format`` for a structured answer (strict when the schema allows it)."""
    strict = strict_schema(output.schema)
    spec: dict[str, Any] = {"name": output.name, "schema": strict or output.schema, "strict": strict is not None}
    if output.description:
        spec["description"] = output.description
    return {"type": "json_schema", "json_schema": spec}


def _usage(data: Any) -> Usage | None:
    if not isinstance(data, dict):
        return None
    details = data.get("prompt_tokens_details") or {}
    return Usage(
        prompt_tokens=token_count(data.get("prompt_tokens")),
        completion_tokens=token_count(data.get("completion_tokens")),
        cached_tokens=token_count(details.get("cached_tokens")) if isinstance(details, dict) else 0,
    )


def reply_pieces(message: dict[str, Any]) -> tuple[str, str]:
    """The text and the reasoning of a message or a streamed delta. Reasoning comes in
    ``reasoning_content`` (DeepSeek, vLLM, llama.cpp) or ``reasoning`` (OpenRouter, Ollama, newer
    vLLM). ``content`` is a string on the API; Mistral sends a list of parts, its reasoning
    models' ``thinking`` parts among them, which shown as written would be a Python list."""
    reasoning = message.get("reasoning_content") or message.get("reasoning") or ""
    text, thought = _content_text(message.get("content"))
    return text, (reasoning if isinstance(reasoning, str) else _content_text(reasoning)[0]) + thought


def _content_text(content: Any) -> tuple[str, str]:
    """``content`` (a string, or a list of parts) as its text and the text of its thinking parts."""
    if not content or isinstance(content, str):
        return content or "", ""
    if not isinstance(content, list):
        return str(content), ""
    text, thought = [], []
    for part in content:
        if isinstance(part, str):
            text.append(part)
        elif isinstance(part, dict) and part.get("type") == "thinking":
            thought.append(_content_text(part.get("thinking"))[0])
        elif isinstance(part, dict) and isinstance(part.get("text"), str):
            text.append(part["text"])
    return "".join(text), "".join(thought)


def _arguments_text(arguments: Any) -> str:
    """A call's ``arguments`` as the JSON text the API sends; some compatible servers send the
    object itself (as Ollama's own API does), which is the same call."""
    if arguments is None or isinstance(arguments, str):
        return arguments or ""
    return json.dumps(arguments, ensure_ascii=False)


# The finish reason of a reply in which the model refused (OpenAI's ``refusal`` field, Anthropic's
# ``stop_reason: refusal``): its words are the reply's text, and a structured answer is not asked again.
REFUSED = "refusal"


def _refusal(message: dict[str, Any]) -> str:
    """The words of a refusal (OpenAI sends them in ``refusal``, with no ``content``, when the model
    declines; structured outputs above all): left unread, the reply was empty, and a structured
    answer was corrected and paid for again and again."""
    refusal = message.get("refusal")
    return refusal if isinstance(refusal, str) else ""


# Finish reasons of a reply the server gave up on (vLLM and SGLang: "abort", when a request is
# preempted or aborted; "error" when generation failed): what came is not the model's whole reply.
_ABORTED = ("abort", "error")


def parse_completion(data: Any, model: str, provider: str = "openai") -> AssistantMessage:
    """A non-streaming Chat Completions body → one assistant message (a
    :class:`~tether.errors.RetryableError` for a reply the server gave up on)."""
    if isinstance(data, dict) and data.get("error") is not None and "choices" not in data:
        # An error answered with 200 (some gateways do): classified as the same error in a stream.
        raise stream_error(data["error"], provider, where="in an answer sent as a success (HTTP 200)")
    if isinstance(data, dict) and data.get("choices") == []:
        raise ResponseError(
            f"{provider}: the server answered with no choices, so there is no reply to read: "
            f"{json.dumps(data, default=str)[:300]}",
            provider=provider,
            body=str(data)[:500],
        )
    try:
        choice = data["choices"][0]
        if choice.get("finish_reason") in _ABORTED:
            raise RetryableError(
                f"{provider}: the server gave the reply up (finish_reason {choice['finish_reason']!r})",
                provider=provider,
            )
        msg = choice["message"]
        parts: list[TextPart | ToolCallPart | ReasoningPart] = []
        text, reasoning = reply_pieces(msg)
        refused = _refusal(msg)
        text += refused
        if reasoning:
            parts.append(ReasoningPart(text=reasoning))
        if text:
            parts.append(TextPart(text=text))
        for c in msg.get("tool_calls") or []:
            fn = c.get("function") or {}
            arguments = clean_arguments(_arguments_text(fn.get("arguments")) or "{}")
            parts.append(ToolCallPart(id=str(c.get("id") or ""), name=call_name(fn.get("name")), arguments=arguments))
        return AssistantMessage(
            content=tuple(parts),
            model=model,
            usage=_usage(data.get("usage")) or Usage(estimated=True),
            finish_reason=REFUSED if refused else choice.get("finish_reason"),
        )
    except (KeyError, IndexError, TypeError, AttributeError, ValueError) as exc:
        raise ResponseError(
            f"{provider}: the response is not a Chat Completions body: {exc!r}", provider=provider, body=str(data)[:500]
        ) from exc


# What the words of an error's ``type`` or ``code`` stand for, as an HTTP status, when it has no
# numeric code: the first word found decides.
_ERROR_WORDS = (
    ("quota", 429),
    ("rate_limit", 429),
    ("too_many", 429),
    ("overload", 503),
    ("unavailable", 503),
    ("resource_exhausted", 429),  # a Google status, as gateways pass it on
    ("timeout", 408),
    ("deadline", 408),
    ("server_error", 500),
    ("internal", 500),
    ("auth", 401),
    ("api_key", 401),
    ("permission", 403),
    ("context_length", 400),
    ("invalid_request", 400),
    ("badrequest", 400),
    ("invalid_argument", 400),
    ("invalid_model", 400),  # Mistral's: a model it does not have (classified by the body, as its 400 is)
    ("not_found", 404),
)
# What an error's message says it is, when its type, code and status say nothing: phrases that name
# one kind of failure (not single words: "invalid response from upstream" is the server's own).
_MESSAGE_WORDS = (
    *((marker, 400) for marker in _OVERFLOW_MARKERS),
    ("quota", 429),
    ("rate limit", 429),
    ("too many requests", 429),
    ("overloaded", 503),
    ("temporarily unavailable", 503),
    ("timed out", 408),
    ("api key", 401),
    ("unauthorized", 401),
    ("authentication", 401),
    ("permission denied", 403),
    ("forbidden", 403),
    ("does not exist", 404),
    ("not found", 404),
    ("not a valid model", 400),  # a model the server does not have: OpenRouter's words, and LiteLLM's below
    ("invalid model", 400),
    ("invalid request", 400),
    ("bad request", 400),
    ("invalid argument", 400),
    ("invalid parameter", 400),
    ("invalid value", 400),
)


def stream_error(error: Any, provider: str, *, where: str = "mid-stream") -> ProviderError:
    """An ``{"error": ...}`` chunk inside a stream (OpenAI, vLLM and OpenRouter send one when the
    model fails after the 200), classified as the HTTP status it stands for: its numeric ``code``
    (OpenRouter, vLLM) or ``status``, else the words of its ``type``, ``code`` and ``status`` (OpenAI,
    Google's through gateways), else the phrases of its message (a context overflow, a rate limit, a
    bad key, a model that does not exist); one that says none of these is taken as the server's own
    failure (500, retried while nothing of the turn was shown)."""
    from tether.errors import classify_http_error, quota_message

    fields = error if isinstance(error, dict) else {}
    message = " ".join(str(fields.get("message") or error).split())[:300]
    words = " ".join(str(fields.get(key) or "") for key in ("type", "code", "status")).lower()
    status = _http_status(fields.get("code")) or _http_status(fields.get("status"))
    if status is None:
        said = [s for word, s in _ERROR_WORDS if word in words]
        said += [s for phrase, s in _MESSAGE_WORDS if phrase in message.lower()]
        status = said[0] if said else 500
    body = json.dumps({"error": error}, ensure_ascii=False, default=str)
    found = classify_http_error(provider, status, body, {})
    text = f"{provider}: {words.strip() or 'an error'} {where}: {message}"
    if isinstance(found, QuotaExceededError):
        return QuotaExceededError(quota_message(provider, f"{where}: {message}"), provider=provider, body=body)
    if isinstance(found, ContextOverflowError):
        return ContextOverflowError(
            f"{provider}: the prompt exceeds the model's context window ({message})", provider=provider, body=body
        )
    # The status it stands for goes along: a model the server does not have (404) falls back.
    return type(found)(text, provider=provider, body=body, status=status)


def _http_status(value: Any) -> int | None:
    """``value`` as an HTTP error status (a number, or a string of digits), or None."""
    if isinstance(value, str) and value.strip().isdigit():
        value = int(value)
    if isinstance(value, int) and not isinstance(value, bool) and 400 <= value < 600:
        return value
    return None


class StreamAssembler:
    """Collects SSE chunks into one assistant message: text, tool-call deltas, usage."""

    def __init__(self, model: str, provider: str = "openai") -> None:
        self.model = model
        self.provider = provider
        self.chars_shown = 0
        self.reasoning: list[str] = []
        self.text: list[str] = []
        self.calls: dict[int, dict[str, Any]] = {}
        self._moved: dict[int, int] = {}  # a wire index → the call now continued under it
        self.finish_reason: str | None = None
        self.refused = False  # a ``refusal`` came: the reply's finish reason is REFUSED
        self.usage: Usage | None = None

    def feed(self, chunk: Any) -> list[StreamText | StreamReasoning]:
        """Take one parsed chunk; return the deltas it carries for the user."""
        if not isinstance(chunk, dict):
            raise ResponseError(f"stream chunk is not an object: {str(chunk)[:200]}")
        # An error chunk, or an ``error`` event (see stream_reply); ``"error": null`` beside a
        # chunk's choices is no error (an empty error object still is one, of unknown cause).
        if chunk.get("error") is not None or chunk.get("type") == "error":
            raise stream_error(chunk.get("error"), self.provider)
        if chunk.get("usage"):
            self.usage = _usage(chunk["usage"])
        out: list[StreamText | StreamReasoning] = []
        choices = chunk.get("choices") or []
        if not isinstance(choices, list):
            raise ResponseError(f"stream chunk has malformed choices: {str(chunk)[:200]}")
        for choice in choices:
            delta = choice.get("delta") or {}
            text, reasoning = reply_pieces(delta)
            if reasoning:
                self.reasoning.append(reasoning)
                out.append(StreamReasoning(reasoning))
            refused = _refusal(delta)
            self.refused = self.refused or bool(refused)
            if text + refused:
                self.text.append(text + refused)
                out.append(StreamText(text + refused))
            written = "".join([self._feed_call(tc) for tc in delta.get("tool_calls") or []])
            if delta.get("tool_calls") and (written or not out):
                out.append(StreamText("", written))  # a call streams no text: an empty delta says the reply goes on
            if choice.get("finish_reason"):
                self.finish_reason = choice["finish_reason"]
        return out

    def _feed_call(self, tc: dict[str, Any]) -> str:
        """Add a tool-call delta to its call; the arguments' text it carried."""
        slot = self.calls.setdefault(self._call_index(tc), {"args": []})
        if tc.get("id"):
            slot["id"] = tc["id"]  # set, never appended: llama.cpp repeats the id in every chunk
        fn = tc.get("function") or {}
        if fn.get("name"):
            slot["name"] = fn["name"]
        if fn.get("arguments"):
            slot["args"].append(_arguments_text(fn["arguments"]))
            return str(slot["args"][-1])
        return ""

    def _call_index(self, tc: dict[str, Any]) -> int:
        """Which call a tool-call delta continues. By ``index`` when the server sends one; without
        it, by ``id`` (a known id is the same call; a new id starts one), and a delta with neither
        continues the latest call. A delta that names a tool under a new id starts a new call even
        at an index already taken: some servers (Ollama behind LiteLLM, some vLLM tool parsers)
        number every parallel call 0, and merged, two calls would be one with both arguments."""
        call_id = tc.get("id")
        if tc.get("index") is not None:
            index = int(tc["index"])
            slot = self.calls.get(self._moved.get(index, index))
            named = bool((tc.get("function") or {}).get("name"))
            if slot is not None and call_id and slot.get("id") not in (None, call_id) and named:
                self._moved[index] = max(self.calls) + 1
            return self._moved.get(index, index)
        if call_id:
            known = next((i for i, slot in self.calls.items() if slot.get("id") == call_id), None)
            return known if known is not None else max(self.calls, default=-1) + 1
        return max(self.calls, default=0)

    @property
    def finished(self) -> bool:
        return self.finish_reason is not None

    def message(self) -> AssistantMessage:
        """The reply; an :class:`IncompleteStreamError` unless a ``finish_reason`` arrived."""
        if not self.finished:
            raise incomplete_stream(self.provider, self.chars_shown, "no finish_reason")
        if self.finish_reason in _ABORTED:
            raise incomplete_stream(self.provider, self.chars_shown, f"finish_reason {self.finish_reason!r}")
        parts: list[TextPart | ToolCallPart | ReasoningPart] = []
        if self.reasoning:
            parts.append(ReasoningPart(text="".join(self.reasoning)))
        if self.text:
            parts.append(TextPart(text="".join(self.text)))
        calls = [(index, self.calls[index]) for index in sorted(self.calls)]
        for _, slot in calls:
            call_id = slot.get("id") or ""  # given one by distinct_call_ids
            arguments = clean_arguments("".join(slot["args"]) or "{}")
            parts.append(ToolCallPart(id=call_id, name=call_name(slot.get("name")), arguments=arguments))
        return AssistantMessage(
            content=tuple(parts),
            model=self.model,
            usage=self.usage or Usage(estimated=True),
            finish_reason=REFUSED if self.refused else self.finish_reason,
        )


def normalise_base_url(base_url: str) -> str:
    """An OpenAI-compatible base URL as the paths are joined to it: without trailing slashes, and
    without a pasted ``/chat/completions``. The base URL *includes* ``/v1`` by convention (OpenAI,
    vLLM, Ollama, LM Studio, llama.cpp, OpenRouter's ``/api/v1``), and ``/v1`` is never added:
    some servers answer at the root, so a guess would break them. A 404 names the URL it came
    from, and says that such URLs usually end in ``/v1`` when this one does not. A query
    (Azure's ``?api-version=...``) is kept: it is sent with every request."""
    base, _, query = base_url.strip().partition("?")
    base = base.rstrip("/")
    if base.endswith("/chat/completions"):
        base = base.removesuffix("/chat/completions").rstrip("/")
    return f"{base}?{query}" if query else base


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


_ONLY_TO = "{} is sent only to api.openai.com or OPENAI_BASE_URL's host"


def _key_names(key_variable: str, base_url: str, from_environment: bool) -> tuple[tuple[str, ...], bool]:
    """The variables a key is taken from, in order, and whether ``key_variable`` was left out.

    ``LLM_API_KEY`` goes with ``LLM_BASE_URL`` (a compatible server's own key). OpenAI's key goes
    to api.openai.com, or to the host ``OPENAI_BASE_URL`` names (the OpenAI SDK's pairing), never
    to any other server ``LLM_BASE_URL`` points at: a local model's or another vendor's server
    would otherwise be handed the OpenAI account's key."""
    if not (from_environment and os.environ.get("LLM_BASE_URL")):
        return (key_variable,), False
    host = urlsplit(base_url).hostname
    paired = {urlsplit(DEFAULT_BASE_URL).hostname, urlsplit(os.environ.get("OPENAI_BASE_URL", "")).hostname}
    if host in paired:
        return ("LLM_API_KEY", key_variable), False
    return ("LLM_API_KEY",), bool(os.environ.get(key_variable))


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
        transport: Any = None,
        model_id: str | None = None,
    ) -> None:
        source = next((v for v in ("LLM_BASE_URL", "OPENAI_BASE_URL") if os.environ.get(v)), "")
        base = base_url or (os.environ[source] if source else DEFAULT_BASE_URL)
        source = f"the base URL given to the {name} provider" if base_url else source
        self.base_url = checked_base_url(normalise_base_url(base), source)
        self.name = name
        # What an Agent given this provider asks for (its API's model id: "gpt-4.1-mini").
        self.model_id = model_id
        if credentials is None:
            names, withheld = _key_names(key_variable, self.base_url, base_url is None)
            found = next((name for name in names if os.environ.get(name)), None)
            if api_key:
                credentials = ApiKey(api_key, hint=f"the api_key given to the {name} provider")
            elif found is not None:
                credentials = ApiKey(os.environ[found], hint=f"the key in {found}")
            elif is_local_url(self.base_url):
                why = f"{' and '.join(names)} not set" + (f"; {_ONLY_TO.format(key_variable)}" if withheld else "")
                credentials = NoAuth(f"whether the server needs a key: none was sent ({why})")
            elif withheld:
                raise ConfigError(
                    f"LLM_API_KEY is not set: the server at {urlsplit(self.base_url).hostname} "
                    f"(LLM_BASE_URL) needs its own key ({_ONLY_TO.format(key_variable)}). Export "
                    "LLM_API_KEY with that server's key."
                )
            else:
                raise ConfigError(
                    f"{' or '.join(names)} is not set: export it, or point LLM_BASE_URL at a local "
                    "OpenAI-compatible server (no key needed on loopback)."
                )
        self._http = HttpTransport(name, self.base_url, credentials, timeout_s=timeout_s, transport=transport)
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
            body[self._limit_field(request.model)] = request.max_tokens
        if request.output_schema is not None:
            body["response_format"] = response_format(request.output_schema)
        if stream:
            body["stream"] = True
            body["stream_options"] = {"include_usage": True}
        if self.send_cache_key and request.cache_key:
            body["prompt_cache_key"] = clamp_cache_key(request.cache_key)
        extra = body_extra(request, _LIMITS)
        named = [field for field in _LIMITS if field in extra]
        if len(named) == 1:  # the limit under the name request_extra asked for, and under no other
            body.pop(_LIMITS[1 - _LIMITS.index(named[0])], None)
        body.update(extra)
        return json.dumps(body, separators=(",", ":"), ensure_ascii=False).encode()

    def _limit_field(self, model: str) -> str:
        """The body's field for the reply's token limit. OpenAI's reasoning models (o1, o3, o4-mini,
        gpt-5 and their kin) refuse ``max_tokens`` ("Use 'max_completion_tokens' instead"), and
        api.openai.com takes ``max_completion_tokens`` for every model (``max_tokens`` is deprecated
        there): so it goes there, and to any server asked for a model of those families (Azure,
        OpenRouter's ``openai/o3``). Other servers get ``max_tokens``, which all of them read, while
        some (older llama.cpp, Ollama and vLLM) ignore the newer name, and would not stop the reply
        where the budget planned it."""
        if urlsplit(self.base_url).hostname == _OPENAI_HOST or _REASONING_MODEL.match(model):
            return "max_completion_tokens"
        return "max_tokens"

    async def complete(self, request: ModelRequest) -> ModelResponse:
        with self._http.scrubbing():  # what a reply quotes back of the key never leaves here
            with images_refused(self.name, f"{self.name}/{request.model}", request.messages):
                response = await self._http.request("POST", "/chat/completions", self._body(request, stream=False))
            data = read_json(response, self.name)
            message = parse_completion(data, request.model, self.name)
        return ModelResponse(self._finished(message, _usage(data.get("usage")), request))

    async def stream(self, request: ModelRequest) -> AsyncIterator[StreamEvent]:
        body = self._body(request, stream=True)
        with self._http.scrubbing():
            with images_refused(self.name, f"{self.name}/{request.model}", request.messages):
                response = await self._http.request("POST", "/chat/completions", body, stream=True)
            assembler = StreamAssembler(request.model, self.name)
            async for event in stream_reply(response, self.name, assembler, idle_s=self._http.timeout_s):
                yield event
            message = assembled(assembler, self.name)
        yield ResponseDone(ModelResponse(self._finished(message, assembler.usage, request)))

    def _finished(self, message: AssistantMessage, reported: Usage | None, request: ModelRequest) -> AssistantMessage:
        """The reply as the loop gets it: each call with an id of its own in the conversation, and
        usage some compatible servers never send (or send as zeros) counted, and said to be."""
        message = distinct_call_ids(message, request.messages)
        usage = complete_usage(reported, request, message, f"{self.name}/{request.model}")
        return message if usage == message.usage else message.model_copy(update={"usage": usage})

    async def validate_auth(self) -> None:
        """Raise a classified error unless the server accepts the credentials: :class:`AuthError`
        (401/403), :class:`UnreachableError` (the host cannot be reached), or another; a
        :class:`ResponseError` for an answer that is not the API's JSON (a proxy's login page)."""
        with self._http.scrubbing():
            read_json(await self._http.request("GET", "/models"), self.name)

    async def list_models(self) -> list[str]:
        """The ids the server lists at ``GET {base_url}/models`` (``data[].id``), in its order."""
        with self._http.scrubbing():
            response = await self._http.request("GET", "/models")
            return model_ids(read_json(response, self.name), self.name)

    async def aclose(self) -> None:
        await self._http.aclose()
