"""Attacks on "a trace that answers why did this run cost forty dollars": calls the run pays for
besides its turns (a guardrail's classifier, a compaction's summary) had no line in the trace and
no span of their own; their cost was put on the next turn's chat span."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.telemetry.conftest import by_name, flushed
from tether import Agent, run_sync
from tether.guardrails import Guardrail, ModelClassifier
from tether.messages import AssistantMessage, TextPart, ToolCallPart
from tether.telemetry import Telemetry
from tether.testing import FunctionModel
from tether.testing.otlp import OtlpReceiver
from tether.tools.files import FILE_TOOLS
from tether.tracing import FanoutTracer, JsonlTracer, read_trace
from tether.usage import Price

JUDGE_PRICE = Price(input=15.0, output=60.0)  # a pricey judge in front of a cheap model
AGENT_PRICE = Price(input=0.5, output=1.5)


def _judge(messages: list[Any], request: object) -> AssistantMessage:
    verdict = {"rationale": "fine", "score": 1.0, "category": "ok"}
    return AssistantMessage(content=(TextPart(text=json.dumps(verdict)),), finish_reason="stop")


def _agent(messages: list[Any], request: object) -> AssistantMessage:
    if len(messages) == 1:
        call = ToolCallPart(id="c1", name="list_files", arguments="{}")
        return AssistantMessage(content=(call,), finish_reason="tool_calls")
    return AssistantMessage(content=(TextPart(text="errors.log mentions it"),), finish_reason="stop")


def test_a_guardrail_s_classifier_calls_have_their_own_lines_and_spans_with_their_cost(
    telemetry: Telemetry, receiver: OtlpReceiver, logs: Path, tmp_path: Path
) -> None:
    """A model classifier judged the input, the tool's arguments and the answer: three paid calls
    to an expensive model, charged to the run. The trace file had only the two turns (their tokens
    added up to half the run's), and each chat span's ``tether.cost_usd``, documented as "this
    call's cost", held the judge's calls too: the cheap model looked like what cost the money."""
    guard = Guardrail(
        ModelClassifier("judge", model=FunctionModel(_judge, model_id="judge", price=JUDGE_PRICE)),
        stages=("input", "tool_args", "output"),
    )
    agent = Agent(FunctionModel(_agent, price=AGENT_PRICE), tools=FILE_TOOLS, cwd=logs, middleware=[guard])
    spans_tracer = telemetry.tracer()
    tracer = FanoutTracer(JsonlTracer(tmp_path / "traces"), spans_tracer)
    result = run_sync(agent, "Which file mentions a timeout?", tracer=tracer)
    assert result.status == "completed" and result.turns == 2, result.reason

    (path,) = (tmp_path / "traces").iterdir()
    lines = read_trace(path)
    paid = [line for line in lines if line["type"] in ("turn", "side_call")]
    assert sum(line["prompt_tokens"] for line in paid) == result.usage.prompt_tokens, lines
    assert sum(line["completion_tokens"] for line in paid) == result.usage.completion_tokens
    judged = [line for line in paid if line["type"] == "side_call"]
    assert len(judged) == 3 and all(line["model"].endswith("judge") for line in judged)
    for line in judged:  # what each judging cost, at the judge's price
        own = JUDGE_PRICE.input * line["prompt_tokens"] + JUDGE_PRICE.output * line["completion_tokens"]
        assert line["cost_usd"] == pytest.approx(own / 1e6)

    spans = flushed(telemetry, receiver, spans_tracer.trace_id, 7)
    chats = by_name(spans, "chat")
    assert len(chats) == 5
    for chat in chats:  # each chat span's cost is its own call's, at its own model's price
        a = chat["attributes"]
        price = JUDGE_PRICE if chat["name"] == "chat judge" else AGENT_PRICE
        own = price.input * a["gen_ai.usage.input_tokens"] + price.output * a["gen_ai.usage.output_tokens"]
        assert a["tether.cost_usd"] == pytest.approx(own / 1e6), (chat["name"], a)
    assert sum(c["attributes"]["tether.cost_usd"] for c in chats) == pytest.approx(result.cost_usd)
