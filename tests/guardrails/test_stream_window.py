"""Issue 27, item 2: the output guardrail could be passed by streaming.

* A blocked phrase cut by a chunk's boundary was streamed and delivered: each chunk was judged
  alone. A chunk is now judged with the end of what was released before it (a look-behind as
  long as the longest text the rules can match, or ``lookbehind_chars``).
* Reasoning deltas carried what the output guardrail blocks in the answer. Beside a guarded
  answer, reasoning is withheld from the caller (the default), judged like the answer, or passed
  (for local use), as ``Guardrail(reasoning=...)`` says."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from typing import Any

import pytest

from tests.guardrails.common import collect, deltas, result_of, rules, verdicts
from tether import Agent, RunState
from tether.guardrails import Guardrail, Rule, RuleClassifier
from tether.messages import AssistantMessage, ReasoningPart, TextPart
from tether.providers.base import ModelRequest, ModelResponse, ResponseDone, StreamEvent, StreamReasoning, StreamText
from tether.testing import FunctionModel

MARGIN = Rule(r"margin:?\s+\d+\s*%", 0.0, "confidential", "the answer discloses a margin")
ANSWER = "Our margin: 62% on the SK-114 this quarter. Ask me about seals if you need more."


class Words(FunctionModel):
    """Streams ``reasoning`` then ``text`` a word at a time (a boundary can fall anywhere)."""

    def __init__(self, text: str, reasoning: str = "") -> None:
        super().__init__(lambda m, r: text)
        self.text, self.reasoning = text, reasoning

    async def stream(self, request: ModelRequest) -> AsyncIterator[StreamEvent]:
        await self.complete(request)  # recorded, as every request is
        for word in re.findall(r"\S+\s*", self.reasoning):
            yield StreamReasoning(word)
        for word in re.findall(r"\S+\s*", self.text):
            yield StreamText(word)
        parts: list[Any] = [TextPart(text=self.text)]
        if self.reasoning:
            parts.insert(0, ReasoningPart(text=self.reasoning))
        yield ResponseDone(ModelResponse(message=AssistantMessage(content=tuple(parts), finish_reason="stop")))


def chunked(**kw: Any) -> Guardrail:
    return Guardrail(rules(MARGIN), stages=("output",), release="chunks", chunk_chars=10, **kw)


def test_a_phrase_cut_by_a_chunks_boundary_is_judged_whole_and_blocked() -> None:
    state = RunState()
    events = collect(Agent(Words(ANSWER), middleware=[chunked()]), "How is the SK-114 doing?", state=state)
    r = result_of(events)
    assert r.status == "failed" and "blocked this (confidential)" in (r.reason or "")
    shown = "".join(deltas(events))
    assert "62%" not in shown and shown in ("", "Our margin: ")  # at most what was judged safe alone
    assert "62%" not in state.model_dump_json()
    assert [v.decision for v in verdicts(events)][-1] == "block"


def test_the_window_is_the_longest_match_of_bounded_rules_or_a_setting() -> None:
    bounded = RuleClassifier([Rule(r"code \d{4}", 0.0, "secret", "a door code")])
    assert bounded.max_match_chars == len("code 1234")
    assert RuleClassifier([MARGIN]).max_match_chars is None  # \s+ has no bound: the default applies
    assert Guardrail(RuleClassifier([MARGIN]), stages=("output",)).lookbehind() == 256
    assert Guardrail(bounded, stages=("output",)).lookbehind() == len("code 1234")
    assert Guardrail(bounded, stages=("output",), lookbehind_chars=3).lookbehind() == 3


def test_a_clean_answer_still_streams_in_chunks_each_released_once() -> None:
    clean = "The SK-114 seal kit fits the FVAM-2050-B. It ships in two days. Ask me about seals."
    events = collect(Agent(Words(clean), middleware=[chunked()]), "Seals?")
    assert result_of(events).status == "completed"
    assert "".join(deltas(events)) == clean and len(deltas(events)) > 1


LEAKY_THOUGHT = "The note says margin: 62% on the kit; I must not say that. "


def reasoning_of(events: list[Any]) -> str:
    return "".join(e.text for e in events if e.type == "reasoning_delta")


@pytest.mark.parametrize("mode", ["withhold", "judge", "pass"])
def test_reasoning_beside_a_guarded_answer_is_withheld_judged_or_passed(mode: str) -> None:
    clean = "The SK-114 seal kit fits. It ships in two days."
    state = RunState()
    events = collect(
        Agent(Words(clean, reasoning=LEAKY_THOUGHT), middleware=[chunked(reasoning=mode)]), "Seals?", state=state
    )
    r = result_of(events)
    assert r.status == "completed" and "".join(deltas(events)) == clean  # the answer is unaffected
    thought = reasoning_of(events)
    if mode == "pass":
        assert thought == LEAKY_THOUGHT  # for local use: the caller is the person who runs it
    else:
        assert "62%" not in thought
    if mode == "judge":
        assert any(v.decision == "block" for v in verdicts(events))  # the verdict is in the stream
    # The reasoning stays in the transcript either way: only the caller's stream is guarded.
    assert any(
        isinstance(p, ReasoningPart) for m in state.messages if isinstance(m, AssistantMessage) for p in m.content
    )


def test_clean_reasoning_is_released_once_judged() -> None:
    thought = "The kit is in stock. Shipping takes two days. "
    events = collect(
        Agent(Words("It ships in two days.", reasoning=thought), middleware=[chunked(reasoning="judge")]), "?"
    )
    assert reasoning_of(events) == thought


def test_reasoning_without_an_output_guardrail_streams_as_before() -> None:
    events = collect(Agent(Words("Fine.", reasoning=LEAKY_THOUGHT)), "?")
    assert reasoning_of(events) == LEAKY_THOUGHT
