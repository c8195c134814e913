"""A run that kills itself with SIGKILL at a chosen point; used by test_crash.py.

usage: crash_child.py HOME WORKSPACE LOG RUN_ID KILL [approve | reject:REASON]
(KILL: none | EVENT:N | mid:CALL_ID | model:N, inside the request for turn N | untraced:N, before
turn N's trace line is written)
Every tool execution appends "start CALL" and "end CALL" to LOG, fsynced, so the test can count
executions across processes.
"""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from pathlib import Path
from typing import Any

from tether import Agent, RunState, RunStore, run_stream, tool
from tether.harness.state import approve, reject
from tether.providers.scripted import Reply, ScriptedModel, call
from tether.tracing import JsonlTracer

home, workspace, log_path, run_id, kill = sys.argv[1:6]
decision = sys.argv[6] if len(sys.argv) > 6 else ""  # approve | reject:REASON
approve_pending = decision == "approve"
# With TETHER_TEST_GUARDED_WRITE=1, write_note needs a person's approval.
guarded_write = os.environ.get("TETHER_TEST_GUARDED_WRITE") == "1"


def log(line: str) -> None:
    fd = os.open(log_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    os.write(fd, (line + "\n").encode())
    os.fsync(fd)
    os.close(fd)


def die() -> None:
    os.kill(os.getpid(), signal.SIGKILL)


def scenario(t: int, tools: str) -> Reply:
    if kill == f"model:{t + 1}":  # while the request for turn t+1 is in flight
        die()
    steps = [
        call("c1", "list_files"),
        call("c2", "read_file", {"path": "errors.log"}),
        call("c3", "write_note", {"text": "worker 7 timed out"}),
    ]
    return steps[t] if t < len(steps) else Reply(text="errors.log mentions a timeout; noted.")


def instrumented(name: str, body: Any, read_only: bool) -> Any:
    @tool(name=name, read_only=read_only, needs_approval=guarded_write and not read_only)
    def run_tool(ctx: Any, path: str = "", text: str = "") -> str:
        log(f"start {ctx.call_id}")
        if kill == f"mid:{ctx.call_id}":
            die()
        out = body(path, text)
        log(f"end {ctx.call_id}")
        return out

    return run_tool


tools = [
    instrumented("list_files", lambda p, t: "\n".join(sorted(os.listdir(workspace))), True),
    instrumented("read_file", lambda p, t: Path(workspace, p).read_text(), True),
    instrumented("write_note", lambda p, t: Path(workspace, "notes.txt").open("a").write(t + "\n") and "noted", False),
]


class KillingTracer(JsonlTracer):
    seen: dict[str, int] = {}

    def write(self, event: Any) -> None:
        if kill == f"untraced:{getattr(event, 'turn', None)}" and event.type == "turn":
            die()  # the reply is saved; its trace line is not written
        super().write(event)
        self.seen[event.type] = self.seen.get(event.type, 0) + 1
        if kill == f"{event.type}:{self.seen[event.type]}":
            die()


async def main() -> None:
    store = RunStore(Path(home) / "runs")
    if store.exists(run_id):
        state, prompt = store.load(run_id), None
        if approve_pending:
            approve(state)
        elif decision.startswith("reject:"):
            reject(state, reason=decision.removeprefix("reject:"))
    else:
        state, prompt = RunState(run_id=run_id), "Which file mentions a timeout?"
    agent = Agent(ScriptedModel(scenario), tools=tools, cwd=workspace)
    async for event in run_stream(agent, prompt, state=state, store=store, tracer=KillingTracer(Path(home) / "traces")):
        if event.type == "done":
            print(event.result.model_dump_json())


asyncio.run(main())
