"""Two server processes on one tether home (``uvicorn --workers 2``, or two ``tether serve`` on one
``$TETHER_HOME``): each knows the runs the other drives as live, not as ones a restart cut."""

from __future__ import annotations

import os
import shutil
import signal
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.server.conftest import EXAMPLE_WORKSPACE, TEST_AGENTS, parse_sse, read_events, serve_process


class Server:
    def __init__(self, home: Path, workspace: Path) -> None:
        env = {**os.environ, "TETHER_HOME": str(home), "TETHER_TEST_WORKSPACE": str(workspace)}
        self.proc, self.url = serve_process("--agent", str(TEST_AGENTS), env=env)

    def client(self) -> httpx.Client:
        return httpx.Client(base_url=self.url, timeout=30)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(30)
            except Exception:
                self.proc.kill()
                self.proc.wait(10)


@pytest.fixture
def two(tmp_path: Path) -> Iterator[tuple[Server, Server, Path]]:
    workspace = tmp_path / "workspace"
    shutil.copytree(EXAMPLE_WORKSPACE, workspace)
    home = tmp_path / "home"
    a = Server(home, workspace)
    try:
        b = Server(home, workspace)
    except BaseException:
        a.stop()
        raise
    try:
        yield a, b, workspace
    finally:
        (workspace / "release").write_text("go")  # a run still waiting ends, so the servers stop at once
        a.stop()
        b.stop()


def _slow_run_on(c: httpx.Client) -> tuple[str, str]:
    sid = c.post("/v1/sessions", json={"agent": "slow"}).json()["session_id"]
    run_id = c.post(f"/v1/sessions/{sid}/messages", json={"text": "scan"}).json()["run_id"]
    read_events(c, f"/v1/runs/{run_id}/events", until=lambda e: e["event"] == "tool_start")
    return sid, run_id


def test_a_run_another_server_process_drives_is_running_there_not_cut(two: tuple[Server, Server, Path]) -> None:
    """Was: server B on the same home showed a run server A was driving as one a restart cut
    ("the server stopped while this run was running", resumable), and a new message in its session
    was taken (its run then failed to start on the session's lock) instead of a 409."""
    a, b, _ = two
    with a.client() as ca, b.client() as cb:
        sid, run_id = _slow_run_on(ca)
        seen_by_a = ca.get(f"/v1/runs/{run_id}").json()
        assert seen_by_a["status"] == "running" and seen_by_a["resumable"] is False
        run = cb.get(f"/v1/runs/{run_id}").json()
        assert run["status"] == "running", run
        assert run["resumable"] is False and "stopped" not in (run["reason"] or ""), run
        view = next(t for t in cb.get(f"/v1/sessions/{sid}").json()["turns"] if t["run_id"] == run_id)
        assert view["status"] == "running" and view["resumable"] is False, view
        # what A says to a resume and to a second message, B says too
        for c in (ca, cb):
            resumed = c.post(f"/v1/runs/{run_id}/resume")
            assert resumed.status_code == 409 and "already running" in resumed.text, resumed.text
            sent = c.post(f"/v1/sessions/{sid}/messages", json={"text": "and another"})
            assert sent.status_code == 409 and f"still answering (run {run_id})" in sent.text, sent.text


def test_a_stream_on_another_process_follows_the_run_to_its_real_done(two: tuple[Server, Server, Path]) -> None:
    """Was: a client whose event stream landed on server B, while server A drove the run, got what
    the log held so far and then the stream ended (a browser's EventSource then read it again and
    again) without the run's done."""
    a, b, workspace = two
    with a.client() as ca, b.client() as cb:
        _, run_id = _slow_run_on(ca)
        with cb.stream("GET", f"/v1/runs/{run_id}/events", headers={"Accept": "text/event-stream"}, timeout=30) as r:
            on_b = []
            for ev in parse_sse(r.iter_lines()):
                on_b.append(ev)
                if ev["event"] == "tool_start":
                    (workspace / "release").write_text("go")  # the run goes on in A now
        on_a = read_events(ca, f"/v1/runs/{run_id}/events")
        assert on_b == on_a
        assert on_b[-1]["event"] == "done" and on_b[-1]["result"]["status"] == "completed", on_b[-1]
        assert "scan complete" in on_b[-1]["result"]["output"]


def test_a_stop_posted_to_another_process_stops_the_run_where_it_runs(two: tuple[Server, Server, Path]) -> None:
    """Was: a Stop posted to server B of a run server A drives was a 409 "run ... is not running"
    (and, before B knew the run live, nothing at all stopped it): only A could stop it."""
    a, b, _ = two
    with a.client() as ca, b.client() as cb:
        _, run_id = _slow_run_on(ca)
        stopped = cb.post(f"/v1/runs/{run_id}/cancel")
        assert stopped.status_code == 202, stopped.text
        assert stopped.json()["live"] is False, stopped.json()  # B waited for A to let the run go
        for c in (ca, cb):
            run = c.get(f"/v1/runs/{run_id}").json()
            assert run["status"] == "interrupted" and run["resumable"] is True, run
            assert "stopped by the user" in run["reason"], run
        events = read_events(cb, f"/v1/runs/{run_id}/events")
        assert events[-1]["event"] == "done" and events[-1]["result"]["status"] == "interrupted"
        assert cb.post(f"/v1/runs/{run_id}/cancel").status_code == 409  # stopped: nothing to stop


def test_the_events_of_a_run_another_process_drives_are_not_pruned(tmp_path: Path) -> None:
    """Was: a server pruned the event log of a run another process on its home drove, once the log
    had been quiet longer than keep_events_days (a run waiting on a long call), as a finished run's:
    that process then went on numbering after events its clients could no longer read."""
    from tether.harness.store import RunStore
    from tether.server.runs import RunManager

    home = tmp_path / "home"
    runs = RunStore(home / "runs")
    manager = RunManager(home=home, agents={}, runs=runs, sessions=Any, store=Any)
    log = manager.log_path("run_elsewhere")
    log.parent.mkdir(parents=True)
    log.write_text('1\tstarted\t{"type": "started"}\n')
    with runs.lock("run_elsewhere"):  # as the process driving it holds it
        assert manager.prune_events(0, now=time.time() + 10) == 0
        assert log.read_text().startswith("1\tstarted")
    assert manager.prune_events(0, now=time.time() + 10) == 1  # nobody holds it: a finished run's
