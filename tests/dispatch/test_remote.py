"""Servers that queue runs for workers: any node answers for any run, a run waiting for a
person holds no worker, a stop or a decision posted to another node reaches the run."""

from __future__ import annotations

import httpx

from tests.server.conftest import read_events, wait_until


def _session(client: httpx.Client, agent: str) -> str:
    r = client.post("/v1/sessions", json={"agent": agent})
    assert r.status_code == 201, r.text
    return str(r.json()["session_id"])


def _posted(client: httpx.Client, sid: str, text: str) -> str:
    """The run a message to session ``sid`` starts (queued for a worker)."""
    r = client.post(f"/v1/sessions/{sid}/messages", json={"text": text})
    assert r.status_code == 202, r.text
    return str(r.json()["run_id"])


def test_a_run_queued_on_one_node_streams_and_reads_on_another(cluster):
    c = cluster()
    a, b = c.node(), c.node()
    with httpx.Client(base_url=a, timeout=30) as ca, httpx.Client(base_url=b, timeout=30) as cb:
        sid = _session(ca, "ship")
        run_id = _posted(ca, sid, "order 7")
        events = read_events(cb, f"/v1/runs/{run_id}/events")  # followed on the other node
        assert events[-1]["event"] == "done" and events[-1]["result"]["status"] == "completed"
        assert [e["id"] for e in events] == list(range(1, len(events) + 1))
        assert "Done: shipped order 7." in events[-1]["result"]["output"]
        # Reconnecting to the first node after event 2 gives exactly the rest.
        rest = read_events(ca, f"/v1/runs/{run_id}/events", last_event_id=2)
        assert [e["id"] for e in rest] == [e["id"] for e in events[2:]]
        view = ca.get(f"/v1/runs/{run_id}").json()
        assert view["status"] == "completed" and view["live"] is False
        assert cb.get(f"/v1/runs/{run_id}/transcript").json()["messages"][0]["role"] == "user"
    assert c.shipped() == [f"{run_id}:call_ship"]


def test_a_run_waiting_for_approval_holds_no_worker_and_a_decision_on_another_node_continues_it(cluster):
    c = cluster()
    a, b = c.node(), c.node()
    with httpx.Client(base_url=a, timeout=30) as ca, httpx.Client(base_url=b, timeout=30) as cb:
        sid = _session(ca, "ship_approved")
        run_id = ca.post(f"/v1/sessions/{sid}/messages", json={"text": "order 8"}).json()["run_id"]
        first = read_events(ca, f"/v1/runs/{run_id}/events")
        asked = next(e for e in first if e["event"] == "approval_required")
        assert first[-1]["result"]["status"] == "interrupted"
        job = c.worker.jobs.get(run_id)
        assert job is not None and job.state == "done" and not c.worker._held  # no worker waits with it
        assert c.shipped() == []
        r = cb.post(
            f"/v1/runs/{run_id}/decision",
            json={"call_id": asked["call_id"], "args_hash": asked["args_hash"], "approve": True},
        )
        assert r.status_code == 202, r.text
        rest = read_events(ca, f"/v1/runs/{run_id}/events", last_event_id=first[-1]["id"])
        assert rest[-1]["event"] == "done" and rest[-1]["result"]["status"] == "completed"
        assert rest[0]["id"] == first[-1]["id"] + 1
    assert c.shipped() == [f"{run_id}:call_ship"]


def test_a_stop_posted_to_another_node_reaches_the_worker_and_a_resume_on_the_first_continues(cluster):
    c = cluster(tool_s=3.0)
    a, b = c.node(), c.node()
    with httpx.Client(base_url=a, timeout=30) as ca, httpx.Client(base_url=b, timeout=30) as cb:
        sid = _session(ca, "ship")
        run_id = ca.post(f"/v1/sessions/{sid}/messages", json={"text": "order 9"}).json()["run_id"]
        wait_until(lambda: c.calls(), what="the tool starting")
        r = cb.post(f"/v1/runs/{run_id}/cancel")
        assert r.status_code == 202, r.text
        view = wait_until(
            lambda: (v := ca.get(f"/v1/runs/{run_id}").json())["live"] is False and v,
            timeout=15,
            what="the run stopping",
        )
        assert view["status"] == "interrupted" and view["resumable"] is True
        events = read_events(cb, f"/v1/runs/{run_id}/events")
        assert events[-1]["event"] == "done"
        # Resumed from the other node, it goes on to its answer; the call the stop cut runs again
        # (it is idempotent) and ships once.
        r = ca.post(f"/v1/runs/{run_id}/resume")
        assert r.status_code == 202, r.text
        rest = read_events(cb, f"/v1/runs/{run_id}/events", last_event_id=events[-1]["id"])
        assert rest[-1]["event"] == "done" and rest[-1]["result"]["status"] == "completed", rest[-1]
    assert c.shipped() == [f"{run_id}:call_ship"]


def test_one_live_run_per_session_across_nodes(cluster):
    c = cluster(tool_s=2.0)
    a, b = c.node(), c.node()
    with httpx.Client(base_url=a, timeout=30) as ca, httpx.Client(base_url=b, timeout=30) as cb:
        sid = _session(ca, "ship")
        first = ca.post(f"/v1/sessions/{sid}/messages", json={"text": "order 10"})
        assert first.status_code == 202
        second = cb.post(f"/v1/sessions/{sid}/messages", json={"text": "order 11"})
        assert second.status_code == 409, second.text
        assert first.json()["run_id"] in second.json()["error"]["message"]
        read_events(cb, f"/v1/runs/{first.json()['run_id']}/events")
        wait_until(lambda: cb.get(f"/v1/runs/{first.json()['run_id']}").json()["live"] is False)
        assert cb.post(f"/v1/sessions/{sid}/messages", json={"text": "order 12"}).status_code == 202


def test_a_session_deleted_on_a_node_takes_its_conversation_from_the_shared_store(cluster):
    """The workers keep a session's conversation in Postgres; deleting the session on any node
    deletes it there too, not only the node's records of the session."""
    from tether.assembly import session_store

    c = cluster()
    a, b = c.node(), c.node()
    with httpx.Client(base_url=a, timeout=30) as ca, httpx.Client(base_url=b, timeout=30) as cb:
        sid = _session(ca, "ship")
        events = read_events(ca, f"/v1/runs/{_posted(ca, sid, 'order 8')}/events")
        assert events[-1]["result"]["status"] == "completed"
        kept = session_store(None, c.settings)
        assert any(m.role == "user" for m in kept.load(sid))  # the worker wrote it
        gone = cb.delete(f"/v1/sessions/{sid}")
        assert gone.status_code == 200 and gone.json()["deleted"] is True
        assert kept.load(sid) == []
        assert cb.get(f"/v1/sessions/{sid}").status_code == 404
