"""A tree three levels deep (lead → mid → leaf) killed with SIGKILL at a chosen save; used by
test_attack_subagents_s15.py, which also builds the same tree in its own process (:func:`tree`).

usage: subagent_s15_child.py HOME RUN_ID KILL [approve]

KILL is ``none`` or ``save:WHO:N``: right after the Nth save, in this process, of WHO's own state
(``lead``, ``mid`` or ``leaf``), before the saves of the runs above it. The leaf writes a note
(a person approves it first), then another, reads them back and answers; each level answers
with what the level below said. Every model call appends "model WHO T" to HOME/log and every
write "write TEXT", fsynced, so the test counts them across processes. Prints the lead's
RunResult as JSON.
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
from tether.harness.subagent import depth_of
from tether.messages import AssistantMessage, Message, TextPart, ToolCallPart, ToolMessage
from tether.testing import FunctionModel
from tether.usage import Price, Usage

PRICES = {
    "lead": Price(input=2.0, output=12.0),
    "mid": Price(input=1.5, output=6.0),
    "leaf": Price(input=1.0, output=4.0),
}
LEVELS = ("lead", "mid", "leaf")


def usage(who: str, t: int) -> Usage:
    """What each model call reports (the test prices the logged calls with the same rule)."""
    return Usage(prompt_tokens={"lead": 1000, "mid": 700, "leaf": 400}[who] + 10 * t, completion_tokens=30 + t)


def log(home: Path, line: str) -> None:
    fd = os.open(home / "log", os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    os.write(fd, (line + "\n").encode())
    os.fsync(fd)
    os.close(fd)


def reply(
    who: str, t: int, text: str = "", calls: tuple[tuple[str, str, dict[str, Any]], ...] = ()
) -> AssistantMessage:
    parts: list[TextPart | ToolCallPart] = [TextPart(text=text)] if text else []
    parts += [ToolCallPart(id=cid, name=name, arguments=json.dumps(args)) for cid, name, args in calls]
    return AssistantMessage(content=tuple(parts), usage=usage(who, t), finish_reason="tool_calls" if calls else "stop")


def last_tool_text(messages: list[Message]) -> str:
    return next((m.text for m in reversed(messages) if isinstance(m, ToolMessage)), "")


def script(who: str, t: int, messages: list[Message]) -> AssistantMessage:
    if who == "leaf":
        steps = [
            ("w1", "write_first", {"text": "one"}),
            ("w2", "write_note", {"text": "two"}),
            ("r1", "read_notes", {}),
        ]
        if t < len(steps):
            return reply(who, t, calls=(steps[t],))
        return reply(who, t, text="notes: " + " / ".join(last_tool_text(messages).split()))
    below = {"lead": "mid", "mid": "leaf"}[who]
    if t == 0:
        return reply(who, t, calls=((f"{who}-1", below, {"task": "have the notes one and two written"}),))
    return reply(who, t, text=f"{below} says " + last_tool_text(messages))


def tree(home: Path) -> Agent:
    """The lead agent, its sub-agent ``mid`` and that one's sub-agent ``leaf``."""

    def model(who: str) -> FunctionModel:
        def fn(messages: list[Message], request: Any) -> AssistantMessage:
            t = sum(1 for m in messages if isinstance(m, AssistantMessage))
            log(home, f"model {who} {t}")
            return script(who, t, messages)

        return FunctionModel(fn, model_id=who, price=PRICES[who])

    def write(text: str) -> str:
        log(home, f"write {text}")
        with (home / "notes.txt").open("a") as f:
            f.write(text + "\n")
        return f"noted {text}"

    @tool(needs_approval=True)
    def write_first(text: str) -> str:
        """Start the notes with a line (not safe to repeat). A person approves it first."""
        return write(text)

    @tool
    def write_note(text: str) -> str:
        """Append a line to the notes (not safe to repeat)."""
        return write(text)

    @tool(read_only=True)
    def read_notes() -> str:
        """Read the notes back."""
        return (home / "notes.txt").read_text()

    leaf = Agent(model("leaf"), tools=[write_first, write_note, read_notes])
    mid = Agent(model("mid"), tools=[leaf.as_tool("leaf", "Writes and reads notes.")])
    return Agent(model("lead"), tools=[mid.as_tool("mid", "Has notes written.")], max_budget_usd=1.0)


class KillingStore(RunStore):
    """Dies right after the Nth save of one level's own state."""

    def __init__(self, root: Path, kill: str) -> None:
        super().__init__(root)
        self.kill, self.saves = kill, dict.fromkeys(LEVELS, 0)

    def save(self, state: RunState, *, rewrite: bool = False, durable: bool = True) -> None:
        super().save(state, rewrite=rewrite, durable=durable)
        who = LEVELS[depth_of(state)]
        self.saves[who] += 1
        if self.kill == f"save:{who}:{self.saves[who]}":
            os.kill(os.getpid(), signal.SIGKILL)


async def main(home: Path, run_id: str, kill: str, decide: str) -> None:
    store = KillingStore(home / "runs", kill)
    state = store.load(run_id)
    if decide == "approve":
        approve(state)
    async for event in run_stream(tree(home), None, state=state, store=store):
        if event.type == "done":
            print(event.result.model_dump_json())


if __name__ == "__main__":
    asyncio.run(main(Path(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4] if len(sys.argv) > 4 else ""))
