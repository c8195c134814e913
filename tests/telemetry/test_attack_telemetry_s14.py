"""Attacks on "a thumbs-down leads to the run that earned it" and "no secrets in logs" (session
14): a collector, or what stands where it should be, that takes the connection and then does not
take the spans: it redirects, it answers 500 or 413, it answers in something that is not HTTP (a
gRPC port), its TLS fails. Each drops the batch with one warning that names tether, the endpoint
(without the token in its query) and what to check; none is retried with backoff."""

from __future__ import annotations

import asyncio
import logging
import socket
import threading
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from tether.errors import ConfigError
from tether.telemetry import Telemetry
from tether.testing.otlp import OtlpReceiver

TOKEN = "sk-test-0123456789abcdef0123456789abcdef"  # a backend's token, in the endpoint's query


class _Answering:
    """A real HTTP server on loopback where the collector should be, answering every export with
    ``status`` and ``headers``."""

    def __init__(self, status: int, headers: dict[str, str] | None = None) -> None:
        answering = self
        self.posts = 0

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                self.rfile.read(int(self.headers.get("content-length", 0)))
                answering.posts += 1
                self.send_response(status)
                for name, value in (headers or {}).items():
                    self.send_header(name, value)
                self.send_header("content-length", "0")
                self.end_headers()

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.server.server_port
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


class _Raw:
    """A TCP server on loopback that answers every connection with ``answer`` bytes and closes it:
    an OTLP/gRPC port (HTTP/2 frames) or anything else that is not an HTTP/1.1 server."""

    def __init__(self, answer: bytes) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.port = self.sock.getsockname()[1]
        self.connections = 0
        threading.Thread(target=self._serve, args=(answer,), daemon=True).start()

    def _serve(self, answer: bytes) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.connections += 1
            try:
                conn.recv(65536)
                conn.sendall(answer)
            except OSError:
                pass
            conn.close()

    def close(self) -> None:
        self.sock.close()


@pytest.fixture
def told(caplog: pytest.LogCaptureFixture) -> Iterator[Callable[[], list[str]]]:
    """What tether and OpenTelemetry logged, each record as its text."""
    caplog.set_level(logging.INFO)

    def said() -> list[str]:
        return [r.getMessage() for r in caplog.records if r.name.startswith(("tether.telemetry", "opentelemetry"))]

    yield said


def _export_runs(endpoint: str, runs: int = 1) -> None:
    """``runs`` run spans, each flushed on its own, as one command after another sends them."""
    telemetry = Telemetry(endpoint)
    try:
        for _ in range(runs):
            telemetry.tracer().close()
            telemetry.flush(10)
    finally:
        telemetry.shutdown()


@pytest.mark.parametrize(
    ("status", "headers", "words"),
    [
        (  # an http:// endpoint whose server moved to https://
            308,
            {"location": f"https://collector.example.com/v1/traces?api_key={TOKEN}"},
            "it answered 308 Permanent Redirect, pointing to https://collector.example.com/v1/traces; "
            "set the endpoint to that URL",
        ),
        (307, {}, "it answered 307 Temporary Redirect"),
        (500, {}, "it answered 500 Internal Server Error"),
    ],
)
def test_a_collector_that_redirects_or_fails_says_so_once_and_the_spans_are_not_counted_sent(
    status: int, headers: dict[str, str], words: str, told: Callable[[], list[str]]
) -> None:
    """A redirect was taken for spans received (the exporter follows none and counts a 3xx as
    sent): every span lost, not a word said. A 500 printed OpenTelemetry's "Failed to export spans
    batch code: 500, reason: Internal Server Error" for every batch, naming neither tether nor the
    endpoint. Now one warning says who answered what, and the collector is tried again later."""
    collector = _Answering(status, headers)
    endpoint = f"http://127.0.0.1:{collector.port}/v1/traces?api_key={TOKEN}"
    try:
        _export_runs(endpoint, runs=2)
    finally:
        collector.close()
    said = told()
    assert collector.posts == 1, said  # the second run's batch waits for the retry period
    (warning,) = said
    assert warning == (
        f"telemetry: no spans taken by the OTLP collector at http://127.0.0.1:{collector.port}/v1/traces "
        f"({words}); its spans are dropped until it answers (tried again every 30 s). The runs are not affected."
    )


def test_a_batch_too_big_for_the_collector_costs_that_batch_only(told: Callable[[], list[str]]) -> None:
    """413 is about one batch (a run with huge tool names, say): the runs after it still reach the
    collector, and one warning says what to raise."""
    collector = _Answering(413)
    try:
        _export_runs(f"http://127.0.0.1:{collector.port}/v1/traces", runs=2)
    finally:
        collector.close()
    assert collector.posts == 2  # the next batch was sent, not held back for 30 s
    (warning,) = told()
    assert (
        "(it answered 413 Request Entity Too Large: the batch was bigger than it takes; raise its request " in warning
    )
    assert warning.endswith("that batch of spans is dropped. The runs are not affected.")


def test_an_otlp_grpc_port_as_the_endpoint_is_named_once_not_retried_for_seconds(
    told: Callable[[], list[str]],
) -> None:
    """The docs' own warning (OTLP/HTTP on 4318, not gRPC on 4317): a gRPC port answers an HTTP/1.1
    request with HTTP/2 frames and closes. The exporter took that for a dropped connection and
    retried with backoff (1 s, 2 s, 4 s), printing "Transient error ('Connection aborted.',
    BadStatusLine('\\x00\\x00...')) ... retrying" each time, and every command's end waited out
    its 3 s. Now: sent once more at once (a pooled connection may have been closed), then one
    warning that says what the endpoint must be."""
    grpc = _Raw(b"\x00\x00\x06\x04\x00\x00\x00\x00\x00\x00\x03\x00\x00\x00\x64\x00\x00\x08\x07\x00\x00\x00\x00")
    try:
        _export_runs(f"http://127.0.0.1:{grpc.port}/v1/traces")
    finally:
        grpc.close()
    said = told()
    assert not [m for m in said if "Transient error" in m or "retrying" in m], said
    (warning,) = said
    assert (
        "(it closed the connection without an HTTP answer: the endpoint must be an OTLP/HTTP receiver, on " in warning
    )
    assert "4317 is OTLP over gRPC" in warning and "tried again every 30 s" in warning
    assert grpc.connections <= 3  # the reachability check, the request and the one sent again at once


def test_a_tls_failure_at_the_collector_does_not_print_the_token_in_its_url(told: Callable[[], list[str]]) -> None:
    """An https:// endpoint that is served over plain HTTP (or whose certificate is refused), its
    backend's token in the query: the exporter retried with backoff, and each "Transient error
    HTTPSConnectionPool(...): Max retries exceeded with url: /v1/traces?api_key=sk-..." warning
    printed the token, on stderr and in the server's log."""
    plain = _Raw(b"HTTP/1.1 400 Bad Request\r\ncontent-length: 0\r\n\r\n")
    try:
        _export_runs(f"https://127.0.0.1:{plain.port}/v1/traces?api_key={TOKEN}")
    finally:
        plain.close()
    said = told()
    assert not [m for m in said if TOKEN in m or TOKEN[:14] in m], said
    (warning,) = said
    assert (
        f"at https://127.0.0.1:{plain.port}/v1/traces (the TLS connection to it failed: check that it speaks" in warning
    )


def test_a_token_read_with_its_line_break_is_sent_and_never_printed(
    receiver: OtlpReceiver, told: Callable[[], list[str]]
) -> None:
    """``headers={"authorization": "Bearer " + Path("token").read_text()}``: the file's last line
    break made every export fail before it was sent, each logging "Invalid leading whitespace,
    reserved character(s), or return character(s) in header value: 'Bearer sk-...\\n'", the token
    in every line. The white space around a value is not sent; the spans arrive."""
    telemetry = Telemetry(receiver.endpoint, headers={"authorization": f"Bearer {TOKEN}\n"})
    try:
        tracer = telemetry.tracer()
        tracer.close()
        assert telemetry.flush(10)
    finally:
        telemetry.shutdown()
    assert not [m for m in told() if TOKEN[:14] in m], told()
    receiver.wait_for(lambda spans: any(s["trace_id"] == tracer.trace_id for s in spans), timeout=10)
    assert any(h.get("authorization") == f"Bearer {TOKEN}" for h in receiver.headers)


@pytest.mark.parametrize(
    "headers",
    [
        {"authorization": f"Bearer {TOKEN}\r\nx-scope-orgid: tenant-1"},  # two headers written as one
        {"authorization": f"Bearer “{TOKEN}”"},  # pasted with typographic quotes
    ],
)
def test_a_header_that_cannot_be_sent_is_a_clear_error_without_the_token(headers: dict[str, str]) -> None:
    """Before: the telemetry was built, and every batch failed to be sent, with an error logged
    each time (for a line break, the header's value, the token in it)."""
    with pytest.raises(ConfigError) as caught:
        Telemetry("http://127.0.0.1:4318/v1/traces", headers=headers)
    assert "the OTLP header 'authorization' ([telemetry.headers], or headers=) has a" in str(caught.value)
    assert TOKEN[:14] not in str(caught.value)


def test_a_served_run_refused_as_it_starts_is_in_its_trace_for_the_thumbs_down_to_find(
    receiver: OtlpReceiver, tmp_path: Path
) -> None:
    """A served run whose extension could not sign in (an MCP server down, a token expired) is
    saved ``failed`` with "the run could not start: ...", and the page shows that answer. Its
    trace had nothing: the run's span was started and never ended, the trace file never written,
    so a thumbs-down on that answer was a feedback span under a run nobody could see."""
    from tether import Agent, RunStore
    from tether.cancel import CancelSignal
    from tether.harness.state import RunState
    from tether.server.runs import drive, run_tracer
    from tether.server.store import TurnRecord
    from tether.sessions import JsonlSessionStore
    from tether.telemetry import trace_id_for
    from tether.testing import FunctionModel
    from tether.tracing import read_trace

    class SignsIn:
        async def start(self) -> None:
            raise RuntimeError("github said 401 Bad credentials")

    telemetry = Telemetry(receiver.endpoint)
    state = RunState(session_id="s1")
    turn = TurnRecord("m1", state.run_id, "s1", "ann", "support", trace_id_for("s1", "m1"), "hi", 0.0)
    emitted: list[tuple[str, dict[str, Any]]] = []
    try:
        asyncio.run(
            drive(
                turn,
                Agent(model=FunctionModel(lambda m, r: "ok"), extensions=[SignsIn()]),
                state,
                "hi",
                {},
                lambda k, d: emitted.append((k, d)),
                CancelSignal(),
                RunStore(tmp_path / "runs"),
                JsonlSessionStore(tmp_path / "sessions", fsync=False),
                lambda t, resumed, cost: run_tracer(tmp_path, telemetry, t, resumed=resumed, cost_usd=cost),
            )
        )
        telemetry.feedback(trace_id=turn.trace_id, score="down", comment="it did nothing")
        assert telemetry.flush(10)
    finally:
        telemetry.shutdown()
    reason = "the run could not start: github said 401 Bad credentials"
    assert emitted[-1][1]["result"]["reason"] == reason
    spans = receiver.wait_for(lambda got: len([s for s in got if s["trace_id"] == turn.trace_id]) >= 2, timeout=10)
    (run,) = [s for s in spans if s["trace_id"] == turn.trace_id and s["name"] == "invoke_agent support"]
    assert run["attributes"]["tether.status"] == "failed" and run["attributes"]["tether.reason"] == reason
    assert run["status"] == "ERROR"
    (feedback,) = [s for s in spans if s["trace_id"] == turn.trace_id and s["name"] == "feedback"]
    assert feedback["parent_span_id"] == run["span_id"]
    (last,) = read_trace(tmp_path / "traces" / f"{state.run_id}.jsonl")[-1:]
    assert last["type"] == "run_stopped" and last["status"] == "failed" and last["reason"] == reason


def test_a_run_approved_after_its_job_was_forgotten_keeps_the_message_s_trace(tmp_path: Path) -> None:
    """Workers: a run that waited for a person longer than ``[dispatch] keep_events_days`` (7 days)
    had its job row pruned; the approval queued its next part anew, without the message's ids, so
    the worker's part had trace id "": with telemetry on, "the run could not start: trace id ''
    is not 32 hex characters", the approval lost; without, its spans in no message's trace.
    Jobs here stands in for the table: a row is made by the first enqueue and kept on the next."""
    from contextlib import nullcontext

    from tether.dispatch.remote import RemoteRuns
    from tether.harness.state import RunState
    from tether.server.store import TurnRecord
    from tether.sessions import JsonlSessionStore
    from tether.telemetry import trace_id_for

    class Jobs:
        def __init__(self) -> None:
            self.rows: dict[str, dict[str, Any]] = {}

        def enqueue(self, *, run_id: str, config: dict[str, Any] | None = None, **job: Any) -> None:
            self.rows.setdefault(run_id, {"config": config or {}}).update(job)  # ON CONFLICT keeps the config

    class Runs:
        def lock(self, run_id: str) -> Any:
            return nullcontext()

        def save(self, state: RunState) -> None:
            pass

    class Dispatcher:
        def enqueue(self, run_id: str) -> None:
            pass

    jobs = Jobs()
    remote = RemoteRuns(
        jobs=jobs,  # type: ignore[arg-type]
        runs=Runs(),
        sessions=JsonlSessionStore(tmp_path / "sessions", fsync=False),
        dispatcher=Dispatcher(),  # type: ignore[arg-type]
    )
    state = RunState(session_id="s1", status="interrupted")
    turn = TurnRecord("m1", state.run_id, "s1", "ann", "support", trace_id_for("s1", "m1"), "delete the logs", 0.0)
    remote.start(turn, "delete the logs", {})
    assert jobs.rows[state.run_id]["config"]["trace_id"] == turn.trace_id
    del jobs.rows[state.run_id]  # pruned: the part ended (waiting for a person) more than 7 days ago
    remote.resume(turn, state, {})
    config = jobs.rows[state.run_id]["config"]
    assert jobs.rows[state.run_id]["kind"] == "continue"
    assert (config["trace_id"], config["message_id"], config["agent"]) == (turn.trace_id, "m1", "support")
