"""For the tests that put something in place of a file tether made (a link, a dangling link, a
named pipe, a folder), and that check a call ends at once instead of waiting on a pipe: opening a
named pipe for reading waits for a writer, and for writing waits for a reader."""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

KINDS = ("link", "dangling_link", "named_pipe", "folder")


def plant(path: Path, kind: str, outside: Path) -> Path:
    """Put ``kind`` at ``path`` in place of whatever is there; a link points at ``outside`` (a
    dangling one at a file beside it that does not exist)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.unlink(missing_ok=True)
    if kind == "link":
        path.symlink_to(outside)
    elif kind == "dangling_link":
        path.symlink_to(outside.with_name("made-through-the-link.txt"))
    elif kind == "named_pipe":
        os.mkfifo(path, 0o600)
    else:
        path.mkdir()
    return path


def pipe_at(path: Path) -> Path:
    return plant(path, "named_pipe", path)


def release(*pipes: Path) -> None:
    """Opens each pipe at both ends, so a call blocked on one returns."""
    for pipe in pipes:
        with contextlib.suppress(OSError):
            os.close(os.open(pipe, os.O_RDWR | os.O_NONBLOCK))


def promptly(call: Callable[[], Any], *pipes: Path, seconds: float = 5.0) -> Any:
    """``call()``'s result, or the exception it raised, when it ends within ``seconds`` (a hang
    detector, not a timing); the test fails if it is still waiting, once the ``pipes`` have been
    opened at both ends to let the stuck thread go."""
    box: dict[str, Any] = {}

    def run() -> None:
        try:
            box["value"] = call()
        except BaseException as exc:  # handed to the test below
            box["error"] = exc

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(seconds)
    if thread.is_alive():
        release(*pipes)
        thread.join(5)
        pytest.fail(f"still waiting after {seconds} s: {call} hangs on what was planted")
    if "error" in box:
        raise box["error"]
    return box.get("value")


def outcome(call: Callable[[], Any], *pipes: Path, seconds: float = 5.0) -> BaseException | None:
    """What ``call`` raises, or None when it returns; as :func:`promptly`, it must end at once."""

    def caught() -> BaseException | None:
        try:
            call()
        except Exception as exc:
            return exc
        return None

    result: BaseException | None = promptly(caught, *pipes, seconds=seconds)
    return result
