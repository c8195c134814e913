"""Session 17: what earlier sessions noticed in the knowledge base and left alone, confirmed from
outside (the command as a user types it, or the Python API) and fixed."""

from __future__ import annotations

import sqlite3
import tracemalloc
from collections.abc import Callable
from pathlib import Path

import pytest

import tether.knowledge.store as kb_store
from tests.cli import conftest as cli
from tests.cli.conftest import run_main, tether
from tether.knowledge import Chunk, KnowledgeBase, SqliteKnowledgeStore, chunk_text

env = cli.env
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


THAI = "ผมชอบกินข้าวผัดกับไก่ทุกวัน\nเครื่องสูบน้ำต้องเปลี่ยนซีลทุกปี\n"  # no space between the words


def test_a_thai_word_inside_a_sentence_is_found_as_a_chinese_one_is(
    quiet_env: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Was: a run of Thai (as of Lao, Burmese, Khmer: written without spaces between words) was one
    word to the index, so ``kb search ข้าวผัด`` found nothing in a sentence that holds it, where a
    Chinese word inside a sentence was found (its runs are indexed as pairs of characters)."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "thai.txt").write_text(THAI)
    (tmp_path / "zh.txt").write_text("这个阀门的密封圈需要每年更换。\n")
    (tmp_path / "en.txt").write_text("The pump seal is replaced every year.\n")
    code, _, err = run_main("kb", "add", ".", "--embedder", "none", capsys=capsys)
    assert code == 0, err
    for word, where in (("ข้าวผัด", "thai.txt:1-2"), ("ซีล", "thai.txt:1-2"), ("密封圈", "zh.txt:1-1")):
        code, out, err = run_main("kb", "search", word, "--mode", "keyword", capsys=capsys)
        assert code == 0 and out.startswith(f"1. {where}"), (word, out, err)
    code, out, _ = run_main("kb", "search", "pump seal", "--mode", "keyword", capsys=capsys)
    assert [line.split()[1] for line in out.splitlines() if line[:1].isdigit()] == ["en.txt:1-1"]
    kb = KnowledgeBase.open(":memory:")
    kb.add_text("khmer.txt", "ខ្ញុំស្រឡាញ់ម្ហូបខ្មែរ\n")
    assert [h.citation for h in kb.search("ស្រឡាញ់", mode="keyword").hits] == ["khmer.txt:1-1"]


def _as_an_older_tether_left_it(db_path: Path) -> None:
    """The base's full-text rows as a tether before FTS_WORDS 4 wrote them: a Thai run one word."""
    db = sqlite3.connect(db_path)
    with db:
        rows = db.execute("SELECT id, text FROM chunks").fetchall()
        db.execute("DELETE FROM chunks_fts")
        db.executemany("INSERT INTO chunks_fts (rowid, text) VALUES (?, ?)", rows)
        db.execute("UPDATE meta SET value = '3' WHERE key = 'fts_words'")
    db.close()


def test_the_one_time_index_rebuild_says_so_on_stderr_and_reads_the_chunks_in_batches(
    env: dict[str, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Was: a base made by an earlier tether had its full-text index made again when first opened,
    without a word (a large base: a search that stood still for minutes), reading every chunk's text
    at once and then each one's words beside it (the text held twice over)."""
    home = Path(env["TETHER_HOME"])
    (home / "kb").mkdir(parents=True)
    kb = KnowledgeBase.open(home / "kb" / "default.db")
    kb.add_text("thai.txt", THAI)
    kb.add_text("notes.txt", "".join(f"note {i}: the pump seal number {i} is checked.\n" for i in range(3000)))
    kb.close()
    _as_an_older_tether_left_it(home / "kb" / "default.db")
    out = tether("kb", "search", "ข้าวผัด", "--mode", "keyword", env=env, cwd=tmp_path)
    assert out.returncode == 0 and out.stdout.startswith("1. thai.txt:1-2"), out
    said = [line for line in out.stderr.splitlines() if "made again" in line]
    assert len(said) == 1 and "once" in said[0] and "chunks" in said[0], out.stderr
    again = tether("kb", "search", "ข้าวผัด", "--mode", "keyword", env=env, cwd=tmp_path)
    assert again.stdout == out.stdout and "made again" not in again.stderr
    # In batches: what the rebuild holds at once does not grow with the base.
    _as_an_older_tether_left_it(home / "kb" / "default.db")
    monkeypatch.setattr(kb_store, "REINDEX_BATCH", 50)
    db = sqlite3.connect(home / "kb" / "default.db")
    text = int(db.execute("SELECT SUM(LENGTH(text)) FROM chunks").fetchone()[0])  # about 140 kB
    db.close()
    peak = _peak_allocated(lambda: SqliteKnowledgeStore(home / "kb" / "default.db").close())
    assert peak < text / 2, (peak, text)  # every chunk's text at once (and a copy of its words) was more
    reopened = KnowledgeBase.open(home / "kb" / "default.db")
    assert [h.citation for h in reopened.search("ข้าวผัด", mode="keyword").hits] == ["thai.txt:1-2"]
    assert reopened.search("pump seal number 2999", mode="keyword").hits
    reopened.close()


def _page(items: int) -> str:
    """A page whose head (a style, a script, a comment) takes many lines the Markdown has not, and
    whose paragraphs each spread over lines of their own."""
    head = "<!DOCTYPE html>\n<html>\n<head>\n<title>Pump manual</title>\n<style>\n" + "p { margin: 0; }\n" * 40
    head += "</style>\n<script>\nif (a < b) { x = '<p>'; }\n" + "var y = 1;\n" * 30 + "</script>\n</head>\n<body>\n"
    body = "".join(
        f'<div class="step">\n  <p>\n    Step {n}: turn\n    the valve marker{n}x\n    <a href="#s{n}">there</a>.\n  </p>\n</div>\n'
        for n in range(items)
    )
    return head + "<!-- a comment\nof two lines -->\n" + body + "</body>\n</html>\n"


def test_a_citation_of_an_html_file_names_the_lines_of_the_file_itself(
    quiet_env: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Was: the chunks of an HTML file cited the lines of its Markdown conversion: ``page.html:40-52``
    opened in an editor was the page's style sheet, the text cited far below it."""
    monkeypatch.chdir(tmp_path)
    page = _page(60)
    (tmp_path / "page.html").write_text(page)
    file_lines = page.split("\n")
    code, _, err = run_main("kb", "add", "page.html", "--embedder", "none", capsys=capsys)
    assert code == 0, err
    for n in (0, 7, 33, 59):
        code, out, err = run_main("kb", "search", f"marker{n}x", "--mode", "keyword", "-k", "1", capsys=capsys)
        assert code == 0, err
        start, end = map(int, out.split()[1].removeprefix("page.html:").split("-"))
        cited = "\n".join(file_lines[start - 1 : end])
        assert f"marker{n}x" in cited and f"Step {n}:" in cited, (n, start, end)
        if n >= 10:  # the first chunk (steps 0 to 8) holds the title too, line 4, above the style
            assert "<style>" not in cited and "var y" not in cited
    # The text is the same Markdown as before: only the lines it cites changed.
    kb = KnowledgeBase.open(":memory:")
    from tether.knowledge.readers import html_text
    from tether.tools.web import html_to_markdown

    assert html_text(page)[0] == html_to_markdown(page)
    kb.close()


def test_an_html_file_added_by_an_earlier_tether_is_read_again_once_for_its_lines(
    quiet_env: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Was (with the fix above): an HTML file added before it, unchanged, was never read again, so
    its chunks went on citing the lines of its Markdown."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "page.html").write_text(_page(40))
    code, _, err = run_main("kb", "add", "page.html", "--embedder", "none", capsys=capsys)
    assert code == 0, err
    db = sqlite3.connect(quiet_env / "kb" / "default.db")
    with db:  # as an earlier tether recorded it: its version without the mark of cited file lines
        db.execute("UPDATE documents SET hash = replace(hash, 'lines.', '')")
        db.execute("UPDATE chunks SET start_line = 1, end_line = 9")
    db.close()
    code, out, _ = run_main("kb", "add", "page.html", capsys=capsys)
    assert out.splitlines()[0] == "page.html: 0 added, 1 updated, 0 unchanged"
    code, out, _ = run_main("kb", "add", "page.html", capsys=capsys)
    assert out.splitlines()[0] == "page.html: 0 added, 0 updated, 1 unchanged"
    code, out, _ = run_main("kb", "search", "marker30x", "--mode", "keyword", "-k", "1", capsys=capsys)
    start = int(out.split()[1].removeprefix("page.html:").split("-")[0])
    assert start > 80, out
