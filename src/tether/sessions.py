"""Sessions: conversations that survive the process and repair themselves.

A session store keeps one conversation's messages. Three stores share one protocol:

* :class:`MemorySessionStore` — for tests;
* :class:`JsonlSessionStore` — the default: ``<dir>/<session>.jsonl``, one message per line. An
  append writes all its lines with one ``write`` on an ``O_APPEND`` descriptor; any rewrite
  (compaction, clearing, repair) writes a temporary file, fsyncs and renames. An advisory lock
  (``fcntl.flock``) keeps two processes from interleaving writes to one session. A torn last line
  left by a crash is dropped on load and cut off before the next append; a whole line that holds
  no message (garbled, or edited by hand) is dropped too, once the file is copied beside it
  (``<session>.jsonl.damaged-<time>-<random>``). The temporary file of a rewrite a kill cut short
  is removed when the folder is next opened or listed. A link, named pipe or folder put at one of its files'
  names is never followed or waited on: it is an error that names the file (a listing leaves it
  out; a metadata file counts as empty, as an unreadable one does);
* :class:`SqliteSessionStore` — one row per message, WAL mode; a row that holds no message is
  dropped too, once copied as it was to the table ``damaged_messages``.

Every load repairs (law 1), and a repaired history is written back atomically. A durable store
that cannot be opened refuses to start: it never falls back to memory.
"""

from __future__ import annotations

import contextlib
import errno
import json
import logging
import os
import re
import stat
import threading
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from pydantic import ValidationError

from tether.errors import ConfigError, StoreError, UserError
from tether.fileio import (
    atomic_write,
    in_the_way,
    keep_from_commands,
    open_own,
    planted,
    private_dir,
    private_file,
    read_own,
    set_up_sqlite,
)
from tether.messages import (
    AssistantMessage,
    Message,
    TextPart,
    ToolCallPart,
    ToolMessage,
    UserMessage,
    UserPart,
    dump_message,
    load_message,
)

__all__ = [
    "EMPTY_MESSAGE_TEXT",
    "INTERRUPTED_TEXT",
    "JsonlSessionStore",
    "MemorySessionStore",
    "SessionInfo",
    "SessionStore",
    "SqliteSessionStore",
    "is_placeholder",
    "open_session_store",
    "repair",
]

INTERRUPTED_TEXT = (
    "[No result: this call never finished here. Its run stopped before it did (the process stopped, "
    "or the run was waiting for a person's decision when the conversation went on). Whether it took "
    "effect is unknown; check before relying on it, or call it again.]"
)
# What the marker said before (sessions written then are still read as holding one).
_OLDER_TEXTS = (
    "[No result: this call was interrupted before it finished (the process stopped). "
    "Its outcome is unknown; check before relying on it, or call it again.]",
)
# What a message from the person with nothing in it (a session edited by hand) says instead: an
# empty text is refused by some providers ("messages: text content blocks must be non-empty") on
# every later request of the session, and dropping the message would leave the reply to it unasked.
EMPTY_MESSAGE_TEXT = "[An empty message: nothing was written in it.]"
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")
_log = logging.getLogger("tether.sessions")
_BOM = b"\xef\xbb\xbf"  # what an editor may put before the first line of a session edited by hand


def check_session_id(session_id: str) -> str:
    if not isinstance(session_id, str) or not _NAME.fullmatch(session_id):  # "$" would allow a final newline
        raise UserError(f"not a session name: {session_id!r} (letters, digits, '.', '_', '-'; at most 128)")
    return session_id


def is_placeholder(message: ToolMessage) -> bool:
    """Whether ``message`` is the marker :func:`repair` writes for a call that has no result."""
    if message.status != "interrupted" or len(message.content) != 1:
        return False
    part = message.content[0]
    return isinstance(part, TextPart) and (part.text == INTERRUPTED_TEXT or part.text in _OLDER_TEXTS)


def _placeholder(call_id: str, name: str) -> ToolMessage:
    return ToolMessage(call_id=call_id, name=name, content=(TextPart(text=INTERRUPTED_TEXT),), status="interrupted")


def _merge(kept: ToolMessage, later: ToolMessage) -> ToolMessage:
    """One result for a call that has two. A real result beats the placeholder; a second real result
    that says something new is kept, in words, inside the first (pairing allows one result per call,
    and repair deletes no real result). A placeholder or an exact repeat carries nothing new."""
    if is_placeholder(later) or _contains(kept.content, later.content):
        return kept
    if is_placeholder(kept):
        return later
    note = TextPart(
        text=f"[A later result was also recorded for this call (status {later.status}); "
        "it may have run twice. That result follows.]"
    )
    return kept.model_copy(update={"content": (*kept.content, note, *later.content)})


def _same_tool(answered: Message, late: ToolMessage) -> bool:
    """Whether ``late`` answers the call ``answered`` answers: a provider may reuse ids across turns,
    so the tool must match too."""
    return isinstance(answered, ToolMessage) and answered.name == late.name


def _contains(parts: tuple[UserPart, ...], run: tuple[UserPart, ...]) -> bool:
    n = len(run)
    return any(parts[i : i + n] == run for i in range(len(parts) - n + 1))


def repair(messages: Sequence[Message]) -> list[Message]:
    """Restore the pairing law; idempotent; never deletes a result whose call is in the transcript.

    Every tool call is followed, before the next non-result message, by exactly one result with its
    id, in declared order. A missing result is synthesised as a placeholder (status ``interrupted``,
    :data:`INTERRUPTED_TEXT`); a load while a tool runs writes one back, so the real result may come
    after it, even after later messages: it then takes the placeholder's place. Two real results for
    one call become one (see :func:`_merge`). Results whose call (same id and tool) appears nowhere
    before them, and none after either, are dropped: nothing can pair with them (the stores keep
    them aside first, see :func:`repaired`). A result written before its call (lines out of
    order: a hand edit, a copy) is kept, right after the first call with its id and tool that
    follows it. A reply with calls written twice in a row, nothing
    between (a duplicated line), is kept once: its call ids would be there twice, which a provider
    refuses ("tool_use ids must be unique") on every later request. For the same reason, calls of
    one reply that share an id (a hand edit, or a server that gave parallel calls one id, kept by a
    tether that did not yet give each its own) get ids of their own (see :func:`_distinct_ids`),
    and the results with that id answer them in the order they were written.
    """
    return repaired(messages)[0]


def repaired(messages: Sequence[Message]) -> tuple[list[Message], list[int]]:
    """:func:`repair`'s history, and where in ``messages`` the results it dropped were (results
    with no call at all: a store keeps them aside before it writes the repair back)."""
    taken = {c.id for m in messages if isinstance(m, AssistantMessage) for c in m.tool_calls}
    out: list[Message] = []
    declared: dict[str, str] = {}  # calls of the latest assistant message, in order: id → tool name
    shared: dict[str, list[str]] = {}  # an id calls of the latest assistant message shared → their ids now
    results: dict[str, ToolMessage] = {}
    placed: dict[str, int] = {}  # call id → where its result sits in ``out`` (the latest such call)
    early: dict[tuple[str, str], ToolMessage] = {}  # (call id, tool) → a result seen before any such call
    where: dict[tuple[str, str], list[int]] = {}  # (call id, tool) → where those early results were
    pulled: dict[str, ToolMessage] = {}  # early results that the latest assistant message's calls answer

    def close_block() -> None:
        for call_id, name in declared.items():
            result = results.get(call_id)
            first = pulled.get(call_id)
            if first is not None:  # it was written first: it leads, as any first result does
                result = first if result is None else _merge(first, result)
            placed[call_id] = len(out)
            out.append(_placeholder(call_id, name) if result is None else result)
        declared.clear()
        results.clear()
        pulled.clear()
        shared.clear()

    previous: Message | None = None  # the latest message as it was written (before any new ids)
    for index, m in enumerate(messages):
        if isinstance(m, AssistantMessage) and m.tool_calls and not results and out and previous == m:
            continue  # a line written twice (a copy, an editor): its calls would have two ids each
        if not isinstance(m, ToolMessage):
            previous = m
            close_block()
            m = _distinct_ids(_with_words(m), taken, shared)
            out.append(m)
            if isinstance(m, AssistantMessage):
                for c in m.tool_calls:
                    if c.id not in declared and (c.id, c.name) in early:
                        pulled[c.id] = early.pop((c.id, c.name))
                        where.pop((c.id, c.name))
                    declared.setdefault(c.id, c.name)
        elif m.call_id in declared:
            m = _answering(m, shared, declared, results)
            earlier = results.get(m.call_id)
            results[m.call_id] = m if earlier is None else _merge(earlier, m)
        elif (i := placed.get(m.call_id)) is not None and _same_tool(answered := out[i], m):
            assert isinstance(answered, ToolMessage)
            out[i] = _merge(answered, m)  # a late result for a call of an earlier turn
        else:  # no call before it: one may come after it (lines out of order), else it is dropped
            key = (m.call_id, m.name)
            earlier = early.get(key)
            early[key] = m if earlier is None else _merge(earlier, m)
            where.setdefault(key, []).append(index)
    close_block()
    return out, sorted(i for indices in where.values() for i in indices)


def _with_words(message: Message) -> Message:
    """A message from the person without its blank texts; one with nothing else in it says so
    (:data:`EMPTY_MESSAGE_TEXT`). Providers refuse an empty text, and would on every later request."""
    if not isinstance(message, UserMessage):
        return message
    kept = tuple(p for p in message.content if not isinstance(p, TextPart) or p.text.strip())
    if len(kept) == len(message.content) and kept:
        return message
    return message.model_copy(update={"content": kept or (TextPart(text=EMPTY_MESSAGE_TEXT),)})


def _distinct_ids(reply: Message, taken: set[str], shared: dict[str, list[str]]) -> Message:
    """``reply`` with an id of its own for each call: the second and later calls with an id already
    used in it get ``<id>_2``, ``<id>_3``… (the first free such name: repair stays idempotent);
    ``shared`` gets each shared id's ids, in declared order."""
    if not isinstance(reply, AssistantMessage) or len({c.id for c in reply.tool_calls}) == len(reply.tool_calls):
        return reply
    content = []
    for part in reply.content:
        if isinstance(part, ToolCallPart):
            own = shared.setdefault(part.id, [])
            if own:
                n = len(own) + 1
                while f"{part.id}_{n}" in taken:
                    n += 1
                taken.add(f"{part.id}_{n}")
                own.append(f"{part.id}_{n}")
                part = part.model_copy(update={"id": own[-1]})
            else:
                own.append(part.id)
        content.append(part)
    for call_id in [i for i, own in shared.items() if len(own) == 1]:
        del shared[call_id]
    return reply.model_copy(update={"content": tuple(content)})


def _answering(
    result: ToolMessage, shared: dict[str, list[str]], declared: dict[str, str], answered: dict[str, ToolMessage]
) -> ToolMessage:
    """``result`` with the id of the call it answers, when calls of its reply shared its id: the
    first of them, of its tool, still unanswered (the last one when all are)."""
    ids = shared.get(result.call_id)
    if not ids:
        return result
    ids = [i for i in ids if declared[i] == result.name] or ids
    return result.model_copy(update={"call_id": next((i for i in ids if i not in answered), ids[-1])})


@dataclass(frozen=True)
class SessionInfo:
    session_id: str
    messages: int
    updated_at: float


class SessionStore(Protocol):
    def load(self, session_id: str) -> list[Message]: ...

    def append(self, session_id: str, messages: Sequence[Message]) -> None: ...

    def rewrite(self, session_id: str, messages: Sequence[Message]) -> None: ...

    def list(self) -> list[SessionInfo]: ...

    def delete(self, session_id: str) -> None: ...

    # A few values kept with a session besides its messages (the system prompt's snapshot, see
    # tether.harness.extension); a store without these keeps them per run only.
    def load_meta(self, session_id: str) -> dict[str, Any]: ...

    def save_meta(self, session_id: str, meta: dict[str, Any]) -> None: ...


@contextlib.contextmanager
def _refusing(path: Path) -> Iterator[None]:
    """An ``OSError`` about ``path`` because something else than the file tether wrote is at its
    name becomes a ``ConfigError`` that says which file and what to do; any other is unchanged."""
    try:
        yield
    except OSError as exc:
        kind = planted(path)
        if kind is None:
            raise
        raise ConfigError(
            f"the session file {path} is {kind}, not a file tether wrote; tether does not follow "
            "or wait on one: remove it (tether makes the file again)"
        ) from exc


def _append_whole(fd: int, data: bytes, path: Path, size: int) -> None:
    """Write ``data`` at the end of ``fd`` (opened ``O_APPEND``), which was ``size`` bytes long: in
    one write, or more when the disk takes less at once (a disk that fills up mid-write). If it
    cannot all be written, the file is cut back to ``size`` and the error names the file: no
    message is half there, and none is lost while the append is said to have worked."""
    view = memoryview(data)
    try:
        while view:
            written = os.write(fd, view)
            if not written:
                raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
            view = view[written:]
    except OSError as exc:
        with contextlib.suppress(OSError):
            os.ftruncate(fd, size)
        why = f"{exc.strerror or exc}; the session's new messages were not written (its file is as it was)"
        raise OSError(exc.errno, why, str(path)) from exc


def _last_line(fd: int, size: int) -> int:
    """Where the last line of the file ``fd`` (``size`` bytes) begins."""
    end = size
    while end > 0:
        begin = max(0, end - 65536)
        newline = os.pread(fd, end - begin, begin).rfind(b"\n")
        if newline >= 0:
            return begin + newline + 1
        end = begin
    return 0


def _torn(line: bytes) -> bool:
    """Whether a last line with no newline after it is what a crash mid-write leaves: the start of
    a line tether writes, a JSON object, which is never whole JSON (a message whose newline is
    missing, or a line edited by hand into other JSON, is whole). Anything else (text appended by
    hand or by another program, zeros) is no torn write: it is kept beside before it is dropped."""
    if not line.strip() or not line.removeprefix(_BOM).startswith(b"{"):
        return False
    try:
        load_message(line)
    except ValidationError:
        return not _whole_json(line)
    return False


def _whole_json(line: bytes) -> bool:
    try:
        json.loads(line)
    except (ValueError, RecursionError):
        return False
    return True


def _fsync(fd: int, group: Any) -> None:
    if group is None:
        os.fsync(fd)
    else:
        group.sync(fd)


class MemorySessionStore:
    """Sessions in a dict. For tests; repairs on load like the others."""

    def __init__(self) -> None:
        self._data: dict[str, list[Message]] = {}
        self._updated: dict[str, float] = {}
        self._meta: dict[str, dict[str, Any]] = {}
        self._held: dict[str, str] = {}  # session id → the run continuing it now (see hold)
        self._holding = threading.Lock()

    def load_meta(self, session_id: str) -> dict[str, Any]:
        return dict(self._meta.get(check_session_id(session_id), {}))

    def save_meta(self, session_id: str, meta: dict[str, Any]) -> None:
        self._meta[check_session_id(session_id)] = dict(meta)

    def load(self, session_id: str) -> list[Message]:
        current = self._data.get(check_session_id(session_id), [])
        fixed = repair(current)
        if fixed != current:
            self._data[session_id] = list(fixed)
        return list(fixed)

    def append(self, session_id: str, messages: Sequence[Message]) -> None:
        self._data.setdefault(check_session_id(session_id), []).extend(messages)
        self._updated[session_id] = time.time()

    def rewrite(self, session_id: str, messages: Sequence[Message]) -> None:
        self._data[check_session_id(session_id)] = list(messages)
        self._updated[session_id] = time.time()

    def list(self) -> list[SessionInfo]:
        return [SessionInfo(k, len(v), self._updated.get(k, 0.0)) for k, v in sorted(self._data.items())]

    @contextlib.contextmanager
    def hold(self, session_id: str, run_id: str) -> Iterator[None]:
        """Hold ``session_id`` for ``run_id`` while the run continues it: a second run on it (another
        thread or task) is refused, as :meth:`JsonlSessionStore.hold` refuses it."""
        with self._holding:
            holder = self._held.get(session_id)
            if holder is not None:
                raise StoreError(_held_message(session_id, f"run {holder}"))
            self._held[session_id] = run_id
        try:
            yield
        finally:
            with self._holding:
                self._held.pop(session_id, None)

    def delete(self, session_id: str) -> None:
        self._data.pop(check_session_id(session_id), None)
        self._updated.pop(session_id, None)
        self._meta.pop(session_id, None)  # a new session of that name starts without the old one's


_PROCESS_SESSIONS = MemorySessionStore()  # what ``memory`` names (open_session_store)
_HOLDER_WIDTH = 64  # bytes of a hold file that name its run


def _held_message(session_id: str, holder: bytes | str, then: str = "") -> str:
    busy = (holder.decode(errors="replace") if isinstance(holder, bytes) else holder).strip() or "another run"
    then = then or (
        "nothing was sent or run. Wait for that run to stop (or stop it), then send this message again, "
        "or use another session"
    )
    return f"session {session_id} is being continued by {busy} right now; {then}"


def _blocked(folder: Path) -> OSError | None:
    """An error that names what is in the way of ``folder`` (:func:`in_the_way`), for the callers
    that word a store's error from its cause."""
    why = in_the_way(folder)
    return None if why is None else OSError(errno.ENOTDIR, why, str(folder))


# The temporary files of a JSONL store's rewrites (tether.fileio.atomic_write names them
# ``.<file name>.<16 hex>.tmp``): of the transcript, the metadata and the count of a session.
_TEMPORARY = re.compile(
    r"\.(?:(?P<file>[A-Za-z0-9][A-Za-z0-9._-]{0,127})\.(?:jsonl|meta\.json)|\.(?P<count>[A-Za-z0-9][A-Za-z0-9._-]{0,127})\.count)"
    r"\.[0-9a-f]{16}\.tmp"
)


# The write probe each open makes and removes at once: ``.probe-<pid>-<16 hex>``.
_PROBE = re.compile(r"\.probe-(?P<pid>[1-9][0-9]{0,9})-[0-9a-f]{16}")


def _probe_left(name: str) -> bool:
    """Whether ``name`` is a write probe whose process is gone (a kill between making it and
    removing it left it, empty, for ever); a live process's, or one of a process this one may not
    signal (another user's), is not."""
    found = _PROBE.fullmatch(name)
    if found is None:
        return False
    try:
        os.kill(int(found["pid"]), 0)
    except (ProcessLookupError, OverflowError):
        return True
    except OSError:
        return False
    return False


def _temporary_of(name: str) -> str | None:
    """The session whose rewrite a file named ``name`` is the temporary file of, or None."""
    found = _TEMPORARY.fullmatch(name)
    return None if found is None else found["file"] or found["count"]


class JsonlSessionStore:
    """One JSONL file per session under ``root``."""

    def __init__(self, root: Path | str, *, fsync: bool = True) -> None:
        self.root = Path(root)
        self.fsync = fsync
        self._unsynced: set[str] = set()  # sessions appended to without fsync since their last one
        keep_from_commands(self.root)  # conversations: never readable by a sandboxed command
        try:
            private_dir(self.root)
            # A name no one can guess, made new (O_EXCL): a link planted in advance is never written
            # through.
            probe = self.root / f".probe-{os.getpid()}-{os.urandom(8).hex()}"
            os.close(os.open(probe, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600))
            probe.unlink(missing_ok=True)  # a sweep that thought it another's leftover took it: written all the same
        except OSError as exc:
            exc = _blocked(self.root) or exc
            raise ConfigError(
                f"the session directory {self.root} is not writable ({exc.strerror}); "
                "fix its permissions or choose another (--session-store jsonl:DIR, "
                "$TETHER_SESSION_STORE, or session_store in config.toml)"
            ) from exc
        self._sweep()

    def path(self, session_id: str) -> Path:
        return self.root / f"{check_session_id(session_id)}.jsonl"

    @contextlib.contextmanager
    def _locked(self, session_id: str, *, wait: bool = True) -> Iterator[bool]:
        """Hold the session's lock; with ``wait=False`` only if no one holds it now (yields whether
        it is held: a cache or a clean-up skips a session in use rather than wait for it)."""
        import fcntl

        lock = self.root / f".{check_session_id(session_id)}.lock"
        while True:
            with _refusing(lock):
                fd = open_own(lock, os.O_WRONLY | os.O_CREAT | os.O_CLOEXEC)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX if wait else fcntl.LOCK_EX | fcntl.LOCK_NB)
                if os.fstat(fd).st_nlink:  # still the lock at its name (a delete removes it while it holds it)
                    break
            except BlockingIOError:
                os.close(fd)
                yield False
                return
            except BaseException:
                os.close(fd)
                raise
            os.close(fd)  # removed while this one waited: a newcomer takes the one at the name now, so this does
        try:
            yield True
        finally:
            fcntl.flock(fd, fcntl.LOCK_UN)
            os.close(fd)

    @contextlib.contextmanager
    def hold(self, session_id: str, run_id: str, *, holder: str = "", then: str = "") -> Iterator[None]:
        """Hold ``session_id`` for ``run_id`` while the run continues it, against every other run
        (another process, another thread, another task): two at once would interleave their
        messages, and one's compaction would write the other's out of the file. The second is
        refused (:class:`StoreError`, naming the run) before it reads or writes anything. A lock
        on ``.<name>.run``; a killed process lets go with it. ``holder``: the words that name
        another holder than a run (a deletion); ``then``: what a refusal tells the person to do."""
        import fcntl

        path = self.root / f".{check_session_id(session_id)}.run"
        while True:
            with _refusing(path):
                fd = open_own(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError as exc:
                busy = os.pread(fd, _HOLDER_WIDTH, 0)
                os.close(fd)
                raise StoreError(_held_message(session_id, busy, then)) from exc
            if os.fstat(fd).st_nlink:  # still the file at its name (a deletion removes it while it holds it)
                break
            os.close(fd)
        try:
            os.pwrite(fd, (holder or f"run {run_id}").encode().ljust(_HOLDER_WIDTH)[:_HOLDER_WIDTH], 0)
            yield
        finally:
            os.close(fd)  # and with it the hold

    def _read(self, path: Path) -> tuple[list[Message], bool, bool]:
        """Messages in the file, whether anything was dropped, and whether that was a whole line
        (garbled, or edited by hand) rather than a torn last line."""
        try:
            with _refusing(path):
                data = read_own(path)
        except FileNotFoundError:
            return [], False, False
        messages: list[Message] = []
        garbled = False
        bom = data.startswith(_BOM)  # an editor's mark (Notepad's): the first message is whole after it
        lines = data[len(_BOM) if bom else 0 :].split(b"\n")
        for i, line in enumerate(lines):
            if not line.strip():
                continue
            try:
                messages.append(load_message(line))
            except ValidationError:
                # The part after the last newline is a torn write, unless it is whole JSON or no start
                # of a JSON line: what a crash leaves is the start of a line, never that (this was
                # edited, its newline left off, or appended by someone else).
                garbled = garbled or i < len(lines) - 1 or not _torn(line)
        return messages, bom or garbled or (bool(data) and not data.endswith(b"\n")), garbled

    def load(self, session_id: str) -> list[Message]:
        path = self.path(session_id)
        with self._locked(session_id):
            messages, damaged, garbled = self._read(path)
            fixed, dropped = repaired(messages)
            if damaged or fixed != messages:
                copy = None
                try:
                    if garbled or dropped:  # a line no message could be read from, or a result no call
                        copy = self._keep_damaged(path)  # can pair with: its bytes are kept beside
                    self._write_all(path, fixed)
                except OSError as exc:  # a full disk: the history is repaired here, and again at the next load
                    if copy is not None:
                        copy.unlink(missing_ok=True)  # the file still holds all it kept: one per load would pile up
                    _log.warning(
                        "session %s: its repair could not be written to %s (%s); the file is left as it was",
                        session_id,
                        path,
                        exc.strerror or exc,
                    )
                    return fixed
                if copy is not None:
                    what = "a line of %s holds no message" if garbled else "a tool result in %s answers no call in it"
                    _log.warning(
                        f"session %s: {what} and was dropped; the file as it was is kept in %s",
                        session_id,
                        path,
                        copy,
                    )
            self._note_whole(session_id, path, len(fixed))
        return fixed

    def _keep_damaged(self, path: Path) -> Path:
        """Copy the file as it is to ``<name>.damaged-<time>-<random>`` before a repair drops lines
        from it, so that a line edited by hand and no longer readable is not lost. Random: one
        process may repair the same session twice in a second (damaged, appended to, damaged)."""
        copy = path.with_name(f"{path.name}.damaged-{time.strftime('%Y%m%d-%H%M%S')}-{os.urandom(4).hex()}")
        data = read_own(path)  # read just now under the lock: a plain file, not a link
        fd = os.open(copy, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(data)
                f.flush()
                if self.fsync:
                    os.fsync(fd)
        except BaseException:
            copy.unlink(missing_ok=True)  # a copy cut short is no copy (the file it was made from stays)
            raise
        return copy

    def append(self, session_id: str, messages: Sequence[Message], *, durable: bool = True, group: Any = None) -> None:
        """Append ``messages`` in one write. ``durable=False`` skips the fsync (the lines survive the
        process being killed, not a power cut) until the next durable append or :meth:`sync`: a
        run mirrors its transcript here at every save and makes it durable with its own durable
        saves, so a session is never behind a run's durable state. ``group``: a
        :class:`tether.harness.store.GroupSync` whose next group syncs the file (many runs' syncs
        shared, as their commits are)."""
        if not messages:
            if durable:
                self.sync(session_id, group=group)
            return
        path = self.path(session_id)
        data = "".join(dump_message(m) + "\n" for m in messages).encode()
        with self._locked(session_id):
            with _refusing(path):
                fd = open_own(path, os.O_RDWR | os.O_CREAT | os.O_APPEND | os.O_CLOEXEC)
            try:
                size = os.fstat(fd).st_size
                if size and os.pread(fd, 1, size - 1) != b"\n":
                    start = _last_line(fd, size)
                    if _torn(os.pread(fd, size - start, start)):  # a crash mid-write: cut off, as a load would
                        os.ftruncate(fd, start)
                        size = start
                    else:  # a whole line, its newline left off (or edited by hand): it stays, alone
                        data = b"\n" + data
                _append_whole(fd, data, path, size)
                if self.fsync and durable:
                    _fsync(fd, group)
                    self._unsynced.discard(session_id)
                elif self.fsync:
                    self._unsynced.add(session_id)
            finally:
                os.close(fd)

    def sync(self, session_id: str, *, group: Any = None) -> None:
        """Make the session's unsynced appends durable (nothing to do when there are none), in
        ``group``'s next sync when one is given (see :meth:`append`)."""
        if session_id not in self._unsynced:
            return
        with self._locked(session_id):
            path = self.path(session_id)
            with _refusing(path):
                fd = open_own(path, os.O_RDONLY | os.O_CLOEXEC)
            try:
                _fsync(fd, group)
            finally:
                os.close(fd)
            self._unsynced.discard(session_id)

    def rewrite(self, session_id: str, messages: Sequence[Message]) -> None:
        with self._locked(session_id):
            path = self.path(session_id)
            self._write_all(path, messages)
            self._note_whole(session_id, path, len(messages))

    def _write_all(self, path: Path, messages: Sequence[Message]) -> None:
        with _refusing(path):  # a link or pipe at the name is replaced, never written through; a folder stays
            atomic_write(path, "".join(dump_message(m) + "\n" for m in messages).encode(), fsync=self.fsync)

    def _meta_path(self, session_id: str) -> Path:
        return self.root / f"{check_session_id(session_id)}.meta.json"

    def load_meta(self, session_id: str) -> dict[str, Any]:
        """``<session>.meta.json``; one that cannot be read counts as empty (it is rewritten), and so
        does a link, named pipe or folder put at its name (never read through or waited on)."""
        try:
            meta = json.loads(read_own(self._meta_path(session_id)))
        except (OSError, ValueError, RecursionError):  # RecursionError: JSON nested past Python's stack
            return {}
        return meta if isinstance(meta, dict) else {}

    def save_meta(self, session_id: str, meta: dict[str, Any]) -> None:
        path = self._meta_path(session_id)
        with self._locked(session_id), _refusing(path):
            atomic_write(path, json.dumps(meta, ensure_ascii=False).encode(), fsync=self.fsync)

    def list(self) -> list[SessionInfo]:
        """The sessions in ``root`` with their messages (lines that hold one: not a blank, damaged or
        torn line); a name that does not hold a file tether wrote (a link, a named pipe, a folder)
        is left out, never read through or waited on, and so is a file whose name is not a session
        name (no command could show or delete it). First it removes the temporary files of rewrites
        a kill cut short (never one a live process is writing)."""
        self._sweep()
        out = []
        for p in sorted(self.root.glob("*.jsonl")):
            if not _NAME.fullmatch(p.stem):  # not a session name: nothing could show or delete it
                continue
            try:
                out.append(SessionInfo(p.stem, self._count(p.stem, p), os.lstat(p).st_mtime))
            except FileNotFoundError:
                continue  # deleted since it was seen
            except OSError as exc:
                if planted(p) is None:  # a session file tether cannot read (its mode, its owner): said, not hidden
                    _log.warning(
                        "session %s: %s cannot be read (%s); it is left out of the listing",
                        p.stem,
                        p,
                        exc.strerror or exc,
                    )
        return out

    # How many messages a session's file holds is kept beside it (``.<session>.count``: the file's
    # inode and size then, and the count), written when tether has just read or written the whole
    # file (a load, a rewrite) and by a listing. A listing reads only what was appended since (an
    # append only adds lines at the end; a rewrite makes a new inode), and the whole file only when
    # it was replaced or cut.

    def _count_path(self, session_id: str) -> Path:
        return self.root / f".{check_session_id(session_id)}.count"

    def _known_count(self, session_id: str) -> tuple[int, int, int] | None:
        """The inode, size and message count last noted, or None (never noted, or unreadable)."""
        try:
            known = json.loads(read_own(self._count_path(session_id)))
            found = (known["ino"], known["size"], known["messages"])
        except (OSError, ValueError, TypeError, KeyError, RecursionError):
            return None
        return found if all(isinstance(n, int) and not isinstance(n, bool) for n in found) else None

    def _note_count(self, session_id: str, ino: int, size: int, messages: int) -> None:
        """Note that the first ``size`` bytes of the file ``ino`` hold ``messages`` messages."""
        if self._known_count(session_id) == (ino, size, messages):
            return
        noted = {"ino": ino, "size": size, "messages": messages}
        with contextlib.suppress(OSError):  # a cache: a note not written is a file read next time
            atomic_write(self._count_path(session_id), json.dumps(noted).encode(), fsync=False)

    def _note_whole(self, session_id: str, path: Path, messages: int) -> None:
        """Note the count of a file just read or written whole, under the session's lock."""
        with contextlib.suppress(OSError):  # no file (a session never written): nothing to note
            st = os.lstat(path)
            self._note_count(session_id, st.st_ino, st.st_size, messages)

    def _count(self, session_id: str, path: Path) -> int:
        """The messages in ``path``, reading only what was appended since the last note."""
        fd = open_own(path, os.O_RDONLY | os.O_CLOEXEC)  # an OSError leaves the name out of a listing
        try:
            st = os.fstat(fd)
            known = self._known_count(session_id)
            start, counted = 0, 0
            # The same file, no shorter, and a line still ends where the note says: only appended to.
            appended = known is not None and known[0] == st.st_ino and 0 < known[1] <= st.st_size
            if known is not None and appended and os.pread(fd, 1, known[1] - 1) == b"\n":
                start, counted = known[1], known[2]
            if start == st.st_size:
                return counted
            tail = os.pread(fd, st.st_size - start, start)
        finally:
            os.close(fd)
        whole = tail[: tail.rfind(b"\n") + 1]  # a torn last line is no message (yet)
        for line in whole[len(_BOM) if start == 0 and whole.startswith(_BOM) else 0 :].split(b"\n"):
            if line.strip():
                with contextlib.suppress(ValidationError):
                    load_message(line)
                    counted += 1
        # Under the lock, so that a sweep can tell its temporary file is live; a session written
        # now (or a link planted at its lock) goes without a note until the next listing.
        with contextlib.suppress(OSError, ConfigError), self._locked(session_id, wait=False) as held:
            if held:
                self._note_count(session_id, st.st_ino, start + len(whole), counted)
        return counted

    def _remove_copies(self, session_id: str) -> None:
        """Remove what else holds the session's words: the copies a repair kept of a damaged file
        (``<session>.jsonl.damaged-…``), and the temporary files of a rewrite a kill cut short (under
        the session's lock no rewrite of it is under way). Exact names: another session's are not
        these, whatever its name."""
        copy = re.compile(rf"{re.escape(session_id)}\.jsonl\.damaged-\d{{8}}-\d{{6}}-[0-9a-f]{{8}}")
        with os.scandir(self.root) as entries:
            found = [e.name for e in entries if copy.fullmatch(e.name) or _temporary_of(e.name) == session_id]
        for leftover in found:
            (self.root / leftover).unlink(missing_ok=True)  # a link is removed, not what it points to

    def _sweep(self) -> None:
        """Remove the temporary files of rewrites a kill cut short (the process killed between
        writing one and renaming it over the session's file, which it left as it was): each is a
        copy of a conversation no command shows or deletes, and they would pile up. Only tether's
        own: a regular file of this user, named exactly as a rewrite names it, removed under its
        session's lock (every writer of such a file holds it, so none is being written); a session
        in use now is left for a later sweep, never waited for. A link or anything else at such a
        name is not tether's, and stays. The empty write probe of a process killed while it opened
        the store (``.probe-<pid>-…``) is removed too, once that process is gone."""
        leftovers: dict[str, list[str]] = {}
        probes: list[str] = []
        with contextlib.suppress(OSError), os.scandir(self.root) as entries:
            for e in entries:
                session_id = _temporary_of(e.name)
                if session_id is not None:
                    leftovers.setdefault(session_id, []).append(e.name)
                elif _probe_left(e.name):
                    probes.append(e.name)
        for name in probes:
            self._remove_leftover(None, self.root / name, empty=True)
        for session_id, names in leftovers.items():
            with contextlib.suppress(OSError, ConfigError), self._locked(session_id, wait=False) as held:
                for name in names if held else ():
                    self._remove_leftover(session_id, self.root / name)

    @staticmethod
    def _remove_leftover(session_id: str | None, path: Path, *, empty: bool = False) -> None:
        with contextlib.suppress(OSError):  # gone already, or not this user's to remove: it stays
            st = os.lstat(path)
            if stat.S_ISREG(st.st_mode) and st.st_uid == os.geteuid() and not (empty and st.st_size):
                path.unlink()
                if session_id is None:
                    _log.info("removed %s, the write probe of a process killed while it opened the store", path)
                else:
                    _log.info("session %s: removed %s, a rewrite of it that was cut short", session_id, path)

    def delete(self, session_id: str) -> None:
        """Delete the session, its metadata and the copies a repair kept of it; refused (a
        :class:`StoreError` naming the run) while a run continues it (:meth:`hold`): the run's next
        messages would make it again, without its beginning."""
        deleting = self.hold(
            session_id,
            "",
            holder="a deletion of it",
            then="nothing was deleted. Wait for that run to stop (or stop it), then delete the session",
        )
        with deleting, self._locked(session_id):
            # The transcript last: a deletion cut short (killed, or refused at a folder put at a name)
            # leaves the session as it was, never a metadata file a new session of its name would take.
            for path in (self._meta_path(session_id), self._count_path(session_id), self.path(session_id)):
                with _refusing(path):  # a link is removed, not what it points to
                    path.unlink(missing_ok=True)
            self._unsynced.discard(session_id)  # nothing of it is left to sync
            self._remove_copies(session_id)
            # Removed while held: whoever waits for it sees it is gone and takes the one at its name
            # (removed after letting go, a waiter would hold it while a newcomer holds a new one).
            (self.root / f".{session_id}.lock").unlink(missing_ok=True)
            (self.root / f".{session_id}.run").unlink(missing_ok=True)  # held: no run holds one without it


_SCHEMA = """
CREATE TABLE IF NOT EXISTS messages (
    session_id TEXT NOT NULL,
    seq INTEGER NOT NULL,
    body TEXT NOT NULL,
    PRIMARY KEY (session_id, seq)
);
CREATE TABLE IF NOT EXISTS sessions (session_id TEXT PRIMARY KEY, updated_at REAL NOT NULL);
CREATE TABLE IF NOT EXISTS session_meta (session_id TEXT PRIMARY KEY, body TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS damaged_messages (
    session_id TEXT NOT NULL,
    seq INTEGER NOT NULL,
    body,
    found_at REAL NOT NULL
);
"""


def _set_up(db: Any) -> None:
    db.execute("PRAGMA journal_mode=WAL")
    db.execute("PRAGMA synchronous=NORMAL")
    db.executescript(_SCHEMA)


class SqliteSessionStore:
    """Sessions in one SQLite database (WAL), one row per message. One connection, used by one
    thread at a time: a server's runs mirror their sessions from its commit threads, and a
    transaction begun on a shared connection would take in another thread's statements."""

    def __init__(self, path: Path | str) -> None:
        import sqlite3  # imported here: a run without this store does not pay for it

        self.path = Path(path)
        self._lock = threading.RLock()
        keep_from_commands(self.path, database=True)  # conversations: never readable by a sandboxed command
        try:
            private_file(self.path)  # like the JSONL store's files
            self._db = set_up_sqlite(
                lambda: sqlite3.connect(self.path, timeout=30, isolation_level=None, check_same_thread=False),
                _set_up,
            )
        except (OSError, sqlite3.Error) as exc:
            cause = _blocked(self.path.parent) or exc
            why = cause.strerror if isinstance(cause, OSError) and cause.strerror else cause
            raise ConfigError(f"cannot open the session database {self.path}: {why}") from cause

    def _rows(self, session_id: str) -> tuple[list[Message], list[tuple[int, Any]], list[tuple[int, Any]]]:
        """The session's messages, the rows they were read from, and the rows that hold none
        (their seq and body, as stored)."""
        out, read, damaged = [], [], []
        for seq, body in self._db.execute(
            "SELECT seq, body FROM messages WHERE session_id = ? ORDER BY seq", (check_session_id(session_id),)
        ):
            try:
                out.append(load_message(body))
                read.append((seq, body))
            except ValidationError:
                damaged.append((seq, body))  # dropped by the repair below, once kept aside
        return out, read, damaged

    def load(self, session_id: str) -> list[Message]:
        with self._tx():
            rows, read, damaged = self._rows(session_id)
            fixed, dropped = repaired(rows)
            damaged += [read[i] for i in dropped]  # results no call can pair with: kept aside as well
            if damaged:
                self._keep_damaged(session_id, damaged)
            if fixed != rows or damaged:
                self._replace(session_id, fixed)
        return fixed

    def _keep_damaged(self, session_id: str, damaged: list[tuple[int, Any]]) -> None:
        """Copy rows that hold no message, as they are, to ``damaged_messages`` (in the transaction
        that drops them: never one without the other), and say where, as the JSONL store keeps a
        damaged file beside it."""
        found = time.time()
        self._db.executemany(
            "INSERT INTO damaged_messages (session_id, seq, body, found_at) VALUES (?, ?, ?, ?)",
            [(session_id, seq, body, found) for seq, body in damaged],
        )
        _log.warning(
            "session %s: %d row(s) of %s hold no message (or a tool result that answers no call) and were dropped; "
            "they are kept as they were in its "
            "table damaged_messages (sqlite3 %s \"SELECT seq, body FROM damaged_messages WHERE session_id = '%s'\")",
            session_id,
            len(damaged),
            self.path,
            self.path,
            session_id,
        )

    @contextlib.contextmanager
    def _refused(self) -> Iterator[None]:
        """Under the store's lock; an error of the database (damaged, full, locked by another
        process past the wait) becomes a ``StoreError`` that names it and what to do, not a
        traceback out of a run, a chat or the server."""
        import sqlite3

        with self._lock:
            try:
                yield
            except sqlite3.Error as exc:
                raise StoreError(
                    f"the session database {self.path} refused: {exc}; nothing of the session was changed. "
                    f"Check the disk's room and the database (sqlite3 {self.path} 'PRAGMA integrity_check'), "
                    "or use another session store (--session-store)"
                ) from exc

    @contextlib.contextmanager
    def _tx(self) -> Iterator[None]:
        import sqlite3

        with self._refused():
            self._db.execute("BEGIN IMMEDIATE")
            try:
                yield
                self._db.execute("COMMIT")
            except BaseException:
                # A COMMIT refused too (busy, full): left open, the transaction would hold the
                # database's write lock, against every process, until this one ends.
                with contextlib.suppress(sqlite3.Error):  # SQLite may have rolled back itself (a damaged page)
                    self._db.execute("ROLLBACK")
                raise

    def append(self, session_id: str, messages: Sequence[Message]) -> None:
        check_session_id(session_id)
        with self._tx():
            (last,) = self._db.execute(
                "SELECT COALESCE(MAX(seq), -1) FROM messages WHERE session_id = ?", (session_id,)
            ).fetchone()
            self._db.executemany(
                "INSERT INTO messages (session_id, seq, body) VALUES (?, ?, ?)",
                [(session_id, last + 1 + i, dump_message(m)) for i, m in enumerate(messages)],
            )
            self._touch(session_id)

    def rewrite(self, session_id: str, messages: Sequence[Message]) -> None:
        with self._tx():
            self._replace(check_session_id(session_id), messages)

    def _replace(self, session_id: str, messages: Sequence[Message]) -> None:
        self._db.execute("DELETE FROM messages WHERE session_id = ?", (session_id,))
        self._db.executemany(
            "INSERT INTO messages (session_id, seq, body) VALUES (?, ?, ?)",
            [(session_id, i, dump_message(m)) for i, m in enumerate(messages)],
        )
        self._touch(session_id)

    def _touch(self, session_id: str) -> None:
        self._db.execute(
            "INSERT INTO sessions (session_id, updated_at) VALUES (?, ?) "
            "ON CONFLICT(session_id) DO UPDATE SET updated_at = excluded.updated_at",
            (session_id, time.time()),
        )

    def list(self) -> list[SessionInfo]:
        """The sessions with their messages: a row that holds none (not JSON, or JSON of no message's
        role) is not one, as a damaged line of a JSONL session is not (a load drops it)."""
        with self._refused():
            rows = self._db.execute(
                "SELECT s.session_id, COUNT(CASE WHEN json_valid(m.body) THEN CASE WHEN json_extract(m.body, "
                "'$.role') IN ('user', 'assistant', 'tool') THEN 1 END END), s.updated_at FROM sessions s "
                "LEFT JOIN messages m USING (session_id) GROUP BY s.session_id ORDER BY s.session_id"
            ).fetchall()
        return [SessionInfo(sid, n, ts) for sid, n, ts in rows]

    def delete(self, session_id: str) -> None:
        with self._tx():
            self._db.execute("DELETE FROM messages WHERE session_id = ?", (check_session_id(session_id),))
            self._db.execute("DELETE FROM sessions WHERE session_id = ?", (session_id,))
            self._db.execute("DELETE FROM session_meta WHERE session_id = ?", (session_id,))
            self._db.execute("DELETE FROM damaged_messages WHERE session_id = ?", (session_id,))  # its words too

    def load_meta(self, session_id: str) -> dict[str, Any]:
        with self._refused():
            row = self._db.execute(
                "SELECT body FROM session_meta WHERE session_id = ?", (check_session_id(session_id),)
            ).fetchone()
        try:
            meta = json.loads(row[0]) if row else {}
        except (ValueError, RecursionError):
            return {}
        return meta if isinstance(meta, dict) else {}

    def save_meta(self, session_id: str, meta: dict[str, Any]) -> None:
        with self._refused():
            self._db.execute(
                "INSERT INTO session_meta (session_id, body) VALUES (?, ?) "
                "ON CONFLICT(session_id) DO UPDATE SET body = excluded.body",
                (check_session_id(session_id), json.dumps(meta, ensure_ascii=False)),
            )

    def close(self) -> None:
        with self._lock:
            self._db.close()


def open_session_store(spec: str | None, home: Path) -> SessionStore:
    """``None``/``jsonl`` → JSONL under ``home/sessions``; ``jsonl:DIR``; ``sqlite`` or
    ``sqlite:PATH``; ``memory``. A relative DIR or PATH is under ``home`` (``$TETHER_HOME``, as every
    relative path of config.toml is), never the folder the process runs in: the same setting opens
    the same store from anywhere. A spec that names a durable store that cannot be opened raises."""
    if spec in (None, "", "jsonl"):
        return JsonlSessionStore(home / "sessions")
    kind, _, where = spec.partition(":")
    if kind == "jsonl":
        return JsonlSessionStore(store_path(where, home, "its folder"))
    if kind == "sqlite":
        return SqliteSessionStore(store_path(where, home, "its database") if where else home / "sessions.db")
    if kind == "memory":
        # This process's memory: one store, as each message of `tether chat` is a run that opens it.
        return _PROCESS_SESSIONS
    raise ConfigError(f"unknown session store {spec!r}: use jsonl[:DIR], sqlite[:PATH] or memory")


def store_path(where: str, home: Path, what: str) -> Path:
    """The folder or database a session store spec names: ``~`` is the home folder, as a shell
    would make it (config.toml and a quoted variable have no shell), and a relative path is under
    ``home``."""
    from tether.config import expand_user

    path = expand_user(where, what)
    return path if path.is_absolute() else home / path


def export_jsonl(messages: Sequence[Message]) -> str:
    """The session as JSON lines, the same shape every store keeps."""
    return "".join(dump_message(m) + "\n" for m in messages)
