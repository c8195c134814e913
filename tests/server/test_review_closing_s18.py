"""Closing review of session 18 (the server): each test fails before its fix."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.server.conftest import read_events
from tether import RunStore
from tether.harness.state import CallInFlight

pytest.importorskip("fastapi", reason="needs tether[serve] (the [test] extra installs it)")

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
