"""The server's resume raises a run's token limit (Agent.max_run_tokens) as it raises its dollar
budget: ``POST /v1/runs/{id}/resume`` with ``{"max_run_tokens": N}``, the run's new total."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.server.conftest import read_events

pytest.importorskip("fastapi", reason="needs tether[serve] (the [test] extra installs it)")

TOKEN_AGENTS = """
import os

from tether import Agent
from tether.tools.files import FILE_TOOLS

agents = {"tight": Agent("scripted/plan", tools=FILE_TOOLS, cwd=os.environ["TETHER_TEST_WORKSPACE"],
                         max_run_tokens=600)}
"""


@pytest.mark.parametrize("run_processes", [None, 1])
def test_a_resume_raises_the_token_limit_a_run_stopped_at(
    served: Any, tmp_path: Path, run_processes: int | None
) -> None:
    """Was: a run its agent's max_run_tokens stopped could not be resumed at the server: the
    resume answered 409 "a resume here cannot raise" it, and sent the client to Python."""
    agents = tmp_path / "token_agents.py"
    agents.write_text(TOKEN_AGENTS)
    server = served(agents_module=agents, run_processes=run_processes)
    with server.client() as c:
        sid = c.post("/v1/sessions", json={}).json()["session_id"]
        run_id = c.post(f"/v1/sessions/{sid}/messages", json={"text": "Which file mentions a timeout?"}).json()[
            "run_id"
        ]
        done = read_events(c, f"/v1/runs/{run_id}/events")[-1]["result"]
        used = done["usage"]["prompt_tokens"] + done["usage"]["completion_tokens"]
        assert done["status"] == "budget_exceeded" and done["reason"].startswith("the run's token limit (600")

        for body in ({}, {"max_budget_usd": 1.0}, {"max_run_tokens": used}):  # none lets it go on
            r = c.post(f"/v1/runs/{run_id}/resume", json=body)
            message = r.json()["error"]["message"]
            assert r.status_code == 409 and '{"max_run_tokens": N}' in message, (body, r.text)
            assert f"a new total above {used:,}" in message and "max_budget_usd" not in message
        for bad in (True, "5000", 2500.5, 0, -1):  # strict, as more_turns and max_budget_usd
            r = c.post(f"/v1/runs/{run_id}/resume", json={"max_run_tokens": bad})
            assert r.status_code == 400 and "max_run_tokens" in r.json()["error"]["message"], (bad, r.text)
        run = c.get(f"/v1/runs/{run_id}").json()
        assert (run["status"], run["resumable"], run["live"]) == ("budget_exceeded", True, False)

        r = c.post(f"/v1/runs/{run_id}/resume", json={"max_run_tokens": 5000})
        assert r.status_code == 202, r.text
        result = read_events(c, f"/v1/runs/{run_id}/events")[-1]["result"]
        assert result["status"] == "completed", result["reason"]
        assert used < result["usage"]["prompt_tokens"] + result["usage"]["completion_tokens"] <= 5000
