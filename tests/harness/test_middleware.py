"""The middleware stack: hook order, the built-in policies, and ending a run from a hook."""

from __future__ import annotations

from typing import Any

from tests.harness.test_crash import assert_pairing
from tether import Agent, RunState, run_sync, tool
from tether.errors import ContextOverflowError
from tether.harness.agent import Stop
from tether.harness.middleware import (
    ContextOverflowCleanup,
    Middleware,
    RunToolCallLimit,
    StripToolHistory,
    SummarizeByMessageCount,
    ToolCallLimitPerTurn,
    ToolOutputTrimmer,
)
from tether.messages import AssistantMessage, ToolMessage, UserMessage
from tether.testing import FunctionModel, Reply, call


@tool(read_only=True)
def ping(n: int = 0) -> str:
    return f"pong {n}"


@tool(read_only=True)
def search(q: str = "") -> str:
    return f"results for {q}"


def turn_of(messages: list[Any]) -> int:
    return sum(isinstance(m, AssistantMessage) for m in messages)


def test_hooks_run_in_the_documented_order() -> None:
    log: list[str] = []

    class Recorder(Middleware):
        def __init__(self, name: str) -> None:
            self.name = name

        async def before_agent(self, ctx: Any) -> None:
            log.append(f"{self.name}.before_agent")

        async def before_model(self, ctx: Any, request: Any) -> Any:
            log.append(f"{self.name}.before_model")
            return request

        async def wrap_model_call(self, ctx: Any, request: Any, call_next: Any) -> Any:
            log.append(f"{self.name}.model>")
            response = await call_next(request)
            log.append(f"{self.name}.model<")
            return response

        async def wrap_tool_call(self, ctx: Any, call: Any, args: Any, call_next: Any) -> Any:
            log.append(f"{self.name}.tool>")
            result = await call_next()
            log.append(f"{self.name}.tool<")
            return result

        async def after_agent(self, ctx: Any, status: str) -> None:
            log.append(f"{self.name}.after_agent:{status}")

    script = {0: call("p1", "ping")}
    fm = FunctionModel(lambda m, r: script.get(turn_of(m), "done"))
    run_sync(Agent(fm, tools=[ping], middleware=[Recorder("A"), Recorder("B")]), "go")
    assert log == [
        "A.before_agent",
        "B.before_agent",
        "A.before_model",
        "B.before_model",
        "A.model>",
        "B.model>",
        "B.model<",
        "A.model<",
        "A.tool>",
        "B.tool>",
        "B.tool<",
        "A.tool<",
        "A.before_model",
        "B.before_model",
        "A.model>",
        "B.model>",
        "B.model<",
        "A.model<",
        "B.after_agent:completed",
        "A.after_agent:completed",
    ]


def test_per_tool_limit_removes_the_tool_but_keeps_always_on() -> None:
    seen: list[set[str]] = []

    def fn(messages: list[Any], request: Any) -> Any:
        seen.append({t.name for t in request.tools})
        t = turn_of(messages)
        return Reply(calls=((f"p{t}", "ping", {"n": t}), (f"s{t}", "search", {"q": str(t)}))) if t < 4 else "done"

    state = RunState()
    r = run_sync(
        Agent(
            FunctionModel(fn),
            tools=[ping, search],
            middleware=[ToolCallLimitPerTurn(limit=2, always_on=frozenset({"search"}))],
        ),
        "go",
        state=state,
    )
    assert r.status == "completed"
    assert seen[:2] == [{"ping", "search"}] * 2 and seen[2] == {"search"}
    refused = [m for m in state.messages if isinstance(m, ToolMessage) and m.name == "ping" and m.status == "error"]
    assert len(refused) == 2 and "its limit" in refused[0].text  # called anyway: answered in words


def test_a_new_user_turn_resets_the_per_tool_count() -> None:
    fm = FunctionModel(lambda m, r: call(f"p{turn_of(m)}", "ping") if turn_of(m) % 3 < 2 else "done")
    state = RunState()
    agent = Agent(fm, tools=[ping], middleware=[ToolCallLimitPerTurn(limit=2)])
    run_sync(agent, "first", state=state)
    run_sync(agent, "second", state=state)
    assert all(m.status != "error" for m in state.messages if isinstance(m, ToolMessage))


def test_run_wide_limit_makes_the_model_answer() -> None:
    offered: list[int] = []

    def fn(messages: list[Any], request: Any) -> Any:
        offered.append(len(request.tools))
        return call(f"c{turn_of(messages)}", "ping") if request.tools else "answer without tools"

    r = run_sync(Agent(FunctionModel(fn), tools=[ping, search], middleware=[RunToolCallLimit(limit=3)]), "go")
    assert r.status == "completed" and r.output == "answer without tools"
    assert offered == [2, 2, 2, 0]


def test_output_trimmer_cuts_and_says_how_to_get_the_rest() -> None:
    @tool(read_only=True)
    def dump() -> str:
        return "x" * 5000

    state = RunState()
    fm = FunctionModel(lambda m, r: call("d1", "dump") if turn_of(m) == 0 else "done")
    run_sync(Agent(fm, tools=[dump], middleware=[ToolOutputTrimmer(max_chars=1000)]), "go", state=state)
    (result,) = [m for m in state.messages if isinstance(m, ToolMessage)]
    assert result.text.startswith("x" * 1000) and "first 1,000 of 5,000 characters" in result.text
    assert len(result.text) < 1300


def test_summarize_by_message_count_keeps_pairs_and_tail() -> None:
    summaries: list[str] = []

    def fn(messages: list[Any], request: Any) -> Any:
        if not request.tools:
            summaries.append(messages[-1].content[0].text)
            return "the user asked for pings"
        t = turn_of(messages) + sum(m.summary_turns or 0 for m in messages if isinstance(m, UserMessage))
        return Reply(text=f"step {t}", calls=((f"c{t}", "ping", {"n": t}),)) if t < 12 else "done"

    state = RunState()
    r = run_sync(
        Agent(FunctionModel(fn), tools=[ping], middleware=[SummarizeByMessageCount(trigger=12, keep=6)]),
        "keep pinging",
        state=state,
    )
    assert r.status == "completed"
    assert summaries and all("pong" not in s and "called ping" not in s for s in summaries)  # tool pairs left out
    assert_pairing(state.messages)
    assert isinstance(state.messages[0], UserMessage) and state.messages[0].summary_turns
    assert not isinstance(state.messages[1], ToolMessage)
    assert r.turns == 13  # the count survived the summaries


def test_overflow_cleanup_strips_tool_history_and_retries_once() -> None:
    sizes: list[int] = []

    def fn(messages: list[Any], request: Any) -> Any:
        sizes.append(len(messages))
        t = len(sizes) - 1  # this model counts its calls
        if t < 3:
            return call(f"c{t}", "ping", {"n": t})
        if any(isinstance(m, ToolMessage) for m in messages[:-2]):
            raise ContextOverflowError("too long")
        return "done"

    seen: list[Any] = []
    fm = FunctionModel(lambda m, r: (seen.append(m), fn(m, r))[1])
    r = run_sync(Agent(fm, tools=[ping], middleware=[ContextOverflowCleanup()], compaction=False), "go")
    assert r.status == "completed"
    assert sizes[-1] < sizes[-2]
    assert "removed from this request" in seen[-1][0].content[0].text  # the model is told, in words


def test_strip_tool_history_after_the_answer() -> None:
    state = RunState()
    fm = FunctionModel(lambda m, r: call("c1", "ping") if turn_of(m) == 0 else "pong it is")
    run_sync(Agent(fm, tools=[ping], middleware=[StripToolHistory()]), "go", state=state)
    assert [m.role for m in state.messages] == ["user", "assistant"]
    assert state.messages[-1].text == "pong it is"  # type: ignore[union-attr]


def test_a_hook_can_end_the_run_with_any_exit() -> None:
    class Guard(Middleware):
        async def wrap_tool_call(self, ctx: Any, call: Any, args: Any, call_next: Any) -> Any:
            if args.get("n") == 13:
                return Stop("interrupted", "13 is not allowed here")
            return await call_next()

    state = RunState()
    fm = FunctionModel(lambda m, r: call("c1", "ping", {"n": 13}))
    r = run_sync(Agent(fm, tools=[ping], middleware=[Guard()]), "go", state=state)
    assert r.status == "interrupted" and r.reason == "13 is not allowed here"
    assert_pairing(state.messages)
    assert "Not run: 13 is not allowed here" in state.messages[-1].text  # type: ignore[union-attr]

    class Gate(Middleware):
        async def before_agent(self, ctx: Any) -> Stop:
            return Stop("failed", "this deployment is read-only today")

    r = run_sync(Agent(fm, tools=[ping], middleware=[Gate()]), "go")
    assert r.status == "failed" and r.turns == 0
