"""Agents for a deployment of many servers and workers: the README's walkthrough, the
multi-process test (tests/dispatch) and bench/scale.py serve this module.

``ship`` asks a scripted model (it answers after a fixed delay, like a real one that is waiting
on the network), calls ``ship_order`` once, then answers. ``ship_order`` is slow and has a side
effect written to a ledger; it is idempotent: it takes the call's idempotency key, so a worker
that dies mid-call and a worker that picks the run up after it ship once, not twice.
``ship_approved`` is ``ship`` with the call stopped for a person's approval. ``answer`` only
asks the model, once.

Settings from the environment: TETHER_DEMO_MODEL_DELAY_S (default 0.2), TETHER_DEMO_TOOL_S
(0.5), TETHER_DEMO_LEDGER (a directory; default ./ledger).
"""

from __future__ import annotations

import asyncio
import fcntl
import os
import time
from pathlib import Path
from typing import Any

from tether import Agent, tool
from tether.messages import ToolMessage, UserMessage
from tether.testing import FunctionModel, Reply, call
from tether.tools.base import ToolContext

DELAY_S = float(os.environ.get("TETHER_DEMO_MODEL_DELAY_S", "0.2"))
TOOL_S = float(os.environ.get("TETHER_DEMO_TOOL_S", "0.5"))
LEDGER = Path(os.environ.get("TETHER_DEMO_LEDGER", "ledger"))


def _append_once(path: Path, line: str) -> bool:
    """Append ``line`` unless the file has it already; whether it was appended."""
    LEDGER.mkdir(parents=True, exist_ok=True)
    with open(path, "a+", encoding="utf-8") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        f.seek(0)
        if line in f.read().splitlines():
            return False
        f.write(line + "\n")
        f.flush()
        os.fsync(f.fileno())
        return True


def _ship_order(order: str, ctx: ToolContext) -> str:
    """Ship an order. Slow; shipping the same call again ships nothing more."""
    key = ctx.idempotency_key or f"{ctx.run_id}:{ctx.call_id}"
    LEDGER.mkdir(parents=True, exist_ok=True)
    with open(LEDGER / "calls.log", "a", encoding="utf-8") as f:  # every start of the tool, repeats included
        f.write(key + "\n")
    time.sleep(TOOL_S)
    shipped = _append_once(LEDGER / "shipped.log", key)  # the side effect, once per key
    return f"shipped {order}" if shipped else f"{order} was shipped already"


ship_order = tool(_ship_order, name="ship_order", idempotent=True)
ship_order_approved = tool(_ship_order, name="ship_order", idempotent=True, needs_approval=True)


def _last_user_text(messages: list[Any]) -> str:
    for m in reversed(messages):
        if isinstance(m, UserMessage):
            return "".join(getattr(p, "text", "") for p in m.content)
    return ""


async def _ship(messages: list[Any], request: Any) -> Any:
    await asyncio.sleep(DELAY_S)
    if isinstance(messages[-1], ToolMessage):
        return f"Done: {messages[-1].text}."
    return call("call_ship", "ship_order", {"order": _last_user_text(messages)[:80]})


async def _answer(messages: list[Any], request: Any) -> Any:
    await asyncio.sleep(DELAY_S)
    return Reply(text=f"You said: {_last_user_text(messages)[:80]}")


agents = {
    "ship": Agent(
        FunctionModel(_ship, model_id="ship"),
        tools=[ship_order],
        max_turns=6,
        description="ships an order (a slow tool with a side effect)",
    ),
    "ship_approved": Agent(
        FunctionModel(_ship, model_id="ship"),
        tools=[ship_order_approved],
        max_turns=6,
        description="ships an order once a person approves",
    ),
    "answer": Agent(FunctionModel(_answer, model_id="answer"), max_turns=3, description="answers once"),
}
