"""What a new user reads first says what tether does: every link in README.md and docs/ leads to
a file and a heading that exist, the API reference shows tether's docstrings (not those its classes
inherit from pydantic or typing), and `--help` names the tables the documentation names."""

from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys
import unicodedata
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
FENCE = re.compile(r"^```.*?^```", re.S | re.M)


def _slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, markup dropped, spaces to hyphens."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading.strip().lower()).replace("`", "")
    kept = "".join(c for c in text if c in "-_ " or unicodedata.category(c)[0] in "LN")
    return kept.replace(" ", "-")


def _anchors(page: Path) -> set[str]:
    seen: dict[str, int] = {}
    for match in re.finditer(r"^#{1,6}\s+(.*?)\s*$", FENCE.sub("", page.read_text(encoding="utf-8")), re.M):
        slug = _slug(match.group(1))
        seen[slug] = seen.get(slug, -1) + 1
        seen[f"{slug}-{seen[slug]}" if seen[slug] else slug] = 0
    return set(seen)


def _broken_links(page: Path) -> list[str]:
    text = FENCE.sub(lambda m: "\n" * m.group(0).count("\n"), page.read_text(encoding="utf-8"))
    broken = []
    for match in re.finditer(r"\]\(([^)\s]+)\)", text):
        target = match.group(1)
        if re.match(r"[a-z]+:", target):  # http:, https:, mailto:
            continue
        where = f"{page.relative_to(ROOT)}:{text[: match.start()].count(chr(10)) + 1}: {target}"
        path, _, anchor = target.partition("#")
        linked = (page.parent / path).resolve() if path else page
        if not linked.exists():
            broken.append(f"{where} (no such file)")
        elif anchor and linked.suffix == ".md" and anchor not in _anchors(linked):
            broken.append(f"{where} (no such heading)")
    return broken


def test_every_relative_link_and_anchor_in_the_readme_and_docs_resolves() -> None:
    assert _slug("The sandbox: commands without a person") == "the-sandbox-commands-without-a-person"
    assert "runs-in-processes-of-their-own" in _anchors(ROOT / "docs" / "server.md")
    broken = [line for page in PAGES for line in _broken_links(page)]
    assert broken == []


def test_the_api_reference_shows_no_docstring_a_class_only_inherits() -> None:
    spec = importlib.util.spec_from_file_location("api_reference", ROOT / "tools" / "api_reference.py")
    assert spec is not None and spec.loader is not None
    generator = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(generator)
    page = generator.render()
    assert "A base class for creating Pydantic models" not in page  # AssistantMessage has no docstring
    assert "Base class for protocol classes" not in page  # nor has Tool
    assert "../concepts/models.md" not in page  # pydantic's own documentation's link
    assert "The canonical message model" in page and "A tool made from a function by" in page


def test_mcp_serve_help_names_the_agents_tables_the_docs_name() -> None:
    shown = subprocess.run(
        [sys.executable, "-m", "tether", "mcp", "serve", "--help"], capture_output=True, text=True, check=True
    ).stdout
    said = " ".join(shown.split())
    assert "else every [agents.NAME] in config.toml" in said  # not only the older [serve.agents.NAME]


def test_memory_remove_of_a_profile_entry_without_profile_says_to_pass_it(tmp_path: Path) -> None:
    env = {**os.environ, "TETHER_HOME": str(tmp_path)}

    def tether(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "tether", "memory", *args], capture_output=True, text=True, env=env
        )

    assert tether("add", "--profile", "Name is Ana.").returncode == 0
    missed = tether("remove", "Name is Ana")  # the notes are the default store
    assert missed.returncode == 2 and "No entry in notes contains" in missed.stderr
    assert "The profile has an entry containing it: tether memory remove --profile ..." in missed.stderr
    assert "--profile" not in tether("remove", "Name is Bob").stderr  # in no store: no hint
    assert tether("remove", "--profile", "Name is Ana").returncode == 0
    assert "Name is Ana" not in (tmp_path / "memory" / "profile.md").read_text(encoding="utf-8")


def test_worker_help_writes_concurrency_n_as_docs_cli_md_does() -> None:
    shown = subprocess.run(
        [sys.executable, "-m", "tether", "worker", "--help"], capture_output=True, text=True, check=True
    ).stdout
    assert "[--concurrency N]" in shown and "CONCURRENCY" not in shown
    assert "[--concurrency N]" in (ROOT / "docs" / "cli.md").read_text(encoding="utf-8")


def test_kb_fill_of_a_base_without_an_embedder_says_how_to_get_one(tmp_path: Path) -> None:
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "valves.md").write_text("# Valves\n\nThe FVAM-2050-B takes seal kit SK-77.\n")
    env = {**os.environ, "TETHER_HOME": str(tmp_path / "home")}

    def tether(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "tether", "kb", *args], capture_output=True, text=True, env=env)

    assert tether("add", "--embedder", "none", str(tmp_path / "docs")).returncode == 0
    filled = tether("fill")
    assert filled.returncode == 0 and "has no embedder: it is searched by keyword only" in filled.stdout
    assert "tether kb drop default --yes" in filled.stdout and "--embedder local" in filled.stdout


def test_scripted_destructive_does_not_claim_a_deletion_that_never_ran(tmp_path: Path) -> None:
    """tether chat with messages piped in: the deletion waits for tether resume, the next message is
    answered; the scripted model said 'Deleted access.log to free space.' while the file was there."""
    workspace = tmp_path / "workspace"
    workspace.mkdir()
    (workspace / "access.log").write_text("GET / 200\n")
    chat = subprocess.run(
        [sys.executable, "-m", "tether", "chat", "--model", "scripted/destructive", "--cwd", str(workspace)],
        input="Free some disk space\nAnything else?\n",
        capture_output=True,
        text=True,
        env={**os.environ, "TETHER_HOME": str(tmp_path / "home")},
    )
    assert chat.returncode == 0, chat.stderr
    assert "delete_file needs approval" in chat.stderr and (workspace / "access.log").exists()
    assert "Deleted access.log" not in chat.stdout
    # the next message declined the waiting deletion (docs/harness.md): the model is told it never ran
    assert "I did not delete anything" in chat.stdout
