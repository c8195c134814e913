"""The agents the API tests serve (scripted models; the workspace comes from the fixture)."""

from __future__ import annotations

import asyncio
import os
import threading
import time

from tether import Agent, tool
from tether.harness.extension import Extension
from tether.server.widgets import Configurator
from tether.tools.files import FILE_TOOLS

WORKSPACE = os.environ.get("TETHER_TEST_WORKSPACE", ".")
RELEASE = threading.Event()


@tool(read_only=True)
def scan_archive() -> str:
    """Scans the archive (slowly: it waits until the test lets it go, at most 20 s)."""
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline and not os.path.exists(os.path.join(WORKSPACE, "release")):
        time.sleep(0.02)
    return "scan complete: 3 archives, no errors"


class Gate(Extension):
    """Starts only once the test opens it (at most 20 s): until then the run was accepted and has
    not saved itself yet. Each start adds a line to ``gate-reached``."""

    name = "gate"

    async def start(self) -> None:
        with open(os.path.join(WORKSPACE, "gate-reached"), "a") as f:
            f.write("reached\n")
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and not os.path.exists(os.path.join(WORKSPACE, "open-gate")):
            await asyncio.sleep(0.02)


CATALOGUE = {
    "LB": [
        {"code": "voltage", "name": "Supply voltage", "options": ["24 V DC", "230 V AC"]},
        {"code": "power", "name": "Heating power", "unit": "W", "min": 50, "max": 400, "default": 100},
    ]
}

agents = {
    "plan": Agent("scripted/plan", tools=FILE_TOOLS, cwd=WORKSPACE, max_turns=10, description="reads files"),
    "destructive": Agent("scripted/destructive", tools=FILE_TOOLS, cwd=WORKSPACE, max_turns=10),
    "slow": Agent(
        "scripted/slow",
        tools=[t for t in FILE_TOOLS if t.name != "scan_archive"] + [scan_archive],
        cwd=WORKSPACE,
        max_turns=10,
    ),
    "configure": Agent("scripted/configure", tools=[Configurator(CATALOGUE).tool()], max_turns=10),
    "xss": Agent("scripted/xss", max_turns=3),
    "gated": Agent("scripted/plan", tools=FILE_TOOLS, cwd=WORKSPACE, max_turns=10, extensions=[Gate()]),
}
