"""Which agents a server offers: :func:`tether.assembly.served_agents` (a Python file or module,
else the ``[agents.NAME]`` tables of config.toml, else one agent like ``tether run``'s). Kept here
under its older names for code that imports them from the server."""

from __future__ import annotations

from tether.assembly import AGENT_NAME, describe
from tether.assembly import served_agents as load_agents
from tether.assembly.agents import checked_agents

__all__ = ["AGENT_NAME", "checked_agents", "describe", "load_agents"]
