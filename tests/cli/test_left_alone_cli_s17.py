"""Defects earlier sessions noticed in the command and left alone (session 17)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.cli.conftest import run_main


def test_kb_called_in_process_leaves_the_programs_blas_threads_alone(
    tether_home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Was: ``main(["kb", ...])`` set OPENBLAS_NUM_THREADS=1 in the calling program's environment
    and left it there, so an app or a test that embeds tether had every later numpy it loaded, and
    every child it started, held to one BLAS thread. The process's own ``tether kb`` still sets it
    (tests/cli/test_main.py checks that)."""
    monkeypatch.setenv("OPENBLAS_NUM_THREADS", "placeholder")  # so the undo below puts back what was
    monkeypatch.delenv("OPENBLAS_NUM_THREADS")
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "valves.md").write_text("# Valves\n\nThe valve is rated for sixteen bar.\n")
    assert run_main("kb", "add", str(docs), "--embedder", "hashing/64", capsys=capsys)[0] == 0
    code, out, _ = run_main("kb", "search", "--mode", "vector", "valve", capsys=capsys)
    assert code == 0 and "sixteen bar" in out
    assert "OPENBLAS_NUM_THREADS" not in os.environ
