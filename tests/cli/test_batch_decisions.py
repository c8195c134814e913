"""`tether run` at the terminal asks about every call of a parallel batch that waits for a
decision, one after another, before the run goes on (src/tether/cli/run.py)."""

from __future__ import annotations

from typing import Any

import pytest

from tether import Agent, RunState, run_sync
from tether.cli import run as cli_run
from tether.messages import ToolMessage
from tether.providers.scripted import Reply
from tether.testing import FunctionModel
from tether.tools.base import tool


def test_each_call_of_the_batch_is_asked_and_decided(monkeypatch: pytest.MonkeyPatch) -> None:
    ran: list[int] = []

    @tool(read_only=True, needs_approval=True)
    def peek(n: int) -> str:
        """Read a private record."""
        ran.append(n)
        return f"record {n}"

    def reply(messages: list[Any], request: Any) -> Reply | str:
        if any(isinstance(m, ToolMessage) for m in messages):
            return "done"
        return Reply(calls=(("c1", "peek", {"n": 1}), ("c2", "peek", {"n": 2})))

    agent = Agent(FunctionModel(reply), tools=[peek])
    state = RunState()
    result = run_sync(agent, "read both", state=state)
    waiting = cli_run._decision_needed(result)
    assert waiting is not None and [w.call_id for w in waiting.together] == ["c2"]
    answers = iter(["y", "", "n", "not that one"])
    asked: list[str] = []

    def ask(question: str) -> str:
        asked.append(question)
        return next(answers)

    monkeypatch.setattr(cli_run, "ask", ask)
    assert cli_run._ask_decision(state, waiting)
    assert sum(q.startswith("Allow peek") for q in asked) == 2
    again = run_sync(agent, state=state)
    assert again.status == "completed" and ran == [1]
    rejected = [m for m in state.messages if isinstance(m, ToolMessage) and m.status == "rejected"]
    assert [m.call_id for m in rejected] == ["c2"] and "not that one" in rejected[0].text
