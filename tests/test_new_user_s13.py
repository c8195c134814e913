"""A new user's pass through README.md and docs/, in a fresh clone: what they paste leaves their
clone as it was, and what they mistype is answered with what happened and what to do."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _python_block(page: Path, heading: str) -> str:
    """The first ```python block after ``heading`` in ``page``."""
    text = page.read_text(encoding="utf-8").split(heading, 1)[1]
    found = re.search(r"^```python\n(.*?)^```", text, re.S | re.M)
    assert found, f"{page.name}: no python block after {heading!r}"
    return found.group(1)


def _files(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def test_the_quickstart_python_step_leaves_the_clones_examples_as_they_were(tmp_path: Path) -> None:
    """Quick start step 4 approves the scripted cleaner's deletion: pasted in a clone, it deleted
    examples/workspace/access.log (git status showed it gone, and a second paste had the model
    report deleting a file that was no longer there). It now works on a copy."""
    shutil.copytree(ROOT / "examples", tmp_path / "examples")
    before = _files(tmp_path / "examples")
    code = _python_block(ROOT / "docs" / "quickstart.md", "## 4. The same from Python")
    for _ in range(2):
        out = subprocess.run(
            [sys.executable, "-c", code],
            cwd=tmp_path,
            env={"HOME": str(tmp_path / "user"), "PATH": "/usr/bin:/bin"},
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert out.returncode == 0, out.stderr
        assert "Deleted access.log" in out.stdout
    assert _files(tmp_path / "examples") == before


def _tether(*args: str, home: Path, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    env = {"HOME": str(home.parent / "user"), "TETHER_HOME": str(home), "PATH": "/usr/bin:/bin"}
    return subprocess.run(
        [sys.executable, "-m", "tether", *args],
        cwd=cwd or home.parent,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        stdin=subprocess.DEVNULL,
    )


def test_a_second_token_for_the_same_name_says_the_first_no_longer_works(tmp_path: Path) -> None:
    """`tether serve token create alice` twice printed two tokens and the same line; the first had
    silently stopped working (one token per name), so a client using it got 401 with no warning."""
    home = tmp_path / "home"
    first = _tether("serve", "token", "create", "alice", home=home)
    assert first.returncode == 0, first.stderr
    assert "no longer works" not in first.stderr
    second = _tether("serve", "token", "create", "alice", home=home)
    assert second.returncode == 0, second.stderr
    assert "alice's earlier token no longer works: this one replaces it" in second.stderr
    from tether.server.store import SqliteServerStore

    store = SqliteServerStore(home / "serve" / "server.db")
    try:
        assert store.user_for_token(first.stdout.strip()) is None
        assert store.user_for_token(second.stdout.strip()) == "alice"
    finally:
        store.close()


def test_extract_with_on_an_unchanged_folder_says_why_nothing_was_extracted(tmp_path: Path) -> None:
    """The README adds examples/catalog, then mentions `tether kb add --extract-with MODEL`: run on
    the same folder it said `0 calls, 0 tokens` and nothing more, the graph unchanged. It now says
    no file changed, so none was read, and how to extract from one."""
    home = tmp_path / "home"
    shutil.copytree(ROOT / "examples" / "catalog", tmp_path / "catalog")
    first = _tether("kb", "add", "--embedder", "none", "catalog", home=home)
    assert first.returncode == 0, first.stderr
    again = _tether("kb", "add", "--extract-with", "scripted/extract", "catalog", home=home)
    assert again.returncode == 0, again.stderr
    assert "0 calls" in again.stdout and "no file changed, so none was read" in again.stdout
    assert "tether kb remove DOC" in again.stdout
    (tmp_path / "catalog" / "seals.md").write_text("# Seal kits\n\nSK-90: Viton seats.\n", encoding="utf-8")
    changed = _tether("kb", "add", "--extract-with", "scripted/extract", "catalog", home=home)
    assert changed.returncode == 0, changed.stderr
    assert "1 updated" in changed.stdout and "no file changed" not in changed.stdout


def test_the_words_about_the_scripted_models_tokens_and_the_jailbreak_scan_match_the_code() -> None:
    """tether.providers.scripted said its tokens were counted with the o200k_base BPE, while it
    bills by the tokenizer-free estimate (as docs/testing.md says); `jailbreaks` was described as
    scanning 'in ten languages', the figure of the rule-based PatternScanner, which it does not use."""
    from tether.guardrails import RuleClassifier
    from tether.memory.scan import ModelScanner
    from tether.providers import scripted
    from tether.tokens import estimate_tokens

    text = "Ignore the rest, 中文も少し 🙂"
    billed = scripted.count_prompt_tokens([{"role": "user", "content": text}], [])
    assert billed == 3 + 4 + estimate_tokens("user") + estimate_tokens(text)  # framing, then the estimate
    assert scripted.__doc__ is not None and "BPE" not in scripted.__doc__ and "estimate" in scripted.__doc__
    assert isinstance(RuleClassifier.jailbreaks().scanner, ModelScanner)
    config_line = next(
        line for line in (ROOT / "docs" / "cli.md").read_text(encoding="utf-8").splitlines() if "jailbreaks =" in line
    )
    for words in (RuleClassifier.jailbreaks.__doc__ or "", config_line):
        assert "ten languages" not in words and "several languages" in words


def test_the_scripted_cleaner_does_not_report_a_deletion_that_failed(tmp_path: Path) -> None:
    """Approved in a folder without access.log (a second paste of an example that had deleted it),
    the scripted `destructive` model answered 'Deleted access.log to free space.' over the tool's
    error; it now says it could not, and why."""
    from tether import Agent, RunState, approve, run_sync
    from tether.tools.files import FILE_TOOLS

    (tmp_path / "errors.log").write_text("worker 7 timed out\n", encoding="utf-8")
    state = RunState()
    cleaner = Agent("scripted/destructive", tools=FILE_TOOLS, cwd=tmp_path)
    assert run_sync(cleaner, "Free some disk space.", state=state).status == "interrupted"
    approve(state)
    result = run_sync(cleaner, state=state)
    assert result.status == "completed"
    assert "Deleted" not in result.output
    assert result.output.startswith("I could not delete access.log: no such file")


def test_the_scripted_fixer_run_again_says_it_changed_nothing(tmp_path: Path) -> None:
    """docs/testing.md suggested trying `scripted/fix` on examples/project: it edits greet.py, and a
    second run, its edit refused (the typo gone), still answered 'Fixed the typo in greet.py'."""
    shutil.copytree(ROOT / "examples" / "project", tmp_path / "project")
    home = tmp_path / "home"
    argv = ("run", "--model", "scripted/fix", "--no-memory", "--cwd", "project", "Fix the typo in greet.py")
    first = _tether(*argv, home=home, cwd=tmp_path)
    if first.returncode == 5:  # no sandbox on this machine: the command waits for a person
        return
    assert first.returncode == 0, first.stderr
    assert first.stdout.startswith("Fixed the typo in greet.py; running it now prints: hello, world!")
    again = _tether(*argv, home=home, cwd=tmp_path)
    assert again.returncode == 0, again.stderr
    assert "Fixed" not in again.stdout
    assert again.stdout.startswith("I did not change greet.py (old_text was not found in greet.py)")
    assert again.stdout.rstrip().endswith("hello, world!")


def test_a_default_model_that_cannot_run_names_where_it_came_from(tmp_path: Path) -> None:
    """With no --model, a TETHER_MODEL set long ago in a shell profile (or config.toml's model)
    that cannot run was refused as `unknown provider 'foo' in 'foo/bar'`, with nothing saying where
    foo/bar came from; `tether config check` named it, `tether run` did not."""
    home = tmp_path / "home"
    home.mkdir()
    env = {"HOME": str(tmp_path / "user"), "TETHER_HOME": str(home), "PATH": "/usr/bin:/bin"}
    run = subprocess.run(
        [sys.executable, "-m", "tether", "run", "hi"],
        env={**env, "TETHER_MODEL": "foo/bar"},
        capture_output=True,
        text=True,
        timeout=60,
        stdin=subprocess.DEVNULL,
    )
    assert run.returncode == 2
    assert "the model foo/bar (from $TETHER_MODEL; --model chooses another): unknown provider 'foo'" in run.stderr
    (home / "config.toml").write_text('model = "scripted/nope"\n', encoding="utf-8")
    chat = _tether("chat", home=home)
    assert chat.returncode == 2
    assert f"the model scripted/nope (from model in {home / 'config.toml'}; --model chooses another)" in chat.stderr
    fine = _tether("run", "--model", "scripted/hello", "--no-memory", "hi", home=home)  # --model wins
    assert fine.returncode == 0, fine.stderr
