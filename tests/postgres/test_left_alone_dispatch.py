"""Postgres and external workers, the defects earlier rounds left alone: the database away for
longer than a node waits while it queues a message's job, and an old tether writing into a
database that a newer one migrated. One database for the module (Postgres tests are slow)."""

from __future__ import annotations

import contextlib
import signal
import threading
import time
from collections.abc import Iterator
from typing import Any

import httpx
import psycopg
import pytest

from tests.dispatch.conftest import AGENTS, Cluster, cluster  # noqa: F401 (tests/dispatch's fixture)
from tests.server.conftest import read_events


@contextlib.contextmanager
def threaded_cluster(
    tmp_path_factory: pytest.TempPathFactory, db_url: str, *, tool_s: float, wrap: Any = None
) -> Iterator[Cluster]:
    """One node and a worker on threads (as tests/dispatch's ``cluster``): the demo's tool takes
    ``tool_s``; ``wrap`` stands between the node and the dispatcher."""
    from tether.config import Settings
    from tether.dispatch.engine import ThreadDispatcher
    from tether.dispatch.worker import Worker
    from tether.postgres.db import database
    from tether.server.agents import load_agents

    tmp = tmp_path_factory.mktemp("cluster")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("TETHER_DEMO_LEDGER", str(tmp / "ledger"))
        mp.setenv("TETHER_DEMO_MODEL_DELAY_S", "0.01")
        mp.setenv("TETHER_DEMO_TOOL_S", str(tool_s))
        settings = Settings(home=tmp / "home", database_url=db_url)
        agents = load_agents(settings, str(AGENTS))
        worker = Worker(home=settings.home, agents=agents, db=database(db_url))
        dispatcher = ThreadDispatcher(worker.drive, retry_s=0.5)
        c = Cluster(settings, worker, wrap(dispatcher) if wrap else dispatcher, tmp / "ledger", [])
        c.node()
        yield c
        for _, server, thread in c.nodes:
            server.should_exit = True
            thread.join(10)
        c.dispatcher.close()
        c.worker.close()


@pytest.fixture(scope="module")
def shared(tmp_path_factory: pytest.TempPathFactory, db_url: str) -> Iterator[Cluster]:
    """One node and a worker on threads for the whole module, its dispatcher able to lose runs."""
    with threaded_cluster(tmp_path_factory, db_url, tool_s=0.05, wrap=Losing) as c:
        yield c


class Losing:
    """A dispatcher that loses the next ``lose`` runs handed to it, as a node killed between a job's
    commit and its message to the broker does."""

    def __init__(self, inner: Any) -> None:
        self.inner, self.lose, self.lost = inner, 0, 0

    def enqueue(self, run_id: str) -> None:
        if self.lose > 0:
            self.lose -= 1
            self.lost += 1
            return
        self.inner.enqueue(run_id)

    def close(self) -> None:
        self.inner.close()


class Outage:
    """The test's database away, as a restart or a failover makes it: every connection to it
    closed, and new ones refused (``ALLOW_CONNECTIONS false``) until :meth:`end`."""

    def __init__(self, admin_url: str, url: str) -> None:
        self.admin_url = admin_url
        self.name = url.partition("?")[0].rsplit("/", 1)[-1]

    def begin(self) -> None:
        with psycopg.connect(self.admin_url, autocommit=True) as conn:
            conn.execute(f'ALTER DATABASE "{self.name}" ALLOW_CONNECTIONS false')
            conn.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = %s AND pid <> pg_backend_pid()",
                (self.name,),
            )

    def end(self) -> None:
        with psycopg.connect(self.admin_url, autocommit=True) as conn:
            conn.execute(f'ALTER DATABASE "{self.name}" ALLOW_CONNECTIONS true')


def _stall_next_job_insert(url: str, name: str) -> None:
    """The next job a node queues waits in its INSERT (so the test can take the database away then)."""
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(f"CREATE SEQUENCE IF NOT EXISTS {name}")
        conn.execute(
            f"CREATE OR REPLACE FUNCTION {name}() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN "
            f"IF nextval('{name}') = 1 THEN PERFORM pg_sleep(3); END IF; RETURN NEW; END $$"
        )
        conn.execute(f"CREATE TRIGGER {name} BEFORE INSERT ON tether_jobs FOR EACH ROW EXECUTE FUNCTION {name}()")


def _wait_for_sleeping_insert(url: str) -> None:
    deadline = time.monotonic() + 20
    with psycopg.connect(url, autocommit=True) as conn:
        while not conn.execute(
            "SELECT 1 FROM pg_stat_activity WHERE wait_event = 'PgSleep' AND query LIKE '%tether_jobs%'"
        ).fetchall():
            assert time.monotonic() < deadline, "the node never queued the job"
            time.sleep(0.02)


def test_a_message_queued_while_the_database_is_away_longer_than_the_node_waits_is_never_lost(
    shared: Cluster, db_url: str, pg_server: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The database went away (a failover) just as a node queued a message's job, for longer than
    the node tries again: the node answered 500 with the message's turn recorded and no job, and
    the client's retry with the same message_id (what it is for) got 200 "accepted" for a run that
    would never run: an empty stream, no answer, ever. Now the first post is a 503 that says to send
    again, and sending again queues the run, which answers once."""
    from tether.dispatch.jobs import Jobs

    monkeypatch.setattr(Jobs, "queue_retry_s", 0.5)  # the node's 5 s, shortened: the outage outlasts it
    _stall_next_job_insert(db_url, "stall_queue")
    outage = Outage(pg_server.url, db_url)
    with httpx.Client(base_url=shared.nodes[0][0], timeout=60) as client:
        sid = client.post("/v1/sessions", json={"agent": "answer"}).json()["session_id"]
        answers: list[httpx.Response] = []
        post = threading.Thread(
            target=lambda: answers.append(
                client.post(f"/v1/sessions/{sid}/messages", json={"text": "hello", "message_id": "m-away"})
            )
        )
        post.start()
        _wait_for_sleeping_insert(db_url)
        outage.begin()
        try:
            post.join(30)
        finally:
            outage.end()
        (first,) = answers
        assert first.status_code == 503, first.text
        assert "send" in first.json()["error"]["message"], first.text
        again = client.post(f"/v1/sessions/{sid}/messages", json={"text": "hello", "message_id": "m-away"})
        assert again.status_code in (200, 202), again.text
        events = read_events(client, f"/v1/runs/{again.json()['run_id']}/events")
        assert [e["event"] for e in events].count("done") == 1
        assert events[-1]["result"]["status"] == "completed", events[-1]
        once_more = client.post(f"/v1/sessions/{sid}/messages", json={"text": "hello", "message_id": "m-away"})
        assert once_more.status_code == 200 and once_more.json()["run_id"] == again.json()["run_id"]
        turns = client.get(f"/v1/sessions/{sid}").json()["turns"]
        assert [(t["message_id"], t["status"]) for t in turns] == [("m-away", "completed")], turns
    assert len(shared.worker.runs.load(again.json()["run_id"]).messages) == 2  # asked and answered, once


def test_a_job_its_node_never_handed_to_the_workers_does_not_hold_its_message_or_session_for_ever(
    shared: Cluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A node that died (or met the database away) after its job's commit and before the broker
    had the run: the job stayed queued with no message to deliver it, the message sent again was
    told 200 for a run that never ran, and every later message to the session was 409 "still
    answering", for ever. Now a message sent again, or another message to the session, hands a
    job left waiting that long to the workers again, and it runs once."""
    from tether.dispatch.jobs import Jobs

    monkeypatch.setattr(Jobs, "queue_retry_s", 0.2)  # how long a queued job waits before it counts as left
    with httpx.Client(base_url=shared.nodes[0][0], timeout=60) as client:
        for again in ("the same message", "another message"):
            sid = client.post("/v1/sessions", json={"agent": "answer"}).json()["session_id"]
            shared.dispatcher.lose, lost = 1, shared.dispatcher.lost
            first = client.post(f"/v1/sessions/{sid}/messages", json={"text": "hello", "message_id": f"m-{sid}"})
            assert first.status_code == 202 and shared.dispatcher.lost == lost + 1, first.text
            time.sleep(0.3)  # longer than a queued job waits before it counts as left behind
            message_id = f"m-{sid}" if again == "the same message" else f"m2-{sid}"
            second = client.post(f"/v1/sessions/{sid}/messages", json={"text": "hello", "message_id": message_id})
            assert second.status_code in (200, 409), second.text
            events = read_events(client, f"/v1/runs/{first.json()['run_id']}/events")
            assert [e["event"] for e in events].count("done") == 1, again
            assert events[-1]["result"]["status"] == "completed", again
            if second.status_code == 409:  # the session answered the first message: now it takes this one
                third = client.post(f"/v1/sessions/{sid}/messages", json={"text": "hi", "message_id": message_id})
                assert third.status_code == 202, third.text
                assert read_events(client, third.json()["events"])[-1]["result"]["status"] == "completed"
            else:
                assert second.json()["run_id"] == first.json()["run_id"]


def test_a_message_posted_while_the_database_is_away_is_a_503_that_says_to_try_again(
    shared: Cluster, db_url: str, pg_server: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The database away before the node could even record the message: the node answered 500
    "Internal Server Error" (after its pool's 30 s), which says nothing a client can act on. Now it
    is a 503 that says to try again, and the message sent again once the database is back runs."""
    from tether.postgres.db import database

    pool = database(db_url).pool
    outage = Outage(pg_server.url, db_url)
    with httpx.Client(base_url=shared.nodes[0][0], timeout=60) as client:
        sid = client.post("/v1/sessions", json={"agent": "answer"}).json()["session_id"]
        outage.begin()
        try:
            monkeypatch.setattr(pool, "timeout", 0.3)  # the pool's 30 s wait for a connection, shortened
            r = client.post(f"/v1/sessions/{sid}/messages", json={"text": "hello", "message_id": "m-before"})
        finally:
            outage.end()
            monkeypatch.undo()
        assert r.status_code == 503, r.text
        assert r.json()["error"]["message"] == "the database could not be reached; try again in a moment"
        again = client.post(f"/v1/sessions/{sid}/messages", json={"text": "hello", "message_id": "m-before"})
        assert again.status_code in (200, 202), again.text
        assert read_events(client, again.json()["events"])[-1]["result"]["status"] == "completed"


def test_a_message_left_unsent_and_sent_again_twice_at_once_runs_once(shared: Cluster, db_url: str) -> None:
    """The turn a node recorded before the database went away (as the first test leaves it), sent
    again by two requests at once (two nodes, a client's retry racing its own): each queues the run,
    and the one that finds it queued already says so instead of dropping the turn with a 409."""
    from tether.postgres.db import database
    from tether.postgres.server import PgServerStore
    from tether.server.store import TurnRecord

    with httpx.Client(base_url=shared.nodes[0][0], timeout=60) as client:
        sid = client.post("/v1/sessions", json={"agent": "answer"}).json()["session_id"]
        PgServerStore(database(db_url)).add_turn(
            TurnRecord("m-twice", "run_left_unsent", sid, "local", "answer", "t" * 32, "hello", time.time())
        )
        answers: list[httpx.Response] = []
        body = {"text": "hello", "message_id": "m-twice"}
        nodes = [shared.nodes[0][0], shared.nodes[1][0] if len(shared.nodes) > 1 else shared.node()]
        posts = [
            threading.Thread(
                target=lambda node=node: answers.append(
                    httpx.post(f"{node}/v1/sessions/{sid}/messages", json=body, timeout=30)
                )
            )
            for node in nodes
        ]
        for t in posts:
            t.start()
        for t in posts:
            t.join(30)
        assert sorted(a.status_code for a in answers) in ([200, 202], [202, 202]), [a.text for a in answers]
        assert {a.json()["run_id"] for a in answers} == {"run_left_unsent"}
        events = read_events(client, "/v1/runs/run_left_unsent/events")
        assert [e["event"] for e in events].count("done") == 1 and events[-1]["result"]["status"] == "completed"
        turns = client.get(f"/v1/sessions/{sid}").json()["turns"]
        assert [(t["run_id"], t["status"]) for t in turns] == [("run_left_unsent", "completed")], turns


# --- an old tether meeting a database a newer one migrated (last: pg_url's end closes every pool)


def _newer_tether_migrates(url: str, component: str, migrations: list[Any], sql: str) -> None:
    """What a newer tether does when it first opens the store: one more migration (and its notice)."""
    from tether.postgres.db import Database, Migration

    newer = Database(url)
    try:
        newer.migrate(component, [*migrations, Migration(len(migrations) + 1, "in a newer tether", sql)])
    finally:
        newer.close()


class CeleryStandIn:
    """What ``run_worker`` uses of Celery's app: the task it registers, given one delivery of the
    run ``r-old``, and a worker that serves until SIGTERM (its warm shutdown)."""

    def __init__(self) -> None:
        self.sent: list[tuple[str, str]] = []
        self.stopping = threading.Event()
        self.outcome = ""

    def task(self, **options: Any) -> Any:
        def register(body: Any) -> Any:
            body.apply_async = lambda args, queue, countdown: self.sent.append((args[0], queue))
            self.body = body
            return body

        return register

    def worker_main(self, argv: list[str]) -> None:
        self.outcome = self.body("r-old")
        assert self.stopping.wait(10), "the worker did not stop"


def _until_refused(db: Any) -> Exception:
    from tether.postgres.db import SchemaNewer

    deadline = time.monotonic() + 20
    while True:
        try:
            db.execute("SELECT 1")  # a read: harmless while the process has not noticed yet
        except SchemaNewer as exc:
            return exc
        assert time.monotonic() < deadline, "the process never noticed the newer schema"
        time.sleep(0.02)


NEWER = r"this database was migrated by a newer tether \(its {} tables at migration {}, newer than this tether knows \({}\)\); upgrade tether on this machine"


def test_a_running_worker_writes_nothing_once_a_newer_tether_migrated_the_database(cluster: Any, pg_url: str) -> None:  # noqa: F811
    """A worker kept taking jobs and writing rows after a newer tether migrated the database's
    schema (it checked the versions only when it first opened its stores). Now the migration's
    notice reaches it, it refuses to write with a message that says to upgrade, and the job and
    everything else stay as they were for the newer workers; a worker of this tether started on
    that database refuses at once."""
    from tether.dispatch.jobs import MIGRATIONS
    from tether.dispatch.worker import Worker, run_worker
    from tether.postgres.db import Database, SchemaNewer

    c = cluster()
    node = c.node()  # on the same pool as the worker: this process is the old tether
    c.worker.jobs.enqueue(
        run_id="r-old", session_id="s-old", owner="local", agent="answer", kind="start", prompt="hello", chosen={}
    )
    _newer_tether_migrates(pg_url, "dispatch", MIGRATIONS, "ALTER TABLE tether_jobs ADD COLUMN priority integer")
    refused = _until_refused(c.worker.db)
    assert refused.args[0].startswith("this database was migrated by a newer tether"), refused
    with pytest.raises(SchemaNewer, match=NEWER.format("dispatch", 2, 1)):
        c.worker.drive("r-old")
    r = httpx.post(f"{node}/v1/sessions", json={"agent": "answer"}, timeout=30)
    assert r.status_code == 503 and "upgrade tether" in r.json()["error"]["message"], r.text
    with psycopg.connect(pg_url) as conn:
        assert conn.execute("SELECT state, attempts, worker, priority FROM tether_jobs").fetchall() == [
            ("queued", 0, None, None)
        ]
        assert conn.execute("SELECT count(*) FROM tether_events").fetchone() == (0,)
        assert conn.execute("SELECT count(*) FROM tether_runs").fetchone() == (0,)
        assert conn.execute("SELECT count(*) FROM server_sessions").fetchone() == (0,)
    celery = CeleryStandIn()
    previous = signal.signal(signal.SIGTERM, lambda *_: celery.stopping.set())  # Celery's warm shutdown
    try:
        with pytest.raises(SchemaNewer, match=NEWER.format("dispatch", 2, 1)):
            run_worker(c.worker, celery, queue="q", concurrency=1)
    finally:
        signal.signal(signal.SIGTERM, previous)
    assert celery.outcome.startswith("refused") and celery.sent == [("r-old", "q")]  # put back, then it stopped
    started = Database(pg_url)  # a worker of this tether started now
    with pytest.raises(SchemaNewer, match=NEWER.format("dispatch", 2, 1)):
        Worker(home=c.settings.home, agents=c.worker.agents, db=started)
    started.close()


def test_a_process_with_no_listener_notices_a_newer_schema_at_its_next_check(pg_url: str) -> None:
    """The same for a process that does not listen (``tether run`` on Postgres, a node before its
    first stream): it reads the versions again every ``schema_check_s`` and then saves nothing."""
    from tether.harness.state import RunState
    from tether.postgres.db import Database, SchemaNewer
    from tether.postgres.runs import MIGRATIONS, PgRunStore

    db = Database(pg_url)
    db.schema_check_s = 0.0  # every use reads the versions (30 s by default)
    store = PgRunStore(db)
    store.save(RunState(run_id="r-1", session_id="s-1"))
    state = store.load("r-1")
    state.status = "completed"
    _newer_tether_migrates(pg_url, "runs", MIGRATIONS, "ALTER TABLE tether_runs ADD COLUMN newer text")
    with pytest.raises(SchemaNewer, match=NEWER.format("runs", len(MIGRATIONS) + 1, len(MIGRATIONS))):
        store.save(state)
    assert db.versions()["runs"] == len(MIGRATIONS) + 1  # still read, to say what the database is at
    with psycopg.connect(pg_url) as conn:
        assert '"running"' in conn.execute("SELECT header FROM tether_runs").fetchone()[0]
    db.close()
