"""Something planted where a run's trace goes (``traces/<run_id>.jsonl``): a link, a named pipe or
a folder. Writing the trace (a run, or a run resumed after an approval) and reading it (`tether
trace`, GET /v1/runs/<id>/trace) never wait on it and never go through a link: each is an OSError at
once that names the file, and a run whose trace cannot be written goes on without it."""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.planted import outcome, plant
from tether.events import Turn
from tether.tracing import FanoutTracer, JsonlTracer, read_trace, trace_bytes
from tether.usage import Usage

RUN = "run_0123456789abcdef"
NOTES = b"the user's own notes, not tether's\n" * 40


def turn() -> Turn:
    return Turn(RUN, 1, "scripted/plan", Usage(prompt_tokens=8, completion_tokens=2), 0.0, "stop")


@pytest.mark.parametrize("kind", ["link", "dangling_link", "named_pipe", "folder"])
def test_writing_a_trace_refuses_what_was_planted_at_its_name_at_once(tmp_path: Path, kind: str) -> None:
    outside = tmp_path / "notes.txt"
    outside.write_bytes(NOTES)
    tracer = JsonlTracer(tmp_path / "traces")
    planted = tracer.path(RUN)
    plant(planted, kind, outside)

    error = outcome(lambda: tracer.write(turn()), planted)
    tracer.close()

    assert isinstance(error, OSError), error
    assert error.filename == str(planted)
    said = {"link": "a symbolic link", "dangling_link": "a symbolic link", "named_pipe": "a named pipe"}
    assert f"{said.get(kind, 'a folder')} was put at its name" in str(error) and "move it away" in str(error)
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
        error = outcome(lambda: fanout.write(turn()), planted)

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

    error = outcome(lambda: read(planted), planted)

    assert isinstance(error, OSError), error
    assert "not a regular file" in str(error) and str(planted) in str(error)
