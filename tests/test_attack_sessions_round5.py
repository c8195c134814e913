"""Sessions and their stores attacked from outside (round 5): a session database damaged past its
first page, and more.

What a user relies on: a store that cannot be used says so in one line that names it and what to
do (never a traceback out of `tether run`, `tether chat` or the server), and nothing good is lost."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.cli.conftest import run_main
from tests.conftest import CommitRefusedOnce
from tether.messages import AssistantMessage, TextPart, ToolCallPart, ToolMessage, UserMessage, text_of


def _damage_past_the_first_page(db: Path) -> None:
    """Overwrite the pages after the header page with garbage, as a disk or a copy cut short may:
    SQLite opens the file, then finds it malformed at the first read of a table."""
    data = bytearray(db.read_bytes())
    data[4096:] = b"A" * (len(data) - 4096)
    db.write_bytes(bytes(data))


def test_a_run_on_a_damaged_session_database_is_one_line_not_a_traceback(
    tether_home: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`tether run --session s --session-store sqlite` on a database damaged past its first page
    ended in sqlite3.DatabaseError's traceback (only `tether sessions` said it in a line)."""
    from tether.sessions import SqliteSessionStore

    store = SqliteSessionStore(tether_home / "sessions.db")
    store.append("s", [UserMessage.text("one")])
    store.close()
    _damage_past_the_first_page(tether_home / "sessions.db")
    code, _, err = run_main(
        "run",
        "--model",
        "scripted/hello",
        "--cwd",
        str(tmp_path),
        "--session",
        "s",
        "--session-store",
        "sqlite",
        "hi",
        capsys=capsys,
    )
    assert code == 2, err
    assert "the session database" in err and "malformed" in err and "--session-store" in err
    assert "Traceback" not in err


def test_a_session_saved_by_an_editor_with_a_byte_order_mark_keeps_its_first_message(tmp_path: Path) -> None:
    """A session file opened and saved in an editor that puts a UTF-8 byte order mark before the
    first line (Notepad does): the first message, whole after the mark, was taken for a garbled
    line: dropped from the conversation (and the listing's count), the file copied aside."""
    from tether.sessions import JsonlSessionStore

    store = JsonlSessionStore(tmp_path / "sessions")
    store.append("s", [UserMessage.text("one"), UserMessage.text("two")])
    path = store.path("s")
    path.write_bytes(b"\xef\xbb\xbf" + path.read_bytes().replace(b"\n", b"\r\n"))
    assert [i.messages for i in JsonlSessionStore(tmp_path / "sessions").list()] == [2]
    assert [text_of([m]) for m in store.load("s")] == ["one", "two"]
    assert not list(store.root.glob("*.damaged-*"))
    assert not path.read_bytes().startswith(b"\xef\xbb\xbf")  # written back as tether writes it
    store.append("s", [UserMessage.text("three")])
    assert [text_of([m]) for m in store.load("s")] == ["one", "two", "three"]
    assert [i.messages for i in store.list()] == [3]


@pytest.mark.parametrize(
    "meta",
    [b"[" * 100_000, b'{"prompt_blocks": {"memory": 5}}'],
    ids=["nested-past-the-stack", "a-block-that-is-no-text"],
)
def test_a_damaged_session_metadata_file_counts_as_empty_and_the_run_goes_on(
    tether_home: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], meta: bytes
) -> None:
    """`<session>.meta.json` that cannot be read is promised to count as empty (and be rewritten).
    JSON nested deeper than Python's stack raised RecursionError, and a snapshot block that is not
    text (edited by hand) a TypeError: each a traceback out of every later `tether run --session`."""
    args = ("run", "--model", "scripted/hello", "--cwd", str(tmp_path), "--session", "m")
    assert run_main(*args, "hi", capsys=capsys)[0] == 0
    path = tether_home / "sessions" / "m.meta.json"
    assert path.is_file()
    path.write_bytes(meta)
    code, _, err = run_main(*args, "again", capsys=capsys)
    assert code == 0, err
    assert b"# Memory" in path.read_bytes()  # the snapshot taken again, for the session's later runs


def test_a_damaged_count_file_beside_a_session_is_read_again_not_a_traceback(tmp_path: Path) -> None:
    """`.<session>.count` is a cache: one that cannot be read means reading the session. JSON
    nested past Python's stack there raised RecursionError out of `tether sessions list`."""
    from tether.sessions import JsonlSessionStore

    store = JsonlSessionStore(tmp_path / "sessions")
    store.append("s", [UserMessage.text("one"), UserMessage.text("two")])
    (store.root / ".s.count").write_bytes(b"[" * 100_000)
    assert [(i.session_id, i.messages) for i in store.list()] == [("s", 2)]


@pytest.mark.parametrize("kind", ["jsonl", "sqlite"])
def test_a_session_store_under_the_home_folder_is_there_not_in_a_folder_named_tilde(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, kind: str
) -> None:
    """`session_store = "jsonl:~/tether-sessions"` in config.toml (no shell to expand it), or
    TETHER_SESSION_STORE quoted: the sessions went to a folder named `~` in whatever folder tether
    ran in, a different one in each, so a conversation seemed lost when run from elsewhere."""
    from tether.sessions import open_session_store

    home, cwd = tmp_path / "me", tmp_path / "project"
    home.mkdir()
    cwd.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.chdir(cwd)
    where = "~/tether-sessions" if kind == "jsonl" else "~/sessions.db"
    store = open_session_store(f"{kind}:{where}", tmp_path / "tether-home")
    store.append("s", [UserMessage.text("one")])
    assert not (cwd / "~").exists()
    assert (home / where[2:]).exists()
    assert [text_of([m]) for m in open_session_store(f"{kind}:{home / where[2:]}", tmp_path).load("s")] == ["one"]


def test_deleting_a_session_leaves_no_copy_of_its_words_behind(tmp_path: Path) -> None:
    """`tether sessions delete` (and the server's DELETE) removed the session's file but left the
    copies a repair had kept of it (`<name>.jsonl.damaged-…`) and the temporary file of a rewrite
    (a compaction) killed half-way: whole copies of a conversation the person asked to delete."""
    from tether.sessions import JsonlSessionStore

    store = JsonlSessionStore(tmp_path / "sessions", fsync=False)
    store.append("s", [UserMessage.text("my secret"), UserMessage.text("more")])
    path = store.path("s")
    path.write_bytes(path.read_bytes().replace(b"\n", b"\n{garbled\n", 1))
    assert [text_of([m]) for m in store.load("s")] == ["my secret", "more"]  # a copy kept beside
    (store.root / f".s.jsonl.{'ab' * 8}.tmp").write_text("my secret, half rewritten")  # a kill mid-rewrite
    other = "s.jsonl.damaged-20260101-000000-abcdef01"  # a session whose name looks like a copy's
    store.append(other, [UserMessage.text("keep me")])
    assert len(list(store.root.glob("s.jsonl.damaged-*"))) == 2
    store.delete("s")
    left = {p.name: p.read_bytes() for p in store.root.iterdir() if p.is_file()}
    assert not [name for name, data in left.items() if b"my secret" in data], left
    assert [text_of([m]) for m in store.load(other)] == ["keep me"]


def test_deleting_a_sqlite_session_removes_its_damaged_rows_too(tmp_path: Path) -> None:
    import sqlite3

    from tether.sessions import SqliteSessionStore

    store = SqliteSessionStore(tmp_path / "sessions.db")
    store.append("s", [UserMessage.text("my secret"), UserMessage.text("more")])
    store._db.execute("UPDATE messages SET body = '{\"my secret\"' WHERE seq = 0")
    assert [text_of([m]) for m in store.load("s")] == ["more"]
    store.delete("s")
    store.close()
    with sqlite3.connect(tmp_path / "sessions.db") as db:
        assert db.execute("SELECT COUNT(*) FROM damaged_messages").fetchone() == (0,)


def test_tether_chat_with_sessions_in_memory_remembers_the_earlier_messages(
    tether_home: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """`tether chat --session-store memory` keeps the conversation in the process's memory, but
    each message's run opened a new, empty store: the model never saw what was said a line before."""
    import io

    from tether import RunStore

    monkeypatch.setattr("sys.stdin", io.StringIO("first\nsecond\n"))
    code, _, err = run_main(
        "chat",
        "--model",
        "scripted/hello",
        "--cwd",
        str(tmp_path),
        "--session",
        "c",
        "--session-store",
        "memory",
        capsys=capsys,
    )
    assert code == 0, err
    runs = RunStore(tether_home / "runs")
    second = max((runs.load(r["run_id"]) for r in runs.list()), key=lambda s: len(s.messages))
    assert [text_of([m]) for m in second.messages if m.role == "user"] == ["first", "second"]


def test_a_refused_commit_does_not_leave_the_session_database_locked(tmp_path: Path) -> None:
    """A COMMIT the database refused left its transaction open: the connection then refused every
    later call ("cannot start a transaction within a transaction"), and the open transaction held
    the database's write lock against every other process (a run, the server) until it ended."""
    import sqlite3

    from tether.errors import StoreError
    from tether.sessions import SqliteSessionStore

    store = SqliteSessionStore(tmp_path / "sessions.db")
    store.append("s", [UserMessage.text("one")])
    store._db = CommitRefusedOnce(store._db)  # type: ignore[assignment]
    with pytest.raises(StoreError, match="database is locked"):
        store.append("s", [UserMessage.text("lost, and said so")])
    store.append("s", [UserMessage.text("two")])
    assert [text_of([m]) for m in store.load("s")] == ["one", "two"]
    other = sqlite3.connect(tmp_path / "sessions.db", timeout=0)  # another process's connection
    other.execute("BEGIN IMMEDIATE")  # the write lock is free
    other.execute("ROLLBACK")
    other.close()


def test_a_reply_with_calls_written_twice_in_a_row_is_kept_once(tmp_path: Path) -> None:
    """A line duplicated (a copy, an editor) left one call id twice in the transcript, with a
    placeholder between: every later request of the session was refused by a provider that wants
    unique tool_use ids (Anthropic). Repair keeps the reply once, its real result after it; a reply
    made again after its results (a model asking the same again) is kept."""
    from tether.sessions import JsonlSessionStore

    store = JsonlSessionStore(tmp_path)
    call = AssistantMessage(content=(ToolCallPart(id="c1", name="t", arguments="{}"),))
    result = ToolMessage(call_id="c1", name="t", content=(TextPart(text="r"),))
    store.append("s", [UserMessage.text("go"), call])
    store.append("s", [result])
    path = tmp_path / "s.jsonl"
    lines = path.read_text().splitlines(keepends=True)
    path.write_text("".join([lines[0], lines[1], lines[1], *lines[2:]]))  # the call's line twice
    history = store.load("s")
    ids = [c.id for m in history if isinstance(m, AssistantMessage) for c in m.tool_calls]
    assert ids == ["c1"] and [m.role for m in history] == ["user", "assistant", "tool"]
    assert history[2] == result  # the real result, not a placeholder
    from tether.sessions import repair

    kept = [UserMessage.text("go"), call, result, call, result]  # asked again after its result
    assert repair(kept) == kept
