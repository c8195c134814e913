"""Session 18: the knowledge base's exact search in scripts written without spaces, the one-time
reindex on Postgres, the size limit of a file added, and the citations of a page of one line."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.cli import conftest as cli
from tests.cli.conftest import run_main
from tests.knowledge.conftest import Opener

quiet_env = cli.quiet_env

THAI = "ผมชอบกินข้าวผัดกับไก่ทุกวัน\nเครื่องสูบน้ำต้องเปลี่ยนซีลทุกปี\n"  # no space between the words


def test_exact_search_finds_a_thai_word_inside_a_sentence_as_it_finds_a_chinese_one(
    quiet_env: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Was: ``tether kb search ข้าวผัด --mode exact`` said "no chunk contains 'ข้าวผัด' exactly" of a
    Thai sentence that holds it (as of Lao, Burmese and Khmer), where keyword and hybrid search found
    it and exact search found a Chinese word inside a Chinese sentence: the letters of those scripts
    around the word counted as part of a longer word, where Chinese characters are its edges. A part
    number written against Thai letters (รุ่นFVAM-2050-Bใช้) was not found exactly either."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "thai.txt").write_text(THAI)
    (tmp_path / "zh.txt").write_text("这个阀门的密封圈需要每年更换。\n")
    (tmp_path / "khmer.txt").write_text("ខ្ញុំស្រឡាញ់ម្ហូបខ្មែរ\n")
    (tmp_path / "burmese.txt").write_text("ကျွန်တော်ထမင်းစားပြီးပြီ\n")
    (tmp_path / "lao.txt").write_text("ຂ້ອຍມັກກິນເຂົ້າໜຽວທຸກມື້\n")
    (tmp_path / "part.txt").write_text("รุ่นFVAM-2050-Bใช้ซีลยาง\nรุ่นFVAM-2050-BXไม่ใช้\n")
    code, _, err = run_main("kb", "add", ".", "--embedder", "none", capsys=capsys)
    assert code == 0, err
    for word, where in (
        ("密封圈", ["zh.txt:1-1"]),
        ("ข้าวผัด", ["thai.txt:1-2"]),
        ("ស្រឡាញ់", ["khmer.txt:1-1"]),
        ("ထမင်း", ["burmese.txt:1-1"]),
        ("ເຂົ້າໜຽວ", ["lao.txt:1-1"]),
        ("FVAM-2050-B", ["part.txt:1-2"]),
    ):
        code, out, err = run_main("kb", "search", word, "--mode", "exact", capsys=capsys)
        found = [line.split()[1] for line in out.splitlines() if line[:1].isdigit()]
        assert code == 0 and found == where, (word, out, err)
    # Still exact: a part of a letter (ผ without the vowel sign ั it carries in ผัด) is not the word.
    code, out, err = run_main("kb", "search", "ข้าวผ", "--mode", "exact", capsys=capsys)
    assert code == 0 and out == "" and "no chunk contains" in err


def test_a_postgres_base_indexed_before_thai_was_split_is_indexed_again_once_and_says_so(
    quiet_env: Path,
    pg_url: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Was: a Postgres base whose documents were added before a run of Thai (Lao, Burmese, Khmer)
    was split into pairs of letters kept those documents' earlier words for good: ``kb search
    ข้าวผัด`` never found the sentence that holds it until it was added again into a new base,
    where a SQLite base was indexed again once, saying so on stderr. Now a Postgres base is too,
    once (its words, postings and counts as a base made now has them), and says so in one line."""
    from urllib.parse import urlsplit

    import psycopg

    import tether.knowledge.store as kb_store
    from tether.knowledge import KnowledgeBase
    from tether.postgres.db import database
    from tether.postgres.knowledge import PgKnowledgeStore

    from .conftest import check_index

    monkeypatch.setenv("TETHER_DATABASE_URL", pg_url)
    monkeypatch.chdir(tmp_path)
    (tmp_path / "thai.txt").write_text(THAI)
    (tmp_path / "notes.txt").write_text("".join(f"note {i}: the pump seal {i} is checked.\n" for i in range(300)))
    with monkeypatch.context() as earlier:  # the words an earlier tether indexed: a Thai run one word
        earlier.setattr(kb_store, "_letter_pairs", lambda run: f" {run.group()} ")
        for name in ("default", "other"):
            code, _, err = run_main("kb", "--name", name, "add", ".", "--embedder", "none", capsys=capsys)
            assert code == 0, err
    db = database(pg_url)
    db.execute("DELETE FROM kb_meta WHERE key = 'fts_words'")  # such a base recorded no version of its words
    assert not db.execute("SELECT 1 FROM kb_postings WHERE term = 'ข้าผั'")  # what the search asks for
    # Not waited for: while another process writes to the base, an open leaves it to a later one.
    with psycopg.connect(pg_url) as writer, writer.transaction():
        writer.execute("SELECT 1 FROM kb_bases WHERE name = 'default' FOR UPDATE")
        PgKnowledgeStore(db, "default")
    assert not db.execute("SELECT 1 FROM kb_meta WHERE key = 'fts_words'")
    out = cli.tether("kb", "search", "ข้าวผัด", "--mode", "keyword", env=dict(cli.os.environ), cwd=tmp_path)
    assert out.returncode == 0 and out.stdout.startswith("1. thai.txt:1-2"), out
    said = [line for line in out.stderr.splitlines() if "made again" in line]
    assert len(said) == 1 and "once" in said[0] and "'default'" in said[0], out.stderr
    password = urlsplit(pg_url).password
    assert not password or password not in out.stderr
    again = cli.tether("kb", "search", "ข้าวผัด", "--mode", "exact", env=dict(cli.os.environ), cwd=tmp_path)
    assert again.stdout.startswith("1. thai.txt:1-2") and "made again" not in again.stderr, again
    # The counts BM25 reads are those of the chunks' new words; the other base waits for its own open.
    kb = KnowledgeBase(PgKnowledgeStore(db, "default"))
    check_index(kb)
    assert [h.citation for h in kb.search("pump seal 299", mode="keyword", k=1).hits] == ["notes.txt:296-300"]
    other = KnowledgeBase(PgKnowledgeStore(db, "other"))
    check_index(other)
    assert [h.citation for h in other.search("ข้าวผัด", mode="keyword").hits] == ["thai.txt:1-2"]


def test_a_file_too_large_to_add_says_which_setting_raises_the_limit_and_that_setting_does(
    quiet_env: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Was: a file over 64 MB was skipped "too large to read (70.0 MB; a file other than a PDF is
    read up to 64 MB)", and nothing could raise the limit: a person with a large log or data file
    to search had no way to add it. Now ``[kb] max_file_bytes`` sets it (a PDF's page content
    too), and the skip names it."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "server.log").write_text("GET /pump/P-100 200\n" * 20_000)  # 400 KB
    quiet_env.mkdir(parents=True, exist_ok=True)
    (quiet_env / "config.toml").write_text("[kb]\nmax_file_bytes = 200_000\n")
    code, _, err = run_main("kb", "add", "server.log", "--embedder", "none", capsys=capsys)
    assert code == 1  # nothing was added
    assert "read up to 0.2 MB: [kb] max_file_bytes raises it" in err, err
    code, out, _ = run_main("kb", "search", "P-100", "--mode", "exact", capsys=capsys)
    assert out == ""
    (quiet_env / "config.toml").write_text("[kb]\nmax_file_bytes = 1_000_000\n")
    code, _, err = run_main("kb", "add", "server.log", "--embedder", "none", capsys=capsys)
    assert code == 0 and "too large" not in err, err
    code, out, _ = run_main("kb", "search", "P-100", "--mode", "exact", "-k", "1", capsys=capsys)
    assert out.startswith("1. server.log:1-"), out
    (quiet_env / "config.toml").write_text("[kb]\nmax_file_bytes = 0\n")
    code, _, err = run_main("kb", "add", "server.log", "--embedder", "none", capsys=capsys)
    assert code == 2 and "max_file_bytes" in err, err


def _minified(items: int) -> str:
    """A page as a minifier writes it: all on one line."""
    head = "<!DOCTYPE html><html><head><title>Pump manual</title><style>" + "p{margin:0}" * 40 + "</style></head>"
    body = "".join(
        f'<div class="step"><p>Step {n}: turn the valve marker{n}x <a href="#s{n}">there</a>.</p></div>'
        for n in range(items)
    )
    return head + "<body>" + body + "</body></html>"


def test_a_citation_in_a_page_of_one_line_names_the_line_and_column_its_text_starts_at(
    quiet_env: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Was: the chunks of a minified HTML page (one line) cited the lines of its Markdown
    conversion, page.html:59-77 for a file that has one line, and nothing said so: the citation led
    nowhere. Now each cites the line and the column its text starts at (page.html:1:3549), as
    compilers write a place and editors open one; each is still a result of its own. An HTML file
    an earlier tether added (its Markdown's lines) is read again once."""
    import sqlite3

    monkeypatch.chdir(tmp_path)
    page = _minified(60)
    assert "\n" not in page
    (tmp_path / "page.html").write_text(page)
    code, _, err = run_main("kb", "add", "page.html", "--embedder", "none", capsys=capsys)
    assert code == 0, err
    for n in (0, 33, 59):
        code, out, err = run_main("kb", "search", f"marker{n}x", "--mode", "keyword", "-k", "1", capsys=capsys)
        citation = out.split()[1]
        name, line, column = citation.split(":")
        assert (name, line) == ("page.html", "1"), out
        shown = out.splitlines()[1].strip()  # the chunk's first line of text, as the search shows it
        at = page[int(column) - 1 :]
        assert at.startswith(shown.split("[")[0].removeprefix("# ")), (citation, shown, at[:80])
        cited = at[: at.index("</p>", at.index(f"marker{n}x"))]  # the chunk's text lies from there on
        assert f"marker{n}x" in cited and cited.count("</p>") < 12, (n, citation)
    code, out, _ = run_main("kb", "search", "turn the valve", "--mode", "keyword", "-k", "3", capsys=capsys)
    places = [line.split()[1] for line in out.splitlines() if line[:1].isdigit()]
    assert len(set(places)) == 3, out  # one result per place, and the page's chunks are places apart
    # Added by the tether before this one, it cited its Markdown's lines: read again, once.
    db = sqlite3.connect(quiet_env / "kb" / "default.db")
    with db:
        db.execute("UPDATE documents SET hash = replace(hash, 'lines.columns.', 'lines.')")
        db.execute("UPDATE chunks SET end_line = start_line + 9, start_line = id")
    db.close()
    code, out, _ = run_main("kb", "add", "page.html", capsys=capsys)
    assert out.splitlines()[0] == "page.html: 0 added, 1 updated, 0 unchanged"
    code, out, _ = run_main("kb", "add", "page.html", capsys=capsys)
    assert out.splitlines()[0] == "page.html: 0 added, 0 updated, 1 unchanged"
    code, out, _ = run_main("kb", "search", "marker30x", "--mode", "keyword", "-k", "1", capsys=capsys)
    assert out.split()[1].startswith("page.html:1:"), out


def test_both_stores_keep_a_minified_pages_places(open_kb: Opener, tmp_path: Path) -> None:
    """Was: as above, on either store. The column is kept as SQLite keeps it, in Postgres too."""
    (tmp_path / "page.html").write_text(_minified(30))
    kb = open_kb()
    kb.add_path(tmp_path / "page.html")
    hits = kb.search("turn the valve marker20x", mode="keyword", k=3).hits
    assert len(hits) == 3 and all(h.citation.startswith(f"{tmp_path / 'page.html'}:1:") for h in hits)
    assert hits[0].chunk.column > 1 and hits[0].chunk.end_line == 1
    for hit in hits:  # the file from the column on reads as the chunk does
        assert _minified(30)[hit.chunk.column - 1 :].startswith(
            hit.chunk.text.removeprefix("# ").split("\n")[0].split("[")[0]
        ), hit


_SEARCH_IN_A_FRESH_PROCESS = """
import re, sys
from tether.knowledge import KnowledgeBase
kb = KnowledgeBase.open(sys.argv[1])
print(kb.search("timeout", mode="hybrid").hits[0].citation)
print(kb.search("pump seal", mode="keyword").hits[0].citation)
compiled = [str(key[1]) for key in re._cache]
print(sum(1 for p in compiled if "\\u4e00" in p or "\\u0e00" in p or "\\U0010fffd" in p))
"""


def test_a_search_in_words_of_ascii_compiles_no_pattern_it_does_not_use(tmp_path: Path) -> None:
    """Was: every process that searched a base (``tether kb search``, run on each query) compiled,
    as it imported the knowledge base, the patterns of runs of Chinese and of Thai (2 ms), of an
    identifier with those scripts as its edges (3 ms) and of the line marks an HTML file is read
    with (0.5 ms), for a query in plain words that uses none of them: about 6 ms of a 230 ms
    search. They are compiled when text first needs them."""
    import subprocess
    import sys

    kb_path = tmp_path / "kb.db"
    from tether.knowledge import KnowledgeBase

    kb = KnowledgeBase.open(kb_path)
    kb.add_text("notes.txt", "A request that takes too long ends with a timeout.\nThe pump seal is checked.\n")
    kb.close()
    out = subprocess.run(
        [sys.executable, "-c", _SEARCH_IN_A_FRESH_PROCESS, str(kb_path)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines() == ["notes.txt:1-2", "notes.txt:1-2", "0"], out.stdout
    # The same process, given Thai and a part number, compiles what they need and finds them.
    thai = KnowledgeBase.open(":memory:")
    thai.add_text("thai.txt", THAI + "รุ่นFVAM-2050-Bใช้\n")
    assert [h.citation for h in thai.search("ข้าวผัด", mode="exact").hits] == ["thai.txt:1-3"]
    assert [h.citation for h in thai.search("FVAM-2050-B").hits] == ["thai.txt:1-3"]


def test_a_part_number_written_against_thai_letters_joins_the_graph(open_kb: Opener) -> None:
    """Was: a part number written against Thai letters (รุ่นFVAM-2050-Bใช้ซีลSK-77: no space between
    the words) named no entity, where one written against Chinese characters did, so entity_chunks
    and the graph modes never reached a Thai document (nor Lao, Burmese or Khmer)."""
    kb = open_kb()
    kb.add_text("th.md", "รุ่นFVAM-2050-Bใช้ซีลSK-77ทุกปี\n")
    kb.add_text("zh.md", "型号FVAM-2050-B采用SK-77密封\n")
    kb.add_text("km.md", "ម៉ូដែលFVAM-2050-Bប្រើSK-77\n")
    for name in ("FVAM-2050-B", "SK-77"):
        assert [h.citation for h in kb.entity_chunks(name).hits] == ["th.md:1-1", "zh.md:1-1", "km.md:1-1"], name


def test_the_agent_is_told_to_cite_a_minified_pages_result_as_its_label_has_it(tmp_path: Path) -> None:
    """Was: the agent's search answer labelled a minified page's result ``[1] page.html:1:3549``
    and ended "Cite what you use as document:start-end." (its system prompt said the same), a
    form that label does not have: the model was asked to rewrite the place as a range of lines.
    It is told to cite as the label does."""
    from tether.knowledge import KnowledgeBase, KnowledgeTools

    (tmp_path / "page.html").write_text(_minified(30))
    kb = KnowledgeBase.open(":memory:", name="pages")
    kb.add_path(tmp_path / "page.html")
    tools = KnowledgeTools(kb)
    search = next(t for t in tools.tools() if t.name == "search_kb")
    answer = search.run({"query": "turn the valve marker20x"})  # type: ignore[attr-defined]
    label = re.search(r"^\[1\] (\S+)", answer, re.MULTILINE)
    assert label is not None and re.fullmatch(r".*page\.html:1:\d+", label.group(1)), answer[:200]
    for told in (answer.rstrip().splitlines()[-1], tools.prompt_block()):
        assert "label does" in told, told
