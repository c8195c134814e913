"""The stdio transport: an MCP server as a child process speaking JSON-RPC lines on stdin and stdout.

Not the SDK's ``stdio_client``: that one passes HOME, USER, SHELL and more of tether's own
environment to the server and keeps the process to itself. Here the server gets exactly its
configured environment plus PATH; it runs in a session (and process group) of its own, so a Ctrl-C
at tether's terminal does not reach it and stopping it reaches what it started; its pid is known;
and the tail of its stderr says why it died.

Imported only when a stdio server starts (``mcp`` and ``anyio`` are the ``mcp`` extra's).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
import signal
from collections import deque
from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import anyio
import mcp_types
from mcp.client._transport import TransportStreams
from mcp.shared.message import SessionMessage
from pydantic import ValidationError

from tether._secrets import table_secrets, worth_hiding
from tether.connectors._acting import SERVE_DEPTH
from tether.connectors._client_side import printable
from tether.connectors._link import REDACTED, result_not_an_object, withheld
from tether.processes import descendants, kill_process_tree, kill_tree, process_alive, process_identity
from tether.tools.base import _in_thread

__all__ = ["StdioProcess"]

LINE_LIMIT = 64 * 1024 * 1024  # one JSON-RPC message per line; images make long lines
CLOSE_GRACE_S = 2.0  # after stdin closes, before SIGTERM (the MCP spec's shutdown order)
TERM_GRACE_S = 2.0  # after SIGTERM, before SIGKILL
STDERR_LINES = 20
STDERR_LINE_BYTES = 4096  # of each stderr line kept: the tail says why it died, it is no log
STDERR_CHUNK = 64 * 1024
# The most of a server's last stderr line a start failure quotes: a Python exception's whole message
# (mcp 2's "No module named 'mcp.server.fastmcp'" ends in its fix, past 300 characters).
LAST_WORDS_CHARS = 1_000
EXIT_DRAIN_S = 0.5  # after the server exits, for its last words on stdout to be read


class StdioProcess:
    """One start of a stdio server. :meth:`connect` spawns it and yields the SDK's stream pair;
    leaving the context stops the process and everything in its group."""

    def __init__(self, command: str, args: Sequence[str], env: Mapping[str, str], cwd: str | None) -> None:
        self.command = command
        self.args = list(args)
        # Exactly what was configured, plus PATH (which also finds the command), and how deep in
        # `tether mcp serve` processes this one runs, so a server that is one again counts itself.
        depth = {SERVE_DEPTH: os.environ[SERVE_DEPTH]} if SERVE_DEPTH in os.environ else {}
        self.env = {"PATH": os.environ.get("PATH", os.defpath), **env, **depth}
        # What it was given that it may write back (a debug line, a crash that prints its
        # environment). Every value is taken out of what it says about itself (stderr, errors, why
        # it stopped); only the secrets among them out of all it writes on stdout, results included:
        # a "production" there is data, and a value taken out of the protocol would break the
        # session. Short values and paths are left ("debug", "/srv/stock.db": no key).
        secrets = {v for v in table_secrets(env) if worth_hiding(v)}
        self._secrets = _as_written(secrets)
        self._said = secrets | {v.strip() for v in env.values() if worth_hiding(v.strip())}
        self.cwd = os.path.expanduser(cwd) if cwd else None
        self.process: asyncio.subprocess.Process | None = None
        self.stderr_tail: deque[str] = deque(maxlen=STDERR_LINES)
        self._eof = False  # its stdout ended: it died, or closed it (which ends the session as surely)
        self._ended_first = False  # it ended before tether began to stop it
        self._output: str | None = None  # its stdout pipe as /proc names it ("pipe:[INODE]"), on Linux

    @property
    def pid(self) -> int | None:
        return self.process.pid if self.process is not None else None

    def alive(self) -> bool:
        return self.process is not None and self.process.returncode is None and not self._eof

    def why(self) -> str | None:
        """How the process ended on its own ("exited with status 3", "was killed by SIGKILL"); None
        while it runs, or when tether stopped it."""
        proc = self.process
        if proc is None or not self._ended_first:
            return None
        code = proc.returncode
        if code is None:
            return "the server closed its output"
        if code < 0:
            try:
                name = signal.Signals(-code).name
            except ValueError:
                name = f"signal {-code}"
            return f"the process was killed by {name}"
        return f"the process exited with status {code}"

    calls_are_separate = False  # one pipe: when it closes, the server is gone

    def redact(self, text: str) -> str:
        """``text`` (what the server said about itself) without the values of its ``env``."""
        return withheld(text, self._said)

    def last_error_line(self) -> str:
        """The last line the server wrote to stderr (what a person needs to fix a server that will
        not start), without the values of its ``env`` (withheld before it is cut, so none is cut in half)."""
        last = self.redact(next((line for line in reversed(self.stderr_tail) if line.strip()), ""))
        if len(last) > LAST_WORDS_CHARS:  # the cut said: an exception's advice often ends its line
            last = f"{last[:LAST_WORDS_CHARS]}… ({len(last) - LAST_WORDS_CHARS:,} more characters)"
        return printable(last)  # shown at the terminal: an escape in it is written out, not obeyed

    @contextlib.asynccontextmanager
    async def connect(self) -> AsyncIterator[TransportStreams]:
        proc = await asyncio.create_subprocess_exec(
            self.command,
            *self.args,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            env=self.env,
            cwd=self.cwd,
            start_new_session=True,
            limit=LINE_LIMIT,
        )
        self.process = proc
        with contextlib.suppress(OSError):
            self._output = os.readlink(f"/proc/{proc.pid}/fd/1")
        read_send, read_recv = anyio.create_memory_object_stream[SessionMessage | Exception](0)
        write_send, write_recv = anyio.create_memory_object_stream[SessionMessage](0)
        pipes = [
            asyncio.create_task(self._read_stdout(proc, read_send)),
            asyncio.create_task(self._write_stdin(proc, write_recv)),
            asyncio.create_task(self._read_stderr(proc)),
        ]
        outlived = asyncio.create_task(self._outlived(proc))
        try:
            yield read_recv, write_send
        finally:
            outlived.cancel()
            # However this context is left (even cancelled), the process is stopped: no orphans.
            await asyncio.shield(asyncio.ensure_future(self._stop(proc, pipes)))
            for stream in (read_recv, write_send, read_send, write_recv):
                stream.close()

    async def _read_stdout(self, proc: asyncio.subprocess.Process, out: Any) -> None:
        assert proc.stdout is not None
        async with out:  # closing it tells the session the connection ended
            with contextlib.suppress(anyio.BrokenResourceError, anyio.ClosedResourceError):
                while line := await _next_line(proc.stdout):
                    if isinstance(line, _Oversized):
                        await out.send(line.refusal())
                    elif line.strip():
                        await out.send(_parse(self._scrubbed(line)))
                self._eof = True

    def _scrubbed(self, line: bytes) -> bytes:
        for secret in self._secrets:
            line = line.replace(secret, REDACTED.encode())
        return line

    async def _write_stdin(self, proc: asyncio.subprocess.Process, messages: Any) -> None:
        assert proc.stdin is not None
        async with messages:
            async for message in messages:
                data = message.message.model_dump_json(by_alias=True, exclude_unset=True)
                try:
                    proc.stdin.write(data.encode() + b"\n")
                    await proc.stdin.drain()
                except (BrokenPipeError, ConnectionResetError):
                    return  # the server is gone; its stdout's end tells the session

    async def _read_stderr(self, proc: asyncio.subprocess.Process) -> None:
        """The tail of its stderr, each line cut to STDERR_LINE_BYTES, read to its end however long
        its lines: a line past the reader's limit (a progress bar redrawn with ``\\r`` for hours is
        one) ended ``readline``'s reading, so the last words were lost and the pipe, no longer
        drained, would block the server; and 20 long lines were held whole."""
        assert proc.stderr is not None
        line = b""  # the line being read: its first STDERR_LINE_BYTES, the rest dropped
        while chunk := await proc.stderr.read(STDERR_CHUNK):
            *ended, rest = chunk.split(b"\n")
            for piece in ended:
                self._heard((line + piece[:STDERR_LINE_BYTES])[:STDERR_LINE_BYTES])
                line = b""
            line = (line + rest[:STDERR_LINE_BYTES])[:STDERR_LINE_BYTES]
        if line:
            self._heard(line)

    def _heard(self, line: bytes) -> None:
        self.stderr_tail.append(line.decode(errors="replace").rstrip())

    async def _outlived(self, proc: asyncio.subprocess.Process) -> None:
        """A server that exited while a process it started (outside its group, so no longer found as
        its descendant) holds its stdout open has still ended: that process is stopped, so the session
        ends now (not at a timeout) and nothing the server started outlives it."""
        while proc.returncode is None:  # not proc.wait(): asyncio's waits for the pipes to close too
            await asyncio.sleep(0.1)
        await asyncio.sleep(EXIT_DRAIN_S)
        if not self._eof:
            await _in_thread(_stop_holders, {"pipe": self._output})

    async def _stop(self, proc: asyncio.subprocess.Process, pipes: list[asyncio.Task[None]]) -> None:
        """Close stdin, wait; SIGTERM the group, wait; then kill the whole tree. Whatever the server
        started is stopped too, in its group or (if it left the group) found as its descendant."""
        self._ended_first = self._eof or proc.returncode is not None
        family = [(pid, process_identity(pid)) for pid in descendants(proc.pid)]
        assert proc.stdin is not None
        with contextlib.suppress(OSError, RuntimeError):
            proc.stdin.close()
        if not await _exited(proc, CLOSE_GRACE_S):
            _signal_group(proc.pid, signal.SIGTERM)
            if not await _exited(proc, TERM_GRACE_S):
                # Not yet reaped, so its pid cannot belong to another process.
                await _in_thread(kill_tree, {"root": proc.pid})
                await _exited(proc, 5.0)
        # A group outlives its leader while a member lives; the kernel does not give its id to a new process.
        _signal_group(proc.pid, signal.SIGKILL)
        for pid, identity in family:
            await _in_thread(kill_process_tree, {"pid": pid, "identity": identity})
        await _gone(family, 2.0)  # a killed process takes a moment to die: stop returns when it has
        await asyncio.wait(pipes[:1], timeout=EXIT_DRAIN_S)
        if not self._eof:  # the group and the family are gone, yet something holds its stdout open
            await _in_thread(_stop_holders, {"pipe": self._output})
        done, pending = await asyncio.wait(pipes, timeout=2.0)
        for task in pending:
            task.cancel()
        for task in done:  # a pipe that broke as the server died is not news
            task.exception()


@dataclass
class _Oversized:
    """A message longer than LINE_LIMIT, read past (never held whole): its size and its first bytes."""

    size: int
    head: bytes

    def refusal(self) -> SessionMessage | Exception:
        """The answer's request ends at once with an error saying why, instead of by its timeout."""
        limit = LINE_LIMIT // (1024 * 1024)
        words = (
            f"the server's answer is {self.size:,} bytes, more than the {limit} MiB tether reads from a stdio "
            "server, so it was not read; calling again will not help: ask the tool for less"
        )
        found = _ID.search(self.head)
        if found is None:  # not an answer to a request tether can name: the session logs it
            return ValueError(f"a message of {self.size:,} bytes from the server was not read ({words})")
        error = mcp_types.ErrorData(code=mcp_types.INTERNAL_ERROR, message=words)
        return SessionMessage(mcp_types.JSONRPCError(jsonrpc="2.0", id=json.loads(found.group(1)), error=error))


# The top-level id of an answer: the SDKs write ``{"jsonrpc":"2.0","id":...`` first.
_ID = re.compile(rb'^\s*\{\s*"jsonrpc"\s*:\s*"2\.0"\s*,\s*"id"\s*:\s*("(?:[^"\\]|\\.){0,200}"|-?\d{1,20})')


async def _next_line(stream: asyncio.StreamReader) -> bytes | _Oversized:
    """The next line; one past LINE_LIMIT is read past in pieces (memory stays bounded) and reported."""
    size, head = 0, b""
    while True:
        try:
            line = await stream.readuntil(b"\n")
        except asyncio.IncompleteReadError as exc:  # the end of the stream
            line = exc.partial
        except asyncio.LimitOverrunError as exc:
            piece = await stream.read(max(exc.consumed, 1))
            head, size = head or piece[:4096], size + len(piece)
            continue
        if not size:
            return line
        return _Oversized(size + len(line), head)


def _as_written(secrets: set[str]) -> list[bytes]:
    """``secrets`` as a JSON line may hold them (as they are, and escaped), longest first."""
    forms = {f for v in secrets for f in (v, json.dumps(v)[1:-1], json.dumps(v, ensure_ascii=False)[1:-1])}
    return [f.encode() for f in sorted(forms, key=len, reverse=True)]


def _parse(line: bytes) -> SessionMessage | Exception:
    """A SessionMessage, or the error that says why the line is not one (the session logs it). An
    answer whose ``result`` is not an object becomes an error answer to its request, so the call
    ends at once saying so (the session would only log it, and the call wait for its timeout)."""
    try:
        return SessionMessage(mcp_types.jsonrpc_message_adapter.validate_json(line, by_name=False))
    except ValidationError as exc:
        unreadable = _unreadable_answer(line, exc)
        if unreadable is not None:
            return unreadable
        try:
            message = json.loads(line)
        except (ValueError, RecursionError):
            return exc
        problem = result_not_an_object(message)
        ident = message.get("id") if isinstance(message, dict) else None
        if problem is None or isinstance(ident, bool) or not isinstance(ident, int | str):
            return exc
        error = mcp_types.ErrorData(code=mcp_types.INTERNAL_ERROR, message=problem)
        return SessionMessage(mcp_types.JSONRPCError(jsonrpc="2.0", id=ident, error=error))


# An answer's first keys, as the SDKs write them: its id, then its result.
_ANSWER = re.compile(_ID.pattern + rb'\s*,\s*"result"\s*:')


def _unreadable_answer(line: bytes, exc: ValidationError) -> SessionMessage | None:
    """An answer whose JSON the SDK's parser cannot read at all (nested past its recursion limit,
    which a tool's schema or result can be) ends its request at once, saying so, instead of being
    logged while the request waits for its timeout."""
    if not any(error["type"] == "json_invalid" for error in exc.errors()):
        return None
    found = _ANSWER.search(line[:4096])
    if found is None:
        return None
    said = next(str(e["msg"]) for e in exc.errors() if e["type"] == "json_invalid")
    error = mcp_types.ErrorData(code=mcp_types.INTERNAL_ERROR, message=f"its answer could not be read ({said})")
    return SessionMessage(mcp_types.JSONRPCError(jsonrpc="2.0", id=json.loads(found.group(1)), error=error))


async def _exited(proc: asyncio.subprocess.Process, timeout: float) -> bool:
    """Whether the process ended within ``timeout``. Polls ``returncode``: ``wait()`` also waits for
    the pipes to close, which a surviving child can keep open."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while proc.returncode is None:
        if loop.time() >= deadline:
            return False
        await asyncio.sleep(0.02)
    return True


async def _gone(family: list[tuple[int, str | None]], timeout: float) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while any(process_alive(pid, identity) for pid, identity in family) and loop.time() < deadline:
        await asyncio.sleep(0.02)


def _stop_holders(pipe: str | None) -> None:
    """Kill every other process that has ``pipe`` (a server's stdout) open: only what the server
    started can hold it."""
    if pipe is None or not pipe.startswith("pipe:"):
        return
    with contextlib.suppress(OSError):
        for entry in os.scandir("/proc"):
            if not entry.name.isdigit() or int(entry.name) == os.getpid():
                continue
            with contextlib.suppress(OSError), os.scandir(f"/proc/{entry.name}/fd") as fds:
                if any(_link(fd.path) == pipe for fd in fds):
                    pid = int(entry.name)
                    kill_process_tree(pid, process_identity(pid))


def _link(path: str) -> str | None:
    try:
        return os.readlink(path)
    except OSError:
        return None


def _signal_group(pgid: int, sig: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, sig)
