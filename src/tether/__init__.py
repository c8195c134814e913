"""tether: a governed agent loop between a language model and a product.

Names are loaded on first use, so ``import tether`` is cheap and ``tether --help`` starts fast.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from tether._lazy import lazy_exports

__version__ = "0.1.0"

_EXPORTS: dict[str, str] = {
    "Agent": "tether.harness.agent",
    "Stop": "tether.harness.agent",
    "step_count_is": "tether.harness.agent",
    "has_tool_call": "tether.harness.agent",
    "run": "tether.harness.loop",
    "run_stream": "tether.harness.loop",
    "run_sync": "tether.harness.loop",
    "RunState": "tether.harness.state",
    "approve": "tether.harness.state",
    "reject": "tether.harness.state",
    "pending_tool_calls": "tether.harness.state",
    "RunStore": "tether.harness.store",
    "CancelSignal": "tether.cancel",
    "RunResult": "tether.status",
    "RunStatus": "tether.status",
    "Usage": "tether.usage",
    "Price": "tether.usage",
    "tool": "tether.tools.base",
    "Tool": "tether.tools.base",
    "ToolContext": "tether.tools.base",
    "ToolError": "tether.tools.base",
    "ToolResult": "tether.tools.base",
    "JsonlTracer": "tether.tracing",
}

__all__ = [
    "Agent",
    "CancelSignal",
    "JsonlTracer",
    "Price",
    "RunResult",
    "RunState",
    "RunStatus",
    "RunStore",
    "Stop",
    "Tool",
    "ToolContext",
    "ToolError",
    "ToolResult",
    "Usage",
    "__version__",
    "approve",
    "has_tool_call",
    "pending_tool_calls",
    "reject",
    "run",
    "run_stream",
    "run_sync",
    "step_count_is",
    "tool",
]


__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS, globals())


if TYPE_CHECKING:
    from tether.cancel import CancelSignal
    from tether.harness.agent import Agent, Stop, has_tool_call, step_count_is
    from tether.harness.loop import run, run_stream, run_sync
    from tether.harness.state import RunState, approve, pending_tool_calls, reject
    from tether.harness.store import RunStore
    from tether.status import RunResult, RunStatus
    from tether.tools.base import Tool, ToolContext, ToolError, ToolResult, tool
    from tether.tracing import JsonlTracer
    from tether.usage import Price, Usage
