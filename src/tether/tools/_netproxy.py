"""The sandbox's only way out: an HTTP proxy tether runs for one command, with an allow-list of hosts.

Inside the sandbox there is no network but its own loopback. When hosts are allowed, a small
bridge (``_bridge.py``) listens on that loopback, points ``HTTP(S)_PROXY`` at itself and forwards
each connection through a Unix socket, the one file shared with the sandbox, to this proxy. The
proxy reads one request (``CONNECT host:port`` for HTTPS, an absolute ``http://`` URL otherwise),
checks the host against the allow-list, resolves it itself, refuses private and local addresses
as ``web_fetch`` does (unless allowed by ``host:port``), connects to the address it checked, and
logs every decision. DNS never happens inside the sandbox, and nothing else leaves it.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import NoReturn

from tether.tools.base import ToolError

__all__ = ["NetProxy", "host_allowed"]

_log = logging.getLogger("tether.tools.shell")
_MAX_HEAD = 65536
SOCKET_NAME = "proxy.sock"


def host_allowed(host: str, port: int, allow: Sequence[str]) -> bool:
    """Whether ``host:port`` is on the list: ``pypi.org`` (any port), ``*.github.com`` (its
    subdomains), ``127.0.0.1:8080`` (that port only)."""
    host = host.lower().rstrip(".")
    for entry in allow:
        name, _, only = entry.lower().rpartition(":") if _has_port(entry) else (entry.lower(), "", "")
        if only and int(only) != port:
            continue
        if name == host or (name.startswith("*.") and host.endswith(name[1:])):
            return True
    return False


def _has_port(entry: str) -> bool:
    head, colon, tail = entry.rpartition(":")
    return bool(colon and head and tail.isdigit() and "]" not in tail)


@dataclass
class NetProxy:
    """One command's proxy: ``start()`` gives the directory holding its socket; ``close()`` ends it."""

    allow: tuple[str, ...]
    on_decision: Callable[[str], None] | None = None  # each decision in words (the run's trace)
    allowed: list[str] = field(default_factory=list)
    refused: list[str] = field(default_factory=list)
    _server: asyncio.AbstractServer | None = None
    _dir: tempfile.TemporaryDirectory[str] | None = None
    _tasks: set[asyncio.Task[None]] = field(default_factory=set)

    async def start(self) -> Path:
        self._dir = tempfile.TemporaryDirectory(prefix="tether-proxy-")
        path = Path(self._dir.name)
        self._server = await asyncio.start_unix_server(self._serve, path=str(path / SOCKET_NAME))
        return path

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
        for task in list(self._tasks):
            task.cancel()
        if self._tasks:
            await asyncio.gather(*self._tasks, return_exceptions=True)
        if self._dir is not None:
            self._dir.cleanup()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._tasks.add(task)
        try:
            await self._one(reader, writer)
        except (OSError, asyncio.IncompleteReadError, asyncio.LimitOverrunError, ValueError):
            pass
        finally:
            self._tasks.discard(task)
            writer.close()

    async def _one(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        head = await reader.readuntil(b"\r\n\r\n")
        if len(head) > _MAX_HEAD:
            return
        line, _, rest = head.partition(b"\r\n")
        try:
            method, target, version = line.decode("latin-1").split(" ", 2)
            host, port, forward = _destination(method, target, version, rest)
        except ValueError as exc:  # the client hears why, instead of a closed connection
            await _answer(writer, b"400 Bad Request", f"tether's sandbox proxy could not read the request: {exc}")
            return
        try:
            upstream = await self._connect(host, port)
        except ToolError as exc:
            await _answer(writer, b"403 Forbidden", f"blocked by tether's sandbox: {exc}")
            return
        except OSError as exc:  # allowed, but it did not answer
            await _answer(writer, b"502 Bad Gateway", f"tether's proxy could not reach {host}:{port}: {exc.strerror}")
            return
        up_reader, up_writer = upstream
        if method == "CONNECT":
            writer.write(b"HTTP/1.1 200 Connection established\r\n\r\n")
        else:
            up_writer.write(forward)
        try:
            await asyncio.gather(_pipe(reader, up_writer), _pipe(up_reader, writer))
        finally:
            up_writer.close()

    async def _connect(self, host: str, port: int) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        from tether.tools.web import check_address

        where = f"{host}:{port}"
        if not host_allowed(host, port, self.allow):
            self._refuse(where, "not on the allow-list")
        loop = asyncio.get_running_loop()
        try:
            infos = await loop.getaddrinfo(host, port, type=socket.SOCK_STREAM)
        except socket.gaierror as exc:
            self._refuse(where, f"could not resolve it: {exc.strerror}")
        ip = str(infos[0][4][0])
        try:
            check_address(ip, host, port, [a for a in self.allow if _has_port(a)])
        except ToolError:
            self._refuse(where, f"it resolves to {ip}, a private or local address (allow it as {where!r})")
        self.allowed.append(where)
        self._say(f"sandbox proxy: {where} allowed ({ip})")
        return await asyncio.open_connection(ip, port)

    def _refuse(self, where: str, why: str) -> NoReturn:
        self.refused.append(where)
        self._say(f"sandbox proxy: {where} refused: {why}")
        raise ToolError(f"{where} refused: {why}")

    def _say(self, line: str) -> None:
        _log.info("%s", line)
        if self.on_decision is not None:
            self.on_decision(line)


def _destination(method: str, target: str, version: str, rest: bytes) -> tuple[str, int, bytes]:
    """(host, port, the request to send on) for ``CONNECT host:port`` or ``GET http://host/path``."""
    if method == "CONNECT":
        host, _, port = target.rpartition(":")
        return host.strip("[]"), _port(port), b""
    if not target.startswith("http://"):
        raise ValueError("only CONNECT and absolute http:// requests go through the proxy")
    hostport, slash, path = target[len("http://") :].partition("/")
    host, _, port = hostport.rpartition(":") if ":" in hostport.rsplit("]", 1)[-1] else (hostport, "", "80")
    request = f"{method} {slash}{path} {version}\r\n".encode("latin-1") + rest
    return host.strip("[]"), _port(port or "80"), request


def _port(text: str) -> int:
    number = int(text)
    if not 0 < number < 65536:  # past 65535, connecting raised OverflowError, unhandled
        raise ValueError(f"port {text} is out of range (1-65535)")
    return number


async def _answer(writer: asyncio.StreamWriter, status: bytes, text: str) -> None:
    body = f"{text}\n".encode()
    writer.write(b"HTTP/1.1 %s\r\nContent-Type: text/plain\r\nConnection: close\r\n" % status)
    writer.write(b"Content-Length: %d\r\n\r\n%s" % (len(body), body))
    await writer.drain()


async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while chunk := await reader.read(65536):
            writer.write(chunk)
            await writer.drain()
    except OSError:
        pass
    finally:
        with contextlib.suppress(OSError):
            if writer.can_write_eof():
                writer.write_eof()
