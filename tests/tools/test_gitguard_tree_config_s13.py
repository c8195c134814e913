"""A repository's own config that points git at files in its working tree, which a command can write.

The person's ``.git`` is read-only to a sandboxed command, but ``core.hooksPath = .husky``,
``include.path = ../.gitconfig.local`` or a filter whose script is ``./scripts/clean.sh`` make git
run or read what is in the tree. Each test runs the attack in the real ``workspace-write`` sandbox
(bubblewrap), then the person's own git, later and unsandboxed, and checks a canary outside the
workspace that only planted code touches.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

from tests.tools.test_left_alone_s12 import person, sandboxed
from tests.tools.test_left_alone_s12 import pytestmark as guarded

pytestmark = guarded  # skipped, with the reason, where bubblewrap or git is not installed


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    (tmp_path / "ws").mkdir()
    return tmp_path / "ws"


def hook(path: Path, line: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"#!/bin/sh\n{line}\n")
    path.chmod(0o755)


def the_person_s_repository(ws: Path, *settings: tuple[str, str]) -> None:
    subprocess.run(["git", "init", "-q"], cwd=ws, check=True)
    for key, value in settings:
        subprocess.run(["git", "config", key, value], cwd=ws, check=True)


def test_a_hooks_folder_in_the_tree_is_read_only_and_the_result_says_why(ws: Path, tmp_path: Path) -> None:
    """core.hooksPath = .husky: a command rewrote .husky/pre-commit, the person's next commit ran it."""
    canary = tmp_path / "canary"
    the_person_s_repository(ws, ("core.hooksPath", ".husky"))
    hook(ws / ".husky/pre-commit", "echo linted")
    said = sandboxed(ws, f"echo 'touch {canary}' >> .husky/pre-commit; echo 'touch {canary}' > .husky/post-commit")
    assert "Read-only file system" in said
    assert ".husky (core.hooksPath in .git/config: git runs the hooks in it)" in said
    assert "run_command_unsandboxed" in said
    assert person(ws, "commit", "-q", "--allow-empty", "-m", "x").returncode == 0
    assert not canary.exists()
    assert (ws / ".husky/pre-commit").read_text() == "#!/bin/sh\necho linted\n"  # the person's, as it was


def test_husky_9_s_hooks_run_the_ones_beside_them_so_those_are_read_only_too(ws: Path, tmp_path: Path) -> None:
    """husky 9 sets core.hooksPath = .husky/_, whose scripts run .husky/<hook>."""
    canary = tmp_path / "canary"
    the_person_s_repository(ws, ("core.hooksPath", ".husky/_"))
    hook(ws / ".husky/_/pre-commit", '. "$(dirname "$0")/../pre-commit"')
    hook(ws / ".husky/pre-commit", "echo linted")
    said = sandboxed(ws, f"echo 'touch {canary}' > .husky/pre-commit")
    assert "Read-only file system" in said
    person(ws, "commit", "-q", "--allow-empty", "-m", "x")
    assert not canary.exists()


def test_a_hooks_folder_the_config_names_but_the_tree_lacks_is_taken_out_when_a_command_makes_it(
    ws: Path, tmp_path: Path
) -> None:
    canary = tmp_path / "canary"
    the_person_s_repository(ws, ("core.hooksPath", ".githooks"))
    said = sandboxed(
        ws,
        f"mkdir .githooks && printf '#!/bin/sh\\ntouch {canary}\\n' > .githooks/pre-commit && "
        "chmod +x .githooks/pre-commit && echo made",
    )
    assert said.startswith("exit code 0\nmade\n")
    assert re.search(
        r"\.githooks \(core\.hooksPath in \.git/config: git runs the hooks in it; moved to "
        r"\.git/refused-by-tether/\d{8}T\d{6}Z/worktree/\.githooks\)",
        said,
    )
    person(ws, "commit", "-q", "--allow-empty", "-m", "x")
    assert not canary.exists()
    assert not (ws / ".githooks").exists()


def test_an_included_settings_file_in_the_tree_is_read_only_or_taken_out(ws: Path, tmp_path: Path) -> None:
    """include.path naming a file in the tree: core.fsmonitor written there ran at the next git status."""
    canary = tmp_path / "canary"
    the_person_s_repository(
        ws, ("include.path", "../.gitconfig.local"), ("includeIf.onbranch:main.path", "../config/git/main.inc")
    )
    (ws / ".gitconfig.local").write_text("[alias]\n\tst = status --short\n")
    said = sandboxed(ws, f"printf '[core]\\n\\tfsmonitor = touch {canary}; false\\n' >> .gitconfig.local")
    assert "Read-only file system" in said
    assert ".gitconfig.local (include.path in .git/config: git reads settings from it)" in said
    said = sandboxed(
        ws, f"mkdir -p config/git && printf '[alias]\\n\\tst = !touch {canary}\\n' > config/git/main.inc && echo made"
    )
    assert said.startswith("exit code 0\nmade\n")
    assert "config/git/main.inc (includeif.onbranch:main.path in .git/config: git reads settings from it; moved" in said
    person(ws, "status")
    person(ws, "st")
    assert not canary.exists()
    assert (ws / ".gitconfig.local").read_text() == "[alias]\n\tst = status --short\n"


def test_a_program_a_setting_names_in_the_tree_is_read_only_even_when_its_folder_is_moved(
    ws: Path, tmp_path: Path
) -> None:
    """filter.x.clean = ./scripts/clean.sh, alias.fmt = !python tools/fmt.py: the scripts run at the
    person's next git add and git fmt. The command cannot write them, nor put others in their place."""
    canary = tmp_path / "canary"
    the_person_s_repository(
        ws,
        ("filter.x.clean", "./scripts/clean.sh"),
        ("alias.fmt", "!python3 tools/fmt.py"),
        ("alias.rel", "!sh -c './scripts/release.sh \"$@\"' -"),
    )
    hook(ws / "scripts/clean.sh", "cat")
    hook(ws / "scripts/release.sh", "true")
    (ws / "tools").mkdir()
    (ws / "tools/fmt.py").write_text("print('formatted')\n")
    (ws / ".gitattributes").write_text("*.txt filter=x\n")
    said = sandboxed(
        ws,
        f"echo 'touch {canary}' >> scripts/clean.sh; echo 'open({str(canary)!r}, \"w\")' > tools/fmt.py; "
        f"echo 'touch {canary}' >> scripts/release.sh",
    )
    assert said.count("Read-only file system") == 3
    said = sandboxed(
        ws,
        f"mv scripts old && mkdir scripts && printf '#!/bin/sh\\ntouch {canary}\\ncat\\n' > scripts/clean.sh && "
        "chmod +x scripts/clean.sh && echo swapped",
    )
    assert said.startswith("exit code 0\nswapped\n")
    assert "scripts/clean.sh (filter.x.clean in .git/config: git runs it; moved to" in said
    (ws / "a.txt").write_text("a\n")
    person(ws, "add", "a.txt")
    person(ws, "fmt")
    person(ws, "rel")
    assert not canary.exists()


def test_a_hooks_path_set_in_the_person_s_global_config_counts_too(
    ws: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    canary = tmp_path / "canary"
    home = tmp_path / "home"
    home.mkdir()
    (home / ".gitconfig").write_text("[core]\n\thooksPath = .githooks\n")
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.delenv("XDG_CONFIG_HOME", raising=False)
    monkeypatch.delenv("GIT_CONFIG_GLOBAL", raising=False)
    the_person_s_repository(ws)
    hook(ws / ".githooks/pre-commit", "true")
    said = sandboxed(ws, f"echo 'touch {canary}' >> .githooks/pre-commit")
    assert "Read-only file system" in said
    assert f".githooks (core.hooksPath in {home / '.gitconfig'}: git runs the hooks in it)" in said
    person(ws, "commit", "-q", "--allow-empty", "-m", "x")
    assert not canary.exists()


def test_ordinary_work_beside_what_the_config_names_is_not_touched(ws: Path) -> None:
    """Everything else in the tree stays writable, and nothing is said."""
    the_person_s_repository(
        ws,
        ("core.hooksPath", ".husky"),
        ("include.path", "../.gitconfig.local"),
        ("alias.t", "!cd src && make"),
        ("alias.lg", "log --oneline"),  # not a program: a file named log is the project's
        ("blame.ignoreRevsFile", ".git-blame-ignore-revs"),  # read as data only
    )
    hook(ws / ".husky/pre-commit", "true")
    (ws / "src").mkdir()
    (ws / "log").write_text("")
    (ws / ".git-blame-ignore-revs").write_text("")
    said = sandboxed(
        ws,
        "echo x > src/a.py && mkdir -p build/out && echo b > build/out/b && echo l > log && "
        "echo 0123 >> .git-blame-ignore-revs && cat src/a.py",
    )
    assert said.strip() == "exit code 0\nx"
    assert (ws / "build/out/b").read_text() == "b\n"
    assert (ws / ".git-blame-ignore-revs").read_text() == "0123\n"


def test_a_quoted_hooks_path_is_read_as_git_reads_it(ws: Path, tmp_path: Path) -> None:
    """Quotes, an escape and a comment after the value: the folder is the one git runs hooks from."""
    canary = tmp_path / "canary"
    the_person_s_repository(ws)
    with (ws / ".git/config").open("a") as f:
        f.write('[core]\n\thooksPath = "my \\"hooks\\" " ; where the team keeps them\n')
    hook(ws / 'my "hooks" /pre-commit', "true")
    said = sandboxed(ws, f"echo 'touch {canary}' >> 'my \"hooks\" /pre-commit'")
    assert "Read-only file system" in said
    person(ws, "commit", "-q", "--allow-empty", "-m", "x")
    assert not canary.exists()


def test_a_hook_that_is_a_link_to_a_script_in_the_tree_leaves_that_script_read_only(ws: Path, tmp_path: Path) -> None:
    """.husky/pre-commit -> ../scripts/pre-commit.sh: the folder was read-only, the script it runs was not."""
    canary = tmp_path / "canary"
    the_person_s_repository(ws, ("core.hooksPath", ".husky"))
    hook(ws / "scripts/pre-commit.sh", "true")
    (ws / ".husky").mkdir()
    (ws / ".husky/pre-commit").symlink_to("../scripts/pre-commit.sh")
    said = sandboxed(ws, f"echo 'touch {canary}' >> scripts/pre-commit.sh")
    assert "Read-only file system" in said
    assert "scripts/pre-commit.sh (core.hooksPath in .git/config: a hook in .husky/ leads to it: git runs it)" in said
    person(ws, "commit", "-q", "--allow-empty", "-m", "x")
    assert not canary.exists()


def test_the_repository_around_the_workspace_counts_too(tmp_path: Path) -> None:
    """The workspace is a package of the person's monorepo, whose husky is set up from the package
    (core.hooksPath = app/.husky): the repository is above the workspace, its hooks inside it."""
    canary = tmp_path / "canary"
    repo = tmp_path / "repo"
    (repo / "app").mkdir(parents=True)
    the_person_s_repository(repo, ("core.hooksPath", "app/.husky"))
    hook(repo / "app/.husky/pre-commit", "true")
    said = sandboxed(repo / "app", f"echo 'touch {canary}' >> .husky/pre-commit")
    assert "Read-only file system" in said
    assert f".husky (core.hooksPath in {repo / '.git/config'}: git runs the hooks in it)" in said
    person(repo, "commit", "-q", "--allow-empty", "-m", "x")
    assert not canary.exists()
