"""Sessions, their files and the run store's file side attacked from outside (round 4): a disk that
fills up mid-append or mid-repair, a session deleted while a run continues it, links planted in the
run store's folders, and the listings that must agree with what the other commands can open.

What a user relies on: an append either is all there or says it failed (nothing half-written, nothing
lost while said to be saved); a session that was said to be deleted stays deleted; tether writes
nothing through a link put in its folders; no command ends in a traceback."""

from __future__ import annotations

import errno
import itertools
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.cli.conftest import run_main
from tests.harness.session_child import waiting_agent
from tether import RunStore, run_sync
from tether.errors import StoreError
from tether.messages import AssistantMessage, Message, TextPart, ToolCallPart, UserMessage
from tether.sessions import JsonlSessionStore, repair

ROOT = Path(__file__).resolve().parents[1]


def user(text: str) -> UserMessage:
    return UserMessage.text(text)


def texts(messages: list[Message]) -> list[str]:
    return [part.text for m in messages for part in m.content if isinstance(part, TextPart)]


# -- a disk that fills up ----------------------------------------------------------------------


def _disk_that_fills(monkeypatch: pytest.MonkeyPatch, room: int) -> None:
    """``os.write`` as on a disk with ``room`` bytes left: a write takes what fits (a short count,
    as the kernel returns), then ENOSPC."""
    real = os.write
    left = [room]

    def write(fd: int, data: Any) -> int:
        if left[0] <= 0:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        n = real(fd, bytes(data)[: left[0]])
        left[0] -= n
        return n

    monkeypatch.setattr(os, "write", write)


def test_an_append_the_disk_takes_only_part_of_fails_and_leaves_the_session_as_it_was(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The append wrote its lines with one os.write and never looked at the count it returned: on a
    disk that filled up mid-write it returned as if saved, the session held half a line, and the
    messages were gone (a run went on believing its session had them)."""
    store = JsonlSessionStore(tmp_path / "sessions", fsync=False)
    store.append("s", [user("one")])
    before = store.path("s").read_bytes()
    with monkeypatch.context() as patch:
        _disk_that_fills(patch, 30)
        with pytest.raises(OSError, match="not written") as failed:
            store.append("s", [user("two"), user("three")])
    assert failed.value.errno == errno.ENOSPC and failed.value.filename == str(store.path("s"))
    assert store.path("s").read_bytes() == before  # no half line left behind
    store.append("s", [user("four")])  # room again: the session goes on, whole
    assert texts(store.load("s")) == ["one", "four"]
    assert not list(store.root.glob("*.damaged-*"))


def test_an_append_the_disk_takes_in_pieces_is_all_there(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A write may take fewer bytes than asked and still succeed on the next: every line arrives."""
    store = JsonlSessionStore(tmp_path / "sessions", fsync=False)
    real = os.write
    with monkeypatch.context() as patch:
        patch.setattr(os, "write", lambda fd, data: real(fd, bytes(data)[:7]))
        store.append("s", [user("one"), user("two")])
    assert texts(store.load("s")) == ["one", "two"]


def test_a_repair_the_full_disk_cannot_write_still_loads_and_leaves_no_partial_copy(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A session that needed repair (a garbled line) on a full disk: the load raised the OSError
    (`tether sessions show` a traceback), and left a copy it could not finish beside the file. Now
    the load returns the repaired history, the file is left as it was, and no copy is left half-made;
    with room again, the next load repairs it for good."""
    store = JsonlSessionStore(tmp_path / "sessions")
    store.append("s", [user("one")])
    path = store.path("s")
    damaged = path.read_bytes() + b"{garbled\n" + b'{"role":"user","content":[{"type":"text","text":"two"}]}\n'
    path.write_bytes(damaged)
    with monkeypatch.context() as patch:
        patch.setattr(os, "fsync", lambda fd: (_ for _ in ()).throw(OSError(errno.ENOSPC, "No space left")))
        assert texts(store.load("s")) == ["one", "two"]
    assert path.read_bytes() == damaged
    assert not list(store.root.glob("*.damaged-*"))
    assert texts(store.load("s")) == ["one", "two"]
    assert [c.read_bytes() for c in store.root.glob("*.damaged-*")] == [damaged]


def test_sessions_show_on_a_full_disk_shows_the_session_not_a_traceback(
    tether_home: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    store = JsonlSessionStore(tether_home / "sessions")
    store.append("s", [user("what is here?"), AssistantMessage(content=(ToolCallPart(id="c1", name="list_files"),))])
    before = store.path("s").read_bytes()

    def full(*args: Any, **kwargs: Any) -> None:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr("tether.sessions.atomic_write", full)
    code, out, _ = run_main("sessions", "show", "s", capsys=capsys)
    assert code == 0
    assert "what is here?" in out and "interrupted" in out  # the call's missing result, repaired in view
    assert store.path("s").read_bytes() == before


# -- deleting a session a run continues ---------------------------------------------------------


def test_deleting_a_session_a_run_is_continuing_is_refused_and_it_stays_whole(
    tmp_path: Path, tether_home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`tether sessions delete` said `deleted session s_talk` while another process's run continued
    it; that run's next messages made the file again: the session came back as a fragment (the
    model's last answer, without the person's question). Now the deletion is refused, naming the
    run, and once the run stops it goes through."""
    go = tmp_path / "go"
    child = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "tests.harness.session_child",
            str(tether_home / "runs"),
            str(tether_home / "sessions"),
            "s_talk",
            str(go),
        ],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert child.stdout is not None and child.stdout.readline().strip() == "waiting"
        code, _, err = run_main("sessions", "delete", "s_talk", capsys=capsys)
        assert code == 2 and "Traceback" not in err
        assert "session s_talk is being continued by run run_" in err and "nothing was deleted" in err
    finally:
        go.touch()
        out, _ = child.communicate(timeout=60)
    assert out.strip().endswith("completed")
    sessions = JsonlSessionStore(tether_home / "sessions")
    assert texts(sessions.load("s_talk")) == ["wait for it", "went", "done waiting"]
    code, _, err = run_main("sessions", "delete", "s_talk", capsys=capsys)
    assert code == 0 and "deleted session s_talk" in err
    assert sessions.list() == []
    # and a run on the session afterwards is not told that the deletion still holds it
    result = run_sync(
        waiting_agent(None), "again", store=RunStore(tether_home / "runs"), session=sessions, session_id="s_talk"
    )
    assert result.status == "completed"


# -- links planted in the run store's folders ---------------------------------------------------


def test_a_link_planted_at_the_session_locks_folder_is_refused_and_nothing_outside_is_written(tmp_path: Path) -> None:
    """`runs/.sessions` replaced by a link: every run with a session opened its lock through it and
    wrote `run run_…` over the first 300 bytes of a file of the same name wherever it led."""
    outside = tmp_path / "outside"
    outside.mkdir()
    victim = outside / "s_talk.lock"
    victim.write_bytes(b"the user's own file\n")
    runs = tmp_path / "runs"
    runs.mkdir()
    (runs / ".sessions").symlink_to(outside)
    sessions = JsonlSessionStore(tmp_path / "sessions")
    with pytest.raises(StoreError, match=r"\.sessions is a symbolic link, not the folder"):
        run_sync(waiting_agent(None), "hi", store=RunStore(runs), session=sessions, session_id="s_talk")
    assert victim.read_bytes() == b"the user's own file\n"
    assert sorted(p.name for p in outside.iterdir()) == ["s_talk.lock"]
    assert sessions.list() == []  # refused before anything was sent or written


def test_the_runs_listing_does_not_list_a_run_read_through_a_planted_link(
    tether_home: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`tether runs` read a run's folder through a link put in `runs/` and listed it, while `tether
    show` (and the store) refuse to read through one: a run listed that no command could open. Now
    the listing names the link as skipped, and lists no run from it."""
    elsewhere = tmp_path / "elsewhere"
    result = run_sync(waiting_agent(None), "hi", store=RunStore(elsewhere))
    (tether_home / "runs").mkdir(parents=True)
    (tether_home / "runs" / "run_link").symlink_to(elsewhere / result.run_id)
    code, out, err = run_main("runs", capsys=capsys)
    assert code == 0 and result.run_id not in out
    assert "skipped run run_link" in err and "symbolic link" in err
    code, _, err = run_main("show", "run_link", capsys=capsys)
    assert code == 2 and "symbolic link" in err


# -- a session file tether cannot read ---------------------------------------------------------


def test_a_session_file_tether_cannot_read_is_named_not_hidden(
    tether_home: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], caplog: Any
) -> None:
    """A session file tether may not open (left root-owned by a `sudo tether run`, its mode changed)
    was left out of `tether sessions list` without a word, and `tether sessions show` said there was
    no such session while the file was there. Now the listing names it and why, and show says what
    stops it (one line, exit code 2)."""
    store = JsonlSessionStore(tether_home / "sessions")
    store.append("s", [user("private")])
    store.append("t", [user("other")])
    denied = str(store.path("s"))
    real = os.open

    def open_(path: Any, flags: int, *args: Any, **kwargs: Any) -> int:
        if os.fspath(path) == denied:
            raise PermissionError(errno.EACCES, os.strerror(errno.EACCES), denied)
        return real(path, flags, *args, **kwargs)

    monkeypatch.setattr(os, "open", open_)
    code, out, _ = run_main("sessions", "list", capsys=capsys)
    assert code == 0 and out.split() == ["t", "1", "messages"]
    assert f"{denied} cannot be read (Permission denied)" in caplog.text
    for command in ("show", "export"):
        code, out, err = run_main("sessions", command, "s", capsys=capsys)
        assert code == 2 and "there is no session" not in err
        assert f"cannot use the sessions: Permission denied: {denied}" in err
    assert texts(JsonlSessionStore(tether_home / "sessions").load("t")) == ["other"]
    code, _, err = run_main("sessions", "delete", "s", capsys=capsys)  # its folder is the user's: it can go
    assert code == 0 and not os.path.lexists(denied)


# -- the run store: a transcript damaged under a header saved with fsync ------------------------


def test_a_run_whose_synced_transcript_was_cut_is_an_error_not_an_earlier_commit(tmp_path: Path) -> None:
    """The fallback meant for a power cut (the newest header, written without fsync, counting lines
    that never reached the disk) also took a header written with fsync, whose lines were on the disk
    before it: a completed run whose transcript was later cut (a bad restore, an edit) loaded as the
    running run of an earlier commit, and resuming it asked the model again (paid twice; with a
    tool between the two commits, it would run twice). Now the load says the file was cut."""
    from tether import Agent, tool
    from tether.harness.store import _decode_header
    from tether.messages import ToolMessage
    from tether.testing import FunctionModel, call

    @tool(read_only=True)
    def look() -> str:
        """Look."""
        return "seen"

    asked: list[int] = []

    def model(messages: list[Message], request: Any) -> Any:
        asked.append(1)
        return "done " * 5000 if isinstance(messages[-1], ToolMessage) else call("c1", "look")

    result = run_sync(Agent(FunctionModel(model), tools=[look]), "look", store=RunStore(tmp_path))
    assert result.status == "completed" and len(asked) == 2
    run = tmp_path / result.run_id
    headers = [_decode_header(p.read_bytes()) or {} for p in run.glob("state.*.json")]
    newest, older = sorted(headers, key=lambda h: h["commit_seq"], reverse=True)
    assert "tail" in newest and newest["synced_bytes"] > older["messages_bytes"]  # saved with fsync
    transcript = run / "messages.jsonl"
    transcript.write_bytes(transcript.read_bytes()[: older["messages_bytes"]])
    store = RunStore(tmp_path)
    with pytest.raises(StoreError, match="cut short or edited"):
        store.load(result.run_id)
    assert len(asked) == 2


@pytest.mark.parametrize("kind", ["memory", "jsonl", "sqlite"])
def test_a_deleted_session_leaves_nothing_to_a_new_one_of_its_name(tmp_path: Path, kind: str) -> None:
    """The memory store's delete kept the session's metadata (the snapshot of its system prompt's
    blocks: the user's memory as it was then): a new session of the same name began with the old
    one's. The file and database stores deleted it; now every store does."""
    from tether.sessions import open_session_store

    store = open_session_store(kind, tmp_path)  # "memory": the process's one store, other tests' too
    name = f"deleted-{kind}-{tmp_path.name}"
    store.append(name, [user("one")])
    store.save_meta(name, {"prompt_blocks": {"memory": "what the old session knew"}})
    store.delete(name)
    assert store.load_meta(name) == {} and store.load(name) == []
    assert name not in [info.session_id for info in store.list()]


def test_the_sqlite_listing_counts_messages_not_damaged_rows(
    tether_home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`tether sessions list` counts messages, not lines, and a damaged line is not one (docs); the
    SQLite store counted every row, so the listing said 3 messages and `show` showed 2."""
    import sqlite3

    from tether.sessions import SqliteSessionStore

    store = SqliteSessionStore(tether_home / "sessions.db")
    store.append("s", [user("one"), user("two"), user("three")])
    store.close()
    with sqlite3.connect(tether_home / "sessions.db") as db:
        db.execute("UPDATE messages SET body = '{torn' WHERE seq = 1")
    code, out, _ = run_main("sessions", "list", "--session-store", "sqlite", capsys=capsys)
    assert code == 0 and out.split() == ["s", "2", "messages"]
    code, out, _ = run_main("sessions", "show", "s", "--session-store", "sqlite", capsys=capsys)
    assert code == 0 and "one" in out and "three" in out


def test_a_copy_of_a_runs_folder_is_not_listed_as_the_run_a_second_time(
    tether_home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`cp -r runs/run_x runs/run_x.bak` (a backup): `tether runs` listed run_x twice, while `tether
    show run_x.bak` refuses the copy (its header names run_x). Now the copy is named as skipped."""
    import shutil

    result = run_sync(waiting_agent(None), "hi", store=RunStore(tether_home / "runs"))
    shutil.copytree(tether_home / "runs" / result.run_id, tether_home / "runs" / f"{result.run_id}.bak")
    code, out, err = run_main("runs", capsys=capsys)
    assert code == 0 and out.count(result.run_id) == 1
    assert f"skipped run {result.run_id}.bak: its header names run '{result.run_id}'" in err
    code, out, _ = run_main("runs", "--json", capsys=capsys)
    assert code == 0 and out.count(f'"run_id": "{result.run_id}"') == 1


def test_a_deletion_cut_short_leaves_the_session_whole_not_its_metadata_alone(tmp_path: Path) -> None:
    """The transcript was deleted first: a deletion stopped after it (killed; here refused at a
    folder put at the metadata's name) left no session in the listing but its metadata on disk,
    which the next session of that name took as its own (the old system-prompt snapshot). Now the
    transcript goes last: stopped before it, the session is still there, whole."""
    from tether.errors import ConfigError

    store = JsonlSessionStore(tmp_path / "sessions")
    store.append("s", [user("one")])
    (store.root / ".s.count").mkdir()  # something that stops the deletion half-way
    store.save_meta("s", {"prompt_blocks": {"memory": "old"}})
    with pytest.raises(ConfigError, match="is a folder"):
        store.delete("s")
    assert [i.session_id for i in store.list()] == ["s"] and texts(store.load("s")) == ["one"]


# -- the last line: torn by a crash, or edited by hand --------------------------------------------


def test_a_last_line_torn_at_any_byte_keeps_every_whole_message_and_leaves_no_copy(tmp_path: Path) -> None:
    store = JsonlSessionStore(tmp_path / "sessions", fsync=False)
    whole = [
        user("q"),
        AssistantMessage(content=(TextPart(text="a"), ToolCallPart(id="c1", name="t", arguments='{"x": "é"}'))),
        user("last ✓"),
    ]
    store.append("s", whole)
    data = store.path("s").read_bytes()
    start = data.rstrip(b"\n").rfind(b"\n") + 1
    for cut in range(start, len(data)):
        store.path("s").write_bytes(data[:cut])
        kept = whole if cut == len(data) - 1 else whole[:2]  # only the newline missing: the line is whole
        loaded = store.load("s")
        assert loaded == repair(kept), cut  # the call's missing result stands in as the placeholder
        assert [i.messages for i in store.list()] == [len(loaded)]
    assert not list(store.root.glob("*.damaged-*"))  # a crash leaves no litter


@pytest.mark.parametrize(
    "edited",
    [b'{"role": "user", "content": [1, 2, 3]}', b'{"role": 7, "content": "hi"}', b"[]"],
    ids=["content of ints", "role 7", "not an object"],
)
def test_a_last_line_edited_into_no_message_without_its_newline_is_kept_beside(tmp_path: Path, edited: bytes) -> None:
    """An editor that leaves off the final newline (VS Code's default) turned a hand-edited last line
    into a "torn write": dropped with no copy and no warning, though no crash leaves whole JSON (what
    a crash leaves is the start of a line). Now it is kept beside the session like any edited line."""
    store = JsonlSessionStore(tmp_path / "sessions", fsync=False)
    store.append("s", [user("one"), user("two")])
    path = store.path("s")
    damaged = path.read_bytes().splitlines(keepends=True)[0] + edited
    path.write_bytes(damaged)
    assert texts(store.load("s")) == ["one"]
    assert [c.read_bytes() for c in store.root.glob("s.jsonl.damaged-*")] == [damaged]


def test_the_sqlite_store_serves_many_threads_without_losing_a_message(tmp_path: Path) -> None:
    """A server's runs mirror their sessions from its commit threads (RunStore.save_async's
    ``before``), all through one SqliteSessionStore, whose one connection was shared with no lock:
    a thread's BEGIN inside another's transaction failed ("cannot start a transaction within a
    transaction"), appends were lost and sessions went missing from the listing."""
    import threading

    from tether.sessions import SqliteSessionStore

    store = SqliteSessionStore(tmp_path / "sessions.db")
    errors: list[BaseException] = []

    def converse(k: int) -> None:
        try:
            for i in range(60):
                store.append(f"s{k}", [user(f"{k}-{i}")])
                if i % 10 == 0:
                    store.load(f"s{k}")
                    store.save_meta(f"s{k}", {"i": i})
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=converse, args=(k,)) for k in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert [(i.session_id, i.messages) for i in store.list()] == [(f"s{k}", 60) for k in range(6)]
    assert all(texts(store.load(f"s{k}")) == [f"{k}-{i}" for i in range(60)] for k in range(6))
    assert store.load_meta("s0") == {"i": 50}


# -- a session that breaks the providers' rules, repaired into one they accept --------------------


def _openai_accepts(wire: list[dict[str, Any]]) -> None:
    """Chat Completions: each assistant tool call is answered by a tool message, before anything
    else; no tool message answers a call that was not made just before it."""
    waiting: list[str] = []
    for m in wire:
        if m["role"] == "tool":
            assert waiting and m["tool_call_id"] == waiting.pop(0), wire
            continue
        assert not waiting, wire
        if m["role"] == "assistant":
            assert isinstance(m["content"], str)
            waiting = [c["id"] for c in m.get("tool_calls", [])]
    assert not waiting


def _anthropic_accepts(wire: list[dict[str, Any]]) -> None:
    """Messages API: it starts with the user, roles alternate, no message is empty, and each
    tool_use is answered by a tool_result in the next (user) message."""
    assert wire[0]["role"] == "user"
    for a, b in itertools.pairwise(wire):
        assert a["role"] != b["role"], wire
    for i, m in enumerate(wire):
        assert m["content"], wire
        uses = [b["id"] for b in m["content"] if b["type"] == "tool_use"]
        if uses:
            answered = [b["tool_use_id"] for b in wire[i + 1]["content"] if b["type"] == "tool_result"]
            assert answered == uses, wire


def test_a_session_that_breaks_the_providers_rules_is_repaired_into_one_both_accept(tmp_path: Path) -> None:
    from tether.messages import ToolMessage
    from tether.providers.anthropic import wire_messages
    from tether.providers.openai_chat import message_to_wire

    def result(call_id: str, name: str = "t") -> ToolMessage:
        return ToolMessage(call_id=call_id, name=name, content=(TextPart(text=f"r {call_id}"),))

    store = JsonlSessionStore(tmp_path / "sessions", fsync=False)
    store.append(
        "s",
        [
            result("nobody_called_me"),  # a result without its call, first of all
            user("one"),
            user("two, right after"),  # two user messages in a row
            AssistantMessage(content=()),  # an assistant message with no content
            AssistantMessage(content=(ToolCallPart(id="c1", name="t"), ToolCallPart(id="c2", name="t"))),
            result("c2"),  # out of order, and c1 never answered
            result("c2", "other_tool"),  # a result naming another tool than its call
            user("three"),
            AssistantMessage(content=(ToolCallPart(id="c3", name="t"),)),  # the last call, no result
        ],
    )
    messages = store.load("s")
    assert store.load("s") == messages  # repair is idempotent
    _openai_accepts([message_to_wire(m) for m in messages])
    _anthropic_accepts(wire_messages(messages, "claude"))


def test_a_repair_that_cannot_be_written_back_leaves_no_copy_per_load(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A damaged session whose repaired file cannot be written (the rename refused: a full disk, an
    immutable file) got a new `.damaged-*` copy of the whole session at every load, each one said
    to keep what was dropped, though nothing was dropped: the file still held it."""
    store = JsonlSessionStore(tmp_path / "sessions", fsync=False)
    store.append("s", [user("one")])
    path = store.path("s")
    damaged = path.read_bytes() + b"{garbled\n"
    path.write_bytes(damaged)

    def refused(*args: Any, **kwargs: Any) -> None:
        raise OSError(errno.EPERM, os.strerror(errno.EPERM))

    with monkeypatch.context() as patch:
        patch.setattr("tether.sessions.atomic_write", refused)
        for _ in range(3):
            assert texts(store.load("s")) == ["one"]
    assert path.read_bytes() == damaged and not list(store.root.glob("*.damaged-*"))


def test_a_session_database_that_refuses_is_one_line_not_a_traceback(
    tether_home: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The SQLite store on a full disk (or locked past its wait by another process) raised
    sqlite3.OperationalError out of `tether sessions show`: a traceback."""
    import sqlite3

    from tether.sessions import SqliteSessionStore

    store = SqliteSessionStore(tether_home / "sessions.db")
    store.append("s", [user("one")])
    store.close()

    def full(self: Any, session_id: str) -> None:
        raise sqlite3.OperationalError("database or disk is full")

    monkeypatch.setattr(SqliteSessionStore, "load", full)
    code, _, err = run_main("sessions", "show", "s", "--session-store", "sqlite", capsys=capsys)
    assert code == 2 and "the session database refused: database or disk is full" in err


def test_an_atomic_write_the_disk_takes_nothing_of_fails_instead_of_looping(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """os.write may return 0 (nothing taken: a FUSE or network file system out of room); the
    rewrite loop of atomic_write then went round forever, and every rewrite of a session (repair,
    compaction) hung its run. Now it fails, the file is as it was and no temporary file is left."""
    from tether.fileio import atomic_write

    target = tmp_path / "s.jsonl"
    target.write_bytes(b"before\n")
    calls = [0]

    def nothing(fd: int, data: Any) -> int:
        calls[0] += 1
        if calls[0] > 1000:  # the loop, caught
            raise RuntimeError("went round forever")
        return 0

    with monkeypatch.context() as patch:
        patch.setattr(os, "write", nothing)
        with pytest.raises(OSError) as failed:
            atomic_write(target, b"after\n", fsync=False)
    assert failed.value.errno == errno.ENOSPC and calls[0] == 1
    assert target.read_bytes() == b"before\n" and sorted(p.name for p in tmp_path.iterdir()) == ["s.jsonl"]


def test_a_run_save_the_disk_takes_nothing_of_fails_instead_of_looping(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The run store's write loop (os.pwrite) went round forever on a write that took nothing."""
    from tether import RunState

    store = RunStore(tmp_path, fsync=False)
    state = RunState(run_id="r", messages=[user("one")])
    store.save(state)
    calls = [0]

    def nothing(fd: int, data: Any, offset: int) -> int:
        calls[0] += 1
        if calls[0] > 1000:  # the loop, caught
            raise RuntimeError("went round forever")
        return 0

    state.messages.append(user("two"))
    with monkeypatch.context() as patch:
        patch.setattr(os, "pwrite", nothing)
        with pytest.raises(OSError) as failed:
            store.save(state)
    assert failed.value.errno == errno.ENOSPC and calls[0] == 1
    assert texts(RunStore(tmp_path).load("r").messages) == ["one"]


def test_a_session_deleted_with_appends_not_yet_synced_does_not_fail_the_next_sync(tmp_path: Path) -> None:
    """A session appended to without fsync (a run mirrors its transcript so, until its next durable
    save) and then deleted stayed in the store's list of files to sync: the next durable save of a
    run on that name, before it wrote anything, failed with FileNotFoundError."""
    store = JsonlSessionStore(tmp_path / "sessions")
    store.append("s", [user("one")], durable=False)
    store.delete("s")
    store.sync("s")  # a new run's first durable save, nothing appended yet
    store.append("s", [user("again")])
    assert texts(store.load("s")) == ["again"]


def test_an_append_that_waited_for_a_deleted_sessions_lock_still_excludes_others(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`delete` removed the session's lock file after letting go of it. An append that had opened
    the lock and waited for it then held a lock no longer at its name, while any newcomer made a
    new one and held that: two writers at once (a load's repair renaming over an append's lines).
    Here the append waits at the lock while the session is deleted; once inside, nobody else may
    take the session's lock."""
    import fcntl
    import threading

    import tether.sessions as sessions

    store = JsonlSessionStore(tmp_path / "sessions", fsync=False)
    store.append("s", [user("old")])
    at_lock, go_on, inside, leave = (threading.Event() for _ in range(4))
    real_flock, real_open_own = fcntl.flock, sessions.open_own
    writer: list[threading.Thread] = []

    def flock(fd: int, op: int) -> None:
        if writer and threading.current_thread() is writer[0] and op == fcntl.LOCK_EX and not at_lock.is_set():
            at_lock.set()  # it opened the lock and waits for it...
            go_on.wait(60)  # ...while the session is deleted
        real_flock(fd, op)

    def open_own(path: Path, flags: int) -> int:
        if writer and threading.current_thread() is writer[0] and path.name == "s.jsonl":
            inside.set()  # holding the session's lock, as it believes
            leave.wait(60)
        return real_open_own(path, flags)

    monkeypatch.setattr(fcntl, "flock", flock)
    monkeypatch.setattr(sessions, "open_own", open_own)
    writer.append(threading.Thread(target=store.append, args=("s", [user("new")])))
    writer[0].start()
    assert at_lock.wait(60)  # (a bound against a hang, not a measure)
    store.delete("s")
    go_on.set()
    assert inside.wait(60)
    newcomer = os.open(store.root / ".s.lock", os.O_WRONLY | os.O_CREAT, 0o600)
    try:
        with pytest.raises(BlockingIOError):  # the append holds the session's lock: nobody else gets it
            real_flock(newcomer, fcntl.LOCK_EX | fcntl.LOCK_NB)
    finally:
        os.close(newcomer)
        leave.set()
        writer[0].join()
    assert texts(store.load("s")) == ["new"]


def test_a_torn_last_line_is_cut_off_before_the_next_append_and_leaves_no_copy(tmp_path: Path, caplog: Any) -> None:
    """The docs: a torn last line is dropped on load "and cut off before the next append". An append
    that came before any load (another process's, after a crash) kept it on a line of its own, where
    the next load took it for a line edited by hand: a `.damaged-*` copy and a warning for what a
    crash leaves. A last line that is whole (only its newline missing) is still kept."""
    store = JsonlSessionStore(tmp_path / "sessions", fsync=False)
    store.append("s", [user("one"), user("two")])
    path = store.path("s")
    path.write_bytes(path.read_bytes()[:-10])  # the crash tore "two"
    store.append("s", [user("three")])
    assert texts(store.load("s")) == ["one", "three"]
    assert not list(store.root.glob("*.damaged-*")) and "holds no message" not in caplog.text
    path.write_bytes(path.read_bytes()[:-1])  # "three" whole, its newline missing
    store.append("s", [user("four")])
    assert texts(store.load("s")) == ["one", "three", "four"]
