"""`tether serve` on Postgres, what round s12 left alone: a Stop that comes while a run's save is
still trying to reach the database (the first minute of an outage). One database for the module;
a server of its own for each test, its runs on its own thread or in a run process."""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.postgres.test_left_alone_dispatch import Outage
from tests.postgres.test_left_alone_s11 import _until
from tests.server.conftest import parse_sse, start_uvicorn

pytest.importorskip("psycopg", reason="needs tether[postgres] (the [test] extra installs it)")  # an optional extra

# One tool that waits for the test's word (a file) and says when it returned; each model call is
# counted in a file (the run may be driven in a process of its own).
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
            (GATE / "returned").write_text("1")
            return "went"
        time.sleep(0.01)
    return "gave up"


def reply(messages, request):
    with open(GATE / "asked", "a") as f:
        f.write("asked\\n")
    return "done" if any(isinstance(m, ToolMessage) for m in messages) else call("w1", "wait_for_word")


agents = {"waiter": Agent(FunctionModel(reply), tools=[wait_for_word])}
"""


@pytest.fixture(params=[0, 1], ids=["own-thread", "run-process"])
def node(
    request: pytest.FixtureRequest, tmp_path: Path, db_url: str, monkeypatch: pytest.MonkeyPatch
) -> Iterator[tuple[str, Path, int]]:
    """A server on the module's database, its runs on its own thread (0) or in a run process (1):
    its address, the tool's gate folder, and how many run processes it has."""
    from psycopg_pool.base import AttemptWithBackoff

    from tether.config import load_settings
    from tether.postgres.db import Database, database
    from tether.server.app import create_app

    home, gate = tmp_path / "home", tmp_path / "gate"
    home.mkdir()
    gate.mkdir()
    (home / "config.toml").write_text(f'database_url = "{db_url}"\n')
    (tmp_path / "agents.py").write_text(AGENTS)
    monkeypatch.setenv("TETHER_TEST_GATE", str(gate))  # a run process inherits it
    # A save waits for the database far longer than the test's outage (a run process: its 60 s);
    # the server's own checks and its pool's reconnection, shortened.
    monkeypatch.setattr(Database, "retry_s", 600.0)
    monkeypatch.setattr(AttemptWithBackoff, "INITIAL_DELAY", 0.1)
    app = create_app(load_settings(home), agent_spec=str(tmp_path / "agents.py"), run_processes=request.param)
    monkeypatch.setattr(database(db_url).pool, "timeout", 0.3)
    served = start_uvicorn(app)
    yield served.url, gate, request.param
    (gate / "go").write_text("1")
    served.stop()


def test_a_stop_while_a_save_waits_for_the_database_is_taken_at_once(
    node: tuple[str, Path, int], db_url: str, pg_server: Any
) -> None:
    """Stop pressed while the run's save was still trying to reach the database (its first
    minute): the run heard it only once the save gave up, so the Stop's answer came after its
    10 s wait, saying the run was still live (``running`` on the server's own thread), and the
    run's stream went on. Now the save stops trying at the Stop: the answer says the run stopped
    (not live), the stream ends with ``interrupted`` while the database is still away, nothing
    more starts, and the stop is saved once the database is back."""
    base, gate, processes = node
    outage = Outage(pg_server.url, db_url)
    streamed: list[list[dict[str, Any]]] = []
    opened = threading.Event()
    with httpx.Client(base_url=base, timeout=60) as client:
        sid = client.post("/v1/sessions", json={"agent": "waiter"}).json()["session_id"]
        posted = client.post(f"/v1/sessions/{sid}/messages", json={"text": "wait", "message_id": f"m-{processes}"})
        assert posted.status_code == 202, posted.text
        run_id = posted.json()["run_id"]

        def read() -> None:  # opened while the database is there, read to its end after
            with (
                contextlib.suppress(httpx.TransportError),  # the test gave up on it (and closed the client)
                client.stream("GET", posted.json()["events"], headers={"Accept": "text/event-stream"}) as r,
            ):
                assert r.status_code == 200, r.read()
                opened.set()
                streamed.append(list(parse_sse(r.iter_lines())))

        reader = threading.Thread(target=read, daemon=True)
        reader.start()
        assert opened.wait(20), "the run's stream did not open"
        _until(lambda: (gate / "started").exists(), "the tool never started")
        outage.begin()
        try:
            (gate / "go").write_text("1")  # the tool returns: its result's save meets the database away
            _until(lambda: (gate / "returned").exists(), "the tool never returned")
            stop = client.post(f"/v1/runs/{run_id}/cancel")
            assert stop.status_code == 202, stop.text
            view = stop.json()
            assert (view["status"], view["live"]) == ("interrupted", False), view
            reader.join(30)
            assert streamed, "the stream did not end with the Stop while the database was away"
        finally:
            outage.end()
        done = streamed[0][-1]
        assert done["event"] == "done" and done["result"]["status"] == "interrupted", done
        assert "stopped by the user" in done["result"]["reason"], done
        if not processes:  # told as it is; a run process's state is told once the database is back
            assert "stopped by the user" in view["reason"], view

        def saved() -> dict[str, Any]:
            got = client.get(f"/v1/runs/{run_id}")
            return got.json() if got.status_code == 200 else {}

        _until(lambda: "stopped by the user" in str(saved().get("reason")), "the stop was never saved", timeout=40)
        run = saved()
        assert (run["status"], run["live"], run["resumable"]) == ("interrupted", False, True), run
        roles = [m["role"] for m in client.get(f"/v1/runs/{run_id}/transcript").json()["messages"]]
        assert roles == ["user", "assistant", "tool"], roles  # the tool's result kept, nothing asked after
    assert (gate / "asked").read_text().count("asked") == 1
    assert [e["event"] for e in streamed[0]].count("turn") == 1, streamed[0]
    assert os.path.exists(gate / "returned")
