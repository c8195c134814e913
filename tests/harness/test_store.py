"""Persisted runs: atomic, append-only transcript, clear errors on damaged files.

The tests that take ``stores`` run against both backends: the files of :class:`RunStore` and
Postgres (:class:`tether.postgres.runs.PgRunStore`; its own tests are in tests/postgres). The others
are about files.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tether import RunState, RunStore
from tether.errors import StoreError, UserError
from tether.messages import AssistantMessage, TextPart, ToolCallPart, ToolMessage, UserMessage, dump_message
from tether.status import ApprovalInterruption
from tether.usage import Usage


def sample_state() -> RunState:
    state = RunState(run_id="run_store")
    state.messages.append(UserMessage.text("héllo 你好"))
    state.messages.append(
        AssistantMessage(
            content=(ToolCallPart(id="c1", name="list_files"),),
            model="scripted/plan",
            usage=Usage(prompt_tokens=10, completion_tokens=2),
        )
    )
    state.messages.append(ToolMessage(call_id="c1", name="list_files", content=(TextPart(text="a\nb"),)))
    state.cost_usd = 0.5
    state.status = "interrupted"
    state.interruption = ApprovalInterruption(call_id="c9", tool_name="delete_file", args={"path": "x"})
    state.approved["c1"] = "abc"
    return state


@dataclass
class Stores:
    """Where a test's runs are kept: ``open()`` a store as this process does, ``elsewhere()`` one as
    another process sees the same runs (with Postgres: another pool, as on another machine)."""

    open: Callable[[], Any]
    elsewhere: Callable[[], Any]


@pytest.fixture
def stores(backend: str, tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[Stores]:
    if backend == "sqlite":  # the single-machine store: files under tmp_path
        yield Stores(lambda: RunStore(tmp_path), lambda: RunStore(tmp_path))
        return
    from tether.postgres.db import Database, database
    from tether.postgres.runs import PgRunStore

    url = request.getfixturevalue("pg_url")
    pools: list[Database] = []

    def elsewhere() -> PgRunStore:
        pools.append(Database(url, max_size=2))
        return PgRunStore(pools[-1])

    yield Stores(lambda: PgRunStore(database(url)), elsewhere)
    for db in pools:
        db.close()


def test_round_trip(stores: Stores) -> None:
    store = stores.open()
    state = sample_state()
    assert not store.exists("run_store")
    store.save(state)
    assert store.exists("run_store")
    loaded = stores.elsewhere().load("run_store")
    assert loaded.model_dump() == state.model_dump()
    assert loaded.turns == 1


def test_appends_rewrites_and_shrinks_load_as_saved(stores: Stores) -> None:
    store = stores.open()
    state = sample_state()
    store.save(state)
    state.messages.append(AssistantMessage(content=(TextPart(text="done"),)))
    store.save(state, durable=False)
    assert len(stores.open().load("run_store").messages) == 4
    state.messages[0] = UserMessage.text("a summary of the start")  # compaction: earlier messages change
    store.save(state, rewrite=True)
    assert stores.open().load("run_store").messages == state.messages
    del state.messages[1:3]  # trimmed without saying so: a shorter transcript is rewritten too
    store.save(state)
    state.messages.append(UserMessage.text("more"))
    store.save(state)
    loaded = stores.elsewhere().load("run_store")
    assert loaded.model_dump() == state.model_dump() and len(loaded.messages) == 3
    assert stores.open().list()[0]["message_count"] == 3


def test_a_run_saved_elsewhere_continues_here(stores: Stores) -> None:
    """Nothing committed is cached: a store sees what another process saved since its last call."""
    here, there = stores.open(), stores.elsewhere()
    state = sample_state()
    here.save(state)
    theirs = there.load("run_store")
    theirs.messages.append(AssistantMessage(content=(TextPart(text="from there"),)))
    there.save(theirs)
    ours = here.load("run_store")
    ours.messages.append(UserMessage.text("back here"))
    here.save(ours)
    assert [m.role for m in there.load("run_store").messages] == ["user", "assistant", "tool", "assistant", "user"]


def test_saving_a_turn_appends_and_never_rewrites_the_transcript(tmp_path: Path) -> None:
    store = RunStore(tmp_path)
    state = sample_state()
    store.save(state)
    path = tmp_path / "run_store" / "messages.jsonl"
    before = path.read_bytes()
    inode = path.stat().st_ino
    state.messages.append(AssistantMessage(content=(TextPart(text="done"),)))
    store.save(state)
    after = path.read_bytes()
    assert after.startswith(before) and after.count(b"\n") == 4
    assert path.stat().st_ino == inode  # appended in place, not replaced
    from tether.harness.store import read_header

    header = read_header(tmp_path / "run_store")
    assert header is not None and "messages" not in header and header["message_count"] == 4


def test_every_file_of_a_run_is_private_whatever_the_umask(tmp_path: Path) -> None:
    import os
    import stat

    old = os.umask(0o022)
    try:
        store = RunStore(tmp_path)
        state = sample_state()
        with store.lock(state.run_id):
            store.save(state)
            state.messages.append(AssistantMessage(content=(TextPart(text="done"),)))
            store.save(state)
    finally:
        os.umask(old)
    files = sorted(p for p in (tmp_path / "run_store").iterdir())
    assert [p.name for p in files] == ["messages.jsonl", "state.a.json", "state.b.json"]
    assert {p.name: oct(stat.S_IMODE(p.stat().st_mode)) for p in files} == {p.name: "0o600" for p in files}


def test_lines_written_after_the_last_commit_are_ignored_then_cut(tmp_path: Path) -> None:
    store = RunStore(tmp_path)
    state = sample_state()
    store.save(state)
    path = tmp_path / "run_store" / "messages.jsonl"
    with open(path, "ab") as f:
        f.write(b'{"role":"assistant","content":[{"type":"te')  # a crash mid-append
    loaded = RunStore(tmp_path).load("run_store")
    assert len(loaded.messages) == 3
    loaded.messages.append(AssistantMessage(content=(TextPart(text="after crash"),)))
    fresh = RunStore(tmp_path)
    fresh.save(loaded)
    assert len(fresh.load("run_store").messages) == 4
    assert b'"te\n' not in path.read_bytes() and path.read_bytes().count(b"\n") == 4


def synced_run(root: Path) -> None:
    """A run whose transcript is synced whole, so its header carries no tail: damage to the file is
    damage to the run (a rewrite is fsynced before its rename)."""
    RunStore(root).save(sample_state(), rewrite=True)


def test_a_transcript_cut_short_is_a_clear_error(tmp_path: Path) -> None:
    synced_run(tmp_path)
    path = tmp_path / "run_store" / "messages-1.jsonl"
    path.write_bytes(path.read_bytes()[:20])
    with pytest.raises(StoreError, match="cut short"):
        RunStore(tmp_path).load("run_store")


def test_garbage_in_the_transcript_names_the_line(tmp_path: Path) -> None:
    synced_run(tmp_path)
    path = tmp_path / "run_store" / "messages-1.jsonl"
    lines = path.read_bytes().splitlines(keepends=True)
    lines[1] = b"{" + b"x" * (len(lines[1]) - 2) + b"\n"
    path.write_bytes(b"".join(lines))
    with pytest.raises(StoreError, match="line 2"):
        RunStore(tmp_path).load("run_store")


def test_a_torn_header_slot_falls_back_to_the_previous_commit(tmp_path: Path) -> None:
    store = RunStore(tmp_path)
    state = sample_state()
    store.save(state)  # commit 1 → slot a
    state.cost_usd = 0.75
    store.save(state)  # commit 2 → slot b
    slot_b = tmp_path / "run_store" / "state.b.json"
    slot_b.write_bytes(slot_b.read_bytes()[:40])  # a crash while writing commit 2
    loaded = RunStore(tmp_path).load("run_store")
    assert loaded.cost_usd == 0.5  # commit 1, whole
    loaded.cost_usd = 0.9
    fresh = RunStore(tmp_path)
    fresh.save(loaded)
    assert fresh.load("run_store").cost_usd == 0.9


def test_both_header_slots_damaged_is_a_clear_error(tmp_path: Path) -> None:
    store = RunStore(tmp_path)
    state = sample_state()
    store.save(state)
    store.save(state)
    for slot in ("state.a.json", "state.b.json"):
        (tmp_path / "run_store" / slot).write_text("{not json")
    with pytest.raises(StoreError, match="both header slots"):
        RunStore(tmp_path).load("run_store")


def test_unknown_run_and_bad_ids(stores: Stores) -> None:
    store = stores.open()
    with pytest.raises(UserError, match="no run"):
        store.load("run_missing")
    for bad in ("../etc", "", ".hidden", "a\\b"):
        with pytest.raises(UserError, match="not a run id"):
            store.load(bad)
        with pytest.raises(UserError, match="not a run id"):
            store.save(RunState(run_id=bad))


def test_list_runs_newest_first(stores: Stores) -> None:
    store = stores.open()
    assert store.list() == []
    a, b = RunState(run_id="run_a", created_at=1.0), RunState(run_id="run_b", created_at=2.0)
    b.messages.append(UserMessage.text("hi"))
    store.save(a)
    store.save(b)
    listed = stores.elsewhere().list()
    assert [h["run_id"] for h in listed] == ["run_b", "run_a"]
    assert listed[0]["message_count"] == 1 and "messages" not in listed[0]
    assert listed[0]["status"] == "running" and listed[0]["created_at"] == 2.0


def test_a_lock_is_released_when_its_block_ends(stores: Stores) -> None:
    store = stores.open()
    with pytest.raises(RuntimeError), store.lock("run_x"):
        raise RuntimeError("the run failed")
    with store.lock("run_x"):
        pass
    with stores.elsewhere().lock("run_x"):
        pass


def test_a_run_cannot_be_resumed_twice_at_once(stores: Stores, workspace: Path) -> None:
    import asyncio

    from tether import Agent, CancelSignal, run, run_stream, run_sync
    from tether.tools.demo import DEMO_TOOLS
    from tether.tools.files import FILE_TOOLS

    store = stores.open()
    agent = Agent("scripted/slow", tools=[*FILE_TOOLS, *DEMO_TOOLS], cwd=workspace)
    state = RunState()

    async def first() -> str | None:
        signal = CancelSignal()
        async for event in run_stream(agent, "scan", state=state, store=store, signal=signal):
            if event.type == "tool_progress":  # the run is busy in this process: try a second resume
                with pytest.raises(StoreError, match="another process"):
                    elsewhere = stores.elsewhere()
                    await run(agent, state=elsewhere.load(state.run_id), store=elsewhere)
                signal.cancel("done checking")
            if event.type == "done":
                return event.result.status
        return None

    assert asyncio.run(first()) == "interrupted"
    again = stores.elsewhere()
    assert run_sync(agent, state=again.load(state.run_id), store=again).status == "completed"


def power_cut_copy(synced_header: Path, into: Path) -> Path:
    """What a power cut leaves of a run just after ``synced_header`` (a slot) was fsynced: that
    header, and the transcript only as far as the header says it was synced. Everything else (the
    other slot, lines written since without fsync) is gone."""
    import shutil

    from tether.harness.store import _decode_header

    header = _decode_header(synced_header.read_bytes())
    assert header is not None
    run_dir = into / synced_header.parent.name
    run_dir.mkdir(parents=True)
    shutil.copy(synced_header, run_dir / synced_header.name)
    transcript = synced_header.parent / header["messages_file"]
    kept = transcript.read_bytes()[: header.get("synced_bytes", header["messages_bytes"])]
    (run_dir / header["messages_file"]).write_bytes(kept)
    return run_dir


def test_one_durable_commit_per_step_and_everything_durable_before_a_side_effect(
    workspace: Path, tmp_path: Path, monkeypatch: Any
) -> None:
    import os as real_os

    from tether import Agent, run_sync, tool
    from tether.harness import store as store_module
    from tether.testing import FunctionModel, call

    synced: list[str] = []
    monkeypatch.setattr(store_module, "_sync", lambda fd: synced.append(real_os.readlink(f"/proc/self/fd/{fd}")))
    store = RunStore(tmp_path / "runs")
    at_effect: list[RunState] = []

    @tool
    def note(text: str) -> str:
        """Write a note (a side effect)."""
        assert synced[-1].endswith(("state.a.json", "state.b.json")), "the intent's header was the last sync"
        survivor = power_cut_copy(Path(synced[-1]), tmp_path / "after_the_cut")
        at_effect.append(RunStore(survivor.parent).load(survivor.name))
        return "noted"

    replies = iter(
        [
            call("c1", "list_files"),
            call("c2", "read_file", {"path": "errors.log"}),
            call("c3", "note", {"text": "x"}),
            "done",
        ]
    )
    from tether.tools.files import FILE_TOOLS

    result = run_sync(
        Agent(FunctionModel(lambda m, r: next(replies)), tools=[*FILE_TOOLS, note], cwd=workspace), "go", store=store
    )
    assert result.status == "completed"
    # One fsync per durable commit: 4 requests + the side effect's intent + the final save. The
    # header carries the transcript's lines since its last fsync, so they need none of their own.
    # Two per commit (lines, then header) took 12 here; saving every change durably took 18.
    assert len(synced) == 4 + 1 + 1, synced
    assert all(p.endswith(("state.a.json", "state.b.json")) for p in synced)
    # A power cut just before the side effect leaves a run that knows it asked for it.
    (survived,) = at_effect
    last = survived.messages[-1]
    assert isinstance(last, AssistantMessage) and [c.name for c in last.tool_calls] == ["note"]
    assert "c3" in survived.intents, "the intent is recorded: a resume will not act blindly twice"


def test_a_power_cut_after_each_durable_save_loads_that_save_whole_and_the_next_save_repairs_the_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The attack on one fsync per commit: after every durable save, cut the power (keep only the
    synced header and the transcript's synced bytes, here nothing of the transcript at all for the
    first commits) and load. Then save more from the survivor and check the file is whole again."""
    import os as real_os

    from tether.harness import store as store_module

    synced: list[str] = []
    monkeypatch.setattr(store_module, "_sync", lambda fd: synced.append(real_os.readlink(f"/proc/self/fd/{fd}")))
    store = RunStore(tmp_path / "runs")
    state = RunState(run_id="cut")
    for i in range(12):
        state.messages.append(UserMessage.text(f"message {i} " + "x" * 3000))  # past 16 KiB: a transcript fsync
        store.save(state, durable=False)
        state.messages.append(AssistantMessage(content=(TextPart(text=f"reply {i}"),)))
        store.save(state)
        survivor = power_cut_copy(Path(synced[-1]), tmp_path / f"cut{i}")
        loaded = RunStore(survivor.parent).load("cut")
        assert [dump_message(m) for m in loaded.messages] == [dump_message(m) for m in state.messages]
        # the survivor goes on: its next save writes the lost lines back before appending
        loaded.messages.append(UserMessage.text("after the cut"))
        RunStore(survivor.parent).save(loaded)
        again = RunStore(survivor.parent).load("cut")
        assert again.messages[-1] == UserMessage.text("after the cut") and len(again.messages) == 2 * i + 3
        transcript = (survivor / "messages.jsonl").read_bytes()
        assert transcript.count(b"\n") == 2 * i + 3 and b"\x00" not in transcript
    transcript_syncs = [p for p in synced if p.endswith(".jsonl")]
    assert 0 < len(transcript_syncs) < 12, "the transcript is synced only when the tail outgrows a header"


def test_headers_written_without_fsync_never_overwrite_the_last_durable_one(tmp_path: Path) -> None:
    """A header written without fsync may be torn or lost by a power cut; it goes to the other slot,
    so the last durable commit is always there to fall back on."""
    from tether.harness.store import _decode_header

    store = RunStore(tmp_path)
    state = RunState(run_id="slots", messages=[UserMessage.text("hi")])
    store.save(state)  # durable: commit 1
    durable_slot = next(
        p
        for p in (tmp_path / "slots").glob("state.*.json")
        if (_decode_header(p.read_bytes()) or {}).get("commit_seq") == 1
    )
    for i in range(5):
        state.messages.append(UserMessage.text(f"later {i}"))
        store.save(state, durable=False)
        assert (_decode_header(durable_slot.read_bytes()) or {}).get("commit_seq") == 1
    other = next(p for p in (tmp_path / "slots").glob("state.*.json") if p != durable_slot)
    other.write_bytes(other.read_bytes()[:50])  # the power went while it was written
    (tmp_path / "slots" / "messages.jsonl").write_bytes(b"")  # and the page cache with it
    assert RunStore(tmp_path).load("slots").messages == [UserMessage.text("hi")]


def test_a_power_cut_after_unsynced_saves_loads_the_last_whole_commit(tmp_path: Path) -> None:
    from tether.messages import AssistantMessage, TextPart, UserMessage

    store = RunStore(tmp_path / "runs")
    state = RunState(messages=[UserMessage.text("hi"), AssistantMessage(content=(TextPart(text="one"),))])
    store.save(state)
    transcript = tmp_path / "runs" / state.run_id / "messages.jsonl"
    durable_size = transcript.stat().st_size
    state.messages.append(UserMessage.text("more"))
    store.save(state, durable=False)
    # The power went: the header written without fsync reached the disk, the new lines did not.
    with open(transcript, "r+b") as f:
        f.truncate(durable_size)
    loaded = RunStore(tmp_path / "runs").load(state.run_id)
    assert [m.text if hasattr(m, "text") else "" for m in loaded.messages][-1] == "one"
    assert len(loaded.messages) == 2


def test_a_transcript_write_cut_short_by_a_full_disk_loses_nothing_and_leaves_no_torn_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The store keeps the transcript open between saves: a write the disk cut off halfway (ENOSPC
    after some bytes) fails that save, the run on disk stays the previous commit, and the next save,
    in the same process, cuts the torn bytes off before it appends."""
    import errno

    from tether.harness import store as store_module

    store = RunStore(tmp_path)
    state = sample_state()
    store.save(state)
    transcript = tmp_path / "run_store" / "messages.jsonl"
    committed = transcript.read_bytes()
    real_pwrite = store_module.os.pwrite
    transcript_fd = store._fds["run_store"].transcript

    def full_disk(fd: int, data: Any, offset: int) -> int:
        if fd == transcript_fd:
            real_pwrite(fd, bytes(data[: len(data) // 2]), offset)
            raise OSError(errno.ENOSPC, "No space left on device")
        return real_pwrite(fd, data, offset)

    monkeypatch.setattr(store_module.os, "pwrite", full_disk)
    state.messages.append(AssistantMessage(content=(TextPart(text="lost to the full disk " * 20),)))
    with pytest.raises(OSError, match="No space"):
        store.save(state)
    assert transcript.read_bytes().startswith(committed) and len(transcript.read_bytes()) > len(committed)
    assert len(RunStore(tmp_path).load("run_store").messages) == 3, "another process sees the last commit"

    monkeypatch.setattr(store_module.os, "pwrite", real_pwrite)  # space again
    state.messages.append(AssistantMessage(content=(TextPart(text="after"),)))
    store.save(state)
    lines = transcript.read_bytes().splitlines()
    assert len(lines) == 5 and all(line.endswith(b"}") for line in lines), "no torn line is left inside"
    assert [m.text for m in RunStore(tmp_path).load("run_store").messages[3:]] == [
        "lost to the full disk " * 20,
        "after",
    ]


def test_header_slots_are_padded_to_whole_blocks_and_still_load(tmp_path: Path) -> None:
    """A slot rewritten at the same size needs no metadata flush (fdatasync); the padding is ignored."""
    store = RunStore(tmp_path)
    state = sample_state()
    for i in range(3):
        state.cost_usd = i / 10
        store.save(state)
    for slot in ("state.a.json", "state.b.json"):
        assert (tmp_path / "run_store" / slot).stat().st_size % 1024 == 0
    assert RunStore(tmp_path).load("run_store").cost_usd == 0.2


@pytest.mark.parametrize("edit", ["tail longer than the transcript", "count not a number"])
def test_a_header_whose_numbers_do_not_add_up_is_a_clear_error(tmp_path: Path, edit: str) -> None:
    from tether.harness.store import _decode_header, _encode_header

    store = RunStore(tmp_path)
    store.save(sample_state())  # durable: its header carries the transcript's lines as its tail
    for slot in (tmp_path / "run_store").glob("state.*.json"):
        header = _decode_header(slot.read_bytes())
        if header is None:
            continue
        if edit == "count not a number":
            header["message_count"] = "three"
        else:
            header["tail"] = header["tail"] * 3
        slot.write_bytes(_encode_header(header))  # a checksum that matches: edited, not torn
    with pytest.raises(StoreError, match="does not add up"):
        RunStore(tmp_path).load("run_store")


def test_a_run_resumed_from_an_unsynced_header_makes_its_first_commit_durable(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The newest header may have been written without fsync (a crash came before the next durable
    save). The process that resumes the run from it makes its first commit durable, so what it goes
    on from is on the disk; its later headers without fsync never go over that one."""
    import os as real_os

    from tether.harness import store as store_module
    from tether.harness.store import _decode_header

    state = RunState(run_id="resumed", messages=[UserMessage.text("hi")])
    RunStore(tmp_path).save(state)  # durable: commit 1
    state.messages.append(UserMessage.text("more"))
    RunStore(tmp_path).save(state, durable=False)  # commit 2, then the process is killed

    synced: list[str] = []
    monkeypatch.setattr(store_module, "_sync", lambda fd: synced.append(real_os.readlink(f"/proc/self/fd/{fd}")))
    resumed = RunStore(tmp_path)
    loaded = resumed.load("resumed")
    loaded.messages.append(UserMessage.text("after 0"))
    resumed.save(loaded, durable=False)  # asked without fsync, made durable: the first of this process
    first = [p for p in synced if p.endswith((".a.json", ".b.json"))]
    assert len(first) == 1
    durable = Path(first[0])
    for i in range(1, 4):
        loaded.messages.append(UserMessage.text(f"after {i}"))
        resumed.save(loaded, durable=False)
        assert (_decode_header(durable.read_bytes()) or {}).get("message_count") == 3, "the durable header was kept"
    survivor = power_cut_copy(durable, tmp_path / "after_the_cut")
    assert RunStore(survivor.parent).load("resumed").messages == [
        UserMessage.text("hi"),
        UserMessage.text("more"),
        UserMessage.text("after 0"),
    ]


def test_a_rewrite_is_committed_durably_even_when_asked_not_to_since_it_deletes_the_old_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A rewrite deletes the transcript the last durable header may name: its own header must be
    on the disk first, or a power cut would leave a header naming a file that is gone."""
    import os as real_os

    from tether.harness import store as store_module

    synced: list[str] = []
    monkeypatch.setattr(store_module, "_sync", lambda fd: synced.append(real_os.readlink(f"/proc/self/fd/{fd}")))
    store = RunStore(tmp_path)
    state = RunState(run_id="rw", messages=[UserMessage.text("a")])
    store.save(state, rewrite=True)
    synced.clear()
    state.messages = [UserMessage.text("b")]
    store.save(state, rewrite=True, durable=False)
    assert any(p.endswith(("state.a.json", "state.b.json")) for p in synced)
    assert not (tmp_path / "rw" / "messages-1.jsonl").exists()
    assert RunStore(tmp_path).load("rw").messages == [UserMessage.text("b")]


def test_a_first_save_cut_short_before_any_header_was_written_is_no_run_not_damage(tmp_path: Path) -> None:
    run_dir = tmp_path / "cut"
    run_dir.mkdir()
    for name in ("state.a.json", "state.b.json", "messages.jsonl"):
        (run_dir / name).write_bytes(b"")  # the files were made, then the power went
    assert not RunStore(tmp_path).exists("cut")
    with pytest.raises(UserError, match="no run 'cut'"):
        RunStore(tmp_path).load("cut")


def test_lines_written_where_a_lost_header_counted_others_are_not_taken_for_its_own(tmp_path: Path) -> None:
    """Two power cuts. The first keeps a header written without fsync but not its lines: the run
    resumes from the durable commit before it and writes new lines at the same place. The second
    keeps those lines but not the header that counts them. The old header's counts then fit the new
    lines; its transcript hash does not, so the run loads as its last durable commit, not as a mix
    of two histories that was never saved."""
    from tether.harness.store import _decode_header

    store = RunStore(tmp_path)
    state = RunState(run_id="mix", messages=[UserMessage.text("m1"), UserMessage.text("m2")], reason="D1")
    store.save(state)  # durable
    durable_bytes = (tmp_path / "mix" / "messages.jsonl").stat().st_size
    state.messages.append(UserMessage.text("x" * 1000))
    state.reason = "N2"
    store.save(state, durable=False)
    slots = {p: p.read_bytes() for p in (tmp_path / "mix").glob("state.*.json")}
    n2_slot = next(p for p, data in slots.items() if (_decode_header(data) or {}).get("reason") == "N2")
    transcript = tmp_path / "mix" / "messages.jsonl"
    with open(transcript, "r+b") as f:  # cut 1: N2's header reached the disk, its line did not
        f.truncate(durable_bytes)

    resumed = RunStore(tmp_path)
    loaded = resumed.load("mix")
    assert loaded.reason == "D1" and len(loaded.messages) == 2
    loaded.messages += [UserMessage.text("y"), UserMessage.text("z" * 2000)]
    loaded.reason = "N3"
    resumed.save(loaded, durable=False)
    n2_slot.write_bytes(slots[n2_slot])  # cut 2: the new lines reached the disk, N3's header did not

    after = RunStore(tmp_path).load("mix")
    assert after.reason == "D1" and after.messages == [UserMessage.text("m1"), UserMessage.text("m2")]


def test_a_transcript_edited_into_other_valid_lines_is_a_clear_error(tmp_path: Path) -> None:
    synced_run(tmp_path)
    path = tmp_path / "run_store" / "messages-1.jsonl"
    path.write_bytes(path.read_bytes().replace(b"list_files", b"dele_files"))  # same length, still JSON
    with pytest.raises(StoreError, match="does not hold the lines its header counted"):
        RunStore(tmp_path).load("run_store")


def test_power_cut_fuzz_finds_nothing_on_a_bounded_slice() -> None:
    """bench/store_fuzz.py (kill -9 and power cuts at every fsync, torn 4 KiB pages included) on a
    slice of seeds that CI runs in seconds; seed 20956 once brought back, after a second power cut,
    a header from before the first (lines written again at the same place made it whole)."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    for torn, start, count in (("1", 20900, 200), ("0", 5000, 200)):
        out = subprocess.run(
            [sys.executable, str(root / "bench" / "store_fuzz.py"), str(start), str(count)],
            capture_output=True,
            text=True,
            timeout=300,
            env={**os.environ, "TORN": torn},
            check=False,
        )
        assert out.returncode == 0 and f"done {count} distinct failures 0" in out.stdout, out.stdout[-2000:]
