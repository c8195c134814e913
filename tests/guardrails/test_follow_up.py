"""After-agent hooks: :class:`FollowUp`, the reference's lead capture. After the answer is
delivered, an intent classifier reads the last 8 messages that are conversation (not tool calls or
results) and a lead-capture step runs only when the intent is a purchase: a technician's spec
question is answered and nothing else happens."""

from __future__ import annotations

import json
import logging
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from tests.guardrails.common import JAILBREAK, collect, result_of, traced, verdicts
from tether import Agent, JsonlTracer, RunState, tool
from tether.events import Turn
from tether.guardrails import FollowUp, Guardrail, ModelClassifier, RuleClassifier, Stage, Verdict, recent_talk
from tether.harness.context import RunContext
from tether.messages import ToolMessage, UserMessage, text_of
from tether.testing import FunctionModel, Reply

SPEC = "What is the maximum switching frequency of a BIM-UNT-AP6X?"
VOLTAGE = "Does it work at 24 V DC?"
CABLE = "Is there a version with a longer cable?"
QUOTE = "We need 200 of the 5 m version for a line in Porto; can you send us a quote?"


@tool(read_only=True)
def spec_lookup(part: str, field: str) -> str:
    """Look up one field of a part's datasheet."""
    return {"switching_frequency": "1 kHz", "supply": "10-30 V DC"}.get(field, "unknown")


def sales_engineer(messages: list[Any], request: Any) -> Any:
    """Answers each question; uses the datasheet tool for the first two."""
    asked = text_of([next(m for m in reversed(messages) if isinstance(m, UserMessage))])
    looked_up = isinstance(messages[-1], ToolMessage)
    if asked == SPEC:
        return (
            "The BIM-UNT-AP6X switches at up to 1 kHz."
            if looked_up
            else Reply(calls=(("c1", "spec_lookup", {"part": "BIM-UNT-AP6X", "field": "switching_frequency"}),))
        )
    if asked == VOLTAGE:
        return (
            "Yes, 10 to 30 V DC."
            if looked_up
            else Reply(
                text="Let me check the supply range.",
                calls=(("c2", "spec_lookup", {"part": "BIM-UNT-AP6X", "field": "supply"}),),
            )
        )
    if asked == CABLE:
        return "Yes: the BIM-UNT-AP6X-5M, with a 5 m cable."
    return "I can have sales prepare a quote for 200 units of the BIM-UNT-AP6X-5M."


@dataclass
class BuyingIntent:
    """A light intent classifier: a purchase when the person's latest words ask for a quote."""

    seen: list[str] = field(default_factory=list)

    async def classify(self, text: str, *, stage: Stage, ctx: RunContext) -> Verdict:
        self.seen.append(text)
        latest = [line for line in text.splitlines() if line.startswith("user: ")][-1]
        if re.search(r"\bquote\b|\bprice for\b", latest):
            return Verdict("the person asks for a quote for a quantity: a genuine purchase intent", 0.9, "purchase")
        return Verdict("a technical question about the product; no intent to buy yet", 0.85, "technical")


@dataclass
class Crm:
    leads: list[dict[str, Any]] = field(default_factory=list)

    async def capture(self, ctx: RunContext, verdict: Verdict) -> None:
        self.leads.append({"run_id": ctx.state.run_id, "answer": ctx.state.final_text(), "why": verdict.rationale})


def conversation(hook: FollowUp, tmp_path: Path) -> tuple[RunState, list[list[Any]]]:
    """The four questions in one conversation (one state, four runs), each traced."""
    agent = Agent(FunctionModel(sales_engineer), tools=[spec_lookup], middleware=[hook])
    state = RunState()
    runs = [collect(agent, q, state=state, tracer=JsonlTracer(tmp_path)) for q in (SPEC, VOLTAGE, CABLE, QUOTE)]
    assert [result_of(e).status for e in runs] == ["completed"] * 4
    return state, runs


def test_lead_capture_runs_only_when_the_last_8_non_tool_messages_show_purchase_intent(tmp_path: Path) -> None:
    intent, crm = BuyingIntent(), Crm()
    hook = FollowUp(intent, frozenset({"purchase"}), crm.capture, name="lead_capture")
    state, runs = conversation(hook, tmp_path)

    # The technician's questions were answered and nothing else happened.
    assert [v.decision for e in runs[:3] for v in verdicts(e)] == ["no_follow_up"] * 3
    # The buyer's was answered, then the lead captured, once.
    assert crm.leads == [
        {
            "run_id": state.run_id,
            "answer": result_of(runs[3]).output,
            "why": "the person asks for a quote for a quantity: a genuine purchase intent",
        }
    ]

    # What the classifier read: conversation only (no tool calls, no tool results), the last 8.
    assert intent.seen[0] == (
        "user: What is the maximum switching frequency of a BIM-UNT-AP6X?\n"
        "assistant: The BIM-UNT-AP6X switches at up to 1 kHz."
    )
    assert intent.seen[3].splitlines() == [
        "assistant: The BIM-UNT-AP6X switches at up to 1 kHz.",
        "user: Does it work at 24 V DC?",
        "assistant: Let me check the supply range.",  # its words count; its tool call does not
        "assistant: Yes, 10 to 30 V DC.",
        "user: Is there a version with a longer cable?",
        "assistant: Yes: the BIM-UNT-AP6X-5M, with a 5 m cable.",
        f"user: {QUOTE}",
        "assistant: I can have sales prepare a quote for 200 units of the BIM-UNT-AP6X-5M.",
    ]  # the first question is the ninth message back: out of the window
    assert len(state.messages) == 12 and sum(isinstance(m, ToolMessage) for m in state.messages) == 2
    assert "spec_lookup" not in "".join(intent.seen) and "10-30 V DC" not in "".join(intent.seen)  # a result


def test_the_decision_is_an_event_after_the_answer_was_delivered(tmp_path: Path) -> None:
    hook = FollowUp(BuyingIntent(), frozenset({"purchase"}), Crm().capture, name="lead_capture")
    state, runs = conversation(hook, tmp_path)
    for events, decision in zip(runs, ["no_follow_up"] * 3 + ["follow_up"], strict=True):
        *_, last_turn, verdict, _done = events
        assert isinstance(last_turn, Turn)  # after the answer, just before done
        assert (verdict.type, verdict.stage, verdict.name, verdict.decision) == (
            "guardrail",
            "after_agent",
            "lead_capture",
            decision,
        )
    lines = [t for t in traced(tmp_path, state.run_id) if t["type"] == "guardrail"]
    assert [(t["decision"], t["category"], t["score"]) for t in lines] == [("no_follow_up", "technical", 0.85)] * 3 + [
        ("follow_up", "purchase", 0.9)
    ]


def test_no_follow_up_for_other_intents_nor_a_weak_purchase_signal() -> None:
    crm = Crm()

    class Unsure:
        async def classify(self, text: str, *, stage: Stage, ctx: RunContext) -> Verdict:
            return Verdict("maybe buying, maybe comparing", 0.3, "purchase")

    for classifier in (Unsure(), RuleClassifier()):  # a weak purchase signal; no intent at all
        r = collect(
            Agent(
                FunctionModel(lambda m, r: "Noted."),
                middleware=[FollowUp(classifier, frozenset({"purchase"}), crm.capture)],
            ),
            QUOTE,
        )
        assert result_of(r).status == "completed" and [v.decision for v in verdicts(r)] == ["no_follow_up"]
    assert crm.leads == []


@pytest.mark.parametrize("how", ["max_turns", "blocked"])
def test_no_follow_up_after_a_run_that_did_not_complete(how: str) -> None:
    intent, crm = BuyingIntent(), Crm()
    hook = FollowUp(intent, frozenset({"purchase"}), crm.capture)
    if how == "max_turns":
        agent = Agent(FunctionModel(sales_engineer), tools=[spec_lookup], middleware=[hook], max_turns=1)
        prompt = SPEC
    else:  # the input guardrail stops it first; the hook still sees the (failed) end
        agent = Agent(FunctionModel(sales_engineer), middleware=[Guardrail(RuleClassifier.jailbreaks()), hook])
        prompt = JAILBREAK + " Then send us a quote."
    events = collect(agent, prompt)
    assert result_of(events).status == ("max_turns_exceeded" if how == "max_turns" else "failed")
    assert intent.seen == [] and crm.leads == []
    assert verdicts(events, "after_agent") == []


def test_a_failing_follow_up_does_not_change_the_delivered_answer(caplog: pytest.LogCaptureFixture) -> None:
    async def broken_crm(ctx: RunContext, verdict: Verdict) -> None:
        raise ConnectionError("crm.example: 503")

    fm = FunctionModel(lambda m, r: "I can have sales prepare that quote.")
    with caplog.at_level(logging.ERROR, logger="tether"):
        events = collect(
            Agent(fm, middleware=[FollowUp(BuyingIntent(), frozenset({"purchase"}), broken_crm, name="lead_capture")]),
            QUOTE,
        )
    r = result_of(events)
    assert (r.status, r.reason, r.output) == ("completed", "the model answered", "I can have sales prepare that quote.")
    assert [v.decision for v in verdicts(events)] == ["follow_up"]
    assert any("lead_capture failed" in rec.getMessage() and rec.exc_info for rec in caplog.records)


def test_a_model_can_be_the_intent_classifier_and_its_call_is_charged() -> None:
    def judge_fn(messages: list[Any], request: Any) -> Any:
        text = text_of(messages)
        buying = "quote" in text.rsplit("user: ", 1)[-1]
        return json.dumps(
            {
                "rationale": "asks for a quote" if buying else "a spec question",
                "score": 0.9,
                "category": "purchase" if buying else "technical",
            }
        )

    judge = FunctionModel(judge_fn, model_id="intent")
    crm = Crm()
    hook = FollowUp(
        ModelClassifier("Classify the customer's intent.", model=judge, categories=("purchase", "technical", "other")),
        frozenset({"purchase"}),
        crm.capture,
    )
    agent = Agent(FunctionModel(sales_engineer), tools=[spec_lookup], middleware=[hook])
    state = RunState()
    costs = []
    for q in (CABLE, QUOTE):
        events = collect(agent, q, state=state)
        (turn,) = [e for e in events if isinstance(e, Turn)]
        costs.append((turn.cost_usd, result_of(events).cost_usd))
    assert len(crm.leads) == 1 and len(judge.requests) == 2
    talk = re.escape(recent_talk(state.messages))
    assert re.fullmatch(rf"Stage: input\n<(text-[0-9a-f]{{16}})>\n{talk}\n</\1>", text_of(judge.requests[-1].messages))
    for turn_cost, run_cost in costs:  # each verdict, made after the turn, is in the run's cost
        assert turn_cost is not None and run_cost is not None and run_cost > turn_cost
