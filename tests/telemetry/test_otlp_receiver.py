"""tether.testing.otlp.OtlpReceiver: what an exporter sends arrives, plain or gzip; anything else
is refused as a collector refuses it."""

from __future__ import annotations

import gzip
import urllib.error
import urllib.request

import pytest

from tether.telemetry import Telemetry
from tether.testing.otlp import OtlpReceiver


def post(url: str, body: bytes, **headers: str) -> int:
    request = urllib.request.Request(
        url, data=body, method="POST", headers={"Content-Type": "application/x-protobuf", **headers}
    )
    try:
        with urllib.request.urlopen(request, timeout=5) as response:
            assert response.headers["Content-Type"] == "application/x-protobuf"
            return int(response.status)
    except urllib.error.HTTPError as exc:
        return exc.code


def test_gzip_bodies_are_decoded(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_COMPRESSION", "gzip")
    with OtlpReceiver() as receiver, Telemetry(receiver.endpoint, service_name="gz") as telemetry:
        assert receiver.endpoint.startswith("http://127.0.0.1:") and receiver.endpoint.endswith("/v1/traces")
        tracer = telemetry.tracer(attributes={"tether.run_id": "run_x", "tether.tags": ("a", "b")})
        tracer.close()
        telemetry.flush(5)
        (span,) = receiver.wait_for(lambda spans: len(spans) == 1, timeout=5)
    assert span["name"] == "invoke_agent tether" and span["trace_id"] == tracer.trace_id
    assert span["span_id"] == tracer.span_id and span["parent_span_id"] == ""
    assert span["attributes"]["tether.tags"] == ["a", "b"] and span["resource"]["service.name"] == "gz"
    assert span["start_ns"] <= span["end_ns"] and span["status"] == "UNSET" and span["scope"] == "tether"


def test_other_paths_and_bodies_are_refused() -> None:
    with OtlpReceiver() as receiver:
        root = receiver.endpoint.removesuffix("/v1/traces")
        assert post(receiver.endpoint, b"") == 200  # an empty request is a valid, empty export
        assert post(root + "/v1/metrics", b"") == 404
        assert post(receiver.endpoint, b"\xff\x00 not protobuf") == 400
        assert post(receiver.endpoint, gzip.compress(b"\xff\x00 not protobuf"), **{"Content-Encoding": "gzip"}) == 400
        assert receiver.spans() == []
