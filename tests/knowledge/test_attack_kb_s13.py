"""``tether kb`` attacked from outside, round s13: two files that take one document's name (the
same file name added from two folders), and a base whose disk fills up in the middle of an add.

Processes run for real where the attack is a process's; nothing here asserts how long anything
took."""

from __future__ import annotations

import resource
import sqlite3
import subprocess
import threading
from collections.abc import Sequence
from pathlib import Path

import pytest

from tests.cli import conftest as cli
from tests.cli.conftest import run_main
from tether.errors import StoreError
from tether.knowledge import HashingEmbedder, KnowledgeBase, SqliteKnowledgeStore

env = cli.env
quiet_env = cli.quiet_env


def test_the_same_file_name_added_from_two_folders_keeps_both_files(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # cd ~/alpha && tether kb add README.md, then cd ~/beta && tether kb add README.md: the second
    # was reported "1 updated" and replaced the first, whose text no search found again.
    alpha, beta = tmp_path / "alpha", tmp_path / "beta"
    alpha.mkdir()
    beta.mkdir()
    (alpha / "README.md").write_text("The alpha project pumps brine.\n")
    (beta / "README.md").write_text("The beta project pumps glycol.\n")
    kb = KnowledgeBase.open(tmp_path / "kb.db")
    monkeypatch.chdir(alpha)
    assert kb.add_path("README.md").added == ["README.md"]
    monkeypatch.chdir(beta)
    report = kb.add_path("README.md")
    assert report.added == [(beta / "README.md").as_posix()], report
    assert report.updated == []
    for word, where in (("brine", alpha), ("glycol", beta)):
        hits = kb.search(word, mode="keyword").hits
        assert [h.chunk.text.strip() for h in hits] == [(where / "README.md").read_text().strip()]
    # Added again from either folder, each is the one document it was
    assert kb.add_path("README.md").unchanged == [(beta / "README.md").as_posix()]
    monkeypatch.chdir(alpha)
    assert kb.add_path("README.md").unchanged == ["README.md"]
    assert len(kb.documents()) == 2
    # A file whose own file is gone gives its name up: a folder moved, its files added again
    (alpha / "README.md").unlink()
    monkeypatch.chdir(beta)
    report = kb.add_path("README.md")
    assert report.updated == ["README.md"], report
    assert [d.name for d in kb.documents()] == ["README.md"]
    assert kb.search("glycol", mode="keyword").hits[0].citation == "README.md:1-1"


def _limited(blocks: int) -> None:
    # What a full disk does to the writes: they fail (EFBIG; Python ignores SIGXFSZ)
    resource.setrlimit(resource.RLIMIT_FSIZE, (blocks * 1024, blocks * 1024))


def test_a_disk_that_fills_up_during_an_add_is_a_clear_error_and_the_add_again_finishes(
    env: dict[str, str], tmp_path: Path
) -> None:
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "a.md").write_text("# First\n\nThe first manual.\n")
    for n in range(12):
        (docs / f"m{n:02d}.md").write_text(
            "\n".join(f"Manual {n} line {i} seal SK-{i} word{i * n}" for i in range(500))
        )
    first = ["tether", "kb", "add", str(docs / "a.md"), "--embedder", "none"]
    assert subprocess.run(first, env=env, capture_output=True, text=True, timeout=120).returncode == 0
    db = Path(env["TETHER_HOME"]) / "kb" / "default.db"
    room = (db.stat().st_size + 128 * 1024) // 1024
    full = subprocess.run(
        ["tether", "kb", "add", str(docs)],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        preexec_fn=lambda: _limited(room),
    )
    assert full.returncode == 2, full
    assert "Traceback" not in full.stderr
    assert f"cannot read or write the knowledge base {db}" in full.stderr
    assert "run the same command again" in full.stderr
    con = sqlite3.connect(db)
    try:
        assert con.execute("PRAGMA integrity_check").fetchone() == ("ok",)
        kept = con.execute("SELECT COUNT(*) FROM documents").fetchone()[0]
    finally:
        con.close()
    assert 1 <= kept < 13
    again = subprocess.run(["tether", "kb", "add", str(docs)], env=env, capture_output=True, text=True, timeout=120)
    assert again.returncode == 0, again.stderr
    kb = KnowledgeBase.open(db)
    try:
        assert len(kb.documents()) == 13
        assert kb.search("word77", mode="keyword").hits
    finally:
        kb.close()


def test_sync_does_not_tell_to_sync_what_it_kept_because_a_folder_could_not_be_read(
    env: dict[str, str], tmp_path: Path
) -> None:
    # kb add --sync keeps the documents of a folder it could not read (here: its .gitignore is a
    # link to nothing); it said "N documents' files are gone (kept; --sync removes them)" to the
    # very command that had --sync, and their files are there.
    (tmp_path / "docs" / "sub").mkdir(parents=True)
    (tmp_path / "docs" / "sub" / "a.md").write_text("Keep the alpha notes.\n")
    (tmp_path / "docs" / "top.md").write_text("Top.\n")
    add = ["tether", "kb", "add", "docs", "--embedder", "none"]
    assert subprocess.run(add, env=env, cwd=tmp_path, capture_output=True, timeout=60).returncode == 0
    (tmp_path / "docs" / "sub" / ".gitignore").symlink_to(tmp_path / "nothing")
    out = subprocess.run([*add, "--sync"], env=env, cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert "--sync removes them" not in out.stderr
    assert "1 documents kept: their folders could not be read (named above), so --sync did not remove them" in (
        out.stderr
    )
    listed = subprocess.run(["tether", "kb", "list"], env=env, capture_output=True, text=True, timeout=60)
    assert "docs/sub/a.md" in listed.stdout


@pytest.mark.parametrize("column", ["chunks.text", "documents.title"])
def test_a_damaged_text_that_is_no_longer_utf8_is_the_damaged_base_error_in_every_command(
    quiet_env: Path, tmp_path: Path, column: str, capsys: pytest.CaptureFixture[str]
) -> None:
    # Bytes overwritten inside a page that SQLite's checks pass but that are no longer UTF-8
    # (found by overwriting random bytes of a base: 1 run in 60): every kb command ended in
    # a traceback, "Could not decode to UTF-8 column" or UnicodeDecodeError.
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "valves.md").write_text("# Valves\n\nThe FVAM-2050-B seal is EPDM.\n")
    assert run_main("kb", "add", str(docs), "--embedder", "hashing/64", capsys=capsys)[0] == 0
    db = quiet_env / "kb" / "default.db"
    table, field = column.split(".")
    con = sqlite3.connect(db)
    con.execute(f"UPDATE {table} SET {field} = CAST(X'C2281B5D303B' AS TEXT)")  # C2 28: not UTF-8
    con.commit()
    con.close()
    # each command that reads the damaged value
    searches = [["search", "seal"], ["search", "FVAM-2050-B", "--mode", "exact"]]
    commands = searches if table == "chunks" else [["list"], ["add", str(docs)]]
    for command in commands:
        code, _, err = run_main("kb", *command, capsys=capsys)  # a traceback would end the test here
        assert code == 2, (command, err)
        assert f"the knowledge base {db} is damaged (a text in it is not UTF-8)" in err, err
        assert "\x1b" not in err  # the damaged bytes are not printed
    assert run_main("kb", "drop", "default", "--yes", capsys=capsys)[0] == 0
    assert not db.exists()


class _DamagedOrder(SqliteKnowledgeStore):
    """A base as one with bytes overwritten left it (found by overwriting random bytes of a base, 2
    runs in 150): three chunks without a vector that its table gives as id 0, whatever id they are
    asked to come after, and that no update reaches."""

    def unembedded(self, limit: int, after: int = 0) -> list[tuple[int, str]]:
        return [(0, "\x00\x00\x00\x00")] * 3

    def set_vectors(self, rows: Sequence[tuple[int, str, bytes]]) -> int:
        return 0


def test_a_damaged_base_whose_chunks_come_back_out_of_order_stops_the_fill_instead_of_spinning(
    tmp_path: Path,
) -> None:
    # kb add and kb fill on such a base spun for ever at full CPU (the fill's cursor never moved);
    # only a kill stopped them, and the next add or fill spun again.
    kb = KnowledgeBase(_DamagedOrder(tmp_path / "kb.db"), embedder=HashingEmbedder(), name="parts")
    ended: list[BaseException | int] = []

    def fill() -> None:
        try:
            ended.append(kb.fill_vectors())
        except BaseException as exc:  # what the fill ended with, for the assertion
            ended.append(exc)

    worker = threading.Thread(target=fill, daemon=True)
    worker.start()
    worker.join(60)  # a guard for the suite only: it ends at once
    assert ended, "the fill spins"
    assert isinstance(ended[0], StoreError), ended
    assert "the knowledge base 'parts' is damaged" in str(ended[0])
    assert "tether kb drop parts --yes" in str(ended[0])


def test_a_text_file_that_is_not_utf8_is_read_and_the_add_says_which_and_what_to_do(
    env: dict[str, str], tmp_path: Path
) -> None:
    # A file saved in Latin-1 or Windows-1252 (what older Windows tools write) was read with each
    # accented letter as U+FFFD, "1 added" and no word more: "café" and "Größe" were found by no
    # search, and nothing said why.
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "menu.txt").write_bytes("Le café est servi. Größe: 40 mm. Ein \ufffd bleibt.\n".encode("cp1252", "replace"))
    (docs / "fine.txt").write_text("Größe 40 mm, café. A \ufffd written on purpose.\n")  # UTF-8: nothing to say
    out = subprocess.run(
        ["tether", "kb", "add", str(docs), "--embedder", "none"], env=env, capture_output=True, text=True, timeout=60
    )
    assert out.returncode == 0, out.stderr
    name = (docs / "menu.txt").as_posix()
    assert f"  not UTF-8 {name}: 3 characters read as \ufffd; save it as UTF-8 and add it again" in out.stderr, (
        out.stderr
    )
    assert "fine.txt" not in out.stderr
    kb = KnowledgeBase.open(Path(env["TETHER_HOME"]) / "kb" / "default.db")
    try:
        report = kb.add_path(docs)
        assert report.undecoded == [] and len(report.unchanged) == 2  # said once, when the file is read
        (docs / "menu.txt").write_bytes("Le café est servi.\n".encode("cp1252"))
        assert kb.add_path(docs).undecoded == [(name, 1)]
    finally:
        kb.close()


def test_a_damaged_full_text_index_record_is_the_damaged_base_error_not_no_results_or_a_traceback(
    quiet_env: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Bytes overwritten in the full-text index's own record (found by overwriting random bytes of
    # a base): every search answered "no results", as if the base held nothing on it, and kb
    # remove and kb add of a changed file ended in a traceback ("invalid fts5 file format").
    doc = tmp_path / "valves.md"
    doc.write_text("# Valves\n\nThe FVAM-2050-B seal is EPDM.\n")
    add = ["add", str(doc), "--embedder", "none"]
    assert run_main("kb", *add, capsys=capsys)[0] == 0
    db = quiet_env / "kb" / "default.db"
    con = sqlite3.connect(db)
    con.execute("UPDATE chunks_fts_config SET v = 0 WHERE k = 'version'")
    con.commit()
    con.close()
    doc.write_text("# Valves\n\nThe FVAM-2050-B seal is FKM now.\n")
    commands = [["search", "seal"], ["search", "FVAM-2050-B", "--mode", "exact"], ["remove", doc.as_posix()], add]
    for command in commands:
        code, _, err = run_main("kb", *command, capsys=capsys)  # a traceback would end the test here
        assert code == 2, (command, err)
        assert f"the knowledge base {db} is damaged" in err, err


@pytest.mark.parametrize("where", ["gone", "itself"])
def test_a_link_named_on_the_command_line_that_leads_nowhere_says_so(
    quiet_env: Path, tmp_path: Path, where: str, capsys: pytest.CaptureFixture[str]
) -> None:
    # `ls` shows notes.md, and kb add notes.md said "notes.md does not exist": it is a link to a
    # file that was moved (or a loop of links).
    link = tmp_path / "notes.md"
    link.symlink_to(tmp_path / "moved.md" if where == "gone" else link)
    code, _, err = run_main("kb", "add", str(link), capsys=capsys)
    assert code == 2
    assert f"{link} is a symbolic link to {tmp_path / 'moved.md' if where == 'gone' else link}, which " in err, err
    assert "nothing was added" in err
    assert not (quiet_env / "kb" / "default.db").exists()


def test_a_hostile_ignore_file_does_not_hang_the_add(env: dict[str, str], tmp_path: Path) -> None:
    # A cloned repository's .gitignore whose patterns make a backtracking matcher run for ever on a
    # long file name: kb add sat at full CPU (stopped by hand after 120 s).
    repo = tmp_path / "cloned"
    repo.mkdir()
    (repo / ".gitignore").write_text("*" * 60 + "b\n" + "[a-z]*" * 9 + "q\n*.secret\n")
    (repo / ("a" * 200 + ".md")).write_text("The pump runs on brine.\n")
    (repo / "keys.secret").write_text("hunter2\n")
    try:  # a hang guard only: the add takes a second or two
        done = subprocess.run(
            ["tether", "kb", "add", str(repo), "--embedder", "none"],
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )
    except subprocess.TimeoutExpired:
        pytest.fail("tether kb add did not finish in 120 s on a folder whose .gitignore is hostile")
    assert done.returncode == 0, done.stderr
    kb = KnowledgeBase.open(Path(env["TETHER_HOME"]) / "kb" / "default.db")
    try:
        assert [Path(d.name).name for d in kb.documents()] == ["a" * 200 + ".md"]  # the .secret kept out
    finally:
        kb.close()
