"""What session 11 found the file tools, the sandbox, the knowledge reader and the loop left alone.

- a repository's folder that is not the working directory's own ``.git``: a sub-repository's
  (``vendor/lib/.git``, made during the run), or the folder a ``.git`` file (``gitdir: ...``) or a
  ``.git`` link leads to under another name, was written by write_file and edit_file, and a
  sandboxed command wrote through a ``.git`` link;
- kb add passed over an ignore file it could not read, and read what it kept out;
- a run kept every image its tools returned, in memory, in the session and in a round's request.
"""

from __future__ import annotations

import asyncio
import base64
import itertools
import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tether import Agent, run_sync
from tether.assembly import build_agent, plan
from tether.cancel import CancelSignal
from tether.config import load_settings
from tether.errors import ConfigError
from tether.knowledge import KnowledgeBase
from tether.messages import AssistantMessage, ImagePart, TextPart, ToolCallPart, ToolMessage
from tether.sessions import MemorySessionStore
from tether.testing import FunctionModel
from tether.tools.base import ToolContext, ToolError, ToolResult, tool, validate_arguments
from tether.tools.builtin import builtin_tools, tool_settings
from tether.tools.sandbox import sandbox_status
from tether.tools.shell import RunCommand, ShellSettings

HOOK = "#!/bin/sh\ntouch /tmp/pwned\n"


def call(tools: dict[str, Any], name: str, cwd: Path, arguments: dict[str, Any]) -> Any:
    t = tools[name]
    ctx = ToolContext(cwd=cwd, signal=CancelSignal())
    return asyncio.run(t.execute(validate_arguments(t, json.dumps(arguments)), ctx))


def file_tools() -> dict[str, Any]:
    return {t.name: t for t in builtin_tools(tool_settings({"shell": {"sandbox": {"mode": "off"}}}))}


def git(*args: str) -> None:
    subprocess.run(["git", *args], check=True, capture_output=True)


def write_and_edit(tools: dict[str, Any], ws: Path, path: str) -> None:
    """Both writing tools refuse ``path``, saying why, and leave it as it was."""
    before = (ws / path).read_bytes() if (ws / path).exists() else None
    with pytest.raises(
        ToolError, match=r"^refused: .* is inside .*, which write_file does not change.*Nothing was changed"
    ):
        call(tools, "write_file", ws, {"path": path, "content": HOOK})
    if before is not None:
        with pytest.raises(ToolError, match=r"^refused: .* which edit_file does not change"):
            call(tools, "edit_file", ws, {"path": path, "old_text": before.decode()[:5], "new_text": "x"})
    assert ((ws / path).read_bytes() if (ws / path).exists() else None) == before


# --- a repository's folder, wherever it is and whatever it is called ------------------------------


def test_a_sub_repository_made_during_the_run_is_not_written(tmp_path: Path) -> None:
    """Only the working directory's own .git was refused: a nested one (vendor/lib/.git, here
    made after the tools were built, as a git clone by run_command would) took core.fsmonitor or a
    hook, which git runs, unsandboxed, when the user works in vendor/lib."""
    tools = file_tools()
    git("init", "-q", str(tmp_path / "vendor/lib"))
    write_and_edit(tools, tmp_path, "vendor/lib/.git/config")
    write_and_edit(tools, tmp_path, "vendor/lib/.git/hooks/pre-commit")
    write_and_edit(tools, tmp_path, "vendor/lib/.GIT/hooks/post-checkout")  # where case is ignored
    assert not (tmp_path / "vendor/lib/.git/hooks/pre-commit").exists()
    assert "[core]" in call(tools, "read_file", tmp_path, {"path": "vendor/lib/.git/config"})  # reads stay allowed
    assert call(tools, "write_file", tmp_path, {"path": "vendor/lib/src/a.py", "content": "a = 1\n"}).startswith(
        "wrote"
    )


def test_the_folder_a_git_file_or_link_leads_to_is_not_written(tmp_path: Path) -> None:
    """A submodule's or worktree's .git is a file, ``gitdir: PATH``; a .git may be a link. The
    folder they lead to, under another name, is the repository git runs hooks from."""
    tools = file_tools()
    (tmp_path / "modules").mkdir()
    git("init", "-q", f"--separate-git-dir={tmp_path / 'modules/sub'}", str(tmp_path / "sub"))
    assert (tmp_path / "sub/.git").read_text().startswith("gitdir: ")
    git("init", "-q", "--bare", str(tmp_path / "store.git"))
    (tmp_path / "linked").mkdir()
    os.symlink("../store.git", tmp_path / "linked/.git")
    write_and_edit(tools, tmp_path, "modules/sub/config")
    write_and_edit(tools, tmp_path, "modules/sub/hooks/pre-commit")
    write_and_edit(tools, tmp_path, "store.git/config")
    write_and_edit(tools, tmp_path, "sub/.git")  # the link itself, pointed elsewhere
    assert not (tmp_path / "modules/sub/hooks/pre-commit").exists()
    assert sorted(p.name for p in (tmp_path / "modules/sub/hooks").iterdir() if not p.name.endswith(".sample")) == []


def test_a_folder_with_only_some_of_a_repository_s_files_is_written(tmp_path: Path) -> None:
    """git's own test (HEAD with objects and refs, or a commondir), not a file named HEAD."""
    tools = file_tools()
    (tmp_path / "notes/objects").mkdir(parents=True)
    (tmp_path / "notes/HEAD").write_text("the head of the list\n")
    assert call(tools, "write_file", tmp_path, {"path": "notes/todo.md", "content": "x\n"}).startswith("wrote")
    assert call(tools, "write_file", tmp_path, {"path": "notes/objects/a.txt", "content": "x\n"}).startswith("wrote")


@pytest.mark.skipif(
    not sandbox_status().available, reason=f"no sandbox: {sandbox_status().why_not}"
)  # bubblewrap; .ci/run installs it
@pytest.mark.parametrize("how", ["link", "gitdir file"])
def test_a_sandboxed_command_does_not_write_through_a_git_link_or_file(tmp_path: Path, how: str) -> None:
    """The sandbox bound an existing .git folder read-only, but passed over a .git link, and
    bound only the file of a ``gitdir:`` .git: what they lead to stayed writable."""
    ws = tmp_path / "ws"
    ws.mkdir()
    git("init", "-q", "--bare", str(ws / "store.git"))
    if how == "link":
        os.symlink("store.git", ws / ".git")
    else:
        (ws / ".git").write_text("gitdir: store.git\n")
    shell = RunCommand(ShellSettings(sandbox="workspace-write"))
    ctx = ToolContext(cwd=ws, signal=CancelSignal())
    for target in (".git/hooks/pre-commit", "store.git/hooks/pre-commit", "store.git/config"):
        planted = asyncio.run(shell.execute({"command": f"echo evil >> {target}"}, ctx))
        assert isinstance(planted, ToolResult) and planted.is_error
        if how == "link" or target.startswith("store"):
            assert "[refused: write outside the workspace blocked by the sandbox" in str(planted.content)
    assert "evil" not in (ws / "store.git/config").read_text()
    assert not (ws / "store.git/hooks/pre-commit").exists()
    ordinary = asyncio.run(shell.execute({"command": "echo x > notes.txt && cat notes.txt"}, ctx))
    assert isinstance(ordinary, ToolResult) and ordinary.content == "exit code 0\nx\n"


# --- an ignore file that cannot be read -------------------------------------------------------------


@pytest.mark.parametrize("how", ["dangling link", "a folder", "a named pipe"])
def test_a_folder_whose_ignore_file_cannot_be_read_is_not_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, how: str
) -> None:
    """An ignore file that could not be read (a link to a shared one that is gone, a folder, a named
    pipe; no permission, where tether is not root) was dropped without a word, so the files it kept
    out of the base (secrets.txt here: no credential name or shape protects it) were read into a
    base every agent searching it is handed. The folder is passed over now, and the add says why."""
    root = tmp_path / "repo"
    (root / "docs").mkdir(parents=True)
    (root / "readme.md").write_text("# Readme\n\nkept words\n")
    (root / "docs/secrets.txt").write_text("vault passphrase: correct horse battery staple\n")
    (root / "docs/guide.md").write_text("# Guide\n\nguide words\n")
    ignore = root / "docs/.gitignore"
    if how == "dangling link":
        os.symlink(tmp_path / "shared/gitignore", ignore)
    elif how == "a folder":
        ignore.mkdir()
    else:
        os.mkfifo(ignore)
    monkeypatch.chdir(tmp_path)
    kb = KnowledgeBase.open()
    report = kb.add_path(root)
    assert report.added == ["repo/readme.md"]
    [(where, why)] = report.skipped
    assert where == "repo/docs/"
    assert "its .gitignore cannot be read" in why and "nothing in this folder was" in why
    assert kb.search("passphrase horse", mode="keyword").hits == []
    ignore.unlink() if how != "a folder" else ignore.rmdir()
    ignore.write_text("secrets.txt\n")
    again = kb.add_path(root)
    assert again.added == ["repo/docs/guide.md"] and again.skipped == []
    assert kb.search("passphrase horse", mode="keyword").hits == []


# --- images from tools: how many a run keeps ----------------------------------------------------------

PIXEL = base64.b64encode(b"\x89PNG\r\n\x1a\n" + bytes(3000)).decode()


@tool(read_only=True)
def screenshot(n: int) -> ToolResult:
    """A screenshot of page n."""
    return ToolResult(content=[TextPart(text=f"page {n}"), ImagePart(media_type="image/png", data=PIXEL)])


def images(messages: Any) -> int:
    return sum(isinstance(p, ImagePart) for m in messages if isinstance(m, ToolMessage) for p in m.content)


def test_a_run_keeps_only_the_latest_images_from_tools() -> None:
    """Each image a tool returns was bounded, their number was not: every screenshot stayed in the
    run's transcript (memory, the session), and a round of many calls sent them all in one request.
    Now the latest ``max_images`` are kept; an older one becomes the line requests already carried
    for it (no request changes: a prompt cache keeps hitting), and one the model never saw says it
    was left out and why."""
    rounds = [[1], [2], [3], [4, 5, 6, 7, 8]]  # four single pages, then five at once: past the 3 kept

    def model(messages: Any, request: Any) -> Any:
        done = sum(isinstance(m, AssistantMessage) for m in messages)
        if done < len(rounds):
            return AssistantMessage(
                content=tuple(
                    ToolCallPart(id=f"c{n}", name="screenshot", arguments=json.dumps({"n": n})) for n in rounds[done]
                )
            )
        return "Eight pages seen."

    fm = FunctionModel(model)
    sessions = MemorySessionStore()
    result = run_sync(Agent(fm, tools=[screenshot], max_images=3), "Look.", session=sessions, session_id="s")
    assert result.status == "completed"
    kept = sessions.load("s")
    assert images(kept) == 3
    texts = [p.text for m in kept if isinstance(m, ToolMessage) for p in m.content if isinstance(p, TextPart)]
    assert sum("shown to the model before its reply above; not sent again" in t for t in texts) == 3  # pages 1-3
    left_out = [t for t in texts if "left out" in t]
    assert len(left_out) == 2 and all("a run keeps the latest 3 images from tools (max_images)" in t for t in left_out)
    assert "page 4" in texts and "page 8" in texts  # a result's words stay whole
    assert [images(r.messages) for r in fm.requests] == [0, 1, 1, 1, 3]
    for before, after in itertools.pairwise(fm.requests):  # what the model replied after is sent again as it was
        seen = [i for i, m in enumerate(before.messages) if isinstance(m, AssistantMessage)]
        if seen:
            assert after.messages[: seen[-1] + 1] == before.messages[: seen[-1] + 1]


def test_max_images_is_set_per_agent_in_the_config(tmp_path: Path) -> None:
    (tmp_path / "config.toml").write_text(
        'model = "scripted/plan"\n[agents.pics]\nmax_images = 5\n[agents.none]\nmax_images = 0\n'
    )
    settings = load_settings(tmp_path)
    assert build_agent(settings, plan(settings, "pics")).max_images == 5
    assert build_agent(settings, plan(settings, "none")).max_images == 0
    assert build_agent(settings, plan(settings, None)).max_images == Agent.max_images == 20
    (tmp_path / "config.toml").write_text("[agents.bad]\nmax_images = -1\n")
    with pytest.raises(ConfigError, match="max_images"):
        load_settings(tmp_path)
