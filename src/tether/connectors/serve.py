"""``tether mcp serve``: tether's own capabilities as an MCP server, for a desktop client or
another agent.

Tools:

* ``kb_search(query, base, mode, k)`` and ``kb_lookup_exact(identifier, base, k)``: the knowledge
  bases under ``$TETHER_HOME/kb``, every result citing ``document:start-end`` (read only);
* ``memory_read(store)``: the profile or the notes, without the entries the memory scan withholds
  from agents (read only; not offered when HTTP callers need tokens, since the memory is the
  person's at this machine);
* ``agent_NAME(task)``: each agent of ``--agent FILE_OR_MODULE``, ``[serve] agent`` or
  ``[agents.NAME]`` (the older ``[serve.agents.NAME]`` too), run to one of its five exits; saved
  under ``$TETHER_HOME/runs`` and traced under ``$TETHER_HOME/traces`` as ``tether run`` does. A run
  that stops for a person's decision says so and gives its run id: an MCP client cannot answer the
  question here.

Transports: stdio (the default), or streamable HTTP at ``http://HOST:PORT/mcp`` (``--http``). HTTP
answers on loopback only unless ``--allow-remote``, which needs serve tokens (``tether serve token
create NAME``); once a token exists every HTTP request must carry ``Authorization: Bearer TOKEN``,
as with ``tether serve``.
"""

# No ``from __future__ import annotations``: the MCP SDK reads the tool functions' annotations at
# run time to build their schemas, and those functions are defined inside ``build_server``, after
# the SDK (heavy, and optional) is imported. Names imported for type checking only are quoted.

import argparse
import json
import sys
import threading
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Literal

if TYPE_CHECKING:
    import asyncio
    import socket

    from mcp.server.auth.provider import AccessToken
    from mcp.server.mcpserver import MCPServer
    from mcp.server.transport_security import TransportSecuritySettings

    from tether.cancel import CancelSignal
    from tether.config import Settings
    from tether.events import Event
    from tether.harness.agent import Agent
    from tether.knowledge import KnowledgeBase
    from tether.server.store import SqliteServerStore
    from tether.status import Interruption, RunResult

__all__ = ["HELP", "AgentRun", "CannotListen", "KbHit", "KbResults", "MemoryEntries", "build_server", "cmd_serve"]

MCP_PATH = "/mcp"
DEFAULT_PORT = 8000
MAX_RESULTS = 20
# The most `tether mcp serve` processes started one inside another (tether.connectors._acting's
# SERVE_DEPTH counts them): an agent whose MCP server is this server again stops there.
MAX_DEPTH = 4

HELP = """\
Serves tether over MCP: knowledge-base search (kb_search, kb_lookup_exact), memory (memory_read) and
one tool per configured agent (agent_NAME: --agent FILE_OR_MODULE, else [serve] agent, else every
[agents.NAME] in config.toml, the agents tether run --agent NAME runs). Over stdio by default, for a
desktop client that starts it; --http serves streamable HTTP at http://HOST:PORT/mcp, on loopback
only unless --allow-remote, which needs tokens (tether serve token create NAME). Once a token
exists, HTTP callers send Authorization: Bearer TOKEN.
"""


# --- what the tools return: their structured content (the text content is the same, as JSON) --


@dataclass(frozen=True)
class KbHit:
    """A passage a search found, and where it came from."""

    citation: str  # document:start-end
    score: float
    heading: str | None
    text: str


@dataclass(frozen=True)
class KbResults:
    """What ``kb_search`` and ``kb_lookup_exact`` return."""

    base: str
    query: str
    mode: str
    note: str  # e.g. that a base without an embedder was searched by keywords only
    hits: list[KbHit]


@dataclass(frozen=True)
class MemoryEntries:
    """What ``memory_read`` returns: one store's entries and how full it is."""

    store: str
    entries: list[str]
    withheld: int  # entries the memory scan keeps from agents (written by hand past it)
    chars: int
    limit: int


@dataclass(frozen=True)
class AgentRun:
    """What an ``agent_NAME`` tool returns: how its run ended, and its answer."""

    agent: str
    run_id: str
    status: str  # completed, failed, max_turns_exceeded, budget_exceeded or interrupted
    reason: str | None
    output: str
    turns: int
    cost_usd: float | None  # None: a model that answered has no known price
    waiting_for: str | None  # what a person must decide before the run can go on
    next_step: str | None  # for a run that can go on: how


# --- the server ---------------------------------------------------------------------------------


def build_server(
    settings: "Settings",
    *,
    agent_spec: str | None = None,
    tokens: "SqliteServerStore | None" = None,
    issuer: str = "http://127.0.0.1",
    stop: "CancelSignal | None" = None,
) -> "MCPServer":
    """The MCP server with the knowledge tools, ``memory_read`` (unless ``tokens``) and one tool per
    configured agent. With ``tokens`` its HTTP app lets in only requests whose bearer token is one
    of them (``issuer`` is the address the SDK records as the tokens' issuer: this server's). Once
    ``stop`` is cancelled, the agent runs under way stop with its reason and answer as runs stopped
    so do (``interrupted``, with their run id), and a run asked for afterwards stops at once."""
    from mcp.server.auth.settings import AuthSettings
    from mcp.server.mcpserver import MCPServer
    from pydantic import AnyHttpUrl

    from tether import __version__

    auth: dict[str, Any] = {}
    if tokens is not None:
        # No resource_server_url and no OAuth provider: the SDK checks bearer tokens and mounts no
        # OAuth routes. The tokens come from `tether serve token create`, not from an issuer.
        auth = {
            "token_verifier": _ServeTokens(tokens),
            "auth": AuthSettings(issuer_url=AnyHttpUrl(issuer), resource_server_url=None),
        }
    server: MCPServer = MCPServer(
        "tether",
        version=__version__,
        log_level="WARNING",
        instructions="tether's knowledge bases (kb_search, kb_lookup_exact: cite what you use as "
        "document:start-end), its memory (memory_read) and its agents (agent_NAME: runs one to "
        "the end and reports its answer, status and cost).",
        **auth,
    )
    _add_knowledge_tools(server, settings)
    if tokens is None and settings.memory.enabled:
        _add_memory_tool(server, settings)
    agents = _configured_agents(settings, agent_spec)
    from tether.assembly import served_recipes

    recipes = served_recipes(settings, agent_spec, agents)
    for name, agent in agents.items():
        _add_agent_tool(server, settings, name, agent, stop, recipes.get(name))
    _strict_protocol(server)
    return server


def _strict_protocol(server: "MCPServer") -> None:
    """Answer as the protocol asks where the SDK's defaults do not: the server has no prompts and
    no resources, so it neither advertises nor answers them (``-32601``, method not found, instead
    of empty lists and code 0 with a traceback); an unknown tool is ``-32602`` (invalid params),
    not a tool result saying so. Arguments that do not fit the tool's schema are a tool error (as
    MCP asks: the model can correct them) that says what to fix, not the SDK's pydantic dump."""
    from mcp.shared.exceptions import MCPError
    from mcp.types import INVALID_PARAMS, CallToolResult, TextContent

    from tether.connectors._schemas import validate

    low = server._lowlevel_server
    for method in ("prompts/list", "prompts/get", "resources/list", "resources/read", "resources/templates/list"):
        low._request_handlers.pop(method, None)
    entry = low.get_request_handler("tools/call")
    assert entry is not None

    async def call_tool(ctx: Any, params: Any) -> Any:
        tool = next((tool for tool in await server.list_tools() if tool.name == params.name), None)
        if tool is None:
            raise MCPError(code=INVALID_PARAMS, message=f"Unknown tool: {params.name}")
        problems = validate(params.name, tool.input_schema, dict(params.arguments or {}))
        if problems:
            said = "; ".join(p if len(p) <= 300 else p[:300] + "..." for p in problems)
            text = f"Invalid arguments for {params.name}: {said}. Fix them and call again."
            return CallToolResult(content=[TextContent(type="text", text=text)], is_error=True)
        return await entry.handler(ctx, params)

    low.add_request_handler("tools/call", entry.params_type, call_tool)
    low.middleware.append(_explained)


async def _explained(ctx: Any, call_next: "Callable[[Any], Awaitable[Any]]") -> Any:
    """The SDK's bare "Invalid request parameters" (code -32602, no data) in words: which parameter is
    wrong and how, or that the session has not been initialized (a request before ``initialize``
    has nothing wrong with its parameters)."""
    from mcp.shared.exceptions import MCPError
    from mcp.types import INVALID_PARAMS
    from pydantic import ValidationError

    try:
        return await call_next(ctx)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "params"
        said = f"Invalid params for {ctx.method}: {where}: {first['msg']}. Fix them and send the request again."
        raise MCPError(code=INVALID_PARAMS, message=said) from None
    except MCPError as exc:
        bare = exc.error.code == INVALID_PARAMS and not exc.error.data and exc.error.message == _SDK_BARE
        if bare and ctx.session.client_params is None:
            said = (
                f"The session is not initialized, so {ctx.method} was not run: send initialize, then "
                "notifications/initialized, first"
            )
            raise MCPError(code=INVALID_PARAMS, message=said) from None
        raise


_SDK_BARE = "Invalid request parameters"


class _ServeTokens:
    """The serve tokens (``tether serve token create NAME``) as the SDK's ``TokenVerifier``: a
    token's user is its name; a revoked token is no longer one."""

    def __init__(self, store: "SqliteServerStore") -> None:
        self.store = store

    async def verify_token(self, token: str) -> "AccessToken | None":
        from mcp.server.auth.provider import AccessToken

        user = self.store.user_for_token(token.strip())
        return None if user is None else AccessToken(token=token, client_id=user, scopes=[])


def _read_only(title: str) -> Any:
    from mcp.types import ToolAnnotations

    return ToolAnnotations(
        title=title, read_only_hint=True, destructive_hint=False, idempotent_hint=True, open_world_hint=False
    )


def _tool_error(message: str) -> Exception:
    """An error whose words reach the client (the SDK hides the text of any other exception)."""
    from mcp.server.mcpserver.exceptions import ToolError

    return ToolError(message)


# --- knowledge ----------------------------------------------------------------------------------


class _Bases:
    """The knowledge bases, each opened on first use and kept open (their SQLite connections are
    shared across threads under a lock)."""

    def __init__(self, settings: "Settings") -> None:
        self.settings = settings
        self._open: dict[str, KnowledgeBase] = {}
        self._lock = threading.Lock()

    def names(self) -> list[str]:
        return sorted(p.stem for p in (self.settings.home / "kb").glob("*.db"))

    def search(self, base: str, query: str, mode: str, k: int) -> KbResults:
        from tether.errors import TetherError

        try:
            result = self._get(base).search(query, mode=mode, k=k)
        except (TetherError, argparse.ArgumentTypeError) as exc:  # no such base, a bad name, an empty query
            raise _tool_error(str(exc)) from exc
        hits = [
            KbHit(citation=h.citation, score=round(h.score, 6), heading=h.chunk.heading, text=h.chunk.text)
            for h in result.hits
        ]
        return KbResults(base=base, query=result.query, mode=result.mode, note=result.note, hits=hits)

    def _get(self, name: str) -> "KnowledgeBase":
        from tether.assembly import kb_name, open_kb

        with self._lock:
            kb = self._open.get(name)
            if kb is None:  # the name is checked first: it becomes a path under $TETHER_HOME/kb
                try:
                    kb_name(name)
                except ValueError as exc:
                    raise _tool_error(str(exc)) from None
                kb = self._open[name] = open_kb(self.settings, name)
            return kb


def _add_knowledge_tools(server: "MCPServer", settings: "Settings") -> None:
    from pydantic import Field

    from tether.knowledge.base import Mode

    bases = _Bases(settings)
    k_default = settings.kb.results or 6
    listed = ", ".join(bases.names()) or "none yet (tether kb add PATH builds one)"
    Base = Annotated[str, Field(description=f"which knowledge base; at start: {listed}")]
    K = Annotated[int, Field(ge=1, le=MAX_RESULTS, description="how many results")]

    def kb_search(
        query: Annotated[str, Field(description="what to look for, in words")],
        base: Base = "default",
        mode: Mode = "hybrid",
        k: K = k_default,
    ) -> KbResults:
        return bases.search(base, query, mode, k)

    def kb_lookup_exact(
        identifier: Annotated[str, Field(description="the exact identifier, e.g. FVAM-2050-B")],
        base: Base = "default",
        k: K = k_default,
    ) -> KbResults:
        return bases.search(base, identifier, "exact", k)

    server.add_tool(
        kb_search,
        annotations=_read_only("Search a knowledge base"),
        description=(
            "Search one of tether's knowledge bases (documents, manuals, notes) by keywords and meaning together "
            "(mode hybrid), or by one of them. Each hit cites document:start-end: cite what you use. For an "
            f"identifier such as a part number use kb_lookup_exact. Bases at start: {listed}."
        ),
    )
    server.add_tool(
        kb_lookup_exact,
        annotations=_read_only("Look up an identifier"),
        description=(
            "Find the passages about one exact identifier (a part number, a code, a model name) in a knowledge base: "
            "only passages containing exactly that token, never a near twin (FVAM-2050-C for FVAM-2050-B). Each hit "
            "cites document:start-end."
        ),
    )


# --- memory -------------------------------------------------------------------------------------


def _add_memory_tool(server: "MCPServer", settings: "Settings") -> None:
    from tether.stores import memory as open_memory

    cfg = settings.memory

    def memory_read(store: Literal["profile", "notes"]) -> MemoryEntries:
        # Opened for each call: the files are read as they are now (a person may have changed them).
        # With scope "project", the project is the directory the server was started in.
        memory = open_memory(settings, cfg.scope, Path.cwd())
        entries = memory.entries(store)
        # What the prompt keeps from agents stays here: what the scan refuses (alone or as a pair), a
        # credential or a control character written by hand, and what does not fit the limit.
        shown, _, _ = memory._shown(memory.store(store), entries)
        usage = memory.usage(store)
        return MemoryEntries(
            store=store, entries=shown, withheld=len(entries) - len(shown), chars=usage.chars, limit=usage.limit
        )

    server.add_tool(
        memory_read,
        annotations=_read_only("Read tether's memory"),
        description=(
            "What tether remembers across sessions about the person at this machine: 'profile' (who they are, "
            "their preferences) or 'notes' (decisions and conventions), one entry each. Read only."
        ),
    )


# --- agents -------------------------------------------------------------------------------------


def _configured_agents(settings: "Settings", spec: str | None) -> "dict[str, Agent]":
    """The agents to offer; none unless some are configured (``served_agents`` would make one up)."""
    from tether.assembly import served_agents

    if spec or settings.serve.agent or settings.agents:
        return served_agents(settings, spec)
    return {}


def _add_agent_tool(
    server: "MCPServer",
    settings: "Settings",
    name: str,
    agent: "Agent",
    stop: "CancelSignal | None",
    recipe: dict[str, Any] | None = None,
) -> None:
    from mcp.server.mcpserver import Context
    from mcp.types import ToolAnnotations
    from pydantic import Field

    from tether.assembly import describe

    async def run_agent(
        task: Annotated[str, Field(description="what the agent should do, in words")], ctx: Context
    ) -> AgentRun:
        return await _run_agent(settings, name, agent, task, _progress(ctx), _calls_above(ctx), stop, recipe)

    model = describe(name, agent)["model"]
    # An extension's tools are known only once a run starts it, so an agent with one may write.
    writes = bool(agent.extensions) or not all(getattr(t, "read_only", False) for t in agent.tools)
    server.add_tool(
        run_agent,
        name=f"agent_{name}",
        annotations=ToolAnnotations(
            title=f"Run the agent {name}",
            read_only_hint=False,
            destructive_hint=writes,
            idempotent_hint=False,
            open_world_hint=True,
        ),
        description=(
            f"{agent.description or f'The tether agent {name!r}.'} Runs it ({model}) on the task until it ends, which "
            "may take a while, and returns its answer, status and cost. A run that stops for a person's approval "
            "says so and gives its run id: the decision is made outside MCP."
        ),
    )


def _calls_above(ctx: Any) -> int:
    """How many `tether mcp serve` agent runs this call is made inside, as its ``_meta`` says (a
    tether that calls; 0 from any other client)."""
    from tether.connectors._acting import SERVE_CALLS_META

    meta = ctx.request_context.meta or {}
    said = meta.get(SERVE_CALLS_META) if isinstance(meta, dict) else None
    return said if isinstance(said, int) and not isinstance(said, bool) and said > 0 else 0


def _progress(ctx: Any) -> "Callable[[Event], Awaitable[None]]":
    """What a run's events say as MCP progress notifications (sent when the client asked for them
    with a progress token): each model turn and each tool call, numbered."""
    from tether.events import ToolProgress, ToolStart, Turn

    count = 0

    async def report(event: "Event") -> None:
        nonlocal count
        if isinstance(event, Turn):
            words = f"turn {event.turn} done"
        elif isinstance(event, ToolStart):
            words = f"running {event.tool_name}"
        elif isinstance(event, ToolProgress):
            words = f"{event.tool_name}: {event.label}"
        else:
            return
        count += 1
        try:
            await ctx.report_progress(count, None, words)
        except Exception:  # the call ended (cancelled) or the client left: the run goes on
            return

    return report


async def _run_agent(
    settings: "Settings",
    name: str,
    agent: "Agent",
    task: str,
    progress: "Callable[[Event], Awaitable[None]] | None" = None,
    calls_above: int = 0,
    stop: "CancelSignal | None" = None,
    recipe: dict[str, Any] | None = None,
) -> AgentRun:
    import asyncio
    import contextlib

    import anyio
    from mcp.server.auth.middleware.auth_context import get_access_token

    from tether.assembly.stores import check_home
    from tether.cancel import CancelSignal
    from tether.connectors._acting import SERVE_CALLS, acting_as
    from tether.errors import TetherError
    from tether.events import Done
    from tether.harness.loop import run_stream
    from tether.harness.state import RunState
    from tether.stores import run_store
    from tether.tracing import JsonlTracer

    if not task.strip():
        raise _tool_error("the task is empty: say what the agent should do")
    if calls_above >= MAX_DEPTH:
        raise _tool_error(
            f"refusing to run agent_{name}: this call comes from {calls_above} tether mcp serve agent runs, "
            f"each called by the one before (at most {MAX_DEPTH}), so an agent's [mcp.NAME] server leads back "
            "to tether mcp serve, likely to itself; take that server out of the agent's mcp list"
        )
    try:  # a home where the run cannot be kept, said before it starts (it may change while serving)
        check_home(settings)
    except TetherError as exc:
        raise _tool_error(str(exc)) from None
    state = RunState(ext={"config": _run_record(name, agent, task, recipe)})
    store = run_store(settings)
    signal = CancelSignal(parent=stop)

    async def consume() -> "RunResult":
        result = None
        stream = run_stream(
            agent, task, state=state, store=store, signal=signal, tracer=JsonlTracer(settings.home / "traces")
        )
        async for event in stream:
            if isinstance(event, Done):
                result = event.result
            elif progress is not None:
                await progress(event)
        assert result is not None
        return result

    # Over HTTP with tokens, the run acts for its token's user, as a run of `tether serve` does: their
    # own MCP accounts (never `tether mcp login`'s, the person's at this machine), and no question
    # asked at this server's terminal. The task made here keeps these, and the count of calls.
    caller = get_access_token()
    counted = SERVE_CALLS.set(calls_above + 1)
    try:
        with acting_as(caller.client_id) if caller is not None else contextlib.nullcontext():
            job = asyncio.ensure_future(consume())
    finally:
        SERVE_CALLS.reset(counted)
    _UNDER_WAY.add(job)
    job.add_done_callback(_UNDER_WAY.discard)
    try:
        result = await asyncio.shield(job)
    except TetherError as exc:  # refused before anything ran (e.g. a budget without a price)
        raise _tool_error(str(exc)) from exc
    except asyncio.CancelledError:
        # The client cancelled the call, or the server is stopping: the run's signal stops its tools
        # too (law 7), and the run records how it stopped before this call goes.
        signal.cancel("the MCP client cancelled the call")
        with anyio.CancelScope(shield=True):
            await asyncio.wait([job])
        raise
    finally:
        store.close()
        if stop is not None:
            stop.remove_callback(signal.cancel)
    return _agent_run(name, result)


def _run_record(name: str, agent: "Agent", task: str, recipe: dict[str, Any] | None = None) -> dict[str, Any]:
    """What a served run records of how it started: as `tether run` records its runs, so `tether
    runs`, `show` and `resume` read them; with the ``recipe`` of an ``[agents.NAME]`` agent, all of
    it (its MCP servers among them: resumed without them, an approved call of theirs would find no
    tool)."""
    from mcp.server.auth.middleware.auth_context import get_access_token

    from tether.assembly import describe

    caller = get_access_token()
    return {
        **(recipe or {}),
        "agent": name,
        "served": "mcp",
        "user": caller.client_id if caller else None,
        "prompt": task[:200],
        "model": describe(name, agent)["model"],
        "cwd": str(Path(agent.cwd or Path.cwd()).resolve()),
        "max_turns": agent.max_turns,
        "max_budget_usd": agent.max_budget_usd,
        "max_run_tokens": agent.max_run_tokens,
    }


def _agent_run(name: str, result: "RunResult") -> AgentRun:
    from tether.status import RESUMABLE

    waiting = _waiting_for(result.interruption)
    next_step = None
    if waiting is not None:
        next_step = (
            f"A person must decide this; an MCP client cannot answer it here. The run is saved as "
            f"{result.run_id}: `tether show {result.run_id}` shows it and how to answer."
        )
    elif result.status in RESUMABLE:
        next_step = f"The run is saved as {result.run_id}: `tether show {result.run_id}` says how to continue it."
    return AgentRun(
        agent=name,
        run_id=result.run_id,
        status=result.status,
        reason=result.reason,
        output=result.text,
        turns=result.turns,
        cost_usd=result.cost_usd,
        waiting_for=waiting,
        next_step=next_step,
    )


def _waiting_for(waiting: "Interruption | None") -> str | None:
    """What a person must decide before the run can go on, in words; None when no one must."""
    from tether.status import (
        ApprovalInterruption,
        ElicitationInterruption,
        GuardrailInterruption,
        OutcomeUnknownInterruption,
        SamplingInterruption,
        SubagentInterruption,
    )

    if isinstance(waiting, SubagentInterruption):
        return _waiting_for(waiting.child)
    if isinstance(waiting, ApprovalInterruption):
        return f"approval of {waiting.tool_name} {json.dumps(waiting.args, ensure_ascii=False)}"
    if isinstance(waiting, OutcomeUnknownInterruption):
        return (
            f"a decision about {waiting.tool_name} {json.dumps(waiting.args, ensure_ascii=False)}, which "
            "started before a crash and left no result"
        )
    if isinstance(waiting, GuardrailInterruption):
        return f"a decision on the {waiting.stage} a guardrail held back: {waiting.rationale}"
    if isinstance(waiting, ElicitationInterruption):  # a run acting for a token's user asks no terminal
        return f"an answer to the MCP server {waiting.server}, which asks during {waiting.tool_name}: {waiting.message}"
    if isinstance(waiting, SamplingInterruption):
        return f"whether the MCP server {waiting.server} may ask the model: {waiting.preview}"
    return None  # a limit or a cancellation: nothing to decide


# --- the command --------------------------------------------------------------------------------


class CannotListen(Exception):
    """``tether mcp serve --http`` could not listen at ``host:port``: ``error`` says why (the port is
    in use, the address not allowed). The command says it as ``tether serve`` does, with its exit code."""

    def __init__(self, host: str, port: int, error: OSError) -> None:
        super().__init__(f"cannot listen on {host}:{port}: {error.strerror or error}")
        self.host, self.port, self.error = host, port, error


def cmd_serve(args: argparse.Namespace) -> int:
    """``tether mcp serve``: serve until the client goes (stdio) or Ctrl-C (HTTP); the exit code."""
    from tether.config import load_settings
    from tether.errors import UserError

    if not args.http and (args.host is not None or args.port is not None or args.allow_remote):
        raise UserError("--host, --port and --allow-remote go with --http (without it tether serves MCP over stdio)")
    _count_depth()
    settings = load_settings()
    if args.http:
        return _serve_http(settings, args)
    _check_sdk()
    from tether.cancel import CancelSignal
    from tether.connectors._serve_wire import serve_stdio

    # Closing stdin ends the session (MCP's way to stop a stdio server): the runs under way stop,
    # and each call answers with its run, which a client can then find and resume.
    stop = CancelSignal()
    server = build_server(settings, agent_spec=args.agent, stop=stop)
    gone = "the MCP client closed the connection (stdin) before the run ended"
    return _until_stopped(lambda: serve_stdio(server._lowlevel_server, on_eof=lambda: stop.cancel(gone)))


def _count_depth() -> None:
    """Count this server in the chain of `tether mcp serve` processes that started one another, for
    the MCP servers its agents start; refuse to start past ``MAX_DEPTH`` (a loop would never end)."""
    import os

    from tether.connectors._acting import SERVE_DEPTH
    from tether.errors import UserError

    said = os.environ.get(SERVE_DEPTH, "").strip()
    above = int(said[:6]) if said.isascii() and said.isdigit() else 0  # what no tether wrote counts for none
    if above >= MAX_DEPTH:
        raise UserError(
            f"refusing to serve MCP: {above} tether mcp serve processes already run one inside another "
            f"({SERVE_DEPTH}={above}, at most {MAX_DEPTH}), so an agent's [mcp.NAME] server leads back to "
            "tether mcp serve, likely to itself; take that server out of the agent's mcp list"
        )
    os.environ[SERVE_DEPTH] = str(above + 1)


def _check_sdk() -> None:
    from tether.errors import UserError

    try:
        import mcp  # noqa: F401
    except ImportError:
        raise UserError("tether mcp serve needs the mcp package: pip install 'tether[mcp]'") from None


# The agent runs under way (their jobs), waited for when `mcp serve --http` stops: at most
# _STOPPING_S; then the requests still answering (their tasks), at most _ANSWERING_S.
_UNDER_WAY: "set[asyncio.Future[Any]]" = set()
_STOPPING_S = 10.0
_ANSWERING_S = 5.0


def _serve_http(settings: "Settings", args: argparse.Namespace) -> int:
    import asyncio

    from tether.cancel import CancelSignal
    from tether.errors import UserError
    from tether.stores import server_store

    host, port = args.host or "127.0.0.1", DEFAULT_PORT if args.port is None else args.port
    store = server_store(settings)
    remote = not _loopback(host)
    refusal = _refusal(host, remote, args.allow_remote, store)
    if refusal:
        store.close()
        raise UserError(refusal)
    _check_sdk()
    import uvicorn

    # As `tether serve`: once a token has existed, no HTTP caller gets in without one.
    tokens = store if args.allow_remote or store.auth_required() else None
    try:
        sock = _bind(host, port)
    except OSError as exc:
        store.close()
        raise CannotListen(host, port, exc) from None
    shown = f"[{host}]" if ":" in host else host
    url = f"http://{shown}:{sock.getsockname()[1]}"
    stop = CancelSignal()
    server = build_server(settings, agent_spec=args.agent, tokens=tokens, issuer=url, stop=stop)
    security = _host_check(host, remote)
    app = server.streamable_http_app(streamable_http_path=MCP_PATH, transport_security=security)
    answering: set[asyncio.Task[Any]] = set()
    _check_posts(app, server, security, answering)
    config = uvicorn.Config(app, log_level="warning", lifespan="on", timeout_graceful_shutdown=5)
    print(
        f"tether mcp serve: MCP over streamable HTTP at {url}{MCP_PATH} "
        f"({'bearer token required' if tokens else 'loopback, no token'}; Ctrl-C to stop)",
        file=sys.stderr,
        flush=True,
    )
    http = uvicorn.Server(config)
    shutdown = http.shutdown
    # sse_starlette ends every open event stream within 0.5 s of the signal on its own, which cut the
    # answers of the calls whose runs were still stopping (the client read an empty stream): here
    # the streams end when the answers are written (below), not before.
    from sse_starlette.sse import AppStatus  # the mcp package's own dependency

    draining, AppStatus.enable_automatic_graceful_drain = AppStatus.enable_automatic_graceful_drain, False

    async def runs_first(sockets: Any = None) -> None:
        # Ctrl-C or SIGTERM: the runs under way stop first and each call answers with its run (the
        # SDK's own answer, "Connection closed", never reached a client whose stream was open).
        # They are waited for (a stopping run saves how it stopped), then their answers' writing,
        # before the streams left (a client's GET, which never ends by itself) and connections close.
        stop.cancel("the server was stopped (Ctrl-C or SIGTERM) before the run ended")
        if _UNDER_WAY:
            await asyncio.wait(set(_UNDER_WAY), timeout=_STOPPING_S)
        if answering:
            await asyncio.wait(set(answering), timeout=_ANSWERING_S)
        AppStatus.should_exit = True
        await shutdown(sockets=sockets)

    http.shutdown = runs_first  # type: ignore[method-assign]
    try:
        return _until_stopped(lambda: http.serve(sockets=[sock]))
    finally:
        AppStatus.should_exit = False  # process-wide: a server started after this one in the process
        AppStatus.enable_automatic_graceful_drain = draining


def _check_posts(
    app: Any, server: "MCPServer", security: "TransportSecuritySettings", answering: "set[asyncio.Task[Any]]"
) -> None:
    """Each POST to ``/mcp`` checked as a stdio line is (tether.connectors._serve_wire), after the
    bearer token (a stranger learns nothing from how a message is refused)."""
    from mcp.server.auth.middleware.bearer_auth import RequireAuthMiddleware

    from tether.connectors._serve_wire import checked_posts

    route = next(r for r in app.routes if getattr(r, "path", None) == MCP_PATH)
    holder = route.app if isinstance(route.app, RequireAuthMiddleware) else route
    holder.app = checked_posts(holder.app, server._lowlevel_server, security, answering)


def _refusal(host: str, remote: bool, allow_remote: bool, store: "SqliteServerStore") -> str | None:
    """Why the server must not listen as asked, before anything does; None when it may."""
    if remote and not allow_remote:
        return (
            f"refusing to listen on {host}: tether mcp serve answers on loopback only unless --allow-remote "
            "(which needs tokens: tether serve token create NAME)"
        )
    if allow_remote and not store.has_tokens():
        return (
            "--allow-remote needs tokens, or anyone who reaches the server could run its agents: create one "
            "with `tether serve token create NAME`"
        )
    return None


def _until_stopped(serve: Callable[[], Awaitable[None]]) -> int:
    """Serve until the client goes (stdio) or Ctrl-C; then close the model connections the runs pooled."""
    import asyncio

    from tether.providers.http import close_clients

    async def main() -> None:
        try:
            await serve()
        finally:
            await close_clients()

    try:
        asyncio.run(main())
    except KeyboardInterrupt:
        return 130
    return 0


def _loopback(host: str) -> bool:
    import ipaddress

    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def _bind(host: str, port: int) -> "socket.socket":
    """A listening socket, bound before the server starts: a busy port is one clear error, and with
    port 0 the address to announce is known."""
    import socket

    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    return socket.create_server((host.strip("[]"), port), family=family)


def _host_check(host: str, remote: bool) -> "TransportSecuritySettings":
    """On loopback, only loopback Host and Origin headers: a web page elsewhere cannot reach the server
    through DNS rebinding. Beyond loopback the bearer tokens keep strangers out."""
    from mcp.server.transport_security import TransportSecuritySettings

    if remote:
        return TransportSecuritySettings(enable_dns_rebinding_protection=False)
    names = list(dict.fromkeys(["127.0.0.1", "localhost", "[::1]", f"[{host}]" if ":" in host else host]))
    return TransportSecuritySettings(
        enable_dns_rebinding_protection=True,
        allowed_hosts=[f"{n}:*" for n in names],
        allowed_origins=[f"http://{n}:*" for n in names],
    )
