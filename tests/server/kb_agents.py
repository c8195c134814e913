"""An agent with a knowledge base, for the trace tests: its model searches once, then answers."""

from __future__ import annotations

from typing import Any

from tether import Agent
from tether.knowledge import HashingEmbedder, KnowledgeBase, KnowledgeTools
from tether.messages import ToolMessage
from tether.providers.scripted import call
from tether.testing import FunctionModel

kb = KnowledgeBase.open(embedder=HashingEmbedder(), name="parts")
kb.add_text(
    "valves.md",
    "# Valves\n\nThe FVAM-2050-B valve is sealed with the SK-77 seal kit.\n\n"
    "## Mounting\n\nMount the FVAM-2050-B upright, on a clean flange.\n",
)
kb.add_text("pumps.md", "# Pumps\n\nThe P-10 pump needs no seal kit; it runs dry for at most a minute.\n")


def reply(messages: list[Any], request: Any) -> Any:
    if not any(isinstance(m, ToolMessage) for m in messages):
        return call("c1", "search_kb", {"query": "which seal kit does the FVAM-2050-B use"})
    return "The FVAM-2050-B uses the SK-77 seal kit (valves.md)."


agents = {"kb": Agent(FunctionModel(reply), extensions=[KnowledgeTools(kb)], max_turns=4)}
