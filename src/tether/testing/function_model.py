"""``FunctionModel``: a provider whose reply is a function of the messages, for tests."""

from __future__ import annotations

import inspect
import json
from collections.abc import Awaitable, Callable
from dataclasses import replace
from typing import Any

from tether.messages import AssistantMessage, Message, TextPart, ToolCallPart
from tether.providers.base import ModelRequest, ModelResponse
from tether.providers.openai_chat import WireCache, tools_to_wire
from tether.providers.scripted import InProcessModel, Reply, count_prompt_tokens
from tether.tokens import estimate_tokens
from tether.usage import Price, Usage

__all__ = ["FunctionModel"]

ReplyFn = Callable[[list[Message], ModelRequest], "AssistantMessage | Reply | str | Awaitable[Any]"]


class FunctionModel(InProcessModel):
    """``FunctionModel(lambda messages, request: "hi")``. The function may return text, a
    :class:`~tether.providers.scripted.Reply`, or an :class:`AssistantMessage`; it may be async.
    Usage is counted as the scripted model counts it (tether's tokenizer-free estimate, unless the
    reply carries its own); ``price`` defaults to the scripted one ($2 and $12 per million tokens)."""

    name = "function"

    def __init__(self, fn: ReplyFn, *, model_id: str = "function", price: Price | None = None) -> None:
        self.fn = fn
        self.model_id = model_id
        self.price = price or Price(input=2.0, output=12.0)
        self.requests: list[ModelRequest] = []
        self._wire = WireCache()

    async def complete(self, request: ModelRequest) -> ModelResponse:
        self.requests.append(replace(request, messages=list(request.messages)))  # as sent, not as it grew
        out = self.fn(list(request.messages), request)
        if inspect.isawaitable(out):
            out = await out
        message = self._to_message(out)
        if message.usage is None:
            wire = self._wire.messages(request.system, request.messages)
            completion = estimate_tokens(message.text) + sum(
                3 + estimate_tokens(c.name) + estimate_tokens(c.arguments) for c in message.tool_calls
            )
            usage = Usage(
                prompt_tokens=count_prompt_tokens(wire, tools_to_wire(request.tools)), completion_tokens=completion
            )
            message = message.model_copy(update={"usage": usage})
        return ModelResponse(message)

    def _to_message(self, out: Any) -> AssistantMessage:
        if isinstance(out, AssistantMessage):
            return out
        if isinstance(out, str):
            return AssistantMessage(content=(TextPart(text=out),), finish_reason="stop")
        if isinstance(out, Reply):
            parts: list[TextPart | ToolCallPart] = [TextPart(text=out.text)] if out.text else []
            parts += [ToolCallPart(id=cid, name=name, arguments=json.dumps(args)) for cid, name, args in out.calls]
            return AssistantMessage(content=tuple(parts), finish_reason="tool_calls" if out.calls else "stop")
        raise TypeError(
            f"FunctionModel's function returned {type(out).__name__}; return str, Reply or AssistantMessage"
        )
