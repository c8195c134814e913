"""Sub-agents and tools, left alone before: a configuration error a tool raises in a plain run, the
spans a resumed sub-agent's costs go on, and what a sub-agent's step costs its parent's saves."""

from __future__ import annotations

import asyncio
import copy
import json
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import assert_pairing
from tests.harness.test_left_alone_run_start import lead_calls
from tether import Agent, CancelSignal, RunState, RunStore, approve, run_stream, run_sync, tool
from tether.errors import ConfigError
from tether.harness.store import read_header
from tether.harness.subagent import children, parent_of
from tether.messages import AssistantMessage, Message, TextPart, ToolCallPart, ToolMessage
from tether.providers.base import ModelRequest
from tether.telemetry import Telemetry
from tether.testing import FunctionModel, Reply
from tether.testing.otlp import OtlpReceiver
from tether.tools.base import ToolContext
from tether.usage import Price, Usage

# --------------------------------------------------------------------------- a tool's ConfigError


def test_a_tool_that_raises_a_configuration_error_ends_a_plain_run_failed_saying_what_to_change(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Before: the ConfigError reached the model as an ordinary tool error, and it retried three
    times and worked around a problem only a person can fix (a key not set). Now the run ends
    failed with the error's words, as a misconfigured sub-agent does; the call has its one result
    and the model is not asked again. The key's value never goes into the reason."""
    runs: list[int] = []

    @tool(read_only=True)
    def tracker(query: str) -> str:
        """Search the issue tracker."""
        runs.append(1)
        raise ConfigError("TRACKER_TOKEN is sk-tracker-0123456789abcdef0123 and expired: set a new one in config.toml")

    model, asked = lead_calls("tracker", {"query": "open issues"})
    state = RunState()
    monkeypatch.setenv("TRACKER_TOKEN", "sk-tracker-0123456789abcdef0123")
    result = run_sync(Agent(model, tools=[tracker]), "what is open?", state=state)
    assert result.status == "failed", result.reason
    assert result.reason is not None and result.reason.startswith("the tool tracker is not configured right: ")
    assert "set a new one in config.toml" in result.reason
    assert "sk-tracker" not in result.reason
    assert asked == [1] and runs == [1]
    (answer,) = [m for m in state.messages if isinstance(m, ToolMessage)]
    assert answer.status == "error" and "set a new one in config.toml" in answer.text
    assert "sk-tracker" not in answer.text
    assert_pairing(state.messages)


def test_a_tool_s_ordinary_error_still_goes_to_the_model() -> None:
    """Only a configuration error ends the run: any other failure is the model's to read."""

    @tool(read_only=True)
    def tracker(query: str) -> str:
        """Search the issue tracker."""
        raise ValueError("no issue matches")

    model, asked = lead_calls("tracker", {"query": "open issues"})
    result = run_sync(Agent(model, tools=[tracker]), "what is open?")
    assert result.status == "completed" and len(asked) == 4


# --------------------------------------------------------------------------- a resumed child's spans


@tool(needs_approval=True)
def deploy() -> str:
    """Deploy (a person approves it first)."""
    return "deployed"


def _turns(messages: list[Message]) -> int:
    return sum(isinstance(m, AssistantMessage) for m in messages)


def _child_model(messages: list[Message], request: ModelRequest) -> Reply | AssistantMessage:
    """Asks to deploy (which waits for a person), then answers; its turns cost 0.00101, 0.00201."""
    t = _turns(messages)
    usage = Usage(prompt_tokens=1000 * (t + 1), completion_tokens=10)
    if t == 0:
        call = ToolCallPart(id="k1", name="deploy", arguments="{}")
        return AssistantMessage(content=(call,), usage=usage, finish_reason="tool_calls")
    return AssistantMessage(content=(TextPart(text="child done"),), usage=usage, finish_reason="stop")


def _parent_model(messages: list[Message], request: ModelRequest) -> AssistantMessage:
    """Hands the task to ``helper``, then answers; each of its turns costs 0.000101."""
    usage = Usage(prompt_tokens=100, completion_tokens=1)
    if _turns(messages) == 0:
        call = ToolCallPart(id="p1", name="helper", arguments=json.dumps({"task": "deploy"}))
        return AssistantMessage(content=(call,), usage=usage, finish_reason="tool_calls")
    return AssistantMessage(content=(TextPart(text="parent done"),), usage=usage, finish_reason="stop")


def test_a_resumed_sub_agents_model_call_cost_is_on_its_own_chat_span() -> None:
    """The child waits for a person, so the parent stops; resumed (another tracer, as another
    process would make, told what the parent had cost), the child's next model call cost 0.00201.
    Before, its chat span had no cost and the parent's next chat span carried it (0.002111 for a
    call of 0.000101): "why did this call cost twenty times more". Now each call's span has its
    own cost, and the chat spans still add up to what the resumed run spent."""
    price = Price(input=1.0, output=1.0)
    child = Agent(FunctionModel(_child_model, model_id="child", price=price), tools=[deploy])
    parent = Agent(
        FunctionModel(_parent_model, model_id="parent", price=price), tools=[child.as_tool("helper", "Deploys.")]
    )
    with OtlpReceiver() as receiver:
        telemetry = Telemetry(receiver.endpoint, service_name="tests")
        try:
            state = RunState()
            assert run_sync(parent, "deploy it", state=state, tracer=telemetry.tracer()).status == "interrupted"
            approve(state)
            before = state.cost_usd
            tracer = telemetry.tracer(resumed=True, cost_usd=before)
            result = run_sync(parent, None, state=state, tracer=tracer)
            assert result.status == "completed"
            assert telemetry.flush(5)
            mine = receiver.wait_for(lambda s: len([x for x in s if x["trace_id"] == tracer.trace_id]) >= 6, timeout=5)
        finally:
            telemetry.shutdown()
    spans = [s for s in mine if s["trace_id"] == tracer.trace_id]
    costs = {s["name"]: s["attributes"].get("tether.cost_usd") for s in spans if s["name"].startswith("chat")}
    assert costs == {"chat child": pytest.approx(0.00201), "chat parent": pytest.approx(0.000101)}
    (child_span,) = [s for s in spans if s["name"] == "invoke_agent helper"]
    (chat_child,) = [s for s in spans if s["name"] == "chat child"]
    assert chat_child["parent_span_id"] == child_span["span_id"]
    assert sum(costs.values()) == pytest.approx(result.cost_usd - before)


# --------------------------------------------------------------------------- what a child's step costs its parent


def _stepping_child(steps: int) -> FunctionModel:
    """A child that calls ``step`` ``steps`` times, one call a reply, then answers."""

    def fn(messages: list[Message], request: ModelRequest) -> Reply | str:
        t = _turns(messages)
        return Reply(calls=((f"s{t}", "step", {"n": t}),)) if t < steps else "stepped"

    return FunctionModel(fn)


def test_a_child_s_steps_do_not_rewrite_its_whole_state_inside_its_parent_s_saves(tmp_path: Path) -> None:
    """Before, every step of a sub-agent saved its whole state inside its parent's header, so each
    step wrote all the child's transcript again: a child of 120 steps took 13.6 s inside a parent
    against 0.45 s run alone. Now the child is saved as a run of its own in the parent's store (its
    transcript appended, as any run's) and the parent's header keeps only a reference: it stays
    the same size however long the child runs. The child's record loads back whole."""
    runs = RunStore(tmp_path / "runs")
    state = RunState()
    header_sizes: list[int] = []

    @tool(read_only=True)
    def step(n: int) -> str:
        """One step of the work."""
        header = read_header(tmp_path / "runs" / state.run_id)
        assert header is not None
        header_sizes.append(len(json.dumps(header)))
        return f"step {n} done: " + "detail " * 40

    child = Agent(_stepping_child(30), tools=[step])
    lead = FunctionModel(
        lambda m, r: "all stepped" if _turns(m) else Reply(calls=(("p1", "worker", {"task": "step"}),))
    )
    result = run_sync(Agent(lead, tools=[child.as_tool("worker", "Steps.")]), "go", state=state, store=runs)
    assert result.status == "completed" and result.output == "all stepped"
    assert len(header_sizes) == 30
    # The child's transcript grew by 30 results of ~300 characters; the parent's header did not.
    assert max(header_sizes) - min(header_sizes) < 200, header_sizes
    (kept,) = children(runs.load(state.run_id)).values()
    assert kept["done"] and kept["turns"] == 31
    own = runs.load(kept["run_id"])  # the child's own run, with its whole transcript
    assert own.status == "completed" and len(own.messages) == 62 and parent_of(own) == (state.run_id, "p1")


def test_a_parent_resumed_without_the_store_its_child_is_saved_in_ends_failed_saying_so(tmp_path: Path) -> None:
    """A parent whose running child was saved as a run of its own, resumed from its state without
    that store (the state copied into another), cannot find its child: the run ends failed saying
    where the child is and what to do (a configuration error, not a call's error for the model to
    work around), and nothing is asked of a model."""
    runs = RunStore(tmp_path / "runs")
    state = RunState()
    signal = CancelSignal()

    @tool(read_only=True)
    def step(n: int) -> str:
        """One step of the work."""
        if n == 2:
            signal.cancel("the person pressed Stop")
        return f"step {n} done"

    child = Agent(_stepping_child(5), tools=[step])
    lead_asked: list[int] = []

    def lead(messages: list[Message], request: ModelRequest) -> Reply | str:
        lead_asked.append(1)
        return "went on" if _turns(messages) else Reply(calls=(("p1", "worker", {"task": "step"}),))

    parent = Agent(FunctionModel(lead), tools=[child.as_tool("worker", "Steps.")])

    async def first() -> None:
        async for _ in run_stream(parent, "go", state=state, store=runs, signal=signal):
            pass

    asyncio.run(first())
    assert state.status == "interrupted"
    # As a crash would leave it: the parent's record of its child a reference to the child's run.
    copy = RunState.model_validate(state.model_dump(mode="json"))
    record = children(copy)["p1"]
    children(copy)["p1"] = {key: record[key] for key in ("run_id", "cost_usd", "turns", "status", "ext")} | {
        "saved_apart": True,
        "status": "running",
    }
    asked = len(lead_asked)
    result = run_sync(parent, None, state=copy)
    assert result.status == "failed"
    assert result.reason is not None and "resume it with that store" in result.reason
    assert record["run_id"] in result.reason
    assert len(lead_asked) == asked


def test_without_a_store_a_child_s_record_grows_by_its_new_messages_only(monkeypatch: pytest.MonkeyPatch) -> None:
    """Without a store the child's state is kept whole inside its parent's record; each step
    serialised all its messages again (a child of 480 steps: 5.9 times its time alone). Now each
    step adds the messages new since the last, and the record is still the child's whole state."""
    dumped: list[int] = []
    plain_dump = RunState.model_dump

    def counting(self: RunState, **kwargs: Any) -> dict[str, Any]:
        exclude, include = kwargs.get("exclude") or (), kwargs.get("include")
        if "messages" not in exclude and (include is None or "messages" in include):
            dumped.append(len(self.messages))
        return plain_dump(self, **kwargs)

    monkeypatch.setattr(RunState, "model_dump", counting)
    state = RunState()
    records: list[tuple[dict[str, Any], dict[str, Any]]] = []

    @tool(read_only=True)
    def step(ctx: ToolContext, n: int) -> str:
        """One step of the work."""
        records.append((copy.deepcopy(children(state)["p1"]), plain_dump(ctx.state, mode="json")))
        return f"step {n} done"

    child = Agent(_stepping_child(40), tools=[step])
    lead = FunctionModel(
        lambda m, r: "all stepped" if _turns(m) else Reply(calls=(("p1", "worker", {"task": "step"}),))
    )
    result = run_sync(Agent(lead, tools=[child.as_tool("worker", "Steps.")]), "go", state=state)
    assert result.status == "completed" and len(records) == 40
    # What the parent held while the child ran was its whole state as last saved (before the step's call).
    for record, live in records:
        assert record["messages"] == live["messages"] and record["run_id"] == live["run_id"]
    # 40 steps of 2 messages: about 80 messages serialised in all, not 40 x 40.
    assert sum(dumped) < 400, sum(dumped)
