"""A finished run's event log is forgotten after ``[serve] keep_events_days``; its transcript stays,
and a client (the page replaying a session) still gets the answer and the exit, made from it."""

from __future__ import annotations

import os
import time
from typing import Any

from tests.server.conftest import read_events
from tests.server.test_api import _waiting_run, finish, send, start_session

DAY = 86400.0


def test_a_pruned_run_replays_its_answer_and_exit_from_the_transcript(served: Any) -> None:
    s = served()
    manager = s.app.state.core.manager
    with s.client() as c:
        sid = start_session(c, "plan")
        old = send(c, sid, "Which file mentions a timeout?")
        streamed = finish(c, old["run_id"])
        recent = send(c, sid, "And which one is largest?")
        finish(c, recent["run_id"])
        logs = s.home / "serve" / "events"
        aged = time.time() - 9 * DAY
        os.utime(logs / f"{old['run_id']}.log", (aged, aged))

        assert manager.prune_events(7 * DAY) == 1
        last = streamed[-1]["id"]
        # Only the last id is kept, so a run resumed later numbers on from it.
        assert (logs / f"{old['run_id']}.log").read_bytes() == f'0\tpruned\t{{"last_id": {last}}}\n'.encode()
        assert len((logs / f"{recent['run_id']}.log").read_bytes()) > 100
        assert manager.prune_events(7 * DAY) == 0  # pruned once

        replay = read_events(c, f"/v1/runs/{old['run_id']}/events")
        assert [(e["id"], e["event"]) for e in replay] == [(1, "text_delta"), (2, "done")]
        answer = "".join(e["text"] for e in streamed if e["event"] == "text_delta")
        assert replay[0]["text"] == answer and "timed out" in answer
        assert replay[1]["result"]["status"] == "completed"
        assert replay[1]["result"]["turns"] == streamed[-1]["result"]["turns"]
        assert replay[1]["result"]["cost_usd"] == streamed[-1]["result"]["cost_usd"]
        # Asking from after an event id is asking for what came later: nothing is made up.
        assert read_events(c, f"/v1/runs/{old['run_id']}/events", last_event_id=5) == []
        # The recent run still replays every event it streamed.
        assert len(read_events(c, f"/v1/runs/{recent['run_id']}/events")) > 2
        # The transcript is whole.
        assert c.get(f"/v1/runs/{old['run_id']}/transcript").json()["messages"]


def test_a_run_resumed_after_its_events_were_pruned_numbers_its_new_events_after_the_old_ones(served: Any) -> None:
    """A run waits for a decision longer than keep_events_days: its log is pruned. When the person
    decides, the new events take ids after those a client saw, so its Last-Event-ID still means
    "what came after what I have" and it misses nothing."""
    s = served()
    manager = s.app.state.core.manager
    with s.client() as c:
        run_id, events, _ = _waiting_run(c)
        seen = events[-1]["id"]
        log = s.home / "serve" / "events" / f"{run_id}.log"
        aged = time.time() - 9 * DAY
        os.utime(log, (aged, aged))
        assert manager.prune_events(7 * DAY) == 1

        asked = next(e for e in events if e["event"] == "approval_required")
        decided = c.post(
            f"/v1/runs/{run_id}/decision",
            json={"call_id": asked["call_id"], "args_hash": asked["args_hash"], "approve": True},
        )
        assert decided.status_code == 202, decided.text
        more = finish(c, run_id, after=seen)
        assert [e["id"] for e in more] == list(range(seen + 1, seen + 1 + len(more)))
        assert [e["event"] for e in more][:2] == ["decision", "tool_start"]
        assert more[-1]["result"]["status"] == "completed"
        # What was pruned is not made up again: from the start, a client gets the new part.
        assert [e["id"] for e in read_events(c, f"/v1/runs/{run_id}/events")] == [e["id"] for e in more]


def test_a_live_run_and_a_planted_link_are_never_pruned(served: Any, tmp_path: Any) -> None:
    s = served()
    manager = s.app.state.core.manager
    logs = s.home / "serve" / "events"
    logs.mkdir(parents=True, exist_ok=True)
    target = tmp_path / "precious.txt"
    target.write_text("keep me")
    os.symlink(target, logs / "run_planted.log")
    live = logs / "run_live.log"
    live.write_text("")
    aged = time.time() - 30 * DAY
    os.utime(live, (aged, aged))
    os.utime(logs / "run_planted.log", (aged, aged), follow_symlinks=False)
    manager.live["run_live"] = object()
    try:
        assert manager.prune_events(7 * DAY) == 0
    finally:
        manager.live.pop("run_live")
    assert live.exists() and target.read_text() == "keep me" and os.path.islink(logs / "run_planted.log")
