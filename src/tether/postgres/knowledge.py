"""Knowledge bases in Postgres: many named bases in one database, ranked as the SQLite store ranks.

Tables (component ``knowledge``, migration 1): ``kb_bases`` (one row per named base, with the
two counts BM25 needs: its chunks and their words), ``kb_meta``, ``kb_documents`` (metadata as
``jsonb``), ``kb_chunks`` (text; its words as :func:`tether.knowledge.store.tokens` splits them,
kept as a ``tsvector`` with positions under a GIN index, which finds phrases; the vector in an
untyped pgvector ``vector`` column, since the dimension is the embedder's), ``kb_postings`` (one
row per word and chunk with the word's count there: what BM25 reads), ``kb_terms`` (how many
chunks of a base hold each word) and the graph: ``kb_entities``, ``kb_mentions``,
``kb_relations``.

Keyword scores are FTS5's ``bm25()`` computed in SQL from the same inputs FTS5 uses (the base's
chunk count, its mean chunk length in words, each word's chunk count, each chunk's length and
the word's count in it), in FTS5's order of operations, so a corpus ranks as it does in SQLite;
ties go to the lower chunk id in both. Scoring from ``kb_postings`` reads only the query words'
rows, as FTS5 does; scoring from the ``tsvector`` would unnest every matching chunk's, 15 times
slower at 5,000 chunks. Vectors are searched exactly, ordered by pgvector's inner product (the
cosine, for the unit vectors embedders return).

Not identical to SQLite where a phrase lies past a chunk's 16,383rd word, or a word recurs more
than 256 times in a chunk (what a ``tsvector`` keeps of positions), or a word is longer than
2,046 bytes (not indexed), or a chunk's distinct words pass 1 MB together (a line of megabytes:
the words after that are not indexed).
"""

from __future__ import annotations

import json
import logging
import math
import time
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from tether.errors import ConfigError, StoreError
from tether.knowledge.store import (
    ANY_DOCUMENT,
    BM25_B,
    BM25_K1,
    FTS_WORDS,
    ChunkRow,
    DocumentInfo,
    check_replacing,
    dimension_error,
    tokens,
)
from tether.postgres.db import Database, Migration, redact, storable

__all__ = ["MIGRATIONS", "PgKnowledgeStore"]

MAX_POSITION = 16383  # the last position a tsvector records
MAX_POSITIONS = 256  # positions a tsvector keeps per word and chunk
MAX_LEXEME_BYTES = 2046
MAX_TSVECTOR_BYTES = 1_048_575  # the most a tsvector's words and positions may take, together
REINDEX_BATCH = 2000  # chunks read at a time when a base's words are indexed again

MIGRATIONS = [
    Migration(
        1,
        "knowledge bases",
        """
CREATE EXTENSION IF NOT EXISTS vector;
CREATE TABLE kb_bases (
    id serial PRIMARY KEY,
    name text NOT NULL UNIQUE,
    chunks bigint NOT NULL DEFAULT 0,
    words bigint NOT NULL DEFAULT 0
);
CREATE TABLE kb_meta (
    kb integer NOT NULL REFERENCES kb_bases(id) ON DELETE CASCADE,
    key text NOT NULL,
    value text NOT NULL,
    PRIMARY KEY (kb, key)
);
CREATE TABLE kb_documents (
    id bigserial PRIMARY KEY,
    kb integer NOT NULL REFERENCES kb_bases(id) ON DELETE CASCADE,
    name text NOT NULL,
    path text,
    title text NOT NULL DEFAULT '',
    hash text NOT NULL,
    meta jsonb NOT NULL DEFAULT '{}',
    added_at double precision NOT NULL,
    UNIQUE (kb, name)
);
CREATE INDEX kb_documents_meta ON kb_documents USING gin (meta jsonb_path_ops);
CREATE TABLE kb_chunks (
    id bigserial PRIMARY KEY,
    kb integer NOT NULL REFERENCES kb_bases(id) ON DELETE CASCADE,
    doc_id bigint NOT NULL REFERENCES kb_documents(id) ON DELETE CASCADE,
    start_line integer NOT NULL,
    end_line integer NOT NULL,
    heading text NOT NULL DEFAULT '',
    text text NOT NULL,
    words integer NOT NULL,
    tsv tsvector NOT NULL,
    vec vector
);
ALTER TABLE kb_chunks ALTER COLUMN vec SET STORAGE MAIN;
CREATE INDEX kb_chunks_doc ON kb_chunks (doc_id, start_line);
CREATE INDEX kb_chunks_tsv ON kb_chunks USING gin (tsv);
CREATE INDEX kb_chunks_vec ON kb_chunks (kb) WHERE vec IS NOT NULL;
CREATE TABLE kb_postings (
    kb integer NOT NULL REFERENCES kb_bases(id) ON DELETE CASCADE,
    term text NOT NULL,
    chunk_id bigint NOT NULL,
    doc_id bigint NOT NULL,
    tf integer NOT NULL,
    words integer NOT NULL,
    PRIMARY KEY (kb, term, chunk_id) INCLUDE (doc_id, tf, words)
);
CREATE TABLE kb_terms (
    kb integer NOT NULL REFERENCES kb_bases(id) ON DELETE CASCADE,
    term text NOT NULL,
    chunks integer NOT NULL,
    PRIMARY KEY (kb, term)
);
CREATE TABLE kb_entities (
    id bigserial PRIMARY KEY,
    kb integer NOT NULL REFERENCES kb_bases(id) ON DELETE CASCADE,
    key text NOT NULL,
    name text NOT NULL,
    kind text NOT NULL,
    UNIQUE (kb, key)
);
CREATE TABLE kb_mentions (
    entity_id bigint NOT NULL REFERENCES kb_entities(id) ON DELETE CASCADE,
    chunk_id bigint NOT NULL REFERENCES kb_chunks(id) ON DELETE CASCADE,
    PRIMARY KEY (entity_id, chunk_id)
);
CREATE INDEX kb_mentions_chunk ON kb_mentions (chunk_id);
CREATE TABLE kb_relations (
    a bigint NOT NULL REFERENCES kb_entities(id) ON DELETE CASCADE,
    b bigint NOT NULL REFERENCES kb_entities(id) ON DELETE CASCADE,
    kind text NOT NULL,
    weight double precision NOT NULL,
    doc_id bigint NOT NULL REFERENCES kb_documents(id) ON DELETE CASCADE,
    PRIMARY KEY (a, b, kind, doc_id)
);
CREATE INDEX kb_relations_b ON kb_relations (b);
CREATE INDEX kb_relations_doc ON kb_relations (doc_id);
""",
    ),
]

# BM25 as FTS5 computes it: idf * (f * (k1 + 1)) / (f + k1 * (1 - b + b * length / avgdl)),
# summed over the query's words in their order (float addition is not associative).
_BM25 = """
SELECT p.chunk_id, sum(q.idf * ((p.tf::float8 * %(k1_plus_1)s)
                                / (p.tf + %(k1)s * (%(one_minus_b)s + %(b)s * p.words / %(avgdl)s)))
                       ORDER BY q.ord) AS s
FROM unnest(%(terms)s::text[], %(idf)s::float8[]) WITH ORDINALITY AS q(term, idf, ord)
JOIN kb_postings p ON p.kb = %(kb)s AND p.term = q.term {docs}
GROUP BY p.chunk_id
ORDER BY s DESC, p.chunk_id
LIMIT %(limit)s
"""
_BM25_CONSTANTS = {"k1": BM25_K1, "k1_plus_1": BM25_K1 + 1.0, "b": BM25_B, "one_minus_b": 1 - BM25_B}


class PgKnowledgeStore:
    """The knowledge base ``name`` in a Postgres database (pgvector installed); made on first use."""

    def close(self) -> None:
        """Nothing to release: the pool is the process's (:func:`tether.postgres.db.close_all`)."""

    def __init__(self, db: Database, name: str = "default") -> None:
        from psycopg import errors

        self.db = db
        self.name = name
        try:
            db.migrate("knowledge", MIGRATIONS)
        except StoreError as exc:
            cause = exc.__cause__
            if not isinstance(cause, errors.InsufficientPrivilege | errors.FeatureNotSupported | errors.UndefinedFile):
                raise
            raise ConfigError(
                f"the knowledge base needs the pgvector extension in {redact(db.url)}, and this "
                f"user cannot add it ({str(cause).strip().splitlines()[0]}): install pgvector on the "
                "server and, as a superuser, run CREATE EXTENSION vector in that database"
            ) from cause
        made = db.execute("INSERT INTO kb_bases (name) VALUES (%s) ON CONFLICT (name) DO NOTHING RETURNING id", (name,))
        if made:  # a new base: its words are this tether's
            self.kb = int(made[0][0])
            self.set_meta("fts_words", FTS_WORDS)
            return
        # With the version of tokens() its words were indexed by, in the one query an open makes anyway
        row = db.execute(
            "SELECT b.id, m.value FROM kb_bases b LEFT JOIN kb_meta m ON m.kb = b.id AND m.key = 'fts_words' "
            "WHERE b.name = %s",
            (name,),
        )[0]
        self.kb = int(row[0])
        if _older_words(row[1]):
            self._index_words_again()

    @staticmethod
    def bases(db: Database) -> list[str]:
        """The names of the bases made in this database (those whose embedder is recorded)."""
        db.migrate("knowledge", MIGRATIONS)
        rows = db.execute(
            "SELECT b.name FROM kb_bases b JOIN kb_meta m ON m.kb = b.id AND m.key = 'embedder' "
            'ORDER BY b.name COLLATE "C"'
        )
        return [str(r[0]) for r in rows]

    @staticmethod
    def drop(db: Database, name: str) -> bool:
        """Delete base ``name`` and all it holds (everything hangs off its row). False: no such base."""
        db.migrate("knowledge", MIGRATIONS)
        with db.tx() as conn:
            gone = conn.execute("DELETE FROM kb_bases WHERE name = %s RETURNING id", (name,)).fetchone()
        return gone is not None

    # -- meta --------------------------------------------------------------------------------

    def _dropped(self, what: str) -> StoreError:
        """The base was dropped (``tether kb drop``, maybe on another machine) while this store had it open."""
        return StoreError(
            f"knowledge base {self.name!r} was dropped from the database {redact(self.db.url)} (tether kb drop) "
            f"while this process had it open; {what}. Add its documents again (tether kb add) and restart the "
            "processes that serve it, or give the agent another base"
        )

    def get_meta(self, key: str) -> str | None:
        rows = self.db.execute("SELECT value FROM kb_meta WHERE kb = %s AND key = %s", (self.kb, key))
        return str(rows[0][0]) if rows else None

    def set_meta(self, key: str, value: str) -> None:
        self.db.execute(
            "INSERT INTO kb_meta (kb, key, value) VALUES (%s, %s, %s) ON CONFLICT (kb, key) "
            "DO UPDATE SET value = excluded.value",
            (self.kb, key, value),
        )

    def claim_meta(self, key: str, value: str) -> str:
        self.db.execute(
            "INSERT INTO kb_meta (kb, key, value) VALUES (%s, %s, %s) ON CONFLICT (kb, key) DO NOTHING",
            (self.kb, key, value),
        )
        return str(self.db.execute("SELECT value FROM kb_meta WHERE kb = %s AND key = %s", (self.kb, key))[0][0])

    def _index_words_again(self) -> None:
        """A base whose words were indexed by an earlier :func:`tokens` (before :data:`FTS_WORDS`:
        a Thai sentence one word, found by no word inside it): every chunk's words, postings and
        the base's counts made again, once, in one transaction, a batch of chunks at a time, and
        said so on the ``tether.knowledge`` log (one line on stderr from the command line). Not
        waited for: another process writing to the base leaves it to a later open (searches
        meanwhile see the earlier words, as before)."""
        from psycopg import errors

        try:
            with self.db.tx() as conn:
                if (
                    conn.execute("SELECT 1 FROM kb_bases WHERE id = %s FOR UPDATE NOWAIT", (self.kb,)).fetchone()
                    is None
                ):
                    return  # dropped meanwhile
                now = conn.execute(
                    "SELECT value FROM kb_meta WHERE kb = %s AND key = 'fts_words'", (self.kb,)
                ).fetchone()
                if not _older_words(None if now is None else now[0]):
                    return  # another process made them again meanwhile
                chunks = int(conn.execute("SELECT count(*) FROM kb_chunks WHERE kb = %s", (self.kb,)).fetchone()[0])
                if chunks:
                    logging.getLogger("tether.knowledge").warning(
                        "the full-text index of the knowledge base %r in %s is being made again, once (%d chunks): "
                        "this tether splits the text into words otherwise than the one that made it",
                        self.name,
                        redact(self.db.url),
                        chunks,
                    )
                conn.execute("DELETE FROM kb_postings WHERE kb = %s", (self.kb,))
                conn.execute("DELETE FROM kb_terms WHERE kb = %s", (self.kb,))
                conn.execute("UPDATE kb_bases SET chunks = 0, words = 0 WHERE id = %s", (self.kb,))
                after = -1
                while rows := conn.execute(
                    "SELECT id, doc_id, heading, text FROM kb_chunks WHERE kb = %s AND id > %s ORDER BY id LIMIT %s",
                    (self.kb, after, REINDEX_BATCH),
                ).fetchall():
                    self._index_again(conn, rows)
                    after = int(rows[-1][0])
                conn.execute(
                    "INSERT INTO kb_meta (kb, key, value) VALUES (%s, 'fts_words', %s) ON CONFLICT (kb, key) "
                    "DO UPDATE SET value = excluded.value",
                    (self.kb, FTS_WORDS),
                )
                self._bump(conn)
        except errors.LockNotAvailable:
            return

    def _index_again(self, conn: Any, rows: Sequence[tuple[Any, ...]]) -> None:
        """The chunks ``rows`` (id, document, heading, text) indexed in this tether's words."""
        indexed = [_Indexed.of(heading, text) for _, _, heading, text in rows]
        ids = [int(r[0]) for r in rows]
        conn.execute(
            "UPDATE kb_chunks c SET words = u.w, tsv = u.v::tsvector "
            "FROM unnest(%s::bigint[], %s::int[], %s::text[]) AS u(i, w, v) WHERE c.id = u.i",
            (ids, [one.words for one in indexed], [one.tsv for one in indexed]),
        )
        self._insert_postings(conn, [int(r[1]) for r in rows], ids, indexed)
        self._count(
            conn, Counter(t for one in indexed for t in one.counts), len(indexed), sum(one.words for one in indexed)
        )

    def _bump(self, conn: Any) -> None:
        conn.execute(
            "INSERT INTO kb_meta (kb, key, value) VALUES (%s, 'generation', '1') ON CONFLICT (kb, key) "
            "DO UPDATE SET value = (kb_meta.value::bigint + 1)::text",
            (self.kb,),
        )

    # -- documents ---------------------------------------------------------------------------

    _DOC = (
        "SELECT d.id, d.name, d.path, d.title, d.hash, d.meta, d.added_at, "
        "(SELECT count(*) FROM kb_chunks c WHERE c.doc_id = d.id) FROM kb_documents d WHERE d.kb = %s"
    )

    @staticmethod
    def _info(row: Sequence[Any]) -> DocumentInfo:
        return DocumentInfo(int(row[0]), row[1], row[2], row[3], row[4], row[5], int(row[7]), float(row[6]))

    def document(self, name: str) -> DocumentInfo | None:
        if "\x00" in name:
            return None
        rows = self.db.execute(self._DOC + " AND d.name = %s", (self.kb, name))
        return self._info(rows[0]) if rows else None

    def documents(self) -> list[DocumentInfo]:
        # Byte order, as SQLite sorts text, whatever the database's collation.
        return [self._info(r) for r in self.db.execute(self._DOC + ' ORDER BY d.name COLLATE "C"', (self.kb,))]

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
        """Put a document (replacing any of the same name) in one transaction; see
        :meth:`tether.knowledge.store.SqliteKnowledgeStore.replace_document`."""
        if "\x00" in name:
            raise StoreError(
                f"document {name!r} was not added: its name holds a NUL character (\\x00), which the "
                f"database {redact(self.db.url)} cannot store. Name it without that character."
            )
        indexed = [_Indexed.of(heading, text) for _, _, heading, text, _ in chunks]
        with self.db.tx() as conn:
            # One writer per base at a time, so its counts (chunks, words, kb_terms) stay exact.
            if conn.execute("SELECT 1 FROM kb_bases WHERE id = %s FOR UPDATE", (self.kb,)).fetchone() is None:
                raise self._dropped("nothing was added")
            row = conn.execute("SELECT id FROM kb_documents WHERE kb = %s AND name = %s", (self.kb, name)).fetchone()
            check_replacing(name, None if row is None else int(row[0]), replacing)
            self._delete(conn, name)
            doc_id = int(
                conn.execute(
                    "INSERT INTO kb_documents (kb, name, path, title, hash, meta, added_at) "
                    "VALUES (%s, %s, %s, %s, %s, %s::jsonb, %s) RETURNING id",
                    (
                        self.kb,
                        name,
                        path,
                        _text(title),
                        hash,
                        json.dumps(storable(meta), ensure_ascii=False),
                        time.time(),
                    ),
                ).fetchone()[0]
            )
            ids = self._insert_chunks(conn, doc_id, chunks, indexed)
            self._insert_postings(conn, [doc_id] * len(ids), ids, indexed)
            self._count(
                conn, Counter(t for one in indexed for t in one.counts), len(indexed), sum(one.words for one in indexed)
            )
            self._insert_graph(conn, doc_id, ids, entities, relations)
            self._bump(conn)
        return doc_id

    def _insert_chunks(
        self, conn: Any, doc_id: int, chunks: Sequence[tuple[int, int, str, str, bytes | None]], indexed: list[_Indexed]
    ) -> list[int]:
        if not chunks:
            return []
        # Ids taken first and given in chunk order: ties rank by id, as SQLite's rowids do.
        ids = sorted(
            int(r[0])
            for r in conn.execute("SELECT nextval('kb_chunks_id_seq') FROM generate_series(1, %s)", (len(chunks),))
        )
        conn.execute(
            "INSERT INTO kb_chunks (id, kb, doc_id, start_line, end_line, heading, text, words, tsv, vec) "
            "SELECT i, %s, %s, s, e, h, t, w, v::tsvector, x::vector FROM unnest(%s::bigint[], %s::int[], %s::int[], "
            "%s::text[], %s::text[], %s::int[], %s::text[], %s::text[]) AS u(i, s, e, h, t, w, v, x)",
            (
                self.kb,
                doc_id,
                ids,
                [c[0] for c in chunks],
                [c[1] for c in chunks],
                [_text(c[2]) for c in chunks],
                [_text(c[3]) for c in chunks],
                [one.words for one in indexed],
                [one.tsv for one in indexed],
                [None if c[4] is None else _vector_text(c[4]) for c in chunks],
            ),
        )
        return ids

    def _insert_postings(self, conn: Any, doc_ids: list[int], ids: list[int], indexed: list[_Indexed]) -> None:
        """The postings of the chunks ``ids`` (of the documents ``doc_ids``, one each), indexed as ``indexed``."""
        rows = [
            (term, cid, doc, tf, one.words)
            for cid, doc, one in zip(ids, doc_ids, indexed, strict=True)
            for term, tf in one.counts.items()
        ]
        if rows:
            conn.execute(
                "INSERT INTO kb_postings (kb, term, chunk_id, doc_id, tf, words) SELECT %s, t, c, d, f, w "
                "FROM unnest(%s::text[], %s::bigint[], %s::bigint[], %s::int[], %s::int[]) AS u(t, c, d, f, w)",
                (self.kb, *map(list, zip(*rows, strict=True))),
            )

    def _count(self, conn: Any, terms: Counter[str], chunks: int, words: int) -> None:
        """Add (or, with negative counts, take away) chunks and words to the base's BM25 counts."""
        conn.execute(
            "UPDATE kb_bases SET chunks = chunks + %s, words = words + %s WHERE id = %s", (chunks, words, self.kb)
        )
        if not terms:
            return
        names = sorted(terms)  # one order for every writer: no lock cycles
        conn.execute(
            "INSERT INTO kb_terms (kb, term, chunks) SELECT %s, t, n FROM unnest(%s::text[], %s::int[]) "
            "AS u(t, n) ON CONFLICT (kb, term) DO UPDATE SET chunks = kb_terms.chunks + excluded.chunks",
            (self.kb, names, [terms[t] for t in names]),
        )
        gone = [t for t in names if terms[t] < 0]
        if gone:
            conn.execute("DELETE FROM kb_terms WHERE kb = %s AND term = ANY(%s) AND chunks <= 0", (self.kb, gone))

    def _insert_graph(
        self,
        conn: Any,
        doc_id: int,
        chunk_ids: list[int],
        entities: Sequence[tuple[str, str, Sequence[int]]],
        relations: Sequence[tuple[str, str, str, float]],
    ) -> None:
        named: dict[str, tuple[str, str]] = {}  # key: (name, kind); the first seen wins, as in SQLite
        for ename, kind, _ in entities:
            named.setdefault(ename.casefold(), (ename, kind))
        pairs = [r for r in relations if r[0].casefold() != r[1].casefold()]
        for a, b, _, _ in pairs:
            named.setdefault(a.casefold(), (a, "term"))
            named.setdefault(b.casefold(), (b, "term"))
        if not named:
            return
        keys = list(named)
        conn.execute(
            "INSERT INTO kb_entities (kb, key, name, kind) SELECT %s, k, n, t FROM unnest(%s::text[], "
            "%s::text[], %s::text[]) WITH ORDINALITY AS u(k, n, t, o) ORDER BY o ON CONFLICT (kb, key) "
            "DO NOTHING",
            (self.kb, keys, [named[k][0] for k in keys], [named[k][1] for k in keys]),
        )
        ids = {
            str(k): int(i)
            for k, i in conn.execute("SELECT key, id FROM kb_entities WHERE kb = %s AND key = ANY(%s)", (self.kb, keys))
        }
        mentions = sorted({(ids[ename.casefold()], chunk_ids[i]) for ename, _, at in entities for i in at})
        if mentions:
            conn.execute(
                "INSERT INTO kb_mentions (entity_id, chunk_id) SELECT * FROM unnest(%s::bigint[], "
                "%s::bigint[]) ON CONFLICT DO NOTHING",
                ([m[0] for m in mentions], [m[1] for m in mentions]),
            )
        weights: dict[tuple[int, int, str], float] = {}
        for a, b, kind, weight in pairs:
            ea, eb = ids[a.casefold()], ids[b.casefold()]
            key = (min(ea, eb), max(ea, eb), kind)
            weights[key] = weights[key] + weight if key in weights else weight
        if weights:
            rows = list(weights)
            conn.execute(
                "INSERT INTO kb_relations (a, b, kind, weight, doc_id) SELECT a, b, k, w, %s FROM "
                "unnest(%s::bigint[], %s::bigint[], %s::text[], %s::float8[]) AS u(a, b, k, w)",
                (doc_id, [r[0] for r in rows], [r[1] for r in rows], [r[2] for r in rows], [weights[r] for r in rows]),
            )

    def _delete(self, conn: Any, name: str) -> bool:
        row = conn.execute("SELECT id FROM kb_documents WHERE kb = %s AND name = %s", (self.kb, name)).fetchone()
        if row is None:
            return False
        doc_id = int(row[0])
        chunks, words = conn.execute(
            "SELECT count(*), coalesce(sum(words), 0) FROM kb_chunks WHERE doc_id = %s", (doc_id,)
        ).fetchone()
        # The chunks' own words say which postings are theirs: found by the primary key.
        terms = Counter(
            {
                str(t): -int(n)
                for t, n in conn.execute(
                    "WITH mine AS (SELECT u.lexeme AS term, c.id FROM kb_chunks c, unnest(c.tsv) u "
                    "WHERE c.doc_id = %(d)s), "
                    "gone AS (DELETE FROM kb_postings p USING mine WHERE p.kb = %(kb)s AND p.term = mine.term "
                    "AND p.chunk_id = mine.id RETURNING p.term) SELECT term, count(*) FROM gone GROUP BY term",
                    {"d": doc_id, "kb": self.kb},
                )
            }
        )
        self._count(conn, terms, -int(chunks), -int(words))
        touched = [
            int(r[0])
            for r in conn.execute(
                "SELECT m.entity_id FROM kb_mentions m JOIN kb_chunks c ON c.id = m.chunk_id WHERE c.doc_id = %(d)s "
                "UNION SELECT a FROM kb_relations WHERE doc_id = %(d)s "
                "UNION SELECT b FROM kb_relations WHERE doc_id = %(d)s",
                {"d": doc_id},
            )
        ]
        conn.execute("DELETE FROM kb_documents WHERE id = %s", (doc_id,))  # chunks, mentions, relations cascade
        if touched:  # entities nothing mentions or relates any more
            conn.execute(
                "DELETE FROM kb_entities e WHERE e.id = ANY(%s) "
                "AND NOT EXISTS (SELECT 1 FROM kb_mentions m WHERE m.entity_id = e.id) "
                "AND NOT EXISTS (SELECT 1 FROM kb_relations r WHERE r.a = e.id) "
                "AND NOT EXISTS (SELECT 1 FROM kb_relations r WHERE r.b = e.id)",
                (touched,),
            )
        return True

    def remove_document(self, name: str) -> bool:
        if "\x00" in name:
            return False  # no document's name holds one
        with self.db.tx() as conn:
            if conn.execute("SELECT 1 FROM kb_bases WHERE id = %s FOR UPDATE", (self.kb,)).fetchone() is None:
                return False  # dropped with the base
            gone = self._delete(conn, name)
            if gone:
                self._bump(conn)
        return gone

    def set_document_hash(self, name: str, hash: str) -> None:
        self.db.execute("UPDATE kb_documents SET hash = %s WHERE kb = %s AND name = %s", (hash, self.kb, _text(name)))

    def doc_ids(self, filters: dict[str, str]) -> set[int] | None:
        """Documents whose metadata (or name, path, title) equal every filter; None: no filter.
        A metadata filter matches string values only, as SQLite's ``json_extract`` comparison does."""
        if not filters:
            return None
        if any("\x00" in k or "\x00" in v for k, v in filters.items()):
            return set()  # Postgres text and jsonb hold no NUL, so nothing stored has one
        args: list[Any]
        where, args = ["kb = %s"], [self.kb]
        for key, value in filters.items():
            if key in ("name", "path", "title"):
                where.append(f"{key} = %s")
                args.append(value)
            else:
                where.append("meta @> %s::jsonb")
                args.append(json.dumps({key: value}))
        return {int(r[0]) for r in self.db.execute("SELECT id FROM kb_documents WHERE " + " AND ".join(where), args)}

    # -- search primitives -------------------------------------------------------------------

    def keyword(
        self, terms: Sequence[str], limit: int, doc_ids: set[int] | None, *, phrase: bool = False
    ) -> list[tuple[int, float]]:
        """Chunk ids for the terms (ORed, or one phrase), best BM25 first, with their scores."""
        words = [t for t in terms if t and len(t.encode()) <= MAX_LEXEME_BYTES]
        if not words or (phrase and len(words) < len(terms)) or (doc_ids is not None and not doc_ids):
            return []
        with self.db.connection() as conn:
            rows = conn.execute(
                "SELECT b.chunks, b.words, t.term, t.chunks FROM kb_bases b LEFT JOIN kb_terms t "
                "ON t.kb = b.id AND t.term = ANY(%s) WHERE b.id = %s",
                (words, self.kb),
            ).fetchall()
            if not rows:
                raise self._dropped("nothing was searched")
            total, length = int(rows[0][0]), int(rows[0][1])
            if total == 0:
                return []
            if phrase and len(words) > 1:
                return self._phrase(conn, words, limit, doc_ids, total, length)
            df = {str(r[2]): int(r[3]) for r in rows if r[2] is not None}
            args: dict[str, Any] = {
                "terms": words,
                "idf": [_idf(total, df.get(w, 0)) for w in words],
                "avgdl": length / total,
                "kb": self.kb,
                "limit": limit,
                "docs": None,
                **_BM25_CONSTANTS,
            }
            docs = ""
            if doc_ids is not None:
                docs, args["docs"] = "AND p.doc_id = ANY(%(docs)s)", sorted(doc_ids)
            return [(int(i), float(s)) for i, s in conn.execute(_BM25.format(docs=docs), args)]

    def _phrase(
        self, conn: Any, words: list[str], limit: int, doc_ids: set[int] | None, total: int, length: int
    ) -> list[tuple[int, float]]:
        """BM25 of a phrase, as FTS5 scores it: one term whose frequency is how often the words
        stand together in this order; counted here from the tsvector's positions."""
        at: dict[int, tuple[int, int, dict[str, set[int]]]] = {}
        for cid, doc, n, lexeme, positions in conn.execute(
            "SELECT c.id, c.doc_id, c.words, u.lexeme, u.positions FROM kb_chunks c, unnest(c.tsv) u "
            "WHERE c.kb = %s AND c.tsv @@ %s::tsquery AND u.lexeme = ANY(%s)",
            (self.kb, " <-> ".join(map(_lexeme, words)), words),
        ):
            at.setdefault(int(cid), (int(doc), int(n), {}))[2][str(lexeme)] = set(positions or ())
        found = {}
        for cid, (doc, n, where) in at.items():
            f = sum(1 for p in where.get(words[0], ()) if all(p + i in where.get(w, ()) for i, w in enumerate(words)))
            if f:
                found[cid] = (doc, n, f)
        idf, avgdl = _idf(total, len(found)), length / total
        scored = [
            (cid, _bm25(idf, f, n, avgdl)) for cid, (doc, n, f) in found.items() if doc_ids is None or doc in doc_ids
        ]
        return sorted(scored, key=lambda r: (-r[1], r[0]))[:limit]

    def term_counts(self, terms: Sequence[str]) -> tuple[int, dict[str, int]]:
        """(chunks in the base, how many chunks hold each term)."""
        if not terms:
            return 0, {}
        base = self.db.execute("SELECT chunks FROM kb_bases WHERE id = %s", (self.kb,))
        if not base:
            raise self._dropped("nothing was searched")
        total = int(base[0][0])
        rows = self.db.execute(
            "SELECT term, chunks FROM kb_terms WHERE kb = %s AND term = ANY(%s)", (self.kb, list(terms))
        )
        return total, {str(t): int(n) for t, n in rows}

    def has_vectors(self) -> bool:
        return bool(
            self.db.execute("SELECT EXISTS (SELECT 1 FROM kb_chunks WHERE kb = %s AND vec IS NOT NULL)", (self.kb,))[0][
                0
            ]
        )

    def coverage(self) -> tuple[int, int]:
        ((embedded, chunks),) = self.db.execute(
            "SELECT (SELECT count(*) FROM kb_chunks WHERE kb = %(kb)s AND vec IS NOT NULL), "
            "(SELECT chunks FROM kb_bases WHERE id = %(kb)s)",
            {"kb": self.kb},
        )
        if chunks is None:
            raise self._dropped("it holds nothing")
        return int(embedded), int(chunks)

    _INDEXED = "CASE WHEN heading = '' THEN text ELSE heading || chr(10) || text END"

    def unembedded(self, limit: int, after: int = 0) -> list[tuple[int, str]]:
        rows = self.db.execute(
            f"SELECT id, {self._INDEXED} FROM kb_chunks WHERE kb = %s AND vec IS NULL AND id > %s ORDER BY id LIMIT %s",
            (self.kb, after, limit),
        )
        return [(int(i), str(t)) for i, t in rows]

    def set_vectors(self, rows: Sequence[tuple[int, str, bytes]]) -> int:
        if not rows:
            return 0
        with self.db.tx() as conn:
            done = conn.execute(
                f"UPDATE kb_chunks c SET vec = u.v::vector FROM unnest(%s::bigint[], %s::text[], %s::text[]) "
                f"AS u(i, t, v) WHERE c.kb = %s AND c.id = u.i AND c.vec IS NULL AND {self._INDEXED} = u.t",
                ([r[0] for r in rows], [_text(r[1]) for r in rows], [_vector_text(r[2]) for r in rows], self.kb),
            ).rowcount
            if done:
                self._bump(conn)
        return int(done)

    def kept_vectors(self, name: str) -> dict[str, bytes]:
        import numpy as np

        if "\x00" in name:
            return {}
        rows = self.db.execute(
            f"SELECT {self._INDEXED}, vec::real[] FROM kb_chunks WHERE kb = %s AND vec IS NOT NULL "
            "AND doc_id = (SELECT id FROM kb_documents WHERE kb = %s AND name = %s)",
            (self.kb, self.kb, name),
        )
        return {str(t): np.asarray(v, dtype=np.float32).tobytes() for t, v in rows}

    def nearest(
        self, vector: Any, limit: int, doc_ids: set[int] | None, among: set[int] | None = None
    ) -> list[tuple[int, float]]:
        """Exact search in SQL: every embedded chunk of the base scored by inner product."""
        from psycopg import errors

        if (doc_ids is not None and not doc_ids) or (among is not None and not among):
            return []
        sql = "SELECT id, -(vec <#> %s::vector) AS s FROM kb_chunks WHERE kb = %s AND vec IS NOT NULL"
        args: list[Any] = [_vector_text(vector), self.kb]
        if doc_ids is not None:
            sql += " AND doc_id = ANY(%s)"
            args.append(sorted(doc_ids))
        if among is not None:
            sql += " AND id = ANY(%s)"
            args.append(sorted(among))
        try:
            rows = self.db.execute(sql + " ORDER BY s DESC, id LIMIT %s", [*args, limit])
        except errors.DataException as exc:  # "different vector dimensions 384 and 256"
            dims = self.db.execute(
                "SELECT vector_dims(vec) FROM kb_chunks WHERE kb = %s AND vec IS NOT NULL LIMIT 1", (self.kb,)
            )
            if not dims:
                raise
            raise dimension_error(len(vector), int(dims[0][0])) from exc
        return [(int(i), float(s)) for i, s in rows]

    def chunk_ids(self, doc_ids: Iterable[int]) -> list[int]:
        """Every chunk of these documents, in document order."""
        ids = sorted(set(doc_ids))
        if not ids:
            return []
        return [
            int(r[0])
            for r in self.db.execute(
                "SELECT id FROM kb_chunks WHERE kb = %s AND doc_id = ANY(%s) ORDER BY doc_id, start_line, id",
                (self.kb, ids),
            )
        ]

    def chunks(self, ids: Iterable[int]) -> dict[int, ChunkRow]:
        wanted = sorted(set(ids))
        if not wanted:
            return {}
        rows = self.db.execute(
            "SELECT c.id, c.doc_id, d.name, c.start_line, c.end_line, c.heading, c.text, d.meta FROM kb_chunks c "
            "JOIN kb_documents d ON d.id = c.doc_id WHERE c.kb = %s AND c.id = ANY(%s)",
            (self.kb, wanted),
        )
        return {int(r[0]): ChunkRow(int(r[0]), int(r[1]), r[2], r[3], r[4], r[5], r[6], r[7]) for r in rows}

    # -- the graph ---------------------------------------------------------------------------

    def entities_of(self, chunk_ids: Iterable[int]) -> dict[int, list[int]]:
        out: dict[int, list[int]] = {}
        ids = sorted(set(chunk_ids))
        if ids:
            for cid, eid in self.db.execute(
                "SELECT chunk_id, entity_id FROM kb_mentions WHERE chunk_id = ANY(%s) ORDER BY chunk_id, entity_id",
                (ids,),
            ):
                out.setdefault(int(cid), []).append(int(eid))
        return out

    def neighbours(self, entity_ids: Iterable[int]) -> list[tuple[int, int, float]]:
        """(from entity, to entity, weight) for every relation touching ``entity_ids``."""
        ids = sorted(set(entity_ids))
        if not ids:
            return []
        rows = self.db.execute(
            "SELECT a, b, sum(weight) FROM kb_relations WHERE a = ANY(%(ids)s) GROUP BY a, b UNION ALL "
            "SELECT b, a, sum(weight) FROM kb_relations WHERE b = ANY(%(ids)s) GROUP BY a, b ORDER BY 1, 2",
            {"ids": ids},
        )
        return [(int(a), int(b), float(w)) for a, b, w in rows]

    def entity(self, name: str) -> tuple[int, str, str] | None:
        if "\x00" in name:
            return None  # no name stored holds a NUL (SQLite's answer: no such entity)
        rows = self.db.execute(
            "SELECT id, name, kind FROM kb_entities WHERE kb = %s AND key = %s", (self.kb, name.casefold())
        )
        return (int(rows[0][0]), str(rows[0][1]), str(rows[0][2])) if rows else None

    def chunks_of_entities(self, entity_ids: Iterable[int], limit: int) -> list[int]:
        ids = sorted(set(entity_ids))
        if not ids:
            return []
        return [
            int(r[0])
            for r in self.db.execute(
                "SELECT chunk_id, count(*) AS n FROM kb_mentions WHERE entity_id = ANY(%s) "
                "GROUP BY chunk_id ORDER BY n DESC, chunk_id LIMIT %s",
                (ids, limit),
            )
        ]

    def entity_names(self, ids: Iterable[int]) -> dict[int, str]:
        wanted = sorted(set(ids))
        if not wanted:
            return {}
        return {
            int(i): str(n)
            for i, n in self.db.execute(
                "SELECT id, name FROM kb_entities WHERE kb = %s AND id = ANY(%s)", (self.kb, wanted)
            )
        }

    def stats(self) -> dict[str, Any]:
        ((documents, chunks, embedded, entities, relations),) = self.db.execute(
            "SELECT (SELECT count(*) FROM kb_documents WHERE kb = %(kb)s), "
            "(SELECT chunks FROM kb_bases WHERE id = %(kb)s), "
            "(SELECT count(*) FROM kb_chunks WHERE kb = %(kb)s AND vec IS NOT NULL), "
            "(SELECT count(*) FROM kb_entities WHERE kb = %(kb)s), "
            "(SELECT count(*) FROM kb_relations r JOIN kb_documents d ON d.id = r.doc_id WHERE d.kb = %(kb)s)",
            {"kb": self.kb},
        )
        if chunks is None:
            raise self._dropped("it holds nothing")
        return {
            "documents": int(documents),
            "chunks": int(chunks),
            "embedded_chunks": int(embedded),
            "entities": int(entities),
            "relations": int(relations),
            "embedder": self.get_meta("embedder"),
            "path": f"{redact(self.db.url)} (knowledge base {self.name!r})",
        }


@dataclass(frozen=True)
class _Indexed:
    """A chunk as the index sees it, as FTS5 indexes it: heading and text in tether's tokens."""

    words: int  # its length in words
    counts: dict[str, int]  # each word (but the over-long) and how often it occurs
    tsv: str  # the tsvector's text: the words with their positions, from 1

    @classmethod
    def of(cls, heading: str, text: str) -> _Indexed:
        words = tokens(f"{heading}\n{text}" if heading else text)
        found: dict[str, list[int]] = {}
        for position, word in enumerate(words, 1):
            if len(word.encode()) <= MAX_LEXEME_BYTES:
                found.setdefault(word, []).append(position)
        at: dict[str, list[int]] = {}
        room = MAX_TSVECTOR_BYTES  # a one-line chunk of 2 MB was refused, and its whole document
        for word, ps in found.items():
            # Postgres counts each word's bytes (aligned to 2), its count of positions and each position
            room -= len(word.encode()) + 3 + 2 * min(len(ps), MAX_POSITIONS)
            if room < 0:
                break  # the words first seen later are not indexed in this chunk
            at[word] = ps
        tsv = " ".join(
            f"{_lexeme(w)}:{','.join(str(min(p, MAX_POSITION)) for p in ps[:MAX_POSITIONS])}" for w, ps in at.items()
        )
        return cls(len(words), {w: len(ps) for w, ps in at.items()}, tsv)


def _older_words(recorded: str | None) -> bool:
    """Whether a base whose words are recorded as ``recorded`` (None: a base made before Postgres
    recorded them) was indexed by an earlier :func:`tokens`. A newer tether's base is left alone:
    machines of two versions sharing a database would make the index again on every open."""
    return recorded is None or not recorded.isdigit() or int(recorded) < int(FTS_WORDS)


def _lexeme(word: str) -> str:
    """A word quoted for tsvector and tsquery input, so nothing in it is syntax."""
    return "'" + word.replace("\\", "\\\\").replace("'", "''") + "'"


def _idf(total: int, holding: int) -> float:
    idf = math.log((total - holding + 0.5) / (holding + 0.5))
    return idf if idf > 0.0 else 1e-6  # FTS5's floor for words in more than half the chunks


def _bm25(idf: float, f: int, length: int, avgdl: float) -> float:
    return idf * ((f * (BM25_K1 + 1.0)) / (f + BM25_K1 * (1 - BM25_B + BM25_B * length / avgdl)))


def _text(value: str) -> str:
    """Postgres text holds no NUL; U+FFFD splits words where NUL did, so the index is the same."""
    return value.replace("\x00", "\ufffd")


def _vector_text(vector: Any) -> str:
    """pgvector's text form of a float32 vector (a blob or an array); 9 digits give back the same float32."""
    import numpy as np

    values = np.frombuffer(vector, dtype=np.float32) if isinstance(vector, bytes) else np.asarray(vector, np.float32)
    return "[" + ",".join(f"{x:.9g}" for x in values.tolist()) + "]"
