"""A finished run's events are read from its file off the server's event loop.

``GET /v1/runs/ID/events`` of a finished run parsed every line of its event log on the loop that
answers every request: a run of 100,000 events (7 MB) held the whole server about half a second
per request, and a client could ask again and again. Here the read is held until another request
has been answered; read on the loop, that other request could not be answered at all.
"""

from __future__ import annotations

import threading
from typing import Any

import httpx
import pytest

from tests.server.conftest import read_events
from tests.server.test_api import finish, send, start_session

pytest.importorskip("fastapi")


def test_reading_a_finished_runs_events_holds_no_other_request(served: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    from tether.server import runs

    s = served()
    with s.client() as c:
        run_id = send(c, start_session(c, "plan"), "Which file mentions a timeout?")["run_id"]
        finish(c, run_id)
        assert c.get(f"/v1/runs/{run_id}").json()["live"] is False

        reading, release = threading.Event(), threading.Event()
        load = runs.EventLog.load.__func__  # type: ignore[attr-defined]

        def slow_load(cls: Any, path: Any) -> Any:
            reading.set()
            release.wait(60)  # a long log, being read
            return load(cls, path)

        monkeypatch.setattr(runs.EventLog, "load", classmethod(slow_load))
        replayed: list[Any] = []
        reader = threading.Thread(target=lambda: replayed.extend(read_events(c, f"/v1/runs/{run_id}/events")))
        reader.start()
        try:
            assert reading.wait(30), "the events were never read"
            with httpx.Client(base_url=s.url, timeout=10) as other:
                assert other.get("/healthz").status_code == 200  # answered while the log is read
        finally:
            release.set()
            reader.join(60)
        assert [e["event"] for e in replayed][-1] == "done"
