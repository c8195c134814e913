"""Agents out of configuration: an ``[agents.NAME]`` definition, plus a command's overrides, is
resolved into a :class:`Recipe` (checked, JSON, recorded with the run so a resume builds the same
agent), and a recipe into an :class:`~tether.harness.agent.Agent`."""

from __future__ import annotations

import importlib
import importlib.util
import sys
from collections.abc import Iterable
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict

from tether.config import AGENT_NAME, AgentTable, Settings, expand_user, resolve_model
from tether.errors import ConfigError

if TYPE_CHECKING:
    from tether.config import GuardrailTable
    from tether.harness.agent import Agent

__all__ = [
    "AGENT_NAME",
    "DEFAULT_INSTRUCTIONS",
    "DEFAULT_MAX_TURNS",
    "Overrides",
    "Recipe",
    "build_agent",
    "definition",
    "describe",
    "plan",
    "served_agents",
]

DEFAULT_INSTRUCTIONS = (
    "You are a careful assistant working in a directory of files. Use the tools to look at the "
    "files before you answer, and say what you did."
)
DEFAULT_MAX_TURNS = 50


class Overrides(BaseModel):
    """What a command's flags change in a definition; None (or empty) leaves it as defined."""

    model_config = ConfigDict(frozen=True)

    model: str | None = None
    fallback_models: list[str] | None = None
    first_token_timeout_s: float | None = None
    cwd: str | None = None
    max_turns: int | None = None
    max_budget_usd: float | None = None
    max_run_tokens: int | None = None
    memory: str | None = None  # "user", "project" or "off"
    skills: bool | None = None
    kb: list[str] = []  # added to the definition's
    mcp: list[str] = []  # added to the definition's
    output_schema: dict[str, Any] | None = None
    # The door's default for completed turns (`tether chat`: "answers"); the definition's wins.
    completed_turns: str | None = None


class Recipe(BaseModel):
    """An agent resolved from its definition and overrides: what a run records in its config, so
    that resuming it (in any process) builds the same agent. The definition's instructions,
    tools, guardrails and loop guard are read from ``[agents.NAME]`` when the agent is built."""

    model_config = ConfigDict(extra="ignore")

    agent: str | None = None  # the [agents.NAME] it was defined by; None: the default agent
    model: str
    cwd: str
    fallback_models: list[str] = []
    first_token_timeout_s: float | None = None
    max_turns: int | None = DEFAULT_MAX_TURNS
    max_budget_usd: float | None = None
    max_run_tokens: int | None = None  # None: no limit in tokens
    memory: str | None = None  # the memory scope; None: no memory
    kb: list[str] = []
    mcp: list[str] = []
    skills: bool = False
    output_schema: dict[str, Any] | None = None
    max_tokens: int | None = None  # None: the harness's default
    continue_cut_text: bool = True
    completed_turns: str = "full"
    max_images: int | None = None  # None: the harness's default

    def config(self) -> dict[str, Any]:
        """The recipe as a run's config records it (an unset schema is left out)."""
        return self.model_dump(exclude={"output_schema"} if self.output_schema is None else set())


def definition(settings: Settings, name: str | None) -> AgentTable:
    """``[agents.NAME]`` (or ``[serve.agents.NAME]``); None is the default agent, defined by nothing."""
    if name is None:
        return AgentTable()
    found = settings.agents.get(name)
    if found is None:
        known = ", ".join(settings.agents) or "none"
        if name.endswith(".py") or not AGENT_NAME.fullmatch(name):  # a Python file, as serve --agent takes
            raise ConfigError(
                f"no agent {name!r}: --agent here names an [agents.NAME] table of {settings.home / 'config.toml'} "
                f"(defined: {known}); a Python file or module of agents is for tether serve, mcp serve and worker"
            )
        raise ConfigError(
            f"no agent {name!r}: define [agents.{name}] in {settings.home / 'config.toml'} (defined: {known})"
        )
    return found


def plan(settings: Settings, name: str | None = None, overrides: Overrides | None = None) -> Recipe:
    """The agent ``name`` with ``overrides``, resolved and checked before anything runs: a knowledge
    base, an MCP server or a schema that cannot serve is refused here, in one line."""
    from tether.assembly.parts import check_kbs, check_mcp, load_output_schema, memory_scope
    from tether.providers.registry import canonical_model

    o = overrides or Overrides()
    d = definition(settings, name)
    where = f"[agents.{name}]" if name else "the default agent"
    cwd = expand_user(o.cwd or d.cwd or ".", f"{where} cwd").resolve()
    if not cwd.is_dir():
        given = o.cwd or d.cwd
        relative = not o.cwd and given is not None and not Path(given).expanduser().is_absolute()
        hint = (
            f" (the relative cwd {given!r} is taken from where the command started, {Path.cwd()}:"
            " give a full path, as a client that starts `tether mcp serve` may start it anywhere)"
            if relative
            else ""
        )
        raise ConfigError(f"{where}: cwd {cwd} is not a directory{hint}")
    kb = list(dict.fromkeys([*d.kb, *o.kb]))
    check_kbs(settings, kb)
    schema = o.output_schema
    if schema is None and d.output_schema is not None:
        schema = load_output_schema(d.output_schema, what=f"{where} output_schema", base=settings.home)
    fallbacks = o.fallback_models if o.fallback_models is not None else d.fallback_models
    return Recipe(
        agent=name,
        model=canonical_model(named) if (named := o.model or d.model) else _default_model(settings),
        cwd=str(cwd),
        fallback_models=[
            canonical_model(m) for m in (fallbacks if fallbacks is not None else settings.fallback_models)
        ],
        first_token_timeout_s=o.first_token_timeout_s or d.first_token_timeout_s,
        max_turns=o.max_turns or d.max_turns or DEFAULT_MAX_TURNS,
        max_budget_usd=o.max_budget_usd or d.max_budget_usd,
        max_run_tokens=o.max_run_tokens or d.max_run_tokens,
        memory=memory_scope(settings, o.memory or d.memory),
        kb=kb,
        mcp=list(dict.fromkeys([*check_mcp(settings, d.mcp, source=f"{where} mcp"), *check_mcp(settings, o.mcp)])),
        skills=_skills_on(settings, o.skills, d.skills),
        output_schema=schema,
        max_tokens=d.max_tokens,
        continue_cut_text=d.continue_cut_text is not False,
        completed_turns=d.completed_turns or o.completed_turns or "full",
        max_images=d.max_images,
    )


def _default_model(settings: Settings) -> str:
    """The model no command or definition named: ``$TETHER_MODEL``, else config.toml's ``model``.
    One that cannot run here is refused naming where it came from, which a person who set it long
    ago (a shell profile) cannot otherwise tell: `unknown provider 'foo'` alone does not say."""
    import os

    from tether.config import credentials_redacted
    from tether.providers.registry import canonical_model, resolve_provider

    model = resolve_model(None, settings)
    where = "$TETHER_MODEL" if os.environ.get("TETHER_MODEL") else f"model in {settings.home / 'config.toml'}"
    try:
        resolve_provider(model, settings)
        return canonical_model(model)
    except ConfigError as exc:
        # A key pasted as the model (TETHER_MODEL=sk-...) is not written to the terminal and its logs.
        said = credentials_redacted(f"the model {model} (from {where}; --model chooses another): {exc}")
        raise ConfigError(said) from None


def _skills_on(settings: Settings, flag: bool | None, defined: bool | None) -> bool:
    if flag is not None:
        return flag
    return defined if defined is not None else settings.skills.enabled


def build_agent(settings: Settings, recipe: Recipe) -> Agent:
    """The agent a recipe describes: the same tools, system prompt and limits wherever it is built."""
    from tether.harness.agent import Agent

    d = definition(settings, recipe.agent)
    return Agent(
        model=recipe.model,
        name=recipe.agent or "",  # [agents.NAME]'s NAME: its runs record it, `tether runs` shows it
        description=d.description or "",
        instructions=d.instructions or DEFAULT_INSTRUCTIONS,
        tools=_tools(settings, recipe, d.tools),
        extensions=_extensions(settings, recipe),
        middleware=_middleware(d, settings),
        cwd=recipe.cwd,
        max_turns=recipe.max_turns,
        max_budget_usd=recipe.max_budget_usd,
        max_run_tokens=recipe.max_run_tokens,
        fallback_models=recipe.fallback_models,
        first_token_timeout_s=recipe.first_token_timeout_s,
        settings=settings,
        output_type=recipe.output_schema,
        continue_cut_text=recipe.continue_cut_text,
        completed_turns="answers" if recipe.completed_turns == "answers" else "full",
        max_tokens=recipe.max_tokens or Agent.max_tokens,
        max_images=Agent.max_images if recipe.max_images is None else recipe.max_images,
    )


def _tools(settings: Settings, recipe: Recipe, names: list[str] | None) -> list[Any]:
    """The built-in tools the definition names (all when it names none). The demo tool of the
    scripted scenarios (tether.tools.demo) is never a default, except for a scripted model, whose
    agent is a demo; a definition may still name it."""
    from tether.tools.builtin import builtin_tools, tool_settings
    from tether.tools.demo import DEMO_TOOLS

    tools = builtin_tools(tool_settings(settings.tools))
    if names is None:
        return [*tools, *DEMO_TOOLS] if recipe.model.startswith("scripted/") else tools
    known = {t.name: t for t in [*tools, *DEMO_TOOLS]}
    unknown = [n for n in names if n not in known]
    if unknown:
        raise ConfigError(
            f"[agents.{recipe.agent}] tools names unknown tools {', '.join(unknown)}; known: {', '.join(known)}"
        )
    return [known[n] for n in names]


def _extensions(settings: Settings, recipe: Recipe) -> list[Any]:
    from tether.assembly.parts import knowledge_extensions, mcp_extensions, skills_extension
    from tether.stores import memory

    skills = skills_extension(settings, recipe.cwd) if recipe.skills else None
    return [
        # [memory] enabled = false wins over what a run recorded: a resumed run has none either.
        *([memory(settings, recipe.memory, recipe.cwd)] if recipe.memory and settings.memory.enabled else []),
        *knowledge_extensions(settings, recipe.kb),
        *([skills] if skills else []),
        *mcp_extensions(settings, recipe.mcp),
    ]


def _middleware(d: AgentTable, settings: Settings) -> list[Any]:
    """Guardrails, then the loop guard and the governors: on for every agent a front door builds,
    unless its table says ``enabled = false``."""
    middleware: list[Any] = [_guardrail(g) for g in d.guardrails]
    g = d.loop_guard or settings.loop_guard
    if g.enabled:
        from tether.harness.loop_guard import LoopGuard

        middleware.append(LoopGuard(nudge_after=g.nudge_after, stop_after=g.stop_after, similarity=g.similarity))
    gov = d.governors or settings.governors
    if gov.enabled:
        from tether.harness.governors import Governor

        middleware.append(
            Governor(
                max_tool_rounds=gov.max_tool_rounds or None,
                no_progress_rounds=gov.no_progress_rounds or None,
                discovery_rounds=gov.discovery_rounds or None,
            )
        )
    return middleware


def _guardrail(table: GuardrailTable) -> Any:
    from tether.guardrails import Guardrail, Rule, RuleClassifier, Thresholds

    rules = [Rule(r.pattern, r.score, r.category, r.rationale) for r in table.rules]
    classifier = RuleClassifier.jailbreaks(rules) if table.jailbreaks else RuleClassifier(rules)
    thresholds = Thresholds(block=table.block, ask=table.ask, redirect=table.redirect)
    return Guardrail(classifier, stages=tuple(table.stages), thresholds=thresholds, name=table.name)


# --- the agents a server offers -----------------------------------------------------------------


def served_agents(
    settings: Settings, spec: str | None = None, *, model: str | None = None, cwd: str | None = None
) -> dict[str, Agent]:
    """The agents ``tether serve``, ``tether mcp serve`` and ``tether worker`` offer: those a Python
    file or module defines (``spec``, else ``[serve] agent``), else every ``[agents.NAME]``, else one
    agent, ``default``, like ``tether run``'s (``model`` and ``cwd`` are its overrides)."""
    spec = spec or settings.serve.agent
    if spec:
        agents = _from_python(spec)
    elif settings.agents:
        # A table that does not name its memory has none here: [memory] is the memory of the person
        # at this machine, and a server's users are not that person (each would read it, and write
        # into it for the next). `memory = "user"` in the table shares one memory with all, on purpose.
        agents = {name: build_agent(settings, served_recipe(settings, name)) for name in settings.agents}
    else:
        # Like tether run's, without the memory and skills of the person at this machine: a server's
        # users are not that person (an [agents.NAME] table may still give them, on purpose).
        alone = Overrides(model=model, cwd=cwd, memory="off", skills=False)
        agents = {"default": build_agent(settings, plan(settings, None, alone))}
    return checked_agents(agents)


def served_recipes(settings: Settings, spec: str | None, names: Iterable[str]) -> dict[str, dict[str, Any]]:
    """What a served run of each of ``names`` (the agents :func:`served_agents` gave for ``spec``)
    records of how to build its agent again, so that ``tether resume`` builds the same one: for the
    agents of a Python file or module, where to find it (a file by its full path); for an
    ``[agents.NAME]``, its recipe (its MCP servers, knowledge bases, skills, memory...); for the
    default agent, nothing."""
    spec = spec or settings.serve.agent
    if spec:
        path = _python_file(spec)
        return {name: {"agent_spec": str(path.resolve()) if path is not None else spec} for name in names}
    return {name: served_recipe(settings, name).config() for name in names if name in settings.agents}


def served_recipe(settings: Settings, name: str) -> Recipe:
    """The recipe of ``[agents.NAME]`` as a server offers it (no memory unless its table names one):
    what a served run records, so that ``tether resume`` builds the same agent, its MCP servers and
    knowledge bases included."""
    d = definition(settings, name)
    return plan(settings, name, Overrides(memory=None if d.memory else "off"))


def checked_agents(agents: dict[str, Any]) -> dict[str, Agent]:
    """``agents`` as a door serves them: each name one every door can offer, each value an
    :class:`Agent`, each agent named after its key unless it has a name (its runs say which agent
    they are). Refused with a :class:`ConfigError` saying what is wrong."""
    from tether.harness.agent import Agent

    agents = dict(agents)  # the caller's dict is left as given
    for name, agent in agents.items():
        if not isinstance(name, str) or not AGENT_NAME.fullmatch(name):
            raise ConfigError(
                f"agent name {name!r} cannot be served: use letters, digits, '.', '_' or '-' "
                "(at most 64, starting with a letter or digit)"
            )
        if not isinstance(agent, Agent):
            raise ConfigError(f"agent {name!r} is a {type(agent).__name__}, not a tether.Agent")
        if not agent.name:  # one served as NAME is named so in its runs, as an [agents.NAME] agent is
            agents[name] = replace(agent, name=name)
    if not agents:
        raise ConfigError("no agent to serve: define `agent` or `agents` in the module, or [agents.NAME]")
    return agents


def describe(name: str, agent: Agent) -> dict[str, Any]:
    """What a door shows of an agent: its name, model and description."""
    model = agent.model if isinstance(agent.model, str) else getattr(agent.model, "name", "custom")
    return {"name": name, "model": model, "description": agent.description}


def _from_python(spec: str) -> dict[str, Agent]:
    module = _import(spec)
    agents = getattr(module, "agents", None)
    if agents is None:
        agent = getattr(module, "agent", None)
        if agent is None:
            raise ConfigError(f"--agent {spec}: define `agent = Agent(...)` or `agents = {{'name': Agent(...)}}` in it")
        agents = {"default": agent}
    if not isinstance(agents, dict):
        raise ConfigError(f"--agent {spec}: `agents` must be a dict of name to Agent, not {type(agents).__name__}")
    return dict(agents)


def _python_file(spec: str) -> Path | None:
    """The file ``--agent SPEC`` names, or None when it names a module."""
    path = Path(spec).expanduser()
    return path if spec.endswith(".py") or path.is_file() else None


def _import(spec: str) -> Any:
    path = _python_file(spec)
    try:
        if path is None:
            return importlib.import_module(spec)
        if not path.is_file():
            raise ConfigError(f"--agent {spec}: no such file")
        name = f"tether_served_{abs(hash(str(path.resolve())))}"
        loader = importlib.util.spec_from_file_location(name, path)
        if loader is None or loader.loader is None:
            raise ConfigError(f"--agent {spec}: cannot load it as Python")
        module = importlib.util.module_from_spec(loader)
        sys.modules[name] = module
        loader.loader.exec_module(module)
        return module
    except ConfigError:
        raise
    except Exception as exc:
        raise ConfigError(f"--agent {spec}: importing it failed ({type(exc).__name__}: {exc})") from exc
