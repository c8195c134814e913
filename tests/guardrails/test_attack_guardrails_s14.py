"""The guardrails attacked from outside (session 14): where a model's stream happens to split, a
classifier that fails the way a provider fails, and marks that hide a word from the rules.

A chunk of a released answer ended after a sentence mark followed by white space *or by the end of
what had arrived*: a delta ending in "62." (a token of "62.5%") or "evil." ended a chunk, which was
judged without what came next and streamed; the caller read "Our margin is 62." before the rest
was blocked, and where the stream split decided it. A mark now ends a chunk once the white space
after it has arrived.
"""

from __future__ import annotations

import pytest

from tests.guardrails.common import collect, deltas, result_of
from tests.guardrails.test_attack_guardrails_round3 import Chars, Pieces
from tether import Agent
from tether.guardrails import Guardrail, Rule, RuleClassifier

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
