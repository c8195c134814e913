"""The knowledge base as agent tools: citations, entities, size limits, arguments, the prompt
block, and scripted runs end to end on examples/catalog."""

from __future__ import annotations

import asyncio
import json
import re
from pathlib import Path
from typing import Any

import pytest

from tether import Agent, CancelSignal, ToolContext, run_sync
from tether.knowledge import HashingEmbedder, KnowledgeBase, KnowledgeTools
from tether.messages import Message, ToolMessage
from tether.providers.scripted import Reply, call
from tether.testing import FunctionModel
from tether.tools.base import ToolInputError, validate_arguments

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
CITATION = re.compile(r"^\[(\d+)\] (\S+:\d+-\d+)", re.M)
FVAM_B, FVAM_C, SK77 = "catalog/valves.md:6-14", "catalog/valves.md:16-24", "catalog/seals.md:6-10"


@pytest.fixture
def catalog(monkeypatch: pytest.MonkeyPatch, tether_home: Path) -> KnowledgeBase:
    monkeypatch.chdir(EXAMPLES)  # documents are named catalog/valves.md, ...
    kb = KnowledgeBase.open(embedder=HashingEmbedder(), name="catalog")
    kb.add_path("catalog", meta={"family": "catalog"})
    return kb


def tools_of(kb: KnowledgeBase, **kwargs: Any) -> dict[str, Any]:
    return {t.name: t for t in KnowledgeTools(kb, **kwargs).tools()}


def run_tool(tool: Any, args: dict[str, Any]) -> str:
    """As the loop does it: arguments checked against the schema, then ``execute``."""
    checked = validate_arguments(tool, json.dumps(args))
    out = asyncio.run(tool.execute(checked, ToolContext(cwd=EXAMPLES, signal=CancelSignal())))
    assert isinstance(out, str)
    return out


# -- what the tools say -------------------------------------------------------------------------


def test_search_cites_lines_and_lists_the_entities(catalog: KnowledgeBase) -> None:
    out = run_tool(tools_of(catalog)["search_kb"], {"query": "Which seals does the FVAM-2050-B valve use?"})
    cites = CITATION.findall(out)
    assert cites[0] == ("1", FVAM_B)
    assert [n for n, _ in cites] == [str(i) for i in range(1, len(cites) + 1)]
    assert out.startswith(f"{len(cites)} results for 'Which seals does the FVAM-2050-B valve use?' (hybrid):")
    assert "Seal kit: SK-77" in out
    entities = re.search(r"Entities in these results: (.+?)\. To follow one", out)
    assert entities and {"FVAM-2050-B", "SK-77"} <= set(entities.group(1).split(", "))
    assert out.rstrip().endswith("Cite what you use as its label does (document:start-end).")


def test_lookup_exact_cites_only_the_b_section(catalog: KnowledgeBase) -> None:
    out = run_tool(tools_of(catalog)["lookup_exact"], {"identifier": "FVAM-2050-B"})
    assert [c for _, c in CITATION.findall(out)] == [FVAM_B]
    assert "(exact)" in out and "PN16" in out and "PN25" not in out and FVAM_C not in out
    assert "Entities in these results:" in out and "SK-77" in out
    missing = run_tool(tools_of(catalog)["lookup_exact"], {"identifier": "FVAM-2050-Z"})
    assert missing.startswith("No results for 'FVAM-2050-Z' (exact).") and "exactly" in missing


def test_entity_chunks_follows_the_entity_into_the_other_document(catalog: KnowledgeBase) -> None:
    out = run_tool(tools_of(catalog)["entity_chunks"], {"entity": "SK-77"})
    assert {c for _, c in CITATION.findall(out)} == {FVAM_B, SK77}
    assert "EPDM" in out and "Entities in these results: SK-77." in out
    unknown = run_tool(tools_of(catalog)["entity_chunks"], {"entity": "SK-99"})
    assert unknown == "No results for 'SK-99' (entity). no entity named 'SK-99' in the knowledge base"


def test_k_and_filter_arguments_are_applied(tmp_path: Path, catalog: KnowledgeBase) -> None:
    search = tools_of(catalog)["search_kb"]
    assert len(CITATION.findall(run_tool(search, {"query": "seal kit valve", "k": 2}))) == 2
    assert len(CITATION.findall(run_tool(search, {"query": "seal kit valve"}))) == 6  # the extension's k
    (tmp_path / "pumps").mkdir()
    (tmp_path / "pumps" / "cp40.md").write_text("# CP-40 pump\n\nThe pump's seal kit is SK-90 in FKM.\n")
    catalog.add_path(tmp_path / "pumps", meta={"family": "pumps"})
    everything = {c for _, c in CITATION.findall(run_tool(search, {"query": "seal kit", "k": 20}))}
    assert any(c.endswith("cp40.md:1-3") for c in everything) and FVAM_B in everything
    pumps = [c for _, c in CITATION.findall(run_tool(search, {"query": "seal kit", "filter": {"family": "pumps"}}))]
    assert len(pumps) == 1 and pumps[0].endswith("cp40.md:1-3")
    none = run_tool(search, {"query": "seal kit", "filter": {"family": "turbines"}})
    assert none.startswith("No results for 'seal kit'")


@pytest.mark.parametrize(
    ("tool", "args", "words"),
    [
        ("search_kb", {}, ["query", "required"]),
        ("search_kb", {"query": "seals", "k": 0}, ["k", "0", "minimum"]),
        ("search_kb", {"query": "seals", "k": 21}, ["k", "21", "maximum"]),
        ("search_kb", {"query": "seals", "k": "three"}, ["k", "'three'", "integer"]),
        ("search_kb", {"query": "seals", "filter": {"family": 3}}, ["filter", "string"]),
        ("search_kb", {"query": "seals", "mode": "vector"}, ["mode", "not allowed"]),
        ("lookup_exact", {"query": "FVAM-2050-B"}, ["identifier", "required"]),
        ("entity_chunks", {"entity": 77}, ["entity", "string"]),
    ],
)
def test_bad_arguments_are_tool_input_errors_that_say_what_is_wrong(
    catalog: KnowledgeBase, tool: str, args: dict[str, Any], words: list[str]
) -> None:
    with pytest.raises(ToolInputError) as info:
        validate_arguments(tools_of(catalog)[tool], json.dumps(args))
    message = str(info.value)
    assert message.startswith(f"Invalid arguments for {tool}: ")
    for word in words:
        assert word in message, (word, message)


def test_a_bad_call_reaches_the_model_as_an_error_it_can_fix(catalog: KnowledgeBase, tmp_path: Path) -> None:
    def model(messages: list[Message], request: Any) -> Reply | str:
        results = [m for m in messages if isinstance(m, ToolMessage)]
        if not results:
            return call("c1", "search_kb", {"query": "seals", "k": 0})
        if len(results) == 1:
            return call("c2", "search_kb", {"query": "seals", "k": 1})
        return "\n---\n".join(f"{m.status}: {m.text}" for m in results)

    result = run_sync(Agent(FunctionModel(model), extensions=[KnowledgeTools(catalog)], cwd=tmp_path), "Seals?")
    first, second = result.output.split("\n---\n")
    assert first.startswith("error: Error: Invalid arguments for search_kb: k: 0 is less than the minimum of 1")
    assert second.startswith("ok: 1 result for 'seals' (hybrid):")


# -- fitting max_chars --------------------------------------------------------------------------


@pytest.fixture
def big(tether_home: Path) -> KnowledgeBase:
    kb = KnowledgeBase.open(embedder=HashingEmbedder(), name="manuals")
    for i in range(40):
        body = "\n".join(
            f"Valve V{i:02d}-{j} uses seal kit SK-{i}{j:02d}, pressure rating PN{10 + j}, pump P-{i}{j:02d}."
            for j in range(14)
        )
        kb.add_text(
            f"manuals/plant-{i % 4}/section-{i:02d}/valve-family-{i:02d}.md",
            f"# Valve family {i}\n\n{body}\n",
            meta={"family": "odd" if i % 2 else "even"},
        )
    return kb


@pytest.mark.parametrize(
    ("tool", "args"),
    [
        ("search_kb", {"query": "valve seal kit pressure rating pump"}),
        ("search_kb", {"query": "valve seal kit pressure rating pump", "k": 20}),
        ("lookup_exact", {"identifier": "SK-1203"}),
        ("entity_chunks", {"entity": "Valve family 3"}),
    ],
)
def test_output_fits_max_chars_and_every_citation_is_whole(big: KnowledgeBase, tool: str, args: dict[str, Any]) -> None:
    real = {row.citation for row in big.store.chunks(range(1, 10_000)).values()}
    out = run_tool(tools_of(big, max_chars=800)[tool], args)
    assert len(out) <= 800
    cites = [c for _, c in CITATION.findall(out)]
    assert cites and set(cites) <= real, out
    for line in re.findall(r"^\[\d+\] .*$", out, re.M):  # no result cut off in its citation line
        whole = CITATION.match(line)
        assert whole is not None and whole.group(2) in real, line
    assert int(out.split(" ", 1)[0]) == len(cites)  # "N results for ...": every result it counts is shown


def test_output_at_max_chars_still_lists_entities_and_asks_for_citations(big: KnowledgeBase) -> None:
    out = run_tool(tools_of(big, max_chars=800)["search_kb"], {"query": "valve seal kit pressure rating pump"})
    assert len(out) <= 800
    assert "Entities in these results:" in out, out
    assert out.rstrip().endswith("Cite what you use as its label does (document:start-end)."), out[-200:]


def test_a_roomy_limit_shows_whole_chunks(big: KnowledgeBase) -> None:
    out = run_tool(tools_of(big, max_chars=50_000)["search_kb"], {"query": "valve seal kit", "k": 2})
    assert " …" not in out and "shortened" not in out
    assert len(CITATION.findall(out)) == 2


# -- the extension ------------------------------------------------------------------------------


def test_the_prompt_block_names_the_tools_and_the_document_count(catalog: KnowledgeBase) -> None:
    ext = KnowledgeTools(catalog)
    block = ext.prompt_block()
    assert ext.name == "knowledge:catalog"
    assert block.startswith(
        "# Knowledge base 'catalog'\n3 documents are searchable with search_kb, lookup_exact, entity_chunks."
    )
    assert "document:start-end" in block
    suffixed = KnowledgeTools(catalog, suffix="_catalog")
    assert [t.name for t in suffixed.tools()] == ["search_kb_catalog", "lookup_exact_catalog", "entity_chunks_catalog"]
    assert "search_kb_catalog, lookup_exact_catalog, entity_chunks_catalog" in suffixed.prompt_block()
    assert all(t.read_only and not t.needs_approval for t in ext.tools())


def test_scripted_kb_run_answers_citing_the_valve_and_the_seal_kit(catalog: KnowledgeBase, tmp_path: Path) -> None:
    result = run_sync(
        Agent("scripted/kb", extensions=[KnowledgeTools(catalog)], cwd=tmp_path),
        "What are the FVAM-2050-B seals made of?",
    )
    assert result.status == "completed", result.reason
    assert f"[{FVAM_B}]" in result.output and f"[{SK77}]" in result.output
    assert "SK-77" in result.output and "EPDM" in result.output
    assert result.tool_stats["search_kb"]["calls"] == 1 and result.tool_stats["entity_chunks"]["calls"] == 1


def test_scripted_exact_run_gives_the_b_rating_and_never_the_c_section(catalog: KnowledgeBase, tmp_path: Path) -> None:
    result = run_sync(
        Agent("scripted/exact", extensions=[KnowledgeTools(catalog)], cwd=tmp_path),
        "What is the pressure rating of the FVAM-2050-B?",
    )
    assert result.status == "completed", result.reason
    assert result.output == f"FVAM-2050-B: pressure rating PN16 (16 bar) at 20 °C [{FVAM_B}]."
    assert FVAM_C not in result.output and "PN25" not in result.output
