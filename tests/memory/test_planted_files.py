"""Memory files when someone who can write into tether's home puts a named pipe or a folder where
the profile, the notes or their lock go (links are in test_store.py and test_model_scan.py).

What a user relies on: reading memory (the system prompt reads it for every run) and writing it
never waits forever, and the error names the file and says what to do.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.planted import pipe_at, promptly
from tether.errors import ConfigError
from tether.memory import Memory


@pytest.fixture
def home(tmp_path: Path) -> Path:
    return tmp_path / "home"


@pytest.fixture
def folder(home: Path) -> Path:
    path = home / "memory"
    path.mkdir(parents=True, mode=0o700)
    return path


def test_a_pipe_at_the_profile_is_an_error_at_once_when_read_or_written(home: Path, folder: Path) -> None:
    mem = Memory.open(home)
    profile = pipe_at(folder / "profile.md")
    for call in (lambda: mem.entries("profile"), mem.prompt_block, lambda: mem.add("profile", "Likes tea.")):
        with pytest.raises(ConfigError, match=r"profile\.md is a named pipe; memory files must be plain files"):
            promptly(call, profile)
    assert mem.entries("notes") == []  # the other store is not held up


def test_a_pipe_at_the_lock_is_an_error_at_once_and_the_notes_stay(home: Path, folder: Path) -> None:
    mem = Memory.open(home)
    mem.add("notes", "Repo uses Make.")
    lock = pipe_at(folder / ".notes.md.lock")
    with pytest.raises(ConfigError, match=r"\.notes\.md\.lock is a named pipe.*remove it and try again"):
        promptly(lambda: mem.add("notes", "Prefers tea."), lock)
    assert mem.entries("notes") == ["Repo uses Make."]  # reading needs no lock
    lock.unlink()
    mem.add("notes", "Prefers tea.")
    assert mem.entries("notes") == ["Repo uses Make.", "Prefers tea."]


def test_a_folder_at_the_profile_is_an_error_that_names_it(home: Path, folder: Path) -> None:
    mem = Memory.open(home)
    (folder / "profile.md").mkdir()
    with pytest.raises(ConfigError, match=r"profile\.md is a folder; memory files must be plain files"):
        mem.entries("profile")
    with pytest.raises(ConfigError, match=r"profile\.md is a folder"):
        mem.add("profile", "Likes tea.")
