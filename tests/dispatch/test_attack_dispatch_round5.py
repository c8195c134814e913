"""Servers with external workers attacked from outside (round 5): the broker away for a moment
when a message is posted."""

from __future__ import annotations

from typing import Any


class BrokerAway:
    """A dispatcher whose broker cannot be reached for the next ``away`` messages (kombu's
    OperationalError, as Celery's send_task raises once its retries are spent), then can."""

    def __init__(self, inner: Any, away: int) -> None:
        self.inner, self.away = inner, away

    def enqueue(self, run_id: str) -> None:
        if self.away > 0:
            self.away -= 1
            from kombu.exceptions import OperationalError

            raise OperationalError("[Errno 111] Connection refused")
        self.inner.enqueue(run_id)

    def close(self) -> None:
        self.inner.close()


def test_a_message_posted_while_the_broker_is_away_does_not_block_its_session_for_ever(cluster: Any) -> None:
    """A node that could not hand a run to the broker (RabbitMQ restarting) answered 500, but had
    already queued the run's job in Postgres: no message would ever deliver it, so the session
    answered every later message with 409 "still answering", and a cancel marked a job no worker
    would take, for ever. Now the job is withdrawn, the client is told to send again (503), and
    sending again works once the broker is back."""
    import httpx

    from tests.server.conftest import read_events

    c = cluster()
    c.dispatcher = BrokerAway(c.dispatcher, away=1)
    with httpx.Client(base_url=c.node(), timeout=30) as client:
        sid = client.post("/v1/sessions", json={"agent": "answer"}).json()["session_id"]
        r = client.post(f"/v1/sessions/{sid}/messages", json={"text": "hello", "message_id": "m-1"})
        assert r.status_code == 503, r.text
        assert "nothing was started" in r.json()["error"]["message"] and "send" in r.json()["error"]["message"]
        assert c.worker.jobs.live_run_of(sid) is None
        r = client.post(f"/v1/sessions/{sid}/messages", json={"text": "hello", "message_id": "m-1"})
        assert r.status_code == 202, r.text
        done = read_events(client, f"/v1/runs/{r.json()['run_id']}/events")[-1]
        assert done["result"]["status"] == "completed", done
        turns = client.get(f"/v1/sessions/{sid}").json()
        assert [t["text"] for t in turns.get("turns", [])] in ([], ["hello"]), turns


def test_a_decision_posted_while_the_broker_is_away_leaves_the_run_resumable(cluster: Any) -> None:
    """The same for a decision: the run's continuation was queued with no message to deliver it
    (a 500), and its session answered 409 for ever. Now the node answers 503, the run is not live,
    and the decision sent again once the broker is back continues it."""
    import httpx

    from tests.server.conftest import read_events

    c = cluster()
    c.dispatcher = BrokerAway(c.dispatcher, away=0)
    with httpx.Client(base_url=c.node(), timeout=30) as client:
        sid = client.post("/v1/sessions", json={"agent": "ship_approved"}).json()["session_id"]
        run_id = client.post(f"/v1/sessions/{sid}/messages", json={"text": "order 8"}).json()["run_id"]
        first = read_events(client, f"/v1/runs/{run_id}/events")
        asked = next(e for e in first if e["event"] == "approval_required")
        c.dispatcher.away = 1
        r = client.post(
            f"/v1/runs/{run_id}/decision",
            json={"call_id": asked["call_id"], "args_hash": asked["args_hash"], "approve": True},
        )
        assert r.status_code == 503 and "send the decision (or the resume) again" in r.text, r.text
        assert c.worker.jobs.live_run_of(sid) is None
        assert client.get(f"/v1/runs/{run_id}").json()["live"] is False
        r = client.post(
            f"/v1/runs/{run_id}/decision",
            json={"call_id": asked["call_id"], "args_hash": asked["args_hash"], "approve": True},
        )
        assert r.status_code == 202, r.text
        rest = read_events(client, f"/v1/runs/{run_id}/events", last_event_id=first[-1]["id"])
        assert rest[-1]["event"] == "done" and rest[-1]["result"]["status"] == "completed", rest
    assert c.shipped() == [f"{run_id}:call_ship"]


def test_a_message_whose_job_insert_lost_its_connection_is_answered(cluster: Any, pg_url: str) -> None:
    """The database connection killed while a node queued a run's job (a failover, an operator's
    pg_terminate_backend): the node answered 500 with the turn already recorded, so the client's
    retry with the same message_id (what message_id is for) was told 200 "accepted" for a run that
    never began: its stream ended empty and nothing ever answered. Now the job is queued again on a
    new connection, and the first post is answered and run."""
    import httpx
    import psycopg

    from tests.server.conftest import read_events

    c = cluster()
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute("CREATE SEQUENCE job_kills")
        conn.execute(
            "CREATE FUNCTION kill_job_once() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN "
            "IF nextval('job_kills') = 1 THEN PERFORM pg_terminate_backend(pg_backend_pid()); PERFORM pg_sleep(5); "
            "END IF; RETURN NEW; END $$"
        )
        conn.execute(
            "CREATE TRIGGER kill_job_once BEFORE INSERT ON tether_jobs FOR EACH ROW EXECUTE FUNCTION kill_job_once()"
        )
    with httpx.Client(base_url=c.node(), timeout=30) as client:
        sid = client.post("/v1/sessions", json={"agent": "answer"}).json()["session_id"]
        r = client.post(f"/v1/sessions/{sid}/messages", json={"text": "hello", "message_id": "m-1"})
        assert r.status_code == 202, r.text
        done = read_events(client, f"/v1/runs/{r.json()['run_id']}/events")[-1]
        assert done["result"]["status"] == "completed", done
    with psycopg.connect(pg_url) as conn:
        assert conn.execute("SELECT last_value FROM job_kills").fetchone()[0] >= 2  # killed once, then inserted
