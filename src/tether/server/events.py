"""A run's events as the server streams them: numbered from 1, kept in memory while the run is
live, appended to ``$TETHER_HOME/serve/events/<run_id>.log`` so a client that reconnects (with
``Last-Event-ID``), reloads its page or comes back after a server restart gets what it missed.

The data of each event is the library's event as JSON under its own field names; the server adds
``args_hash`` to approval questions (what a decision must quote) and fills a form widget's values.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import hashlib
import json
import logging
import os
import re
from collections.abc import AsyncIterator, Callable, Iterable
from pathlib import Path
from typing import Any

from pydantic_core import to_jsonable_python

from tether.events import Done, Event
from tether.fileio import open_own, open_private, read_own
from tether.messages import clean_text

__all__ = [
    "PRUNED",
    "EventLog",
    "LogFile",
    "Replayed",
    "args_hash",
    "encode_event",
    "event_data",
    "for_clients",
    "hide_home",
    "hide_home_in",
    "implied_events",
    "pruned_line",
]

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


HOME_NAME = "$TETHER_HOME"


@functools.lru_cache(maxsize=8)
def _home_pattern(home: str) -> re.Pattern[str] | None:
    """The ways ``home`` may be written in a message (as given, absolute, with its links resolved),
    each only where a path would end or go on: ``/srv/home`` is not found in ``/srv/home2``."""
    written = {f.rstrip("/\\") for f in (home, os.path.abspath(home), os.path.realpath(home))}
    forms = sorted((f for f in written if len(f) > 1), key=len, reverse=True)  # never "/" alone
    return re.compile("(?:" + "|".join(map(re.escape, forms)) + r")(?![\w.-])") if forms else None


# A database's or a broker's address as the library writes it into a reason (its password hidden
# already): the user, host and database name are the operator's business, not a client's.
_SERVICE_URL = re.compile(r"\b(?:postgres(?:ql)?|amqps?|redis)://\S*?(?=:?(?:\s|$))")


def hide_home(text: str, home: Path) -> str:
    """``text`` with the server's home written ``$TETHER_HOME`` instead of as its path, and the
    address of a database or a broker left out. What the library says of a file or a database it
    could not use names it, for the person at the command line; a server's clients read the same
    words about the server's files without learning where they are (its log keeps the paths and
    addresses, for the operator)."""
    if "://" in text:
        text = _SERVICE_URL.sub("(address hidden)", text)
    pattern = _home_pattern(str(home))
    return text if pattern is None else pattern.sub(HOME_NAME, text)


def for_clients(data: dict[str, Any], home: Path) -> dict[str, Any]:
    """An event's data as a client of the server reads it: its reason (a retry's, a fallback's, a
    refused memory write's, the run's own in ``done``) with the home hidden (:func:`hide_home`).
    Changed in place, and returned."""
    reason = data.get("reason")
    if isinstance(reason, str):
        data["reason"] = hide_home(reason, home)
    result = data.get("result")
    if isinstance(result, dict) and isinstance(result.get("reason"), str):
        result["reason"] = hide_home(result["reason"], home)
    return data


def hide_home_in(value: Any, home: Path) -> Any:
    """:func:`hide_home` over every string of a JSON-like value (a trace line)."""
    if isinstance(value, str):
        return hide_home(value, home)
    if isinstance(value, dict):
        return {k: hide_home_in(v, home) for k, v in value.items()}
    if isinstance(value, list):
        return [hide_home_in(v, home) for v in value]
    return value


class Replayed:
    """What a resumed run's stream already holds of the run (its ``turn`` numbers, and the calls it
    started and finished), to write what the saved state implies and the stream lacks, and to drop
    a second ``tool_start`` when a call cut short is run again."""

    def __init__(self, events: Iterable[tuple[str, dict[str, Any]]]) -> None:
        self.turns: set[int] = set()
        self.started: set[str] = set()
        self.finished: set[str] = set()
        self.last_turn = 0  # the stream's last ``turn``
        self.streamed = ""  # the text streamed since it: the next turn's, so far
        for kind, data in events:
            self.note(kind, data)

    def note(self, kind: str, data: dict[str, Any]) -> None:
        if kind == "turn" and isinstance(data.get("turn"), int):
            self.turns.add(data["turn"])
            self.last_turn, self.streamed = max(self.last_turn, data["turn"]), ""
        elif kind == "text_delta" and isinstance(data.get("text"), str):
            self.streamed += data["text"]
        elif kind == "tool_start":
            self.started.add(str(data.get("call_id")))
        elif kind == "tool_result":
            self.finished.add(str(data.get("call_id")))

    def repeats(self, kind: str, data: dict[str, Any]) -> bool:
        """Whether the live event ``kind`` is one the stream holds already (then it is not sent)."""
        if kind == "tool_start":
            return str(data.get("call_id")) in self.started
        if kind == "turn":
            return data.get("turn") in self.turns
        return False


def implied_events(state: Any, replayed: Replayed) -> list[dict[str, Any]]:
    """The events the saved ``state`` (a RunState) implies that the stream lacks: for each model
    turn of the run, its text (for the turn after the stream's last, what was not streamed of it)
    and its ``turn``; for each recorded tool result, its ``tool_start`` and ``tool_result``. A worker
    killed after a save but before its events were written left them out; the one that resumes the
    run writes these first, so every turn, its text and every call is in the stream exactly once.
    Rebuilt events carry ``"replayed": true`` (their ``ms`` is 0, and a turn's ``cost_usd`` is the
    run's as saved)."""
    from tether.events import TextDelta, ToolResultEvent, ToolStart, Turn
    from tether.messages import AssistantMessage, ToolMessage
    from tether.usage import Usage

    out: list[dict[str, Any]] = []
    calls: dict[str, Any] = {}
    turn = -int(getattr(state, "history_turns", 0) or 0)
    cost = None if state.unpriced_models else state.cost_usd
    for m in state.messages:
        if isinstance(m, AssistantMessage):
            turn += 1
            calls.update({c.id: c for c in m.tool_calls})
            if turn >= 1 and turn not in replayed.turns:
                text = m.text if hasattr(m, "text") else ""
                if turn == replayed.last_turn + 1 and replayed.streamed and text.startswith(replayed.streamed):
                    text = text[len(replayed.streamed) :]  # streamed before the kill: only the rest is missing
                if text:
                    out.append(event_data(TextDelta(state.run_id, text)))
                usage = m.usage or Usage()
                out.append(
                    event_data(Turn(state.run_id, turn, m.model or state.model or "", usage, cost, m.finish_reason))
                )
        elif isinstance(m, ToolMessage) and turn >= 1 and m.call_id not in replayed.finished:
            call = calls.get(m.call_id)
            if m.call_id not in replayed.started and m.args_withheld is None:  # a refused call never started
                args = call.arguments if call is not None else ""
                out.append(event_data(ToolStart(state.run_id, m.call_id, m.name, args)))
            status = m.status
            out.append(event_data(ToolResultEvent(state.run_id, m.call_id, m.name, not m.is_error, 0.0, status)))
        else:
            turn += getattr(m, "summary_turns", None) or 0 if m.role != "tool" else 0
    for data in out:
        data["replayed"] = True
        replayed.note(data["type"], data)
    return out


def encode_event(data: dict[str, Any]) -> str:
    """An event's data as the compact JSON line it is kept and sent as; NaN or Infinity anywhere
    (a tool's widget) becomes null, so the line stays JSON, and a lone surrogate (half of a pair,
    in what a model wrote) becomes U+FFFD as in the saved messages, so the line is UTF-8."""
    try:
        text = json.dumps(data, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    except ValueError:
        text = json.dumps(
            json.loads(json.dumps(data), parse_constant=lambda _: None), ensure_ascii=False, separators=(",", ":")
        )
    return clean_text(text)  # only inside the JSON's strings can such a character be


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


class _LogLines:
    """How a run's log is read, line by line: a first ``pruned`` line gives the last id the log had
    given (its base); then a line is an event when its id is the next one and its data is JSON (a
    torn line, from a crash mid-write, is left out). Not splitlines(): U+2028 and its kind may sit
    inside the JSON, so lines are cut at "\\n" only."""

    def __init__(self) -> None:
        self.base = 0
        self.count = 0

    def take(self, line: str) -> tuple[int, str, str] | None:
        parts = line.split("\t", 2)
        if len(parts) == 3 and parts[:2] == ["0", PRUNED] and not self.count:
            with contextlib.suppress(ValueError, TypeError, AttributeError):
                self.base = max(0, int(json.loads(parts[2]).get("last_id", 0)))
            return None
        if len(parts) != 3 or not parts[0].isdigit() or int(parts[0]) != self.base + self.count + 1:
            return None
        try:
            json.loads(parts[2])
        except ValueError:
            return None
        self.count += 1
        return int(parts[0]), parts[1], parts[2]


class LogFile:
    """The events of a run that is not live, read from its log as a client takes them, a slice at
    a time and off the event loop. A stream that held the whole log (read and parsed before its
    first byte) kept a copy of it for as long as its client took to read it: 36 MB of events were
    120 MB of memory for each client that reloaded the page, and a few clients that read slowly
    could take all of the server's. A line whose id is not the next one is left out, as by
    :meth:`EventLog.load`.

    ``held``: whether another process (a second server on this home) drives the run now. While it
    does, the log is followed as that process writes it (looked at every :attr:`POLL_S`), to the
    run's own ``done``: a stream that ended at what was written so far left its client without
    the run's end. ``started``: whether the run's start record is there (a process on this home
    started a part of it that has not ended): not held yet, it is given :attr:`DONE_GRACE_S` to be
    taken (the process that started it takes the run's lock a moment after its first events)."""

    SLICE = 1 << 20
    POLL_S = 0.1
    DONE_GRACE_S = 5.0  # how long a run let go of is given to write its done (it may come just after)
    live = False

    def __init__(
        self, path: Path, held: Callable[[], bool] | None = None, started: Callable[[], bool] | None = None
    ) -> None:
        self.path = path
        self.held = held
        self.started = started

    def ready(self, after: int) -> list[tuple[int, str, str]]:
        return []  # all is read in follow(), off the event loop

    async def follow(
        self, after: int, *, keepalive_s: float = 15.0
    ) -> AsyncIterator[list[tuple[int, str, str]] | None]:
        try:  # a planted link or pipe is not read
            fd = await asyncio.to_thread(open_own, self.path, os.O_RDONLY)
        except OSError:
            return
        lines, rest, more = _LogLines(), b"", True
        tailing = self.held is not None
        last, followed, quiet, grace = "", False, 0.0, 0.0
        try:
            while True:
                batch, rest, more = await asyncio.to_thread(self._slice, fd, lines, rest, after, not tailing)
                if batch:
                    last, quiet, grace = batch[-1][1], 0.0, 0.0
                    yield batch
                if more:
                    continue
                if not tailing or self.held is None:
                    return
                if await asyncio.to_thread(self.held):
                    followed = True  # driven elsewhere: what it writes next is read next
                elif last == "done" or grace >= self.DONE_GRACE_S or not (followed or await self._started()):
                    tailing = False  # what is left of a last line without its newline, then the end
                    continue
                else:
                    grace += self.POLL_S  # let go of: its done may be on its way to the log
                await asyncio.sleep(self.POLL_S)
                quiet += self.POLL_S
                if quiet >= keepalive_s:
                    quiet = 0.0
                    yield None
        finally:
            os.close(fd)

    async def _started(self) -> bool:
        return self.started is not None and await asyncio.to_thread(self.started)

    def _slice(
        self, fd: int, lines: _LogLines, rest: bytes, after: int, last: bool = True
    ) -> tuple[list[tuple[int, str, str]], bytes, bool]:
        """The events after ``after`` in the next slice of the log, what is left of its last line,
        and whether there is more (a last line without its newline is taken at the end, when
        ``last``: else it is kept for the rest of it, which the run's process is writing)."""
        chunk = os.read(fd, self.SLICE)
        if chunk:
            data = rest + chunk
            cut = data.rfind(b"\n") + 1  # "\n" is never inside a character of UTF-8
            whole, rest = data[:cut], data[cut:]
        elif last:
            whole, rest = rest, b""
        else:
            whole = b""
        batch = []
        for line in whole.decode("utf-8", errors="replace").split("\n"):
            item = lines.take(line)
            if item is not None and item[0] > after:
                batch.append(item)
        return batch, rest, bool(chunk)


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
        self._absent = False  # no file at load(): the first write makes it, with nothing torn to cut

    @classmethod
    def load(cls, path: Path) -> EventLog:
        """The events saved for a run (a torn last line, from a crash mid-write, is left out)."""
        try:
            text = read_own(path).decode("utf-8", errors="replace")  # a planted link or pipe is not read
        except OSError as exc:  # none yet (or not a file we wrote): the run's events start here
            log = cls(path, [])
            log._absent = isinstance(exc, FileNotFoundError)
            return log
        lines = _LogLines()
        items = [item for line in text.split("\n") if (item := lines.take(line)) is not None]
        return cls(path, items, lines.base)

    @property
    def last_id(self) -> int:
        return self.items[-1][0] if self.items else self.base

    def append(self, kind: str, data: dict[str, Any]) -> int:
        return self.extend([(kind, data)])

    def extend(self, batch: list[tuple[str, dict[str, Any]]]) -> int:
        """Number and keep a run's events, in one write to the log and one wake-up of the clients
        that follow it; the last id given."""
        return self.extend_encoded([(kind, encode_event(data)) for kind, data in batch])

    def extend_encoded(self, batch: list[tuple[str, str]]) -> int:
        """:meth:`extend` for events already encoded (:func:`encode_event`), as a run process sends them."""
        lines = []
        for kind, text in batch:
            n = self.last_id + 1
            self.items.append((n, kind, text))
            lines.append(f"{n}\t{kind}\t{text}\n")
        self._wake.set()
        self._wake = asyncio.Event()
        if self._fd != -1:
            try:
                if self._fd is None:
                    self._fd = self._open()
                # A view of the run, like its trace: not fsynced (the run store holds what must survive).
                os.write(self._fd, "".join(lines).encode("utf-8", "surrogatepass"))
            except OSError as exc:  # the stream goes on from memory; a reload after the run ends sees less
                _log.error("events of %s cannot be kept in %s: %s", self.path.stem, self.path, exc)
                if self._fd not in (None, -1):
                    os.close(self._fd)
                self._fd = -1
        return self.last_id

    def _open(self) -> int:
        flags = os.O_RDWR | os.O_CREAT | os.O_APPEND
        if self._absent:  # a new run's log (one system call fewer on the HTTP loop)
            with contextlib.suppress(FileExistsError):  # made since: checked as any other
                return open_private(self.path, flags | os.O_EXCL)
        fd = open_own(self.path, flags)  # a pipe put there would block the loop once full
        _drop_torn_tail(fd)
        return fd

    def close(self) -> None:
        self.live = False
        self._wake.set()
        self._wake = asyncio.Event()
        if self._fd not in (None, -1):
            os.close(self._fd)
        self._fd = None

    def ready(self, after: int) -> list[tuple[int, str, str]]:
        """The events after id ``after`` that are here now: what :meth:`follow` gives first."""
        return self.items[max(0, after - self.base) :]

    async def follow(
        self, after: int, *, keepalive_s: float = 15.0
    ) -> AsyncIterator[list[tuple[int, str, str]] | None]:
        """The events after id ``after``, then new ones as they come, in batches (all that are
        there at each wake-up), until the run is no longer live (its last event is then a
        ``done``). A ``done`` from an earlier part of a run that is live again (resumed after a
        decision) does not end the stream. ``None`` means "nothing for a while": the caller sends
        a keep-alive."""
        i = max(0, after - self.base)  # what a pruned log no longer has is not made up
        while True:
            if i < len(self.items):
                batch = self.items[i:]
                i += len(batch)
                yield batch
                continue
            if not self.live:
                return
            wake = self._wake
            try:
                await asyncio.wait_for(wake.wait(), keepalive_s)
            except TimeoutError:
                yield None
