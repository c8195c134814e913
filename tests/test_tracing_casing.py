"""One casing in the trace: every key snake_case, as the events' fields are named; traces that
older versions wrote in camelCase (``runId``, ``costUsd``) still read, in snake_case."""

from __future__ import annotations

import json
import re
from pathlib import Path

from tether import Agent, JsonlTracer, run_sync
from tether.testing import FunctionModel, call
from tether.tracing import read_trace

CAMEL = re.compile(r"[a-z][A-Z]")


def test_every_key_of_a_real_runs_trace_is_snake_case(tmp_path: Path) -> None:
    from tether import tool

    @tool(read_only=True)
    def stock(part: str) -> str:
        """Units in stock."""
        return "12"

    fm = FunctionModel(lambda m, r: call("c1", "stock", {"part": "SK-114"}) if len(m) == 1 else "12 units")
    r = run_sync(Agent(fm, tools=[stock]), "stock?", tracer=JsonlTracer(tmp_path))
    raw = [json.loads(line) for line in (tmp_path / f"{r.run_id}.jsonl").read_text().splitlines()]
    assert {line["type"] for line in raw} >= {"turn", "tool_start", "tool_result", "run_stopped"}
    assert [k for line in raw for k in line if CAMEL.search(k)] == []
    assert all(line["run_id"] == r.run_id for line in raw)
    assert raw[-1]["cost_usd"] == round(r.cost_usd, 8) and "cost_unknown_usd" in raw[-1]  # the trace rounds it


def test_an_older_camel_case_trace_reads_in_snake_case(tmp_path: Path) -> None:
    older = [
        {"runId": "run_1", "type": "turn", "turn": 1, "prompt_tokens": 8, "costUsd": 0.5},
        {"runId": "run_1", "callId": "c1", "toolName": "stock", "args": "{}", "type": "tool_start"},
        {"runId": "run_1", "type": "run_stopped", "costUsd": 0.5, "costUnknownUsd": 0.0, "tool_stats": {}},
    ]
    path = tmp_path / "run_1.jsonl"
    path.write_text("".join(json.dumps(line) + "\n" for line in older))
    lines = read_trace(path)
    assert lines[0] == {"run_id": "run_1", "type": "turn", "turn": 1, "prompt_tokens": 8, "cost_usd": 0.5}
    assert lines[1]["call_id"] == "c1" and lines[1]["tool_name"] == "stock"
    assert lines[2]["cost_unknown_usd"] == 0.0 and lines[2]["tool_stats"] == {}
