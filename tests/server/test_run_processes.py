"""Runs driven in processes of their own (``run_processes``): the API behaves as with runs in the
server's process (the run tests of test_api.py again, below), the runs are really driven there,
and a run process that dies, a server killed or stopped, and a run process that cannot start
each leave every run ended or resumable, and no process behind."""

from __future__ import annotations

import functools
import os
import shutil
import signal
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.server import test_api as _api
from tests.server.conftest import EXAMPLE_WORKSPACE, read_events, serve_process, wait_until

pytest.importorskip(
    "fastapi", reason="the server needs the serve extra: pip install '.[serve]' (the test extra has it)"
)

# The API's run tests, each against a server whose runs go to two run processes.
for _name in (
    "test_a_message_starts_a_run_whose_events_stream_with_ids_and_end_with_done",
    "test_posting_with_accept_event_stream_streams_the_run_in_the_response",
    "test_the_same_message_id_never_starts_a_second_run",
    "test_a_session_answers_one_message_at_a_time",
    "test_reconnecting_with_last_event_id_gets_exactly_what_was_missed",
    "test_an_approval_is_bound_to_the_waiting_call_and_its_arguments",
    "test_a_rejection_with_a_reason_reaches_the_model",
    "test_an_approval_with_a_reason_is_recorded_in_words",
    "test_cancel_stops_a_live_run_resumably_and_resume_finishes_it",
    "test_tether_runs_shows_the_prompt_of_a_run_made_through_the_server",
    "test_feedback_is_joined_to_the_run_and_trace_that_earned_it",
    "test_a_configurator_offers_buttons_then_a_form_that_keeps_earlier_choices",
    "test_stop_says_who_stopped_the_run_in_words",
    "test_a_message_refused_because_another_node_started_a_run_leaves_no_failed_turn",
):
    globals()[_name] = getattr(_api, _name)


@pytest.fixture
def served(served: Callable[..., Any]) -> Callable[..., Any]:
    """The conftest's server, its runs in two processes of their own."""
    return functools.partial(served, run_processes=2)


# An agent whose one tool notes the process that runs it and waits for the test (at most 20 s).
PID_AGENTS = """
import os, time
from tether import Agent, tool

WORKSPACE = os.environ["TETHER_TEST_PID_WORKSPACE"]
if os.environ.get("TETHER_TEST_FAIL_IN_RUN_PROCESS") and os.getpid() != int(os.environ["TETHER_TEST_SERVER_PID"]):
    raise RuntimeError("this run process has no GPU")


@tool(read_only=True)
def scan_archive() -> str:
    \"\"\"Scans the archive.\"\"\"
    with open(os.path.join(WORKSPACE, "pids"), "a") as f:
        f.write(f"{os.getpid()}\\n")
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline and not os.path.exists(os.path.join(WORKSPACE, "release")):
        time.sleep(0.02)
    return "scan complete: 3 archives, no errors"


agents = {"slow": Agent("scripted/slow", tools=[scan_archive], cwd=WORKSPACE, max_turns=10)}
"""


@pytest.fixture
def pid_agents(tmp_path: Path) -> Iterator[tuple[Path, Path]]:
    workspace = tmp_path / "pid-workspace"
    shutil.copytree(EXAMPLE_WORKSPACE, workspace)
    module = tmp_path / "pid_agents.py"
    module.write_text(PID_AGENTS)
    os.environ["TETHER_TEST_PID_WORKSPACE"] = str(workspace)  # the run processes inherit it
    yield module, workspace
    del os.environ["TETHER_TEST_PID_WORKSPACE"]


def _start_slow(c: httpx.Client) -> tuple[str, list[dict[str, Any]]]:
    sid = c.post("/v1/sessions", json={"agent": "slow"}).json()["session_id"]
    run_id = c.post(f"/v1/sessions/{sid}/messages", json={"text": "scan"}).json()["run_id"]
    seen = read_events(c, f"/v1/runs/{run_id}/events", until=lambda e: e["event"] == "tool_start")
    return run_id, seen


def _pids(workspace: Path, n: int) -> list[int]:
    path = workspace / "pids"
    wait_until(lambda: path.exists() and len(path.read_text().split()) >= n, what=f"{n} tool calls")
    return [int(x) for x in path.read_text().split()]


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"


def test_runs_are_driven_in_the_run_processes_spread_over_them(
    served: Callable[..., Any], pid_agents: tuple[Path, Path]
) -> None:
    module, workspace = pid_agents
    s = served(agents_module=module)
    pool = s.app.state.core.manager.processes.pids()
    assert len(pool) == 2 and os.getpid() not in pool
    with s.client() as c:
        runs = [_start_slow(c)[0] for _ in range(4)]
        pids = _pids(workspace, 4)
        assert sorted(set(pids)) == sorted(pool) and sorted(pids.count(p) for p in pool) == [2, 2]
        (workspace / "release").write_text("go")
        for run_id in runs:
            done = read_events(c, f"/v1/runs/{run_id}/events")[-1]
            assert done["result"]["status"] == "completed" and "scan complete" in done["result"]["output"]


def test_a_run_process_killed_mid_run_ends_its_runs_resumably_and_a_new_one_finishes_them(
    served: Callable[..., Any], pid_agents: tuple[Path, Path]
) -> None:
    module, workspace = pid_agents
    s = served(agents_module=module, run_processes=1)
    with s.client() as c:
        run_id, seen = _start_slow(c)
        [pid] = _pids(workspace, 1)
        os.kill(pid, signal.SIGKILL)
        events = read_events(c, f"/v1/runs/{run_id}/events", timeout=15)
        assert events[: len(seen)] == seen
        done = events[-1]
        assert done["event"] == "done" and done["result"]["status"] == "interrupted"
        assert f"pid {pid}" in done["result"]["reason"] and "exit code -9" in done["result"]["reason"]
        run = c.get(f"/v1/runs/{run_id}").json()
        assert run["live"] is False and run["resumable"] is True
        (workspace / "release").write_text("go")
        assert c.post(f"/v1/runs/{run_id}/resume").status_code == 202
        result = read_events(c, f"/v1/runs/{run_id}/events", last_event_id=done["id"])[-1]["result"]
        # the turn paid before the kill is not paid again: one more model call after the tool
        assert result["status"] == "completed" and result["turns"] == 2, result
        second = _pids(workspace, 2)[1]
        assert second != pid and s.app.state.core.manager.processes.pids() == [second]
        assert c.get("/healthz").json() == {"ok": True, "live_runs": 0, "run_processes": 1}


def test_a_run_process_that_cannot_start_ends_each_run_saying_why(
    served: Callable[..., Any], pid_agents: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    module, workspace = pid_agents
    monkeypatch.setenv("TETHER_TEST_FAIL_IN_RUN_PROCESS", "1")
    monkeypatch.setenv("TETHER_TEST_SERVER_PID", str(os.getpid()))
    s = served(agents_module=module, run_processes=1)
    with s.client() as c:
        for _ in range(2):  # and again with the next process, not a hang
            sid = c.post("/v1/sessions", json={"agent": "slow"}).json()["session_id"]
            run_id = c.post(f"/v1/sessions/{sid}/messages", json={"text": "scan"}).json()["run_id"]
            done = read_events(c, f"/v1/runs/{run_id}/events", timeout=20)[-1]
            assert done["event"] == "done" and "this run process has no GPU" in done["result"]["reason"]
            assert c.get(f"/v1/runs/{run_id}").json()["resumable"] is True
        assert c.get("/healthz").json()["live_runs"] == 0
    assert not (workspace / "pids").exists()


def test_a_prompt_larger_than_a_pipe_line_reaches_the_run_process(served: Callable[..., Any]) -> None:
    s = served(run_processes=1)
    text = "Which file mentions a timeout? " + "x" * 150_000  # the API takes 200,000; a line is 64 KiB
    with s.client() as c:
        sid = c.post("/v1/sessions", json={"agent": "plan"}).json()["session_id"]
        run_id = c.post(f"/v1/sessions/{sid}/messages", json={"text": text}).json()["run_id"]
        assert read_events(c, f"/v1/runs/{run_id}/events")[-1]["result"]["status"] == "completed"
        first = c.get(f"/v1/runs/{run_id}/transcript").json()["messages"][0]
        assert first["role"] == "user" and len(str(first["content"])) >= len(text)


def test_agents_given_as_objects_cannot_go_to_run_processes(tmp_path: Path) -> None:
    from tether import Agent
    from tether.config import load_settings
    from tether.errors import ConfigError
    from tether.server.app import create_app

    with pytest.raises(ConfigError, match="each run process can build again"):
        create_app(load_settings(tmp_path), agents={"a": Agent("scripted/plan")}, run_processes=1)


# --- the server as a process ----------------------------------------------------------------------


class Serving:
    def __init__(self, module: Path, workspace: Path, home: Path) -> None:
        env = {**os.environ, "TETHER_HOME": str(home), "TETHER_TEST_PID_WORKSPACE": str(workspace)}
        self.proc, self.url = serve_process("--agent", str(module), "--run-processes", "2", env=env)

    def children(self) -> list[int]:
        from bench.serve import _children

        return _children(self.proc.pid)


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGKILL])
def test_a_server_stopped_or_killed_leaves_no_run_process_and_its_runs_resumable(
    pid_agents: tuple[Path, Path], tmp_path: Path, sig: int
) -> None:
    from tether.harness.store import RunStore

    module, workspace = pid_agents
    server = Serving(module, workspace, tmp_path / "home")
    children = wait_until(lambda: len(server.children()) == 2 and server.children(), what="two run processes")
    with httpx.Client(base_url=server.url, timeout=30) as c:
        run_id, _ = _start_slow(c)
        _pids(workspace, 1)
    server.proc.send_signal(sig)
    runs = RunStore(tmp_path / "home" / "runs")
    # its run process saves it stopped, with the server only stopping, or already gone
    wait_until(lambda: runs.exists(run_id) and runs.load(run_id).status == "interrupted", what="the run saved")
    (workspace / "release").write_text("go")  # the tool's thread ends (a process waits for its threads)
    server.proc.wait(30)
    deadline = time.monotonic() + 20
    while any(_alive(p) for p in children) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not any(_alive(p) for p in children), "a run process outlived its server"
    again = Serving(module, workspace, tmp_path / "home")
    try:
        with httpx.Client(base_url=again.url, timeout=30) as c:
            run = c.get(f"/v1/runs/{run_id}").json()
            assert run["live"] is False and run["resumable"] is True, run
            assert "shutting down" in run["reason"], run
            assert c.post(f"/v1/runs/{run_id}/resume").status_code == 202
            result = read_events(c, f"/v1/runs/{run_id}/events")[-1]["result"]
            assert result["status"] == "completed" and result["turns"] == 2, result
    finally:
        again.proc.send_signal(signal.SIGTERM)
        again.proc.wait(30)


def test_run_processes_is_checked_on_the_command_line(tmp_path: Path) -> None:
    import subprocess
    import sys

    env = {**os.environ, "TETHER_HOME": str(tmp_path)}
    out = subprocess.run(
        [sys.executable, "-m", "tether", "serve", "--run-processes", "-1"], env=env, capture_output=True, text=True
    )
    assert out.returncode == 2 and "is not a number of processes (0-64)" in out.stderr


def test_a_run_process_imports_nothing_from_the_working_folder(tmp_path: Path) -> None:
    """The default agent works in the server's folder, where a model can write files: a ``json.py``
    planted there must not be imported by the next run process in place of the standard library."""
    import subprocess
    import sys

    work = tmp_path / "work"
    work.mkdir()
    marker = tmp_path / "planted-code-ran"
    (work / "json.py").write_text(f"open({str(marker)!r}, 'w').close()\nraise SystemExit('planted')\n")
    tether = Path(sys.executable).with_name("tether")  # the console script, as a user runs it
    env = {**os.environ, "TETHER_HOME": str(tmp_path / "home")}
    proc = subprocess.Popen(
        [str(tether), "serve", "--port", "0", "--model", "scripted/plan", "--run-processes", "1"],
        cwd=work,
        env=env,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stderr is not None
        line = proc.stderr.readline()
        assert "listening on" in line, line + proc.stderr.read()
        url = line.split("listening on ", 1)[1].split("/ ", 1)[0]
        with httpx.Client(base_url=url, timeout=30) as c:
            sid = c.post("/v1/sessions", json={}).json()["session_id"]
            run_id = c.post(f"/v1/sessions/{sid}/messages", json={"text": "Which file mentions a timeout?"}).json()
            done = read_events(c, f"/v1/runs/{run_id['run_id']}/events")[-1]
            assert done["result"]["status"] == "completed", done
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(30)
    assert not marker.exists()
