"""The input stage: a jailbreak blocked before any model call, an out-of-scope question redirected
(a canned reply, or one the model writes without tools), the same input allowed under a permissive
deployment's thresholds, and a person asked."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.guardrails.common import (
    JAILBREAK,
    OFF_TOPIC,
    WEATHER,
    answers,
    collect,
    deltas,
    result_of,
    rules,
    traced,
    verdicts,
)
from tether import Agent, JsonlTracer, RunState, approve, reject, run_sync, tool
from tether.guardrails import Guardrail, Rule, RuleClassifier, Thresholds
from tether.messages import AssistantMessage, UserMessage, text_of
from tether.status import GuardrailInterruption
from tether.testing import FunctionModel

CANNED = "I can only help with questions about our valves, actuators and their spare parts."
STRICT = Thresholds(block=0.2, redirect=0.5)  # a customer-facing deployment
PERMISSIVE = Thresholds(block=0.2, redirect=None)  # an internal tool: same classifier, no redirect


@tool(read_only=True)
def spec_lookup(part: str) -> str:
    """Look up a part's datasheet."""
    return f"{part}: 16 bar"


def never(messages: list[Any], request: Any) -> str:
    return "the model should not have been asked"


# -- a jailbreak -----------------------------------------------------------------------------


def test_a_jailbreak_is_blocked_before_any_model_call_with_its_rationale_in_the_trace(tmp_path: Path) -> None:
    fm = FunctionModel(never)
    state = RunState()
    events = collect(
        Agent(fm, middleware=[Guardrail(RuleClassifier.jailbreaks(), name="safety")]),
        JAILBREAK,
        state=state,
        tracer=JsonlTracer(tmp_path),
    )
    r = result_of(events)

    assert r.status == "failed"
    assert fm.requests == []  # never asked, so nothing paid
    assert r.usage.total_tokens == 0 and r.cost_usd == 0
    (verdict,) = verdicts(events)
    assert verdict.decision == "block" and verdict.stage == "input" and verdict.name == "safety"
    assert verdict.category == "injection:override" and verdict.score == 0.05
    assert "ignore all previous instructions" in verdict.rationale.lower()
    # the memory scan's advice to a person saving a note has no place in a guardrail's rationale
    assert "as a fact about the user" not in verdict.rationale and "save" not in verdict.rationale
    # The reason names the guardrail and its rationale; the transcript says the same in words.
    assert r.reason == f"blocked: the input guardrail 'safety' blocked this (injection:override): {verdict.rationale}"
    assert state.messages[0] == UserMessage.text(JAILBREAK)
    last = state.messages[-1]
    assert isinstance(last, AssistantMessage) and last.model == "guardrail/safety"
    assert (
        last.text
        == f"[Not answered: the input guardrail 'safety' blocked this (injection:override): {verdict.rationale}.]"
    )
    assert r.output == last.text
    assert deltas(events) == []

    trace = traced(tmp_path, r.run_id)
    (line,) = [t for t in trace if t["type"] == "guardrail"]
    assert line == {
        "run_id": r.run_id,
        "type": "guardrail",
        "decision": "block",
        "rationale": verdict.rationale,
        "score": 0.05,
        "stage": "input",
        "category": "injection:override",
        "name": "safety",
    }
    assert trace[-1]["type"] == "run_stopped" and trace[-1]["status"] == "failed"
    assert verdict.rationale in trace[-1]["reason"]


def test_a_harmless_question_passes_the_jailbreak_check_with_an_allow_verdict(tmp_path: Path) -> None:
    fm = FunctionModel(lambda m, r: "The FVAM-2050-B is rated for 16 bar.")
    events = collect(
        Agent(fm, middleware=[Guardrail(RuleClassifier.jailbreaks())]),
        "What pressure is the FVAM-2050-B rated for?",
        tracer=JsonlTracer(tmp_path),
    )
    r = result_of(events)
    assert r.status == "completed" and r.output == "The FVAM-2050-B is rated for 16 bar."
    (verdict,) = verdicts(events)
    assert (verdict.decision, verdict.score, verdict.rationale) == ("allow", 1.0, "no rule matched")
    assert [t["decision"] for t in traced(tmp_path, r.run_id) if t["type"] == "guardrail"] == ["allow"]


# -- out of scope: redirected ------------------------------------------------------------------


def test_an_out_of_scope_question_gets_the_canned_reply() -> None:
    fm = FunctionModel(never)
    guard = Guardrail(rules(OFF_TOPIC), thresholds=STRICT, redirect_reply=CANNED, name="scope")
    state = RunState()
    events = collect(Agent(fm, middleware=[guard]), WEATHER, state=state)
    r = result_of(events)

    assert r.status == "completed" and r.output == CANNED
    assert fm.requests == []
    assert r.reason == f"redirected: the input guardrail 'scope' redirected this (off_topic): {OFF_TOPIC.rationale}"
    (verdict,) = verdicts(events)
    assert (verdict.decision, verdict.score, verdict.category) == ("redirect", 0.4, "off_topic")
    assert answers(state) == [CANNED]
    assert state.messages[-1].model == "guardrail/scope"  # type: ignore[union-attr]


def test_an_out_of_scope_question_gets_a_reply_the_model_writes_without_tools() -> None:
    reply = "I cannot help with weather forecasts here; ask me about valves, actuators or spare parts."
    fm = FunctionModel(lambda m, r: reply if not r.tools else "FVAM-2050-B: 16 bar.")
    agent = Agent(fm, tools=[spec_lookup], middleware=[Guardrail(rules(OFF_TOPIC), thresholds=STRICT)])
    state = RunState()
    r = run_sync(agent, WEATHER, state=state)

    assert r.status == "completed" and r.output == reply
    (request,) = fm.requests
    assert request.tools == ()  # a redirect is words, not actions
    asked, note = request.messages[-2:]
    assert asked == UserMessage.text(WEATHER)
    assert isinstance(note, UserMessage)
    assert text_of([note]).startswith(
        f"[Redirect: the input guardrail 'guardrail' redirected this (off_topic): {OFF_TOPIC.rationale}. "
        "Reply briefly that you cannot help with that here"
    )

    # The next question, in scope, is answered with the tools on offer again.
    r = run_sync(agent, "What pressure is the FVAM-2050-B rated for?", state=state)
    assert r.output == "FVAM-2050-B: 16 bar."
    assert [t.name for t in fm.requests[-1].tools] == ["spec_lookup"]


# -- thresholds per deployment -----------------------------------------------------------------


@pytest.mark.parametrize(
    ("prompt", "make", "strict", "permissive", "stopped"),
    [
        (WEATHER, lambda: rules(OFF_TOPIC), STRICT, PERMISSIVE, "redirect"),
        (JAILBREAK, RuleClassifier.jailbreaks, Thresholds(), Thresholds(block=0.01), "block"),
    ],
    ids=["out_of_scope", "jailbreak"],
)
def test_the_same_input_passes_under_a_permissive_threshold(
    prompt: str, make: Any, strict: Thresholds, permissive: Thresholds, stopped: str
) -> None:
    outcomes = {}
    for name, thresholds in (("strict", strict), ("permissive", permissive)):
        fm = FunctionModel(lambda m, r: "Answered by the model.")
        events = collect(
            Agent(fm, middleware=[Guardrail(make(), thresholds=thresholds, redirect_reply=CANNED)]), prompt
        )
        (verdict,) = verdicts(events)
        outcomes[name] = (verdict.decision, verdict.score, len(fm.requests), result_of(events).output)
    score = outcomes["strict"][1]
    assert outcomes["strict"][0] == stopped and outcomes["strict"][2] == 0
    assert outcomes["permissive"] == ("allow", score, 1, "Answered by the model.")  # same verdict, other action


def test_thresholds_pick_the_first_action_whose_limit_the_score_is_under() -> None:
    t = Thresholds(block=0.2, ask=0.4, redirect=0.6)
    assert [t.action(s) for s in (0.0, 0.19, 0.2, 0.39, 0.4, 0.59, 0.6, 1.0)] == [
        "block",
        "block",
        "ask",
        "ask",
        "redirect",
        "redirect",
        "allow",
        "allow",
    ]
    assert Thresholds(block=None).action(0.0) == "allow"  # nothing set: nothing stops


# -- ask a person ------------------------------------------------------------------------------

REFUND = Rule(r"\brefund\b", 0.4, "policy", "refunds are decided by a person")
ASK = Thresholds(block=0.1, ask=0.5)


def asked_about_input() -> tuple[Agent, FunctionModel, Any, RunState]:
    classifier = rules(REFUND)
    fm = FunctionModel(lambda m, r: "Your refund for order 1182 is on its way.")
    agent = Agent(fm, middleware=[Guardrail(classifier, thresholds=ASK)])
    state = RunState()
    first = run_sync(agent, "I want a refund for order 1182", state=state)
    assert first.status == "interrupted" and fm.requests == []
    waiting = first.interruption
    assert isinstance(waiting, GuardrailInterruption)
    assert (waiting.stage, waiting.rationale, waiting.score, waiting.category) == (
        "input",
        REFUND.rationale,
        0.4,
        "policy",
    )
    assert first.reason is not None and first.reason.endswith("Approve to let the message through, or reject")
    return agent, fm, classifier, state


def test_approving_an_input_lets_it_through_without_asking_again(tmp_path: Path) -> None:
    agent, fm, classifier, state = asked_about_input()
    approve(state)
    events = collect(agent, state=state, tracer=JsonlTracer(tmp_path))
    r = result_of(events)
    assert r.status == "completed" and r.output == "Your refund for order 1182 is on its way."
    assert len(fm.requests) == 1
    assert classifier.seen == [("input", "I want a refund for order 1182")]  # judged once, not re-asked
    (verdict,) = verdicts(events)
    assert (verdict.decision, verdict.category) == ("allow", "approved")
    assert [t["decision"] for t in traced(tmp_path, r.run_id) if t["type"] == "guardrail"] == ["allow"]


def test_rejecting_an_input_ends_with_the_refusal_in_words() -> None:
    agent, fm, classifier, state = asked_about_input()
    reject(state, reason="refunds go through the support desk")
    r = run_sync(agent, state=state)
    assert fm.requests == [] and len(classifier.seen) == 1
    assert r.output == (
        f"[Not answered: a person declined it after the input guardrail's verdict "
        f"({REFUND.rationale}). Their reason: refunds go through the support desk]"
    )
    assert answers(state) == [r.output]
