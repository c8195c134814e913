"""Helpers for the command-line tests: the real ``tether`` command as a subprocess, or
``tether.cli.main`` in process, always with ``TETHER_HOME`` in a temporary directory."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tether.cli import main


def tether(
    *args: str, env: dict[str, str], input: str | None = None, timeout: float = 60, cwd: Any = None
) -> subprocess.CompletedProcess[str]:
    """The real command (in ``cwd``, default this process's). Without ``input`` its stdin is empty
    (never the test runner's terminal)."""
    return subprocess.run(
        ["tether", *args],
        env=env,
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=timeout,
        input=input if input is not None else "",
    )


def tether_json(*args: str, env: dict[str, str], input: str | None = None) -> dict[str, Any]:
    out = tether(*args, "--json", env=env, input=input)
    assert out.stdout, out.stderr
    result: dict[str, Any] = json.loads(out.stdout)
    return result


def run_main(*args: str, capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    """``tether.cli.main`` in process: (exit code, stdout, stderr); argparse's exit 2 included."""
    try:
        code = main(list(args))
    except SystemExit as exc:
        code = int(exc.code or 0)
    out = capsys.readouterr()
    return code, out.out, out.err


@pytest.fixture
def env(tether_home: Path) -> dict[str, str]:
    e = {
        k: v
        for k, v in os.environ.items()
        if k not in ("LLM_BASE_URL", "OPENAI_BASE_URL", "OPENAI_API_KEY", "TETHER_SESSION_STORE")
    }
    return {**e, "TETHER_HOME": str(tether_home)}


@pytest.fixture
def quiet_env(monkeypatch: pytest.MonkeyPatch, tether_home: Path) -> Path:
    """For in-process runs: no provider variables from the machine running the tests."""
    for name in ("LLM_BASE_URL", "OPENAI_BASE_URL", "OPENAI_API_KEY", "TETHER_SESSION_STORE"):
        monkeypatch.delenv(name, raising=False)
    return tether_home
