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


def test_config_check_says_whether_the_database_answers(
    tether_home: Path, pg_url: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Was: with database_url set, `tether config check` said `ok` whether or not the database
    answered (every command then failed on it), and nothing in its answer said the stores were in
    Postgres at all. It now connects, as every command does first: a database it cannot reach is
    the same one line and exit 2; one that answers is named, without its password."""
    monkeypatch.setenv("TETHER_DATABASE_URL", "postgresql://tether:secret@127.0.0.1:1/tether")
    code, out, err = run_main("config", "check", capsys=capsys)
    assert code == 2 and "cannot connect to the database postgresql://tether:***@127.0.0.1:1/tether" in err, err
    assert "ok:" not in out and "secret" not in out + err

    monkeypatch.setenv("TETHER_DATABASE_URL", pg_url)
    code, out, err = run_main("config", "check", capsys=capsys)
    assert code == 0, err
    assert out.startswith("ok: ") and "\ndatabase: postgresql://" in out and " answers (runs, sessions" in out, out
