"""Persisted runs: atomic, append-only transcript, clear errors on damaged files."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tether import RunState, RunStore
from tether.errors import StoreError, UserError
from tether.messages import AssistantMessage, TextPart, ToolCallPart, ToolMessage, UserMessage
from tether.status import ApprovalInterruption
from tether.usage import Usage


def sample_state() -> RunState:
    state = RunState(run_id="run_store")
    state.messages.append(UserMessage.text("héllo 你好"))
    state.messages.append(AssistantMessage(content=(ToolCallPart(id="c1", name="list_files"),),
                                           model="scripted/plan", usage=Usage(prompt_tokens=10, completion_tokens=2)))
    state.messages.append(ToolMessage(call_id="c1", name="list_files", content=(TextPart(text="a\nb"),)))
    state.cost_usd = 0.5
    state.status = "interrupted"
    state.interruption = ApprovalInterruption(call_id="c9", tool_name="delete_file", args={"path": "x"})
    state.approved["c1"] = "abc"
    return state


def test_round_trip(tmp_path: Path) -> None:
    store = RunStore(tmp_path)
    state = sample_state()
    store.save(state)
    loaded = RunStore(tmp_path).load("run_store")
    assert loaded.model_dump() == state.model_dump()
    assert loaded.turns == 1


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
    assert b"\"te\n" not in path.read_bytes() and path.read_bytes().count(b"\n") == 4


def test_a_transcript_cut_short_is_a_clear_error(tmp_path: Path) -> None:
    RunStore(tmp_path).save(sample_state())
    path = tmp_path / "run_store" / "messages.jsonl"
    path.write_bytes(path.read_bytes()[:20])
    with pytest.raises(StoreError, match="cut short"):
        RunStore(tmp_path).load("run_store")


def test_garbage_in_the_transcript_names_the_line(tmp_path: Path) -> None:
    RunStore(tmp_path).save(sample_state())
    path = tmp_path / "run_store" / "messages.jsonl"
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


def test_unknown_run_and_bad_ids(tmp_path: Path) -> None:
    with pytest.raises(UserError, match="no run"):
        RunStore(tmp_path).load("run_missing")
    with pytest.raises(UserError):
        RunStore(tmp_path).load("../etc")


def test_list_runs_newest_first(tmp_path: Path) -> None:
    store = RunStore(tmp_path)
    a, b = RunState(run_id="run_a", created_at=1.0), RunState(run_id="run_b", created_at=2.0)
    store.save(a)
    store.save(b)
    assert [h["run_id"] for h in store.list()] == ["run_b", "run_a"]


def test_a_run_cannot_be_resumed_twice_at_once(tmp_path: Path, workspace: Path) -> None:
    import asyncio

    from tether import Agent, CancelSignal, run, run_stream, run_sync
    from tether.tools.files import FILE_TOOLS

    store = RunStore(tmp_path)
    agent = Agent("scripted/slow", tools=FILE_TOOLS, cwd=workspace)
    state = RunState()

    async def first() -> str | None:
        signal = CancelSignal()
        async for event in run_stream(agent, "scan", state=state, store=store, signal=signal):
            if event.type == "tool_progress":  # the run is busy in this process: try a second resume
                with pytest.raises(StoreError, match="another process"):
                    await run(agent, state=RunStore(tmp_path).load(state.run_id), store=RunStore(tmp_path))
                signal.cancel("done checking")
            if event.type == "done":
                return event.result.status
        return None

    assert asyncio.run(first()) == "interrupted"
    assert run_sync(agent, state=RunStore(tmp_path).load(state.run_id), store=RunStore(tmp_path)).status == "completed"


def test_one_durable_commit_per_step_and_everything_durable_before_a_side_effect(workspace: Path, tmp_path: Path,
                                                                                 monkeypatch: Any) -> None:
    import os as real_os

    from tether import Agent, run_sync, tool
    from tether.harness import store as store_module
    from tether.testing import FunctionModel, call

    synced: list[str] = []
    monkeypatch.setattr(store_module.os, "fsync", lambda fd: synced.append(real_os.readlink(f"/proc/self/fd/{fd}")))
    store = RunStore(tmp_path / "runs")
    seen_at_effect: list[tuple[int, set[str]]] = []

    @tool
    def note(text: str) -> str:
        """Write a note (a side effect)."""
        seen_at_effect.append((len(synced), set(store._unsynced)))
        return "noted"

    replies = iter([call("c1", "list_files"), call("c2", "read_file", {"path": "errors.log"}),
                    call("c3", "note", {"text": "x"}), "done"])
    from tether.tools.files import FILE_TOOLS

    result = run_sync(Agent(FunctionModel(lambda m, r: next(replies)), tools=[*FILE_TOOLS, note], cwd=workspace),
                      "go", store=store)
    assert result.status == "completed"
    # 4 requests (each preceded by one durable commit: transcript lines, then the header) + the
    # side effect's intent (transcript + header) + the final save (the last reply, then the header).
    # Saving every change durably took 18 here.
    assert len(synced) == 4 * 2 + 2 + 2, synced
    (before_effect, unsynced) = seen_at_effect[0]
    assert unsynced == set(), "the reply that asked for the side effect was on disk before it ran"
    assert synced[before_effect - 1].endswith(("state.a.json", "state.b.json")), "the intent's header was synced"


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
