"""The server's resume raises a run's token limit (Agent.max_run_tokens) as it raises its dollar
budget: ``POST /v1/runs/{id}/resume`` with ``{"max_run_tokens": N}``, the run's new total."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.server.conftest import read_events, wait_until

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


APPROVAL_AGENTS = """
import os

from tether import Agent
from tether.providers.scripted import Reply
from tether.testing import FunctionModel
from tether.tools.files import FILE_TOOLS


def reply(messages, request):
    results = [m for m in messages if m.role == "tool"]
    if not results:
        return Reply(calls=(("c1", "list_files", {}),))
    if len(results) == 1:
        return Reply(calls=(("c2", "delete_file", {"path": "access.log"}),))  # needs a person's approval
    return "done"


agents = {"tight": Agent(FunctionModel(reply), tools=FILE_TOOLS, cwd=os.environ["TETHER_TEST_WORKSPACE"],
                         max_turns=2, max_budget_usd=1.0, max_run_tokens=600)}
"""


def test_limits_a_resume_raised_hold_after_a_decision(served: Any, tmp_path: Path) -> None:
    """Was: the limits a resume raised held for that continuation only: the run, resumed with more
    turns and tokens, stopped for a person's approval, and once approved it went on under the
    agent's own limits again, stopping at once at the token limit the resume had raised (so for
    ``more_turns`` and ``max_budget_usd``), while ``tether resume`` keeps what it raised."""
    agents = tmp_path / "approval_agents.py"
    agents.write_text(APPROVAL_AGENTS)
    server = served(agents_module=agents)
    with server.client() as c:
        sid = c.post("/v1/sessions", json={}).json()["session_id"]
        run_id = c.post(f"/v1/sessions/{sid}/messages", json={"text": "tidy up"}).json()["run_id"]
        done = read_events(c, f"/v1/runs/{run_id}/events")[-1]["result"]
        assert done["status"] == "budget_exceeded" and "token limit" in done["reason"], done

        r = c.post(f"/v1/runs/{run_id}/resume", json={"max_run_tokens": 5000, "more_turns": 5})
        assert r.status_code == 202, r.text
        read_events(c, f"/v1/runs/{run_id}/events", until=lambda e: e["event"] == "done")
        asked = wait_until(lambda: c.get(f"/v1/runs/{run_id}").json()["waiting"], what="the approval question")
        assert asked["type"] == "approval" and asked["tool_name"] == "delete_file", asked
        decision = {"call_id": asked["call_id"], "args_hash": asked["args_hash"], "approve": True}
        r = c.post(f"/v1/runs/{run_id}/decision", json=decision)
        assert r.status_code == 202, r.text
        wait_until(lambda: not c.get(f"/v1/runs/{run_id}").json()["live"], what="the run's end")
        run = c.get(f"/v1/runs/{run_id}").json()
        assert run["status"] == "completed", run
        assert not (server.home.parent / "workspace0" / "access.log").exists()
