"""``search_files``' matching, in a child process that a deadline and Stop can end.

Python's ``re`` cannot be interrupted: a pattern whose repetitions overlap (``(a|aa)+$``,
``(.*a){12}x``) backtracks for hours on one line, in C and holding the GIL, so no thread, timeout
or Stop inside the process can end it, and every run sharing the process stands still meanwhile.
So the lines are matched in a child interpreter (``python -I -S``, one per search, about 40 ms to
start), fed batches of file contents through a pipe; the parent waits for each batch's answer only
until the search's deadline and while Stop has not been pressed, then kills it. A CPU-time limit
set in the child ends it even if tether is killed first. The files are still found and opened by
the parent, beneath its descriptors: the child sees bytes, never a path.
"""

from __future__ import annotations

import json
import os
import select
import struct
import subprocess
import sys
import time

from tether.cancel import CancelSignal
from tether.tools.base import ToolError

__all__ = ["Matcher"]

BATCH_BYTES = 1024 * 1024  # contents sent per batch: one answer to wait for per megabyte

_CHILD = r"""
import json, re, resource, struct, sys
cpu = int(sys.argv[1])
soft, hard = resource.getrlimit(resource.RLIMIT_CPU)
if hard == resource.RLIM_INFINITY or hard > cpu:  # ends it even if tether is gone; a lower limit stays
    resource.setrlimit(resource.RLIMIT_CPU, (cpu, hard))
stdin = sys.stdin.buffer
def read(size):
    data = stdin.read(size)
    if len(data) < size:
        sys.exit(0)
    return data
def frame():
    return read(struct.unpack("!I", read(4))[0])
regex = re.compile(frame().decode("utf-8", "surrogatepass"))
while True:
    count, wanted = struct.unpack("!II", read(8))
    texts = [frame() for _ in range(count)]  # the whole batch first: the parent never blocks writing
    hits = []
    for index, data in enumerate(texts):
        text = data.decode("utf-8", "replace")
        lines = text.split("\n")
        if text.endswith("\n"):
            lines.pop()
        for number, raw in enumerate(lines, start=1):
            line = raw.removesuffix("\r")
            if regex.search(line):
                hits.append([index, number, line[:300]])
                if len(hits) >= wanted:
                    break
        if len(hits) >= wanted:
            break
    sys.stdout.write(json.dumps(hits) + "\n")
    sys.stdout.flush()
"""


class Matcher:
    """A child process matching ``pattern`` against the lines of the contents it is sent, until
    ``deadline_s`` seconds have passed since it started or ``signal`` is cancelled."""

    def __init__(self, pattern: str, signal: CancelSignal, deadline_s: float) -> None:
        self.pattern, self.signal, self.deadline_s = pattern, signal, deadline_s
        self._ends = time.monotonic() + deadline_s
        try:
            self._proc = subprocess.Popen(
                [sys.executable or "python3", "-I", "-S", "-c", _CHILD, str(int(deadline_s) + 5)],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.DEVNULL,
                close_fds=True,
            )
        except OSError as exc:
            raise ToolError(
                f"search_files could not start the process that matches lines ({exc.strerror}); nothing "
                "was searched. Use run_command with grep meanwhile, and tell the user."
            ) from None
        self._send([pattern.encode("utf-8", "surrogatepass")], b"")

    def __enter__(self) -> Matcher:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        if self._proc.poll() is None:
            self._proc.kill()
        self._proc.wait()
        for pipe in (self._proc.stdin, self._proc.stdout):
            if pipe is not None:
                pipe.close()

    def match(self, texts: list[bytes], wanted: int, where: str) -> list[tuple[int, int, str]]:
        """``(index in texts, line number, line)`` of the first ``wanted`` matching lines.

        ``where`` names the batch in the message if the deadline or Stop ends the search.
        """
        self._send(texts, struct.pack("!II", len(texts), wanted))
        reply = self._answer(where)
        return [(int(i), int(n), str(line)) for i, n, line in json.loads(reply)]

    def _send(self, texts: list[bytes], head: bytes) -> None:
        assert self._proc.stdin is not None
        try:
            self._proc.stdin.write(head + b"".join(struct.pack("!I", len(t)) + t for t in texts))
            self._proc.stdin.flush()
        except OSError:  # the child is gone: its answer, read next, says so
            pass

    def _answer(self, where: str) -> bytes:
        assert self._proc.stdout is not None
        fd = self._proc.stdout.fileno()
        reply = b""
        while not reply.endswith(b"\n"):
            if self.signal.cancelled:
                raise ToolError(f"search_files was stopped ({self.signal.reason}) while matching {where}.")
            left = self._ends - time.monotonic()
            if left <= 0:
                raise ToolError(
                    f"search_files stopped after {self.deadline_s:g} s, still matching {self.pattern!r} "
                    f"against {where}: a pattern whose repetitions overlap (like (a|aa)+ or (.*a){{9}}) "
                    "can backtrack for hours on one line. Write it so each character can be matched "
                    "only one way, or narrow the glob."
                )
            ready, _, _ = select.select([fd], [], [], min(left, 0.1))
            if ready:
                chunk = os.read(fd, 1 << 16)
                if not chunk:
                    raise ToolError(f"search_files' matcher ended while matching {where}; try again.")
                reply += chunk
        return reply
