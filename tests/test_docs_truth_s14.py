"""What docs/tools.md, docs/skills.md and docs/cli.md promise, checked against the program."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

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


def test_search_files_max_results_is_capped_at_1000(tmp_path: Path) -> None:
    (tmp_path / "many.txt").write_text("hit\n" * 1500)
    rows = call(search_files, tmp_path, pattern="hit", max_results=5000).splitlines()
    assert len(rows) == 1001
    assert rows[-1] == "[stopped at 1000 matches: narrow the pattern or the glob]"


def test_a_pattern_that_repeats_a_repetition_is_refused(tmp_path: Path) -> None:
    (tmp_path / "a.txt").write_text("aaaa\n")
    for pattern in ("(a+)+", r"(\w+\s?)*"):
        try:
            call(search_files, tmp_path, pattern=pattern)
        except ToolError as exc:
            assert "repeats a repetition" in str(exc)
        else:
            raise AssertionError(f"{pattern} was not refused")
