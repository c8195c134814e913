"""What docs/tools.md, docs/skills.md and docs/cli.md promise, checked against the program."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from tether.cancel import CancelSignal
from tether.tools.base import ToolContext, ToolError, validate_arguments
from tether.tools.files import list_files, read_file, search_files


def call(tool: Any, cwd: Path, **args: Any) -> str:
    ctx = ToolContext(cwd=cwd, signal=CancelSignal())
    return str(asyncio.run(tool.execute(validate_arguments(tool, json.dumps(args)), ctx)))


def test_search_files_says_when_it_searched_only_the_start_of_a_big_file(tmp_path: Path) -> None:
    # tools.md: search_files searches "contents of files". It reads the first 2,000,000 bytes of
    # each; a match past that was answered "no matches", as if the log did not hold it.
    (tmp_path / "big.log").write_text("ok line\n" * 300_000 + "worker 7 timeout\n")
    (tmp_path / "small.log").write_text("nothing here\n")
    answer = call(search_files, tmp_path, pattern="timeout")
    assert "searched only the first 2,000,000 bytes of big.log (2,400,017 bytes)" in answer
    assert "small.log" not in answer  # a file read whole is not named
    assert "grep" in answer  # and it says how to search the rest
    # a file under the cap is searched whole, with nothing added
    assert call(search_files, tmp_path, pattern="nothing", glob="*.log").startswith(
        "small.log:1: nothing here\n(searched only"
    )
    assert call(search_files, tmp_path, pattern="nothing", glob="small.*") == "small.log:1: nothing here"


def test_read_file_of_one_line_over_the_cap_says_truly_how_to_read_its_rest(tmp_path: Path) -> None:
    # tools.md: "a 100,000-character cap with a note saying how to read further". For a line longer
    # than the cap (minified JavaScript, one-line JSON) the note said "call read_file with
    # start_line=1", which returned the same cut again: a model following it looped.
    (tmp_path / "app.min.js").write_text("a" * 150_000 + "\nsecond\n")
    answer = call(read_file, tmp_path, path="app.min.js")
    note = answer.rsplit("\n", 1)[1]
    assert "start_line=1 " not in note and "start_line=1]" not in note
    assert "line 1 alone is longer" in note
    assert "sed -n '1p' app.min.js | cut -c 100001-" in note
    assert "start_line=2" in note  # the lines after it are still reachable
    assert call(read_file, tmp_path, path="app.min.js", start_line=2) == "second"
    # a file that is that one line: no start_line past its end is offered
    (tmp_path / "one.json").write_text("[" + "1," * 60_000 + "1]")
    assert "start_line" not in call(read_file, tmp_path, path="one.json").rsplit("\n", 1)[1]
    # a cut inside a later line still points at that line, which is progress
    (tmp_path / "two.txt").write_text("short\n" + "b" * 150_000 + "\n")
    assert call(read_file, tmp_path, path="two.txt").endswith("call read_file with start_line=2 to read further]")


def test_list_files_stops_at_1000_entries_and_says_so(tmp_path: Path) -> None:
    for i in range(1005):
        (tmp_path / f"f{i:04}.txt").write_text("x")
    rows = call(list_files, tmp_path).splitlines()
    assert len(rows) == 1001
    assert rows[-1] == "(stopped at 1000 entries: narrow the pattern to see more)"
    for i in range(1000, 1005):  # exactly 1000: all listed, none said to be left out
        (tmp_path / f"f{i:04}.txt").unlink()
    rows = call(list_files, tmp_path).splitlines()
    assert len(rows) == 1000 and rows[-1] == "f0999.txt\t1 bytes"


def test_search_files_max_results_is_capped_at_1000(tmp_path: Path) -> None:
    (tmp_path / "many.txt").write_text("hit\n" * 1500)
    rows = call(search_files, tmp_path, pattern="hit", max_results=5000).splitlines()
    assert len(rows) == 1001
    assert rows[-1] == "[stopped at 1000 matches: narrow the pattern or the glob]"
    (tmp_path / "many.txt").write_text("hit\n" * 5)  # exactly max_results: all shown, none said left out
    assert call(search_files, tmp_path, pattern="hit", max_results=5).splitlines()[-1] == "many.txt:5: hit"
    assert call(search_files, tmp_path, pattern="hit", max_results=4).splitlines()[-1].startswith("[stopped at 4")


def test_a_pattern_that_repeats_a_repetition_is_refused(tmp_path: Path) -> None:
    (tmp_path / "a.txt").write_text("aaaa\n")
    for pattern in ("(a+)+", r"(\w+\s?)*"):
        try:
            call(search_files, tmp_path, pattern=pattern)
        except ToolError as exc:
            assert "repeats a repetition" in str(exc)
        else:
            raise AssertionError(f"{pattern} was not refused")


def test_a_call_to_an_unknown_tool_is_counted_under_its_first_64_characters_and_length() -> None:
    from tether import Agent, run_sync
    from tether.messages import AssistantMessage, ToolCallPart
    from tether.testing import FunctionModel

    def model(messages: list[Any], request: Any) -> Any:
        if len(messages) == 1:
            return AssistantMessage(content=(ToolCallPart(id="a", name="x" * 100, arguments="{}"),))
        return "done"

    result = run_sync(Agent(FunctionModel(model), tools=[]), "go")
    assert result.tool_stats == {
        "x" * 64 + "\u2026 (100 characters)": {"calls": 1, "errors": 1, "cached": 0, "total_ms": 0.0}
    }


def _skill(root: Path, folder: str, name: str, description: str) -> None:
    (root / folder).mkdir(parents=True)
    (root / folder / "SKILL.md").write_text(f"---\nname: {name}\ndescription: {description}\n---\nBody\n")


def test_skill_names_and_descriptions_hold_to_the_documented_limits(tmp_path: Path) -> None:
    from tether.skills import Skills

    root = tmp_path / "home" / "skills"
    _skill(root, "a", "a" * 64, "ok")
    _skill(root, "b", "b" * 65, "ok")
    _skill(root, "c", "café", "ok")
    _skill(root, "d", "d", "x" * 1024)
    _skill(root, "e", "e", "x" * 1025)
    _skill(root, "f1", "dup", "one")
    _skill(root, "f2", "dup", "two")
    found = Skills.open(tmp_path / "home", cwd=tmp_path).found
    assert sorted(found.skills) == ["a" * 64, "d"]
    problems = "\n".join(str(p) for p in found.problems)
    assert "the description is 1025 characters long; the limit is 1024" in problems
    assert "'café' is not a skill name" in problems
    assert "2 skills are named 'dup' (f1, f2)" in problems


def _tether(capsys: pytest.CaptureFixture[str], *args: str) -> str:
    """``tether ARGS`` in this process (exit 0 expected): its stdout."""
    from tether.cli import main

    assert main(list(args)) == 0
    return capsys.readouterr().out


def test_skills_list_cuts_a_description_to_100_characters_and_json_gives_it_whole(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    description = ("Write the one-line release note for the next version. " * 3).strip()
    _skill(tmp_path / "home" / "skills", "notes", "notes", description)
    monkeypatch.setenv("TETHER_HOME", str(tmp_path / "home"))
    line = _tether(capsys, "skills", "list", "--cwd", str(tmp_path)).splitlines()[0]
    assert line == "notes  " + description[:99] + "\u2026"
    listed = json.loads(_tether(capsys, "skills", "list", "--json", "--cwd", str(tmp_path)))
    assert listed[0]["description"] == description


def test_a_tool_s_returned_value_is_given_as_json_whatever_its_keys(tmp_path: Path) -> None:
    # tools.md: "A returned value other than a string or a ToolResult is given as JSON". A dict
    # keyed by dates ({day: count}) or tuples made json.dumps raise after the tool had done its
    # work: the model read "the tool failed ... fix the arguments", and the call counted as an error.
    import datetime

    from tether import tool

    @tool(read_only=True)
    def per_day() -> dict[Any, int]:
        """Orders per day."""
        return {datetime.date(2026, 12, 7): 3, ("eu", "west"): 1, 5: 2}

    @tool(read_only=True)
    def tags() -> set[str]:
        """The tags."""
        return {"urgent"}

    assert json.loads(call(per_day, tmp_path)) == {"2026-12-07": 3, "eu,west": 1, "5": 2}
    assert json.loads(call(tags, tmp_path)) == ["urgent"]  # a list, not the text "{'urgent'}"


def test_a_glob_into_a_folder_the_listing_passes_over_says_so_instead_of_no_files(tmp_path: Path) -> None:
    # tools.md: list_files and search_files skip .git, node_modules, .venv... A glob naming one
    # (node_modules/**/*) was answered "no files match", as if the folder were empty.
    (tmp_path / "node_modules" / "left-pad").mkdir(parents=True)
    (tmp_path / "node_modules" / "left-pad" / "index.js").write_text("module.exports = pad\n")
    listed = call(list_files, tmp_path, pattern="node_modules/**/*")
    assert listed.startswith("no files match 'node_modules/**/*' (list_files and search_files never look inside")
    assert "read_file reads a file there by its path" in listed
    found = call(search_files, tmp_path, pattern="pad", glob="node_modules/**/*.js")
    assert found.startswith("no matches for 'pad' (list_files and search_files never look inside")
    assert call(read_file, tmp_path, path="node_modules/left-pad/index.js") == "module.exports = pad"
    # a glob that names no such folder is answered as before
    assert call(list_files, tmp_path, pattern="src/**/*") == "no files match 'src/**/*'"


def test_skills_show_says_when_it_lists_only_the_first_200_files(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # skills.md: `tether skills show NAME` prints the skill's files (read a project's skills as you
    # would its build scripts). Past 200 it stopped without a word, where load_skill tells the model.
    _skill(tmp_path / "home" / "skills", "many", "many", "A skill with many files.")
    for i in range(205):
        (tmp_path / "home" / "skills" / "many" / f"f{i:03}.md").write_text("x")
    monkeypatch.setenv("TETHER_HOME", str(tmp_path / "home"))
    shown = _tether(capsys, "skills", "show", "many", "--cwd", str(tmp_path)).splitlines()
    assert sum(1 for line in shown if line.startswith("  f")) == 200
    assert shown[-1] == "  (only the first 200 files are listed)"


def test_the_json_and_models_output_hold_what_cli_md_lists(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    for name in ("LLM_BASE_URL", "OPENAI_BASE_URL", "OPENAI_API_KEY", "ANTHROPIC_API_KEY", "ANTHROPIC_BASE_URL"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("TETHER_HOME", str(tmp_path / "home"))
    result = json.loads(_tether(capsys, "run", "--model", "scripted/hello", "--cwd", str(tmp_path), "--json", "hi"))
    assert list(result) == [
        "run_id", "status", "interruption", "reason", "agent", "misconfiguration", "output", "text", "empty_answer",
        "turns", "usage", "cost_usd", "cost_unknown_usd", "tokens_unknown", "unpriced_models", "tool_stats", "typed",
    ]  # fmt: skip
    assert result["misconfiguration"] is None
    rows = {row["model"]: row["status"] for row in json.loads(_tether(capsys, "models", "--json"))}
    assert rows["scripted/plan"] == "ok"
    assert rows["openai/gpt-4.1-mini"].startswith("not configured: OPENAI_API_KEY is not set")


def test_runs_takes_limit_or_all_not_both(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # cli.md: `tether runs [list] [--limit N | --all]`. Both together listed every run, the limit
    # dropped without a word.
    from tether.cli import main

    monkeypatch.setenv("TETHER_HOME", str(tmp_path / "home"))
    with pytest.raises(SystemExit) as stopped:
        main(["runs", "--all", "--limit", "2"])
    assert stopped.value.code == 2
    assert "argument --limit: not allowed with argument --all" in capsys.readouterr().err


def test_a_skill_of_exactly_200_files_is_not_said_to_have_more(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # "only the first 200 files are listed" was said of a skill with 200 files, all listed.
    from tether.skills import Skills
    from tether.skills.tools import render_skill

    _skill(tmp_path / "home" / "skills", "full", "full", "A skill with 200 files.")
    for i in range(200):
        (tmp_path / "home" / "skills" / "full" / f"f{i:03}.md").write_text("x")
    monkeypatch.setenv("TETHER_HOME", str(tmp_path / "home"))
    shown = _tether(capsys, "skills", "show", "full", "--cwd", str(tmp_path)).splitlines()
    assert shown[-1] == "  f199.md  (1 bytes)"
    skill = Skills.open(tmp_path / "home", cwd=tmp_path).found.skills["full"]
    assert "only the first" not in render_skill(skill)
    (tmp_path / "home" / "skills" / "full" / "f200.md").write_text("x")
    assert render_skill(skill).endswith("- f199.md (1 bytes)\n(only the first 200 files are listed)")
