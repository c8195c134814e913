"""The trace explains a run to someone who was not there: a person's decisions and a cut tool are in it."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from tether import Agent, CancelSignal, RunState, approve, reject, run
from tether.tools.demo import DEMO_TOOLS
from tether.tools.files import FILE_TOOLS
from tether.tracing import JsonlTracer, read_trace


def lines(tmp_path: Path, run_id: str) -> list[dict[str, Any]]:
    return read_trace(tmp_path / "traces" / f"{run_id}.jsonl")


def test_approve_and_reject_decisions_are_trace_lines(workspace: Path, tmp_path: Path) -> None:
    agent = Agent("scripted/destructive", tools=FILE_TOOLS, cwd=workspace)
    for decide, expected in ((approve, "approved"), (lambda s: reject(s, reason="keep it for the audit"), "rejected")):
        state = RunState()
        first = asyncio.run(run(agent, "free some space", state=state, tracer=JsonlTracer(tmp_path / "traces")))
        assert first.interruption is not None and first.interruption.type == "approval"
        decide(state)
        asyncio.run(run(agent, state=state, tracer=JsonlTracer(tmp_path / "traces")))
        (decision,) = [t for t in lines(tmp_path, state.run_id) if t["type"] == "decision"]
        assert decision["decision"] == expected and decision["tool_name"] == "delete_file"
        assert decision["call_id"] == first.interruption.call_id
        if expected == "rejected":
            assert decision["reason"] == "keep it for the audit"


def test_a_cancelled_tool_has_a_cancelled_result_line(workspace: Path, tmp_path: Path) -> None:
    signal = CancelSignal()

    async def go() -> Any:
        asyncio.get_running_loop().call_later(0.3, signal.cancel, "user pressed Stop")
        return await run(
            Agent("scripted/slow", tools=[*FILE_TOOLS, *DEMO_TOOLS], cwd=workspace),
            "scan",
            signal=signal,
            tracer=JsonlTracer(tmp_path / "traces"),
        )

    result = asyncio.run(go())
    trace = lines(tmp_path, result.run_id)
    started = [t for t in trace if t["type"] == "tool_start"]
    ended = [t for t in trace if t["type"] == "tool_result"]
    assert [t["call_id"] for t in started] == [t["call_id"] for t in ended], "every start has an end line"
    assert ended[-1]["status"] == "cancelled" and ended[-1]["ok"] is False
    assert trace[-1]["type"] == "run_stopped" and trace[-1]["interruption"]["type"] == "cancelled"
