"""Attacks on "a trace that answers why did this run cost forty dollars": calls the run pays for
besides its turns (a guardrail's classifier, a compaction's summary) had no line in the trace and
no span of their own; their cost was put on the next turn's chat span."""

from __future__ import annotations

import json
import logging
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


class _Gateway:
    """A real HTTP server on loopback standing where the collector is, answering every export
    with ``status`` (a gateway whose backend is down: 502; an overloaded collector: 503, 429)."""

    def __init__(self, status: int) -> None:
        import threading
        from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

        gateway = self
        self.posts = 0

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                self.rfile.read(int(self.headers.get("content-length", 0)))
                gateway.posts += 1
                body = b"upstream unavailable"
                self.send_response(status)
                self.send_header("content-length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.endpoint = f"http://127.0.0.1:{self.server.server_port}/v1/traces"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.mark.parametrize(
    ("status", "hint"),
    [
        (503, ""),
        (429, ""),
        (404, "the endpoint must be the full traces URL"),  # otlp_endpoint = "http://localhost:4318"
        (401, "check the token in [telemetry.headers]"),
    ],
)
def test_a_collector_that_answers_busy_or_refuses_is_asked_once_and_named_once(
    status: int, hint: str, logs: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """The collector takes the connection but answers 503 (or 429): the exporter retried each
    batch with backoff, a warning per attempt, and held the command's end its whole 3 s, on every
    run. One that answers 404 (the endpoint without /v1/traces) or 401 (a wrong token) had every
    batch print "Failed to export spans batch code: 404, reason: Not Found", naming neither tether,
    the endpoint nor the fix. Now the batch is dropped at once, one warning says so and what to
    check, and the collector is tried again later."""
    gateway = _Gateway(status)
    try:
        telemetry = Telemetry(gateway.endpoint)
        with caplog.at_level(logging.INFO):
            for _ in range(2):
                result = run_sync(
                    Agent("scripted/plan", tools=FILE_TOOLS, cwd=logs), "timeout?", tracer=telemetry.tracer()
                )
                assert result.status == "completed"
                assert telemetry.flush(5)
            telemetry.shutdown()
    finally:
        gateway.close()
    said = [r.getMessage() for r in caplog.records if r.name.startswith(("tether.telemetry", "opentelemetry"))]
    assert gateway.posts == 1, said  # not retried, and not asked again before its 30 s
    assert not [m for m in said if "Transient error" in m or "retrying" in m or "Failed to export" in m], said
    (warning,) = said
    assert f"it answered {status}" in warning and hint in warning and "The runs are not affected" in warning


def test_tether_run_with_its_collector_s_gateway_down_says_it_in_one_line(tether_home: Path, logs: Path) -> None:
    """A gateway in front of the collector answers 502 while its backend is down: `tether run`
    printed OpenTelemetry's "Transient error Bad Gateway ... retrying" lines, then waited out its
    3 s and said "tether: tether: telemetry: ... did not take the last spans within 3 s"."""
    import os
    import subprocess
    import sys

    gateway = _Gateway(502)
    try:
        tether_home.mkdir(parents=True, exist_ok=True)
        (tether_home / "config.toml").write_text(
            f'[telemetry]\notlp_endpoint = "{gateway.endpoint}"\n', encoding="utf-8"
        )
        env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_") and k != "LLM_BASE_URL"}
        argv = [sys.executable, "-m", "tether", "run", "--model", "scripted/plan", "--cwd", str(logs), "timeout?"]
        out = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=60)
    finally:
        gateway.close()
    assert out.returncode == 0, out.stderr
    told = [line for line in out.stderr.splitlines() if "telemetry" in line or "Gateway" in line]
    assert told == [
        f"tether: telemetry: no spans taken by the OTLP collector at {gateway.endpoint} (it answered 502 Bad "
        "Gateway); its spans are dropped until it answers (tried again every 30 s). The runs are not affected."
    ], out.stderr
    assert gateway.posts == 1


def test_a_run_a_newer_tether_saved_with_a_status_this_one_does_not_know_is_not_called_damaged(
    tether_home: Path, logs: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`tether runs` and `tether show` said of a run whose status this tether does not know (one
    a newer tether added) that its header is damaged: "restore it from a backup or delete" a run
    that is whole. Now they say which status, that the run is kept, and to upgrade."""
    import hashlib

    from tests.cli.conftest import run_main
    from tether.harness.store import _headers

    code, out, err = run_main(
        "run", "--model", "scripted/plan", "--cwd", str(logs), "--json", "timeout?", capsys=capsys
    )
    assert code == 0, err
    run_id = json.loads(out)["run_id"]
    folder = tether_home / "runs" / run_id
    header = {**_headers(folder)[0][0], "status": "paused", "paused_until": 1.5e9}  # what a newer tether wrote
    body = json.dumps(header).encode()
    for slot in ("state.a.json", "state.b.json"):
        (folder / slot).write_bytes(hashlib.sha256(body).hexdigest().encode() + b"\n%d\n" % len(body) + body)
    for args in (("runs",), ("show", run_id)):
        code, out, err = run_main(*args, capsys=capsys)
        assert "damaged" not in err and "delete" not in err, err
        assert "its status 'paused' is not one this tether knows" in err and "upgrade tether" in err, err
    assert _headers(folder)[0][0]["status"] == "paused"  # kept as it is


def test_a_sub_agent_s_classifier_calls_are_in_its_trace_file_and_its_spans(
    telemetry: Telemetry, receiver: OtlpReceiver, tmp_path: Path
) -> None:
    """A sub-agent guarded by a model classifier: what its run writes to the trace only (the
    judge's call, like a knowledge-base search's hits) never left the child's run, which has no
    tracer of its own; its trace file missed the call and its chat span counted the judge's cost."""

    def child(messages: list[Any], request: object) -> AssistantMessage:
        return AssistantMessage(content=(TextPart(text="the child's answer"),), finish_reason="stop")

    def parent(messages: list[Any], request: object) -> AssistantMessage:
        if len(messages) == 1:
            call = ToolCallPart(id="c1", name="helper", arguments=json.dumps({"task": "look"}))
            return AssistantMessage(content=(call,), finish_reason="tool_calls")
        return AssistantMessage(content=(TextPart(text="done"),), finish_reason="stop")

    guard = Guardrail(
        ModelClassifier("judge", model=FunctionModel(_judge, model_id="judge", price=JUDGE_PRICE)), stages=("output",)
    )
    helper = Agent(FunctionModel(child, model_id="kid", price=AGENT_PRICE), middleware=[guard]).as_tool("helper", "h")
    spans_tracer = telemetry.tracer()
    tracer = FanoutTracer(JsonlTracer(tmp_path), spans_tracer)
    result = run_sync(Agent(FunctionModel(parent, price=AGENT_PRICE), tools=[helper]), "go", tracer=tracer)
    assert result.status == "completed", result.reason

    files = {p.stem: read_trace(p) for p in tmp_path.iterdir()}
    (child_id,) = set(files) - {result.run_id}
    assert [line["type"] for line in files[child_id]] == ["side_call", "guardrail", "turn", "run_stopped"]
    assert files[child_id][0]["model"].endswith("judge")

    spans = flushed(telemetry, receiver, spans_tracer.trace_id, 7)
    chats = by_name(spans, "chat")
    assert sorted(c["name"] for c in chats) == ["chat function", "chat function", "chat judge", "chat kid"]
    for chat in chats:
        a = chat["attributes"]
        price = JUDGE_PRICE if chat["name"] == "chat judge" else AGENT_PRICE
        own = price.input * a["gen_ai.usage.input_tokens"] + price.output * a["gen_ai.usage.output_tokens"]
        assert a["tether.cost_usd"] == pytest.approx(own / 1e6), (chat["name"], a)
    assert sum(c["attributes"]["tether.cost_usd"] for c in chats) == pytest.approx(result.cost_usd)


def test_a_sub_agent_s_own_sub_agent_s_trace_file_ends_with_its_stop_line(tmp_path: Path) -> None:
    """docs/harness.md: a child's trace file "ends with its run_stopped line". A grandchild's
    (a sub-agent's sub-agent) stop line went up its parent's run as trace-only and was dropped
    there: its file ended with its last turn, as a run killed mid-way does."""

    def delegate(name: str) -> Any:
        def reply(messages: list[Any], request: object) -> AssistantMessage:
            if len(messages) == 1:
                call = ToolCallPart(id="c1", name=name, arguments=json.dumps({"task": "look"}))
                return AssistantMessage(content=(call,), finish_reason="tool_calls")
            return AssistantMessage(content=(TextPart(text="done"),), finish_reason="stop")

        return reply

    leaf = Agent(FunctionModel(lambda m, r: "the leaf's answer", model_id="leaf")).as_tool("leaf", "l")
    middle = Agent(FunctionModel(delegate("leaf"), model_id="mid"), tools=[leaf]).as_tool("mid", "m")
    result = run_sync(Agent(FunctionModel(delegate("mid")), tools=[middle]), "go", tracer=JsonlTracer(tmp_path))
    assert result.status == "completed"
    files = [read_trace(p) for p in tmp_path.iterdir()]
    assert len(files) == 3
    assert all(lines[-1]["type"] == "run_stopped" and lines[-1]["status"] == "completed" for lines in files), files


def test_read_trace_gives_events_only_as_tether_trace_prints_them(tmp_path: Path) -> None:
    """A trace with lines that are JSON but no event (`123`, `[1]`, `"x"`, `null`: garbage, a file
    spliced in): `tether trace` skips them as damaged, but read_trace (the server's trace endpoint)
    handed them on among the events, where every reader takes a line for a dict."""
    path = tmp_path / "run_x.jsonl"
    event = {"run_id": "run_x", "type": "turn", "turn": 1}
    path.write_text('123\n[1]\n"x"\nnull\n' + json.dumps(event) + "\n", encoding="utf-8")
    assert read_trace(path) == [event]


def test_a_side_calls_span_lasts_as_long_as_the_call(
    telemetry: Telemetry, receiver: OtlpReceiver, logs: Path, tmp_path: Path
) -> None:
    """A judge's call had a span of zero length (started and ended as its reply was counted), so a
    trace showed a run's slow seconds in no span at all; its span and its line say how long it took."""
    import time

    inside: list[float] = []  # when the judge began and ended its answer (the trace's clock)

    def slow_judge(messages: list[Any], request: object) -> AssistantMessage:
        inside.append(time.monotonic())
        time.sleep(0.1)
        inside.append(time.monotonic())
        return _judge(messages, request)

    guard = Guardrail(
        ModelClassifier("judge", model=FunctionModel(slow_judge, model_id="judge", price=JUDGE_PRICE)),
        stages=("input",),
    )
    agent = Agent(FunctionModel(_agent, price=AGENT_PRICE), tools=FILE_TOOLS, cwd=logs, middleware=[guard])
    spans_tracer = telemetry.tracer()
    result = run_sync(agent, "Which file?", tracer=FanoutTracer(JsonlTracer(tmp_path / "traces"), spans_tracer))
    assert result.status == "completed", result.reason
    (path,) = (tmp_path / "traces").iterdir()
    (line,) = [line for line in read_trace(path) if line["type"] == "side_call"]
    # The call was sent before the judge began and over after it ended: it lasted that long at least
    # (measured, not a threshold a machine's speed could cross; the line is rounded to the microsecond).
    answering = inside[1] - inside[0]
    assert line["duration_s"] >= answering - 1e-6
    judged = [s for s in by_name(flushed(telemetry, receiver, spans_tracer.trace_id, 5), "chat judge")]
    (span,) = judged
    assert span["end_ns"] - span["start_ns"] >= int(answering * 1e9) - 2_000
