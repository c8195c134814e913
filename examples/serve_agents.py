"""Agents for `tether serve --agent examples/serve_agents.py` (on the scripted model: no key).

Put a real model in place of "scripted/..." (openai/gpt-4.1-mini, anthropic/claude-sonnet-4-5)
and the same server serves it.
"""

from pathlib import Path

from tether import Agent
from tether.server.widgets import Configurator
from tether.tools.files import FILE_TOOLS

WORKSPACE = Path(__file__).parent / "workspace"

# The reference's configurator: each series with its specification list (a unit makes a number).
CATALOGUE = {
    "LB": [
        {"code": "voltage", "name": "Supply voltage", "options": ["24 V DC", "120 V AC", "230 V AC"]},
        {"code": "housing", "name": "Housing", "options": ["Aluminium", "Stainless steel"]},
        {"code": "power", "name": "Heating power", "unit": "W", "min": 50, "max": 400, "default": 100},
    ],
    "LC": [
        {"code": "voltage", "name": "Supply voltage", "options": ["120 V AC", "230 V AC"]},
        {"code": "mounting", "name": "Mounting", "options": ["DIN rail", "Screw"]},
    ],
}

agents = {
    "files": Agent(
        "scripted/plan",
        description="Answers questions about a folder of files",
        instructions="Use the tools to look at the files before you answer.",
        tools=FILE_TOOLS,
        cwd=WORKSPACE,
        max_turns=20,
    ),
    # scripted/destructive lists the folder, then asks to delete access.log: an approval to try.
    "cleanup": Agent(
        "scripted/destructive",
        description="Frees disk space in a folder, deleting only what you approve",
        instructions="Free disk space; a deletion waits for the user's approval.",
        tools=FILE_TOOLS,
        cwd=WORKSPACE,
        max_turns=10,
    ),
    "configure": Agent(
        "scripted/configure",
        description="Configures a cabinet heater with you",
        instructions="Help the user configure a product with the configure tool.",
        tools=[Configurator(CATALOGUE).tool()],
        max_turns=10,
    ),
}
