"""Which agents a server offers: a Python file or module (``--agent``, or ``agent`` under
``[serve]``) that defines ``agents`` (a dict of name to Agent) or ``agent``; else the
``[serve.agents.NAME]`` tables of config.toml; else one agent, ``default``, like ``tether run``'s."""

from __future__ import annotations

import importlib
import importlib.util
import re
import sys
from pathlib import Path
from typing import Any

from tether.config import Settings, resolve_model
from tether.errors import ConfigError
from tether.harness.agent import Agent

__all__ = ["AGENT_NAME", "describe", "load_agents"]

AGENT_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")
DEFAULT_MAX_TURNS = 50


def load_agents(
    settings: Settings, spec: str | None = None, *, model: str | None = None, cwd: str | None = None
) -> dict[str, Agent]:
    """The agents to serve, checked: names are simple, values are Agents, there is at least one."""
    spec = spec or settings.serve.get("agent")
    if spec:
        agents = _from_python(spec)
    elif settings.serve.get("agents"):
        agents = {name: _from_table(settings, name, table) for name, table in settings.serve["agents"].items()}
    else:
        agents = {"default": _default(settings, model, cwd)}
    for name, agent in agents.items():
        if not isinstance(name, str) or not AGENT_NAME.fullmatch(name):
            raise ConfigError(
                f"agent name {name!r} cannot be served: use letters, digits, '.', '_' or '-' "
                "(at most 64, starting with a letter or digit)"
            )
        if not isinstance(agent, Agent):
            raise ConfigError(f"agent {name!r} is a {type(agent).__name__}, not a tether.Agent")
    if not agents:
        raise ConfigError("no agent to serve: define `agent` or `agents` in the module, or [serve.agents.NAME]")
    return agents


def describe(name: str, agent: Agent) -> dict[str, Any]:
    model = agent.model if isinstance(agent.model, str) else getattr(agent.model, "name", "custom")
    return {"name": name, "model": model, "description": agent.description}


def _from_python(spec: str) -> dict[str, Agent]:
    path = Path(spec).expanduser()
    try:
        if spec.endswith(".py") or path.is_file():
            if not path.is_file():
                raise ConfigError(f"--agent {spec}: no such file")
            name = f"tether_served_{abs(hash(str(path.resolve())))}"
            loader = importlib.util.spec_from_file_location(name, path)
            if loader is None or loader.loader is None:
                raise ConfigError(f"--agent {spec}: cannot load it as Python")
            module = importlib.util.module_from_spec(loader)
            sys.modules[name] = module
            loader.loader.exec_module(module)
        else:
            module = importlib.import_module(spec)
    except ConfigError:
        raise
    except Exception as exc:
        raise ConfigError(f"--agent {spec}: importing it failed ({type(exc).__name__}: {exc})") from exc
    agents = getattr(module, "agents", None)
    if agents is None:
        agent = getattr(module, "agent", None)
        if agent is None:
            raise ConfigError(f"--agent {spec}: define `agent = Agent(...)` or `agents = {{'name': Agent(...)}}` in it")
        agents = {"default": agent}
    if not isinstance(agents, dict):
        raise ConfigError(f"--agent {spec}: `agents` must be a dict of name to Agent, not {type(agents).__name__}")
    return dict(agents)


def _tools(settings: Settings, names: list[str] | None) -> list[Any]:
    from tether.tools.builtin import builtin_tools, tool_settings

    tools = builtin_tools(tool_settings(settings.tools))
    if names is None:
        return tools
    known = {t.name: t for t in tools}
    unknown = [n for n in names if n not in known]
    if unknown:
        raise ConfigError(f"[serve.agents] names unknown tools {', '.join(unknown)}; known: {', '.join(known)}")
    return [known[n] for n in names]


def _from_table(settings: Settings, name: str, t: dict[str, Any]) -> Agent:
    from tether.cli.run import DEFAULT_INSTRUCTIONS
    from tether.providers.registry import canonical_model

    cwd = str(Path(t.get("cwd") or ".").expanduser().resolve())
    if not Path(cwd).is_dir():
        raise ConfigError(f"[serve.agents.{name}] cwd = {t.get('cwd')!r} is not a directory")
    extensions: list[Any] = []
    if t.get("kb"):
        from tether.cli.kb import knowledge_extensions
        from tether.stores import kb_exists

        for kb in t["kb"]:
            if not kb_exists(settings, kb):
                raise ConfigError(
                    f"[serve.agents.{name}] kb: there is no knowledge base {kb!r}; create it with "
                    f"tether kb add --name {kb} PATH"
                )
        extensions = knowledge_extensions(settings, list(t["kb"]))
    return Agent(
        description=t.get("description") or "",
        model=canonical_model(t.get("model") or resolve_model(None, settings)),
        instructions=t.get("instructions") or DEFAULT_INSTRUCTIONS,
        tools=_tools(settings, t.get("tools")),
        extensions=extensions,
        cwd=cwd,
        max_turns=t.get("max_turns") or DEFAULT_MAX_TURNS,
        max_budget_usd=t.get("max_budget_usd"),
        fallback_models=[canonical_model(m) for m in t.get("fallback_models") or ()],
        settings=settings,
    )


def _default(settings: Settings, model: str | None, cwd: str | None) -> Agent:
    return _from_table(settings, "default", {"model": model, "cwd": cwd})
