"""The page after ``tether serve`` was killed (-9) mid-run and started again: the run's turn says it
was interrupted, offers Resume, and the run goes on from there."""

from __future__ import annotations

import shutil
import signal
from pathlib import Path
from typing import Any

from playwright.sync_api import Page, expect

from tests.server.conftest import EXAMPLE_WORKSPACE, NEEDS_CHROMIUM, read_events
from tests.server.test_restart import Process

pytestmark = NEEDS_CHROMIUM
expect.set_options(timeout=15_000)


def test_a_run_a_kill_cut_says_interrupted_and_offers_resume(page: Page, served: Any, tmp_path: Path) -> None:
    """The turn of a run the kill cut read "running" (the status its saved state still has) with
    "the server stopped while this run was running", under a Resume button: a run shown as running
    that was not. It reads "interrupted" now, from the done the server added as it started again,
    and Resume finishes it."""
    home, workspace = tmp_path / "home", tmp_path / "killed"
    shutil.copytree(EXAMPLE_WORKSPACE, workspace)
    first = Process(home, workspace)
    with first.client() as c:
        sid = c.post("/v1/sessions", json={"agent": "slow"}).json()["session_id"]
        run_id = c.post(f"/v1/sessions/{sid}/messages", json={"text": "scan"}).json()["run_id"]
        read_events(c, f"/v1/runs/{run_id}/events", until=lambda e: e["event"] == "tool_start")
    assert first.stop(signal.SIGKILL) == -signal.SIGKILL
    second = served(home=home)
    (tmp_path / "workspace0" / "release").write_text("go")
    page.goto(f"{second.url}/#{sid}")
    turn = page.locator(".turn").last
    expect(turn.get_by_role("button", name="Resume")).to_be_visible()
    expect(turn.locator(".exit-status")).to_have_text("interrupted")
    expect(turn.locator(".exit-reason")).to_contain_text("the server stopped while this run was running")
    turn.get_by_role("button", name="Resume").click()
    expect(turn.locator(".exit-status")).to_have_text("completed")
    expect(turn.get_by_role("button", name="Resume")).to_have_count(0)
