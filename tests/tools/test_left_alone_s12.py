"""What session 12 found the sandbox left alone: a sandboxed command could still plant what git runs.

git runs a repository's hooks and what its config names (``core.fsmonitor``, ``core.hooksPath``, an
alias, a filter) outside any sandbox, with the rights of the person who runs git there later. The
sandbox bound an existing top-level ``.git`` read-only, but a command could

- make a new repository (``git init``) and write its hooks and settings in the same command;
- write into a sub-repository's ``.git`` (``vendor/lib/.git``), which was not bound;
- build a repository file by file (its config first, ``HEAD`` last), or point a new ``.git`` file at
  a folder it prepared where the check never looked.

Each test makes the person's later git run and checks a canary outside the workspace.
"""

from __future__ import annotations

import asyncio
import os
import re
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

from tests.tools.test_sandbox_attacks import NOBODY, python_for
from tether.cancel import CancelSignal
from tether.errors import RunCancelled
from tether.tools import _gitguard
from tether.tools.base import ToolContext, ToolResult
from tether.tools.sandbox import sandbox_status
from tether.tools.shell import RunCommand, ShellSettings

pytestmark = [
    pytest.mark.skipif(not sandbox_status().available, reason=f"no sandbox: {sandbox_status().why_not}"),
    pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed"),
]
GIT = "git -c user.name=m -c user.email=m@example.com"


def sandboxed(ws: Path, command: str, writable: tuple[str, ...] = ()) -> str:
    """The result the model reads for ``command``, run in the workspace-write sandbox."""
    shell = RunCommand(ShellSettings(sandbox="workspace-write", writable=writable))
    result = asyncio.run(shell.execute({"command": command}, ToolContext(cwd=ws, signal=CancelSignal())))
    assert isinstance(result, ToolResult)
    return str(result.content)


def person(ws: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """The person's own git, later, outside any sandbox."""
    return subprocess.run(
        ["git", "-c", "user.name=p", "-c", "user.email=p@example.com", *args],
        cwd=ws,
        capture_output=True,
        text=True,
        check=False,
    )


def plant(canary: Path) -> str:
    """Shell lines that give the repository in the current folder a hook and settings that touch ``canary``."""
    touch = f"touch {canary}"
    return (
        f"printf '#!/bin/sh\\n{touch}\\n' > .git/hooks/pre-commit && chmod +x .git/hooks/pre-commit && "
        f"git config core.fsmonitor '{touch}; false' && git config alias.st '!{touch}' && "
        f"git config filter.x.clean '{touch}' && echo planted"
    )


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    (tmp_path / "ws").mkdir()
    return tmp_path / "ws"


def test_the_canary_works_where_nothing_guards_the_repository(ws: Path, tmp_path: Path) -> None:
    """The control: the same lines run by the person themselves do reach the canary."""
    canary = tmp_path / "canary"
    subprocess.run(f"git init -q && {plant(canary)}", shell=True, cwd=ws, check=True, capture_output=True)
    person(ws, "commit", "-q", "--allow-empty", "-m", "x")
    assert canary.exists()


def test_a_new_repository_keeps_its_commits_but_not_the_hooks_and_settings_it_was_given(
    ws: Path, tmp_path: Path
) -> None:
    """git init and a hook in one command: the hook and the settings were the person's next git's."""
    canary = tmp_path / "canary"
    said = sandboxed(
        ws,
        f"git init -q && echo a > a.txt && git add a.txt && {GIT} commit -qm first && "
        f"git config user.name Model && git remote add origin https://example.com/r.git && {plant(canary)}",
    )
    assert said.startswith("exit code 0\nplanted\n")
    assert "[refused: this command wrote into a git repository what git would run outside the sandbox" in said
    assert re.search(
        r"\.git/hooks/pre-commit \(a hook: git runs it; moved to \.git/refused-by-tether/\d{8}T\d{6}Z/hooks/pre-commit\)",
        said,
    )
    assert ".git/config: core.fsmonitor, alias.st, filter.x.clean (settings that can run programs" in said
    person(ws, "commit", "-q", "--allow-empty", "-m", "by the person")
    person(ws, "st")
    (ws / "b.txt").write_text("b\n")
    person(ws, "add", "b.txt")
    assert not canary.exists()
    assert person(ws, "log", "--format=%s").stdout.split() == ["by", "the", "person", "first"]
    config = (ws / ".git/config").read_text()
    assert "fsmonitor" not in config and "Model" in config and "https://example.com/r.git" in config
    [kept] = (ws / ".git/refused-by-tether").iterdir()  # a folder of its own for each command's leftovers
    assert "fsmonitor" in (kept / "config").read_text() and str(canary) in (kept / "hooks/pre-commit").read_text()
    assert sorted(p.name for p in (ws / ".git/hooks").iterdir() if not p.name.endswith(".sample")) == []


def test_ordinary_git_work_is_not_touched(ws: Path) -> None:
    """git init, commit, a local clone and a submodule: what they write is left as it is, unsaid."""
    said = sandboxed(
        ws,
        f"git init -q && echo a > a.txt && git add a.txt && {GIT} commit -qm first && "
        f"git clone -q . copy && git -c protocol.file.allow=always submodule -q add ./ sub && "
        f"{GIT} commit -qm sub && git log --oneline | wc -l",
    )
    assert said == "exit code 0\n2\n"
    assert "worktree = ../../../sub" in (ws / ".git/modules/sub/config").read_text()
    assert (
        "url = " in (ws / "copy/.git/config").read_text()
        and "merge = refs/heads/" in (ws / "copy/.git/config").read_text()
    )
    assert person(ws, "status", "--short").stdout == "?? copy/\n"


def test_a_sub_repository_is_read_only_and_a_new_one_is_checked(ws: Path, tmp_path: Path) -> None:
    """The person's vendor/lib is read-only for commands; libs/b, made by one, is checked after each."""
    canary = tmp_path / "canary"
    person(ws, "init", "-q", "vendor/lib")
    refused = sandboxed(ws, f"cd vendor/lib && {plant(canary)}")
    assert refused.startswith("exit code 2") and "Read-only file system" in refused
    assert "[refused: write outside the workspace blocked by the sandbox" in refused
    made = sandboxed(ws, f"mkdir -p libs/b && cd libs/b && git init -q && {plant(canary)}")
    assert "libs/b/.git/hooks/pre-commit (a hook" in made and "libs/b/.git/config: core.fsmonitor" in made
    for repo in ("vendor/lib", "libs/b"):
        person(ws / repo, "commit", "-q", "--allow-empty", "-m", "x")
        person(ws / repo, "st")
    assert not canary.exists()
    again = sandboxed(ws, f"cd libs/b && {GIT} commit -q --allow-empty -m by-the-model && {plant(canary)}")
    assert again.startswith("exit code 0\nplanted\n")  # made by a command: writable, and checked after each
    assert "libs/b/.git/hooks/pre-commit (a hook" in again and "libs/b/.git/config: core.fsmonitor" in again
    person(ws / "libs/b", "commit", "-q", "--allow-empty", "-m", "x")
    assert not canary.exists()
    assert person(ws / "libs/b", "log", "--format=%s").stdout.split() == ["x", "by-the-model", "x"]
    forged = sandboxed(ws, f"touch vendor/lib/.git/{_gitguard.MADE}")  # the mark cannot be put on the person's
    assert "Read-only file system" in forged and not (ws / "vendor/lib/.git" / _gitguard.MADE).exists()


def test_a_repository_built_file_by_file_is_checked_when_it_becomes_one(ws: Path, tmp_path: Path) -> None:
    """Its config first (not yet a repository), then objects and refs, then HEAD: git's own test
    passes only at the last command, which is when the check finds it, config and all."""
    canary = tmp_path / "canary"
    steps = [
        f"mkdir -p store/hooks && printf '[core]\\n\\tbare = true\\n\\tfsmonitor = touch {canary}\\n' > store/config",
        f"printf '#!/bin/sh\\ntouch {canary}\\n' > store/hooks/post-update && chmod +x store/hooks/post-update",
        "mkdir -p store/objects store/refs/heads",
    ]
    for step in steps:
        assert "[refused" not in sandboxed(ws, step)
    said = sandboxed(ws, "echo 'ref: refs/heads/main' > store/HEAD")
    assert "store/config: core.fsmonitor" in said and "store/hooks/post-update (a hook" in said
    assert "fsmonitor" not in (ws / "store/config").read_text() and "bare = true" in (ws / "store/config").read_text()


def test_a_git_file_written_to_lead_where_the_check_does_not_look(ws: Path, tmp_path: Path) -> None:
    """node_modules is not walked (it can hold thousands of folders); a repository prepared there is
    caught by the ``.git`` file the command writes to reach it."""
    canary = tmp_path / "canary"
    prepared = sandboxed(
        ws,
        f"git init -q --bare node_modules/x && git --git-dir=node_modules/x config core.fsmonitor 'touch {canary}'",
    )
    assert "[refused" not in prepared
    said = sandboxed(ws, "echo 'gitdir: node_modules/x' > .git && git config core.bare false && echo linked")
    assert "node_modules/x/config: core.fsmonitor" in said
    (ws / "a.txt").write_text("a\n")
    person(ws, "add", "a.txt")
    person(ws, "status")
    assert not canary.exists()


def test_a_listed_git_keeps_the_person_s_own_hooks_and_settings(ws: Path, tmp_path: Path) -> None:
    """``writable = [".git"]`` lets commands commit; what they add that git would run is still taken
    out, and what the person had there is left as it was."""
    canary = tmp_path / "canary"
    person(ws, "init", "-q")
    person(ws, "config", "alias.lg", "log --oneline")
    hook = ws / ".git/hooks/pre-push"
    hook.write_text("#!/bin/sh\necho the person's own\n")
    said = sandboxed(
        ws, f"echo a > a.txt && git add a.txt && {GIT} commit -qm first && {plant(canary)}", writable=(".git",)
    )
    assert ".git/config: core.fsmonitor, alias.st, filter.x.clean (settings" in said
    assert "alias.lg" not in said and "pre-push" not in said
    assert "lg = log --oneline" in (ws / ".git/config").read_text() and hook.exists()
    person(ws, "commit", "-q", "--allow-empty", "-m", "x")
    assert not canary.exists()


def test_links_the_command_put_in_the_way_lead_nothing_outside(ws: Path, tmp_path: Path) -> None:
    """A link where the leftovers are kept, or a modules folder leading to a repository outside:
    tether writes nothing there and takes nothing out of it (the person's own)."""
    outside = tmp_path / "outside"
    person(tmp_path, "init", "-q", "--bare", str(outside / "x"))
    person(outside / "x", "config", "alias.lg", "log --oneline")
    (outside / "x/hooks/pre-commit").write_text("#!/bin/sh\necho the person's own\n")
    (outside / "kept").mkdir()
    said = sandboxed(
        ws,
        f"git init -q && ln -s {outside / 'kept'} .git/refused-by-tether && ln -s {outside} .git/modules && "
        "echo '#!/bin/sh' > .git/hooks/post-checkout && echo done",
    )
    assert re.search(r"moved to \.git/refused-by-tether-1/\d{8}T\d{6}Z/hooks/post-checkout", said)
    assert list((outside / "kept").iterdir()) == [] and str(outside) not in said
    assert (outside / "x/hooks/pre-commit").exists() and "lg = " in (outside / "x/config").read_text()


def test_a_config_written_to_be_read_one_way_by_tether_and_another_by_git(ws: Path, tmp_path: Path) -> None:
    """A setting on a header's line, after a comment ending in a backslash, in a section spelt
    with capitals or a dot, a remote whose URL runs a command: git reads each; none stays."""
    canary = tmp_path / "canary"
    config = (
        "[core]\\n\\trepositoryformatversion = 0\\n\\tbare = false\\n"
        f"[Core] fsmonitor = touch {canary}\\n"
        "[user]\\n\\tname = m ; a comment \\\\\\n"
        f"\\teditor = touch {canary}\\n"
        f'[alias]\\n\\tst = !touch {canary}\\n[ALIAS "x"]\\n[alias.y]\\n'
        f'[remote "o"]\\n\\turl = ext::sh -c touch% {canary}\\n'
    )
    said = sandboxed(
        ws, f"git init -q && printf '%b' '{config}' > .git/config && git config --list >/dev/null && echo ok"
    )
    assert said.startswith("exit code 0\nok\n")
    for setting in ("core.fsmonitor", "user.editor", "alias.st", "remote.o.url"):
        assert setting in said
    (ws / "a.txt").write_text("a\n")
    person(ws, "add", "a.txt")
    person(ws, "st")
    person(ws, "-c", "protocol.ext.allow=always", "fetch", "o")
    assert not canary.exists()
    assert person(ws, "config", "--list").returncode == 0  # what is left is a config git reads


def test_a_command_stopped_after_planting_a_hook_leaves_none(ws: Path) -> None:
    """Stop (or the timeout) ends the command early; the check after it runs all the same, and the
    person is told on the call's progress."""
    progress: list[str] = []
    signal = CancelSignal()
    ctx = ToolContext(cwd=ws, signal=signal, on_progress=progress.append)
    shell = RunCommand(ShellSettings(sandbox="workspace-write"))

    async def stop_once_planted() -> None:
        task = asyncio.ensure_future(
            shell.execute({"command": "git init -q && echo '#!/bin/sh' > .git/hooks/pre-commit && sleep 60"}, ctx)
        )
        while not (ws / ".git/hooks/pre-commit").exists():  # the command's own file says it got there
            assert not task.done(), task.result()
            await asyncio.sleep(0.01)
        signal.cancel("Stop")
        with pytest.raises(RunCancelled):
            await task

    asyncio.run(stop_once_planted())
    assert not (ws / ".git/hooks/pre-commit").exists()
    assert any(".git/hooks/pre-commit (a hook: git runs it; moved to" in p for p in progress)


def test_a_workspace_past_the_walk_s_limit_is_said_to_be_so(
    ws: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """The walk stops after MAX_FOLDERS folders (2,000): the call's progress says so each time, and
    the person's log once per workspace, rather than the guard seeming whole."""
    monkeypatch.setattr(_gitguard, "MAX_FOLDERS", 3)
    for name in "abcd":
        (ws / name).mkdir()
    progress: list[str] = []
    ctx = ToolContext(cwd=ws, signal=CancelSignal(), on_progress=progress.append)
    shell = RunCommand(ShellSettings(sandbox="workspace-write"))
    for _ in range(2):
        asyncio.run(shell.execute({"command": "true"}, ctx))
    past = [p for p in progress if "more than 3 folders" in p]
    assert len(past) == 2 and "neither read-only for the command nor checked after it" in past[0]
    assert [r.message for r in caplog.records if "more than 3 folders" in r.message] == [
        past[0].removeprefix("sandbox: ")
    ]


def test_a_big_listed_path_does_not_crowd_the_workspace_out_of_the_walk(
    ws: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each writable path has its own limit: one walk over all of them let a listed cache's folders
    use it up before the workspace's second level."""
    monkeypatch.setattr(_gitguard, "MAX_FOLDERS", 5)  # the workspace, .tether, sub and sub/x fit
    for n in range(10):
        (tmp_path / f"cache/{n}").mkdir(parents=True)
    (ws / "sub").mkdir()
    said = sandboxed(
        ws, "git init -q sub/x && echo '#!/bin/sh' > sub/x/.git/hooks/pre-commit", writable=(str(tmp_path / "cache"),)
    )
    assert "sub/x/.git/hooks/pre-commit (a hook" in said and not (ws / "sub/x/.git/hooks/pre-commit").exists()


@pytest.mark.skipif(os.geteuid() != 0, reason="becoming nobody needs root")
def test_a_repository_a_command_shut_with_chmod_is_opened_and_cleaned() -> None:
    """Where tether is not root, a command that ended with ``chmod 000 .git/hooks`` and ``chmod
    555 .git`` left its hook unseen (not even named) and its core.fsmonitor in place, while the
    result said nothing or that it was taken out. tether owns what the command made: it opens
    them again and takes both out."""
    prefix, env = python_for(NOBODY)
    with tempfile.TemporaryDirectory() as top:  # pytest's tmp_path is root's alone
        Path(top).chmod(0o777)  # nobody's git may touch the canary there
        chmod_shut(Path(top), prefix, env)


def chmod_shut(top: Path, prefix: list[str], env: dict[str, str]) -> None:
    ws, canary = top / "ws", top / "canary"
    ws.mkdir()
    os.chown(ws, NOBODY, NOBODY)
    job = (
        "import asyncio, sys; from pathlib import Path; from tether.cancel import CancelSignal;"
        "from tether.tools.base import ToolContext; from tether.tools.shell import RunCommand, ShellSettings;"
        "ctx = ToolContext(cwd=Path(sys.argv[1]), signal=CancelSignal());"
        "shell = RunCommand(ShellSettings(sandbox='workspace-write'));"
        "print(asyncio.run(shell.execute({'command': sys.argv[2]}, ctx)).content)"
    )
    command = f"git init -q && {plant(canary)} && chmod 000 .git/hooks && chmod 555 .git"
    done = subprocess.run([*prefix, "-c", job, str(ws), command], cwd=ws, env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-2000:]
    assert ".git/hooks/pre-commit (a hook: git runs it; moved to" in done.stdout
    assert ".git/config: core.fsmonitor, alias.st, filter.x.clean (settings" in done.stdout
    assert "STILL THERE" not in done.stdout
    for args in (["commit", "-q", "--allow-empty", "-m", "x"], ["st"]):
        subprocess.run([*prefix[:-1], "git", "-c", "user.name=p", "-c", "user.email=p@e", *args], cwd=ws, check=False)
    assert not canary.exists()


def test_a_command_that_makes_many_folders_to_hide_a_repository_is_walked_to_its_end(
    ws: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Past MAX_FOLDERS the walk after a command stopped: one command making that many folders put
    the repository it made out of its reach. The folders a command changed are walked to their end."""
    monkeypatch.setattr(_gitguard, "MAX_FOLDERS", 5)
    said = sandboxed(
        ws, "mkdir a1 a2 a3 a4 a5 a6 a7 a8 && git init -q zz && echo '#!/bin/sh' > zz/.git/hooks/pre-commit"
    )
    assert "zz/.git/hooks/pre-commit (a hook" in said and not (ws / "zz/.git/hooks/pre-commit").exists()


def test_a_check_that_fails_is_said_and_keeps_the_command_s_output(ws: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(*_: object) -> list[str]:
        raise OSError(5, "Input/output error")

    monkeypatch.setattr(_gitguard, "check", broken)
    said = sandboxed(ws, "echo built")
    assert said.startswith("exit code 0\nbuilt\n")
    assert "the check itself failed (OSError: [Errno 5] Input/output error)" in said
    assert "Some of it could not be taken out (said above): tell the user now" in said
