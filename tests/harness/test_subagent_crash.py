"""Kill a parent run with SIGKILL while its sub-agent is mid-way, and resume it in a new process.

The child (``subagent_crash_child.py``) makes four model calls and three tool calls (two writes
that are not safe to repeat, one read) inside the parent's call ``p1``. Whatever the kill point,
the resumed run must make no recorded model call again (the child's or the parent's), run no write
twice, complete with the answer an uncrashed run gives, and cost exactly what its recorded calls
cost. The model calls and tool executions are counted from a log the processes append to.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import assert_pairing
from tether import RunStore
from tether.harness.subagent import children, saved_child
from tether.tracing import read_trace
from tether.usage import Price, Usage

CHILD = Path(__file__).with_name("subagent_crash_child.py")
RUN = "run_tree"
PRICES = {"parent": Price(input=2.0, output=12.0), "child": Price(input=1.0, output=4.0)}
EVERY_CALL = {("parent", 0), ("parent", 1), ("child", 0), ("child", 1), ("child", 2), ("child", 3)}


def usage(who: str, t: int) -> Usage:
    """The usage subagent_crash_child.py reports for WHO's call at turn T (the same rule)."""
    if who == "parent":
        return Usage(prompt_tokens=1000 + 100 * t, completion_tokens=50 + t)
    return Usage(prompt_tokens=400 + 10 * t, completion_tokens=30 + t)


def child(home: Path, log: Path, kill: str, *extra: str, approval: bool = False) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "TETHER_TEST_CHILD_APPROVAL": "1" if approval else "0"}
    return subprocess.run(
        [sys.executable, str(CHILD), str(home), str(log), RUN, kill, *extra],
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
    )


def finished(out: subprocess.CompletedProcess[str]) -> dict[str, Any]:
    assert out.returncode == 0, out.stderr
    result: dict[str, Any] = json.loads(out.stdout)
    return result


def model_calls(log: Path) -> Counter[tuple[str, int]]:
    return Counter(
        (w[1], int(w[2])) for w in (line.split() for line in log.read_text().splitlines()) if w[0] == "model"
    )


def tool_runs(log: Path, what: str) -> Counter[str]:
    return Counter(line.split()[1] for line in log.read_text().splitlines() if line.startswith(what + " "))


def priced(calls: set[tuple[str, int]], who: str | None = None) -> float:
    return sum(PRICES[w].cost(usage(w, t)) for w, t in calls if who in (None, w))


@pytest.fixture(scope="module")
def baseline(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    home = tmp_path_factory.mktemp("baseline")
    result = finished(child(home, home / "log", "none"))
    state = RunStore(home / "runs").load(RUN)
    return {"result": result, "messages": [m.model_dump(exclude={"usage"}) for m in state.messages]}


def test_the_uncrashed_tree(tmp_path: Path, baseline: dict[str, Any]) -> None:
    result = baseline["result"]
    assert result["status"] == "completed"
    assert result["output"] == "helper reports: the notes say: one / two"
    assert result["cost_usd"] == pytest.approx(priced(EVERY_CALL), abs=1e-12)


def check_resumed(
    home: Path, log: Path, baseline: dict[str, Any], result: dict[str, Any], read_starts: int = 1
) -> None:
    """What every resumed tree must show, whatever the kill point."""
    assert result["status"] == "completed", result["reason"]
    assert result["output"] == baseline["result"]["output"]
    calls = model_calls(log)
    assert set(calls) == EVERY_CALL
    assert [c for c, n in calls.items() if n > 1] == [], "a recorded model call was made again"
    assert tool_runs(log, "end") == {"c1": 1, "c2": 1, "c3": 1}
    assert tool_runs(log, "start") == {"c1": 1, "c2": 1, "c3": read_starts}, "a write ran twice"
    assert (home / "notes.txt").read_text() == "one\ntwo\n"
    assert result["cost_usd"] == pytest.approx(priced(EVERY_CALL), abs=1e-12)
    assert result["cost_usd"] == pytest.approx(baseline["result"]["cost_usd"], abs=1e-12)
    assert result["cost_unknown_usd"] == 0.0
    state = RunStore(home / "runs").load(RUN)
    assert [m.model_dump(exclude={"usage"}) for m in state.messages] == baseline["messages"]
    assert_pairing(state.messages)
    kept = children(state)["p1"]
    assert kept["done"] is True and kept["status"] == "completed"
    assert kept["cost_usd"] == pytest.approx(priced(EVERY_CALL, "child"), abs=1e-12)
    trace = read_trace(home / "traces" / f"{RUN}.jsonl")
    links = [line for line in trace if line["type"] == "subagent"]
    assert {line["child_run_id"] for line in links} == {kept["run_id"]}, "one child run, resumed, not a new one"
    assert all(line["call_id"] == "p1" for line in links)
    statuses = [line["status"] for line in links]
    assert statuses.count("completed") <= 1, "the child finished twice"
    if "completed" in statuses:
        assert "started" not in statuses[statuses.index("completed") :], "the child started again after it finished"
    assert trace[-1]["type"] == "run_stopped" and trace[-1]["cost_usd"] == pytest.approx(result["cost_usd"])


KILL_POINTS = [
    "turn:1",  # the parent's first reply recorded, the child not started
    "child_reply:1",  # the child's first reply recorded
    "child_result:c1",  # the child's first write recorded
    "child_reply:2",  # the child asked for the second write
    "child_result:c2",  # the second write recorded
    "child_reply:3",  # the child asked for the read
    "mid:c3",  # inside the child's read-only tool: it may run again
    "child_result:c3",  # the read recorded
    "child_reply:4",  # the child's final answer recorded, the child not yet stopped
    "kept",  # the child's answer kept in the parent, the parent's result not yet written
    "parent_result",  # the parent's result for the child's call recorded
]


@pytest.mark.parametrize("kill", KILL_POINTS)
def test_kill_during_a_child_and_resume_pays_nothing_twice(tmp_path: Path, baseline: dict[str, Any], kill: str) -> None:
    home, log = tmp_path, tmp_path / "log"
    first = child(home, log, kill)
    assert first.returncode == -signal.SIGKILL, first.stderr
    saved = RunStore(home / "runs").load(RUN)
    assert saved.status == "running"
    result = finished(child(home, log, "none"))
    check_resumed(home, log, baseline, result, read_starts=2 if kill == "mid:c3" else 1)


def test_kill_between_the_childs_last_save_and_its_kept_answer(tmp_path: Path, baseline: dict[str, Any]) -> None:
    # The child has answered and its final state (status completed) is saved inside the parent's;
    # the process dies before AgentTool keeps its answer. The resume must use that answer (and count
    # the child's cost), not run the child again nor turn the call into an error.
    home, log = tmp_path, tmp_path / "log"
    assert child(home, log, "child_completed").returncode == -signal.SIGKILL
    runs = RunStore(home / "runs")
    done = saved_child(runs.load(RUN), "p1", runs)
    assert done is not None and done.status == "completed"
    result = finished(child(home, log, "none"))
    check_resumed(home, log, baseline, result)


def test_kill_during_a_childs_model_request_counts_it_once_as_unknown(tmp_path: Path, baseline: dict[str, Any]) -> None:
    home, log = tmp_path, tmp_path / "log"
    assert child(home, log, "model:child:2").returncode == -signal.SIGKILL
    runs = RunStore(home / "runs")
    running = saved_child(runs.load(RUN), "p1", runs)
    assert running is not None
    lost = running.model_dump(mode="json")["call_in_flight"]
    assert lost is not None and lost["max_cost_usd"] > 0
    result = finished(child(home, log, "none"))
    assert result["status"] == "completed" and result["output"] == baseline["result"]["output"]
    calls = model_calls(log)
    # Only the request whose reply was lost is made again; every recorded one is made once.
    assert calls == {**dict.fromkeys(EVERY_CALL, 1), ("child", 2): 2}
    assert tool_runs(log, "start") == {"c1": 1, "c2": 1, "c3": 1}
    assert (home / "notes.txt").read_text() == "one\ntwo\n"
    assert result["cost_usd"] == pytest.approx(priced(EVERY_CALL), abs=1e-12)
    # The lost request is counted once, at its worst case, in the parent's unknown spend.
    assert result["cost_unknown_usd"] == pytest.approx(lost["max_cost_usd"])
    kept = children(RunStore(home / "runs").load(RUN))["p1"]
    assert kept["cost_usd"] == pytest.approx(priced(EVERY_CALL, "child"), abs=1e-12)


def test_kill_inside_a_childs_write_asks_a_person_through_the_parent(tmp_path: Path, baseline: dict[str, Any]) -> None:
    home, log = tmp_path, tmp_path / "log"
    assert child(home, log, "mid:c2").returncode == -signal.SIGKILL
    second = finished(child(home, log, "none"))
    assert second["status"] == "interrupted"
    waiting = second["interruption"]
    assert waiting["type"] == "subagent" and waiting["call_id"] == "p1" and waiting["tool_name"] == "helper"
    question = waiting["child"]
    assert question["type"] == "outcome_unknown" and question["call_id"] == "c2"
    assert question["idempotency_key"] == f"{waiting['child_run_id']}:c2"
    assert tool_runs(log, "start") == {"c1": 1, "c2": 1}, "the write was not repeated without a decision"
    assert model_calls(log) == dict.fromkeys({("parent", 0), ("child", 0), ("child", 1)}, 1)
    # Approving the parent's question answers the child's: run the write again, exactly once.
    third = finished(child(home, log, "none", "approve"))
    assert third["status"] == "completed" and third["output"] == baseline["result"]["output"]
    assert tool_runs(log, "start") == {"c1": 1, "c2": 2, "c3": 1}
    assert tool_runs(log, "end") == {"c1": 1, "c2": 1, "c3": 1}
    assert set(model_calls(log).values()) == {1} and set(model_calls(log)) == EVERY_CALL
    assert third["cost_usd"] == pytest.approx(priced(EVERY_CALL), abs=1e-12)


def test_an_approval_inside_a_child_resumes_correctly_after_a_crash(tmp_path: Path, baseline: dict[str, Any]) -> None:
    home, log = tmp_path, tmp_path / "log"
    first = finished(child(home, log, "none", approval=True))
    assert first["status"] == "interrupted"
    assert first["interruption"]["type"] == "subagent"
    assert first["interruption"]["child"]["type"] == "approval"
    assert first["interruption"]["child"]["call_id"] == "c1"
    assert tool_runs(log, "start") == {}
    # The person approves; the process dies right after the approved write's result is recorded.
    assert child(home, log, "child_result:c1", "approve", approval=True).returncode == -signal.SIGKILL
    # The resume asks about the next write, not the one already done.
    second = finished(child(home, log, "none", approval=True))
    assert second["status"] == "interrupted"
    assert second["interruption"]["child"]["type"] == "approval"
    assert second["interruption"]["child"]["call_id"] == "c2"
    assert tool_runs(log, "start") == {"c1": 1}
    third = finished(child(home, log, "none", "approve", approval=True))
    assert third["status"] == "completed" and third["output"] == baseline["result"]["output"]
    assert tool_runs(log, "start") == {"c1": 1, "c2": 1, "c3": 1}
    assert (home / "notes.txt").read_text() == "one\ntwo\n"
    calls = model_calls(log)
    assert set(calls) == EVERY_CALL and set(calls.values()) == {1}
    assert third["cost_usd"] == pytest.approx(priced(EVERY_CALL), abs=1e-12)
