"""Attacks on the loop's handling of tool calls and cut answers (session 16).

Each test names what a user saw before its fix."""

from __future__ import annotations

import asyncio
import random
from typing import Any

import pytest

from tether import Agent, run_stream
from tether.events import Event, TextDelta
from tether.harness.length import Continuation, merge_seam
from tether.messages import AssistantMessage, TextPart
from tether.testing import FunctionModel


def _events(agent: Agent, prompt: str | None, **kw: Any) -> list[Event]:
    async def go() -> list[Event]:
        return [e async for e in run_stream(agent, prompt, **kw)]

    return asyncio.run(go())


def _shown(events: list[Event]) -> str:
    return "".join(e.text for e in events if isinstance(e, TextDelta))


# -- a continuation that says nothing new -----------------------------------------------------------

_CUT = "The answer has three parts: first, the valve; second, "


@pytest.mark.parametrize("stream", [True, False])
@pytest.mark.parametrize("said", ["", "  \n", _CUT, _CUT[-20:]], ids=["empty", "blank", "all-again", "end-again"])
def test_a_continuation_that_says_nothing_new_does_not_complete_the_cut_answer(stream: bool, said: str) -> None:
    """Before: asked to finish a cut answer, a model that sent back nothing (or only what it had
    already written) with ``finish_reason="stop"`` ended the run ``completed``, "the model
    answered", with the half-written answer as the output. Nothing was finished: the run now ends
    ``failed``, ``incomplete:``, with the text kept, as a second cut does."""
    replies = [
        AssistantMessage(content=(TextPart(text=_CUT),), finish_reason="length"),
        AssistantMessage(content=(TextPart(text=said),) if said else (), finish_reason="stop"),
    ]
    events = _events(Agent(FunctionModel(lambda m, r: replies.pop(0)), stream=stream), "explain")
    result = events[-1].result  # type: ignore[attr-defined]
    assert result.status == "failed" and (result.reason or "").startswith("incomplete:"), result.reason
    assert "it wrote nothing new" in (result.reason or "")
    assert result.output.rstrip() == _CUT.rstrip() and result.turns == 2


def test_a_continuation_that_finishes_the_answer_still_completes() -> None:
    replies = [
        AssistantMessage(content=(TextPart(text=_CUT),), finish_reason="length"),
        AssistantMessage(content=(TextPart(text="the seal."),), finish_reason="stop"),
    ]
    result = _events(Agent(FunctionModel(lambda m, r: replies.pop(0))), "explain")[-1].result  # type: ignore[attr-defined]
    assert (result.status, result.output) == ("completed", _CUT + "the seal.")


# -- a continuation that repeats a long end of the cut answer ---------------------------------------

_LONG = " ".join(f"Point {i}: seat {i} of the valve is rated for {i * 3} bar." for i in range(300))


@pytest.mark.parametrize("stream", [True, False])
@pytest.mark.parametrize("repeat", [2500, 5000])
def test_a_continuation_that_repeats_the_last_pages_keeps_them_once(stream: bool, repeat: int) -> None:
    """Before: a model told to go on from where it stopped that began again a few paragraphs back
    (the last 2,500 characters of a 6,000-character answer, said again before the new text) had
    those paragraphs kept twice in the answer, the transcript and the stream: a repeat was looked
    for only in the last 2,000 characters. It is now kept once, however long."""
    first = _LONG[:6000]
    again = _LONG[6000 - repeat : 9000]
    replies = [
        AssistantMessage(content=(TextPart(text=first),), finish_reason="length"),
        AssistantMessage(content=(TextPart(text=again),), finish_reason="stop"),
    ]
    events = _events(Agent(FunctionModel(lambda m, r: replies.pop(0)), stream=stream), "list the points")
    result = events[-1].result  # type: ignore[attr-defined]
    assert (result.status, result.output) == ("completed", _LONG[:9000])
    assert _shown(events) == (_LONG[:9000] if stream else "")


def test_the_seam_is_found_and_streamed_the_same_however_long_the_repeat() -> None:
    rng = random.Random(16)
    for _ in range(200):
        cut_at = rng.randint(0, 9000)
        before = _LONG[:cut_at]
        after = _LONG[rng.randint(max(0, cut_at - 8000), cut_at + 50) : rng.randint(cut_at, 12000)]
        merged, new = merge_seam(before, after)
        cont = Continuation(AssistantMessage(content=(TextPart(text=before),), finish_reason="length"))
        shown, i = [], 0
        while i < len(after):
            step = rng.randint(1, 60)
            shown.append(cont.feed(after[i : i + step]))
            i += step
        shown.append(cont.flush())
        assert "".join(shown) == new, (len(before), len(after))
        start = _LONG.find(after)
        if len(after) >= 100 and start + 8 <= len(before) <= start + len(after):  # an overlap: said once
            assert merged == _LONG[: start + len(after)], (len(before), start, len(after))
