"""Searching a knowledge base: fusion arithmetic, cuts, filters, exact identifiers, keyword
safety, embedders, incremental ingest, removal and the vector cache. Tests that take ``open_kb``
run on both stores, SQLite and Postgres (tests/knowledge/conftest.py)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from tether.errors import ConfigError, UserError
from tether.knowledge import HashingEmbedder, KnowledgeBase, SqliteKnowledgeStore
from tether.knowledge.base import MODES, _fuse, query_terms, tokens
from tether.knowledge.store import fts_query

from .conftest import Opener, check_index, leftovers

VALVES = """# Ball valves

Two-piece ball valves for process water, steam and light oils. Every valve ships with a seal kit
fitted; spare kits are ordered separately under the kit's own number.

## FVAM-2050-B

- Body: forged brass, nickel plated
- Connection: 2" BSP female thread
- Pressure rating: PN16 (16 bar) at 20 °C
- Seal kit: SK-77
- Actuator mount: ISO 5211 F05

The FVAM-2050-B is the standard valve for heating circuits and potable water.
"""

TWIN = """# Stainless valves

## FVAM-2050-C

- Body: stainless steel 316
- Connection: 2" BSP female thread
- Pressure rating: PN25 (25 bar) at 20 °C
- Seal kit: SK-81
- Actuator mount: ISO 5211 F07

The FVAM-2050-C is the stainless twin, for fuels, solvents and sea water. It is not the B model.
"""

LOOKALIKES = """# Look-alikes

The FVAM-2050-BX is an extended-stem variant sold in Asia, rated PN10.

XFVAM-2050-B is a counterfeit code seen on grey-market parts; reject them.
"""

SPARES = """# Spares

Order spare seal kits for the (FVAM-2050-B). Quote the valve number, FVAM-2050-B.
"""

PUMPS = """# Circulation pumps

The CP-40 pump has a mechanical seal with a carbon face and an EPDM bellows. Replace the seal kit
every five years or when the pump leaks at the shaft. Its casing O-rings come from seal kit SK-77.
"""


def literal(token: str) -> re.Pattern[str]:
    return re.compile(r"(?<![\w-])" + re.escape(token) + r"(?![\w-])", re.IGNORECASE)


def catalogue(open_kb: Opener, embedder: Any = "hashing", **kwargs: Any) -> KnowledgeBase:
    kb = open_kb(embedder=HashingEmbedder() if embedder == "hashing" else embedder, **kwargs)
    kb.add_text("valves.md", VALVES, meta={"family": "valves"})
    kb.add_text("twin.md", TWIN, meta={"family": "valves"})
    kb.add_text("lookalikes.md", LOOKALIKES, meta={"family": "notes"})
    kb.add_text("spares.md", SPARES, meta={"family": "notes"})
    kb.add_text("pumps.md", PUMPS, meta={"family": "pumps"})
    return kb


# -- fusion ------------------------------------------------------------------------------------


def test_weighted_reciprocal_rank_fusion_matches_the_hand_computed_sums() -> None:
    fused = _fuse({"keyword": [10, 20, 30], "vector": [20, 40]}, {"keyword": 0.45, "vector": 0.55})
    expected = {
        20: 0.45 / 62 + 0.55 / 61,  # keyword rank 2, vector rank 1 = 0.016274...
        40: 0.55 / 62,  # vector rank 2 = 0.008871
        10: 0.45 / 61,  # keyword rank 1 = 0.007377
        30: 0.45 / 63,  # keyword rank 3 = 0.007143
    }
    assert [cid for cid, _, _ in fused] == [20, 40, 10, 30]
    for cid, score, _ in fused:
        assert score == pytest.approx(expected[cid], abs=1e-12)
    assert fused[0][2] == {"keyword": 2, "vector": 1}
    assert fused[1][2] == {"vector": 2}


def test_fusion_breaks_ties_by_chunk_id_and_weighs_an_unnamed_ranking_one() -> None:
    fused = _fuse({"a": [7], "b": [3]}, {})
    assert [(cid, score) for cid, score, _ in fused] == [(3, pytest.approx(1 / 61)), (7, pytest.approx(1 / 61))]
    assert _fuse({}, {}) == []


def test_hybrid_scores_are_half_scaled_score_half_reciprocal_rank_of_both_lists(open_kb: Opener) -> None:
    kb = catalogue(open_kb)
    query = "brass valve seal kit pressure"
    for alpha in (0.0, 0.3, 0.55, 1.0):
        result = kb.search(query, mode="hybrid", alpha=alpha, k=8)
        assert result.hits and result.note == ""
        kw, vec = kb._keyword(query, 50, None), kb._vector(query, 50, None)

        def part(ranked: list[tuple[int, float]], cid: int) -> float:
            top, low = ranked[0][1], ranked[-1][1]
            for rank, (c, s) in enumerate(ranked, 1):
                if c == cid:
                    return 0.5 * ((s - low) / (top - low) if top > low else 1.0) + 0.5 * 61 / (60 + rank)
            return 0.0

        for hit in result.hits:
            want = (1 - alpha) * part(kw, hit.chunk.id) + alpha * part(vec, hit.chunk.id)
            assert hit.score == pytest.approx(want, abs=1e-9)
            assert hit.ranks.get("keyword") == next((n for n, (c, _) in enumerate(kw, 1) if c == hit.chunk.id), None)
        assert [h.score for h in result.hits] == sorted((h.score for h in result.hits), reverse=True)


def test_a_rare_words_huge_score_does_not_swamp_the_other_list() -> None:
    from tether.knowledge.base import _score_fuse

    keyword = [(1, 40.0), *[(10 + i, 3.0 - i * 0.1) for i in range(20)]]  # one chunk far ahead on one word
    vector = [(2, 0.80), *[(10 + i, 0.79 - i * 0.01) for i in range(20)], (1, 0.20)]  # it is last by meaning
    fused = [cid for cid, _, _ in _score_fuse(keyword, vector, 0.6)]
    assert fused.index(10) < fused.index(1)  # high in both lists beats first in one, last in the other
    assert _score_fuse([], vector, 0.6)[0][0] == 2 and _score_fuse(keyword, [], 0.6)[0][0] == 1


def test_bad_search_arguments_are_user_errors(open_kb: Opener) -> None:
    kb = catalogue(open_kb)
    for kwargs, words in [
        ({"mode": "fuzzy"}, "unknown search mode"),
        ({"alpha": 1.5}, "alpha"),
        ({"k": 0}, "k must be at least 1"),
    ]:
        with pytest.raises(UserError, match=words):
            kb.search("valve", **kwargs)
    with pytest.raises(UserError, match="empty"):
        kb.search("   ")


# -- dedupe, min_score, k ----------------------------------------------------------------------


def test_two_chunks_at_the_same_place_are_one_result_the_better_one(open_kb: Opener) -> None:
    kb = open_kb()
    kb.store.replace_document(
        "dup.md",
        path=None,
        title="dup",
        hash="h",
        meta={},
        entities=[],
        relations=[],
        chunks=[
            (1, 2, "", "gasket gasket gasket torque", None),
            (1, 4, "", "gasket torque and more words about other things entirely", None),
            (6, 7, "", "a second gasket paragraph", None),
        ],
    )
    raw = [cid for cid, _ in kb._keyword("gasket", 50, None)]
    assert len(raw) == 3
    at_line_1 = [cid for cid, row in kb.store.chunks(raw).items() if row.start_line == 1]
    result = kb.search("gasket", mode="keyword")
    assert sorted(h.chunk.start_line for h in result.hits) == [1, 6]
    assert result.hits[0].chunk.id == min(at_line_1, key=raw.index)  # the better-ranked of the two


def test_min_score_cuts_and_k_caps(open_kb: Opener) -> None:
    kb = catalogue(open_kb)
    full = kb.search("valve seal kit", mode="hybrid", k=10)
    scores = [h.score for h in full.hits]
    assert len(scores) >= 4
    cut = (scores[1] + scores[2]) / 2
    assert [h.citation for h in kb.search("valve seal kit", k=10, min_score=cut).hits] == [
        h.citation for h in full.hits[:2]
    ]
    assert kb.search("valve seal kit", k=10, min_score=scores[0] + 1e-9).hits == []
    for k in (1, 3):
        assert [h.citation for h in kb.search("valve seal kit", k=k).hits] == [h.citation for h in full.hits[:k]]
    everything = kb.search("valve seal kit", k=100).hits
    assert len(everything) == kb.stats()["chunks"] == len({h.citation for h in everything}) > 3


# -- filters -----------------------------------------------------------------------------------


@pytest.mark.parametrize("mode", MODES)
def test_metadata_filters_keep_other_documents_out_in_every_mode(open_kb: Opener, mode: str) -> None:
    kb = catalogue(open_kb)
    query = "SK-77" if mode == "exact" else "seal kit EPDM pump valve"
    unfiltered = kb.search(query, mode=mode, k=20)
    families = {h.chunk.meta["family"] for h in unfiltered.hits}
    assert "valves" in families and len(families) > 1  # so the filter has something to remove
    result = kb.search(query, mode=mode, k=20, filters={"family": "valves"})
    assert result.hits
    assert {h.chunk.meta["family"] for h in result.hits} == {"valves"}
    assert kb.search(query, mode=mode, filters={"family": "nothing-has-this"}).hits == []


def test_a_filter_can_name_the_document(open_kb: Opener) -> None:
    kb = catalogue(open_kb)
    hits = kb.search("seal kit", mode="keyword", filters={"name": "pumps.md"}).hits
    assert hits and {h.chunk.document for h in hits} == {"pumps.md"}


# -- exact -------------------------------------------------------------------------------------


def test_exact_returns_only_chunks_with_that_token_never_its_twins(open_kb: Opener) -> None:
    kb = catalogue(open_kb)
    result = kb.search("FVAM-2050-B", mode="exact", k=20)
    cited = {h.citation for h in result.hits}
    assert cited == {"valves.md:6-14", "spares.md:1-3"}
    for hit in result.hits:
        assert literal("FVAM-2050-B").search(hit.chunk.text), hit.citation
    # The twins are in the base and a plain keyword search finds them: exact must not.
    keyword = {h.chunk.document for h in kb.search("FVAM-2050-B", mode="keyword", k=20).hits}
    assert {"twin.md", "lookalikes.md"} <= keyword
    assert not {"twin.md", "lookalikes.md"} & {h.chunk.document for h in result.hits}


@pytest.mark.parametrize("twin", ["FVAM-2050-C", "FVAM-2050-BX", "XFVAM-2050-B"])
def test_exact_for_a_twin_does_not_return_the_b_model(open_kb: Opener, twin: str) -> None:
    result = catalogue(open_kb).search(twin, mode="exact", k=20)
    assert result.hits
    for hit in result.hits:
        assert literal(twin).search(hit.chunk.text), hit.citation
    assert "valves.md" not in {h.chunk.document for h in result.hits}


def test_exact_with_no_match_says_so(open_kb: Opener) -> None:
    result = catalogue(open_kb).search("FVAM-2050-Z", mode="exact")
    assert result.hits == [] and "FVAM-2050-Z" in result.note


def test_exact_counts_a_document_whose_item_id_names_the_identifier(open_kb: Opener) -> None:
    kb = catalogue(open_kb)
    # A data sheet filed under the part number whose text never spells it out.
    kb.add_text(
        "datasheet-0417.md",
        "# Data sheet 0417\n\nPressure rating PN16. Seal kit SK-77. Weight 1.9 kg.\n",
        meta={"item_id": "FVAM-2050-B", "family": "valves"},
    )
    kb.add_text(
        "datasheet-0418.md",
        "# Data sheet 0418\n\nPressure rating PN25. Seal kit SK-81.\n",
        meta={"item_id": "FVAM-2050-C", "family": "valves"},
    )
    documents = {h.chunk.document for h in kb.search("FVAM-2050-B", mode="exact", k=20).hits}
    assert "datasheet-0417.md" in documents, documents
    assert "datasheet-0418.md" not in documents and "twin.md" not in documents


class TwinBlind:
    """An embedder that cannot tell the twins apart and prefers the wrong one, as MiniLM did on
    the README's example: every text about the FVAM-2050 family is near the query, the C model
    nearest."""

    name = "test/twin-blind"

    def embed(self, texts: Any) -> Any:
        import numpy as np

        def one(text: str) -> list[float]:
            if "FVAM-2050-C" in text or "seals" in text.casefold():  # the query asks about seals
                return [1.0, 0.0, 0.0]
            if "FVAM" in text:
                return [0.8, 0.6, 0.0]
            return [0.0, 0.0, 1.0]

        return np.asarray([one(t) for t in texts], dtype=np.float32)


@pytest.mark.parametrize("mode", [m for m in MODES if m != "exact"])
def test_the_identifier_asked_about_outranks_its_near_twin_in_every_mode(open_kb: Opener, mode: str) -> None:
    kb = catalogue(open_kb, TwinBlind())
    query = "What are the FVAM-2050-B's seals made of?"
    assert kb.search(query, mode="vector", k=20, alpha=None).hits  # the embedder is in use
    twin_first = [cid for cid, _ in kb._vector(query, 5, None)]
    assert kb.store.chunks(twin_first[:1])[twin_first[0]].document == "twin.md"  # vectors alone would fail
    hits = kb.search(query, mode=mode, k=20).hits
    holding = [bool(literal("FVAM-2050-B").search(h.chunk.indexed_text)) for h in hits]
    assert holding[0], [h.citation for h in hits]
    assert holding == sorted(holding, reverse=True), [h.citation for h in hits]  # every holder above every other
    assert {h.citation for h in hits if h.ranks.get("exact")} == {"valves.md:6-14", "spares.md:1-3"}


def test_identifiers_are_found_in_a_question_and_words_are_not() -> None:
    from tether.knowledge.exact import identifiers

    assert identifiers("What are the FVAM-2050-B's seals made of? Or SK-77.") == ["FVAM-2050-B", "SK-77"]
    assert identifiers("error E1234 on RS485 since 1.2.3, x86_64 and O_NONBLOCK") == [
        "E1234",
        "RS485",
        "1.2.3",
        "x86_64",
    ]
    assert identifiers("a well-known read-only file of 2050 bytes, and/or more") == []


@pytest.mark.parametrize(
    ("text", "holds"),
    [
        ("part FVAM-2050-B.", True),
        ("(FVAM-2050-B)", True),
        ("FVAM-2050-B/C kits", True),
        ("part FVAM-2050-B.1 is newer", False),
        ("FVAM-2050-BX", False),
        ("X-FVAM-2050-B", False),
        ("FVAM-2050-B_old", False),
    ],
)
def test_an_identifier_edge_includes_a_dot_before_a_digit(text: str, holds: bool) -> None:
    from tether.knowledge.exact import literal as held

    assert bool(held("FVAM-2050-B").search(text)) is holds


def test_exact_does_not_return_a_revision_of_the_part(open_kb: Opener) -> None:
    kb = catalogue(open_kb)
    kb.add_text("revisions.md", "# Revisions\n\nThe FVAM-2050-B.1 replaces the old seat material.\n")
    documents = {h.chunk.document for h in kb.search("FVAM-2050-B", mode="exact", k=20).hits}
    assert documents == {"valves.md", "spares.md"}


@pytest.mark.parametrize("token", ["FVAM\x00-2050-B", "\x00", "SK-77\x00"])
def test_a_nul_in_an_exact_lookup_finds_nothing_on_every_store(open_kb: Opener, token: str) -> None:
    kb = catalogue(open_kb)
    result = kb.search(token, mode="exact")
    assert result.hits == [] and "no chunk contains" in result.note
    assert kb.entity_chunks(token).hits == []
    assert kb.search(token, mode="hybrid").query == token  # any mode answers, none raises


# -- keyword safety ----------------------------------------------------------------------------


def test_keyword_queries_drop_stop_words(open_kb: Opener) -> None:
    assert fts_query(query_terms("What is the pressure rating of the valve?")) == '"pressure" OR "rating" OR "valve"'
    assert fts_query(query_terms("the and of")) == '"the" OR "and" OR "of"'  # only stop words: still a search
    assert tokens("Café read_file FVAM-2050-B") == ["cafe", "read", "file", "fvam", "2050", "b"]  # as FTS5 splits
    kb = open_kb()
    kb.add_text("filler.txt", "It is what it is, and that is all there is to it, over and over again.")
    kb.add_text("gauge.txt", "The gauge reads the line pressure.")
    hits = kb.search("what is the pressure", mode="keyword").hits
    assert [h.chunk.document for h in hits] == ["gauge.txt"]


@pytest.mark.parametrize(
    "query",
    [
        '"',
        '"unbalanced quote',
        "NEAR(seal kit, 2)",
        "seal*",
        "-seal",
        "(seal OR",
        "seal AND NOT",
        "kit:seal",
        "^seal",
        "*",
        "()",
        "'; DROP TABLE chunks; --",
        'seal"kit',
        "{seal kit}",
        "a + b - c",
    ],
)
def test_fts_syntax_in_a_query_does_not_crash(open_kb: Opener, query: str) -> None:
    kb = catalogue(open_kb)
    before = kb.stats()
    for mode in ("keyword", "hybrid", "vector", "exact", "neighborhood", "hierarchical"):
        result = kb.search(query, mode=mode)
        assert isinstance(result.hits, list)
    assert kb.stats() == before and before["chunks"] > 0
    check_index(kb)


def test_operators_in_a_query_are_words_not_syntax(open_kb: Opener) -> None:
    kb = catalogue(open_kb)
    # "-kit" would exclude chunks with "kit" in FTS5 syntax; here it is just another word.
    hits = kb.search("pump -kit", mode="keyword").hits
    assert any("kit" in h.chunk.text for h in hits)
    assert kb.search("seal*", mode="keyword").hits  # the word "seal", not an error


# -- embedders ---------------------------------------------------------------------------------


def test_without_an_embedder_hybrid_says_keyword_only_and_vector_is_refused(open_kb: Opener) -> None:
    kb = catalogue(open_kb, embedder=None)
    assert kb.stats()["embedded_chunks"] == 0
    result = kb.search("seal kit", mode="hybrid")
    assert result.hits and "keyword only" in result.note
    assert all(set(h.ranks) == {"keyword"} for h in result.hits)
    with pytest.raises(UserError, match=r"no vectors.*keyword or hybrid"):
        kb.search("seal kit", mode="vector")


def test_a_base_built_with_one_embedder_refuses_another(open_kb: Opener) -> None:
    kb = open_kb("parts", embedder=HashingEmbedder(256), name="parts")
    kb.add_text("valves.md", VALVES)
    if isinstance(kb.store, SqliteKnowledgeStore):
        kb.store.close()
        assert Path(kb.store.path).is_file()
    with pytest.raises(ConfigError) as info:
        open_kb("parts", embedder=HashingEmbedder(128), name="parts")
    assert "hashing/256" in str(info.value) and "hashing/128" in str(info.value) and "parts" in str(info.value)
    again = open_kb("parts", embedder=HashingEmbedder(256), name="parts")
    assert again.search("brass", mode="vector").hits


# -- incremental ingest ------------------------------------------------------------------------


def test_add_text_twice_is_a_no_op_and_a_change_replaces_the_chunks(open_kb: Opener) -> None:
    kb = catalogue(open_kb)
    before = kb.stats()
    added_at = kb.store.document("pumps.md").added_at  # type: ignore[union-attr]
    generation = kb.store.get_meta("generation")
    assert kb.add_text("pumps.md", PUMPS, meta={"family": "pumps"}) is False
    assert kb.stats() == before and kb.store.get_meta("generation") == generation  # nothing written
    assert kb.store.document("pumps.md").added_at == added_at  # type: ignore[union-attr]
    changed = PUMPS.replace("carbon face", "silicon carbide face")
    assert kb.add_text("pumps.md", changed, meta={"family": "pumps"}) is True
    pumps = kb.store.document("pumps.md")
    assert pumps is not None
    texts = [row.text for row in kb.store.chunks(kb.store.chunk_ids([pumps.id])).values()]
    assert texts and any("silicon carbide" in t for t in texts) and not any("carbon face" in t for t in texts)
    assert kb.stats()["chunks"] == before["chunks"] and kb.stats()["documents"] == before["documents"]
    check_index(kb)
    assert kb.search("carbide", mode="keyword").hits[0].chunk.document == "pumps.md"
    assert kb.search("carbon", mode="keyword").hits == []
    # The same text with other metadata is a new version too.
    assert kb.add_text("pumps.md", changed, meta={"family": "circulators"}) is True
    assert kb.search("carbide", filters={"family": "circulators"}).hits


@pytest.fixture
def tree(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    root = tmp_path / "docs"
    (root / "sub").mkdir(parents=True)
    (root / "alpha.md").write_text("# Alpha\n\nThe alpha relief valve opens at 6 bar.\n")
    (root / "beta.txt").write_text("Beta pumps move 40 litres a minute.\n")
    (root / "sub" / "gamma.md").write_text("# Gamma\n\nGamma strainers catch grit.\n")
    monkeypatch.chdir(tmp_path)
    return root


@pytest.fixture
def reads(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Names of the files ``read_document`` parses."""
    from tether.knowledge import readers

    seen: list[str] = []
    real = readers.read_document

    def counting(path: Path, **how: Any) -> Any:
        seen.append(path.name)
        return real(path, **how)

    monkeypatch.setattr(readers, "read_document", counting)
    return seen


def test_add_path_reads_only_what_changed_and_prunes_what_is_gone_when_asked(
    open_kb: Opener, tree: Path, reads: list[str]
) -> None:
    kb = open_kb(embedder=HashingEmbedder())
    first = kb.add_path(tree)
    assert sorted(first.added) == ["docs/alpha.md", "docs/beta.txt", "docs/sub/gamma.md"]
    assert sorted(reads) == ["alpha.md", "beta.txt", "gamma.md"]
    reads.clear()

    again = kb.add_path(tree)
    assert sorted(again.unchanged) == ["docs/alpha.md", "docs/beta.txt", "docs/sub/gamma.md"]
    assert again.added == again.updated == again.removed == [] and reads == []
    assert "3 unchanged" in again.summary()

    (tree / "beta.txt").write_text("Beta pumps move 55 litres a minute since the upgrade.\n")
    (tree / "sub" / "gamma.md").unlink()
    third = kb.add_path(tree)
    assert third.updated == ["docs/beta.txt"] and reads == ["beta.txt"]
    assert third.gone == ["docs/sub/gamma.md"] and third.removed == [] and "1 no longer on disk" in third.summary()
    assert "docs/sub/gamma.md" in {d.name for d in kb.documents()}  # kept until asked (--sync)
    third = kb.add_path(tree, prune=True)
    assert third.removed == ["docs/sub/gamma.md"] and "1 removed" in third.summary()
    assert [d.name for d in kb.documents()] == ["docs/alpha.md", "docs/beta.txt"]
    assert kb.search("upgrade", mode="keyword").hits[0].citation == "docs/beta.txt:1-1"
    assert kb.search("strainers", mode="keyword").hits == []


def test_add_path_on_one_file_prunes_nothing(tree: Path) -> None:
    kb = KnowledgeBase.open()
    kb.add_path(tree)
    report = kb.add_path(tree / "alpha.md")
    assert report.unchanged == ["docs/alpha.md"] and report.removed == []
    assert len(kb.documents()) == 3


def test_a_missing_path_is_a_user_error(tmp_path: Path) -> None:
    with pytest.raises(UserError, match="does not exist"):
        KnowledgeBase.open().add_path(tmp_path / "nowhere")


def test_ignore_files_at_every_level_are_honoured(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = tmp_path / "repo"
    files = {
        ".gitignore": "*.log\n!keep.log\nbuild/\n",
        ".tetherignore": "drafts/\n",
        "readme.md": "# Readme\n\nkept words readme\n",
        "keep.log": "kept words keeplog\n",
        "debug.log": "ignored words debuglog\n",
        "build/out.md": "ignored words buildout\n",
        "drafts/idea.md": "ignored words draftidea\n",
        "local.md": "kept words rootlocal\n",
        "sub/.gitignore": "/local.md\nsecret.md\n",
        "sub/local.md": "ignored words sublocal\n",
        "sub/secret.md": "ignored words subsecret\n",
        "sub/deeper/secret.md": "ignored words deepsecret\n",
        "sub/notes.md": "kept words subnotes\n",
        "sub/deeper/.ignore": "*.txt\n",
        "sub/deeper/plan.txt": "ignored words deepplan\n",
        "sub/deeper/plan.md": "kept words deepplan\n",
        ".git/notes.md": "ignored words gitnotes\n",
        "logo.png": "not text at all",
    }
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    monkeypatch.chdir(tmp_path)
    kb = KnowledgeBase.open()
    report = kb.add_path(root)
    assert sorted(report.added) == [
        "repo/keep.log",
        "repo/local.md",
        "repo/readme.md",
        "repo/sub/deeper/plan.md",
        "repo/sub/notes.md",
    ]
    assert report.skipped == []
    assert kb.search("ignored", mode="keyword").hits == []
    # A file ingested once and ignored later leaves the base on the next add.
    (root / ".tetherignore").write_text("drafts/\nreadme.md\n")
    again = kb.add_path(root, prune=True)
    assert again.removed == ["repo/readme.md"]
    assert "repo/readme.md" not in {d.name for d in kb.documents()}


def test_a_named_pipe_in_a_folder_is_skipped_even_as_its_ignore_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A project folder can hold a named pipe; one named .gitignore was read as the folder's ignore
    rules, and reading a pipe waits for a writer forever. It is not read, and not added; what it
    may keep out is not read either (tests/tools/test_left_alone_s11.py)."""
    import os
    import threading

    root = tmp_path / "repo"
    root.mkdir()
    (root / "readme.md").write_text("# Readme\n\nkept words readme\n")
    os.mkfifo(root / ".gitignore")
    os.mkfifo(root / "events.md")
    monkeypatch.chdir(tmp_path)
    kb = KnowledgeBase.open()
    out: list[Any] = []
    thread = threading.Thread(target=lambda: out.append(kb.add_path(root)), daemon=True)
    thread.start()
    thread.join(20)
    assert not thread.is_alive(), "kb add waited on a named pipe"
    assert out[0].added == [] and [where for where, _ in out[0].skipped] == ["repo/"]


def test_binary_files_are_skipped_with_a_reason(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = tmp_path / "mixed"
    root.mkdir()
    (root / "table.csv").write_bytes(b"id,name\x00\x01\x02\xff\x00")
    (root / "ok.md").write_text("# Ok\n\nreadable\n")
    monkeypatch.chdir(tmp_path)
    kb = KnowledgeBase.open()
    report = kb.add_path(root)
    assert report.added == ["mixed/ok.md"]
    assert report.skipped == [("mixed/table.csv", "binary (not text, HTML or PDF)")]
    assert "1 skipped" in report.summary()
    assert [d.name for d in kb.documents()] == ["mixed/ok.md"]


def test_a_file_that_cannot_be_read_is_skipped_with_the_reason_and_kept(
    tree: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    kb = KnowledgeBase.open()
    kb.add_path(tree)
    from tether.knowledge import readers

    real = readers.open_below

    def open_below(root: Path, file: Path) -> int:  # a file is opened (once) through it
        if file.name == "beta.txt":
            raise PermissionError(13, "Permission denied", str(file))
        return real(root, file)

    (tree / "beta.txt").write_text("beta, changed since it was read\n")  # so it is read again
    monkeypatch.setattr(readers, "open_below", open_below)  # chmod 000 does not stop root, who may run this
    report = kb.add_path(tree)
    assert report.skipped == [("docs/beta.txt", "cannot read it: Permission denied")]
    assert report.removed == []  # still on disk: not pruned
    assert "docs/beta.txt" in {d.name for d in kb.documents()}


def test_a_fifo_is_skipped_with_its_reason_and_a_deeply_nested_page_is_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 27: a named pipe called pipe.txt blocked kb add, and an HTML file 50,000 <div>s deep
    stopped it with a RecursionError, so the files after them were never read (then the page was
    skipped as nested too deeply; now its words are read)."""
    import os

    root = tmp_path / "hostile"
    root.mkdir()
    os.mkfifo(root / "pipe.txt")
    (root / "deep.html").write_text("<html><body>" + "<div>" * 50_000 + "deep" + "</div>" * 50_000 + "</body></html>")
    (root / "zz-after.md").write_text("# After\n\nThe file read after the hostile ones.\n")
    monkeypatch.chdir(tmp_path)
    kb = KnowledgeBase.open()
    report = kb.add_path(root)
    assert report.added == ["hostile/deep.html", "hostile/zz-after.md"]
    reasons = dict(report.skipped)
    assert reasons["hostile/pipe.txt"] == "not a regular file (a named pipe, socket or device)"
    assert "hostile/deep.html" not in reasons
    assert kb.search("hostile ones", mode="keyword").hits[0].chunk.document == "hostile/zz-after.md"


# -- removal -----------------------------------------------------------------------------------


def test_removing_a_document_removes_everything_it_brought(open_kb: Opener) -> None:
    kb = catalogue(open_kb)
    doc_id = kb.store.document("valves.md").id  # type: ignore[union-attr]
    chunk_ids = kb.store.chunk_ids([doc_id])
    before = leftovers(kb, doc_id, chunk_ids)
    assert chunk_ids and before["relations"] > 0 and before["mentions"] > 0
    assert kb.store.entity("PN16") is not None and kb.store.entity("F05") is not None

    assert kb.remove("valves.md") is True
    assert kb.store.document("valves.md") is None
    assert set(leftovers(kb, doc_id, chunk_ids).values()) == {0}
    assert kb.store.chunk_ids([doc_id]) == [] and kb.store.chunks(chunk_ids) == {}
    assert kb.store.entities_of(chunk_ids) == {}
    near = [cid for cid, _ in kb.store.nearest(HashingEmbedder().embed(["brass"])[0], 1000, None)]
    assert not set(near) & set(chunk_ids) and len(near) == kb.stats()["chunks"]
    # Entities only valves.md named are gone; those other documents name stay.
    assert kb.store.entity("PN16") is None and kb.store.entity("F05") is None
    assert kb.store.entity("FVAM-2050-B") is not None  # spares.md still names it
    assert kb.store.entity("SK-77") is not None  # and pumps.md this one
    check_index(kb)
    assert kb.search("brass", mode="keyword").hits == []
    assert kb.remove("valves.md") is False


# -- the vector matrix cache -------------------------------------------------------------------


def test_a_document_added_after_a_search_is_found_by_the_next_vector_search(open_kb: Opener) -> None:
    kb = catalogue(open_kb)
    before = kb.search("zirconium impeller cavitation", mode="vector", k=3)
    assert "impeller.md" not in {h.chunk.document for h in before.hits}
    kb.add_text("impeller.md", "Zirconium impeller blades resist cavitation in brine.")
    after = kb.search("zirconium impeller cavitation", mode="vector", k=3)
    assert after.hits[0].chunk.document == "impeller.md"
    kb.remove("impeller.md")
    assert "impeller.md" not in {h.chunk.document for h in kb.search("zirconium impeller", mode="vector").hits}


def test_two_handles_on_one_base_see_each_others_changes(open_kb: Opener) -> None:
    writer = open_kb("shared", embedder=HashingEmbedder())
    reader = open_kb("shared", embedder=HashingEmbedder())
    writer.add_text("valves.md", VALVES)
    assert reader.search("brass valve", mode="vector").hits  # caches the matrix
    writer.add_text("impeller.md", "Zirconium impeller blades resist cavitation in brine.")
    assert reader.search("zirconium impeller cavitation", mode="vector").hits[0].chunk.document == "impeller.md"


class Counting:
    """HashingEmbedder that counts the texts it embeds."""

    def __init__(self) -> None:
        self.inner = HashingEmbedder()
        self.name = self.inner.name
        self.texts: list[str] = []

    def embed(self, texts: Any) -> Any:
        self.texts += list(texts)
        return self.inner.embed(texts)


def test_a_changed_file_re_embeds_only_its_changed_chunks_and_a_touched_one_is_hashed_once(
    open_kb: Opener, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import os

    root = tmp_path / "many"
    root.mkdir()
    long = "\n".join(f"Line {i} of the long manual about pump number {i}." for i in range(200)) + "\n"
    (root / "long.txt").write_text(long)
    (root / "short.txt").write_text("A short note.\n")
    monkeypatch.chdir(tmp_path)
    counting = Counting()
    kb = open_kb(embedder=counting)
    kb.add_path(root)
    chunks = kb.stats()["chunks"]
    assert len(counting.texts) == chunks == kb.stats()["embedded_chunks"] and chunks > 10
    counting.texts.clear()

    (root / "long.txt").write_text(long + "One line more at the end.\n")
    hour_ago = (root / "long.txt").stat().st_mtime_ns - 3600 * 10**9
    os.utime(root / "long.txt", ns=(hour_ago, hour_ago))  # not moments ago: its time is trusted
    report = kb.add_path(root)
    assert report.updated == ["many/long.txt"] and report.unchanged == ["many/short.txt"]
    assert 1 <= len(counting.texts) <= 2, counting.texts  # the last chunk or two, not the file's 20
    assert kb.stats()["embedded_chunks"] == kb.stats()["chunks"]
    assert kb.search("One line more", mode="vector", k=1).hits[0].chunk.document == "many/long.txt"
    counting.texts.clear()

    hashed: list[str] = []
    real = __import__("hashlib").sha256

    def spy(data: bytes = b"") -> Any:
        hashed.append("x")
        return real(data)

    stamp = (root / "short.txt").stat().st_mtime_ns - 5_000_000_000
    os.utime(root / "short.txt", ns=(stamp, stamp))  # touched, not changed (not moments ago: see round 5)
    monkeypatch.setattr("tether.knowledge.base.hashlib.sha256", spy)
    assert kb.add_path(root).unchanged == ["many/long.txt", "many/short.txt"] and len(hashed) == 1
    assert kb.add_path(root).unchanged == ["many/long.txt", "many/short.txt"] and len(hashed) == 1
    assert counting.texts == []


def test_fill_vectors_resumes_where_it_stopped_and_reports_progress_in_chunks(open_kb: Opener) -> None:
    counting = Counting()
    kb = open_kb(embedder=counting)
    text = "\n".join(f"Paragraph {i}: the valve number {i} is rated for {i} bar." for i in range(300))
    kb.add_text("big.txt", text, embed=False)
    chunks = kb.stats()["chunks"]
    assert kb.stats()["embedded_chunks"] == 0 and chunks > 30
    assert kb.search("valve number 7", mode="keyword").hits  # searchable before any vector
    assert "keyword only" in kb.search("valve number 7").note

    class Stop(Exception):
        pass

    seen: list[tuple[int, int]] = []

    def interrupt(done: int, total: int) -> None:
        seen.append((done, total))
        if done >= 16:
            raise Stop  # as Ctrl-C would, between two batches

    with pytest.raises(Stop):
        kb.fill_vectors(interrupt, batch=8)
    assert seen == [(0, chunks), (8, chunks), (16, chunks)]
    assert kb.stats()["embedded_chunks"] == 16
    partial = kb.search("valve number 7")
    assert f"vectors cover 16 of {chunks} chunks" in partial.note
    check_index(kb)
    seen.clear()
    assert kb.fill_vectors(lambda d, t: seen.append((d, t)), batch=8) == chunks - 16
    assert seen[0] == (0, chunks - 16) and seen[-1] == (chunks - 16, chunks - 16) and len(seen) > 3
    filled = [t for t in counting.texts if t.startswith("Paragraph")]  # not the queries
    assert kb.stats()["embedded_chunks"] == chunks and len(filled) == chunks  # none embedded twice
    assert kb.search("valve number 7").note == ""
