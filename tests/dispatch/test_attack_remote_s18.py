"""Attacks from outside on a node's queuing of a run's job off its event loop (RemoteRuns.begin /
carry_on, session eighteen): two nodes racing on one session, over loopback HTTP, against the
suite's Postgres, workers on threads."""

from __future__ import annotations

import httpx

from tests.dispatch.test_remote_s18 import (
    HANG_S,
    _answer,
    _asking,
    _decide,
    _held_elsewhere,
    _in_background,
    _post,
    _refused,
    _session,
)
from tests.server.conftest import read_events


def test_a_decision_whose_session_another_node_took_meanwhile_is_a_409_that_says_so(cluster, pg_url, monkeypatch):
    """Was: a decision waiting for the worker to let go of its run (on node A) while a message to
    the same session went to node B, which started a run there, failed with a bare 500 Internal
    Server Error: the job table refused the continuation (the session had a live run) and nothing
    said so. Now it is a 409 naming the run that answers the session, saying the run was not
    continued and what to read once that run is done; the other run goes on, and nothing shipped."""
    c = cluster()
    a, b = c.node(), c.node()
    with httpx.Client(base_url=a, timeout=HANG_S) as client:
        sid = _session(client, "ship_approved")
        run_id, asked = _asking(client, sid)
        refused = _refused(monkeypatch, run_id)
        with _held_elsewhere(pg_url, run_id):
            decide_t, decide_a = _in_background(lambda: _decide(a, run_id, asked))
            assert refused.wait(HANG_S), "the decision never tried to take the run"
            other = _post(b, sid, "order 9")  # the run's job is done: node B finds the session free
        assert other.status_code == 202, other.text
        other_id = other.json()["run_id"]
        decided = _answer(decide_t, decide_a)
        assert decided.status_code == 409, decided.text
        message = decided.json()["error"]["message"]
        assert f"run {run_id} was not continued" in message, message
        assert f"answering another message (run {other_id})" in message, message
        assert f"GET /v1/runs/{run_id}" in message, message
        events = read_events(client, f"/v1/runs/{other_id}/events")
        assert events[-1]["event"] == "done", events[-1]
    assert run_id + ":call_ship" not in c.shipped()


def test_a_decision_whose_run_the_worker_never_lets_go_is_a_503_to_send_again(cluster, pg_url, monkeypatch):
    """Was: a decision whose run stayed held by another process (a worker slow to let go of it)
    longer than the node waits for it failed with a bare 500 Internal Server Error. Now it is a 503
    saying the run is still held and nothing was decided: sent again once it is let go, it goes on."""
    from tether.dispatch.remote import RemoteRuns

    monkeypatch.setattr(RemoteRuns, "let_go_s", 0.3, raising=False)  # the wait, shortened
    c = cluster()
    url = c.node()
    with httpx.Client(base_url=url, timeout=HANG_S) as client:
        sid = _session(client, "ship_approved")
        run_id, asked = _asking(client, sid)
        with _held_elsewhere(pg_url, run_id):
            held = _decide(url, run_id, asked)
        assert held.status_code == 503, held.text
        message = held.json()["error"]["message"]
        assert f"run {run_id} is still held by another process" in message, message
        assert "nothing was decided or run" in message and "send the decision (or the resume) again" in message, message
        assert c.shipped() == []
        again = _decide(url, run_id, asked)
        assert again.status_code == 202, again.text
        rest = read_events(client, f"/v1/runs/{run_id}/events", last_event_id=int(asked["id"]))
        assert rest[-1]["event"] == "done" and rest[-1]["result"]["status"] == "completed", rest[-1]
    assert c.shipped() == [f"{run_id}:call_ship"]
