"""MCP servers written raw, line by line over stdio, for answers the SDK would never send: each test
file gives the body of its own (the head below defines ``MODE``, the first argument, and ``send``)."""

from __future__ import annotations

import sys
import textwrap
from pathlib import Path
from typing import Any

from tether.connectors import McpConnector

HEAD = """\
import json, os, signal, subprocess, sys, time

MODE = sys.argv[1]

def send(message):
    sys.stdout.write(json.dumps(message) + "\\n")
    sys.stdout.flush()
"""


def write_server(folder: Path, body: str) -> Path:
    """The server's script in ``folder``: the head, then ``body`` (dedented)."""
    path = folder / "raw_server.py"
    path.write_text(HEAD + textwrap.dedent(body))
    return path


def raw(server: Path, mode: str, *extra: str, start_timeout_s: float = 30, **config: Any) -> McpConnector:
    """A connector that starts ``server`` in ``mode`` (with ``extra`` arguments)."""
    return McpConnector(
        "raw",
        {"command": sys.executable, "args": [str(server), mode, *extra], **config},
        start_timeout_s=start_timeout_s,
    )
