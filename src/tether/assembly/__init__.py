"""Assembly: the one place that turns configuration into agents, stores and telemetry.

Every front door asks here: ``tether run`` and ``tether chat`` (:func:`plan` then
:func:`build_agent`), ``tether serve``, ``tether mcp serve`` and ``tether worker``
(:func:`served_agents`). An agent defined once in ``config.toml`` as ``[agents.NAME]`` is therefore
the same agent at every door: the same tools, the same system prompt, the same limits. A command's
flags are :class:`Overrides` on top of the definition.

It sits above the feature packages (memory, knowledge, skills, connectors, guardrails, tools) and
below the doors (cli, server, dispatch's worker, connectors.serve). See docs/architecture.md.
"""

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
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
        served_recipe,
        served_recipes,
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

# Each name is imported from its module when first used, so a command that needs only a knowledge
# base (``tether kb search``) does not import the agent assembly and what it brings.
_WHERE = {
    "AGENT_NAME": "tether.assembly.agents",
    "DEFAULT_INSTRUCTIONS": "tether.assembly.agents",
    "DEFAULT_MAX_TURNS": "tether.assembly.agents",
    "Overrides": "tether.assembly.agents",
    "Recipe": "tether.assembly.agents",
    "build_agent": "tether.assembly.agents",
    "definition": "tether.assembly.agents",
    "describe": "tether.assembly.agents",
    "plan": "tether.assembly.agents",
    "served_agents": "tether.assembly.agents",
    "served_recipe": "tether.assembly.agents",
    "served_recipes": "tether.assembly.agents",
    "check_kbs": "tether.assembly.parts",
    "check_mcp": "tether.assembly.parts",
    "default_embedder": "tether.assembly.parts",
    "kb_name": "tether.assembly.parts",
    "knowledge_extensions": "tether.assembly.parts",
    "load_output_schema": "tether.assembly.parts",
    "mcp_extensions": "tether.assembly.parts",
    "memory_scope": "tether.assembly.parts",
    "open_kb": "tether.assembly.parts",
    "skills_extension": "tether.assembly.parts",
    "session_store": "tether.assembly.stores",
}


def __getattr__(name: str) -> Any:
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


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
    "served_recipe",
    "served_recipes",
    "session_store",
    "skills_extension",
]
