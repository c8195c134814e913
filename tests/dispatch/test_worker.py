"""The worker's task body, driven directly: what a second delivery, a delivery after the run's
end and a job for an agent the worker does not serve each do."""

from __future__ import annotations

import json

from tether.dispatch.worker import HELD


def _queue(c, run_id: str, agent: str = "answer", session: str = "s1") -> None:
    c.worker.jobs.enqueue(run_id=run_id, session_id=session, owner="local", agent=agent, kind="start",
                          prompt="hello", chosen={}, config={"message_id": "m1", "trace_id": "t" * 32})


def _events(c, run_id: str) -> list[tuple[int, str, dict]]:
    return [(i, k, json.loads(d)) for i, k, d in c.worker.jobs.events_after(run_id, 0)]


def test_a_job_runs_once_and_a_later_delivery_finds_nothing_to_do(cluster):
    c = cluster()
    _queue(c, "r1")
    assert c.worker.drive("r1") == "driven"
    events = _events(c, "r1")
    assert events[-1][1] == "done" and events[-1][2]["result"]["status"] == "completed"
    assert c.worker.drive("r1") == "nothing to do"  # redelivered after it was acknowledged late
    assert _events(c, "r1") == events


def test_a_second_delivery_steps_aside_while_another_worker_holds_the_run(cluster, pg_url):
    import psycopg

    c = cluster()
    _queue(c, "r2")
    c.worker.lock_wait_s = 0.3
    with psycopg.connect(pg_url, autocommit=True) as other:  # another worker's connection holds the run
        assert other.execute("SELECT pg_try_advisory_lock(hashtextextended('tether.run:r2', 0))").fetchone()[0]
        assert c.worker.drive("r2") == HELD
        assert c.worker.jobs.get("r2").state == "queued" and _events(c, "r2") == []
    assert c.worker.drive("r2") == "driven"  # let go (its connection closed): the run goes on here


def test_a_worker_that_died_after_the_done_leaves_nothing_to_repeat(cluster):
    c = cluster()
    _queue(c, "r3")
    assert c.worker.drive("r3") == "driven"
    before = _events(c, "r3")
    # As if the worker died after writing ``done`` but before marking the job done: a redelivery.
    c.worker.db.execute("UPDATE tether_jobs SET state = 'running' WHERE run_id = 'r3'")
    assert c.worker.drive("r3") == "done already"
    assert _events(c, "r3") == before
    job = c.worker.jobs.get("r3")
    assert job is not None and job.state == "done"


def test_a_job_for_an_agent_this_worker_does_not_serve_ends_failed_and_says_so(cluster):
    c = cluster()
    _queue(c, "r4", agent="gone")
    assert c.worker.drive("r4") == "driven"
    kind, data = _events(c, "r4")[-1][1:]
    assert kind == "done" and data["result"]["status"] == "failed"
    assert "does not serve agent 'gone'" in data["result"]["reason"]
    assert c.worker.runs.load("r4").status == "failed"
