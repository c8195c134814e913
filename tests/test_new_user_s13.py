"""A new user's pass through README.md and docs/, in a fresh clone: what they paste leaves their
clone as it was, and what they mistype is answered with what happened and what to do."""

from __future__ import annotations

import re
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.cli.conftest import run_main

ROOT = Path(__file__).resolve().parent.parent

Tether = Callable[..., tuple[int, str, str]]


@pytest.fixture
def tether(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> Tether:
    """``tether ARGS`` in process, in ``tmp_path``, on a fresh ``$TETHER_HOME``: (exit code, stdout, stderr)."""
    monkeypatch.setenv("HOME", str(tmp_path / "user"))
    monkeypatch.setenv("TETHER_HOME", str(tmp_path / "home"))
    for name in ("TETHER_MODEL", "LLM_BASE_URL", "OPENAI_BASE_URL", "OPENAI_API_KEY", "TETHER_SESSION_STORE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.chdir(tmp_path)
    capsys.readouterr()

    return lambda *args: run_main(*args, capsys=capsys)


def _python_block(page: Path, heading: str) -> str:
    """The first ```python block after ``heading`` in ``page``."""
    text = page.read_text(encoding="utf-8").split(heading, 1)[1]
    found = re.search(r"^```python\n(.*?)^```", text, re.S | re.M)
    assert found, f"{page.name}: no python block after {heading!r}"
    return found.group(1)


def _files(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def test_the_quickstart_python_step_leaves_the_clones_examples_as_they_were(
    tether: Tether, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Quick start step 4 approves the scripted cleaner's deletion: pasted in a clone, it deleted
    examples/workspace/access.log (git status showed it gone, and a second paste had the model
    report deleting a file that was no longer there). It now works on a copy."""
    shutil.copytree(ROOT / "examples", tmp_path / "examples")
    before = _files(tmp_path / "examples")
    code = compile(_python_block(ROOT / "docs" / "quickstart.md", "## 4. The same from Python"), "quickstart", "exec")
    for _ in range(2):  # as a reader pastes it twice
        exec(code, {"__name__": "__docs__"})
        assert "Deleted access.log" in capsys.readouterr().out
    assert _files(tmp_path / "examples") == before


def test_a_second_token_for_the_same_name_says_the_first_no_longer_works(tether: Tether, tmp_path: Path) -> None:
    """`tether serve token create alice` twice printed two tokens and the same line; the first had
    silently stopped working (one token per name), so a client using it got 401 with no warning."""
    code, first, said = tether("serve", "token", "create", "alice")
    assert code == 0 and "no longer works" not in said
    code, second, said = tether("serve", "token", "create", "alice")
    assert code == 0
    assert "alice's earlier token no longer works: this one replaces it" in said
    from tether.server.store import SqliteServerStore

    store = SqliteServerStore(tmp_path / "home" / "serve" / "server.db")
    try:
        assert store.user_for_token(first.strip()) is None
        assert store.user_for_token(second.strip()) == "alice"
    finally:
        store.close()


def test_extract_with_on_an_unchanged_folder_says_why_nothing_was_extracted(tether: Tether, tmp_path: Path) -> None:
    """The README adds examples/catalog, then mentions `tether kb add --extract-with MODEL`: run on
    the same folder it said `0 calls, 0 tokens` and nothing more, the graph unchanged. It now says
    no file changed, so none was read, and how to extract from one."""
    shutil.copytree(ROOT / "examples" / "catalog", tmp_path / "catalog")
    assert tether("kb", "add", "--embedder", "none", "catalog")[0] == 0
    code, again, _ = tether("kb", "add", "--extract-with", "scripted/extract", "catalog")
    assert code == 0
    assert "0 calls" in again and "no file changed, so none was read" in again
    assert "tether kb remove DOC" in again
    (tmp_path / "catalog" / "seals.md").write_text("# Seal kits\n\nSK-90: Viton seats.\n", encoding="utf-8")
    code, changed, _ = tether("kb", "add", "--extract-with", "scripted/extract", "catalog")
    assert code == 0
    assert "1 updated" in changed and "no file changed" not in changed


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


def test_the_scripted_fixer_run_again_says_it_changed_nothing(tether: Tether, tmp_path: Path) -> None:
    """docs/testing.md suggested trying `scripted/fix` on examples/project: it edits greet.py, and a
    second run, its edit refused (the typo gone), still answered 'Fixed the typo in greet.py'."""
    shutil.copytree(ROOT / "examples" / "project", tmp_path / "project")
    (tmp_path / "home").mkdir()  # its command runs without a person, with a sandbox here or not
    (tmp_path / "home" / "config.toml").write_text("[tools.shell]\napproval = false\n")
    argv = ("run", "--model", "scripted/fix", "--no-memory", "--cwd", "project", "Fix the typo in greet.py")
    code, first, said = tether(*argv)
    assert code == 0, said
    assert first.startswith("Fixed the typo in greet.py; running it now prints: hello, world!")
    code, again, said = tether(*argv)
    assert code == 0, said
    assert "Fixed" not in again
    assert again.startswith("I did not change greet.py (old_text was not found in greet.py)")
    assert again.rstrip().endswith("hello, world!")


def test_a_default_model_that_cannot_run_names_where_it_came_from(
    tether: Tether, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With no --model, a TETHER_MODEL set long ago in a shell profile (or config.toml's model)
    that cannot run was refused as `unknown provider 'foo' in 'foo/bar'`, with nothing saying where
    foo/bar came from; `tether config check` named it, `tether run` did not."""
    monkeypatch.setenv("TETHER_MODEL", "foo/bar")
    code, _, said = tether("run", "hi")
    assert code == 2
    assert "the model foo/bar (from $TETHER_MODEL; --model chooses another): unknown provider 'foo'" in said
    monkeypatch.delenv("TETHER_MODEL")
    config = tmp_path / "home" / "config.toml"
    config.parent.mkdir(parents=True, exist_ok=True)
    config.write_text('model = "scripted/nope"\n', encoding="utf-8")
    code, _, said = tether("chat")
    assert code == 2
    assert f"the model scripted/nope (from model in {config}; --model chooses another)" in said
    code, _, said = tether("run", "--model", "scripted/hello", "--no-memory", "hi")  # --model wins
    assert code == 0, said


def test_a_mistyped_mcp_server_name_lists_the_configured_ones(tether: Tether, tmp_path: Path) -> None:
    """`tether run --mcp mial` named the servers configured; `tether mcp resources mial` (and
    prompts, login) said only `no [mcp.mial] in .../config.toml`."""
    config = tmp_path / "home" / "config.toml"
    config.parent.mkdir(parents=True)
    config.write_text('[mcp.mail]\ncommand = "python"\nargs = ["mail_server.py"]\n', encoding="utf-8")
    for argv in (("resources", "mial"), ("prompts", "mial"), ("login", "mial")):
        code, _, said = tether("mcp", *argv)
        assert code == 2
        assert f"no [mcp.mial] in {config} (configured: mail)" in said, argv


@pytest.mark.parametrize(
    ("command", "choices"),
    [
        ("kb", "{add,fill,search,list,remove,stats,bases,drop}"),
        ("memory", "{show,add,replace,remove,clear}"),
        ("mcp", "{list,login,resources,prompts,serve}"),
        ("skills", "{list,show}"),
        ("auth", "{import}"),
    ],
)
def test_a_command_without_its_sub_command_names_the_choices(tether: Tether, command: str, choices: str) -> None:
    """`tether kb` alone said `the following arguments are required: kb_command` (so did memory,
    mcp, skills and auth: a name from tether's code), while `tether sessions` named its choices."""
    code, _, said = tether(command)
    assert code == 2
    assert said.rstrip().endswith(f"the following arguments are required: {choices}")
    assert f"{command}_command" not in said


def test_config_check_refuses_an_otlp_endpoint_where_opentelemetry_is_not_installed(
    tether: Tether, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The README's [telemetry] block in a clone installed without the otel extra: `tether config
    check` said `ok`, and then every `tether run` stopped with exit 2 (OpenTelemetry not installed)."""
    import sys

    config = tmp_path / "home" / "config.toml"
    config.parent.mkdir(parents=True)
    config.write_text('[telemetry]\notlp_endpoint = "http://127.0.0.1:4318/v1/traces"\n', encoding="utf-8")
    assert tether("config", "check")[0] == 0  # installed here (the test extra): it loads
    monkeypatch.setitem(sys.modules, "opentelemetry.exporter.otlp.proto.http.trace_exporter", None)
    code, out, said = tether("config", "check")
    assert code == 2 and "ok" not in out
    assert 'OpenTelemetry is not installed: pip install "tether[otel]"' in said
    assert tether("run", "--model", "scripted/hello", "--no-memory", "hi")[0] == 2  # as a run says


def test_a_mistyped_chat_command_is_told_the_nearest_one(tether: Tether, monkeypatch: pytest.MonkeyPatch) -> None:
    """In `tether chat`, `/sesion` got `not a command (/help lists them)`; the command line's own
    typos are told the nearest choice (`tether rnu`: did you mean 'run'?), and now so are the chat's."""
    import io

    monkeypatch.setattr("sys.stdin", io.StringIO("/sesion\n/tmp\n"))
    code, _, said = tether("chat", "--model", "scripted/hello", "--no-memory")
    assert code == 0, said
    assert "/sesion is not a command (did you mean /session? /help lists them)" in said
    assert "/tmp is not a command (/help lists them); to send a message that starts with /, write //tmp" in said


def test_kb_takes_the_base_by_the_name_run_gives_it_and_an_empty_query_says_what_to_do(
    tether: Tether, tmp_path: Path
) -> None:
    # `tether run --kb manuals` names a base; `tether kb search X --kb manuals` said only
    # "unrecognized arguments: --kb manuals", and an empty query "the query is empty".
    (tmp_path / "pump.md").write_text("The pump's seal is SK-4.\n")
    assert tether("kb", "--name", "manuals", "add", "--embedder", "none", "pump.md")[0] == 0
    for args in (("kb", "search", "seal", "--kb", "manuals"), ("kb", "--kb", "manuals", "search", "seal")):
        code, out, err = tether(*args)
        assert code == 0, err
        assert "SK-4" in out
    code, _, err = tether("kb", "--kb", "manuals", "search", " ")
    assert code == 2
    assert err.strip() == "tether: the query is empty: give the words to search for"
