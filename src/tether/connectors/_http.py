"""The HTTP transports: a remote MCP server at a URL, with fixed headers or OAuth, over streamable
HTTP or (``transport = "sse"``) the legacy HTTP+SSE transport that older servers still use.

OAuth uses the providers' credentials (:class:`tether.providers.auth.OAuthCredentials`): the token
file is refreshed shortly before it expires, and once more when the server answers 401. The token
travels in the ``authorization`` header only; it is never logged and never part of an error: a
server that echoes it (or a configured header's value) into an error, a result, a progress message or
a question has it replaced by ``[redacted]`` (:class:`_Sent`, :meth:`HttpServer.redact`).

Below the SDK's client, :class:`_Checked` reads each answer to a request first (at most
``MAX_RESPONSE_BYTES``) and turns what the SDK would report badly into a JSON-RPC error in words:
an HTTP error status (``HTTP 500 Internal Server Error``, and which scopes a 403 asks for), a body
that is not JSON or not JSON-RPC (without the body: it may hold anything), an answer too large to
read. The SDK then hands the call that error, and the session goes on. An event stream is passed on
as it comes, a line at a time, with an answer whose ``result`` is not an object turned into such an
error too.

Imported only when a server is reached over HTTP (``httpx2`` and ``mcp`` are the ``mcp`` extra's).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable, Mapping
from typing import Any

import httpx2
import pydantic_core
from mcp.client._transport import TransportStreams
from mcp.client.streamable_http import streamable_http_client

from tether._secrets import url_secrets
from tether.connectors._link import REDACTED, result_not_an_object, withheld
from tether.providers.auth import Credentials

__all__ = ["HttpServer"]

CONNECT_TIMEOUT_S = 30.0
READ_TIMEOUT_S = 300.0  # a server may hold a response stream open while a tool works
# The DELETE that ends a session: a server that never answered it held the end of every run that
# used it for 15 s (the connection's own bound on closing).
CLOSE_TIMEOUT_S = 2.0
SSE_IDLE_S = 3600.0  # legacy SSE: the one event stream may be quiet between a run's turns
MAX_RESPONSE_BYTES = 16 * 1024 * 1024  # one JSON answer; the SDK caps each event of a stream at 1 MiB
_EVENT_LIMIT = 2 * 1024 * 1024  # a line of an event stream held to be checked (past it, passed on unchecked)
# Configured headers that say what the client is and takes, never who it is: their values are not
# taken out of the answers (a server may well write its own protocol version or content type back).
_PLAIN_HEADERS = frozenset(
    {
        "accept",
        "accept-encoding",
        "accept-language",
        "cache-control",
        "content-type",
        "mcp-protocol-version",
        "user-agent",
    }
)


class HttpServer:
    """How to reach one server over streamable HTTP."""

    pid: int | None = None  # nothing runs here
    calls_are_separate = True  # each call has its own HTTP answer: one that breaks leaves the session

    def __init__(
        self,
        url: str,
        headers: Mapping[str, str],
        credentials: Credentials | None,
        *,
        sse: bool = False,
        flow: Any = None,
    ) -> None:
        self.url = url
        self.sse = sse  # the legacy HTTP+SSE transport (protocol 2024-11-05): GET an event stream, POST to it
        self.headers = dict(headers)
        self.credentials = credentials
        self.last_status: int | None = None  # the last HTTP error status, until a success
        # The server answered 404 to a request of the session: it no longer knows it (it restarted,
        # or ended it). MCP asks the client to start a new session; the connection counts as ended.
        self.session_gone = False
        # The MCP authorization flow (tether.connectors._oauth), or refresh tokens, or nothing.
        self.flow = flow
        self._auth = BearerAuth(credentials) if credentials is not None else None
        self._sent = _Sent(self.headers, url)  # what the answers are cleaned of, whatever their kind

    def alive(self) -> bool:
        return not self.session_gone  # otherwise the connection's own task says when it ended

    def why(self) -> str | None:
        if self.session_gone:
            return "the server no longer knows the session (HTTP 404: it restarted, or ended the session)"
        if self.last_status is None:
            return None
        refused = self.last_status == 401 and self.credentials is not None
        said = f"the server answered HTTP {self.last_status}" + (
            f" even to a refreshed token; check {self.credentials.hint}" if refused and self.credentials else ""
        )
        if self.last_status in (404, 405) and not self.sse:
            said += (
                " (if it is an older server with the legacy SSE transport, often at a URL ending in /sse, set "
                'transport = "sse" in its [mcp.NAME]; otherwise check the URL)'
            )
        return said

    def last_error_line(self) -> str:
        return ""

    def redact(self, text: str) -> str:
        """``text`` without the header values and tokens sent to the server."""
        secrets = set(self._sent.values)  # the configured headers, and the Authorization headers sent
        if self._auth is not None:
            secrets |= self._auth.sent
        if self.flow is not None:
            secrets |= self.flow.context.storage.secrets()
        return withheld(text, secrets)

    @contextlib.asynccontextmanager
    async def connect(self) -> AsyncIterator[TransportStreams]:
        timeout = httpx2.Timeout(CONNECT_TIMEOUT_S, read=READ_TIMEOUT_S)
        hooks = {"response": [self._note]}
        transport = _Checked(httpx2.AsyncHTTPTransport(), MAX_RESPONSE_BYTES, self._sent)
        if self.sse:
            from mcp.client.sse import sse_client

            def make_client(
                headers: dict[str, str] | None = None, timeout: httpx2.Timeout | None = None, auth: Any = None
            ) -> httpx2.AsyncClient:
                return httpx2.AsyncClient(
                    headers=headers, timeout=timeout, auth=auth, event_hooks=hooks, transport=transport
                )

            async with sse_client(
                self.url,
                headers=self.headers,
                timeout=CONNECT_TIMEOUT_S,
                sse_read_timeout=SSE_IDLE_S,
                httpx_client_factory=make_client,
                auth=self._auth or self.flow,
            ) as streams:
                yield streams
            return
        async with (
            httpx2.AsyncClient(
                headers=self.headers,
                timeout=timeout,
                auth=self._auth or self.flow,
                event_hooks=hooks,
                transport=transport,
            ) as client,
            streamable_http_client(self.url, http_client=client) as streams,
        ):
            yield streams

    async def _note(self, response: httpx2.Response) -> None:
        if response.request.method == "DELETE":  # the session's end, after whatever went wrong
            return
        self.last_status = response.status_code if response.status_code >= 400 else None
        if response.status_code == 404 and response.request.headers.get("mcp-session-id"):
            self.session_gone = True


class BearerAuth(httpx2.Auth):
    """Adds the credentials' headers; after a 401, refreshes once and sends the request again."""

    requires_request_body = True  # it may be sent twice

    def __init__(self, credentials: Credentials) -> None:
        self.credentials = credentials
        self.sent: set[str] = set()  # header values and tokens sent, for HttpServer.redact
        self._lock = asyncio.Lock()

    async def async_auth_flow(self, request: httpx2.Request) -> AsyncGenerator[httpx2.Request, httpx2.Response]:
        sent = await self.credentials.headers()
        self._remember(sent)
        request.headers.update(sent)
        response = yield request
        if response.status_code != 401:
            return
        async with self._lock:  # several requests may meet the same 401: one refresh between them
            current = await self.credentials.headers()
            if current == sent and await self.credentials.refresh():
                current = await self.credentials.headers()
        if current == sent:
            return  # nothing fresher to offer: the 401 stands
        self._remember(current)
        request.headers.update(current)
        yield request

    def _remember(self, headers: Mapping[str, str]) -> None:
        for value in headers.values():
            self.sent.add(value)
            scheme, _, token = value.partition(" ")
            if token and scheme.lower() == "bearer":
                self.sent.add(token)


class _TooLarge(Exception):
    pass


class _Sent:
    """The secrets sent to a server: the values of its configured headers, each Authorization
    header as sent (with its bearer token, refreshed or not) and the secrets of its URL (a password,
    ``?api_key=X``), each of at least 8 characters. A server that writes one back (a result or an
    error quoting the request, a progress message, a question) has it replaced by ``[redacted]``
    before the SDK reads the answer, so neither the model nor the run sees it."""

    def __init__(self, headers: Mapping[str, str], url: str = "") -> None:
        self.values = {v for k, v in headers.items() if len(v) >= 8 and k.lower() not in _PLAIN_HEADERS}
        self.values |= {v for v in url_secrets(url) if len(v) >= 8}

    def note(self, request: httpx2.Request) -> None:
        said = request.headers.get("authorization")
        if said:
            scheme, _, token = said.partition(" ")
            found = {said, token} if scheme.lower() == "bearer" else {said}
            self.values |= {v for v in found if len(v) >= 8}

    def scrub(self, data: bytes) -> bytes:
        for secret in sorted(self.values, key=len, reverse=True):
            data = data.replace(secret.encode(), REDACTED.encode())
        return data


class _Checked(httpx2.AsyncBaseTransport):
    """The HTTP transport, with each answer to a JSON-RPC request read and checked before the SDK
    sees it (see the module's description). Left alone: notifications, event streams (read as they
    come), 401 (for :class:`BearerAuth`), 404 (the SDK's "session terminated") and redirects. A
    request's event stream is read until tether cancels the request (:meth:`_abandon`)."""

    def __init__(self, inner: httpx2.AsyncBaseTransport, limit: int, sent: _Sent) -> None:
        self._inner = inner
        self._limit = limit
        self._sent = sent
        self._answering: dict[str, _CheckedEvents] = {}  # a request's id, as JSON -> its answer's event stream
        # A request's id, as JSON -> the task sending it and reading its answer's head (and a JSON
        # answer's body): until then a cancellation ends that task, and with it the connection.
        self._waiting: dict[str, asyncio.Task[httpx2.Response]] = {}
        self._cancelled: dict[str, None] = {}  # ids cancelled before their request was sent (the last few)
        self._sent_ids: dict[str, None] = {}  # ids sent (the last few): their cancellation came late

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        self._sent.note(request)
        if request.method == "POST":
            self._abandon(request)
        if request.method == "DELETE":
            return await self._end_session(request)
        request_id = _request_id(request) if request.method == "POST" else None
        if request_id is None:
            return await self._answer(request)
        key = json.dumps(request_id)
        if key in self._cancelled:  # cancelled before it was sent: the server never needs to see it
            return _error(request, 200, request_id, "the request was cancelled before it was sent")
        _remember(self._sent_ids, key)
        work = asyncio.ensure_future(self._answer(request))
        self._waiting[key] = work
        try:
            return await work
        except asyncio.CancelledError:
            current = asyncio.current_task()
            if not work.cancelled() or (current is not None and current.cancelling()):
                raise  # the session itself is closing (or the error is not ours): as before
            # Cancelled by tether (a timeout, a Stop) before the server answered: the connection is
            # closed, so a server that never answers holds nothing for READ_TIMEOUT_S, and what it
            # sends later is never read. The SDK gets an answer for a request nobody waits for.
            return _error(request, 200, request_id, "the request was cancelled before the server answered")
        finally:
            if self._waiting.get(key) is work:
                del self._waiting[key]

    async def _answer(self, request: httpx2.Request) -> httpx2.Response:
        try:
            response = await self._inner.handle_async_request(request)
        except httpx2.RemoteProtocolError as exc:  # a header past h11's limit, a broken status line
            request_id = _request_id(request) if request.method == "POST" else None
            if request_id is None:
                raise
            # Its words are not quoted: they may quote what the server sent.
            return _error(
                request,
                200,
                request_id,
                f"its answer broke the HTTP protocol ({type(exc).__name__}), so it was not read",
            )
        request_id = _request_id(request) if request.method == "POST" else None
        status = response.status_code
        streamed = response.headers.get("content-type", "").lower().startswith("text/event-stream")
        if streamed and status < 400:
            return _checked_events(request, response, self._sent, self._answering, request_id)
        if request_id is None or status in (202, 401, 404) or 300 <= status < 400 or (streamed and status < 400):
            return response
        try:
            body = await _read(response, self._limit)
        except _TooLarge:
            too_large = f"its answer is larger than {self._limit // (1024 * 1024)} MiB, so it was not read"
            return _error(request, 200, request_id, too_large)
        except httpx2.TransportError as exc:
            return _error(request, 200, request_id, f"its answer broke off ({type(exc).__name__})")
        body = self._sent.scrub(body)
        problem = _problem(status, response, body)
        if problem is None:
            headers = [
                (k, v)
                for k, v in response.headers.multi_items()
                if k.lower() not in ("content-length", "content-encoding", "transfer-encoding")
            ]
            return httpx2.Response(status, headers=headers, content=body, request=request)
        return _error(request, 200 if status < 400 else status, request_id, problem)

    async def _end_session(self, request: httpx2.Request) -> httpx2.Response:
        """The DELETE that ends the session, a courtesy (MCP: the client SHOULD send it): waited for
        at most CLOSE_TIMEOUT_S, as a stdio server's close is, and a server that does not answer it,
        or is gone, is left as it is (the SDK would log a bare "Session termination failed")."""
        try:
            async with asyncio.timeout(CLOSE_TIMEOUT_S):
                response = await self._inner.handle_async_request(request)
                await response.aread()
                return response
        except (TimeoutError, httpx2.TransportError):
            return httpx2.Response(204, request=request)

    def _abandon(self, request: httpx2.Request) -> None:
        """When ``request`` cancels a request (``notifications/cancelled``: a timeout, a Stop), stop
        reading that request's event stream: a server that goes on writing to it (progress without
        end) was read, and its events parsed, until the session closed, and the SDK logged a
        traceback for each event that came as the session closed."""
        try:
            message = json.loads(request.content)
        except (ValueError, httpx2.RequestNotRead):
            return
        if not isinstance(message, dict) or message.get("method") != "notifications/cancelled":
            return
        params = message.get("params")
        cancelled = params.get("requestId") if isinstance(params, dict) else None
        if cancelled is None:
            return
        key = json.dumps(cancelled)
        stream = self._answering.pop(key, None)
        if stream is not None:
            stream.abandoned = True
        waiting = self._waiting.pop(key, None)
        if waiting is not None:
            waiting.cancel()
        elif stream is None and key not in self._sent_ids:  # not sent yet: a Stop the instant it was asked
            _remember(self._cancelled, key)

    async def aclose(self) -> None:
        await self._inner.aclose()


def _remember(recent: dict[str, None], key: str) -> None:
    recent[key] = None
    while len(recent) > 256:
        del recent[next(iter(recent))]


def _checked_events(
    request: httpx2.Request,
    response: httpx2.Response,
    sent: _Sent,
    answering: dict[str, _CheckedEvents] | None = None,
    request_id: Any = None,
) -> httpx2.Response:
    """``response`` (an event stream) with each event's answer checked as it passes: one whose
    ``result`` is not an object becomes an error answer to its request (the SDK would report it in a
    many-line dump quoting it, or, on the legacy SSE transport, leave its call to its timeout), and
    each line cleaned of the secrets sent to the server. A compressed stream (a proxy's gzip) is read
    decoded, its content-encoding dropped: passed on as it came, it escaped both."""
    encoded = bool(response.headers.get("content-encoding"))
    dropped = ("content-length", "content-encoding") if encoded else ("content-length",)
    headers = [(k, v) for k, v in response.headers.multi_items() if k.lower() not in dropped]
    chunks = response.aiter_bytes() if encoded else response.stream
    stream = _CheckedEvents(chunks, sent, response.aclose)
    if answering is not None and request_id is not None:  # an answer tether may cancel
        key = json.dumps(request_id)
        answering[key] = stream
        stream.done = lambda: answering.pop(key, None) if answering.get(key) is stream else None
    return httpx2.Response(
        response.status_code, headers=headers, stream=stream, request=request, extensions=response.extensions
    )


class _CheckedEvents(httpx2.AsyncByteStream):
    """An event stream passed on line by line, each ``data:`` line that is a whole JSON-RPC answer
    checked by :func:`result_not_an_object`. A line longer than ``_EVENT_LIMIT`` is passed on as it
    comes, unchecked (the SDK refuses such an event itself)."""

    def __init__(self, inner: Any, sent: _Sent, close: Callable[[], Awaitable[None]]) -> None:
        self._inner = inner
        self._sent = sent
        self._close = close
        self.abandoned = False  # its request was cancelled: the stream ends at its next chunk
        self.done: Callable[[], object] = lambda: None  # no longer an answer to cancel

    async def __aiter__(self) -> AsyncIterator[bytes]:
        try:
            async for chunk in self._lines():
                yield chunk
        finally:
            self.done()

    async def _lines(self) -> AsyncIterator[bytes]:
        pending = b""
        passing = False  # inside a line too long to check: passed on as it comes
        async for chunk in self._inner:
            if self.abandoned:
                return
            if passing:
                end = chunk.find(b"\n")
                if end < 0:
                    yield chunk
                    continue
                yield chunk[: end + 1]
                chunk, passing = chunk[end + 1 :], False
            pending += chunk
            *lines, pending = pending.split(b"\n")
            if lines:
                yield b"".join(_checked_line(self._sent.scrub(line)) + b"\n" for line in lines)
            if len(pending) > _EVENT_LIMIT:
                yield pending
                pending, passing = b"", True
        if pending:
            yield _checked_line(self._sent.scrub(pending))

    async def aclose(self) -> None:
        self.done()
        await self._close()


def _checked_line(line: bytes) -> bytes:
    if not line.startswith(b"data:") or b'"result"' not in line:
        return line
    try:
        message = json.loads(line[5:])
    except RecursionError:
        message = None
    except ValueError:
        return line
    problem = result_not_an_object(message) or too_deep(line[5:])
    if message is None and problem is not None:  # too deep for json too: its id is read from its head
        found = _ANSWER_HEAD.search(line[5:4096])
        message = {"id": json.loads(found.group(1))} if found else None
    ident = message.get("id") if isinstance(message, dict) else None
    if problem is None or isinstance(ident, bool) or not isinstance(ident, int | str):
        return line
    error = {"jsonrpc": "2.0", "id": ident, "error": {"code": -32603, "message": problem}}
    return b"data: " + json.dumps(error).encode() + (b"\r" if line.endswith(b"\r") else b"")


async def _read(response: httpx2.Response, limit: int) -> bytes:
    chunks: list[bytes] = []
    size = 0
    try:
        async for chunk in response.aiter_bytes():  # decoded: a compressed bomb counts at full size
            size += len(chunk)
            if size > limit:
                raise _TooLarge
            chunks.append(chunk)
    finally:
        await response.aclose()
    return b"".join(chunks)


def _request_id(request: httpx2.Request) -> Any:
    try:
        message = json.loads(request.content)
    except (ValueError, httpx2.RequestNotRead):
        return None
    return message.get("id") if isinstance(message, dict) and "method" in message else None


def _problem(status: int, response: httpx2.Response, body: bytes) -> str | None:
    """What is wrong with an answer, in words that quote nothing the server wrote; None if nothing."""
    try:
        message = json.loads(body)
    except RecursionError:
        return too_deep(body)
    except ValueError as exc:
        message = exc
    is_jsonrpc = (
        isinstance(message, dict)
        and message.get("jsonrpc") == "2.0"
        and ("result" in message or isinstance(message.get("error"), dict))
    )
    if status >= 400:
        if is_jsonrpc and isinstance(message, dict) and "error" in message:
            return None  # the server's own JSON-RPC error: the SDK passes it on
        said = f"it answered HTTP {status} {response.reason_phrase}".rstrip()
        scope = re.search(r'scope="([^"]*)"', response.headers.get("www-authenticate", ""))
        if status == 403 and scope:
            said += (
                f" (it needs the scopes {scope.group(1)!r}: add them to scopes in [mcp.NAME] and "
                "log in again with tether mcp login)"
            )
        return said
    if isinstance(message, json.JSONDecodeError):
        return f"its answer is not JSON ({message.msg} at byte {message.pos})"
    if isinstance(message, ValueError):
        return "its answer is not JSON (not UTF-8 text)"
    if not is_jsonrpc:
        return "its answer is JSON but not a JSON-RPC response"
    return result_not_an_object(message) or too_deep(body)


# The top-level id of an answer, as the SDKs write it: ``{"jsonrpc": "2.0", "id": ..., "result": ...``.
_ANSWER_HEAD = re.compile(
    rb'^\s*\{\s*"jsonrpc"\s*:\s*"2\.0"\s*,\s*"id"\s*:\s*("(?:[^"\\]|\\.){0,200}"|-?\d{1,20})\s*,\s*"result"\s*:'
)
_DEPTH = 200  # the SDK's JSON parser (pydantic's) reads no deeper than this


def too_deep(body: bytes) -> str | None:
    """Why an answer the SDK's parser cannot read (nested past its recursion limit) is refused,
    in its parser's words, which quote none of it; None for one it can read. Parsed again only when
    it has that many brackets at all."""
    if body.count(b"{") + body.count(b"[") <= _DEPTH:
        return None
    try:
        pydantic_core.from_json(body)
    except ValueError as exc:
        return f"its answer could not be read ({str(exc).splitlines()[0][:200]})"
    return None


def _error(request: httpx2.Request, status: int, request_id: Any, problem: str) -> httpx2.Response:
    error = {"jsonrpc": "2.0", "id": request_id, "error": {"code": -32603, "message": problem}}
    return httpx2.Response(status, json=error, request=request)
