"""A parent run whose sub-agent is killed with SIGKILL at a chosen point; used by test_subagent_crash.py.

usage: subagent_crash_child.py HOME LOG RUN_ID KILL [approve]

KILL is one of
  none               run to the end (or to the next stop)
  EVENT:N            right after the Nth event of that type reached the parent's trace (the
                     child's events pass through the parent's stream, but behind the child: use
                     the points below to stop the child at a precise step)
  child_reply:N      right after the child's Nth reply was saved (in its own run, before the
                     parent's record of it), before any call it asks for starts
  child_result:CALL  right after the result of the child's call CALL was saved
  child_completed    right after the child's final state (status completed) was saved, before
                     the child's answer is kept
  kept               right after the child's answer was kept in the parent, before the parent
                     records it as the call's result
  parent_result      right after the parent recorded the child's answer as the call's result
  mid:CALL_ID        inside the child's tool call CALL_ID, after it logged "start"
  model:WHO:T        inside WHO's (parent | child) model request for turn T (a request in flight)

The parent calls one sub-agent (``helper``); the child writes two notes (a side effect, not
idempotent), reads them back, and answers; the parent answers with the child's answer.
Every model call appends "model WHO T" to LOG and every tool execution "start CALL" / "end CALL",
fsynced, so the test can count them across processes. Usage is fixed per call (see ``usage``), so
the test can price every logged call itself. With TETHER_TEST_CHILD_APPROVAL=1 the child's
write_note needs a person's approval; ``approve`` approves the parent's waiting question.
Prints the parent's RunResult as JSON.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
from pathlib import Path
from typing import Any

from tether import Agent, RunState, RunStore, approve, run_stream, tool
from tether.harness.subagent import children, parent_of
from tether.messages import AssistantMessage, Message, TextPart, ToolCallPart, ToolMessage
from tether.providers.base import ModelRequest
from tether.testing import FunctionModel
from tether.tracing import JsonlTracer
from tether.usage import Price, Usage

home, log_path, run_id, kill = sys.argv[1:5]
decide = sys.argv[5] if len(sys.argv) > 5 else ""
guarded = os.environ.get("TETHER_TEST_CHILD_APPROVAL") == "1"

PARENT_PRICE = Price(input=2.0, output=12.0)
CHILD_PRICE = Price(input=1.0, output=4.0)
NOTES = Path(home) / "notes.txt"


def usage(who: str, t: int) -> Usage:
    """What each model call reports (the test prices the logged calls with the same rule)."""
    if who == "parent":
        return Usage(prompt_tokens=1000 + 100 * t, completion_tokens=50 + t)
    return Usage(prompt_tokens=400 + 10 * t, completion_tokens=30 + t)


def log(line: str) -> None:
    fd = os.open(log_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    os.write(fd, (line + "\n").encode())
    os.fsync(fd)
    os.close(fd)


def die() -> None:
    os.kill(os.getpid(), signal.SIGKILL)


def reply(
    who: str, t: int, text: str = "", calls: tuple[tuple[str, str, dict[str, Any]], ...] = ()
) -> AssistantMessage:
    parts: list[TextPart | ToolCallPart] = [TextPart(text=text)] if text else []
    parts += [ToolCallPart(id=cid, name=name, arguments=json.dumps(args)) for cid, name, args in calls]
    return AssistantMessage(content=tuple(parts), usage=usage(who, t), finish_reason="tool_calls" if calls else "stop")


def turn_of(messages: list[Message]) -> int:
    return sum(1 for m in messages if isinstance(m, AssistantMessage))


def last_tool_text(messages: list[Message]) -> str:
    return next((m.text for m in reversed(messages) if isinstance(m, ToolMessage)), "")


def model_for(who: str, script: Any) -> FunctionModel:
    def fn(messages: list[Message], request: ModelRequest) -> AssistantMessage:
        t = turn_of(messages)
        log(f"model {who} {t}")
        if kill == f"model:{who}:{t}":
            die()
        out: AssistantMessage = script(t, messages)
        return out

    return FunctionModel(fn, model_id=who, price=PARENT_PRICE if who == "parent" else CHILD_PRICE)


def child_script(t: int, messages: list[Message]) -> AssistantMessage:
    if t == 0:
        return reply("child", t, calls=(("c1", "write_note", {"text": "one"}),))
    if t == 1:
        return reply("child", t, calls=(("c2", "write_note", {"text": "two"}),))
    if t == 2:
        return reply("child", t, calls=(("c3", "read_notes", {}),))
    return reply("child", t, text="the notes say: " + " / ".join(last_tool_text(messages).split()))


def parent_script(t: int, messages: list[Message]) -> AssistantMessage:
    if t == 0:
        return reply("parent", t, calls=(("p1", "helper", {"task": "write the notes one and two, then read them"}),))
    return reply("parent", t, text="helper reports: " + last_tool_text(messages))


@tool(needs_approval=guarded)
def write_note(ctx: Any, text: str) -> str:
    """Append a line to the notes (a side effect: not safe to repeat)."""
    log(f"start {ctx.call_id}")
    if kill == f"mid:{ctx.call_id}":
        die()
    with NOTES.open("a") as f:
        f.write(text + "\n")
    log(f"end {ctx.call_id}")
    return f"noted {text}"


@tool(read_only=True)
def read_notes(ctx: Any) -> str:
    """Read the notes back."""
    log(f"start {ctx.call_id}")
    if kill == f"mid:{ctx.call_id}":
        die()
    out = NOTES.read_text() if NOTES.exists() else ""
    log(f"end {ctx.call_id}")
    return out


class KillingTracer(JsonlTracer):
    seen: dict[str, int] = {}

    def write(self, event: Any) -> None:
        super().write(event)
        self.seen[event.type] = self.seen.get(event.type, 0) + 1
        if kill == f"{event.type}:{self.seen[event.type]}":
            die()


def reached(point: str, state: RunState) -> bool:
    """Whether ``state``, as just saved, is at the kill point ``point``: the parent's (its record
    of the child), or the child's own (saved as a run of its own, before the parent's record of it)."""
    if parent_of(state)[1] == "p1":
        saved: Any = state.model_dump(mode="json")
    else:
        saved = children(state).get("p1")
        answered = any(isinstance(m, ToolMessage) and m.call_id == "p1" for m in state.messages)
        if point == "parent_result":
            return answered
        if point == "kept":
            return isinstance(saved, dict) and bool(saved.get("done")) and not answered
    if not isinstance(saved, dict) or saved.get("done") or "messages" not in saved:
        return False
    messages = saved["messages"]
    last = messages[-1] if messages else {}
    kind, _, arg = point.partition(":")
    if kind == "child_completed":
        return bool(saved["status"] == "completed")
    if kind == "child_reply":
        replies = sum(1 for m in messages if m["role"] == "assistant")
        return (
            last.get("role") == "assistant"
            and replies == int(arg)
            and not saved["intents"]
            and saved["status"] == "running"
        )
    if kind == "child_result":
        return last.get("role") == "tool" and last.get("call_id") == arg
    return False


class KillingStore(RunStore):
    def save(self, state: RunState, *, rewrite: bool = False, durable: bool = True) -> None:
        super().save(state, rewrite=rewrite, durable=durable)
        if reached(kill, state):
            die()


async def main() -> None:
    store = KillingStore(Path(home) / "runs")
    if store.exists(run_id):
        state, prompt = store.load(run_id), None
        if decide == "approve":
            approve(state)
    else:
        state, prompt = RunState(run_id=run_id), "Have the helper write the notes."
    child = Agent(model_for("child", child_script), tools=[write_note, read_notes])
    parent = Agent(model_for("parent", parent_script), tools=[child.as_tool("helper", "Writes and reads notes.")])
    async for event in run_stream(
        parent, prompt, state=state, store=store, tracer=KillingTracer(Path(home) / "traces")
    ):
        if event.type == "done":
            print(event.result.model_dump_json())


asyncio.run(main())
