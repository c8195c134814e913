"""A served message's spans reach a real OTLP/HTTP receiver in the trace derived from
session_id:message_id, and a thumbs-down lands in that same trace, under the run's span."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.server.conftest import read_events

KB_AGENTS = Path(__file__).with_name("kb_agents.py")

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


def test_a_knowledge_base_search_records_what_it_retrieved_on_its_tool_span(served: Any) -> None:
    from tether.testing.otlp import OtlpReceiver

    with OtlpReceiver() as receiver:
        s = served(agents_module=KB_AGENTS, config=f'[telemetry]\notlp_endpoint = "{receiver.endpoint}"\n')
        with s.client() as c:
            sid = c.post("/v1/sessions", json={"agent": "kb"}).json()["session_id"]
            posted = c.post(f"/v1/sessions/{sid}/messages", json={"text": "Which seal kit?"}).json()
            events = read_events(c, posted["events"])
            assert events[-1]["result"]["status"] == "completed"
            assert "retrieval" not in {e["event"] for e in events}  # the trace's, not the stream's
            lines = c.get(f"/v1/runs/{posted['run_id']}/trace").json()["lines"]
        s.app.state.core.telemetry.flush()
        spans = receiver.wait_for(lambda got: any(x["name"] == "execute_tool search_kb" for x in got))
    # the trace file: which chunks, from where, with what score, in rank order; no text
    found = next(x for x in lines if x["type"] == "retrieval")
    assert found["call_id"] == "c1" and found["tool_name"] == "search_kb" and found["mode"] == "hybrid"
    hits = found["hits"]
    assert hits[0]["document"] == "valves.md" and hits[0]["start_line"] <= 3 <= hits[0]["end_line"]
    assert [h["score"] for h in hits] == sorted((h["score"] for h in hits), reverse=True)
    assert set(hits[0]) == {"chunk_id", "document", "start_line", "end_line", "score"}
    assert "SK-77" not in str(found)
    # the tool's span carries the same, as attributes
    span = next(x for x in spans if x["name"] == "execute_tool search_kb")
    attrs = span["attributes"]
    assert attrs["gen_ai.tool.call.id"] == "c1" and attrs["tether.retrieval.mode"] == "hybrid"
    assert attrs["tether.retrieval.count"] == len(hits)
    assert list(attrs["tether.retrieval.chunk_ids"]) == [h["chunk_id"] for h in hits]
    assert list(attrs["tether.retrieval.documents"]) == [h["document"] for h in hits]
    assert list(attrs["tether.retrieval.lines"]) == [f"{h['start_line']}-{h['end_line']}" for h in hits]
    assert list(attrs["tether.retrieval.scores"]) == pytest.approx([h["score"] for h in hits])
    assert "SK-77" not in str(attrs)


@pytest.mark.parametrize("run_processes", [None, 1])
def test_an_approved_served_runs_chat_spans_add_up_to_what_it_cost(served: Any, run_processes: int | None) -> None:
    """Summing tether.cost_usd over a trace's chat spans gives what the run cost, for a served run
    resumed by an approval too (in the server's process or a run process): the resumed part's first
    chat span carried the cost of everything before it."""
    from tests.server.test_api import _waiting_run, finish
    from tether.testing.otlp import OtlpReceiver

    with OtlpReceiver() as receiver:
        s = served(config=f'[telemetry]\notlp_endpoint = "{receiver.endpoint}"\n', run_processes=run_processes)
        with s.client() as c:
            run_id, events, run = _waiting_run(c)
            asked = next(e for e in events if e["event"] == "approval_required")
            decision = {"call_id": asked["call_id"], "args_hash": asked["args_hash"], "approve": True}
            assert c.post(f"/v1/runs/{run_id}/decision", json=decision).status_code == 202
            result = finish(c, run_id, after=events[-1]["id"])[-1]["result"]
        assert result["status"] == "completed"
        s.app.state.core.telemetry.flush()
        spans = receiver.wait_for(lambda got: sum(x["name"].startswith("chat") for x in got) >= result["turns"])
        chats = [x for x in spans if x["name"].startswith("chat") and x["trace_id"] == run["trace_id"]]
        assert len(chats) == result["turns"]
        assert sum(x["attributes"]["tether.cost_usd"] for x in chats) == pytest.approx(result["cost_usd"])
