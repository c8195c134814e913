"""Assembly: the one place that turns configuration into agents, stores and telemetry.

Every front door asks here: ``tether run`` and ``tether chat`` (:func:`plan` then
:func:`build_agent`), ``tether serve``, ``tether mcp serve`` and ``tether worker``
(:func:`served_agents`). An agent defined once in ``config.toml`` as ``[agents.NAME]`` is therefore
the same agent at every door: the same tools, the same system prompt, the same limits. A command's
flags are :class:`Overrides` on top of the definition.

It sits above the feature packages (memory, knowledge, skills, connectors, guardrails, tools) and
below the doors (cli, server, dispatch's worker, connectors.serve). See docs/architecture.md.
"""

from tether.assembly.agents import (
    AGENT_NAME,
    DEFAULT_INSTRUCTIONS,
    DEFAULT_MAX_TURNS,
    Overrides,
    Recipe,
    build_agent,
    definition,
    describe,
    plan,
    served_agents,
)
from tether.assembly.parts import (
    check_kbs,
    check_mcp,
    default_embedder,
    kb_name,
    knowledge_extensions,
    load_output_schema,
    mcp_extensions,
    memory_scope,
    open_kb,
    skills_extension,
)
from tether.assembly.stores import session_store

__all__ = [
    "AGENT_NAME",
    "DEFAULT_INSTRUCTIONS",
    "DEFAULT_MAX_TURNS",
    "Overrides",
    "Recipe",
    "build_agent",
    "check_kbs",
    "check_mcp",
    "default_embedder",
    "definition",
    "describe",
    "kb_name",
    "knowledge_extensions",
    "load_output_schema",
    "mcp_extensions",
    "memory_scope",
    "open_kb",
    "plan",
    "served_agents",
    "session_store",
    "skills_extension",
]
