"""Many tool calls in one model reply (src/tether/harness/tool_exec.py, state.py).

A reply of n calls used to look back over the whole reply and its results before every call
(whether a terminal call had ended the turn, whether the call was the one the output limit cut):
n² steps, seconds at 5,000 calls. And a parallel batch saved the run once per result, each save
writing every intent still open: n² intents written. Nothing here is timed: the transcript is a
counting list (how many messages the loop looks at) and the store counts its saves, so a return to
per-call rescans or per-result saves fails. The kill -9 test checks what batching the saves must
keep: a result is on disk before its ``tool_result`` event is told, so nothing is done twice.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any, SupportsIndex

from tether import Agent, RunState, run_sync
from tether.harness.state import pending_tool_calls
from tether.harness.store import RunStore
from tether.messages import AssistantMessage, TextPart, ToolCallPart, ToolMessage
from tether.providers.scripted import Reply
from tether.testing import FunctionModel
from tether.tools.base import tool


class CountingList(list[Any]):
    """A transcript that counts the messages read from it (by index, slice, or iteration)."""

    visits = 0

    def __getitem__(self, key: SupportsIndex | slice) -> Any:  # type: ignore[override]
        got = super().__getitem__(key)
        self.visits += len(got) if isinstance(key, slice) else 1
        return got

    def __iter__(self) -> Any:
        for m in super().__iter__():
            self.visits += 1
            yield m

    def __reversed__(self) -> Any:
        for m in super().__reversed__():
            self.visits += 1
            yield m


class CountingStore(RunStore):
    """A real store on disk that counts its saves: (durable, intents open) for each."""

    def __init__(self, root: Path) -> None:
        super().__init__(root, fsync=False)
        self.saves: list[tuple[bool, int]] = []

    def save(self, state: RunState, *, rewrite: bool = False, durable: bool = True) -> None:
        self.saves.append((durable, len(state.intents)))
        super().save(state, rewrite=rewrite, durable=durable)


def post_tool(parallel: bool | None = None) -> Any:
    @tool(parallel=parallel)
    async def post(n: int) -> str:
        """Post message n (a side effect)."""
        return f"posted {n}"

    return post


def agent_of(calls: int, *, parallel: bool | None = None) -> Agent:
    def reply(messages: list[Any], request: Any) -> Reply | str:
        if any(isinstance(m, ToolMessage) for m in messages):
            return "posted them all"
        return Reply(calls=tuple((f"c{i}", "post", {"n": i}) for i in range(calls)))

    return Agent(FunctionModel(reply), tools=[post_tool(parallel)])


def visits_for(calls: int, tmp_path: Path) -> int:
    state = RunState()
    state.messages = CountingList()
    result = run_sync(agent_of(calls), "post them", state=state, store=RunStore(tmp_path / str(calls), fsync=False))
    assert result.status == "completed", result.reason
    assert result.tool_stats["post"]["calls"] == calls
    assert isinstance(state.messages, CountingList)  # the loop kept the list it was given
    return state.messages.visits


def test_a_reply_of_many_calls_reads_the_transcript_a_bounded_number_of_times_per_call(tmp_path: Path) -> None:
    small, large = visits_for(100, tmp_path), visits_for(400, tmp_path)
    # Linear work reads about four times as much for four times the calls; a look back over the
    # reply before every call reads sixteen times as much (before: 17k and 249k messages read;
    # now 2.6k and 10k).
    assert large < 5 * small, (small, large)
    assert large < 40 * 400, large


def test_a_terminal_call_still_ends_the_turn_among_many(tmp_path: Path) -> None:
    """The look at each batch's own results finds what the look at the whole reply found."""

    def reply(messages: list[Any], request: Any) -> Reply | str:
        if any(isinstance(m, ToolMessage) for m in messages):
            return "the model was asked again"
        calls = [(f"c{i}", "post", {"n": i}) for i in range(5)]
        return Reply(calls=(*calls, ("c5", "finish", {"text": "over"}), ("c6", "post", {"n": 6})))

    @tool(read_only=True, terminal=True)
    async def finish(text: str) -> str:
        """End the turn with text."""
        return text

    agent = Agent(FunctionModel(reply), tools=[post_tool(), finish])
    state = RunState()
    result = run_sync(agent, "post them", state=state, store=RunStore(tmp_path, fsync=False))
    assert result.status == "completed" and result.text == "over"
    statuses = {m.call_id: m.status for m in state.messages if isinstance(m, ToolMessage)}
    assert statuses == {**{f"c{i}": "ok" for i in range(6)}, "c6": "skipped"}


def test_the_cut_call_of_a_long_reply_is_still_answered_without_running(tmp_path: Path) -> None:
    """Only the call the output limit cut is looked at as one; the calls before it run."""
    calls = tuple(ToolCallPart(id=f"c{i}", name="post", arguments=json.dumps({"n": i})) for i in range(40))
    cut = ToolCallPart(id="c40", name="post", arguments='{"n": 4')
    state = RunState()
    state.messages.append(AssistantMessage(content=(TextPart(text="posting"), *calls, cut), finish_reason="length"))
    ran: list[int] = []

    @tool
    async def post(n: int) -> str:
        """Post message n."""
        ran.append(n)
        return f"posted {n}"

    agent = Agent(FunctionModel(lambda messages, request: "done"), tools=[post])
    result = run_sync(agent, state=state, store=RunStore(tmp_path, fsync=False))
    assert result.status == "completed", result.reason
    assert ran == list(range(40))
    last = next(m for m in state.messages if isinstance(m, ToolMessage) and m.call_id == "c40")
    assert last.status == "error" and "cut off by the output limit" in last.text
    assert pending_tool_calls(state) == []


def test_a_parallel_batch_of_side_effects_is_saved_once_not_once_per_result(tmp_path: Path) -> None:
    """Calls that start together have their intents made durable in one save; results in hand
    together are saved together. Per batch, not per call: the counts do not grow with n."""
    counts = {}
    for calls in (10, 120):
        store = CountingStore(tmp_path / str(calls))
        result = run_sync(agent_of(calls, parallel=True), "post them", state=RunState(), store=store)
        assert result.status == "completed", result.reason
        assert result.tool_stats["post"]["calls"] == calls
        durable = [open_ for d, open_ in store.saves if d]
        assert calls in durable  # one durable save held every intent of the batch before any call ran
        counts[calls] = (len(durable), len(store.saves))
    # Before: 124 saves for 120 calls (one per result, each writing the intents still open).
    assert counts[10] == counts[120], counts


def test_one_after_another_each_side_effect_has_its_own_durable_intent(tmp_path: Path) -> None:
    """Side effects that do not start together are not grouped: each call's intent is made
    durable as it starts, and no intent of a call not started yet is on disk (a crash would
    make a person decide about calls that never ran)."""
    store = CountingStore(tmp_path)
    seen: list[tuple[int, int]] = []

    @tool
    async def post(n: int) -> str:
        """Post message n."""
        durable = [open_ for d, open_ in store.saves if d]
        seen.append((len(durable), durable[-1]))
        return f"posted {n}"

    def reply(messages: list[Any], request: Any) -> Reply | str:
        if any(isinstance(m, ToolMessage) for m in messages):
            return "posted"
        return Reply(calls=tuple((f"c{i}", "post", {"n": i}) for i in range(6)))

    result = run_sync(Agent(FunctionModel(reply), tools=[post]), "post", state=RunState(), store=store)
    assert result.status == "completed", result.reason
    first = seen[0][0]
    assert seen == [(first + i, 1) for i in range(6)]  # a new durable save before each, with its intent alone


CHILD = """
import asyncio, os, signal, sys
from tether import Agent, RunState, RunStore, run_stream, tool
from tether.messages import ToolMessage
from tether.providers.scripted import Reply
from tether.testing import FunctionModel

root, log, kill_at = sys.argv[1], sys.argv[2], int(sys.argv[3])

@tool(parallel=True)
async def post(n: int) -> str:
    \"\"\"Post message n.\"\"\"
    fd = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_APPEND)
    os.write(fd, f"{n}\\n".encode())
    os.close(fd)
    return f"posted {n}"

def reply(messages, request):
    if any(isinstance(m, ToolMessage) for m in messages):
        return "posted"
    return Reply(calls=tuple((f"c{i}", "post", {"n": i}) for i in range(8)))

async def main():
    state = RunState(run_id="run_many")
    told = 0
    async for event in run_stream(Agent(FunctionModel(reply), tools=[post]), "post", state=state,
                                  store=RunStore(root)):
        if event.type == "tool_result":
            told += 1
            if told == kill_at:
                print("told", told, flush=True)
                os.kill(os.getpid(), signal.SIGKILL)

asyncio.run(main())
"""


def logged_post(log: Path) -> Any:
    @tool(parallel=True)
    async def post(n: int) -> str:
        """Post message n."""
        with log.open("a") as f:
            f.write(f"{n}\n")
        return f"posted {n}"

    return post


def test_killed_after_a_result_was_told_resumes_without_doing_anything_twice(tmp_path: Path) -> None:
    """kill -9 right after the first and after the fifth ``tool_result`` of a batch: every result
    told was on disk, so the resume asks nobody and runs no post a second time."""
    for kill_at in (1, 5):
        root, log = tmp_path / f"runs{kill_at}", tmp_path / f"log{kill_at}"
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
        child = subprocess.run(
            [sys.executable, "-c", CHILD, str(root), str(log), str(kill_at)],
            capture_output=True,
            text=True,
            env=env,
            timeout=60,
        )
        assert child.returncode == -9 and f"told {kill_at}" in child.stdout, child.stderr
        store = RunStore(root)
        state = store.load("run_many")
        recorded = {m.call_id for m in state.messages if isinstance(m, ToolMessage)}
        assert len(recorded) >= kill_at  # what was told was saved first
        agent = Agent(FunctionModel(lambda messages, request: "posted"), tools=[logged_post(log)])
        result = run_sync(agent, state=state, store=store)
        assert result.status == "completed", result.reason  # no outcome left unknown
        posts = log.read_text().split()
        assert sorted(posts, key=int) == [str(n) for n in range(8)], posts  # each exactly once


def parses_for(calls: int, tmp_path: Path, monkeypatch: Any) -> int:
    import dataclasses

    from tether.harness import loop_guard

    count = [0]
    real = loop_guard.parse_arguments

    def counting(arguments: str) -> Any:
        count[0] += 1
        return real(arguments)

    monkeypatch.setattr(loop_guard, "parse_arguments", counting)
    agent = dataclasses.replace(agent_of(calls), middleware=[loop_guard.LoopGuard()])
    result = run_sync(agent, "post them", state=RunState(), store=RunStore(tmp_path / f"g{calls}", fsync=False))
    assert result.status == "completed", result.reason
    return count[0]


def test_the_loop_guard_does_not_parse_every_earlier_call_for_each_call(tmp_path: Path, monkeypatch: Any) -> None:
    """The loop guard (on by default for configured agents) walks back from a call to the last
    write and stops there; it made every earlier call of the turn first (its arguments parsed),
    for every call: 1,000 side effects in one reply took 73 s of it."""
    small, large = parses_for(50, tmp_path, monkeypatch), parses_for(200, tmp_path, monkeypatch)
    # Before: 2.6k and 40k parses; a walk that stops at the write before: 0.2k and 0.8k.
    assert large < 5 * small and large < 10 * 200, (small, large)
