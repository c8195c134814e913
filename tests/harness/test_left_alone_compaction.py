"""Compaction and cost accounting defects earlier rounds left alone: an overflow with compaction
off, the ``compaction`` event's measure, and what a stopped reply not streamed is charged.

FunctionModel, a provider of one's own, and the scripted model over a real loopback HTTP server.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest

from tests.conftest import assert_pairing
from tests.conftest import scripted_openai as openai
from tests.harness.test_attack_resilience_round3 import PRICE, collect, is_summary_request, pages_read, read_page
from tether import Agent, CancelSignal, RunState, run, run_stream, run_sync
from tether.errors import ContextOverflowError
from tether.harness.state import TRIMMED
from tether.messages import AssistantMessage, Message, TextPart, ToolMessage, UserMessage, text_of
from tether.providers.base import ModelRequest, ModelResponse, StreamEvent
from tether.providers.scripted import Reply
from tether.testing import FunctionModel, ScriptedServer
from tether.usage import Usage

# -- compaction=False and a provider that says the context is full ----------------------------------


class OverflowingReader:
    """Reads ``pages`` pages, one a turn, then answers; the provider says the context is full when
    it is asked for page ``overflow_at`` (every time, or ``once``). Counts the summaries asked for.
    ``reported``: the prompt tokens each reply says it took (None: counted)."""

    def __init__(self, overflow_at: int, *, once: bool = False, pages: int = 6, reported: int | None = None) -> None:
        self.overflow_at, self.once, self.pages, self.reported = overflow_at, once, pages, reported
        self.summaries = self.overflows = 0

    def __call__(self, messages: list[Message], request: ModelRequest) -> Any:
        if is_summary_request(messages):
            self.summaries += 1
            return "The person asked to read the manual; pages read so far: " + ", ".join(
                str(n) for n in pages_read(text_of(messages))
            )
        read = pages_read(text_of(messages))
        nxt = max(read) + 1 if read else 0
        if nxt == self.overflow_at and not (self.once and self.overflows):
            self.overflows += 1
            raise ContextOverflowError("This model's maximum context length is 8192 tokens (context_length_exceeded)")
        reply = Reply(calls=((f"c{nxt}", "read_page", {"n": nxt}),)) if nxt < self.pages else Reply(text="read all")
        if self.reported is None:
            return reply
        message = FunctionModel(lambda m, r: reply)._to_message(reply)
        return message.model_copy(update={"usage": Usage(prompt_tokens=self.reported, completion_tokens=20)})


def test_an_overflow_with_compaction_off_fails_at_once_without_a_summary_or_a_trim() -> None:
    """Before, ``Agent(compaction=False)`` still asked the model for a summary (paid for, and a lossy
    rewrite of the transcript the person had turned compaction off to keep) when the provider said
    the context was full. Now the run fails at once, the transcript as it was, saying the context
    is full and what to change."""
    model = OverflowingReader(overflow_at=3)
    provider = FunctionModel(model)
    state = RunState()
    result = run_sync(Agent(provider, tools=[read_page], compaction=False), "read the manual", state=state)
    assert model.summaries == 0
    assert result.status == "failed"
    reason = result.reason or ""
    assert "context_length_exceeded" in reason and "compaction is off" in reason
    assert "compaction=True" in reason and "ContextOverflowCleanup" in reason
    assert len(provider.requests) == 4  # pages 0-2, then the request that overflowed: not sent again
    assert not any(isinstance(m, UserMessage) and m.summary_turns for m in state.messages)
    assert not any(isinstance(m, ToolMessage) and m.text == TRIMMED for m in state.messages)
    assert sorted(pages_read(text_of(state.messages))) == [0, 1, 2]
    assert_pairing(state.messages)


def test_an_overflow_over_the_wire_with_compaction_off_sends_no_summary_request() -> None:
    """The same through the Chat Completions wire: the server's ``context_length_exceeded`` is
    answered by no further request (before: a summary request, then the turn again)."""
    with ScriptedServer() as server:
        state = RunState()
        assert run_sync(Agent(openai(server, "hello")), "hi", state=state).status == "completed"
        server.set_faults([], context_window=10)  # every prompt is now past the server's window
        result = run_sync(Agent(openai(server, "hello"), compaction=False), "and again?", state=state)
        sent = server.received
    assert result.status == "failed" and "compaction is off" in (result.reason or "")
    assert len(sent) == 1 and "<transcript>" not in str(sent[0][1])


def test_an_overflow_with_compaction_on_still_compacts_and_retries() -> None:
    model = OverflowingReader(overflow_at=3, once=True)
    events = collect(Agent(FunctionModel(model), tools=[read_page]), "read the manual")
    assert events[-1].result.status == "completed", events[-1].result.reason
    assert model.summaries == 1 and [e.method for e in events if e.type == "compaction"] == ["summary"]


# -- the compaction event: one measure before and after ---------------------------------------------


@pytest.mark.parametrize("reported", [10, 60_000])
def test_a_compaction_events_before_and_after_are_one_measure(reported: int) -> None:
    """Before, ``tokens_before`` started from the provider's own count of the last prompt and
    ``tokens_after`` was tether's count: a provider whose count differs from tether's (another
    tokenizer, cached tokens left out, a provider of one's own) made them incomparable; one that
    reported 10 tokens showed a compaction that "grew" the context from ~500 tokens to ~900. Now
    both are tether's count of the whole prompt, whatever the provider reports."""
    honest = collect(Agent(FunctionModel(OverflowingReader(4, once=True)), tools=[read_page]), "read the manual")
    model = OverflowingReader(4, once=True, reported=reported)
    other = collect(Agent(FunctionModel(model), tools=[read_page]), "read the manual")
    assert honest[-1].result.status == other[-1].result.status == "completed"
    compactions = [e for e in other if e.type == "compaction"]
    assert len(compactions) == 1 and compactions[0].tokens_after < compactions[0].tokens_before
    assert [(e.tokens_before, e.tokens_after) for e in honest if e.type == "compaction"] == [
        (e.tokens_before, e.tokens_after) for e in compactions
    ]


# -- Stop while a reply not streamed is on its way ----------------------------------------------------


class StopsWhileAnswering:
    """A provider of one's own that the person stops while it answers: streamed, after the start of
    the answer; not streamed, while the whole answer is being written. Records the requests."""

    name = "mine"
    model_id = "m1"

    def __init__(self, signal: CancelSignal) -> None:
        self.signal = signal
        self.requests: list[ModelRequest] = []

    async def complete(self, request: ModelRequest) -> ModelResponse:
        self.requests.append(request)
        self.signal.cancel("the person pressed Stop")
        await asyncio.sleep(30)  # cut by the Stop
        raise AssertionError("not reached")

    async def stream(self, request: ModelRequest) -> AsyncIterator[StreamEvent]:
        from tether.providers.base import StreamText

        self.requests.append(request)
        yield StreamText("The timeout is ")
        self.signal.cancel("the person pressed Stop")
        await asyncio.sleep(30)

    async def validate_auth(self) -> None:
        return None

    async def aclose(self) -> None:
        return None


@pytest.mark.parametrize("budget", [None, 0.005])
def test_a_stopped_reply_not_streamed_is_charged_as_the_whole_answer_the_server_may_bill(budget: float | None) -> None:
    """Before, a request not streamed that Stop abandoned was charged its prompt only, as if the
    server had written nothing: it goes on writing (and billing) the answer nobody reads, and a
    budget was overrun by stopped requests. Now it is charged as its prompt and the whole of the
    output it allowed (marked estimated), as a reply given up at ``reply_timeout_s`` is, and a
    budget still holds: the request's ``max_tokens`` was sized so that this worst case fits."""
    signal = CancelSignal()
    provider = StopsWhileAnswering(signal)
    agent = Agent(provider, stream=False, price=PRICE, max_tokens=1000, max_budget_usd=budget)  # type: ignore[arg-type]
    result = asyncio.run(run(agent, "Where is the timeout set?", signal=signal))
    assert result.status == "interrupted"
    [request] = provider.requests
    assert request.max_tokens is not None and 0 < request.max_tokens <= 1000
    assert result.usage.completion_tokens == request.max_tokens and result.usage.estimated
    assert result.usage.prompt_tokens > 0
    assert result.cost_usd == pytest.approx(PRICE.cost(result.usage))
    if budget is not None:
        assert result.cost_usd <= budget


def test_a_stopped_streamed_reply_is_still_charged_as_far_as_it_streamed() -> None:
    signal = CancelSignal()
    agent = Agent(StopsWhileAnswering(signal), price=PRICE, max_tokens=1000)  # type: ignore[arg-type]
    result = asyncio.run(run(agent, "Where is the timeout set?", signal=signal))
    assert result.status == "interrupted"
    assert 0 < result.usage.completion_tokens < 20 and result.usage.estimated


class SummaryNeverComes(FunctionModel):
    """Reads pages (compaction comes at a 3,000-token window); a summary it is asked for, not
    streamed, never comes back: the person presses Stop (``stop``), or it just hangs."""

    def __init__(self, signal: CancelSignal | None) -> None:
        super().__init__(self.reply)
        self.signal = signal
        self.summary_max_tokens: list[int] = []

    def reply(self, messages: list[Message], request: ModelRequest) -> Any:
        read = pages_read(text_of(messages))
        nxt = max(read) + 1 if read else 0
        return Reply(calls=((f"c{nxt}", "read_page", {"n": nxt}),)) if nxt < 8 else f"read {len(read)} pages"

    async def complete(self, request: ModelRequest) -> ModelResponse:
        if is_summary_request(list(request.messages)):
            self.summary_max_tokens.append(request.max_tokens or 0)
            if self.signal is not None:
                self.signal.cancel("the person pressed Stop")
            await asyncio.sleep(30)  # cut by the Stop, or by summary_limit_s
        return await super().complete(request)


@pytest.mark.parametrize("stopped_by", ["Stop", "summary_limit_s"])
def test_a_summary_not_streamed_that_is_stopped_is_charged_as_the_whole_answer(stopped_by: str) -> None:
    """The same for the summary call, not streamed: cut by Stop, or by ``summary_limit_s``, it was
    charged its prompt only. Now its prompt and the whole output it allowed."""
    signal = CancelSignal() if stopped_by == "Stop" else None
    model = SummaryNeverComes(signal)
    agent = Agent(model, tools=[read_page], stream=False, context_window=3000, summary_limit_s=0.2)

    async def go() -> list[Any]:
        return [e async for e in run_stream(agent, "read the manual", signal=signal)]

    events = asyncio.run(go())
    result = events[-1].result
    assert result.status == ("interrupted" if signal is not None else "completed"), result.reason
    assert model.summary_max_tokens and all(n > 0 for n in model.summary_max_tokens)
    turns = sum(e.usage.completion_tokens for e in events if e.type == "turn")
    assert result.usage.completion_tokens == turns + sum(model.summary_max_tokens)
    assert result.usage.estimated


def test_the_replies_not_streamed_are_still_charged_as_reported() -> None:
    """A control: a reply not streamed that comes back is charged what the provider reported."""
    model = FunctionModel(
        lambda m, r: AssistantMessage(
            content=(TextPart(text="It is in config/worker.toml."),),
            usage=Usage(prompt_tokens=321, completion_tokens=12),
        )
    )
    result = run_sync(Agent(model, stream=False, price=PRICE), "Where is the timeout set?")
    assert (result.usage.prompt_tokens, result.usage.completion_tokens) == (321, 12)
    assert not result.usage.estimated


class StopsWhenTheSummaryIsNoted:
    """A run store (``save`` only) during whose save of the summary call's note (its ``max_tokens``
    is the summary's 2,048, a turn's 4,096) the person presses Stop."""

    def __init__(self, signal: CancelSignal) -> None:
        self.signal = signal

    def save(self, state: RunState, *, rewrite: bool = False, durable: bool = True) -> None:
        if state.call_in_flight is not None and state.call_in_flight.max_tokens == 2048:
            self.signal.cancel("the person pressed Stop")


def test_a_summary_call_stopped_before_it_was_sent_is_not_charged() -> None:
    """Before, a Stop heard while the summary call's note was saved charged the call's prompt
    (thousands of tokens of transcript), though nothing was sent. Now it is charged nothing, as
    a turn stopped before it went out is not."""
    signal = CancelSignal()
    model = SummaryNeverComes(None)
    agent = Agent(model, tools=[read_page], context_window=3000)

    async def go() -> list[Any]:
        store = StopsWhenTheSummaryIsNoted(signal)
        return [e async for e in run_stream(agent, "read the manual", signal=signal, store=store)]  # type: ignore[arg-type]

    events = asyncio.run(go())
    result = events[-1].result
    assert result.status == "interrupted"
    assert model.summary_max_tokens == []  # never sent
    turns = [e.usage for e in events if e.type == "turn"]
    assert result.usage.prompt_tokens == sum(u.prompt_tokens for u in turns)
    assert result.usage.completion_tokens == sum(u.completion_tokens for u in turns)
