"""A run that goes on from earlier turns checks the window before its first request: a run resumed
after a crash cut its compaction, and a long session's new message, compact first instead of
sending a prompt past the threshold (or into the provider's overflow)."""

from __future__ import annotations

from typing import Any

from tests.conftest import assert_pairing
from tether import Agent, RunState, run_sync
from tether.messages import AssistantMessage, Message, TextPart, ToolCallPart, ToolMessage, UserMessage, text_of
from tether.providers.base import ModelRequest
from tether.sessions import MemorySessionStore
from tether.testing import FunctionModel
from tether.tokens import estimate_tokens

WINDOW = 3000


def history(rounds: int) -> list[Message]:
    """A prompt and ``rounds`` rounds of a tool that read 200 words each: past 75 % of WINDOW."""
    messages: list[Message] = [UserMessage.text("read the manual")]
    for i in range(rounds):
        messages.append(
            AssistantMessage(content=(ToolCallPart(id=f"c{i}", name="read_page", arguments=f'{{"n": {i}}}'),))
        )
        messages.append(
            ToolMessage(call_id=f"c{i}", name="read_page", content=(TextPart(text=f"page {i}: " + "lorem " * 200),))
        )
    return messages


def recording_model(sent: list[list[Message]]) -> FunctionModel:
    def model(messages: list[Message], request: ModelRequest) -> Any:
        sent.append(list(messages))
        if "<transcript>" in text_of(messages[:1]):
            return "The user had the manual read, pages 0 to 9."
        return "done"

    return FunctionModel(model)


def test_a_resumed_run_past_the_threshold_compacts_before_its_first_request() -> None:
    """As a run stands after a crash cut the compaction that followed its last tool round."""
    sent: list[list[Message]] = []
    state = RunState(messages=history(10))
    assert estimate_tokens(text_of(state.messages)) > 0.75 * WINDOW
    result = run_sync(Agent(recording_model(sent), context_window=WINDOW), state=state)
    assert result.status == "completed"
    asked = [m for m in sent if "<transcript>" not in text_of(m[:1])]
    assert len(asked) == 1 and estimate_tokens(text_of(asked[0])) < 0.75 * WINDOW
    assert any(isinstance(m, UserMessage) and m.summary_turns for m in state.messages)
    assert_pairing(state.messages)


def test_a_long_sessions_new_message_compacts_before_it_is_sent() -> None:
    sent: list[list[Message]] = []
    sessions = MemorySessionStore()
    sessions.append("s1", [*history(10), AssistantMessage(content=(TextPart(text="read them all"),))])
    agent = Agent(recording_model(sent), context_window=WINDOW)
    result = run_sync(agent, "and what did page 3 say?", session=sessions, session_id="s1")
    assert result.status == "completed"
    asked = [m for m in sent if "<transcript>" not in text_of(m[:1])]
    assert len(asked) == 1 and estimate_tokens(text_of(asked[0])) < 0.75 * WINDOW
    assert text_of(asked[0][-1:]) == "and what did page 3 say?"


def test_a_new_run_asks_at_once() -> None:
    sent: list[list[Message]] = []
    assert run_sync(Agent(recording_model(sent), context_window=WINDOW), "hello").status == "completed"
    assert len(sent) == 1
