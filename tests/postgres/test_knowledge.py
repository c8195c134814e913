"""The Postgres knowledge store: the same corpus ranks the same as on SQLite, bases in one
database keep apart, writers in parallel keep the counts BM25 reads exact, and what Postgres
cannot hold is handled. The store suite itself runs on both stores in tests/knowledge."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from tests.knowledge.conftest import check_index
from tether.errors import ConfigError
from tether.knowledge import HashingEmbedder, KnowledgeBase
from tether.knowledge.base import query_terms
from tether.postgres.db import database
from tether.postgres.knowledge import PgKnowledgeStore

ROOT = Path(__file__).resolve().parents[2]
CORPUS = sorted(ROOT.glob("docs/*.md")) + sorted(ROOT.glob("examples/catalog/*.md"))

# (query, mode, filters): identifiers, paraphrases, filters and the graph.
QUERIES: list[tuple[str, str, dict[str, str] | None]] = [
    ("FVAM-2050-B", "exact", None),
    ("FVAM-2050-C", "exact", None),
    ("SK-77", "exact", None),
    ("what are the FVAM-2050-B seals made of", "hybrid", None),
    ("what are the FVAM-2050-B seals made of", "neighborhood", None),
    ("what are the FVAM-2050-B seals made of", "hierarchical", None),
    ("seal material for steam", "keyword", None),
    ("pressure rating PN16", "keyword", None),
    ("how do I resume a run after the process crashed", "hybrid", None),
    ("ask before sending mail through an MCP server", "vector", None),
    ("stop a run when it costs too much money", "hybrid", None),
    ("steam valves", "hybrid", {"family": "catalog"}),
    ("search modes and alpha", "keyword", {"name": "docs/knowledge.md"}),
    ("connection pool database url", "hierarchical", None),
    ("the", "keyword", None),
]


def corpus(kb: KnowledgeBase, paths: list[Path] = CORPUS) -> KnowledgeBase:
    for path in paths:
        name = path.relative_to(ROOT).as_posix()
        kb.add_text(name, path.read_text(), meta={"family": "catalog" if "catalog" in name else "docs"})
    return kb


def top(kb: KnowledgeBase, query: str, mode: str, filters: dict[str, str] | None) -> list[str]:
    return [h.citation for h in kb.search(query, mode=mode, filters=filters, k=3).hits]


def test_a_search_on_postgres_returns_what_sqlite_returns_for_the_same_corpus(pg_url: str) -> None:
    sqlite = corpus(KnowledgeBase.open(embedder=HashingEmbedder()))
    pg = corpus(KnowledgeBase(PgKnowledgeStore(database(pg_url), "docs"), embedder=HashingEmbedder()))
    assert pg.stats() | {"path": ""} == sqlite.stats() | {"path": ""} and pg.stats()["chunks"] > 300
    for query, mode, filters in QUERIES:
        want = top(sqlite, query, mode, filters)
        assert want, (query, mode)
        assert top(pg, query, mode, filters) == want, (query, mode, filters)
    assert [h.citation for h in pg.entity_chunks("SK-77").hits] == [
        h.citation for h in sqlite.entity_chunks("SK-77").hits
    ]
    # Not only the order: every keyword score is FTS5's bm25(), to the last digits.
    for query, _, _ in QUERIES:
        terms = query_terms(query)
        assert scores(pg, terms) == pytest.approx(scores(sqlite, terms), rel=1e-12), query


def scores(kb: KnowledgeBase, terms: list[str]) -> dict[str, float]:
    ranked = kb.store.keyword(terms, 10_000, None)
    rows = kb.store.chunks(cid for cid, _ in ranked)
    return {rows[cid].citation: score for cid, score in ranked}


def test_migrations_are_recorded_and_run_once(pg_url: str) -> None:
    db = database(pg_url)
    PgKnowledgeStore(db, "a")
    PgKnowledgeStore(db, "b")
    assert db.versions()["knowledge"] == 1
    assert db.execute("SELECT count(*) FROM tether_migrations WHERE component = 'knowledge'") == [(1,)]
    assert db.execute("SELECT to_regclass('kb_chunks') IS NOT NULL") == [(True,)]


def test_bases_in_one_database_keep_apart_and_score_on_their_own_counts(pg_url: str) -> None:
    db = database(pg_url)
    small = KnowledgeBase(PgKnowledgeStore(db, "small"), embedder=HashingEmbedder())
    big = corpus(
        KnowledgeBase(PgKnowledgeStore(db, "big"), embedder=HashingEmbedder()),
        [p for p in CORPUS if "catalog" in p.parts or p.name == "knowledge.md"],
    )
    valves = (ROOT / "examples/catalog/valves.md").read_text()
    small.add_text("examples/catalog/valves.md", valves, meta={"family": "catalog"})
    assert [d.name for d in small.documents()] == ["examples/catalog/valves.md"]
    assert {h.chunk.document for h in small.search("seal kit", k=20).hits} == {"examples/catalog/valves.md"}
    assert small.store.entity("SK-81") is not None and small.store.entity("RS485") is None
    assert big.store.entity("RS485") is not None
    # BM25 counts only the base's own chunks: the small base scores as a SQLite base of that one file.
    alone = KnowledgeBase.open(embedder=HashingEmbedder())
    alone.add_text("examples/catalog/valves.md", valves, meta={"family": "catalog"})
    assert scores(small, ["seal", "kit"]) == pytest.approx(scores(alone, ["seal", "kit"]), rel=1e-12)
    assert scores(big, ["seal", "kit"]) != scores(small, ["seal", "kit"])
    before = big.stats()
    assert small.remove("examples/catalog/valves.md") and small.stats()["chunks"] == 0
    assert big.stats() == before and big.store.entity("SK-81") is not None
    check_index(small)
    check_index(big)


def test_writers_in_parallel_keep_the_counts_exact(pg_url: str) -> None:
    db = database(pg_url)
    texts = [p.read_text() for p in sorted(CORPUS, key=lambda p: p.stat().st_size)[:6]]
    errors: list[BaseException] = []

    def write(worker: int) -> None:
        kb = KnowledgeBase(PgKnowledgeStore(db, "shared"), embedder=HashingEmbedder())
        try:
            for round_ in range(3):  # add, replace, and remove some, against the other writer
                for i, text in enumerate(texts):
                    kb.add_text(f"w{worker}/{i}.md", text if round_ != 1 else text + f"\nround {round_}\n")
                kb.remove(f"w{worker}/{round_}.md")
        except BaseException as exc:  # reported below, in the test's thread
            errors.append(exc)

    threads = [threading.Thread(target=write, args=(w,)) for w in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    kb = KnowledgeBase(PgKnowledgeStore(db, "shared"), embedder=HashingEmbedder())
    assert len(kb.documents()) == 2 * (len(texts) - 1)  # each writer's last removal stands
    check_index(kb)


def test_a_query_vector_of_another_size_says_the_embedder_changed(pg_url: str) -> None:
    kb = KnowledgeBase(PgKnowledgeStore(database(pg_url)), embedder=HashingEmbedder(64))
    kb.add_text("a.md", "brass valve")
    with pytest.raises(ConfigError, match="32 dimensions and the base's 64.*rebuild the base"):
        kb.store.nearest(HashingEmbedder(32).embed(["brass"])[0], 5, None)


def test_text_postgres_cannot_hold_is_indexed_anyway(pg_url: str) -> None:
    kb = KnowledgeBase(PgKnowledgeStore(database(pg_url)))
    long_word = "x" * 3000  # longer than a tsvector word may be: counted, not indexed
    kb.add_text("odd.txt", f"nul\x00byte gasket {long_word} torque")
    assert [h.citation for h in kb.search("gasket torque", mode="keyword").hits] == ["odd.txt:1-1"]
    assert kb.search("byte", mode="keyword").hits  # NUL split the words as it does in SQLite
    assert kb.search(long_word, mode="keyword").hits == []
    assert kb.store.keyword(["gasket", long_word], 5, None, phrase=True) == []
    check_index(kb)


def test_an_empty_base_searches_to_nothing_and_says_where_it_is(pg_url: str) -> None:
    kb = KnowledgeBase(PgKnowledgeStore(database(pg_url), "empty"), embedder=HashingEmbedder())
    for mode in ("keyword", "hybrid", "exact", "hierarchical"):
        assert kb.search("FVAM-2050-B valve", mode=mode).hits == []
    stats = kb.stats()
    assert {k: stats[k] for k in ("documents", "chunks", "embedded_chunks", "entities", "relations")} == dict.fromkeys(
        ("documents", "chunks", "embedded_chunks", "entities", "relations"), 0
    )
    assert "'empty'" in stats["path"] and stats["embedder"] == "hashing/256"
