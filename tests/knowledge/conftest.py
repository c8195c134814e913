"""Knowledge bases on both stores: ``open_kb`` opens one on the backend under test (SQLite in
memory or in a file; Postgres in one database shared by the suite, a base of its own per test),
and the checks of what each store keeps besides the chunks."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Protocol

import pytest

from tether.knowledge import KnowledgeBase, SqliteKnowledgeStore


class Opener(Protocol):
    def __call__(self, where: str | None = None, /, **kwargs: Any) -> KnowledgeBase:
        """A new base, or with ``where`` the base of that name (opened again if it exists);
        ``kwargs`` go to :class:`KnowledgeBase`."""
        ...


@pytest.fixture(scope="session")
def pg_kb_url(pg_server: Any) -> Iterator[str]:
    """One database for the whole suite: a fresh one per test costs a third of a second, and
    bases of different names in one database must not see each other anyway."""
    from tether.postgres.db import close_all

    yield pg_server.fresh_database()
    close_all()


@pytest.fixture
def open_kb(backend: str, request: pytest.FixtureRequest, tmp_path: Path) -> Opener:
    if backend == "sqlite":

        def open_sqlite(where: str | None = None, /, **kwargs: Any) -> KnowledgeBase:
            return KnowledgeBase.open(tmp_path / f"{where}.db" if where else ":memory:", **kwargs)

        return open_sqlite
    from tether.postgres.db import database
    from tether.postgres.knowledge import PgKnowledgeStore

    url = request.getfixturevalue("pg_kb_url")
    test = uuid.uuid4().hex[:12]

    def open_postgres(where: str | None = None, /, **kwargs: Any) -> KnowledgeBase:
        name = f"{test}/{where or uuid.uuid4().hex[:12]}"
        return KnowledgeBase(PgKnowledgeStore(database(url), name), **kwargs)

    return open_postgres


def check_index(kb: KnowledgeBase) -> None:
    """The full-text index holds exactly the chunks, and every entity is mentioned or related."""
    if isinstance(kb.store, SqliteKnowledgeStore):
        db = kb.store._db
        assert (
            db.execute("SELECT COUNT(*) FROM chunks_fts").fetchone()
            == db.execute("SELECT COUNT(*) FROM chunks").fetchone()
        )
        assert (
            db.execute("SELECT COUNT(*) FROM chunks_fts WHERE rowid NOT IN (SELECT id FROM chunks)").fetchone()[0] == 0
        )
        orphans = db.execute(
            "SELECT COUNT(*) FROM entities WHERE id NOT IN (SELECT entity_id FROM mentions) AND id "
            "NOT IN (SELECT a FROM relations) AND id NOT IN (SELECT b FROM relations)"
        ).fetchone()[0]
    else:
        store: Any = kb.store
        kb_id = store.kb
        # The counts BM25 reads are what a recount from the chunks gives.
        assert store.db.execute("SELECT chunks, words FROM kb_bases WHERE id = %s", (kb_id,)) == store.db.execute(
            "SELECT count(*), coalesce(sum(words), 0) FROM kb_chunks WHERE kb = %s", (kb_id,)
        )
        kept = store.db.execute("SELECT term, chunks FROM kb_terms WHERE kb = %s ORDER BY term", (kb_id,))
        recount = store.db.execute(
            "SELECT u.lexeme, count(*) FROM kb_chunks c, unnest(c.tsv) u WHERE c.kb = %s "
            "GROUP BY u.lexeme ORDER BY u.lexeme",
            (kb_id,),
        )
        assert kept == recount
        # kb_postings (what BM25 reads) says what the chunks' tsvectors say.
        postings = store.db.execute(
            "SELECT term, chunk_id, doc_id, tf, words FROM kb_postings WHERE kb = %s ORDER BY term, chunk_id", (kb_id,)
        )
        assert postings == store.db.execute(
            "SELECT u.lexeme, c.id, c.doc_id, cardinality(u.positions), c.words FROM kb_chunks c, unnest(c.tsv) u "
            "WHERE c.kb = %s ORDER BY u.lexeme, c.id",
            (kb_id,),
        )
        orphans = store.db.execute(
            "SELECT count(*) FROM kb_entities e WHERE e.kb = %s AND NOT EXISTS (SELECT 1 FROM kb_mentions m WHERE "
            "m.entity_id = e.id) AND NOT EXISTS (SELECT 1 FROM kb_relations r WHERE e.id IN (r.a, r.b))",
            (kb_id,),
        )[0][0]
    assert orphans == 0


def leftovers(kb: KnowledgeBase, doc_id: int, chunk_ids: list[int]) -> dict[str, int]:
    """Rows anywhere that still belong to a removed document or its chunks."""
    if isinstance(kb.store, SqliteKnowledgeStore):
        marks = ",".join("?" * len(chunk_ids))
        queries = {
            "chunks": ("SELECT COUNT(*) FROM chunks WHERE doc_id = ?", [doc_id]),
            "index": (f"SELECT COUNT(*) FROM chunks_fts WHERE rowid IN ({marks})", chunk_ids),
            "mentions": (f"SELECT COUNT(*) FROM mentions WHERE chunk_id IN ({marks})", chunk_ids),
            "relations": ("SELECT COUNT(*) FROM relations WHERE doc_id = ?", [doc_id]),
        }
        return {k: kb.store._db.execute(sql, args).fetchone()[0] for k, (sql, args) in queries.items()}
    store: Any = kb.store
    queries = {
        "chunks": ("SELECT count(*) FROM kb_chunks WHERE doc_id = %s OR id = ANY(%s)", [doc_id, chunk_ids]),
        "mentions": ("SELECT count(*) FROM kb_mentions WHERE chunk_id = ANY(%s)", [chunk_ids]),
        "relations": ("SELECT count(*) FROM kb_relations WHERE doc_id = %s", [doc_id]),
    }
    return {k: store.db.execute(sql, args)[0][0] for k, (sql, args) in queries.items()}


def pdf_of(objects: list[bytes], info: bytes = b"") -> bytes:
    """A PDF written by hand from its numbered ``objects`` (1 the catalog), with a correct xref;
    ``info`` is what the trailer adds (`` /Info N 0 R``)."""
    out = bytearray(b"%PDF-1.4\n")
    offsets = []
    for number, body in enumerate(objects, 1):
        offsets.append(len(out))
        out += b"%d 0 obj\n" % number + body + b"\nendobj\n"
    xref = len(out)
    out += b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1)
    out += b"".join(b"%010d 00000 n \n" % o for o in offsets)
    out += b"trailer\n<< /Size %d /Root 1 0 R%s >>\nstartxref\n%d\n%%%%EOF\n" % (len(objects) + 1, info, xref)
    return bytes(out)
