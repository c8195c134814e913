"""``tether run`` and ``tether resume`` (src/tether/cli/run.py): the scenarios through the real
command, bad input refused before anything runs, the prompt from stdin or a file, resume limits,
and what the summary line says."""

from __future__ import annotations

import io
import json
import os
import re
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.cli.conftest import Terminal, run_main, tether, tether_json
from tests.conftest import wait_for_trace
from tether.harness.store import RunStore
from tether.messages import UserMessage
from tether.providers.scripted import SCENARIOS as SCRIPTED
from tether.providers.scripted import Reply
from tether.testing import ScriptedServer

# scenario → (extra args, expected status, exit code, output)
SCENARIOS: dict[str, tuple[list[str], str, int, str | None]] = {
    "plan": (
        [],
        "completed",
        0,
        "errors.log mentions a timeout: 2026-09-06T10:15:41Z ERROR worker 7 timed out after 30000 ms",
    ),
    # The loop guard, on by default, stops the same call at its fifth time.
    "runaway": (["--max-turns", "20"], "failed", 1, ""),
    "recover": ([], "completed", 0, "errors.log mentions a timeout."),
    "destructive": ([], "interrupted", 5, ""),
    "forbidden": (["--max-turns", "12"], "failed", 1, ""),
    "repeat": ([], "completed", 0, "errors.log mentions a timeout."),
    "slow": ([], "completed", 0, "The archive scan finished: scanned 1200 files: no problems found"),
}


def check(out: subprocess.CompletedProcess[str], scenario: str) -> dict[str, Any]:
    _, status, code, output = SCENARIOS[scenario]
    assert out.returncode == code, out.stderr
    result: dict[str, Any] = json.loads(out.stdout)
    assert result["status"] == status
    if output is not None:
        assert result["output"] == output
    if scenario == "destructive":
        assert result["interruption"] == {
            "type": "approval",
            "call_id": "c2",
            "tool_name": "delete_file",
            "args": {"path": "access.log"},
            "together": [],
        }
    return result


@pytest.mark.parametrize("scenario", list(SCENARIOS))
def test_scenario_through_cli_scripted(scenario: str, workspace: Path, env: dict[str, str]) -> None:
    extra = SCENARIOS[scenario][0]
    out = tether(
        "run",
        "--model",
        f"scripted/{scenario}",
        "--cwd",
        str(workspace),
        "--json",
        *extra,
        "Which file mentions a timeout?",
        env=env,
    )
    result = check(out, scenario)
    assert result["cost_usd"] > 0


@pytest.mark.parametrize("scenario", list(SCENARIOS))
def test_scenario_through_http_server_and_openai_provider(
    scenario: str, workspace: Path, env: dict[str, str], scripted_server: ScriptedServer, tether_home: Path
) -> None:
    tether_home.mkdir(parents=True, exist_ok=True)
    # One agent for both runs, so both send the same tools (a scripted model alone also gets the demo tool).
    tools = '["list_files", "read_file", "delete_file", "write_file", "edit_file", "search_files", "scan_archive"]'
    (tether_home / "config.toml").write_text(
        f'[prices."openai/{scenario}"]\ninput = 2.0\noutput = 12.0\n\n[agents.demo]\ntools = {tools}\n'
    )
    env = {**env, "LLM_BASE_URL": scripted_server.base_url}
    extra = SCENARIOS[scenario][0]
    out = tether(
        "run",
        "--agent",
        "demo",
        "--model",
        f"openai/{scenario}",
        "--cwd",
        str(workspace),
        "--json",
        *extra,
        "Which file mentions a timeout?",
        env=env,
    )
    http = check(out, scenario)
    local = tether(
        "run",
        "--agent",
        "demo",
        "--model",
        f"scripted/{scenario}",
        "--cwd",
        str(workspace),
        "--json",
        *extra,
        "Which file mentions a timeout?",
        env=env,
    )
    assert http["cost_usd"] == pytest.approx(json.loads(local.stdout)["cost_usd"])


def test_plain_output_streams_answer_to_stdout_and_steps_to_stderr(workspace: Path, env: dict[str, str]) -> None:
    out = tether("run", "--model", "scripted/plan", "--cwd", str(workspace), "Which file?", env=env)
    assert out.returncode == 0
    assert out.stdout.strip() == SCENARIOS["plan"][3]
    assert "-> list_files" in out.stderr and "-> read_file" in out.stderr and "[completed]" in out.stderr


def test_approve_and_reject_through_resume(workspace: Path, env: dict[str, str]) -> None:
    for decision, expected, deleted in (
        (["--approve"], "Deleted access.log to free space.", True),
        (["--reject", "keep it"], "I did not delete anything: you declined the deletion.", False),
        (["--reject", ""], "I did not delete anything: you declined the deletion.", False),
    ):
        (workspace / "access.log").write_text("log\n")
        first = tether_json("run", "--model", "scripted/destructive", "--cwd", str(workspace), "free space", env=env)
        out = tether("resume", first["run_id"], *decision, "--json", env=env)
        assert out.returncode == 0, out.stderr
        assert json.loads(out.stdout)["output"] == expected
        assert (workspace / "access.log").exists() is not deleted
        shown = tether("show", first["run_id"], env=env).stdout
        assert ("declined" in shown) is not deleted


def test_an_approvals_reason_reaches_the_transcript(workspace: Path, env: dict[str, str]) -> None:
    (workspace / "access.log").write_text("log\n")
    first = tether_json("run", "--model", "scripted/destructive", "--cwd", str(workspace), "free space", env=env)
    refused = tether("resume", first["run_id"], "--reason", "alone", env=env)
    assert refused.returncode == 2 and "--reason goes with --approve" in refused.stderr
    out = tether("resume", first["run_id"], "--approve", "--reason", "the log is archived nightly", "--json", env=env)
    assert out.returncode == 0, out.stderr
    assert not (workspace / "access.log").exists()
    shown = tether("show", first["run_id"], "--full", env=env).stdout
    assert "Reason: the log is archived nightly" in shown


def test_budget_exit_code_and_never_above(workspace: Path, env: dict[str, str]) -> None:
    out = tether(
        "run",
        "--model",
        "scripted/runaway",
        "--cwd",
        str(workspace),
        "--max-turns",
        "1000",
        "--max-budget",
        "0.01",
        "--json",
        "go",
        env=env,
    )
    assert out.returncode == 4
    result = json.loads(out.stdout)
    assert result["status"] == "budget_exceeded" and result["cost_usd"] <= 0.01


def test_ctrl_c_cancels_the_slow_tool_and_says_how_to_resume(
    workspace: Path, env: dict[str, str], tether_home: Path
) -> None:
    proc = subprocess.Popen(
        ["tether", "run", "--model", "scripted/slow", "--cwd", str(workspace), "--json", "scan"],
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    wait_for_trace(tether_home / "traces", "tool_progress")
    proc.send_signal(signal.SIGINT)
    stdout, stderr = proc.communicate(timeout=30)
    assert proc.returncode == 130, stderr
    result = json.loads(stdout)
    assert result["status"] == "interrupted"
    assert result["interruption"] == {"type": "cancelled", "reason": "user pressed Ctrl-C"}
    assert f"tether resume {result['run_id']}" in stderr  # a cancelled run is resumable: say how


def test_no_model_configured_says_how_to_fix(env: dict[str, str]) -> None:
    out = tether("run", "hello", env=env)
    assert out.returncode == 2
    assert "TETHER_MODEL" in out.stderr and "scripted/plan" in out.stderr and "config.toml" in out.stderr


def test_model_from_environment_and_config(workspace: Path, env: dict[str, str], tether_home: Path) -> None:
    out = tether("run", "--cwd", str(workspace), "--json", "hi", env={**env, "TETHER_MODEL": "scripted/hello"})
    assert json.loads(out.stdout)["status"] == "completed"
    tether_home.mkdir(parents=True, exist_ok=True)
    (tether_home / "config.toml").write_text('model = "scripted/hello"\n')
    out = tether("run", "--cwd", str(workspace), "--json", "hi", env=env)
    assert json.loads(out.stdout)["output"].startswith("Hello!")


def test_unknown_run_and_broken_config_are_clear(env: dict[str, str], tether_home: Path) -> None:
    out = tether("resume", "run_nope", env=env)
    assert out.returncode == 2 and "no run 'run_nope'" in out.stderr
    tether_home.mkdir(parents=True, exist_ok=True)
    (tether_home / "config.toml").write_text("model = [\n")
    out = tether("run", "--model", "scripted/plan", "x", env=env)
    assert out.returncode == 2 and "config.toml" in out.stderr


def test_version_and_python_dash_m(env: dict[str, str]) -> None:
    import tether as package

    assert tether("--version", env=env).stdout.strip() == f"tether {package.__version__}"
    for module in ("tether", "tether.cli"):
        out = subprocess.run(
            [sys.executable, "-m", module, "run", "--model", "scripted/hello", "--json", "hi"],
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
            stdin=subprocess.DEVNULL,
        )
        assert out.returncode == 0 and json.loads(out.stdout)["status"] == "completed"


# --- numeric options: a usage error naming the option and its range, nothing created ----------

BAD_NUMBERS = [
    (["run", "--max-budget", "inf", "x"], "--max-budget", "greater than 0"),
    (["run", "--max-budget", "nan", "x"], "--max-budget", "greater than 0"),
    (["run", "--max-budget", "-1", "x"], "--max-budget", "greater than 0"),
    (["run", "--max-budget", "0", "x"], "--max-budget", "greater than 0"),
    (["run", "--max-budget", "1e999", "x"], "--max-budget", "greater than 0"),
    (["run", "--max-budget", "cheap", "x"], "--max-budget", "greater than 0"),
    (["run", "--max-turns", "-3", "x"], "--max-turns", "1 or more"),
    (["run", "--max-turns", "0", "x"], "--max-turns", "1 or more"),
    (["run", "--max-turns", "2.5", "x"], "--max-turns", "1 or more"),
    (["run", "--first-token-timeout", "0", "x"], "--first-token-timeout", "greater than 0"),
    (["run", "--first-token-timeout", "-1", "x"], "--first-token-timeout", "greater than 0"),
    (["run", "--first-token-timeout", "nan", "x"], "--first-token-timeout", "greater than 0"),
    (["resume", "run_x", "--max-turns", "0"], "--max-turns", "1 or more"),
    (["resume", "run_x", "--max-budget", "nan"], "--max-budget", "greater than 0"),
    (["chat", "--max-turns", "-1"], "--max-turns", "1 or more"),
    (["chat", "--max-budget", "inf"], "--max-budget", "greater than 0"),
    (["auth", "import", "e", "--refresh-token", "t", "--expires-in", "-1"], "--expires-in", "0 or more"),
    (["auth", "import", "e", "--refresh-token", "t", "--expires-in", "nan"], "--expires-in", "0 or more"),
    (["scripted", "serve", "--port", "70000"], "--port", "0 to 65535"),
    (["scripted", "serve", "--port", "-1"], "--port", "0 to 65535"),
    (["scripted", "serve", "--context-window", "0"], "--context-window", "1 or more"),
]


@pytest.mark.parametrize(("argv", "option", "valid"), BAD_NUMBERS, ids=[" ".join(a[:3]) for a, _, _ in BAD_NUMBERS])
def test_bad_numbers_are_usage_errors_and_nothing_is_created(
    argv: list[str], option: str, valid: str, quiet_env: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    if argv[0] == "scripted":  # a value let through would serve forever: keep it in a child with a timeout
        out = tether(*argv, env={**os.environ, "TETHER_HOME": str(quiet_env)}, timeout=30)
        code, err = out.returncode, out.stderr
    else:
        code, _, err = run_main(*argv, capsys=capsys)
    assert code == 2
    assert f"argument {option}: expected" in err and valid in err
    assert not quiet_env.exists()  # no run directory, no trace


def test_max_budget_inf_through_the_real_command(workspace: Path, env: dict[str, str], tether_home: Path) -> None:
    out = tether("run", "--model", "scripted/runaway", "--cwd", str(workspace), "--max-budget", "inf", "go", env=env)
    assert out.returncode == 2 and "Traceback" not in out.stderr
    assert "--max-budget" in out.stderr and not (tether_home / "runs").exists()


# --- the prompt ---------------------------------------------------------------------------------


def prompts(home: Path) -> set[str]:
    """The first user message of every run under ``home``."""
    out = set()
    for run_dir in (home / "runs").iterdir():
        message = RunStore(home / "runs").load(run_dir.name).messages[0]
        assert isinstance(message, UserMessage)
        out.add("".join(getattr(p, "text", "") for p in message.content))
    return out


def test_prompt_from_a_pipe_or_dash(workspace: Path, env: dict[str, str], tether_home: Path) -> None:
    piped = tether_json(
        "run", "--model", "scripted/hello", "--cwd", str(workspace), env=env, input="Which file\nmentions a timeout?\n"
    )
    assert piped["status"] == "completed"
    assert prompts(tether_home) == {"Which file\nmentions a timeout?"}
    dashed = tether_json("run", "--model", "scripted/hello", "--cwd", str(workspace), "-", env=env, input="hi there")
    assert dashed["status"] == "completed"


def test_prompt_from_a_file_and_a_literal_at(
    workspace: Path, quiet_env: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "request.md").write_text("Summarise errors.log\nin one line.\n")
    code, _, err = run_main(
        "run", "--model", "scripted/hello", "--cwd", str(workspace), f"@{tmp_path / 'request.md'}", capsys=capsys
    )
    assert code == 0, err
    assert prompts(quiet_env) == {"Summarise errors.log\nin one line."}
    code, _, err = run_main(
        "run", "--model", "scripted/hello", "--cwd", str(workspace), "@@team please look", capsys=capsys
    )
    assert code == 0, err
    assert prompts(quiet_env) == {"Summarise errors.log\nin one line.", "@team please look"}


@pytest.mark.parametrize(
    ("args", "stdin", "message"),
    [
        ([""], None, "the prompt from the argument is empty"),
        (["   \n\t"], None, "the prompt from the argument is empty"),
        (["-"], "", "the prompt from standard input is empty"),
        ([], "  \n", "the prompt from standard input is empty"),
        (["@/nonexistent/request.md"], None, "cannot read the prompt from /nonexistent/request.md"),
        (["@"], None, '"@" needs a file name'),
        (["--session", "", "hi"], None, "not a session name"),
        (["--session", "../x", "hi"], None, "not a session name"),
        (["--session-store", "sqlite", "hi"], None, "--session-store needs --session NAME"),
        (["--session", "s", "--session-store", "postgres", "hi"], None, "must be jsonl"),
    ],
)
def test_bad_prompts_and_session_options_are_refused(
    args: list[str],
    stdin: str | None,
    message: str,
    quiet_env: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO((stdin or "").encode())))
    code, _, err = run_main("run", "--model", "scripted/hello", *args, capsys=capsys)
    assert code == 2 and message in err, err
    assert "Traceback" not in err and not (quiet_env / "runs").exists()


def test_a_missing_prompt_file_says_how_to_send_a_literal_at(
    quiet_env: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, err = run_main("run", "--model", "scripted/hello", "@team", capsys=capsys)
    assert code == 2 and "write @@team" in err


# --- resume: --max-turns N means N more turns -----------------------------------------------


def test_resume_max_turns_means_more_turns(workspace: Path, env: dict[str, str]) -> None:
    first = tether_json(
        "run", "--model", "scripted/runaway", "--cwd", str(workspace), "--max-turns", "2", "go", env=env
    )
    assert first["status"] == "max_turns_exceeded" and first["turns"] == 2
    again = tether("resume", first["run_id"], "--json", env=env)
    assert again.returncode == 2 and not again.stdout
    assert "stopped at its turn limit (2 turns)" in again.stderr and "--max-turns N to allow N more" in again.stderr
    more = tether("resume", first["run_id"], "--max-turns", "2", "--json", env=env)
    result = json.loads(more.stdout)
    assert result["status"] == "max_turns_exceeded" and result["turns"] == 4  # 2, then 2 more
    assert "up to 2 more turns (turn limit now 4)" in more.stderr
    assert "more turns" in tether("resume", "--help", env=env).stdout


def test_resume_after_the_budget_needs_a_larger_total(workspace: Path, env: dict[str, str]) -> None:
    first = tether_json(
        "run", "--model", "scripted/runaway", "--cwd", str(workspace), "--max-budget", "0.01", "go", env=env
    )
    assert first["status"] == "budget_exceeded"
    for extra in ([], ["--max-budget", "0.005"]):
        out = tether("resume", first["run_id"], *extra, env=env)
        assert out.returncode == 2 and "stopped at its budget" in out.stderr and "--max-budget USD" in out.stderr
    out = tether("resume", first["run_id"], "--max-budget", "0.02", "--json", env=env)
    assert json.loads(out.stdout)["cost_usd"] > first["cost_usd"]


# --- what the summary line says ----------------------------------------------------------------


def test_an_empty_answer_is_said(
    workspace: Path, quiet_env: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setitem(SCRIPTED, "empty", lambda turn, tools: Reply(text=""))
    code, out, err = run_main("run", "--model", "scripted/empty", "--cwd", str(workspace), "hi", capsys=capsys)
    assert code == 0 and out.strip() == ""
    assert "[completed]" in err and "the model returned an empty answer" in err


def test_tool_stats_counts_are_integers(workspace: Path, env: dict[str, str], tether_home: Path) -> None:
    result = tether_json("run", "--model", "scripted/plan", "--cwd", str(workspace), "q", env=env)
    stats = result["tool_stats"]["read_file"]
    assert stats["calls"] == 1 and all(type(stats[k]) is int for k in ("calls", "errors", "cached"))
    assert type(stats["total_ms"]) is float
    last = json.loads((tether_home / "traces" / f"{result['run_id']}.jsonl").read_text().splitlines()[-1])
    assert type(last["tool_stats"]["read_file"]["calls"]) is int


def test_unknown_price_and_estimated_usage_are_said(
    workspace: Path, quiet_env: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    with ScriptedServer(omit_usage=True) as server:
        monkeypatch.setenv("LLM_BASE_URL", server.base_url)
        code, _, err = run_main("run", "--model", "openai/hello", "--cwd", str(workspace), "hi", capsys=capsys)
    assert code == 0, err
    assert 'cost unknown (no price for openai/hello; add one under [models."openai/hello"] in config.toml)' in err
    assert "$0.000000" not in err
    assert "(estimated)" in err and "tokens ~" in err


def test_known_price_prints_dollars_and_exact_tokens(
    workspace: Path, quiet_env: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, err = run_main("run", "--model", "scripted/plan", "--cwd", str(workspace), "q", capsys=capsys)
    summary = next(line for line in err.splitlines() if line.startswith("[completed]"))
    assert code == 0 and re.search(r"\| \$0\.\d{4,}", summary) and "cost unknown" not in summary
    assert "estimated" not in summary


# --- approvals at a terminal: the question first, the resume hint only when the run stops ------


def test_at_a_terminal_the_question_comes_before_any_stop(workspace: Path, env: dict[str, str]) -> None:
    term = Terminal(["tether", "run", "--model", "scripted/destructive", "--cwd", str(workspace), "free space"], env)
    before = term.read_until(b"[y/N]").decode(errors="replace")
    assert 'Allow delete_file {"path": "access.log"}? [y/N]' in before
    assert "interrupted" not in before and "tether resume" not in before and "needs approval" not in before
    term.type(b"y\n")
    term.read_until(b"reason (optional): ")
    term.type(b"the log was rotated\n")
    code, stdout, seen = term.finish()
    assert code == 0 and "Deleted access.log" in stdout
    assert "[completed]" in seen and "tether resume" not in seen and "interrupted" not in seen
    assert not (workspace / "access.log").exists()
    run_id = json.loads(tether("runs", "--json", env=env).stdout)[0]["run_id"]
    assert "the log was rotated" in tether("show", run_id, env=env).stdout  # the model read it


def test_at_a_terminal_with_no_answer_the_run_stops_and_says_how_to_resume(
    workspace: Path, env: dict[str, str]
) -> None:
    term = Terminal(["tether", "run", "--model", "scripted/destructive", "--cwd", str(workspace), "free space"], env)
    term.read_until(b"[y/N]")
    term.type(b"\x04")  # Ctrl-D: nobody answers
    code, _, seen = term.finish()
    question, after = seen.split("[y/N]", 1)
    assert code == 5
    assert "[interrupted]" in after and "tether resume run_" in after and "--approve" in after
    assert "[interrupted]" not in question
    assert (workspace / "access.log").exists()


def test_no_prompt_at_a_terminal_says_how_to_give_one(env: dict[str, str], tether_home: Path) -> None:
    term = Terminal(["tether", "run", "--model", "scripted/hello"], env)
    code, _, seen = term.finish()
    assert code == 2 and "give a prompt" in seen and "@FILE" in seen
    assert not (tether_home / "runs").exists()


def test_what_a_run_writes_under_tether_home_is_private_to_its_owner(
    workspace: Path, env: dict[str, str], tether_home: Path
) -> None:
    """Under a permissive umask (022), the directories that hold runs, traces and sessions are 0700
    (another user cannot even list the run ids) and every file in them, a knowledge base's SQLite
    files included, is 0600."""
    import stat

    def as_owner_only(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            ["tether", *args],
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
            input="",
            preexec_fn=lambda: os.umask(0o022),
        )

    out = as_owner_only(
        "run", "--model", "scripted/plan", "--cwd", str(workspace), "--session", "s1", "Which file mentions a timeout?"
    )
    assert out.returncode == 0, out.stderr
    out = as_owner_only("kb", "add", "--embedder", "none", str(workspace / "errors.log"))
    assert out.returncode == 0, out.stderr
    modes = {str(p.relative_to(tether_home)): oct(stat.S_IMODE(p.stat().st_mode)) for p in tether_home.rglob("*")}
    (run_dir,) = [name for name in modes if name.startswith("runs/run_") and name.count("/") == 1]
    for directory in ("runs", run_dir, "runs/.sessions", "traces", "sessions", "kb"):
        assert modes.pop(directory) == "0o700", directory
    assert any(name.startswith("kb/default.db") for name in modes) and any(name.startswith("traces/") for name in modes)
    assert {name: mode for name, mode in modes.items() if mode != "0o600"} == {}


def test_agent_runs_the_definition_and_flags_override_it(
    workspace: Path, env: dict[str, str], tether_home: Path
) -> None:
    tether_home.mkdir(parents=True, exist_ok=True)
    (tether_home / "config.toml").write_text(
        f'[agents.explorer]\nmodel = "scripted/runaway"\ncwd = "{workspace}"\nmax_turns = 3\nskills = false\n'
    )
    defined = tether_json("run", "--agent", "explorer", "look around", env=env)
    assert defined["status"] == "max_turns_exceeded" and defined["turns"] == 3
    resumed = tether_json("resume", defined["run_id"], "--max-turns", "1", env=env)  # the same agent, 1 more turn
    assert resumed["status"] == "max_turns_exceeded" and resumed["turns"] == 4
    flagged = tether_json("run", "--agent", "explorer", "--max-turns", "2", "look around", env=env)
    assert flagged["status"] == "max_turns_exceeded" and flagged["turns"] == 2
    unknown = tether("run", "--agent", "nobody", "hi", env=env)
    assert unknown.returncode == 2 and unknown.stdout == ""
    assert (
        unknown.stderr.startswith("tether: no agent 'nobody': define [agents.nobody]") and "explorer" in unknown.stderr
    )


@pytest.mark.parametrize(
    ("options", "why"),
    [
        (("--model", "openai/gpt-4.1-mini"), "OPENAI_API_KEY is not set"),
        (("--model", "nosuch/model"), "unknown provider 'nosuch'"),
        (("--model", "openai/gpt-unknown-9", "--max-budget", "0.5"), "the price of openai/gpt-unknown-9 is unknown"),
    ],
)
def test_a_run_refused_before_it_starts_says_only_why(
    env: dict[str, str], workspace: Path, options: tuple[str, ...], why: str
) -> None:
    """The sandbox line is the first line of a run that starts, not a preamble to its refusal."""
    if "--max-budget" in options:
        env = {**env, "OPENAI_API_KEY": "sk-test-not-sent"}
    out = tether("run", *options, "--cwd", str(workspace), "hello", env=env)
    assert out.returncode == 2 and out.stdout == ""
    assert out.stderr.splitlines() == [next(line for line in out.stderr.splitlines() if why in line)], out.stderr
    started = tether(
        "run", "--model", "scripted/plan", "--cwd", str(workspace), "Which file mentions a timeout?", env=env
    )
    assert started.returncode == 0 and started.stderr.splitlines()[0].startswith("shell: ")


def test_a_declined_call_reads_as_declined_and_a_failed_one_as_an_error(
    quiet_env: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from types import SimpleNamespace

    from tether.cli.run import Printer
    from tether.config import load_settings

    printer = Printer(load_settings(), quiet=False)
    for ok, status in ((False, "rejected"), (False, "skipped"), (False, "interrupted"), (False, "error"), (True, "ok")):
        printer.show(SimpleNamespace(type="tool_result", ok=ok, status=status, tool_name="delete_file", ms=0.0))
    assert capsys.readouterr().err.splitlines() == [
        "   declined delete_file (rejected, 0 ms)",
        "   skipped delete_file (skipped, 0 ms)",
        "   interrupted delete_file (interrupted, 0 ms)",
        "   error delete_file (error, 0 ms)",
        "   ok delete_file (ok, 0 ms)",
    ]
