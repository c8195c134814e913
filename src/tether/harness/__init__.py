"""The harness: run state, the loop, limits, approvals, persistence.

Names are loaded on first use (as in :mod:`tether`): importing the agent alone does not load the
loop or the run store.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from tether._lazy import lazy_exports

_EXPORTS: dict[str, str] = {
    "Agent": "tether.harness.agent",
    "Stop": "tether.harness.agent",
    "StopCondition": "tether.harness.agent",
    "default_tool_error_text": "tether.harness.agent",
    "has_tool_call": "tether.harness.agent",
    "step_count_is": "tether.harness.agent",
    "run": "tether.harness.loop",
    "run_stream": "tether.harness.loop",
    "run_sync": "tether.harness.loop",
    "RunState": "tether.harness.state",
    "Step": "tether.harness.state",
    "approve": "tether.harness.state",
    "pending_tool_calls": "tether.harness.state",
    "reject": "tether.harness.state",
    "steps": "tether.harness.state",
    "RunStore": "tether.harness.store",
}

__all__ = [
    "Agent",
    "RunState",
    "RunStore",
    "Step",
    "Stop",
    "StopCondition",
    "approve",
    "default_tool_error_text",
    "has_tool_call",
    "pending_tool_calls",
    "reject",
    "run",
    "run_stream",
    "run_sync",
    "step_count_is",
    "steps",
]


__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS, globals())


if TYPE_CHECKING:
    from tether.harness.agent import Agent, Stop, StopCondition, default_tool_error_text, has_tool_call, step_count_is
    from tether.harness.loop import run, run_stream, run_sync
    from tether.harness.state import RunState, Step, approve, pending_tool_calls, reject, steps
    from tether.harness.store import RunStore
