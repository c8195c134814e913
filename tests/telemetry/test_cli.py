"""``tether run`` with a ``[telemetry]`` table: the run's spans reach the endpoint before the
command ends, in the trace derived from the run id."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from tests.cli.conftest import run_main
from tests.telemetry.conftest import by_name, of_trace
from tether.telemetry import trace_id_for
from tether.testing.otlp import OtlpReceiver


def test_tether_run_exports_its_spans(
    receiver: OtlpReceiver,
    tether_home: Path,
    logs: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    for name in [
        *(n for n in os.environ if n.startswith("OTEL_")),
        "LLM_BASE_URL",
        "OPENAI_BASE_URL",
        "OPENAI_API_KEY",
        "TETHER_SESSION_STORE",
    ]:
        monkeypatch.delenv(name, raising=False)
    tether_home.mkdir(parents=True, exist_ok=True)
    (tether_home / "config.toml").write_text(
        f'[telemetry]\notlp_endpoint = "{receiver.endpoint}"\nservice_name = "tether-cli"\n'
        '[telemetry.headers]\nauthorization = "Bearer test"\n',
        encoding="utf-8",
    )
    code, out, err = run_main(
        "run",
        "--model",
        "scripted/plan",
        "--cwd",
        str(logs),
        "--session",
        "ops",
        "--json",
        "Which file mentions a timeout?",
        capsys=capsys,
    )
    assert code == 0, err
    result = json.loads(out)
    trace_id = trace_id_for("ops", result["run_id"])
    # Shut down before the command returned: everything is there already, no waiting.
    spans = of_trace(receiver.spans(), trace_id)
    (root,) = by_name(spans, "invoke_agent")
    assert len(spans) == 6 and len(by_name(spans, "chat")) == 3 and len(by_name(spans, "execute_tool")) == 2
    assert root["resource"]["service.name"] == "tether-cli"
    assert root["attributes"]["tether.run_id"] == result["run_id"] and root["attributes"]["tether.session_id"] == "ops"
    assert root["attributes"]["gen_ai.usage.input_tokens"] == result["usage"]["prompt_tokens"]
    assert all(h["authorization"] == "Bearer test" for h in receiver.headers[-1:])
    assert (tether_home / "traces" / f"{result['run_id']}.jsonl").exists()  # the JSONL trace as before


def test_a_collector_that_is_not_there_costs_the_run_nothing_and_is_named_once(
    tether_home: Path, logs: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The README's [telemetry] example with nothing listening: no retries with backoff at the
    end of the run (they took it from 3 s to 10 s), no "Transient error" lines, one warning."""
    import subprocess
    import sys

    from tests.server.conftest import unused_port

    with unused_port() as port:  # nothing listens there
        tether_home.mkdir(parents=True, exist_ok=True)
        (tether_home / "config.toml").write_text(
            f'[telemetry]\notlp_endpoint = "http://127.0.0.1:{port}/v1/traces"\n', encoding="utf-8"
        )
        env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_") and k != "LLM_BASE_URL"}
        argv = [sys.executable, "-m", "tether", "run", "--model", "scripted/plan", "--cwd", str(logs)]
        question = "Which file mentions a timeout?"
        out = subprocess.run([*argv, question], env=env, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert "Transient error" not in out.stderr and "retrying" not in out.stderr
    assert out.stderr.count(f"cannot reach the OTLP collector at http://127.0.0.1:{port}/v1/traces") == 1, out.stderr
    assert "The runs are not affected" in out.stderr


def test_the_collector_is_tried_again_once_it_answers(receiver: OtlpReceiver) -> None:
    from opentelemetry.sdk.trace.export import SpanExportResult

    from tether.telemetry.otel import _ReachableOnly

    class Inner:
        calls = 0

        def export(self, spans: object) -> SpanExportResult:
            Inner.calls += 1
            return SpanExportResult.SUCCESS

    from tests.server.conftest import unused_port

    with unused_port() as port:
        down = _ReachableOnly(Inner(), f"http://127.0.0.1:{port}/v1/traces", retry_after_s=0)
        assert down.export([]) == SpanExportResult.FAILURE and Inner.calls == 0  # never asked to retry
    up = _ReachableOnly(Inner(), receiver.endpoint, retry_after_s=0)
    assert up.export([]) == SpanExportResult.SUCCESS and Inner.calls == 1
