"""The server as a process: killed with SIGKILL mid-run and started again, every run is either
finished or resumable, and a resume from the API finishes it once; SIGTERM saves live runs."""

from __future__ import annotations

import os
import shutil
import signal
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.server.conftest import EXAMPLE_WORKSPACE, TEST_AGENTS, read_events, serve_process, wait_until

pytest.importorskip("fastapi")


class Process:
    def __init__(self, home: Path, workspace: Path) -> None:
        env = {**os.environ, "TETHER_HOME": str(home), "TETHER_TEST_WORKSPACE": str(workspace)}
        self.proc, self.url = serve_process("--agent", str(TEST_AGENTS), env=env)

    def client(self) -> httpx.Client:
        return httpx.Client(base_url=self.url, timeout=30)

    def stop(self, sig: int) -> int:
        self.proc.send_signal(sig)
        return self.proc.wait(30)


@pytest.fixture
def places(tmp_path: Path) -> Iterator[tuple[Path, Path]]:
    workspace = tmp_path / "workspace"
    shutil.copytree(EXAMPLE_WORKSPACE, workspace)
    yield tmp_path / "home", workspace


def _start_slow_run(c: httpx.Client) -> tuple[str, list[dict[str, Any]]]:
    sid = c.post("/v1/sessions", json={"agent": "slow"}).json()["session_id"]
    run_id = c.post(f"/v1/sessions/{sid}/messages", json={"text": "scan"}).json()["run_id"]
    seen = read_events(c, f"/v1/runs/{run_id}/events", until=lambda e: e["event"] == "tool_start")
    return run_id, seen


def test_a_server_killed_mid_run_leaves_it_resumable_and_a_resume_finishes_it(places: tuple[Path, Path]) -> None:
    home, workspace = places
    first = Process(home, workspace)
    with first.client() as c:
        run_id, seen = _start_slow_run(c)
    assert first.stop(signal.SIGKILL) == -signal.SIGKILL
    (workspace / "release").write_text("go")
    second = Process(home, workspace)
    try:
        with second.client() as c:
            run = c.get(f"/v1/runs/{run_id}").json()
            assert run["status"] == "running" and run["live"] is False and run["resumable"] is True
            assert "server stopped" in run["reason"]
            # what was streamed before the kill is still there, then a done that says it stopped
            replayed = read_events(c, f"/v1/runs/{run_id}/events", timeout=10)
            assert replayed[:-1] == seen and replayed[-1]["result"]["status"] == "interrupted"
            assert c.post(f"/v1/runs/{run_id}/resume").status_code == 202
            more = read_events(c, f"/v1/runs/{run_id}/events", last_event_id=seen[-1]["id"])
            assert more[0]["id"] == seen[-1]["id"] + 1
            result = more[-1]["result"]
            assert result["status"] == "completed" and "scan complete" in result["output"]
            # the turn paid before the kill is not paid again: one more model call after the tool
            assert result["turns"] == 2
            assert c.post(f"/v1/runs/{run_id}/resume").status_code == 409
    finally:
        second.stop(signal.SIGTERM)


def test_a_server_killed_before_a_runs_first_save_leaves_it_resumable(places: tuple[Path, Path]) -> None:
    home, workspace = places
    first = Process(home, workspace)
    with first.client() as c:
        runs = []
        for _ in range(2):  # two sessions, each with a run held by its extension before anything is saved
            sid = c.post("/v1/sessions", json={"agent": "gated"}).json()["session_id"]
            runs.append(
                c.post(f"/v1/sessions/{sid}/messages", json={"text": "Which file mentions a timeout?"}).json()["run_id"]
            )
        wait_until(
            lambda: (
                (workspace / "gate-reached").exists()
                and len((workspace / "gate-reached").read_text().splitlines()) == 2
            ),
            what="both runs at the gate",
        )
        assert all(c.get(f"/v1/runs/{r}").json()["status"] == "running" for r in runs)
    assert first.stop(signal.SIGKILL) == -signal.SIGKILL
    kept, lost = runs
    (home / "serve" / "starts" / f"{lost}.json").unlink()  # as if a power cut had lost the kept message
    (workspace / "open-gate").write_text("go")
    second = Process(home, workspace)
    try:
        with second.client() as c:
            assert c.get(f"/v1/runs/{kept}/transcript").json()["messages"] == []  # it never saved itself
            run = c.get(f"/v1/runs/{kept}").json()
            assert run["status"] == "interrupted" and run["live"] is False and run["resumable"] is True
            assert "before this run began" in run["reason"]
            session = c.get(f"/v1/sessions/{run['session_id']}").json()
            assert [(t["run_id"], t["resumable"]) for t in session["turns"]] == [(kept, True)]
            gone = c.get(f"/v1/runs/{lost}").json()
            assert (
                gone["status"] == "failed" and gone["resumable"] is False and "send the message again" in gone["reason"]
            )
            assert c.post(f"/v1/runs/{lost}/resume").status_code == 409
            assert c.post(f"/v1/runs/{kept}/resume").status_code == 202
            events = read_events(c, f"/v1/runs/{kept}/events")
            result = events[-1]["result"]
            assert result["status"] == "completed" and "timed out" in result["output"] and result["turns"] == 3
            messages = c.get(f"/v1/runs/{kept}/transcript").json()["messages"]
            assert messages[0]["role"] == "user" and [m["role"] for m in messages].count("user") == 1
            assert c.get(f"/v1/runs/{kept}").json()["status"] == "completed"
            assert not (home / "serve" / "starts" / f"{kept}.json").exists()
            assert c.post(f"/v1/runs/{kept}/resume").status_code == 409
    finally:
        second.stop(signal.SIGTERM)


def test_sigterm_saves_live_runs_as_interrupted_and_resumable(places: tuple[Path, Path]) -> None:
    home, workspace = places
    first = Process(home, workspace)
    import threading

    with first.client() as c:
        run_id, _ = _start_slow_run(c)
        # a client still follows the run: its stream ends with the run's done event, not at a timeout
        followed: list[dict[str, Any]] = []
        connected = threading.Event()  # set at the stream's first event: the follower is in

        def follow() -> None:
            seen = read_events(c, f"/v1/runs/{run_id}/events", until=lambda ev: connected.set() or False)
            followed.extend(seen)

        follower = threading.Thread(target=follow)
        follower.start()
        assert connected.wait(30)
        assert first.stop(signal.SIGTERM) in (0, -signal.SIGTERM)  # uvicorn re-raises it after a clean shutdown
        follower.join(30)
        # (had uvicorn waited out its graceful timeout first, it would have cut the stream: no done)
        assert followed and followed[-1]["event"] == "done", followed[-3:]
        assert "shutting down" in followed[-1]["result"]["reason"]
    second = Process(home, workspace)
    try:
        with second.client() as c:
            run = c.get(f"/v1/runs/{run_id}").json()
            assert run["status"] == "interrupted" and run["resumable"] and "shutting down" in run["reason"]
            events = read_events(c, f"/v1/runs/{run_id}/events", timeout=10)
            assert events[-1]["event"] == "done" and events[-1]["result"]["status"] == "interrupted"
            (workspace / "release").write_text("go")
            assert c.post(f"/v1/runs/{run_id}/resume").status_code == 202
            wait_until(lambda: c.get(f"/v1/runs/{run_id}").json()["status"] == "completed", what="the resumed run")
    finally:
        second.stop(signal.SIGTERM)


def _manager(home: Path) -> Any:
    from tether.harness.store import RunStore
    from tether.server.runs import RunManager
    from tether.server.store import SqliteServerStore
    from tether.sessions import JsonlSessionStore

    return RunManager(
        home=home,
        agents={},
        runs=RunStore(home / "runs"),
        sessions=JsonlSessionStore(home / "sessions"),
        store=SqliteServerStore(home / "serve" / "server.db"),
    )


def test_a_start_record_cut_short_reads_as_not_kept(tmp_path: Path) -> None:
    manager = _manager(tmp_path)
    manager.accept("r_kept", "Which file mentions a timeout? ✓")
    assert manager.unstarted("r_kept") == "Which file mentions a timeout? ✓"
    assert (manager.start_path("r_kept").stat().st_mode & 0o777) == 0o600
    manager.accept("r_cut", "a message")
    whole = manager.start_path("r_cut").read_bytes()
    for size in (0, 1, len(whole) // 2, len(whole) - 1):  # a kill or a power cut mid-write
        manager.start_path("r_cut").write_bytes(whole[:size])
        assert manager.unstarted("r_cut") is None  # shown failed ("send the message again"), not a crash


def test_a_link_planted_at_a_start_record_is_not_followed(tmp_path: Path, caplog: Any) -> None:
    manager = _manager(tmp_path)
    manager.accept("r_first", "makes the folder")
    target = tmp_path / "elsewhere.txt"
    target.write_text("untouched")
    manager.start_path("r_planted").symlink_to(target)
    manager.accept("r_planted", "a message")  # the run goes on, with a warning that says what it means
    assert target.read_text() == "untouched"
    assert "could not keep the message of run r_planted" in caplog.text


def test_a_start_record_that_is_a_link_or_a_pipe_is_not_read(tmp_path: Path) -> None:
    """Read at a restart, for each run accepted and never saved: a link would be followed to a
    file the server never wrote, and a named pipe would hold the server at its open forever."""
    manager = _manager(tmp_path)
    manager.accept("r_first", "makes the folder")
    elsewhere = tmp_path / "elsewhere.json"
    elsewhere.write_text('{"text": "someone else\'s words"}')
    manager.start_path("r_linked").symlink_to(elsewhere)
    os.mkfifo(manager.start_path("r_piped"))
    assert manager.unstarted("r_linked") is None  # shown failed ("send the message again")
    assert manager.unstarted("r_piped") is None
    assert manager.unstarted("r_first") == "makes the folder"
