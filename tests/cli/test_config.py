"""``tether config path | show | check`` (src/tether/cli/config.py): where the settings live, what
they say with every secret redacted, and whether they load."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.cli.conftest import run_main

CONFIG = """\
model = "openai/gpt-4.1-mini"
database_url = "postgresql://tether:hunter2@db.internal/tether"

[endpoints.local]
base_url = "http://127.0.0.1:11434/v1"
api_key = "sk-live-secret"
key_env = "LOCAL_API_KEY"

[mcp.mail]
command = "mail-mcp"
env = { MAIL_TOKEN = "tok-secret" }

[dispatch]
broker_url = "amqp://tether:brokerpw@mq.internal//"
"""


def test_path_names_the_file_even_before_it_exists(quiet_env: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run_main("config", "path", capsys=capsys)
    assert code == 0 and out.strip() == str(quiet_env / "config.toml")
    code, out, _ = run_main("config", "check", capsys=capsys)
    assert code == 0 and "does not exist" in out


def test_show_redacts_every_secret_and_keeps_the_rest(quiet_env: Path, capsys: pytest.CaptureFixture[str]) -> None:
    quiet_env.mkdir(parents=True)
    (quiet_env / "config.toml").write_text(CONFIG)
    code, out, _ = run_main("config", "show", capsys=capsys)
    assert code == 0, out
    for secret in ("hunter2", "sk-live-secret", "tok-secret", "brokerpw"):
        assert secret not in out
    assert 'model = "openai/gpt-4.1-mini"' in out and 'key_env = "LOCAL_API_KEY"' in out
    assert "postgresql://tether:<redacted>@db.internal/tether" in out and "[endpoints.local]" in out
    code, out, _ = run_main("config", "show", "--json", capsys=capsys)
    shown = json.loads(out)
    assert shown["config"]["endpoints"]["local"]["api_key"] == "<redacted>"
    assert shown["config"]["mcp"]["mail"]["env"] == {"MAIL_TOKEN": "<redacted>"}
    assert code == 0 and shown["exists"] is True


def test_what_show_prints_loads_as_the_same_config(quiet_env: Path, capsys: pytest.CaptureFixture[str]) -> None:
    import tomllib

    quiet_env.mkdir(parents=True)
    (quiet_env / "config.toml").write_text(CONFIG)
    out = run_main("config", "show", capsys=capsys)[1]
    again = tomllib.loads(out)
    assert again["endpoints"]["local"]["base_url"] == "http://127.0.0.1:11434/v1"
    assert again["mcp"]["mail"]["command"] == "mail-mcp"


def test_check_says_what_is_wrong(quiet_env: Path, capsys: pytest.CaptureFixture[str]) -> None:
    quiet_env.mkdir(parents=True)
    (quiet_env / "config.toml").write_text("[tools.shel]\napproval = true\n")
    code, _, err = run_main("config", "check", capsys=capsys)
    assert code == 2 and "[tools.shel]" in err and "did you mean [tools.shell]" in err
    (quiet_env / "config.toml").write_text('model = "scripted/plan"\n')
    code, out, _ = run_main("config", "check", capsys=capsys)
    assert code == 0 and out.startswith("ok: ")


def test_help_says_where_the_config_lives(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run_main("--help", capsys=capsys)
    assert code == 0 and "config.toml" in out and "tether config path" in out


def test_check_says_what_the_shells_sandbox_will_be_and_refuses_one_that_cannot_be_had(
    quiet_env: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from tether.tools import sandbox

    quiet_env.mkdir(parents=True)
    (quiet_env / "config.toml").write_text('[tools.shell.sandbox]\nmode = "workspace-write"\n')
    monkeypatch.setattr(sandbox, "_why_unavailable", lambda: "")
    code, out, _ = run_main("config", "check", capsys=capsys)
    assert code == 0 and "shell: sandbox workspace-write" in out
    monkeypatch.setattr(sandbox, "_why_unavailable", lambda: "bubblewrap (bwrap) is not installed")
    code, _, err = run_main("config", "check", capsys=capsys)
    assert code == 2 and "sandbox NOT AVAILABLE (bubblewrap (bwrap) is not installed)" in err
    (quiet_env / "config.toml").write_text("")
    code, out, err = run_main("config", "check", capsys=capsys)
    assert code == 0 and "shell: no sandbox (bubblewrap (bwrap) is not installed)" in out
    assert "asks before every command" in err
