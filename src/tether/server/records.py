"""What a run left, as the API sends it: its transcript and its trace, whole or a page at a time.

A long run's transcript or trace is tens of megabytes of JSON. Either goes out as a stream of
small pieces, each item encoded as it is sent, so a request never holds the whole body (nor a
second copy of every item as dicts) beside the run it reads; ``after`` and ``limit`` cut a page
of it, and ``next`` says where the following page starts (None: this one reached the end).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any

from tether.messages import Message, withheld_arguments, withheld_text

__all__ = [
    "PastTheEnd",
    "json_bytes",
    "line_starts",
    "page_bounds",
    "people_json",
    "read_trace_bytes",
    "streamed_object",
    "trace_page",
]

_PIECE = 64 * 1024  # bytes per piece sent: few sends, little held


class PastTheEnd(ValueError):
    """``after`` names more items than the record holds."""

    def __init__(self, after: int, count: int) -> None:
        super().__init__(f"after={after} is past the end: it holds {count}")
        self.after, self.count = after, count


def json_bytes(value: Any) -> bytes:
    """``value`` as the API's JSON. What a model wrote may hold half a surrogate pair (a ``\\ud83d``
    escape in a call's arguments), which UTF-8 cannot carry: such a value is written with every
    character outside ASCII escaped, as JSON allows; NaN and infinity, which JSON has no words
    for, as null."""
    try:
        return json.dumps(value, ensure_ascii=False, allow_nan=False, separators=(",", ":")).encode()
    except ValueError:  # UnicodeEncodeError, or NaN
        return json.dumps(json.loads(json.dumps(value), parse_constant=lambda _: None), separators=(",", ":")).encode()


def streamed_object(head: dict[str, Any], key: str, items: Iterable[bytes], tail: Any) -> Iterator[bytes]:
    """The JSON object ``head | {key: [items...]} | tail()``, in pieces of about 64 KiB; ``items``
    are encoded JSON values, ``tail`` a function called once they are all sent (what only the end
    of the items tells, such as ``next``)."""
    piece = bytearray(json_bytes(head)[:-1])
    piece += b"," if head else b""
    piece += json_bytes(key) + b":["
    first = True
    for item in items:
        if not first:
            piece += b","
        piece += item
        first = False
        if len(piece) >= _PIECE:
            yield bytes(piece)
            piece.clear()
    end = json_bytes(tail())
    piece += b"]" + (b"," + end[1:] if len(end) > 2 else b"}")
    yield bytes(piece)


def _check_after(after: int, count: int) -> None:
    if after > count:
        raise PastTheEnd(after, count)


def page_bounds(count: int, after: int, limit: int | None) -> tuple[int, int | None]:
    """Where a page of ``count`` items that starts after the first ``after`` stops, and the
    ``next`` page's ``after`` (None: it reaches the end). ``PastTheEnd`` when ``after > count``."""
    _check_after(after, count)
    stop = count if limit is None else min(count, after + limit)
    return stop, stop if stop < count else None


def people_json(messages: Sequence[Message], start: int = 0, stop: int | None = None) -> Iterator[bytes]:
    """``messages[start:stop]``, each as people may read it — a call whose arguments a guardrail
    refused shows ``[arguments withheld: why]`` in their place, and ``withheld`` says why — encoded
    one at a time (what withholds a reply's arguments is its results, maybe past ``stop``)."""
    withheld = withheld_arguments(messages)
    for i in range(start, len(messages) if stop is None else stop):
        out = messages[i].model_dump(mode="json")
        for part in out["content"] if i in withheld else ():
            why = withheld[i].get(part.get("id")) if part.get("type") == "tool_call" else None
            if why is not None:
                part["arguments"], part["withheld"] = withheld_text(why), why
        yield json_bytes(out)


def trace_page(
    data: bytes, after: int, limit: int | None, shown: Any, starts: Sequence[int] | None = None
) -> tuple[Iterator[bytes], Any]:
    """The trace lines (``data``, a trace file's bytes) after the first ``after`` (at most
    ``limit``), each made by ``shown(line)`` and encoded one at a time; and a function that gives
    the ``next`` page's ``after`` once they are sent. A torn line (a crash mid-write) or one that is
    not a JSON object is not a line, as :func:`tether.tracing.read_trace` reads them. ``starts``:
    where each line begins (:func:`line_starts`), so that a page reads its own lines only.
    ``PastTheEnd`` (before anything is sent) when the trace holds fewer than ``after`` lines."""
    if starts is not None:
        _check_after(after, len(starts))
        stop = len(starts) if limit is None else min(len(starts), after + limit)
        following = stop if stop < len(starts) else None
        chosen = (_event(data, starts[i]) for i in range(after, stop))
        return (json_bytes(shown(line)) for line in chosen if line is not None), lambda: following
    lines = (line for _, line in _events(data))
    skipped = 0
    while skipped < after:
        if next(lines, None) is None:
            raise PastTheEnd(after, skipped)
        skipped += 1
    state: dict[str, int | None] = {"next": None}

    def encoded() -> Iterator[bytes]:
        for sent, line in enumerate(lines):
            if limit is not None and sent == limit:  # one more is there: the page stops before it
                state["next"] = after + sent
                return
            yield json_bytes(shown(line))

    return encoded(), lambda: state["next"]


def line_starts(data: bytes) -> list[int]:
    """Where each of the trace's lines begins in ``data`` (a line as :func:`trace_page` counts it)."""
    return [start for start, _ in _events(data)]


def _events(data: bytes) -> Iterator[tuple[int, dict[str, Any]]]:
    """A trace's events and where each begins, one line at a time (never all split at once)."""
    start = 0
    while start < len(data):
        end = data.find(b"\n", start)
        end = len(data) if end < 0 else end
        value = _parsed(data[start:end])
        if value is not None:
            yield start, value
        start = end + 1


def _event(data: bytes, start: int) -> dict[str, Any] | None:
    end = data.find(b"\n", start)
    return _parsed(data[start : len(data) if end < 0 else end])


def _parsed(line: bytes) -> dict[str, Any] | None:
    try:
        value = json.loads(line.decode("utf-8", errors="replace"))
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


def read_trace_bytes(path: Path) -> bytes:
    """A run's trace file, never through a link put in its place; nothing when there is none."""
    from tether.tracing import trace_bytes

    try:
        return trace_bytes(path)
    except FileNotFoundError:
        return b""
