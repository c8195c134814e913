"""The SQLite full-text table holds the words tokens() makes, vowel signs and all: its tokenizer had
split at those marks ("किताब" indexed as "क", "त", "ब"), so its BM25 differed from Postgres's, which
indexes tokens() itself."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from tether.knowledge import KnowledgeBase
from tether.knowledge.store import FTS_WORDS, tokens

TEXT = "किताब मेज पर है। ปั๊มน้ำ ใช้กับน้ำ\n"
OLD_TABLE = 'CREATE VIRTUAL TABLE chunks_fts USING fts5(text, tokenize = "unicode61 remove_diacritics 2")'


def _indexed_words(path: Path) -> list[str]:
    db = sqlite3.connect(path)
    try:
        db.execute("CREATE VIRTUAL TABLE IF NOT EXISTS temp.v USING fts5vocab(main, chunks_fts, 'row')")
        return sorted(term for (term,) in db.execute("SELECT term FROM temp.v"))
    finally:
        db.close()


def test_the_table_indexes_the_words_tokens_makes(tmp_path: Path) -> None:
    path = tmp_path / "hi.db"
    kb = KnowledgeBase.open(path)
    kb.add_text("book.txt", TEXT)
    kb.close()
    assert _indexed_words(path) == sorted(set(tokens(TEXT)))
    assert "किताब" in _indexed_words(path)


def test_a_base_whose_table_split_at_the_marks_is_made_again_once_when_opened(tmp_path: Path) -> None:
    path = tmp_path / "hi.db"
    kb = KnowledgeBase.open(path)
    kb.add_text("book.txt", TEXT)
    kb.add_text("en.md", "The pump P-100 is serviced yearly.\n")
    kb.close()
    db = sqlite3.connect(path)
    with db:  # as tether with fts_words 2 left it: its words, in a table that splits at marks
        rows = db.execute("SELECT rowid, text FROM chunks_fts").fetchall()
        db.execute("DROP TABLE chunks_fts")
        db.execute(OLD_TABLE)
        db.executemany("INSERT INTO chunks_fts (rowid, text) VALUES (?, ?)", rows)
        db.execute("UPDATE meta SET value = '2' WHERE key = 'fts_words'")
    db.close()
    assert "किताब" not in _indexed_words(path) and "त" in _indexed_words(path)
    kb = KnowledgeBase.open(path)
    assert [h.citation for h in kb.search("किताब", mode="keyword").hits] == ["book.txt:1-1"]
    assert [h.citation for h in kb.search("serviced", mode="keyword").hits] == ["en.md:1-1"]
    kb.close()
    assert _indexed_words(path) == sorted(set(tokens(TEXT)) | set(tokens("The pump P-100 is serviced yearly.")))
    db = sqlite3.connect(path)
    try:
        assert db.execute("SELECT value FROM meta WHERE key = 'fts_words'").fetchone() == (FTS_WORDS,)
    finally:
        db.close()
