"""An MCP server's question (elicitation) in a run of `tether serve`: the run stops with an
``elicitation`` interruption carrying the server's form, the person answers it through
``POST /v1/runs/ID/decision`` (``content``: the form's values), and the call is made again with
that answer given to the server's same question. A decline is the server's to read; an answer
that does not fit the form is refused and changes nothing; a process restart in between loses
nothing; the side effect happens once."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.server.conftest import read_events, serve_process

pytest.importorskip("fastapi", reason="needs tether[serve] (the [test] extra installs it)")
pytest.importorskip("mcp", reason="needs tether[mcp] (the [test] extra installs it)")

AGENTS = Path(__file__).with_name("asking_agents.py")


def ask(c: httpx.Client, text: str) -> tuple[str, dict[str, Any]]:
    sid = c.post("/v1/sessions", json={"agent": "diner"}).json()["session_id"]
    r = c.post(f"/v1/sessions/{sid}/messages", json={"text": text})
    assert r.status_code == 202, r.text
    run_id = r.json()["run_id"]
    events = read_events(c, f"/v1/runs/{run_id}/events", timeout=60)
    assert events[-1]["event"] == "done"
    return run_id, c.get(f"/v1/runs/{run_id}").json()


def answer(c: httpx.Client, run_id: str, waiting: dict[str, Any], approve: bool, content: Any = None) -> httpx.Response:
    body = {"call_id": waiting["call_id"], "args_hash": waiting["args_hash"], "approve": approve}
    if content is not None:
        body["content"] = content
    return c.post(f"/v1/runs/{run_id}/decision", json=body)


def finished(c: httpx.Client, run_id: str) -> dict[str, Any]:
    """The run once its resumed part has ended."""
    deadline = time.monotonic() + 60
    while True:
        run: dict[str, Any] = c.get(f"/v1/runs/{run_id}").json()
        if not run["live"] and run["status"] != "running":
            return run
        assert time.monotonic() < deadline, run
        time.sleep(0.05)


def answer_text(c: httpx.Client, run_id: str) -> str:
    messages = c.get(f"/v1/runs/{run_id}/transcript").json()["messages"]
    return "".join(p.get("text", "") for p in messages[-1]["content"])


def test_a_question_stops_the_run_with_its_form_and_the_answer_books_once(served: Any, bookings: Path) -> None:
    s = served(agents_module=AGENTS)
    with s.client() as c:
        run_id, run = ask(c, "a table on Friday, please")
        assert run["status"] == "interrupted", c.get(f"/v1/runs/{run_id}/transcript").json()
        waiting = run["waiting"]
        assert waiting["type"] == "elicitation" and waiting["server"] == "diner"
        assert waiting["tool_name"] == "diner__book_table" and waiting["message"] == "Who is the table on Friday for?"
        fields = {f["name"]: f for f in waiting["form"]["fields"]}
        assert fields["name"]["type"] == "text" and fields["name"]["required"] is True
        assert (fields["guests"]["type"], fields["guests"]["min"], fields["guests"]["max"]) == ("number", 1, 12)
        assert fields["window"]["type"] == "checkbox" and fields["window"]["required"] is False
        assert bookings.read_text() == ""  # asked before it acted: nothing booked yet

        # An answer that does not fit the form is refused and the run still waits for it.
        wrong = answer(c, run_id, waiting, True, {"name": "Ada", "guests": 40})
        assert wrong.status_code == 400 and "guests" in wrong.json()["error"]["message"]
        missing = answer(c, run_id, waiting, True, {"guests": "2"})
        assert missing.status_code == 400 and "name" in missing.json()["error"]["message"]
        assert (
            answer(c, run_id, {**waiting, "args_hash": "0" * 64}, True, {"name": "Ada", "guests": 2}).status_code == 409
        )
        assert c.get(f"/v1/runs/{run_id}").json()["waiting"]["key"] == waiting["key"]

        # The form's values as the page sends them (numbers as typed text) are taken as the schema's types.
        ok = answer(c, run_id, waiting, True, {"name": "Ada", "guests": "3", "window": True})
        assert ok.status_code == 202, ok.text
        done = finished(c, run_id)
        assert done["status"] == "completed", done
        assert answer_text(c, run_id) == "the diner said: Booked: Friday for Ada, 3 guests, window yes"
        assert bookings.read_text() == "Friday for Ada, 3 guests, window yes\n"  # once


def test_two_questions_in_one_call_are_asked_in_turn_and_both_answers_are_given(served: Any, bookings: Path) -> None:
    s = served(agents_module=AGENTS)
    with s.client() as c:
        run_id, run = ask(c, "a trip, please")
        first = run["waiting"]
        assert first["message"] == "Who travels to Lisbon?"
        assert answer(c, run_id, first, True, {"name": "Grace"}).status_code == 202
        second = finished(c, run_id)["waiting"]
        assert second["message"] == "Which class for Grace?" and second["call_id"] == first["call_id"]
        assert [f["options"] for f in second["form"]["fields"]] == [["economy", "business"]]
        bad = answer(c, run_id, second, True, {"seat_class": "first"})
        assert bad.status_code == 400
        assert answer(c, run_id, second, True, {"seat_class": "business"}).status_code == 202
        assert finished(c, run_id)["status"] == "completed"
        assert answer_text(c, run_id) == "the diner said: Booked: Lisbon for Grace in business"
        assert bookings.read_text() == "Lisbon for Grace in business\n"


def test_a_decline_reaches_the_server_and_nothing_is_booked(served: Any, bookings: Path) -> None:
    s = served(agents_module=AGENTS)
    with s.client() as c:
        run_id, run = ask(c, "a table on Friday, please")
        assert answer(c, run_id, run["waiting"], False).status_code == 202
        assert finished(c, run_id)["status"] == "completed"
        assert answer_text(c, run_id) == "the diner said: Not booked: the person chose decline."
        assert bookings.read_text() == ""


def test_content_is_refused_for_a_question_that_is_not_a_form(served: Any, bookings: Path) -> None:
    s = served()  # the default agents: destructive's delete_file needs approval
    with s.client() as c:
        sid = c.post("/v1/sessions", json={"agent": "destructive"}).json()["session_id"]
        run_id = c.post(f"/v1/sessions/{sid}/messages", json={"text": "free some space"}).json()["run_id"]
        read_events(c, f"/v1/runs/{run_id}/events", timeout=60)
        waiting = c.get(f"/v1/runs/{run_id}").json()["waiting"]
        assert waiting["type"] == "approval"
        refused = answer(c, run_id, waiting, True, {"x": 1})
        assert refused.status_code == 400 and "(elicitation) only" in refused.json()["error"]["message"]
        assert c.get(f"/v1/runs/{run_id}").json()["waiting"] == waiting  # still waits, nothing ran


def test_a_kill_9_between_the_question_and_the_answer_loses_nothing(tmp_path: Path, bookings: Path) -> None:
    """The server process is killed with SIGKILL while the run waits for the person; started again,
    the run still asks the same question, and the answer books once."""
    import os
    import signal
    import subprocess

    env = {**os.environ, "TETHER_HOME": str(tmp_path / "home")}

    def serve() -> tuple[subprocess.Popen[str], str]:
        return serve_process("--agent", str(AGENTS), env=env)

    first, url = serve()
    try:
        with httpx.Client(base_url=url, timeout=30) as c:
            run_id, run = ask(c, "a table on Friday, please")
            waiting = run["waiting"]
            assert waiting["type"] == "elicitation"
    finally:
        first.send_signal(signal.SIGKILL)
        first.wait(30)
    again, url = serve()
    try:
        with httpx.Client(base_url=url, timeout=30) as c:
            assert c.get(f"/v1/runs/{run_id}").json()["waiting"] == waiting
            assert answer(c, run_id, waiting, True, {"name": "Lin", "guests": 2}).status_code == 202
            assert finished(c, run_id)["status"] == "completed"
    finally:
        again.terminate()
        again.wait(30)
    assert bookings.read_text() == "Friday for Lin, 2 guests, window no\n"


def test_the_form_of_a_schema_and_the_values_typed_into_it() -> None:
    from tether.connectors.forms import form_values, schema_form

    schema = {
        "type": "object",
        "properties": {
            "n": {"type": "integer", "minimum": 1, "default": 2},
            "x": {"type": "number"},
            "tags": {"type": "array", "items": {"type": "string"}},
            "pick": {"type": "array", "items": {"anyOf": [{"const": "a", "title": "Alpha"}, {"const": "b"}]}},
            "when": {"type": "string", "format": "date"},
            "note": {"type": "string"},
        },
        "required": ["n"],
    }
    fields = {f["name"]: f for f in schema_form(schema)["fields"]}
    assert fields["n"] == {
        "type": "number",
        "step": 1,
        "min": 1,
        "name": "n",
        "label": "n",
        "required": True,
        "value": 2,
    }
    assert fields["pick"]["multiple"] is True and fields["pick"]["option_labels"] == {"a": "Alpha", "b": "b"}
    assert fields["tags"]["type"] == "text" and fields["when"]["input"] == "date"
    typed = {"n": "3", "x": "1.5", "tags": "red, blue ,", "pick": ["a"], "note": "", "when": "2026-12-05"}
    assert form_values(schema, typed) == {
        "n": 3,
        "x": 1.5,
        "tags": ["red", "blue"],
        "pick": ["a"],
        "when": "2026-12-05",
    }
    assert form_values(schema, {"n": "three"}) == {"n": "three"}  # left for the schema's check to refuse


@pytest.mark.parametrize("allow", [True, False])
def test_a_sampling_request_under_ask_waits_for_the_person(served: Any, bookings: Path, allow: bool) -> None:
    """``sampling = "ask"`` (the default) in a served run: the run stops with what the server wants
    to send the model; Allow makes the request when the call is made again (paid by the run), Deny
    refuses it and the server reads why."""
    s = served(agents_module=AGENTS)
    with s.client() as c:
        run_id, run = ask(c, "a summary of the menu, please")
        waiting = run["waiting"]
        assert waiting is not None, (run, c.get(f"/v1/runs/{run_id}/transcript").json()["messages"][-2:])
        assert waiting["type"] == "sampling" and waiting["server"] == "diner"
        assert waiting["preview"] == "Summarise: the menu changes on Fridays"
        tokens_before = run["completion_tokens"]
        assert answer(c, run_id, waiting, allow).status_code == 202
        done = finished(c, run_id)
        assert done["status"] == "completed"
        said = answer_text(c, run_id)
    if allow:
        assert said.startswith("the diner said: Summary: ") and "scripted model" in said
        assert done["completion_tokens"] > tokens_before + 1  # the run paid for the server's request
    else:
        assert "the person declined this sampling request" in said  # the server's call failed on it
