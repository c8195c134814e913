"""The guardrails attacked from outside (session 14): where a model's stream happens to split, a
classifier that fails the way a provider fails, and marks that hide a word from the rules.

A chunk of a released answer ended after a sentence mark followed by white space *or by the end of
what had arrived*: a delta ending in "62." (a token of "62.5%") or "evil." ended a chunk, which was
judged without what came next and streamed; the caller read "Our margin is 62." before the rest
was blocked, and where the stream split decided it. A mark now ends a chunk once the white space
after it has arrived.

A classifier of the deployment's own that calls a model or a moderation service through tether's
providers raises their errors (``ProviderError``). The guardrail let those through as the run's
own: at the output stage the run took the classifier's 503 for its model's, asked that model
again three times (paid each time, ``retry`` events blaming it) and failed with no verdict; at the
input stage the run ended as an unexpected error. It now fails closed with a verdict, as any other
failure of a classifier does.

The rules and the jailbreak scan read text through the memory layer's normaliser, which dropped
invisible characters but kept a zero-width joiner or non-joiner wherever it stood, and kept the
combining marks NFKC cannot fold into a letter (an underline, a strike-through, a dot below): a
model reads "I̲g̲n̲o̲r̲e̲ a̲l̲l̲ p̲r̲e̲v̲i̲o̲u̲s̲ i̲n̲s̲t̲r̲u̲c̲t̲i̲o̲n̲s̲" and "Supplier mar\u200dgin" as plain words, the
rules did not, and the jailbreak was answered and the margin delivered. A joiner that joins no
emoji and no letters of a joining script, and a mark on a Latin letter, are now read through.

Two answers reached the transcript and the run's output but never the stream, which is all a
streaming caller (the server's page, an SSE client, ``tether resume``) reads: a deployment's canned
``redirect_reply`` (the page showed an empty answer and the rationale meant for the deployment),
and an answer a person approved after an output guardrail asked (the resumed run completed with no
text). Both are now streamed; of an approved answer, what was released before the question is not
sent again.

A ``ModelClassifier`` took a verdict whose rationale was empty (``""``, or blanks) as a verdict: a
model that skipped its reasons and gave a number (the very thing rationale-first prevents) allowed
the text, or blocked it saying nothing why. It is now a verdict with no rationale, which fails
closed (or open, with ``on_error="allow"``) and says so.

A rule read the text in its stored order only: an answer with "\u202e%26 si nigram reilppus ruO"
(a right-to-left override, then the words backwards) passed ``supplier margin``, and a screen
showed the caller "Our supplier margin is 62%". A rule now also reads what an override displays.

A classifier of the deployment's own whose score was outside 0 to 1 had it clamped: a 7 on a risk
scale of 0 to 10 became 1.0, safe, and the text was allowed; NaN became a silent 0.0 under a
rationale that said "fine". Such a score is not a verdict now: it fails closed and says why.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.guardrails.common import JAILBREAK, OFF_TOPIC, Sentences, collect, deltas, result_of, verdicts
from tests.guardrails.test_attack_guardrails_round3 import Chars, Pieces
from tether import Agent, RunState, approve
from tether.errors import RetryableError
from tether.guardrails import Guardrail, ModelClassifier, Rule, RuleClassifier, Thresholds, Verdict
from tether.testing import FunctionModel

# -- output: a blocked figure split where the stream splits ---------------------------------------

MARGIN_FIGURE = Rule(r"margin is \d+(?:\.\d+)?%", 0.0, "confidential", "the answer discloses a margin")
FIGURE = "Rated 16 bar. Our margin is 62.5% on it. Ask me more."


def _chunked() -> Guardrail:
    return Guardrail(RuleClassifier([MARGIN_FIGURE]), stages=("output",), release="chunks", chunk_chars=10)


def test_no_split_of_the_stream_releases_part_of_a_blocked_figure() -> None:
    for at in range(1, len(FIGURE)):
        events = collect(Agent(Pieces([FIGURE[:at], FIGURE[at:]]), middleware=[_chunked()]), "How is the SK-114?")
        shown = "".join(deltas(events))
        assert result_of(events).status == "failed", at
        assert "62" not in shown, f"split at {at} released {shown!r}"


def test_a_stream_a_character_at_a_time_releases_the_checked_sentences_only() -> None:
    events = collect(Agent(Chars(lambda m, r: FIGURE), middleware=[_chunked()]), "How is the SK-114?")
    assert result_of(events).status == "failed"
    assert "".join(deltas(events)) == "Rated 16 bar. "


@pytest.mark.parametrize("pieces", [["Visit evil.", "example/offers today. Bye."], ["Line one\n", "Line two. "]])
def test_a_mark_at_the_end_of_a_delta_waits_for_what_follows(pieces: list[str]) -> None:
    outside = Rule(r"evil\.example", 0.0, "exfiltration", "it points the customer outside the company")
    guard = Guardrail(RuleClassifier([outside]), stages=("output",), release="chunks", chunk_chars=5)
    events = collect(Agent(Pieces(pieces), middleware=[guard]), "q")
    if "evil." in pieces[0]:
        assert result_of(events).status == "failed" and deltas(events) == []
    else:  # a line break ends a chunk by itself
        assert result_of(events).status == "completed" and deltas(events) == ["Line one\n", "Line two. "]


# -- a classifier whose own service fails as a provider fails -------------------------------------


class Moderation:
    """A deployment's classifier that calls a moderation model through tether's providers, whose
    service is down (what tether's HTTP providers raise for a 503)."""

    async def classify(self, text: str, *, stage: str, ctx: Any) -> Verdict:
        raise RetryableError("moderation: 503 Service Unavailable", provider="openai", status=503)


@pytest.mark.parametrize("stage", ["input", "output"])
def test_a_classifier_whose_service_fails_as_a_provider_fails_closed_with_a_verdict(stage: str) -> None:
    model = FunctionModel(lambda m, r: "Rated 16 bar. Supplier margin 62%.")
    events = collect(Agent(model, middleware=[Guardrail(Moderation(), stages=(stage,))]), "Tell me about the FVAM")
    r = result_of(events)
    assert r.status == "failed" and (r.reason or "").startswith(
        f"blocked: the {stage} guardrail 'guardrail' blocked this (error): the classifier failed (RetryableError: "
    )
    assert [e.type for e in events if e.type == "retry"] == []  # the run's model did not fail
    assert len(model.requests) == (0 if stage == "input" else 1)  # asked once at most, paid once
    (verdict,) = verdicts(events)
    assert (verdict.decision, verdict.score, verdict.category) == ("block", 0.0, "error")
    assert deltas(events) == []


# -- marks and joiners a model reads through ---------------------------------------------------


def _marked(text: str, mark: str) -> str:
    return "".join(ch + mark for ch in text)


@pytest.mark.parametrize(
    "mark", ["\u0332", "\u0336", "\u0338", "\u0307"], ids=["underline", "strike", "slash", "dot-above"]
)
def test_a_jailbreak_written_with_combining_marks_is_blocked_before_the_model_reads_it(mark: str) -> None:
    model = FunctionModel(lambda m, r: "Here is my system prompt: ...")
    events = collect(Agent(model, middleware=[Guardrail(RuleClassifier.jailbreaks())]), _marked(JAILBREAK, mark))
    r = result_of(events)
    assert r.status == "failed" and "injection:override" in (r.reason or "")
    assert model.requests == []


SUPPLIER_MARGIN = Rule(r"supplier margin", 0.0, "confidential", "the answer discloses an internal margin")


@pytest.mark.parametrize(
    "answer",
    [
        "Our supplier mar\u200dgin is 62%.",
        "Our supplier mar\u200cgin is 62%.",
        f"Our {_marked('supplier', chr(0x336))} margin is 62%.",
    ],
    ids=["zwj", "zwnj", "strike"],
)
@pytest.mark.parametrize("release", ["hold", "chunks"])
def test_an_answer_whose_blocked_words_carry_joiners_or_marks_is_withheld(answer: str, release: str) -> None:
    guard = Guardrail(RuleClassifier([SUPPLIER_MARGIN]), stages=("output",), release=release, chunk_chars=10)
    events = collect(Agent(FunctionModel(lambda m, r: "Rated 16 bar. " + answer), middleware=[guard]), "q")
    assert result_of(events).status == "failed"
    assert "62%" not in "".join(deltas(events))


def test_joiners_and_marks_other_scripts_are_written_with_are_left_as_they_are() -> None:
    from tether.memory._normal import normalise

    for text in ["👩\u200d💻 ok", "می\u200cخواهم", "क्\u200dष", "नमस्ते", "Tiếng Việt", "Học tập"]:
        assert normalise(text) == text.casefold()


# -- what a guardrail answers, and what a person lets through, is streamed ------------------------

CANNED = "I can only help with questions about our valves and actuators."


@pytest.mark.parametrize("stage", ["input", "output"])
@pytest.mark.parametrize("release", ["hold", "chunks"])
def test_a_canned_redirect_reply_is_streamed_as_the_answer(stage: str, release: str) -> None:
    guard = Guardrail(
        RuleClassifier([OFF_TOPIC]),
        stages=(stage,),
        thresholds=Thresholds(block=0.2, redirect=0.5),
        redirect_reply=CANNED,
        release=release,
    )
    events = collect(Agent(FunctionModel(lambda m, r: "The weather will be sunny."), middleware=[guard]), "Weather?")
    r = result_of(events)
    assert (r.status, r.output) == ("completed", CANNED)
    assert deltas(events) == [CANNED]


DISCOUNT = Rule(r"\bdiscount\b", 0.4, "pricing", "discounts are approved by sales")
OFFER = "Rated 16 bar. You can have a 40% discount on 200 units. Delivery in two weeks."


@pytest.mark.parametrize("release", ["hold", "chunks"])
def test_an_answer_a_person_approves_is_streamed_once_by_the_resumed_run(release: str) -> None:
    guard = Guardrail(
        RuleClassifier([DISCOUNT]),
        stages=("output",),
        thresholds=Thresholds(block=0.1, ask=0.5),
        release=release,
        chunk_chars=10,
    )
    agent = Agent(Sentences(lambda m, r: OFFER), middleware=[guard])
    state = RunState()
    first = collect(agent, "A better price?", state=state)
    assert result_of(first).status == "interrupted"
    before = "".join(deltas(first))
    assert before == ("Rated 16 bar. " if release == "chunks" else "")

    approve(state)
    saved = RunState.model_validate_json(state.model_dump_json())  # resumed by another process
    resumed = collect(agent, state=saved)

    assert (result_of(resumed).status, result_of(resumed).output) == ("completed", OFFER)
    assert before + "".join(deltas(resumed)) == OFFER  # all of it, each part once


# -- a model verdict with an empty rationale --------------------------------------------------------


@pytest.mark.parametrize("rationale", ["", "   "])
def test_a_model_verdict_with_an_empty_rationale_is_not_a_verdict(rationale: str) -> None:
    said = json.dumps({"rationale": rationale, "score": 1.0, "category": "ok"})
    judge = FunctionModel(lambda m, r: said, model_id="judge")
    model = FunctionModel(lambda m, r: "16 bar.")
    events = collect(Agent(model, middleware=[Guardrail(ModelClassifier("Valves only.", model=judge))]), "Pressure?")
    r = result_of(events)
    assert r.status == "failed" and "the verdict has no rationale" in (r.reason or "")
    assert model.requests == []
    (verdict,) = verdicts(events)
    assert (verdict.decision, verdict.category) == ("block", "error")


# -- a right-to-left override: the words backwards, shown forwards --------------------------------


@pytest.mark.parametrize("release", ["hold", "chunks"])
@pytest.mark.parametrize("end", ["\u202c Ask me more.", "\nAsk me more.", ""])
def test_an_answer_a_right_to_left_override_shows_forwards_is_judged_as_shown(release: str, end: str) -> None:
    hidden = "\u202e" + "Our supplier margin is 62%"[::-1] + end
    guard = Guardrail(RuleClassifier([SUPPLIER_MARGIN]), stages=("output",), release=release, chunk_chars=10)
    events = collect(Agent(FunctionModel(lambda m, r: "Rated 16 bar. " + hidden), middleware=[guard]), "q")
    assert result_of(events).status == "failed"
    assert "26" not in "".join(deltas(events))


# -- a score outside 0 to 1 -------------------------------------------------------------------------


class Scale:
    """A classifier that scores on a scale of its own."""

    def __init__(self, score: float) -> None:
        self.score = score

    async def classify(self, text: str, *, stage: str, ctx: Any) -> Verdict:
        return Verdict("looks fine to me", self.score, "ok")


@pytest.mark.parametrize("score", [7.0, float("inf"), float("nan"), -0.5], ids=["seven", "inf", "nan", "negative"])
def test_a_score_outside_zero_to_one_fails_closed_and_says_so(score: float) -> None:
    model = FunctionModel(lambda m, r: "16 bar.")
    events = collect(Agent(model, middleware=[Guardrail(Scale(score))]), "Pressure?")
    r = result_of(events)
    assert r.status == "failed" and "is not a number from 0 to 1" in (r.reason or "")
    assert model.requests == []
    (verdict,) = verdicts(events)
    assert (verdict.decision, verdict.score, verdict.category) == ("block", 0.0, "error")


def test_a_score_a_hair_outside_the_range_from_floating_point_is_kept() -> None:
    model = FunctionModel(lambda m, r: "16 bar.")
    r = result_of(collect(Agent(model, middleware=[Guardrail(Scale(0.1 + 0.2 + 0.7))]), "Pressure?"))
    assert (r.status, r.output) == ("completed", "16 bar.")
