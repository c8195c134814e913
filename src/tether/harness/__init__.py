"""The harness: run state, the loop, limits, approvals, persistence."""

from tether.harness.agent import Agent, Stop, StopCondition, default_tool_error_text, has_tool_call, step_count_is
from tether.harness.loop import run, run_stream, run_sync
from tether.harness.state import RunState, Step, approve, pending_tool_calls, reject, steps
from tether.harness.store import RunStore

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
