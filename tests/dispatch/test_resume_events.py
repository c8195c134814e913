"""A worker killed at any point of a turn loses no event of the stream (issue 27, item 9).

A real process drives the run and SIGKILLs itself at a chosen point: in the model call of a turn
(after the previous turn and its tools were saved) or inside a tool. Its event writer is either as
shipped or held back (a database slower than the run: none of its events is written before the
kill). Another worker then resumes the run, and the stream is compared with the transcript: every
turn and every tool call appears in it exactly once."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from tether import Agent, tool
from tether.messages import AssistantMessage, ToolMessage
from tether.testing import FunctionModel, Reply, call

CHILD = r"""
import os, signal, sys, time
from pathlib import Path
sys.path.insert(0, sys.argv[4])
from tests.dispatch.test_resume_events import agent
from tether.dispatch import jobs
from tether.dispatch.worker import Worker
from tether.postgres.db import database

url, run_id, kill = sys.argv[1], sys.argv[2], sys.argv[3]
if os.environ.get("HOLD_EVENTS") == "1":  # the database is slower than the run
    real = jobs.EventWriter._write
    jobs.EventWriter._write = lambda self: (time.sleep(60), real(self))
worker = Worker(home=Path(sys.argv[5]), agents={"k": agent(kill)}, db=database(url))
worker.drive(run_id)
sys.exit(3)  # the kill never came
"""


def agent(kill: str = "") -> Agent:
    """Three turns: look (c0), look (c1), answer. ``kill`` names where the process dies."""

    @tool(read_only=True)
    def look(what: str) -> str:
        """Look at something."""
        if kill == f"tool:{what}":
            os.kill(os.getpid(), 9)
        return f"saw {what}"

    def reply(messages: list, request: object) -> Reply:
        done = sum(m.role == "tool" for m in messages)
        if kill == f"model:{done + 1}":
            os.kill(os.getpid(), 9)
        return call(f"c{done}", "look", {"what": f"c{done}"}) if done < 2 else Reply(text="all seen")

    return Agent(FunctionModel(reply), tools=[look], max_turns=6)


@pytest.mark.parametrize("hold", ["1", "0"])
@pytest.mark.parametrize("kill", ["model:2", "model:3", "tool:c0", "tool:c1"])
def test_a_worker_killed_mid_turn_leaves_every_turn_and_call_in_the_stream_once(
    cluster, pg_url: str, tmp_path: Path, kill: str, hold: str
) -> None:
    c = cluster()
    run_id = f"r_{kill.replace(':', '_')}_{hold}"
    c.worker.jobs.enqueue(
        run_id=run_id,
        session_id=f"s_{run_id}",
        owner="local",
        agent="k",
        kind="start",
        prompt="look twice",
        chosen={},
        config={"message_id": "m1", "trace_id": "t" * 32},
    )
    root = str(Path(__file__).resolve().parents[2])
    child = subprocess.run(
        [sys.executable, "-c", CHILD, pg_url, run_id, kill, root, str(tmp_path / "child")],
        env={**os.environ, "HOLD_EVENTS": hold},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert child.returncode == -9, child.stderr[-2000:]
    c.worker.agents["k"] = agent()
    assert c.worker.drive(run_id) == "driven"

    state = c.worker.runs.load(run_id)
    assert state.status == "completed" and state.turns == 3
    events = [(kind, json.loads(data)) for _, kind, data in c.worker.jobs.events_after(run_id, 0, 1000)]
    turns = Counter(d["turn"] for k, d in events if k == "turn")
    starts = Counter(d["call_id"] for k, d in events if k == "tool_start")
    results = Counter(d["call_id"] for k, d in events if k == "tool_result")
    calls = [c.id for m in state.messages if isinstance(m, AssistantMessage) for c in m.tool_calls]
    answered = [m.call_id for m in state.messages if isinstance(m, ToolMessage)]
    assert turns == Counter({1: 1, 2: 1, 3: 1}), events
    assert starts == Counter(calls) == Counter({"c0": 1, "c1": 1}), events
    assert results == Counter(answered) == Counter({"c0": 1, "c1": 1}), events
    assert [k for k, _ in events].count("done") == 1 and events[-1][0] == "done"
    # each call's start comes before its result
    order = [(k, d.get("call_id")) for k, d in events if k in ("tool_start", "tool_result")]
    for call_id in ("c0", "c1"):
        assert order.index(("tool_start", call_id)) < order.index(("tool_result", call_id))
