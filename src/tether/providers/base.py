"""The one interface the loop talks to. Provider quirks stay behind it."""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from tether.messages import AssistantMessage, Message

__all__ = [
    "ModelRequest",
    "ModelResponse",
    "Provider",
    "ResponseDone",
    "StreamEvent",
    "StreamReasoning",
    "StreamText",
    "ToolDefinition",
]


@dataclass(frozen=True, slots=True)
class ToolDefinition:
    name: str
    description: str
    input_schema: dict[str, Any]


@dataclass(frozen=True, slots=True)
class ModelRequest:
    model: str  # the provider's own model id (after ``provider/`` was split off)
    messages: Sequence[Message]
    system: str | None = None
    tools: Sequence[ToolDefinition] = ()
    max_tokens: int | None = None
    # A stable id for the conversation (session or run): providers with a cache key use it.
    cache_key: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class ModelResponse:
    message: AssistantMessage  # carries usage, model and finish_reason


@dataclass(frozen=True, slots=True)
class StreamText:
    text: str


@dataclass(frozen=True, slots=True)
class StreamReasoning:
    text: str


@dataclass(frozen=True, slots=True)
class ResponseDone:
    response: ModelResponse


StreamEvent = StreamText | StreamReasoning | ResponseDone


@runtime_checkable
class Provider(Protocol):
    """A model behind one interface. ``stream`` ends with exactly one :class:`ResponseDone`."""

    name: str

    async def complete(self, request: ModelRequest) -> ModelResponse: ...

    def stream(self, request: ModelRequest) -> AsyncIterator[StreamEvent]: ...

    async def validate_auth(self) -> None: ...

    async def aclose(self) -> None: ...
