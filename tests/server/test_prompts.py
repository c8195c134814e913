"""An MCP server's prompts in `tether serve` (issue 29): listed for the page, and a message
``/PROMPT key=value`` is sent filled in, as in `tether chat`; other text starting with / is sent as typed."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.server.conftest import read_events

pytest.importorskip("fastapi")
pytest.importorskip("mcp")

PROMPT_SERVER = Path(__file__).parents[1] / "connectors" / "prompt_server.py"


def _agents(tmp_path: Path) -> Path:
    module = tmp_path / "prompt_agents.py"
    module.write_text(
        "import sys\n"
        "from tether import Agent\n"
        "from tether.connectors import McpConnector\n"
        f"notes = McpConnector('notes', {{'command': sys.executable, 'args': [{str(PROMPT_SERVER)!r}]}})\n"
        "gone = McpConnector('gone', {'command': '/nonexistent/mcp-server'})\n"
        "agents = {'notes': Agent('scripted/hello', extensions=[notes]), 'plain': Agent('scripted/hello'),\n"
        "          'broken': Agent('scripted/hello', extensions=[gone])}\n"
    )
    return module


def _sent(c: Any, sid: str, text: str) -> tuple[int, str]:
    r = c.post(f"/v1/sessions/{sid}/messages", json={"text": text})
    if r.status_code not in (200, 202):
        return r.status_code, r.json()["error"]["message"] if "error" in r.json() else r.text
    run_id = r.json()["run_id"]
    read_events(c, f"/v1/runs/{run_id}/events")
    messages = c.get(f"/v1/runs/{run_id}/transcript").json()["messages"]
    users = [m for m in messages if m["role"] == "user"]
    return r.status_code, "".join(p.get("text", "") for p in users[-1]["content"])


def test_prompts_are_listed_and_a_slash_message_is_sent_filled_in(served: Any, tmp_path: Path) -> None:
    s = served(agents_module=_agents(tmp_path))
    with s.client() as c:
        listed = c.get("/v1/agents/notes/prompts").json()["prompts"]
        [review] = listed
        assert (review["server"], review["name"]) == ("notes", "review")
        assert [(a["name"], a["required"]) for a in review["arguments"]] == [("file", True), ("tone", False)]
        assert c.get("/v1/agents/plain/prompts").json() == {"prompts": []}
        assert c.get("/v1/agents/nope/prompts").status_code == 404
        sid = c.post("/v1/sessions", json={"agent": "notes"}).json()["session_id"]
        assert _sent(c, sid, "/review file=a.py tone=blunt") == (202, "Please review a.py in a blunt tone.")
        assert _sent(c, sid, "/notes:review file=b.py")[1] == "Please review b.py in a kind tone."
        assert _sent(c, sid, "/etc/hosts: what is in it?")[1] == "/etc/hosts: what is in it?"
        assert _sent(c, sid, "/unknown x=1")[1] == "/unknown x=1"  # not a prompt: sent as typed
        status, why = _sent(c, sid, "/review a.py")
        assert status == 400 and "key=value" in why
        assert c.get(f"/v1/sessions/{sid}").json()["title"].startswith("Please review a.py")


def test_a_prompt_whose_server_cannot_start_is_refused_in_words_and_nothing_is_sent(
    served: Any, tmp_path: Path
) -> None:
    s = served(agents_module=_agents(tmp_path))
    with s.client() as c:
        assert c.get("/v1/agents/broken/prompts").json() == {"prompts": []}  # listed without it
        sid = c.post("/v1/sessions", json={"agent": "broken"}).json()["session_id"]
        r = c.post(f"/v1/sessions/{sid}/messages", json={"text": "/review file=a.py"})
        assert r.status_code == 503 and "nothing was sent" in r.json()["error"]["message"], r.text
        assert c.get(f"/v1/sessions/{sid}").json()["turns"] == []


def test_resources_are_listed_and_a_mentioned_one_is_sent_with_the_message(served: Any, tmp_path: Path) -> None:
    s = served(agents_module=_agents(tmp_path))
    with s.client() as c:
        listed = c.get("/v1/agents/notes/resources").json()["resources"]
        assert [(r["server"], r["uri"], r["template"]) for r in listed] == [
            ("notes", "notes://guide", False),
            ("notes", "notes://day/{n}", True),
        ]
        assert listed[0]["description"] == "How we write notes"
        assert c.get("/v1/agents/plain/resources").json() == {"resources": []}
        assert c.get("/v1/agents/nope/resources").status_code == 404
        sid = c.post("/v1/sessions", json={"agent": "notes"}).json()["session_id"]
        status, sent = _sent(c, sid, "use @notes:notes://guide here")
        assert status == 202 and sent.startswith("use @notes:notes://guide here\n\n<resource")
        assert "Write notes in the present tense." in sent
        status, sent = _sent(c, sid, "/review file=@notes:notes://day/7")  # a prompt, then its mention
        assert "Please review @notes:notes://day/7" in sent and "Notes of day 7: nothing yet." in sent
        status, why = _sent(c, sid, "read @notes:notes://nothing")
        assert status == 400 and "@notes:notes://nothing could not be read" in why
        assert _sent(c, sid, "write to bob@notes:notes://x.org")[1] == "write to bob@notes:notes://x.org"  # no mention
        turns = c.get(f"/v1/sessions/{sid}").json()["turns"]
        assert len(turns) == 3  # the refused one was never sent
