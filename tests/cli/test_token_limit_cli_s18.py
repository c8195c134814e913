"""A run's token limit (Agent.max_run_tokens) from the command line and config.toml, as its dollar
budget is: ``--max-run-tokens N`` on ``tether run`` and ``chat``, ``max_run_tokens`` in
``[agents.NAME]``, and ``tether resume --max-run-tokens N`` (a new total) for a run it stopped."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.cli.conftest import run_main
from tether import RunStore

PROMPT = "Which file mentions a timeout?"


def _json(out: str) -> dict[str, object]:
    result: dict[str, object] = json.loads(out)
    return result


def _tokens(result: dict[str, object]) -> int:
    usage = result["usage"]
    assert isinstance(usage, dict)
    return int(usage["prompt_tokens"]) + int(usage["completion_tokens"])


def _agent(home: Path, workspace: Path, line: str) -> None:
    home.mkdir(parents=True, exist_ok=True)
    (home / "config.toml").write_text(f'[agents.t]\nmodel = "scripted/plan"\ncwd = "{workspace}"\n{line}\n')


def test_tether_run_and_an_agents_definition_set_the_token_limit(
    quiet_env: Path, workspace: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Was: the token limit could be set from Python only: `tether run --max-run-tokens` was an
    unknown option and `max_run_tokens` in [agents.NAME] an unknown key (exit 2 both)."""
    code, out, err = run_main(
        "run", "--model", "scripted/plan", "--cwd", str(workspace), "--max-run-tokens", "3500", "--json", PROMPT,
        capsys=capsys,
    )  # fmt: skip
    result = _json(out)
    assert code == 4 and result["status"] == "budget_exceeded", err
    assert str(result["reason"]).startswith("the run's token limit (3,500") and _tokens(result) <= 3500

    _agent(quiet_env, workspace, "max_run_tokens = 3500")
    code, out, err = run_main("run", "--agent", "t", "--json", PROMPT, capsys=capsys)
    assert code == 4 and str(_json(out)["reason"]).startswith("the run's token limit (3,500"), err
    # The flag wins over the definition, as --max-budget over max_budget_usd.
    code, out, err = run_main("run", "--agent", "t", "--max-run-tokens", "50000", "--json", PROMPT, capsys=capsys)
    assert code == 0 and _json(out)["status"] == "completed", err


@pytest.mark.parametrize("value", ["-5", "0", "1.5", "1e9", "many"])
def test_a_token_limit_that_is_no_whole_number_is_refused_naming_the_option(
    value: str, quiet_env: Path, workspace: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Was: `--max-run-tokens` was no option at all (argparse's "unrecognized arguments")."""
    code, _, err = run_main(
        "run", "--model", "scripted/plan", "--cwd", str(workspace), f"--max-run-tokens={value}", PROMPT, capsys=capsys
    )
    assert code == 2 and f"argument --max-run-tokens: expected a whole number of 1 or more, got '{value}'" in err
    assert not (quiet_env / "runs").exists() or not any((quiet_env / "runs").iterdir())  # nothing ran


@pytest.mark.parametrize(
    ("written", "said"),
    [
        ("-5", "max_run_tokens must be greater than 0, not -5"),
        ("1.5", "max_run_tokens must be a whole number, not 1.5"),
        ('"1e9"', 'max_run_tokens must be a whole number, not "1e9" (write max_run_tokens = 1_000_000_000)'),
        ("1e9", "max_run_tokens must be a whole number, not 1000000000.0 (write max_run_tokens = 1_000_000_000)"),
    ],
)
def test_a_token_limit_in_config_toml_that_is_no_whole_number_is_refused_naming_the_key(
    written: str, said: str, quiet_env: Path, workspace: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Was: `max_run_tokens` was an unknown key of [agents.NAME] whatever its value; and a whole
    number written in quotes or as 1e9 was told to be written `without quotes` (max_run_tokens =
    1e9), which TOML reads as a decimal: refused again."""
    _agent(quiet_env, workspace, f"max_run_tokens = {written}")
    code, _, err = run_main("run", "--agent", "t", PROMPT, capsys=capsys)
    assert code == 2 and f"[agents.t] {said}" in err, err


def test_tether_resume_raises_a_runs_token_limit(
    quiet_env: Path, workspace: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Was: a run its token limit stopped could not be resumed from the command line: `tether
    resume` asked for --max-budget USD (a dollar budget leaves the token limit where it was: the
    run stopped again at once), and `tether show` sent the person to Python."""
    code, out, _ = run_main(
        "run", "--model", "scripted/plan", "--cwd", str(workspace), "--max-run-tokens", "3500", "--json", PROMPT,
        capsys=capsys,
    )  # fmt: skip
    first = _json(out)
    run_id, used = str(first["run_id"]), _tokens(first)
    assert code == 4 and used > 0

    code, out, err = run_main("show", run_id, capsys=capsys)
    assert f"tether resume {run_id} --max-run-tokens N" in out + err
    code, _, err = run_main("resume", run_id, capsys=capsys)
    assert code == 2 and f"resume it with --max-run-tokens N, a new total above {used:,}" in err, err
    code, _, err = run_main("resume", run_id, "--max-budget", "5", capsys=capsys)
    assert code == 2 and "--max-run-tokens" in err, err
    code, _, err = run_main("resume", run_id, "--max-run-tokens", str(used), capsys=capsys)
    assert code == 2 and f"a new total above {used:,}" in err, err  # not above what it used
    assert RunStore(quiet_env / "runs").load(run_id).turns == 1  # none of these ran anything

    code, out, err = run_main("resume", run_id, "--max-run-tokens", "50000", "--json", capsys=capsys)
    result = _json(out)
    assert code == 0 and result["status"] == "completed", err
    assert used < _tokens(result) <= 50_000
    assert RunStore(quiet_env / "runs").load(run_id).config["max_run_tokens"] == 50_000  # a later resume keeps it
