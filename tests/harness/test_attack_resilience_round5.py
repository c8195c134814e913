"""Attacks on retries, fallback and the dollar budget across them (round 5).

A provider of one's own (``Agent(model=<Provider>)``), scripted HTTP servers on loopback, and
``FunctionModel``.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest

from tests.providers.test_attack_wire_round2 import (
    CUT,
    WIRES,
    Reply,
    WireServer,
    assert_sound,
    call_delta,
    chunk,
    event,
    run_against,
    text_reply,
)
from tests.providers.test_attack_wire_round2 import PRICE as PRICE_WIRE
from tests.providers.test_attack_wire_round2 import provider as wire_provider
from tether import Agent, CancelSignal, RunStore, run, run_stream, run_sync, tool
from tether.errors import ConfigError, RetryableError
from tether.events import Retry
from tether.harness.middleware import Middleware
from tether.harness.retry import RetryPolicy
from tether.messages import AssistantMessage, TextPart, ToolCallPart
from tether.providers.base import (
    ModelRequest,
    ModelResponse,
    ResponseDone,
    StreamEvent,
    StreamText,
    estimate_usage,
)
from tether.tokens import count_tokens, counter_for, estimate_tokens
from tether.usage import Price, Usage

FAST = RetryPolicy(base_delay_s=0.01, max_delay_s=0.05)
PRICE = Price(input=2.0, output=12.0)
ANSWER = "The timeout is set in config/worker.toml. " * 40


def collect(agent: Agent, prompt: str | None, **kw: Any) -> list[Any]:
    async def go() -> list[Any]:
        return [e async for e in run_stream(agent, prompt, **kw)]

    return asyncio.run(go())


@tool(read_only=True)
def look(n: int) -> str:
    """Look at page n."""
    return f"page {n}: " + "nothing about timeouts here. " * 30


class OwnProvider:
    """A provider of one's own, as ``Agent(model=...)`` accepts: it answers ``ANSWER`` with the
    usage it is given (None: it reports none, as many self-written adapters do)."""

    name = "mine"
    model_id = "m1"

    def __init__(self, usage: Usage | None, *, call_tool: bool = False) -> None:
        self.usage = usage
        self.call_tool = call_tool
        self.calls = 0

    async def complete(self, request: ModelRequest) -> ModelResponse:
        self.calls += 1
        if self.call_tool:  # never done: looks again, and again
            call = ToolCallPart(id=f"c{self.calls}", name="look", arguments=json.dumps({"n": self.calls}))
            message = AssistantMessage(content=(call,), finish_reason="tool_calls", usage=self.usage)
        else:
            message = AssistantMessage(content=(TextPart(text=ANSWER),), finish_reason="stop", usage=self.usage)
        return ModelResponse(message)

    async def stream(self, request: ModelRequest) -> AsyncIterator[StreamEvent]:
        response = await self.complete(request)
        yield StreamText(response.message.text)
        yield ResponseDone(response)

    async def validate_auth(self) -> None:
        return None

    async def aclose(self) -> None:
        return None


# -- usage a provider of one's own reports, or does not ---------------------------------------------


@pytest.mark.parametrize(
    "usage",
    [
        None,  # no usage at all
        Usage(),  # zeros
        Usage(prompt_tokens=-1_000_000, completion_tokens=-1_000_000),  # would pay the budget back
        Usage(prompt_tokens=10**400, completion_tokens=10**30),  # no float can price it
        Usage(prompt_tokens=900, completion_tokens=400, cached_tokens=-(10**7), cache_write_tokens=-(10**7)),
    ],
    ids=["none", "zeros", "negative", "astronomic", "negative-cache"],
)
@pytest.mark.parametrize("stream", [True, False])
def test_a_reply_from_ones_own_provider_is_never_free_and_never_pays_the_budget_back(
    usage: Usage | None, stream: bool
) -> None:
    """The docs: usage a server does not send is estimated, a count no call can have is treated as
    not sent, and "budgets and costs never treat it as free". A provider passed as ``Agent(model=)``
    that left usage out made every reply cost $0 (a budget never stopped it); one that reported
    negative counts made the run's cost negative, refilling the budget."""
    provider = OwnProvider(usage)
    agent = Agent(provider, price=PRICE, max_budget_usd=1.0, stream=stream, retry=FAST)  # type: ignore[arg-type]
    result = run_sync(agent, "Where is the timeout set?")
    assert result.status == "completed", result.reason
    at_least = PRICE.cost(Usage(prompt_tokens=5, completion_tokens=300))  # the answer alone is ~400 tokens
    assert result.cost_usd >= at_least
    assert result.cost_usd < 1.0
    assert result.usage.prompt_tokens > 0 and result.usage.completion_tokens > 0
    assert result.usage.cached_tokens >= 0 and result.usage.cache_write_tokens >= 0
    if usage is None or usage.prompt_tokens <= 0 or usage.prompt_tokens > 2**53:
        assert result.usage.estimated


def test_a_budget_stops_a_provider_that_reports_no_usage() -> None:
    """Without usage the budget must still count each call: a model that keeps calling a tool on a
    provider that reports no usage stops at its budget, not at the turn limit, having paid $0."""
    provider = OwnProvider(None, call_tool=True)
    budget = PRICE.cost(Usage(prompt_tokens=2_000, completion_tokens=500)) * 3  # a few turns' worth
    agent = Agent(provider, tools=[look], price=PRICE, max_budget_usd=budget, max_turns=40, max_tokens=500)  # type: ignore[arg-type]
    result = run_sync(agent, "Where is the timeout set?")
    assert result.status == "budget_exceeded", (result.status, result.turns, result.cost_usd)
    assert 0 < result.cost_usd <= budget
    assert provider.calls < 40


# -- a stream cut inside a tool call's arguments, then retried ---------------------------------------

# What the model wrote before the cut: a long file it was asked to save, about 3,000 tokens.
WRITTEN = json.dumps({"path": "notes.md", "content": "the worker timeout is thirty seconds; " * 400})


def cut_in_arguments(kind: str) -> Reply:
    """A reply that writes a long tool call, in pieces, and is cut before the call ends."""
    pieces = [WRITTEN[i : i + 500] for i in range(0, len(WRITTEN) - 500, 500)]
    if kind == "openai":
        first = call_delta(0, "call_1", "write_note", "")
        return Reply(
            200,
            [
                chunk({"role": "assistant", "content": None}),
                first,
                *[call_delta(0, None, None, p) for p in pieces],
                CUT,
            ],
        )
    message = {
        "id": "m",
        "type": "message",
        "role": "assistant",
        "content": [],
        "model": "c",
        "usage": {"input_tokens": 100, "output_tokens": 1},
    }
    block = {"type": "tool_use", "id": "toolu_1", "name": "write_note", "input": {}}
    deltas = [
        event(
            "content_block_delta",
            {"type": "content_block_delta", "index": 0, "delta": {"type": "input_json_delta", "partial_json": p}},
        )
        for p in pieces
    ]
    return Reply(
        200,
        [
            event("message_start", {"type": "message_start", "message": message}),
            event("content_block_start", {"type": "content_block_start", "index": 0, "content_block": block}),
            *deltas,
            CUT,
        ],
    )


@tool
def write_note(path: str, content: str) -> str:
    """Save a note."""
    WRITES.append(path)
    return "saved"


WRITES: list[str] = []


@pytest.mark.parametrize("kind", WIRES)
def test_a_tool_call_cut_halfway_is_never_run_and_what_it_wrote_is_charged(
    serve: Callable[[list[Reply]], WireServer], tmp_path: Path, kind: str
) -> None:
    """A stream cut inside a tool call's arguments, before anything was shown, is retried (right)
    and the cut call never runs (right); but the provider bills the tokens the model wrote before the
    cut, and tether charged the cut attempt its prompt only: a model that writes long calls on a
    flaky connection spent several times what the run reported, past its budget."""
    WRITES.clear()
    server = serve([cut_in_arguments(kind), text_reply(kind, "Nothing to save after all.")])
    out = run_against(kind, server, tmp_path, "Save a note on the timeout.", tools=[write_note], max_budget_usd=1.0)
    assert_sound(out)
    assert out.result.status == "completed", out.result.reason
    assert WRITES == []  # the half call never ran
    assert len(server.requests) == 2
    written = estimate_tokens(WRITTEN) * 0.8  # what the model wrote before the cut, at least
    assert out.result.cost_usd >= written * PRICE_WIRE.output / 1e6
    assert out.result.usage.estimated


# -- the retry policy ------------------------------------------------------------------------------


def test_many_attempts_keep_waiting_at_most_the_cap() -> None:
    """A policy with many attempts (a flaky local server) waited up to ``max_delay_s``, then at the
    1,025th attempt ``2.0 ** 1024`` raised OverflowError and the run failed "unexpected error"."""
    policy = RetryPolicy(max_attempts=5_000, base_delay_s=0.001, max_delay_s=0.01)
    for attempt in (1, 10, 1_024, 1_025, 4_999):
        wait = policy.delay(attempt, RetryableError("HTTP 503"))
        assert wait is not None and 0 <= wait <= 0.01


@pytest.mark.parametrize("asked", [float("nan"), -3.0])
def test_a_wait_that_is_no_number_of_seconds_is_not_obeyed(asked: float) -> None:
    """A provider of one's own may raise RetryableError(retry_after=...) with what it read: NaN
    failed the run ("asked to wait nan s; more than max_retry_after_s"), a negative one was slept."""
    policy = RetryPolicy(base_delay_s=0.01, max_delay_s=0.05)
    wait = policy.delay(1, RetryableError("HTTP 429", retry_after=asked))
    assert wait is not None and 0 <= wait <= 0.05


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("max_attempts", 0),
        ("max_attempts", 2.5),
        ("max_attempts", True),
        ("base_delay_s", -1.0),
        ("max_delay_s", float("nan")),
        ("jitter", 3.0),
        ("max_retry_after_s", -1.0),
        ("max_retry_after_s", "60"),
    ],
)
def test_a_retry_policy_that_is_no_policy_is_refused_when_made_naming_the_field(field: str, value: Any) -> None:
    """Before, each was taken: max_attempts=0 still tried once, jitter=3 made waits negative, a
    max_retry_after_s of -1 failed every run at its first 429, a string failed it with a TypeError."""
    with pytest.raises(ConfigError, match=f"RetryPolicy: {field} must be"):
        RetryPolicy(**{field: value})
    assert RetryPolicy(max_retry_after_s=float("inf")).max_retry_after_s == float("inf")  # wait as long as asked


@pytest.mark.parametrize("kind", WIRES)
def test_a_cut_attempt_is_charged_no_more_than_the_request_allowed(
    serve: Callable[[list[Reply]], WireServer], tmp_path: Path, kind: str
) -> None:
    """What a cut attempt streamed is counted with tether's estimate, which may exceed what the
    provider can bill: never more than the ``max_tokens`` the request allowed, so the estimate alone
    never takes the run past its budget (the docs: "a run never ends above its budget")."""
    budget = 0.005  # after the prompt, a few hundred output tokens: well under what the cut call streams
    server = serve([cut_in_arguments(kind), text_reply(kind, "Nothing to save after all.")])
    out = run_against(
        kind,
        server,
        tmp_path,
        "Save a note on the timeout.",
        tools=[write_note],
        max_budget_usd=budget,
        min_output_tokens=1,
    )
    assert_sound(out)
    replies = [m for m in out.store.load(out.result.run_id).messages if m.role == "assistant"]
    assert out.result.cost_usd <= budget, (out.result.status, out.result.reason, replies)
    assert out.result.cost_usd > budget / 2  # the cut attempt was charged, up to its max_tokens


def test_no_retry_is_announced_or_waited_for_once_the_budget_cannot_pay_for_it(
    serve: Callable[[list[Reply]], WireServer],
) -> None:
    """A cut attempt that spent what was left: the retry cannot be paid for. Before, the run still
    said "retry 1 ... (waiting N s)", waited (up to max_retry_after_s when the server asked), and
    only then stopped budget_exceeded; a person watching saw a retry that was never going to be sent."""
    server = serve([cut_in_arguments("openai"), text_reply("openai", "Nothing to save after all.")])
    agent = Agent(
        wire_provider("openai", server),
        tools=[write_note],
        price=PRICE_WIRE,
        max_budget_usd=0.005,
        min_output_tokens=1,
        retry=RetryPolicy(base_delay_s=0.2, max_delay_s=0.2),
    )
    events = collect(agent, "Save a note on the timeout.")
    result = events[-1].result
    assert result.status == "budget_exceeded", result.reason
    assert not [e for e in events if isinstance(e, Retry)]
    assert len(server.requests) == 1
    assert 0 < result.cost_usd <= 0.005


# -- fallback models as the Python API takes them ------------------------------------------------


@pytest.mark.parametrize(
    ("fallbacks", "words"),
    [
        ("scripted/plan", "fallback_models is a list of models: write fallback_models=['scripted/plan']"),
        (["scripted/plan", None], "fallback_models: None is neither a model string"),
        ([42], "fallback_models: 42 is neither a model string"),
        (None, "fallback_models is a list of models (got None); [] for none"),
    ],
)
def test_fallback_models_that_are_no_models_are_refused_saying_what_to_write(fallbacks: Any, words: str) -> None:
    """Before: one string was taken letter by letter ("cannot tell which provider serves 's'"), and
    None ended in AttributeError: 'NoneType' object has no attribute 'name', and fallback_models=None
    in TypeError: 'NoneType' object is not iterable."""
    agent = Agent("scripted/hello", fallback_models=fallbacks)
    with pytest.raises(ConfigError) as refused:
        run_sync(agent, "hi")
    assert words in str(refused.value)


@pytest.mark.parametrize("value", [0, -1.0, float("nan"), "5", True])
def test_a_first_token_timeout_that_is_no_timeout_is_refused_before_any_request(value: Any) -> None:
    """Before: 0 or -1 gave up on every request at once, charged each one's prompt, and failed
    "no first token within 0 s (gave up after 4 attempts)"; NaN silently meant no timeout; "5"
    failed the run with "unexpected error: TypeError"."""
    provider = OwnProvider(Usage(prompt_tokens=100, completion_tokens=10))
    agent = Agent(provider, first_token_timeout_s=value, retry=FAST)  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="first_token_timeout_s must be a number of seconds above 0"):
        run_sync(agent, "hi")
    assert provider.calls == 0
    assert run_sync(Agent(provider, first_token_timeout_s=2.5, retry=FAST), "hi").status == "completed"  # type: ignore[arg-type]


# -- Stop before the request went out ----------------------------------------------------------------


class StopWhileChecking(Middleware):
    """A policy that checks each request before it is sent (a slow moderation call, say); the person
    presses Stop while it checks, in ``before_model`` or in ``wrap_model_call`` before ``call_next``."""

    def __init__(self, signal: CancelSignal, hook: str) -> None:
        self.signal, self.hook = signal, hook

    async def _check(self) -> None:
        self.signal.cancel("the person pressed Stop")
        await asyncio.sleep(30)  # cut by the Stop

    async def before_model(self, ctx: Any, request: ModelRequest) -> Any:
        if self.hook == "before_model":
            await self._check()
        return request

    async def wrap_model_call(self, ctx: Any, request: ModelRequest, call_next: Any) -> Any:
        if self.hook == "wrap_model_call":
            await self._check()
        return await call_next(request)


@pytest.mark.parametrize("hook", ["before_model", "wrap_model_call"])
def test_stop_before_the_request_went_out_charges_nothing(hook: str, tmp_path: Path) -> None:
    """The request was never sent (the provider was not called), yet the run was charged its prompt
    (2,600 tokens here, $0.005; a long context on a dear model, dollars) and the charge counted
    against the budget of every resume."""
    signal = CancelSignal()
    provider = OwnProvider(Usage(prompt_tokens=100, completion_tokens=10))
    agent = Agent(
        provider,  # type: ignore[arg-type]
        instructions="Answer from the manual. " * 600,
        price=PRICE,
        max_budget_usd=1.0,
        middleware=[StopWhileChecking(signal, hook)],
    )
    store = RunStore(tmp_path / "runs", fsync=False)
    result = asyncio.run(run(agent, "Where is the timeout set?", signal=signal, store=store))
    assert result.status == "interrupted"
    assert provider.calls == 0
    assert result.cost_usd == 0 and result.usage.prompt_tokens == 0
    saved = store.load(result.run_id)
    assert saved.cost_usd == 0 and saved.call_in_flight is None


class Hangs(OwnProvider):
    """Streams the start of an answer, then nothing more (until Stop)."""

    def __init__(self, signal: CancelSignal) -> None:
        super().__init__(None)
        self.signal = signal

    async def stream(self, request: ModelRequest) -> AsyncIterator[StreamEvent]:
        self.calls += 1
        yield StreamText("The timeout is ")
        self.signal.cancel("the person pressed Stop")
        await asyncio.sleep(30)
        yield ResponseDone(await self.complete(request))  # never reached


def test_a_request_stopped_without_a_budget_is_charged_its_system_prompt_and_tools_too() -> None:
    """Without a budget the note of a request (what a Stop, a cut or a crash charges) counted the
    messages only: a Stop during the first answer of an agent with a 2,600-token system prompt was
    charged 25 prompt tokens, and a crash then counted that as the worst case."""
    signal = CancelSignal()
    agent = Agent(Hangs(signal), instructions="Answer from the manual. " * 600, tools=[look], price=PRICE)  # type: ignore[arg-type]
    result = asyncio.run(run(agent, "Where is the timeout set?", signal=signal))
    assert result.status == "interrupted"
    assert result.usage.prompt_tokens >= 2_000  # the system prompt alone: ~2,600 by BPE, ~3,600 estimated


# -- kill -9 while waiting to retry a call cut halfway ---------------------------------------------------

CUT_CHILD = """
import asyncio, os, signal, sys
from pathlib import Path
from tether import Agent, RunState, RunStore, run_stream, tool
from tether.harness.retry import RetryPolicy
from tether.providers.openai_chat import OpenAIChatProvider
from tether.usage import Price

home, base_url = Path(sys.argv[1]), sys.argv[2]

@tool
def write_note(path: str, content: str) -> str:
    \"\"\"Save a note.\"\"\"
    return "saved"

async def main():
    agent = Agent(OpenAIChatProvider(base_url=base_url, api_key="unused"), tools=[write_note],
                  price=Price(input=2.0, output=10.0), max_budget_usd=1.0, retry=RetryPolicy(base_delay_s=30, max_delay_s=30))
    state = RunState(run_id="run_cut")
    async for event in run_stream(agent, "Save a note on the timeout.", state=state, store=RunStore(home / "runs")):
        if event.type == "retry":  # the cut attempt is over; waiting to ask again: killed here
            os.kill(os.getpid(), signal.SIGKILL)

asyncio.run(main())
"""


def test_kill_9_while_waiting_to_retry_a_call_cut_halfway_counts_it_once(
    serve: Callable[[list[Reply]], WireServer], tmp_path: Path
) -> None:
    """The cut attempt is charged (its prompt and the arguments it wrote) and saved before the
    wait; a kill then leaves no request in flight, and the resumed run pays the cut once, with no
    spent-unknown on top."""
    server = serve([cut_in_arguments("openai"), text_reply("openai", "Nothing to save after all.")])
    killed = subprocess.run(
        [sys.executable, "-c", CUT_CHILD, str(tmp_path), server.url + "/v1"], capture_output=True, text=True, timeout=60
    )
    assert killed.returncode == -9, killed.stderr
    store = RunStore(tmp_path / "runs")
    state = store.load("run_cut")
    assert state.call_in_flight is None
    cut_cost = state.cost_usd
    assert cut_cost >= estimate_tokens(WRITTEN) * 0.8 * PRICE_WIRE.output / 1e6
    agent = Agent(wire_provider("openai", server), tools=[write_note], price=PRICE_WIRE, max_budget_usd=1.0, retry=FAST)
    events = collect(agent, None, state=state, store=store)
    result = events[-1].result
    assert result.status == "completed", result.reason
    assert result.cost_unknown_usd == 0 and "spent_unknown" not in [e.type for e in events]
    assert result.cost_usd == pytest.approx(cut_cost + PRICE_WIRE.cost(Usage(prompt_tokens=100, completion_tokens=10)))
    assert len(server.requests) == 2


# -- a budget and the price of writing the prompt to the cache -------------------------------------------

SONNET = Price(input=3.0, output=15.0, cached_input=0.3, cache_write=3.75)


class WritesItsCache(OwnProvider):
    """As Anthropic answers the first request with tether's cache breakpoints: the whole prompt
    (counted as tether counts it) is written to the cache, billed at ``cache_write``."""

    name, model_id = "openai", "gpt-4.1"  # a model tether counts exactly (its BPE), as it plans

    async def complete(self, request: ModelRequest) -> ModelResponse:
        self.calls += 1
        message = AssistantMessage(content=(TextPart(text="It is in config/worker.toml."),), finish_reason="stop")
        prompt = estimate_usage(request, message, count_tokens).prompt_tokens  # as tether counts it
        usage = Usage(prompt_tokens=prompt, cache_write_tokens=prompt, completion_tokens=100)
        return ModelResponse(message.model_copy(update={"usage": usage}))


def test_a_prompt_written_to_the_cache_never_takes_the_run_past_its_budget() -> None:
    """Anthropic bills a prompt written to the cache at 1.25 times the input rate, and tether's
    breakpoints write the whole prompt on a first request; the budget planned the prompt at the
    input rate, so a tight budget let the call through and the run ended a quarter of the prompt's
    cost above it ($0.086 against $0.072 here)."""
    instructions = "Answer from the manual, citing the page. " * 2_500  # ~20,000 tokens
    provider = WritesItsCache(None)
    prompt = count_tokens(instructions)
    budget = (prompt * SONNET.input + 300 * SONNET.output) / 1e6  # the prompt at the input rate, and 300 out
    agent = Agent(provider, instructions=instructions, price=SONNET, max_budget_usd=budget)  # type: ignore[arg-type]
    result = run_sync(agent, "Where is the timeout set?")
    assert result.cost_usd <= budget, (result.status, result.cost_usd, budget)
    assert result.status == "budget_exceeded" and provider.calls == 0
    roomy = Agent(provider, instructions=instructions, price=SONNET, max_budget_usd=budget * 1.4)  # type: ignore[arg-type]
    result = run_sync(roomy, "Where is the timeout set?")
    assert result.status == "completed" and result.cost_usd <= budget * 1.4


# -- a fallback model counted with its own tokenizer ---------------------------------------------------


class Down(OwnProvider):
    """An OpenAI model whose server answers every request with a 503."""

    name, model_id = "openai", "gpt-4.1"

    async def complete(self, request: ModelRequest) -> ModelResponse:
        self.calls += 1
        raise RetryableError("openai: HTTP 503: the server is overloaded", status=503)


class Claude(OwnProvider):
    """A model tether does not count with OpenAI's BPE: it reports its prompt as tether estimates it
    for such a model (``tether.tokens.counter_for``), which is more than the BPE count."""

    name, model_id = "anthropic", "claude-sonnet-4-5"
    price = Price(input=3.0, output=15.0)

    async def complete(self, request: ModelRequest) -> ModelResponse:
        self.calls += 1
        message = AssistantMessage(content=(TextPart(text="It is in config/worker.toml."),), finish_reason="stop")
        usage = estimate_usage(request, message, counter_for("anthropic/claude-sonnet-4-5"))
        return ModelResponse(message.model_copy(update={"usage": usage.model_copy(update={"estimated": False})}))


def test_after_a_fallback_the_budget_counts_with_the_fallbacks_tokenizer() -> None:
    """The run counted every prompt with the primary's tokenizer for the whole run: fallen back from
    an OpenAI model (exact BPE) to a Claude model (counted by tether's larger estimate, as its
    tokenizer counts more), the budget planned the Claude call with the smaller OpenAI count, let
    it through, and the run ended above its budget."""
    instructions = "Answer from the manual, citing the page. " * 2_500
    fallback = Claude(None)
    budget = (count_tokens(instructions) * 3.0 + 300 * 15.0) / 1e6  # enough by the BPE count only
    agent = Agent(
        Down(None),  # type: ignore[arg-type]
        fallback_models=[fallback],  # type: ignore[list-item]
        instructions=instructions,
        price=Price(input=3.0, output=15.0),
        max_budget_usd=budget,
        retry=RetryPolicy(max_attempts=1),
    )
    result = run_sync(agent, "Where is the timeout set?")
    assert result.cost_usd <= budget, (result.status, result.cost_usd, budget)
    assert result.status == "budget_exceeded" and fallback.calls == 0


class AnswersThenDown(OwnProvider):
    """A free local OpenAI-style model: looks a page up on the first turn (reporting its prompt by
    the BPE), then its server answers every request with a 503."""

    name, model_id = "openai", "gpt-4.1"

    async def complete(self, request: ModelRequest) -> ModelResponse:
        self.calls += 1
        if self.calls > 1:
            raise RetryableError("openai: HTTP 503: the server is overloaded", status=503)
        call = ToolCallPart(id="c1", name="look", arguments=json.dumps({"n": 1}))
        message = AssistantMessage(content=(call,), finish_reason="tool_calls")
        usage = estimate_usage(request, message, count_tokens).model_copy(update={"estimated": False})
        return ModelResponse(message.model_copy(update={"usage": usage}))


def test_after_a_fallback_mid_run_the_history_is_not_planned_by_the_other_models_count() -> None:
    """The next prompt is planned from the provider's count of the previous one: after a fallback,
    that count is the other model's tokenizer's. A Claude fallback was planned on the OpenAI count
    of the long history, let through, and the run ended above its budget."""
    manual = "Answer from the manual, citing the page. " * 2_500
    fallback = Claude(None)
    budget = (count_tokens(manual) * 3.0 + 600 * 15.0) / 1e6  # the turn after the look-up, by the BPE count
    agent = Agent(
        AnswersThenDown(None),  # type: ignore[arg-type]
        fallback_models=[fallback],  # type: ignore[list-item]
        tools=[look],
        price=Price(input=0.0, output=0.0),  # the local model is free: the budget is the fallback's
        max_budget_usd=budget,
        retry=RetryPolicy(max_attempts=1),
    )
    result = run_sync(agent, manual + "\nWhere is the timeout set?")
    assert result.cost_usd <= budget, (result.status, result.cost_usd, budget)
    assert result.status == "budget_exceeded" and fallback.calls == 0


@pytest.mark.parametrize("retry", [None, 3, {"max_attempts": 2}])
def test_a_retry_that_is_no_policy_is_refused_before_any_request(retry: Any) -> None:
    """Before, it was read only at the first provider error: Agent(retry=None), meant as "no
    retries", ran until a 503 and then failed "unexpected error: AttributeError: 'NoneType' object
    has no attribute 'delay'"."""
    provider = Down(None)
    with pytest.raises(ConfigError, match=r"retry must be a RetryPolicy .*RetryPolicy\(max_attempts=1\)"):
        run_sync(Agent(provider, retry=retry), "hi")  # type: ignore[arg-type]
    assert provider.calls == 0
