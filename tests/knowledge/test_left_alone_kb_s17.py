"""Session 17: what earlier sessions noticed in the knowledge base and left alone, confirmed from
outside (the command as a user types it, or the Python API) and fixed."""

from __future__ import annotations

import tracemalloc
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.cli import conftest as cli
from tests.cli.conftest import run_main
from tether.knowledge import Chunk, KnowledgeBase, chunk_text

quiet_env = cli.quiet_env


def test_a_query_that_starts_with_a_dash_is_told_to_go_after_double_dash(
    quiet_env: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Was: ``tether kb search -SK-77`` (an error code) failed with "the following arguments are
    required: QUERY", and nothing said that ``--`` lets such a query through."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "codes.md").write_text("# Codes\n\nError -SK-77 means the seal kit is worn.\n")
    code, _, err = run_main("kb", "add", "codes.md", "--embedder", "none", capsys=capsys)
    assert code == 0, err
    code, out, err = run_main("kb", "search", "-SK-77", capsys=capsys)
    assert code == 2 and out == ""
    assert "tether kb search -- -SK-77" in err
    code, out, err = run_main("kb", "search", "--", "-SK-77", capsys=capsys)
    assert code == 0 and out.startswith("1. codes.md:1-3"), err
    code, out, err = run_main("kb", "search", capsys=capsys)  # no query at all still says what to give
    assert code == 2 and "no query" in err


def _peak_allocated(call: Callable[[], object]) -> int:
    """The most bytes Python held at once during ``call`` beyond what it held before (tracemalloc
    counts allocations exactly: no clock, no resident-set noise)."""
    tracemalloc.start()
    try:
        call()
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


@pytest.mark.parametrize("markdown", [False, True])
def test_chunking_a_file_of_short_lines_holds_no_string_per_line_of_the_whole_file(markdown: bool) -> None:
    """Was: chunk_text split the whole text into a list of lines (and, in Markdown, two more lists
    of each line's heading path), and the title was looked for in ``text.splitlines()`` of the whole
    text: 20 MB of short lines took 570 MB to add. Now the lines are read a block at a time and let
    go behind the chunk being made: what is held beyond the chunks is a block, whatever the size."""
    text = "".join(f"{i % 100}\n" for i in range(150_000))  # 430 kB, 150,000 lines
    chunks: list[Chunk] = []
    peak = _peak_allocated(lambda: chunks.extend(chunk_text(text, markdown=markdown)))
    # The chunks are about the text's size (with their overlap) and a block's lines about 1.5 MB;
    # a list of every line alone was 9 MB (12.5 MB at its peak).
    assert peak < 6_000_000, peak
    assert chunks[0].start_line == 1 and chunks[-1].end_line == 150_000
    assert sum(c.end_line - c.start_line + 1 for c in chunks) >= 150_000  # every line is in a chunk
    kb = KnowledgeBase.open(":memory:")
    peak = _peak_allocated(lambda: kb.add_text("lines.txt", text))
    assert peak < 6_000_000, peak  # the title was looked for in all the lines, split
    assert [h.citation for h in kb.search("99", mode="keyword", k=1).hits]
