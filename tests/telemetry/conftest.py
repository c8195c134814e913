"""A real OTLP/HTTP receiver for the whole folder, a Telemetry pointed at it per test, and a
workspace whose errors.log has a timeout line (what ``scripted/plan`` looks for)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tether.telemetry import Telemetry
from tether.testing.otlp import OtlpReceiver, ReceivedSpan

PROMPT = "Which file mentions a timeout? My card is 4111-1111-1111-1111."


@pytest.fixture(scope="package")
def receiver() -> Iterator[OtlpReceiver]:
    with OtlpReceiver() as r:
        yield r


@pytest.fixture
def telemetry(receiver: OtlpReceiver) -> Iterator[Telemetry]:
    t = Telemetry(receiver.endpoint, service_name="tether-tests")
    yield t
    t.shutdown()


@pytest.fixture
def logs(tmp_path: Path) -> Path:
    ws = tmp_path / "logs"
    ws.mkdir()
    (ws / "errors.log").write_text("10:15:41 ERROR worker 7 timed out after 30000 ms\n", encoding="utf-8")
    (ws / "notes.txt").write_text("nothing to see\n", encoding="utf-8")
    return ws


def of_trace(spans: list[ReceivedSpan], trace_id: str) -> list[ReceivedSpan]:
    return [s for s in spans if s["trace_id"] == trace_id]


def flushed(telemetry: Telemetry, receiver: OtlpReceiver, trace_id: str, count: int) -> list[ReceivedSpan]:
    """The trace's spans once ``count`` of them have arrived."""
    assert telemetry.flush(5)
    return of_trace(receiver.wait_for(lambda spans: len(of_trace(spans, trace_id)) >= count, timeout=5), trace_id)


def by_name(spans: list[ReceivedSpan], prefix: str) -> list[ReceivedSpan]:
    return sorted((s for s in spans if s["name"].startswith(prefix)), key=lambda s: s["start_ns"])
