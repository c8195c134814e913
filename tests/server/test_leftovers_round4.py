"""Left-alone items of the server: a finished run's events read off the event loop, and a token
named like the local user.

A finished run's events are read from its file off the server's event loop.

``GET /v1/runs/ID/events`` of a finished run parsed every line of its event log on the loop that
answers every request: a run of 100,000 events (7 MB) held the whole server about half a second
per request, and a client could ask again and again. Here the read is held until another request
has been answered; read on the loop, that other request could not be answered at all.
"""

from __future__ import annotations

import os
import subprocess
import threading
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.server.conftest import read_events
from tests.server.test_api import finish, send, start_session

pytest.importorskip("fastapi", reason="needs tether[serve] (the [test] extra installs it)")


def test_reading_a_finished_runs_events_holds_no_other_request(served: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    from tether.server.events import LogFile

    s = served()
    with s.client() as c:
        run_id = send(c, start_session(c, "plan"), "Which file mentions a timeout?")["run_id"]
        finish(c, run_id)
        assert c.get(f"/v1/runs/{run_id}").json()["live"] is False

        reading, release = threading.Event(), threading.Event()
        read = LogFile._slice

        def slow_slice(self: Any, *args: Any) -> Any:
            reading.set()
            release.wait(60)  # a long log, being read
            return read(self, *args)

        monkeypatch.setattr(LogFile, "_slice", slow_slice)
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


def test_a_token_named_local_is_refused_when_made_and_when_used(served: Any, tmp_path: Path) -> None:
    """``local`` is the one user of a server without tokens, whose runs act with the machine's own
    ``tether mcp login`` accounts: a token named so made its holder that user (the last note's
    left-alone). ``token create local`` is refused, and a token stored under that name earlier is
    refused when used."""
    env = {**os.environ, "TETHER_HOME": str(tmp_path / "h")}
    made = subprocess.run(["tether", "serve", "token", "create", "local"], env=env, capture_output=True, text=True)
    assert made.returncode == 2 and "give the token another name" in made.stderr and "Traceback" not in made.stderr
    s = served(tokens=["alice", "local"])  # as a store made before the refusal holds it
    with httpx.Client(base_url=s.url, timeout=30, headers={"Authorization": f"Bearer {s.tokens['local']}"}) as c:
        r = c.get("/v1/sessions")
        assert r.status_code == 401 and "named 'local'" in r.json()["error"]["message"]
    with s.client("alice") as c:
        assert c.get("/v1/sessions").status_code == 200


def test_a_reason_naming_the_database_reaches_clients_without_its_address(tmp_path: Path) -> None:
    """A store error's reason names the database, for the operator (password hidden): its user,
    host and name went to every client in the run's ``done``. A client reads that the database
    failed, not where it is."""
    from tether.server.events import for_clients

    said = (
        "could not append to session s1 in the database postgresql://tether:***@db.internal:5432/prod: "
        "server closed the connection unexpectedly"
    )
    data = for_clients(
        {"result": {"reason": said}, "reason": "the broker amqp://guest:***@mq.internal// is away"}, tmp_path
    )
    assert data["result"]["reason"] == (
        "could not append to session s1 in the database (address hidden): server closed the connection unexpectedly"
    )
    assert data["reason"] == "the broker (address hidden) is away"
    assert "db.internal" not in str(data) and "mq.internal" not in str(data)
