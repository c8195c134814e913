"""Sub-agents attacked from outside, session fifteen: trees three levels deep (lead → mid →
leaf), a person's decision handed down them, kills of a real process between the saves of one
level and the level above. Costs are checked against sums computed here from the logged calls'
usage and prices, never against tether's own totals.
"""

from __future__ import annotations

import asyncio
import signal
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from tests.conftest import assert_pairing
from tests.harness import subagent_s15_child as tree3
from tether import Agent, RunState, RunStore, run_stream, run_sync, tool
from tether.harness.subagent import children
from tether.messages import Message, ToolMessage
from tether.providers.base import ModelRequest
from tether.status import ApprovalInterruption, RunResult, SubagentInterruption
from tether.testing import FunctionModel, Reply

CHILD = Path(__file__).with_name("subagent_s15_child.py")
RUN = "run_s15_tree"


def resume_here(home: Path, prompt: str | None = None) -> RunResult:
    """Run (or resume) the tree in this process, as a fresh process would, from the store."""
    store = RunStore(home / "runs")
    state = store.load(RUN) if store.exists(RUN) else RunState(run_id=RUN)

    async def main() -> RunResult:
        events = [e async for e in run_stream(tree3.tree(home), prompt, state=state, store=store)]
        return events[-1].result  # type: ignore[no-any-return, union-attr]

    return asyncio.run(main())


def model_calls(home: Path) -> Counter[tuple[str, int]]:
    lines = (home / "log").read_text().splitlines()
    return Counter((w[1], int(w[2])) for w in (line.split() for line in lines) if w[0] == "model")


def priced(calls: Counter[tuple[str, int]]) -> float:
    return sum(tree3.PRICES[who].cost(tree3.usage(who, t)) for who, t in calls)


def test_a_kill_as_an_approved_grandchild_first_saves_resumes_it_and_its_call_runs_once(tmp_path: Path) -> None:
    """The leaf, two levels down, stops for a person; the lead is approved in a new process,
    which is killed right after the leaf's first save (the run of its own in the store), before
    the levels above it saved their records of it. Before: the records above still held the leaf
    whole as it was when it asked, the resume started from that copy, the store refused it as
    stale, and the mid's model read the store's error as the call's: the approved write never
    ran, the tree completed with an answer about an error, and its cost was not what was paid."""
    home = tmp_path
    first = resume_here(home, "Have the notes written.")
    assert first.status == "interrupted" and isinstance(first.interruption, SubagentInterruption)
    asked = first.interruption.child
    assert isinstance(asked, SubagentInterruption) and isinstance(asked.child, ApprovalInterruption)
    assert asked.child.call_id == "w1"

    killed = subprocess.run(
        [sys.executable, str(CHILD), str(home), RUN, "save:leaf:1", "approve"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert killed.returncode == -signal.SIGKILL, killed.stderr

    final = resume_here(home)
    assert final.status == "completed", final.reason
    assert final.output == "mid says leaf says notes: one / two"
    assert (home / "notes.txt").read_text() == "one\ntwo\n"  # the approved write ran, and once
    calls = model_calls(home)
    assert set(calls.values()) == {1}, "no model call was paid twice"
    assert set(calls) == {("lead", 0), ("lead", 1), ("mid", 0), ("mid", 1)} | {("leaf", t) for t in range(4)}
    assert final.cost_usd == pytest.approx(priced(calls), abs=1e-12)
    assert_pairing(RunStore(home / "runs").load(RUN).messages)


@tool(read_only=True, parallel=False)
def tick() -> str:
    """A step of work."""
    return "ticked"


def test_a_runaway_grandchild_leaves_each_level_above_it_a_turn_to_answer() -> None:
    """lead (max_turns=10) → mid → leaf, the leaf looping for ever. Each level keeps a turn of
    what it has left for its own answer, as it keeps a reserve of its budget. Before: the mid was
    given all 9 turns the lead had left and the leaf all 8 the mid had; the mid ended
    max_turns_exceeded without a word, and so did the lead: the person got no answer at all."""
    asked: dict[str, int] = {"lead": 0, "mid": 0, "leaf": 0}

    def runaway(messages: list[Message], request: ModelRequest) -> Reply:
        asked["leaf"] += 1
        return Reply(text="still looking", calls=((f"t{len(messages)}", "tick", {}),))

    def delegating(who: str, below: str) -> FunctionModel:
        def fn(messages: list[Message], request: ModelRequest) -> Reply | str:
            asked[who] += 1
            results = [m.text for m in messages if isinstance(m, ToolMessage)]
            if results:
                return f"{who} read: {results[-1][:60]}"
            return Reply(calls=((f"{who}-1", below, {"task": "look it up"}),))

        return FunctionModel(fn)

    leaf = Agent(FunctionModel(runaway), tools=[tick]).as_tool("leaf", "Looks things up.")
    mid = Agent(delegating("mid", "leaf"), tools=[leaf]).as_tool("mid", "Has things looked up.")
    state = RunState()
    result = run_sync(Agent(delegating("lead", "mid"), tools=[mid], max_turns=10), "go", state=state)
    assert result.status == "completed", result.reason
    assert result.output == "lead read: mid read: The sub-agent leaf stopped without finishing (max_"
    assert asked == {"lead": 2, "mid": 2, "leaf": 6}  # the whole tree: the lead's 10 turns
    assert state.turns + state.delegated_turns == 10
    assert children(state)["lead-1"]["status"] == "completed"
