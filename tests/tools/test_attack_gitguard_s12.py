"""Attacks on the sandbox's git-repository guard (``tether.tools._gitguard``), as a hostile model.

Each test runs the attack in the real ``workspace-write`` sandbox (bubblewrap), then the person's own
git, later and unsandboxed, and checks a canary outside the workspace that only planted code touches.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.tools.test_left_alone_s12 import GIT, person, sandboxed
from tests.tools.test_left_alone_s12 import pytestmark as guarded
from tether.tools import _gitguard

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


def test_a_submodule_s_settings_behind_hundreds_of_folders_are_checked(ws: Path, tmp_path: Path) -> None:
    """The submodules' and worktrees' folders were looked through 200 at most and the rest passed
    over unsaid: 201 empty folders in ``.git/modules`` hid the config of the one after them."""
    canary = tmp_path / "canary"
    said = sandboxed(
        ws,
        "git init -q && seq -w 0 200 | sed 's|^|.git/modules/a|' | xargs mkdir -p && "
        f"git init -q --bare .git/modules/zzz && git --git-dir=.git/modules/zzz config alias.st '!touch {canary}' && "
        "mkdir -p node_modules/zzz && echo 'gitdir: ../../.git/modules/zzz' > node_modules/zzz/.git && echo hidden",
    )
    assert said.startswith("exit code 0\nhidden\n")
    assert ".git/modules/zzz/config: alias.st (settings that can run programs" in said
    person(ws / "node_modules/zzz", "st")
    assert not canary.exists()


def test_more_folders_in_modules_than_the_check_looks_through_is_said(ws: Path) -> None:
    """Past MAX_FOLDERS the rest is not looked through: the result says so, for the user to look."""
    said = sandboxed(ws, "git init -q && seq 0 2000 | sed 's|^|.git/modules/a|' | xargs mkdir -p && echo many")
    assert said.startswith("exit code 0\nmany\n")
    assert ".git (more than 2,000 folders in its modules and worktrees: the hooks and settings of those " in said
    assert "STILL THERE" in said


def test_a_remote_helper_hidden_in_quotes_is_taken_out(ws: Path, tmp_path: Path) -> None:
    """``url = "ext:":sh -c ...`` is ``ext::sh -c ...`` to git, which runs it at a fetch where the
    person allows the ext transport; the check looked for ``::`` in the line as written."""
    canary = tmp_path / "canary"
    said = sandboxed(
        ws,
        f'git init -q && printf \'[remote "o"]\\n\\turl = "ext:":sh -c touch%% {canary}\\n\' >> .git/config && echo set',
    )
    assert said.startswith("exit code 0\nset\n")
    assert ".git/config: remote.o.url (settings that can run programs" in said
    person(ws, "-c", "protocol.ext.allow=always", "fetch", "-q", "o")
    assert not canary.exists()


def test_a_repository_made_where_the_walk_does_not_look_and_moved_out_is_checked(
    ws: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """node_modules is not walked, so a repository made there is not checked; moving the folder
    above it out (``mv node_modules/a proj``) leaves the repository's own files' ctime as it was,
    and it was taken for one that was there before. (No margin: the two commands follow closely.)"""
    monkeypatch.setattr(_gitguard, "_MARGIN_NS", 0)
    canary = tmp_path / "canary"
    sandboxed(
        ws, f"mkdir -p node_modules/a/r && cd node_modules/a/r && git init -q && git config alias.st '!touch {canary}'"
    )
    said = sandboxed(ws, "mv node_modules/a proj && echo moved")
    assert said.startswith("exit code 0\nmoved\n")
    assert "proj/r/.git/config: alias.st (settings that can run programs" in said
    person(ws / "proj/r", "st")
    assert not canary.exists()


def test_a_repository_reached_through_a_link_to_where_the_walk_does_not_look_is_checked(
    ws: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The walk did not follow links: ``proj -> node_modules/a`` made ``proj/r`` a repository of the
    command's, unchecked, where the person would run git (made in one command, linked in the next)."""
    monkeypatch.setattr(_gitguard, "_MARGIN_NS", 0)
    canary = tmp_path / "canary"
    sandboxed(
        ws, f"mkdir -p node_modules/a/r && cd node_modules/a/r && git init -q && git config alias.st '!touch {canary}'"
    )
    said = sandboxed(ws, "ln -s node_modules/a proj && ln -s . loop && echo linked")
    assert said.startswith("exit code 0\nlinked\n")
    assert "node_modules/a/r/.git/config: alias.st (settings that can run programs" in said
    person(ws / "proj/r", "st")
    assert not canary.exists()


def test_a_paused_rebase_whose_steps_run_a_command_is_taken_out(ws: Path, tmp_path: Path) -> None:
    """A command can leave an interactive rebase stopped at ``break`` with ``exec`` steps to come:
    the person's ``git rebase --continue`` (git status says a rebase is in progress) runs them."""
    canary = tmp_path / "canary"
    said = sandboxed(
        ws,
        f"git init -q && {GIT} commit -q --allow-empty -m a && printf 'break\\nexec touch {canary}\\n' > /tmp/todo && "
        f"GIT_SEQUENCE_EDITOR='cp /tmp/todo' {GIT} rebase -q -i HEAD 2>/dev/null; echo paused",
    )
    assert "paused\n" in said
    assert ".git/rebase-merge (a paused rebase with steps that run commands" in said
    person(ws, "rebase", "--continue")
    assert not canary.exists()
    kept = next((ws / ".git/refused-by-tether").iterdir())
    assert "exec touch" in (kept / "rebase-merge/git-rebase-todo").read_text()
