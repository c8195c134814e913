"""The Postgres-backed server, what the last round left alone: two long messages that agree in
their first 500 characters, the second sent after a 503; a server running its own runs whose
database stays away longer than its runs wait; and a Stop posted while a run waits for the
database. The module's database and its node with a worker on threads (test_left_alone_s11)."""

from __future__ import annotations

import time

import httpx
import pytest

from tests.dispatch.conftest import Cluster
from tests.postgres.test_left_alone_s11 import _queue_meets_the_database_away, shared  # noqa: F401
from tests.server.conftest import read_events


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
