"""The per-request limits count what a compaction summarised.

The governors, the loop guard and the tool call limits count the rounds and calls since the
person's latest message, read from the transcript. A compaction replaced those messages with a
summary, so every count started again: with a small window, ``Governor(max_tool_rounds=10)`` let
40 rounds run, ``RunToolCallLimit(10)`` 40 calls, and ``LoopGuard`` let the same search run 30
times instead of stopping it at its fifth. The summary now keeps a record of the request's calls
and results (``UserMessage.turn_so_far``, results cut short, never sent to a model) that the counts
read in its place.
"""

from __future__ import annotations

import json
import re
from typing import Any

import pytest

from tests.harness.test_attack_resilience_round3 import collect
from tether import Agent, RunState, run_sync, tool
from tether.harness.compaction import RECORD_RESULT_CHARS, turn_record
from tether.harness.governors import Governor
from tether.harness.loop_guard import LoopGuard
from tether.harness.middleware import RunToolCallLimit, ToolCallLimitPerTurn
from tether.harness.state import this_turn
from tether.messages import AssistantMessage, TextPart, ToolCallPart, ToolMessage, UserMessage, load_message, text_of
from tether.providers.scripted import Reply
from tether.testing import FunctionModel

PAGE = "lorem ipsum dolor sit amet " * 60


def reader(ran: list[int]) -> Any:
    @tool(read_only=True)
    def read_page(n: int) -> str:
        """Read page n of the manual."""
        ran.append(n)
        return f"page {n}: {PAGE}"

    return read_page


def next_page(messages: Any, request: Any) -> Any:
    """Reads the next page for ever; summarises when asked to; reports when given no tools."""
    text = text_of(messages)
    if "<transcript>" in text_of(messages[:1]):
        return "Pages were read one by one; nothing else happened."
    if not request.tools:
        return "Status: still reading."
    read = [int(n) for n in re.findall(r"page (\d+):", text)]
    n = max(read) + 1 if read else 0
    return Reply(calls=((f"c{n}", request.tools[0].name, {"n": n}),))


def _run(middleware: Any, window: int) -> tuple[Any, list[int], int]:
    ran: list[int] = []
    agent = Agent(
        FunctionModel(next_page),
        tools=[reader(ran)],
        context_window=window,
        max_turns=40,
        dedupe_read_only=False,
        middleware=[middleware],
    )

    events = collect(agent, "read the whole manual")
    return events[-1].result, ran, sum(e.type == "compaction" for e in events)


@pytest.mark.parametrize(
    "middleware",
    [Governor(max_tool_rounds=10), RunToolCallLimit(limit=10), ToolCallLimitPerTurn(limit=10)],
    ids=["governor", "run_tool_call_limit", "tool_call_limit_per_turn"],
)
def test_a_limit_of_ten_calls_holds_across_compactions(middleware: Any) -> None:
    result, ran, compactions = _run(middleware, window=3_000)
    assert compactions >= 2  # the small window summarised the request's rounds, more than once
    assert ran == list(range(10)), ran  # not 40: the summarised calls still count
    assert result.status == "completed"


def test_the_loop_guard_stops_a_repeated_search_whose_repeats_were_summarised() -> None:
    runs: list[str] = []

    @tool(read_only=True, parallel=False)
    def search(query: str) -> str:
        """Search."""
        runs.append(query)
        return f"results for {query}: " + "nothing relevant here " * 80

    def model(messages: Any, request: Any) -> Any:
        if "<transcript>" in text_of(messages[:1]):
            return "Searched for the seal material several times; nothing found."
        return Reply(calls=((f"c{len(runs)}", "search", {"query": "FVAM-2050-B seal material"}),))

    agent = Agent(
        FunctionModel(model),
        tools=[search],
        context_window=3_000,
        max_turns=30,
        dedupe_read_only=False,
        middleware=[LoopGuard()],
    )
    result = run_sync(agent, "what are the seals made of")
    assert result.status == "failed" and "stopped a loop" in (result.reason or ""), result.reason
    assert len(runs) < 5, runs  # not 30


def test_the_record_is_bounded_and_read_back_after_a_save() -> None:
    long_args = json.dumps({"path": "notes.md", "text": "x" * 10_000})
    messages = [
        UserMessage.text("write the notes"),
        AssistantMessage(content=(ToolCallPart(id="c1", name="write_file", arguments=long_args),)),
        ToolMessage(call_id="c1", name="write_file", content=(TextPart(text="y" * 50_000),)),
        AssistantMessage(content=(ToolCallPart(id="c2", name="write_file", arguments=long_args),)),
        ToolMessage(call_id="c2", name="write_file", content=(TextPart(text="ok"),)),
        AssistantMessage(content=(TextPart(text="Done."),)),
    ]
    record = turn_record(messages, cut=5)
    assert record is not None and [m.role for m in record] == ["assistant", "tool", "assistant", "tool"]
    first, result, second = record[0], record[1], record[2]
    assert isinstance(first, AssistantMessage) and isinstance(second, AssistantMessage)
    assert isinstance(result, ToolMessage) and len(result.text) == RECORD_RESULT_CHARS
    assert len(first.tool_calls[0].arguments) < 200  # a digest, not 10 KB
    assert first.tool_calls[0].arguments == second.tool_calls[0].arguments  # a repeat still matches
    summary = UserMessage(content=(TextPart(text="summary"),), summary_turns=2, turn_so_far=record)
    assert load_message(summary.model_dump_json(exclude_none=True)) == summary
    # in the window, the summary reads as the calls it stands for
    assert [m.role for m in this_turn([summary, *messages[5:]])] == [
        "assistant",
        "tool",
        "assistant",
        "tool",
        "assistant",
    ]
    assert turn_record(messages, cut=0) is None  # the request begins after the cut: nothing of it


def test_a_compacted_request_keeps_its_record_through_a_second_compaction() -> None:
    state = RunState()
    ran: list[int] = []
    agent = Agent(
        FunctionModel(next_page),
        tools=[reader(ran)],
        context_window=3_000,
        max_turns=12,
        dedupe_read_only=False,
        middleware=[Governor(max_tool_rounds=30)],
    )
    run_sync(agent, "read the whole manual", state=state)
    summaries = [m for m in state.messages if isinstance(m, UserMessage) and m.summary_turns is not None]
    assert summaries and summaries[-1].turn_so_far is not None
    calls = [c for m in this_turn(state.messages) if isinstance(m, AssistantMessage) for c in m.tool_calls]
    assert len(ran) >= 10 and [json.loads(c.arguments)["n"] for c in calls] == ran  # every call, in order
