"""Attacks from outside on a run's transcript read a page at a time (GET /v1/runs/{id}/transcript
?after=N&limit=M, session eighteen), over loopback HTTP against ``tether serve``'s app."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tests.server.conftest import wait_until

HELD_AGENTS = """
import threading

from tether import Agent, tool
from tether.testing import FunctionModel, Reply

GO = threading.Event()


@tool
def note(text: str) -> str:
    \"\"\"Take a note.\"\"\"
    return "noted " + text * 40


@tool
def hold() -> str:
    \"\"\"Wait until the test lets go.\"\"\"
    GO.wait(30)
    return "let go"


def reply(messages, request):
    results = sum(1 for m in messages if m.role == "tool")
    if results < 20:
        return Reply(calls=((f"n{results}", "note", {"text": f"line {results} "}),))
    if results == 20:
        return Reply(calls=(("h", "hold", {}),))
    return "done"


agents = {"held": Agent(FunctionModel(reply), tools=[note, hold], max_turns=40)}
"""


def test_a_page_of_a_live_run_is_the_transcript_as_it_was_when_the_page_was_asked(
    served: Any, tmp_path: Path, monkeypatch: Any
) -> None:
    """Was: a page of a live run's transcript was encoded as it was sent, from the very list the run
    changes, and a middleware that summarises the oldest messages in place (SummarizeByMessageCount,
    ``messages[:cut] = [summary]``) while the page was on its way shifted the items under it: the
    page went on with other messages than the ones it began with (some twice, some never), and one
    whose end had moved past the shortened list broke off mid-body (an IndexError in the stream).
    Now a live run's page is the transcript as it was when the page was asked (4ac962c9 takes a
    live run's messages as they are at the request; this test holds it)."""
    import tether.server.records as records
    from tether.messages import UserMessage

    module = tmp_path / "held_agents.py"
    module.write_text(HELD_AGENTS)
    s = served(agents_module=module)
    core = s.app.state.core
    go = core.agents["held"].tools[1].fn.__globals__["GO"]
    encode, sent = records.json_bytes, [0]
    try:
        with s.client() as c:
            sid = c.post("/v1/sessions", json={"agent": "held"}).json()["session_id"]
            run_id = c.post(f"/v1/sessions/{sid}/messages", json={"text": "take notes"}).json()["run_id"]
            state = wait_until(
                lambda: (st := core.manager.state(run_id)) is not None and len(st.messages) >= 42 and st,
                what="the run held in its last call",
            )
            before = [m.model_dump(mode="json") for m in state.messages[:40]]

            def summarised_meanwhile(value: Any) -> bytes:
                sent[0] += 1
                if sent[0] == 10:  # the run summarises its oldest messages between two items of the page
                    state.messages[:30] = [UserMessage.text("[Summary of the earlier conversation]")]
                return encode(value)

            monkeypatch.setattr(records, "json_bytes", summarised_meanwhile)
            r = c.get(f"/v1/runs/{run_id}/transcript", params={"limit": 40})
            monkeypatch.setattr(records, "json_bytes", encode)
            assert r.status_code == 200
            page = json.loads(r.content)  # whole: not broken off
            assert page["messages"] == before
            assert page["next"] == 40
    finally:
        go.set()


ASKING_AGENTS = HELD_AGENTS.replace("@tool\ndef hold", "@tool(needs_approval=True)\ndef hold")


def test_a_page_asked_as_its_run_is_decided_on_is_the_transcript_as_it_was_then(
    served: Any, tmp_path: Path, monkeypatch: Any
) -> None:
    """Was: a page of a run that waited for a decision read the run's header (not live), and then,
    a decision having continued the run meanwhile, its messages: the very list the now live run
    changes, encoded as sent. A middleware summarising the oldest messages in place while the page
    was on its way broke it off mid-body (an IndexError in the stream). Now the page takes the
    messages as they are when it reads them, whichever way it found the run."""
    import tether.server.app as app_module
    import tether.server.records as records
    from tether.messages import UserMessage

    module = tmp_path / "asking_agents.py"
    module.write_text(ASKING_AGENTS)
    s = served(agents_module=module)
    core = s.app.state.core
    go = core.agents["held"].tools[1].fn.__globals__["GO"]
    header, encode, sent = app_module.saved_header, records.json_bytes, [0]
    try:
        with s.client() as c:
            sid = c.post("/v1/sessions", json={"agent": "held"}).json()["session_id"]
            run_id = c.post(f"/v1/sessions/{sid}/messages", json={"text": "take notes"}).json()["run_id"]
            asked = wait_until(lambda: c.get(f"/v1/runs/{run_id}").json()["waiting"], what="the question")
            decision = {"call_id": asked["call_id"], "args_hash": asked["args_hash"], "approve": True}
            before = [m.model_dump(mode="json") for m in core.manager.state(run_id).messages[:40]]
            live: list[Any] = []

            def decided_meanwhile(runs: Any, rid: str) -> Any:
                found = header(runs, rid)
                if not live:  # a person's decision continues the run as the page reads it
                    with s.client() as other:
                        assert other.post(f"/v1/runs/{run_id}/decision", json=decision).status_code == 202
                    live.append(core.manager.state(run_id))
                return found

            def summarised_meanwhile(value: Any) -> bytes:
                sent[0] += 1
                if sent[0] == 10 and live:  # the run summarises its oldest messages between two items
                    live[0].messages[:30] = [UserMessage.text("[Summary of the earlier conversation]")]
                return encode(value)

            monkeypatch.setattr(app_module, "saved_header", decided_meanwhile)
            monkeypatch.setattr(records, "json_bytes", summarised_meanwhile)
            r = c.get(f"/v1/runs/{run_id}/transcript", params={"limit": 40})
            monkeypatch.setattr(records, "json_bytes", encode)
            assert r.status_code == 200 and live and core.manager.is_live(run_id)
            page = json.loads(r.content)  # whole: not broken off
            assert page["messages"] == before
            assert page["next"] == 40
    finally:
        go.set()
