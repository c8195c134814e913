"""Closing review of session 18 (the command line): each test fails before its fix."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.cli.conftest import run_main
from tether import RunStore
from tether.harness.state import CallInFlight

PROMPT = "Which file mentions a timeout?"


def test_a_token_limit_given_to_resume_counts_the_request_a_killed_process_had_out(
    quiet_env: Path, workspace: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Was: `tether resume --max-run-tokens N` of a run whose process was killed with a request out
    checked N against the tokens used alone, while the resume counts that request's worst case too
    (as the budget's check beside it does): a limit the check let through stopped the run again at
    once, budget_exceeded, having run nothing."""
    code, out, err = run_main(
        "run", "--model", "scripted/plan", "--cwd", str(workspace), "--max-run-tokens", "50000", "--json", PROMPT,
        capsys=capsys,
    )  # fmt: skip
    assert code == 0, err
    run_id = str(json.loads(out)["run_id"])
    store = RunStore(quiet_env / "runs")
    state = store.load(run_id)
    used = state.usage.total_tokens
    # As a kill leaves it: running, a request out (its prompt and all of its answer are counted).
    state.status = "running"
    state.messages = state.messages[:-1]  # the answer's request was the one out
    state.call_in_flight = CallInFlight(model="scripted/plan", prompt_tokens=3000, max_tokens=4000, max_cost_usd=None)
    store.save(state)

    code, _, err = run_main("resume", run_id, "--max-run-tokens", str(used + 5000), "--json", capsys=capsys)
    assert code == 2, err
    assert f"already used {used + 7000:,} tokens" in err, err  # the lost request's worst case included
    assert store.load(run_id).tokens_unknown == 0  # nothing was run
