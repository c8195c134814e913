"""A decision posted the moment the page shows the question: the run has asked and is ending (a
call beside the asked one still running, its last saves), and was answered 409 "running, not
waiting for a decision" (seen on the page as an error under the card; once in a full test run)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

pytest.importorskip(
    "fastapi", reason="needs tether[serve] (the [test] extra installs it)"
)  # the server is an optional extra

from tests.server.conftest import read_events
from tests.server.test_api import send, start_session

# One reply with two calls: a slow read beside a wipe that needs a person. The question goes out
# while the read still runs; the run ends (and can be decided on) only when the read is done.
AGENTS = """
import time

from tether import Agent, tool
from tether.messages import AssistantMessage, ToolCallPart, ToolMessage
from tether.testing import FunctionModel


@tool(read_only=True)
def slow_read() -> str:
    \"\"\"Reads slowly.\"\"\"
    time.sleep(1.5)
    return "read"


@tool(needs_approval=True)
def wipe(path: str) -> str:
    \"\"\"Deletes a folder.\"\"\"
    return "wiped " + path


def reply(messages, request):
    if any(isinstance(m, ToolMessage) for m in messages):
        return "done"
    calls = (
        ToolCallPart(id="r1", name="slow_read", arguments="{}"),
        ToolCallPart(id="w1", name="wipe", arguments='{"path": "cache"}'),
    )
    return AssistantMessage(content=calls, finish_reason="tool_calls")


agents = {"bank": Agent(FunctionModel(reply), tools=[slow_read, wipe])}
"""


def test_a_decision_posted_as_soon_as_the_question_is_out_is_taken(
    served: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import time

    from tether.harness.store import RunStore

    save = RunStore.save

    def slow_last_save(self: RunStore, state: Any, **kw: Any) -> None:
        if state.status == "interrupted":  # the save that ends the run to wait for the person: a busy disk
            time.sleep(1.0)
        save(self, state, **kw)

    monkeypatch.setattr(RunStore, "save", slow_last_save)
    module = tmp_path / "agents_mod.py"
    module.write_text(AGENTS)
    s = served(agents_module=module)
    with s.client() as c:
        sid = start_session(c, "bank")
        run_id = send(c, sid, "go")["run_id"]
        events = read_events(c, f"/v1/runs/{run_id}/events", until=lambda e: e["event"] == "approval_required")
        asked = events[-1]
        assert asked["event"] == "approval_required" and asked["call_id"] == "w1"
        url = f"/v1/runs/{run_id}/decision"
        decided = c.post(url, json={"call_id": "w1", "args_hash": asked["args_hash"], "approve": True})
        assert decided.status_code == 202, decided.text
        rest = read_events(c, f"/v1/runs/{run_id}/events", last_event_id=events[-1]["id"])
        done = [e for e in rest if e["event"] == "done"]
        assert done[-1]["result"]["status"] == "completed", rest
