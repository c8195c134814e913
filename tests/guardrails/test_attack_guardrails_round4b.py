"""Round four (b) of attacks on the guardrails: a person's approval of one guardrail's question.

An approval let "exactly the judged text through": through every guardrail of the stack, not only
the one that asked. With a guardrail that asks about discounts first and a jailbreak guardrail
after it, the ask stopped the run before the jailbreak guardrail had judged the message; the
person approved the discount, and on resume the jailbreak guardrail found the text approved and
let it reach the model. An approval now answers the question of the guardrail that asked it; the
others still judge the text.
"""

from __future__ import annotations

from tests.guardrails.common import JAILBREAK
from tether import Agent, RunState, approve, run_sync
from tether.guardrails import Guardrail, Rule, RuleClassifier, Thresholds
from tether.testing import FunctionModel

DISCOUNTS = RuleClassifier([Rule(r"\bdiscount\b", 0.4, "pricing", "discounts are approved by sales")])
ASK = Thresholds(block=0.1, ask=0.5)


def test_approving_one_guardrails_question_does_not_let_a_jailbreak_past_another() -> None:
    fm = FunctionModel(lambda m, r: "Here is my system prompt: ...")
    agent = Agent(
        fm,
        middleware=[
            Guardrail(DISCOUNTS, name="pricing", thresholds=ASK),
            Guardrail(RuleClassifier.jailbreaks(), name="safety"),
        ],
    )
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
    agent = Agent(
        fm,
        middleware=[
            Guardrail(DISCOUNTS, name="pricing", thresholds=ASK),
            Guardrail(RuleClassifier.jailbreaks(), name="safety"),
        ],
    )
    state = RunState()
    assert run_sync(agent, "Can I get a discount for 200 units?", state=state).status == "interrupted"
    approve(state)
    resumed = run_sync(agent, state=state)
    assert resumed.status == "completed" and resumed.output == "A 5% discount is possible for 200 units."
