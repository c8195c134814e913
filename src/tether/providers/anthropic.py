"""Anthropic Messages: the wire translation and an httpx provider.

Translation rules worth knowing:

* The system prompt is a text block; tool results are ``tool_result`` blocks in a user message,
  first in it, and consecutive user-side messages merge into one (the API wants turns to alternate).
* Images a tool returns stay inside its ``tool_result`` (this API accepts them there).
* Reasoning: a ``thinking`` block (with its signature) or ``redacted_thinking`` block is sent back
  unchanged only to the model that produced it; for any other model it is dropped, because another
  model's signature cannot verify it and its hidden reasoning is not evidence for a new model.
* Cache breakpoints (``cache_control``) go on the last tool definition, the system prompt and the
  last block of the conversation, so the stable prefix is cached turn after turn.
* Tool call ids are kept when they fit the API's pattern and mapped to a safe form when not.
* A streamed reply is complete only with ``message_stop``; usage the server leaves out is
  estimated (see :mod:`tether.providers.base` for both rules, shared with the other wire).
* Structured output: the Messages API has no JSON-schema reply format, so a request with an
  output schema offers one more tool, ``final_answer``, whose input schema is the output schema,
  and forces a tool call (``tool_choice``: that tool, or ``any`` when the agent has other tools).
  Extended thinking refuses a forced tool choice: with thinking on, the choice stays ``auto`` and
  the system prompt says to answer through the tool. The reply's call to ``final_answer`` comes
  back as the reply's *text* (its input, as JSON; streamed as text deltas, and text beside it is
  dropped), so the transcript holds an ordinary final answer: no call waits for a result, and the
  history stays valid for either wire and on resume.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import AsyncIterator, Sequence
from typing import Any

from tether.errors import (
    AuthError,
    BadRequestError,
    ConfigError,
    ContextOverflowError,
    ModelNotFoundError,
    ProviderError,
    QuotaExceededError,
    ResponseError,
    RetryableError,
    is_quota_error,
    quota_message,
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
    parse_arguments,
)
from tether.providers.auth import ApiKey, Credentials, NoAuth
from tether.providers.base import (
    ANSWER_TOOL,
    ModelRequest,
    ModelResponse,
    OutputSchema,
    ResponseDone,
    StreamEvent,
    StreamReasoning,
    StreamText,
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
    "AnthropicProvider",
    "MessagesAssembler",
    "answer_as_text",
    "answer_tool",
    "messages_body",
    "normalise_base_url",
    "parse_message",
]

DEFAULT_BASE_URL = "https://api.anthropic.com"
API_VERSION = "2023-06-01"
DEFAULT_MAX_TOKENS = 4096
_EPHEMERAL = {"type": "ephemeral"}
_SAFE_ID = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")
# model_context_window_exceeded: the reply ran into the context window, cut as by max_tokens (so a
# cut call is never run, and cut text is continued once, as for a "length" reply).
_STOP_REASONS = {
    "end_turn": "stop",
    "stop_sequence": "stop",
    "tool_use": "tool_calls",
    "max_tokens": "length",
    "model_context_window_exceeded": "length",
}


def safe_tool_id(call_id: str) -> str:
    if _SAFE_ID.match(call_id):
        return call_id
    import hashlib

    return "t_" + hashlib.sha256(call_id.encode()).hexdigest()[:40]


def _image_block(part: ImagePart) -> dict[str, Any]:
    if part.url:
        return {"type": "image", "source": {"type": "url", "url": part.url}}
    return {"type": "image", "source": {"type": "base64", "media_type": part.media_type, "data": part.data}}


def _content_blocks(parts: Sequence[TextPart | ImagePart]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for p in parts:
        if isinstance(p, ImagePart):
            out.append(_image_block(p))
        elif p.text:
            out.append({"type": "text", "text": p.text})
    return out


def _tool_input(arguments: str) -> dict[str, Any]:
    value = parse_arguments(arguments)  # None-like for text that is not JSON or nests too deeply
    # The API needs an object; arguments that were not one were already answered with an error.
    return value if isinstance(value, dict) else {"invalid_arguments": arguments}


def _assistant_blocks(m: AssistantMessage, model_name: str) -> list[dict[str, Any]]:
    same_model = m.model == model_name
    out: list[dict[str, Any]] = []
    for p in m.content:
        if isinstance(p, ReasoningPart):
            if same_model and p.redacted and p.signature:
                out.append({"type": "redacted_thinking", "data": p.signature})
            elif same_model and p.signature:
                out.append({"type": "thinking", "thinking": p.text, "signature": p.signature})
        elif isinstance(p, TextPart):
            if p.text:
                out.append({"type": "text", "text": p.text})
        else:
            out.append(
                {
                    "type": "tool_use",
                    "id": safe_tool_id(p.id),
                    "name": sent_call_name(p.name),
                    "input": _tool_input(p.arguments),
                }
            )
    return out or [{"type": "text", "text": "(no content)"}]


def _user_side_blocks(m: UserMessage | ToolMessage) -> list[dict[str, Any]]:
    if isinstance(m, ToolMessage):
        block: dict[str, Any] = {
            "type": "tool_result",
            "tool_use_id": safe_tool_id(m.call_id),
            "content": _content_blocks(m.content) or [{"type": "text", "text": "(empty)"}],
        }
        if m.is_error:
            block["is_error"] = True
        return [block]
    return _content_blocks(m.content)


class WireBuilder:
    """Builds the Messages-API history incrementally.

    A run's transcript only grows between turns, so the previous request's translation is reused
    and only the new messages are translated (an identity check confirms the prefix is unchanged;
    anything else rebuilds from scratch). Returned lists are never mutated afterwards.
    """

    def __init__(self) -> None:
        self._source: list[Message] = []
        self._out: list[dict[str, Any]] = []
        self._model = ""

    def build(self, messages: Sequence[Message], model_name: str) -> list[dict[str, Any]]:
        n = len(self._source)
        reuse = (
            model_name == self._model
            and len(messages) >= n
            and all(a is b for a, b in zip(self._source, messages, strict=False))
        )
        out = list(self._out) if reuse else []
        for m in messages[n:] if reuse else messages:
            _append(out, m, model_name)
        if out and out[0]["role"] != "user":
            out.insert(0, {"role": "user", "content": [{"type": "text", "text": "(conversation start)"}]})
        self._source, self._out, self._model = list(messages), out, model_name
        return out


def _append(out: list[dict[str, Any]], m: Message, model_name: str) -> None:
    if isinstance(m, AssistantMessage):
        role, blocks = "assistant", _assistant_blocks(m, model_name)
    else:
        role, blocks = "user", _user_side_blocks(m)
    if not blocks:
        return
    if out and out[-1]["role"] == role:
        content = [*out[-1]["content"], *blocks]  # a new list: earlier requests' lists stay intact
        if role == "user" and content[0]["type"] != "tool_result":
            content.sort(key=lambda b: b["type"] != "tool_result")  # tool results first, as required
        out[-1] = {"role": role, "content": content}
    else:
        out.append({"role": role, "content": blocks})


def wire_messages(messages: Sequence[Message], model_name: str) -> list[dict[str, Any]]:
    """The Messages-API history for ``messages`` as read by ``model_name``."""
    return WireBuilder().build(messages, model_name)


def messages_body(
    request: ModelRequest, model_name: str, stream: bool, builder: WireBuilder | None = None
) -> dict[str, Any]:
    history = (builder or WireBuilder()).build(request.messages, model_name)
    body: dict[str, Any] = {
        "model": request.model,
        "max_tokens": request.max_tokens or DEFAULT_MAX_TOKENS,
        "messages": history,
    }
    extra = body_extra(request, ("max_tokens",))
    extra = _thinking_within(extra, extra.get("max_tokens", body["max_tokens"]))
    output = request.output_schema
    forced = output is not None and not _thinking(extra)
    system = request.system
    if output is not None and not forced:
        system = f"{system}\n\n{_ANSWER_NOTE}" if system else _ANSWER_NOTE
    if system:
        body["system"] = [{"type": "text", "text": system, "cache_control": _EPHEMERAL}]
    tools = [{"name": t.name, "description": t.description, "input_schema": t.input_schema} for t in request.tools]
    if output is not None:
        tools.append(answer_tool(output))
    if tools:
        tools[-1]["cache_control"] = _EPHEMERAL
        body["tools"] = tools
    if forced:
        body["tool_choice"] = {"type": "tool", "name": ANSWER_TOOL} if len(tools) == 1 else {"type": "any"}
    if history:  # a breakpoint on the last block, on copies: the builder's lists stay as they were
        last = history[-1]
        marked = {**last["content"][-1], "cache_control": _EPHEMERAL}
        body["messages"] = [*history[:-1], {"role": last["role"], "content": [*last["content"][:-1], marked]}]
    if stream:
        body["stream"] = True
    body.update(extra)
    return body


# The least thinking budget the API takes; it must also be below the call's max_tokens.
_LEAST_THINKING = 1024


def _thinking_within(extra: dict[str, Any], max_tokens: Any) -> dict[str, Any]:
    """``extra`` with a thinking budget the API accepts beside ``max_tokens``. The API refuses a
    ``budget_tokens`` at or above ``max_tokens`` (400), and a budget cuts ``max_tokens`` as the run
    spends: a run whose last affordable call had less room than its thinking budget failed there
    instead of answering or stopping ``budget_exceeded``. Such a budget is lowered to half of
    ``max_tokens`` (the rest is for the answer), never below the API's least (1024); with no room
    for that, thinking is left out of the call: an answer without thinking rather than none."""
    thinking = extra.get("thinking")
    if not isinstance(thinking, dict) or thinking.get("type") != "enabled":
        return extra
    budget = thinking.get("budget_tokens")
    counts = all(isinstance(n, int) and not isinstance(n, bool) for n in (budget, max_tokens))
    if not counts or budget < max_tokens:
        return extra
    if max_tokens <= _LEAST_THINKING:
        return {key: value for key, value in extra.items() if key != "thinking"}
    lowered = max(max_tokens // 2, _LEAST_THINKING)
    return {**extra, "thinking": {**thinking, "budget_tokens": lowered}}


_ANSWER_NOTE = (
    f"When you have the final answer, give it by calling the {ANSWER_TOOL} tool: its input is the "
    "answer. Do not write the answer as text."
)


def _thinking(extra: dict[str, Any]) -> bool:
    thinking = extra.get("thinking")
    return isinstance(thinking, dict) and thinking.get("type", "disabled") != "disabled"


def answer_tool(output: OutputSchema) -> dict[str, Any]:
    """The tool that carries a structured final answer: its input is the answer."""
    about = f" ({output.name}: {output.description})" if output.description else f" ({output.name})"
    return {
        "name": ANSWER_TOOL,
        "input_schema": output.schema,
        "description": f"Give your final answer{about} by calling this tool once, when you are done: "
        "its input is the answer, and it must match this schema.",
    }


def answer_as_text(message: AssistantMessage) -> AssistantMessage:
    """A reply that called the answer tool, as the final answer it is: the call's input becomes
    the reply's text (the first call, if there were several; other text is dropped, since the
    answer is the text). Calls to other tools stay, and the loop runs them before asking again."""
    answer = next((c for c in message.tool_calls if c.name == ANSWER_TOOL), None)
    if answer is None:
        return message
    reasoning = [p for p in message.content if isinstance(p, ReasoningPart)]
    calls = [c for c in message.tool_calls if c.name != ANSWER_TOOL]
    finish = "stop" if message.finish_reason == "tool_calls" and not calls else message.finish_reason
    return message.model_copy(
        update={"content": (*reasoning, TextPart(text=answer.arguments), *calls), "finish_reason": finish}
    )


def _usage(data: Any, output_tokens: int | None = None) -> Usage:
    if not isinstance(data, dict):
        data = {}
    read = token_count(data.get("cache_read_input_tokens"))
    written = token_count(data.get("cache_creation_input_tokens"))
    return Usage(
        prompt_tokens=token_count(data.get("input_tokens")) + read + written,
        completion_tokens=output_tokens if output_tokens is not None else token_count(data.get("output_tokens")),
        cached_tokens=read,
        cache_write_tokens=written,
    )


def _tool_arguments(value: Any) -> str:
    """A ``tool_use`` input as the call's JSON arguments. The API sends an object; a compatible
    server may send the JSON text itself, or something that is not an object. Whatever it is, it
    reaches the tool layer, which answers a non-object with a tool error the model can act on
    ("not valid JSON ...", "must be a JSON object"), as on the Chat Completions wire."""
    if value is None:
        return "{}"
    if isinstance(value, str):
        return clean_arguments(value)
    return json.dumps(value, ensure_ascii=False)


def _streamed_arguments(raw: str) -> str:
    """The concatenated ``partial_json`` of a streamed ``tool_use`` block, as the call's arguments:
    kept as streamed (lone surrogates replaced) even when it is not JSON (see
    :func:`_tool_arguments`)."""
    return clean_arguments(raw) if raw.strip() else "{}"


def _part_from_block(
    block: dict[str, Any], streamed: str | None = None
) -> TextPart | ReasoningPart | ToolCallPart | None:
    """A content block as a part; ``streamed`` is a ``tool_use`` block's streamed input."""
    kind = block.get("type")
    if kind == "text":
        return TextPart(text=block.get("text", ""))
    if kind == "thinking":
        return ReasoningPart(text=block.get("thinking", ""), signature=block.get("signature"))
    if kind == "redacted_thinking":
        return ReasoningPart(redacted=True, signature=block.get("data"))
    if kind == "tool_use":
        arguments = _tool_arguments(block.get("input")) if streamed is None else streamed
        # A call a compatible server sends without an id is given one (distinct_call_ids), as on Chat Completions.
        return ToolCallPart(id=str(block.get("id") or ""), name=call_name(block.get("name")), arguments=arguments)
    return None


def parse_message(data: Any, model: str, provider: str = "anthropic", *, answers: bool = False) -> AssistantMessage:
    """A non-streaming Messages response → one assistant message. ``answers``: the request offered
    the answer tool (structured output), and a call to it is the final answer."""
    if isinstance(data, dict) and data.get("error") is not None and "content" not in data:
        # An error answered with 200 (some gateways do): classified as the same error in a stream.
        raise stream_error(data["error"], provider, where="in an answer sent as a success (HTTP 200)")
    try:
        parts = [p for p in (_part_from_block(b) for b in data["content"]) if p is not None]
        message = AssistantMessage(
            content=tuple(parts),
            model=model,
            usage=_usage(data.get("usage")),
            finish_reason=_STOP_REASONS.get(data.get("stop_reason"), data.get("stop_reason")),
        )
    except (KeyError, TypeError, AttributeError, ValueError) as exc:
        raise ResponseError(
            f"{provider}: the response is not a Messages body: {exc!r}", provider=provider, body=str(data)[:500]
        ) from exc
    if answers:  # an answer cut by max_tokens is cut text (continued by the loop), not a call
        message = answer_as_text(message)
    return message


def stream_error(error: Any, provider: str, *, where: str = "mid-stream") -> ProviderError:
    """An ``error`` event inside a stream (or an error answered with 200: ``where``), classified
    like the HTTP status it stands for."""
    kind = error.get("type", "") if isinstance(error, dict) else ""
    message = error.get("message", "") if isinstance(error, dict) else str(error)
    text = f"{provider}: {kind or 'error'} {where}: {message}"
    if kind in ("overloaded_error", "api_error", "rate_limit_error", "timeout_error"):
        return RetryableError(text, provider=provider)
    if kind == "billing_error" or is_quota_error(json.dumps({"error": error}) if isinstance(error, dict) else text):
        return QuotaExceededError(quota_message(provider, f"{kind or 'error'} {where}: {message}"), provider=provider)
    if kind in ("authentication_error", "permission_error"):
        return AuthError(text, provider=provider)
    if "prompt is too long" in message.lower():
        return ContextOverflowError(text, provider=provider)
    if kind == "not_found_error":  # a model the server does not have falls back, as its HTTP 404 does
        return ModelNotFoundError(text, provider=provider, status=404)
    return BadRequestError(text, provider=provider)


class MessagesAssembler:
    """Collects Messages stream events into one assistant message."""

    def __init__(self, model: str, provider: str = "anthropic", *, answers: bool = False) -> None:
        self.model = model
        self.provider = provider
        self.answers = answers  # a call to the answer tool is the final answer: streamed as text
        self.blocks: dict[int, dict[str, Any]] = {}
        self.json_parts: dict[int, list[str]] = {}
        self.start_usage: dict[str, Any] = {}
        self.output_tokens: int | None = None
        self.stop_reason: str | None = None
        self.stopped = False
        self.started = False  # a message_start came
        self._moved: dict[int, int] = {}  # a wire index started again → the block now continued under it
        self.chars_shown = 0

    @property
    def finished(self) -> bool:
        return self.stopped

    def feed(self, event: Any) -> list[StreamText | StreamReasoning]:
        if not isinstance(event, dict) or "type" not in event:
            raise ResponseError(
                f"{self.provider}: stream event is not an object with a type: {str(event)[:200]}",
                provider=self.provider,
            )
        kind = event["type"]
        if kind == "error":
            raise stream_error(event.get("error"), self.provider)
        if kind == "message_start":
            if self.started:  # what was shown of the first would be taken for part of the second
                raise ResponseError(
                    f"{self.provider}: the reply began again inside one stream (a second message_start)",
                    provider=self.provider,
                )
            self.started = True
            self.start_usage = (event.get("message") or {}).get("usage") or {}
        elif kind == "content_block_start":
            return self._block_start(int(event["index"]), event["content_block"])
        elif kind == "content_block_delta":
            index = int(event["index"])
            return self._delta(self._moved.get(index, index), event["delta"])
        elif kind == "message_delta":
            self.stop_reason = (event.get("delta") or {}).get("stop_reason") or self.stop_reason
            usage = event.get("usage") or {}
            out = usage.get("output_tokens")
            self.output_tokens = token_count(out) if out is not None else self.output_tokens
            # The counts here are cumulative and may include the input side (the API does, and some
            # compatible servers report it only here): the server's count wins over a zero or none.
            for key in ("input_tokens", "cache_read_input_tokens", "cache_creation_input_tokens"):
                if usage.get(key):
                    self.start_usage = {**self.start_usage, key: usage[key]}
        elif kind == "message_stop":
            self.stopped = True
        return []

    def _block_start(self, index: int, block: dict[str, Any]) -> list[StreamText | StreamReasoning]:
        if index in self.blocks:
            # A compatible server that numbers every block alike (0): a new block, not the old one
            # overwritten (whose text was shown, and would be missing from the reply).
            self._moved[index] = index = max(self.blocks) + 1
        self.blocks[index] = dict(block)
        self.json_parts[index] = []
        if block.get("type") == "tool_use" and not (self.answers and block.get("name") == ANSWER_TOOL):
            return [StreamText("")]  # a call streams no text: an empty delta says the reply goes on
        return []

    def _delta(self, index: int, delta: dict[str, Any]) -> list[StreamText | StreamReasoning]:
        block = self.blocks.get(index)
        if block is None:
            raise ResponseError(f"{self.provider}: delta for unknown content block {index}", provider=self.provider)
        kind = delta.get("type")
        if kind == "text_delta":
            block["text"] = block.get("text", "") + delta["text"]
            return [StreamText(delta["text"])]
        if kind == "thinking_delta":
            block["thinking"] = block.get("thinking", "") + delta["thinking"]
            return [StreamReasoning(delta["thinking"])]
        if kind == "signature_delta":
            block["signature"] = block.get("signature", "") + delta["signature"]
        elif kind == "input_json_delta":
            self.json_parts[index].append(delta.get("partial_json", ""))
            if self.answers and block.get("name") == ANSWER_TOOL and delta.get("partial_json"):
                return [StreamText(delta["partial_json"])]
            return [StreamText("", delta.get("partial_json") or "")]  # the call goes on (it streams no text)
        return []

    def message(self) -> AssistantMessage:
        """The reply; an :class:`IncompleteStreamError` unless ``message_stop`` arrived."""
        if not self.stopped:
            raise incomplete_stream(self.provider, self.chars_shown, "no message_stop")
        finish = _STOP_REASONS.get(self.stop_reason or "", self.stop_reason)
        tools = [i for i in sorted(self.blocks) if self.blocks[i].get("type") == "tool_use"]
        parts = []
        for index in sorted(self.blocks):
            # Deltas that streamed nothing (a lone empty partial_json) leave the input the block
            # started with: a compatible server may send the whole input there.
            streamed = "".join(self.json_parts.get(index) or ()) if index in tools else ""
            part = _part_from_block(self.blocks[index], _streamed_arguments(streamed) if streamed.strip() else None)
            if part is not None:
                parts.append(part)
        message = AssistantMessage(
            content=tuple(parts),
            model=self.model,
            usage=_usage(self.start_usage, self.output_tokens),
            finish_reason=finish,
        )
        return answer_as_text(message) if self.answers else message


def normalise_base_url(base_url: str) -> str:
    """A Messages base URL as the ``/v1/...`` paths are joined to it: ``https://api.anthropic.com``,
    ``.../v1``, ``.../v1/`` and a pasted ``.../v1/messages`` all become the first form. A query is
    kept: it is sent with every request."""
    base, _, query = base_url.strip().partition("?")
    base = base.rstrip("/")
    for suffix in ("/v1/messages", "/v1"):
        if base.endswith(suffix):
            base = base.removesuffix(suffix).rstrip("/")
            break
    return f"{base}?{query}" if query else base


class AnthropicProvider:
    """The Messages API over httpx. ``model_name`` (``anthropic/...``) decides which reasoning
    blocks are returned verbatim."""

    def __init__(
        self,
        base_url: str | None = None,
        api_key: str | None = None,
        *,
        credentials: Credentials | None = None,
        name: str = "anthropic",
        key_variable: str = "ANTHROPIC_API_KEY",
        timeout_s: float = 600.0,
        transport: Any = None,
        model_id: str | None = None,
    ) -> None:
        source = f"the base URL given to the {name} provider" if base_url else "ANTHROPIC_BASE_URL"
        base = base_url or os.environ.get("ANTHROPIC_BASE_URL") or DEFAULT_BASE_URL
        self.base_url = checked_base_url(normalise_base_url(base), source)
        self.name = name
        # What an Agent given this provider asks for (its API's model id: "claude-sonnet-4-5").
        self.model_id = model_id
        if credentials is None:
            key = api_key or os.environ.get(key_variable)
            given = f"the api_key given to the {name} provider" if api_key else f"the key in {key_variable}"
            if key:
                credentials = ApiKey(key, hint=given, header="x-api-key", scheme="")
            elif self.base_url.startswith(("http://127.", "http://localhost", "http://[::1]")):
                credentials = NoAuth(f"whether the server needs a key: none was sent ({key_variable} is not set)")
            else:
                raise ConfigError(
                    f"{key_variable} is not set: export it (or set ANTHROPIC_BASE_URL to a "
                    "local Messages-compatible server)."
                )
        self._http = HttpTransport(
            name,
            self.base_url,
            credentials,
            headers={"anthropic-version": API_VERSION},
            timeout_s=timeout_s,
            transport=transport,
        )
        self._wire = WireBuilder()

    def _model_name(self, request: ModelRequest) -> str:
        return f"{self.name}/{request.model}"

    def _body(self, request: ModelRequest, stream: bool) -> bytes:
        body = messages_body(request, self._model_name(request), stream, self._wire)
        return json.dumps(body, separators=(",", ":"), ensure_ascii=False).encode()

    async def complete(self, request: ModelRequest) -> ModelResponse:
        with self._http.scrubbing():  # what a reply quotes back of the key never leaves here
            with images_refused(self.name, f"{self.name}/{request.model}", request.messages):
                response = await self._http.request("POST", "/v1/messages", self._body(request, False))
            message = parse_message(
                read_json(response, self.name),
                self._model_name(request),
                self.name,
                answers=request.output_schema is not None,
            )
        return ModelResponse(self._finished(message, request))

    async def stream(self, request: ModelRequest) -> AsyncIterator[StreamEvent]:
        body = self._body(request, True)
        with self._http.scrubbing():
            with images_refused(self.name, f"{self.name}/{request.model}", request.messages):
                response = await self._http.request("POST", "/v1/messages", body, stream=True)
            assembler = MessagesAssembler(
                self._model_name(request), self.name, answers=request.output_schema is not None
            )
            async for delta in stream_reply(response, self.name, assembler, idle_s=self._http.timeout_s):
                yield delta
            message = assembled(assembler, self.name)
        yield ResponseDone(ModelResponse(self._finished(message, request)))

    def _finished(self, message: AssistantMessage, request: ModelRequest) -> AssistantMessage:
        """The reply as the loop gets it: each call with an id of its own in the conversation, and
        usage a compatible server may not send (or send as zeros) estimated, not counted free."""
        message = distinct_call_ids(message, request.messages)
        usage = complete_usage(message.usage, request, message, self._model_name(request))
        return message if usage == message.usage else message.model_copy(update={"usage": usage})

    async def validate_auth(self) -> None:
        """Raise a classified error unless the server accepts the credentials: :class:`AuthError`
        (401/403), :class:`UnreachableError` (the host cannot be reached), or another; a
        :class:`ResponseError` for an answer that is not the API's JSON (a proxy's login page)."""
        with self._http.scrubbing():
            read_json(await self._http.request("GET", "/v1/models?limit=1"), self.name)

    models_page_size = 1000  # the API's largest page
    _MAX_MODEL_PAGES = 50

    async def list_models(self) -> list[str]:
        """The ids ``GET /v1/models`` lists (``data[].id``), following its pages (``has_more``,
        ``last_id``)."""
        from urllib.parse import quote

        ids: list[str] = []
        after = ""
        for _ in range(self._MAX_MODEL_PAGES):
            query = f"?limit={self.models_page_size}" + (f"&after_id={quote(after, safe='')}" if after else "")
            with self._http.scrubbing():
                data = read_json(await self._http.request("GET", "/v1/models" + query), self.name)
                page = model_ids(data, self.name)
            ids += page
            after = str(data.get("last_id") or (page[-1] if page else ""))
            if not data.get("has_more") or not page:
                break
        return ids

    async def aclose(self) -> None:
        await self._http.aclose()
