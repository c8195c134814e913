"""An evaluator who runs agents behind `tether serve` and reaches for the command line."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.cli.conftest import run_main
from tether.harness.state import RunState
from tether.harness.store import RunStore


def test_resuming_a_served_run_from_the_command_line_says_where_to_resume_it(
    tether_home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Was: `tether resume RUN_ID` of a run `tether serve` had stopped (`tether runs` lists them)
    said its saved config had no model and no cwd, "the header was edited, or the run was not made
    by `tether run`", as if it were damaged. It now says it is a served run, and which route (or
    button) resumes it."""
    state = RunState(
        run_id="run_0123456789abcdef", ext={"config": {"agent": "support", "served": True, "prompt": "hi"}}
    )
    state.status = "running"  # as a server killed under it left it
    RunStore(tether_home / "runs").save(state)
    code, _, err = run_main("resume", state.run_id, capsys=capsys)
    assert code == 2, err
    assert "is a run of `tether serve` (agent 'support')" in err
    assert f"POST /v1/runs/{state.run_id}/resume" in err
    assert "edited" not in err
