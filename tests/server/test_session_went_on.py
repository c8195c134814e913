"""A decision for a run whose session went on after it stopped (another message was answered)
was taken (202), and the run then failed: resuming it would have removed the later exchange. The
decision is now refused at once (409), saying why, and nothing runs."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.server.conftest import read_events
from tests.server.test_attack_api_round4 import Slow, _ended, _send, _session

pytest.importorskip("fastapi", reason="needs tether[serve] (the [test] extra installs it)")


def test_a_decision_for_a_run_the_session_went_on_after_is_refused_and_runs_nothing(
    served: Any, tmp_path: Path
) -> None:
    a = Slow(served, tmp_path)
    with a.client() as c:
        sid = _session(c)
        run_id = _send(c, sid, "delete the log")
        asked = _ended(c, run_id)["waiting"]
        later = _send(c, sid, "hello")
        read_events(c, f"/v1/runs/{later}/events", until=lambda e: e["event"] == "done")
        body = {"call_id": asked["call_id"], "args_hash": asked["args_hash"], "approve": True}

        r = c.post(f"/v1/runs/{run_id}/decision", json=body)

        assert r.status_code == 409, r.text
        assert "went on after run" in r.json()["error"]["message"] and "new message" in r.json()["error"]["message"]
        assert (a.workspace / "access.log").exists()  # the call was not run
        run = c.get(f"/v1/runs/{run_id}").json()
        assert run["waiting"] == asked and not run["live"], run
        turns = c.get(f"/v1/sessions/{sid}").json()["turns"]
        assert [t["run_id"] for t in turns][-1] == later  # the later exchange is still the session's
        assert "echo: hello" in str(c.get(f"/v1/runs/{later}/transcript").json())
