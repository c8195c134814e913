"""Budget, accounting, fallback and compaction attacked from outside (session sixteen).

A model here answers with the usage it is given (or writes all it is allowed), so a reply the run
was billed for and did not count shows as a cost below what the provider was paid.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from tether import Agent, run_stream, tool
from tether.errors import AuthError, BadRequestError, ConfigError, ContextOverflowError, RetryableError
from tether.events import Compaction, Event, ToolResultEvent
from tether.harness.agent import Stop
from tether.harness.middleware import Middleware, SummarizeByMessageCount, ToolCallLimitPerTurn
from tether.harness.retry import RetryPolicy
from tether.messages import AssistantMessage, TextPart, UserMessage, text_of
from tether.providers.base import ModelRequest, ModelResponse
from tether.providers.scripted import Reply
from tether.testing import FunctionModel
from tether.tokens import estimate_tokens, message_tokens
from tether.usage import Price, Usage

PRICE = Price(input=1.0, output=1.0)  # dollars per million tokens: 1,000 + 1,000 tokens are $0.002


def collect(agent: Agent, prompt: str = "hi") -> list[Event]:
    async def go() -> list[Event]:
        return [e async for e in run_stream(agent, prompt)]

    return asyncio.run(go())


def billed(messages: list[Any], request: ModelRequest) -> AssistantMessage:
    """A reply that writes all it is allowed, and says so in its usage."""
    written = request.max_tokens or 1000
    return AssistantMessage(
        content=(TextPart(text="answer"),),
        finish_reason="stop",
        usage=Usage(prompt_tokens=1000, completion_tokens=written),
    )


class BlockAfterReply(Middleware):
    """A policy that reads the reply and ends the run instead of letting it through."""

    async def wrap_model_call(self, ctx: Any, request: ModelRequest, call_next: Any) -> ModelResponse | Stop:
        await call_next(request)
        return Stop("failed", "blocked by policy")


class AskTwice(Middleware):
    """A policy that asks the model again and keeps the second answer (a self-check, a retry on a
    poor answer): both requests were sent, and both are billed."""

    async def wrap_model_call(self, ctx: Any, request: ModelRequest, call_next: Any) -> ModelResponse | Stop:
        first = await call_next(request)
        if isinstance(first, Stop):
            return first
        return await call_next(request)  # type: ignore[no-any-return]


def test_a_reply_a_middleware_stops_the_run_after_is_charged() -> None:
    """A ``wrap_model_call`` that read the reply and returned a Stop (a documented way to end a
    run) left the reply the provider billed out of the run's cost: $0 and no tokens."""
    model = FunctionModel(billed, price=PRICE)
    result = collect(Agent(model, max_tokens=1000, middleware=[BlockAfterReply()], stream=False))[-1].result
    assert (result.status, result.reason) == ("failed", "blocked by policy")
    assert len(model.requests) == 1
    assert (result.usage.prompt_tokens, result.usage.completion_tokens) == (1000, 1000)
    assert result.cost_usd == pytest.approx(0.002)


@pytest.mark.parametrize("stream", [True, False])
def test_a_middleware_that_asks_twice_is_charged_for_both_replies(stream: bool) -> None:
    """Two requests went out in one turn; the run counted only the reply it recorded."""
    model = FunctionModel(billed, price=PRICE)
    result = collect(Agent(model, max_tokens=1000, middleware=[AskTwice()], stream=stream))[-1].result
    assert result.status == "completed" and len(model.requests) == 2
    assert (result.usage.prompt_tokens, result.usage.completion_tokens) == (2000, 2000)
    assert result.cost_usd == pytest.approx(0.004)


def test_a_second_ask_in_one_turn_is_planned_inside_the_budget() -> None:
    """The turn's plan priced one request; the second went out with the same limit, unplanned, and
    a run with a budget of $0.0035 ended at $0.004. Now the second is allowed what the budget has
    left after the first reply, or not sent (``budget_exceeded``) when that is too little."""
    model = FunctionModel(billed, price=PRICE)
    agent = Agent(model, max_tokens=1000, max_budget_usd=0.0035, middleware=[AskTwice()], stream=False)
    result = collect(agent)[-1].result
    assert result.cost_usd is not None and result.cost_usd <= 0.0035
    assert len(model.requests) == 2 and model.requests[1].max_tokens is not None
    assert model.requests[1].max_tokens < 1000  # lowered to what was left
    assert result.status == "completed"

    too_little = Agent(model, max_tokens=1000, max_budget_usd=0.0021, middleware=[AskTwice()], stream=False)
    model.requests.clear()
    result = collect(too_little)[-1].result
    assert result.status == "budget_exceeded" and len(model.requests) == 1, result.reason
    assert result.cost_usd is not None and 0.0019 < result.cost_usd <= 0.0021


def test_an_unpriced_fallback_is_told_the_fix_that_works_for_a_fallback() -> None:
    """``Agent(price=...)`` prices the primary model only: told to pass it for an unpriced fallback,
    a person who had passed it got the same error again. Now the message names the fallback as such
    and gives ``Agent(prices={name: ...})``, which is then accepted."""
    primary = FunctionModel(billed, price=PRICE)
    fallback = FunctionModel(billed, model_id="other")
    fallback.price = None  # type: ignore[assignment]
    agent = Agent(primary, fallback_models=[fallback], max_budget_usd=1.0, price=PRICE)
    with pytest.raises(ConfigError) as refused:
        collect(agent)
    message = str(refused.value)
    assert "fallback model function/other" in message, message
    assert "Agent(prices={'function/other': Price(" in message and "Agent(price=" not in message, message
    fixed = Agent(
        primary, fallback_models=[fallback], max_budget_usd=1.0, price=PRICE, prices={"function/other": PRICE}
    )
    assert collect(fixed)[-1].result.status == "completed"


def test_a_model_name_one_typo_from_a_priced_one_is_named(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "not-a-real-key")  # resolved before its price is looked up
    agent = Agent("openai/gpt-4.1-mni", max_budget_usd=1.0)
    with pytest.raises(ConfigError, match=r"did you mean openai/gpt-4\.1-mini\?"):
        collect(agent)


@tool(read_only=True)
def look(n: int) -> str:
    """Look at item n."""
    return f"seen {n}"


def test_summarize_by_message_count_keeps_the_request_and_the_turns_limits() -> None:
    """``SummarizeByMessageCount`` summarised the person's latest request with the rest (the model
    read a paraphrase of it, or nothing), and the replies and results of that request went with it,
    so ``ToolCallLimitPerTurn(limit=5)`` let a sixth, seventh ... fourteenth call of one request run:
    the count started again at zero after each summary. Now its summary is made as compaction's is:
    the request word for word, and the turn's calls recorded for the limits."""
    shown: list[list[Any]] = []

    def model(messages: list[Any], request: ModelRequest) -> Any:
        if not request.tools and "Summarize" in text_of(messages):
            return "summary: looked at some items."
        shown.append(messages)
        n = len(shown)
        return "done" if n > 14 else Reply("", [(f"c{n}", "look", {"n": n})])

    middleware = [SummarizeByMessageCount(trigger=8, keep=4), ToolCallLimitPerTurn(limit=5)]
    agent = Agent(FunctionModel(model), tools=[look], middleware=middleware, dedupe_read_only=False)
    events = collect(agent, "Look at the items one by one: request #42")
    assert events[-1].result.status == "completed"
    results = [e for e in events if isinstance(e, ToolResultEvent)]
    assert [r.ok for r in results] == [True] * 5 + [False] * 9
    assert any(isinstance(m, UserMessage) and m.summary_turns for m in shown[-1])  # it did summarise
    assert "Look at the items one by one: request #42" in text_of(shown[-1])


@pytest.mark.parametrize("budget", [None, 1.0])
@pytest.mark.parametrize("given", [{"input": 1.0, "output": 2.0}, 0.5])
def test_a_price_that_is_not_a_price_is_refused_before_anything_is_sent(given: Any, budget: float | None) -> None:
    """A price written as the config file writes it (a dict), or as one number, ended every run
    with an unexpected AttributeError at its first call, after the model had answered (and been
    paid) when no budget was set. Now a ConfigError before any request says what to give."""
    model = FunctionModel(billed, price=PRICE)
    with pytest.raises(ConfigError, match=r"not a Price: give tether\.usage\.Price\(input=\.\.\., output=\.\.\.\)"):
        collect(Agent(model, price=given, max_budget_usd=budget))
    fallback = FunctionModel(billed, model_id="other")
    fallback.price = None  # type: ignore[assignment]
    with pytest.raises(ConfigError, match=r"the price of function/other .* Agent\(prices=\{'function/other'"):
        collect(Agent(model, fallback_models=[fallback], prices={"function/other": given}, max_budget_usd=budget))
    assert model.requests == [] and fallback.requests == []


class _Snapshot(FunctionModel):
    """A model asked for by its dated snapshot, as production code pins it."""

    name = "anthropic"


@tool(read_only=True)
def dump(part: int) -> str:
    """A long log."""
    return f"part {part}: " + "log line with some words in it\n" * 10_000  # ~80k tokens by the estimate


def test_a_dated_snapshot_of_a_catalog_model_is_compacted_before_its_window_overflows() -> None:
    """``anthropic/claude-sonnet-4-5-20250929`` had no context window (the catalog knows
    ``claude-sonnet-4-5``), so compaction never ran before the window overflowed: its prompt went
    past 60 % of the 200k window, and on, unchecked. The snapshot now has its model's window (not its
    price, which a budget still asks for: snapshots have been priced differently)."""
    asked: list[int] = []

    def model(messages: list[Any], request: ModelRequest) -> Any:
        if not request.tools:
            return "summary: two parts of the log were read."
        asked.append(len(messages))
        n = len(asked)
        return Reply("", [(f"c{n}", "dump", {"part": n})]) if n <= 2 else "read it all"

    snapshot = _Snapshot(model, model_id="claude-sonnet-4-5-20250929")
    events = collect(Agent(snapshot, tools=[dump]))
    assert events[-1].result.status == "completed"
    compactions = [e for e in events if isinstance(e, Compaction)]
    assert len(compactions) == 1 and compactions[0].tokens_before > 0.6 * 200_000 > compactions[0].tokens_after
    snapshot.price = None  # type: ignore[assignment]  # as a provider that knows none
    with pytest.raises(ConfigError, match="price of anthropic/claude-sonnet-4-5-20250929 is unknown"):
        collect(Agent(snapshot, tools=[dump], max_budget_usd=1.0))


def _failing(model_id: str, error: Exception) -> FunctionModel:
    def fail(messages: list[Any], request: ModelRequest) -> Any:
        raise error

    return FunctionModel(fail, model_id=model_id)


def test_a_fallback_chain_where_every_model_fails_names_each_model() -> None:
    """Three models, each failing its own way: one ``failed`` exit whose reason names all three
    models and why each failed. The model the turn failed on last was not named (its error names
    no model), so with several models of one provider the person could not tell which it was."""
    chain = [
        _failing("primary", RetryableError("HTTP 503: busy")),
        _failing("second", AuthError("authentication failed (HTTP 401)")),
        _failing("third", BadRequestError("HTTP 400: unsupported parameter")),
    ]
    agent = Agent(chain[0], fallback_models=chain[1:], retry=RetryPolicy(max_attempts=2, base_delay_s=0.01))
    events = collect(agent)
    result = events[-1].result
    assert result.status == "failed" and [e.type for e in events].count("fallback") == 2
    reason = result.reason or ""
    assert reason.startswith("HTTP 400: unsupported parameter"), reason
    assert "fallen back from function/primary (HTTP 503: busy" in reason, reason
    assert "then from function/second (authentication failed" in reason, reason
    assert reason.endswith(", to function/third"), reason


@tool
def save(path: str, content: str) -> str:
    """Save a file."""
    return "saved"


def test_an_overflow_a_calls_arguments_cause_names_the_arguments_not_a_small_output() -> None:
    """The model wrote a long file in one call, the arguments filling a small window: the reason
    blamed "the output of save ... about 10 tokens" and said to trim tool outputs, which changes
    nothing. It now names the call's arguments and says to ask for less in one call."""
    window = 3000
    replies: list[int] = []

    def model(messages: list[Any], request: ModelRequest) -> Any:
        if sum(message_tokens(m, estimate_tokens) for m in messages) > window:
            raise ContextOverflowError("prompt too long")
        if not request.tools:
            return "summary"
        replies.append(1)
        content = "lorem ipsum dolor sit amet " * 500  # about 3,400 tokens by the estimate
        return Reply("", [("c1", "save", {"path": "a.txt", "content": content})]) if len(replies) == 1 else "done"

    result = collect(Agent(FunctionModel(model), tools=[save], context_window=window), "write a long file")[-1].result
    reason = result.reason or ""
    assert result.status == "failed" and "the arguments the model wrote for its call to save" in reason, reason
    assert "Ask for less in one call" in reason and "ToolOutputTrimmer" not in reason, reason


def test_a_fallback_that_cannot_be_resolved_is_named_as_the_fallback(monkeypatch: pytest.MonkeyPatch) -> None:
    """A fallback (perhaps from the config file's ``fallback_models``) whose key is not set refused
    the run with "ANTHROPIC_API_KEY is not set" alone, while the person ran an OpenAI model: now
    the error says which entry asked for that key."""
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    monkeypatch.delenv("ANTHROPIC_BASE_URL", raising=False)
    agent = Agent(FunctionModel(billed), fallback_models=["anthropic/claude-haiku-4-5"])
    with pytest.raises(
        ConfigError, match=r"^fallback_models: anthropic/claude-haiku-4-5: ANTHROPIC_API_KEY is not set"
    ):
        collect(agent)


def test_an_unpriced_classifier_model_is_told_the_fix_that_works_for_it(monkeypatch: pytest.MonkeyPatch) -> None:
    """A guardrail's classifier on a model of its own is neither the primary nor a fallback: it was
    told to pass ``Agent(price=...)``, which prices the primary only. Now ``Agent(prices=...)``."""
    from tether.guardrails import Guardrail, ModelClassifier

    monkeypatch.setenv("OPENAI_API_KEY", "not-a-real-key")
    guard = Guardrail(ModelClassifier("be kind", model="openai/gpt-unknown-9"), stages=("input",))
    model = FunctionModel(billed, price=PRICE)
    result = collect(Agent(model, middleware=[guard], max_budget_usd=1.0))[-1].result
    reason = result.reason or ""
    assert result.status == "failed" and model.requests == [], reason
    assert "Agent(prices={'openai/gpt-unknown-9': Price(" in reason and "fallback" not in reason, reason
