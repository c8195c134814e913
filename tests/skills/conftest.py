"""Helpers for the skills tests: skill folders written on the spot, the shipped example, and a
clean slate for the once-per-process problem reports."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.cli.conftest import env, quiet_env  # noqa: F401 - the command-line fixtures, shared
from tether.skills import core

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE_SKILL = ROOT / "examples" / "skills" / "release-notes"


def write_skill(
    root: Path,
    folder: str,
    name: str | None = None,
    description: str = "Does a thing.",
    body: str = "Do the thing.",
    files: dict[str, str] | None = None,
) -> Path:
    """``root/folder/SKILL.md`` with front matter naming ``name`` (default: the folder's name)."""
    where = root / folder
    where.mkdir(parents=True, exist_ok=True)
    (where / "SKILL.md").write_text(
        f"---\nname: {name or folder}\ndescription: {description}\n---\n{body}\n", encoding="utf-8"
    )
    for rel, text in (files or {}).items():
        (where / rel).parent.mkdir(parents=True, exist_ok=True)
        (where / rel).write_text(text, encoding="utf-8")
    return where


@pytest.fixture(autouse=True)
def fresh_reports() -> Iterator[None]:
    """Problems are reported (and descriptions scanned) once per process; each test starts as a new
    process would."""
    core._reported.clear()
    core._judged.clear()
    yield
    core._reported.clear()
    core._judged.clear()


@pytest.fixture
def home(tmp_path: Path) -> Path:
    return tmp_path / "home"


@pytest.fixture
def project(tmp_path: Path) -> Path:
    p = tmp_path / "project"
    p.mkdir()
    return p


@pytest.fixture
def example_home(quiet_env: Path) -> Path:  # noqa: F811 - the fixture imported above
    """``$TETHER_HOME`` holding the shipped release-notes skill (no provider variables set)."""
    shutil.copytree(EXAMPLE_SKILL, quiet_env / "skills" / "release-notes")
    return quiet_env
