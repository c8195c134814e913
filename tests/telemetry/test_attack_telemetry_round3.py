"""Attacks on the traces and the spans from outside: what a run cost (resumed after an approval,
stopped mid-call), a trace cut short by a crash, a run id or a pipe in the way of the trace file,
text no UTF-8 encoder takes and names of any length, a collector that never answers or sits behind
a proxy, and tokens in the collector's address and header variables."""

from __future__ import annotations

import asyncio
import contextlib
import http.client
import json
import logging
import os
import shutil
import socket
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest

from tests.cli.conftest import run_main
from tests.telemetry.conftest import by_name, flushed, of_trace
from tether import Agent, CancelSignal, RunState, run, run_sync
from tether.errors import UserError
from tether.messages import AssistantMessage, ToolCallPart
from tether.telemetry import Telemetry, trace_id_for
from tether.testing import FunctionModel
from tether.testing.otlp import OtlpReceiver
from tether.tools.files import FILE_TOOLS
from tether.tracing import JsonlTracer, read_trace

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "workspace"


@pytest.fixture
def cli_home(tether_home: Path, monkeypatch: pytest.MonkeyPatch, receiver: OtlpReceiver) -> Path:
    """$TETHER_HOME with telemetry sent to the test receiver, and no provider variables."""
    for name in [
        *(n for n in os.environ if n.startswith("OTEL_")),
        "LLM_BASE_URL",
        "OPENAI_BASE_URL",
        "OPENAI_API_KEY",
        "TETHER_SESSION_STORE",
    ]:
        monkeypatch.delenv(name, raising=False)
    tether_home.mkdir(parents=True, exist_ok=True)
    (tether_home / "config.toml").write_text(f'[telemetry]\notlp_endpoint = "{receiver.endpoint}"\n', encoding="utf-8")
    return tether_home


def _waiting_delete(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> str:
    """A `tether run` that stopped for approval of a delete_file call: its run id."""
    ws = tmp_path / "ws"
    shutil.copytree(EXAMPLES, ws)
    args = ("run", "--model", "scripted/destructive", "--cwd", str(ws), "--json", "Free some disk space.")
    _, out, err = run_main(*args, capsys=capsys)
    first = json.loads(out)
    assert first["status"] == "interrupted", err
    return str(first["run_id"])


def test_an_approved_run_s_chat_spans_add_up_to_what_it_cost(
    cli_home: Path, receiver: OtlpReceiver, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """ "Why did this run cost forty dollars": the docs promise that summing ``tether.cost_usd`` over
    a trace's chat spans gives what the run cost. A run resumed after an approval (another
    process) lost its first model call's cost: the tracer never saw the cost before it."""
    run_id = _waiting_delete(tmp_path, capsys)
    code, out, err = run_main("resume", run_id, "--approve", "--json", capsys=capsys)
    result = json.loads(out)
    assert code == 0 and result["status"] == "completed", err
    spans = of_trace(receiver.spans(), trace_id_for("", run_id))
    chats = by_name(spans, "chat")
    assert len(chats) == result["turns"] == 3
    assert all("tether.cost_usd" in c["attributes"] for c in chats), [c["attributes"] for c in chats]
    assert sum(c["attributes"]["tether.cost_usd"] for c in chats) == pytest.approx(result["cost_usd"])


def test_a_trace_cut_short_by_a_crash_keeps_what_the_resumed_run_writes_after_it(
    cli_home: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A crash mid-write leaves the last line without its newline; the run resumed later appended
    its first line to that torn one, and both were lost (read_trace and `tether trace` skip them)."""
    run_id = _waiting_delete(tmp_path, capsys)
    trace = cli_home / "traces" / f"{run_id}.jsonl"
    before = read_trace(trace)
    with trace.open("ab") as f:
        f.write(b'{"run_id":"' + run_id.encode() + b'","type":"tur')  # what the crash left
    code, out, err = run_main("resume", run_id, "--approve", "--json", capsys=capsys)
    assert code == 0 and json.loads(out)["status"] == "completed", err
    after = read_trace(trace)
    assert after[: len(before)] == before
    written = [line["type"] for line in after[len(before) :]]
    assert written[0] == "decision" and written[-1] == "run_stopped", written
    code, out, err = run_main("trace", run_id, capsys=capsys)
    assert code == 0 and [json.loads(line)["type"] for line in out.splitlines()] == [x["type"] for x in after]
    assert "skipped 1 damaged line" in err and "not a JSON event" in err


def test_text_no_encoder_takes_loses_neither_its_run_s_spans_nor_anyone_else_s(
    telemetry: Telemetry, receiver: OtlpReceiver, logs: Path
) -> None:
    """A lone surrogate reaches Python from a file name that is not UTF-8 (``os.fsdecode``) or
    from half an emoji a page cut off (``\\ud83d`` in JSON). In a failed run's reason it made the
    exporter drop its whole batch: the spans of every other run in it never reached the backend.
    In a feedback comment, the comment was dropped with a traceback in the log."""

    def unreadable(messages: object, request: object) -> str:
        raise ValueError("cannot read " + os.fsdecode(b"/data/caf\xe9.txt"))

    good_id, bad_id = trace_id_for("s-ok", "m-1"), trace_id_for("s-bad", "m-1")
    good = run_sync(
        Agent("scripted/plan", tools=FILE_TOOLS, cwd=logs), "Which file?", tracer=telemetry.tracer(trace_id=good_id)
    )
    bad = run_sync(Agent(FunctionModel(unreadable)), "hi", tracer=telemetry.tracer(trace_id=bad_id))
    assert good.status == "completed" and bad.status == "failed" and "\udce9" in (bad.reason or "")
    telemetry.feedback(trace_id=good_id, score="down", comment="wrong file \ud83d")
    spans = flushed(telemetry, receiver, good_id, 7)
    assert len(by_name(spans, "chat")) == 3
    (feedback,) = by_name(spans, "feedback")
    assert feedback["attributes"]["tether.feedback.comment"] == "wrong file \ufffd"
    (failed,) = by_name(
        of_trace(receiver.wait_for(lambda s: bool(of_trace(s, bad_id)), timeout=5), bad_id), "invoke_agent"
    )
    assert failed["status"] == "ERROR" and "/data/caf\ufffd.txt" in failed["attributes"]["tether.reason"]


def test_a_collector_that_takes_the_connection_and_never_answers_does_not_hold_the_command(
    logs: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A load balancer in front of a collector that is down accepts and never answers. flush(0.5)
    waited out the exporter's own 10 s and said True; shutdown (the end of every `tether run`)
    waited those 10 s too, silently. Now flush says False at its timeout and shutdown lets the
    batch go, with one warning, while the request is still unanswered."""
    with socket.create_server(("127.0.0.1", 0)) as hung:
        endpoint = f"http://127.0.0.1:{hung.getsockname()[1]}/v1/traces"
        telemetry = Telemetry(endpoint)
        run_sync(Agent("scripted/plan", tools=FILE_TOOLS, cwd=logs), "Which file?", tracer=telemetry.tracer())
        assert telemetry.flush(timeout_s=0.5) is False
        with caplog.at_level(logging.WARNING, logger="tether.telemetry"):
            telemetry.shutdown()
        hung.settimeout(5)
        requests = [hung.accept()[0]]  # the reachability check (closed at once), then the export
        hung.setblocking(False)
        with contextlib.suppress(BlockingIOError):
            while True:
                requests.append(hung.accept()[0])
        waiting = [conn for conn in requests if _still_open(conn)]
        assert waiting, "shutdown waited until the exporter gave up"
        for conn in waiting:  # answered at last, so the exporter left behind ends without a retry
            conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
        for conn in requests:
            conn.close()
    (warning,) = [r.getMessage() for r in caplog.records if "did not take the last spans" in r.getMessage()]
    assert endpoint in warning and "The runs are not affected" in warning


def _still_open(conn: socket.socket) -> bool:
    """Whether the client has not closed ``conn`` (what it sent is read and dropped)."""
    conn.setblocking(False)
    try:
        while conn.recv(65536):
            pass
    except BlockingIOError:
        return True
    return False


def test_the_collector_s_address_is_named_without_the_token_it_carries(
    logs: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Some backends take their token in the URL (a password, an ``?api_key=``); the warning that
    the collector cannot be reached printed it on every run's stderr and into the server's log."""
    from tests.server.conftest import unused_port

    with unused_port() as port:  # nothing listens there
        endpoint = f"https://tenant:s3cr3t-token@127.0.0.1:{port}/v1/traces?api_key=sk-otlp-123"
        with caplog.at_level(logging.WARNING, logger="tether.telemetry"), Telemetry(endpoint) as telemetry:
            run_sync(Agent("scripted/plan", tools=FILE_TOOLS, cwd=logs), "Which file?", tracer=telemetry.tracer())
    logged = "\n".join(r.getMessage() for r in caplog.records)
    assert f"cannot reach the OTLP collector at https://tenant:<redacted>@127.0.0.1:{port}/v1/traces " in logged
    assert "s3cr3t" not in logged and "sk-otlp" not in logged


def test_a_call_cut_by_stop_is_a_chat_span_with_what_it_was_charged(
    telemetry: Telemetry, receiver: OtlpReceiver, logs: Path
) -> None:
    """A person presses Stop while the model thinks over a long prompt: the cut call is charged
    to the run (its prompt, estimated), but no chat span held that cost, so the trace's chat spans
    fell short of the run's cost, by the very call that was most likely the expensive one."""
    signal = CancelSignal()

    async def thinks_long(messages: list[Any], request: object) -> Any:
        if len(messages) > 1:  # the second call: the person stops it
            signal.cancel("the person pressed Stop")
            await asyncio.sleep(30)
        return AssistantMessage(
            content=(ToolCallPart(id="c1", name="list_files", arguments="{}"),), finish_reason="tool_calls"
        )

    tracer = telemetry.tracer()
    agent = Agent(FunctionModel(thinks_long), tools=FILE_TOOLS, cwd=logs)
    result = asyncio.run(run(agent, "Which file?", tracer=tracer, signal=signal))
    assert result.status == "interrupted" and result.turns == 1
    spans = flushed(telemetry, receiver, tracer.trace_id, 4)
    chats = by_name(spans, "chat")
    assert len(chats) == 2 and chats[1]["end_ns"] >= chats[0]["end_ns"]
    assert sum(c["attributes"]["tether.cost_usd"] for c in chats) == pytest.approx(result.cost_usd)


def test_a_run_id_that_leads_out_of_the_traces_folder_writes_nothing_there(tmp_path: Path, logs: Path) -> None:
    """The run store refuses ``../x`` as a run id; the trace wrote ``<traces>/../x.jsonl``, a file
    anywhere the id pointed (a RunState built from an id a caller took from a request, say)."""
    traces = tmp_path / "home" / "traces"
    state = RunState(run_id="../../escaped")
    result = run_sync(
        Agent("scripted/plan", tools=FILE_TOOLS, cwd=logs), "Which file?", state=state, tracer=JsonlTracer(traces)
    )
    assert result.status == "completed"  # the trace is a view of the run: the run goes on
    assert not (tmp_path / "escaped.jsonl").exists() and not list(tmp_path.rglob("escaped*"))
    with pytest.raises(UserError, match="not a run id"):
        JsonlTracer(traces).path("../../escaped")


def test_a_model_stuck_repeating_a_tool_name_does_not_make_a_batch_too_big_to_send(
    telemetry: Telemetry, receiver: OtlpReceiver
) -> None:
    """A model that degenerates into repeating itself inside a tool call's name: the name went
    whole into the span's name and gen_ai.tool.name (2 MB per megabyte), and a batch past the
    collector's request limit (4 MB at many backends) is refused whole, every run's spans in it."""
    replies = iter(
        [
            AssistantMessage(
                content=(ToolCallPart(id="c1", name="read_file" * 200_000, arguments="{}"),), finish_reason="tool_calls"
            ),
            "I could not read it.",
        ]
    )
    tracer = telemetry.tracer(attributes={"tether.note": "n" * 100_000})
    result = run_sync(Agent(FunctionModel(lambda messages, request: next(replies))), "Read it.", tracer=tracer)
    telemetry.feedback(trace_id=tracer.trace_id, score="down", comment="c" * 100_000)
    assert result.status == "completed"
    spans = flushed(telemetry, receiver, tracer.trace_id, 5)
    (call,) = by_name(spans, "execute_tool")
    assert call["attributes"]["gen_ai.tool.name"].startswith("read_fileread_file")
    texts = [s["name"] for s in spans] + [v for s in spans for v in s["attributes"].values() if isinstance(v, str)]
    texts += [v for s in spans for e in s["events"] for v in e["attributes"].values() if isinstance(v, str)]
    assert max(len(t) for t in texts) <= 4096


def test_a_header_variable_written_with_a_colon_does_not_print_the_token(
    receiver: OtlpReceiver, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """The docs say the header variables keep a token out of the config file. Written as HTTP
    writes it (``authorization:Bearer ...``), OpenTelemetry's warning quoted the entry, the token
    with it, on every command's stderr."""
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_HEADERS", "x-scope=ops,authorization:Bearer sk-live-SECRET-42")
    with caplog.at_level(logging.WARNING):
        Telemetry(receiver.endpoint).shutdown()
    assert "SECRET" not in caplog.text
    (warning,) = [r.getMessage() for r in caplog.records if "OTEL_EXPORTER_OTLP_HEADERS" in r.getMessage()]
    assert "1 entry that is not name=value" in warning and "authorization=Bearer%20" in warning


@pytest.mark.parametrize(
    ("value", "shown"),
    [
        ("localhost:4318", "'localhost:4318'"),  # no scheme: the collector was looked for on port 80
        ("https://tenant:s3cr3t@collector:99999", "'https://tenant:<redacted>@collector:99999'"),
        ("http://tenant:s3cr3t@collector:http", "'http://tenant:<redacted>@collector:http'"),  # a traceback
    ],
)
def test_an_otlp_endpoint_variable_that_is_no_url_is_a_clear_error(
    value: str,
    shown: str,
    tether_home: Path,
    logs: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    for name in [n for n in os.environ if n.startswith("OTEL_")] + ["LLM_BASE_URL", "OPENAI_BASE_URL"]:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", value)
    code, _, err = run_main("run", "--model", "scripted/plan", "--cwd", str(logs), "Which file?", capsys=capsys)
    assert code == 2 and "Traceback" not in err and "s3cr3t" not in err, err
    assert "OTEL_EXPORTER_OTLP_ENDPOINT must be an http:// or https:// URL with a host" in err and shown in err, err
    assert not (tether_home / "traces").exists() or not list((tether_home / "traces").iterdir())


def test_a_pipe_planted_at_the_trace_is_one_line_that_says_what_to_do_not_a_traceback(
    cli_home: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], caplog: pytest.LogCaptureFixture
) -> None:
    """The run goes on without its trace file, as promised; but `tether resume` printed fifteen
    lines of traceback for a file in the way, the message that says what to do in the middle."""
    run_id = _waiting_delete(tmp_path, capsys)
    trace = cli_home / "traces" / f"{run_id}.jsonl"
    trace.unlink()
    os.mkfifo(trace)
    with caplog.at_level(logging.WARNING, logger="tether.tracing"):
        code, out, err = run_main("resume", run_id, "--reject", "keep it", "--json", capsys=capsys)
    assert code == 0 and json.loads(out)["status"] == "completed", err
    (record,) = [r for r in caplog.records if r.name == "tether.tracing"]
    assert record.exc_info is None and "Traceback" not in caplog.text
    assert "named pipe" in record.getMessage() and "move it away" in record.getMessage()
    assert "its JSONL trace stops here, the run goes on" in record.getMessage()


def test_a_collector_reached_through_the_proxy_the_environment_names_gets_the_spans(
    receiver: OtlpReceiver, logs: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Behind a corporate proxy (HTTP_PROXY / HTTPS_PROXY) the exporter sends through it, but the
    check that the collector accepts connections tried the collector directly, failed, and every
    span was dropped with "cannot reach the OTLP collector"."""
    target = urlsplit(receiver.endpoint)
    forwarded: list[str] = []

    class Proxy(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            forwarded.append(self.path)
            body = self.rfile.read(int(self.headers["content-length"]))
            upstream = http.client.HTTPConnection(str(target.hostname), target.port, timeout=5)
            headers = {k: v for k, v in self.headers.items() if k.lower() not in ("host", "proxy-connection")}
            upstream.request("POST", target.path, body, headers)
            answer = upstream.getresponse()
            data = answer.read()
            self.send_response(answer.status)
            self.send_header("content-length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *args: object) -> None:
            pass

    with ThreadingHTTPServer(("127.0.0.1", 0), Proxy) as proxy:
        threading.Thread(target=proxy.serve_forever, daemon=True).start()
        for name in ("NO_PROXY", "no_proxy", "ALL_PROXY", "all_proxy", "http_proxy"):
            monkeypatch.delenv(name, raising=False)
        monkeypatch.setenv("HTTP_PROXY", f"http://127.0.0.1:{proxy.server_address[1]}")
        endpoint = "http://otel-collector.internal.invalid:4318/v1/traces"  # no such name outside the proxy
        with Telemetry(endpoint) as telemetry:
            tracer = telemetry.tracer()
            run_sync(Agent("scripted/plan", tools=FILE_TOOLS, cwd=logs), "Which file?", tracer=tracer)
        proxy.shutdown()
    assert forwarded and forwarded[0] == endpoint
    assert len(of_trace(receiver.spans(), tracer.trace_id)) == 6
