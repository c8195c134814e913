"""Closing review of session 18 (the server): each test fails before its fix."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.server.conftest import read_events
from tether import RunStore
from tether.harness.state import CallInFlight

AGENTS = """
import os

from tether import Agent
from tether.tools.files import FILE_TOOLS

agents = {"t": Agent("scripted/plan", tools=FILE_TOOLS, cwd=os.environ["TETHER_TEST_WORKSPACE"],
                     max_run_tokens=50_000)}
"""


def test_a_token_limit_given_to_a_resume_counts_the_request_a_stopped_server_had_out(
    served: Any, tmp_path: Path
) -> None:
    """Was: a run cut with a request out (the server killed mid-call), resumed with
    {"max_run_tokens": N}, had N checked against the tokens used alone, while the resume counts that
    request's prompt and whole answer too (as the budget's check beside it counts its dollars): the
    202 was followed at once by budget_exceeded, nothing run."""
    agents = tmp_path / "agents.py"
    agents.write_text(AGENTS)
    server = served(agents_module=agents)
    with server.client() as c:
        sid = c.post("/v1/sessions", json={}).json()["session_id"]
        run_id = c.post(f"/v1/sessions/{sid}/messages", json={"text": "Which file mentions a timeout?"}).json()[
            "run_id"
        ]
        assert read_events(c, f"/v1/runs/{run_id}/events")[-1]["result"]["status"] == "completed"
        store = RunStore(server.home / "runs")
        state = store.load(run_id)
        used = state.usage.total_tokens
        # As a kill leaves it: running, the answer's request out (its prompt and all of its answer count).
        state.status, state.messages = "running", state.messages[:-1]
        state.call_in_flight = CallInFlight(
            model="scripted/plan", prompt_tokens=3000, max_tokens=4000, max_cost_usd=None
        )
        store.save(state)
        assert c.get(f"/v1/runs/{run_id}").json()["resumable"] is True

        r = c.post(f"/v1/runs/{run_id}/resume", json={"max_run_tokens": used + 5000})
        assert r.status_code == 409, r.text
        assert f"already used {used + 7000:,} tokens" in r.json()["error"]["message"]
        assert store.load(run_id).tokens_unknown == 0  # nothing was run


def test_a_stream_of_a_run_another_process_just_started_waits_for_it_to_take_the_run(
    served: Any, tmp_path: Path
) -> None:
    """Was: a client's event stream that reached this process while another server process on the
    same home had started the run (its start record and first events written) but not yet taken
    the run's lock (a moment later, on its run loop or in a run process) ended at what was
    written, without the run's done: the follow stopped as soon as nobody held the run. A run
    whose start record is there is now given the same few seconds to be taken as one let go of
    is given to write its done."""
    import json
    import threading
    import time

    from tether.server.events import EventLog

    agents = tmp_path / "agents.py"
    agents.write_text(AGENTS)
    server = served(agents_module=agents)
    with server.client() as c:
        sid = c.post("/v1/sessions", json={}).json()["session_id"]
        run_id = c.post(f"/v1/sessions/{sid}/messages", json={"text": "Which file mentions a timeout?"}).json()[
            "run_id"
        ]
        last = read_events(c, f"/v1/runs/{run_id}/events")[-1]
        assert last["event"] == "done"
        # Another process on this home continues the run: its start record, before it holds the run.
        (server.home / "serve" / "starts" / f"{run_id}.json").write_text(json.dumps({"began_after": last["id"]}))
        got: list[list[dict[str, Any]]] = []
        reader = threading.Thread(
            target=lambda: got.append(read_events(c, f"/v1/runs/{run_id}/events", last_event_id=last["id"]))
        )
        reader.start()
        time.sleep(0.5)  # the stream reaches the log's end while nobody holds the run (an order, not a bound)
        with RunStore(server.home / "runs").lock(run_id):  # ...then the other process takes it and goes on
            log = EventLog.load(server.home / "serve" / "events" / f"{run_id}.log")
            log.append("done", {"type": "done", "run_id": run_id, "result": {"status": "completed"}})
            log.close()
        reader.join(30)
        assert not reader.is_alive() and got, "the stream did not end"
        assert [e["event"] for e in got[0]] == ["done"], got
