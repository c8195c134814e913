"""``tether kb`` attacked a fourth time: ``kb remove`` racing a drop (real processes), words of
Chinese and Japanese searched by keyword, and a PDF too large to read whole. (Round 2,
test_attack_kb_round2.py, took kill -9, races, hostile folders and hostile queries; round 3 a
damaged base file and regular expressions that backtrack.)

What could hang runs in a subprocess under a timeout that only guards the suite: nothing here
asserts how long anything took."""

from __future__ import annotations

import fcntl
import os
import sqlite3
import subprocess
import time
from pathlib import Path

import pytest

from tests.cli import conftest as cli
from tests.cli.conftest import run_main, tether

from .conftest import Opener, check_index

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
