"""Keeping a long run inside the window (issue 4, must show 3) and compaction's failure paths."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from tests.harness.test_crash import assert_pairing
from tether import Agent, RunState, run_stream, run_sync
from tether.errors import ProviderError
from tether.harness.compaction import _cut_index, should_compact
from tether.messages import AssistantMessage, TextPart, ToolCallPart, ToolMessage, UserMessage
from tether.providers.openai_chat import OpenAIChatProvider
from tether.providers.scripted import count_prompt_tokens
from tether.testing import FunctionModel, ScriptedServer, call
from tether.tokens import estimate_tokens
from tether.tools.files import FILE_TOOLS

WINDOW = 8000


def reader_workspace(workspace: Path) -> Path:
    (workspace / "big.log").write_text("".join(f"{i:05d} INFO request served in {i % 97} ms\n" for i in range(300)))
    (workspace / "notes-zh.txt").write_text("日志轮换每天进行一次，旧文件压缩后保留三十天。" * 40)
    return workspace


def collect(agent: Agent, prompt: str | None, **kw: Any) -> list[Any]:
    async def go() -> list[Any]:
        return [e async for e in run_stream(agent, prompt, **kw)]

    return asyncio.run(go())


def test_a_long_run_stays_under_the_window(workspace: Path) -> None:
    reader_workspace(workspace)
    with ScriptedServer(context_window=WINDOW) as server:
        provider = OpenAIChatProvider(base_url=server.base_url)
        provider.model_id = "reader"  # type: ignore[attr-defined]
        state = RunState()
        agent = Agent(provider, tools=FILE_TOOLS, cwd=workspace, max_turns=300, context_window=WINDOW,
                      dedupe_read_only=False)
        events = collect(agent, "Read the logs, over and over.", state=state)
        result = events[-1].result
        assert result.status == "max_turns_exceeded", result.reason
        assert result.turns == 300
        compactions = [e for e in events if e.type == "compaction"]
        assert len(compactions) >= 10 and all(c.method == "summary" for c in compactions)
        saved = sum(c.tokens_before - c.tokens_after for c in compactions)
        assert saved > 10 * WINDOW * 0.3
        bodies = [b for p, b, _ in server.received if p.endswith("/chat/completions") and b.get("tools")]
        assert len(bodies) == 300  # no request was refused for length, none retried
        assert max(count_prompt_tokens(b["messages"], b["tools"]) for b in bodies) <= WINDOW
        assert_pairing(state.messages)
        assert any(isinstance(m, UserMessage) and m.summary_turns for m in state.messages)


def test_chinese_text_is_counted_heavier_so_compaction_triggers() -> None:
    chinese = "日志轮换每天进行一次。" * 300
    assert estimate_tokens(chinese) >= 1.5 * len(chinese) - 1
    assert len(chinese) // 4 < 0.6 * 3000 < estimate_tokens(chinese)  # a naive estimate would not trigger
    state = RunState(messages=[UserMessage.text(chinese)])
    from tether.cancel import CancelSignal
    from tether.harness.context import RunContext
    from tether.harness.loop import _context

    rc: RunContext = _context(Agent(FunctionModel(lambda m, r: "ok"), context_window=3000), state, CancelSignal(), None)
    rc.count = estimate_tokens
    assert should_compact(rc)


def test_the_kept_tail_never_starts_with_a_tool_result() -> None:
    messages: list[Any] = [UserMessage.text("go")]
    for i in range(10):
        messages.append(AssistantMessage(content=(ToolCallPart(id=f"c{i}", name="t"),)))
        messages.append(ToolMessage(call_id=f"c{i}", name="t", content=(TextPart(text="x" * 400),)))
    for keep in range(0, 3000, 37):
        cut = _cut_index(messages, keep)
        assert cut == 0 or not isinstance(messages[cut], ToolMessage)


def test_a_failing_summary_falls_back_to_trimming_then_stops_with_a_reason() -> None:
    def fn(messages: list[Any], request: Any) -> Any:
        if not request.tools:  # the summary request
            raise ProviderError("summary service down")
        turn = sum(isinstance(m, AssistantMessage) for m in messages)
        return call(f"c{turn}", "blob")

    from tether import tool

    @tool(read_only=True)
    def blob(ctx: Any) -> str:
        return "data " * 400

    state = RunState()
    events = collect(Agent(FunctionModel(fn), tools=[blob], context_window=2500, max_turns=60, dedupe_read_only=False),
                     "go", state=state)
    compactions = [e for e in events if e.type == "compaction"]
    assert compactions and all(c.method == "trim" for c in compactions)
    assert any("removed to fit" in m.text for m in state.messages if isinstance(m, ToolMessage))
    result = events[-1].result
    assert result.status == "failed" and "after 3 compactions" in (result.reason or "")
    assert_pairing(state.messages)


def test_overflow_error_compacts_then_retries_once(workspace: Path) -> None:
    reader_workspace(workspace)
    with ScriptedServer() as server:
        provider = OpenAIChatProvider(base_url=server.base_url)
        provider.model_id = "reader"  # type: ignore[attr-defined]
        state = RunState()
        run_sync(Agent(provider, tools=FILE_TOOLS, cwd=workspace, max_turns=4, dedupe_read_only=False), "q", state=state)
        server.set_faults(["overflow"])
        events = collect(Agent(provider, tools=FILE_TOOLS, cwd=workspace, max_turns=5, dedupe_read_only=False,
                               context_window=200_000), None, state=state)
        assert [e.method for e in events if e.type == "compaction"] == ["summary"]
        assert events[-1].result.status == "max_turns_exceeded"
        assert_pairing(state.messages)


def test_compaction_summaries_stay_inside_the_budget(workspace: Path) -> None:
    reader_workspace(workspace)
    for budget in (0.02, 0.05):
        events = collect(Agent("scripted/reader", tools=FILE_TOOLS, cwd=workspace, max_turns=None, context_window=6000,
                               max_budget_usd=budget, dedupe_read_only=False), "read")
        result = events[-1].result
        assert result.status == "budget_exceeded" and result.cost_usd <= budget
        assert any(e.type == "compaction" for e in events)
