"""An agent whose MCP server asks the person questions during its tool calls
(tests/connectors/asking_server.py): its model calls ``diner__book_table`` or ``diner__book_trip``
as the message says, then repeats what came back."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

from tether import Agent
from tether.connectors import McpConnector
from tether.messages import ToolMessage, text_of
from tether.providers.scripted import call
from tether.testing import FunctionModel

SERVER = Path(__file__).resolve().parents[1] / "connectors" / "asking_server.py"


def reply(messages: list[Any], request: Any) -> Any:
    answers = [m for m in messages if isinstance(m, ToolMessage)]
    if answers:
        return f"the diner said: {answers[-1].text}"
    asked = text_of(messages[-1:])
    if "trip" in asked:
        return call("c1", "diner__book_trip", {"city": "Lisbon"})
    if "summary" in asked:
        return call("c1", "diner__summarise", {"text": "the menu changes on Fridays"})
    return call("c1", "diner__book_table", {"day": "Friday"})


diner = McpConnector(
    "diner",
    {
        "command": sys.executable,
        "args": [str(SERVER)],
        "env": {"BOOKINGS": os.environ["BOOKINGS"]},
        "approval": "never",
        "sampling_model": "scripted/hello",
    },
)
agents = {"diner": Agent(FunctionModel(reply), extensions=[diner], max_turns=4)}
