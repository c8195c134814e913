"""The loop guard, approvals, and verdicts on resume (loop_guard.py, tool_exec.py, guardrails/core.py).

* A call ``LoopGuard(stop_after=...)`` will not let run was put to a person first: they approved
  it, then the guard stopped the run on it. The guard's stop now comes before the question
  (``before_tool_call``), so no "yes" is asked for in vain.
* A ``tool_args`` verdict refusing a call of a parallel batch waits, in memory, for the calls
  before it to finish (results are written in order): a kill -9 meanwhile, or a batch that waits
  for a person, judged it again on resume, and paid the classifier's model again.
* The guard walked back over the whole reply's results for each call (n² for a reply of n
  calls); it keeps an index of the turn now, with the same verdicts (compared here with the
  rule as written, on a varied sequence) and work that grows with n.

Run as a script, this file is the child a test kills (see ``_child``).
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import signal
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from tether import Agent, RunState, run_stream, run_sync
from tether.guardrails import Guardrail, ModelClassifier
from tether.harness.compaction import summary_message
from tether.harness.loop_guard import LoopGuard, _Call, _changed_the_world, _likeness, _note_part, _Streak
from tether.harness.state import approve, this_turn, turn_start
from tether.harness.store import RunStore
from tether.messages import AssistantMessage, TextPart, ToolCallPart, ToolMessage, UserMessage, text_of
from tether.providers.scripted import Reply
from tether.testing import FunctionModel
from tether.tools.base import tool

# -- 1. the loop guard's stop comes before a person is asked ----------------------------------


def _events(agent: Agent, prompt: str | None, state: RunState) -> list[Any]:
    async def go() -> list[Any]:
        return [e async for e in run_stream(agent, prompt, state=state)]

    return asyncio.run(go())


def test_a_call_the_loop_guard_will_stop_is_never_put_to_a_person() -> None:
    ran: list[str] = []

    @tool(needs_approval=True)
    async def send(to: str) -> str:
        """Send a reminder."""
        ran.append(to)
        return f"sent to {to}"

    def reply(messages: list[Any], request: Any) -> Reply:
        done = sum(isinstance(m, ToolMessage) for m in messages)
        return Reply(calls=((f"c{done}", "send", {"to": "ana"}),))

    agent = Agent(FunctionModel(reply), tools=[send], middleware=[LoopGuard(nudge_after=2, stop_after=3)])
    state = RunState()
    asked: list[str] = []
    events = _events(agent, "remind ana", state)
    for _ in range(5):
        asked += [e.call_id for e in events if e.type == "approval_required"]
        if state.status != "interrupted":
            break
        approve(state)
        events = _events(agent, None, state)
    # Before: c2 was asked about, approved, and then stopped ("yes" wasted).
    assert asked == ["c0", "c1"]
    assert state.status == "failed" and state.reason.startswith("stopped a loop: send was called 3 times")
    assert ran == ["ana", "ana"]
    last = state.messages[-1]
    assert isinstance(last, ToolMessage) and last.call_id == "c2" and last.text.startswith("Not run: stopped a loop")


def test_a_batch_the_loop_guard_stops_asks_no_one() -> None:
    """A call of the same parallel batch that needs approval is not asked about either: the run
    stops there; it is told so, in words, and pairing holds."""

    @tool(parallel=True)
    async def ping(host: str) -> str:
        """Ping a host."""
        return f"{host} is down"

    @tool(parallel=True, needs_approval=True)
    async def page(who: str) -> str:
        """Page someone."""
        return f"paged {who}"

    def reply(messages: list[Any], request: Any) -> Reply:
        done = sum(isinstance(m, ToolMessage) for m in messages)
        if done < 2:
            return Reply(calls=((f"p{done}", "ping", {"host": "db1"}),))
        return Reply(calls=(("p2", "ping", {"host": "db1"}), ("q", "page", {"who": "oncall"})))

    agent = Agent(FunctionModel(reply), tools=[ping, page], middleware=[LoopGuard(nudge_after=2, stop_after=3)])
    state = RunState()
    events = _events(agent, "is db1 up?", state)
    assert [e for e in events if e.type == "approval_required"] == []  # before: q was asked about
    assert state.status == "failed" and state.reason.startswith("stopped a loop: ping")
    results = {m.call_id: m for m in state.messages if isinstance(m, ToolMessage)}
    assert results["p2"].text.startswith("Not run: stopped a loop")
    assert results["q"].status == "skipped"
    assert results["q"].text.startswith("Not run: the run stopped before a person was asked about this call")


# -- 2. a refused call's verdict is kept: never judged (nor paid) twice ------------------------

SCOPE = "Refuse any lookup of passwords or keys."


def _judge(log: Path) -> FunctionModel:
    """The guardrail's model: every request it gets is a line in ``log`` (fsynced, so a count
    across processes holds)."""

    def verdict(messages: list[Any], request: Any) -> AssistantMessage:
        fd = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        os.write(fd, b"judge\n")
        os.fsync(fd)
        os.close(fd)
        bad = "password" in text_of(messages)
        said = {"rationale": "asks for a password" if bad else "a plain lookup", "score": 0.0 if bad else 1.0}
        return AssistantMessage(content=(TextPart(text=json.dumps({**said, "category": "ok"})),), finish_reason="stop")

    return FunctionModel(verdict, model_id="judge")


def _guarded(log: Path, tools: list[Any], calls: tuple[Any, ...]) -> Agent:
    def reply(messages: list[Any], request: Any) -> Reply | str:
        if any(isinstance(m, ToolMessage) for m in messages):
            return "done"
        return Reply(calls=calls)

    guard = Guardrail(ModelClassifier(SCOPE, model=_judge(log)), stages=("tool_args",), name="keys")
    return Agent(FunctionModel(reply), tools=tools, middleware=[guard])


@tool(read_only=True)
async def lookup(name: str) -> str:
    """Look a name up."""
    return f"{name}: found"


def _child(home: Path, log: Path, kill: bool) -> None:
    """One process of the crash test: a batch of a slow read (which kills the process the first
    time) and a lookup the guardrail refuses, after it in the batch."""

    @tool(read_only=True)
    async def slow_read(path: str) -> str:
        """Read a file slowly."""
        with log.open("a") as f:
            f.write("read\n")
        if kill:
            os.kill(os.getpid(), signal.SIGKILL)
        return f"{path}: 3 lines"

    calls = (("c0", "slow_read", {"path": "notes.txt"}), ("c1", "lookup", {"name": "the admin password"}))
    agent = _guarded(log, [slow_read, lookup], calls)
    store = RunStore(home)
    state = store.load("run_k") if store.exists("run_k") else RunState(run_id="run_k")
    result = run_sync(agent, None if store.exists("run_k") else "read the notes", state=state, store=store)
    print(result.model_dump_json())


def test_a_refusal_in_a_batch_is_not_judged_again_after_a_kill(tmp_path: Path) -> None:
    home, log = tmp_path / "runs", tmp_path / "log"

    def child(mode: str) -> subprocess.CompletedProcess[str]:
        argv = [sys.executable, __file__, str(home), str(log), mode]
        return subprocess.run(argv, capture_output=True, text=True, timeout=60)

    first = child("kill")
    assert first.returncode == -signal.SIGKILL, first.stderr
    assert log.read_text().split() == ["judge", "judge", "read"]  # both verdicts, then c0 started
    second = child("resume")
    assert second.returncode == 0, second.stderr
    assert json.loads(second.stdout)["status"] == "completed"
    # Before: c1 was judged again on resume (a third verdict, paid). c0 (allowed) was not either.
    assert log.read_text().split() == ["judge", "judge", "read", "read"]
    state = RunStore(home).load("run_k")
    results = {m.call_id: m for m in state.messages if isinstance(m, ToolMessage)}
    assert results["c0"].status == "ok"
    assert results["c1"].is_error and results["c1"].text.startswith("Not run: the tool args guardrail 'keys'")


def test_a_refusal_in_a_batch_that_waits_for_a_person_is_not_judged_again(tmp_path: Path) -> None:
    sent: list[str] = []

    @tool(parallel=True, needs_approval=True)
    async def send(to: str) -> str:
        """Send the report."""
        sent.append(to)
        return f"sent to {to}"

    log = tmp_path / "log"
    calls = (("c0", "send", {"to": "ana"}), ("c1", "lookup", {"name": "the root password"}))
    agent = _guarded(log, [send, lookup], calls)
    state = RunState()
    assert run_sync(agent, "send the report", state=state).status == "interrupted"
    assert log.read_text().split() == ["judge", "judge"]
    approve(state)
    result = run_sync(agent, state=state)
    assert result.status == "completed" and sent == ["ana"]
    assert log.read_text().split() == ["judge", "judge"]  # before: c1 judged (and paid) a third time
    refused = next(m for m in state.messages if isinstance(m, ToolMessage) and m.call_id == "c1")
    assert refused.is_error and "asks for a password" in refused.text


# -- 3. the guard's index: the same verdicts, work that grows with the calls -------------------


def _oracle(ctx: Any, guard: LoopGuard, call: ToolCallPart) -> Any:
    """The streak as the rule is written: walk back over every call of the turn before ``call``
    (in the latest reply that has it), each with the latest result after it."""
    turn = this_turn(ctx.state.messages)
    flat = [(c, at) for at, m in enumerate(turn) if isinstance(m, AssistantMessage) for c in m.tool_calls]
    ends = [n for n, (c, _) in enumerate(flat) if c.id == call.id]
    current = _Call.of(call, None)
    counted: list[Any] = []
    exact, reworded = True, set()
    for c, at in reversed(flat[: ends[-1]] if ends else []):
        later = [m for m in turn[at + 1 :] if isinstance(m, ToolMessage) and m.call_id == c.id]
        past = _Call.of(c, later[-1] if later else None)
        kind = _likeness(past, current, guard.similarity)
        if kind != "exact" and _changed_the_world(ctx, past):
            break
        if kind is None:
            continue
        counted.append(past)
        if kind == "near" and past.args is not None and current.args is not None:
            exact = False
            reworded.update(k for k, v in current.args.items() if isinstance(v, str) and past.args[k] != v)
    return _Streak(call.name, len(counted) + 1, exact, tuple(sorted(reworded)), tuple(reversed(counted)))


QUERIES = ["seal kit price", "price of the seal kit", "seal kits prices", "repair manual", "FVAM-2050-A specs"]


def test_the_index_gives_the_streaks_the_rule_gives_on_a_varied_run() -> None:
    """Searches alike and not, writes that succeed, fail or repeat, call ids used again, calls
    judged before their batch has results, notes added in place, new person messages and
    compaction summaries: after every change, each call's streak is the rule's."""

    @tool(read_only=True)
    async def search(query: str, limit: int = 5) -> str:
        """Search."""
        return query

    @tool
    async def edit(path: str, text: str) -> str:
        """Edit a file."""
        return path

    rng = random.Random(11)
    state = RunState()
    state.messages.append(UserMessage.text("find the seal kit"))
    ctx: Any = SimpleNamespace(state=state, tools={"search": search, "edit": edit}, scratch={})
    guard = LoopGuard(nudge_after=2, stop_after=4)
    compared = 0
    for step in range(400):
        n = rng.randint(1, 4)
        calls = []
        for k in range(n):
            cid = f"c{rng.randint(0, 5)}" if rng.random() < 0.15 else f"s{step}_{k}"
            if rng.random() < 0.6:
                args: dict[str, Any] = {"query": rng.choice(QUERIES)}
                if rng.random() < 0.2:
                    args["limit"] = rng.choice([5, True, 1])
                calls.append(ToolCallPart(id=cid, name="search", arguments=json.dumps(args)))
            else:
                args = {"path": rng.choice(["a.py", "b.py"]), "text": rng.choice(["x", "y"])}
                calls.append(ToolCallPart(id=cid, name="edit", arguments=json.dumps(args)))
        state.messages.append(AssistantMessage(content=tuple(calls)))
        batch = rng.random() < 0.3  # judged before any of them has a result
        for c in calls:
            assert guard._streak(ctx, c) == _oracle(ctx, guard, c), (step, c)
            compared += 1
            if not batch:
                state.messages.append(_result(rng, c))
        if batch:
            state.messages.extend(_result(rng, c) for c in calls)
        turn = [c for m in this_turn(state.messages) if isinstance(m, AssistantMessage) for c in m.tool_calls]
        for c in rng.sample(turn, min(3, len(turn))):  # and calls made earlier, as the turn grew
            assert guard._streak(ctx, c) == _oracle(ctx, guard, c), (step, c)
            compared += 1
        _change(rng, state)
    assert compared > 2000


def _change(rng: random.Random, state: RunState) -> None:
    """Now and then: a new person message, a compaction, or a note added in place."""
    roll = rng.random()
    if roll < 0.05:
        state.messages.append(UserMessage.text("and the repair kit?"))
    elif roll < 0.1:  # a compaction: the turn so far becomes the summary's record
        start = turn_start(state.messages)
        record = tuple(m for m in state.messages[start:] if not isinstance(m, UserMessage))
        state.messages[start:] = [summary_message("so far", 1, turn_so_far=record)]  # type: ignore[arg-type]
        state.transcript_rewritten()
    elif roll < 0.2:
        at = rng.choice([i for i, m in enumerate(state.messages) if isinstance(m, ToolMessage)])
        m = state.messages[at]
        assert isinstance(m, ToolMessage)
        state.messages[at] = m.model_copy(update={"content": (*m.content, _note_part("[Loop check: x]"))})
        state.transcript_rewritten()


def _result(rng: random.Random, call: ToolCallPart) -> ToolMessage:
    status = rng.choice(["ok", "ok", "ok", "error"])
    parts: tuple[Any, ...] = (TextPart(text=rng.choice(["found 3", "found 3", "nothing"])),)
    if rng.random() < 0.2:
        parts = (*parts, _note_part("[Loop check: you have called it 3 times]"))
    return ToolMessage(call_id=call.id, name=call.name, content=parts, status=status)  # type: ignore[arg-type]


def _guarded_visits(calls: int) -> int:
    """Messages the guard reads in a run of one reply with ``calls`` posts (imported here, not at the
    top: this file is also its own crash child, run as a script)."""
    from dataclasses import replace

    from bench.many_calls import make_agent

    from tests.harness.test_left_alone_many_calls import CountingList

    state = RunState()
    state.messages = CountingList()
    agent = replace(make_agent(calls, parallel=False), middleware=[LoopGuard()])
    result = run_sync(agent, "post them", state=state)
    assert result.status == "completed" and result.tool_stats["post"]["calls"] == calls
    assert isinstance(state.messages, CountingList)
    return state.messages.visits


def test_the_guard_reads_the_transcript_a_bounded_number_of_times_per_call() -> None:
    small, large = _guarded_visits(100), _guarded_visits(400)
    # Linear work reads about four times as much for four times the calls; the walk back over
    # the reply's results for each call read fourteen times as much (before: 18k and 252k; now
    # 3.3k and 12.9k).
    assert large < 5 * small, (small, large)


if __name__ == "__main__":
    _child(Path(sys.argv[1]), Path(sys.argv[2]), sys.argv[3] == "kill")
