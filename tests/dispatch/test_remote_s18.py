"""A node's event loop does not wait on a run's queuing: a decision whose worker is slow to let go of
the run, and every job's writes, happen on a thread, while the session stays the run's from the
moment its request passed its checks (a second message, a racing decision, a stop see it)."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Iterator
from typing import Any

import httpx
import pytest

from tests.server.conftest import read_events, wait_until

HANG_S = 30  # a guard against a hang, never a measure


def _session(client: httpx.Client, agent: str) -> str:
    r = client.post("/v1/sessions", json={"agent": agent})
    assert r.status_code == 201, r.text
    return str(r.json()["session_id"])


def _asking(client: httpx.Client, sid: str) -> tuple[str, dict[str, Any]]:
    """A run of ``ship_approved`` stopped to ask for its call's approval: its id and the question."""
    r = client.post(f"/v1/sessions/{sid}/messages", json={"text": "order 5"})
    assert r.status_code == 202, r.text
    run_id = str(r.json()["run_id"])
    events = read_events(client, f"/v1/runs/{run_id}/events")
    assert events[-1]["event"] == "done" and events[-1]["result"]["status"] == "interrupted", events[-1]
    return run_id, next(e for e in events if e["event"] == "approval_required")


@contextlib.contextmanager
def _held_elsewhere(pg_url: str, run_id: str) -> Iterator[None]:
    """The run's lock held by another process's connection: a worker slow to let go of the run."""
    import psycopg

    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute("SELECT pg_advisory_lock(hashtextextended(%s, 0))", ("tether.run:" + run_id,))
        yield


def _refused(monkeypatch: pytest.MonkeyPatch, run_id: str) -> threading.Event:
    """Set once the server has tried to take ``run_id``'s lock and found it held (it waits then)."""
    from tether.postgres.runs import PgRunStore, RunHeld

    refused = threading.Event()
    take = PgRunStore._take

    def spied(self: PgRunStore, rid: str) -> Any:
        try:
            return take(self, rid)
        except RunHeld:
            if rid == run_id:
                refused.set()
            raise

    monkeypatch.setattr(PgRunStore, "_take", spied)
    return refused


def _waited_on(monkeypatch: pytest.MonkeyPatch, run_id: str) -> threading.Event:
    """Set once a request asks whether ``run_id`` has settled (a second request found it in the session)."""
    from tether.dispatch.remote import RemoteRuns

    asked = threading.Event()
    settled = RemoteRuns.settled

    async def spied(self: RemoteRuns, rid: str) -> bool:
        if rid == run_id:
            asked.set()
        return await settled(self, rid)

    monkeypatch.setattr(RemoteRuns, "settled", spied)
    return asked


@contextlib.contextmanager
def _shipping_held(monkeypatch: pytest.MonkeyPatch, c: Any) -> Iterator[tuple[threading.Event, threading.Event]]:
    """``ship_order`` held before its side effect (its run live) until the second event is set;
    the first is set once a call has come there."""
    fn = c.worker.agents["ship_approved"].tools[0].fn
    came, go = threading.Event(), threading.Event()
    append = fn.__globals__["_append_once"]

    def held(path: Any, line: str) -> bool:
        came.set()
        go.wait(HANG_S)
        return bool(append(path, line))

    monkeypatch.setitem(fn.__globals__, "_append_once", held)
    try:
        yield came, go
    finally:
        go.set()


def _stop_asked(monkeypatch: pytest.MonkeyPatch, run_id: str) -> threading.Event:
    """Set once the node has been asked to stop ``run_id`` (and has answered whether it is live)."""
    from tether.dispatch.remote import RemoteRuns

    asked = threading.Event()
    cancel = RemoteRuns.cancel

    def spied(self: RemoteRuns, rid: str, reason: str) -> bool:
        try:
            return cancel(self, rid, reason)
        finally:
            if rid == run_id:
                asked.set()

    monkeypatch.setattr(RemoteRuns, "cancel", spied)
    return asked


def _in_background(call: Callable[[], httpx.Response]) -> tuple[threading.Thread, list[httpx.Response]]:
    answers: list[httpx.Response] = []
    thread = threading.Thread(target=lambda: answers.append(call()), daemon=True)
    thread.start()
    return thread, answers


def _answer(thread: threading.Thread, answers: list[httpx.Response]) -> httpx.Response:
    thread.join(HANG_S)
    assert answers, "the request did not answer"
    return answers[0]


def _decide(url: str, run_id: str, asked: dict[str, Any]) -> httpx.Response:
    body = {"call_id": asked["call_id"], "args_hash": asked["args_hash"], "approve": True}
    with httpx.Client(base_url=url, timeout=HANG_S) as client:
        return client.post(f"/v1/runs/{run_id}/decision", json=body)


def _post(url: str, sid: str, text: str) -> httpx.Response:
    with httpx.Client(base_url=url, timeout=HANG_S) as client:
        return client.post(f"/v1/sessions/{sid}/messages", json={"text": text})


def test_a_decision_waiting_for_its_worker_to_let_go_does_not_stall_the_node(cluster, pg_url, monkeypatch):
    """Was: the decision (and a resume) saved the run and queued its job on the node's event loop,
    sleeping there until the worker that had just stopped the run let go of it (up to 10 s): every
    other request of the node, /healthz and other sessions' messages, waited meanwhile, and a worker
    that let go only once one of them was answered made the decision fail after 10 s."""
    c = cluster()
    url = c.node()
    with httpx.Client(base_url=url, timeout=HANG_S) as client:
        sid = _session(client, "ship_approved")
        run_id, asked = _asking(client, sid)
        refused = _refused(monkeypatch, run_id)
        with _held_elsewhere(pg_url, run_id):
            thread, answers = _in_background(lambda: _decide(url, run_id, asked))
            assert refused.wait(HANG_S), "the decision never tried to take the run"
            # The decision waits for the run now; the node answers the others meanwhile.
            health = client.get("/healthz")
            assert health.status_code == 200 and health.json()["ok"] is True
            other = client.post(f"/v1/sessions/{_session(client, 'answer')}/messages", json={"text": "hi"})
            assert other.status_code == 202, other.text
            assert thread.is_alive() and not answers  # still waiting for the run, not refused
        decided = _answer(thread, answers)  # let go: the decision goes on
        assert decided.status_code == 202, decided.text
        rest = read_events(client, f"/v1/runs/{run_id}/events", last_event_id=int(asked["id"]))
        assert rest[-1]["event"] == "done" and rest[-1]["result"]["status"] == "completed", rest[-1]
        done = read_events(client, f"/v1/runs/{other.json()['run_id']}/events")
        assert done[-1]["result"]["status"] == "completed"
    assert c.shipped() == [f"{run_id}:call_ship"]


def test_two_messages_at_once_on_one_session_start_one_run(cluster, monkeypatch):
    """Was (risked by moving the queuing off the event loop): the second message, posted while the
    first one's job was being written on a thread, found no live run in the session and recorded a
    turn of its own. Now the session is the first run's from its checks on: the second waits for
    the job and gets the 409 it got when the node did the writes on its loop."""
    from tether.dispatch.jobs import Jobs

    c = cluster()
    url = c.node()
    gate, entered = threading.Event(), threading.Event()
    enqueue = Jobs.enqueue

    def held_enqueue(self: Jobs, **job: Any) -> None:
        if not entered.is_set():  # the first message's job: held until the second message is in
            entered.set()
            assert gate.wait(HANG_S)
        enqueue(self, **job)

    monkeypatch.setattr(Jobs, "enqueue", held_enqueue)
    with httpx.Client(base_url=url, timeout=HANG_S) as client:
        sid = _session(client, "ship")
        try:
            first_t, first_a = _in_background(lambda: _post(url, sid, "order 1"))
            assert entered.wait(HANG_S)
            turns = client.get(f"/v1/sessions/{sid}").json()["turns"]
            run_id = str(turns[0]["run_id"])
            asked = _waited_on(monkeypatch, run_id)
            second_t, second_a = _in_background(lambda: _post(url, sid, "order 2"))
            assert asked.wait(HANG_S), "the second message did not find the first run in the session"
            assert health_ok(client)
        finally:
            gate.set()
        first, second = _answer(first_t, first_a), _answer(second_t, second_a)
        assert first.status_code == 202 and first.json()["run_id"] == run_id, first.text
        assert second.status_code == 409, second.text
        assert f"is still answering (run {run_id})" in second.json()["error"]["message"]
        events = read_events(client, f"/v1/runs/{run_id}/events")
        assert events[-1]["result"]["status"] == "completed"
        assert [t["run_id"] for t in client.get(f"/v1/sessions/{sid}").json()["turns"]] == [run_id]
    assert c.shipped() == [f"{run_id}:call_ship"]


def health_ok(client: httpx.Client) -> bool:
    r = client.get("/healthz")
    return r.status_code == 200 and r.json()["ok"] is True


def test_a_message_racing_a_slow_decision_gets_409_and_the_decision_goes_on(cluster, pg_url, monkeypatch):
    """Was (risked by moving the decision's wait off the event loop): a message to the session,
    posted while the decision waited for the worker to let go, found the session free (the run's
    job was done) and started a second run in it; the decision then failed. Now the session is the
    decided run's: the message waits for it and gets 409, and the run goes on once."""
    c = cluster()
    url = c.node()
    with httpx.Client(base_url=url, timeout=HANG_S) as client:
        sid = _session(client, "ship_approved")
        run_id, asked = _asking(client, sid)
        refused = _refused(monkeypatch, run_id)
        waited = _waited_on(monkeypatch, run_id)
        with _shipping_held(monkeypatch, c) as (_, ship):  # the run, once continued, stays live
            with _held_elsewhere(pg_url, run_id):
                decide_t, decide_a = _in_background(lambda: _decide(url, run_id, asked))
                assert refused.wait(HANG_S), "the decision never tried to take the run"
                post_t, post_a = _in_background(lambda: _post(url, sid, "order 6"))
                assert waited.wait(HANG_S), "the message did not find the decided run in the session"
            decided, posted = _answer(decide_t, decide_a), _answer(post_t, post_a)
            ship.set()
        assert decided.status_code == 202, decided.text
        assert posted.status_code == 409, posted.text
        assert f"is still answering (run {run_id})" in posted.json()["error"]["message"]
        rest = read_events(client, f"/v1/runs/{run_id}/events", last_event_id=int(asked["id"]))
        assert rest[-1]["result"]["status"] == "completed", rest[-1]
        assert [t["run_id"] for t in client.get(f"/v1/sessions/{sid}").json()["turns"]] == [run_id]
    assert c.shipped() == [f"{run_id}:call_ship"]


def test_a_stop_asked_while_a_decision_waits_reaches_the_run(cluster, pg_url, monkeypatch):
    """Was (risked by moving the decision off the event loop): a stop posted while the decision
    waited for the worker to let go found no live job ("run is not running", 409), and the run then
    went on and shipped. Now the stop is kept and asked of the job as it is written: the run starts
    already stopped, interrupted and resumable, having shipped nothing."""
    c = cluster()
    url = c.node()
    with httpx.Client(base_url=url, timeout=HANG_S) as client:
        sid = _session(client, "ship_approved")
        run_id, asked = _asking(client, sid)
        refused = _refused(monkeypatch, run_id)
        stop_asked = _stop_asked(monkeypatch, run_id)
        with _held_elsewhere(pg_url, run_id):
            decide_t, decide_a = _in_background(lambda: _decide(url, run_id, asked))
            assert refused.wait(HANG_S), "the decision never tried to take the run"
            stop_t, stop_a = _in_background(lambda: client.post(f"/v1/runs/{run_id}/cancel"))
            assert stop_asked.wait(HANG_S), "the stop did not reach the node"
        decided, stopped = _answer(decide_t, decide_a), _answer(stop_t, stop_a)
        assert decided.status_code == 202, decided.text
        assert stopped.status_code == 202, stopped.text
        rest = read_events(client, f"/v1/runs/{run_id}/events", last_event_id=int(asked["id"]))
        assert rest[-1]["result"]["status"] == "interrupted", rest[-1]
        assert client.get(f"/v1/runs/{run_id}").json()["resumable"] is True
    assert c.shipped() == []


def test_a_message_posted_as_a_decided_run_is_handed_on_gets_409_at_once(cluster, monkeypatch):
    """Was: a node asked whether a continued run had settled took the ``done`` of its part before
    the decision (the question's) for this part's, while no worker had written anything yet, and
    waited up to 5 s for the run to end: a message posted then was held, and started a second
    exchange in the session when the run ended within those 5 s. Now, as for a run the node drives
    itself, the run answering is a 409 at once (only a ``done`` written after the decision lets the
    node wait for the job's end)."""
    from tether.dispatch.remote import RemoteRuns

    c = cluster()
    url = c.node()
    waited = threading.Event()
    wait_ended = RemoteRuns.wait_ended

    async def spied(self: RemoteRuns, rid: str, timeout: float) -> None:
        waited.set()
        await wait_ended(self, rid, timeout)

    monkeypatch.setattr(RemoteRuns, "wait_ended", spied)
    drive, go = c.dispatcher.drive, threading.Event()

    def held(run_id: str) -> object:
        go.wait(HANG_S)  # the worker not there yet: the run's job is queued, nothing written
        return drive(run_id)

    with httpx.Client(base_url=url, timeout=HANG_S) as client:
        sid = _session(client, "ship_approved")
        run_id, asked = _asking(client, sid)
        monkeypatch.setattr(c.dispatcher, "drive", held)
        try:
            assert _decide(url, run_id, asked).status_code == 202
            post_t, post_a = _in_background(lambda: _post(url, sid, "order 7"))
            wait_until(lambda: waited.is_set() or not post_t.is_alive(), timeout=HANG_S, what="an answer or a wait")
        finally:
            go.set()  # the run goes on to its end: a message held until then would start a second exchange
        posted = _answer(post_t, post_a)
        assert posted.status_code == 409, posted.text
        assert f"is still answering (run {run_id})" in posted.json()["error"]["message"]
        rest = read_events(client, f"/v1/runs/{run_id}/events", last_event_id=int(asked["id"]))
        assert rest[-1]["result"]["status"] == "completed", rest[-1]
        assert [t["run_id"] for t in client.get(f"/v1/sessions/{sid}").json()["turns"]] == [run_id]
