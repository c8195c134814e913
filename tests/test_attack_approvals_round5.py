"""Stopping for a person before a dangerous action, attacked end to end (a helper's fifth round):
decisions through the Python API and the command line, and what a saved run keeps of them.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.cli.conftest import Terminal
from tether import Agent, RunState, approve, reject, run_sync, tool
from tether.messages import Message, ToolMessage, UserMessage
from tether.providers.base import ModelRequest
from tether.status import ApprovalInterruption
from tether.testing import FunctionModel, Reply

# --- a decision is for one call --------------------------------------------------------------


def paying_agent() -> tuple[Agent, list[str]]:
    """A model that answers every message of the person with the same payment, under the same
    call id each time (as in-process models, and servers that number calls anew each turn, do)."""
    sent: list[str] = []

    @tool(needs_approval=True)
    def send_money(to: str, amount: int) -> str:
        """Send money."""
        sent.append(f"{amount} to {to}")
        return f"sent {amount} to {to}"

    def model(messages: list[Message], request: ModelRequest) -> Reply | str:
        if isinstance(messages[-1], UserMessage):
            return Reply(calls=(("c1", "send_money", {"to": "bob", "amount": 100}),))
        return "done"

    return Agent(FunctionModel(model), tools=[send_money]), sent


@pytest.mark.parametrize("first", ["approved", "rejected"])
def test_a_decision_never_answers_a_later_call_that_reused_its_call_id(first: str) -> None:
    """A person approved one payment; later in the conversation the model asked for the same
    payment again under the same call id. Before: the second payment ran without anyone being
    asked (the approval stayed kept under the id, its arguments' hash matched), so one "yes" paid
    twice; and a rejection answered the later call with a decision nobody made. Now a decision
    ends with the call's result, and the later call stops for a person of its own."""
    agent, sent = paying_agent()
    state = RunState()
    assert isinstance(run_sync(agent, "pay bob", state=state).interruption, ApprovalInterruption)
    (approve if first == "approved" else reject)(state)
    assert run_sync(agent, state=state).status == "completed"
    assert sent == (["100 to bob"] if first == "approved" else [])
    again = run_sync(agent, "and what about next month?", state=state)
    assert again.status == "interrupted" and isinstance(again.interruption, ApprovalInterruption)
    assert sent == (["100 to bob"] if first == "approved" else [])
    assert state.approved == {} and state.rejected == {}
    approve(state)
    assert run_sync(agent, state=state).status == "completed"
    assert len(sent) == (2 if first == "approved" else 1)
    results = [m for m in state.messages if isinstance(m, ToolMessage)]
    assert [r.status for r in results] == (["ok", "ok"] if first == "approved" else ["rejected", "ok"])


# --- the command line: only a person who read the question answers it -----------------------


@pytest.fixture
def env(tether_home: Path) -> dict[str, str]:
    """The real command's environment: its own TETHER_HOME, no provider from this machine."""
    drop = ("LLM_BASE_URL", "OPENAI_BASE_URL", "OPENAI_API_KEY", "TETHER_SESSION_STORE")
    return {**{k: v for k, v in os.environ.items() if k not in drop}, "TETHER_HOME": str(tether_home)}


def test_keys_typed_before_the_question_is_on_screen_do_not_answer_it(workspace: Path, env: dict[str, str]) -> None:
    """At a terminal, "y" and Enter typed while the run was still starting (in a chat: the next
    message typed while the reply streamed) were read as the answer to the approval question that
    came after: access.log was deleted before anyone had seen what was asked. What was typed before
    the question is dropped; the question waits for a line typed after it."""
    term = Terminal(["tether", "run", "--model", "scripted/destructive", "--cwd", str(workspace), "free space"], env)
    term.type(b"y\n\n")  # typed ahead, before any question is on screen
    term.read_until(b"[y/N] ")
    term.type(b"\x04")  # Ctrl-D: nobody answers the question itself
    code, _, seen = term.finish()
    assert code == 5, seen
    assert (workspace / "access.log").exists()
    assert "[interrupted] delete_file needs approval" in seen
