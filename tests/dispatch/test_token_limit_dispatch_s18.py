"""A resume's new token limit reaches the worker that continues the run (external workers), as its
new turn limit and budget do."""

from __future__ import annotations

from typing import Any


def test_a_resumes_token_limit_reaches_the_worker(cluster: Any) -> None:
    """Was: the worker kept only max_turns and max_budget_usd of a resume's changes, so a run
    resumed at the server with {"max_run_tokens": N} went on under its agent's old limit at the
    worker and stopped again at once."""
    c = cluster()
    changes = {"max_turns": 9, "max_budget_usd": 2.0, "max_run_tokens": 5000}
    c.worker.jobs.enqueue(
        run_id="t1", session_id="s1", owner="local", agent="answer", kind="continue", prompt=None,
        chosen={}, changes=changes, config={"message_id": "m1", "trace_id": "t" * 32},
    )  # fmt: skip
    job = c.worker.jobs.get("t1")
    assert job is not None and job.changes == changes
    agent = c.worker._agent(job)
    assert (agent.max_turns, agent.max_budget_usd, agent.max_run_tokens) == (9, 2.0, 5000)
