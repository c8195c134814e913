"""The ``tether`` command itself (src/tether/cli/__init__.py)."""

from __future__ import annotations

import pytest

from tests.cli.conftest import run_main, tether


def test_a_bare_tether_prints_the_help(env: dict[str, str]) -> None:
    out = tether(env=env)
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith("usage: tether") and "run" in out.stdout and "config" in out.stdout
    assert "error" not in out.stderr


def test_an_unknown_command_is_still_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    assert run_main("nonsense", capsys=capsys)[0] == 2
