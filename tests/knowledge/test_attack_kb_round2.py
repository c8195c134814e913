"""``tether kb`` attacked as a hostile or unlucky person would: kill -9 while files are read and
while vectors are made, two adds and a search or an agent run at once, hostile folders (links out
of the folder, loops, pipes, names that are not UTF-8, a tree nested a thousand deep), queries
with lone surrogates and FTS syntax, and a file full of identifiers.

Processes run for real where the attack is a process's; what could hang runs under a timeout that
only guards the suite: nothing here asserts how long anything took."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

from tests.cli import conftest as cli
from tests.cli.conftest import run_main, tether

from .conftest import check_index

env = cli.env
quiet_env = cli.quiet_env


def _manuals(root: Path, files: int, lines: int) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    for n in range(files):
        (root / f"manual-{n:02d}.txt").write_text(
            "\n".join(
                f"Manual {n}, step {i}: turn valve V-{n}-{i} a quarter to the left and check seal SK-{i % 50}."
                for i in range(lines)
            )
        )
    return root


def _counts(db: Path) -> tuple[int, int, int]:
    """(documents, chunks, chunks with a vector), read as another process would."""
    con = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=30)
    try:
        docs = con.execute("SELECT COUNT(*) FROM documents").fetchone()[0]
        chunks, embedded = con.execute("SELECT COUNT(*), COUNT(vec) FROM chunks").fetchone()
        return int(docs), int(chunks), int(embedded)
    finally:
        con.close()


def _until(proc: subprocess.Popen[str], db: Path, ready: Any) -> None:
    """Wait until ``ready(counts)`` holds for the base ``proc`` is writing (a hang guard only)."""
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and proc.poll() is None:
        try:
            if db.exists() and ready(_counts(db)):
                return
        except sqlite3.OperationalError:  # the file is made, its tables not yet
            pass
        time.sleep(0.02)
    raise AssertionError(f"the add ended first (exit {proc.poll()}): {proc.stderr.read() if proc.stderr else ''}")


def _start(env: dict[str, str], *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        ["tether", *args],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        stdin=subprocess.DEVNULL,
    )


def _whole(db: Path) -> None:
    """No chunk without its document, no document twice, the full-text index exactly the chunks."""
    from tether.knowledge import KnowledgeBase

    kb = KnowledgeBase.open(db)
    try:
        check_index(kb)
        raw = kb.store._db  # type: ignore[attr-defined]
        assert raw.execute("SELECT COUNT(*) FROM chunks WHERE doc_id NOT IN (SELECT id FROM documents)").fetchone() == (
            0,
        )
        assert raw.execute("SELECT COUNT(*) FROM documents WHERE id NOT IN (SELECT doc_id FROM chunks)").fetchone() == (
            0,
        )
        assert raw.execute("SELECT COUNT(*) - COUNT(DISTINCT path) FROM documents").fetchone() == (0,)
    finally:
        kb.close()


# -- kill -9 and resuming ----------------------------------------------------------------------


def test_kill_9_while_reading_then_while_filling_leaves_a_whole_base_that_the_same_add_finishes(
    env: dict[str, str], tether_home: Path, tmp_path: Path
) -> None:
    """The docs: "Ctrl-C or a kill at any point leaves a whole base, searchable by keyword", each
    file whole or not at all, and adding again reads only what is not in. Killed twice (once while
    files are read, once while the vectors are made), the same add finishes the base."""
    _manuals(tmp_path / "many", 60, 400)
    db = tether_home / "kb" / "default.db"
    add = _start(env, "kb", "add", str(tmp_path / "many"), "--embedder", "hashing/64")
    _until(add, db, lambda c: c[0] >= 5)
    add.send_signal(signal.SIGKILL)
    add.wait(timeout=30)
    docs, chunks, embedded = _counts(db)
    assert 5 <= docs < 60 and embedded == 0
    _whole(db)
    found = tether("kb", "search", "valve V-3-7", "--mode", "keyword", "--json", env=env)
    assert found.returncode == 0 and json.loads(found.stdout)["hits"], found.stderr

    add = _start(env, "kb", "add", str(tmp_path / "many"))
    _until(add, db, lambda c: c[0] == 60 and c[2] > 0)
    add.send_signal(signal.SIGKILL)
    add.wait(timeout=30)
    docs, chunks, embedded = _counts(db)
    assert docs == 60 and 0 < embedded < chunks
    _whole(db)

    done = tether("kb", "add", str(tmp_path / "many"), env=env, timeout=120)
    assert done.returncode == 0, done.stderr
    assert f"{tmp_path / 'many'}: 0 added, 0 updated, 60 unchanged" in done.stdout
    assert f"vectors: {chunks - embedded} made, {chunks} of {chunks} chunks covered" in done.stdout
    assert "Traceback" not in done.stderr
    _whole(db)
    hits = json.loads(tether("kb", "search", "V-59-399", "--mode", "exact", "--json", env=env).stdout)["hits"]
    assert hits and all("/manual-59.txt:" in h["citation"] and "valve V-59-399 a quarter" in h["text"] for h in hits)


# -- two processes at once ---------------------------------------------------------------------


def test_an_add_that_reads_nothing_does_not_drop_a_base_another_add_is_writing_to(
    quiet_env: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Two adds on a new base: one of a folder with nothing readable, one of documents whose first
    file is not in yet. The first found no document and deleted the base under the second, which
    went on writing into the deleted file, said "2 documents", and left no base at all (seen with
    real processes: a folder holding one large binary file beside one with a large text file)."""
    import fcntl

    import tether.cli.kb as kb_cli
    from tether.knowledge import KnowledgeBase

    (tmp_path / "empty").mkdir()
    (tmp_path / "empty" / "blob.md").write_bytes(b"\x00\x01binary")
    db = quiet_env / "kb" / "default.db"
    other: list[KnowledgeBase] = []
    reading = kb_cli._read_paths

    locks: list[int] = []

    def meanwhile(kb: Any, args: Any) -> None:
        # The other add: it holds the base's use lock as every add does, and has opened the base
        # this one made; its first file is still being read.
        locks.append(os.open(quiet_env / "kb" / "default.use.lock", os.O_RDWR))
        fcntl.flock(locks[0], fcntl.LOCK_SH | fcntl.LOCK_NB)
        other.append(KnowledgeBase.open(db))
        reading(kb, args)

    monkeypatch.setattr(kb_cli, "_read_paths", meanwhile)
    code, _, err = run_main("kb", "add", str(tmp_path / "empty"), "--embedder", "hashing/64", capsys=capsys)
    assert code == 1 and "another is adding to it" in err, err
    monkeypatch.setattr(kb_cli, "_read_paths", reading)
    other[0].add_text("notes.md", "The pump P-100 is serviced yearly.\n")  # the other add's first file
    code, out, err = run_main("kb", "list", capsys=capsys)
    assert code == 0 and out.startswith("notes.md  1 chunks"), err
    other[0].close()
    os.close(locks[0])


def test_a_write_that_waits_out_another_processs_transaction_is_a_clear_error_and_reads_go_on(
    env: dict[str, str],
    quiet_env: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """A kb add writes each file in one transaction, so a large file holds the base's write lock
    for as long as it is indexed (a 13 MB parts list: 20 s and more). A second add waited 30 s and
    died with sqlite3's "database is locked" traceback. Meanwhile kb search and an agent run read."""
    from tether.knowledge import store

    monkeypatch.chdir(tmp_path)
    (tmp_path / "a.md").write_text("# Valves\n\nThe FVAM-2050-B is fitted with seal kit SK-77.\n")
    (tmp_path / "b.md").write_text("# Pumps\n\nThe pump P-100 is serviced yearly.\n")
    code, _, err = run_main("kb", "add", "a.md", "--embedder", "hashing/64", capsys=capsys)
    assert code == 0, err
    monkeypatch.setattr(store, "BUSY_SECONDS", 0.2, raising=False)  # the wait is 30 s; this test waits less
    writer = sqlite3.connect(quiet_env / "kb" / "default.db", isolation_level=None)
    writer.execute("BEGIN IMMEDIATE")  # as an add in the middle of a large file holds it
    try:
        code, out, err = run_main("kb", "add", "b.md", capsys=capsys)
        assert code == 2 and err.startswith("tether: the knowledge base ") and "is busy" in err, err
        assert "Run this again when it is done" in err and err.count("\n") == 1
        found = tether("kb", "search", "FVAM-2050-B", "--mode", "exact", "--json", env=env)
        assert found.returncode == 0 and json.loads(found.stdout)["hits"][0]["citation"].startswith("a.md:")
        question = "What is the FVAM-2050-B fitted with?"
        ran = tether("run", "--model", "scripted/exact", "--kb", "default", question, env=env, cwd=tmp_path)
        assert ran.returncode == 0 and "Traceback" not in ran.stderr, ran.stderr
    finally:
        writer.execute("ROLLBACK")
        writer.close()
    code, out, err = run_main("kb", "add", "b.md", capsys=capsys)
    assert code == 0 and "b.md: 1 added" in out, err


def test_the_fill_makes_the_vectors_of_chunks_an_add_wrote_behind_it(tmp_path: Path) -> None:
    """A filler walks the chunks by id, upward. An add in another process replacing the document
    that held the largest ids got those ids again (SQLite's MAX + 1), behind the filler, which
    ended with them unembedded; the add itself, finding the filler busy, made none either."""
    from tether.knowledge import HashingEmbedder, KnowledgeBase

    db = tmp_path / "race.db"
    filler = KnowledgeBase.open(db, embedder=HashingEmbedder(64))
    filler.add_text("one.txt", "\n".join(f"step {i} of the first manual, valve V-{i}" for i in range(200)), embed=False)
    filler.add_text("two.txt", "\n".join(f"step {i} of the second manual" for i in range(60)), embed=False)
    adder = KnowledgeBase.open(db, embedder=HashingEmbedder(64))
    changed = []

    def progress(done: int, total: int) -> None:
        if done and done >= total and not changed:  # the filler's cursor is past every chunk
            changed.append(adder.add_text("two.txt", "\n".join(f"step {i}, revised" for i in range(60)), embed=False))

    filler.fill_vectors(progress, batch=8)
    assert changed == [True]
    embedded, chunks = filler.store.coverage()
    assert embedded == chunks


def test_two_adds_of_overlapping_folders_at_once_leave_each_document_once(
    env: dict[str, str], tether_home: Path, tmp_path: Path
) -> None:
    _manuals(tmp_path / "both" / "a", 20, 200)
    _manuals(tmp_path / "both" / "b", 20, 200)
    made = tether("kb", "add", str(tmp_path / "both" / "a" / "manual-00.txt"), "--embedder", "hashing/64", env=env)
    assert made.returncode == 0, made.stderr
    first = _start(env, "kb", "add", str(tmp_path / "both"))
    second = _start(env, "kb", "add", str(tmp_path / "both" / "b"), str(tmp_path / "both" / "a"))
    for proc in (first, second):
        _, err = proc.communicate(timeout=120)
        assert proc.returncode == 0 and "Traceback" not in err, err
    db = tether_home / "kb" / "default.db"
    _whole(db)
    assert _counts(db)[0] == 40
    filled = tether("kb", "fill", env=env, timeout=120)
    assert filled.returncode == 0 and filled.stdout.endswith(f"{_counts(db)[1]} of {_counts(db)[1]} chunks covered\n")


# -- hostile folders ---------------------------------------------------------------------------


def test_a_file_name_that_is_not_utf8_is_skipped_with_the_reason_and_the_rest_is_read(
    env: dict[str, str], tmp_path: Path
) -> None:
    """A name with bytes that are not UTF-8 crashed the add with UnicodeEncodeError (SQLite takes
    only UTF-8), after the files before it, and every add of that folder after."""
    root = tmp_path / "docs"
    root.mkdir()
    (root / "ok.md").write_text("# Valves\n\nThe FVAM-2050-B is fitted with seal kit SK-77.\n")
    bad = os.fsdecode(b"bad\xff.md")
    (root / bad).write_text("A file with a Latin-1 name.\n")
    (root / os.fsdecode(b"folder\xfe")).mkdir()
    (root / os.fsdecode(b"folder\xfe") / "inside.md").write_text("In a folder with a Latin-1 name.\n")
    for _ in range(2):
        added = tether("kb", "add", "docs", "--embedder", "hashing/64", env=env, cwd=tmp_path)
        assert added.returncode == 0 and "Traceback" not in added.stderr, added.stderr
        assert added.stderr.count("its name is not valid UTF-8: rename it to read it") == 2
    assert added.stdout.startswith("docs: 0 added, 0 updated, 1 unchanged, 2 skipped")
    listed = tether("kb", "list", env=env)
    assert listed.stdout.startswith("docs/ok.md") and listed.stdout.count("\n") == 1


def test_a_hostile_folder_reads_only_its_own_regular_text_files(
    env: dict[str, str], tmp_path: Path, tether_home: Path
) -> None:
    """A link to a secret outside the folder (a file, a folder), loops, a dangling link, a named
    pipe, a binary file named .md, a file that is not UTF-8: the add neither hangs nor reads the
    secrets (links are not followed) and reads the rest."""
    secret = tmp_path / "user" / ".ssh"
    secret.mkdir(parents=True)
    (secret / "id_rsa.txt").write_text("-----BEGIN OPENSSH PRIVATE KEY----- SECRETKEYMATERIAL\n")
    root = tmp_path / "docs"
    (root / "sub").mkdir(parents=True)
    (root / "key.txt").symlink_to(secret / "id_rsa.txt")
    (root / "sub" / "ssh").symlink_to(secret)
    (root / "sub" / "up").symlink_to("..")
    (root / "loop1.md").symlink_to("loop2.md")
    (root / "loop2.md").symlink_to("loop1.md")
    (root / "gone.md").symlink_to(tmp_path / "nowhere.md")
    os.mkfifo(root / "pipe.md")
    (root / "blob.md").write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR" + bytes(range(256)))
    (root / "latin1.txt").write_bytes("Caf\xe9 cr\xe8me, valve V-12.\n".encode("latin-1"))
    (root / "sub" / "ok.md").write_text("# Seals\n\nSeal kit SK-77: EPDM.\n")
    added = tether("kb", "add", str(root), "--embedder", "hashing/64", env=env)
    assert added.returncode == 0, added.stderr
    assert f"{root}: 2 added, 0 updated, 0 unchanged, 2 skipped" in added.stdout
    assert "skipped" in added.stderr and "pipe.md: not a regular file" in added.stderr
    assert "blob.md: binary" in added.stderr
    for word in ("SECRETKEYMATERIAL", "OPENSSH"):
        found = tether("kb", "search", word, "--mode", "keyword", "--json", env=env)
        assert json.loads(found.stdout)["hits"] == []
    assert not any("SECRET" in p.read_bytes().decode("latin-1") for p in (tether_home / "kb").glob("default.db*"))
    found = tether("kb", "search", "V-12", "--mode", "exact", "--json", env=env)
    assert [h["text"] for h in json.loads(found.stdout)["hits"]] == ["Caf\ufffd cr\ufffdme, valve V-12."]


def test_a_named_pipe_or_a_device_named_on_the_command_line_is_skipped_saying_why(
    env: dict[str, str], tmp_path: Path
) -> None:
    """Named in a folder, a pipe is skipped with the reason; named itself it was passed over in
    silence ("0 added, 0 updated, 0 unchanged"), so nothing said why nothing was read."""
    os.mkfifo(tmp_path / "pipe.md")
    added = tether("kb", "add", str(tmp_path / "pipe.md"), "/dev/null", "--embedder", "hashing/64", env=env)
    assert added.returncode == 1, added.stderr
    assert f"skipped {tmp_path / 'pipe.md'}: not a regular file (a named pipe, socket or device)" in added.stderr
    assert "skipped /dev/null: not a regular file" in added.stderr
    assert "nothing was added, so no base 'default' was made" in added.stderr


def test_a_folder_nested_deeper_than_pythons_recursion_limit_is_read(env: dict[str, str], tmp_path: Path) -> None:
    """os.walk recursed once per level (Python 3.11): 1,100 nested folders were a RecursionError
    traceback."""
    root = tmp_path / "deep"
    root.mkdir()
    (root / "top.md").write_text("At the top: valve V-1.\n")
    here = root
    levels = []
    for _ in range(1100):
        here = here / "d"
        here.mkdir()
        levels.append(here)
    (here / "bottom.md").write_text("At the bottom: valve V-2.\n")
    try:
        added = tether("kb", "add", str(root), "--embedder", "hashing/64", env=env)
        assert added.returncode == 0 and "Traceback" not in added.stderr, added.stderr[-2000:]
        assert f"{root}: 2 added" in added.stdout
        found = tether("kb", "search", "V-2", "--mode", "exact", "--json", env=env)
        assert json.loads(found.stdout)["hits"][0]["citation"].endswith("/d/bottom.md:1-1")
    finally:  # shutil.rmtree recurses once per level too
        (here / "bottom.md").unlink()
        for level in reversed(levels):
            level.rmdir()


def test_a_changed_then_removed_file_leaves_no_stale_chunk_in_any_mode(
    env: dict[str, str], tmp_path: Path, tether_home: Path
) -> None:
    root = tmp_path / "docs"
    root.mkdir()
    doc = root / "pump.md"
    doc.write_text("# Pump\n\nThe pump P-100 uses impeller IMP-7 of bronze.\n")
    (root / "other.md").write_text("# Other\n\nNothing about pumps.\n")
    assert tether("kb", "add", str(root), "--embedder", "hashing/64", env=env).returncode == 0
    again = tether("kb", "add", str(root), env=env)
    assert f"{root}: 0 added, 0 updated, 2 unchanged" in again.stdout
    doc.write_text("# Pump\n\nThe pump P-100 uses impeller IMP-9 of steel.\n")
    changed = tether("kb", "add", str(root), env=env)
    assert f"{root}: 0 added, 1 updated, 1 unchanged" in changed.stdout
    assert "of 2 chunks covered" in changed.stdout and "vectors: 1 made" in changed.stdout

    def texts(query: str, mode: str) -> list[str]:
        out = tether("kb", "search", query, "--mode", mode, "--json", env=env)
        assert out.returncode == 0, out.stderr
        return [h["text"] for h in json.loads(out.stdout)["hits"]]

    for mode in ("hybrid", "keyword", "vector", "neighborhood", "hierarchical"):
        assert not any("IMP-7" in t or "bronze" in t for t in texts("IMP-7 bronze impeller", mode)), mode
    assert texts("IMP-7", "exact") == []
    found = texts("IMP-9", "exact")
    assert len(found) == 1 and "impeller IMP-9 of steel." in found[0]
    doc.unlink()
    kept = tether("kb", "add", str(root), env=env)
    assert "1 no longer on disk (kept)" in kept.stdout and texts("IMP-9", "exact")
    synced = tether("kb", "add", str(root), "--sync", env=env)
    assert "1 removed (no longer on disk)" in synced.stdout
    assert texts("IMP-9", "exact") == [] and texts("P-100", "exact") == []
    assert not any("P-100" in t for t in texts("pump impeller", "hybrid"))
    _whole(tether_home / "kb" / "default.db")


# -- queries -----------------------------------------------------------------------------------


def test_lone_surrogates_in_a_query_a_filter_or_an_entity_are_answered_not_raised(
    env: dict[str, str], tmp_path: Path
) -> None:
    """Bytes that are not UTF-8 in an argument reach Python as lone surrogates, and so does
    "\\ud800" in a model's JSON: exact mode, a filter and entity_chunks sent them to SQLite, which
    refused them (a UnicodeEncodeError traceback, or a tool failure the model could not fix)."""
    from tether import Agent, run_sync
    from tether.knowledge import HashingEmbedder, KnowledgeBase, KnowledgeTools
    from tether.testing import FunctionModel, Reply

    (tmp_path / "a.md").write_text("# Valves\n\nThe FVAM-2050-B is fitted with seal kit SK-77.\n")
    assert tether("kb", "add", str(tmp_path / "a.md"), "--embedder", "hashing/64", env=env).returncode == 0
    for args in (
        ("FVAM\udcff-2050", "--mode", "exact"),
        ("seal", "--filter", "family=\udcff"),
        ("seal", "--filter", "k\udcff=v", "--mode", "keyword"),
    ):
        out = tether("kb", "search", *args, "--json", env=env)
        assert out.returncode == 0 and "Traceback" not in out.stderr, out.stderr
        assert json.loads(out.stdout)["hits"] == []

    kb = KnowledgeBase.open(":memory:", embedder=HashingEmbedder(64))
    kb.add_text("a.md", "# Valves\n\nThe FVAM-2050-B is fitted with seal kit SK-77.\n")
    calls = [("lookup_exact", {"identifier": "FVAM-2050-B\ud800"}), ("entity_chunks", {"entity": "SK-77\udfff"})]
    calls.append(("search_kb", {"query": "seal \ud800", "filter": {"family": "\ud800"}}))

    seen: list[Any] = []

    def model(messages: list[Any], request: Any) -> Reply:
        answered = [m for m in messages if m.role == "tool"]
        if len(answered) < len(calls):
            name, args = calls[len(answered)]
            return Reply("", calls=((f"c{len(answered)}", name, args),))
        seen.extend(answered)
        return Reply("done")

    result = run_sync(Agent(FunctionModel(model), extensions=[KnowledgeTools(kb)]), "look it up")
    assert result.status == "completed" and len(seen) == 3
    assert not any(m.status == "error" for m in seen), [m.content for m in seen]
    assert "FVAM-2050-B" in str(seen[0].content) and "SK-77" in str(seen[1].content)


@pytest.mark.parametrize(
    "query",
    [
        "!!! ??? ...",
        "\x01\x02\x1b[31m\x7f",
        'NEAR("seal" "kit", 2) AND (kit OR *) NOT ^seal:col',
        'FVAM-2050-B" OR "x',
        "x" * 10_000,
        " ".join(f"PART-{i}" for i in range(2000)),
        "\u202e\u2066 -- ; DROP TABLE chunks; --",
    ],
)
def test_hostile_queries_answer_in_every_mode(
    quiet_env: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], query: str
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "a.md").write_text("# Valves\n\nThe FVAM-2050-B is fitted with seal kit SK-77.\n")
    assert run_main("kb", "add", "a.md", "--embedder", "hashing/64", capsys=capsys)[0] == 0
    for mode in ("hybrid", "keyword", "vector", "exact", "neighborhood", "hierarchical"):
        code, out, err = run_main("kb", "search", query, "--mode", mode, "--json", capsys=capsys)
        assert code == 0, (mode, err)
        assert json.loads(out)["mode"] == mode
    code, out, _ = run_main("kb", "stats", capsys=capsys)
    assert "chunks: 1" in out


# -- a document full of identifiers ------------------------------------------------------------


class _Counting(dict[str, Any]):
    scans = 0

    def __iter__(self) -> Any:
        type(self).scans += 1
        return super().__iter__()


def test_each_mention_is_found_without_scanning_every_entity() -> None:
    """Extraction.mention looked for the entity's other spelling by scanning every entity, so a
    document of n identifiers cost n² (a 7 MB parts list, 150,000 lines, took half an hour to
    add; 20,000 lines 30 s, 10,000 lines 8 s)."""
    from tether.knowledge import Extraction

    found = Extraction(entities=_Counting())
    for i in range(2000):
        found.mention(f"PART-{i}", "identifier", i)
    assert found.mention("part-7", "identifier", 9) == "PART-7" and found.entities["PART-7"][1] == {7, 9}
    assert _Counting.scans <= 1
    by_hand = Extraction(entities={"SK-77": ("identifier", {0})})  # filled by an extractor of one's own
    assert by_hand.mention("sk-77", "identifier", 3) == "SK-77" and by_hand.entities["SK-77"][1] == {0, 3}
    assert by_hand.mention(" FVAM-2050-B ", "identifier", 1) == "FVAM-2050-B" and by_hand.mention(" ", "x", 1) == ""


def test_a_file_that_vanishes_or_shrinks_while_the_folder_is_read(tmp_path: Path) -> None:
    """Listed, then gone before it is read: skipped with the reason; rewritten shorter before it
    is read: its new text is what is indexed, and the next add finds it unchanged."""
    from tether.knowledge import KnowledgeBase

    root = tmp_path / "docs"
    root.mkdir()
    for name, text in (("a.md", "valve V-1\n"), ("b.md", "valve V-2\n"), ("c.md", "valve V-3\n" * 500)):
        (root / name).write_text(text)

    def meddle(n: int, total: int, name: str) -> None:
        if name.endswith("b.md"):
            (root / "b.md").unlink()
        if name.endswith("c.md"):
            (root / "c.md").write_text("seal SK-9\n")

    kb = KnowledgeBase.open(tmp_path / "kb.db")
    report = kb.add_path(root, progress=meddle)
    assert [n.rsplit("/", 1)[-1] for n in report.added] == ["a.md", "c.md"]
    assert [(n.rsplit("/", 1)[-1], why) for n, why in report.skipped] == [
        ("b.md", "cannot read it: No such file or directory")
    ]
    assert [h.chunk.text for h in kb.search("SK-9", mode="exact").hits] == ["seal SK-9"]
    assert kb.search("V-3", mode="exact").hits == []
    again = kb.add_path(root)
    assert len(again.unchanged) == 2 and not again.added and not again.updated
    check_index(kb)


def test_a_base_whose_first_add_was_cut_before_its_embedder_was_recorded_gets_the_one_asked_for(
    quiet_env: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A kill between the base's file being made and its embedder being recorded leaves a file
    with no embedder: the next add's --embedder is used (it was recorded as "none", a base with no
    vectors for good, without a word)."""
    from tether.knowledge.store import SqliteKnowledgeStore

    monkeypatch.chdir(tmp_path)
    (quiet_env / "kb").mkdir(parents=True, exist_ok=True)
    SqliteKnowledgeStore(str(quiet_env / "kb" / "default.db")).close()  # the file, and nothing recorded
    (tmp_path / "a.md").write_text("# Valves\n\nThe FVAM-2050-B is fitted with seal kit SK-77.\n")
    code, _, err = run_main("kb", "add", "a.md", "--embedder", "hashing/64", capsys=capsys)
    assert code == 0, err
    store = SqliteKnowledgeStore(str(quiet_env / "kb" / "default.db"))
    try:
        assert store.get_meta("embedder") == "hashing/64"
        assert store.stats()["embedded_chunks"] == store.stats()["chunks"] > 0
    finally:
        store.close()
