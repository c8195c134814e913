"""Helpers for the connector tests: real MCP servers (written with the ``mcp`` package) started
by the tests, and a way to tell that no process they started is left."""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("mcp")

HERE = Path(__file__).resolve().parent
INVENTORY = HERE / "inventory_server.py"
HTTP_SERVER = HERE / "http_server.py"


@pytest.fixture
def calls(tmp_path: Path) -> Path:
    """The inventory server's call log (one line per call that really ran)."""
    return tmp_path / "calls.log"


def inventory(calls: Path, **extra: Any) -> dict[str, Any]:
    """An ``[mcp.inventory]`` table for the stdio test server."""
    return {"command": sys.executable, "args": [str(INVENTORY)], "env": {"INVENTORY_LOG": str(calls)}, **extra}


def logged(calls: Path) -> list[str]:
    return calls.read_text().splitlines() if calls.exists() else []


def live_processes(pids: list[int]) -> list[int]:
    """Processes still running (zombies do not count) that are one of ``pids`` or in one of their
    process groups (each stdio server leads its own)."""
    found = []
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry.name}/stat").read_text()
        except OSError:
            continue
        fields = stat[stat.rfind(")") + 2 :].split()
        state, pgrp = fields[0], int(fields[2])
        if state not in ("Z", "X") and (int(entry.name) in pids or pgrp in pids):
            found.append(int(entry.name))
    return found


def running_in(cwd: Path, needle: str) -> list[int]:
    """Running processes (not zombies) whose working directory is ``cwd`` and whose command line
    holds ``needle``: for servers the ``tether`` command started, whose pids it does not keep."""
    found = []
    for entry in os.scandir("/proc"):
        try:
            if not entry.name.isdigit() or Path(f"/proc/{entry.name}/cwd").resolve() != cwd.resolve():
                continue
            command = Path(f"/proc/{entry.name}/cmdline").read_bytes().decode(errors="replace")
            state = Path(f"/proc/{entry.name}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if needle in command and state not in ("Z", "X"):
            found.append(int(entry.name))
    return found


def wait_until(check: Callable[[], Any], timeout: float = 30.0, what: str = "the condition") -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = check()
        if value:
            return value
        time.sleep(0.05)
    raise AssertionError(f"{what} did not happen within {timeout} s")


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An empty $TETHER_HOME, with no model or endpoint from the environment (a file may define its own)."""
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("TETHER_HOME", str(home))
    for name in ("TETHER_MODEL", "LLM_BASE_URL", "OPENAI_BASE_URL", "OPENAI_API_KEY", "TETHER_SESSION_STORE"):
        monkeypatch.delenv(name, raising=False)
    return home


def tether(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    """``tether ARGS`` in this process: (exit code, stdout, stderr), as tests/cli's ``run_main``."""
    from tests.cli.conftest import run_main

    return run_main(*args, capsys=capsys)
