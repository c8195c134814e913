"""A served message's spans reach a real OTLP/HTTP receiver in the trace derived from
session_id:message_id, and a thumbs-down lands in that same trace, under the run's span."""

from __future__ import annotations

from typing import Any

import pytest

from tests.server.conftest import read_events

pytest.importorskip("fastapi")
pytest.importorskip("opentelemetry.sdk")


def test_feedback_lands_in_the_trace_of_the_run_that_earned_it(served: Any) -> None:
    from tether.telemetry import trace_id_for
    from tether.testing.otlp import OtlpReceiver

    with OtlpReceiver() as receiver:
        s = served(config=f'[telemetry]\notlp_endpoint = "{receiver.endpoint}"\n')
        with s.client() as c:
            sid = c.post("/v1/sessions", json={"agent": "plan"}).json()["session_id"]
            posted = c.post(f"/v1/sessions/{sid}/messages", json={"text": "timeout?", "message_id": "m-42"}).json()
            assert posted["trace_id"] == trace_id_for(sid, "m-42")
            read_events(c, posted["events"])
            c.post("/v1/messages/m-42/feedback", json={"score": "down", "comment": "wrong worker"})
        s.app.state.core.telemetry.flush()
        spans = receiver.wait_for(lambda got: any(x["name"] == "feedback" for x in got))
        in_trace = [x for x in spans if x["trace_id"] == posted["trace_id"]]
        root = next(x for x in in_trace if x["name"].startswith("invoke_agent"))
        assert root["attributes"]["tether.message_id"] == "m-42"
        assert root["attributes"]["tether.run_id"] == posted["run_id"]
        assert root["attributes"]["gen_ai.agent.name"] == "plan"
        assert sum(x["name"].startswith("chat") for x in in_trace) == 3
        assert sum(x["name"].startswith("execute_tool") for x in in_trace) == 2
        feedback = next(x for x in in_trace if x["name"] == "feedback")
        assert feedback["parent_span_id"] == root["span_id"]
        assert feedback["attributes"]["tether.feedback.score"] == "down"
        assert feedback["attributes"]["tether.feedback.comment"] == "wrong worker"
        # no user text in any span
        assert not any("timeout?" in str(x["attributes"]) for x in spans)
