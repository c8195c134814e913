"""``tether kb`` attacked a fourth time: ``kb remove`` racing a drop (real processes), words of
Chinese and Japanese searched by keyword, and a PDF too large to read whole. (Round 2,
test_attack_kb_round2.py, took kill -9, races, hostile folders and hostile queries; round 3 a
damaged base file and regular expressions that backtrack.)

What could hang runs in a subprocess under a timeout that only guards the suite: nothing here
asserts how long anything took."""

from __future__ import annotations

import fcntl
import json
import os
import sqlite3
import subprocess
import time
from pathlib import Path

import pytest

from tests.cli import conftest as cli
from tests.cli.conftest import run_main, tether

from .conftest import Opener, check_index, pdf_of

env = cli.env
quiet_env = cli.quiet_env


def _two_documents(root: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (root / "a.md").write_text("# Valves\n\nThe FVAM-2050-B is fitted with seal kit SK-77.\n")
    (root / "b.md").write_text("# Pumps\n\nThe pump P-100 is serviced yearly.\n")
    code, _, err = run_main("kb", "add", str(root / "a.md"), str(root / "b.md"), "--embedder", "none", capsys=capsys)
    assert code == 0, err


def _has_open(pid: int, path: Path) -> bool:
    try:
        return any(os.readlink(f"/proc/{pid}/fd/{fd}") == str(path) for fd in os.listdir(f"/proc/{pid}/fd"))
    except OSError:
        return False


# -- kb remove and the base's lock ---------------------------------------------------------------


def test_a_drop_refuses_while_a_remove_is_writing_and_the_remove_finishes(
    env: dict[str, str], quiet_env: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`kb remove` took no lock: a `kb drop` (or an add that read nothing, dropping the base it
    made) deleted the base while a remove was waiting to write to it. Both said they succeeded
    ("dropped", then "removed a.md" into the deleted file), and a remove that opened the base just
    after the drop made a new empty one in its place. Now a remove holds the base's use lock as an
    add does: the drop refuses, saying why, and the remove finishes."""
    _two_documents(tmp_path, capsys)
    db = quiet_env / "kb" / "default.db"
    writer = sqlite3.connect(db, isolation_level=None)
    writer.execute("BEGIN IMMEDIATE")  # as an add in the middle of a large file: the remove waits
    remove = subprocess.Popen(
        ["tether", "kb", "remove", str(tmp_path / "a.md")],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        stdin=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 60  # a hang guard only
        while not _has_open(remove.pid, db) and remove.poll() is None and time.monotonic() < deadline:
            time.sleep(0.02)
        assert remove.poll() is None, remove.communicate()
        drop = tether("kb", "drop", "default", "--yes", env=env)
    finally:
        writer.execute("ROLLBACK")
        writer.close()
    out, err = remove.communicate(timeout=60)
    assert drop.returncode == 2, drop.stdout
    assert "another process is adding to 'default', removing from it" in drop.stderr
    assert remove.returncode == 0 and out == f"removed {tmp_path / 'a.md'}\n", err
    code, out, err = run_main("kb", "list", capsys=capsys)
    assert code == 0 and out.startswith(f"{tmp_path / 'b.md'}  1 chunks") and "a.md" not in out, err


def test_a_remove_started_while_a_drop_runs_writes_nothing(
    quiet_env: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _two_documents(tmp_path, capsys)
    lock = os.open(quiet_env / "kb" / "default.use.lock", os.O_RDWR)
    fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)  # as `kb drop` holds it while it deletes
    try:
        code, out, err = run_main("kb", "remove", str(tmp_path / "a.md"), capsys=capsys)
    finally:
        os.close(lock)
    assert code == 2 and out == "" and "is being dropped by another process; nothing was written" in err
    code, out, err = run_main("kb", "list", capsys=capsys)
    assert code == 0 and "a.md  1 chunks" in out, err
    code, out, err = run_main("kb", "--name", "nothing", "remove", "a.md", capsys=capsys)
    assert code == 2 and "there is no knowledge base 'nothing'" in err
    assert not (quiet_env / "kb" / "nothing.use.lock").exists()  # a typo leaves nothing behind


# -- Chinese, Japanese and Korean in the keyword index --------------------------------------------

# Written for this test after the fix, never used while making it: a word inside a sentence, as
# those scripts write it (no spaces), and an identifier with no space around it.
HELD_OUT = {
    "zh.md": "仓库里的备用叶轮每季度盘点一次，型号为HX-310的叶轮需要单独登记。\n",
    "ja.md": "配管の圧力試験は毎月第二火曜日に行い、結果はバルブ台帳に記録します。\n",
    "ko.md": "펌프 임펠러는 매년 교체하며 교체 기록은 정비팀이 보관합니다.\n",
    "de.md": "Die Dichtung an der Straßenseite wird jährlich geprüft.\n",
}


@pytest.mark.parametrize(
    ("query", "where"),
    [
        ("叶轮", "zh.md"),
        ("盘点", "zh.md"),
        ("备用叶轮", "zh.md"),
        ("圧力試験", "ja.md"),
        ("火曜日", "ja.md"),
        ("バルブ台帳", "ja.md"),
        ("임펠러", "ko.md"),
        ("정비팀", "ko.md"),
        ("Straßenseite", "de.md"),
        ("HX-310", "zh.md"),
    ],
)
def test_a_word_inside_a_cjk_sentence_is_found_by_keyword_and_an_identifier_in_it_exactly(
    open_kb: Opener, query: str, where: str
) -> None:
    """FTS5's unicode61 made a whole run of Chinese or Japanese one token, so a word inside a
    sentence matched nothing in keyword search (nor, so, in hybrid search without vectors); the
    query's words were also split otherwise than the index's, so `ポンプ`, any Korean word and
    `Straße` were not found even standing alone, and `HX-310` written against Chinese had no edges
    for exact search. Both stores now index and search the same words: CJK runs as pairs of
    characters."""
    kb = open_kb()
    for name, text in HELD_OUT.items():
        kb.add_text(name, text)
    for mode in ("keyword", "hybrid"):
        hits = kb.search(query, mode=mode).hits
        assert hits and hits[0].citation == f"{where}:1-1", (mode, [h.citation for h in hits])
    exact = kb.search(query, mode="exact").hits
    assert [h.citation for h in exact] == [f"{where}:1-1"]
    assert not kb.search("电动机", mode="keyword").hits  # a word in none of them finds none


def test_a_base_indexed_before_is_indexed_again_once_when_opened(tmp_path: Path) -> None:
    """A base made by an earlier tether holds unicode61's words for the raw text: its chunks beyond
    ASCII are indexed again the first time it is opened (its ASCII chunks as they are)."""
    from tether.knowledge import KnowledgeBase

    db = tmp_path / "old.db"
    kb = KnowledgeBase.open(db)
    for name, text in HELD_OUT.items():
        kb.add_text(name, text)
    kb.add_text("en.md", "The pump P-100 is serviced yearly.\n")
    raw = kb.store._db  # type: ignore[attr-defined]
    raw.execute("DELETE FROM chunks_fts")  # as the earlier tether indexed it
    raw.execute("INSERT INTO chunks_fts (rowid, text) SELECT id, text FROM chunks")
    raw.execute("DELETE FROM meta WHERE key = 'fts_words'")
    assert not kb.search("叶轮", mode="keyword").hits
    kb.close()
    kb = KnowledgeBase.open(db)
    assert [h.citation for h in kb.search("叶轮", mode="keyword").hits] == ["zh.md:1-1"]
    assert [h.citation for h in kb.search("serviced", mode="keyword").hits] == ["en.md:1-1"]
    check_index(kb)
    kb.close()


# -- a PDF too large to read whole ----------------------------------------------------------------


def _pdf(*streams: bytes) -> bytes:
    """A valid PDF whose pages' content streams are ``streams``, Flate-compressed (as a hostile one
    is: 1.4 MB of drawing instructions fit in 6 KB)."""
    import zlib

    n = len(streams)
    font = 3 + 2 * n
    objects = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"<< /Type /Pages /Kids [%s] /Count %d >>" % (b" ".join(b"%d 0 R" % (3 + 2 * i) for i in range(n)), n),
    ]
    for i, stream in enumerate(streams):
        objects.append(
            b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents %d 0 R "
            b"/Resources << /Font << /F1 %d 0 R >> >> >>" % (4 + 2 * i, font)
        )
        packed = zlib.compress(stream, 9)
        objects.append(b"<< /Length %d /Filter /FlateDecode >>\nstream\n" % len(packed) + packed + b"\nendstream")
    objects.append(b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>")
    return pdf_of(objects)


def _page(text: str, times: int = 1) -> bytes:
    return (b"BT /F1 12 Tf 72 712 Td (" + text.encode() + b") Tj ET\n") * times


def test_a_pdf_of_more_pages_than_the_limit_is_read_up_to_it_and_says_so(
    quiet_env: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A PDF was read whole, however many pages it had. Now up to ``[kb] max_pdf_pages`` (5,000 by
    default); the add says the file was read in part and why, and what was read is searchable."""
    (tmp_path / "manual.pdf").write_bytes(_pdf(*(_page(f"Step {n} turns valve V-{n}") for n in range(1, 13))))
    quiet_env.mkdir(parents=True, exist_ok=True)
    (quiet_env / "config.toml").write_text("[kb]\nmax_pdf_pages = 4\n")
    code, out, err = run_main("kb", "add", str(tmp_path / "manual.pdf"), "--embedder", "none", capsys=capsys)
    assert code == 0 and "1 added, 0 updated, 0 unchanged, 1 read in part" in out, err
    assert f"read in part {tmp_path / 'manual.pdf'}: only its first 4 of 12 pages were read ([kb] max_pdf_pages)" in err
    code, out, err = run_main("kb", "search", "V-4", "--mode", "exact", "--json", capsys=capsys)
    assert code == 0 and "Step 4 turns valve V-4" in json.loads(out)["hits"][0]["text"], err
    code, out, err = run_main("kb", "search", "V-5", "--mode", "exact", capsys=capsys)
    assert code == 0 and out == "" and "no chunk contains 'V-5' exactly" in err


def test_a_pdf_whose_pages_hold_more_content_than_the_limit_is_cut_or_skipped(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """One page of a few kilobytes inflated to megabytes of drawing instructions, all extracted (a
    6 KB file: 3.6 s and 800,000 characters; pypdf inflates a stream to 75 MB). A file's pages'
    content is read up to MAX_PDF_CONTENT (64 MB; 200 KB here), then the file is cut, or skipped
    when its first page is past it, with the reason."""
    from tether.knowledge import KnowledgeBase, readers

    monkeypatch.setattr(readers, "MAX_PDF_CONTENT", 200_000)
    flood = _page("Seal kit SK-77 in EPDM for the valve body", 4_000)  # 300 KB of content
    (tmp_path / "cut.pdf").write_bytes(_pdf(_page("The pump P-100 is serviced yearly"), flood, _page("P-200")))
    (tmp_path / "flood.pdf").write_bytes(_pdf(flood))
    assert (tmp_path / "flood.pdf").stat().st_size < 10_000
    kb = KnowledgeBase.open(":memory:")
    report = kb.add_path(tmp_path)
    assert [n for n in report.added] == [str(tmp_path / "cut.pdf")]
    assert report.cut == [
        (
            str(tmp_path / "cut.pdf"),
            "read up to page 1 of 3: its pages' content passed the 0.2 MB read of one PDF (a page's drawing "
            "instructions; the text is a small part of them): [kb] max_file_bytes raises it",
        )
    ]
    assert report.skipped == [
        (
            str(tmp_path / "flood.pdf"),
            "its first page's content passed the 0.2 MB read of one PDF (a page's drawing instructions; the "
            "text is a small part of them): [kb] max_file_bytes raises it",
        )
    ]
    assert [h.citation for h in kb.search("P-100", mode="exact").hits] == [f"{tmp_path / 'cut.pdf'}:1-3"]
    assert not kb.search("SK-77", mode="keyword").hits


def test_an_identifier_written_against_cjk_characters_joins_the_graph(open_kb: Opener) -> None:
    """The graph's rules wanted an identifier's edges to be no letter, and every CJK character is
    one: a part number in a Chinese or Japanese sentence named no entity, so entity_chunks and the
    graph modes never reached those documents."""
    kb = open_kb()
    kb.add_text("zh.md", HELD_OUT["zh.md"])
    kb.add_text("ja.md", "HX-310の羽根車はステンレス製で、保守はPN-7の手順に従う。\n")
    kb.add_text("en.md", "The HX-310 impeller is checked each quarter.\n")
    assert [h.citation for h in kb.entity_chunks("HX-310").hits] == ["zh.md:1-1", "ja.md:1-1", "en.md:1-1"]
    assert [h.citation for h in kb.entity_chunks("PN-7").hits] == ["ja.md:1-1"]


def test_a_text_file_too_large_to_read_is_skipped_saying_why(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Any file but a PDF was read whole, its bytes and then its text held in memory at once: a
    log of gigabytes in a folder (``.log`` is read as text) ran the machine out of memory. A file
    over MAX_TEXT_BYTES (64 MB; 200 KB here) is skipped with the reason, the rest is read."""
    from tether.knowledge import KnowledgeBase, readers
    from tether.knowledge.readers import Skipped, read_document

    monkeypatch.setattr(readers, "MAX_TEXT_BYTES", 200_000, raising=False)
    (tmp_path / "server.log").write_text("GET /pump/P-100 200\n" * 20_000)  # 400 KB
    (tmp_path / "notes.md").write_text("The pump P-100 is serviced yearly.\n")
    kb = KnowledgeBase.open(":memory:")
    report = kb.add_path(tmp_path)
    assert report.added == [str(tmp_path / "notes.md")]
    assert report.skipped == [
        (
            str(tmp_path / "server.log"),
            "too large to read (0.4 MB; a file other than a PDF is read up to 0.2 MB: [kb] max_file_bytes raises it)",
        )
    ]
    with pytest.raises(Skipped, match="too large to read"):
        read_document(tmp_path / "server.log")


@pytest.mark.parametrize("command", [("fill",), ("remove", "a.md")])
def test_a_drop_just_before_the_base_is_opened_leaves_no_new_empty_base(
    quiet_env: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    command: tuple[str, ...],
) -> None:
    """`kb fill` took the base's lock only after opening it: a drop between the check that the
    base is there and its opening deleted it, and the opening made a new empty base in its place
    (its embedder chosen anew) that `kb bases` then listed. The lock is now taken first, so the drop
    refuses; a drop that came first leaves "no such base"."""
    import tether.stores

    monkeypatch.chdir(tmp_path)
    (tmp_path / "a.md").write_text("# Valves\n\nThe FVAM-2050-B is fitted with seal kit SK-77.\n")
    code, _, err = run_main("kb", "add", "a.md", "--embedder", "hashing/64", "--no-vectors", capsys=capsys)
    assert code == 0, err
    real, dropped = tether.stores.knowledge_store, []
    calls = []

    def dropped_meanwhile(settings: object, name: str) -> object:
        calls.append(name)
        if len(calls) == 1:  # another process's `kb drop` at the worst moment
            dropped.append(run_main("kb", "drop", "default", "--yes", capsys=capsys))
        return real(settings, name)  # type: ignore[arg-type]

    monkeypatch.setattr(tether.stores, "knowledge_store", dropped_meanwhile)
    code, out, err = run_main("kb", *command, capsys=capsys)
    monkeypatch.setattr(tether.stores, "knowledge_store", real)
    ((drop_code, _, drop_err),) = dropped
    assert drop_code == 2 and "another process is adding to 'default'" in drop_err
    assert code == 0, err
    code, out, err = run_main("kb", "bases", capsys=capsys)
    documents = 0 if command[0] == "remove" else 1
    assert out.startswith(f"default  {documents} documents"), out
