"""The knowledge graph: what the rule extractor finds, and searches that join documents through
an entity (examples/catalog: the FVAM-2050-B names seal kit SK-77, only seals.md says what SK-77
is made of). The joins run on both stores, SQLite and Postgres."""

from __future__ import annotations

from pathlib import Path

import pytest

from tether.knowledge import Chunk, HashingEmbedder, KnowledgeBase, RuleExtractor

from .conftest import Opener

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
QUESTION = "what are the FVAM-2050-B seals made of"
SK77 = "catalog/seals.md:6-10"  # "## SK-77 / Seats and O-rings in EPDM ..."
FVAM_B = "catalog/valves.md:6-14"


def entities(text: str, heading: str = "", meta: dict[str, object] | None = None) -> dict[str, str]:
    out = RuleExtractor().extract([Chunk(1, 1, text, heading)], dict(meta or {}))
    return {name: kind for name, (kind, _) in out.entities.items()}


# -- the rule extractor -------------------------------------------------------------------------


def test_identifiers_are_found() -> None:
    found = entities("The FVAM-2050-B takes seal kit SK-77, talks RS485 and is made under ISO 9001; "
                     "see also DN50 and part 4471-AX.")
    for name in ("FVAM-2050-B", "SK-77", "RS485", "ISO 9001", "DN50", "4471-AX"):
        assert found.get(name) == "identifier", (name, found)


@pytest.mark.parametrize("version", ["1.2.3", "v2", "10mm", "v1.4.2", "3.11", "2024", "x2", "V2"])
def test_versions_sizes_and_plain_numbers_are_not_identifiers(version: str) -> None:
    assert entities(f"Upgrade to {version} before fitting the valve.") == {}


@pytest.mark.parametrize("version", ["2.0.0-rc1", "1.4.2-beta"])
def test_a_prerelease_version_is_not_an_identifier_nor_is_any_piece_of_it(version: str) -> None:
    assert entities(f"Upgrade to {version} before fitting the valve.") == {}


def test_bold_terms_headings_and_chosen_metadata_fields() -> None:
    found = entities("The **stem packing** and __body O-ring__ wear first.", heading="Maintenance > Seals",
                     meta={"item_id": "FVAM-2050-B", "family": "valves", "colour": "red", "weight": 2.5})
    assert found == {"stem packing": "term", "body O-ring": "term", "FVAM-2050-B": "item_id",
                     "valves": "family", "Seals": "heading"}


def test_the_same_name_in_other_case_is_one_entity_in_every_chunk_that_mentions_it() -> None:
    chunks = [Chunk(1, 1, "Fit SK-77 here."), Chunk(3, 3, "No kit named."), Chunk(5, 5, "sk-77 again")]
    out = RuleExtractor().extract(chunks, {})
    assert out.entities == {"SK-77": ("identifier", {0, 2})}


def test_entities_in_one_chunk_are_related_and_headings_relate_to_what_is_under_them() -> None:
    chunks = [Chunk(1, 3, "FVAM-2050-B uses SK-77 and PN16.", "Valves > B model"),
              Chunk(5, 6, "SK-81 is elsewhere.", "Valves > C model")]
    out = RuleExtractor().extract(chunks, {})
    co = {frozenset((a, b)) for a, b, kind, w in out.relations if kind == "co_mention" and w == 1.0}
    assert co == {frozenset(p) for p in [("FVAM-2050-B", "SK-77"), ("FVAM-2050-B", "PN16"), ("SK-77", "PN16")]}
    section = {(a, b, w) for a, b, kind, w in out.relations if kind == "section"}
    assert section == {("B model", "FVAM-2050-B", 0.5), ("B model", "SK-77", 0.5), ("B model", "PN16", 0.5),
                       ("C model", "SK-81", 0.5)}
    assert not any({"SK-81", "SK-77"} == {a, b} for a, b, _, _ in out.relations)  # never in one chunk


# -- joins across documents ---------------------------------------------------------------------


@pytest.fixture
def catalog(monkeypatch: pytest.MonkeyPatch, open_kb: Opener) -> KnowledgeBase:
    monkeypatch.chdir(EXAMPLES)
    kb = open_kb(embedder=HashingEmbedder())
    report = kb.add_path("catalog")
    assert sorted(report.added) == ["catalog/maintenance.md", "catalog/seals.md", "catalog/valves.md"]
    return kb


def test_the_graph_links_the_valve_to_its_seal_kit_document(catalog: KnowledgeBase) -> None:
    sk77 = catalog.store.entity("SK-77")
    assert sk77 is not None and sk77[1:] == ("SK-77", "identifier")
    ids = catalog.store.chunks_of_entities([sk77[0]], 10)
    assert {row.citation for row in catalog.store.chunks(ids).values()} == {FVAM_B, SK77}


def test_keyword_search_alone_does_not_put_the_seal_chunk_first(catalog: KnowledgeBase) -> None:
    hits = catalog.search(QUESTION, mode="keyword", k=5).hits
    assert hits and hits[0].citation != SK77
    assert SK77 not in [h.citation for h in hits]  # it says "Seal kits", "Seats", "EPDM"; the question "seals"


@pytest.mark.parametrize("mode", ["neighborhood", "hierarchical"])
def test_graph_modes_join_the_valve_to_what_its_seals_are_made_of(catalog: KnowledgeBase, mode: str) -> None:
    result = catalog.search(QUESTION, mode=mode, k=5)
    top = [h.citation for h in result.hits]
    assert FVAM_B in top
    assert SK77 in top, f"{mode}: the SK-77 chunk of seals.md is not in the top 5: {top}"
    assert "SK-77" in result.entities
    assert "EPDM" in next(h.chunk.text for h in result.hits if h.citation == SK77)


def test_entity_chunks_walks_from_the_entity_to_both_documents(catalog: KnowledgeBase) -> None:
    for name in ("SK-77", "sk-77", "  SK-77 "):
        result = catalog.entity_chunks(name)
        assert {h.citation for h in result.hits} == {FVAM_B, SK77}
        assert result.entities == ["SK-77"] and result.mode == "entity"
    assert [h.citation for h in catalog.entity_chunks("SK-77", k=1).hits] in ([FVAM_B], [SK77])


def test_an_unknown_entity_gives_no_hits_and_says_so(catalog: KnowledgeBase) -> None:
    result = catalog.entity_chunks("SK-99")
    assert result.hits == [] and result.entities == []
    assert "SK-99" in result.note and "no entity" in result.note
