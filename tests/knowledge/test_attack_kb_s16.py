"""``tether kb`` attacked from outside, round s16: the graph's fan-out and filters over many
documents against SQLite's limit on a statement's variables.

Nothing here asserts how long anything took."""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Iterable
from pathlib import Path

import pytest

from tether.errors import UserError
from tether.knowledge import HashingEmbedder, KnowledgeBase, SqliteKnowledgeStore
from tether.knowledge.base import MAX_FRONTIER
from tether.knowledge.readers import IGNORED


def _stock_sqlite(kb: KnowledgeBase, limit: int) -> None:
    """The base's connection limited as SQLite builds are by default: 32,766 variables in one
    statement since 3.32 (999 before), where Debian's build, the one these tests run on, allows
    250,000. The tests below need far fewer rows on a stock build to reach it."""
    assert isinstance(kb.store, SqliteKnowledgeStore)
    kb.store._db.setlimit(sqlite3.SQLITE_LIMIT_VARIABLE_NUMBER, limit)


def test_a_heading_over_thousands_of_part_numbers_is_walked_in_graph_searches() -> None:
    # A parts list of 20,000 numbers under one heading: the heading is related to each of them, so
    # the walk's second hop asked for the relations of 20,000 entities with one variable each,
    # 40,000 in all: "sqlite3.OperationalError: too many SQL variables", a traceback from kb search
    # --mode neighborhood or hierarchical (on Debian's build, from 125,000 part numbers).
    lines = ["# Parts", ""] + [f"Part PN-{i:06d}-X fits the housing." for i in range(20_000)]
    kb = KnowledgeBase.open(":memory:")
    kb.add_text("parts.md", "\n".join(lines))
    _stock_sqlite(kb, 32_766)
    for mode in ("neighborhood", "hierarchical"):
        result = kb.search("housing PN-000005-X", mode=mode, k=5)
        assert result.hits[0].citation == "parts.md:1-16", mode
        assert "PN-000005-X" in result.hits[0].chunk.text
        assert "Parts" in result.entities
    # Every chunk of the list mentions the heading: a large k asks for the entities of each
    _stock_sqlite(kb, 999)
    many = kb.search("housing", mode="neighborhood", k=1_500)
    assert len(many.hits) == 1_500


def test_a_filter_that_keeps_more_documents_than_a_statement_has_variables_still_finds_them() -> None:
    # --filter family=valves over a base of many documents: the keyword search named each document
    # kept as a variable, SQLite refused the statement, and the refusal was read as "a query that
    # matches nothing": no results, where every document held the word.
    kb = KnowledgeBase.open(":memory:")
    for i in range(1_200):
        kb.add_text(f"valve-{i}.md", f"Valve {i} has a brass seat.\n", meta={"family": "valves"})
    kb.add_text("pump.md", "The pump has a brass seat too.\n", meta={"family": "pumps"})
    _stock_sqlite(kb, 999)
    for mode in ("keyword", "hybrid", "hierarchical"):
        hits = kb.search("brass seat", mode=mode, k=5, filters={"family": "valves"}).hits
        assert len(hits) == 5, mode
        assert all(h.chunk.document.startswith("valve-") for h in hits), mode


def test_a_heading_that_holds_the_paths_separator_is_one_entity_under_its_whole_name() -> None:
    # "## Settings > Network" (a menu path) was the entity "Network", and "## When x > 5" the entity
    # "5": the section's name was cut from the heading path at its last " > ", which the heading
    # itself held. entity_chunks with the heading as written found nothing, and another section
    # named "Network" was taken for the same entity.
    kb = KnowledgeBase.open(":memory:", chunk_size=64, overlap=8)  # a chunk per section
    kb.add_text(
        "ui.md",
        "# Manual\n\n## Settings > Network\n\nThe proxy field takes host:port for PX-100.\n\n"
        "## Network\n\nThe cable is CAT-6.\n\n## When x > 5\n\nThe valve opens.\n",
        markdown=True,
    )
    assert [h.citation for h in kb.entity_chunks("Settings > Network").hits] == ["ui.md:5-5"]
    assert [h.citation for h in kb.entity_chunks("Network").hits] == ["ui.md:7-9"]
    assert [h.citation for h in kb.entity_chunks("When x > 5").hits] == ["ui.md:11-13"]
    assert kb.store.entity("5") is None
    assert "Settings > Network" in kb.search("proxy", mode="neighborhood").entities


def test_a_file_that_is_no_longer_text_is_gone_from_the_folder_and_sync_removes_its_old_text(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A text file overwritten with binary bytes (or grown past the size read, or swapped for a
    # named pipe) was skipped, and its earlier text stayed in the base for good, --sync or not:
    # searches answered with it, citing lines of a file that no longer holds them.
    monkeypatch.chdir(tmp_path)
    folder = tmp_path / "docs"
    folder.mkdir()
    (folder / "a.txt").write_text("The STALEWORD pump runs on brine.\n")
    (folder / "b.txt").write_text("The other pump runs on glycol.\n")
    (folder / "c.txt").write_text("The STALEWORD valve is shut.\n")
    kb = KnowledgeBase.open(tmp_path / "kb.db")
    assert sorted(kb.add_path(folder).added) == ["docs/a.txt", "docs/b.txt", "docs/c.txt"]
    (folder / "a.txt").write_bytes(b"\x00\x01\x02 binary now " * 100)
    (folder / "c.txt").unlink()
    os.mkfifo(folder / "c.txt")
    report = kb.add_path(folder)
    assert sorted(name for name, _ in report.skipped) == ["docs/a.txt", "docs/c.txt"]
    assert sorted(report.gone) == ["docs/a.txt", "docs/c.txt"]  # kept, and said, as a deleted file is
    report = kb.add_path(folder, prune=True)
    assert sorted(report.removed) == ["docs/a.txt", "docs/c.txt"]
    assert kb.search("STALEWORD", mode="keyword").hits == []
    assert [d.name for d in kb.documents()] == ["docs/b.txt"]
    # Text again, it is read again
    (folder / "a.txt").write_text("The pump runs on STALEWORD now.\n")
    assert kb.add_path(folder, prune=True).added == ["docs/a.txt"]
    assert [h.citation for h in kb.search("STALEWORD", mode="keyword").hits] == ["docs/a.txt:1-1"]
    # So it is for a file named on its own
    (folder / "a.txt").write_bytes(b"\x00\x01\x02 binary again " * 100)
    assert kb.add_path(folder / "a.txt").gone == ["docs/a.txt"]
    assert kb.add_path(folder / "a.txt", prune=True).removed == ["docs/a.txt"]
    assert kb.search("STALEWORD", mode="keyword").hits == []


def test_an_identifier_wins_over_a_family_of_twins_that_share_its_words() -> None:
    # A kit and its 2,100 variants (SK-77 and SK-77-0000 ... SK-77-2099): every variant holds the
    # words "sk 77" in that order, and in a shorter chunk, so BM25 put them all above the one chunk
    # that holds SK-77 itself. Only the first 100 such chunks (2,000 in exact mode) were checked
    # for the identifier: hybrid search gave three variants for "SK-77" (against "Identifiers win
    # in every mode") and lookup_exact said no chunk contains it.
    kb = KnowledgeBase.open(":memory:", embedder=HashingEmbedder(64))
    for i in range(2_100):
        kb.add_text(f"kits/sk-77-{i:04d}.md", f"Seal kit SK-77-{i:04d} fits SK 77 housings.\n", embed=False)
    filler = " ".join(f"filler{j}" for j in range(60))
    kb.add_text("kits/sk-77.md", f"The seal kit SK-77 is made of EPDM. {filler}\n", embed=False)
    kb.fill_vectors()
    for mode in ("hybrid", "keyword", "hierarchical", "neighborhood", "exact"):
        hits = kb.search("SK-77", mode=mode, k=3).hits
        assert hits and hits[0].citation == "kits/sk-77.md:1-1", (mode, [h.citation for h in hits])
    assert kb.search("what is SK-77 made of", k=3).hits[0].citation == "kits/sk-77.md:1-1"


def test_a_word_in_a_script_with_vowel_signs_is_one_word(tmp_path: Path) -> None:
    # Hindi, Bengali, Tamil, Thai... write vowels as marks joined to a consonant (कि, पं), which
    # Python's \w does not take for word characters: "किताब" (book) was indexed and searched as
    # "क", "त", "ब", so a search for it found every text with a lone क (के, "of") as well, scored
    # alike: a note on pumps and one on valves tied with the only page about a book.
    path = tmp_path / "hi.db"
    kb = KnowledgeBase.open(path)
    kb.add_text("pump.txt", "यह पंप पानी के लिए है।\n")
    kb.add_text("valve.txt", "यह वाल्व तेल के लिए है।\n")
    kb.add_text("book.txt", "किताब मेज पर है।\n")
    kb.add_text("thai.txt", "ปั๊มน้ำ ใช้กับน้ำ\n")
    for word, where in (("किताब", "book.txt"), ("पंप", "pump.txt"), ("पानी", "pump.txt"), ("ปั๊มน้ำ", "thai.txt")):
        assert [h.citation for h in kb.search(word, mode="keyword").hits] == [f"{where}:1-1"], word
    # A base indexed before is indexed again, once, when it is opened
    db = sqlite3.connect(path)
    with db:
        db.execute("UPDATE meta SET value = '1' WHERE key = 'fts_words'")
        db.execute("DELETE FROM chunks_fts")
        db.execute("INSERT INTO chunks_fts (rowid, text) SELECT id, 'क त ब' FROM chunks")
    db.close()
    kb.close()
    again = KnowledgeBase.open(path)
    assert [h.citation for h in again.search("किताब", mode="keyword").hits] == ["book.txt:1-1"]


def test_the_graph_walk_goes_on_from_its_best_entities_not_from_every_one_a_hub_reaches(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # `kb add catalog --meta family=valves`: every chunk mentions "valves", related to every part
    # number in the catalogue, so a graph search's first hop reached them all and its second asked
    # for the relations of each: the whole graph read at every neighborhood or hierarchical search
    # (seconds at 140,000 part numbers), for the 20 entities the walk keeps.
    kb = KnowledgeBase.open(":memory:")
    for n in range(40):
        rows = "\n".join(f"Part PN-{n:02d}-{i:04d} fits the housing." for i in range(300))
        kb.add_text(f"catalog/{n:02d}.txt", rows + "\n", meta={"family": "valves"})
    asked: list[int] = []
    neighbours = kb.store.neighbours

    def counted(ids: Iterable[int]) -> list[tuple[int, int, float]]:
        ids = list(ids)
        asked.append(len(ids))
        return neighbours(ids)

    monkeypatch.setattr(kb.store, "neighbours", counted)
    for mode in ("neighborhood", "hierarchical"):
        asked.clear()
        result = kb.search("housing PN-07-0150", mode=mode, k=5)
        assert "PN-07-0150" in result.hits[0].chunk.text, mode
        assert "valves" in result.entities
        assert max(asked) <= MAX_FRONTIER, (mode, asked)


def test_a_deeper_ignore_file_takes_back_what_a_higher_one_ignored_as_git_does(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The top .gitignore says *.txt, docs/.gitignore says !manual.txt: git tracks docs/manual.txt
    # (a lower file overrides a higher one) and ripgrep searches it, but kb add passed it over as
    # ignored: any ignore file's match ignored it, whatever a deeper one said.
    monkeypatch.chdir(tmp_path)
    repo = tmp_path / "repo"
    (repo / "docs" / "old").mkdir(parents=True)
    (repo / ".gitignore").write_text("*.txt\n")
    (repo / "docs" / ".gitignore").write_text("!manual.txt\n")
    (repo / "docs" / "old" / ".gitignore").write_text("manual.txt\n")
    for where in ("notes.txt", "docs/manual.txt", "docs/draft.txt", "docs/old/manual.txt"):
        (repo / where).write_text(f"The MANUALWORD text of {where}.\n")
    kb = KnowledgeBase.open(":memory:")
    report = kb.add_path(repo)
    assert report.added == ["repo/docs/manual.txt"], report
    assert report.passed_over == {IGNORED: 3}


def test_a_vector_search_before_the_vectors_are_made_says_to_fill_not_that_there_is_no_embedder() -> None:
    # kb add --no-vectors (or --background still filling, or a fill stopped by a kill), then
    # kb search --mode vector: "has no vectors (no embedder): use keyword or hybrid", though the base
    # has its embedder, and all it lacks is tether kb fill.
    kb = KnowledgeBase.open(":memory:", embedder=HashingEmbedder(64), name="manuals")
    kb.add_text("a.md", "The pump is red.\n", embed=False)
    with pytest.raises(UserError) as raised:
        kb.search("pump", mode="vector")
    said = str(raised.value)
    assert "no embedder" not in said and "tether kb --name manuals fill" in said, said
    kb.fill_vectors()
    assert [h.citation for h in kb.search("pump", mode="vector").hits] == ["a.md:1-1"]
    bare = KnowledgeBase.open(":memory:", name="plain")
    bare.add_text("a.md", "The pump is red.\n")
    with pytest.raises(UserError, match="no embedder"):
        bare.search("pump", mode="vector")


def test_an_identifier_written_with_a_typographic_hyphen_is_found_exactly() -> None:
    # Word processors and the PDFs made from them write part numbers with non-breaking hyphens
    # (FVAM\u20112050\u2011B): lookup_exact("FVAM-2050-B") said "no chunk contains 'FVAM-2050-B'
    # exactly" of the data sheet that names it on every page, and hybrid search did not pin it.
    kb = KnowledgeBase.open(":memory:")
    kb.add_text("sheet.txt", "Page 3\nThe FVAM\u20112050\u2011B valve is rated PN16.\n")
    kb.add_text("word.txt", "The FVAM\u20102050\u2010B body is brass.\n")
    kb.add_text("twin.txt", "The FVAM-2050-C valve is rated PN25, the FVAM\u20112050\u2011BX PN40.\n")
    kb.add_text("range.txt", "Kits FVAM-2050-B\u2013FVAM-2050-D fit.\n")
    found = [h.citation for h in kb.search("FVAM-2050-B", mode="exact").hits]
    assert sorted(found) == ["range.txt:1-1", "sheet.txt:1-2", "word.txt:1-1"]
    assert [h.citation for h in kb.search("FVAM\u20112050\u2011B", mode="exact").hits] != []
    assert kb.search("FVAM-2050-B rating", k=3).hits[0].citation in found
