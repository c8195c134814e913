"""Kill runs with SIGKILL at many points and resume them in a new process (law 3)."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import EXAMPLE_WORKSPACE, assert_pairing, wait_for_trace
from tether import RunStore
from tether.messages import ToolMessage

CHILD = Path(__file__).with_name("crash_child.py")


def child(
    home: Path, workspace: Path, log: Path, run_id: str, kill: str, *extra: str
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(CHILD), str(home), str(workspace), str(log), run_id, kill, *extra],
        capture_output=True,
        text=True,
        timeout=60,
    )


@pytest.fixture(scope="module")
def baseline(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    # The uncrashed run, once for the module: it is the same run every time (its own fresh copy of
    # the example workspace; nothing in it depends on where that copy is).
    base = tmp_path_factory.mktemp("baseline")
    home, log, workspace = base / "home", base / "base.log", base / "workspace"
    shutil.copytree(EXAMPLE_WORKSPACE, workspace)
    out = child(home, workspace, log, "run_base", "none")
    assert out.returncode == 0, out.stderr
    result = json.loads(out.stdout)
    state = RunStore(home / "runs").load("run_base")
    return {"result": result, "texts": [m.model_dump(exclude={"usage"}) for m in state.messages]}


KILL_POINTS = [
    "turn:1",
    "turn:2",
    "turn:3",
    "turn:4",  # right after a model reply was recorded
    "tool_start:1",
    "tool_start:2",  # about to run a read-only tool
    "tool_result:1",
    "tool_result:2",
    "tool_result:3",  # right after a result was recorded
    "mid:c1",
    "mid:c2",  # inside a read-only tool
]


@pytest.mark.parametrize("kill", KILL_POINTS)
def test_kill_and_resume_pays_nothing_twice(
    tmp_path: Path, workspace: Path, baseline: dict[str, Any], kill: str
) -> None:
    home, log = tmp_path / "home", tmp_path / "tools.log"
    first = child(home, workspace, log, "run_x", kill)
    assert first.returncode == -signal.SIGKILL, first.stderr
    runs = RunStore(home / "runs")
    recorded = (
        {m.call_id for m in runs.load("run_x").messages if isinstance(m, ToolMessage)}
        if runs.exists("run_x")
        else set()
    )
    second = child(home, workspace, log, "run_x", "none")
    assert second.returncode == 0, second.stderr
    result = json.loads(second.stdout)
    assert result["status"] == "completed"
    assert result["cost_usd"] == pytest.approx(baseline["result"]["cost_usd"], abs=1e-12)
    assert result["usage"] == baseline["result"]["usage"]
    state = RunStore(home / "runs").load("run_x")
    assert [m.model_dump(exclude={"usage"}) for m in state.messages] == baseline["texts"]
    assert_pairing(state.messages)
    finished = Counter(line.split()[1] for line in log.read_text().splitlines() if line.startswith("end"))
    # A read-only call the kill caught before its result was saved may run again (its ToolStart
    # event is traced as the tool starts, so a fast one can end first); one whose result was saved
    # never does, and the call with a side effect (c3, write_note) runs once whatever happens.
    assert set(finished) == {"c1", "c2", "c3"} and finished["c3"] == 1, finished
    assert all(finished[c] == 1 for c in recorded), ("a tool whose result was recorded ran again", finished)
    assert all(n <= 2 for n in finished.values()), finished


@pytest.mark.parametrize("kill", ["untraced:1", "untraced:3", "untraced:4", "turn:1", "turn:4"])
def test_every_paid_turn_is_in_the_trace_once_after_a_kill(
    tmp_path: Path, workspace: Path, baseline: dict[str, Any], kill: str
) -> None:
    # untraced:N: killed after turn N's reply was saved and before its trace line was written; the
    # resumed run writes it (marked restored). turn:N: killed after the line: it is not written twice.
    home, log = tmp_path / "home", tmp_path / "tools.log"
    assert child(home, workspace, log, "run_t", kill).returncode == -signal.SIGKILL
    out = child(home, workspace, log, "run_t", "none")
    result = json.loads(out.stdout)
    assert result["status"] == "completed", out.stderr
    trace = [json.loads(line) for line in (home / "traces" / "run_t.jsonl").read_text().splitlines()]
    turns = [t for t in trace if t["type"] == "turn"]
    assert [t["turn"] for t in turns] == list(range(1, result["turns"] + 1))
    restored = [t["turn"] for t in turns if t.get("restored")]
    assert restored == ([int(kill.split(":")[1])] if kill.startswith("untraced") else [])
    priced = sum(t["prompt_tokens"] * 2e-6 + t["completion_tokens"] * 12e-6 for t in turns)
    assert priced == pytest.approx(result["cost_usd"], abs=1e-12)
    assert turns[-1]["cost_usd"] == pytest.approx(result["cost_usd"], abs=1e-8)


def test_kill_inside_a_side_effecting_tool_asks_a_person(
    tmp_path: Path, workspace: Path, baseline: dict[str, Any]
) -> None:
    home, log = tmp_path / "home", tmp_path / "tools.log"
    assert child(home, workspace, log, "run_w", "mid:c3").returncode == -signal.SIGKILL
    second = child(home, workspace, log, "run_w", "none")
    result = json.loads(second.stdout)
    assert result["status"] == "interrupted"
    assert result["interruption"]["type"] == "outcome_unknown"
    assert result["interruption"]["idempotency_key"] == "run_w:c3"
    starts = [line for line in log.read_text().splitlines() if line == "start c3"]
    assert len(starts) == 1, "the write was not repeated without a person's decision"
    third = child(home, workspace, log, "run_w", "none", "approve")
    result = json.loads(third.stdout)
    assert result["status"] == "completed"
    assert result["cost_usd"] == pytest.approx(baseline["result"]["cost_usd"], abs=1e-12)


def test_kill_before_a_side_effecting_tool_starts_also_asks(tmp_path: Path, workspace: Path) -> None:
    # tool_start:3 is emitted after the intent for c3 was saved: the outcome is unknowable.
    home, log = tmp_path / "home", tmp_path / "tools.log"
    assert child(home, workspace, log, "run_s", "tool_start:3").returncode == -signal.SIGKILL
    result = json.loads(child(home, workspace, log, "run_s", "none").stdout)
    assert result["status"] == "interrupted" and result["interruption"]["type"] == "outcome_unknown"


def test_cli_run_killed_mid_tool_resumes(tmp_path: Path, workspace: Path) -> None:
    home = tmp_path / "home"
    env = {**os.environ, "TETHER_HOME": str(home)}
    cmd = ["tether", "run", "--model", "scripted/slow", "--cwd", str(workspace), "scan the archive", "--json"]
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    trace = wait_for_trace(home / "traces", '"tool_progress"')
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    run_id = trace.stem
    state = RunStore(home / "runs").load(run_id)
    assert state.status == "running" and state.turns == 1
    out = subprocess.run(["tether", "resume", run_id, "--json"], env=env, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    result = json.loads(out.stdout)
    assert result["status"] == "completed" and result["turns"] == 2
    fresh = subprocess.run(
        ["tether", "run", "--model", "scripted/slow", "--cwd", str(workspace), "scan the archive", "--json"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result["cost_usd"] == pytest.approx(json.loads(fresh.stdout)["cost_usd"], abs=1e-12)


def guarded_child(*args: Any) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "TETHER_TEST_GUARDED_WRITE": "1"}
    argv = [str(a) for a in args]
    return subprocess.run([sys.executable, str(CHILD), *argv], capture_output=True, text=True, timeout=60, env=env)


def test_an_approved_call_killed_mid_run_is_not_run_again_without_asking(tmp_path: Path, workspace: Path) -> None:
    home, log = tmp_path / "home", tmp_path / "tools.log"
    first = json.loads(guarded_child(home, workspace, log, "run_a", "none").stdout)
    assert first["interruption"]["type"] == "approval"
    # The person approves; the process dies inside the write.
    assert guarded_child(home, workspace, log, "run_a", "mid:c3", "approve").returncode == -signal.SIGKILL
    # A plain resume must not repeat it on the strength of the old approval.
    second = json.loads(guarded_child(home, workspace, log, "run_a", "none").stdout)
    assert second["status"] == "interrupted"
    assert second["interruption"]["type"] == "outcome_unknown"
    assert [line for line in log.read_text().splitlines() if line == "start c3"] == ["start c3"]
    # Approving the outcome-unknown stop means "run it again": exactly once more.
    third = json.loads(guarded_child(home, workspace, log, "run_a", "none", "approve").stdout)
    assert third["status"] == "completed"
    assert [line for line in log.read_text().splitlines() if line.endswith(" c3")] == ["start c3", "start c3", "end c3"]


def test_rejecting_an_unknown_outcome_records_the_persons_account(tmp_path: Path, workspace: Path) -> None:
    home, log = tmp_path / "home", tmp_path / "tools.log"
    assert child(home, workspace, log, "run_r", "mid:c3").returncode == -signal.SIGKILL
    assert json.loads(child(home, workspace, log, "run_r", "none").stdout)["interruption"]["type"] == "outcome_unknown"
    out = child(home, workspace, log, "run_r", "none", "reject:it went through, the note is in notes.txt")
    assert json.loads(out.stdout)["status"] == "completed"
    state = RunStore(home / "runs").load("run_r")
    (result,) = [m for m in state.messages if isinstance(m, ToolMessage) and m.call_id == "c3"]
    assert result.status == "rejected"
    assert "it was not run" not in result.text, "the call did start: the record must not deny it"
    assert "started before" in result.text and "it went through, the note is in notes.txt" in result.text


def test_a_request_in_flight_at_a_kill_is_counted_as_spent_unknown(
    tmp_path: Path, workspace: Path, baseline: dict[str, Any]
) -> None:
    home, log = tmp_path / "home", tmp_path / "tools.log"
    assert child(home, workspace, log, "run_m", "model:2").returncode == -signal.SIGKILL
    saved = RunStore(home / "runs").load("run_m")
    assert saved.call_in_flight is not None and saved.call_in_flight.max_tokens > 0
    out = child(home, workspace, log, "run_m", "none")
    result = json.loads(out.stdout)
    assert result["status"] == "completed"
    assert result["cost_usd"] == pytest.approx(baseline["result"]["cost_usd"], abs=1e-12)
    # The lost request's worst case: its estimated prompt at the input price plus max_tokens of output.
    lost = saved.call_in_flight
    assert result["cost_unknown_usd"] == pytest.approx(lost.max_cost_usd)
    assert result["cost_unknown_usd"] >= lost.max_tokens * 12e-6
    trace = [json.loads(line) for line in (home / "traces" / "run_m.jsonl").read_text().splitlines()]
    (spent,) = [t for t in trace if t["type"] == "spent_unknown"]
    assert spent["max_cost_usd"] == pytest.approx(lost.max_cost_usd)
    assert trace[-1]["type"] == "run_stopped" and trace[-1]["cost_unknown_usd"] == pytest.approx(lost.max_cost_usd)
