"""Ask a person: a verdict under the ``ask`` threshold stops the run ``interrupted`` with a
:class:`GuardrailInterruption`; ``approve(state)`` and a resume let the message (or the answer)
through, ``reject(state, reason=reason)`` refuses it in words. The question is asked once."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.guardrails.common import (
    Recording,
    assert_never_streamed,
    collect,
    deltas,
    result_of,
    rules,
    traced,
    verdicts,
)
from tether import Agent, JsonlTracer, RunState, approve, reject, run_sync
from tether.guardrails import Guardrail, Rule, Thresholds
from tether.messages import AssistantMessage
from tether.status import GuardrailInterruption
from tether.testing import FunctionModel

ASK = Thresholds(block=0.1, ask=0.5)
DISCOUNT = Rule(r"\bdiscount\b", 0.4, "pricing", "discounts are approved by sales")
OFFER = "You can have a 40% discount on the FVAM-2050-B if you order 200 units."
REFUND = Rule(r"\brefund\b", 0.4, "policy", "refunds are decided by a person")
REFUND_ASK = "I want a refund for order 1182"


def held_answer(tmp_path: Path | None = None) -> tuple[Agent, FunctionModel, Recording, RunState, list[Any]]:
    classifier = rules(DISCOUNT)
    fm = FunctionModel(lambda m, r: OFFER)
    agent = Agent(fm, middleware=[Guardrail(classifier, stages=("output",), thresholds=ASK, name="sales")])
    state = RunState()
    events = collect(
        agent, "Can I get a better price?", state=state, tracer=JsonlTracer(tmp_path) if tmp_path else None
    )
    r = result_of(events)
    assert r.status == "interrupted"
    waiting = r.interruption
    assert isinstance(waiting, GuardrailInterruption)
    assert (waiting.stage, waiting.rationale, waiting.score, waiting.category) == (
        "output",
        DISCOUNT.rationale,
        0.4,
        "pricing",
    )
    assert r.reason == (
        f"the output guardrail 'sales' held this for a person to decide (pricing): "
        f"{DISCOUNT.rationale}. Approve to deliver the answer, or reject"
    )
    assert_never_streamed(events, OFFER)  # held for the person, not shown to the caller
    assert [v.decision for v in verdicts(events)] == ["ask"]
    assert len(fm.requests) == 1 and r.cost_usd is not None and r.cost_usd > 0  # the answer was paid for
    return agent, fm, classifier, state, events


def test_an_answer_held_for_a_person_is_delivered_once_approved(tmp_path: Path) -> None:
    agent, fm, classifier, state, _ = held_answer(tmp_path)
    approve(state)
    r = run_sync(agent, state=state, tracer=JsonlTracer(tmp_path))
    assert r.status == "completed" and r.output == OFFER  # the answer recorded becomes the result
    assert len(fm.requests) == 1  # not asked again: the approved answer is the one delivered
    assert classifier.seen == [("output", OFFER)]  # nor judged again
    stopped = [t for t in traced(tmp_path, r.run_id) if t["type"] == "run_stopped"]
    assert [t["status"] for t in stopped] == ["interrupted", "completed"]
    assert stopped[0]["interruption"]["type"] == "guardrail"


def test_an_answer_held_for_a_person_is_refused_in_words_once_rejected() -> None:
    agent, fm, classifier, state, _ = held_answer()
    reject(state, reason="no discounts without a signed contract")
    r = run_sync(agent, state=state)
    assert r.output == (
        f"[Not answered: a person declined it after the output guardrail's verdict "
        f"({DISCOUNT.rationale}). Their reason: no discounts without a signed contract]"
    )
    assert len(fm.requests) == 1 and len(classifier.seen) == 1
    assert [m.text for m in state.messages if isinstance(m, AssistantMessage)] == [r.output]  # replaced
    assert "40%" not in state.model_dump_json()


def test_the_interrupted_runs_result_does_not_carry_the_held_answer() -> None:
    """The held answer must not reach the caller before a person approves it: not as text deltas,
    and not as the ``output`` of the ``done`` event that ends the interrupted stream."""
    _, _, _, _, events = held_answer()
    assert OFFER not in result_of(events).output


def held_input() -> tuple[Agent, FunctionModel, Recording, RunState]:
    classifier = rules(REFUND)
    fm = FunctionModel(lambda m, r: "Your refund for order 1182 is on its way.")
    agent = Agent(fm, middleware=[Guardrail(classifier, thresholds=ASK)])
    state = RunState()
    r = run_sync(agent, REFUND_ASK, state=state)
    assert r.status == "interrupted" and isinstance(r.interruption, GuardrailInterruption)
    assert r.interruption.stage == "input" and fm.requests == []
    return agent, fm, classifier, state


@pytest.mark.parametrize("stage", ["input", "output"])
def test_resuming_without_a_decision_asks_again(stage: str) -> None:
    """A resume is not an approval: without ``approve`` the run stops for the person again, and
    neither the message nor the held answer goes through."""
    if stage == "input":
        agent, fm, _, state = held_input()
        calls = 0
    else:
        agent, fm, _, state, _ = held_answer()
        calls = 1
    events = collect(agent, state=state)
    r = result_of(events)
    assert r.status == "interrupted" and isinstance(r.interruption, GuardrailInterruption)
    assert r.interruption.stage == stage
    assert len(fm.requests) == calls
    assert deltas(events) == []


@pytest.mark.parametrize(("stage", "decide"), [("input", "reject"), ("output", "approve"), ("output", "reject")])
def test_a_persons_decision_is_an_event_and_the_reason_says_so(stage: str, decide: str, tmp_path: Path) -> None:
    """What a person decided changes the course of the run: the resumed run's stream and trace say
    so (as an approved input already does: an ``allow`` verdict of category ``approved``), and its
    reason does not claim that the model answered."""
    if stage == "input":
        agent, _, _, state = held_input()
    else:
        agent, _, _, state, _ = held_answer()
    if decide == "approve":
        approve(state)
    else:
        reject(state, reason="not without a contract")
    events = collect(agent, state=state, tracer=JsonlTracer(tmp_path))
    r = result_of(events)
    (verdict,) = verdicts(events, stage)
    assert (verdict.decision == "allow") == (decide == "approve")
    assert any(t["type"] == "guardrail" for t in traced(tmp_path, r.run_id))
    if decide == "reject":
        assert r.reason is not None and "the model answered" not in r.reason


def test_a_rejected_answer_does_not_live_on_in_the_session() -> None:
    """``reject`` replaces the held answer in the run's transcript; the session the run mirrors to
    must get the refusal too, or the next run of the conversation shows the model (and the person
    reading the history) the answer that was refused."""
    from tether.sessions import MemorySessionStore

    sessions = MemorySessionStore()
    fm = FunctionModel(lambda m, r: OFFER if len(m) == 1 else "Delivery takes two weeks.")
    agent = Agent(fm, middleware=[Guardrail(rules(DISCOUNT), stages=("output",), thresholds=ASK)])
    state = RunState(session_id="buyer-17")
    assert run_sync(agent, "Can I get a better price?", state=state, session=sessions).status == "interrupted"
    reject(state, reason="no discounts without a signed contract")
    refused = run_sync(agent, state=state, session=sessions).output
    assert [m.text for m in sessions.load("buyer-17") if isinstance(m, AssistantMessage)] == [refused]
    run_sync(agent, "And how long is delivery?", session=sessions, session_id="buyer-17")
    assert "40%" not in str(fm.requests[-1].messages)


@pytest.mark.parametrize("stage", ["input", "output"])
def test_an_approvals_reason_goes_with_its_verdict_in_the_stream_and_the_trace(stage: str, tmp_path: Path) -> None:
    if stage == "input":
        agent, _, _, state = held_input()
    else:
        agent, _, _, state, _ = held_answer()
    approve(state, reason="the customer has a signed contract")
    events = collect(agent, state=state, tracer=JsonlTracer(tmp_path))
    r = result_of(events)
    assert r.status == "completed"
    (verdict,) = verdicts(events, stage)
    assert verdict.decision == "allow" and verdict.category == "approved"
    assert verdict.rationale == "a person allowed this after an earlier verdict: the customer has a signed contract"
    (line,) = [t for t in traced(tmp_path, r.run_id) if t["type"] == "guardrail" and t["stage"] == stage]
    assert line["rationale"].endswith(": the customer has a signed contract")
