"""Tools: the protocol, ``@tool``, and the built-ins."""

from tether.tools.base import (
    FunctionTool,
    Tool,
    ToolContext,
    ToolError,
    ToolInputError,
    ToolResult,
    tool,
    validate_arguments,
)

__all__ = [
    "FunctionTool",
    "Tool",
    "ToolContext",
    "ToolError",
    "ToolInputError",
    "ToolResult",
    "tool",
    "validate_arguments",
]
