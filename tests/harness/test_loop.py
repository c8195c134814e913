"""The loop's behaviour on every scripted scenario and policy, in process."""

from __future__ import annotations

import asyncio
import threading
import warnings
from pathlib import Path
from typing import Any

import pytest

from tether import Agent, CancelSignal, RunState, approve, reject, run, run_stream, run_sync, tool
from tether.errors import ConfigError
from tether.events import Done, ToolProgress, ToolResultEvent, Turn
from tether.harness.agent import Stop, has_tool_call
from tether.messages import ToolMessage, UserMessage
from tether.testing import FunctionModel, Reply, call
from tether.tools.demo import DEMO_TOOLS
from tether.tools.files import FILE_TOOLS


def agent(scenario: str, cwd: Path, **kw: Any) -> Agent:
    return Agent(f"scripted/{scenario}", tools=[*FILE_TOOLS, *DEMO_TOOLS], cwd=cwd, **kw)


def tool_messages(state: RunState) -> list[ToolMessage]:
    return [m for m in state.messages if isinstance(m, ToolMessage)]


def test_plan_completes_in_three_turns_with_growing_prompts(workspace: Path) -> None:
    events: list[Any] = []

    async def go() -> None:
        async for e in run_stream(agent("plan", workspace), "Which file mentions a timeout?"):
            events.append(e)

    asyncio.run(go())
    done = events[-1]
    assert isinstance(done, Done)
    assert done.result.status == "completed"
    assert done.result.turns == 3
    assert "worker 7 timed out after 30000 ms" in done.result.output
    turns = [e for e in events if isinstance(e, Turn)]
    prompts = [t.usage.prompt_tokens for t in turns]
    assert prompts == sorted(prompts) and len(set(prompts)) == 3
    assert done.result.cost_usd == pytest.approx(
        sum(t.usage.prompt_tokens for t in turns) * 2e-6 + sum(t.usage.completion_tokens for t in turns) * 12e-6
    )
    assert all(e.run_id == done.run_id for e in events)
    assert "".join(e.text for e in events if e.type == "text_delta") == done.result.output


def test_runaway_stops_at_turn_cap(workspace: Path) -> None:
    r = run_sync(agent("runaway", workspace, max_turns=20), "go")
    assert r.status == "max_turns_exceeded"
    assert r.turns == 20
    assert r.interruption is not None and r.interruption.type == "max_turns"


def test_runaway_cost_grows_faster_than_turns(workspace: Path) -> None:
    costs = [run_sync(agent("runaway", workspace, max_turns=n), "go").usage.prompt_tokens for n in (20, 40)]
    assert costs[1] > 2.5 * costs[0]  # quadratic growth: each turn resends everything before it


@pytest.mark.parametrize("max_budget", [0.005, 0.01, 0.05])
def test_budget_is_never_exceeded(workspace: Path, max_budget: float) -> None:
    r = run_sync(agent("runaway", workspace, max_turns=None, max_budget_usd=max_budget), "go")
    assert r.status == "budget_exceeded"
    assert r.cost_usd <= max_budget
    assert r.turns > 1
    assert r.interruption is not None and r.interruption.type == "max_budget"


def test_budget_lowers_max_tokens_to_what_remains(workspace: Path) -> None:
    caps: list[int | None] = []

    async def go() -> None:
        async for e in run_stream(agent("runaway", workspace, max_turns=None, max_budget_usd=0.01), "go"):
            if isinstance(e, Turn):
                caps.append(e.max_tokens)

    asyncio.run(go())
    # $0.01 cannot pay for 4096 output tokens at $12/M: every call is capped, ever lower.
    assert all(c is not None and c < 4096 for c in caps)
    assert caps == sorted(caps, reverse=True) and caps[-1] < caps[0]


def test_budget_with_unknown_price_is_a_config_error(workspace: Path) -> None:
    fm = FunctionModel(lambda m, r: "hi")
    fm.price = None  # type: ignore[assignment]
    with pytest.raises(ConfigError, match="price"):
        run_sync(Agent(fm, max_budget_usd=1.0), "hi")


def test_recover_with_default_error_text(workspace: Path) -> None:
    r = run_sync(agent("recover", workspace), "Which file mentions a timeout?")
    assert r.status == "completed"
    assert r.output == "errors.log mentions a timeout."
    assert r.turns == 4


def test_recover_with_an_opaque_error_policy_gives_up(workspace: Path) -> None:
    r = run_sync(agent("recover", workspace, tool_error_text=lambda name, exc: "Error: something failed."), "q")
    assert r.status == "completed"
    assert r.output == "I could not read the file, so I do not know."


def test_fatal_tool_errors_fail_the_run_and_keep_pairing(workspace: Path) -> None:
    state = RunState()
    r = run_sync(agent("recover", workspace, tool_errors_are_fatal=True), "q", state=state)
    assert r.status == "failed"
    assert "timeout.log" in (r.reason or "")
    assert len(tool_messages(state)) == 1 and tool_messages(state)[0].status == "error"


def test_forbidden_read_is_refused_each_time_until_the_cap(workspace: Path) -> None:
    state = RunState()
    r = run_sync(agent("forbidden", workspace, max_turns=12), "read the secrets", state=state)
    assert r.status == "max_turns_exceeded"
    results = tool_messages(state)
    assert len(results) == 12
    assert all(m.status == "error" and "outside the working directory" in m.text for m in results)


def test_repeat_read_only_call_is_answered_from_the_earlier_result(workspace: Path) -> None:
    runs: list[str] = []
    state = RunState()

    @tool(read_only=True, name="read_file")
    def counting_read(path: str) -> str:
        runs.append(path)
        return (workspace / path).read_text()

    r = run_sync(Agent("scripted/repeat", tools=[counting_read], cwd=workspace), "q", state=state)
    assert r.status == "completed"
    assert runs == ["errors.log"]
    second = tool_messages(state)[1]
    assert second.status == "cached" and second.cached_from == "c1"
    assert "Same call as c1" in second.text and "timed out" in second.text


def test_repeat_write_call_runs_every_time(workspace: Path) -> None:
    deleted: list[str] = []

    @tool(name="delete_file")
    def delete(path: str) -> str:
        deleted.append(path)
        return f"deleted {path}"

    r = run_sync(Agent("scripted/repeat_write", tools=[delete], cwd=workspace), "q")
    assert r.status == "completed"
    assert deleted == ["access.log", "access.log"]


def test_a_write_empties_the_read_cache() -> None:
    reads: list[str] = []
    script = {0: call("a", "look"), 1: call("b", "change"), 2: call("c", "look")}

    @tool(read_only=True)
    def look() -> str:
        reads.append("x")
        return f"value {len(reads)}"

    @tool
    def change() -> str:
        return "changed"

    fm = FunctionModel(lambda m, r: script.get(sum(x.role == "assistant" for x in m), "done"))
    r = run_sync(Agent(fm, tools=[look, change]), "q")
    assert r.status == "completed"
    assert len(reads) == 2


def test_bad_calls_become_tool_results(workspace: Path) -> None:
    script = {
        0: Reply(calls=(("u1", "no_such_tool", {}),)),
        1: Reply(calls=(("u2", "read_file", {"path": 7, "start_line": "x"}),)),
        2: Reply(calls=(("u3", "read_file", {}),)),
    }

    def fn(messages: list[Any], request: Any) -> Any:
        turn = sum(m.role == "assistant" for m in messages)
        return script.get(turn, "done")

    state = RunState()
    r = run_sync(Agent(FunctionModel(fn), tools=FILE_TOOLS, cwd=workspace), "q", state=state)
    assert r.status == "completed"
    unknown, wrong_types, missing = tool_messages(state)
    assert "no tool named 'no_such_tool'" in unknown.text and "read_file" in unknown.text
    assert wrong_types.status == "error" and "path" in wrong_types.text and "start_line" in wrong_types.text
    assert "path" in missing.text and "required" in missing.text.lower()


def test_invalid_json_arguments_become_a_tool_result(workspace: Path) -> None:
    from tether.messages import AssistantMessage, ToolCallPart

    def fn(messages: list[Any], request: Any) -> Any:
        if sum(m.role == "assistant" for m in messages) == 0:
            return AssistantMessage(content=(ToolCallPart(id="j1", name="read_file", arguments='{"path": '),))
        return "done"

    state = RunState()
    r = run_sync(Agent(FunctionModel(fn), tools=FILE_TOOLS, cwd=workspace), "q", state=state)
    assert r.status == "completed"
    assert "not valid JSON" in tool_messages(state)[0].text


def test_class_tool_is_validated_against_its_json_schema() -> None:
    class Add:
        name = "add"
        description = "Add two integers."
        input_schema = {
            "type": "object",
            "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
            "required": ["a", "b"],
        }
        read_only = True
        needs_approval = False

        async def execute(self, input: dict[str, Any], ctx: Any) -> str:
            return str(input["a"] + input["b"])

    script = {0: call("x1", "add", {"a": 1}), 1: call("x2", "add", {"a": 1, "b": 2})}
    state = RunState()
    fm = FunctionModel(lambda m, r: script.get(sum(x.role == "assistant" for x in m), "done"))
    run_sync(Agent(fm, tools=[Add()]), "q", state=state)
    bad, good = tool_messages(state)
    assert bad.status == "error" and "'b' is a required property" in bad.text
    assert good.status == "ok" and good.text == "3"


def test_destructive_approve_deletes_and_reports(workspace: Path) -> None:
    state = RunState()
    r = run_sync(agent("destructive", workspace), "free space", state=state)
    assert r.status == "interrupted"
    assert r.interruption is not None and r.interruption.type == "approval"
    assert r.interruption.tool_name == "delete_file" and r.interruption.args == {"path": "access.log"}
    assert (workspace / "access.log").exists()
    approve(state)
    r = run_sync(agent("destructive", workspace), state=state)
    assert r.status == "completed" and r.turns == 3
    assert not (workspace / "access.log").exists()
    assert r.output == "Deleted access.log to free space."


@pytest.mark.parametrize("reason", ["keep the access log for the audit", None])
def test_destructive_reject_is_written_in_words(workspace: Path, reason: str | None) -> None:
    state = RunState()
    run_sync(agent("destructive", workspace), "free space", state=state)
    reject(state, reason=reason)
    r = run_sync(agent("destructive", workspace), state=state)
    assert r.status == "completed"
    assert (workspace / "access.log").exists()
    assert r.output == "I did not delete anything: you declined the deletion."
    result = tool_messages(state)[-1]
    assert result.status == "rejected" and "declined" in result.text
    if reason:
        assert reason in result.text


@pytest.mark.parametrize(
    "decide",
    [
        lambda s, c: reject(s, c, reason="keep it"),  # the order approve has
        lambda s, c: reject(s, reason="keep it"),
        lambda s, c: reject(s, "keep it"),  # the order reject had: deprecated, still understood
        lambda s, c: reject(s, "keep it", c),
    ],
    ids=["call-then-reason", "reason-only", "old-reason", "old-reason-then-call"],
)
def test_reject_takes_approves_order_and_still_understands_its_old_one(workspace: Path, decide: Any) -> None:
    state = RunState()
    run_sync(agent("destructive", workspace), "free space", state=state)
    waiting = state.interruption
    assert waiting is not None and waiting.type == "approval"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # the old order warns (next test)
        decide(state, waiting.call_id)
    assert state.rejected == {waiting.call_id: "keep it"}
    r = run_sync(agent("destructive", workspace), state=state)
    assert r.status == "completed" and (workspace / "access.log").exists()
    assert "Reason: keep it" in tool_messages(state)[-1].text


def test_rejects_old_order_warns_and_the_new_one_does_not(workspace: Path) -> None:
    state = RunState()
    run_sync(agent("destructive", workspace), "free space", state=state)
    waiting = state.interruption
    assert waiting is not None and waiting.type == "approval"
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        reject(state, waiting.call_id, reason="new order")
    with pytest.warns(DeprecationWarning, match=r"reject\(state, call_id, reason=...\)"):
        reject(state, "old order")
    assert state.rejected == {waiting.call_id: "old order"}


def test_approval_is_bound_to_the_arguments(workspace: Path) -> None:
    state = RunState()
    run_sync(agent("destructive", workspace), "free space", state=state)
    approve(state)
    state.approved["c2"] = "0" * 32  # an approval for other arguments
    r = run_sync(agent("destructive", workspace), state=state)
    assert r.status == "interrupted" and (workspace / "access.log").exists()


def test_cancel_during_slow_tool_stops_with_reason(workspace: Path) -> None:
    events: list[Any] = []

    async def go() -> None:
        signal = CancelSignal()
        async for e in run_stream(agent("slow", workspace), "scan", signal=signal):
            events.append(e)
            if isinstance(e, ToolProgress):  # Stop while the tool is busy, after its first step
                signal.cancel("user pressed Stop")

    asyncio.run(go())
    result = events[-1].result
    assert result.status == "interrupted"
    assert result.interruption.type == "cancelled" and result.interruption.reason == "user pressed Stop"
    progress = [e for e in events if isinstance(e, ToolProgress)]
    assert 1 <= len(progress) < 6  # the tool was stopped before it finished its six steps
    assert [e.status for e in events if isinstance(e, ToolResultEvent)] == ["cancelled"]  # no result recorded


def test_run_sync_takes_a_signal_that_stops_it_from_another_thread() -> None:
    started = threading.Event()

    class Wait:
        name = "wait"
        description = "Waits."
        input_schema: dict[str, Any] = {"type": "object", "properties": {}}
        read_only = True
        needs_approval = False

        async def execute(self, input: dict[str, Any], ctx: Any) -> str:
            asyncio.get_running_loop().call_soon(started.set)  # once the sleep below listens
            await ctx.signal.sleep(60)
            return "waited a minute"

    signal = CancelSignal()
    stopper = threading.Thread(target=lambda: started.wait(30) and signal.cancel_threadsafe("the Stop button"))
    stopper.start()
    fm = FunctionModel(lambda m, r: call("w1", "wait", {}) if len(m) == 1 else "done")
    r = run_sync(Agent(fm, tools=[Wait()]), "wait", signal=signal)
    stopper.join()
    assert r.status == "interrupted" and r.reason == "cancelled: the Stop button"


def test_slow_tool_reports_progress_and_completes(workspace: Path) -> None:
    events: list[Any] = []

    async def go() -> None:
        a = Agent("scripted/slow", tools=[*FILE_TOOLS, *DEMO_TOOLS], cwd=workspace)
        async for e in run_stream(a, "scan"):
            events.append(e)

    asyncio.run(go())
    labels = [e.label for e in events if isinstance(e, ToolProgress)]
    assert labels == [f"scanned {n} of 1200 files" for n in (200, 400, 600, 800, 1000, 1200)]
    assert events[-1].result.status == "completed"


def test_cancel_reaches_a_subprocess_tool_via_the_signal(tmp_path: Path) -> None:
    import re
    import secrets
    import subprocess
    import sys

    # A sleep of its own (not one another test or another test run on this machine may be in).
    sleep = f"time.sleep(31.{secrets.randbelow(10**9):09d})"

    @tool
    async def long_command(ctx: Any) -> str:
        proc = await asyncio.create_subprocess_exec(sys.executable, "-c", f"import time; {sleep}")
        try:
            await ctx.signal.race(proc.wait())
        finally:
            if proc.returncode is None:
                proc.kill()
                await proc.wait()
        return "finished"

    script = {0: call("s1", "long_command")}
    fm = FunctionModel(lambda m, r: script.get(sum(x.role == "assistant" for x in m), "done"))

    async def go() -> Any:
        signal = CancelSignal()
        asyncio.get_running_loop().call_later(0.3, signal.cancel, "stop")
        return await run(Agent(fm, tools=[long_command]), "q", signal=signal)

    r = asyncio.run(go())
    assert r.status == "interrupted" and r.interruption.reason == "stop"
    assert subprocess.run(["pgrep", "-f", re.escape(sleep)], capture_output=True).stdout == b""


def test_stop_when_predicates(workspace: Path) -> None:
    r = run_sync(agent("runaway", workspace, stop_when=[has_tool_call("list_files")]), "go")
    assert r.status == "completed" and r.turns == 1
    r = run_sync(
        agent(
            "runaway",
            workspace,
            stop_when=[lambda steps: Stop("max_turns_exceeded", "three") if len(steps) >= 3 else None],
        ),
        "go",
    )
    assert r.status == "max_turns_exceeded" and r.turns == 3 and r.reason == "three"


def test_tool_stats_are_kept_in_the_state(workspace: Path) -> None:
    state = RunState()
    run_sync(agent("recover", workspace), "q", state=state)
    stats = state.tool_stats
    assert stats["read_file"].calls == 2 and stats["read_file"].errors == 1
    assert stats["list_files"].calls == 1 and stats["list_files"].errors == 0


def test_idempotency_key_is_given_to_side_effecting_tools() -> None:
    keys: list[Any] = []

    @tool
    def charge(ctx: Any) -> str:
        keys.append(ctx.idempotency_key)
        return "ok"

    @tool(read_only=True)
    def peek(ctx: Any) -> str:
        keys.append(ctx.idempotency_key)
        return "ok"

    script = {0: call("k1", "charge"), 1: call("k2", "peek")}
    fm = FunctionModel(lambda m, r: script.get(sum(x.role == "assistant" for x in m), "done"))
    state = RunState()
    run_sync(Agent(fm, tools=[charge, peek]), "q", state=state)
    assert keys == [f"{state.run_id}:k1", None]
    assert state.intents == {}


def test_completed_run_continues_with_a_new_prompt(workspace: Path) -> None:
    state = RunState()
    run_sync(Agent("scripted/hello"), "hi", state=state)
    r = run_sync(Agent("scripted/hello"), "again", state=state)
    assert r.status == "completed" and r.turns == 2


def test_the_read_cache_does_not_outlive_the_turn(workspace: Path) -> None:
    runs: list[str] = []

    @tool(read_only=True, name="read_file")
    def counting_read(path: str) -> str:
        runs.append(path)
        return (workspace / path).read_text()

    state = RunState()
    fm = FunctionModel(
        lambda m, r: (
            call(f"r{len(m)}", "read_file", {"path": "errors.log"}) if isinstance(m[-1], UserMessage) else "done"
        )
    )
    run_sync(Agent(fm, tools=[counting_read]), "read it", state=state)
    run_sync(Agent(fm, tools=[counting_read]), "read it again, I changed it", state=state)
    assert runs == ["errors.log", "errors.log"]  # the second turn read the file again


def test_a_relative_cwd_is_made_absolute_once_so_the_shell_gets_an_absolute_home(
    workspace: Path, monkeypatch: Any
) -> None:
    from tether.testing import FunctionModel, call
    from tether.tools.shell import RunCommand, ShellSettings

    monkeypatch.chdir(workspace.parent)
    replies = iter([call("c1", "run_command", {"command": 'printf "%s" "$HOME"'}), "done"])
    state = RunState()
    agent = Agent(
        FunctionModel(lambda m, r: next(replies)),
        tools=[RunCommand(ShellSettings(require_approval=False))],
        cwd=workspace.name,
    )
    assert run_sync(agent, "where is home?", state=state).status == "completed"
    (result,) = tool_messages(state)
    home = result.text.splitlines()[-1]
    assert home == str(workspace), home


@pytest.mark.parametrize("answer", ["", "  \n"])
def test_an_empty_answer_is_said_in_the_result(workspace: Path, answer: str) -> None:
    from tether.status import EMPTY_ANSWER

    r = run_sync(Agent(FunctionModel(lambda m, req: answer), cwd=workspace), "hi")
    assert (r.status, r.reason, r.empty_answer) == ("completed", EMPTY_ANSWER, True)
    assert r.output.strip() == ""
    assert r.model_dump(mode="json")["empty_answer"] is True  # what --json and the HTTP API carry


def test_an_empty_answer_cut_at_max_tokens_says_both(workspace: Path) -> None:
    from tether.messages import AssistantMessage
    from tether.status import EMPTY_ANSWER

    cut = AssistantMessage(content=(), finish_reason="length")
    fm = FunctionModel(lambda m, req: cut)
    r = run_sync(Agent(fm, cwd=workspace, max_tokens=50, continue_cut_text=False), "hi")
    assert r.status == "completed" and r.empty_answer
    assert r.reason == f"the reply reached max_tokens (50) and was cut: {EMPTY_ANSWER}"
    # Continued once (the default), and cut again with nothing written: incomplete, and said so.
    r = run_sync(Agent(fm, cwd=workspace, max_tokens=50), "hi")
    assert (r.status, r.turns) == ("failed", 2)
    assert r.reason is not None and r.reason.startswith("incomplete:") and "it has no text" in r.reason


def test_only_a_final_answer_without_text_is_an_empty_answer(workspace: Path) -> None:
    r = run_sync(Agent(FunctionModel(lambda m, req: "Paris."), cwd=workspace), "hi")
    assert (r.reason, r.empty_answer) == ("the model answered", False)
    # A stop condition that ends the run on a tool call: output "" but no answer was expected.
    r = run_sync(agent("runaway", workspace, stop_when=[has_tool_call("list_files")]), "go")
    assert r.status == "completed" and r.output == "" and not r.empty_answer
    assert r.reason is not None and "empty" not in r.reason


def test_a_request_lost_in_a_crash_counts_against_the_budget_on_resume() -> None:
    """A request in flight when the process died was billed but never answered: its worst case
    (``cost_unknown_usd``) is spent as far as the budget goes. A resume whose budget it used up
    stops ``budget_exceeded`` without another model call; one it left room for goes on, with every
    call capped to what the known and the unknown spending left."""
    from tether.harness.state import CallInFlight

    def crashed(max_cost: float) -> RunState:
        state = RunState(messages=[UserMessage.text("go")])
        state.call_in_flight = CallInFlight(model="function", prompt_tokens=100, max_tokens=4096, max_cost_usd=max_cost)
        return state

    fm = FunctionModel(lambda m, r: "done")
    state = crashed(0.05)
    r = run_sync(Agent(fm, max_budget_usd=0.04), state=state)
    assert r.status == "budget_exceeded" and fm.requests == []
    assert r.cost_unknown_usd == pytest.approx(0.05) and r.cost_usd == 0.0
    assert r.reason is not None and r.reason.startswith("the remaining budget ($0.000000 of $0.040000)")
    assert "what was spent counts $0.050000, the worst case, for requests lost in a crash" in r.reason

    fm = FunctionModel(lambda m, r: "done")
    r = run_sync(Agent(fm, max_budget_usd=0.06), state=crashed(0.05))
    (request,) = fm.requests
    # $0.01 left at $12/M output tokens pays for at most 833 of them: the call is capped below that.
    assert request.max_tokens is not None and request.max_tokens <= 833
    assert r.status == "completed" and (r.cost_usd or 0.0) + r.cost_unknown_usd <= 0.06
