"""A new user offering tether's agents to an MCP client (`tether mcp serve`), as a desktop client
or another agent framework starts it: from a directory of its own choosing."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

CONFIG = """\
[agents.logs]
model = "scripted/plan"
description = "Answers questions about a folder of log files"
cwd = "examples/workspace"
tools = ["list_files", "read_file", "search_files"]
"""


def test_a_relative_agent_cwd_that_misses_says_where_it_was_taken_from(tmp_path: Path) -> None:
    """Was: the docs' own [agents.logs] (cwd = "examples/workspace") served by `tether mcp serve`
    that a client started in another directory (as desktop clients do) ended the server at once
    with "cwd /elsewhere/examples/workspace is not a directory": the client saw only its connection
    closed, and nothing said that a relative cwd is taken from where the command started. The line
    now says so and to give a full path; a full path serves from anywhere."""
    home, project, elsewhere = tmp_path / "home", tmp_path / "project", tmp_path / "elsewhere"
    (project / "examples" / "workspace").mkdir(parents=True)
    elsewhere.mkdir()
    home.mkdir()
    (home / "config.toml").write_text(CONFIG)
    env = {**os.environ, "TETHER_HOME": str(home)}
    serve = [sys.executable, "-m", "tether", "mcp", "serve"]
    out = subprocess.run(
        serve, cwd=elsewhere, env=env, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=60
    )
    assert out.returncode == 2, out.stderr
    assert f"cwd {elsewhere / 'examples' / 'workspace'} is not a directory" in out.stderr
    assert f"the relative cwd 'examples/workspace' is taken from where the command started, {elsewhere}" in out.stderr
    assert "give a full path" in out.stderr
    # With the full path, the same client's directory serves (stdin closed at once: exit 0).
    (home / "config.toml").write_text(
        CONFIG.replace('"examples/workspace"', repr(str(project / "examples" / "workspace")))
    )
    out = subprocess.run(
        serve, cwd=elsewhere, env=env, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=60
    )
    assert out.returncode == 0, out.stderr
