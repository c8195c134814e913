"""Law 5 under fire: an exception injected at any seam still ends the run in one of the five exits,
with a ``done`` event, the reason in words and the state saved — never a run left ``running``."""

from __future__ import annotations

import asyncio
import os
import tempfile
import threading
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.conftest import assert_pairing
from tether import Agent, CancelSignal, RunState, RunStore, run, run_stream, tool
from tether.errors import UserError
from tether.events import Done
from tether.harness import loop as loop_module
from tether.harness.compaction import SUMMARY_PROMPT
from tether.harness.middleware import Middleware
from tether.messages import AssistantMessage, TextPart, ToolCallPart, ToolMessage
from tether.providers.base import ResponseDone, StreamText
from tether.testing import FunctionModel, call
from tether.tools.files import FILE_TOOLS
from tether.tracing import JsonlTracer
from tether.usage import Usage

TERMINAL = {"completed", "failed", "max_turns_exceeded", "budget_exceeded", "interrupted"}


class Fault:
    """Raise ``exc`` at the ``nth`` time the seam named ``seam`` is reached."""

    def __init__(self, seam: str, nth: int, exc: BaseException) -> None:
        self.seam, self.nth, self.exc, self.seen = seam, nth, exc, 0

    def hit(self, seam: str) -> None:
        if seam == self.seam:
            self.seen += 1
            if self.seen == self.nth:
                raise self.exc


def plan_reply(fault: Fault) -> Any:
    def reply(messages: list[Any], request: Any) -> Any:
        first = messages[0]
        if isinstance(first.content[0], TextPart) and SUMMARY_PROMPT[:40] in first.content[0].text:
            fault.hit("summary")
            return "the user asked about timeouts; files were listed and errors.log was read"
        fault.hit("provider")
        turn = sum(isinstance(m, AssistantMessage) for m in messages)
        steps = [call("c1", "list_files"), call("c2", "read_file", {"path": "errors.log"}), call("c3", "flaky", {})]
        return steps[turn] if turn < len(steps) else "errors.log mentions a timeout."

    return reply


class FaultyStore(RunStore):
    fault: Fault

    def save(self, state: RunState, *, rewrite: bool = False, durable: bool = True) -> None:
        self.fault.hit("store")
        super().save(state, rewrite=rewrite, durable=durable)


class FaultyTracer(JsonlTracer):
    fault: Fault

    def write(self, event: Any) -> None:
        self.fault.hit("tracer")
        super().write(event)


class FaultyMiddleware(Middleware):
    def __init__(self, fault: Fault) -> None:
        self.fault = fault

    async def before_agent(self, ctx: Any) -> Any:
        self.fault.hit("before_agent")
        return None

    async def before_model(self, ctx: Any, request: Any) -> Any:
        self.fault.hit("before_model")
        return request

    async def wrap_model_call(self, ctx: Any, request: Any, call_next: Any) -> Any:
        self.fault.hit("wrap_model_call")
        return await call_next(request)

    async def wrap_tool_call(self, ctx: Any, call: Any, args: Any, call_next: Any) -> Any:
        self.fault.hit("wrap_tool_call")
        return await call_next()

    async def after_agent(self, ctx: Any, status: str) -> Any:
        self.fault.hit("after_agent")
        return None


# A tool (or its wrapper) failing is information for the model; a tracer failing is logged; a failed
# summary falls back to trimming. The other seams end the run.
CARRY_ON = ("tool", "wrap_tool_call", "tracer", "summary")
SEAMS = [
    "provider",
    "summary",
    "store",
    "tracer",
    "tokenizer",
    "tool",
    "before_agent",
    "before_model",
    "wrap_model_call",
    "wrap_tool_call",
    "after_agent",
]
ERRORS = [
    OSError("disk on fire"),
    ValueError("garbled"),
    RuntimeError("boom"),
    KeyError("missing"),
    RecursionError("maximum recursion depth exceeded"),
    UnicodeEncodeError("utf-8", "\ud800", 0, 1, "surrogates"),
]


def run_with_fault(
    root: Path, workspace: Path, fault: Fault, monkeypatch: pytest.MonkeyPatch
) -> tuple[list[Any], RunStore]:
    @tool(read_only=True)
    def flaky() -> str:
        """A tool that may fail."""
        fault.hit("tool")
        return "fine"

    real_counter = loop_module.counter_for

    def faulty_counter(model: str) -> Any:
        count = real_counter(model)

        def counted(text: str) -> int:
            fault.hit("tokenizer")
            return count(text)

        return counted

    monkeypatch.setattr(loop_module, "counter_for", faulty_counter)
    store = FaultyStore(root / "runs")
    store.fault = fault
    tracer = FaultyTracer(root / "traces")
    tracer.fault = fault
    # A small window, so compaction (and its summary call) happens after a round of tools.
    agent = Agent(
        FunctionModel(plan_reply(fault)),
        tools=[*FILE_TOOLS, flaky],
        cwd=workspace,
        middleware=[FaultyMiddleware(fault)],
        context_window=700,
        max_budget_usd=1.0,
    )
    events: list[Any] = []

    async def go() -> None:
        async for event in run_stream(agent, "Which file mentions a timeout?", store=store, tracer=tracer):
            events.append(event)

    asyncio.run(go())
    return events, store


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(seam=st.sampled_from(SEAMS), nth=st.integers(1, 4), exc=st.sampled_from(ERRORS))
def test_an_exception_at_any_seam_ends_the_run_recorded(
    workspace: Path, monkeypatch: pytest.MonkeyPatch, seam: str, nth: int, exc: BaseException
) -> None:
    fault = Fault(seam, nth, exc)
    with tempfile.TemporaryDirectory() as tmp:
        events, store = run_with_fault(Path(tmp), workspace, fault, monkeypatch)
        dones = [e for e in events if isinstance(e, Done)]
        assert len(dones) == 1 and events[-1] is dones[0], "the stream must end with exactly one done"
        result = dones[0].result
        assert result.status in TERMINAL
        assert result.reason
        saved = store.load(result.run_id)
        assert saved.status == result.status, "the exit on disk is the exit that was streamed"
        assert saved.call_in_flight is None
        assert_pairing(saved.messages, complete=False)  # a failed run may stop with calls pending
        if fault.seen < nth:
            return  # the run never reached the seam that often
        named = type(exc).__name__ in result.reason or str(exc) in result.reason
        if seam in CARRY_ON:
            assert not named, "a failing tool, tool wrapper, tracer or summary does not end the run"
        else:  # the loop cannot carry on: the run fails and says what happened, in words
            assert result.status == "failed" and named


def test_a_non_provider_error_fails_the_run_once_and_resume_refuses_clearly(workspace: Path, tmp_path: Path) -> None:
    calls = []

    def reply(messages: list[Any], request: Any) -> Any:
        calls.append(1)
        raise OSError("connection reset by a middlebox")

    store = RunStore(tmp_path / "runs")
    agent = Agent(FunctionModel(reply), tools=FILE_TOOLS, cwd=workspace)
    result = asyncio.run(run(agent, "hi", store=store))
    assert result.status == "failed"
    assert "OSError: connection reset by a middlebox" in result.reason
    saved = store.load(result.run_id)
    assert saved.status == "failed" and saved.reason == result.reason
    with pytest.raises(UserError, match="already ended"):
        asyncio.run(run(agent, state=saved, store=store))
    assert len(calls) == 1, "nothing was paid for twice"


def test_a_reply_with_a_lone_surrogate_is_saved_and_not_paid_twice(workspace: Path, tmp_path: Path) -> None:
    calls = []

    def reply(messages: list[Any], request: Any) -> Any:
        calls.append(1)
        return (
            AssistantMessage(
                content=(
                    TextPart(text="broken \ud800 text"),
                    ToolCallPart(id="c\udfff", name="list_files", arguments='{"pattern": "\ud800"}'),
                )
            )
            if len(calls) == 1
            else "done \udcff"
        )

    store = RunStore(tmp_path / "runs")
    result = asyncio.run(run(Agent(FunctionModel(reply), tools=FILE_TOOLS, cwd=workspace), "go", store=store))
    assert result.status == "completed"
    assert result.output == "done \ufffd"
    saved = store.load(result.run_id)
    assert saved.messages[1].text == "broken \ufffd text"
    assert_pairing(saved.messages)
    assert len(calls) == 2


def test_tool_arguments_nested_deeply_are_a_tool_error_the_model_reads(workspace: Path) -> None:
    deep = '{"pattern": ' + "[" * 100_000 + "]" * 100_000 + "}"

    def reply(messages: list[Any], request: Any) -> Any:
        if not any(isinstance(m, ToolMessage) for m in messages):
            return AssistantMessage(content=(ToolCallPart(id="c1", name="list_files", arguments=deep),))
        return "gave up"

    state = RunState()
    result = asyncio.run(run(Agent(FunctionModel(reply), tools=FILE_TOOLS, cwd=workspace), "go", state=state))
    assert result.status == "completed"
    (tool_result,) = [m for m in state.messages if isinstance(m, ToolMessage)]
    assert tool_result.status == "error" and "nested too deeply" in tool_result.text


def test_a_file_name_that_is_not_utf8_does_not_break_saving(workspace: Path, tmp_path: Path) -> None:
    os.close(os.open(os.path.join(os.fsencode(workspace), b"bad-\xff.txt"), os.O_CREAT | os.O_WRONLY, 0o600))
    replies = iter([call("c1", "list_files"), "listed"])
    store = RunStore(tmp_path / "runs")
    result = asyncio.run(
        run(Agent(FunctionModel(lambda m, r: next(replies)), tools=FILE_TOOLS, cwd=workspace), "list", store=store)
    )
    assert result.status == "completed"
    listing = next(m for m in store.load(result.run_id).messages if isinstance(m, ToolMessage)).text
    assert "bad-\\xff.txt" in listing  # the byte as the file tools take it back


def test_stop_while_the_tokenizer_loads_is_heard_at_once(workspace: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    release = threading.Event()
    loading = threading.Event()

    def slow_encoding(name: str = "o200k_base") -> Any:
        loading.set()
        release.wait(30)  # a first load can take seconds on a busy machine

    monkeypatch.setattr(loop_module, "encoding", slow_encoding)
    monkeypatch.setattr(loop_module, "encoding_loaded", lambda: False)  # as in a fresh process
    signal = CancelSignal()

    async def go() -> Any:
        async def stop_when_loading() -> None:
            while not loading.is_set():
                await asyncio.sleep(0.005)
            signal.cancel("user pressed Stop")

        stopper = asyncio.create_task(stop_when_loading())
        model = FunctionModel(lambda m, r: "unused", model_id="gpt-4.1-mini")
        model.name = "openai"  # a model whose exact counter is the BPE tokenizer
        result = await run(Agent(model, tools=FILE_TOOLS, cwd=workspace, max_budget_usd=1.0), "go", signal=signal)
        await stopper
        return result

    try:
        result = asyncio.run(go())
        # The run ended while the load was still blocked: the loop never waited for it.
        assert not release.is_set()
        assert result.status == "interrupted" and result.interruption.type == "cancelled"
    finally:
        release.set()


def test_a_caller_that_stops_reading_leaves_a_stopped_resumable_run(workspace: Path, tmp_path: Path) -> None:
    store = RunStore(tmp_path / "runs")

    async def go() -> str:
        stream = run_stream(Agent("scripted/plan", tools=FILE_TOOLS, cwd=workspace), "go", store=store)
        async for event in stream:
            if event.type == "tool_result":
                await stream.aclose()  # what `break` in an `async for` does, made explicit
                return event.run_id
        raise AssertionError("no tool ran")

    run_id = asyncio.run(go())
    saved = store.load(run_id)
    assert saved.status == "interrupted" and saved.interruption.type == "cancelled"
    result = asyncio.run(run(Agent("scripted/plan", tools=FILE_TOOLS, cwd=workspace), state=saved, store=store))
    assert result.status == "completed" and result.turns == 3


class HangingStream(FunctionModel):
    """Streams part of a reply, then hangs until cancelled."""

    async def stream(self, request: Any) -> Any:
        yield StreamText("The answer is forty")
        await asyncio.Event().wait()
        yield ResponseDone(await self.complete(request))  # pragma: no cover


def test_a_cancelled_stream_still_counts_what_it_consumed(workspace: Path) -> None:
    signal = CancelSignal()
    model = HangingStream(lambda m, r: "unused")

    async def go() -> Any:
        result = None
        async for event in run_stream(Agent(model, cwd=workspace), "What is the answer?", signal=signal):
            if event.type == "text_delta":
                signal.cancel("user pressed Stop")
            if isinstance(event, Done):
                result = event.result
        return result

    result = asyncio.run(go())
    assert result.status == "interrupted"
    assert result.usage.estimated and result.usage.prompt_tokens > 0 and result.usage.completion_tokens > 0
    assert result.cost_usd > 0, "a cancelled request is billed by the provider: tether counts it"


def test_stop_mid_stream_in_a_fresh_process_does_not_wait_for_the_tokenizer(
    workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import tether.tokens as tokens_module

    release, returned = threading.Event(), threading.Event()

    def slow_encoding(name: str = "o200k_base") -> Any:
        release.wait(20)  # a first load can take seconds on a busy machine
        returned.set()
        return real_encoding(name)

    real_encoding = tokens_module.encoding
    monkeypatch.setattr(loop_module, "encoding", slow_encoding)
    monkeypatch.setattr(loop_module, "encoding_loaded", lambda: False)  # as in a fresh process
    monkeypatch.setattr(tokens_module, "encoding", slow_encoding)
    monkeypatch.setattr(tokens_module, "encoding_loaded", lambda: False)
    signal = CancelSignal()
    model = HangingStream(lambda m, r: "unused", model_id="gpt-4.1-mini")
    model.name = "openai"  # its exact counter is the BPE tokenizer, still loading

    async def go() -> Any:
        async for event in run_stream(
            Agent(model, cwd=workspace), "What is the answer, in words never seen?", signal=signal
        ):
            if event.type == "text_delta":
                signal.cancel("user pressed Stop")
            if isinstance(event, Done):
                return event.result
        return None

    try:
        result = asyncio.run(go())
        assert not returned.is_set()  # ended while the load was still blocked: nothing waited for it
        assert result.status == "interrupted" and result.interruption.type == "cancelled"
        assert result.usage.estimated and result.usage.completion_tokens > 0  # counted, by the estimate
    finally:
        release.set()


def test_the_first_request_does_not_wait_for_the_tokenizer(workspace: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    release, loaded = threading.Event(), threading.Event()

    def slow_encoding(name: str = "o200k_base") -> None:
        release.wait(5)
        loaded.set()

    monkeypatch.setattr(loop_module, "encoding", slow_encoding)
    monkeypatch.setattr(loop_module, "encoding_loaded", lambda: False)  # as in a fresh process
    requests: list[int] = []

    def reply(messages: list[Any], request: Any) -> Any:
        assert not loaded.is_set(), "the request waited for the tokenizer"
        requests.append(1)
        return AssistantMessage(content=(TextPart(text="answered"),), usage=Usage(prompt_tokens=9, completion_tokens=1))

    try:
        model = FunctionModel(reply, model_id="gpt-4.1-mini")
        model.name = "openai"  # a model whose exact counter is the BPE tokenizer
        result = asyncio.run(run(Agent(model, cwd=workspace), "hi"))
        # The counter only matters for budgets and compaction: this run used neither.
        assert result.status == "completed" and requests == [1] and not release.is_set()
    finally:
        release.set()


def test_a_summary_request_is_noted_in_flight_like_any_model_call(workspace: Path, tmp_path: Path) -> None:
    store = RunStore(tmp_path / "runs")
    seen: list[Any] = []
    state = RunState()

    def reply(messages: list[Any], request: Any) -> Any:
        first = messages[0]
        if isinstance(first.content[0], TextPart) and SUMMARY_PROMPT[:40] in first.content[0].text:
            seen.append(store.load(state.run_id).call_in_flight)  # what a kill here would leave
            return "the user asked about timeouts"
        turn = sum(isinstance(m, AssistantMessage) for m in messages)
        steps = [call("c1", "list_files"), call("c2", "read_file", {"path": "errors.log"})]
        return steps[turn] if turn < len(steps) else "errors.log mentions a timeout."

    result = asyncio.run(
        run(
            Agent(FunctionModel(reply), tools=FILE_TOOLS, cwd=workspace, context_window=300),
            "Which file mentions a timeout?",
            state=state,
            store=store,
        )
    )
    assert seen and all(s is not None and s.max_cost_usd and s.max_cost_usd > 0 for s in seen)
    assert result.status in TERMINAL and store.load(state.run_id).call_in_flight is None
