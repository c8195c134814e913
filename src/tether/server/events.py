"""A run's events as the server streams them: numbered from 1, kept in memory while the run is
live, appended to ``$TETHER_HOME/serve/events/<run_id>.log`` so a client that reconnects (with
``Last-Event-ID``), reloads its page or comes back after a server restart gets what it missed.

The data of each event is the library's event as JSON under its own field names; the server adds
``args_hash`` to approval questions (what a decision must quote) and fills a form widget's values.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import logging
import os
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from pydantic_core import to_jsonable_python

from tether.events import Done, Event
from tether.fileio import private_dir

__all__ = ["PRUNED", "EventLog", "args_hash", "encode_event", "event_data", "pruned_line"]

_log = logging.getLogger("tether.server")


def args_hash(arguments: str) -> str:
    """What a decision quotes to prove it saw these arguments (SHA-256 of the raw JSON, hex)."""
    return hashlib.sha256(arguments.encode("utf-8", "surrogatepass")).hexdigest()


def event_data(event: Event, chosen: dict[str, Any] | None = None) -> dict[str, Any]:
    """``event`` as JSON-ready data: ``type``, ``run_id``, then its fields."""
    if isinstance(event, Done):
        return {"type": "done", "run_id": event.run_id, "result": event.result.model_dump(mode="json")}
    data: dict[str, Any] = {"type": event.type, "run_id": event.run_id}
    for name in event.__slots__:
        if name not in ("type", "run_id"):
            data[name] = to_jsonable_python(getattr(event, name), fallback=str)
    if event.type == "approval_required":
        data["args_hash"] = args_hash(data["args"])
    widget = data.get("widget")
    if isinstance(widget, dict) and widget.get("kind") == "form":
        data["widget"] = fill_form(widget, chosen or {})
    if data.get("widget", True) is None:
        del data["widget"]
    return data


def encode_event(data: dict[str, Any]) -> str:
    """An event's data as the compact JSON line it is kept and sent as; NaN or Infinity anywhere
    (a tool's widget) becomes null, so the line stays JSON."""
    try:
        return json.dumps(data, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    except ValueError:
        return json.dumps(
            json.loads(json.dumps(data), parse_constant=lambda _: None), ensure_ascii=False, separators=(",", ":")
        )


def fill_form(widget: dict[str, Any], chosen: dict[str, Any]) -> dict[str, Any]:
    """The form with each field's ``value``: what the session chose before, else the tool's default."""
    fields = []
    for f in widget.get("fields") or ():
        if isinstance(f, dict) and isinstance(f.get("name"), str):
            f = dict(f)
            default = f.pop("default", f.get("value"))
            earlier = chosen.get(f["name"])
            options = f.get("options")
            if earlier is not None and (not options or earlier in options):
                f["value"] = earlier
            else:
                f["value"] = default
            fields.append(f)
    return {**widget, "fields": fields}


def _drop_torn_tail(fd: int) -> None:
    """A crash mid-write leaves a last line without its newline: cut it, so the next event starts
    on a line of its own (load() had left it out already)."""
    size = os.fstat(fd).st_size
    if size == 0 or os.pread(fd, 1, size - 1) == b"\n":
        return
    start = max(0, size - 65536)
    while True:
        chunk = os.pread(fd, size - start, start)
        cut = chunk.rfind(b"\n")
        if cut >= 0:
            os.ftruncate(fd, start + cut + 1)
            return
        if start == 0:
            os.ftruncate(fd, 0)
            return
        start = max(0, start - 65536)


# The kind of what a pruned run keeps of its events: the line ``0<TAB>pruned<TAB>{"last_id": N}`` of
# its log (one machine), or its last row in ``tether_events`` (workers).
PRUNED = "pruned"


def pruned_line(last_id: int) -> bytes:
    return f"0\t{PRUNED}\t{json.dumps({'last_id': last_id})}\n".encode()


class EventLog:
    """One run's numbered events: append, and follow from any id. A log pruned after
    ``keep_events_days`` keeps only the last id it had given (``base``), so a run resumed later
    numbers its new events after the old ones and a client's Last-Event-ID still means what it did."""

    def __init__(self, path: Path, items: list[tuple[int, str, str]] | None = None, base: int = 0) -> None:
        self.path = path
        self.items = items or []
        self.base = base
        self.live = False
        self._wake = asyncio.Event()
        self._fd: int | None = None

    @classmethod
    def load(cls, path: Path) -> EventLog:
        """The events saved for a run (a torn last line, from a crash mid-write, is left out)."""
        items: list[tuple[int, str, str]] = []
        try:
            fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)  # a planted symlink is not followed
        except OSError:  # none yet (or not a file we wrote): the run's events start here
            return cls(path, items)
        with os.fdopen(fd, "rb") as f:
            text = f.read().decode("utf-8", errors="replace")
        base = 0
        for line in text.split("\n"):  # not splitlines(): U+2028 and its kind may sit inside the JSON
            parts = line.split("\t", 2)
            if len(parts) == 3 and parts[:2] == ["0", PRUNED] and not items:
                with contextlib.suppress(ValueError, TypeError, AttributeError):
                    base = max(0, int(json.loads(parts[2]).get("last_id", 0)))
                continue
            if len(parts) != 3 or not parts[0].isdigit() or int(parts[0]) != base + len(items) + 1:
                continue
            with contextlib.suppress(ValueError):
                json.loads(parts[2])
                items.append((int(parts[0]), parts[1], parts[2]))
        return cls(path, items, base)

    @property
    def last_id(self) -> int:
        return self.items[-1][0] if self.items else self.base

    def append(self, kind: str, data: dict[str, Any]) -> int:
        text = encode_event(data)
        n = self.last_id + 1
        self.items.append((n, kind, text))
        self._wake.set()
        self._wake = asyncio.Event()
        if self._fd != -1:
            try:
                if self._fd is None:
                    private_dir(self.path.parent)
                    self._fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_APPEND | os.O_NOFOLLOW, 0o600)
                    _drop_torn_tail(self._fd)
                # A view of the run, like its trace: not fsynced (the run store holds what must survive).
                os.write(self._fd, f"{n}\t{kind}\t{text}\n".encode("utf-8", "surrogatepass"))
            except OSError as exc:  # the stream goes on from memory; a reload after the run ends sees less
                _log.error("events of %s cannot be kept in %s: %s", self.path.stem, self.path, exc)
                if self._fd not in (None, -1):
                    os.close(self._fd)
                self._fd = -1
        return n

    def close(self) -> None:
        self.live = False
        self._wake.set()
        self._wake = asyncio.Event()
        if self._fd not in (None, -1):
            os.close(self._fd)
        self._fd = None

    async def follow(self, after: int, *, keepalive_s: float = 15.0) -> AsyncIterator[tuple[int, str, str] | None]:
        """The events after id ``after``, then new ones as they come, until the run is no longer
        live (its last event is then a ``done``). A ``done`` from an earlier part of a run that is
        live again (resumed after a decision) does not end the stream. ``None`` means "nothing for
        a while": the caller sends a keep-alive."""
        i = max(0, after - self.base)  # what a pruned log no longer has is not made up
        while True:
            while i < len(self.items):
                i += 1
                yield self.items[i - 1]
            if not self.live:
                return
            wake = self._wake
            try:
                await asyncio.wait_for(wake.wait(), keepalive_s)
            except TimeoutError:
                yield None
