"""The Postgres-backed server, what the last round left alone: two long messages that agree in
their first 500 characters, the second sent after a 503; a server running its own runs whose
database stays away longer than its runs wait; and a Stop posted while a run waits for the
database. The module's database and its node with a worker on threads (test_left_alone_s11)."""

from __future__ import annotations

import logging
import threading
import time
from typing import Any

import httpx
import pytest

from tests.dispatch.conftest import Cluster
from tests.postgres.test_left_alone_dispatch import Outage
from tests.postgres.test_left_alone_s11 import (  # noqa: F401
    _away_until_the_run_gives_up_on_it,
    _ended_alike,
    _order_started,
    _queue_meets_the_database_away,
    _short_waits,
    _until,
    one_node,
    shared,
)
from tests.server.conftest import parse_sse, read_events


def _user_texts(shared: Cluster, run_id: str) -> list[str]:  # noqa: F811
    from tether.messages import UserMessage

    messages = shared.worker.runs.load(run_id).messages
    return ["".join(getattr(p, "text", "") for p in m.content) for m in messages if isinstance(m, UserMessage)]


@pytest.mark.parametrize("committed", [False, True], ids=["nothing-queued", "queued-unseen"])
def test_a_long_message_that_only_starts_like_the_one_left_unsent_is_a_message_of_its_own(
    shared: Cluster,  # noqa: F811
    monkeypatch: pytest.MonkeyPatch,
    committed: bool,
) -> None:
    """A message answered 503 (its job not queued, or queued unseen), then a different message
    with a new message_id whose first 500 characters are the same: it was taken as the first one
    sent again (only the first 500 characters were compared) and answered with the first's run,
    so it was never answered (or it ran under the first's id, and the first was lost). Now only
    the same text, whole, counts as sent again; the other is a message of its own (told 409 "still
    answering" while the first one's job, found left behind, is answered)."""
    _queue_meets_the_database_away(monkeypatch, committed=committed)
    common = "Please ship everything on this list. " * 14  # 518 characters
    with httpx.Client(base_url=shared.nodes[0][0], timeout=60) as client:
        sid = client.post("/v1/sessions", json={"agent": "answer"}).json()["session_id"]
        first = client.post(f"/v1/sessions/{sid}/messages", json={"text": common + "First: apples."})
        assert first.status_code == 503, first.text
        time.sleep(0.3)  # the client waits a moment; a job queued unseen counts as left behind
        body = {"text": common + "Second: pears.", "message_id": f"m-second-{sid}"}
        second = client.post(f"/v1/sessions/{sid}/messages", json=body)
        if committed:  # the first one's job, found left behind, is handed on: the session answers it first
            assert second.status_code == 409 and "still answering" in second.text, second.text
            read_events(client, f"/v1/runs/{first.json()['error']['run_id']}/events")
            second = client.post(f"/v1/sessions/{sid}/messages", json=body)
        assert second.status_code == 202, second.text
        assert second.json()["message_id"] == f"m-second-{sid}", second.json()
        events = read_events(client, second.json()["events"])
        assert events[-1]["result"]["status"] == "completed", events[-1]
        assert _user_texts(shared, second.json()["run_id"])[-1] == common + "Second: pears."
        # a long message answered 503 and sent again whole with a new id is still that message
        _queue_meets_the_database_away(monkeypatch, committed=committed)
        third = client.post(f"/v1/sessions/{sid}/messages", json={"text": common + "Third: plums."})
        assert third.status_code == 503, third.text
        time.sleep(0.3)
        again = client.post(f"/v1/sessions/{sid}/messages", json={"text": common + "Third: plums."})
        assert again.status_code in (200, 202), again.text
        assert again.json()["message_id"] == third.json()["error"]["message_id"], again.json()
        assert read_events(client, again.json()["events"])[-1]["result"]["status"] == "completed"
        assert _user_texts(shared, again.json()["run_id"])[-1] == common + "Third: plums."


def test_a_run_on_a_server_of_its_own_waits_for_the_database_as_long_as_it_is_away(
    shared: Cluster,  # noqa: F811
    one_node: str,  # noqa: F811
    db_url: str,
    pg_server: Any,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """`tether serve` running its runs itself, the database away longer than a run waited for it
    (two minutes, shortened here): the run's stream ended ``interrupted`` ("... resume it") while
    GET of the run and its session said ``running`` ("the server stopped while this run was
    running"). Its events are in files, not in the database: it now waits as long as the database
    is away, and goes on once it is back, so the stream, the run and the session end alike."""
    from tether.server import runs

    caplog.set_level(logging.WARNING, logger="tether")
    _short_waits(monkeypatch, db_url)
    monkeypatch.setitem(runs.run_parts.__kwdefaults__, "away_wait_s", 0.3)  # the two minutes it waited
    with httpx.Client(base_url=one_node, timeout=60) as client:
        sid, posted, _ = _order_started(client, shared, "order-wait", "m-wait")
        run_id = posted.json()["run_id"]
        _away_until_the_run_gives_up_on_it(Outage(pg_server.url, db_url), caplog, then_s=1.0)
        events = _ended_alike(client, sid, run_id, "m-wait")
    assert sum(1 for line in shared.shipped() if line.startswith(run_id)) == 1
    # the order's result, whose save met the database away, is in the stream (the page's step ends)
    results = [e for e in events if e["event"] == "tool_result"]
    assert [(r["tool_name"], r["ok"]) for r in results] == [("ship_order", True)], events


def test_a_stop_while_a_run_waits_for_the_database_is_taken_at_once(
    shared: Cluster,  # noqa: F811
    one_node: str,  # noqa: F811
    db_url: str,
    pg_server: Any,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Stop pressed while a run of `tether serve` waited for its database: answered 503 "try
    again in a moment" (the request's own check needed the database), and once the database was
    back the run went on, asking the model again, as if nobody had pressed it. Now the Stop is
    taken at once (202, the run ``interrupted``, "stopped by the user"), the stream ends with it,
    nothing more starts, and what the run did and its stop are saved once the database is back:
    GET and the session say the same, and a resume goes on from there."""
    caplog.set_level(logging.WARNING, logger="tether")
    _short_waits(monkeypatch, db_url)
    outage = Outage(pg_server.url, db_url)
    with httpx.Client(base_url=one_node, timeout=60) as client:
        sid, posted, started = _order_started(client, shared, "order-stop", "m-stop")
        run_id = posted.json()["run_id"]
        streamed: list[list[dict[str, Any]]] = []
        opened = threading.Event()

        def read() -> None:  # the stream opened while the database is there, read to its end after
            headers = {"Accept": "text/event-stream"}
            with client.stream("GET", posted.json()["events"], headers=headers, timeout=60) as r:
                assert r.status_code == 200, r.read()
                opened.set()
                streamed.append(list(parse_sse(r.iter_lines())))

        reader = threading.Thread(target=read, daemon=True)
        reader.start()
        assert opened.wait(20), "the run's stream did not open"
        outage.begin()
        try:
            _until(lambda: "saved once the database is back" in caplog.text, "the run never waited for the database")
            stop = client.post(f"/v1/runs/{run_id}/cancel")
            assert stop.status_code == 202, stop.text
            assert (stop.json()["status"], stop.json()["live"]) == ("interrupted", False), stop.json()
            assert "stopped by the user" in stop.json()["reason"], stop.json()
            reader.join(20)
            assert streamed, "the stream did not end with the Stop"
        finally:
            outage.end()
        done = streamed[0][-1]
        assert done["event"] == "done" and done["result"]["status"] == "interrupted", done
        assert "stopped by the user" in done["result"]["reason"]

        def saved() -> str:  # the run as the database has it (first what it did, then its stop)
            try:
                return str(shared.worker.runs.load(run_id).reason)
            except Exception:
                return ""

        _until(lambda: "stopped by the user" in saved(), "the stop was never saved")
        run = client.get(f"/v1/runs/{run_id}").json()
        assert (run["status"], run["live"], run["resumable"]) == ("interrupted", False, True), run
        assert "stopped by the user" in run["reason"], run
        turns = client.get(f"/v1/sessions/{sid}").json()["turns"]
        assert [(t["message_id"], t["status"]) for t in turns] == [("m-stop", "interrupted")], turns
        # nothing more was started: one model turn, one tool call, and its result kept (and told)
        kinds = [e["event"] for e in streamed[0]]
        assert kinds.count("turn") == 1 and kinds.count("tool_result") == 1, streamed[0]
        roles = [m.role for m in shared.worker.runs.load(run_id).messages]
        assert roles == ["user", "assistant", "tool"], roles
        kept = shared.worker.sessions.load(sid)  # what the run of a next message reads
        assert [m.role for m in kept] == ["user", "assistant", "tool"], kept
        assert kept[-1].text.startswith("shipped order-stop"), kept[-1]  # its result, not a placeholder
        assert len(shared.calls()) == started + 1
        resumed = client.post(f"/v1/runs/{run_id}/resume")
        assert resumed.status_code == 202, resumed.text
        assert read_events(client, f"/v1/runs/{run_id}/events")[-1]["result"]["status"] == "completed"
    assert sum(1 for line in shared.shipped() if line.startswith(run_id)) == 1
    assert len(shared.calls()) == started + 1


def test_a_stop_while_the_database_is_away_knows_its_caller_only_as_last_checked(pg_url: str) -> None:
    """Who may Stop while the database is away: a token this process checked (not one revoked here
    since, not one it never saw), or anyone on loopback when the server had no tokens at its last
    answer; nothing when it never had an answer."""
    from tether.postgres.db import database
    from tether.postgres.server import PgServerStore

    store = PgServerStore(database(pg_url))  # a database of its own: the module's has no tokens
    assert store.known_local() is None  # never answered
    assert store.auth_required() is False and store.known_local() is True
    token, unseen = store.add_token("ann"), store.add_token("bob")
    assert store.known_caller(token) is None  # not checked yet
    assert store.user_for_token(token) == "ann" and store.known_caller(token) == "ann"
    assert store.auth_required() is True and store.known_local() is False
    assert store.known_caller(unseen) is None and store.known_caller("tt_forged") is None
    store.revoke_token("ann")
    assert store.known_caller(token) is None
