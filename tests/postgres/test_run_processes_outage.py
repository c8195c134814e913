"""`tether serve --run-processes` on Postgres, a Stop posted while the database is away: the run
stops (its process saves the stop once the database is back), and the Stop's answer says so; it
said the run had "failed" and that its files were damaged and an operator must restore or remove
them, since the server read the run's state from the database to answer and took the failure to
reach it for a damaged run."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.postgres.test_left_alone_dispatch import Outage
from tests.postgres.test_left_alone_s11 import _short_waits, _until

pytest.importorskip("psycopg", reason="needs tether[postgres] (the [test] extra installs it)")  # an optional extra

# One tool that waits for the test's word (a file), so the run is live when the database goes.
AGENTS = """
import os, time
from pathlib import Path
from tether import Agent, tool
from tether.providers.scripted import call
from tether.messages import ToolMessage
from tether.testing import FunctionModel

GATE = Path(os.environ["TETHER_TEST_GATE"])


@tool(read_only=True)
def wait_for_word() -> str:
    \"\"\"Waits.\"\"\"
    (GATE / "started").write_text("1")
    for _ in range(2000):
        if (GATE / "go").exists():
            return "went"
        time.sleep(0.01)
    return "gave up"


def reply(messages, request):
    return "done" if any(isinstance(m, ToolMessage) for m in messages) else call("w1", "wait_for_word")


agents = {"waiter": Agent(FunctionModel(reply), tools=[wait_for_word])}
"""


@pytest.fixture
def node(tmp_path: Path, db_url: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    from tests.server.conftest import start_uvicorn
    from tether.config import load_settings
    from tether.server.app import create_app

    home, gate = tmp_path / "home", tmp_path / "gate"
    home.mkdir()
    gate.mkdir()
    (home / "config.toml").write_text(f'database_url = "{db_url}"\n')
    (tmp_path / "agents.py").write_text(AGENTS)
    monkeypatch.setenv("TETHER_TEST_GATE", str(gate))  # the run process inherits it
    app = create_app(load_settings(home), agent_spec=str(tmp_path / "agents.py"), run_processes=1)
    up = start_uvicorn(app)
    yield up.url
    (gate / "go").write_text("1")
    up.stop(20)


def test_a_stop_while_the_database_is_away_says_the_run_stopped(
    node: str, db_url: str, pg_server: Any, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    _short_waits(monkeypatch, db_url)
    gate = Path(os.environ["TETHER_TEST_GATE"])
    outage = Outage(pg_server.url, db_url)
    with httpx.Client(base_url=node, timeout=60) as client:
        sid = client.post("/v1/sessions", json={"agent": "waiter"}).json()["session_id"]
        posted = client.post(f"/v1/sessions/{sid}/messages", json={"text": "wait", "message_id": "m1"})
        assert posted.status_code == 202, posted.text
        run_id = posted.json()["run_id"]
        _until(lambda: (gate / "started").exists(), "the tool never started")
        outage.begin()
        try:
            stopped = client.post(f"/v1/runs/{run_id}/cancel")
        finally:
            outage.end()
        assert stopped.status_code == 202, stopped.text
        view = stopped.json()
        assert "damaged" not in str(view.get("reason")), view
        assert (view["status"], view["resumable"]) == ("interrupted", False), view
        assert "shown once it is back" in view["reason"], view
        _until(
            lambda: client.get(f"/v1/runs/{run_id}").json().get("status") == "interrupted",
            "the stop was not saved once the database was back",
            timeout=60,
        )
        run = client.get(f"/v1/runs/{run_id}").json()
    assert run["reason"] and "stopped by" in run["reason"], run
    assert not (gate / "go").exists()
