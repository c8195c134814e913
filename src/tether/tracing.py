"""The trace: one JSON line per event in ``$TETHER_HOME/traces/<run_id>.jsonl``.

Every line carries ``run_id`` (keys are snake_case; traces written by older versions used
camelCase, and :func:`read_trace` gives both in snake_case); ``turn`` lines carry their tokens
and the running cost; the last line of a run is ``run_stopped`` with the status and the reason.
A run resumed in another process appends to the same file, so one run is one file whatever
happened in between; a reply saved by a process killed before its ``turn`` line was written gets
that line from the resumed run (``"restored": true``), so every turn the run paid for is listed once.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tether.errors import UserError
from tether.events import Event, snake_keys, to_trace
from tether.fileio import keep_from_commands, open_own, read_own

if TYPE_CHECKING:
    from tether.harness.context import Tracer

__all__ = ["FanoutTracer", "JsonlTracer", "read_trace", "trace_bytes"]

_log = logging.getLogger(__name__)


class JsonlTracer:
    """Appends trace lines with one ``write`` each (O_APPEND), so lines never interleave."""

    def __init__(self, root: Path | str) -> None:
        self.root = Path(root)
        keep_from_commands(self.root)  # what was said and done: never readable by a sandboxed command
        self._fd: int | None = None
        self._run_id: str | None = None
        self._torn = False

    def path(self, run_id: str) -> Path:
        """The run's trace file; a run id that would lead out of ``root`` (``../x``) is a UserError,
        as in the run store (a RunState made without one, from an id someone else chose)."""
        if not run_id or "/" in run_id or "\\" in run_id or run_id.startswith("."):
            raise UserError(f"not a run id: {run_id!r}")
        return self.root / f"{run_id}.jsonl"

    def write(self, event: Event) -> None:
        line = to_trace(event)
        if line is None:
            return
        if self._fd is None or self._run_id != event.run_id:
            self.close()
            # Mode 0600 in a private folder; a link, a pipe or a folder put at its name is an
            # OSError that says so (a FanoutTracer drops the run's tracer; the run goes on).
            self._fd = open_own(self.path(event.run_id), os.O_RDWR | os.O_CREAT | os.O_APPEND)
            self._run_id = event.run_id
            size = os.fstat(self._fd).st_size
            self._torn = bool(size) and os.pread(self._fd, 1, size - 1) != b"\n"
        if line.get("restored") and self._has_turn(line["turn"]):
            return  # the killed process wrote it after all: one line per turn
        data = (json.dumps(line, default=str, separators=(",", ":")) + "\n").encode()
        if self._torn:  # a crash cut the last line short: it stays alone, and this line is whole
            data, self._torn = b"\n" + data, False
        os.write(self._fd, data)

    def _has_turn(self, turn: int) -> bool:
        """Whether the open trace already has a ``turn`` line for ``turn`` (read once, on resume)."""
        assert self._fd is not None
        size = os.fstat(self._fd).st_size
        for raw in os.pread(self._fd, size, 0).splitlines():
            if b'"type":"turn"' in raw:
                with contextlib.suppress(ValueError):
                    seen = json.loads(raw)
                    if isinstance(seen, dict) and seen.get("turn") == turn:
                        return True
        return False

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None


class FanoutTracer:
    """Writes every event to several tracers (the JSONL trace and OpenTelemetry, say). One that
    fails is logged and dropped; the others go on."""

    def __init__(self, *tracers: Tracer) -> None:
        self.tracers = list(tracers)

    def write(self, event: Event) -> None:
        for tracer in list(self.tracers):
            try:
                tracer.write(event)
            except (OSError, UserError) as exc:  # a file in the way: its message says which, and what to do
                _log.error("run %s: %s; its %s trace stops here, the run goes on", event.run_id, exc, _kind(tracer))
                self.tracers.remove(tracer)
                self._close(tracer)
            except Exception:
                _log.exception("run %s: tracer %s failed; it gets no more events", event.run_id, type(tracer).__name__)
                self.tracers.remove(tracer)
                self._close(tracer)

    def close(self) -> None:
        for tracer in self.tracers:
            self._close(tracer)

    @staticmethod
    def _close(tracer: Tracer) -> None:
        try:
            tracer.close()
        except Exception:
            _log.exception("tracer %s failed to close", type(tracer).__name__)


def _kind(tracer: Tracer) -> str:
    return "JSONL" if isinstance(tracer, JsonlTracer) else type(tracer).__name__


def trace_bytes(path: Path) -> bytes:
    """The trace file's bytes, never through a symlink planted in its place (OSError: ELOOP); a
    named pipe or a folder put there is an ``OSError`` at once, never waited on."""
    return read_own(path)


def read_trace(path: Path) -> list[dict[str, Any]]:
    """The trace's lines, keys in snake_case (older traces' camelCase keys too); a torn last line
    (a crash mid-write) is skipped, and so is a line that is not a JSON object (``tether trace``
    skips both too): every line is an event."""
    out = []
    for line in trace_bytes(path).decode("utf-8", errors="replace").split("\n"):
        try:
            value = json.loads(line)
        except ValueError:
            continue
        if isinstance(value, dict):
            out.append(snake_keys(value))
    return out
