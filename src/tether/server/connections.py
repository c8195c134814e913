"""Limits on connections, for ``tether serve`` facing clients directly (no reverse proxy in front).

uvicorn times out an idle keep-alive connection, but not one that connects and never finishes its
request headers, and it takes as many connections as the process has file descriptors. A few
hundred such clients (slowloris) starved a server of descriptors, so normal requests timed out.

:func:`guarded_protocol` wraps uvicorn's HTTP protocol class with two limits:

* **a header timeout**: a request whose headers are not complete ``header_timeout_s`` after its
  first byte (or after the connection opened) gets ``408`` and the connection is closed;
* **connections per client address**: past ``per_client`` open connections from one address, a new
  one gets ``429`` and is closed at once (its descriptor is free again).

Behind a reverse proxy every client arrives from the proxy's address: turn the per-client limit
off there (``max_connections_per_client = 0``) and let the proxy limit each client instead.
"""

from __future__ import annotations

import asyncio
from typing import Any

__all__ = ["DEFAULT_HEADER_TIMEOUT_S", "DEFAULT_PER_CLIENT", "guarded_protocol"]

DEFAULT_HEADER_TIMEOUT_S = 10.0
DEFAULT_PER_CLIENT = 64


def _reply(status: str, message: str) -> bytes:
    import json

    code = status.split(" ", 1)[1].lower().replace(" ", "_")
    body = json.dumps({"error": {"code": code, "message": message}}).encode()
    head = f"HTTP/1.1 {status}\r\ncontent-type: application/json\r\nconnection: close\r\n"
    return f"{head}content-length: {len(body)}\r\n\r\n".encode() + body


TIMED_OUT = _reply("408 Request Timeout", "the request headers did not arrive in time")
TOO_MANY = _reply("429 Too Many Requests", "too many open connections from this address; close some and retry")


class _Limits:
    def __init__(self, header_timeout_s: float, per_client: int) -> None:
        self.header_timeout_s = header_timeout_s
        self.per_client = per_client
        self.open_by_client: dict[str, int] = {}


class _Guarded:
    """Mixed in before uvicorn's protocol class (see :func:`guarded_protocol`)."""

    limits: _Limits
    _client_host: str | None = None
    _header_timer: asyncio.TimerHandle | None = None

    def connection_made(self, transport: Any) -> None:
        peer = transport.get_extra_info("peername")
        host = str(peer[0]) if isinstance(peer, tuple | list) and peer else None
        super().connection_made(transport)  # type: ignore[misc]
        if host is not None:
            self._client_host = host
            counts = self.limits.open_by_client
            counts[host] = counts.get(host, 0) + 1
            if self.limits.per_client and counts[host] > self.limits.per_client:
                transport.write(TOO_MANY)
                transport.close()
                return
        self._arm()

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        host, self._client_host = self._client_host, None
        if host is not None:
            counts = self.limits.open_by_client
            left = counts.get(host, 1) - 1
            if left > 0:
                counts[host] = left
            else:
                counts.pop(host, None)
        super().connection_lost(exc)  # type: ignore[misc]

    def data_received(self, data: bytes) -> None:
        if self._header_timer is None and self._between_requests():
            self._arm()  # the first bytes of the next request on a kept-alive connection
        super().data_received(data)  # type: ignore[misc]
        if not self._between_requests():
            self._disarm()  # its headers are complete: the request is the app's now

    def _between_requests(self) -> bool:
        cycle = getattr(self, "cycle", None)
        return cycle is None or bool(getattr(cycle, "response_complete", False))

    def _arm(self) -> None:
        self._disarm()
        loop = asyncio.get_running_loop()
        self._header_timer = loop.call_later(self.limits.header_timeout_s, self._headers_too_slow)

    def _disarm(self) -> None:
        if self._header_timer is not None:
            self._header_timer.cancel()
            self._header_timer = None

    def _headers_too_slow(self) -> None:
        self._header_timer = None
        transport = getattr(self, "transport", None)
        if transport is None or transport.is_closing() or not self._between_requests():
            return
        transport.write(TIMED_OUT)
        transport.close()


def guarded_protocol(header_timeout_s: float, per_client: int, base: type[Any] | None = None) -> type[Any]:
    """uvicorn's HTTP protocol class (``base``, default the one uvicorn would pick) with a header
    timeout and a limit on open connections per client address (0: no limit)."""
    if base is None:
        from uvicorn.protocols.http.auto import AutoHTTPProtocol

        base = AutoHTTPProtocol
    return type(f"Guarded{base.__name__}", (_Guarded, base), {"limits": _Limits(header_timeout_s, per_client)})
