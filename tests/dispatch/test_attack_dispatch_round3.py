"""Attacks on the Postgres stores and the workers from outside (round 3): real processes killed
with SIGKILL, connections ended under a run, damaged rows, stops that race a claim."""

from __future__ import annotations

import json
import time
from typing import Any

from tether import Agent, tool
from tether.testing import FunctionModel, Reply, call


def _two_steps(act: Any) -> Agent:
    """An agent that calls ``act`` with step "one", then "two", then answers."""

    def reply(messages: list[Any], request: object) -> Any:
        done = sum(m.role == "tool" for m in messages)
        return call(f"c{done}", "act", {"step": ["one", "two"][done]}) if done < 2 else Reply(text="all done")

    return Agent(FunctionModel(reply), tools=[tool(act)], max_turns=5)


def _queue(c: Any, run_id: str, agent: str, session: str, prompt: str = "go") -> None:
    c.worker.jobs.enqueue(
        run_id=run_id,
        session_id=session,
        owner="local",
        agent=agent,
        kind="start",
        prompt=prompt,
        chosen={},
        config={"message_id": f"m-{run_id}", "trace_id": "t" * 32},
    )


def _events(c: Any, run_id: str) -> list[tuple[str, dict[str, Any]]]:
    return [(k, json.loads(d)) for _, k, d in c.worker.jobs.events_after(run_id, 0, 5000)]


def _try_lock(url: str, key: str) -> bool:
    """Whether another process could take the advisory lock ``key`` now (let go at once)."""
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        return bool(conn.execute("SELECT pg_try_advisory_lock(hashtextextended(%s, 0))", (key,)).fetchone()[0])


def test_a_run_whose_lock_connection_ended_still_holds_its_session(cluster: Any, pg_url: str) -> None:
    """The lock's connection ends mid-run and nobody else takes the run: the worker takes the run
    again at its next save and goes on. Its session must be held again too, or a second run could
    continue the conversation at the same time (each reading the other's calls as interrupted)."""
    from tether.errors import StoreError
    from tether.postgres.db import Database
    from tether.postgres.runs import PgRunStore

    c = cluster()
    other = PgRunStore(Database(pg_url, max_size=2))  # another worker's process
    refused: list[str] = []

    def act(step: str) -> str:
        """Do one step of work in the world."""
        if step == "one":
            c.worker.db.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = 'tether: run r-sl'"
            )
        else:  # a second run of the same session, started on another machine now
            with other.lock("r-second"):
                try:
                    with other.lock_session("s-sl", "r-second"):
                        pass
                except StoreError as exc:
                    refused.append(str(exc))
        return f"did {step}"

    c.worker.agents["sl"] = _two_steps(act)
    _queue(c, "r-sl", "sl", "s-sl")
    assert c.worker.drive("r-sl") == "driven"
    assert c.worker.runs.load("r-sl").status == "completed"
    assert len(refused) == 1 and "session s-sl is being continued by run r-sl" in refused[0]
    other.db.close()


def test_a_run_whose_session_was_taken_while_its_lock_was_away_writes_nothing_more(cluster: Any, pg_url: str) -> None:
    """The lock's connection ends, and another run takes the conversation before the worker's
    next save: the worker must not go on in that session (RunLockLost, nothing written)."""
    import contextlib

    from tether.postgres.db import Database
    from tether.postgres.runs import PgRunStore

    c = cluster()
    other = PgRunStore(Database(pg_url, max_size=2))
    taken = contextlib.ExitStack()
    acted: list[str] = []

    def act(step: str) -> str:
        """Do one step of work in the world."""
        acted.append(step)
        if step == "one":
            c.worker.db.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = 'tether: run r-st'"
            )
            deadline = time.monotonic() + 10
            while True:  # the terminated backend lets go of the session a moment later
                try:
                    taken.enter_context(other.lock("r-next"))
                    taken.enter_context(other.lock_session("s-st", "r-next"))
                    break
                except Exception:
                    taken.close()
                    assert time.monotonic() < deadline
                    time.sleep(0.05)
        return f"did {step}"

    c.worker.agents["st"] = _two_steps(act)
    _queue(c, "r-st", "st", "s-st")
    with taken:
        c.worker.drive("r-st")
        assert acted == ["one"]  # step two's intent was never saved, so it never ran
        saved = c.worker.runs.load("r-st")
        assert not any(m.role == "tool" for m in saved.messages)  # the result of one was not written either
    other.db.close()


def test_a_stop_asked_just_after_the_claim_is_not_lost(cluster: Any) -> None:
    """POST /cancel on another node lands between the worker's claim of the job and the moment it
    registers the run as held: the stop must still reach the run."""
    import threading

    c = cluster()
    heard = threading.Event()
    on_cancel, claim = c.worker._on_cancel, c.worker.jobs.claim

    def noted(channel: str, run_id: str | None) -> None:
        on_cancel(channel, run_id)
        heard.set()

    def claim_then_stop(run_id: str, worker: str) -> Any:
        job = claim(run_id, worker)
        assert c.worker.jobs.request_cancel(run_id, "stopped by the user")  # another node's Stop
        assert heard.wait(10)  # this worker heard it before it held the run
        return job

    c.worker.listener.on = noted
    c.worker.jobs.claim = claim_then_stop
    _queue(c, "r-cx", "answer", "s-cx")
    assert c.worker.drive("r-cx") == "driven"
    state = c.worker.runs.load("r-cx")
    assert state.status == "interrupted" and "stopped by the user" in (state.reason or ""), state.reason
    assert _events(c, "r-cx")[-1][1]["result"]["status"] == "interrupted"


def test_a_run_whose_saved_header_was_damaged_ends_its_stream_with_the_reason(cluster: Any) -> None:
    """A run waiting for a decision is continued, but its header row was edited meanwhile: the
    worker cannot load it. The client following the run gets a done that says why, and the run
    as saved is left for a person to restore (not overwritten)."""
    c = cluster()
    _queue(c, "r-dmg", "answer", "s-dmg")
    assert c.worker.drive("r-dmg") == "driven"
    c.worker.db.execute("UPDATE tether_runs SET header = '{\"status\": 17' WHERE run_id = 'r-dmg'")
    c.worker.jobs.enqueue(
        run_id="r-dmg", session_id="s-dmg", owner="local", agent="answer", kind="continue", prompt=None, chosen={}
    )
    assert c.worker.drive("r-dmg") == "driven"
    kind, data = _events(c, "r-dmg")[-1]
    assert kind == "done" and data["result"]["status"] == "failed", _events(c, "r-dmg")[-3:]
    assert "header of run r-dmg" in data["result"]["reason"]
    assert c.worker.jobs.get("r-dmg").state == "done"
    header = c.worker.db.execute("SELECT header FROM tether_runs WHERE run_id = 'r-dmg'")[0][0]
    assert header == '{"status": 17'


CHILD = r"""
import os, sys
from pathlib import Path
sys.path.insert(0, sys.argv[3])
from tests.dispatch.test_attack_dispatch_round3 import acting_agent
from tether.dispatch.worker import Worker
from tether.postgres.db import database

url, run_id, ledger = sys.argv[1], sys.argv[2], Path(sys.argv[4])
worker = Worker(home=ledger / "home", agents={"act": acting_agent(ledger, kill=True)}, db=database(url))
worker.drive(run_id)
sys.exit(3)  # the kill never came
"""


def acting_agent(ledger: Any, kill: bool = False) -> Agent:
    """Pays the model (counted in ``ledger/model.log``), charges a card once (``ledger/charged.log``,
    neither read-only nor idempotent), then answers. With ``kill``, the process dies with SIGKILL
    right after the charge, before its result can be saved."""
    import os
    from pathlib import Path

    root = Path(ledger)

    def charge(amount: int) -> str:
        """Charge the customer's card."""
        with open(root / "charged.log", "a") as f:
            f.write(f"{amount}\n")
        if kill:
            os.kill(os.getpid(), 9)
        return f"charged {amount}"

    def reply(messages: list[Any], request: object) -> Any:
        with open(root / "model.log", "a") as f:
            f.write(f"{len(messages)}\n")
        if any(m.role == "tool" for m in messages):
            return Reply(text="charged")
        return call("c1", "charge", {"amount": 40})

    return Agent(FunctionModel(reply), tools=[tool(charge)], max_turns=5)


def test_a_worker_killed_between_a_charge_and_its_result_leaves_it_to_a_person(
    cluster: Any, pg_url: str, tmp_path: Any
) -> None:
    """kill -9 of a real worker process after a side effect that is neither read-only nor
    idempotent ran, before its result was saved. The worker that picks the run up pays no turn
    again, does not charge again, and stops for a person (outcome unknown), its stream saying so."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    c = cluster()
    ledger = tmp_path / "ledger"
    ledger.mkdir()
    _queue(c, "r-kill", "act", "s-kill", prompt="charge 40")
    root = str(Path(__file__).resolve().parents[2])
    child = subprocess.run(
        [sys.executable, "-c", CHILD, pg_url, "r-kill", root, str(ledger)],
        capture_output=True,
        text=True,
        timeout=120,
        env=os.environ.copy(),
    )
    assert child.returncode == -9, child.stderr[-2000:]
    assert c.worker.jobs.get("r-kill").state == "running"  # as a dead worker leaves it
    c.worker.agents["act"] = acting_agent(ledger)
    assert c.worker.drive("r-kill") == "driven"  # the broker's redelivery
    assert (ledger / "charged.log").read_text().splitlines() == ["40"]
    assert (ledger / "model.log").read_text().splitlines() == ["1"]  # turn 1 not paid again
    state = c.worker.runs.load("r-kill")
    assert state.status == "interrupted" and state.interruption is not None
    assert state.interruption.type == "outcome_unknown"
    events = _events(c, "r-kill")
    kinds = [k for k, _ in events]
    assert kinds.count("done") == 1 and kinds[-1] == "done"
    assert events[-1][1]["result"]["status"] == "interrupted"
    assert "outcome_unknown" in json.dumps(events[-1][1]) or "approval_required" in kinds
    assert c.worker.jobs.get("r-kill").state == "done"


def test_two_workers_racing_for_one_run_drive_it_once(cluster: Any, pg_url: str) -> None:
    """Two deliveries of one run reach two workers (two pools, as two processes) at the same moment."""
    import threading

    from tether.dispatch.worker import Worker
    from tether.postgres.db import Database

    c = cluster()
    paid: list[int] = []
    gate = threading.Barrier(2)

    def reply(messages: list[Any], request: object) -> Any:
        paid.append(len(messages))
        time.sleep(0.3)  # both deliveries are in flight while the model thinks
        return Reply(text="once")

    agents = {"race": Agent(FunctionModel(reply), max_turns=3)}
    other = Worker(home=c.worker.home, agents=agents, db=Database(pg_url, max_size=3), name="other", lock_wait_s=0.5)
    c.worker.agents.update(agents)
    c.worker.lock_wait_s = 0.5
    _queue(c, "r-race", "race", "s-race")
    outcomes: list[str] = []

    def deliver(w: Any) -> None:
        gate.wait()
        outcomes.append(w.drive("r-race"))

    threads = [threading.Thread(target=deliver, args=(w,)) for w in (c.worker, other)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    other.close()
    other.db.close()
    assert outcomes.count("driven") == 1 and len(outcomes) == 2, outcomes
    assert paid == [1]
    kinds = [k for k, _ in _events(c, "r-race")]
    assert kinds.count("done") == 1 and kinds.count("turn") == 1


def test_a_password_with_a_slash_is_not_printed_when_the_database_is_unreachable(tmp_path: Any) -> None:
    """A generated password often holds a '/', pasted into the URL raw: the error that says the
    database cannot be reached must still not show it."""
    import os
    import subprocess
    import sys

    env = {k: v for k, v in os.environ.items() if not k.startswith("TETHER_")}
    url = "postgresql://tether:Xk9/q2Lm+wZ@127.0.0.1:1/tether"
    for command in (["runs"], ["worker", "--model", "scripted/plan"]):
        out = subprocess.run(
            [sys.executable, "-m", "tether", *command],
            capture_output=True,
            text=True,
            env=env
            | {"TETHER_HOME": str(tmp_path), "TETHER_DATABASE_URL": url, "TETHER_BROKER_URL": "amqp://127.0.0.1:1//"},
            timeout=60,
            stdin=subprocess.DEVNULL,
        )
        assert out.returncode == 2, out.stderr
        assert "cannot connect to the database postgresql://tether:***@" in out.stderr, out.stderr
        assert "Xk9" not in out.stderr + out.stdout and "q2Lm" not in out.stderr + out.stdout
        assert "Traceback" not in out.stderr


def test_pooled_connections_closed_while_a_model_thinks_do_not_fail_the_run(cluster: Any, pg_url: str) -> None:
    """``idle_session_timeout`` (or a proxy, or a database restart) closes the pool's idle
    connections during a long call: the run's next save must use a live connection, not fail."""
    import psycopg

    c = cluster()
    closed: list[int] = []

    def act(step: str) -> str:
        """Do one step of work in the world."""
        with psycopg.connect(pg_url, autocommit=True) as conn:
            closed.append(
                conn.execute(
                    "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE datname = current_database() "
                    "AND pid <> pg_backend_pid() AND state = 'idle' AND application_name NOT LIKE 'tether: run %'"
                ).fetchone()[0]
            )
        return f"did {step}"

    def reply(messages: list[Any], request: object) -> Any:
        done = sum(m.role == "tool" for m in messages)
        return call(f"c{done}", "act", {"step": "one"}) if done < 1 else Reply(text="all done")

    c.worker.agents["idle"] = Agent(FunctionModel(reply), tools=[tool(act)], max_turns=5)
    _queue(c, "r-idle", "idle", "s-idle")
    assert c.worker.drive("r-idle") == "driven"
    assert closed and closed[0] >= 1
    state = c.worker.runs.load("r-idle")
    assert state.status == "completed" and state.messages[-1].text == "all done", state.reason
    assert _events(c, "r-idle")[-1][1]["result"]["status"] == "completed"


class _Celery:
    """Celery's side of ``run_worker``, as far as a task body sees it: ``worker_main`` hands the
    task the deliveries listed; ``apply_async`` puts one back (acknowledged late, a delivery whose
    body raised is acknowledged too: Celery's ``task_acks_on_failure_or_timeout``)."""

    def __init__(self, deliveries: list[str]) -> None:
        self.deliveries = deliveries
        self.outcomes: list[str] = []
        self.put_back: list[tuple[list[str], int]] = []

    def task(self, name: str, acks_late: bool) -> Any:
        def register(fn: Any) -> Any:
            self.body = fn
            fn.apply_async = lambda args, queue, countdown: self.put_back.append((args, countdown))
            return fn

        return register

    def worker_main(self, argv: list[str]) -> None:
        while self.deliveries:
            run_id = self.deliveries.pop(0)
            try:
                self.outcomes.append(self.body(run_id))
            except Exception as exc:  # acknowledged: the message is gone
                self.outcomes.append(f"raised {type(exc).__name__}")
            for args, _ in self.put_back:
                self.deliveries.extend(args)
            self.put_back.clear()


def test_a_database_error_at_the_end_of_a_run_does_not_leave_its_session_answering_for_ever(cluster: Any) -> None:
    """The database is away for a moment as the worker marks the job done: the delivery must come
    back, or the job stays `running` and every later message of the session is refused 409
    ("still answering") for ever."""
    import psycopg

    from tether.dispatch.worker import run_worker

    c = cluster()
    finish = c.worker.jobs.finish
    failures = [psycopg.OperationalError("server closed the connection unexpectedly")]

    def flaky_finish(run_id: str, attempt: int | None = None) -> None:
        if failures:
            raise failures.pop()
        finish(run_id, attempt)

    c.worker.jobs.finish = flaky_finish
    _queue(c, "r-end", "answer", "s-end")
    app = _Celery(["r-end"])
    run_worker(c.worker, app, queue="q", concurrency=1)
    assert c.worker.jobs.get("r-end").state == "done", app.outcomes
    assert app.outcomes[-1] == "done already"
    kinds = [k for k, _ in _events(c, "r-end")]
    assert kinds.count("done") == 1 and kinds.count("turn") == 1


def test_a_broker_password_with_a_slash_is_refused_without_showing_it(tmp_path: Any, pg_url: str) -> None:
    """`tether worker` with a broker URL whose password holds a raw '/': before, Celery's traceback
    named the part of the password before the '/' as an impossible port."""
    import os
    import subprocess
    import sys

    env = {k: v for k, v in os.environ.items() if not k.startswith("TETHER_")}
    env |= {"TETHER_HOME": str(tmp_path), "TETHER_DATABASE_URL": pg_url}
    env["TETHER_BROKER_URL"] = "amqp://tether:Xk9/q2Lm@127.0.0.1:1//"
    out = subprocess.run(
        [sys.executable, "-m", "tether", "worker", "--model", "scripted/plan"],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
        stdin=subprocess.DEVNULL,
    )
    assert out.returncode == 2, out.stderr[-2000:]
    assert "Traceback" not in out.stderr and "Xk9" not in out.stderr + out.stdout
    assert "amqp://tether:***@127.0.0.1:1//" in out.stderr and "percent-encode" in out.stderr


def test_a_run_row_copied_under_another_id_never_writes_into_the_original(cluster: Any) -> None:
    """An operator copies a run's rows under a new id (to try something on a copy): continuing the
    copy must not save into the original (its header still names the original run)."""
    from tether.errors import StoreError

    c = cluster()
    _queue(c, "r-orig", "answer", "s-orig")
    assert c.worker.drive("r-orig") == "driven"
    db = c.worker.db
    db.execute(
        "INSERT INTO tether_runs (run_id, header, message_count, created_at, commit_seq) "
        "SELECT 'r-copy', header, message_count, created_at, commit_seq FROM tether_runs WHERE run_id = 'r-orig'"
    )
    db.execute(
        "INSERT INTO tether_run_messages (run_id, seq, body) "
        "SELECT 'r-copy', seq, body FROM tether_run_messages WHERE run_id = 'r-orig'"
    )
    before = db.execute("SELECT header, commit_seq FROM tether_runs WHERE run_id = 'r-orig'")
    try:
        copy = c.worker.runs.load("r-copy")
    except StoreError as exc:
        assert "r-copy" in str(exc) and "r-orig" in str(exc)
    else:
        assert copy.run_id == "r-copy"
        copy.reason = "edited on the copy"
        c.worker.runs.save(copy)
    assert db.execute("SELECT header, commit_seq FROM tether_runs WHERE run_id = 'r-orig'") == before


def test_a_worker_whose_database_user_cannot_create_tables_says_so_without_a_traceback(
    tmp_path: Any, pg_url: str
) -> None:
    """Postgres 15 and later give no one but the owner CREATE on the public schema: a worker
    started as such a user on a new database must say what is wrong, not print a traceback."""
    import os
    import subprocess
    import sys

    import psycopg

    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute("DROP ROLE IF EXISTS tether_reader")
        conn.execute("CREATE ROLE tether_reader LOGIN PASSWORD 'Rd9/secret'")
    url = pg_url.replace("postgresql://postgres:@", "postgresql://tether_reader:Rd9%2Fsecret@", 1)
    assert "tether_reader" in url, pg_url
    env = {k: v for k, v in os.environ.items() if not k.startswith("TETHER_")}
    env |= {"TETHER_HOME": str(tmp_path), "TETHER_DATABASE_URL": url, "TETHER_BROKER_URL": "amqp://127.0.0.1:1//"}
    try:
        out = subprocess.run(
            [sys.executable, "-m", "tether", "worker", "--model", "scripted/plan"],
            capture_output=True,
            text=True,
            env=env,
            timeout=60,
            stdin=subprocess.DEVNULL,
        )
    finally:
        with psycopg.connect(pg_url, autocommit=True) as conn:
            conn.execute("DROP OWNED BY tether_reader")
            conn.execute("DROP ROLE tether_reader")
    assert out.returncode == 2, out.stderr[-2000:]
    assert "Traceback" not in out.stderr and "Rd9" not in out.stderr
    assert "permission denied" in out.stderr and "tables in the database" in out.stderr, out.stderr


def test_a_nul_in_what_a_client_sends_is_not_a_500_on_postgres(cluster: Any) -> None:
    """One machine keeps a title, a message or a comment holding NUL (U+0000); on Postgres, whose
    text and jsonb refuse it, the node answered 500 or dropped the connection with no answer."""
    import httpx

    from tests.server.conftest import read_events

    c = cluster()
    with httpx.Client(base_url=c.node(), timeout=30) as client:
        r = client.post("/v1/sessions", json={"agent": "answer", "title": "a\u0000b"})
        assert r.status_code == 201, r.text
        sid = r.json()["session_id"]
        r = client.patch(f"/v1/sessions/{sid}", json={"title": "x\u0000y"})
        assert r.status_code == 200, r.text
        r = client.post(f"/v1/sessions/{sid}/messages", json={"text": "hello \u0000 there"})
        assert r.status_code == 202, r.text
        done = read_events(client, f"/v1/runs/{r.json()['run_id']}/events")[-1]
        assert done["result"]["status"] == "completed", done
        assert done["result"]["output"].startswith("You said: hello ")
        r = client.post(
            f"/v1/messages/{r.json()['message_id']}/feedback", json={"score": "up", "comment": "ni\u0000ce"}
        )
        assert r.status_code == 201, r.text
        assert client.get(f"/v1/sessions/{sid}").status_code == 200
        assert client.post("/v1/messages/m%00x/feedback", json={"score": "up"}).status_code == 404


def test_a_run_stopped_while_queued_starts_stopped_and_pays_nothing(cluster: Any) -> None:
    c = cluster()
    paid: list[int] = []

    def reply(messages: list[Any], request: object) -> Any:
        paid.append(len(messages))
        return Reply(text="should not be asked")

    c.worker.agents["q"] = Agent(FunctionModel(reply), max_turns=3)
    _queue(c, "r-q", "q", "s-q")
    assert c.worker.jobs.request_cancel("r-q", "stopped by the user")
    assert c.worker.drive("r-q") == "driven"
    state = c.worker.runs.load("r-q")
    assert paid == [] and state.status == "interrupted" and "stopped by the user" in (state.reason or "")
    assert c.worker.jobs.get("r-q").state == "done"
    assert not c.worker.jobs.request_cancel("r-q", "again")  # not live any more


def test_many_runs_queued_at_once_on_threads_are_all_driven(cluster: Any, pg_url: str) -> None:
    """ThreadDispatcher (one machine, no broker) with many runs queued at once, on a database with
    a few connections to spare: each run driven holds a connection of its own, so starting them
    all at once ran out, and the runs that found none were given up (left queued for ever, their
    sessions 'still answering')."""
    import contextlib
    import threading

    import psycopg

    from tether.dispatch.engine import ThreadDispatcher

    c = cluster()
    c.worker.lock_wait_s = 0.3
    now: list[int] = [0, 0]  # running, most at once
    lock = threading.Lock()

    async def reply(messages: list[Any], request: object) -> Any:
        import asyncio

        with lock:
            now[0] += 1
            now[1] = max(now)
        await asyncio.sleep(0.3)
        with lock:
            now[0] -= 1
        return Reply(text="done")

    c.worker.agents["many"] = Agent(FunctionModel(reply), max_turns=2)
    with contextlib.ExitStack() as hogs:
        with psycopg.connect(pg_url, autocommit=True) as conn:
            free = conn.execute(
                "SELECT current_setting('max_connections')::int - count(*) FROM pg_stat_activity "
                "WHERE backend_type = 'client backend'"
            ).fetchone()[0]
        for _ in range(free - 25):  # other clients of the database: 25 connections to spare
            hogs.enter_context(psycopg.connect(pg_url, autocommit=True))
        dispatcher = ThreadDispatcher(c.worker.drive)
        runs = [f"r-many-{i}" for i in range(40)]
        for run_id in runs:
            _queue(c, run_id, "many", f"s-{run_id}")
            dispatcher.enqueue(run_id)
        dispatcher.close()
    states = dict(c.worker.db.execute("SELECT run_id, state FROM tether_jobs WHERE run_id LIKE 'r-many-%%'"))
    assert sorted(states.items()) == sorted((r, "done") for r in runs)
    assert all(c.worker.runs.load(r).status == "completed" for r in runs)
    assert now[1] <= 8


def test_a_worker_that_lost_its_run_writes_nothing_into_the_new_workers_stream(cluster: Any, pg_url: str) -> None:
    """Worker A's lock connection ends while its model thinks and worker B takes the run. A's model
    then answers: its text must not go into the run's stream (B answers the run), and it must not
    take the numbers B's events need (B's text, turn and done must all be there)."""
    import threading

    from tether.dispatch.worker import Worker
    from tether.postgres.db import Database

    c = cluster()
    b_asked, release = threading.Event(), threading.Event()
    b = Worker(home=c.worker.home, agents={}, db=Database(pg_url, max_size=3), name="worker-b")
    b_done: list[str] = []

    def model_b(messages: list[Any], request: object) -> Any:
        b_asked.set()
        assert release.wait(20)
        return Reply(text="the answer from B")

    def model_a(messages: list[Any], request: object) -> Any:
        c.worker.db.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = 'tether: run r-ev'"
        )
        threading.Thread(target=lambda: b_done.append(b.drive("r-ev")), daemon=True).start()
        assert b_asked.wait(20)  # B holds the run, its stream started
        return Reply(text="a stale answer from A")

    c.worker.agents["ev"] = Agent(FunctionModel(model_a), max_turns=2)
    b.agents["ev"] = Agent(FunctionModel(model_b), max_turns=2)
    _queue(c, "r-ev", "ev", "s-ev")
    try:
        c.worker.drive("r-ev")
        release.set()
        deadline = time.monotonic() + 20
        while not b_done and time.monotonic() < deadline:
            time.sleep(0.05)
    finally:
        release.set()
        b.close()
        b.db.close()
    assert b_done == ["driven"]
    events = _events(c, "r-ev")
    text = "".join(d["text"] for k, d in events if k == "text_delta")
    assert "stale" not in text and "the answer from B" in text, events
    assert [k for k, _ in events].count("done") == 1 and events[-1][0] == "done"
    assert events[-1][1]["result"]["output"] == "the answer from B"
