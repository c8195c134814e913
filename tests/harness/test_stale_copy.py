"""A copy of a run behind the run as saved is refused: loaded twice and approved twice (in one
process or in two), the approved call runs once, and the second copy is told why it cannot go on."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.harness.stale_child import deleting_agent
from tether import RunState, RunStore, approve, run_sync
from tether.errors import StaleRunError
from tether.status import ApprovalInterruption

ROOT = Path(__file__).resolve().parents[2]


def waiting_run(store: Any, log: Path) -> str:
    """A run saved in ``store`` that waits for the approval of one deletion."""
    state = RunState()
    first = run_sync(deleting_agent(log), "clean up", state=state, store=store)
    assert isinstance(first.interruption, ApprovalInterruption)
    return state.run_id


def deletions(log: Path) -> list[str]:
    return log.read_text().splitlines() if log.exists() else []


@pytest.fixture
def store(backend: str, tmp_path: Path, request: pytest.FixtureRequest) -> Any:
    if backend == "sqlite":  # the file store (the backend fixture's name for the local one)
        return RunStore(tmp_path / "runs")
    from tether.postgres import database
    from tether.postgres.runs import PgRunStore

    return PgRunStore(database(request.getfixturevalue("pg_url")))


def test_two_copies_approved_run_the_call_once(store: Any, tmp_path: Path) -> None:
    log = tmp_path / "deleted.txt"
    run_id = waiting_run(store, log)
    one, two = store.load(run_id), store.load(run_id)
    approve(one)
    approve(two)
    assert run_sync(deleting_agent(log), state=one, store=store).status == "completed"
    assert deletions(log) == ["deleted a.log"]
    with pytest.raises(StaleRunError, match=r"this copy of it is at commit \d+.*nothing was saved or run") as caught:
        run_sync(deleting_agent(log), state=two, store=store)
    assert caught.value.copy < caught.value.current
    assert deletions(log) == ["deleted a.log"]  # not twice
    with pytest.raises(StaleRunError):  # nor does saving the stale copy directly overwrite the run
        store.save(two)
    saved = store.load(run_id)
    assert saved.status == "completed" and saved.messages == one.messages  # the stale copy wrote nothing


def test_a_copy_loaded_by_another_store_is_refused_after_this_one_moved_on(tmp_path: Path) -> None:
    """Two file stores on one folder stand for two processes: the first read the run before the
    second saved it, so what the first remembers of the run's files is out of date too (Postgres
    reads the run's row at each save)."""
    log = tmp_path / "deleted.txt"
    first_store, second_store = RunStore(tmp_path / "runs"), RunStore(tmp_path / "runs")
    run_id = waiting_run(first_store, log)
    early = first_store.load(run_id)
    later = second_store.load(run_id)
    approve(later)
    assert run_sync(deleting_agent(log), state=later, store=second_store).status == "completed"
    approve(early)
    with pytest.raises(StaleRunError):
        run_sync(deleting_agent(log), state=early, store=first_store)
    assert deletions(log) == ["deleted a.log"]
    # The up-to-date copy still goes on through the store that was behind.
    fresh = first_store.load(run_id)
    assert fresh.status == "completed" and fresh.messages == later.messages
    fresh.reason = "noted"
    first_store.save(fresh)
    assert second_store.load(run_id).reason == "noted"


def test_two_processes_approve_one_run_and_the_call_runs_once(tmp_path: Path) -> None:
    """A real race: process A loads the run and waits; this process approves and resumes it; then A
    approves its copy and resumes. A is refused with the reason, and the call ran once."""
    log, go = tmp_path / "deleted.txt", tmp_path / "go"
    store = RunStore(tmp_path / "runs")
    run_id = waiting_run(store, log)
    child = subprocess.Popen(
        [sys.executable, "-m", "tests.harness.stale_child", str(tmp_path / "runs"), run_id, str(log), str(go)],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert child.stdout is not None and child.stdout.readline().strip() == "loaded"
        mine = store.load(run_id)
        approve(mine)
        assert run_sync(deleting_agent(log), state=mine, store=store).status == "completed"
        go.touch()
        out, _ = child.communicate(timeout=60)
    finally:
        child.kill()
    assert child.returncode == 3, out
    assert "was saved since by another process or from another copy" in out
    assert deletions(log) == ["deleted a.log"]
    assert RunStore(tmp_path / "runs").load(run_id).messages == mine.messages


def test_a_new_run_does_not_take_over_a_saved_one(tmp_path: Path) -> None:
    """A state made afresh with the id of a saved run is a copy at commit 0: it cannot overwrite it."""
    log = tmp_path / "deleted.txt"
    store = RunStore(tmp_path / "runs")
    run_id = waiting_run(store, log)
    with pytest.raises(StaleRunError, match="is saved at commit"):
        run_sync(deleting_agent(log), "start over", state=RunState(run_id=run_id), store=store)
    assert isinstance(store.load(run_id).interruption, ApprovalInterruption)


def test_a_copied_run_folder_never_writes_into_the_original(tmp_path: Path) -> None:
    """A run's folder copied under another name still names the original in its header: loaded, its
    saves went to the original's id (so its files, from then on). Now the load says so."""
    import shutil

    from tether.errors import StoreError

    log = tmp_path / "deleted.txt"
    store = RunStore(tmp_path / "runs")
    run_id = waiting_run(store, log)
    shutil.copytree(tmp_path / "runs" / run_id, tmp_path / "runs" / "run_copy")
    with pytest.raises(StoreError, match=f"names run '{run_id}', as a copy of that run's folder would"):
        RunStore(tmp_path / "runs").load("run_copy")
    assert isinstance(store.load(run_id).interruption, ApprovalInterruption)
