"""Model providers behind one interface (see :mod:`tether.providers.base`)."""

from tether.providers.base import (
    ModelRequest,
    ModelResponse,
    Provider,
    ResponseDone,
    StreamEvent,
    StreamReasoning,
    StreamText,
    ToolDefinition,
)
from tether.providers.registry import ResolvedModel, canonical_model, resolve_provider

__all__ = [
    "ModelRequest",
    "ModelResponse",
    "Provider",
    "ResolvedModel",
    "ResponseDone",
    "StreamEvent",
    "StreamReasoning",
    "StreamText",
    "ToolDefinition",
    "canonical_model",
    "resolve_provider",
]
