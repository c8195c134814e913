"""A decision made on a copy of a run that was saved again meanwhile (a worker still stopping it)
is a 409 that says so, not a 500; nothing is decided or run, and the run can be resumed after."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.server.conftest import read_events
from tests.server.test_api import finish, send, start_session
from tether.errors import StaleRunError


def test_a_resume_refused_as_stale_is_a_409_and_the_run_stays_resumable(
    served: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    s = served()
    with s.client() as c:
        sid = start_session(c, "slow")
        run_id = send(c, sid, "scan")["run_id"]
        read_events(c, f"/v1/runs/{run_id}/events", until=lambda e: e["event"] == "tool_start")
        assert c.post(f"/v1/runs/{run_id}/cancel").status_code == 202
        manager = s.app.state.core.manager

        def saved_meanwhile(turn: Any, state: Any, *args: Any, **kw: Any) -> None:
            raise StaleRunError(run_id, state.commit_seq, state.commit_seq + 1)

        with monkeypatch.context() as m:
            m.setattr(manager, "resume", saved_meanwhile)
            r = c.post(f"/v1/runs/{run_id}/resume")
        assert r.status_code == 409, r.text
        assert "changed while this request was made" in r.json()["error"]["message"]
        assert c.get(f"/v1/runs/{run_id}").json()["resumable"]
        (Path(s.home).parent / "workspace0" / "release").write_text("go")
        assert c.post(f"/v1/runs/{run_id}/resume").status_code == 202
        assert finish(c, run_id)[-1]["result"]["status"] == "completed"
