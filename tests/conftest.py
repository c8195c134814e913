from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from tether.testing import ScriptedServer

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE_WORKSPACE = ROOT / "examples" / "workspace"


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    """A fresh copy of the example directory the scenarios work on."""
    target = tmp_path / "workspace"
    shutil.copytree(EXAMPLE_WORKSPACE, target)
    return target


@pytest.fixture
def tether_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    home = tmp_path / "home"
    monkeypatch.setenv("TETHER_HOME", str(home))
    monkeypatch.delenv("TETHER_MODEL", raising=False)
    return home


def wait_for_trace(traces: Path, text: str, timeout: float = 30) -> Path:
    """Wait until a trace file under ``traces`` contains ``text``; return that file."""
    import time

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for f in traces.glob("*.jsonl") if traces.exists() else ():
            if text in f.read_text():
                return f
        time.sleep(0.02)
    raise AssertionError(f"no trace under {traces} mentioned {text!r} within {timeout} s")


@pytest.fixture(scope="session")
def scripted_server() -> Iterator[ScriptedServer]:
    with ScriptedServer() as server:
        yield server
