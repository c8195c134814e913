"""``tether mcp serve`` over stdio, with every line answered as JSON-RPC 2.0 asks.

The SDK's stdio transport hands a line it cannot parse to the session as an exception, which logs
it and answers nothing: a client that sent non-JSON, ``"jsonrpc": "1.0"`` or a batch waits for ever.
Here each line is checked first, and one that is not a single JSON-RPC 2.0 message gets its error at
once: ``-32700`` (parse error) for what is not JSON (or JSON the SDK's parser refuses: a lone
surrogate escape), ``-32600`` (invalid request) for the rest, with the request's id when it has a
usable one. MCP sends one message per line and has no batches since
the 2025-06-18 revision. The SDK still claims stdout (stray prints go to stderr, not the wire);
stdin is claimed here the same way, so a child process started by an agent reads nothing of it.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import AsyncIterator
from io import TextIOWrapper
from typing import Any

import anyio
import mcp_types as types
import pydantic_core
from mcp.server.stdio import stdio_server
from mcp.shared.message import SessionMessage
from pydantic import ValidationError

__all__ = ["check_line", "serve_stdio"]


async def serve_stdio(lowlevel: Any) -> None:
    """Serve ``lowlevel`` (the SDK's low-level ``Server``) on this process's stdin and stdout."""
    wire = os.dup(0)
    quiet = os.open(os.devnull, os.O_RDONLY)
    os.dup2(quiet, 0)
    os.close(quiet)
    text = TextIOWrapper(os.fdopen(wire, "rb"), encoding="utf-8", errors="replace")
    lines = _CheckedLines(anyio.wrap_file(text))
    try:
        async with stdio_server(stdin=lines) as (read, write):  # type: ignore[arg-type]
            lines.answer_with(write)
            await lowlevel.run(read, write, lowlevel.create_initialization_options())
    finally:
        text.close()


class _CheckedLines:
    """The lines of the wire that are JSON-RPC 2.0 messages; the others are answered at once, in
    the order they came, on the session's own output (no second writer on stdout)."""

    def __init__(self, source: Any) -> None:
        self.source = source
        self._write: Any = None
        self._ready = anyio.Event()

    def answer_with(self, write: Any) -> None:
        self._write = write
        self._ready.set()

    async def __aiter__(self) -> AsyncIterator[str]:
        async for line in self.source:
            if not line.strip():
                continue
            error = check_line(line)
            if error is None:
                yield line
            else:
                await self._ready.wait()  # the reader may start before the session's output exists
                await self._write.send(SessionMessage(error))


def check_line(line: str) -> types.JSONRPCError | None:
    """The error that answers ``line``, or None when it is one JSON-RPC 2.0 message."""
    try:
        message = json.loads(line)
    except RecursionError:
        return _error(_head_id(line), types.INVALID_REQUEST, _TOO_DEEP)
    except ValueError as exc:
        return _error(None, types.PARSE_ERROR, f"Parse error: the line is not JSON ({exc})")
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
