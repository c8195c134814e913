"""The Postgres-backed server, what earlier rounds left alone: a run that meets the database away for
longer than its saves wait, and a message sent again after a 503 with a new message_id. One
database and one node with a worker on threads for the module (Postgres tests are slow)."""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from tests.dispatch.conftest import Cluster
from tests.postgres.test_left_alone_dispatch import Outage, threaded_cluster
from tests.server.conftest import read_events


@pytest.fixture(scope="module")
def shared(tmp_path_factory: pytest.TempPathFactory, db_url: str) -> Iterator[Cluster]:
    # the demo's tool long enough for the test to take the database away meanwhile
    with threaded_cluster(tmp_path_factory, db_url, tool_s=0.5) as c:
        yield c


def _until(check: Any, what: str, timeout: float = 20) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, what
        time.sleep(0.02)


def _order_started(
    client: httpx.Client, shared: Cluster, text: str, message_id: str
) -> tuple[str, httpx.Response, int]:
    """A session of the ``ship`` agent, ``text`` posted to it, and its order tool started: the
    session's id, the 202, and the tool calls made before it."""
    sid = client.post("/v1/sessions", json={"agent": "ship"}).json()["session_id"]
    started = len(shared.calls())
    posted = client.post(f"/v1/sessions/{sid}/messages", json={"text": text, "message_id": message_id})
    assert posted.status_code == 202, posted.text
    _until(lambda: len(shared.calls()) > started, "the tool never started")
    return sid, posted, started


def _ended_alike(client: httpx.Client, sid: str, run_id: str, message_id: str) -> list[dict[str, Any]]:
    """Once the database is back: the run's stream, GET and its session's turn all say completed,
    once, after its two turns; the stream's events."""
    _until(lambda: client.get(f"/v1/runs/{run_id}").status_code == 200, "the server never reached the database again")
    events = read_events(client, f"/v1/runs/{run_id}/events")
    run = client.get(f"/v1/runs/{run_id}").json()
    turns = client.get(f"/v1/sessions/{sid}").json()["turns"]
    done = [e for e in events if e["event"] == "done"]
    assert len(done) == 1 and done[0]["result"]["status"] == "completed", done
    assert (run["status"], run["live"]) == ("completed", False), run
    assert [(t["message_id"], t["status"]) for t in turns] == [(message_id, "completed")], turns
    assert [e["event"] for e in events].count("turn") == 2, events
    return events


def _short_waits(monkeypatch: pytest.MonkeyPatch, db_url: str) -> None:
    """The waits for a database away, shortened: a save's 60 s, the pool's 30 s for a connection, and
    the pool's pause (1 s, doubling) between its attempts to connect again."""
    from psycopg_pool.base import AttemptWithBackoff

    from tether.postgres.db import Database, database

    monkeypatch.setattr(Database, "retry_s", 0.3)
    monkeypatch.setattr(database(db_url).pool, "timeout", 0.3)
    monkeypatch.setattr(AttemptWithBackoff, "INITIAL_DELAY", 0.1)


def _order_through_an_outage(
    shared: Cluster, outage: Outage, caplog: pytest.LogCaptureFixture, message_id: str, then_s: float = 0.0
) -> tuple[str, list[dict[str, Any]], dict[str, Any], list[dict[str, Any]]]:
    """An order posted (``message_id``), the database taken away once its tool runs, until the run
    gives up saving (and ``then_s`` more); then what the node says once it is back: the run's id, its
    events, the run and the session's turns."""
    with httpx.Client(base_url=shared.nodes[0][0], timeout=60) as client:
        sid, posted, _ = _order_started(client, shared, f"order-{message_id}", message_id)
        run_id = posted.json()["run_id"]
        _away_until_the_run_gives_up_on_it(outage, caplog, then_s=then_s)
        _until(lambda: client.get(f"/v1/runs/{run_id}").status_code == 200, "the node never reached the database again")
        events = read_events(client, f"/v1/runs/{run_id}/events")
        run = client.get(f"/v1/runs/{run_id}").json()
        turns = client.get(f"/v1/sessions/{sid}").json()["turns"]
    return run_id, events, run, turns


def _away_until_the_run_gives_up_on_it(outage: Outage, caplog: pytest.LogCaptureFixture, then_s: float = 0.0) -> None:
    """The database away until the worker has given up saving (it says so in its log; at most 4 s,
    for a worker that never says), and ``then_s`` more."""
    outage.begin()
    try:
        deadline = time.monotonic() + 4
        while time.monotonic() < deadline and "the database is back" not in caplog.text:
            time.sleep(0.02)
        time.sleep(then_s)
    finally:
        outage.end()


def test_a_run_that_meets_the_database_away_longer_than_its_saves_wait_goes_on_once_it_is_back(
    shared: Cluster, db_url: str, pg_server: Any, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """The database went away during a tool call, for longer than a save waits for it (60 s,
    shortened here): the run's stream said ``failed`` ("the run could not be saved") while GET of
    the run and of its session said ``running`` (the state as last committed), for ever, and the
    shipped order's result and the paid reply were only in the dead worker's memory. Now the
    worker keeps what it did, records it as soon as the database is back and goes on: the stream,
    the run and the session all end ``completed``, with the order shipped once and the model asked
    once per step."""
    caplog.set_level(logging.WARNING, logger="tether")
    _short_waits(monkeypatch, db_url)
    started = len(shared.calls())
    # while the order ships: its result's save meets the database away
    run_id, events, run, turns = _order_through_an_outage(shared, Outage(pg_server.url, db_url), caplog, "m-away")
    done = [e for e in events if e["event"] == "done"]
    assert len(done) == 1 and done[0]["result"]["status"] == "completed", done
    assert (run["status"], run["live"]) == ("completed", False), run
    assert [(t["message_id"], t["status"]) for t in turns] == [("m-away", "completed")], turns
    assert [e["event"] for e in events].count("turn") == 2, events  # the model paid once per step
    assert [e["event"] for e in events].count("tool_start") == 1, events
    assert len(shared.calls()) == started + 1  # the tool ran once
    assert sum(1 for line in shared.shipped() if line.startswith(run_id)) == 1
    state = shared.worker.runs.load(run_id)
    assert [m.role for m in state.messages] == ["user", "assistant", "tool", "assistant"], state.messages


def test_a_run_whose_database_stays_away_longer_than_its_worker_waits_goes_on_from_its_last_save(
    shared: Cluster, db_url: str, pg_server: Any, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """The same, with the database away longer than the worker waits to save what the run did (two
    minutes, shortened): the job is left running and looked at again, and the run goes on from its
    last save: the call in flight runs again with its idempotency key (the order ships once), and
    the stream, the run and the session end ``completed``, not ``failed`` nor ``running``."""
    caplog.set_level(logging.WARNING, logger="tether")
    _short_waits(monkeypatch, db_url)
    monkeypatch.setattr(shared.worker, "away_wait_s", 0.3)  # the worker's two minutes, shortened
    outage = Outage(pg_server.url, db_url)  # away longer than the worker waits after it gives up
    run_id, events, run, turns = _order_through_an_outage(shared, outage, caplog, "m-long", then_s=1.0)
    done = [e for e in events if e["event"] == "done"]
    assert len(done) == 1 and done[0]["result"]["status"] == "completed", done
    assert (run["status"], run["live"]) == ("completed", False), run
    assert [(t["message_id"], t["status"]) for t in turns] == [("m-long", "completed")], turns
    assert sum(1 for line in shared.shipped() if line.startswith(run_id)) == 1
    assert [m.role for m in shared.worker.runs.load(run_id).messages] == ["user", "assistant", "tool", "assistant"]


def _queue_meets_the_database_away(monkeypatch: pytest.MonkeyPatch, *, committed: bool) -> None:
    """The next job a node queues is answered "database away" (503), as when the database goes
    away for longer than the node waits: before its INSERT (``committed=False``: nothing queued),
    or after a commit whose answer was lost with its connection (``committed=True``: queued, and
    never handed to the workers)."""
    from tether.dispatch.jobs import DatabaseAway, Jobs

    enqueue = Jobs.enqueue
    left = [1]

    def away_once(self: Any, **kwargs: Any) -> None:
        if not left:
            return enqueue(self, **kwargs)
        left.pop()
        if committed:
            enqueue(self, **kwargs)
        raise DatabaseAway(
            "the database could not be reached for 5 s (connection lost), so this may not have been queued: "
            "send it again in a moment"
        )

    monkeypatch.setattr(Jobs, "enqueue", away_once)
    monkeypatch.setattr(Jobs, "queue_retry_s", 0.2)  # how long a queued job waits before it counts as left


@pytest.mark.parametrize(
    ("committed", "ids"),
    [(False, True), (True, True), (True, False)],
    ids=["nothing-queued", "queued-unseen", "queued-unseen-no-ids"],
)
def test_a_message_sent_again_with_a_new_message_id_after_a_503_runs_once(
    shared: Cluster, monkeypatch: pytest.MonkeyPatch, committed: bool, ids: bool
) -> None:
    """A 503 "send it again" for a message whose job the database took away (or took, unseen),
    and the client sent it again with a new message_id (as a client that makes one per request,
    or sends none, does): the new id started a second run of the same message (the first one's
    job, queued unseen, was handed to the workers too, and the new one got 409 until it had
    answered, then ran again), and the session showed the message twice. Now the server takes the
    same text posted next to the session as that message sent again: it runs once, under its
    first message_id."""
    _queue_meets_the_database_away(monkeypatch, committed=committed)
    with httpx.Client(base_url=shared.nodes[0][0], timeout=60) as client:
        sid = client.post("/v1/sessions", json={"agent": "answer"}).json()["session_id"]

        def post(message_id: str) -> httpx.Response:
            body = {"text": "hello"} | ({"message_id": f"{message_id}-{sid}"} if ids else {})
            return client.post(f"/v1/sessions/{sid}/messages", json=body)

        first = post("m-first")
        assert first.status_code == 503, first.text
        first_id = first.json()["error"]["message_id"]
        time.sleep(0.3)  # the client waits a moment; a job queued unseen counts as left behind
        again = post("m-new")
        assert again.status_code in (200, 202), again.text
        assert again.json()["message_id"] == first_id, again.json()
        events = read_events(client, f"/v1/runs/{again.json()['run_id']}/events")
        assert [e["event"] for e in events].count("done") == 1 and events[-1]["result"]["status"] == "completed"
        turns = client.get(f"/v1/sessions/{sid}").json()["turns"]
        assert [(t["message_id"], t["status"]) for t in turns] == [(first_id, "completed")], turns
        other = post("m-later")  # the message answered, the same text is a new message
        assert other.status_code == 202 and other.json()["message_id"] != first_id, other.text
        read_events(client, other.json()["events"])


def test_a_message_sent_again_whose_unseen_job_a_worker_takes_at_once_runs_once(
    shared: Cluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    """As the test above (queued unseen, sent again with a new message_id), with the worker taking
    the job the moment the server hands it on: the server asked whether the job still waited
    untaken after handing it on, found it taken, and answered 409 "still answering" (one full run in
    six). Handing it on now waits here until a worker has it, so that the old order fails every time."""
    from tether.dispatch.remote import RemoteRuns

    _queue_meets_the_database_away(monkeypatch, committed=True)
    redeliver = RemoteRuns._redeliver_stale

    def and_taken(self: RemoteRuns, job: Any) -> None:
        handed = self._stale(job)
        redeliver(self, job)
        if handed:
            _until(lambda: self.jobs.get(job.run_id).worker is not None, "no worker took the job")

    monkeypatch.setattr(RemoteRuns, "_redeliver_stale", and_taken)
    with httpx.Client(base_url=shared.nodes[0][0], timeout=60) as client:
        sid = client.post("/v1/sessions", json={"agent": "answer"}).json()["session_id"]
        first = client.post(f"/v1/sessions/{sid}/messages", json={"text": "hello", "message_id": f"a-{sid}"})
        assert first.status_code == 503, first.text
        time.sleep(0.3)
        again = client.post(f"/v1/sessions/{sid}/messages", json={"text": "hello", "message_id": f"b-{sid}"})
        assert again.status_code in (200, 202), again.text
        assert again.json()["message_id"] == f"a-{sid}", again.json()
        events = read_events(client, f"/v1/runs/{again.json()['run_id']}/events")
        assert [e["event"] for e in events].count("done") == 1 and events[-1]["result"]["status"] == "completed"
        turns = client.get(f"/v1/sessions/{sid}").json()["turns"]
        assert [(t["message_id"], t["status"]) for t in turns] == [(f"a-{sid}", "completed")], turns


def test_a_503_for_a_message_names_the_message_id_to_send_it_again_with(
    shared: Cluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A message posted without a message_id (the server makes one) and answered 503 "send it again
    with the same message_id": the client had never been told that id. Now the 503 names it, in
    its words and as ``error.message_id``, and sending it again with that id runs the message once."""
    _queue_meets_the_database_away(monkeypatch, committed=False)
    with httpx.Client(base_url=shared.nodes[0][0], timeout=60) as client:
        sid = client.post("/v1/sessions", json={"agent": "answer"}).json()["session_id"]
        first = client.post(f"/v1/sessions/{sid}/messages", json={"text": "hi there"})
        assert first.status_code == 503, first.text
        error = first.json()["error"]
        assert error["message_id"].startswith("m_") and repr(error["message_id"]) in error["message"], error
        again = client.post(
            f"/v1/sessions/{sid}/messages", json={"text": "hi there", "message_id": error["message_id"]}
        )
        assert again.status_code == 202, again.text
        assert read_events(client, again.json()["events"])[-1]["result"]["status"] == "completed"
        turns = client.get(f"/v1/sessions/{sid}").json()["turns"]
        assert [(t["message_id"], t["status"]) for t in turns] == [(error["message_id"], "completed")], turns


@pytest.fixture(scope="module")
def one_node(shared: Cluster) -> Iterator[str]:
    """A server that runs its runs itself (no external workers), on the module's database."""
    from tests.server.conftest import start_uvicorn
    from tether.server.app import create_app

    up = start_uvicorn(create_app(shared.settings, agents=shared.worker.agents), lifespan="on")
    yield up.url
    up.stop(10)


def test_a_run_on_a_server_of_its_own_that_meets_the_database_away_goes_on_once_it_is_back(
    shared: Cluster,
    one_node: str,
    db_url: str,
    pg_server: Any,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """As the first test, on `tether serve` running its runs itself on Postgres: its stream said
    ``failed`` and GET said ``running`` ("the server stopped while this run was running")."""
    caplog.set_level(logging.WARNING, logger="tether")
    _short_waits(monkeypatch, db_url)
    outage = Outage(pg_server.url, db_url)
    with httpx.Client(base_url=one_node, timeout=60) as client:
        sid, posted, started = _order_started(client, shared, "order-here", "m-here")
        run_id = posted.json()["run_id"]
        _away_until_the_run_gives_up_on_it(outage, caplog)
        _ended_alike(client, sid, run_id, "m-here")
    assert len(shared.calls()) == started + 1
