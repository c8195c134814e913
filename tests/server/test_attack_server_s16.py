"""``tether serve`` attacked from outside (round sixteen): a server killed mid-run and started again,
long sessions read while other requests wait, and runs that never began. Each test failed before
its fix."""

from __future__ import annotations

import shutil
import signal
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("fastapi", reason="needs tether[serve] (the [test] extra installs it)")

from tests.server.conftest import EXAMPLE_WORKSPACE, read_events, wait_until
from tests.server.test_restart import Process

ASK = "Which file mentions a timeout?"


def _killed_before_its_first_save(tmp_path: Path) -> tuple[Path, str, str]:
    """A ``tether serve`` killed (-9) while a message's run waited in its extension's start (the
    "gated" agent), before the run's first save: the server's home, the session and the run."""
    home, workspace = tmp_path / "home", tmp_path / "killed"
    shutil.copytree(EXAMPLE_WORKSPACE, workspace)
    first = Process(home, workspace)
    with first.client() as c:
        sid = c.post("/v1/sessions", json={"agent": "gated"}).json()["session_id"]
        run_id = c.post(f"/v1/sessions/{sid}/messages", json={"text": ASK, "message_id": "m-first"}).json()["run_id"]
        wait_until(lambda: (workspace / "gate-reached").exists(), what="the run at its extension's start")
    assert first.stop(signal.SIGKILL) == -signal.SIGKILL
    return home, sid, run_id


def test_a_run_that_never_began_is_not_begun_by_a_resume_after_its_session_went_on(served: Any, tmp_path: Path) -> None:
    """A run the kill cut before it began, its session gone on since (another message sent and
    answered after the restart): its Resume began it then, and its question was answered after the
    later exchange (the conversation read "List the files", its answer, then the older question),
    while the session listed it first. A message sent again with its message_id is not begun in
    that case (round fifteen); a resume is not either now: 409, nothing run, and the run's view no
    longer offers a Resume that would be refused."""
    home, sid, cut = _killed_before_its_first_save(tmp_path)
    second = served(home=home)  # started again where the killed one stopped
    (tmp_path / "workspace0" / "open-gate").write_text("go")
    with second.client() as c:
        later = c.post(f"/v1/sessions/{sid}/messages", json={"text": "List the files"}).json()["run_id"]
        assert read_events(c, f"/v1/runs/{later}/events")[-1]["result"]["status"] == "completed"
        view = c.get(f"/v1/runs/{cut}").json()
        assert view["resumable"] is False and "another message" in view["reason"], view
        r = c.post(f"/v1/runs/{cut}/resume")
        assert r.status_code == 409, r.text
        assert "went on" in r.json()["error"]["message"] and "new message" in r.json()["error"]["message"]
        assert c.get(f"/v1/runs/{cut}/transcript").json()["messages"] == []  # it never ran
        assert c.get(f"/v1/runs/{cut}").json()["live"] is False
        said = [m for m in c.get(f"/v1/runs/{later}/transcript").json()["messages"] if m["role"] == "user"]
        assert len(said) == 1
