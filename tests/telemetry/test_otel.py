"""tether.telemetry.otel: real runs on the scripted model, exported over OTLP/HTTP to a real
receiver, and the spans read back."""

from __future__ import annotations

import itertools
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import scripted_openai
from tests.telemetry.conftest import PROMPT, by_name, flushed, of_trace
from tether import Agent, run_sync
from tether.config import Settings
from tether.errors import ConfigError, UserError
from tether.harness.retry import RetryPolicy
from tether.telemetry import Telemetry, telemetry_from_settings, trace_id_for
from tether.testing import ScriptedServer
from tether.testing.otlp import OtlpReceiver, ReceivedSpan
from tether.tools.files import FILE_TOOLS

FAST = RetryPolicy(base_delay_s=0.01, max_delay_s=0.05)


@pytest.fixture
def no_otel_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in list(os.environ):
        if name.startswith("OTEL_"):
            monkeypatch.delenv(name)


def every_value(spans: list[ReceivedSpan]) -> str:
    """Every attribute of every span and span event, as one text to search."""
    parts = []
    for s in spans:
        parts.append(json.dumps(s["attributes"]))
        parts.extend(json.dumps(e["attributes"]) for e in s["events"])
    return "\n".join(parts)


# --------------------------------------------------------------------------- one run


def test_a_run_is_one_agent_span_over_its_model_calls_and_tools(
    telemetry: Telemetry, receiver: OtlpReceiver, logs: Path
) -> None:
    trace_id = trace_id_for("session-1", "message-1")
    tracer = telemetry.tracer(
        trace_id=trace_id, attributes={"tether.session_id": "session-1", "tether.message_id": "message-1"}
    )
    result = run_sync(Agent("scripted/plan", tools=FILE_TOOLS, cwd=logs), PROMPT, tracer=tracer)
    assert result.status == "completed" and result.turns == 3
    spans = flushed(telemetry, receiver, trace_id, 6)

    (root,) = [s for s in spans if s["parent_span_id"] == ""]
    chats, tools = by_name(spans, "chat "), by_name(spans, "execute_tool ")
    assert len(spans) == 6 and len(chats) == 3 and len(tools) == 2
    assert root["name"] == "invoke_agent tether" and root["trace_id"] == trace_id
    assert all(s["parent_span_id"] == root["span_id"] for s in chats + tools)
    assert root["resource"]["service.name"] == "tether-tests"
    assert root["attributes"] == {
        "gen_ai.operation.name": "invoke_agent",
        "gen_ai.agent.name": "tether",
        "gen_ai.conversation.id": "session-1",
        "tether.session_id": "session-1",
        "tether.message_id": "message-1",
        "tether.run_id": result.run_id,
        "tether.status": "completed",
        "tether.reason": result.reason,
        "tether.turns": 3,
        "gen_ai.usage.input_tokens": result.usage.prompt_tokens,
        "gen_ai.usage.output_tokens": result.usage.completion_tokens,
        "tether.cost_usd": result.cost_usd,
    }
    assert root["status"] == "UNSET"

    for chat, finish in zip(chats, ["tool_calls", "tool_calls", "stop"], strict=True):
        a = chat["attributes"]
        assert chat["name"] == "chat plan"
        assert (
            a["gen_ai.operation.name"],
            a["gen_ai.provider.name"],
            a["gen_ai.system"],
            a["gen_ai.request.model"],
        ) == ("chat", "scripted", "scripted", "plan")
        assert a["gen_ai.response.finish_reasons"] == [finish] and a["tether.usage_estimated"] is False
    assert sum(c["attributes"]["gen_ai.usage.input_tokens"] for c in chats) == result.usage.prompt_tokens
    assert sum(c["attributes"]["gen_ai.usage.output_tokens"] for c in chats) == result.usage.completion_tokens
    assert sum(c["attributes"]["tether.cost_usd"] for c in chats) == pytest.approx(result.cost_usd)
    assert all(c["attributes"]["tether.cost_usd"] > 0 for c in chats)
    assert "gen_ai.response.time_to_first_chunk" in chats[2]["attributes"]  # the answer streamed text

    assert [
        (t["name"], t["attributes"]["gen_ai.tool.call.id"], t["attributes"]["tether.tool.status"]) for t in tools
    ] == [("execute_tool list_files", "c1", "ok"), ("execute_tool read_file", "c2", "ok")]
    assert all(t["attributes"]["gen_ai.operation.name"] == "execute_tool" and t["status"] == "UNSET" for t in tools)
    # Steps follow each other inside the run: chat, tool, chat, tool, chat.
    steps = sorted(chats + tools, key=lambda s: s["start_ns"])
    assert [s["name"].split()[0] for s in steps] == ["chat", "execute_tool", "chat", "execute_tool", "chat"]
    assert all(a["end_ns"] <= b["start_ns"] for a, b in itertools.pairwise(steps))
    assert root["start_ns"] <= steps[0]["start_ns"] and steps[-1]["end_ns"] <= root["end_ns"]


def test_no_prompt_answer_file_text_or_tool_arguments_in_any_attribute(
    telemetry: Telemetry, receiver: OtlpReceiver, logs: Path
) -> None:
    tracer = telemetry.tracer()
    result = run_sync(Agent("scripted/plan", tools=FILE_TOOLS, cwd=logs), PROMPT, tracer=tracer)
    text = every_value(flushed(telemetry, receiver, tracer.trace_id, 6))
    for secret in ("4111-1111", "timeout?", "errors.log", '"path"', "timed out after", result.output[:20]):
        assert secret not in text, secret


def test_a_run_without_a_trace_id_gets_a_new_random_trace(telemetry: Telemetry) -> None:
    a, b = telemetry.tracer(), telemetry.tracer()
    for t in (a, b):
        t.close()
    assert a.trace_id != b.trace_id and int(a.trace_id, 16) and len(a.trace_id) == 32


def test_trace_id_for_is_deterministic_lowercase_hex(telemetry: Telemetry) -> None:
    tid = trace_id_for("s", "m")
    assert tid == trace_id_for("s", "m") != trace_id_for("s", "m2") != trace_id_for("s:m", "")
    assert len(tid) == 32 and tid == tid.lower() and int(tid, 16) != 0
    for bad in ("xyz", "0" * 32, "A" * 31, "g" * 32):
        with pytest.raises(UserError, match="trace_id_for"):
            telemetry.tracer(trace_id=bad)
        with pytest.raises(UserError, match="trace_id_for"):
            telemetry.feedback(trace_id=bad, score="up")


# --------------------------------------------------------------------------- failures, retries, fallbacks


def test_a_failed_run_is_an_error_and_its_retries_are_events_of_the_call_that_failed(
    telemetry: Telemetry, receiver: OtlpReceiver, logs: Path
) -> None:
    with ScriptedServer(faults=["503"] * 4) as server:
        tracer = telemetry.tracer()
        result = run_sync(Agent(scripted_openai(server), tools=FILE_TOOLS, cwd=logs, retry=FAST), "q", tracer=tracer)
    assert result.status == "failed"
    spans = flushed(telemetry, receiver, tracer.trace_id, 2)
    (root,) = [s for s in spans if not s["parent_span_id"]]
    (chat,) = by_name(spans, "chat")
    assert root["status"] == "ERROR" and root["attributes"]["tether.status"] == "failed"
    assert "503" in root["status_message"] and root["attributes"]["tether.reason"] == result.reason[:300]
    assert chat["status"] == "ERROR" and chat["parent_span_id"] == root["span_id"]
    retries = [e for e in chat["events"] if e["name"] == "retry"]
    assert [e["attributes"]["tether.retry.attempt"] for e in retries] == [1, 2, 3]
    assert all(chat["start_ns"] <= e["time_ns"] <= chat["end_ns"] for e in retries)


def test_a_fallback_and_the_retries_before_it_are_events_of_the_chat_span(
    telemetry: Telemetry, receiver: OtlpReceiver, logs: Path
) -> None:
    with ScriptedServer(faults=["503"] * 10) as broken, ScriptedServer() as healthy:
        agent = Agent(
            scripted_openai(broken), tools=FILE_TOOLS, cwd=logs, retry=FAST, fallback_models=[scripted_openai(healthy)]
        )
        tracer = telemetry.tracer()
        result = run_sync(agent, PROMPT, tracer=tracer)
    assert result.status == "completed"
    first = by_name(flushed(telemetry, receiver, tracer.trace_id, 6), "chat")[0]
    names = [e["name"] for e in first["events"]]
    assert names == ["retry"] * (FAST.max_attempts - 1) + ["fallback"]
    fallback = first["events"][-1]["attributes"]
    assert fallback["tether.fallback.from_model"] == fallback["tether.fallback.to_model"] == "openai/plan"
    assert first["attributes"]["gen_ai.provider.name"] == "openai" and first["status"] == "UNSET"


# --------------------------------------------------------------------------- feedback, sub-agents


def test_feedback_joins_the_trace_under_its_first_run(telemetry: Telemetry, receiver: OtlpReceiver, logs: Path) -> None:
    trace_id = trace_id_for("session-2", "message-9")
    agent = Agent("scripted/plan", tools=FILE_TOOLS, cwd=logs)
    run_sync(agent, PROMPT, tracer=telemetry.tracer(trace_id=trace_id))
    run_sync(agent, PROMPT, tracer=telemetry.tracer(trace_id=trace_id))  # the same message, answered again
    telemetry.feedback(
        trace_id=trace_id, score="down", comment="wrong file", attributes={"tether.message_id": "message-9"}
    )
    spans = flushed(telemetry, receiver, trace_id, 13)
    roots = by_name(spans, "invoke_agent")
    (feedback,) = by_name(spans, "feedback")
    assert len(roots) == 2 and roots[0]["span_id"] != roots[1]["span_id"]
    assert feedback["parent_span_id"] == roots[0]["span_id"]  # derived from the trace id, never stored
    assert feedback["attributes"] == {
        "tether.feedback.score": "down",
        "tether.feedback.comment": "wrong file",
        "tether.message_id": "message-9",
    }
    assert [e["name"] for e in feedback["events"]] == ["feedback"]

    # Another process knows nothing of the first run, and finds the same parent.
    with Telemetry(receiver.endpoint) as other:
        other.feedback(trace_id=trace_id, score="up")
    up = receiver.wait_for(lambda s: len(by_name(of_trace(s, trace_id), "feedback")) == 2)
    assert {f["parent_span_id"] for f in by_name(of_trace(up, trace_id), "feedback")} == {roots[0]["span_id"]}
    assert "tether.feedback.comment" not in by_name(of_trace(up, trace_id), "feedback")[1]["attributes"]
    with pytest.raises(UserError, match="up"):
        telemetry.feedback(trace_id=trace_id, score="meh")


def test_a_resumed_run_does_not_take_the_first_runs_span_id(telemetry: Telemetry, receiver: OtlpReceiver) -> None:
    trace_id = trace_id_for("s", "resumed")
    with Telemetry(receiver.endpoint) as first:
        first.tracer(trace_id=trace_id).close()
    telemetry.tracer(trace_id=trace_id, resumed=True).close()
    roots = flushed(telemetry, receiver, trace_id, 2)
    assert len({r["span_id"] for r in roots}) == 2


def test_a_sub_agent_is_an_agent_span_under_its_tool_call(
    telemetry: Telemetry, receiver: OtlpReceiver, logs: Path
) -> None:
    researcher = Agent("scripted/plan", tools=FILE_TOOLS, cwd=logs).as_tool("researcher", "Reads the logs.")
    tracer = telemetry.tracer()
    result = run_sync(Agent("scripted/delegate", tools=[researcher], cwd=logs), "who timed out?", tracer=tracer)
    assert result.status == "completed"
    spans = flushed(telemetry, receiver, tracer.trace_id, 10)
    (root,) = [s for s in spans if not s["parent_span_id"]]
    (call,) = by_name(spans, "execute_tool researcher")
    (child,) = by_name(spans, "invoke_agent researcher")
    assert call["parent_span_id"] == root["span_id"] and child["parent_span_id"] == call["span_id"]
    mine = [s for s in by_name(spans, "chat") if s["parent_span_id"] == root["span_id"]]
    theirs = [s for s in spans if s["parent_span_id"] == child["span_id"]]
    assert len(mine) == 2 and sorted(s["name"] for s in theirs) == [
        "chat plan",
        "chat plan",
        "chat plan",
        "execute_tool list_files",
        "execute_tool read_file",
    ]
    assert child["attributes"]["tether.status"] == "completed"
    assert [e["attributes"]["tether.status"] for e in root["events"] if e["name"] == "subagent"] == [
        "started",
        "completed",
    ]
    # Each model call's cost is its own: the child's are not counted again in the parent's.
    costs = [s["attributes"]["tether.cost_usd"] for s in by_name(spans, "chat")]
    assert sum(costs) == pytest.approx(result.cost_usd) and len(costs) == 5


# --------------------------------------------------------------------------- configuration


def test_settings_and_the_standard_variables_name_the_endpoint(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, no_otel_env: None
) -> None:
    def endpoint(**table: Any) -> str | None:
        t = telemetry_from_settings(Settings(home=tmp_path, telemetry=table))
        if t is None:
            return None
        t.shutdown()
        return t.endpoint

    assert endpoint() is None
    assert endpoint(otlp_endpoint="http://collector:4318/v1/traces") == "http://collector:4318/v1/traces"
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://base:4318/")
    assert endpoint() == "http://base:4318/v1/traces"
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "http://traces:4318/custom")
    assert endpoint() == "http://traces:4318/custom"
    assert endpoint(otlp_endpoint="http://table:4318/v1/traces") == "http://table:4318/v1/traces"
    monkeypatch.setenv("OTEL_SDK_DISABLED", "true")
    assert endpoint() is None


def test_an_endpoint_without_opentelemetry_installed_says_what_to_install(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setitem(sys.modules, "opentelemetry.exporter.otlp.proto.http.trace_exporter", None)
    with pytest.raises(ConfigError, match=r'pip install "tether\[otel\]"'):
        telemetry_from_settings(Settings(home=tmp_path, telemetry={"otlp_endpoint": "http://127.0.0.1:4318/v1/traces"}))


def test_off_and_costless_when_nothing_is_configured(tmp_path: Path, logs: Path) -> None:
    code = f"""
import sys
from tether import Agent, run_sync
from tether.config import load_settings
from tether.telemetry import telemetry_from_settings
from tether.testing import ScriptedServer
from tether.tools.files import FILE_TOOLS
from tether.tracing import FanoutTracer, JsonlTracer
import tether.cli.run, tether.testing, tether.telemetry.otel

assert telemetry_from_settings(load_settings()) is None
tracer = FanoutTracer(JsonlTracer({str(tmp_path / "traces")!r}))
assert run_sync(Agent("scripted/plan", tools=FILE_TOOLS, cwd={str(logs)!r}), "q", tracer=tracer).status == "completed"
print(sorted(m for m in sys.modules if m.startswith("opentelemetry")))
"""
    env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    env["TETHER_HOME"] = str(tmp_path / "home")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"
