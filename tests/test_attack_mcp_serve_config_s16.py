"""``tether mcp serve`` and config.toml attacked from outside, session 16. Each test says what a
user saw before its fix."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tether.cli import main as tether_main

KEY = "sk-proj-abc123abc123abc123abc123"
GITHUB = "ghp_abcdefghijklmnopqrstuvwxyz0123456789"


def test_a_key_pasted_where_a_model_or_words_go_is_never_echoed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A key pasted as the model (into config.toml or $TETHER_MODEL, where OPENAI_API_KEY was meant)
    or into an agent's instructions: `tether config show` printed it whole, and `config check` and
    every run printed it in their error. Now each shows it `<redacted>`, and the rest stays."""
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("TETHER_HOME", str(home))
    monkeypatch.delenv("TETHER_MODEL", raising=False)
    (home / "config.toml").write_text(
        f'model = "{KEY}"\n\n[agents.x]\nmodel = "scripted/plan"\ninstructions = "push with {GITHUB} please"\n'
    )
    assert tether_main(["config", "show"]) == 0
    shown = capsys.readouterr().out
    assert KEY not in shown and GITHUB not in shown
    assert 'model = "<redacted>"' in shown and 'instructions = "push with <redacted> please"' in shown
    assert tether_main(["config", "check"]) == 2
    said = capsys.readouterr().err
    assert KEY not in said and "cannot tell which provider serves '<redacted>'" in said

    (home / "config.toml").write_text('model = "scripted/plan"\n')
    monkeypatch.setenv("TETHER_MODEL", KEY)
    assert tether_main(["config", "show", "--json"]) == 0
    assert KEY not in (out := capsys.readouterr().out) and '"TETHER_MODEL": "<redacted>"' in out
    assert tether_main(["config", "check"]) == 2
    assert KEY not in (said := capsys.readouterr().err) and "$TETHER_MODEL" in said
    assert tether_main(["run", "hello"]) == 2
    assert KEY not in (said := capsys.readouterr().err) and "from $TETHER_MODEL" in said
    assert not (home / "runs").exists() or not any((home / "runs").iterdir())


def test_stdio_answers_every_request_piped_in_before_stdin_closes(tmp_path: Path) -> None:
    """A client that pipes its requests in and closes stdin (as docs/connectors.md says it may) got
    only some answers: each id was freed as its answer went out, before the writer had taken it, so
    the session ended at once and the answers still on their way were dropped (of 15 calls, 6 to 14
    answered). Now the session ends once every answer has been handed to the writer."""
    home = tmp_path / "home"
    home.mkdir()
    init = {
        "jsonrpc": "2.0",
        "id": 0,
        "method": "initialize",
        "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}},
    }
    lines = [init, {"jsonrpc": "2.0", "method": "notifications/initialized"}]
    for ident in range(1, 41):
        arguments = {"store": "notes"} if ident % 2 else {"query": "valve", "base": "nosuch"}
        name = "memory_read" if ident % 2 else "kb_search"
        params = {"name": name, "arguments": arguments}
        lines.append({"jsonrpc": "2.0", "id": ident, "method": "tools/call", "params": params})
    done = subprocess.run(
        [sys.executable, "-m", "tether", "mcp", "serve"],
        input="".join(json.dumps(line) + "\n" for line in lines),
        capture_output=True,
        text=True,
        env={**os.environ, "TETHER_HOME": str(home)},
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    answers = {m["id"]: m for m in map(json.loads, done.stdout.splitlines())}
    assert sorted(answers) == list(range(41)), done.stderr
    assert "there is no knowledge base 'nosuch'" in json.dumps(answers[2])
    assert json.loads(answers[1]["result"]["content"][0]["text"])["store"] == "notes"


@pytest.mark.parametrize(
    "line",
    [f"model = {KEY}", f'model = "scripted/plan" {GITHUB}', f'[agents.x]\ninstructions = "use {GITHUB}\n'],
)
def test_a_line_that_is_not_toml_is_not_shown_when_it_holds_a_key(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], line: str
) -> None:
    """`model = sk-...` (a key pasted bare where the model goes) is not TOML: `config check` and
    every command printed the line, key and all, and even suggested `model = "sk-..."`. Now the
    error says where the file breaks without the line, as for a line naming a key or token."""
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("TETHER_HOME", str(home))
    (home / "config.toml").write_text(line + "\n")
    assert tether_main(["config", "check"]) == 2
    said = capsys.readouterr().err
    assert KEY not in said and GITHUB not in said
    assert "(at line" in said and "Fix or remove the file" in said


def test_an_agent_call_where_runs_cannot_be_kept_says_why_and_what_to_do(tmp_path: Path) -> None:
    """`$TETHER_HOME/runs` a file (or a folder that cannot be written): `tether run` says so in one
    line, but an agent_NAME call through `tether mcp serve` answered only "Error executing tool
    agent_p", with a traceback on the server's stderr. Now the call's error says what is wrong and
    what to do, and nothing ran."""
    home = tmp_path / "home"
    home.mkdir()
    (home / "config.toml").write_text(f'[agents.p]\nmodel = "scripted/plan"\ncwd = "{tmp_path}"\n')
    (home / "runs").write_text("not a folder\n")
    init = {
        "jsonrpc": "2.0",
        "id": 0,
        "method": "initialize",
        "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}},
    }
    params = {"name": "agent_p", "arguments": {"task": "Which timeouts are in the logs?"}}
    lines = [init, {"jsonrpc": "2.0", "method": "notifications/initialized"}]
    lines.append({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": params})
    done = subprocess.run(
        [sys.executable, "-m", "tether", "mcp", "serve"],
        input="".join(json.dumps(line) + "\n" for line in lines),
        capture_output=True,
        text=True,
        env={**os.environ, "TETHER_HOME": str(home)},
        timeout=120,
        check=False,
    )
    answers = {m["id"]: m for m in map(json.loads, done.stdout.splitlines())}
    result = answers[1]["result"]
    said = result["content"][0]["text"]
    assert result["isError"] is True
    assert f"cannot keep runs in {home}" in said and "runs is a file, not a folder: move it away" in said
    assert "Traceback" not in done.stderr
    assert (home / "runs").read_text() == "not a folder\n" and not (home / "traces").exists()


def test_a_servers_pat_bearer_and_connection_string_password_are_redacted(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """`tether config show` (and `tether mcp list`, which shows args the same way) printed a
    server's `--pat TOKEN`, `--bearer=TOKEN` and the password of a connection string
    (`Server=db;Password=X;`, as SQL Server's MCP servers take it) in the clear. Now each is
    `<redacted>`, and the rest of the arguments stay as written."""
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("TETHER_HOME", str(home))
    args = ["-y", "srv", "--pat", "abcdefsecret", "--bearer=zzz999", "--db", "Server=db;User Id=app;Password=hunter2;"]
    (home / "config.toml").write_text(f'[mcp.a]\ncommand = "npx"\nargs = {json.dumps(args)}\n')
    assert tether_main(["config", "show", "--json"]) == 0
    shown = json.loads(capsys.readouterr().out)["config"]["mcp"]["a"]["args"]
    assert shown == [
        "-y",
        "srv",
        "--pat",
        "<redacted>",
        "--bearer=<redacted>",
        "--db",
        "Server=db;User Id=app;Password=<redacted>;",
    ]
