"""A new user giving an agent MCP servers from the command line, as other tools take them."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from tests.cli.conftest import run_main

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
