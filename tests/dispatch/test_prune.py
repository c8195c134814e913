"""A finished run's replayable events are forgotten after ``[dispatch] keep_events_days``, never a
live run's nor a recent one's, by every worker at once without harm."""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest

pytest.importorskip("psycopg")

DAY = 86400.0


@pytest.fixture
def jobs(pg_url: str) -> Any:
    from tether.dispatch.jobs import Jobs
    from tether.postgres.db import Database

    return Jobs(Database(pg_url, max_size=4))


def job(jobs: Any, run_id: str, *, done: bool, ended_days_ago: float = 0.0, events: int = 3) -> None:
    jobs.enqueue(run_id=run_id, session_id=f"s-{run_id}", owner="u", agent="a", kind="start", prompt="hi", chosen={})
    with jobs.db.tx() as conn:
        for i in range(1, events + 1):
            conn.execute(
                "INSERT INTO tether_events (run_id, id, kind, data) VALUES (%s,%s,%s,%s)",
                (run_id, i, "done" if done and i == events else "text_delta", "{}"),
            )
    if done:
        jobs.finish(run_id)
        jobs.db.execute(
            "UPDATE tether_jobs SET updated_at = %s WHERE run_id = %s", (time.time() - ended_days_ago * DAY, run_id)
        )


def test_only_runs_that_ended_before_the_cutoff_are_forgotten(jobs: Any) -> None:
    job(jobs, "old", done=True, ended_days_ago=9, events=40)
    job(jobs, "recent", done=True, ended_days_ago=2)
    job(jobs, "live", done=False)  # started long ago and still going: never pruned
    jobs.db.execute("UPDATE tether_jobs SET updated_at = %s WHERE run_id = 'live'", (time.time() - 30 * DAY,))

    assert jobs.prune(7 * DAY) == 40
    assert jobs.events_after("old", 0) == [] and jobs.get("old") is None
    assert len(jobs.events_after("recent", 0)) == 3 and jobs.get("recent").state == "done"
    assert len(jobs.events_after("live", 0)) == 3 and jobs.get("live").live
    assert jobs.prune(7 * DAY) == 0  # nothing left to do
    # A run forgotten can run again (a resume enqueues it anew) and numbers its new events after
    # the old ones: one row, a marker no reader sees, keeps the last id.
    assert jobs.db.execute("SELECT id, kind FROM tether_events WHERE run_id = 'old'") == [(40, "pruned")]
    jobs.enqueue(run_id="old", session_id="s-old", owner="u", agent="a", kind="continue", prompt=None, chosen={})
    assert jobs.get("old").live and jobs.get("old").began_after == 40
    assert jobs.last_event("old") == (40, "pruned") and jobs.events_after("old", 0) == []
    from tether.dispatch.jobs import EventWriter

    writer = EventWriter(jobs, "old")
    writer.close()
    assert writer.last_id == 40  # the worker's next event is 41


def test_workers_pruning_at_once_delete_each_event_once(jobs: Any) -> None:
    for i in range(20):
        job(jobs, f"r{i}", done=True, ended_days_ago=8, events=5)
    counts: list[int] = []
    barrier = threading.Barrier(4)

    def prune() -> None:
        barrier.wait()
        counts.append(jobs.prune(7 * DAY))

    threads = [threading.Thread(target=prune) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert sum(counts) == 100 and len(counts) == 4
    assert jobs.db.execute("SELECT count(*), count(*) FILTER (WHERE kind = 'pruned') FROM tether_events")[0] == (20, 20)


def test_the_pruner_runs_at_start_and_a_database_error_does_not_stop_it(jobs: Any) -> None:
    from tether.dispatch.worker import Pruner

    job(jobs, "old", done=True, ended_days_ago=9)
    calls: list[float] = []
    real = jobs.prune

    def flaky(keep_s: float) -> int:
        calls.append(keep_s)
        if len(calls) == 1:
            raise RuntimeError("the database is away")
        return real(keep_s)

    jobs.prune = flaky
    with Pruner(jobs, keep_days=7, every_s=0.05):
        deadline = time.monotonic() + 10
        while jobs.get("old") is not None and time.monotonic() < deadline:
            time.sleep(0.02)
    assert jobs.get("old") is None and len(calls) >= 2 and calls[0] == 7 * DAY


def test_a_pruned_run_replays_its_answer_and_exit_on_any_node(cluster: Any) -> None:
    import httpx

    from tests.server.conftest import read_events

    c = cluster()
    a, b = c.node(), c.node()
    with httpx.Client(base_url=a, timeout=30) as ca, httpx.Client(base_url=b, timeout=30) as cb:
        sid = ca.post("/v1/sessions", json={"agent": "ship"}).json()["session_id"]
        run_id = ca.post(f"/v1/sessions/{sid}/messages", json={"text": "order 7"}).json()["run_id"]
        streamed = read_events(ca, f"/v1/runs/{run_id}/events")
        assert streamed[-1]["result"]["status"] == "completed"
        assert c.worker.jobs.prune(0.0) == len(streamed)  # every run that ended, however recently
        replay = read_events(cb, f"/v1/runs/{run_id}/events")
        assert [(e["id"], e["event"]) for e in replay] == [(1, "text_delta"), (2, "done")]
        assert replay[0]["text"] == streamed[-1]["result"]["output"] and "shipped order 7" in replay[0]["text"]
        assert replay[1]["result"]["cost_usd"] == streamed[-1]["result"]["cost_usd"]
