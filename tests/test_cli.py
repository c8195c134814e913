"""The ``tether`` command, run as a real subprocess, against the scripted model in process and
behind the scripted HTTP server through the OpenAI provider."""

from __future__ import annotations

import json
import os
import signal
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import wait_for_trace
from tether.testing import ScriptedServer

# scenario → (extra args, expected status, exit code, output)
SCENARIOS: dict[str, tuple[list[str], str, int, str | None]] = {
    "plan": ([], "completed", 0, "errors.log mentions a timeout: 2026-09-06T10:15:41Z ERROR worker 7 timed out after 30000 ms"),
    "runaway": (["--max-turns", "20"], "max_turns_exceeded", 3, ""),
    "recover": ([], "completed", 0, "errors.log mentions a timeout."),
    "destructive": ([], "interrupted", 5, ""),
    "forbidden": (["--max-turns", "12"], "max_turns_exceeded", 3, ""),
    "repeat": ([], "completed", 0, "errors.log mentions a timeout."),
    "slow": ([], "completed", 0, "The archive scan finished: scanned 1200 files: no problems found"),
}


def tether(*args: str, env: dict[str, str], timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["tether", *args], env=env, capture_output=True, text=True, timeout=timeout)


@pytest.fixture
def env(tether_home: Path) -> dict[str, str]:
    e = {k: v for k, v in os.environ.items() if k not in ("LLM_BASE_URL", "OPENAI_BASE_URL", "OPENAI_API_KEY")}
    return {**e, "TETHER_HOME": str(tether_home)}


def check(out: subprocess.CompletedProcess[str], scenario: str) -> dict[str, Any]:
    _, status, code, output = SCENARIOS[scenario]
    assert out.returncode == code, out.stderr
    result = json.loads(out.stdout)
    assert result["status"] == status
    if output is not None:
        assert result["output"] == output
    if scenario == "destructive":
        assert result["interruption"] == {"type": "approval", "call_id": "c2", "tool_name": "delete_file",
                                          "args": {"path": "access.log"}}
    return result


@pytest.mark.parametrize("scenario", list(SCENARIOS))
def test_scenario_through_cli_scripted(scenario: str, workspace: Path, env: dict[str, str]) -> None:
    extra = SCENARIOS[scenario][0]
    out = tether("run", "--model", f"scripted/{scenario}", "--cwd", str(workspace), "--json", *extra,
                 "Which file mentions a timeout?", env=env)
    result = check(out, scenario)
    assert result["cost_usd"] > 0


@pytest.mark.parametrize("scenario", list(SCENARIOS))
def test_scenario_through_http_server_and_openai_provider(scenario: str, workspace: Path, env: dict[str, str],
                                                          scripted_server: ScriptedServer, tether_home: Path) -> None:
    tether_home.mkdir(parents=True, exist_ok=True)
    (tether_home / "config.toml").write_text(f'[prices."openai/{scenario}"]\ninput = 2.0\noutput = 12.0\n')
    env = {**env, "LLM_BASE_URL": scripted_server.base_url}
    extra = SCENARIOS[scenario][0]
    out = tether("run", "--model", f"openai/{scenario}", "--cwd", str(workspace), "--json", *extra,
                 "Which file mentions a timeout?", env=env)
    http = check(out, scenario)
    local = tether("run", "--model", f"scripted/{scenario}", "--cwd", str(workspace), "--json", *extra,
                   "Which file mentions a timeout?", env=env)
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
        first = json.loads(tether("run", "--model", "scripted/destructive", "--cwd", str(workspace), "--json",
                                  "free space", env=env).stdout)
        out = tether("resume", first["run_id"], *decision, "--json", env=env)
        assert out.returncode == 0, out.stderr
        assert json.loads(out.stdout)["output"] == expected
        assert (workspace / "access.log").exists() is not deleted
        shown = tether("show", first["run_id"], env=env).stdout
        assert ("declined" in shown) is not deleted


def test_budget_exit_code_and_never_above(workspace: Path, env: dict[str, str]) -> None:
    out = tether("run", "--model", "scripted/runaway", "--cwd", str(workspace), "--max-turns", "1000",
                 "--max-budget", "0.01", "--json", "go", env=env)
    assert out.returncode == 4
    result = json.loads(out.stdout)
    assert result["status"] == "budget_exceeded" and result["cost_usd"] <= 0.01


def test_ctrl_c_cancels_the_slow_tool(workspace: Path, env: dict[str, str], tether_home: Path) -> None:
    proc = subprocess.Popen(["tether", "run", "--model", "scripted/slow", "--cwd", str(workspace), "--json", "scan"],
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    wait_for_trace(tether_home / "traces", "tool_progress")
    proc.send_signal(signal.SIGINT)
    stdout, stderr = proc.communicate(timeout=30)
    assert proc.returncode == 130, stderr
    result = json.loads(stdout)
    assert result["status"] == "interrupted"
    assert result["interruption"] == {"type": "cancelled", "reason": "user pressed Ctrl-C"}


def test_trace_answers_what_the_run_cost(workspace: Path, env: dict[str, str]) -> None:
    result = json.loads(tether("run", "--model", "scripted/plan", "--cwd", str(workspace), "--json", "q", env=env).stdout)
    lines = [json.loads(x) for x in tether("trace", result["run_id"], env=env).stdout.splitlines()]
    assert all(line["runId"] == result["run_id"] for line in lines)
    assert [x["type"] for x in lines] == ["turn", "tool_start", "tool_result", "turn", "tool_start",
                                          "tool_result", "turn", "run_stopped"]
    turns = [x for x in lines if x["type"] == "turn"]
    assert turns[-1]["costUsd"] == pytest.approx(result["cost_usd"])
    assert all({"prompt_tokens", "completion_tokens", "total_tokens", "finish"} <= set(t) for t in turns)
    assert lines[-1]["status"] == "completed" and lines[-1]["turns"] == 3


def test_runs_lists_and_show_prints_transcript(workspace: Path, env: dict[str, str]) -> None:
    result = json.loads(tether("run", "--model", "scripted/plan", "--cwd", str(workspace), "--json", "q", env=env).stdout)
    assert result["run_id"] in tether("runs", env=env).stdout
    shown = tether("show", result["run_id"], env=env).stdout
    assert "read_file" in shown and "worker 7 timed out" in shown


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


def test_scripted_serve_prints_its_address(env: dict[str, str]) -> None:
    proc = subprocess.Popen(["tether", "scripted", "serve", "--port", "0"], env=env, stdout=subprocess.PIPE, text=True)
    try:
        line = proc.stdout.readline() if proc.stdout else ""
        url = line.strip().rsplit(" ", 1)[-1]
        assert url.startswith("http://127.0.0.1:") and url.endswith("/v1")
        import httpx

        assert httpx.get(url + "/models").json()["object"] == "list"
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def test_run_with_a_session_continues_the_conversation(workspace: Path, env: dict[str, str], tether_home: Path) -> None:
    first = json.loads(tether("run", "--session", "work", "--model", "scripted/plan", "--cwd", str(workspace), "--json",
                              "Which file mentions a timeout?", env=env).stdout)
    assert first["status"] == "completed" and first["turns"] == 3
    second = json.loads(tether("run", "--session", "work", "--model", "scripted/hello", "--json", "Thanks!",
                               env=env).stdout)
    assert second["status"] == "completed" and second["turns"] == 1  # this run's turns, not the session's
    assert "work" in tether("sessions", "list", env=env).stdout
    shown = tether("sessions", "show", "work", env=env).stdout
    assert shown.index("Which file mentions a timeout?") < shown.index("Thanks!")
    exported = [json.loads(x) for x in tether("sessions", "export", "work", env=env).stdout.splitlines()]
    assert len(exported) == 8 and exported[-1]["role"] == "assistant"
    assert tether("sessions", "delete", "work", env=env).returncode == 0
    assert tether("sessions", "show", "work", env=env).returncode == 2


def test_sqlite_session_store_from_the_command_line(workspace: Path, env: dict[str, str], tether_home: Path) -> None:
    out = tether("run", "--session", "s", "--session-store", "sqlite", "--model", "scripted/hello", "--json", "hi",
                 env=env)
    assert out.returncode == 0 and (tether_home / "sessions.db").exists()
    assert "s " in tether("sessions", "--session-store", "sqlite", "list", env=env).stdout


def test_chat_streams_and_asks_before_a_dangerous_tool(workspace: Path, env: dict[str, str]) -> None:
    for answer, deleted in (("y", True), ("n", False)):
        (workspace / "access.log").write_text("log\n")
        stdin = f"free some space\n{answer}\n" + ("" if deleted else "keep it\n")
        out = subprocess.run(["tether", "chat", "--model", "scripted/destructive", "--cwd", str(workspace),
                              "--session", f"chat-{answer}"], input=stdin, env=env, capture_output=True,
                             text=True, timeout=60)
        assert out.returncode == 0, out.stderr
        assert "Allow delete_file" in out.stderr and "-> list_files" in out.stderr
        assert (workspace / "access.log").exists() is not deleted
        expected = "Deleted access.log" if deleted else "I did not delete anything"
        assert expected in out.stdout


def test_version_and_python_dash_m(env: dict[str, str]) -> None:
    import sys

    import tether as package

    assert tether("--version", env=env).stdout.strip() == f"tether {package.__version__}"
    out = subprocess.run([sys.executable, "-m", "tether", "run", "--model", "scripted/hello", "--json", "hi"],
                         env=env, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0 and json.loads(out.stdout)["status"] == "completed"
