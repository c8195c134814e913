"""Group commit: many runs in one process share their fsyncs, and each keeps its own guarantee.

Power cuts are simulated as in test_store.py: ``_sync`` is recorded, and a cut keeps only what the
last fsync of a run made durable (:func:`power_cut_copy`)."""

from __future__ import annotations

import asyncio
import os
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from tests.harness.test_store import power_cut_copy
from tether import Agent, RunState, RunStore, run_stream, tool
from tether.harness import store as store_module
from tether.harness.store import GroupSync
from tether.messages import AssistantMessage, TextPart, UserMessage, dump_message
from tether.testing import FunctionModel, call


class SlowDisk:
    """``_sync`` as a disk whose flush takes ``seconds``: records which file each fsync made
    durable, in order, and how many ran at once."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self.synced: list[str] = []
        self.lock = threading.Lock()
        self.now = self.most = 0

    def __call__(self, fd: int) -> None:
        path = os.readlink(f"/proc/self/fd/{fd}")
        with self.lock:
            self.now += 1
            self.most = max(self.most, self.now)
        time.sleep(self.seconds)
        with self.lock:
            self.now -= 1
            self.synced.append(path)

    def last_header(self, run_id: str) -> Path:
        with self.lock:
            return Path(next(p for p in reversed(self.synced) if f"/{run_id}/state." in p))


def test_concurrent_commits_share_group_syncs_and_each_returns_durable(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    disk = SlowDisk(0.02)
    monkeypatch.setattr(store_module, "_sync", disk)
    store = RunStore(tmp_path / "runs")
    runs = [RunState(run_id=f"run_{i}") for i in range(40)]

    async def commit(state: RunState, turn: int) -> None:
        state.messages.append(UserMessage.text(f"{state.run_id} turn {turn}"))
        await store.save_async(state)
        # It returned: its own header is on the disk, with every message it counts.
        survivor = power_cut_copy(disk.last_header(state.run_id), tmp_path / f"cut-{state.run_id}-{turn}")
        loaded = RunStore(survivor.parent).load(state.run_id)
        assert [dump_message(m) for m in loaded.messages] == [dump_message(m) for m in state.messages]

    async def go() -> None:
        for turn in range(3):
            await asyncio.gather(*(commit(s, turn) for s in runs))

    asyncio.run(go())
    store.close()
    assert store.group.synced == 120
    # 120 commits, but the disk flushed them in groups, many fsyncs at once: not one after another.
    # (Typically 6 to 12 groups; a loaded machine spreads the commits' arrival, so the bound is
    # loose. One after another would be 120 groups with one fsync at a time.)
    assert store.group.groups <= 30, store.group.groups
    assert disk.most >= 4


def test_a_commit_waits_for_the_next_group_only(monkeypatch: pytest.MonkeyPatch) -> None:
    """Commits that arrive while a group is being synced all go in the next group, whatever their
    number: none waits behind the syncs of the others one by one."""
    release = threading.Event()
    disk = SlowDisk(0.02)

    def held_disk(fd: int) -> None:  # the first fsync lasts until the test lets it end
        if not release.is_set():
            release.wait(30)
        disk(fd)

    monkeypatch.setattr(store_module, "_sync", held_disk)
    group = GroupSync()
    fds = [os.open(os.devnull, os.O_WRONLY) for _ in range(31)]
    try:
        first = threading.Thread(target=group.sync, args=(fds[0],))
        first.start()
        while not group.busy:  # the first group (one file) is being synced
            time.sleep(0.001)
        rest = [threading.Thread(target=group.sync, args=(fd,)) for fd in fds[1:]]
        for t in rest:
            t.start()
        while group.waiting < 30:  # all thirty wait behind it, however slowly they started
            time.sleep(0.001)
        release.set()
        for t in [first, *rest]:
            t.join()
    finally:
        release.set()
        for fd in fds:
            os.close(fd)
    assert group.synced == 31
    assert group.groups == 2, group.groups  # the first alone, then the thirty that waited, together
    assert disk.most > 1  # the thirty were synced side by side


def test_a_failed_fsync_fails_its_own_commit_only(monkeypatch: pytest.MonkeyPatch) -> None:
    bad = os.open(os.devnull, os.O_WRONLY)
    good = [os.open(os.devnull, os.O_WRONLY) for _ in range(5)]
    slow = SlowDisk(0.02)

    def sync(fd: int) -> None:
        slow(fd)
        if fd == bad:
            raise OSError(5, "Input/output error")

    monkeypatch.setattr(store_module, "_sync", sync)
    group = GroupSync()
    errors: dict[int, BaseException | None] = {}

    def commit(fd: int) -> None:
        try:
            group.sync(fd)
            errors[fd] = None
        except OSError as exc:
            errors[fd] = exc

    threads = [threading.Thread(target=commit, args=(fd,)) for fd in [*good, bad]]
    try:
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    finally:
        for fd in [*good, bad]:
            os.close(fd)
    assert isinstance(errors[bad], OSError)
    assert all(errors[fd] is None for fd in good)


def test_many_concurrent_runs_never_start_a_side_effect_or_a_request_before_its_intent_is_durable(
    workspace: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Twelve runs in one loop, their commits grouped. At each model request and at each side
    effect, the power is cut: what survives of that run knows it asked (the request's note in
    flight, or the call's intent)."""
    disk = SlowDisk(0.01)
    monkeypatch.setattr(store_module, "_sync", disk)
    store = RunStore(tmp_path / "runs")
    checked: list[str] = []

    def survivor(run_id: str, label: str) -> RunState:
        cut = power_cut_copy(disk.last_header(run_id), tmp_path / f"{label}-{run_id}-{len(checked)}")
        return RunStore(cut.parent).load(run_id)

    @tool
    def note(text: str, ctx: Any) -> str:
        """Write a note (a side effect)."""
        run_id = ctx.idempotency_key.split(":")[0]
        saved = survivor(run_id, "effect")
        assert ctx.call_id in saved.intents, "the intent is durable before the side effect"
        checked.append("effect")
        return "noted"

    def reply(messages: list[Any], request: Any) -> Any:
        first = next(m for m in messages if isinstance(m, UserMessage))
        run_id = "".join(p.text for p in first.content if isinstance(p, TextPart)).split()[-1]
        saved = survivor(run_id, "request")
        assert saved.call_in_flight is not None, "the request is noted durably before it is sent"
        assert len(saved.messages) == len(messages)
        checked.append("request")
        if len(messages) == 1:
            return call("c1", "note", {"text": "x"})
        return AssistantMessage(content=(TextPart(text="done"),))

    agent = Agent(FunctionModel(reply), tools=[note], cwd=workspace)

    async def one(i: int) -> str:
        state = RunState(run_id=f"run_{i}")
        async for event in run_stream(agent, f"note for run_{i}", state=state, store=store):
            if event.type == "done":
                return event.result.status
        return "none"

    async def go() -> list[str]:
        return await asyncio.gather(*(one(i) for i in range(12)))

    assert asyncio.run(go()) == ["completed"] * 12
    store.close()
    assert checked.count("request") == 24 and checked.count("effect") == 12
    assert store.group.groups < store.group.synced  # the runs shared their fsyncs


def test_a_session_mirror_is_synced_with_the_runs_durable_saves_only(
    workspace: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The session's JSONL mirror was fsynced at every save, on the event loop. Now its lines are
    synced with the run's durable saves (before each request and side effect), on the commit's
    thread: at every model request every line of the session is on the disk, with fewer fsyncs."""
    from tether.sessions import JsonlSessionStore

    real_fsync = os.fsync
    synced: dict[str, int] = {}  # session file → its size at its last fsync
    appends: list[int] = []
    fsyncs: list[int] = []

    def fsync(fd: int) -> None:
        path = os.readlink(f"/proc/self/fd/{fd}")
        if path.endswith("s1.jsonl"):
            synced[path] = os.fstat(fd).st_size
            fsyncs.append(1)
        real_fsync(fd)

    real_sync = store_module._sync

    def group_sync(fd: int) -> None:  # the session's file joins the run store's group commit
        fsync(fd) if os.readlink(f"/proc/self/fd/{fd}").endswith("s1.jsonl") else real_sync(fd)

    monkeypatch.setattr(os, "fsync", fsync)
    monkeypatch.setattr(store_module, "_sync", group_sync)
    sessions = JsonlSessionStore(tmp_path / "sessions")
    real_append = sessions.append

    def append(*args: Any, **kwargs: Any) -> None:
        appends.append(1)
        real_append(*args, **kwargs)

    monkeypatch.setattr(sessions, "append", append)
    path = str(sessions.path("s1"))
    at_request: list[bool] = []

    def reply(messages: list[Any], request: Any) -> Any:
        at_request.append(synced.get(path) == os.path.getsize(path))
        done = sum(m.role == "tool" for m in messages)
        return call(f"c{done}", "list_files") if done < 3 else AssistantMessage(content=(TextPart(text="ok"),))

    from tether.tools.files import FILE_TOOLS

    store = RunStore(tmp_path / "runs")

    async def go() -> str:
        async for event in run_stream(
            Agent(FunctionModel(reply), tools=FILE_TOOLS, cwd=workspace),
            "list",
            store=store,
            session=sessions,
            session_id="s1",
        ):
            if event.type == "done":
                return event.result.status
        return "none"

    assert asyncio.run(go()) == "completed"
    store.close()
    assert at_request == [True] * 4  # every line the model is asked about is on the disk
    assert len(fsyncs) < len(appends), (fsyncs, appends)  # no longer one fsync per append


def test_a_lone_run_commits_on_its_own_thread_with_no_hop(workspace: Path, tmp_path: Path) -> None:
    """`tether run`: the only run the store holds saves as before, on the loop's thread (no commit
    thread is even started), so a single run is not slower for group commit."""
    from tether.tools.files import FILE_TOOLS

    store = RunStore(tmp_path / "runs")
    replies = iter([call("c1", "list_files"), "done"])

    async def go() -> str:
        agent = Agent(FunctionModel(lambda m, r: next(replies)), tools=FILE_TOOLS, cwd=workspace)
        async for event in run_stream(agent, "list", store=store):
            if event.type == "done":
                return event.result.status
        return "none"

    assert asyncio.run(go()) == "completed"
    assert store._commit_pool is None and store.group.synced >= 2


def test_the_session_files_of_many_runs_are_synced_in_their_group_commit(
    workspace: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A server's runs each mirror a session: those files were fsynced one run at a time, before
    each run's commit (as costly as the group commit itself, measured). They now join the group:
    no session file is fsynced on its own, and every session line is on the disk at each request."""
    from tether.sessions import JsonlSessionStore

    disk = SlowDisk(0.005)
    monkeypatch.setattr(store_module, "_sync", disk)
    alone: list[str] = []
    real_fsync = os.fsync

    def fsync(fd: int) -> None:
        alone.append(os.readlink(f"/proc/self/fd/{fd}"))
        real_fsync(fd)

    monkeypatch.setattr(os, "fsync", fsync)
    sessions = JsonlSessionStore(tmp_path / "sessions")
    store = RunStore(tmp_path / "runs")
    behind: list[str] = []

    def reply(messages: list[Any], request: Any) -> Any:
        first = next(m for m in messages if isinstance(m, UserMessage))
        sid = "".join(p.text for p in first.content if isinstance(p, TextPart)).split()[-1]
        path = str(sessions.path(sid))
        with disk.lock:
            if path not in disk.synced:
                behind.append(sid)
        done = sum(m.role == "tool" for m in messages)
        return call(f"c{done}", "list_files") if done < 2 else AssistantMessage(content=(TextPart(text="ok"),))

    from tether.tools.files import FILE_TOOLS

    agent = Agent(FunctionModel(reply), tools=FILE_TOOLS, cwd=workspace)

    async def one(i: int) -> str:
        async for event in run_stream(agent, f"list s{i}", store=store, session=sessions, session_id=f"s{i}"):
            if event.type == "done":
                return event.result.status
        return "none"

    async def go() -> list[str]:
        return await asyncio.gather(*(one(i) for i in range(8)))

    assert asyncio.run(go()) == ["completed"] * 8
    store.close()
    assert behind == []  # at every request the session's file had been synced
    assert [p for p in alone if p.endswith(".jsonl")] == []  # never on its own
    assert sum(p.endswith(".jsonl") for p in disk.synced) >= 8  # in the group's syncs
    assert store.group.groups < store.group.synced
