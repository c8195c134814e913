"""Where a knowledge base lives: documents, chunks, the full-text index, vectors and the graph.

:class:`KnowledgeStore` is the seam. :class:`SqliteKnowledgeStore` is a file on disk by default,
or ``":memory:"`` for tests and temporary use: full text is SQLite FTS5 ranked by BM25; vectors
are float32 blobs in the chunk rows, searched as one matrix kept in memory (rebuilt when the base
changes); the graph is three tables (entities, mentions, relations).
:class:`tether.postgres.knowledge.PgKnowledgeStore` keeps many bases in one Postgres database and
ranks the same way: both split text with :func:`tokens` and score keywords with FTS5's BM25, so a
corpus gives the same results on either.
"""

from __future__ import annotations

import contextlib
import functools
import json
import logging
import re
import sqlite3
import threading
import time
import unicodedata
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from tether.errors import ConfigError, StoreError
from tether.fileio import private_file, set_up_sqlite

__all__ = [
    "ANY_DOCUMENT",
    "ChunkRow",
    "DocumentInfo",
    "KnowledgeStore",
    "NameTaken",
    "SqliteKnowledgeStore",
    "fts_text",
    "tokens",
]

ANY_DOCUMENT = -1  # replace_document's ``replacing``: whatever document holds the name (no id is negative)


class NameTaken(StoreError):
    """``replace_document`` wrote nothing: another document took the name after the caller looked
    (another ``kb add`` in another process, at the same moment)."""

    def __init__(self, name: str) -> None:
        super().__init__(
            f"document {name!r} was not written: another add wrote a document of that name at the same "
            "moment. Add it again"
        )
        self.name = name


def check_replacing(name: str, current: int | None, replacing: int | None) -> None:
    """Raise :class:`NameTaken` when the document ``current`` now under ``name`` is not the one
    (``replacing``) the writer read."""
    if replacing != ANY_DOCUMENT and current != replacing:
        raise NameTaken(name)


SCHEMA_VERSION = 1
BUSY_SECONDS = 30  # how long a write waits for another process's to end
# The version of fts_text the full-text index holds (none: unicode61 on the raw text; 1: before
# the vowel signs of Indic and Southeast Asian scripts were part of their words; 2: they were in
# fts_text's words, but the table's tokenizer split at them, so its word counts, and BM25, were
# not those of the words a store without FTS5 indexes; 3: before a run of Thai, Lao, Burmese or
# Khmer was split into pairs of letters)
FTS_WORDS = "4"
# Marks (M*) are word characters too: fts_text keeps only those a word needs (a vowel sign), and the
# table must not split there.
FTS_TOKENIZER = "unicode61 remove_diacritics 2 categories 'L* N* Co M*'"
REINDEX_BATCH = 2000  # chunks read at a time when the full-text index is made again
BM25_K1 = 1.2  # FTS5's bm25() constants; a store that computes BM25 itself uses these
BM25_B = 0.75

_TOKEN = re.compile(r"[^\W_]+")
# Scripts written without spaces between words: Han, kana (with their voicing marks), Bopomofo and
# Hangul (whose particles join the noun: 밸브의). A run of them is one token to unicode61, so a word
# inside a sentence was never found; each run is indexed and searched as its overlapping pairs.
CJK = (
    "\u1100-\u11ff\u2e80-\u2fdf\u3005-\u3007\u3021-\u3029\u3031-\u3035\u3038-\u303c\u3040-\u30ff"
    "\u3100-\u312f\u3130-\u318f\u31a0-\u31bf\u31f0-\u31ff\u3400-\u4dbf\u4e00-\u9fff\ua960-\ua97f"
    "\uac00-\ud7ff\uf900-\ufaff\uff66-\uff9f\U00020000-\U0003134f"
)
_KANA_MARKS = "\u3099\u309a"  # ポ is not ホ: kept, as diacritics elsewhere are not
# Thai, Lao, Burmese and Khmer are written without spaces between words too, their letters carrying
# vowel signs (marks): a run of them is split into overlapping pairs of letters, each with its
# marks. A Thai sentence was one word, found only by the whole sentence.
UNSPACED = "\u0e00-\u0eff\u1000-\u109f\u1780-\u17ff\u19e0-\u19ff\ua9e0-\ua9ff\uaa60-\uaa7f"


@functools.cache
def _runs() -> tuple[re.Pattern[str], re.Pattern[str]]:
    """Runs of Chinese, Japanese or Korean, and of Thai, Lao, Burmese or Khmer. Compiled when text
    that is not ASCII first needs them, not by the import of every search (2 ms)."""
    return re.compile(f"[{CJK}]+"), re.compile(f"[{UNSPACED}]+")


def _pairs(run: re.Match[str]) -> str:
    text = unicodedata.normalize("NFC", run.group())  # Hangul syllables and kana made whole again
    if len(text) < 3:
        return f" {text} "
    return " " + " ".join(text[i : i + 2] for i in range(len(text) - 1)) + " "


def _letter_pairs(run: re.Match[str]) -> str:
    """A run of Thai, Lao, Burmese or Khmer as its overlapping pairs of letters, each letter with
    the marks after it (สี is one: a pair of characters cut it in two)."""
    letters: list[str] = []
    for ch in run.group():
        if letters and unicodedata.category(ch)[0] == "M":
            letters[-1] += ch
        else:
            letters.append(ch)
    if len(letters) < 3:
        return f" {run.group()} "
    return " " + " ".join(letters[i] + letters[i + 1] for i in range(len(letters) - 1)) + " "


@functools.cache
def _marked_words() -> re.Pattern[str]:
    """Letters and digits with the marks joined to them: the vowel signs of Hindi, Bengali, Tamil or
    Thai (the i of कि) are marks, which Python's word characters leave out, and "किताब" was the words
    "क", "त", "ब", found in every text with a lone क. Made on the first text beyond ASCII (tens of ms)."""
    marks: list[str] = []
    start: int | None = None
    for cp in range(0x300, 0x1F001):
        if unicodedata.category(chr(cp))[0] == "M":
            start = cp if start is None else start
        elif start is not None:
            marks.append(f"{chr(start)}-{chr(cp - 1)}")  # marks are no syntax in a class
            start = None
    return re.compile("(?:[^\\W_]|[" + "".join(marks) + "\U000e0100-\U000e01ef])+")


def tokens(text: str) -> list[str]:
    """Words as the keyword index holds them: case-folded, accents dropped, split at anything that
    is not a letter or digit (``_`` too) or a mark joined to one (a vowel sign), and a run of
    Chinese, Japanese or Korean split into its overlapping pairs of characters (``密封圈`` is ``密封
    封圈``; a word of one character is found where it stands alone), one of Thai, Lao, Burmese or
    Khmer into its overlapping pairs of letters with their vowel signs. Both stores index these words,
    so a query and the index agree."""
    folded = unicodedata.normalize("NFKD", text.casefold())
    plain = "".join(ch for ch in folded if not unicodedata.combining(ch) or ch in _KANA_MARKS)
    if plain.isascii():
        return _TOKEN.findall(plain)
    cjk, unspaced = _runs()
    return _marked_words().findall(unspaced.sub(_letter_pairs, cjk.sub(_pairs, plain)))


def fts_text(text: str) -> str:
    """What the FTS5 table is given for ``text``: its :func:`tokens`, which unicode61 splits as
    they are (ASCII text as it is: the same words). unicode61 on the raw text differed from the
    query's words: no part of a CJK run, nor ``Straße``, ``ポンプ`` or any Korean word was found."""
    return text if text.isascii() else " ".join(tokens(text))


def fts_query(words: Sequence[str], *, phrase: bool = False) -> str | None:
    """An FTS5 expression ORing ``words`` (or, with ``phrase``, the words next to each other in
    this order), each quoted so nothing in a query is FTS5 syntax."""
    if not words:
        return None
    return '"' + " ".join(words) + '"' if phrase else " OR ".join(f'"{w}"' for w in words)


# A list of ids as one variable, a JSON array: one variable per id passed SQLite's limit (32,766
# in a stock build) for a heading over a parts list of 20,000 numbers in the graph's walk, and a
# filter that keeps more documents than that found nothing ("too many SQL variables").
_EACH = "(SELECT value FROM json_each(?))"


def _each(ids: Iterable[int]) -> str:
    return json.dumps(sorted({int(i) for i in ids}))


def dimension_error(query: int, base: int) -> ConfigError:
    return ConfigError(
        f"the query's vector has {query} dimensions and the base's {base}: the embedder changed; rebuild the base"
    )


def _damaged(path: str, exc: sqlite3.DatabaseError | UnicodeDecodeError) -> StoreError | None:
    """What to say for a statement that failed because the file is damaged (a page overwritten,
    the file cut short) or its disk refused a write (full, over a size limit, failing); None for
    any other failure."""
    said = str(exc)
    if isinstance(exc, UnicodeDecodeError) or said.startswith("Could not decode to UTF-8"):
        # Bytes overwritten in a page SQLite's checks pass: tether writes only UTF-8, so a text
        # that is not is damage. Not quoted: the bytes may be anything, escapes for the terminal.
        code, said = sqlite3.SQLITE_CORRUPT, "a text in it is not UTF-8"
    elif said.startswith("invalid fts5 file format"):
        # The full-text index's own record overwritten: SQLite says so as a plain error, which
        # every search took for a query that matches nothing ("no results")
        code = sqlite3.SQLITE_CORRUPT
    else:
        code = (getattr(exc, "sqlite_errorcode", 0) or 0) & 0xFF
    if code in (sqlite3.SQLITE_FULL, sqlite3.SQLITE_IOERR):
        # A full disk was a traceback from the middle of a kb add; the transaction it stopped is
        # rolled back, so the base holds each file read before it whole, as after Ctrl-C.
        return StoreError(
            f"cannot read or write the knowledge base {path} ({said}): its disk is full, over a size limit "
            "(ulimit -f) or failing. What was written before is whole, each file in or out; make room, "
            "then run the same command again (an add goes on where it stopped)"
        )
    if code not in (sqlite3.SQLITE_CORRUPT, sqlite3.SQLITE_NOTADB):
        return None
    return StoreError(
        f"the knowledge base {path} is damaged ({said}). The documents' own files are untouched: "
        f"drop the base (tether kb drop {Path(path).stem} --yes, or delete the file) and add them "
        "again; sqlite3's .recover command copies out what the file still holds"
    )


class _Cursor(sqlite3.Cursor):
    """A cursor of :class:`_Connection`: a damaged file's error, at the statement or at any row
    read after it, is a StoreError that says so."""

    def _checked(self, call: Any, *args: Any) -> Any:
        try:
            return call(*args)
        except (sqlite3.DatabaseError, UnicodeDecodeError) as exc:
            damaged = _damaged(getattr(self.connection, "where", "?"), exc)
            if damaged is None:
                raise
            raise damaged from exc

    def execute(self, sql: str, parameters: Any = (), /) -> _Cursor:
        return self._checked(super().execute, sql, parameters)  # type: ignore[no-any-return]

    def executemany(self, sql: str, seq_of_parameters: Any, /) -> _Cursor:
        return self._checked(super().executemany, sql, seq_of_parameters)  # type: ignore[no-any-return]

    def __next__(self) -> Any:
        return self._checked(super().__next__)

    def fetchone(self) -> Any:
        return self._checked(super().fetchone)

    def fetchall(self) -> list[Any]:
        return self._checked(super().fetchall)  # type: ignore[no-any-return]


class _Connection(sqlite3.Connection):
    """A base's connection: sqlite3's "database disk image is malformed" was a traceback from
    every kb command (search, list, stats, add, even drop); it is a StoreError naming the file and
    what to do."""

    where = ""

    def execute(self, sql: str, parameters: Any = (), /) -> sqlite3.Cursor:
        return self.cursor(_Cursor).execute(sql, parameters)

    def executemany(self, sql: str, parameters: Any, /) -> sqlite3.Cursor:
        return self.cursor(_Cursor).executemany(sql, parameters)

    def executescript(self, script: str, /) -> sqlite3.Cursor:
        return self.cursor(_Cursor)._checked(super().executescript, script)  # type: ignore[no-any-return]


def _connect(path: str, *, read_only: bool = False) -> sqlite3.Connection:
    where = path
    if read_only:
        # A base on a read-only file system (a container's image): SQLite opens a WAL base there
        # only as immutable, when no -wal file holds writes the base file lacks.
        from urllib.parse import quote

        wal = Path(f"{path}-wal")
        still = wal.exists() and wal.stat().st_size > 0
        where = f"file:{quote(path)}?mode=ro" + ("" if still else "&immutable=1")
    db = sqlite3.connect(
        where, timeout=BUSY_SECONDS, isolation_level=None, check_same_thread=False, factory=_Connection, uri=read_only
    )
    db.where = path
    return db


def _cannot_write(path: str) -> bool:
    """Whether ``path`` is a base that can be read but not written (its file or folder read-only)."""
    import os

    where = Path(path)  # a link planted at the name is not opened at all (private_file refuses it)
    return where.is_file() and not where.is_symlink() and os.access(path, os.R_OK) and not _writable(path)


def _writable(path: str) -> bool:
    import os

    try:
        os.close(os.open(path, os.O_RDWR | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0)))
    except OSError:
        return False
    return os.access(Path(path).parent, os.W_OK)


_FTS_TABLE = f'CREATE VIRTUAL TABLE IF NOT EXISTS chunks_fts USING fts5(text, tokenize = "{FTS_TOKENIZER}");'
_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS documents (
    id INTEGER PRIMARY KEY,
    name TEXT NOT NULL UNIQUE,
    path TEXT,
    title TEXT NOT NULL DEFAULT '',
    hash TEXT NOT NULL,
    meta TEXT NOT NULL DEFAULT '{}',
    added_at REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS chunks (
    id INTEGER PRIMARY KEY,
    doc_id INTEGER NOT NULL REFERENCES documents(id) ON DELETE CASCADE,
    start_line INTEGER NOT NULL,
    end_line INTEGER NOT NULL,
    heading TEXT NOT NULL DEFAULT '',
    text TEXT NOT NULL,
    vec BLOB
);
CREATE INDEX IF NOT EXISTS chunks_doc ON chunks(doc_id);
{FTS_TABLE}
CREATE TABLE IF NOT EXISTS entities (
    id INTEGER PRIMARY KEY,
    key TEXT NOT NULL UNIQUE,
    name TEXT NOT NULL,
    kind TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS mentions (
    entity_id INTEGER NOT NULL REFERENCES entities(id) ON DELETE CASCADE,
    chunk_id INTEGER NOT NULL REFERENCES chunks(id) ON DELETE CASCADE,
    PRIMARY KEY (entity_id, chunk_id)
);
CREATE INDEX IF NOT EXISTS mentions_chunk ON mentions(chunk_id);
CREATE TABLE IF NOT EXISTS relations (
    a INTEGER NOT NULL REFERENCES entities(id) ON DELETE CASCADE,
    b INTEGER NOT NULL REFERENCES entities(id) ON DELETE CASCADE,
    kind TEXT NOT NULL,
    weight REAL NOT NULL,
    doc_id INTEGER NOT NULL REFERENCES documents(id) ON DELETE CASCADE,
    PRIMARY KEY (a, b, kind, doc_id)
);
CREATE INDEX IF NOT EXISTS relations_b ON relations(b);
""".replace("{FTS_TABLE}", _FTS_TABLE)


@dataclass(frozen=True)
class DocumentInfo:
    id: int
    name: str
    path: str | None
    title: str
    hash: str
    meta: dict[str, Any]
    chunks: int
    added_at: float


@dataclass(frozen=True)
class ChunkRow:
    """A chunk as search returns it. A chunk of a page whose text shares its lines (a minified HTML
    page of one line) is cited by the line and column (from 1, in characters) its text starts at,
    ``page.html:1:4023``, as compilers and editors write a place; it is stored with its end line
    the column negated (no end line is below 1), which the row reads back into ``column``, its
    ``end_line`` then its ``start_line``: no column was added to either store's tables, which an
    earlier tether sharing the base would refuse."""

    id: int
    doc_id: int
    document: str  # the document's name
    start_line: int
    end_line: int
    heading: str
    text: str
    meta: dict[str, Any] = field(default_factory=dict)  # the document's metadata
    column: int = 0  # where its text starts on start_line, for a chunk cited so; 0: cited by its lines

    def __post_init__(self) -> None:
        if self.end_line < 0:  # as stored: the column negated
            object.__setattr__(self, "column", -self.end_line)
            object.__setattr__(self, "end_line", self.start_line)

    @property
    def citation(self) -> str:
        if self.column:
            return f"{self.document}:{self.start_line}:{self.column}"
        return f"{self.document}:{self.start_line}-{self.end_line}"

    @property
    def indexed_text(self) -> str:
        """What search sees: the heading path, then the text."""
        return f"{self.heading}\n{self.text}" if self.heading else self.text


class KnowledgeStore(Protocol):
    """What a knowledge base needs from storage."""

    def close(self) -> None: ...

    def get_meta(self, key: str) -> str | None: ...

    def set_meta(self, key: str, value: str) -> None: ...

    def claim_meta(self, key: str, value: str) -> str:
        """Record ``value`` under ``key`` unless a value is recorded already, atomically; the value
        recorded either way. Two processes making one base at once: the first wins, and the other
        learns what it chose (an embedder recorded twice left vectors of two sizes in one base)."""
        ...

    def document(self, name: str) -> DocumentInfo | None: ...

    def documents(self) -> list[DocumentInfo]: ...

    def replace_document(
        self,
        name: str,
        *,
        path: str | None,
        title: str,
        hash: str,
        meta: dict[str, Any],
        chunks: Sequence[tuple[int, int, str, str, bytes | None]],
        entities: Sequence[tuple[str, str, Sequence[int]]],
        relations: Sequence[tuple[str, str, str, float]],
        replacing: int | None = ANY_DOCUMENT,
    ) -> int:
        """Put a document (replacing any of the same name) in one transaction. With ``replacing``,
        the id of the document the caller read under ``name`` (None: none), it writes nothing and
        raises :class:`NameTaken` when another holds the name now."""
        ...

    def remove_document(self, name: str) -> bool: ...

    def set_document_hash(self, name: str, hash: str) -> None:
        """Record a new version stamp for a document whose content did not change (a touched file)."""
        ...

    def doc_ids(self, filters: dict[str, str]) -> set[int] | None: ...

    def keyword(
        self, terms: Sequence[str], limit: int, doc_ids: set[int] | None, *, phrase: bool = False
    ) -> list[tuple[int, float]]:
        """Chunks holding any of ``terms`` (words as :func:`tokens` gives them), or with ``phrase``
        all of them next to each other in this order; best first by FTS5's BM25, with the scores."""
        ...

    def term_counts(self, terms: Sequence[str]) -> tuple[int, dict[str, int]]: ...

    def has_vectors(self) -> bool: ...

    def coverage(self) -> tuple[int, int]:
        """(chunks with a vector, chunks): cheap enough to ask on every search."""
        ...

    def unembedded(self, limit: int, after: int = 0) -> list[tuple[int, str]]:
        """Up to ``limit`` chunks without a vector, ``(id, indexed text)``, by id above ``after``."""
        ...

    def set_vectors(self, rows: Sequence[tuple[int, str, bytes]]) -> int:
        """Give chunks ``(id, indexed text, vector)`` their vectors, in one transaction; a chunk
        that was replaced meanwhile (another text, or gone) is left alone. Returns how many were set."""
        ...

    def kept_vectors(self, name: str) -> dict[str, bytes]:
        """Document ``name``'s vectors by the indexed text of their chunks: what a new version of
        it can keep for the chunks that did not change."""
        ...

    def nearest(
        self, vector: Any, limit: int, doc_ids: set[int] | None, among: set[int] | None = None
    ) -> list[tuple[int, float]]:
        """Chunks by cosine similarity to the unit ``vector``, best first (ties by id), with the
        similarities; only those of ``doc_ids`` and among ``among`` when given."""
        ...

    def chunk_ids(self, doc_ids: Iterable[int]) -> list[int]: ...

    def chunks(self, ids: Iterable[int]) -> dict[int, ChunkRow]: ...

    def entities_of(self, chunk_ids: Iterable[int]) -> dict[int, list[int]]: ...

    def neighbours(self, entity_ids: Iterable[int]) -> list[tuple[int, int, float]]: ...

    def entity(self, name: str) -> tuple[int, str, str] | None: ...

    def chunks_of_entities(self, entity_ids: Iterable[int], limit: int) -> list[int]: ...

    def entity_names(self, ids: Iterable[int]) -> dict[int, str]: ...

    def stats(self) -> dict[str, Any]: ...


class SqliteKnowledgeStore:
    """One SQLite file (WAL) per knowledge base, or ``":memory:"``."""

    def __init__(self, path: Path | str) -> None:
        self.path = str(path)
        # A base that can be read but not written (a read-only mount, a container's image) is
        # searched read-only: opening it was "Operation not permitted ... If it is damaged, remove
        # it", and nothing could search it.
        self.read_only = self.path != ":memory:" and _cannot_write(self.path)
        try:
            if self.path != ":memory:" and not self.read_only:
                private_file(Path(self.path))  # the base holds the documents' text
            self._db = self._set_up()
        except (OSError, sqlite3.Error) as exc:
            raise ConfigError(
                f"cannot open the knowledge base {self.path}: {exc}. If it is damaged, remove it "
                "and add the documents again"
            ) from exc
        version = self.get_meta("schema_version")
        if version is None:
            if not self.read_only:
                self.set_meta("schema_version", str(SCHEMA_VERSION))
        elif int(version) > SCHEMA_VERSION:
            raise ConfigError(f"{self.path} was written by a newer tether (schema {version}); upgrade tether")
        self._lock = threading.RLock()
        self._matrix: tuple[int, Any, Any, Any] | None = None  # (generation, ids, docs, matrix)
        self._vocab = False
        self._counted: tuple[int, int] | None = None  # (generation, chunks)
        self._writes = 0  # this store's own changes: all there are to an in-memory base
        # The vector search asks whether the base changed while the full-text query may hold the
        # main connection (SQLite runs one statement at a time on a connection): it asks on one
        # of its own, which WAL lets read beside the other.
        self._probe = None if self.path == ":memory:" else _connect(self.path, read_only=self.read_only)
        if self.get_meta("fts_words") != FTS_WORDS and not self.read_only:
            self._index_words_again()

    def _set_up(self) -> sqlite3.Connection:
        def tables(db: sqlite3.Connection) -> None:
            db.execute("PRAGMA foreign_keys = ON")
            if self.path != ":memory:" and not self.read_only:
                db.execute("PRAGMA journal_mode = WAL")
                db.execute("PRAGMA synchronous = NORMAL")
            db.executescript(_SCHEMA)

        return set_up_sqlite(lambda: _connect(self.path, read_only=self.read_only), tables, BUSY_SECONDS)

    def close(self) -> None:
        if self._probe is not None:
            self._probe.close()
        self._db.close()

    def _index_words_again(self) -> None:
        """A base made before :data:`FTS_WORDS`: its full-text index made again, once, in a table
        with :data:`FTS_TOKENIZER` (a table's tokenizer is fixed when it is made), and said so on
        the ``tether.knowledge`` log (one line on stderr from the command line: a large base takes
        a while). The chunks are read a batch at a time (all at once, with their words, the text was
        held twice over). Not waited for: a read-only file, or another process writing, leaves it to
        a later open."""
        self._db.execute("PRAGMA busy_timeout = 0")
        try:
            with self._tx() as db:
                chunks = int(db.execute("SELECT COUNT(*) FROM chunks").fetchone()[0])
                if chunks:
                    logging.getLogger("tether.knowledge").warning(
                        "the full-text index of the knowledge base %s is being made again, once (%d chunks): "
                        "this tether splits the text into words otherwise than the one that made it",
                        self.path,
                        chunks,
                    )
                db.execute("DROP TABLE IF EXISTS chunks_fts")
                db.execute(_FTS_TABLE)
                after = -1
                while rows := db.execute(
                    f"SELECT id, {self._INDEXED} FROM chunks WHERE id > ? ORDER BY id LIMIT ?",
                    (after, REINDEX_BATCH),
                ).fetchall():
                    db.executemany(
                        "INSERT INTO chunks_fts (rowid, text) VALUES (?, ?)", [(c, fts_text(t)) for c, t in rows]
                    )
                    after = rows[-1][0]
                db.execute(
                    "INSERT INTO meta (key, value) VALUES ('fts_words', ?) ON CONFLICT(key) DO UPDATE SET "
                    "value = excluded.value",
                    (FTS_WORDS,),
                )
        except (sqlite3.OperationalError, StoreError):
            pass
        finally:
            self._db.execute(f"PRAGMA busy_timeout = {int(BUSY_SECONDS * 1000)}")

    @contextlib.contextmanager
    def _waited(self) -> Iterator[None]:
        """A write that waited its whole timeout for another process's (one transaction per file:
        adding a large one holds the base for as long as it takes) is a StoreError that says so;
        so is any write to a base opened read-only."""
        if self.read_only:
            raise StoreError(
                f"the knowledge base {self.path} is read-only (its file or its folder cannot be "
                "written): it can be searched, not changed. Make it writable, or add to a copy"
            )
        try:
            yield
        except sqlite3.OperationalError as exc:
            if exc.sqlite_errorcode not in (sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED):
                raise
            raise StoreError(
                f"the knowledge base {self.path} is busy: another process has been writing to it for "
                f"{BUSY_SECONDS} s (a kb add of a large file, or a fill). Run this again when it is done"
            ) from None

    @contextlib.contextmanager
    def _tx(self) -> Iterator[sqlite3.Connection]:
        with self._lock:
            with self._waited():
                self._db.execute("BEGIN IMMEDIATE")
            try:
                yield self._db
                self._db.execute("COMMIT")
            except BaseException:
                # A COMMIT refused too (busy, full): left open, the transaction would hold the
                # database's write lock, against every process, until this one ends.
                with contextlib.suppress(sqlite3.Error):  # SQLite may have rolled back itself
                    self._db.execute("ROLLBACK")
                raise

    # -- meta --------------------------------------------------------------------------------

    def get_meta(self, key: str) -> str | None:
        row = self._db.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
        return None if row is None else str(row[0])

    def set_meta(self, key: str, value: str) -> None:
        with self._waited():
            self._db.execute(
                "INSERT INTO meta (key, value) VALUES (?, ?) ON CONFLICT(key) DO UPDATE SET value = excluded.value",
                (key, value),
            )

    def claim_meta(self, key: str, value: str) -> str:
        with self._tx() as db:
            db.execute("INSERT INTO meta (key, value) VALUES (?, ?) ON CONFLICT(key) DO NOTHING", (key, value))
            return str(db.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()[0])

    def _generation(self) -> int:
        if self._probe is None:
            return self._writes
        row = self._probe.execute("SELECT value FROM meta WHERE key = 'generation'").fetchone()
        return 0 if row is None else int(row[0])

    def _bump(self, db: sqlite3.Connection) -> None:
        self._writes += 1
        db.execute(
            "INSERT INTO meta (key, value) VALUES ('generation', '1') ON CONFLICT(key) DO UPDATE SET "
            "value = CAST(value AS INTEGER) + 1"
        )

    # -- documents ---------------------------------------------------------------------------

    _DOC = (
        "SELECT d.id, d.name, d.path, d.title, d.hash, d.meta, d.added_at, "
        "(SELECT COUNT(*) FROM chunks c WHERE c.doc_id = d.id) FROM documents d"
    )

    @staticmethod
    def _info(row: Sequence[Any]) -> DocumentInfo:
        return DocumentInfo(row[0], row[1], row[2], row[3], row[4], json.loads(row[5]), row[7], row[6])

    def document(self, name: str) -> DocumentInfo | None:
        row = self._db.execute(self._DOC + " WHERE d.name = ?", (name,)).fetchone()
        return None if row is None else self._info(row)

    def documents(self) -> list[DocumentInfo]:
        return [self._info(r) for r in self._db.execute(self._DOC + " ORDER BY d.name")]

    def replace_document(
        self,
        name: str,
        *,
        path: str | None,
        title: str,
        hash: str,
        meta: dict[str, Any],
        chunks: Sequence[tuple[int, int, str, str, bytes | None]],
        entities: Sequence[tuple[str, str, Sequence[int]]],
        relations: Sequence[tuple[str, str, str, float]],
        replacing: int | None = ANY_DOCUMENT,
    ) -> int:
        """Put a document (replacing any of the same name) in one transaction: its chunks
        ``(start, end, heading, text, vector)``, the entities it mentions ``(name, kind, chunk
        indexes)`` and relations ``(name, name, kind, weight)``. Returns its id. With ``replacing``
        (the id of the document the caller read under ``name``; None: none) nothing is written
        when another holds the name now: :class:`NameTaken`."""
        with self._tx() as db:
            row = db.execute("SELECT id FROM documents WHERE name = ?", (name,)).fetchone()
            check_replacing(name, None if row is None else int(row[0]), replacing)
            self._delete(db, name)
            cur = db.execute(
                "INSERT INTO documents (name, path, title, hash, meta, added_at) VALUES (?, ?, ?, ?, ?, ?)",
                (name, path, title, hash, json.dumps(meta, ensure_ascii=False), time.time()),
            )
            doc_id = int(cur.lastrowid or 0)
            # The ids SQLite would give (the largest plus one), chosen here so that the rows go in
            # with one executemany each; the write lock is held, so no one else takes them.
            first = int(db.execute("SELECT COALESCE(MAX(id), 0) + 1 FROM chunks").fetchone()[0])
            ids = list(range(first, first + len(chunks)))
            db.executemany(
                "INSERT INTO chunks (id, doc_id, start_line, end_line, heading, text, vec) "
                "VALUES (?, ?, ?, ?, ?, ?, ?)",
                [(cid, doc_id, *row) for cid, row in zip(ids, chunks, strict=True)],
            )
            db.executemany(
                "INSERT INTO chunks_fts (rowid, text) VALUES (?, ?)",
                [
                    (cid, fts_text(f"{heading}\n{text}" if heading else text))
                    for cid, (_, _, heading, text, _) in zip(ids, chunks, strict=True)
                ],
            )
            entity_ids: dict[str, int] = {}
            for ename, kind, _ in entities:
                entity_ids[ename.casefold()] = self._entity_id(db, ename, kind)
            db.executemany(
                "INSERT OR IGNORE INTO mentions (entity_id, chunk_id) VALUES (?, ?)",
                [(entity_ids[ename.casefold()], ids[i]) for ename, _, at in entities for i in at],
            )
            related = []
            for a, b, kind, weight in relations:
                ea = entity_ids.get(a.casefold()) or self._entity_id(db, a, "term")
                eb = entity_ids.get(b.casefold()) or self._entity_id(db, b, "term")
                if ea != eb:
                    related.append((min(ea, eb), max(ea, eb), kind, weight, doc_id))
            db.executemany(
                "INSERT INTO relations (a, b, kind, weight, doc_id) VALUES (?, ?, ?, ?, ?) "
                "ON CONFLICT DO UPDATE SET weight = weight + excluded.weight",
                related,
            )
            self._bump(db)
        return doc_id

    @staticmethod
    def _entity_id(db: sqlite3.Connection, name: str, kind: str) -> int:
        key = name.casefold()
        row = db.execute("SELECT id FROM entities WHERE key = ?", (key,)).fetchone()
        if row is not None:
            return int(row[0])
        return int(
            db.execute("INSERT INTO entities (key, name, kind) VALUES (?, ?, ?)", (key, name, kind)).lastrowid or 0
        )

    def _delete(self, db: sqlite3.Connection, name: str) -> bool:
        row = db.execute("SELECT id FROM documents WHERE name = ?", (name,)).fetchone()
        if row is None:
            return False
        db.execute("DELETE FROM chunks_fts WHERE rowid IN (SELECT id FROM chunks WHERE doc_id = ?)", (row[0],))
        db.execute("DELETE FROM documents WHERE id = ?", (row[0],))  # chunks, mentions, relations cascade
        db.execute(
            "DELETE FROM entities WHERE id NOT IN (SELECT entity_id FROM mentions) "
            "AND id NOT IN (SELECT a FROM relations) AND id NOT IN (SELECT b FROM relations)"
        )
        return True

    def remove_document(self, name: str) -> bool:
        with self._tx() as db:
            gone = self._delete(db, name)
            if gone:
                self._bump(db)
        return gone

    def set_document_hash(self, name: str, hash: str) -> None:
        with self._waited():
            self._db.execute("UPDATE documents SET hash = ? WHERE name = ?", (hash, name))

    def doc_ids(self, filters: dict[str, str]) -> set[int] | None:
        """Documents whose metadata (or name, path, title) equal every filter; None: no filter."""
        if not filters:
            return None
        where, args = [], []
        for key, value in filters.items():
            if key in ("name", "path", "title"):
                where.append(f"{key} = ?")
            else:  # by key, not a JSON path: a key holding '"' or '\\' was never found, a NUL an error
                where.append("EXISTS (SELECT 1 FROM json_each(documents.meta) AS m WHERE m.key = ? AND m.value = ?)")
                args.append(key)
            args.append(value)
        sql = "SELECT id FROM documents WHERE " + " AND ".join(where)
        return {int(r[0]) for r in self._db.execute(sql, args)}

    # -- search primitives -------------------------------------------------------------------

    def keyword(
        self, terms: Sequence[str], limit: int, doc_ids: set[int] | None, *, phrase: bool = False
    ) -> list[tuple[int, float]]:
        """Chunk ids for the terms (ORed, or one phrase), best BM25 first, with their scores."""
        match = fts_query(terms, phrase=phrase)
        if match is None or (doc_ids is not None and not doc_ids):
            return []
        sql = "SELECT rowid, bm25(chunks_fts) AS s FROM chunks_fts WHERE chunks_fts MATCH ?"
        args: list[Any] = [match]
        if doc_ids is not None:
            sql += f" AND rowid IN (SELECT id FROM chunks WHERE doc_id IN {_EACH})"
            args.append(_each(doc_ids))
        sql += " ORDER BY s, rowid LIMIT ?"
        args.append(limit)
        try:
            return [(int(r[0]), -float(r[1])) for r in self._db.execute(sql, args)]
        except sqlite3.OperationalError:
            return []  # a query FTS5 cannot parse matches nothing

    def term_counts(self, terms: Sequence[str]) -> tuple[int, dict[str, int]]:
        """(chunks in the index, how many chunks hold each term) from FTS5's own vocabulary."""
        if not self._vocab:
            self._db.execute(
                "CREATE VIRTUAL TABLE IF NOT EXISTS temp.chunks_vocab USING fts5vocab(main, chunks_fts, 'row')"
            )
            self._vocab = True
        total = self._db.execute("SELECT COUNT(*) FROM chunks").fetchone()[0] if terms else 0
        if not terms:
            return 0, {}
        sql = f"SELECT term, doc FROM temp.chunks_vocab WHERE term IN ({','.join('?' * len(terms))})"
        return int(total), {str(t): int(d) for t, d in self._db.execute(sql, list(terms))}

    def has_vectors(self) -> bool:
        return len(self.vectors()[0]) > 0

    def coverage(self) -> tuple[int, int]:
        generation = self._generation()
        if self._counted is None or self._counted[0] != generation:
            self._counted = (generation, int(self._db.execute("SELECT COUNT(*) FROM chunks").fetchone()[0]))
        return len(self.vectors()[0]), self._counted[1]

    _INDEXED = "CASE WHEN heading = '' THEN text ELSE heading || char(10) || text END"

    def unembedded(self, limit: int, after: int = 0) -> list[tuple[int, str]]:
        sql = f"SELECT id, {self._INDEXED} FROM chunks WHERE vec IS NULL AND id > ? ORDER BY id LIMIT ?"
        return [(int(i), str(t)) for i, t in self._db.execute(sql, (after, limit))]

    def set_vectors(self, rows: Sequence[tuple[int, str, bytes]]) -> int:
        if not rows:
            return 0
        with self._tx() as db:
            before = db.total_changes
            db.executemany(
                f"UPDATE chunks SET vec = ? WHERE id = ? AND vec IS NULL AND {self._INDEXED} = ?",
                [(vec, cid, text) for cid, text, vec in rows],
            )
            done = db.total_changes - before
            if done:
                self._bump(db)
        return done

    def kept_vectors(self, name: str) -> dict[str, bytes]:
        sql = (
            f"SELECT {self._INDEXED}, vec FROM chunks WHERE vec IS NOT NULL "
            "AND doc_id = (SELECT id FROM documents WHERE name = ?)"
        )
        return {str(t): bytes(v) for t, v in self._db.execute(sql, (name,))}

    def nearest(
        self, vector: Any, limit: int, doc_ids: set[int] | None, among: set[int] | None = None
    ) -> list[tuple[int, float]]:
        """Brute force over the cached matrix: one matrix-vector product, in numpy's own loop
        (``einsum``) rather than BLAS: OpenBLAS splits a product this size over every core and
        then waits for the busiest, which on 2 shared cores took 8-12 ms at 57k chunks where one
        core alone takes 3-4 ms (the product is bound by memory, not arithmetic)."""
        import numpy as np

        ids, docs, matrix = self.vectors()
        if not len(ids):
            return []
        if matrix.shape[1] != vector.shape[0]:
            raise dimension_error(vector.shape[0], matrix.shape[1])
        scores = np.einsum("ij,j->i", matrix, np.asarray(vector, dtype=np.float32))
        if doc_ids is not None or among is not None:
            keep = np.ones(len(ids), dtype=bool)
            if among is not None:
                keep &= np.isin(ids, np.fromiter(among, dtype=np.int64, count=len(among)))
            if doc_ids is not None:
                keep &= np.isin(docs, np.fromiter(doc_ids, dtype=np.int64, count=len(doc_ids)))
            scores = np.where(keep, scores, -np.inf)
        n = min(limit, len(ids))
        top = np.argpartition(-scores, n - 1)[:n]
        top = top[np.lexsort((ids[top], -scores[top]))]  # ties by id, as the Postgres store orders them
        return [(int(ids[i]), float(scores[i])) for i in top if np.isfinite(scores[i])]

    def vectors(self) -> tuple[Any, Any, Any]:
        """(chunk ids, their documents, matrix of unit vectors, one row each), cached until the
        base changes."""
        import numpy as np

        generation = self._generation()
        cached = self._matrix
        if cached is not None and cached[0] == generation:
            return cached[1], cached[2], cached[3]
        ids, docs, rows = [], [], []
        for cid, doc, blob in self._db.execute(
            "SELECT id, doc_id, vec FROM chunks WHERE vec IS NOT NULL ORDER BY id"
        ).fetchall():
            ids.append(cid)
            docs.append(doc)
            rows.append(blob)
        if not rows:
            matrix = np.zeros((0, 0), dtype=np.float32)
        else:
            matrix = np.frombuffer(b"".join(rows), dtype=np.float32).reshape(len(rows), -1)
        out = (np.asarray(ids, dtype=np.int64), np.asarray(docs, dtype=np.int64), matrix)
        self._matrix = (generation, *out)
        return out

    def chunk_ids(self, doc_ids: Iterable[int]) -> list[int]:
        """Every chunk of these documents, in document order."""
        ids = sorted(set(doc_ids))
        if not ids:
            return []
        sql = f"SELECT id FROM chunks WHERE doc_id IN {_EACH} ORDER BY doc_id, start_line, id"
        return [int(r[0]) for r in self._db.execute(sql, (_each(ids),))]

    def chunks(self, ids: Iterable[int]) -> dict[int, ChunkRow]:
        wanted = sorted(set(ids))
        out: dict[int, ChunkRow] = {}
        for i in range(0, len(wanted), 500):
            part = wanted[i : i + 500]
            sql = (
                "SELECT c.id, c.doc_id, d.name, c.start_line, c.end_line, c.heading, c.text, d.meta FROM chunks c "
                f"JOIN documents d ON d.id = c.doc_id WHERE c.id IN ({','.join('?' * len(part))})"
            )
            for r in self._db.execute(sql, part):
                out[r[0]] = ChunkRow(r[0], r[1], r[2], r[3], r[4], r[5], r[6], json.loads(r[7]))
        return out

    # -- the graph ---------------------------------------------------------------------------

    def entities_of(self, chunk_ids: Iterable[int]) -> dict[int, list[int]]:
        ids = sorted(set(chunk_ids))
        out: dict[int, list[int]] = {}
        if ids:
            sql = f"SELECT chunk_id, entity_id FROM mentions WHERE chunk_id IN {_EACH} ORDER BY chunk_id, entity_id"
            for cid, eid in self._db.execute(sql, (_each(ids),)):
                out.setdefault(cid, []).append(eid)
        return out

    def neighbours(self, entity_ids: Iterable[int]) -> list[tuple[int, int, float]]:
        """(from entity, to entity, weight) for every relation touching ``entity_ids``."""
        ids = sorted(set(entity_ids))
        if not ids:
            return []
        sql = (
            f"SELECT a, b, SUM(weight) FROM relations WHERE a IN {_EACH} GROUP BY a, b "
            f"UNION ALL SELECT b, a, SUM(weight) FROM relations WHERE b IN {_EACH} GROUP BY a, b ORDER BY 1, 2"
        )
        return [(int(a), int(b), float(w)) for a, b, w in self._db.execute(sql, (_each(ids), _each(ids)))]

    def entity(self, name: str) -> tuple[int, str, str] | None:
        row = self._db.execute("SELECT id, name, kind FROM entities WHERE key = ?", (name.casefold(),)).fetchone()
        return None if row is None else (int(row[0]), str(row[1]), str(row[2]))

    def chunks_of_entities(self, entity_ids: Iterable[int], limit: int) -> list[int]:
        ids = sorted(set(entity_ids))
        if not ids:
            return []
        sql = (
            f"SELECT chunk_id, COUNT(*) AS n FROM mentions WHERE entity_id IN {_EACH} "
            "GROUP BY chunk_id ORDER BY n DESC, chunk_id LIMIT ?"
        )
        return [int(r[0]) for r in self._db.execute(sql, (_each(ids), limit))]

    def entity_names(self, ids: Iterable[int]) -> dict[int, str]:
        wanted = sorted(set(ids))
        if not wanted:
            return {}
        sql = f"SELECT id, name FROM entities WHERE id IN {_EACH}"
        return {int(i): str(n) for i, n in self._db.execute(sql, (_each(wanted),))}

    def stats(self) -> dict[str, Any]:
        def one(sql: str) -> Any:
            return self._db.execute(sql).fetchone()[0]

        return {
            "documents": one("SELECT COUNT(*) FROM documents"),
            "chunks": one("SELECT COUNT(*) FROM chunks"),
            "embedded_chunks": one("SELECT COUNT(*) FROM chunks WHERE vec IS NOT NULL"),
            "entities": one("SELECT COUNT(*) FROM entities"),
            "relations": one("SELECT COUNT(*) FROM relations"),
            "embedder": self.get_meta("embedder"),
            "path": self.path,
        }
