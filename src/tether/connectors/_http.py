"""The streamable HTTP transport: a remote MCP server at a URL, with fixed headers or OAuth.

OAuth uses the providers' credentials (:class:`tether.providers.auth.OAuthCredentials`): the token
file is refreshed shortly before it expires, and once more when the server answers 401. The token
travels in the ``authorization`` header only; it is never logged and never part of an error.

Imported only when a server is reached over HTTP (``httpx2`` and ``mcp`` are the ``mcp`` extra's).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncGenerator, AsyncIterator, Mapping

import httpx2
from mcp.client._transport import TransportStreams
from mcp.client.streamable_http import streamable_http_client

from tether.providers.auth import Credentials

__all__ = ["HttpServer"]

CONNECT_TIMEOUT_S = 30.0
READ_TIMEOUT_S = 300.0  # a server may hold a response stream open while a tool works


class HttpServer:
    """How to reach one server over streamable HTTP."""

    pid: int | None = None  # nothing runs here

    def __init__(self, url: str, headers: Mapping[str, str], credentials: Credentials | None) -> None:
        self.url = url
        self.headers = dict(headers)
        self.credentials = credentials
        self.last_status: int | None = None  # the last HTTP error status, until a success

    def alive(self) -> bool:
        return True  # the connection's own task says when it ended

    def why(self) -> str | None:
        if self.last_status is None:
            return None
        refused = self.last_status == 401 and self.credentials is not None
        return (f"the server answered HTTP {self.last_status}" +
                (f" even to a refreshed token; check {self.credentials.hint}" if refused and self.credentials else ""))

    def last_error_line(self) -> str:
        return ""

    @contextlib.asynccontextmanager
    async def connect(self) -> AsyncIterator[TransportStreams]:
        auth = BearerAuth(self.credentials) if self.credentials is not None else None
        timeout = httpx2.Timeout(CONNECT_TIMEOUT_S, read=READ_TIMEOUT_S)
        hooks = {"response": [self._note]}
        async with (httpx2.AsyncClient(headers=self.headers, timeout=timeout, auth=auth, event_hooks=hooks) as client,
                    streamable_http_client(self.url, http_client=client) as streams):
            yield streams

    async def _note(self, response: httpx2.Response) -> None:
        if response.request.method == "DELETE":  # the session's end, after whatever went wrong
            return
        self.last_status = response.status_code if response.status_code >= 400 else None


class BearerAuth(httpx2.Auth):
    """Adds the credentials' headers; after a 401, refreshes once and sends the request again."""

    requires_request_body = True  # it may be sent twice

    def __init__(self, credentials: Credentials) -> None:
        self.credentials = credentials
        self._lock = asyncio.Lock()

    async def async_auth_flow(self, request: httpx2.Request) -> AsyncGenerator[httpx2.Request, httpx2.Response]:
        sent = await self.credentials.headers()
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
        request.headers.update(current)
        yield request
