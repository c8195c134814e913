"""``tether kb`` attacked a third time: a base file damaged on disk (a page overwritten, the file
cut short, its header gone), a -k larger than SQLite's integers, documents whose lines make the
chunker's and the graph extractor's regular expressions backtrack for hours, and a filter key a
model may send that is not a JSON path. (Round 2, test_attack_kb_round2.py, took kill -9, races,
hostile folders and hostile queries.)

What could hang runs in a subprocess under a timeout that only guards the suite: nothing here
asserts how long anything took."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.cli import conftest as cli
from tests.cli.conftest import run_main, tether

from .conftest import Opener

env = cli.env
quiet_env = cli.quiet_env


def _docs(root: Path, files: int = 20, lines: int = 120) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    for i in range(files):
        body = "\n".join(f"line {j} of manual {i}: part PN-{i}-{j} uses seal SK-{j}" for j in range(lines))
        (root / f"d{i}.md").write_text(f"# Manual {i}\n\n{body}\n")
    return root


# -- a damaged base file -----------------------------------------------------------------------


@pytest.mark.parametrize("damage", ["pages overwritten", "cut short", "header overwritten"])
def test_a_damaged_base_is_one_clear_error_in_every_command_and_drop_still_removes_it(
    env: dict[str, str],
    quiet_env: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    damage: str,
) -> None:
    """A page overwritten (a disk error, a copy cut off) made every kb command a traceback,
    sqlite3.DatabaseError "database disk image is malformed": search, list, stats, add, bases,
    and even drop, the way out. Each now says the file is damaged, that the documents' own files
    are untouched, and how to start again; drop removes it, and the same add builds it anew."""
    monkeypatch.chdir(tmp_path)
    _docs(tmp_path / "docs")
    made = tether("kb", "add", "docs", "--embedder", "hashing/64", env=env, cwd=tmp_path)  # ended: no -wal left
    assert made.returncode == 0, made.stderr
    db = quiet_env / "kb" / "default.db"
    assert not Path(f"{db}-wal").exists()
    size = db.stat().st_size
    assert size > 40 * 4096
    with db.open("r+b") as f:
        if damage == "pages overwritten":  # every page but the first (the schema) and the last
            f.seek(2 * 4096)
            f.write(b"\xa5" * (size - 3 * 4096))
        elif damage == "cut short":
            f.truncate(size // 3)
        else:
            f.write(b"not a database, not at all" * 8)
    for args in (
        ("search", "seal"),
        ("search", "PN-3-7", "--mode", "exact"),
        ("search", "seal", "--mode", "keyword", "--json"),
        ("list",),
        ("stats",),
        ("add", "docs"),
        ("fill",),
        ("remove", "docs/d1.md"),
    ):
        code, out, err = run_main("kb", *args, capsys=capsys)
        assert code == 2, (args, out, err)
        assert err.startswith("tether: ") and str(db) in err and err.count("\n") == 1, (args, err)
        assert "damaged" in err or "cannot open" in err, (args, err)
    code, out, err = run_main("kb", "bases", capsys=capsys)
    assert code == 0 and out.startswith("default  ") and "damaged" in out, (out, err)
    code, out, err = run_main("kb", "drop", "default", "--yes", capsys=capsys)
    assert code == 0 and out.startswith("dropped 'default' (damaged"), (out, err)
    assert not db.exists()
    code, out, err = run_main("kb", "add", "docs", "--embedder", "hashing/64", capsys=capsys)
    assert code == 0 and "docs: 20 added" in out, err
    code, out, err = run_main("kb", "search", "PN-3-7", "--mode", "exact", capsys=capsys)
    assert code == 0 and out.startswith("1. docs/d3.md:"), (out, err)


def test_a_damaged_base_through_the_real_command_names_the_way_out(env: dict[str, str], tmp_path: Path) -> None:
    _docs(tmp_path / "docs", files=12)
    assert tether("kb", "add", "docs", "--embedder", "hashing/64", env=env, cwd=tmp_path).returncode == 0
    db = Path(env["TETHER_HOME"]) / "kb" / "default.db"
    with db.open("r+b") as f:
        f.seek(2 * 4096)
        f.write(os.urandom(db.stat().st_size - 3 * 4096))
    found = tether("kb", "search", "which seal does PN-3-7 use", env=env, cwd=tmp_path)
    assert found.returncode == 2 and "Traceback" not in found.stderr, found.stderr
    assert "is damaged" in found.stderr and "tether kb drop default --yes" in found.stderr


def test_a_damaged_full_text_index_ends_the_search_with_the_error_never_a_segfault(
    env: dict[str, str], tmp_path: Path
) -> None:
    """Only the full-text index damaged: a hybrid search's keyword half failed while its vector
    half was still reading the base in a worker thread, and kb search closed the base on the way
    out, under that thread: a segmentation fault (exit -11) in about half the runs."""
    import sqlite3

    _docs(tmp_path / "docs", files=40, lines=200)
    assert tether("kb", "add", "docs", "--embedder", "hashing/64", env=env, cwd=tmp_path).returncode == 0
    db = Path(env["TETHER_HOME"]) / "kb" / "default.db"
    con = sqlite3.connect(db)
    pages = [p for (p,) in con.execute("SELECT pageno FROM dbstat WHERE name = 'chunks_fts_data' ORDER BY pageno")]
    con.close()
    assert len(pages) > 10
    with db.open("r+b") as f:
        for page in pages[5:]:
            f.seek((page - 1) * 4096)
            f.write(b"\xa5" * 4096)
    for _ in range(10):
        found = tether("kb", "search", "seal part manual", env=env, cwd=tmp_path)
        assert found.returncode == 2 and "is damaged" in found.stderr, (found.returncode, found.stderr[-500:])


# -- numbers and filters a caller may send -----------------------------------------------------


@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
def test_a_k_larger_than_the_database_counts_is_answered_in_every_mode(open_kb: Opener) -> None:
    """-k 99999999999999999999 (or a library caller's k=10**20) was sent on to the store as a
    LIMIT: OverflowError "Python int too large to convert to SQLite INTEGER", a traceback (and,
    once, a segmentation fault as the process ended with the vector thread running)."""
    from tether.knowledge import HashingEmbedder

    kb = open_kb(embedder=HashingEmbedder(64))
    kb.add_text("a.md", "# Valves\n\nThe FVAM-2050-B is fitted with seal kit SK-77.\n")
    kb.add_text("b.md", "# Seals\n\nSeal kit SK-77 is EPDM.\n")
    for mode in ("hybrid", "keyword", "vector", "exact", "neighborhood", "hierarchical"):
        hits = kb.search("SK-77 seal", mode=mode, k=10**20).hits
        assert sorted(h.citation for h in hits) == ["a.md:1-3", "b.md:1-3"] or mode == "exact", (mode, hits)
    assert len(kb.entity_chunks("SK-77", k=10**20).hits) == 2


def test_kb_search_with_a_huge_k_through_the_command(
    quiet_env: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "a.md").write_text("# Valves\n\nThe FVAM-2050-B is fitted with seal kit SK-77.\n")
    assert run_main("kb", "add", "a.md", "--embedder", "hashing/64", capsys=capsys)[0] == 0
    for mode in ("hybrid", "keyword", "exact"):
        code, out, err = run_main("kb", "search", "SK-77", "--mode", mode, "-k", "9" * 20, capsys=capsys)
        assert code == 0 and out.startswith("1. a.md:1-3"), (mode, out, err)


# -- lines that make a regular expression backtrack ----------------------------------------------


def test_hostile_lines_are_read_in_one_pass_and_keep_their_meaning(env: dict[str, str], tmp_path: Path) -> None:
    """Two regular expressions tried every split of a long run: the Markdown heading pattern on a
    heading padded with blanks (20,000 spaces: 4 s; 200,000: about 7 minutes), and the graph's
    identifier pattern on a run of capitals and digits with a "-" after it, as a hex dump or a
    key in a document has (40 KB: 7 s; quadratic, so a 1 MB line held kb add for hours). The add
    now reads them at once, and what they mean is kept: the heading, the identifiers."""
    root = tmp_path / "docs"
    root.mkdir()
    (root / "padded.md").write_text("# Torque table" + " " * 200_000 + "x\n\nThe FVAM-2050-B needs 40 Nm.\n")
    (root / "closed.md").write_text("## Seals ##" + " \t" * 100_000 + "\n\nSeal kit SK-77 is EPDM.\n")
    (root / "hexdump.txt").write_text("key " + "A1" * 100_000 + "-\nThe pump P-100 uses impeller IMP-7.\n")
    (root / "runs.txt").write_text(" ".join(["DEADBEEF0123-"] * 20_000) + "\nvalve V-12 and RS485\n")
    added = tether("kb", "add", str(root), "--embedder", "hashing/64", env=env, timeout=120)  # a hang guard
    assert added.returncode == 0 and "Traceback" not in added.stderr, added.stderr
    assert f"{root}: 4 added" in added.stdout

    from tether.knowledge import KnowledgeBase

    kb = KnowledgeBase.open(Path(env["TETHER_HOME"]) / "kb" / "default.db")
    try:
        headings = {h.chunk.document.rsplit("/", 1)[-1]: h.chunk.heading for h in kb.search("EPDM 40 Nm").hits}
        assert headings["padded.md"] == "Torque table…"  # a path holds 200 characters of a heading (round 5)
        assert headings["closed.md"] == "Seals"
        for name in ("FVAM-2050-B", "SK-77", "P-100", "IMP-7", "V-12", "RS485"):
            assert kb.entity_chunks(name).hits, name
        assert kb.store.entity("DEADBEEF0123") is None  # followed by "-": not an identifier, as before
    finally:
        kb.close()


def test_the_heading_and_identifier_patterns_find_what_they_found_before() -> None:
    """The rewritten patterns against the old ones on short lines, where the old ones are quick."""
    import random
    import re

    from tether.knowledge.chunking import _heading
    from tether.knowledge.graph import _IDENT

    old_heading = re.compile(r"^(#{1,6})\s+(.+?)(?:\s+#+)?\s*$")
    old_ident = re.compile(
        r"(?<![\w.-])(?=[\w-]*\d)(?=[\w-]*[A-Za-z])[A-Za-z0-9]+(?:[-_/][A-Za-z0-9]+)+(?![\w-])"
        r"|(?<![\w-])(?=\w*\d)[A-Z][A-Z0-9]*\d[A-Z0-9]*(?![\w-])"
        r"|\b(?:ISO|IEC|EN|DIN|IEEE|RFC|ASTM|UL|IP)\s?\d{2,6}(?:-\d+)*\b"
    )
    rng = random.Random(7)
    marks = ["#", " ", "\t", "a", "C", "\u00a0", "\u2003", "\x0b", "b"]
    letters = list("A1B2a-_/. x9Z")
    for _ in range(20_000):
        line = "".join(rng.choice(marks) for _ in range(rng.randint(0, 12)))
        m = old_heading.match(line)
        assert _heading(line) == ((len(m.group(1)), m.group(2)) if m else None), repr(line)
        text = "".join(rng.choice(letters) for _ in range(rng.randint(0, 14)))
        assert [m.group(0) for m in _IDENT.finditer(text)] == [m.group(0) for m in old_ident.finditer(text)], text


@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
def test_a_filter_finds_metadata_keys_that_are_not_json_path_words(open_kb: Opener) -> None:
    """SQLite's store put the key into a JSON path (``$."KEY"``): a key holding '"' or '\\' was
    never found (``--meta 'a"b=1'`` then ``--filter 'a"b=1'``: no results), and a NUL in a key
    (a model's filter, "\\u0000" in its JSON) was an OperationalError, "JSON path error"."""
    kb = open_kb()
    keys = ['part "no"', "dir\\name", "a.b", "x[0]", "$"]
    for n, key in enumerate(keys):
        kb.add_text(f"d{n}.md", f"The seal of document {n}.\n", meta={key: "yes", "family": "valves"})
    for n, key in enumerate(keys):
        hits = kb.search("seal", mode="keyword", filters={key: "yes"}).hits
        assert [h.citation for h in hits] == [f"d{n}.md:1-1"], key
    assert kb.search("seal", mode="keyword", filters={"fam\x00": "valves"}).hits == []
    assert len(kb.search("seal", mode="keyword", filters={"family": "valves"}).hits) == len(keys)


# -- files whose name says one thing and whose bytes another -----------------------------------


def test_a_binary_file_named_html_is_skipped_as_binary(env: dict[str, str], tmp_path: Path) -> None:
    """The docs: a binary file is skipped with the reason. One named .html (an image saved under
    the wrong name, an archive) went to the HTML reader, which has no binary check, and its bytes
    were indexed as chunks of U+FFFD garbage. A UTF-16 page (NULs, after its byte-order mark) is
    still read."""
    root = tmp_path / "site"
    root.mkdir()
    (root / "logo.html").write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR" + bytes(range(256)) * 40)
    (root / "wide.html").write_bytes("<html><body><p>Seal kit SK-77 is EPDM.</p></body></html>".encode("utf-16"))
    added = tether("kb", "add", str(root), "--embedder", "hashing/64", "--no-vectors", env=env)
    assert added.returncode == 0, added.stderr
    assert f"{root}: 1 added, 0 updated, 0 unchanged, 1 skipped" in added.stdout
    assert "logo.html: binary (not text, HTML or PDF)" in added.stderr
    listed = tether("kb", "list", env=env)
    assert "logo.html" not in listed.stdout and "wide.html" in listed.stdout


# -- a graph extractor's model that answers too much -------------------------------------------


def test_a_model_extractor_reply_names_no_more_entities_than_max_per_chunk_through_its_relations() -> None:
    """ModelExtractor took at most ``max_per_chunk`` (30) of a reply's entities, but every name in
    its relations joined them with no limit, each related to all the others: one 100-word chunk
    whose model (or a server that ignores max_tokens) listed 3,000 relations among its words made
    104 entities and 5,456 relation rows; a document of 1,000 such chunks, millions. The same
    relation repeated counted again each time."""
    import json

    from tether.knowledge import KnowledgeBase, ModelExtractor
    from tether.testing import FunctionModel

    words = [f"w{i:03d}" for i in range(100)]
    text = "The pump P-100 drives " + " ".join(words) + ".\n"

    def hostile(messages: object, request: object) -> str:
        relations = [{"source": "P-100", "relation": "drives", "target": "pump"}] * 50 + [
            {"source": words[i % 100], "relation": "feeds", "target": words[(i * 7 + 3) % 100]} for i in range(3000)
        ]
        return json.dumps({"entities": [], "relations": relations})

    extractor = ModelExtractor(FunctionModel(hostile), max_per_chunk=30)
    kb = KnowledgeBase.open(":memory:", extractor=extractor)
    kb.add_text("a.md", text)
    stats = kb.stats()
    assert stats["entities"] <= 31  # the rules' P-100, and at most 30 names from the reply
    assert stats["relations"] <= 31 * 30 // 2 * 2  # a co-mention and a stated relation per pair at most
    raw = kb.store._db  # type: ignore[attr-defined]
    weights = raw.execute("SELECT weight FROM relations WHERE kind = 'drives'").fetchall()
    assert weights == [(2.0,)]  # a stated relation counts once, however often it is repeated


@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
def test_a_line_of_megabytes_is_added_on_both_stores(open_kb: Opener) -> None:
    """A line is never cut, so a 2 MB line (a minified file, a one-line CSV export) is one chunk.
    Postgres refused its tsvector ("string is too long for tsvector", ProgramLimitExceeded) and
    with it the whole document: on a Postgres base, kb add stopped with a traceback. The words
    past 1 MB are left out of that chunk's index there; the rest is found as on SQLite."""
    from .conftest import check_index

    kb = open_kb()
    line = " ".join(f"word{i}x" for i in range(200_000))
    kb.add_text("big.txt", f"{line}\nThe seal kit SK-77 is EPDM.\n")
    assert [h.citation for h in kb.search("word1999x", mode="keyword").hits] == ["big.txt:1-1"]
    assert [h.citation for h in kb.search("SK-77", mode="exact").hits] == ["big.txt:2-2"]
    check_index(kb)


def test_a_query_of_thousands_of_part_numbers_is_answered_at_once(tmp_path: Path) -> None:
    """Search picks the query's first four identifiers to pin, but compared each candidate with
    every one found before it, all of them kept until the end: quadratic in the query's length
    (15,000 part numbers, 150 KB, as a model may paste into search_kb: 6 s; 60,000: minutes).
    Run in a process of its own under a timeout that only guards the suite."""
    import subprocess
    import sys

    script = (
        "from tether.knowledge import HashingEmbedder, KnowledgeBase\n"
        "kb = KnowledgeBase.open(':memory:', embedder=HashingEmbedder(64))\n"
        "kb.add_text('a.md', 'The pump PART-2 is fitted with seal kit SK-77.\\n')\n"
        "query = ' '.join(f'PART-{i}' for i in range(60000))\n"
        "for mode in ('hybrid', 'keyword', 'neighborhood', 'hierarchical'):\n"
        "    hits = kb.search(query, mode=mode).hits\n"
        "    assert hits[0].ranks.get('exact') == 1, (mode, hits)\n"
        "print('ok')\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=90, cwd=tmp_path)
    assert done.returncode == 0 and done.stdout == "ok\n", done.stderr[-2000:]


def test_identifiers_are_the_first_four_whatever_their_case() -> None:
    from tether.knowledge.exact import identifiers

    assert identifiers("SK-77 sk-77 FVAM-2050-B x86_64 O_NONBLOCK 1.2.3 RS485") == [
        "SK-77",
        "FVAM-2050-B",
        "x86_64",
        "O_NONBLOCK",
    ]
    assert identifiers("plain words and 12 numbers") == []
