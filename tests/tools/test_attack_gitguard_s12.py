"""Attacks on the sandbox's git-repository guard (``tether.tools._gitguard``), as a hostile model.

Each test runs the attack in the real ``workspace-write`` sandbox (bubblewrap), then the person's own
git, later and unsandboxed, and checks a canary outside the workspace that only planted code touches.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.tools.test_left_alone_s12 import person, sandboxed
from tests.tools.test_left_alone_s12 import pytestmark as guarded

pytestmark = guarded


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    (tmp_path / "ws").mkdir()
    return tmp_path / "ws"


def test_a_repository_whose_objects_is_a_program_not_a_folder_is_found(ws: Path, tmp_path: Path) -> None:
    """git takes a folder for a repository when ``objects`` and ``refs`` can be searched
    (``access(X_OK)``): an executable file will do. The walk wanted folders, so ``src/`` of the
    person's own project could be made a repository git finds first, with an alias of the command's."""
    canary = tmp_path / "canary"
    person(ws, "init", "-q")
    (ws / "src").mkdir()
    said = sandboxed(
        ws,
        "cd src && mkdir refs && echo 'ref: refs/heads/main' > HEAD && : > objects && chmod +x objects && "
        f"printf '[alias]\\n\\tst = !touch {canary}\\n' > config && echo made",
    )
    assert said.startswith("exit code 0\nmade\n")
    assert "src/config: alias.st (settings that can run programs" in said
    person(ws / "src", "st")
    assert not canary.exists()


def test_a_git_file_is_read_as_git_reads_it(ws: Path, tmp_path: Path) -> None:
    """git keeps what follows ``gitdir: `` to the end of the file but for the line ends: a trailing
    space is part of the path. Read as one stripped line, the file led the check to a folder that is
    not there, and the repository git opens (inside ``node_modules``, which is not walked) went unchecked."""
    canary = tmp_path / "canary"
    said = sandboxed(
        ws,
        "mkdir p && git init -q --bare 'node_modules/r ' && "
        f"git --git-dir='node_modules/r ' config alias.st '!touch {canary}' && "
        "printf 'gitdir: ../node_modules/r \\n' > p/.git && echo linked",
    )
    assert said.startswith("exit code 0\nlinked\n")
    assert "alias.st (settings that can run programs" in said
    person(ws / "p", "st")
    assert not canary.exists()
