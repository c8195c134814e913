"""The promise "a run never ends above its budget" attacked (session fourteen): what reaches the
server besides the plan (the request's extra fields), and where spending meets a budget carved for a
sub-agent.

A model here writes all it is allowed: every reply is as long as the request's limit, so a limit
raised past the plan shows as a cost past the budget.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import httpx
import mcp_types as types
import pytest

from tether import Agent, run_sync, tool
from tether.cancel import CancelSignal
from tether.config import load_settings
from tether.connectors._client_side import Asker, ClientSide
from tether.events import Done, Subagent
from tether.events import Guardrail as GuardrailEvent
from tether.guardrails import Guardrail, ModelClassifier
from tether.harness.loop import run_stream
from tether.harness.middleware import Middleware
from tether.harness.state import RunState
from tether.messages import AssistantMessage, TextPart, ToolCallPart, ToolMessage
from tether.providers.anthropic import AnthropicProvider
from tether.providers.base import estimate_usage
from tether.providers.openai_chat import OpenAIChatProvider
from tether.testing import FunctionModel, Reply, ScriptedServer
from tether.tokens import count_tokens, estimate_tokens
from tether.tools.base import ToolContext
from tether.usage import Price, Usage

PRICE = Price(input=10.0, output=10.0)  # dollars per million tokens: 5,000 output tokens are $0.05


def _limit(body: dict[str, Any]) -> int:
    """The reply's limit as a server reads it: the smaller of the fields it was given."""
    given = [body[k] for k in ("max_tokens", "max_completion_tokens") if isinstance(body.get(k), int)]
    return min(given) if given else 100_000


def _openai(sent: list[dict[str, Any]]) -> OpenAIChatProvider:
    def handler(request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content)
        sent.append({k: v for k, v in body.items() if k not in ("messages", "tools")})
        n = _limit(body)
        return httpx.Response(
            200,
            json={
                "id": "r1",
                "object": "chat.completion",
                "model": body["model"],
                "choices": [
                    {"index": 0, "message": {"role": "assistant", "content": "word " * n}, "finish_reason": "length"}
                ],
                "usage": {"prompt_tokens": 50, "completion_tokens": n, "total_tokens": 50 + n},
            },
        )

    return OpenAIChatProvider(base_url="http://127.0.0.1:9/v1", api_key="k", transport=httpx.MockTransport(handler))


def _anthropic(sent: list[dict[str, Any]]) -> AnthropicProvider:
    def handler(request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content)
        sent.append({k: v for k, v in body.items() if k not in ("messages", "tools", "system")})
        n = _limit(body)
        return httpx.Response(
            200,
            json={
                "id": "m1",
                "type": "message",
                "role": "assistant",
                "model": body["model"],
                "content": [{"type": "text", "text": "word " * n}],
                "stop_reason": "max_tokens",
                "usage": {"input_tokens": 50, "output_tokens": n},
            },
        )

    return AnthropicProvider(base_url="http://127.0.0.1:9", api_key="k", transport=httpx.MockTransport(handler))


@pytest.mark.parametrize(
    ("wire", "extra"),
    [
        ("openai", {"max_tokens": 20_000}),
        ("openai", {"max_completion_tokens": 20_000}),  # a reasoning model's field
        ("openai", {"max_tokens": None}),  # "no limit"
        ("anthropic", {"max_tokens": 20_000}),
    ],
)
def test_a_limit_in_request_extra_never_raises_the_one_the_budget_planned(wire: str, extra: dict[str, Any]) -> None:
    """``Agent(request_extra=...)`` was laid over the body after the planned ``max_tokens``, so a
    limit named there replaced the budget's (or, as ``max_completion_tokens``, was read beside it):
    a run of $0.05 ended at $0.20, ``completed``."""
    sent: list[dict[str, Any]] = []
    provider = _openai(sent) if wire == "openai" else _anthropic(sent)
    agent = Agent(
        provider, price=PRICE, max_budget_usd=0.05, request_extra=extra, stream=False, continue_cut_text=False
    )
    result = run_sync(agent, "hi")
    assert result.cost_usd is not None and result.cost_usd <= 0.05, (result.cost_usd, sent)
    assert sent and _limit(sent[0]) < 5_000  # the plan's limit, cut to what $0.05 pays for
    if "max_completion_tokens" in extra:  # sent under the name asked for, alone (o3 refuses max_tokens)
        assert "max_tokens" not in sent[0] and sent[0]["max_completion_tokens"] < 5_000


def test_a_lower_limit_in_request_extra_is_kept() -> None:
    sent: list[dict[str, Any]] = []
    agent = Agent(_openai(sent), price=PRICE, request_extra={"max_completion_tokens": 300}, stream=False)
    run_sync(agent, "hi")
    assert sent[0]["max_completion_tokens"] == 300 and "max_tokens" not in sent[0]


# --- a sub-agent's budget is a promise: calls beside it may not count on it ------------------------


def greedy(request: Any, text: str) -> AssistantMessage:
    """A reply that wrote all it was allowed (its usage says so), its prompt counted as tether
    counts a model whose tokenizer it does not know (a server counting more than that estimate's
    margin is another matter)."""
    message = AssistantMessage(content=(TextPart(text=text),), finish_reason="stop")
    usage = estimate_usage(request, message, estimate_tokens)
    return message.model_copy(update={"usage": usage.model_copy(update={"completion_tokens": request.max_tokens})})


VERDICT = '{"rationale": "a page", "score": 1.0, "category": "ok"}'


def _lead_and_tools() -> tuple[Any, Any]:
    @tool(read_only=True)
    def fetch(url: str) -> str:
        """Fetch a page."""
        return "a page"

    def lead(messages: list[Any], request: Any) -> Reply | str:
        if any(isinstance(m, ToolMessage) for m in messages):
            return "done"
        return Reply(calls=(("c1", "fetch", {"url": "https://x.example/"}), ("c2", "helper", {"task": "work"})))

    return FunctionModel(lead, price=Price(input=0.01, output=0.01)), fetch


def test_a_verdict_beside_a_running_sub_agent_does_not_spend_the_sub_agents_budget() -> None:
    """A sub-agent (``parallel = True``) and a read-only tool ran side by side; a guardrail judged
    the tool's result while the child ran. The child was given nearly all of the parent's $0.10; the
    verdict, checked against what was spent (nothing yet), took $0.09 of it too: the run ended at
    $0.13 of its $0.10."""
    lead, fetch = _lead_and_tools()

    async def scenario() -> Any:
        judged = asyncio.Event()  # the verdict was given, or refused

        async def child(messages: list[Any], request: Any) -> Any:
            await judged.wait()  # spends once the verdict was given: the order that showed it
            return greedy(request, "the work, done")

        helper = Agent(FunctionModel(child, price=PRICE)).as_tool("helper", "Does work.")
        helper.parallel = True
        judge = FunctionModel(lambda m, r: greedy(r, VERDICT), model_id="judge", price=Price(input=10.0, output=300.0))
        guard = Guardrail(ModelClassifier("Allow public pages.", model=judge), stages=("tool_result",))
        parent = Agent(lead, tools=[fetch, helper], middleware=[guard], max_budget_usd=0.10)
        async for event in run_stream(parent, "go"):
            if isinstance(event, GuardrailEvent) and event.stage == "tool_result":
                judged.set()
            if isinstance(event, Done):
                return event.result

    result = asyncio.run(scenario())
    assert result.cost_usd is not None and 0.04 < result.cost_usd <= 0.10, (result.status, result.cost_usd)


def test_a_sub_agent_started_while_a_verdict_is_out_is_not_given_its_worst_case() -> None:
    """The other order: the verdict was asked first, and the child started while it was out. The
    child's budget was what the parent had spent taken from $0.10, the verdict's worst case not
    counted: the two together ended the run at $0.13."""
    lead, fetch = _lead_and_tools()

    async def scenario() -> Any:
        asked, started = asyncio.Event(), asyncio.Event()

        class AfterTheVerdictIsOut(Middleware):
            async def wrap_tool_call(self, ctx: Any, call: Any, args: Any, call_next: Any) -> Any:
                if call.name == "helper":
                    await asked.wait()  # the child starts while the verdict is out
                return await call_next()

        async def verdict(messages: list[Any], request: Any) -> Any:
            asked.set()
            await started.wait()  # answers once the child was given its budget (and started)
            return greedy(request, VERDICT)

        async def child(messages: list[Any], request: Any) -> Any:
            return greedy(request, "the work, done")

        helper = Agent(FunctionModel(child, price=PRICE)).as_tool("helper", "Does work.")
        helper.parallel = True
        judge = FunctionModel(verdict, model_id="judge", price=Price(input=10.0, output=300.0))
        guard = Guardrail(ModelClassifier("Allow public pages.", model=judge), stages=("tool_result",))
        parent = Agent(lead, tools=[fetch, helper], middleware=[AfterTheVerdictIsOut(), guard], max_budget_usd=0.10)
        async for event in run_stream(parent, "go"):
            if isinstance(event, Subagent) and event.status == "started":
                started.set()
            if isinstance(event, Done):
                return event.result

    result = asyncio.run(scenario())
    assert result.cost_usd is not None and 0.08 < result.cost_usd <= 0.10, (result.status, result.cost_usd)


def test_a_sampling_request_beside_a_running_sub_agent_does_not_spend_its_budget(tmp_path: Path) -> None:
    """An MCP server's sampling request, during a read-only tool beside a sub-agent, was checked
    against what the run had spent and had out: the $0.08 promised to the child was not there."""
    with ScriptedServer() as server:
        (tmp_path / "config.toml").write_text(
            f'[endpoints.local]\nkind = "openai"\nbase_url = "{server.base_url}"\nmodels = ["hello"]\n\n'
            '[models."local/hello"]\ninput = 100.0\noutput = 400.0\n'
        )
        side = ClientSide(
            "srv", {"sampling": "allow", "sampling_model": "local/hello"}, Asker(), settings=load_settings(tmp_path)
        )
        message = types.SamplingMessage(role="user", content=types.TextContent(type="text", text="Say hi"))
        ask = types.CreateMessageRequestParams(messages=[message], max_tokens=100)  # ~$0.04 at worst

        def answered(held: float) -> Any:
            state = RunState()
            state.hold("c2", lambda: held)  # a sub-agent beside this call was given that, unspent
            ctx = ToolContext(cwd=tmp_path, signal=CancelSignal(), state=state, budget_left_usd=0.10, call_id="c1")
            side.begin(ctx, "tool")
            try:
                return asyncio.run(side.sampling(ask)), state
            finally:
                side.end(side.calls[0])

        refused, state = answered(0.08)
        assert isinstance(refused, types.ErrorData) and "left of the run's budget" in refused.message
        assert state.cost_usd == 0.0
        allowed, state = answered(0.0)  # nothing promised: the same request fits
        assert isinstance(allowed, types.CreateMessageResult) and state.cost_usd > 0


# --- a reply's limits that are no count --------------------------------------------------------------


@pytest.mark.parametrize(
    ("given", "named"),
    [
        ({"max_tokens": 0}, "max_tokens"),
        ({"max_tokens": -5}, "max_tokens"),
        ({"max_tokens": float("nan")}, "max_tokens"),
        ({"max_tokens": True}, "max_tokens"),
        ({"min_output_tokens": float("nan")}, "min_output_tokens"),
        ({"min_output_tokens": -1}, "min_output_tokens"),
    ],
)
@pytest.mark.parametrize("budget", [0.05, None])
def test_a_reply_limit_that_is_no_count_is_refused_before_anything_is_sent(
    given: dict[str, Any], named: str, budget: float | None
) -> None:
    """``max_tokens=0`` under a budget stopped every run "the remaining budget ($0.050000 of
    $0.050000) cannot pay for another call"; without one it was sent (a Messages request then
    takes its default, 4,096); NaN ended the run ``failed`` with a ValidationError of CallInFlight;
    a NaN ``min_output_tokens`` let every call through, whatever the budget could pay for."""
    from tether.errors import ConfigError

    asked: list[Any] = []
    model = FunctionModel(lambda m, r: asked.append(r.max_tokens) or "ok")
    with pytest.raises(ConfigError, match=f"{named} must be a whole number of tokens"):
        run_sync(Agent(model, max_budget_usd=budget, **given), "hi")
    assert asked == []


# --- what a run is said to have cost: the request lost in a crash too ---------------------------------


def _runs_with_a_lost_request(home: Path) -> tuple[RunState, RunState]:
    """A run whose process died with a request out (its worst case $0.05), and one resumed after
    such a death (the $0.05 counted then, as its budget counts it)."""
    from tether.harness.state import CallInFlight
    from tether.harness.store import RunStore
    from tether.messages import UserMessage

    out = CallInFlight(model="scripted/hello", prompt_tokens=1000, max_tokens=4000, max_cost_usd=0.05)
    stopped = RunState(model="scripted/hello", cost_usd=0.01, call_in_flight=out, messages=[UserMessage.text("hi")])
    resumed = RunState(
        model="scripted/hello",
        status="completed",
        cost_usd=0.02,
        cost_unknown_usd=0.05,
        messages=[UserMessage.text("hi")],
    )
    store = RunStore(home / "runs")
    for state in (stopped, resumed):
        state.config = {"model": "scripted/hello", "prompt": "hi", "cwd": str(home)}
        store.save(state)
    store.close()
    return stopped, resumed


def test_tether_runs_and_show_say_what_a_request_lost_in_a_crash_may_have_cost(
    tether_home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``tether runs`` (table and --json) and ``tether show`` gave the cost counted, $0.010000 and
    $0.020000, for runs whose budget counts $0.05 more: a request out when the process died (which
    the provider bills). Only the summary of the resumed run said it, once."""
    from tests.cli.conftest import run_main

    stopped, resumed = _runs_with_a_lost_request(tether_home)
    code, out, _ = run_main("runs", "--json", capsys=capsys)
    listed = {row["run_id"]: row for row in json.loads(out)}
    assert code == 0 and listed[stopped.run_id]["cost_unknown_usd"] == pytest.approx(0.05)
    assert listed[resumed.run_id]["cost_unknown_usd"] == pytest.approx(0.05)
    assert listed[resumed.run_id]["cost_usd"] == pytest.approx(0.02)
    code, out, err = run_main("runs", capsys=capsys)
    assert "$0.010000+" in out and "$0.020000+" in out and "requests lost when a process died" in err
    for state in (stopped, resumed):
        code, out, _ = run_main("show", state.run_id, capsys=capsys)
        assert code == 0 and "plus up to $0.050000 for requests lost when a process died" in out, out


def test_the_servers_run_view_says_what_a_request_lost_in_a_crash_may_have_cost(tmp_path: Path) -> None:
    """``GET /v1/runs/{id}`` gave ``cost_usd`` alone: a run the server stopped with a request out,
    and a run resumed after that, read as if the request had cost nothing."""
    from types import SimpleNamespace

    from tether.server.app import run_view
    from tether.server.store import TurnRecord

    stopped, resumed = _runs_with_a_lost_request(tmp_path)
    core = SimpleNamespace(
        manager=SimpleNamespace(is_live=lambda run_id: False), settings=SimpleNamespace(home=tmp_path)
    )
    for state in (stopped, resumed):
        turn = TurnRecord("m1", state.run_id, "s1", "local", "default", "t1", "hi", 0.0)
        view = run_view(core, turn, state)  # type: ignore[arg-type]
        assert view["cost_unknown_usd"] == pytest.approx(0.05), view
    live = SimpleNamespace(
        manager=SimpleNamespace(is_live=lambda run_id: True), settings=SimpleNamespace(home=tmp_path)
    )
    turn = TurnRecord("m1", stopped.run_id, "s1", "local", "default", "t1", "hi", 0.0)
    assert run_view(live, turn, stopped)["cost_unknown_usd"] == 0.0  # a live run's request is only out


# --- a reply's own count is the provider's word, unless the reply in hand says otherwise -------------


def test_a_reply_reported_as_one_token_is_charged_as_what_it_wrote() -> None:
    """A server that reported each reply as 1 completion token (usage per chunk: the last chunk's)
    while writing all it was allowed: the run was charged 1 token a reply, planned each next call
    from that, and ended ``budget_exceeded`` saying $0.046 when its replies alone had cost $0.125
    of its $0.05 budget."""
    written: list[int] = []

    @tool(read_only=True)
    def look(n: int) -> str:
        """Look."""
        return "seen"

    def model(messages: list[Any], request: Any) -> AssistantMessage | str:
        n = sum(isinstance(m, ToolMessage) for m in messages)
        if n >= 30:
            return "done"
        text = ("we check every valve and log the reading. " * 300)[: 4 * request.max_tokens]  # no more than allowed
        written.append(count_tokens(text))
        call = ToolCallPart(id=f"c{n}", name="look", arguments=json.dumps({"n": n}))
        usage = Usage(prompt_tokens=0, completion_tokens=1)  # the prompt left out too: estimated
        return AssistantMessage(content=(TextPart(text=text), call), finish_reason="tool_calls", usage=usage)

    price = Price(input=1.0, output=10.0)
    agent = Agent(FunctionModel(model, price=price), tools=[look], max_budget_usd=0.05, dedupe_read_only=False)
    result = run_sync(agent, "go")
    replies = sum(written) * price.output / 1e6  # what the replies cost, the prompts besides
    assert result.cost_usd is not None and replies <= result.cost_usd <= 0.05, (result.cost_usd, replies)
    assert result.status == "budget_exceeded" and result.usage.estimated
