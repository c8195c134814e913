"""Defects the closing review of session 17 found, each with what was wrong before its fix."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.cli.conftest import run_main
from tether import Agent, RunStore, run_sync
from tether.cli.display import resume_hint
from tether.server.app import ApiError, ResumeBody, _check_resumable
from tether.testing import FunctionModel


def test_a_run_stopped_at_its_token_limit_is_not_told_to_resume_with_a_dollar_budget(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Was: a run that max_run_tokens stopped ends budget_exceeded, and the server's resume said it
    "stopped at its budget ($0.000000 spent)" and to resume with {"max_budget_usd": X}, as `tether
    show` hinted --max-budget USD: a dollar budget given so leaves the token limit where it was, and
    the resumed run stops again at once. Now each says the token limit stopped it, and how to raise
    it."""
    monkeypatch.setenv("TETHER_HOME", str(tmp_path / "home"))
    store = RunStore(tmp_path / "home" / "runs")
    agent = Agent(FunctionModel(lambda messages, request: "x" * 40), max_run_tokens=10)
    result = run_sync(agent, "a question long enough to need more than ten tokens of prompt", store=store)
    assert result.status == "budget_exceeded" and "token limit" in (result.reason or ""), result.reason
    code, out, err = run_main("show", result.run_id, capsys=capsys)
    assert code == 0 and "max_run_tokens" in out + err and "--max-budget" not in out + err, out + err
    with pytest.raises(ApiError, match="token limit") as refused:  # the server's resume
        _check_resumable(store.load(result.run_id), ResumeBody(max_budget_usd=1.0))
    assert refused.value.status == 409 and "max_budget_usd" not in str(refused.value)
    hint = resume_hint(result.run_id, result.status, result.interruption, result.reason)
    assert hint is not None and "max_run_tokens" in hint and "--max-budget" not in hint
    dollars = resume_hint(result.run_id, "budget_exceeded", None, "the budget could not pay for another call")
    assert dollars is not None and "--max-budget" in dollars
