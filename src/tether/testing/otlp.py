"""A real OTLP/HTTP trace receiver on loopback, for tests: point :class:`tether.telemetry.Telemetry`
(or any OpenTelemetry exporter) at ``receiver.endpoint`` and read back what arrived.

It serves ``POST /v1/traces`` with a protobuf ``ExportTraceServiceRequest`` body (plain or gzip,
as ``Content-Encoding`` says) and answers an empty ``ExportTraceServiceResponse``, as a collector
does. Needs ``opentelemetry-proto`` (``pip install "tether[otel]"``)::

    with OtlpReceiver() as receiver:
        telemetry = Telemetry(receiver.endpoint)
        ...
        telemetry.flush()
        spans = receiver.spans()
"""

from __future__ import annotations

import gzip
import threading
import time
import zlib
from collections.abc import Callable, Iterable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, TypedDict

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
from opentelemetry.proto.trace.v1.trace_pb2 import Span, Status

__all__ = ["OtlpReceiver", "ReceivedEvent", "ReceivedSpan"]

_STATUS = {Status.STATUS_CODE_UNSET: "UNSET", Status.STATUS_CODE_OK: "OK", Status.STATUS_CODE_ERROR: "ERROR"}


class ReceivedEvent(TypedDict):
    name: str
    time_ns: int
    attributes: dict[str, Any]


class ReceivedSpan(TypedDict):
    """One span as it arrived; ids are lowercase hex, ``parent_span_id`` is "" for a root span."""

    name: str
    trace_id: str
    span_id: str
    parent_span_id: str
    start_ns: int
    end_ns: int
    attributes: dict[str, Any]
    events: list[ReceivedEvent]
    status: str  # UNSET | OK | ERROR
    status_message: str
    resource: dict[str, Any]
    scope: str


class OtlpReceiver:
    """An OTLP/HTTP collector stand-in on 127.0.0.1 (a free port); a context manager."""

    def __init__(self) -> None:
        self.requests: list[ExportTraceServiceRequest] = []
        self.headers: list[dict[str, str]] = []  # each export request's HTTP headers (names lowercase)
        self._lock = threading.Lock()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(self))
        self._server.daemon_threads = True
        self._thread: threading.Thread | None = None

    @property
    def endpoint(self) -> str:
        """The full traces URL, ``http://127.0.0.1:PORT/v1/traces``."""
        return f"http://127.0.0.1:{self._server.server_address[1]}/v1/traces"

    def start(self) -> OtlpReceiver:
        if self._thread is None:
            self._thread = threading.Thread(target=self._server.serve_forever, name="otlp-receiver", daemon=True)
            self._thread.start()
        return self

    def close(self) -> None:
        if self._thread is not None:
            self._server.shutdown()
            self._thread.join()
            self._thread = None
        self._server.server_close()

    def __enter__(self) -> OtlpReceiver:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _received(self, request: ExportTraceServiceRequest, headers: dict[str, str]) -> None:
        with self._lock:
            self.requests.append(request)
            self.headers.append(headers)

    def clear(self) -> None:
        with self._lock:
            self.requests.clear()
            self.headers.clear()

    def spans(self) -> list[ReceivedSpan]:
        """Every span received so far, in arrival order."""
        with self._lock:
            requests = list(self.requests)
        out: list[ReceivedSpan] = []
        for request in requests:
            for resource_spans in request.resource_spans:
                resource = _attributes(resource_spans.resource.attributes)
                for scope_spans in resource_spans.scope_spans:
                    out.extend(_span(s, resource, scope_spans.scope.name) for s in scope_spans.spans)
        return out

    def wait_for(self, predicate: Callable[[list[ReceivedSpan]], bool], timeout: float = 10.0) -> list[ReceivedSpan]:
        """The spans once ``predicate(spans)`` holds; AssertionError after ``timeout`` seconds."""
        deadline = time.monotonic() + timeout
        while True:
            spans = self.spans()
            if predicate(spans):
                return spans
            if time.monotonic() > deadline:
                raise AssertionError(
                    f"the receiver did not get the expected spans within {timeout} s; it has "
                    f"{[s['name'] for s in spans]}"
                )
            time.sleep(0.02)


def _handler(receiver: OtlpReceiver) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            if self.path.split("?", 1)[0] != "/v1/traces":
                self._reply(404, b"not found", "text/plain")
                return
            body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            try:
                request = ExportTraceServiceRequest.FromString(_decode(body, self.headers.get("Content-Encoding")))
            except Exception as exc:  # a body that is not an export request: the client's fault
                self._reply(400, f"cannot decode the export request: {exc}".encode(), "text/plain")
                return
            receiver._received(request, {k.lower(): v for k, v in self.headers.items()})
            self._reply(200, ExportTraceServiceResponse().SerializeToString(), "application/x-protobuf")

        def _reply(self, status: int, body: bytes, content_type: str) -> None:
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: Any) -> None:
            pass  # quiet: a test's output is for its failures

    return Handler


def _decode(body: bytes, encoding: str | None) -> bytes:
    encoding = (encoding or "").strip().lower()
    if encoding == "gzip":
        return gzip.decompress(body)
    if encoding == "deflate":
        return zlib.decompress(body)
    if encoding not in ("", "identity"):
        raise ValueError(f"unsupported Content-Encoding {encoding!r}")
    return body


def _span(span: Span, resource: dict[str, Any], scope: str) -> ReceivedSpan:
    return ReceivedSpan(
        name=span.name,
        trace_id=span.trace_id.hex(),
        span_id=span.span_id.hex(),
        parent_span_id=span.parent_span_id.hex(),
        start_ns=span.start_time_unix_nano,
        end_ns=span.end_time_unix_nano,
        attributes=_attributes(span.attributes),
        events=[
            ReceivedEvent(name=e.name, time_ns=e.time_unix_nano, attributes=_attributes(e.attributes))
            for e in span.events
        ],
        status=_STATUS.get(span.status.code, str(span.status.code)),
        status_message=span.status.message,
        resource=resource,
        scope=scope,
    )


def _attributes(pairs: Iterable[KeyValue]) -> dict[str, Any]:
    return {pair.key: _value(pair.value) for pair in pairs}


def _value(value: AnyValue) -> Any:
    kind = value.WhichOneof("value")
    if kind == "array_value":
        return [_value(v) for v in value.array_value.values]
    if kind == "kvlist_value":
        return _attributes(value.kvlist_value.values)
    return None if kind is None else getattr(value, kind)
