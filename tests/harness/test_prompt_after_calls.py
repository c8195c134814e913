"""A person's new message while calls of the last reply wait: the calls are declined (a call whose
outcome is unknown still waits for a decision), and the message follows their results, so the
model's next request is a well-formed transcript (a tool result right after the call it answers)."""

from __future__ import annotations

import threading
from pathlib import Path

from tests.conftest import assert_pairing
from tether import Agent, CancelSignal, RunState, RunStore, approve, reject, run_sync, tool
from tether.messages import AssistantMessage, Message, ToolMessage, UserMessage, text_of
from tether.providers.base import ModelRequest
from tether.status import ApprovalInterruption, OutcomeUnknownInterruption
from tether.testing import FunctionModel, Reply


def well_formed(messages: list[Message]) -> None:
    """What providers require: the results of a reply's calls come right after it, before anything else."""
    for i, m in enumerate(messages):
        if isinstance(m, AssistantMessage) and m.tool_calls:
            after = messages[i + 1 : i + 1 + len(m.tool_calls)]
            assert all(isinstance(r, ToolMessage) for r in after), [type(r).__name__ for r in after]
            assert {r.call_id for r in after if isinstance(r, ToolMessage)} == {c.id for c in m.tool_calls}


def test_a_new_message_declines_the_call_waiting_for_approval_and_follows_its_result() -> None:
    ran: list[str] = []
    seen: list[list[Message]] = []

    @tool(read_only=True)
    def look(path: str) -> str:
        """Read a file."""
        ran.append(f"look {path}")
        return "big"

    @tool(needs_approval=True)
    def delete(path: str) -> str:
        """Delete a file."""
        ran.append(f"delete {path}")
        return "deleted"

    def model(messages: list[Message], request: ModelRequest) -> Reply | str:
        seen.append(list(messages))
        if isinstance(messages[-1], UserMessage) and "keep" in text_of([messages[-1]]):
            return "Kept everything."
        return Reply(
            calls=(
                ("c1", "look", {"path": "a.log"}),
                ("c2", "delete", {"path": "a.log"}),
                ("c3", "look", {"path": "b.log"}),
            )
        )

    agent = Agent(FunctionModel(model), tools=[look, delete])
    state = RunState()
    first = run_sync(agent, "free space", state=state)
    assert isinstance(first.interruption, ApprovalInterruption) and first.interruption.call_id == "c2"
    assert ran == ["look a.log"]
    second = run_sync(agent, "no, keep the logs", state=state)
    assert second.status == "completed" and second.output == "Kept everything."
    assert ran == ["look a.log"]  # the call waiting for approval and the one behind it did not run
    well_formed(seen[-1])
    results = {m.call_id: m for m in state.messages if isinstance(m, ToolMessage)}
    assert results["c1"].status != "rejected"
    for call_id in ("c2", "c3"):
        assert results[call_id].status == "rejected" and "new message instead of deciding" in results[call_id].text
    assert text_of([seen[-1][-1]]) == "no, keep the logs"
    assert state.prompt_after_calls is None
    assert_pairing(state.messages)


def test_an_approval_given_before_a_new_message_is_overtaken_by_it() -> None:
    """approve() and then a new prompt: the person's last word is the message, so the call is not run."""
    ran: list[str] = []

    @tool(needs_approval=True)
    def delete(path: str) -> str:
        """Delete a file."""
        ran.append(path)
        return "deleted"

    def model(messages: list[Message], request: ModelRequest) -> Reply | str:
        if isinstance(messages[-1], UserMessage) and len(messages) > 1:
            return "ok"
        return Reply(calls=(("c1", "delete", {"path": "a.log"}),))

    agent = Agent(FunctionModel(model), tools=[delete])
    state = RunState()
    run_sync(agent, "clean", state=state)
    approve(state, reason="fine")
    assert run_sync(agent, "wait, what is in it first?", state=state).status == "completed"
    assert ran == []
    well_formed(state.messages)
    assert not state.approved and not state.approved_reasons


def test_a_call_of_unknown_outcome_still_waits_and_the_message_waits_with_it(tmp_path: Path) -> None:
    """A side effect that started when the run was stopped left no result: it may have taken effect,
    so a new message does not settle it. The run stops for that decision again with the message
    kept (saved with the run); once decided, the message follows the call's result."""
    posted: list[int] = []
    release = threading.Event()
    signal = CancelSignal()
    seen: list[list[Message]] = []

    @tool
    def post(n: int) -> str:
        """Post a message."""
        posted.append(n)
        signal.cancel_threadsafe("user pressed Stop")
        release.wait(10)
        return f"posted {n}"

    def model(messages: list[Message], request: ModelRequest) -> Reply | str:
        seen.append(list(messages))
        if any(isinstance(m, ToolMessage) for m in messages):
            return "noted"
        return Reply(calls=(("c0", "post", {"n": 0}),))

    store = RunStore(tmp_path / "runs", fsync=False)
    agent = Agent(FunctionModel(model), tools=[post])
    try:
        first = run_sync(agent, "go", store=store, signal=signal)
    finally:
        release.set()
    assert first.status == "interrupted"
    state = store.load(first.run_id)
    again = run_sync(agent, "did it go out?", state=state, store=store)
    assert isinstance(again.interruption, OutcomeUnknownInterruption)
    saved = store.load(first.run_id)
    assert saved.prompt_after_calls == "did it go out?"
    assert not any(text_of([m]) == "did it go out?" for m in saved.messages if isinstance(m, UserMessage))
    reject(saved, "c0", reason="it was posted")
    done = run_sync(agent, state=saved, store=store)
    assert done.status == "completed" and posted == [0]
    well_formed(seen[-1])
    assert text_of([seen[-1][-1]]) == "did it go out?" and saved.prompt_after_calls is None
    assert_pairing(saved.messages)
