"""tether.tracing.FanoutTracer: every tracer gets every event; one that fails is dropped alone."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tether import Agent, run_sync
from tether.tools.files import FILE_TOOLS
from tether.tracing import FanoutTracer, JsonlTracer, read_trace


class Recorder:
    def __init__(self, fail_at: int | None = None) -> None:
        self.events: list[Any] = []
        self.closed = 0
        self.fail_at = fail_at

    def write(self, event: Any) -> None:
        if len(self.events) == self.fail_at:
            raise RuntimeError("the collector is gone")
        self.events.append(event)

    def close(self) -> None:
        self.closed += 1


def test_a_failing_tracer_is_dropped_and_the_others_go_on(
    logs: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    broken, healthy = Recorder(fail_at=2), Recorder()
    jsonl = JsonlTracer(tmp_path / "traces")
    result = run_sync(
        Agent("scripted/plan", tools=FILE_TOOLS, cwd=logs), "q", tracer=FanoutTracer(broken, jsonl, healthy)
    )
    assert result.status == "completed"
    assert len(broken.events) == 2 and broken.closed == 1  # closed once, when it was dropped
    assert healthy.events[-1].type == "done" and healthy.closed == 1
    assert read_trace(jsonl.path(result.run_id))[-1]["type"] == "run_stopped"
    assert "tracer Recorder failed" in caplog.text
