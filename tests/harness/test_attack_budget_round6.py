"""The promise "stays inside a budget in dollars" attacked (round six): what an MCP server's
sampling requests (a completion it asks tether's model for, during one of its tool calls) cost the
run. A hostile server can ask ten times a call, declare its tools read-only so that they run side by
side, and ask for the dearest model it can: none of that may take the run past its budget, or leave
a cost the provider billed out of the run's.

The model is a named endpoint on a scripted server on loopback, priced only in config.toml (as a
local or OpenAI-compatible model is), at prices high enough that each request's cost shows.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import mcp_types as types
import pytest

from tether.cancel import CancelSignal
from tether.config import Settings, load_settings
from tether.connectors._client_side import Asker, ClientSide
from tether.harness.state import CallInFlight, RunState
from tether.testing import ScriptedServer
from tether.tools.base import ToolContext
from tether.usage import Price

PRICE = Price(input=100.0, output=400.0)  # dollars per million tokens: a request of 100 tokens is ~$0.04 at worst


@pytest.fixture(scope="module")
def server() -> Iterator[ScriptedServer]:
    with ScriptedServer() as s:
        yield s


@pytest.fixture
def settings(server: ScriptedServer, tmp_path: Path) -> Settings:
    (tmp_path / "config.toml").write_text(
        f'[endpoints.local]\nkind = "openai"\nbase_url = "{server.base_url}"\nmodels = ["hello"]\n\n'
        f'[endpoints.other]\nkind = "openai"\nbase_url = "{server.base_url}"\nmodels = ["hello"]\n\n'
        f'[models."local/hello"]\ninput = {PRICE.input}\noutput = {PRICE.output}\n'
    )
    return load_settings(tmp_path)


def request(text: str = "Say hi", max_tokens: int = 100) -> types.CreateMessageRequestParams:
    message = types.SamplingMessage(role="user", content=types.TextContent(type="text", text=text))
    return types.CreateMessageRequestParams(messages=[message], max_tokens=max_tokens)


def side(settings: Settings, name: str = "srv", model: str = "local/hello") -> ClientSide:
    return ClientSide(name, {"sampling": "allow", "sampling_model": model}, Asker(), settings=settings)


def call(s: ClientSide, state: RunState, call_id: str, budget: float | None, **extra: Any) -> ToolContext:
    ctx = ToolContext(
        cwd=Path("."), signal=CancelSignal(), state=state, budget_left_usd=budget, call_id=call_id, **extra
    )
    s.begin(ctx, "tool")
    return ctx


def answered(results: list[Any]) -> int:
    return sum(isinstance(r, types.CreateMessageResult) for r in results)


def test_a_model_priced_in_config_is_charged_and_checked_against_the_budget(
    server: ScriptedServer, settings: Settings
) -> None:
    """Was: the price was looked up in the catalog only, so a model priced in config.toml had none:
    a request that could cost $0.04 was sent with $0.01 left, three times, and the run's cost stayed
    $0.00 while the server billed each one."""
    s, state = side(settings), RunState()
    call(s, state, "c1", 0.01)
    before = len(server.received)
    results = [asyncio.run(s.sampling(request())) for _ in range(3)]
    assert answered(results) == 0, results
    assert all("more than the $0.010000 left of the run's budget" in r.message for r in results)
    assert len(server.received) == before and state.cost_usd == 0.0  # nothing was sent
    s.end(s.calls[0])

    state = RunState()  # a budget that pays for it: the run is charged what the server reported
    call(s, state, "c2", 1.0)
    assert answered([asyncio.run(s.sampling(request()))]) == 1
    assert state.usage.completion_tokens > 0
    assert state.cost_usd == pytest.approx(PRICE.cost(state.usage))


def test_a_model_of_no_known_price_is_refused_under_a_budget_and_makes_the_cost_unknown_without(
    server: ScriptedServer, settings: Settings
) -> None:
    """Law 6: an unknown price with a budget is a clear configuration error, never a silent zero.
    Was: sent, and charged $0.00; without a budget the run's cost read as known and too low."""
    s, state = side(settings, model="other/hello"), RunState()
    call(s, state, "c1", 5.0)
    before = len(server.received)
    refused = asyncio.run(s.sampling(request()))
    assert isinstance(refused, types.ErrorData)
    assert "price of other/hello is unknown" in refused.message and '[models."other/hello"]' in refused.message
    assert len(server.received) == before and state.cost_usd == 0.0
    s.end(s.calls[0])

    state = RunState()
    call(s, state, "c2", None)
    assert answered([asyncio.run(s.sampling(request()))]) == 1
    assert state.usage.completion_tokens > 0 and state.unpriced_models == ["other/hello"]
    assert state.result().cost_usd is None  # reported unknown, not as the $0.00 it was not


def test_calls_of_two_servers_side_by_side_share_the_budget_left(settings: Settings) -> None:
    """Two servers' read-only tools run side by side, each given the budget left when it started.
    Was: each counted only its own requests against that snapshot, so together they spent nearly
    twice the budget ($0.12 of $0.10 here)."""
    a, b, state = side(settings, "a"), side(settings, "b"), RunState()
    call(a, state, "c1", 0.10)
    call(b, state, "c2", 0.10)
    results = []
    for _ in range(10):  # taking turns: each alone would make eight requests
        results += [asyncio.run(a.sampling(request())), asyncio.run(b.sampling(request()))]
    assert answered(results) >= 8  # the budget was used, not refused from the start
    assert 0 < state.cost_usd <= 0.10


def test_requests_sent_at_once_never_take_the_run_past_its_budget(settings: Settings) -> None:
    """Requests of two servers sent at the same time: each checked before the other was charged.
    Each fits alone ($0.04 at most, $0.05 left); together they may not pass $0.05."""
    a, b, state = side(settings, "a"), side(settings, "b"), RunState()
    call(a, state, "c1", 0.05)
    call(b, state, "c2", 0.05)

    async def both() -> list[Any]:
        return list(await asyncio.gather(a.sampling(request()), b.sampling(request())))

    results = asyncio.run(both())
    assert answered(results) == 1, results
    refused = next(r for r in results if isinstance(r, types.ErrorData))
    assert "left of the run's budget" in refused.message
    assert 0 < state.cost_usd <= 0.05 and state.call_in_flight is None


def test_a_request_out_is_saved_before_it_is_sent_so_a_kill_counts_it(settings: Settings) -> None:
    """Was: nothing of a sampling request was saved while it was out: a process killed then had
    paid for it and a resume counted nothing (law 6: a request is noted before it is sent)."""
    s, state = side(settings), RunState()
    saved: list[tuple[bool, CallInFlight | None]] = []
    call(s, state, "c1", 1.0, on_save=lambda durable: saved.append((durable, state.call_in_flight)))
    assert answered([asyncio.run(s.sampling(request()))]) == 1
    notes = [note for durable, note in saved if durable and note is not None]
    assert notes and notes[0].model == "local/hello"
    assert notes[0].max_cost_usd == pytest.approx(PRICE.worst_case(notes[0].prompt_tokens, 100))
    assert notes[0].prompt_tokens >= state.usage.prompt_tokens  # what the server counted, markers too
    assert notes[0].max_cost_usd >= state.cost_usd > 0  # its worst case bounds what it cost
    assert state.call_in_flight is None  # over: charged, the note gone


def test_a_request_stopped_while_out_is_charged_as_the_whole_answer(
    server: ScriptedServer, settings: Settings, held_stalls: threading.Event
) -> None:
    """Stop while the request is out: the server goes on writing (and billing) a reply no one
    reads, so it counts as its prompt and all its max_tokens, as a turn's reply not streamed does.
    Was: it cost nothing."""
    s, state = side(settings), RunState()
    call(s, state, "c1", 1.0)
    # Stop comes once the server has read the request, and the reply only after Stop, not a second
    # after it was sent (a pause a loaded machine may outlast).
    server.set_faults(["stall:60"])

    async def stopped() -> None:
        task = asyncio.ensure_future(s.sampling(request()))
        deadline = time.monotonic() + 30  # a hang guard only
        while not server.received and time.monotonic() < deadline:  # the request is out
            await asyncio.sleep(0.01)
        assert state.call_in_flight is not None
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(stopped())
    assert state.call_in_flight is None
    assert state.usage.completion_tokens == 100 and state.usage.estimated
    assert state.cost_usd == pytest.approx(PRICE.cost(state.usage)) and state.cost_usd > 0


# --- a call besides the turns: a guardrail's verdict, priced by its whole prompt ---------------------


@pytest.mark.parametrize("budget", [0.04, 0.05, 0.06])
def test_a_verdicts_prompt_is_counted_whole_so_it_never_takes_the_run_past_its_budget(budget: float) -> None:
    """A call besides the turns (here a guardrail's verdict on a call's arguments) was priced by its
    messages' text and system prompt only: the verdict's schema and the markers, which the server
    counts too, were ~80 tokens more, and a judge that wrote all it was allowed ended the run at
    $0.048 of $0.04 ($0.063 of $0.06 when its own max_tokens was not even lowered)."""
    from tether import Agent, run_sync, tool
    from tether.guardrails import Guardrail, ModelClassifier
    from tether.messages import AssistantMessage, TextPart, ToolMessage
    from tether.providers.base import estimate_usage
    from tether.testing import FunctionModel, Reply
    from tether.tokens import count_tokens

    @tool(read_only=True)
    def fetch(url: str) -> str:
        """Fetch a page."""
        return "a page"

    def lead(messages: list[Any], request: Any) -> Reply | str:
        if any(isinstance(m, ToolMessage) for m in messages):
            return "done"
        return Reply(calls=(("c1", "fetch", {"url": "https://x.example/" + "a" * 200}),))

    asked: list[int] = []

    def judge(messages: list[Any], request: Any) -> AssistantMessage:
        # Writes all it is allowed, and reports the prompt as a server counts it: schema included.
        reply = AssistantMessage(
            content=(TextPart(text='{"rationale": "a page", "score": 1.0, "category": "ok"}'),), finish_reason="stop"
        )
        usage = estimate_usage(request, reply, count_tokens)
        asked.append(request.max_tokens)
        return reply.model_copy(update={"usage": usage.model_copy(update={"completion_tokens": request.max_tokens})})

    dear = FunctionModel(judge, model_id="judge", price=Price(input=100.0, output=100.0))
    guard = Guardrail(ModelClassifier("Allow fetching public pages.", model=dear), stages=("tool_args",))
    cheap = FunctionModel(lead, price=Price(input=0.01, output=0.01))
    result = run_sync(Agent(cheap, tools=[fetch], middleware=[guard], max_budget_usd=budget), "go")
    assert result.cost_usd is not None and result.cost_usd <= budget, (result.status, result.cost_usd)
    if budget >= 0.05:
        assert asked and result.cost_usd > budget * 0.9  # the verdict was asked, and the budget used


@pytest.mark.parametrize("budget", [0.15, 0.17])
def test_a_verdict_from_another_kind_of_model_is_counted_with_its_tokenizer(budget: float) -> None:
    """The run's model is an OpenAI one (counted with its exact BPE); the judge is a Claude model,
    whose tokenizer counts more (tether's estimate for it). The verdict's prompt was counted with the
    run's BPE (841 tokens of the 1,200 the judge's own count makes of the text judged), and the run
    ended at $0.178 of $0.15 and of $0.17."""
    from tether import Agent, run_sync, tool
    from tether.guardrails import Guardrail, ModelClassifier
    from tether.messages import AssistantMessage, TextPart, ToolMessage
    from tether.providers.base import estimate_usage
    from tether.testing import FunctionModel, Reply
    from tether.tokens import counter_for

    text = "Please summarise the quarterly report on the northern warehouses, with figures. " * 60

    @tool(read_only=True)
    def post(text: str) -> str:
        """Post a note."""
        return "posted"

    class GPT(FunctionModel):
        name = "openai"

    class Claude(FunctionModel):
        name = "anthropic"

    def lead(messages: list[Any], request: Any) -> Reply | str:
        if any(isinstance(m, ToolMessage) for m in messages):
            return "done"
        return Reply(calls=(("c1", "post", {"text": text}),))

    asked: list[int] = []

    def judge(messages: list[Any], request: Any) -> AssistantMessage:
        reply = AssistantMessage(
            content=(TextPart(text='{"rationale": "a note", "score": 1.0, "category": "ok"}'),), finish_reason="stop"
        )
        usage = estimate_usage(request, reply, counter_for("anthropic/claude-sonnet-4-5"))  # as it counts
        asked.append(request.max_tokens)
        return reply.model_copy(update={"usage": usage.model_copy(update={"completion_tokens": request.max_tokens})})

    dear = Claude(judge, model_id="claude-sonnet-4-5", price=Price(input=100.0, output=100.0))
    guard = Guardrail(ModelClassifier("Allow posting notes.", model=dear), stages=("tool_args",))
    main = GPT(lead, model_id="gpt-4.1", price=Price(input=0.01, output=0.01))
    result = run_sync(Agent(main, tools=[post], middleware=[guard], max_budget_usd=budget), "go")
    assert result.cost_usd is not None and result.cost_usd <= budget, (result.status, result.cost_usd)
    if budget >= 0.17:
        assert asked  # the verdict was asked, with what the budget could pay for


# --- the rate a prompt token is billed at is the provider's choice -----------------------------------


@pytest.mark.parametrize("budget", [0.005, 0.05])
def test_a_cached_rate_above_the_input_rate_still_bounds_the_call(budget: float) -> None:
    """A rate table whose cached rate is the highest (Claude's cache-write price, 3.75, written as
    ``cached_input`` beside an input of 3): the provider reports which prompt tokens it read from its
    cache, so a call planned at the input rate ended the run at $0.031 of $0.005 when it said all."""
    from tether import Agent, run_sync
    from tether.messages import AssistantMessage, TextPart
    from tether.providers.base import estimate_usage
    from tether.testing import FunctionModel
    from tether.tokens import count_tokens

    price = Price(input=1.0, output=1.0, cached_input=50.0)

    def model(messages: list[Any], request: Any) -> AssistantMessage:
        reply = AssistantMessage(content=(TextPart(text="ok " * 20),), finish_reason="stop")
        usage = estimate_usage(request, reply, count_tokens)
        return reply.model_copy(update={"usage": usage.model_copy(update={"cached_tokens": usage.prompt_tokens})})

    agent = Agent(FunctionModel(model, price=price), instructions="Be brief. " * 200, max_budget_usd=budget)
    result = run_sync(agent, "hi")
    assert result.cost_usd is not None and result.cost_usd <= budget, (result.status, result.cost_usd)
    assert result.status == ("budget_exceeded" if budget < 0.03 else "completed")


# --- a reply's own count is the provider's word; what goes back in the next prompt is the reply ----


def test_a_reply_counted_short_by_its_server_is_still_planned_whole_in_the_next_prompt() -> None:
    """A server that reported a 20,000-token reply as 1 completion token (usage per chunk, not in
    all): the next prompt was planned from the count, without the reply, let through, and the run
    ended at $0.21 of a $0.05 budget when the server counted that prompt honestly."""
    from tether import Agent, run_sync, tool
    from tether.messages import AssistantMessage, TextPart, ToolCallPart, ToolMessage
    from tether.testing import FunctionModel
    from tether.usage import Usage

    @tool(read_only=True)
    def look(n: int) -> str:
        """Look."""
        return "seen"

    def model(messages: list[Any], request: Any) -> AssistantMessage | str:
        if not any(isinstance(m, ToolMessage) for m in messages):
            text = "The plan, step by step: " + "we check every valve and log the reading. " * 2000
            call = ToolCallPart(id="c1", name="look", arguments='{"n": 1}')
            usage = Usage(prompt_tokens=120, completion_tokens=1)
            return AssistantMessage(content=(TextPart(text=text), call), finish_reason="tool_calls", usage=usage)
        return "done"  # counted as it is: the whole prompt

    price = Price(input=10.0, output=10.0)
    result = run_sync(Agent(FunctionModel(model, price=price), tools=[look], max_budget_usd=0.05), "go")
    assert result.cost_usd is not None and result.cost_usd <= 0.05, (result.status, result.cost_usd)
    assert result.status == "budget_exceeded" and "cannot pay for another call" in (result.reason or "")


# --- a budget meant as "no limit" --------------------------------------------------------------------


@pytest.mark.parametrize("budget", [1e308, 1e303])
def test_a_budget_past_a_floats_range_in_micro_dollars_is_no_error(budget: float) -> None:
    """``max_budget_usd = 1e308`` (finite, so allowed: a person's "no limit") ended every run
    ``failed``, "unexpected error: ValueError: cannot convert float NaN to integer": the budget in
    millionths of a dollar is past a float's range, and its floor division NaN."""
    from tether import Agent, run_sync

    result = run_sync(Agent("scripted/hello", max_budget_usd=budget), "hi")
    assert result.status == "completed", result.reason
    assert result.cost_usd is not None and 0 < result.cost_usd < 0.01


def test_sampling_leaves_the_run_what_it_keeps_for_its_own_answer(settings: Settings) -> None:
    """A server that asks until the budget is gone left the run unable to answer (it stopped
    budget_exceeded with the server's completions paid for and nothing for the person); it now keeps
    what the run reserves for its own next call, as a sub-agent's carve does."""
    s, state = side(settings), RunState()
    call(s, state, "c1", 0.10, reserve=lambda: 0.05)
    results = [asyncio.run(s.sampling(request())) for _ in range(10)]
    assert answered(results) >= 1
    assert 0 < state.cost_usd <= 0.05
    refused = [r for r in results if isinstance(r, types.ErrorData)]
    assert refused and "it keeps $0.050000 for its own answer" in refused[0].message
