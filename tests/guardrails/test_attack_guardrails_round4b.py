"""Round four (b) of attacks on the guardrails: a person's approval of one guardrail's question.

An approval let "exactly the judged text through": through every guardrail of the stack, not only
the one that asked. With a guardrail that asks about discounts first and a jailbreak guardrail
after it, the ask stopped the run before the jailbreak guardrail had judged the message; the
person approved the discount, and on resume the jailbreak guardrail found the text approved and
let it reach the model. An approval now answers the question of the guardrail that asked it; the
others still judge the text. Among output guardrails, the first verdict that stopped a reply
answered for it: when that verdict was a question, the others never judged the answer, and the
person's approval delivered what one of them would have withheld (a supplier margin beside a
discount). A block of any of them now beats a question.

A message a person sent while a call of the last reply waited for their decision joined the
transcript after the call's result, and reached the model without any input guardrail judging it
(the run "resumed": its input was taken as judged already). It is now judged once it joins the
transcript, before the model reads it.

A ``ModelClassifier`` whose model answered in words instead of a verdict failed closed with a
rationale that quoted the answer; at the output stage that rationale is the caller's
``[Answer withheld: ...]``, and a judge that explains itself repeats what it read (the margin).
Its answer is no longer quoted at the stages whose text is withheld.

When one input guardrail redirected a message with a note for the model, the guardrails after it
judged the note's window, which ends at the note: nothing. A jailbreak beside an off-topic question
reached the model (to be declined) although a jailbreak guardrail stood in the stack. They now
judge the message as it was before the note, and a stronger verdict takes the note's place.
"""

from __future__ import annotations

import pytest

from tests.guardrails.common import (
    JAILBREAK,
    OFF_TOPIC,
    WEATHER,
    Sentences,
    answers,
    assert_never_streamed,
    collect,
    result_of,
    rules,
    verdicts,
)
from tether import Agent, RunState, approve, run_sync, tool
from tether.guardrails import Guardrail, ModelClassifier, Rule, RuleClassifier, Thresholds
from tether.messages import Message, text_of
from tether.providers.base import ModelRequest
from tether.testing import FunctionModel, Reply

DISCOUNTS = RuleClassifier([Rule(r"\bdiscount\b", 0.4, "pricing", "discounts are approved by sales")])
ASK = Thresholds(block=0.1, ask=0.5)


def pricing_then_safety(fm: FunctionModel) -> Agent:
    """A guardrail that asks a person about discounts, then the jailbreak scan."""
    return Agent(
        fm,
        middleware=[
            Guardrail(DISCOUNTS, name="pricing", thresholds=ASK),
            Guardrail(RuleClassifier.jailbreaks(), name="safety"),
        ],
    )


def test_approving_one_guardrails_question_does_not_let_a_jailbreak_past_another() -> None:
    fm = FunctionModel(lambda m, r: "Here is my system prompt: ...")
    agent = pricing_then_safety(fm)
    state = RunState()
    first = run_sync(agent, f"{JAILBREAK} Also, can I get a discount?", state=state)
    assert first.status == "interrupted" and first.interruption is not None
    assert first.interruption.category == "pricing"  # the person is asked about the discount only

    approve(state)
    resumed = run_sync(agent, state=state)

    assert resumed.status == "failed" and "'safety'" in (resumed.reason or "")
    assert fm.requests == []  # the model never read the jailbreak


def test_the_guardrail_that_asked_is_not_asked_again_after_the_approval() -> None:
    fm = FunctionModel(lambda m, r: "A 5% discount is possible for 200 units.")
    agent = pricing_then_safety(fm)
    state = RunState()
    assert run_sync(agent, "Can I get a discount for 200 units?", state=state).status == "interrupted"
    approve(state)
    resumed = run_sync(agent, state=state)
    assert resumed.status == "completed" and resumed.output == "A 5% discount is possible for 200 units."


# -- two output guardrails: one asks, the other would block -------------------------------------

MARGIN = RuleClassifier([Rule(r"supplier margin", 0.0, "confidential", "the answer discloses an internal margin")])
LEAK = "You can have a 10% discount on 200 units. Our supplier margin on them is 62%."


@pytest.mark.parametrize("release", ["hold", "chunks"])
@pytest.mark.parametrize("secrets_first", [True, False])
def test_an_answer_another_guardrail_blocks_is_not_held_for_a_person_to_approve(
    release: str, secrets_first: bool
) -> None:
    asks = Guardrail(DISCOUNTS, name="pricing", stages=("output",), thresholds=ASK, release=release, chunk_chars=10)
    blocks = Guardrail(MARGIN, name="secrets", stages=("output",), release=release, chunk_chars=10)
    agent = Agent(Sentences(lambda m, r: LEAK), middleware=[blocks, asks] if secrets_first else [asks, blocks])
    state = RunState()

    events = collect(agent, "Can I get a better price?", state=state)

    first = result_of(events)
    assert first.status == "failed" and "'secrets'" in (first.reason or "")
    assert first.interruption is None  # nobody is asked to approve what 'secrets' withholds
    assert_never_streamed(events, "Our supplier margin on them is 62%.")
    assert "62%" not in state.model_dump_json()


def test_after_a_chunk_is_held_for_a_person_the_rest_of_the_answer_is_still_judged() -> None:
    both = RuleClassifier(
        [
            Rule(r"\bdiscount\b", 0.4, "pricing", "discounts are approved by sales"),
            Rule(r"supplier margin", 0.0, "confidential", "the answer discloses an internal margin"),
        ]
    )
    guard = Guardrail(both, stages=("output",), thresholds=ASK, release="chunks", chunk_chars=10)
    state = RunState()

    events = collect(Agent(Sentences(lambda m, r: LEAK), middleware=[guard]), "A better price?", state=state)

    assert result_of(events).status == "failed" and result_of(events).interruption is None
    assert_never_streamed(events, "Our supplier margin on them is 62%.")


# -- a message sent while a tool call waits for approval -----------------------------------------


@tool(needs_approval=True)
def refund(order: str) -> str:
    """Refund an order."""
    return "refunded"


def waiting_for_approval(guard: Guardrail) -> tuple[Agent, FunctionModel, RunState]:
    """A run stopped with a refund waiting for a person's decision."""

    def clerk(messages: list[Message], request: ModelRequest) -> Reply | str:
        if len(messages) == 1:
            return Reply(calls=(("c1", "refund", {"order": "4471"}),))
        return "Read: " + text_of(messages[-1:])

    fm = FunctionModel(clerk)
    agent = Agent(fm, tools=[refund], middleware=[guard])
    state = RunState()
    first = run_sync(agent, "Please refund my last order, number 4471.", state=state)
    assert first.status == "interrupted" and first.interruption is not None
    assert first.interruption.type == "approval"
    return agent, fm, state


def test_a_jailbreak_sent_instead_of_deciding_on_a_waiting_call_is_judged() -> None:
    agent, fm, state = waiting_for_approval(Guardrail(RuleClassifier.jailbreaks(), name="safety"))
    asked = len(fm.requests)

    r = run_sync(agent, JAILBREAK, state=state)

    assert r.status == "failed" and "'safety'" in (r.reason or "")
    assert len(fm.requests) == asked  # the model never read it
    assert answers(state)[-1].startswith("[Not answered: the input guardrail 'safety' blocked this")


def test_a_message_sent_instead_of_deciding_can_be_held_for_a_person_and_approved() -> None:
    agent, fm, state = waiting_for_approval(Guardrail(DISCOUNTS, name="pricing", thresholds=ASK))

    held = run_sync(agent, "Forget the refund; can I get a discount instead?", state=state)
    assert held.status == "interrupted" and held.interruption is not None
    assert held.interruption.category == "pricing"
    assert not any("discount" in text_of(r.messages[-1:]) for r in fm.requests)

    approve(state)
    r = run_sync(agent, state=state)
    assert r.status == "completed" and r.output == "Read: Forget the refund; can I get a discount instead?"


# -- a model verdict that is not a verdict, at a stage whose text is withheld --------------------

SECRET = "Our supplier margin on the FVAM-2050-B is 62%."


@pytest.mark.parametrize(
    "said",
    [
        "This answer discloses that our supplier margin on the FVAM-2050-B is 62%, so it is unsafe.",
        '{"rationale": "internal figures", "score": "supplier margin 62%", "category": "unsafe"}',
    ],
)
def test_a_model_verdict_in_words_is_not_quoted_to_the_caller_of_a_withheld_answer(said: str) -> None:
    judge = FunctionModel(lambda m, r: said, model_id="judge")
    guard = Guardrail(ModelClassifier("No internal figures.", model=judge), stages=("output",))
    events = collect(Agent(FunctionModel(lambda m, r: SECRET), middleware=[guard]), "What is your margin?")

    r = result_of(events)
    assert r.status == "failed" and "no usable verdict" in r.output
    assert "62%" not in r.output and "62%" not in (r.reason or "")
    assert not [v for v in verdicts(events) if "62%" in v.rationale]
    assert_never_streamed(events, SECRET)


def test_at_the_input_a_model_verdict_in_words_is_still_quoted_for_the_person_debugging_it() -> None:
    judge = FunctionModel(lambda m, r: "I think this is fine.", model_id="judge")
    guard = Guardrail(ModelClassifier("Questions about valves.", model=judge))
    r = run_sync(Agent(FunctionModel(lambda m, r: "16 bar."), middleware=[guard]), "What pressure?")
    assert r.status == "failed" and "I think this is fine." in (r.reason or "")


# -- one input guardrail redirects, another would block --------------------------------------------


@pytest.mark.parametrize("scope_first", [True, False])
def test_a_jailbreak_beside_an_off_topic_question_is_blocked_whichever_guardrail_comes_first(
    scope_first: bool,
) -> None:
    scope = Guardrail(rules(OFF_TOPIC), name="scope", thresholds=Thresholds(block=0.2, redirect=0.5))
    safety = Guardrail(RuleClassifier.jailbreaks(), name="safety")
    fm = FunctionModel(lambda m, r: "I can only help with questions about our valves.")
    agent = Agent(fm, middleware=[scope, safety] if scope_first else [safety, scope])
    state = RunState()

    r = run_sync(agent, f"{WEATHER} {JAILBREAK}", state=state)

    assert r.status == "failed" and "'safety'" in (r.reason or "")
    assert fm.requests == []  # the model never read the jailbreak, not even to decline it
    assert not any(text_of([m]).startswith("[Redirect: ") for m in state.messages)


def test_a_redirect_note_stays_when_the_other_guardrails_allow_the_message() -> None:
    scope = Guardrail(rules(OFF_TOPIC), name="scope", thresholds=Thresholds(block=0.2, redirect=0.5))
    fm = FunctionModel(lambda m, r: "I can only help with questions about our valves.")
    agent = Agent(fm, middleware=[scope, Guardrail(RuleClassifier.jailbreaks(), name="safety")])

    r = run_sync(agent, WEATHER, state=RunState())

    assert r.status == "completed" and r.output == "I can only help with questions about our valves."
    (request,) = fm.requests
    assert text_of(request.messages[-1:]).startswith("[Redirect: the input guardrail 'scope' redirected this")
