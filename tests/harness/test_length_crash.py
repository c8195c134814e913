"""kill -9 around a continuation of a cut answer (issue 30): the cut reply is on disk before the
continuation is asked for, and the merged answer replaces it in one save, so a run killed at
either point resumes to the whole answer once, without asking for the cut reply again."""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tether import Agent, RunStore, run_sync
from tether.messages import AssistantMessage
from tether.providers.scripted import ESSAY

CHILD = """
import asyncio, os, signal, sys
from tether import Agent, RunState, RunStore, run_stream
root, kill_at = sys.argv[1], int(sys.argv[2])

async def main():
    state = RunState(run_id="run_cut")
    turns = 0
    async for event in run_stream(Agent("scripted/essay", max_tokens=250), "write", state=state, store=RunStore(root)):
        if event.type == "turn":
            turns += 1
            if turns == kill_at:
                os.kill(os.getpid(), signal.SIGKILL)

asyncio.run(main())
"""


@pytest.mark.parametrize("kill_at", [1, 2])
def test_a_run_killed_around_its_continuation_resumes_to_the_whole_answer_once(tmp_path: Path, kill_at: int) -> None:
    root = tmp_path / "runs"
    child = subprocess.run([sys.executable, "-c", CHILD, str(root), str(kill_at)], timeout=60, check=False)
    assert child.returncode == -signal.SIGKILL
    store = RunStore(root)
    saved = store.load("run_cut")
    [reply] = [m for m in saved.messages if isinstance(m, AssistantMessage)]
    # Killed after the cut reply: it is there, not yet continued. After the merge: the whole answer.
    assert (reply.continuations, reply.text == ESSAY) == ((None, False) if kill_at == 1 else (1, True))
    assert saved.call_in_flight is None
    result = run_sync(Agent("scripted/essay", max_tokens=250), state=saved, store=store)
    assert (result.status, result.output, result.turns) == ("completed", ESSAY, 2)  # no request made twice
    [again] = [m for m in store.load("run_cut").messages if isinstance(m, AssistantMessage)]
    assert (again.text, again.continuations) == (ESSAY, 1)
