"""One connection to an MCP server, from the handshake to the close.

A task of its own enters and leaves the SDK's client: its anyio task groups must be left by the task
that entered them, and a run's ``start`` and ``stop`` are two awaits that need not run in one task.
Calls are made from the callers' own tasks, so cancelling a caller cancels its request (the SDK then
tells the server with ``notifications/cancelled``).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable, Iterable
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import anyio
import httpx2
import mcp_types as types
from mcp import Client
from mcp.client._transport import TransportStreams
from mcp.shared.exceptions import MCPError
from pydantic import FileUrl, ValidationError

from tether.connectors._client_side import printable
from tether.errors import TetherError

__all__ = [
    "REDACTED",
    "AnswerLost",
    "ConnectionLost",
    "Hooks",
    "Link",
    "Reach",
    "ServerRefused",
    "StartFailed",
    "describe",
    "result_not_an_object",
    "withheld",
]

_LIST_PAGES = 100  # a server whose tool list never ends is cut here
# A server's tools read at most (whole pages, then cut here): far more than a model can choose among
# or max_tools_chars lets through, and reading half a million held the event loop for seconds.
MAX_TOOLS = 10_000


class Reach(Protocol):
    """How to reach a server: a stdio process (:mod:`._stdio`) or a URL (:mod:`._http`)."""

    @property
    def pid(self) -> int | None: ...

    def connect(self) -> AbstractAsyncContextManager[TransportStreams]: ...

    def alive(self) -> bool: ...

    def why(self) -> str | None:
        """What the transport knows of why the connection ended (an exit status, an HTTP status)."""
        ...

    def last_error_line(self) -> str: ...

    @property
    def calls_are_separate(self) -> bool:
        """Whether a call's answer may break while the session lives on (HTTP), or a broken answer
        means the connection is gone (stdio)."""
        ...

    def redact(self, text: str) -> str:
        """``text`` without the secrets this transport sent the server."""
        ...


REDACTED = "[redacted]"  # what a secret a server wrote back is replaced with


def withheld(text: str, secrets: Iterable[str]) -> str:
    """``text`` with each of ``secrets`` replaced by ``[redacted]``, the longest first (a secret
    that holds another is withheld whole)."""
    for secret in sorted(secrets, key=len, reverse=True):
        text = text.replace(secret, REDACTED)
    return text


class StartFailed(Exception):
    """The server did not connect; the message says why."""


class ConnectionLost(Exception):
    """The connection ended during a call (the server died, or the network went)."""


class ServerRefused(Exception):
    """The server answered the call with a protocol error (unknown tool, invalid arguments), or its
    answer could not be read (an HTTP error, a body that is not JSON-RPC)."""


class AnswerLost(Exception):
    """The answer to one call broke off (an HTTP event stream that ended early); the session lives."""


@dataclass
class Hooks:
    """What the client side answers when the server asks (all optional): the roots (the run's
    workspace), a completion from tether's model (sampling), input from a person (elicitation), and
    what to do when the server's tool list changes."""

    roots: list[Path] = field(default_factory=list)
    sampling: (
        Callable[[types.CreateMessageRequestParams], Awaitable[types.CreateMessageResult | types.ErrorData]] | None
    ) = None
    elicitation: Callable[[types.ElicitRequestParams], Awaitable[types.ElicitResult | types.ErrorData]] | None = None
    tools_changed: Callable[[], None] | None = None
    resource_updated: Callable[[str], None] | None = None  # a subscribed resource changed (its URI)


class Link:
    def __init__(self, server: str, reach: Reach, hooks: Hooks | None = None) -> None:
        self.server = server
        self.reach = reach
        self.hooks = hooks or Hooks()
        self.client: Client | None = None
        self.tools: list[types.Tool] = []
        self.tools_cut: str | None = None  # why the server's tool list was not read to its end
        self.instructions: str | None = None  # what the server says about using it, from the handshake
        self.capabilities: types.ServerCapabilities | None = None
        self.failure: str | None = None
        self._failure_is_ours = False  # tether's own error (an OAuth refresh refused) says it best
        self._closing = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    @property
    def pid(self) -> int | None:
        return self.reach.pid

    @property
    def alive(self) -> bool:
        return self.client is not None and self._task is not None and not self._task.done() and self.reach.alive()

    def reason(self) -> str:
        """Why the connection failed or ended, in one line fit for a terminal: it may quote the server
        (a protocol version, its refusal of the handshake), so its control characters are written out."""
        if self._failure_is_ours and self.failure:
            return printable(self.reach.redact(self.failure))
        return printable(self.reach.redact(self.reach.why() or self.failure or "the connection closed"))

    async def open(self, timeout: float) -> None:
        """Connect and list the tools, or raise :class:`StartFailed` (having stopped what started)."""
        ready: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._task = asyncio.create_task(self._own(ready), name=f"mcp:{self.server}")
        try:
            await asyncio.wait_for(asyncio.shield(ready), timeout)
        except TimeoutError:
            self.failure = f"it did not finish connecting within {timeout:g} s"
        except StartFailed:
            pass
        finally:
            if not ready.done() or ready.exception() is not None:
                await self.close()
        if self.client is None:
            raise StartFailed(self.reason())

    async def _own(self, ready: asyncio.Future[None]) -> None:
        from tether import __version__

        info = types.Implementation(name="tether", version=__version__)
        hooks = self.hooks

        async def roots(context: Any) -> types.ListRootsResult:
            return types.ListRootsResult(
                roots=[types.Root(uri=FileUrl(p.resolve().as_uri()), name=p.name) for p in hooks.roots]
            )

        async def sampling(context: Any, params: types.CreateMessageRequestParams) -> Any:
            assert hooks.sampling is not None
            return await hooks.sampling(params)

        async def elicitation(context: Any, params: types.ElicitRequestParams) -> Any:
            assert hooks.elicitation is not None
            return await hooks.elicitation(params)

        async def notified(message: Any) -> None:
            if isinstance(message, types.ToolListChangedNotification) and hooks.tools_changed is not None:
                hooks.tools_changed()
            if isinstance(message, types.ResourceUpdatedNotification) and hooks.resource_updated is not None:
                hooks.resource_updated(str(message.params.uri))

        callbacks: dict[str, Any] = {"list_roots_callback": roots if hooks.roots else None, "message_handler": notified}
        if hooks.sampling is not None:
            callbacks["sampling_callback"] = sampling
        if hooks.elicitation is not None:
            callbacks["elicitation_callback"] = elicitation
        try:
            async with Client(self.reach.connect(), cache=None, client_info=info, **callbacks) as client:
                # The SDK checks a result's structured content against the tool's output schema with
                # its regular expressions (`pattern`): a hostile one held the event loop in
                # backtracking for minutes, every run and Stop with it. tether reads the content, not
                # the schema (input schemas are checked without patterns too): the server answers
                # for its own output.
                client.session.validate_tool_result = _unchecked  # type: ignore[method-assign]
                self.tools, self.tools_cut = await _list_tools(client)
                self.instructions = client.instructions
                self.capabilities = client.server_capabilities
                self.client = client
                ready.set_result(None)
                listener = asyncio.ensure_future(self._listen(client)) if hooks.tools_changed else None
                try:
                    await self._closing.wait()
                finally:
                    if listener is not None:
                        listener.cancel()
                        await asyncio.gather(listener, return_exceptions=True)
        except Exception as exc:
            self._failure_is_ours = any(isinstance(e, TetherError) for e in _leaves(exc))
            self.failure = describe(exc) if self._failure_is_ours or not self.failure else self.failure
        finally:
            self.client = None
            if not ready.done():
                ready.set_exception(StartFailed(self.reason()))
                ready.exception()  # retrieved: open() reads the reason itself

    async def _listen(self, client: Client) -> None:
        """Hear that the server's tools changed. Since MCP 2026-07-28 that comes on a
        ``subscriptions/listen`` stream; before, as a notification (the message handler hears it)."""
        tools = client.server_capabilities.tools
        if tools is None or not tools.list_changed or self.hooks.tools_changed is None:
            return
        try:
            async with client.listen(tools_list_changed=True) as events:
                async for _ in events:
                    self.hooks.tools_changed()
        except asyncio.CancelledError:
            raise
        except Exception:  # an older protocol (no listen), or the stream ended: notifications remain
            return

    async def call(
        self,
        name: str,
        arguments: dict[str, Any],
        on_progress: Callable[[str], None] | None = None,
        meta: dict[str, Any] | None = None,
    ) -> types.CallToolResult:
        """The server's result; :class:`ConnectionLost` or :class:`ServerRefused` otherwise.
        ``on_progress`` hears the server's progress notifications for the call, in words; ``meta``
        goes with the request as its ``_meta``."""
        client, owner = self.client, self._task
        if client is None or owner is None or owner.done():
            raise ConnectionLost(self.reason())

        async def report(progress: float, total: float | None, message: str | None) -> None:
            if on_progress is not None:
                done = f"{progress:g}/{total:g}" if total else f"{progress:g}"
                on_progress(f"{done} {message}" if message else done)

        sent = types.RequestParamsMeta(**meta) if meta else None  # type: ignore[typeddict-item]
        request = asyncio.ensure_future(client.call_tool(name, arguments, progress_callback=report, meta=sent))
        try:
            await asyncio.wait((request, owner), return_when=asyncio.FIRST_COMPLETED)
        finally:
            if not request.done():  # cancelled (timeout, Stop) or the connection ended first
                request.cancel()
                request.add_done_callback(_retrieve)
        if not request.done() or request.cancelled():
            raise ConnectionLost(self.reason())
        try:
            return request.result()
        except MCPError as exc:
            if not self.alive or (
                exc.code == types.CONNECTION_CLOSED
                and not self.reach.calls_are_separate
                and not await self._still_answers(client, owner, exc)
            ):
                raise ConnectionLost(self.reason()) from exc
            # The SDK reports an HTTP answer that broke off as CONNECTION_CLOSED, the code (-32000)
            # many servers also use for their own errors: only its own words tell them apart.
            if exc.code == types.CONNECTION_CLOSED and exc.message.startswith("SSE stream"):
                raise AnswerLost(self.reach.redact(exc.message)) from exc
            raise ServerRefused(self.reach.redact(exc.message)) from exc
        except ValidationError as exc:  # the SDK checks an answer's shape: a server's mistake, not tether's
            raise ServerRefused(self.reach.redact(invalid_answer(exc))) from exc
        except (anyio.BrokenResourceError, anyio.ClosedResourceError, anyio.EndOfStream) as exc:
            raise ConnectionLost(self.reason()) from exc

    async def ask(self, request: Callable[[Client], Awaitable[Any]]) -> Any:
        """Another request than a tool call (resources, prompts), with the same outcomes as :meth:`call`."""
        client, owner = self.client, self._task
        if client is None or owner is None or owner.done():
            raise ConnectionLost(self.reason())
        job = asyncio.ensure_future(request(client))
        try:
            await asyncio.wait((job, owner), return_when=asyncio.FIRST_COMPLETED)
        finally:
            if not job.done():
                job.cancel()
                job.add_done_callback(_retrieve)
        if not job.done() or job.cancelled():
            raise ConnectionLost(self.reason())
        try:
            return job.result()
        except MCPError as exc:
            raise ServerRefused(self.reach.redact(exc.message)) from exc
        except ValidationError as exc:
            raise ServerRefused(self.reach.redact(invalid_answer(exc))) from exc
        except (anyio.BrokenResourceError, anyio.ClosedResourceError, anyio.EndOfStream) as exc:
            raise ConnectionLost(self.reason()) from exc

    async def relist(self) -> list[types.Tool]:
        """The server's tools now (after it said its list changed)."""
        tools: list[types.Tool]
        tools, self.tools_cut = await self.ask(_list_tools)
        self.tools = tools
        return tools

    async def _still_answers(self, client: Client, owner: asyncio.Task[None], error: MCPError) -> bool:
        """Whether the connection still answers after a call failed with CONNECTION_CLOSED (-32000):
        the SDK's code for a connection that ended, which many servers also use for their own
        errors. The SDK's own words mean it ended; otherwise a request every server answers (the
        first page of its tools; ``ping`` is gone from the protocol since 2026-07-28) tells, within
        5 s: a server that does not answer by then is taken as gone."""
        if error.message == "Connection closed" or owner.done():
            return False
        probe = asyncio.ensure_future(client.list_tools())
        try:
            await asyncio.wait((probe, owner), timeout=5.0, return_when=asyncio.FIRST_COMPLETED)
        finally:
            if not probe.done():
                probe.cancel()
                probe.add_done_callback(_retrieve)
        return probe.done() and not probe.cancelled() and probe.exception() is None

    async def close(self) -> None:
        """End the session; the transport stops the process (bounded: a stuck close is cut)."""
        self._closing.set()
        task = self._task
        if task is None or task.done():
            return
        if self.client is None:  # still connecting: nothing to end politely (the transport still stops the process)
            task.cancel()
        done, _ = await asyncio.wait({task}, timeout=15.0)
        if not done:
            task.cancel()
            with contextlib.suppress(BaseException):
                await asyncio.wait_for(task, 10.0)


async def _list_tools(client: Client) -> tuple[list[types.Tool], str | None]:
    """The server's tools, at most :data:`MAX_TOOLS` of them in at most ``_LIST_PAGES`` pages, and
    why the list was not read to its end (None when it was)."""
    tools: list[types.Tool] = []
    cursor: str | None = None
    for _ in range(_LIST_PAGES):
        page = await client.list_tools(cursor=cursor)
        tools.extend(page.tools)
        cursor = page.next_cursor
        if cursor is None or len(tools) >= MAX_TOOLS:
            break
    if len(tools) > MAX_TOOLS or (cursor is not None and len(tools) == MAX_TOOLS):
        return tools[:MAX_TOOLS], (
            f"the server lists more than {MAX_TOOLS:,} tools; tether reads the first {MAX_TOOLS:,} and leaves "
            "out the rest unread"
        )
    if cursor is not None:
        return tools, f"the server's tool list goes on past {_LIST_PAGES} pages; the rest was not read"
    return tools, None


async def _unchecked(name: str, result: types.CallToolResult) -> None:
    """A tool result as the server gave it (see ``Link._own``)."""


def describe(exc: BaseException) -> str:
    """One line for why a connection failed: tether's own error if one is inside, else the first cause."""
    leaves = list(_leaves(exc))
    ours = next((e for e in leaves if isinstance(e, TetherError)), None)
    first = ours or (leaves[0] if leaves else exc)
    if isinstance(first, TetherError | MCPError):
        return str(first)
    if isinstance(first, ValidationError):
        return invalid_answer(first)
    if isinstance(first, httpx2.TransportError):
        return f"cannot reach the server ({type(first).__name__}: {first})"
    if isinstance(first, OSError) and first.strerror:  # the command cannot be run
        return f"{first.strerror}: {first.filename}" if first.filename else first.strerror
    text = str(first).strip().splitlines()[0] if str(first).strip() else ""
    return f"{type(first).__name__}: {text}" if text else type(first).__name__


def invalid_answer(exc: ValidationError) -> str:
    """What is wrong with a server's answer, in one line: where its first mistake is and what it is
    (not the values: pydantic's own text quotes them, and they can be anything)."""
    first = exc.errors()[0]
    where = ".".join(str(p) for p in first["loc"]) or "the answer"
    more = f" (and {exc.error_count() - 1} more)" if exc.error_count() > 1 else ""
    return f"its answer is not a valid {exc.title}: {where}: {first['msg']}{more}"


def result_not_an_object(message: Any) -> str | None:
    """Why ``message`` (a decoded JSON-RPC message) is an answer tether cannot take, when it is one
    whose ``result`` is not an object (every MCP result is): in words that name what was sent, not
    its contents (it may hold anything). None for any other message."""
    if not isinstance(message, dict) or "result" not in message or "method" in message:
        return None
    result = message["result"]
    if isinstance(result, dict):
        return None
    if result is None:
        sent = "null"
    elif isinstance(result, bool):
        sent = f"the boolean {str(result).lower()}"
    elif isinstance(result, int | float):
        sent = "a number"
    elif isinstance(result, str):
        sent = f"a string of {len(result):,} characters"
    elif isinstance(result, list):
        sent = f"a list of {len(result):,} items"
    else:
        sent = type(result).__name__
    return f"its answer's result is {sent}, not an object as JSON-RPC and MCP require"


def _leaves(exc: BaseException) -> list[BaseException]:
    if isinstance(exc, BaseExceptionGroup):
        return [leaf for inner in exc.exceptions for leaf in _leaves(inner)]
    return [exc]


def _retrieve(task: asyncio.Future[Any]) -> None:
    if not task.cancelled():
        task.exception()
