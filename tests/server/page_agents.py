"""The agents the page's browser tests serve (scripted models; the fixture copies the workspace and
names it in TETHER_TEST_WORKSPACE before it loads this file)."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path
from typing import Any

from tether import Agent, ToolContext, ToolResult, tool
from tether.messages import Message, ToolMessage
from tether.providers.scripted import Reply, call
from tether.server import widgets
from tether.testing import FunctionModel
from tether.tools.files import FILE_TOOLS

WORKSPACE = os.environ.get("TETHER_TEST_WORKSPACE", ".")
SERIES = ("LB", "LC")


@tool(read_only=True)
async def scan_archive(ctx: ToolContext) -> str:
    """Scan the archive for problems. Slow (about 2 s): reports progress while it works."""
    for step in range(1, 5):
        await ctx.signal.sleep(0.5)
        ctx.progress(f"scanned {step * 300} of 1200 files")
    return "scanned 1200 files: no problems found"


@tool(idempotent=True)
def configure(series: str = "") -> ToolResult:
    """Show the user the configurator: without a series, buttons to pick one; with one, its form."""
    if not series:
        return widgets.buttons([f"I want to configure the {s} series." for s in SERIES], title="Which series?")
    return widgets.form(
        [
            widgets.select("voltage", "Supply voltage", ["24 V DC", "120 V AC", "230 V AC"]),
            widgets.number("power", "Heating power (W)", default=100, min=50, max=400),
            widgets.text("notes", "Notes"),
            widgets.checkbox("express", "Express delivery"),
        ],
        title=f"Configure the {series} series",
        submit="Use these options",
    )


async def _held(messages: list[Message], request: Any) -> str | Reply:
    """The configurator's buttons, then an answer held until the test makes the file ``release``
    in the workspace: the buttons are on the page while their run still answers."""
    if isinstance(messages[-1], ToolMessage):
        for _ in range(2400):  # a hang guard only (60 s): the test releases it
            if (Path(WORKSPACE) / "release").exists():
                break
            await asyncio.sleep(0.025)
        return "Pick a series above."
    said = "".join(getattr(part, "text", "") for part in getattr(messages[-1], "content", ()))
    if "series" in said:
        return f"You said: {said}"
    return call("w1", "configure")


_SLOW_TOOLS = [t for t in FILE_TOOLS if t.name != "scan_archive"] + [scan_archive]

agents = {
    "plan": Agent(
        "scripted/plan",
        tools=FILE_TOOLS,
        cwd=WORKSPACE,
        max_turns=10,
        description="Answers questions about a folder of files",
    ),
    "destructive": Agent(
        "scripted/destructive",
        tools=FILE_TOOLS,
        cwd=WORKSPACE,
        max_turns=10,
        description="Deletes a file, with your approval",
    ),
    "slow": Agent("scripted/slow", tools=_SLOW_TOOLS, cwd=WORKSPACE, max_turns=10, description="Runs a slow scan"),
    "configure": Agent(
        "scripted/configure", tools=[configure], max_turns=10, description="Configures a heater with you"
    ),
    "held": Agent(FunctionModel(_held), tools=[configure], max_turns=4, description="Holds its answer"),
    "xss": Agent("scripted/xss", max_turns=3, description="Answers with hostile markup"),
}
