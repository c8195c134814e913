"""Attacks on parallel tool batches and on answers cut off by the output limit (session 15).

Each test names what a user saw before its fix; all run in process against ``FunctionModel``."""

from __future__ import annotations

import asyncio
import random
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import assert_pairing
from tether import Agent, RunState, run_stream, run_sync, tool
from tether.cancel import CancelSignal
from tether.events import Event, TextDelta
from tether.harness.agent import Stop
from tether.harness.length import MIN_SEAM, Continuation, merge_seam
from tether.harness.middleware import Middleware
from tether.harness.store import RunStore
from tether.messages import AssistantMessage, TextPart, ToolCallPart, ToolMessage
from tether.providers.scripted import Reply
from tether.testing import FunctionModel
from tether.usage import Price, Usage


def _events(agent: Agent, prompt: str | None, **kw: Any) -> list[Event]:
    async def go() -> list[Event]:
        return [e async for e in run_stream(agent, prompt, **kw)]

    return asyncio.run(go())


def _results(state: RunState) -> dict[str, ToolMessage]:
    return {m.call_id: m for m in state.messages if isinstance(m, ToolMessage)}


# -- a policy that ends the run at one call of a batch ----------------------------------------------


class _NoSpam(Middleware):
    """Ends the run at the call that would send message 2."""

    async def before_tool_call(self, ctx: Any, call: ToolCallPart, args: dict[str, Any]) -> Stop | None:
        return Stop("failed", "message 2 is spam: the run stops") if args.get("n") == 2 else None


def test_a_policy_that_ends_the_run_at_a_call_of_a_batch_lets_no_later_call_of_it_run() -> None:
    """Before: in a batch of parallel sends, a policy that ended the run at the second call still
    let the third one run (message 3 was sent after the run was told to stop); one by one, it
    never ran. Now it does not run either, and its result says why."""
    sent: list[int] = []

    @tool(parallel=True)
    async def send(n: int) -> str:
        """Send message n."""
        sent.append(n)
        return f"sent {n}"

    def model(messages: list[Any], request: Any) -> Reply | str:
        if any(isinstance(m, ToolMessage) for m in messages):
            return "done"
        return Reply(calls=tuple((f"c{i}", "send", {"n": i}) for i in (1, 2, 3)))

    state = RunState()
    result = run_sync(Agent(FunctionModel(model), tools=[send], middleware=[_NoSpam()]), "send three", state=state)
    assert (result.status, result.reason) == ("failed", "message 2 is spam: the run stops")
    assert sent == [1]
    results = _results(state)
    assert [(r.call_id, r.status) for r in results.values()] == [("c1", "ok"), ("c2", "error"), ("c3", "skipped")]
    assert (
        results["c3"].text
        == "Not run: the run stopped at an earlier call of this reply (message 2 is spam: the run stops)."
    )
    assert_pairing(state.messages)


# -- a continuation that calls a tool instead of finishing the answer -------------------------------

_CUT = "The answer has three parts: first, the valve; second, "


@pytest.mark.parametrize("stream", [True, False])
def test_a_continuation_that_calls_a_tool_instead_of_finishing_does_not_complete_the_cut_answer(stream: bool) -> None:
    """Before: asked to finish a cut answer, a model that wrote nothing and called a tool instead
    had its call refused and the run ended ``completed`` ("the model answered") with the
    half-written answer and tether's note glued to its last word. Now the answer is still cut: the
    run ends ``failed``, ``incomplete:``, with the text kept and the note apart; the tool never runs."""
    ran: list[str] = []

    @tool(read_only=True)
    def read_file(path: str) -> str:
        """Read a file."""
        ran.append(path)
        return "text"

    replies = [
        AssistantMessage(content=(TextPart(text=_CUT),), finish_reason="length"),
        AssistantMessage(
            content=(ToolCallPart(id="x1", name="read_file", arguments='{"path": "notes.txt"}'),),
            finish_reason="tool_calls",
        ),
    ]
    state = RunState()
    agent = Agent(FunctionModel(lambda m, r: replies.pop(0)), tools=[read_file], stream=stream)
    events = _events(agent, "explain", state=state)
    result = events[-1].result  # type: ignore[attr-defined]
    assert result.status == "failed" and (result.reason or "").startswith("incomplete:"), result.reason
    assert "its continuation did not finish it (cut again, it wrote nothing new, or it called a tool instead)" in (
        result.reason or ""
    )
    assert result.output.startswith(_CUT + "\n\n[tether: this reply called read_file")
    assert ran == [] and not _results(state)
    assert "".join(e.text for e in events if isinstance(e, TextDelta)) == (_CUT if stream else "")


def test_a_continuation_cut_inside_a_tool_call_keeps_the_text_as_streamed() -> None:
    """Before: the words a continuation wrote before the call it was cut in lost their trailing
    space in the kept answer ("the seal;" then the note), though the stream had shown it."""
    replies = [
        AssistantMessage(content=(TextPart(text=_CUT),), finish_reason="length"),
        AssistantMessage(
            content=(TextPart(text="the seal; "), ToolCallPart(id="w1", name="write_file", arguments='{"pa')),
            finish_reason="length",
        ),
    ]
    events = _events(Agent(FunctionModel(lambda m, r: replies.pop(0))), "explain")
    result = events[-1].result  # type: ignore[attr-defined]
    shown = "".join(e.text for e in events if isinstance(e, TextDelta))
    assert result.status == "failed" and (result.reason or "").startswith("incomplete:")
    assert shown == _CUT + "the seal; " and result.output.startswith(shown + "\n\n[tether:")


# -- a budget that runs out as an answer is cut ------------------------------------------------------


def test_an_answer_the_budget_cut_short_is_continued_once_the_budget_is_raised(tmp_path: Path) -> None:
    """Before: a reply the budget cut short ended the run ``budget_exceeded`` (resumable), and a
    resume with a budget ten times higher ended it ``budget_exceeded`` again at once, without a
    call: the answer could never be finished. Now the resumed run continues it."""
    asked: list[int] = []

    def model(messages: list[Any], request: Any) -> AssistantMessage:
        asked.append(request.max_tokens or 0)
        if len(asked) == 1:  # as long as the budget allowed: cut
            words = "word " * request.max_tokens
            usage = Usage(prompt_tokens=100, completion_tokens=request.max_tokens)
            return AssistantMessage(content=(TextPart(text=words),), finish_reason="length", usage=usage)
        usage = Usage(prompt_tokens=100 + asked[0], completion_tokens=4)
        return AssistantMessage(content=(TextPart(text="and the end."),), finish_reason="stop", usage=usage)

    price = Price(input=1.0, output=1000.0)
    store, state = RunStore(tmp_path / "runs"), RunState()
    first = run_sync(Agent(FunctionModel(model, price=price), max_budget_usd=0.5), "go", state=state, store=store)
    assert first.status == "budget_exceeded" and len(asked) == 1 and asked[0] < 4096
    again = Agent(FunctionModel(model, price=price), max_budget_usd=5.0)
    result = run_sync(again, state=store.load(state.run_id), store=store)
    assert (result.status, len(asked)) == ("completed", 2), result.reason
    assert result.output == "word " * asked[0] + "and the end."
    assert result.cost_usd <= 5.0


# -- a continuation that starts the answer over ------------------------------------------------------

_LONG = " ".join(f"Point {i}: seat {i} of the valve is rated for {i * 3} bar." for i in range(120))
_FIRST = _LONG[:2500]  # longer than any seam looked for


@pytest.mark.parametrize(
    ("again", "status", "output"),
    [(_LONG, "completed", _LONG), (_FIRST[:2450], "failed", _FIRST)],
    ids=["whole", "cut-again"],
)
def test_a_continuation_that_starts_a_long_answer_over_is_not_kept_twice(again: str, status: str, output: str) -> None:
    """Before: told to go on from where it stopped, a model that started a 2,500-character answer
    over from the top (word for word) had the answer kept and streamed with its first 2,500
    characters twice; one whose restart was cut again (as it is, at the same limit) ended with the
    text doubled. A restart is now the whole text: nothing is kept or shown twice."""
    replies = [
        AssistantMessage(content=(TextPart(text=_FIRST),), finish_reason="length"),
        AssistantMessage(content=(TextPart(text=again),), finish_reason="stop" if again == _LONG else "length"),
    ]
    events = _events(Agent(FunctionModel(lambda m, r: replies.pop(0))), "list the points")
    result = events[-1].result  # type: ignore[attr-defined]
    assert (result.status, result.output) == (status, output)
    assert "".join(e.text for e in events if isinstance(e, TextDelta)) == output


def test_a_streamed_restart_shows_exactly_the_new_text_however_it_is_split() -> None:
    rng = random.Random(15)
    for _ in range(300):
        before = _LONG[: rng.randint(0, 3000)]
        after = rng.choice([_LONG[: rng.randint(0, 4000)], before + " and more", _LONG[rng.randint(0, 3000) :]])
        cont = Continuation(AssistantMessage(content=(TextPart(text=before),), finish_reason="length"))
        shown, i = [], 0
        while i < len(after):
            step = rng.randint(1, 40)
            shown.append(cont.feed(after[i : i + step]))
            i += step
        shown.append(cont.flush())
        merged, new = merge_seam(before, after)
        assert "".join(shown) == new, (len(before), len(after))
        if min(len(before), len(after)) >= MIN_SEAM and (after.startswith(before) or before.startswith(after)):
            assert merged == max(before, after, key=len)  # a restart: said once


# -- Stop in the middle of a batch ------------------------------------------------------------------


def test_after_a_stop_mid_batch_the_resumed_results_keep_the_order_of_their_calls(tmp_path: Path) -> None:
    """Before: Stop came while the first call of a batch still ran and the second had finished;
    the second's result was kept (as documented) and the first, run again on resume, was written
    after it: the transcript and the next request had the results out of their calls' order (law
    1). Now each result takes its call's place before the model is asked."""
    signal = CancelSignal()
    hang = [True]

    @tool(read_only=True)
    async def slow(n: int) -> str:
        """A slow read."""
        if hang[0]:
            await asyncio.sleep(30)  # until Stop cancels it
        return f"slow {n}"

    @tool(read_only=True)
    async def fast(n: int) -> str:
        """A fast read; Stop comes as it ends."""
        asyncio.get_running_loop().call_soon(signal.cancel, "stop now")
        return f"fast {n}"

    seen: list[list[Any]] = []

    def model(messages: list[Any], request: Any) -> Reply | str:
        seen.append(list(messages))
        if any(isinstance(m, ToolMessage) for m in messages):
            return "done"
        return Reply(calls=(("c1", "slow", {"n": 1}), ("c2", "fast", {"n": 2})))

    store, state = RunStore(tmp_path / "runs"), RunState()
    agent = Agent(FunctionModel(model), tools=[slow, fast])
    first = run_sync(agent, "read both", state=state, store=store, signal=signal)
    assert first.status == "interrupted"
    assert list(_results(store.load(state.run_id))) == ["c2"]  # what finished is kept; c1 waits
    hang[0] = False
    result = run_sync(agent, state=store.load(state.run_id), store=store)
    assert result.status == "completed"
    assert [m.call_id for m in seen[-1] if isinstance(m, ToolMessage)] == ["c1", "c2"]
    assert_pairing(store.load(state.run_id).messages)
