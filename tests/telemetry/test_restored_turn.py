"""A reply saved by a process killed before its trace line was written: the resumed run writes its
``turn`` line and its chat span (the kill itself is tested in tests/harness/test_crash.py)."""

from __future__ import annotations

import asyncio
from pathlib import Path

from tests.telemetry.conftest import by_name, flushed
from tether import Agent, RunState, approve, run
from tether.messages import AssistantMessage
from tether.telemetry import Telemetry, trace_id_for
from tether.testing.otlp import OtlpReceiver
from tether.tools.files import FILE_TOOLS
from tether.tracing import FanoutTracer, JsonlTracer, read_trace


def test_the_resumed_run_traces_the_turn_the_killed_process_did_not(
    telemetry: Telemetry, receiver: OtlpReceiver, tmp_path: Path
) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "old.log").write_text("old\n")
    agent = Agent("scripted/destructive", tools=FILE_TOOLS, cwd=ws)
    state = RunState()
    first = asyncio.run(run(agent, "free some space", state=state, tracer=JsonlTracer(tmp_path / "traces")))
    assert first.interruption is not None and first.interruption.type == "approval" and state.traced_turns == 2
    # As a kill between saving the reply and writing its line leaves the record: one turn short.
    path = tmp_path / "traces" / f"{state.run_id}.jsonl"
    lines = path.read_text().splitlines()
    last = max(i for i, line in enumerate(lines) if '"type":"turn"' in line)
    path.write_text("".join(line + "\n" for i, line in enumerate(lines) if i != last))
    state.traced_turns = 1
    reply = state.messages[-1]
    approve(state)
    trace_id = trace_id_for("s", state.run_id)
    otel = telemetry.tracer(trace_id=trace_id, resumed=True)
    result = asyncio.run(run(agent, state=state, tracer=FanoutTracer(JsonlTracer(tmp_path / "traces"), otel)))
    assert result.status == "completed" and result.turns == 3
    turns = [t for t in read_trace(path) if t["type"] == "turn"]
    assert [(t["turn"], t.get("restored", False)) for t in turns] == [(1, False), (2, True), (3, False)]
    assert isinstance(reply, AssistantMessage) and reply.usage is not None
    assert (turns[1]["prompt_tokens"], turns[1]["completion_tokens"]) == (
        reply.usage.prompt_tokens,
        reply.usage.completion_tokens,
    )
    chats = by_name(flushed(telemetry, receiver, trace_id, 3), "chat")
    assert [(c["attributes"]["tether.turn"], c["attributes"].get("tether.turn_restored")) for c in chats] == [
        (2, True),
        (3, None),
    ]
