"""``tether mcp serve`` over stdio, with every line answered as JSON-RPC 2.0 asks.

The SDK's stdio transport hands a line it cannot parse to the session as an exception, which logs
it and answers nothing: a client that sent non-JSON, ``"jsonrpc": "1.0"`` or a batch waits for ever.
Here each line is checked first, and one that is not a single JSON-RPC 2.0 message gets its error at
once: ``-32700`` (parse error) for what is not JSON (or JSON the SDK's parser refuses: a lone
surrogate escape), ``-32600`` (invalid request) for the rest, with the request's id when it has a
usable one. MCP sends one message per line and has no batches since
the 2025-06-18 revision. The SDK still claims stdout (stray prints go to stderr, not the wire);
stdin is claimed here the same way, so a child process started by an agent reads nothing of it.

Over streamable HTTP, ``checked_posts`` gives each POST the same checks before the SDK reads it
(the SDK answered a batch or ``"jsonrpc": "1.0"`` with ``-32602`` and a pydantic dump, and took a
request whose id is null or a float for a notification, answered by nothing).

Both transports refuse a request whose id a request still running in the session holds
(``InFlight``): the SDK ran both, so an agent ran twice, and over HTTP one of the two was never
answered. Over stdio an id is held until its answer is written (or the client cancels its
request, which is then never answered): the SDK answers some requests before any middleware sees
them (a 2026-07-28 request whose ``_meta`` envelope is incomplete), and their ids stayed taken for
the rest of the session.

When stdin closes (the client is done, or gone) the requests still running are told so
(``on_eof``) and the session ends once each has been answered, so an agent run stopped that way
answers with its run id instead of the SDK's bare "Connection closed".
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
import threading
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from io import TextIOWrapper
from typing import Any

import anyio
import mcp_types as types
import pydantic_core
from mcp.server.stdio import stdio_server
from mcp.shared.message import SessionMessage
from pydantic import ValidationError

__all__ = ["InFlight", "check_line", "checked_posts", "serve_stdio"]


async def serve_stdio(lowlevel: Any, on_eof: Callable[[], None] = lambda: None) -> None:
    """Serve ``lowlevel`` (the SDK's low-level ``Server``) on this process's stdin and stdout.
    When stdin ends, ``on_eof`` is called and the session ends once every request still running
    has been answered (at most ``EOF_GRACE_S`` later; the SDK then answers the rest "Connection
    closed")."""
    wire = os.dup(0)
    quiet = os.open(os.devnull, os.O_RDONLY)
    os.dup2(quiet, 0)
    os.close(quiet)
    text = TextIOWrapper(os.fdopen(wire, "rb"), encoding="utf-8", errors="replace")
    reader = _StdinLines(text)
    lines = _CheckedLines(reader, InFlight(), on_eof)
    try:
        async with stdio_server(stdin=lines) as (read, write):  # type: ignore[arg-type]
            answers = _Answers(write, lines.in_flight)
            lines.answer_with(write, answers)
            await lowlevel.run(read, answers, lowlevel.create_initialization_options())
    finally:
        if reader.done():  # else its thread still reads (blocked): closing would wait for that read
            text.close()


class _StdinLines:
    """The wire's lines, read by a daemon thread. The SDK's reader (``anyio.wrap_file``) reads in a
    worker thread whose wait cannot be cancelled, so a server stopped by Ctrl-C or SIGTERM hung
    until its client closed stdin; a daemon thread's blocked read holds nothing up."""

    def __init__(self, text: TextIOWrapper) -> None:
        self._text = text
        self._thread: threading.Thread | None = None

    def done(self) -> bool:
        return self._thread is not None and not self._thread.is_alive()

    async def __aiter__(self) -> AsyncIterator[str]:
        send, receive = anyio.create_memory_object_stream[str](16)
        token = anyio.lowlevel.current_token()

        def pump() -> None:
            try:
                for line in self._text:
                    anyio.from_thread.run(send.send, line, token=token)
            except Exception:  # stdin failed (read as its end), or the server stops: nothing to hand over
                pass
            with contextlib.suppress(Exception):
                anyio.from_thread.run(send.aclose, token=token)

        self._thread = threading.Thread(target=pump, name="tether mcp serve stdin", daemon=True)
        self._thread.start()
        async with receive:
            async for line in receive:
                yield line


EOF_GRACE_S = 10.0  # how long the requests still running when stdin ends have to answer


class _CheckedLines:
    """The lines of the wire that are JSON-RPC 2.0 messages; the others are answered at once, in
    the order they came, on the session's own output (no second writer on stdout)."""

    def __init__(self, source: Any, in_flight: InFlight, on_eof: Callable[[], None]) -> None:
        self.source = source
        self.in_flight = in_flight
        self.on_eof = on_eof
        self._write: Any = None
        self._answers: _Answers | None = None
        self._ready = anyio.Event()

    def answer_with(self, write: Any, answers: _Answers) -> None:
        self._write = write
        self._answers = answers
        self._ready.set()

    async def __aiter__(self) -> AsyncIterator[str]:
        async for line in self.source:
            if not line.strip():
                continue
            error, message = _check(line)
            if error is None:
                error = self.in_flight.claim(None, message)
            if error is None:
                self._note_cancelled(message)
                yield line
            else:
                await self._ready.wait()  # the reader may start before the session's output exists
                await self._write.send(SessionMessage(error))
        self.on_eof()
        with anyio.move_on_after(EOF_GRACE_S):
            await self.in_flight.settled(None)
            # An id is freed as its answer goes, before the writer has taken it: the session ended
            # here at once, and the answers still on their way were dropped (cancelled with it).
            if self._answers is not None:
                await self._answers.handed_over()

    def _note_cancelled(self, message: Any) -> None:
        """A request the client cancels is never answered (MCP says so): its id is free now."""
        if isinstance(message, dict) and message.get("method") == "notifications/cancelled":
            params = message.get("params")
            ident = params.get("requestId") if isinstance(params, dict) else None
            if isinstance(ident, str) or (isinstance(ident, int) and not isinstance(ident, bool)):
                self.in_flight.release(None, ident)


class _Answers:
    """The session's output over stdio: each answer written frees its request's id, before it goes
    (the client cannot send the id again before it has the answer)."""

    def __init__(self, write: Any, in_flight: InFlight) -> None:
        self._write = write
        self._in_flight = in_flight
        self._sending = 0  # messages not yet taken by the writer
        self._idle: anyio.Event | None = None  # made by whoever waits for them

    async def send(self, item: SessionMessage) -> None:
        answer = item.message
        if isinstance(answer, types.JSONRPCResponse | types.JSONRPCError) and answer.id is not None:
            self._in_flight.release(None, answer.id)
        self._sending += 1
        try:
            await self._write.send(item)
        finally:
            self._sending -= 1
            if not self._sending and self._idle is not None:
                self._idle.set()
                self._idle = None

    async def handed_over(self) -> None:
        """Wait until the writer has taken every message sent so far."""
        while self._sending:
            if self._idle is None:
                self._idle = anyio.Event()
            await self._idle.wait()

    def __getattr__(self, name: str) -> Any:  # close, aclose, clone, ...: the stream's own
        return getattr(self._write, name)

    async def __aenter__(self) -> _Answers:
        await self._write.__aenter__()
        return self

    async def __aexit__(self, *exc: object) -> Any:
        return await self._write.__aexit__(*exc)


def check_line(line: str) -> types.JSONRPCError | None:
    """The error that answers ``line``, or None when it is one JSON-RPC 2.0 message."""
    return _check(line)[0]


def _check(line: str) -> tuple[types.JSONRPCError | None, Any]:
    """The error that answers ``line``, and what it holds when it is one JSON-RPC 2.0 message."""
    try:
        message = json.loads(line)
    except RecursionError:
        return _error(_head_id(line), types.INVALID_REQUEST, _TOO_DEEP), None
    except ValueError as exc:
        return _error(None, types.PARSE_ERROR, f"Parse error: the message is not JSON ({exc})"), None
    return _check_message(line, message), message


def _check_message(line: str, message: Any) -> types.JSONRPCError | None:
    if isinstance(message, list):
        return _error(
            None,
            types.INVALID_REQUEST,
            "Invalid request: batches are not supported (MCP has none since 2025-06-18); send one message per line",
        )
    if not isinstance(message, dict):
        return _error(None, types.INVALID_REQUEST, "Invalid request: a message is a JSON object")
    ident = message.get("id")
    ident = ident if isinstance(ident, str) or (isinstance(ident, int) and not isinstance(ident, bool)) else None
    if message.get("jsonrpc") != "2.0":
        said = json.dumps(message.get("jsonrpc"))[:40]
        return _error(ident, types.INVALID_REQUEST, f'Invalid request: "jsonrpc" must be "2.0", not {said}')
    if "method" in message and "id" in message and ident is None:
        # The SDK reads a request whose id is null, a float, a bool, an object or a list as a
        # notification, which is never answered: its client would wait for ever.
        said = json.dumps(message["id"])[:40]
        return _error(None, types.INVALID_REQUEST, f"Invalid request: an id is a string or an integer, not {said}")
    method = message.get("method")
    if ident is not None and isinstance(method, str) and method.startswith("notifications/"):
        # Taken for a request of an unknown method ("Method not found"): a cancellation sent so
        # was answered, and cancelled nothing.
        return _error(
            ident, types.INVALID_REQUEST, f"Invalid request: {method[:60]} is a notification: send it without an id"
        )
    try:
        types.jsonrpc_message_adapter.validate_python(message, by_name=False)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"][1:]) or "the message"
        return _error(ident, types.INVALID_REQUEST, f"Invalid request: {where}: {first['msg']}")
    # What json reads, the SDK's parser may not: a message nested past its depth, or a string with
    # a lone surrogate escape ("\ud800", no character): it would only log the line, answering nothing.
    deep = line.count("{") + line.count("[") > _DEPTH
    if deep or _SURROGATE.search(line):
        try:
            pydantic_core.from_json(line)
        except ValueError as exc:
            if deep:
                return _error(ident, types.INVALID_REQUEST, _TOO_DEEP)
            return _error(
                ident,
                types.PARSE_ERROR,
                "Parse error: a string holds a UTF-16 surrogate escape without its pair (\\ud800 to \\udfff "
                f"alone is no character), which the server cannot read ({exc})",
            )
    return None


_DEPTH = 200  # the SDK's JSON parser (pydantic's) reads no deeper; it would only log the line
_TOO_DEEP = f"Invalid request: the message is nested too deeply (more than {_DEPTH} levels) to be read"
_SURROGATE = re.compile(r"\\u[dD][89a-fA-F]")  # a UTF-16 surrogate written as an escape (alone, or in a pair)
# A request's id among its first keys (before any nested object): a message too deep to parse at all.
_HEAD_ID = re.compile(r'"id"\s*:\s*("(?:[^"\\]|\\.){0,200}"|-?\d{1,20})\s*[,}]')


def _head_id(line: str) -> str | int | None:
    second = line.find("{", line.find("{") + 1)
    found = _HEAD_ID.search(line[: second if second >= 0 else 4096][:4096])
    return json.loads(found.group(1)) if found else None


def _error(ident: str | int | None, code: int, message: str) -> types.JSONRPCError:
    return types.JSONRPCError(jsonrpc="2.0", id=ident, error=types.ErrorData(code=code, message=message))


class InFlight:
    """The ids of the requests still running in each session (``None`` over stdio, the
    ``Mcp-Session-Id`` over HTTP), so a second request under a running one's id is refused instead
    of run beside it. Ids are compared as text, as the SDK matches them (its cancellations and its
    HTTP response streams take ``1`` and ``"1"`` for one id). As the server's middleware (over
    HTTP) it frees an id once its request has run (or was cancelled); over stdio the answer written
    frees it (``_Answers``). Either way a client may use the id again once it has the answer."""

    def __init__(self) -> None:
        self._running: set[tuple[str | None, str]] = set()
        self._released: anyio.Event | None = None  # made by whoever waits (in the event loop)

    @classmethod
    def of(cls, lowlevel: Any) -> InFlight:
        """The one ``lowlevel`` (the SDK's low-level ``Server``) frees ids with; installed on first use."""
        found = next((m for m in lowlevel.middleware if isinstance(m, cls)), None)
        if found is None:
            found = cls()
            lowlevel.middleware.append(found)
        return found

    def claim(self, session: str | None, message: Any) -> types.JSONRPCError | None:
        """None when ``message`` (checked) is no request or its id is free, which it now holds;
        else the error that answers it."""
        if not _is_request(message):
            return None
        key = (session, str(message["id"]))
        if key not in self._running:
            self._running.add(key)
            return None
        return _error(
            message["id"],
            types.INVALID_REQUEST,
            f"Invalid request: the id {json.dumps(message['id'])[:40]} is taken by a request still running in this "
            "session, so this one was not run; give every request an id of its own (to stop the running one, send "
            "notifications/cancelled with its id)",
        )

    def release(self, session: str | None, ident: str | int) -> None:
        key = (session, str(ident))
        if key in self._running:
            self._running.remove(key)
            if self._released is not None:
                self._released.set()
                self._released = None

    async def settled(self, session: str | None) -> None:
        """Wait until no request of ``session`` holds an id."""
        while any(held == session for held, _ in self._running):
            if self._released is None:
                self._released = anyio.Event()
            await self._released.wait()

    async def __call__(self, ctx: Any, call_next: Callable[[Any], Awaitable[Any]]) -> Any:
        try:
            return await call_next(ctx)
        finally:
            if ctx.request_id is not None:
                self.release(_session_of(ctx.request), ctx.request_id)


def _is_request(message: Any) -> bool:
    """Whether a checked message is a request (a method and an id), which holds its id while it runs."""
    return isinstance(message, dict) and "method" in message and "id" in message


def _session_of(request: Any) -> str | None:
    """The MCP session an HTTP request belongs to; None over stdio (one session) or before one exists."""
    headers = getattr(request, "headers", None)
    said = headers.get(_SESSION_HEADER) if headers is not None else None
    return said if isinstance(said, str) else None


_SESSION_HEADER = "mcp-session-id"
ASGIApp = Callable[[Any, Any, Any], Awaitable[None]]


def checked_posts(app: ASGIApp, lowlevel: Any, security: Any, answering: set[asyncio.Task[Any]]) -> ASGIApp:
    """``app`` (the SDK's streamable-HTTP endpoint) with each POST's message checked first, as a
    stdio line is: one that is not a single JSON-RPC 2.0 message, or a request under a running
    one's id, gets its error (HTTP 400) and never reaches the SDK. A request the SDK refuses with
    its own status (a host that is not let in, a session it does not know) is left to it.

    Each request let through is in ``answering`` (its task) until its answer is written, so a
    server that stops can wait for the answers to leave before it closes their streams."""
    from mcp.server.transport_security import DEFAULT_MAX_REQUEST_BODY_SIZE, TransportSecurityMiddleware
    from starlette.requests import Request
    from starlette.responses import Response

    guard = TransportSecurityMiddleware(security)
    in_flight = InFlight.of(lowlevel)

    async def checked(scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http" or scope["method"] != "POST":
            return await app(scope, receive, send)
        read: list[Any] = []
        body = await _body(receive, read, DEFAULT_MAX_REQUEST_BODY_SIZE)

        async def replay() -> Any:
            return read.pop(0) if read else await receive()

        refused = await guard.validate_request(Request(scope, replay), is_post=True)
        if refused is not None or body is None:  # the SDK says why (the host, the size, the client left)
            return await app(scope, replay, send)
        headers = Request(scope).headers
        session = headers.get(_SESSION_HEADER)
        error, message = _check(body)
        if error is None:
            error = _unknown_version(headers.get(_VERSION_HEADER), message)
        claimed = False
        if error is None and session is not None:
            error = in_flight.claim(session, message)
            claimed = error is None and _is_request(message)
        if error is not None:
            answer = error.model_dump_json(by_alias=True, exclude_unset=True)
            return await Response(answer, status_code=400, media_type="application/json")(scope, replay, send)
        status: list[int] = []

        async def watch(event: Any) -> None:
            if event["type"] == "http.response.start":
                status.append(event["status"])
            await send(event)

        try:
            with _answering(answering, message):
                await app(scope, replay, watch)
        finally:
            if claimed and (not status or status[0] >= 400):  # refused before it ran: no middleware freed it
                in_flight.release(session, message["id"])

    return checked


@contextlib.contextmanager
def _answering(tasks: set[asyncio.Task[Any]], message: Any) -> Iterator[None]:
    """The request's task in ``tasks`` while it is answered (a notification's is not)."""
    task = asyncio.current_task() if _is_request(message) else None
    if task is not None:
        tasks.add(task)
    try:
        yield
    finally:
        if task is not None:
            tasks.discard(task)


def _unknown_version(version: str | None, message: Any) -> types.JSONRPCError | None:
    """The error for a protocol version header the server does not speak (the SDK took one for the
    2026 revision's and asked for that revision's ``_meta`` keys, never naming the header)."""
    from mcp_types.version import SUPPORTED_PROTOCOL_VERSIONS

    if version is None or version in SUPPORTED_PROTOCOL_VERSIONS:
        return None
    ident = message.get("id") if isinstance(message, dict) else None
    return _error(
        ident,
        types.INVALID_REQUEST,
        f"Invalid request: the {_VERSION_HEADER} header says {json.dumps(version)[:40]}, which this server does not "
        f"speak ({', '.join(SUPPORTED_PROTOCOL_VERSIONS)}); send the version initialize agreed on",
    )


_VERSION_HEADER = "mcp-protocol-version"


async def _body(receive: Any, read: list[Any], limit: int) -> str | None:
    """The request's body as text, each ASGI message read kept in ``read`` to be replayed; None when
    it is not whole (the client left), larger than ``limit``, or not UTF-8: the SDK answers those."""
    body = bytearray()
    while True:
        event = await receive()
        read.append(event)
        if event["type"] != "http.request":
            return None
        body += event.get("body", b"")
        if len(body) > limit:
            return None
        if not event.get("more_body", False):
            break
    try:
        return body.decode("utf-8")
    except UnicodeDecodeError:
        return None
