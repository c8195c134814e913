"""The harness core's promises attacked from outside (a helper's fourth round): Stop at the edges
of a step (a call that finished as Stop came, Stop while an intent or a request note is saved),
prices and budgets that are no numbers, run_sync inside a running event loop, and a run refused
for its configuration that must leave the caller's state as it was.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import json
import math
import threading
import warnings
from typing import Any

import pytest
from pydantic import BaseModel, ConfigDict, Field

from tests.conftest import assert_pairing
from tether import Agent, CancelSignal, RunState, approve, reject, run, run_stream, run_sync, tool
from tether.errors import ConfigError, UserError
from tether.guardrails import Guardrail, ModelClassifier
from tether.harness.extension import Extension
from tether.harness.middleware import Middleware
from tether.messages import AssistantMessage, Message, TextPart, ToolMessage, UserMessage, text_of
from tether.providers.base import ModelRequest
from tether.testing import FunctionModel, Reply
from tether.tools.base import ToolContext, ToolResult
from tether.usage import Price, Usage


def answers_after_tools(*calls: tuple[str, str, dict[str, Any]]) -> FunctionModel:
    """A model that makes ``calls`` in one reply, then answers once it has read results."""

    def fn(messages: list[Message], request: ModelRequest) -> Reply | str:
        if any(isinstance(m, ToolMessage) for m in messages):
            return "done"
        return Reply(calls=calls)

    return FunctionModel(fn)


def events_of(agent: Agent, prompt: str | None, state: RunState) -> list[Any]:
    async def main() -> list[Any]:
        return [e async for e in run_stream(agent, prompt, state=state)]

    return asyncio.run(main())


# --- Stop at the edges of a step ------------------------------------------------------------


def test_stop_as_a_batch_call_ends_records_it_and_starts_nothing_after_it() -> None:
    """Stop fires inside the first of three parallel posts (two at a time): the post that finished
    is recorded with its result, the others never start, every tool_start comes before its
    tool_result, and the resume runs the other two without asking anyone. Before: the two others
    started after the Stop, all three were recorded as cancelled, their tool_start events came
    after their results, and the resume stopped to ask about all three (outcome unknown)."""
    effects: list[int] = []

    @tool(parallel=True)
    async def post(n: int, ctx: ToolContext) -> str:
        """Post message n."""
        effects.append(n)
        if n == 1:
            ctx.signal.cancel("the person pressed Stop")
        return f"posted {n}"

    model = answers_after_tools(*((f"c{n}", "post", {"n": n}) for n in (1, 2, 3)))
    agent = Agent(model, tools=[post], max_parallel_tools=2)
    state = RunState()
    events = events_of(agent, "post three", state)
    assert effects == [1]
    assert state.status == "interrupted" and state.reason == "cancelled: the person pressed Stop"
    results = [m for m in state.messages if isinstance(m, ToolMessage)]
    assert [(m.call_id, m.status, m.text) for m in results] == [("c1", "ok", "posted 1")]
    assert state.intents == {}
    seen: dict[str, list[str]] = {}
    for e in events:
        if e.type in ("tool_start", "tool_result"):
            seen.setdefault(e.call_id, []).append(e.type)
    assert seen == {"c1": ["tool_start", "tool_result"]}
    result = run_sync(agent, state=state)
    assert result.status == "completed", result.reason
    assert effects == [1, 2, 3]
    assert_pairing(state.messages)


def test_a_side_effect_that_finished_as_stop_came_is_recorded_not_asked_about() -> None:
    """A post that returns just as Stop fires: its result is what happened. Before: it was thrown
    away, its intent kept, and the resume stopped with "outcome unknown: post started before the
    process stopped" (the process never stopped; tether had the result in hand)."""
    effects: list[int] = []

    @tool()
    async def post(n: int, ctx: ToolContext) -> str:
        """Post message n."""
        effects.append(n)
        ctx.signal.cancel("the person pressed Stop")
        return f"posted {n}"

    agent = Agent(answers_after_tools(("c1", "post", {"n": 1})), tools=[post])
    state = RunState()
    result = run_sync(agent, "post it", state=state)
    assert result.status == "interrupted", result.reason
    assert [m.text for m in state.messages if isinstance(m, ToolMessage)] == ["posted 1"]
    assert state.intents == {}
    result = run_sync(agent, state=state)
    assert result.status == "completed", result.reason
    assert effects == [1]


class _StopDuringSave:
    """A store that presses Stop while it saves a given kind of commit (a durable save with an
    intent, or with a request note): the Stop lands between the note and what it announces."""

    def __init__(self, signal: CancelSignal, what: str) -> None:
        self.signal, self.what = signal, what

    def save(self, state: RunState, *, rewrite: bool = False, durable: bool = True) -> None:
        noted = state.intents if self.what == "intent" else state.call_in_flight
        if durable and noted and not self.signal.cancelled:
            self.signal.cancel("the person pressed Stop")


def test_stop_while_a_calls_intent_is_saved_leaves_no_unknown_outcome() -> None:
    """Stop during the save of a post's intent: the post never started, so the resume runs it
    without asking. Before: the run emitted a tool_start for it, kept the intent, and the resume
    stopped with "outcome unknown: post started before the process stopped"."""
    effects: list[int] = []

    @tool()
    async def post(n: int) -> str:
        """Post message n."""
        effects.append(n)
        return f"posted {n}"

    agent = Agent(answers_after_tools(("c1", "post", {"n": 1})), tools=[post])
    state, signal = RunState(), CancelSignal()

    async def main() -> list[Any]:
        store = _StopDuringSave(signal, "intent")
        return [e async for e in run_stream(agent, "post it", state=state, store=store, signal=signal)]

    events = asyncio.run(main())
    assert state.status == "interrupted" and effects == []
    assert state.intents == {}
    assert not [e for e in events if e.type == "tool_start"]
    result = run_sync(agent, state=state)
    assert result.status == "completed", result.reason
    assert effects == [1]


def test_stop_while_a_requests_note_is_saved_charges_nothing() -> None:
    """Stop during the save of the note that a request is about to go out: nothing was sent, so
    nothing is billed. Before: the request's estimated prompt was charged as if it had been sent
    (the run cost money and its usage was marked estimated)."""
    asked: list[int] = []

    def model(messages: list[Message], request: ModelRequest) -> str:
        asked.append(1)
        return "hello"

    state, signal = RunState(), CancelSignal()

    async def main() -> None:
        store = _StopDuringSave(signal, "request")
        async for _ in run_stream(Agent(FunctionModel(model)), "hi", state=state, store=store, signal=signal):
            pass

    asyncio.run(main())
    assert state.status == "interrupted" and asked == []
    assert state.cost_usd == 0.0 and state.usage.total_tokens == 0
    assert state.call_in_flight is None


# --- prices and budgets that are no numbers ---------------------------------------------------


@pytest.mark.parametrize("bad", [-1.0, math.nan, math.inf])
def test_a_price_that_is_no_price_is_refused_when_it_is_made(bad: float) -> None:
    """A negative price made a run's cost negative and let it spend past its budget (a $0.0001
    budget, a run costing $-0.00095, completed); NaN ended the run 'unexpected error: ValueError:
    cannot convert float NaN to integer'. Now Price refuses both, saying which field."""
    with pytest.raises(ValueError, match="input"):
        Price(input=bad, output=1.0)
    with pytest.raises(ValueError, match="output"):
        Price(input=1.0, output=bad)


@pytest.mark.parametrize("bad", [-0.5, math.nan, math.inf])
def test_a_budget_that_is_no_amount_is_refused_before_the_run(bad: float) -> None:
    """max_budget_usd=NaN ended the run 'failed' with a ValueError traceback in the log; now any
    budget that is not a finite amount of zero or more is a ConfigError before anything runs."""
    state = RunState()
    with pytest.raises(ConfigError, match="max_budget_usd"):
        run_sync(Agent("scripted/hello", max_budget_usd=bad), "hi", state=state)
    assert state.messages == []


# --- the caller's state and loop --------------------------------------------------------------


def test_a_run_refused_for_its_configuration_leaves_the_state_as_it_was() -> None:
    """A ConfigError (two tools with one name) raised after the prompt was already added to the
    caller's state: fixing the agent and sending the same message again put it in the transcript
    twice. Now the state is untouched by a run that never started."""

    @tool(read_only=True)
    def look() -> str:
        """Look."""
        return "seen"

    state = RunState()
    with pytest.raises(ConfigError, match="two tools"):
        run_sync(Agent("scripted/hello", tools=[look, look]), "hello", state=state)
    assert state.messages == [] and state.status == "running"
    result = run_sync(Agent("scripted/hello", tools=[look]), "hello", state=state)
    assert result.status == "completed"
    assert [text_of([m]) for m in state.messages if isinstance(m, UserMessage)] == ["hello"]


def test_run_sync_inside_a_running_event_loop_says_to_await_run() -> None:
    """From a notebook or an async function, run_sync raised asyncio's 'asyncio.run() cannot be
    called from a running event loop' and warned that a coroutine was never awaited. Now it is a
    UserError that says to ``await run(...)`` instead, and nothing is left un-awaited."""

    async def main() -> None:
        with pytest.raises(UserError, match=r"await run\("):
            run_sync(Agent("scripted/hello"), "hi")

    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        asyncio.run(main())
        gc.collect()  # a coroutine never awaited warns when it is collected
    assert not [w for w in seen if issubclass(w.category, RuntimeWarning)], [str(w.message) for w in seen]


# --- decisions ------------------------------------------------------------------------------


def deleting_agent(ran: list[str]) -> Agent:
    @tool(needs_approval=True)
    def delete(path: str) -> str:
        """Delete a file."""
        ran.append(path)
        return f"deleted {path}"

    return Agent(answers_after_tools(("c1", "delete", {"path": "a.log"})), tools=[delete])


def test_rejecting_a_call_id_that_no_call_has_declines_nothing() -> None:
    """``reject(state, "c9")``, a mistyped or stale id, was read as the old order's reason and
    declined the call the run stopped for ("Reason: c9"), with only a DeprecationWarning that is
    hidden outside __main__; approve(state, "c9") was refused. Now both are refused and nothing is
    decided; the old order with a reason in words still works (tests/harness/test_loop.py)."""
    ran: list[str] = []
    agent = deleting_agent(ran)
    state = RunState()
    assert run_sync(agent, "clean up", state=state).status == "interrupted"
    with pytest.raises(UserError, match="'c9' is not waiting for a decision"):
        reject(state, "c9")
    assert state.rejected == {} and state.approved == {}
    approve(state)
    assert run_sync(agent, state=state).status == "completed"
    assert ran == ["a.log"]


def test_an_extension_whose_block_fails_leaves_the_state_as_it_was() -> None:
    """An extension whose prompt_block raised did so after the prompt went into the caller's state:
    the same message sent again appeared twice. Now nothing of the refused run is in the state."""

    class Broken(Extension):
        name = "notes"

        def prompt_block(self) -> str | None:
            raise OSError("notes.md: permission denied")

    state = RunState()
    with pytest.raises(OSError, match="permission denied"):
        run_sync(Agent("scripted/hello", extensions=[Broken()]), "hello", state=state)
    assert state.messages == [] and state.status == "running"
    assert run_sync(Agent("scripted/hello"), "hello", state=state).status == "completed"
    assert [text_of([m]) for m in state.messages if isinstance(m, UserMessage)] == ["hello"]


# --- typed answers ------------------------------------------------------------------------------


@pytest.mark.parametrize("kind", ["json schema", "pydantic"])
def test_a_huge_wrong_typed_answer_is_quoted_back_in_a_few_words(kind: str) -> None:
    """With a JSON Schema dict, each problem quoted the whole wrong value: a 200,000-character
    string where a number belongs made a 539 KB correction (sent with the next request) and a
    539 KB reason. Now a wrong value is quoted as pydantic's are, cut to a few words, whatever the
    output type; a huge key is cut too."""
    big = "x" * 200_000

    def model(messages: list[Message], request: ModelRequest) -> str:
        return json.dumps({"n": big, "tags": list(range(50_000)), big: 1})

    class Out(BaseModel):
        model_config = ConfigDict(extra="forbid")
        n: int
        tags: list[int] = Field(max_length=3)

    schema = {
        "type": "object",
        "properties": {"n": {"type": "integer"}, "tags": {"type": "array", "maxItems": 3}},
        "required": ["n"],
        "additionalProperties": False,
    }
    state = RunState()
    agent = Agent(FunctionModel(model), output_type=schema if kind == "json schema" else Out, output_retries=1)
    result = run_sync(agent, "go", state=state)
    assert result.status == "failed"
    correction = text_of([m for m in state.messages if isinstance(m, UserMessage)][1:])
    assert correction.startswith("Your final answer does not match") and "n:" in correction and "tags" in correction
    assert len(correction) < 2_000 and result.reason is not None and len(result.reason) < 2_000


# --- what a request costs when tether's side fails -------------------------------------------


class _FailsAfterTheReply(Middleware):
    async def wrap_model_call(self, ctx: Any, request: ModelRequest, call_next: Any) -> Any:
        await call_next(request)
        raise RuntimeError("the classifier is down")


class _FailsWhileStreaming(Middleware):
    async def filter_stream(self, ctx: Any, text: str, kind: Any) -> str:
        raise RuntimeError("the filter broke")


@pytest.mark.parametrize("middleware", [_FailsAfterTheReply(), _FailsWhileStreaming()], ids=["after", "streaming"])
def test_a_middleware_that_fails_after_the_request_went_out_leaves_its_cost_counted(middleware: Any) -> None:
    """The provider answered (it bills the reply) but a middleware raised: the run ended failed
    with cost $0 and no tokens, as if nothing had been asked. Now the reply is charged as the
    provider reported it (after the reply) or as far as it streamed (during it), and nothing is
    left in flight."""
    state = RunState()
    agent = Agent(FunctionModel(lambda messages, request: "a long answer " * 50), middleware=[middleware])
    result = run_sync(agent, "go", state=state)
    assert result.status == "failed" and "unexpected error: RuntimeError" in (result.reason or "")
    assert result.cost_usd is not None and result.cost_usd > 0
    assert result.usage.prompt_tokens > 0 and result.usage.completion_tokens > 0
    assert state.call_in_flight is None and state.cost_unknown_usd == 0.0


# --- Stop from another thread ---------------------------------------------------------------


def test_stop_from_another_thread_reaches_a_run_listening_to_a_child_signal() -> None:
    """A run given ``CancelSignal(parent=stop_all)``, stopped from another thread with
    ``stop_all.cancel_threadsafe``: the parent had never waited on anything, so the cancellation
    ran on the caller's thread and resolved the child's waiting futures there. Under asyncio's
    debug mode that raised 'Non-thread-safe operation invoked on an event loop other than the
    current one' in the thread that pressed Stop, and the tool slept on: the Stop was lost. Now
    the waiters are woken on their own loop."""
    waiting = threading.Event()

    @tool(read_only=True)
    async def watch(ctx: ToolContext) -> str:
        """Watch for a long time."""
        asyncio.get_running_loop().call_soon(waiting.set)  # once the sleep below waits
        await ctx.signal.sleep(30)
        return "watched"

    agent = Agent(answers_after_tools(("w1", "watch", {})), tools=[watch])
    stop_all = CancelSignal()
    pressed: list[BaseException] = []

    def press() -> None:
        waiting.wait(30)
        try:
            stop_all.cancel_threadsafe("the person pressed Stop")
        except BaseException as exc:  # the thread's error is the finding
            pressed.append(exc)

    presser = threading.Thread(target=press)
    presser.start()
    result = asyncio.run(run(agent, "watch", signal=CancelSignal(parent=stop_all)), debug=True)
    presser.join()
    assert pressed == []
    assert result.status == "interrupted" and result.reason == "cancelled: the person pressed Stop"


# --- a side call made while the turn's request is still out -----------------------------------


def greedy_reply(messages: list[Message], request: ModelRequest) -> AssistantMessage:
    """A reply that takes every token it is allowed, on a small prompt."""
    usage = Usage(prompt_tokens=10, completion_tokens=request.max_tokens)
    return AssistantMessage(content=(TextPart(text="an answer"),), finish_reason="stop", usage=usage)


def judge(messages: list[Message], request: ModelRequest) -> str:
    return json.dumps({"rationale": "a plain answer", "score": 1.0, "category": "ok"})


@pytest.mark.parametrize("budget", [0.01, 0.002])
def test_an_output_guardrails_verdict_never_takes_the_run_past_its_budget(budget: float) -> None:
    """The output guardrail asks its model after the reply came and before it is charged: the
    verdict's budget check did not count the reply, so a reply that took what the budget allowed,
    plus the verdict, ended the run above its budget ($0.0106 of $0.01, $0.0026 of $0.002). Now
    the turn's request still out counts at its worst case: the verdict that cannot be paid for is
    not asked (the guardrail fails closed, in words), and the run ends inside its budget."""
    guard = Guardrail(ModelClassifier("Is this answer acceptable?", model=FunctionModel(judge)), stages=("output",))
    agent = Agent(FunctionModel(greedy_reply), middleware=[guard], max_budget_usd=budget)
    result = run_sync(agent, "go")
    assert result.cost_usd is not None and result.cost_usd <= budget, (result.status, result.reason)


def test_a_kill_during_a_verdict_on_the_reply_counts_the_reply_that_was_lost() -> None:
    """The durable save made before the verdict's request held that request's note alone: the
    turn's request, answered and billed but not yet recorded, was not in it, so a kill -9 during
    the verdict lost the reply and its cost with it. Resumed from that very save (what a kill
    leaves), the run now counts both requests' worst case as spent-unknown."""
    saved: list[dict[str, Any]] = []

    class Saves:
        def save(self, state: RunState, *, rewrite: bool = False, durable: bool = True) -> None:
            if durable:
                saved.append(state.model_dump(mode="json"))

    guard = Guardrail(ModelClassifier("Is this answer acceptable?", model=FunctionModel(judge)), stages=("output",))
    agent = Agent(FunctionModel(lambda messages, request: "an answer"), middleware=[guard], max_tokens=1000)
    run_sync(agent, "go", store=Saves())
    notes = [s for s in saved if s["call_in_flight"] is not None]
    turn, during = notes[0]["call_in_flight"], notes[-1]  # the turn's request; the save made before the verdict's
    state = RunState.model_validate(during)
    result = run_sync(Agent(FunctionModel(lambda messages, request: "again")), state=state)
    assert result.cost_unknown_usd > turn["max_cost_usd"] > 0


# --- a middleware hook that forgets its return ------------------------------------------------


class _NoRequest(Middleware):
    async def before_model(self, ctx: Any, request: ModelRequest) -> Any:
        request.messages.append  # noqa: B018 - looked at, then the return forgotten


class _NoResponse(Middleware):
    async def wrap_model_call(self, ctx: Any, request: ModelRequest, call_next: Any) -> Any:
        await call_next(request)


class _NoText(Middleware):
    async def filter_stream(self, ctx: Any, text: str, kind: Any) -> Any:
        ctx.scratch["seen"] = text


class _NoResult(Middleware):
    async def wrap_tool_call(self, ctx: Any, call: Any, args: Any, call_next: Any) -> Any:
        await call_next()


@pytest.mark.parametrize(
    ("middleware", "hook"),
    [
        (_NoRequest(), "before_model"),
        (_NoResponse(), "wrap_model_call"),
        (_NoText(), "filter_stream"),
        (_NoResult(), "wrap_tool_call"),
    ],
)
def test_a_hook_that_returns_nothing_is_named_with_what_it_must_return(middleware: Any, hook: str) -> None:
    """A hook that forgot its ``return``: before_model and wrap_model_call ended the run 'unexpected
    error: AssertionError: (no message)'; filter_stream's None silently dropped every streamed word
    of the answer (the run completed with no text_delta); wrap_tool_call's was blamed on the tool
    ("this is a bug in the tool"). Now each names the middleware, the hook and what it must return:
    as the run's reason, or, around a tool, in the result the model reads."""

    @tool(read_only=True)
    def look() -> str:
        """Look."""
        return "seen"

    agent = Agent(answers_after_tools(("c1", "look", {})), tools=[look], middleware=[middleware])
    state = RunState()
    events = events_of(agent, "go", state)
    result = events[-1].result
    named = f"middleware {type(middleware).__name__}: {hook} returned NoneType; it must return"
    if hook == "wrap_tool_call":
        assert result.status == "completed"
        assert named in text_of([m for m in state.messages if isinstance(m, ToolMessage)])
    else:
        assert result.status == "failed" and (result.reason or "").startswith(named), result.reason
    if hook == "wrap_model_call":
        assert result.cost_usd > 0  # the provider answered: its reply is billed


@pytest.mark.parametrize(
    "decide",
    [
        lambda state: approve(state, reason=5),  # type: ignore[arg-type]
        lambda state: reject(state, reason=["keep it"]),  # type: ignore[arg-type]
        lambda state: reject(state, 7),  # type: ignore[arg-type]
        lambda state: approve(state, content="yes"),  # type: ignore[arg-type]
    ],
    ids=["approve-reason-int", "reject-reason-list", "reject-call-id-int", "approve-content-str"],
)
def test_a_malformed_decision_is_refused_in_words_and_decides_nothing(decide: Any) -> None:
    """A reason that is not text raised AttributeError ('int' object has no attribute 'strip'), a
    call id that is not text the same from reject; a form's values that are not a dict a raw
    pydantic error. Now each is a UserError, and the run still waits with nothing decided."""
    ran: list[str] = []
    agent = deleting_agent(ran)
    state = RunState()
    run_sync(agent, "clean up", state=state)
    with pytest.raises(UserError):
        decide(state)
    assert state.approved == {} and state.rejected == {} and state.answer is None
    assert run_sync(agent, state=state).status == "interrupted" and ran == []


# --- what a tool returns ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("content", "named"), [(b"raw bytes", "bytes"), (["a", "b"], "list"), (None, "NoneType")], ids=str
)
@pytest.mark.parametrize("calls", [1, 3], ids=["alone", "in-a-batch"])
def test_a_tool_result_with_content_that_is_not_text_is_an_error_the_model_reads(
    content: Any, named: str, calls: int
) -> None:
    """A ToolResult whose content is bytes, a list of strings or None ended the whole run 'failed:
    unexpected error: ValidationError: 9 validation errors for ToolMessage' (or a TypeError),
    leaving the call with no result. The docs promise that a tool returning something that is not
    text does not end a run; now it is an error result that names what came back."""

    @tool(read_only=True)
    def fetch(n: int) -> ToolResult:
        """Fetch something."""
        return ToolResult(content)

    agent = Agent(answers_after_tools(*((f"c{i}", "fetch", {"n": i}) for i in range(calls))), tools=[fetch])
    state = RunState()
    result = run_sync(agent, "go", state=state)
    assert result.status == "completed", result.reason
    errors = [m for m in state.messages if isinstance(m, ToolMessage)]
    assert len(errors) == calls and all(m.status == "error" for m in errors)
    assert all(f"returned a ToolResult whose content is {named}" in m.text for m in errors)
    assert_pairing(state.messages)


@pytest.mark.parametrize("bad", [math.nan, 2.5, -1, "8"])
def test_a_turn_limit_that_is_no_count_is_refused_before_the_run(bad: Any) -> None:
    """max_turns=NaN was no limit at all (every comparison with NaN is false: a model calling
    tools forever was never stopped by it); -1 stopped every run at once. Now a ConfigError."""
    state = RunState()
    with pytest.raises(ConfigError, match="max_turns"):
        run_sync(Agent("scripted/hello", max_turns=bad), "hi", state=state)
    assert state.messages == []


def test_a_failing_cancel_callback_does_not_keep_the_stop_from_the_run() -> None:
    """A callback added to the run's signal before the run (``signal.add_callback``, public) that
    raised stopped ``cancel`` at it: the run's own listener, added later, never heard the Stop, and
    a tool that does not watch the signal itself ran to its end; the run completed. Now every
    listener hears it (a failing one is logged) and the run stops."""
    finished: list[str] = []

    @tool(read_only=True)
    async def wait_long(ctx: ToolContext) -> str:
        """Wait for something that does not come."""
        asyncio.get_running_loop().call_soon(signal.cancel, "the person pressed Stop")
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(asyncio.Event().wait(), 5)
        finished.append("waited")
        return "waited"

    def audit(reason: str) -> None:
        raise RuntimeError("the audit log is down")

    signal = CancelSignal()
    signal.add_callback(audit)
    result = run_sync(Agent(answers_after_tools(("c1", "wait_long", {})), tools=[wait_long]), "go", signal=signal)
    assert result.status == "interrupted" and result.reason == "cancelled: the person pressed Stop"
    assert finished == []
