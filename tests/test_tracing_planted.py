"""Something planted where a run's trace goes (``traces/<run_id>.jsonl``): a link, a named pipe or
a folder. Writing the trace (a run, or a run resumed after an approval) and reading it (`tether
trace`, GET /v1/runs/<id>/trace) never wait on it and never go through a link: each is an OSError at
once that names the file, and a run whose trace cannot be written goes on without it."""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tether.events import Turn
from tether.tracing import FanoutTracer, JsonlTracer, read_trace, trace_bytes
from tether.usage import Usage

RUN = "run_0123456789abcdef"
NOTES = b"the user's own notes, not tether's\n" * 40


def turn() -> Turn:
    return Turn(RUN, 1, "scripted/plan", Usage(prompt_tokens=8, completion_tokens=2), 0.0, "stop")


def plant(path: Path, kind: str, outside: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    if kind == "link":
        path.symlink_to(outside)
    elif kind == "dangling_link":
        path.symlink_to(outside.with_name("made-through-the-link.txt"))
    elif kind == "named_pipe":
        os.mkfifo(path, 0o600)
    else:
        path.mkdir()


def outcome_within(call: Callable[[], Any], pipe: Path, seconds: float = 5.0) -> BaseException | None:
    """What ``call`` raises (None when it returns), run on a thread. A call still waiting after
    ``seconds`` on the named pipe fails the test; the pipe is opened at both ends first, so the
    thread ends rather than stay blocked for the rest of the session."""
    result: list[BaseException | None] = []

    def target() -> None:
        try:
            call()
        except BaseException as exc:  # handed to the test
            result.append(exc)
        else:
            result.append(None)

    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    thread.join(seconds)
    if thread.is_alive():
        deadline = time.monotonic() + seconds
        while thread.is_alive() and time.monotonic() < deadline and pipe.exists():
            fd = os.open(pipe, os.O_RDWR | os.O_NONBLOCK)  # a reader and a writer: the blocked open returns
            time.sleep(0.1)
            os.close(fd)
            thread.join(0.1)
        pytest.fail(f"still waiting after {seconds} s on what was planted at {pipe.name}")
    return result[0]


@pytest.mark.parametrize("kind", ["link", "dangling_link", "named_pipe", "folder"])
def test_writing_a_trace_refuses_what_was_planted_at_its_name_at_once(tmp_path: Path, kind: str) -> None:
    outside = tmp_path / "notes.txt"
    outside.write_bytes(NOTES)
    tracer = JsonlTracer(tmp_path / "traces")
    planted = tracer.path(RUN)
    plant(planted, kind, outside)

    error = outcome_within(lambda: tracer.write(turn()), planted)
    tracer.close()

    assert isinstance(error, OSError), error
    assert error.filename == str(planted)
    assert "a link, a named pipe or a folder was put at its name" in str(error) and "move it away" in str(error)
    assert outside.read_bytes() == NOTES
    assert not outside.with_name("made-through-the-link.txt").exists()


def test_a_run_whose_trace_is_a_named_pipe_goes_on_with_its_other_tracers(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """What a resumed run's loop does with its tracer: the JSONL trace is dropped, with a log line
    that names the file, and the run's other tracers get the event."""
    jsonl = JsonlTracer(tmp_path / "traces")
    planted = jsonl.path(RUN)
    plant(planted, "named_pipe", tmp_path / "unused.txt")
    seen: list[Any] = []

    class Recorder:
        def write(self, event: Any) -> None:
            seen.append(event)

        def close(self) -> None:
            pass

    fanout = FanoutTracer(jsonl, Recorder())
    with caplog.at_level(logging.ERROR, logger="tether.tracing"):
        error = outcome_within(lambda: fanout.write(turn()), planted)

    assert error is None
    assert [e.type for e in seen] == ["turn"] and fanout.tracers[0] is not jsonl
    assert str(planted) in caplog.text


@pytest.mark.parametrize("kind", ["named_pipe", "folder"])
@pytest.mark.parametrize("read", [trace_bytes, read_trace])
def test_reading_a_trace_that_is_not_a_file_is_an_error_at_once(
    tmp_path: Path, kind: str, read: Callable[[Path], Any]
) -> None:
    """`tether trace` and GET /v1/runs/<id>/trace read the file: a named pipe must not make them
    wait for a writer (on the server, its whole HTTP loop), and a folder is not a trace either."""
    planted = tmp_path / "traces" / f"{RUN}.jsonl"
    plant(planted, kind, tmp_path / "unused.txt")

    error = outcome_within(lambda: read(planted), planted)

    assert isinstance(error, OSError), error
    assert "not a regular file" in str(error) and str(planted) in str(error)
