"""Stopping for a person before a dangerous action, attacked across the front doors (session 14):
the Python API, `tether run` / `tether chat`, the HTTP server's decision route, and resume.
"""

from __future__ import annotations

from tether import Agent, RunState, approve, run_sync, tool
from tether.messages import Message, TextPart, UserMessage
from tether.providers.base import ModelRequest
from tether.status import SubagentInterruption
from tether.testing import FunctionModel, Reply

# --- a person's answer to a sub-agent's question is for that question ---------------------------


def _said(message: Message) -> str:
    return " ".join(p.text for p in getattr(message, "content", ()) if isinstance(p, TextPart))


def test_an_answer_to_a_sub_agents_question_does_not_outlive_a_new_message() -> None:
    """A sub-agent asked to pay bob; the person approved (Python API), then changed their mind and
    sent a new message instead of resuming ("no wait, pay eve instead"). The new message declined the
    waiting call, as documented, but the approval stayed kept in `state.answer` under the parent's
    call id; the model (which numbers its calls anew each turn) asked a new sub-agent to pay eve
    under that same id, and the next resume handed the old "yes" to the new child: eve was paid
    without anyone being asked. An answer is now dropped with the call it was about."""
    paid: list[str] = []

    @tool(needs_approval=True)
    def send_money(to: str, amount: int) -> str:
        """Send money."""
        paid.append(to)
        return f"sent {amount} to {to}"

    def child_model(messages: list[Message], request: ModelRequest) -> Reply | str:
        if isinstance(messages[-1], UserMessage):
            return Reply(calls=(("k1", "send_money", {"to": _said(messages[-1]).split()[-1], "amount": 100}),))
        return "paid"

    helper = Agent(FunctionModel(child_model), tools=[send_money]).as_tool("helper", "pays people")

    def parent_model(messages: list[Message], request: ModelRequest) -> Reply | str:
        if isinstance(messages[-1], UserMessage):
            who = "eve" if "eve" in _said(messages[-1]) else "bob"
            return Reply(calls=(("c1", "helper", {"task": f"pay {who}"}),))
        return "done"

    parent = Agent(FunctionModel(parent_model), tools=[helper])
    state = RunState()
    first = run_sync(parent, "pay bob", state=state)
    assert isinstance(first.interruption, SubagentInterruption)
    approve(state)
    second = run_sync(parent, "no wait, pay eve instead", state=state)
    assert isinstance(second.interruption, SubagentInterruption)
    assert second.interruption.child.args["to"] == "eve"  # type: ignore[union-attr]
    assert paid == [] and state.answer is None
    again = run_sync(parent, state=state)  # resumed with no decision about eve
    assert again.status == "interrupted" and isinstance(again.interruption, SubagentInterruption)
    assert paid == []
    approve(state)
    assert run_sync(parent, state=state).status == "completed"
    assert paid == ["eve"]
