"""A new user giving an agent MCP servers from the command line, as other tools take them."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from tests.cli.conftest import run_main, tether

CONFIG = """\
[mcp.mail]
command = "{python}"
args = ["examples/mcp/mail_server.py"]

[mcp.wx]
command = "{python}"
args = ["srv/weather.py"]

[agents.helper]
model = "scripted/hello"
mcp = ["wx,mail"]
"""


def test_servers_given_as_one_comma_separated_name_are_told_to_be_named_each(
    quiet_env: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Was: `tether run --mcp wx,mail` (a comma list, as many tools take) said only "no [mcp.wx,mail]
    in config.toml (configured: mail, wx)", naming the very servers asked for, without saying how to
    give two. It now says to name each with its own --mcp (and, in an [agents.NAME] table, to list
    each), and nothing runs."""
    quiet_env.mkdir(parents=True, exist_ok=True)
    (quiet_env / "config.toml").write_text(CONFIG.format(python=sys.executable))
    code, _, err = run_main("run", "--model", "scripted/hello", "--mcp", "wx,mail", "hi", capsys=capsys)
    assert code == 2, err
    assert "no [mcp.wx,mail]" in err
    assert "name each server on its own: --mcp wx --mcp mail" in err
    code, _, err = run_main("run", "--agent", "helper", "hi", capsys=capsys)
    assert code == 2, err
    assert 'list each server on its own: mcp = ["wx", "mail"]' in err
    assert not (quiet_env / "runs").exists() or not any((quiet_env / "runs").iterdir())
    # A name that is simply unknown gets no such hint.
    code, _, err = run_main("run", "--model", "scripted/hello", "--mcp", "wx,nope", "hi", capsys=capsys)
    assert code == 2 and "no [mcp.wx,nope]" in err and "on its own" not in err


def test_a_chat_says_the_shell_sandbox_once_not_before_every_reply(env: dict[str, str]) -> None:
    """Was: `tether chat` printed the shell's sandbox line ("shell: sandbox workspace-write ...")
    before every reply, between each message and its answer, as if each were a new command. It is
    said once now, under the chat's first line, and each reply starts with its own steps."""
    out = tether("chat", "--model", "scripted/hello", input="hi\nhello again\nand again\n", env=env)
    assert out.returncode == 0, out.stderr
    assert out.stdout.count("Hello! I am the scripted model") == 3
    assert out.stderr.count("shell: ") == 1, out.stderr
    first, second = out.stderr.splitlines()[:2]
    assert first.startswith("tether chat: scripted/hello") and second.startswith("shell: "), out.stderr
    assert out.stderr.count("[completed]") == 3
