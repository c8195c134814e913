"""Session 17: what earlier sessions noticed in the knowledge base and left alone, confirmed from
outside (the command as a user types it, or the Python API) and fixed."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.cli import conftest as cli
from tests.cli.conftest import run_main

quiet_env = cli.quiet_env


def test_a_query_that_starts_with_a_dash_is_told_to_go_after_double_dash(
    quiet_env: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Was: ``tether kb search -SK-77`` (an error code) failed with "the following arguments are
    required: QUERY", and nothing said that ``--`` lets such a query through."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "codes.md").write_text("# Codes\n\nError -SK-77 means the seal kit is worn.\n")
    code, _, err = run_main("kb", "add", "codes.md", "--embedder", "none", capsys=capsys)
    assert code == 0, err
    code, out, err = run_main("kb", "search", "-SK-77", capsys=capsys)
    assert code == 2 and out == ""
    assert "tether kb search -- -SK-77" in err
    code, out, err = run_main("kb", "search", "--", "-SK-77", capsys=capsys)
    assert code == 0 and out.startswith("1. codes.md:1-3"), err
    code, out, err = run_main("kb", "search", capsys=capsys)  # no query at all still says what to give
    assert code == 2 and "no query" in err
