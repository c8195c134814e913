"""Provider trouble through the loop, against the scripted server's faults (issue 3, must show 1)."""

from __future__ import annotations

import asyncio
import json
import random
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import scripted_anthropic as anthropic
from tests.conftest import scripted_openai as openai
from tether import Agent, CancelSignal, JsonlTracer, RunState, run, run_stream, run_sync
from tether.errors import RetryableError
from tether.events import Fallback, Retry
from tether.harness.retry import RetryPolicy
from tether.providers.openai_chat import OpenAIChatProvider
from tether.testing import ScriptedServer
from tether.tools.files import FILE_TOOLS
from tether.usage import Price

FAST = RetryPolicy(base_delay_s=0.01, max_delay_s=0.05)
PRICE = Price(input=2.0, output=12.0)


@pytest.fixture
def server() -> Iterator[ScriptedServer]:
    with ScriptedServer() as s:
        yield s


def collect(agent: Agent, prompt: str | None = "Which file mentions a timeout?", **kw: Any) -> list[Any]:
    async def go() -> list[Any]:
        return [e async for e in run_stream(agent, prompt, **kw)]

    return asyncio.run(go())


def chat_requests(server: ScriptedServer) -> list[dict[str, Any]]:
    return [body for path, body, _ in server.received if path != "/_stats"]


@pytest.mark.parametrize("make", [openai, anthropic])
def test_rate_limit_waits_as_told_then_completes(server: ScriptedServer, workspace: Path, make: Any) -> None:
    server.set_faults(["429:retry_after=0.2", "429:retry_after_ms=150"])
    events = collect(Agent(make(server), tools=FILE_TOOLS, cwd=workspace, price=PRICE, retry=FAST))
    retries = [e for e in events if isinstance(e, Retry)]
    assert [r.wait_s for r in retries] == [0.2, 0.15]  # the server's numbers, not our backoff
    assert events[-1].result.status == "completed" and events[-1].result.turns == 3
    assert len(chat_requests(server)) == 5


@pytest.mark.parametrize("fault", ["500", "503", "529", "cut", "error_event"])
def test_transient_failures_are_retried(server: ScriptedServer, workspace: Path, fault: str) -> None:
    server.set_faults([fault, fault])
    make = anthropic if fault in ("529", "error_event") else openai
    events = collect(Agent(make(server), tools=FILE_TOOLS, cwd=workspace, price=PRICE, retry=FAST))
    assert len([e for e in events if isinstance(e, Retry)]) == 2
    assert events[-1].result.status == "completed"


def test_backoff_grows_and_is_capped() -> None:
    policy = RetryPolicy(base_delay_s=1, max_delay_s=30, jitter=0.25)
    err = RetryableError("x")
    rng = random.Random(7)
    waits = [policy.delay(n, err, rng) for n in range(1, 9)]
    assert all(0.75 * min(30, 2 ** (n - 1)) <= w <= min(30, 1.25 * 2 ** (n - 1)) for n, w in enumerate(waits, 1))
    assert max(waits) <= 30
    assert policy.delay(1, RetryableError("x", retry_after=45)) == 45  # the server's wait is honoured
    assert policy.delay(1, RetryableError("x", retry_after=3600)) is None  # ... up to a limit


def test_retries_give_up_and_fail_with_the_reason(server: ScriptedServer, workspace: Path) -> None:
    server.set_faults(["503"] * 4)
    r = run_sync(Agent(openai(server), tools=FILE_TOOLS, cwd=workspace, retry=FAST), "q")
    assert r.status == "failed" and "503" in (r.reason or "") and "4 attempts" in (r.reason or "")


def test_auth_error_fails_at_once_after_one_request(
    server: ScriptedServer, workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    server.set_faults(["401"])
    monkeypatch.setenv("OPENAI_API_KEY", "sk-very-secret-123")
    provider = OpenAIChatProvider(base_url=server.base_url)
    provider.model_id = "plan"  # type: ignore[attr-defined]
    trace_dir = workspace.parent / "traces"
    r = run_sync(Agent(provider, tools=FILE_TOOLS, cwd=workspace, retry=FAST), "q", tracer=JsonlTracer(trace_dir))
    assert r.status == "failed" and "OPENAI_API_KEY" in (r.reason or "")
    assert len(chat_requests(server)) == 1
    assert "sk-very-secret" not in (r.reason or "")
    assert "sk-very-secret" not in "".join(p.read_text() for p in trace_dir.glob("*.jsonl"))


def test_stream_cut_after_text_is_not_replayed(server: ScriptedServer, workspace: Path) -> None:
    server.set_faults(["cut_after_text"])
    r = run_sync(Agent(openai(server, "hello"), retry=FAST), "hi")
    assert r.status == "failed" and "not retried" in (r.reason or "")
    assert len(chat_requests(server)) == 1


def test_malformed_chunk_fails_cleanly(server: ScriptedServer) -> None:
    server.set_faults(["malformed"])
    state = RunState()
    r = run_sync(Agent(openai(server, "hello"), retry=FAST), "hi", state=state)
    assert r.status == "failed" and "malformed" in (r.reason or "") and state.turns == 0


def test_context_overflow_compacts_and_retries_once(server: ScriptedServer, workspace: Path) -> None:
    server.set_faults(["overflow"])
    state = RunState()
    r = run_sync(Agent(openai(server), tools=FILE_TOOLS, cwd=workspace, retry=FAST), "q", state=state)
    assert r.status == "completed"  # nothing to trim on turn 1, but one more try succeeded
    assert len(chat_requests(server)) == 4

    server.set_faults([], context_window=1200)
    for i in range(40):  # a listing of ~300 tokens: three of them overflow the window
        (workspace / f"report-{i:03d}-with-a-long-descriptive-name.txt").write_text("x")
    state = RunState()
    r = run_sync(
        Agent(openai(server, "runaway"), tools=FILE_TOOLS, cwd=workspace, max_turns=8, retry=FAST), "q", state=state
    )
    assert r.status == "max_turns_exceeded", r.reason  # overflows were survived by compacting
    summaries = [m for m in state.messages if m.role == "user" and m.summary_turns]
    compactions = [
        e
        for e in collect(
            Agent(openai(server, "runaway"), tools=FILE_TOOLS, cwd=workspace, max_turns=8, retry=FAST), "q"
        )
        if e.type == "compaction"
    ]
    assert compactions and all(c.tokens_after < c.tokens_before for c in compactions)
    assert summaries and r.turns == 8


def test_overflow_twice_in_a_row_fails(server: ScriptedServer, workspace: Path) -> None:
    state = RunState()
    run_sync(Agent(openai(server), tools=FILE_TOOLS, cwd=workspace, max_turns=2), "q", state=state)
    # the call, the summary call (which falls back to trimming), and the one retry all overflow
    server.set_faults(["overflow", "overflow", "overflow"])
    r = run_sync(Agent(openai(server), tools=FILE_TOOLS, cwd=workspace, max_turns=5, retry=FAST), state=state)
    assert r.status == "failed" and "context window" in (r.reason or "")
    assert len(chat_requests(server)) == 3


def test_stall_falls_back_to_another_endpoint(workspace: Path, tmp_path: Path, held_stalls: threading.Event) -> None:
    # The fallback's three replies must each start within the timeout too: a timeout well above a
    # loaded machine's pauses (three test workers on two cores); the stall lasts until the run is over.
    with ScriptedServer(faults=["stall:60"]) as slow, ScriptedServer() as healthy:
        agent = Agent(
            openai(slow),
            tools=FILE_TOOLS,
            cwd=workspace,
            first_token_timeout_s=5.0,
            fallback_models=[anthropic(healthy)],
            price=PRICE,
            prices={"anthropic/plan": PRICE},
        )
        events = collect(agent, tracer=JsonlTracer(tmp_path))
        held_stalls.set()
        (fallback,) = [e for e in events if isinstance(e, Fallback)]
        assert (fallback.from_model, fallback.to_model) == ("openai/plan", "anthropic/plan")
        assert "first token" in fallback.reason
        result = events[-1].result
        assert result.status == "completed" and result.turns == 3
        lines = [json.loads(x) for x in (tmp_path / f"{result.run_id}.jsonl").read_text().splitlines()]
        assert any(x["type"] == "fallback" for x in lines)
        assert [x["model"] for x in lines if x["type"] == "turn"] == ["anthropic/plan"] * 3
        assert len(healthy.received) == 3


def test_primary_failing_after_retries_falls_back(workspace: Path) -> None:
    with ScriptedServer(faults=["503"] * 10) as broken, ScriptedServer() as healthy:
        agent = Agent(openai(broken), tools=FILE_TOOLS, cwd=workspace, retry=FAST, fallback_models=[openai(healthy)])
        events = collect(agent)
        assert len([e for e in events if isinstance(e, Retry)]) == FAST.max_attempts - 1
        assert len([e for e in events if isinstance(e, Fallback)]) == 1
        assert events[-1].result.status == "completed"


def test_stop_during_a_long_retry_wait_stops_at_once(server: ScriptedServer) -> None:
    server.set_faults(["429:retry_after=30"])

    async def go() -> Any:
        signal = CancelSignal()
        asyncio.get_running_loop().call_later(0.3, signal.cancel, "user pressed Stop")
        return await asyncio.wait_for(run(Agent(openai(server, "hello")), "hi", signal=signal), timeout=10)

    r = asyncio.run(go())
    assert r.status == "interrupted" and r.interruption.reason == "user pressed Stop"


def test_usage_missing_from_stream_is_estimated_and_marked(workspace: Path) -> None:
    with ScriptedServer(omit_usage=True) as s:
        events = collect(Agent(openai(s), tools=FILE_TOOLS, cwd=workspace, price=PRICE))
    turns = [e for e in events if e.type == "turn"]
    assert all(t.usage.estimated and t.usage.prompt_tokens > 0 for t in turns)
    assert events[-1].result.status == "completed" and events[-1].result.cost_usd > 0


def test_out_of_quota_falls_back_at_once_without_retrying(workspace: Path) -> None:
    with ScriptedServer(faults=["429_quota"] * 10) as broke, ScriptedServer() as healthy:
        agent = Agent(openai(broke), tools=FILE_TOOLS, cwd=workspace, retry=FAST, fallback_models=[openai(healthy)])
        events = collect(agent)
        assert not [e for e in events if isinstance(e, Retry)], "waiting does not refill an account"
        (fallback,) = [e for e in events if isinstance(e, Fallback)]
        assert "quota" in fallback.reason.lower() or "billing" in fallback.reason.lower()
        assert len(broke.received) == 1
        assert events[-1].result.status == "completed"


@pytest.mark.parametrize("refused", ["401", "404"])
def test_a_key_refused_or_a_model_not_there_falls_back_at_once(refused: str, workspace: Path) -> None:
    """A fallback is there for a model that cannot answer: a key the provider refuses, a model or
    URL it does not have. These failed the run though a fallback was configured."""
    with ScriptedServer(faults=["401"] * 10 if refused == "401" else []) as primary, ScriptedServer() as healthy:
        first = OpenAIChatProvider(base_url=primary.base_url + ("" if refused == "401" else "/retired"), api_key="k")
        first.model_id = "plan"  # type: ignore[attr-defined]
        agent = Agent(first, tools=FILE_TOOLS, cwd=workspace, retry=FAST, fallback_models=[openai(healthy)])
        events = collect(agent)
        (fallback,) = [e for e in events if isinstance(e, Fallback)]
        assert f"HTTP {refused}" in fallback.reason, fallback.reason
        assert not [e for e in events if isinstance(e, Retry)]  # asked once: asking again would not help
        assert refused == "404" or len(chat_requests(primary)) == 1  # (a route it lacks is not recorded)
        assert events[-1].result.status == "completed"
    refused_alone = run_sync(Agent(OpenAIChatProvider(base_url=primary.base_url, api_key="k"), retry=FAST), "q")
    assert refused_alone.status == "failed"  # with no fallback: fails, saying why


def test_an_unknown_price_is_an_unknown_cost_never_zero(
    server: ScriptedServer, workspace: Path, tmp_path: Path
) -> None:
    events = collect(Agent(openai(server), tools=FILE_TOOLS, cwd=workspace), tracer=JsonlTracer(tmp_path))
    result = events[-1].result
    assert result.status == "completed"
    assert result.cost_usd is None and result.unpriced_models == ["openai/plan"]
    assert json.loads(result.model_dump_json())["cost_usd"] is None
    lines = [json.loads(x) for x in (tmp_path / f"{result.run_id}.jsonl").read_text().splitlines()]
    assert all(x["cost_usd"] is None for x in lines if x["type"] in ("turn", "run_stopped"))
    priced = collect(Agent(openai(server), tools=FILE_TOOLS, cwd=workspace, prices={"openai/plan": PRICE}))
    assert priced[-1].result.cost_usd > 0 and priced[-1].result.unpriced_models == []
