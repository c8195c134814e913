"""Tools from MCP servers: a :class:`McpConnector` per ``[mcp.NAME]`` server, an extension
(:mod:`tether.harness.extension`) whose tools are ordinary tether tools.

``start`` connects (a stdio server is started as a child process with exactly its configured
environment plus PATH, in a process group of its own; a remote one is reached over streamable HTTP
with its headers or an OAuth bearer token) and lists the server's tools. ``tools`` offers each as
``NAME__tool`` with the server's description and JSON Schema. ``stop`` closes the session and stops
the process and everything it started.

Approval: ``approval = "destructive"`` (the default) asks a person before a tool the server does not
mark read-only, unless it marks it ``destructiveHint: false`` (MCP's defaults: not read-only, and
destructive); ``"always"`` asks before every tool, ``"never"`` before none; ``[mcp.NAME] tools``
sets the policy of single tools by their name on the server. The hints come from the server:
``approval`` is the person's word over them. ``readOnlyHint`` also makes a call answerable from an
identical earlier one in the run, and ``idempotentHint`` lets a resume after a crash run it again.

Failures are tool results the model reads: the server's ``isError``, a call past ``timeout_s``
(cancelled on the server), a server that died during the call (restarted once; the call is not run
again), and, after a second death, "server NAME is down: ..." for the rest of the run. A Stop cancels
the call in flight at once.
"""

from __future__ import annotations

import asyncio
import functools
import hashlib
import json
import logging
import re
import threading
import time
import warnings
from collections.abc import AsyncIterator, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tether.errors import ConfigError
from tether.harness.extension import Extension
from tether.tools.base import ToolContext, ToolInterrupt, ToolResult

if TYPE_CHECKING:
    import mcp_types

    from tether.connectors._client_side import Asker
    from tether.connectors._link import Link, Reach
    from tether.memory.scan import Finding
    from tether.providers.auth import Credentials

__all__ = [
    "DEFAULT_TIMEOUT_S",
    "McpConnector",
    "McpTool",
    "name_clash",
    "needs_approval",
    "token_path",
    "tool_name",
    "tool_prefix",
]

DEFAULT_TIMEOUT_S = 60.0  # a call, unless [mcp.NAME] timeout_s says otherwise
DEFAULT_MAX_CHARS = 100_000  # a result's text (the built-in read_file's cap), unless max_result_chars says
START_TIMEOUT_S = 30.0  # starting (or reaching) a server and listing its tools
NAME_LIMIT = 64  # what providers accept as a tool name, of [A-Za-z0-9_-]
# A server's progress notifications become the run's events, each written to its trace: a server
# that sent them in a flood (or long) would fill the disk. A call's first PROGRESS_FREE are shown,
# then at most one each PROGRESS_EVERY_S, each cut to PROGRESS_CHARS (a progress message is a status).
PROGRESS_FREE = 10
PROGRESS_EVERY_S = 0.5
PROGRESS_CHARS = 300
# A server that says its tools changed again and again (after each listing, say) is listed again at
# most once per RELIST_GAP_S, and never sooner than four times what the last listing and its scan
# took: each reading scans every new description on the event loop.
RELIST_GAP_S = 2.0
MCP_EXTRA = "pip install 'tether[mcp]'"

_NOT_ALLOWED = re.compile(r"[^A-Za-z0-9_-]")
log = logging.getLogger("tether.connectors")


def token_path(home: Path, server: str) -> Path:
    """Where the OAuth tokens of server ``server`` live (mode 0600, like a provider's)."""
    if any(sep in server for sep in ("/", "\\", "\0")):
        raise ConfigError(
            f"[mcp.{server}]: a server with OAuth tokens needs a name without / or \\ (it names the token file)"
        )
    return home / "auth" / f"mcp-{server}.json"


def tool_name(server: str, tool: str, taken: Sequence[str] = ()) -> str:
    """``SERVER__tool`` in the characters providers allow, at most 64 of them; a name cut short,
    already ``taken`` by another tool, or one whose server or tool part holds ``__`` (so that another
    server's tool could have the same name), ends in a digest of the original so it stays unique."""
    left, right = tool_prefix(server), _NOT_ALLOWED.sub("_", tool)
    name = f"{left}__{right}"
    # ``a__b`` + ``c`` and ``a`` + ``b__c`` would both be ``a__b__c``: a name that does not split
    # back into its server and tool in one way only gets the digest, so two servers never clash.
    plain = "__" not in left and "__" not in right and not left.endswith("_") and not right.startswith("_")
    if plain and len(name) <= NAME_LIMIT and name not in taken:
        return name
    # A server may list one name twice, or a name that is another's digested form: the digest then
    # takes a count too, until the name is free (was: two tools of one name, and every run refused).
    key, count = f"{server}\0{tool}", 0
    while True:
        digested = f"{name[: NAME_LIMIT - 9]}_{hashlib.sha256(key.encode()).hexdigest()[:8]}"
        if digested not in taken:
            return digested
        count += 1
        key = f"{server}\0{tool}\0{count}"


def tool_prefix(server: str) -> str:
    """What the names of the server ``server``'s tools start with, before ``__``: its name in the
    characters providers accept (each other character becomes ``_``)."""
    return _NOT_ALLOWED.sub("_", server)


def name_clash(server: str, other: str) -> str | None:
    """Why the servers ``server`` and ``other`` cannot both be given to one agent, when their
    tools' names would start alike (``my.server`` and ``my_server``: one's ``stock`` would be the
    other's); None when they would not."""
    prefix = tool_prefix(server)
    if prefix != tool_prefix(other):
        return None
    if server == other:
        return (
            f"two MCP servers are named {server!r}: their tools would have the same names ({prefix}__TOOL); "
            "give each its own name"
        )
    return (
        f"the MCP servers {server!r} and {other!r} would both name their tools {prefix}__TOOL (characters "
        "other than letters, digits, _ and - become _), so one's tools would take the other's names: rename "
        "one of them ([mcp.NAME] in config.toml, or McpConnector's first argument) so that the two differ "
        "in a letter, digit, _ or -"
    )


_STRICTNESS = {"never": 0, "destructive": 1, "always": 2}
# Letters of other scripts drawn like Latin ones (after NFKC and casefold): a server's name that looks
# like one an override names is held to that override when it is the stricter.
_LOOK_ALIKE = str.maketrans(
    "аеорсухіјѕԁһӏԛԝьвкмнтɡαενιοκρτυχϳ",
    "aeopcyxijsdhlqwbbkmhtgaeviokptuxj",
)


def _skeleton(name: str) -> str:
    """``name`` as it reads: NFKC (a fullwidth or compatibility form is its plain letter),
    casefolded, accents and invisible format characters (a zero-width space) dropped, letters of
    other scripts drawn like Latin ones made Latin, and each character a provider does not take in
    a name an ``_``, as :func:`tool_name` makes it (``send.email`` reaches the model as
    ``mail__send_email``, like ``send_email``)."""
    import unicodedata

    folded = unicodedata.normalize("NFKD", unicodedata.normalize("NFKC", name).casefold())
    plain = "".join(c for c in folded if not unicodedata.combining(c) and unicodedata.category(c) != "Cf")
    return _NOT_ALLOWED.sub("_", plain.translate(_LOOK_ALIKE).replace("-", "_"))


def approval_policy(tool: str, overrides: Mapping[str, str], default: str, unknown: Iterable[str] = ()) -> str:
    """The policy of the server's tool ``tool``: the override naming it exactly (the person's
    word, looser or stricter); else the strictest of ``default`` and every override whose name reads
    the same (:func:`_skeleton`): ``send_email = "always"`` holds for a ``send_emaіl`` with a Cyrillic
    ``і``, a fullwidth or decomposed spelling, so a server cannot dodge it by a look-alike name, while
    a looser override (``"never"``) is never lent to a name it does not give exactly. An override in
    ``unknown`` (naming no tool of the server: a typo, ``send_emial``, or a tool renamed) also lends
    what it asks more to a tool whose name is near its own (:func:`near_name`), so a mistyped guard
    asks a person rather than leave the tool it meant unguarded."""
    if tool in overrides:
        return overrides[tool]
    reads = _skeleton(tool)
    alike = [policy for name, policy in overrides.items() if _skeleton(name) == reads]
    alike += [overrides[name] for name in unknown if near_name(name, tool)]
    return max([default, *alike], key=_STRICTNESS.__getitem__)


def near_name(written: str, tool: str) -> bool:
    """Whether an override ``written`` for a tool the server lacks is likely a misspelling of the
    server's ``tool`` (both as they read, :func:`_skeleton`): a letter or two swapped, missing,
    doubled or wrong."""
    import difflib

    return difflib.SequenceMatcher(None, _skeleton(written), _skeleton(tool)).ratio() >= 0.8


def lends(policy: str, default: str) -> bool:
    """Whether an override's ``policy`` asks more than the server's ``default``: only such a one is
    lent to names it does not give exactly."""
    return _STRICTNESS[policy] > _STRICTNESS[default]


def needs_approval(policy: str, annotations: mcp_types.ToolAnnotations | None) -> bool:
    """Whether a call asks a person first: ``always``, ``never``, or ``destructive`` by the hints."""
    if policy == "always":
        return True
    if policy == "never":
        return False
    if annotations is not None and annotations.read_only_hint:
        return False
    hint = annotations.destructive_hint if annotations is not None else None
    return True if hint is None else hint


def describe_tool(spec: mcp_types.Tool, server: str) -> str:
    """What the model reads about a server's tool, before any trimming."""
    return spec.description or spec.title or f"The {spec.name} tool of the MCP server {server}."


class McpTool:
    """One tool of an MCP server, as a tether tool named ``SERVER__tool``.

    ``cacheable``: an answer may be reused for an identical call later in the run. MCP's
    ``readOnlyHint`` says a tool does not write, not that it always answers the same (the time, a
    file another process changes), so only the tools listed in ``[mcp.NAME] cache`` are."""

    def __init__(self, connector: McpConnector, spec: mcp_types.Tool, name: str, policy: str, description: str) -> None:
        hints = spec.annotations
        self.name = name
        self.server_tool = spec.name  # its name on the server
        self.description = description
        self.input_schema: dict[str, Any] = dict(spec.input_schema) or {"type": "object"}
        self.read_only = bool(hints is not None and hints.read_only_hint)
        self.idempotent = bool(hints is not None and hints.idempotent_hint)
        self.cacheable = self.read_only and spec.name in connector.config["cache"]
        self.policy = policy
        self.needs_approval = needs_approval(policy, hints)
        self._connector = connector

    def validate_input(self, value: dict[str, Any]) -> dict[str, Any]:
        """Checked against the server's schema without fetching or reading anything it refers to."""
        from tether.connectors._schemas import validate
        from tether.tools.base import ToolInputError

        problems = validate(self.name, self.input_schema, value)
        if problems:
            schema = json.dumps(self.input_schema, separators=(",", ":"))[:800]
            raise ToolInputError(
                f"Invalid arguments for {self.name}: {'; '.join(problems)}. Fix them and call again. Schema: {schema}"
            )
        return value

    async def execute(self, input: dict[str, Any], ctx: ToolContext) -> ToolResult:
        return await self._connector.call(self, input, ctx)


@dataclass
class _Live:
    """The connector in one event loop (one run's thread): its connection, and what happened to it."""

    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    users: int = 0  # run_stream calls between their start and stop
    link: Link | None = None
    restarted: bool = False
    down: str | None = None
    refresh: asyncio.Future[None] | None = None  # the tool list being read again
    changed: bool = False  # the server said so again while it was being read: read it once more after
    next_listing: float = 0.0  # time.monotonic() before which the tools are not read again (RELIST_GAP_S)
    side: Any = None  # what the server asks of this connection's runs (a ClientSide of its own)
    root: Path | None = None  # announced to the server: the workspace of the run that started it


class McpConnector(Extension):
    """The tools of the MCP server ``server``, configured as ``config`` (an ``[mcp.NAME]`` table).

    ``home`` holds the OAuth tokens (default ``$TETHER_HOME``). One connector may serve runs in
    several threads at once: each event loop gets its own connection."""

    def __init__(
        self,
        server: str,
        config: Mapping[str, Any],
        *,
        home: Path | None = None,
        start_timeout_s: float = START_TIMEOUT_S,
        workspace: Path | None = None,
        asker: Asker | None = None,
    ) -> None:
        from tether.connectors._client_side import Asker, ClientSide

        self.server = server
        self.workspace = workspace  # announced to the server as its root (default: the run's cwd)
        self.oauth_flow: Any = None  # set by `tether mcp login` to sign in through the browser
        self._watchers: list[tuple[str, asyncio.Queue[str]]] = []  # resource subscriptions being read
        self.name = f"mcp:{server}"
        self.config = _checked(server, config)
        self.home = home
        self.transport = "stdio" if self.config["command"] is not None else "http"
        self.timeout_s = float(self.config["timeout_s"] or DEFAULT_TIMEOUT_S)
        self.start_timeout_s = start_timeout_s
        self.pids: list[int] = []  # every process started, so a check can tell none is left
        self.unknown_overrides: list[str] = []  # [mcp.NAME] tools entries naming no tool of the server
        self.refused: dict[str, str] = {}  # a server's tool left out → why (shown by `tether mcp list`)
        self.trimmed: dict[str, str] = {}  # a tool offered with less than the server wrote → what was cut
        self.max_result_chars = int(self.config["max_result_chars"] or DEFAULT_MAX_CHARS)
        # Sampling and elicitation: asked at the terminal unless ``asker`` says how else.
        self.client_side = ClientSide(server, self.config, asker or Asker.terminal(), home=home)
        self._tools: list[McpTool] = []
        self._extra: list[Any] = []  # the resource tools, when the server has resources
        self.instructions: str | None = None
        self.capabilities: mcp_types.ServerCapabilities | None = None
        # One connection per event loop, and per user in `tether serve` (each with their own tokens).
        self._live: dict[tuple[asyncio.AbstractEventLoop, str | None], _Live] = {}
        self._guard = threading.Lock()

    # --- the extension ---------------------------------------------------------------------------

    def tools(self) -> Sequence[Any]:
        return [*self._tools, *self._extra]

    def tool_origin(self, tool: Any) -> str:
        """The server and its own name for ``tool``, and where the server is configured."""
        what = f"the tool {tool.server_tool!r}" if isinstance(tool, McpTool) else f"the tool {tool.name!r} tether adds"
        return f"{what} of the MCP server {self.server!r} ([mcp.{self.server}])"

    def check_together(self, extensions: Sequence[Any]) -> None:
        """Refuse, before any server starts, another server of the agent whose tools' names would
        be this one's (:func:`name_clash`)."""
        for other in extensions:
            if isinstance(other, McpConnector) and other is not self:
                clash = name_clash(self.server, other.server)
                if clash is not None:
                    raise ConfigError(clash)

    def prompt_block(self) -> str | None:
        """The server's ``instructions`` (how to use it, from its handshake), bounded like a description."""
        text = self._instructions_shown()
        return None if text is None else f"# The MCP server {self.server}\n{text}"

    def _instructions_shown(self) -> str | None:
        """The instructions as the system prompt gets them (stripped, then bounded), or None."""
        if not self.instructions or not self.instructions.strip():
            return None
        limit = int(self.config["max_description_chars"] or 4_000)
        text = self.instructions.strip()
        if len(text) > limit:
            text = text[:limit] + " [instructions trimmed]"
        return text

    async def start(self) -> None:
        live = self._state()
        async with live.lock:
            live.users += 1
            if live.users > 1:
                return
            live.restarted, live.down = False, None
            live.root = self._workspace()
            try:
                live.link = await self._connect(live)
            except BaseException:
                live.users -= 1
                self._forget(live)
                raise
            self._adopt(live.link)
            self._extra = await self._resource_tools(live.link)

    async def stop(self) -> None:
        live = self._state()
        async with live.lock:
            live.users = max(0, live.users - 1)
            if live.users:
                return
            link, live.link = live.link, None
            self._forget(live)
            if live.refresh is not None:  # the tool list being read again: the next start lists them anew
                live.refresh.cancel()
        if link is not None:
            await link.close()

    def _adopt(self, link: Link) -> None:
        from tether.memory.scan import accept_context

        self._tools = self._make_tools(link.tools, cut=link.tools_cut)
        self.instructions, self.capabilities = link.instructions, link.capabilities
        flagged: list[str] = []
        source = f"the MCP server {self.server!r}: its instructions"
        # Scanned as the prompt gets them: cut before stripping, 4,000 spaces hid what followed them.
        shown = self._instructions_shown()
        if shown and not accept_context(shown, source=source, problems=flagged, scanner=_SCAN):
            self.instructions = None  # scanned like memory: a flagged text never reaches the prompt
            self.refused["(its instructions)"] = flagged[0]

    async def _resource_tools(self, link: Link) -> list[Any]:
        """The resource tools, when the server has resources or templates to offer (many servers
        declare the capability with nothing behind it: no tools for nothing)."""
        from tether.connectors._link import AnswerLost, ConnectionLost, ServerRefused
        from tether.connectors._resources import resource_tools

        if link.capabilities is None or link.capabilities.resources is None:
            return []

        async def any_offered(client: Any) -> bool:
            if (await client.list_resources()).resources:
                return True
            try:
                return bool((await client.list_resource_templates()).resource_templates)
            except Exception:  # a server without templates may refuse the method
                return False

        try:
            offered = await asyncio.wait_for(link.ask(any_offered), min(self.timeout_s, 10.0))
        except (TimeoutError, ConnectionLost, ServerRefused, AnswerLost) as exc:
            log.warning("MCP server %s: its resources could not be listed: %s", self.server, exc)
            return []
        return resource_tools(self, lambda tool, taken: tool_name(self.server, tool, taken)) if offered else []

    def _tools_changed(self) -> None:
        """The server said its tools changed: list them again, for the next run (a run keeps the tools
        it was given; one the server dropped answers with the server's error)."""
        live = self._live.get(self._here())
        if live is None or live.link is None:
            return
        link = live.link
        if live.refresh is not None and not live.refresh.done():
            live.changed = True  # one more reading after this one, however many times it says so
            return

        async def relist() -> None:
            from tether.connectors._link import ConnectionLost, ServerRefused

            live.changed = True
            while live.changed and live.link is link:
                if (wait := live.next_listing - time.monotonic()) > 0:  # read again, but not at once
                    await asyncio.sleep(wait)
                live.changed = False
                began = time.monotonic()
                try:
                    # The resource tools stay as they are: a new server tool does not take their names.
                    tools = await link.relist()
                    self._tools = self._make_tools(tools, reserved=[t.name for t in self._extra], cut=link.tools_cut)
                except (ConnectionLost, ServerRefused) as exc:
                    log.warning(
                        "MCP server %s: its tool list changed and could not be read again: %s", self.server, exc
                    )
                    return
                finally:
                    live.next_listing = time.monotonic() + max(RELIST_GAP_S, 4 * (time.monotonic() - began))

        live.refresh = asyncio.ensure_future(relist())

    def _resource_updated(self, uri: str) -> None:
        for watched, queue in list(self._watchers):
            if watched == uri:
                queue.put_nowait(uri)

    async def watch(self, uri: str) -> AsyncIterator[str]:
        """The resource ``uri`` each time the server says it changed, subscribed for as long as this
        is read (a server that offers subscriptions: ``resources.subscribe``)."""
        if (
            self.capabilities is None
            or self.capabilities.resources is None
            or not self.capabilities.resources.subscribe
        ):
            raise ConfigError(f"the MCP server {self.server} does not offer resource subscriptions")
        queue: asyncio.Queue[str] = asyncio.Queue()
        self._watchers.append((uri, queue))

        async def subscribe(client: Any) -> Any:
            with warnings.catch_warnings():  # deprecated by MCP 2026-07-28, which older servers predate
                warnings.simplefilter("ignore")
                return await client.subscribe_resource(uri)

        try:
            await self.request(f"a subscription to {uri}", subscribe)
            while True:
                yield await queue.get()
        finally:
            self._watchers.remove((uri, queue))

    async def request(self, what: str, ask: Any) -> Any:
        """One request other than a tool call (``ask(client)``), on this event loop's connection;
        raises ConfigError in words when it cannot be made."""
        from tether.connectors._link import AnswerLost, ConnectionLost, ServerRefused

        live = self._live.get(self._here())
        link = await self._usable(live) if live is not None and live.users else None
        if link is None:
            raise ConfigError(f"the MCP server {self.server} is not connected, so {what} cannot be asked for")
        try:
            return await asyncio.wait_for(link.ask(ask), self.timeout_s)
        except TimeoutError:
            raise ConfigError(
                f"the MCP server {self.server} did not answer {what} within {self.timeout_s:g} s"
            ) from None
        except (ConnectionLost, ServerRefused, AnswerLost) as exc:
            raise ConfigError(f"the MCP server {self.server} could not answer {what}: {exc}") from None

    # --- calls -----------------------------------------------------------------------------------

    async def call(self, tool: McpTool, arguments: dict[str, Any], ctx: ToolContext) -> ToolResult:
        """Call ``tool`` on the server; every outcome is a result the model reads, except a question
        the server asked the person in a served run (the run stops for it, the call to be made again)."""
        live = self._live.get(self._here())
        if live is None or not live.users:
            return _error(f"the MCP server {self.server} is not connected (an agent's run starts it)")
        link = await self._usable(live)
        if link is None:
            return _error(f"server {self.server} is down: {live.down}")
        side = live.side
        side.begin(ctx, tool.name)  # what the server asks during the call belongs to it
        try:
            result, ended = await self._attempt(live, link, tool, arguments, ctx)
        finally:
            asked = side.end(ctx)
        if asked is not None and ended:  # the server asked the person something: the run stops for it
            what = getattr(asked, "message", None) or f"may it ask the model “{getattr(asked, 'preview', '')}”?"
            raise ToolInterrupt(f"the MCP server {self.server} asks you: {what}", asked, ended=True)
        return result

    async def _attempt(
        self, live: _Live, link: Link, tool: McpTool, arguments: dict[str, Any], ctx: ToolContext
    ) -> tuple[ToolResult, bool]:
        """One call's result, and whether it ended on the server's side (not cut off by a timeout)."""
        from tether.connectors._link import AnswerLost, ConnectionLost, ServerRefused
        from tether.connectors._results import to_tool_result

        try:
            answer = link.call(tool.server_tool, arguments, on_progress=_bounded(ctx.progress), meta=_serve_calls())
            result = await ctx.signal.race(self._timed(answer, live.side, ctx))
        except TimeoutError:
            return _error(
                f"{tool.name} did not answer within {self.timeout_s:g} s (timeout_s of [mcp.{self.server}]), "
                f"so the call was cancelled. {_outcome(tool)}"
            ), False
        except ConnectionLost:
            return await self._after_loss(live, link, tool), True
        except ServerRefused as exc:
            return _error(f"the call to {tool.name} failed on the MCP server {self.server}: {exc}"), True
        except AnswerLost as exc:
            return _error(
                f"the answer of the MCP server {self.server} to this call to {tool.name} broke off "
                f"({exc}). {_outcome(tool)}"
            ), False
        if result.is_error:  # the server's words about its failure: none of the values it was given
            result = _error_withheld(result, link.reach.redact)
        return to_tool_result(result, self.max_result_chars), True

    async def _timed(self, answer: Any, side: Any, ctx: ToolContext) -> Any:
        """``answer`` within ``timeout_s``; the time a person takes to answer the server's questions
        during the call does not count (the side pauses the limit while it asks)."""
        async with asyncio.timeout(self.timeout_s) as limit:
            side.limits[ctx.call_id or ""] = limit
            try:
                return await answer
            finally:
                side.limits.pop(ctx.call_id or "", None)

    async def _usable(self, live: _Live) -> Link | None:
        """The live connection; one that died between calls is replaced first (the call was not sent)."""
        link = live.link
        if link is None or link.alive:
            return link
        async with live.lock:
            if live.link is link:
                await self._replace(live, link)
        return live.link

    async def _after_loss(self, live: _Live, link: Link, tool: McpTool) -> ToolResult:
        async with live.lock:
            if live.link is link:  # not yet replaced by a call that met the same end
                await self._replace(live, link)
        if live.link is None:
            return _error(f"server {self.server} is down: {live.down}")
        return _error(
            f"the MCP server {self.server} stopped during this call to {tool.name} ({link.reason()}) and "
            f"was restarted. {_outcome(tool)}"
        )

    async def _replace(self, live: _Live, link: Link) -> None:
        """A connection ended: restart the server the first time, mark it down the second."""
        await link.close()
        reason = link.reason()
        if live.restarted:
            live.link, live.down = None, reason
            log.warning("MCP server %s is down: %s", self.server, reason)
            return
        live.restarted = True
        log.warning("MCP server %s stopped (%s); restarting it", self.server, reason)
        try:
            live.link = await self._connect(live)
        except ConfigError as exc:
            live.link, live.down = None, f"{reason}, and it did not start again: {exc}"

    # --- connecting ------------------------------------------------------------------------------

    def _forget(self, live: _Live) -> None:
        """Drop an event loop's state once no run in it uses the server (the loop may end)."""
        with self._guard:
            for here, state in list(self._live.items()):
                if state is live and not live.users:
                    del self._live[here]

    def _workspace(self) -> Path:
        """The root to announce: ``workspace`` when given, else the cwd of the agent whose run starts
        the server (the loop says it while its extensions start), else the current directory."""
        from tether.harness.extension import STARTING_IN

        return self.workspace or STARTING_IN.get() or Path.cwd()

    def _here(self) -> tuple[asyncio.AbstractEventLoop, str | None]:
        """Whose connection: this event loop's; for a server that signs each user in (OAuth), the
        user the run acts for too (tether.connectors._acting)."""
        from tether.connectors._acting import ACTING

        per_user = self.config["auth"] == "oauth" and self.config["token_url"] is None
        return asyncio.get_running_loop(), ACTING.get() if per_user else None

    def _state(self) -> _Live:
        with self._guard:
            return self._live.setdefault(self._here(), _Live(side=self.client_side.fresh()))

    async def _connect(self, live: _Live) -> Link:
        try:
            from tether.connectors._link import Link, StartFailed
        except ImportError as exc:
            raise ConfigError(f"MCP servers need the mcp package: {MCP_EXTRA}") from exc
        from tether.connectors._link import Hooks

        reach = self._reach()
        side = live.side
        hooks = Hooks(
            roots=[live.root or self._workspace()],
            tools_changed=self._tools_changed,
            resource_updated=self._resource_updated,
            sampling=side.sampling if self.config["sampling"] != "deny" else None,
            elicitation=side.elicitation if self.config["elicitation"] != "deny" else None,
        )
        link = Link(self.server, reach, hooks)
        try:
            await link.open(self.start_timeout_s)
        except StartFailed as exc:
            said = reach.last_error_line()
            raise ConfigError(
                f"MCP server {self.server} did not start: {exc}" + (f" (its last words: {said})" if said else "")
            ) from None
        finally:
            if reach.pid is not None:
                self.pids.append(reach.pid)
        return link

    def _reach(self) -> Reach:
        cfg = self.config
        if self.transport == "stdio":
            from tether.connectors._stdio import StdioProcess

            return StdioProcess(cfg["command"], cfg["args"], cfg["env"], cfg["cwd"])
        from tether.connectors._http import HttpServer

        sse = cfg["transport"] == "sse"
        if cfg["auth"] == "oauth" and cfg["token_url"] is None:  # discovered: the MCP authorization flow
            return HttpServer(cfg["url"], cfg["headers"], None, sse=sse, flow=self.oauth_flow or self._flow())
        return HttpServer(cfg["url"], cfg["headers"], self._credentials(), sse=sse)

    def _flow(self) -> Any:
        from tether.config import tether_home
        from tether.connectors._acting import ACTING
        from tether.connectors._oauth import oauth_provider

        home = self.home or tether_home()
        user = ACTING.get()
        if user is None:  # the person at this machine: `tether mcp login`'s tokens
            path = token_path(home, self.server)
            return oauth_provider(self.server, self.config["url"], path, self.config["scopes"])
        from tether.connectors._accounts import SealedTokenStorage, connection_key, user_token_path

        path = user_token_path(home, user, self.server)  # a served run: its user's tokens, no one else's
        storage = SealedTokenStorage(path, connection_key(home))
        how = f"connect your account for {self.server} on the server's page (Connections)"
        return oauth_provider(
            self.server, self.config["url"], path, self.config["scopes"], storage=storage, sign_in=how
        )

    def _credentials(self) -> Credentials | None:
        if self.config["auth"] != "oauth":
            return None
        from tether.config import tether_home
        from tether.providers.auth import OAuthCredentials, canonical_resource

        path = token_path(self.home or tether_home(), self.server)
        if not path.exists():
            raise ConfigError(
                f"no OAuth tokens for the MCP server {self.server} ({path}): store them with "
                f"`tether mcp login {self.server} --refresh-token -` (it reads the token from stdin)"
            )
        resource = self.config.get("resource")
        if resource is None:  # the MCP spec: tokens are asked for this server (RFC 8707)
            resource = canonical_resource(self.config["url"])
        return OAuthCredentials(
            path,
            self.config["token_url"],
            self.config["client_id"],
            scopes=self.config["scopes"],
            resource=resource or None,
        )

    def _make_tools(
        self, specs: Sequence[mcp_types.Tool], reserved: Sequence[str] = (), cut: str | None = None
    ) -> list[McpTool]:
        """The tools offered of ``specs``; each one left out goes to ``refused`` with why, and so
        does ``cut``, why the server's list was not read to its end. One warning says how many."""
        from tether.connectors._client_side import printable
        from tether.connectors._schemas import Limits, admit, schema_words

        cfg = self.config
        limits = Limits(
            cfg["max_description_chars"] or Limits.description_chars,
            cfg["max_schema_chars"] or Limits.schema_chars,
            cfg["max_tools_chars"] or Limits.tools_chars,
        )
        overrides: dict[str, str] = cfg["tools"]
        self.unknown_overrides = sorted(set(overrides) - {spec.name for spec in specs})
        tools: list[McpTool] = []
        self.refused, self.trimmed, total = {}, {}, 0
        from tether.memory.scan import accept_context  # the memory scan guards what enters the context

        for spec in specs:
            task_support = spec.execution.task_support if spec.execution is not None else None
            verdict = admit(describe_tool(spec, self.server), dict(spec.input_schema), limits, task_support)
            if verdict.refused is None and total + verdict.size > limits.tools_chars:
                verdict = replace(
                    verdict,
                    refused=f"the server's tools before it already use {total:,} of max_tools_chars "
                    f"({limits.tools_chars:,}) characters of description and schema",
                )
            flagged: list[str] = []
            source = f"the MCP server {self.server!r}: tool {spec.name!r}"
            # Scanned as the model would read it (trimmed), so a huge description costs a bounded scan;
            # then each of the words of its schema (bounded by max_schema_chars), which the model reads
            # too: one by one, as the same parameters come back in tool after tool (each judged once).
            said = [verdict.description, *dict.fromkeys(schema_words(spec.input_schema))]
            if verdict.refused is None and not all(
                accept_context(words, source=source, problems=flagged, scanner=_SCAN) for words in said
            ):
                verdict = replace(verdict, refused=flagged[0])
            if verdict.refused is not None:
                # Shown by `tether mcp list` and logged: the server's words, escapes written out.
                self.refused[printable(spec.name)] = printable(verdict.refused)
                continue
            total += verdict.size
            if verdict.trimmed:
                self.trimmed[printable(spec.name)] = verdict.trimmed
            name = tool_name(self.server, spec.name, [*reserved, *(t.name for t in tools)])
            policy = approval_policy(spec.name, overrides, cfg["approval"], self.unknown_overrides)
            tools.append(McpTool(self, spec, name, policy, verdict.description))
        _warn_left_out(self.server, self.refused, cut)
        if cut is not None:
            self.refused["(the rest of its tools)"] = cut
        if self.unknown_overrides:
            log.warning(
                "[mcp.%s] tools names %s, which the server does not offer (what one asks more holds for "
                "a tool whose name is near it)",
                self.server,
                ", ".join(self.unknown_overrides),
            )
        return tools


def _checked(server: str, config: Mapping[str, Any]) -> dict[str, Any]:
    """The table checked against config.toml's schema for ``[mcp.NAME]`` (one definition of it),
    with its defaults filled in."""
    from pydantic import ValidationError

    from tether.config import McpTable

    try:
        return McpTable.model_validate(dict(config)).model_dump()
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        raise ConfigError(
            f"[mcp.{server}] {where + ': ' if where else ''}{first['msg'].removeprefix('Value error, ')}"
        ) from None


class _RememberedScan:
    """The memory scan (its default scanner), its verdict on each text kept for the process: a
    server's tools are scanned again at each run's start (each message of a chat, each run of
    `tether serve`) and at each change of its list, and the same words need judging once (the scan
    takes tens of milliseconds a tool). Texts past ``_REMEMBERED_CHARS`` are judged each time."""

    def scan(self, text: str) -> Finding | None:
        return _judged(text) if len(text) <= _REMEMBERED_CHARS else _judge(text)


def _judge(text: str) -> Finding | None:
    from tether.memory.scan import default_scanner

    return default_scanner().scan(text)


_REMEMBERED_CHARS = 8_000
_judged = functools.lru_cache(maxsize=2_048)(_judge)
_SCAN = _RememberedScan()


def _warn_left_out(server: str, refused: Mapping[str, str], cut: str | None) -> None:
    """One warning for the tools left out, however many (one a tool, for half a million, held the
    event loop for seconds): the first few with why, how many more, and why the list was cut."""
    shown = list(refused.items())[:3]
    if len(refused) == 1 and cut is None:
        log.warning("[mcp.%s] the tool %s is left out: %s", server, *shown[0])
        return
    said = [f"{len(refused):,} of the server's tools are left out"] if refused else []
    said += [f"{tool}: {why}" for tool, why in shown]
    if len(refused) > len(shown):
        said.append(f"and {len(refused) - len(shown):,} more")
    if cut is not None:
        said.append(cut)
    if said:
        log.warning("[mcp.%s] %s; `tether mcp list` shows each and why", server, "; ".join(said))


def _bounded(progress: Callable[[str], None]) -> Callable[[str], None]:
    """``progress`` for one call, within the bounds above (what is passed over is dropped: the next
    one shown says where the work is)."""
    shown, last = 0, 0.0

    def report(label: str) -> None:
        nonlocal shown, last
        now = time.monotonic()
        if shown >= PROGRESS_FREE and now - last < PROGRESS_EVERY_S:
            return
        shown, last = shown + 1, now
        progress(label if len(label) <= PROGRESS_CHARS else label[:PROGRESS_CHARS] + " [cut]")

    return report


def _serve_calls() -> dict[str, Any] | None:
    """What a call says of the `tether mcp serve` agent runs it is made inside (none: nothing), so
    that a server which is one of them again counts it (tether.connectors.serve)."""
    from tether.connectors._acting import SERVE_CALLS, SERVE_CALLS_META

    depth = SERVE_CALLS.get()
    return {SERVE_CALLS_META: depth} if depth else None


def _error_withheld(result: mcp_types.CallToolResult, redact: Callable[[str], str]) -> mcp_types.CallToolResult:
    """An error result with ``redact`` applied to its text (a crash message may quote the server's
    environment: the transport takes out what it was given)."""
    import mcp_types

    content = [
        block.model_copy(update={"text": redact(block.text)}) if isinstance(block, mcp_types.TextContent) else block
        for block in result.content
    ]
    return result.model_copy(update={"content": content})


def _error(text: str) -> ToolResult:
    return ToolResult(f"Error: {text}", is_error=True)


def _outcome(tool: McpTool) -> str:
    if tool.read_only or tool.idempotent:
        return "It is safe to call it again."
    return "It was not run again: whether it took effect is unknown, so check before calling it again."
