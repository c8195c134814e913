"""The knowledge graph: what the rule extractor finds, and searches that join documents through
an entity (examples/catalog: the FVAM-2050-B names seal kit SK-77, only seals.md says what SK-77
is made of). The joins run on both stores, SQLite and Postgres."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from tether.errors import ConfigError
from tether.knowledge import Chunk, HashingEmbedder, KnowledgeBase, ModelExtractor, RuleExtractor
from tether.messages import Message, text_of
from tether.providers.base import ModelRequest
from tether.testing import FunctionModel
from tether.usage import Price

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
    found = entities(
        "The FVAM-2050-B takes seal kit SK-77, talks RS485 and is made under ISO 9001; see also DN50 and part 4471-AX."
    )
    for name in ("FVAM-2050-B", "SK-77", "RS485", "ISO 9001", "DN50", "4471-AX"):
        assert found.get(name) == "identifier", (name, found)


@pytest.mark.parametrize("version", ["1.2.3", "v2", "10mm", "v1.4.2", "3.11", "2024", "x2", "V2"])
def test_versions_sizes_and_plain_numbers_are_not_identifiers(version: str) -> None:
    assert entities(f"Upgrade to {version} before fitting the valve.") == {}


@pytest.mark.parametrize("version", ["2.0.0-rc1", "1.4.2-beta"])
def test_a_prerelease_version_is_not_an_identifier_nor_is_any_piece_of_it(version: str) -> None:
    assert entities(f"Upgrade to {version} before fitting the valve.") == {}


def test_bold_terms_headings_and_chosen_metadata_fields() -> None:
    found = entities(
        "The **stem packing** and __body O-ring__ wear first.",
        heading="Maintenance > Seals",
        meta={"item_id": "FVAM-2050-B", "family": "valves", "colour": "red", "weight": 2.5},
    )
    assert found == {
        "stem packing": "term",
        "body O-ring": "term",
        "FVAM-2050-B": "item_id",
        "valves": "family",
        "Seals": "heading",
    }


def test_the_same_name_in_other_case_is_one_entity_in_every_chunk_that_mentions_it() -> None:
    chunks = [Chunk(1, 1, "Fit SK-77 here."), Chunk(3, 3, "No kit named."), Chunk(5, 5, "sk-77 again")]
    out = RuleExtractor().extract(chunks, {})
    assert out.entities == {"SK-77": ("identifier", {0, 2})}


def test_entities_in_one_chunk_are_related_and_headings_relate_to_what_is_under_them() -> None:
    chunks = [
        Chunk(1, 3, "FVAM-2050-B uses SK-77 and PN16.", "Valves > B model"),
        Chunk(5, 6, "SK-81 is elsewhere.", "Valves > C model"),
    ]
    out = RuleExtractor().extract(chunks, {})
    co = {frozenset((a, b)) for a, b, kind, w in out.relations if kind == "co_mention" and w == 1.0}
    assert co == {frozenset(p) for p in [("FVAM-2050-B", "SK-77"), ("FVAM-2050-B", "PN16"), ("SK-77", "PN16")]}
    section = {(a, b, w) for a, b, kind, w in out.relations if kind == "section"}
    assert section == {
        ("B model", "FVAM-2050-B", 0.5),
        ("B model", "SK-77", 0.5),
        ("B model", "PN16", 0.5),
        ("C model", "SK-81", 0.5),
    }
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


# -- the model-based extractor ------------------------------------------------------------------

PLANT = {  # the names the scripted model knows, as a model would: plain words no rule finds
    "Aurora controller": "product",
    "east conveyor": "equipment",
    "Lumen Systems": "organisation",
}


def graph_model(**kwargs: object) -> FunctionModel:
    """A scripted model that names the known names in the passage it is sent, and the relations
    the passage states with "drives" or "is made by"."""

    def reply(messages: list[Message], request: ModelRequest) -> str:
        passage = text_of(messages[-1:])
        named = [{"name": n, "kind": k} for n, k in PLANT.items() if n.casefold() in passage.casefold()]
        relations = []
        if "drives the east conveyor" in passage:
            relations.append({"source": "Aurora controller", "relation": "Drives", "target": "east conveyor"})
        if "is made by Lumen Systems" in passage:
            relations.append({"source": "Aurora controller", "relation": "made by", "target": "Lumen Systems"})
        return json.dumps({"entities": named, "relations": relations})

    return FunctionModel(reply, **kwargs)  # type: ignore[arg-type]


def test_the_model_names_entities_and_relations_over_the_rules_findings_and_each_call_is_counted() -> None:
    model = graph_model()
    extractor = ModelExtractor(model)
    chunks = [
        Chunk(1, 2, "The Aurora controller drives the east conveyor through relay RK-12."),
        Chunk(4, 4, "Nothing to see here."),
    ]
    out = extractor.extract(chunks, {})
    assert out.entities == {
        "RK-12": ("identifier", {0}),
        "Aurora controller": ("product", {0}),
        "east conveyor": ("equipment", {0}),
    }
    assert ("Aurora controller", "east conveyor", "drives", 2.0) in out.relations
    co = {frozenset((a, b)) for a, b, kind, _ in out.relations if kind == "co_mention"}
    assert co == {
        frozenset(p)
        for p in [("Aurora controller", "RK-12"), ("east conveyor", "RK-12"), ("Aurora controller", "east conveyor")]
    }
    # One request per chunk, asking for the graph's schema; what they cost is added up.
    assert len(model.requests) == 2 and extractor.calls == 2
    assert all(r.output_schema is not None and r.output_schema.name == "knowledge_graph" for r in model.requests)
    assert extractor.usage.prompt_tokens > 0 and extractor.usage.completion_tokens > 0
    assert extractor.cost_usd == pytest.approx(model.price.cost(extractor.usage)) and extractor.cost_usd > 0


def test_a_name_the_chunk_does_not_contain_is_dropped_unless_grounding_is_off() -> None:
    def invent(messages: list[Message], request: ModelRequest) -> str:
        return json.dumps(
            {
                "entities": [
                    {"name": "Aurora controller", "kind": "product"},
                    {"name": "Borealis unit", "kind": "product"},
                ],
                "relations": [{"source": "Aurora controller", "relation": "replaces", "target": "Borealis unit"}],
            }
        )

    chunk = [Chunk(1, 1, "The Aurora controller is new.")]
    grounded = ModelExtractor(FunctionModel(invent), rules=None).extract(chunk, {})
    assert set(grounded.entities) == {"Aurora controller"} and grounded.relations == []
    loose = ModelExtractor(FunctionModel(invent), rules=None, grounded=False).extract(chunk, {})
    assert set(loose.entities) == {"Aurora controller", "Borealis unit"}
    assert ("Aurora controller", "Borealis unit", "replaces", 2.0) in loose.relations


@pytest.mark.parametrize("reply", ["I found a controller.", '{"relations": []}', "{not json"])
def test_a_reply_that_is_not_the_schema_keeps_the_rules_findings_and_is_counted(reply: str) -> None:
    extractor = ModelExtractor(FunctionModel(lambda messages, request: reply))
    out = extractor.extract([Chunk(1, 1, "Relay RK-12 and the Aurora controller.")], {})
    assert out.entities == {"RK-12": ("identifier", {0})}
    assert extractor.failures == 1 and "schema" in extractor.last_error and extractor.calls == 1


def test_the_budget_is_checked_before_each_call_and_never_passed() -> None:
    model = graph_model(price=Price(input=1000.0, output=1000.0))  # dollars per million tokens
    chunks = [Chunk(i, i, f"Line {i}: the Aurora controller drives the east conveyor.") for i in range(1, 9)]
    probe = ModelExtractor(graph_model(price=model.price), concurrency=1)
    probe.extract(chunks[:1], {})
    budget = 12 * probe.cost_usd  # room for a few calls (each held to its worst case: a token per byte), not for eight
    extractor = ModelExtractor(model, max_budget_usd=budget, max_tokens=100, concurrency=1)
    out = extractor.extract(chunks, {})
    assert 0 < extractor.calls < len(chunks) and extractor.skipped == len(chunks) - extractor.calls
    assert extractor.cost_usd <= budget
    assert len(model.requests) == extractor.calls
    assert out.entities["Aurora controller"][1] == set(range(extractor.calls))  # the rest were not asked


def test_a_budget_on_a_model_of_unknown_price_is_refused() -> None:
    model = graph_model()
    model.price = None  # type: ignore[assignment]
    with pytest.raises(ConfigError, match="price of function/function is unknown"):
        ModelExtractor(model, max_budget_usd=1.0)


def test_a_model_named_entity_joins_two_documents_no_rule_could() -> None:
    docs = {
        "line.md": "# Line 3\n\nThe Aurora controller drives the east conveyor.\n",
        "vendors.md": "# Vendors\n\nThe Aurora controller is made by Lumen Systems, in Lyon.\n",
    }
    plain = KnowledgeBase.open(embedder=HashingEmbedder())
    with_model = KnowledgeBase.open(embedder=HashingEmbedder(), extractor=ModelExtractor(graph_model()))
    for kb in (plain, with_model):
        for name, text in docs.items():
            kb.add_text(name, text)
    assert plain.entity_chunks("Aurora controller").hits == []
    joined = with_model.entity_chunks("Aurora controller")
    assert sorted(h.citation for h in joined.hits) == ["line.md:1-3", "vendors.md:1-3"]
    # The walk from the conveyor's passage goes through the controller to its maker's passage.
    assert "Aurora controller" not in plain.search("what drives the east conveyor", mode="neighborhood").entities
    walked = with_model.search("what drives the east conveyor", mode="neighborhood", k=4)
    assert {"Aurora controller", "east conveyor", "Lumen Systems"} <= set(walked.entities)
    assert {h.chunk.document for h in walked.hits} == {"line.md", "vendors.md"}
    assert "Lumen Systems" in with_model.entity_chunks("Lumen Systems").entities


def test_extracting_inside_a_running_event_loop_works() -> None:
    async def ingest() -> KnowledgeBase:
        kb = KnowledgeBase.open(extractor=ModelExtractor(graph_model()))
        kb.add_text("line.md", "The Aurora controller drives the east conveyor.\n")
        return kb

    kb = asyncio.run(ingest())
    assert kb.entity_chunks("east conveyor").hits[0].citation == "line.md:1-1"
