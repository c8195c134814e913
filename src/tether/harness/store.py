"""Persisted runs: a small header committed atomically, and the transcript appended line by line.

``runs/<run_id>/messages.jsonl`` holds one message per line and only grows. The header — everything
else in the state, plus how many messages (and bytes) of the transcript belong to the run — is the
commit point. It lives in two slots, ``state.a.json`` and ``state.b.json``, rewritten in place, each
carrying a sequence number and a checksum; a load takes the valid slot with the highest number. A
header written without fsync goes to the slot that does not hold the last durable one, so a crash
while a slot is written leaves a good commit in the other, and a header write needs no temporary
file and no rename. A durable commit is one fsync: its header carries the transcript's bytes since
the transcript's last fsync (its "tail", up to _TAIL_MAX; past that the transcript is synced first),
and a load after a power cut takes them from there. Each header also states the sha256 of the
transcript bytes it counts, so a load never takes other lines written at the same place for its own.
Lines a crash left after the last commit are ignored on load and cut off by the next save. A run
loaded from a header saved without fsync makes its next commit durable. Saving a turn costs O(new
messages), and a load always sees a state saved whole.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import hashlib
import json
import os
import re
import stat
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from tether.errors import StaleRunError, StoreError, UserError
from tether.fileio import PLANTED, atomic_write, keep_from_commands, open_own, planted, private_dir, read_own
from tether.harness.state import RunState
from tether.messages import dump_message, load_message

__all__ = ["GroupSync", "RunStore", "read_header"]

_SLOTS = ("state.a.json", "state.b.json")
_MESSAGES = "messages.jsonl"
_SLOT_BLOCK = 1024  # a header is padded to a multiple of this, so rewriting a slot rarely changes its size
_TAIL_MAX = 16 * 1024  # the most transcript bytes a header carries in place of the transcript's own fsync
_COMMIT_FIELDS = (
    "message_count",
    "messages_bytes",
    "messages_file",
    "commit_seq",
    "synced_bytes",
    "tail",
    "turns",
    "transcript_sha256",
)


def _sync(fd: int) -> None:
    """Make what was written to ``fd`` durable. ``fdatasync`` (Linux) writes the data and the
    metadata needed to read it back (the size) but not the file's times, which spares a journal
    commit when a header slot is rewritten at the same size; where there is none (macOS), fsync."""
    (getattr(os, "fdatasync", None) or os.fsync)(fd)


class GroupSync:
    """Group commit: the fsyncs of many runs in one process, shared the way a database's write-ahead
    log shares its flushes.

    A commit hands its file to :meth:`sync` and waits. When no group is being synced, it syncs at
    once (a lone run pays exactly one fdatasync, as before). Otherwise it joins the next group: the
    commits that arrive while a group is being synced are synced together when it ends, their
    fdatasyncs issued at the same moment from a few threads, so the file system folds them into one
    journal commit and one cache flush. A commit waits for its own group, never for the syncs of
    every other run queued before it; and it returns only once its own file is on the disk (an
    error is raised to that commit alone)."""

    def __init__(self, threads: int = 16) -> None:
        self._cond = threading.Condition()
        self._queue: list[tuple[int, list[BaseException | None]]] = []
        self._busy = False
        self._pool: Any = None
        self._threads = threads
        self.groups = 0  # groups synced (for tests and benchmarks)
        self.synced = 0  # files synced

    @property
    def waiting(self) -> int:
        """Commits queued for the next group."""
        with self._cond:
            return len(self._queue)

    @property
    def busy(self) -> bool:
        """Whether a group is being synced (a commit now would join the next one)."""
        return self._busy

    def sync(self, fd: int) -> None:
        """Make ``fd`` durable; returns when it is (raises the fdatasync's error, if any)."""
        outcome: list[BaseException | None] = []
        with self._cond:
            self._queue.append((fd, outcome))
            while self._busy and not outcome:  # a group is being synced: this one joins the next
                self._cond.wait()
            if not outcome:  # nobody syncs: this commit leads the group of all that wait, itself among them
                self._busy = True
                group, self._queue = self._queue, []
        if not outcome:
            errors = self._sync_all([f for f, _ in group])
            with self._cond:
                for (_, done), error in zip(group, errors, strict=True):
                    done.append(error)
                self.groups += 1
                self.synced += len(group)
                self._busy = False
                self._cond.notify_all()  # the group's commits return; of those queued since, one leads next
        if outcome[0] is not None:
            raise outcome[0]

    def _sync_all(self, fds: list[int]) -> list[BaseException | None]:
        def one(fd: int) -> BaseException | None:
            try:
                _sync(fd)
            except OSError as exc:
                return exc
            return None

        if len(fds) == 1:
            return [one(fds[0])]
        if self._pool is None:
            from concurrent.futures import ThreadPoolExecutor

            self._pool = ThreadPoolExecutor(self._threads, thread_name_prefix="tether-fsync")
        return list(self._pool.map(one, fds))


_HOLDER_WIDTH = 300  # bytes of a session's lock file that name the run holding it


def _encode_header(header: dict[str, Any]) -> bytes:
    body = json.dumps(header, separators=(",", ":")).encode()
    data = b"%s\n%d\n%s\n" % (hashlib.sha256(body).hexdigest().encode(), len(body), body)
    return data + b" " * (-len(data) % _SLOT_BLOCK)  # ignored on read, like an older longer header


@contextlib.contextmanager
def _own_file(path: Path) -> Iterator[None]:
    """Opening ``path`` in the block: something other than what tether made there (a link, a named
    pipe, a folder) is a :class:`StoreError` that names it and says what to do; any other
    ``OSError`` (a missing file among them) goes on as it is."""
    try:
        yield
    except OSError as exc:
        if exc.errno not in PLANTED:
            raise
        raise _planted_error(path) from exc


def _planted_error(path: Path) -> StoreError:
    what = planted(path) or "something else"
    return StoreError(
        f"{path} is {what}, not what tether made there; tether neither follows a link nor waits on a "
        "pipe. Remove it, then restore the run's file from a backup or delete the run."
    )


def _write_all(fd: int, data: bytes, offset: int) -> None:
    view = memoryview(data)
    while view:
        written = os.pwrite(fd, view, offset)
        if not written:  # nothing taken (a file system out of room that says so this way): never a loop
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        view, offset = view[written:], offset + written


class _Files:
    """The open descriptors of one run: its two header slots and its transcript, with where this
    process left the transcript's end (-1 when unknown: the next save cuts it back to the commit)."""

    __slots__ = ("busy", "end", "name", "slots", "transcript")

    def __init__(self, d: Path) -> None:
        if os.path.islink(d):  # the run's own folder: its files would be written where the link leads
            raise _planted_error(d)
        self.slots: list[int] = []
        self.transcript, self.name, self.end = -1, "", -1
        self.busy = 0  # saves using these descriptors right now (on other threads): never closed under them
        try:
            for slot in _SLOTS:
                # Mode 0600; a link, a pipe or a folder put at the name is refused (open_own), never
                # written through nor waited on. Opened once per run, kept between its saves.
                with _own_file(d / slot):
                    self.slots.append(open_own(d / slot, os.O_WRONLY | os.O_CREAT))
        except BaseException:
            self.close()
            raise

    def transcript_fd(self, d: Path, name: str) -> int:
        if name != self.name:
            self.close_transcript()
            path = d / name
            # Private like the header slots and a rewritten transcript (atomic_write): it is the
            # conversation. A link, a pipe or a folder put at its name is refused (open_own).
            with _own_file(path):
                fd = open_own(path, os.O_WRONLY | os.O_CREAT)
            self.transcript, self.name, self.end = fd, name, os.fstat(fd).st_size
        return self.transcript

    def close_transcript(self) -> None:
        if self.transcript >= 0:
            os.close(self.transcript)
        self.transcript, self.name, self.end = -1, "", -1

    def close(self) -> None:
        self.close_transcript()
        for fd in self.slots:
            os.close(fd)
        self.slots = []


class _Commit:
    """Where a run stands on disk, as this process knows it: the messages and bytes the last header
    counts, the transcript's name, the header's sequence number and slot, and which slot holds the
    last commit a power cut cannot take (a later header written without fsync goes to the other
    slot, so it never overwrites it). ``synced`` is how much of the transcript is known to be on
    the disk; ``tail`` the bytes after it (None when unknown or too long to carry in a header).
    ``digest`` is the sha256 of the transcript's first ``nbytes`` the header states (older headers
    have none), and ``hasher`` that hash as this process computed it, to extend with new lines."""

    __slots__ = (
        "count",
        "digest",
        "durable_slot",
        "hasher",
        "name",
        "nbytes",
        "newest",
        "seq",
        "superseded",
        "synced",
        "tail",
        "unsure",
    )

    def __init__(
        self,
        count: int = 0,
        nbytes: int = 0,
        name: str = _MESSAGES,
        seq: int = 0,
        slot: int = 1,
        synced: int = 0,
        tail: bytes | None = b"",
        digest: str | None = None,
    ) -> None:
        self.count, self.nbytes, self.name, self.seq = count, nbytes, name, seq
        self.durable_slot, self.synced = slot, synced
        # The newest header's number on disk as this process last saw it: another number there
        # means another process saved the run since (see RunStore.check_current).
        self.newest = seq
        self.tail: bytearray | None = None if tail is None else bytearray(tail)
        self.digest = digest
        self.hasher: Any = hashlib.sha256() if nbytes == 0 else None
        # Read from a header saved without fsync: this process's first commit is made durable, so
        # what it goes on from cannot be lost behind it (a power cut after a power cut).
        self.unsure = tail is None
        # Loaded past a newer header whose lines never reached the disk (a power cut): the next
        # commit writes a new transcript file, so lines written later at the same place can never
        # make that header whole again (it would bring back a state this run no longer goes on from).
        self.superseded = False

    @classmethod
    def of(cls, header: dict[str, Any], slot: int, durable_slot: int | None = None) -> _Commit:
        """The commit ``header`` (in ``slot``) describes; ``durable_slot`` holds the newest header
        known to be durable (the loaded one when unknown), which the next saves must not overwrite."""
        slot = slot if durable_slot is None else durable_slot
        count, nbytes = int(header.get("message_count", 0)), int(header.get("messages_bytes", 0))
        digest = header.get("transcript_sha256")
        digest = digest if isinstance(digest, str) else None
        # A header without a tail was written without fsync: its transcript is trusted as far as it
        # counts, but not known to be on the disk, so the next durable commit syncs the file.
        tail = header["tail"].encode() if isinstance(header.get("tail"), str) else None
        if tail is not None and len(tail) > nbytes:
            raise ValueError(f"its tail holds {len(tail)} bytes of a transcript of {nbytes}")
        return cls(
            count,
            nbytes,
            _checked_name(header.get("messages_file")),
            int(header.get("commit_seq", 0)),
            slot,
            nbytes - len(tail or b""),
            tail,
            digest,
        )


def _decode_header(data: bytes) -> dict[str, Any] | None:
    """A slot's header, or None when it is torn or damaged. Bytes past the stated length are left
    over from a longer earlier header (slots are overwritten in place, not truncated)."""
    digest, _, rest = data.partition(b"\n")
    size, _, rest = rest.partition(b"\n")
    if not size.isdigit() or len(rest) < int(size):
        return None
    body = rest[: int(size)]
    if hashlib.sha256(body).hexdigest().encode() != digest:
        return None  # the other slot holds the previous commit
    try:
        header = json.loads(body)
    except ValueError:
        return None
    return header if isinstance(header, dict) else None


def read_header(d: Path) -> dict[str, Any] | None:
    """The latest committed header of the run in ``d``; None when the run was never saved."""
    headers = _headers(d)
    if not headers:
        return None
    header = dict(headers[0][0])
    header.pop("tail", None)  # transcript bytes, for a load after a power cut; not a field of the run
    return header


def _headers(d: Path) -> list[tuple[dict[str, Any], int]]:
    """The valid headers of the run in ``d`` with their slots, newest first."""
    found: list[tuple[dict[str, Any], int]] = []
    present = 0
    for index, slot in enumerate(_SLOTS):
        path = d / slot
        try:
            with _own_file(path):
                data = read_own(path)  # not through a link, never waiting on a pipe
        except FileNotFoundError:
            continue
        if not data:
            continue  # made, never written: a first save cut short
        present += 1
        header = _decode_header(data)
        if header is not None:
            found.append((header, index))
    if not found:
        if present == 2:
            raise StoreError(
                f"both header slots of {d} are damaged; the run cannot be loaded. Restore them "
                "from a backup or delete the run."
            )
        return []  # never saved, or its first save was cut short: there is no run yet
    return sorted(found, key=lambda h: int(h[0].get("commit_seq", 0)), reverse=True)


def _durable_slot(headers: list[tuple[dict[str, Any], int]]) -> int | None:
    """The slot of the newest header saved with an fsync (only those carry a ``tail``), if any: a
    run resumed after a crash must write its next headers over the other one."""
    return next((slot for header, slot in headers if "tail" in header), None)


def _checked_name(name: Any) -> str:
    if name is None:
        return _MESSAGES
    if not isinstance(name, str) or not re.fullmatch(r"messages(-\d+)?\.jsonl", name):
        raise StoreError(f"the run header names an unexpected transcript file: {name!r}")
    return name


def _next_name(name: str) -> str:
    match = re.fullmatch(r"messages-(\d+)\.jsonl", name)
    return f"messages-{int(match.group(1)) + 1 if match else 1}.jsonl"


# How long a lock found held is asked again: :meth:`RunStore.held` and :meth:`RunStore.session_holder`
# ask with a shared lock, taken and let go at once (another server process on the home asks so of each
# run it shows), which a run taking its lock at that moment must not read as another run holding it.
_PROBE_GRACE_S = 0.2


def _take_lock(fd: int) -> None:
    """An exclusive ``flock`` on ``fd``, or BlockingIOError when it is held longer than a question of
    who holds it (:data:`_PROBE_GRACE_S`)."""
    import fcntl
    import time

    deadline = time.monotonic() + _PROBE_GRACE_S
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return
        except BlockingIOError:
            if time.monotonic() >= deadline:
                raise
            time.sleep(0.005)


def _held_elsewhere(fd: int) -> bool:
    """Whether another open file description holds an exclusive ``flock`` on ``fd``'s file: asked
    with a shared lock that never blocks, let go when ``fd`` is closed."""
    import fcntl

    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    return False


class RunStore:
    """Runs under ``root`` (usually ``$TETHER_HOME/runs``)."""

    def __init__(self, root: Path | str, *, fsync: bool = True, group: GroupSync | None = None) -> None:
        self.root = Path(root)
        keep_from_commands(self.root)  # transcripts: never readable by a sandboxed command
        self.fsync = fsync
        # Every run saved through this store shares its fsyncs (group commit); pass one GroupSync
        # to several stores on the same disk to share them across stores too.
        self.group = group or GroupSync()
        self._commit_pool: Any = None  # threads for save_async, made on first use
        self._inflight = 0  # save_async commits on those threads now
        self._committed: dict[str, _Commit] = {}  # run id → where it stands on disk
        # run id → descriptors of its header slots and transcript, open between saves. Those of runs
        # held by ``lock`` stay open until the run lets go; of the others, only the latest's. One store
        # may serve runs on several threads (tether serve's run loops): the table has its own lock.
        self._fds: dict[str, _Files] = {}
        self._held: set[str] = set()
        self._fd_lock = threading.Lock()

    def _dir(self, run_id: str) -> Path:
        if not run_id or "/" in run_id or "\\" in run_id or run_id.startswith("."):
            raise UserError(f"not a run id: {run_id!r}")
        return self.root / run_id

    def exists(self, run_id: str) -> bool:
        """Whether the run has a committed header (a first save cut short does not count)."""
        if run_id in self._committed:  # this process committed or loaded one: no need to read it
            return True
        try:
            return read_header(self._dir(run_id)) is not None
        except StoreError:
            return True  # it exists, damaged: load() will say so

    def save(self, state: RunState, *, rewrite: bool = False, durable: bool = True) -> None:
        """Persist ``state``: append the messages not yet on disk, then commit the header.

        ``rewrite=True`` is for a transcript whose earlier messages changed (trimming,
        compaction): the whole file is written to a temporary file and renamed into place.
        ``durable=False`` skips the fsyncs: the save survives the process being killed (the page
        cache outlives it) but maybe not a power cut, after which the run loads as of its last
        durable save. The loop makes one durable save per step, before each model request and
        before each side effect, and non-durable ones in between (see docs/harness.md).
        """
        d = self._dir(state.run_id)
        files = self._files(state.run_id, d)
        try:
            self._save(state, d, files, rewrite, durable)
        finally:
            with self._fd_lock:
                files.busy -= 1

    def _save(self, state: RunState, d: Path, files: _Files, rewrite: bool, durable: bool) -> None:
        commit = self._committed.get(state.run_id) or self._read_commit(d)
        if state.commit_seq != commit.seq:
            raise StaleRunError(state.run_id, state.commit_seq, commit.seq)
        durable = durable or commit.unsure
        messages = state.messages
        if rewrite or len(messages) < commit.count or commit.superseded:
            # A new file under a new name; the header switches to it in one rename, so a crash
            # leaves either the old transcript or the new one, never a mix.
            name = _next_name(commit.name)
            data = "".join(dump_message(m) + "\n" for m in messages).encode()
            atomic_write(d / name, data, fsync=self.fsync)
            files.close_transcript()
            old = commit.name
            # atomic_write synced the new file whole: no tail. The header that names it is synced
            # too, whatever was asked: the old file is deleted next, and the last durable header
            # may name it.
            self._commit(
                state, files, commit, len(messages), len(data), True, name, len(data), bytearray(), hashlib.sha256(data)
            )
            commit.superseded = False
            (d / old).unlink(missing_ok=True)
            return
        new = "".join(dump_message(m) + "\n" for m in messages[commit.count :]).encode()
        if commit.hasher is None:  # a run this process did not load: hash what the header counts, once
            commit.hasher = hashlib.sha256(self._committed_bytes(d / commit.name, commit))
        hasher = commit.hasher.copy()
        hasher.update(new)
        fd = self._transcript(files, d, commit)
        try:
            files.end = -1
            _write_all(fd, new, commit.nbytes)
            files.end = commit.nbytes + len(new)
        except OSError:
            files.close_transcript()
            raise
        synced, tail = commit.synced, commit.tail
        if tail is not None:
            tail = tail + new if len(tail) + len(new) <= _TAIL_MAX else None
        if self.fsync and durable and tail is None:
            self.group.sync(fd)  # lines before the header that counts them
            synced, tail = files.end, bytearray()
        self._commit(state, files, commit, len(messages), files.end, durable, commit.name, synced, tail, hasher)

    async def save_async(
        self, state: RunState, *, rewrite: bool = False, durable: bool = True, before: Any = None
    ) -> None:
        """:meth:`save` on one of the store's commit threads, awaited: the event loop goes on with
        its other runs while this commit waits for its group's fsync (:class:`GroupSync`), so the
        runs of a server share their fsyncs instead of taking turns. Returns once the save is
        done, durable when asked. Cancelled while it runs, it still finishes before the
        cancellation goes on (the run's next save must not overtake it). ``before`` (a function)
        runs first on the same thread: what must be written, and waited for, before the save
        (a session's mirror of the transcript)."""
        with self._fd_lock:
            lone = self._held == {state.run_id} and not self._inflight and not self.group.busy
        if not (self.fsync and durable) or lone:
            # Nothing to wait for, or the only run this store holds, with no other commit to share
            # a sync with (`tether run`): saved here, as save() does, with no thread hop.
            if before is not None:
                before()
            self.save(state, rewrite=rewrite, durable=durable)
            return
        if self._commit_pool is None:
            from concurrent.futures import ThreadPoolExecutor

            with self._fd_lock:
                if self._commit_pool is None:
                    self._commit_pool = ThreadPoolExecutor(64, thread_name_prefix="tether-commit")

        def commit() -> None:
            if before is not None:
                before()
            self.save(state, rewrite=rewrite, durable=durable)

        with self._fd_lock:
            self._inflight += 1
        try:
            job = self._commit_pool.submit(commit)
            try:
                await asyncio.wrap_future(job)
            except asyncio.CancelledError:
                if not job.cancel():
                    job.result()  # started: let it end (milliseconds) before anything else is saved
                raise
        finally:
            with self._fd_lock:
                self._inflight -= 1

    def _transcript(self, files: _Files, d: Path, commit: _Commit) -> int:
        """The transcript's descriptor, its end put back to the last commit: lines a crashed save
        wrote after it are cut off, and a tail the header carries (a power cut may have lost it from
        the file, whose first ``synced`` bytes are on the disk) is written back."""
        opened = files.name != commit.name
        fd = files.transcript_fd(d, commit.name)
        if opened and commit.tail:
            _write_all(fd, bytes(commit.tail), commit.synced)
            files.end = -1  # and cut after it
        if files.end != commit.nbytes:
            os.ftruncate(fd, commit.nbytes)
            files.end = commit.nbytes
        return fd

    def _commit(
        self,
        state: RunState,
        files: _Files,
        commit: _Commit,
        count: int,
        nbytes: int,
        durable: bool,
        name: str,
        synced: int,
        tail: bytearray | None,
        hasher: Any,
    ) -> None:
        """Write the header; ``commit`` changes only once it is written. The transcript's hash lets a
        load tell the lines this header counted from others written at the same place later (a run
        resumed from the commit before, then a power cut that kept its lines but not its header)."""
        header: dict[str, Any] = state.model_dump(mode="json", exclude={"messages"})
        header.update(
            message_count=count,
            messages_bytes=nbytes,
            messages_file=name,
            commit_seq=commit.seq + 1,
            transcript_sha256=hasher.hexdigest(),
        )
        durable = durable or not self.fsync
        if self.fsync and durable:
            # One fsync makes the step durable: the header carries the transcript's bytes since
            # its last fsync, so those need no fsync of their own (a load after a power cut takes
            # them from here). Past _TAIL_MAX the transcript is synced instead (see save).
            header.update(synced_bytes=synced, tail=bytes(tail or b"").decode())
        # Every header goes to the slot that does not hold the last durable one: a header written
        # without fsync, or torn by a crash, never takes the commit a power cut must leave.
        slot = 1 - commit.durable_slot
        _write_all(files.slots[slot], _encode_header(header), 0)
        if self.fsync and durable:
            self.group.sync(files.slots[slot])
        if durable:
            commit.durable_slot, commit.unsure = slot, False
        commit.count, commit.nbytes, commit.name, commit.seq = count, nbytes, name, commit.seq + 1
        commit.newest = state.commit_seq = commit.seq
        commit.synced, commit.tail = synced, tail
        commit.hasher, commit.digest = hasher, header["transcript_sha256"]
        self._committed[state.run_id] = commit

    @contextlib.contextmanager
    def lock(self, run_id: str) -> Iterator[None]:
        """Hold the run for this process while it runs: two processes resuming one run at once
        would both run its pending calls."""

        d = self._dir(run_id)
        private_dir(d)
        # The lock is on the run's directory itself: no lock file to create (a file's creation costs
        # as much as a write and its fsync on some disks, once per run).
        with _own_file(d):  # a link put at the run's folder is not followed (ELOOP)
            fd = os.open(d, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
        try:
            try:
                _take_lock(fd)
            except BlockingIOError as exc:
                raise StoreError(
                    f"run {run_id} is running in another process right now; wait for it to "
                    "stop (or stop it) before resuming it here"
                ) from exc
            with self._fd_lock:
                self._held.add(run_id)
            try:
                yield
            finally:
                with self._fd_lock:
                    self._held.discard(run_id)
                    self._close_fds(run_id)
        finally:
            os.close(fd)  # closing the descriptor releases the lock

    @contextlib.contextmanager
    def lock_session(self, session_id: str, run_id: str, *, holder: str = "", then: str = "") -> Iterator[None]:
        """Hold the conversation ``session_id`` for ``run_id`` while it runs: two runs continuing one
        session at once would interleave their messages, each model reading the other's running
        calls as interrupted. The lock is a file under ``runs/.sessions`` that names its run.
        ``holder``: the words that name another holder than a run (``tether sessions delete``);
        ``then``: what a refusal tells the person to do, for a holder that sends no message."""

        folder = self.root / ".sessions"
        with contextlib.suppress(FileNotFoundError):  # tether's folder: never a link to write through
            if not stat.S_ISDIR(os.lstat(folder).st_mode):
                raise StoreError(
                    f"{folder} is {planted(folder) or 'a file'}, not the folder tether keeps its session "
                    "locks in (tether writes nothing through a link): remove it, tether makes the folder again"
                )
        path = folder / f"{session_id}.lock"
        with _own_file(path):
            fd = open_own(path, os.O_RDWR | os.O_CREAT | getattr(os, "O_CLOEXEC", 0))
        try:
            try:
                _take_lock(fd)
            except BlockingIOError as exc:
                busy = os.pread(fd, _HOLDER_WIDTH, 0).decode(errors="replace").strip() or "another run"
                then = then or (
                    "nothing was sent or run. Wait for that run to stop (or stop it), then send this "
                    "message again, or use another session"
                )
                raise StoreError(
                    f"session {session_id} is being continued by {busy} in another process right now; {then}"
                ) from exc
            # Written over in place, padded to one width: cutting the file first (ftruncate) costs
            # a journal write, about 0.4 ms a run here.
            os.pwrite(fd, (holder or f"run {run_id}").encode().ljust(_HOLDER_WIDTH)[:_HOLDER_WIDTH], 0)
            yield
        finally:
            os.close(fd)  # and with it the lock

    def check_current(self, state: RunState) -> None:
        """Refuse ``state`` if it is behind the run as saved: a copy loaded before the run was saved
        again, by another process or from another copy. Going on from it would do again what was
        done since (a call approved on both copies would run twice). The loop calls this once it
        holds the run (:meth:`lock`), before anything is sent or run."""
        run_id = state.run_id
        headers = _headers(self._dir(run_id))
        newest = int(headers[0][0].get("commit_seq", 0)) if headers else 0
        commit = self._committed.get(run_id)
        if commit is not None and commit.newest == newest:
            current = commit.seq  # (after a power cut, the commit loaded may be the one before the newest)
        else:  # another process saved the run since this one read it: its next save reads it afresh
            with self._fd_lock:
                self._committed.pop(run_id, None)
                files = self._fds.get(run_id)
                if files is not None and not files.busy:
                    self._close_fds(run_id)
            current = newest
        if state.commit_seq != current:
            raise StaleRunError(run_id, state.commit_seq, current)

    def held(self, run_id: str) -> bool:
        """Whether a process on this machine holds the run now (:meth:`lock`): a run saved as
        ``running`` that nobody holds was left so by a process that stopped or was killed, and
        resumes from its last save. A shared lock, taken and let go at once, is the question: it
        never blocks, and a resume that starts in that moment is told to wait."""
        try:
            fd = os.open(self._dir(run_id), os.O_RDONLY | os.O_DIRECTORY | getattr(os, "O_NOFOLLOW", 0))
        except OSError:
            return False  # no folder (or something else in its place): nothing holds it
        try:
            return _held_elsewhere(fd)
        finally:
            os.close(fd)  # and with it the shared lock

    def session_holder(self, session_id: str) -> str | None:
        """The run a process on this machine holds the session ``session_id`` for now
        (:meth:`lock_session`, which names it in the lock file), asked as :meth:`held` asks; None
        when nobody holds it, or a holder that is no run does (``tether sessions delete``)."""
        if not session_id or "/" in session_id or session_id.startswith("."):
            return None  # no session lock of this store's is named so
        path = self.root / ".sessions" / f"{session_id}.lock"
        try:  # not a planted link; a pipe put there does not block the open
            fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOFOLLOW", 0))
        except OSError:
            return None
        try:
            try:
                if not _held_elsewhere(fd):
                    return None
            except OSError:  # a lock that cannot be asked (a file system without them): nobody's
                return None
            holder = os.pread(fd, _HOLDER_WIDTH, 0).decode(errors="replace").strip()
            return holder.removeprefix("run ") if holder.startswith("run ") else None
        finally:
            os.close(fd)  # and with it the shared lock

    def _files(self, run_id: str, d: Path) -> _Files:
        with self._fd_lock:
            files = self._fds.get(run_id)
            if files is None:
                for other in [r for r, f in self._fds.items() if r not in self._held and not f.busy]:
                    self._close_fds(other)
                private_dir(d)
                files = self._fds[run_id] = _Files(d)
            files.busy += 1
        return files

    def _close_fds(self, run_id: str) -> None:
        files = self._fds.pop(run_id, None)
        if files is not None:
            files.close()

    def close(self) -> None:
        with self._fd_lock:
            for run_id in list(self._fds):
                self._close_fds(run_id)
            pool, self._commit_pool = self._commit_pool, None
        if pool is not None:
            pool.shutdown(wait=True)

    def __del__(self) -> None:
        try:  # noqa: SIM105 - not contextlib.suppress: at interpreter exit the module's names may be gone
            self.close()
        except Exception:
            pass

    def _read_commit(self, d: Path) -> _Commit:
        headers = _headers(d)
        return _Commit.of(*headers[0], _durable_slot(headers)) if headers else _Commit()

    def load(self, run_id: str) -> RunState:
        d = self._dir(run_id)
        if os.path.islink(d):  # a link put at the run's folder is not read through
            raise _planted_error(d)
        headers = _headers(d)
        if not headers:
            raise UserError(f"no run {run_id!r} under {self.root}. `tether runs` lists the runs there.")
        durable = _durable_slot(headers)
        try:
            return self._load(run_id, d, *headers[0], durable)
        except StoreError:
            # After a power cut the newest header (written without fsync) may count transcript
            # lines that never reached the disk: the previous commit, if whole, is the run. A header
            # written with fsync (one with a tail) counts lines that were on the disk before it: if
            # they are not there, the file was damaged since, and the run is not what an earlier
            # commit says (going on from it would do again what was done since).
            if len(headers) < 2 or "tail" in headers[0][0]:
                raise
            try:  # the one to keep is then the one loaded
                state = self._load(run_id, d, *headers[1], None)
            except StoreError:
                pass
            else:
                commit = self._committed[run_id]
                commit.superseded, commit.newest = True, int(headers[0][0].get("commit_seq", 0))
                return state
            raise

    def _load(self, run_id: str, d: Path, header: dict[str, Any], slot: int, durable: int | None) -> RunState:
        try:
            commit = _Commit.of(header, slot, durable)
        except (TypeError, ValueError) as exc:
            raise StoreError(
                f"the header of {d} does not add up ({exc}); it was edited or damaged. Restore "
                "it from a backup or delete the run."
            ) from exc
        if header.get("run_id", run_id) != run_id:  # a copied folder: its saves would go to the run it names
            raise StoreError(
                f"the header of {d} names run {header['run_id']!r}, as a copy of that run's folder "
                "would; going on from it would write into that run. Give the copy its own id in its "
                "header (or delete it)."
            )
        header = {k: v for k, v in header.items() if k not in _COMMIT_FIELDS}
        messages = list(self._read_messages(d / commit.name, commit))
        try:
            state = RunState.model_validate({**header, "messages": []})
        except ValidationError as exc:
            problem = exc.errors()[0]
            where = ".".join(str(x) for x in problem["loc"])
            raise StoreError(
                f"the header of {d} does not describe a run: {where}: {problem['msg']}. It was "
                "edited or damaged; restore it from a backup or delete the run."
            ) from exc
        state.messages, state.commit_seq = messages, commit.seq
        self._committed[run_id] = commit
        return state

    def _committed_bytes(self, path: Path, commit: _Commit) -> bytes:
        """The transcript's first ``nbytes``, as the header counts them. With a tail, only the
        file's first bytes are known to be on the disk; the header holds the rest (after a power
        cut the file may have lost them)."""
        count, nbytes = commit.count, commit.nbytes
        known = nbytes if commit.tail is None else commit.synced
        try:
            # Not through a link, never waiting on a pipe; only a regular file. (Its folder, the
            # run's, is there: open_own has none to make.)
            with _own_file(path):
                fd = open_own(path, os.O_RDONLY)
            with os.fdopen(fd, "rb") as f:
                data = f.read(known)
        except FileNotFoundError as exc:
            if known == 0 and commit.tail is not None:  # a first commit: its lines are all in the header
                data = b""
            else:
                raise StoreError(f"{path} is missing but the run's header counts {count} messages") from exc
        if commit.tail is not None and len(data) == known:
            data += commit.tail
        lines = data.count(b"\n")
        if len(data) < nbytes or lines < count:
            raise StoreError(
                f"{path} holds {lines} complete messages but the header counts {count}: "
                "the file was cut short or edited. Restore it from a backup or delete the run."
            )
        return data

    def _read_messages(self, path: Path, commit: _Commit) -> Iterator[Any]:
        if commit.count == 0:
            return
        data = self._committed_bytes(path, commit)
        for number, line in enumerate(data.splitlines()[: commit.count], start=1):
            try:
                yield load_message(line)
            except ValidationError as exc:
                raise StoreError(f"{path}, line {number}: not a message ({exc.errors()[0]['msg']})") from exc
        hasher = hashlib.sha256(data)
        if commit.digest is not None and hasher.hexdigest() != commit.digest:
            raise StoreError(
                f"{path} does not hold the lines its header counted (their sha256 differs): it was "
                "edited, or a power cut kept lines a later save wrote in their place. Restore it "
                "from a backup or delete the run."
            )
        commit.hasher = hasher

    def list(self) -> list[dict[str, Any]]:
        """Headers of every run, newest first (messages are not read). A sub-agent's run saved as
        one of its own is among them: ``tether.harness.subagent.parent_in_header`` tells it apart."""
        if not self.root.exists():
            return []
        rows = []
        for d in self.root.iterdir():
            if d.is_symlink():  # a run's folder is tether's: a link put in its place is not read through
                continue
            try:
                header = read_header(d)
            except (OSError, StoreError):
                continue
            if header is not None:
                rows.append(header)
        rows.sort(key=lambda h: h.get("created_at", 0), reverse=True)
        return rows
