"""A run that compacts, and kills itself with SIGKILL at a chosen point of a compaction; used by
test_attack_resilience_round3.py.

usage: compaction_crash_child.py HOME LOG RUN_ID KILL
(KILL: none | summary:N, inside the Nth summary call | compaction:N, right after the Nth
compaction was saved). Every model request and tool run appends a line to LOG, fsynced, so the
test can count them across processes. Prints the RunResult as JSON.
"""

from __future__ import annotations

import asyncio
import os
import re
import signal
import sys
from pathlib import Path
from typing import Any

from tether import Agent, RunState, RunStore, run_stream, tool
from tether.messages import text_of
from tether.providers.scripted import Reply
from tether.sessions import JsonlSessionStore
from tether.testing import FunctionModel
from tether.tracing import JsonlTracer

home, log_path, run_id, kill = Path(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4]
PAGES = 10
seen: dict[str, int] = {}


def log(line: str) -> None:
    fd = os.open(log_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    os.write(fd, (line + "\n").encode())
    os.fsync(fd)
    os.close(fd)


def reached(point: str) -> None:
    seen[point] = seen.get(point, 0) + 1
    if kill == f"{point}:{seen[point]}":
        os.kill(os.getpid(), signal.SIGKILL)


def pages_read(text: str) -> list[int]:
    return sorted({int(n) for n in re.findall(r"page (\d+):", text)})


def model(messages: list[Any], request: Any) -> Any:
    text = text_of(messages)
    if "<transcript>" in text_of(messages[:1]):
        log("summary")
        reached("summary")
        return "Read so far: " + " ".join(f"page {n}: read." for n in pages_read(text))
    read = pages_read(text)
    nxt = (max(read) + 1) if read else 0
    log(f"ask {nxt}")
    if nxt < PAGES:
        return Reply(calls=((f"c{nxt}", "read_page", {"n": nxt}),))
    return f"read {len(read)} pages"


@tool(read_only=True)
def read_page(n: int) -> str:
    """Read page n of the manual."""
    log(f"run {n}")
    return f"page {n}: " + "lorem ipsum dolor sit amet " * 40


class KillingTracer(JsonlTracer):
    def write(self, event: Any) -> None:
        super().write(event)
        reached(event.type)


async def main() -> None:
    store = RunStore(home / "runs", fsync=False)
    sessions = JsonlSessionStore(home / "sessions", fsync=False)
    try:
        state = store.load(run_id)
        prompt = None
    except Exception:
        state, prompt = RunState(run_id=run_id, session_id="s1"), "read the manual"
    agent = Agent(FunctionModel(model), tools=[read_page], context_window=2400, max_turns=40)
    result = None
    async for event in run_stream(
        agent, prompt, state=state, store=store, session=sessions, tracer=KillingTracer(home / "traces")
    ):
        if event.type == "done":
            result = event.result
    assert result is not None
    print(result.model_dump_json())


asyncio.run(main())
