"""The worker's task body, driven directly: what a second delivery, a delivery after the run's
end and a job for an agent the worker does not serve each do."""

from __future__ import annotations

import json
import time

from tether.dispatch.worker import HELD


def _queue(c, run_id: str, agent: str = "answer", session: str = "s1") -> None:
    c.worker.jobs.enqueue(
        run_id=run_id,
        session_id=session,
        owner="local",
        agent=agent,
        kind="start",
        prompt="hello",
        chosen={},
        config={"message_id": "m1", "trace_id": "t" * 32},
    )


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


def test_a_workers_failure_reason_names_its_home_not_its_path(cluster):
    """What a client reads of a run a worker could not drive names the worker's home
    ``$TETHER_HOME``, not where it is on the worker's disk (as a server's own runs do)."""
    c = cluster()
    home = c.worker.home

    def broken(job):
        raise OSError(f"cannot read {home}/skills/a/SKILL.md: a named pipe was put at its name")

    c.worker._agent = broken
    _queue(c, "r4b")
    assert c.worker.drive("r4b") == "driven"
    kind, data = _events(c, "r4b")[-1][1:]
    assert kind == "done" and data["result"]["status"] == "failed"
    assert "cannot read $TETHER_HOME/skills/a/SKILL.md" in data["result"]["reason"]
    assert str(home) not in json.dumps(data)


def test_a_worker_that_was_taken_over_does_not_end_the_new_claim(cluster):
    c = cluster()
    _queue(c, "r5")
    first = c.worker.jobs.claim("r5", "worker-a")
    second = c.worker.jobs.claim("r5", "worker-b")  # worker-a lost the run; worker-b took it
    assert (first.attempts, second.attempts) == (1, 2)
    c.worker.jobs.finish("r5", first.attempts)  # worker-a stopping must not end worker-b's job
    assert c.worker.jobs.get("r5").state == "running"
    c.worker.jobs.finish("r5", second.attempts)
    assert c.worker.jobs.get("r5").state == "done"


def test_a_worker_that_loses_its_run_mid_call_leaves_the_end_to_the_worker_that_took_it(cluster, pg_url):
    import contextlib

    from tether import Agent, tool
    from tether.postgres.db import Database
    from tether.postgres.runs import PgRunStore
    from tether.testing import FunctionModel, Reply, call

    c = cluster()
    other = Database(pg_url, max_size=2)  # another worker's process
    taken = contextlib.ExitStack()
    acted = []

    def act(step: str) -> str:
        """Do one step of work in the world."""
        acted.append(step)
        if step == "one":  # the lock's connection ends; worker-b takes the run and its job
            c.worker.db.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = 'tether: run r6'"
            )
            deadline = time.monotonic() + 10
            while True:
                try:
                    taken.enter_context(PgRunStore(other).lock("r6"))
                    break
                except Exception:
                    assert time.monotonic() < deadline
                    time.sleep(0.05)
            c.worker.jobs.claim("r6", "worker-b")
        return f"did {step}"

    def reply(messages, request):
        done = sum(m.role == "tool" for m in messages)
        return call(f"c{done}", "act", {"step": ["one", "two"][done]}) if done < 2 else Reply(text="all done")

    c.worker.agents["fence"] = Agent(FunctionModel(reply), tools=[tool(act)], max_turns=5)
    _queue(c, "r6", agent="fence", session="s6")
    with taken:
        assert c.worker.drive("r6") == "driven"
        assert acted == ["one"]
        assert "done" not in [kind for _, kind, _ in _events(c, "r6")]  # worker-b writes the end
        job = c.worker.jobs.get("r6")
        assert job.state == "running" and job.worker == "worker-b"
    other.close()


def test_a_workers_run_acts_for_its_user_as_a_servers_run_does(cluster):
    """MCP connectors read the user a run acts for (their own sealed tokens) and never ask at the
    terminal of a served run: a worker's runs set both, as `tether serve`'s do."""
    from tether import Agent, tool
    from tether.connectors._acting import ACTING, SERVED
    from tether.testing import FunctionModel, Reply

    seen: list[tuple[str | None, bool]] = []

    @tool(read_only=True)
    def whoami() -> str:
        """Who this run acts for."""
        seen.append((ACTING.get(), SERVED.get()))
        return "ok"

    replies = iter([Reply(calls=(("c1", "whoami", {}),)), "done", Reply(calls=(("c2", "whoami", {}),)), "done"])
    c = cluster()
    c.worker.agents["whoami"] = Agent(FunctionModel(lambda m, r: next(replies)), tools=[whoami])
    for run_id, owner in (("r-alice", "alice"), ("r-local", "local")):
        c.worker.jobs.enqueue(
            run_id=run_id,
            session_id=f"s-{owner}",
            owner=owner,
            agent="whoami",
            kind="start",
            prompt="who?",
            chosen={},
            config={"message_id": f"m-{owner}", "trace_id": "t" * 32},
        )
        assert c.worker.drive(run_id) == "driven"
    assert seen == [("alice", True), (None, True)]
    assert ACTING.get() is None and SERVED.get() is False  # nothing leaks out of the run
