"""Governors (src/tether/harness/governors.py): a cap on tool rounds, no progress, discovery
stalls; nudges in control messages that never enter the transcript; a tool-free status report as
the answer."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import assert_pairing, scripted_anthropic, scripted_openai
from tether import Agent, RunState, run_sync
from tether.errors import ConfigError
from tether.harness.governors import CONTROL, Governor
from tether.harness.store import RunStore
from tether.messages import TextPart, ToolMessage, UserMessage
from tether.providers.base import ModelRequest
from tether.providers.scripted import Reply
from tether.testing import FunctionModel, ScriptedServer
from tether.tools.base import tool
from tether.tools.files import FILE_TOOLS

REPORT = "Status: looked in 4 places, found nothing yet; left: the archive."


def busy_model(call: Any) -> FunctionModel:
    """Calls a tool every turn (``call(turn)`` gives name and arguments) until offered none."""

    def reply(messages: list[Any], request: ModelRequest) -> Reply | str:
        if not request.tools:
            return REPORT
        turn = sum(1 for m in messages if m.role == "assistant")
        name, args = call(turn)
        return Reply(calls=((f"c{turn}", name, args),))

    return FunctionModel(reply)


def controls(request: ModelRequest) -> list[str]:
    return [
        m.content[0].text
        for m in request.messages
        if isinstance(m, UserMessage) and isinstance(m.content[0], TextPart) and m.content[0].text.startswith(CONTROL)
    ]


@tool(read_only=True)
def look(where: str) -> str:
    """Look somewhere."""
    return f"nothing in {where}"


@tool
def save(text: str) -> str:
    """Save a note (a write)."""
    return "saved"


@tool
def broken(x: int) -> str:
    """Always fails."""
    raise RuntimeError("the backend is down")


def test_tool_round_cap_nudges_then_asks_for_a_status_report(tmp_path: Path) -> None:
    model = busy_model(lambda t: ("look", {"where": f"place {t}"}))
    gov = Governor(max_tool_rounds=5, no_progress_rounds=None, discovery_rounds=None)
    state = RunState()
    store = RunStore(tmp_path / "runs")
    result = run_sync(Agent(model, tools=[look], middleware=[gov]), "find it", state=state, store=store)
    assert result.status == "completed"
    assert result.text == REPORT  # the model's report, not a canned line
    assert "5 tool rounds (limit 5)" in (result.reason or "") and "status report" in (result.reason or "")
    requests = model.requests
    assert len(requests) == 6
    assert [bool(controls(r)) for r in requests] == [False, False, False, False, True, True]  # nudge from 4 = 80 %
    assert "at 5 tools are withdrawn" in controls(requests[4])[0]
    assert requests[5].tools == () and "No more tools can be called" in controls(requests[5])[0]
    # Never in the transcript, the saved state or the next request's history.
    for messages in (state.messages, store.load(state.run_id).messages):
        assert CONTROL not in str([m.model_dump() for m in messages])
    assert_pairing(state.messages)


def test_errors_are_not_progress() -> None:
    model = busy_model(lambda t: ("broken", {"x": t}))
    gov = Governor(max_tool_rounds=None, no_progress_rounds=3, discovery_rounds=None)
    result = run_sync(Agent(model, tools=[broken], middleware=[gov]), "try")
    assert result.text == REPORT and "3 rounds without progress (limit 3)" in (result.reason or "")
    assert len(model.requests) == 4


def test_the_same_write_again_is_not_progress_but_a_new_one_is() -> None:
    same = busy_model(lambda t: ("save", {"text": "draft"}))
    gov = Governor(max_tool_rounds=None, no_progress_rounds=3, discovery_rounds=None)
    result = run_sync(Agent(same, tools=[save], middleware=[gov]), "write")
    assert "rounds without progress" in (result.reason or "")
    assert len(same.requests) == 5  # 1 write that counts, 3 that do not, then the report

    steps = iter([("save", {"text": f"part {i}"}) for i in range(6)])

    def reply(messages: list[Any], request: ModelRequest) -> Reply | str:
        step = next(steps, None)
        return Reply(calls=(("c" + str(len(messages)), *step),)) if step else "all parts saved"

    fresh = FunctionModel(reply)
    result = run_sync(Agent(fresh, tools=[save], middleware=[gov]), "write six parts")
    assert result.text == "all parts saved" and result.reason == "the model answered"


def test_discovery_stall_is_reset_by_new_evidence() -> None:
    pattern = ["look", "look", "look", "save", "look", "look", "look", "look"]

    def call(t: int) -> tuple[str, dict[str, Any]]:
        name = pattern[t] if t < len(pattern) else "look"
        return (name, {"where": f"p{t}"} if name == "look" else {"text": f"note {t}"})

    model = busy_model(call)
    gov = Governor(max_tool_rounds=None, no_progress_rounds=None, discovery_rounds=4)
    result = run_sync(Agent(model, tools=[look, save], middleware=[gov]), "research")
    assert "4 rounds of only reading or searching (limit 4)" in (result.reason or "")
    assert len(model.requests) == 9  # the save at round 4 reset the count: 4 more reads, then the report


def test_a_message_from_the_person_resets_the_windows() -> None:
    model = busy_model(lambda t: ("look", {"where": f"place {t}"}))
    agent = Agent(model, tools=[look], middleware=[Governor(max_tool_rounds=2, discovery_rounds=None)])
    state = RunState()
    first = run_sync(agent, "find it", state=state)
    assert first.text == REPORT
    asked = len(model.requests)
    second = run_sync(agent, "look in the garage too", state=state)
    assert second.text == REPORT
    assert model.requests[asked].tools  # the new message gave tools back
    assert not controls(model.requests[asked])


def test_a_resume_after_the_verdict_still_asks_for_the_report(tmp_path: Path) -> None:
    store = RunStore(tmp_path / "runs")
    calls = 0

    def reply(messages: list[Any], request: ModelRequest) -> Reply | str:
        nonlocal calls
        calls += 1
        if not request.tools:
            if calls == 4:
                raise RuntimeError("the process dies here")  # stands in for a kill mid-request
            return REPORT
        return Reply(calls=((f"c{calls}", "look", {"where": str(calls)}),))

    agent = Agent(FunctionModel(reply), tools=[look], middleware=[Governor(max_tool_rounds=3, discovery_rounds=None)])
    state = RunState()
    crashed = run_sync(agent, "find it", state=state, store=store)
    assert crashed.status == "failed"
    saved = store.load(state.run_id)
    saved.status = "interrupted"  # as a kill leaves it: resumable
    model = FunctionModel(reply)
    resumed = run_sync(
        Agent(model, tools=[look], middleware=[Governor(max_tool_rounds=3, discovery_rounds=None)]), state=saved
    )
    assert resumed.text == REPORT and model.requests[0].tools == ()


def test_bad_settings_are_refused() -> None:
    with pytest.raises(ConfigError, match="2 or more"):
        Governor(max_tool_rounds=1)
    with pytest.raises(ConfigError, match="between 0 and 1"):
        Governor(nudge_share=1.5)


@pytest.mark.parametrize("wire", ["openai", "anthropic"])
@pytest.mark.parametrize("stream", [True, False])
def test_governor_on_both_wires(scripted_server: ScriptedServer, workspace: Path, wire: str, stream: bool) -> None:
    """The scripted model calls list_files forever: the control messages are valid on both wires,
    and the report request (no tools) gets the scripted model's status report."""
    scripted_server.set_faults([])
    make = scripted_openai if wire == "openai" else scripted_anthropic
    gov = Governor(max_tool_rounds=3, no_progress_rounds=None, discovery_rounds=None)
    state = RunState()
    agent = Agent(make(scripted_server, "runaway"), tools=FILE_TOOLS, cwd=workspace, stream=stream, middleware=[gov])
    result = run_sync(agent, "list the files", state=state)
    assert result.status == "completed", result.reason
    assert "3 tool rounds (limit 3)" in (result.reason or "")
    assert result.text.startswith("Status: I made 3 tool calls")
    bodies = [body for _, body, _ in scripted_server.received]
    assert len(bodies) == 4 and not bodies[3].get("tools")
    assert CONTROL in str(bodies[2]["messages"][-1]) and CONTROL in str(bodies[3]["messages"][-1])
    assert len([m for m in state.messages if isinstance(m, ToolMessage)]) == 3
    assert_pairing(state.messages)


def test_a_compaction_summary_does_not_reset_the_windows() -> None:
    """Only the person's message starts a new window: a summary that replaced old turns is not one."""
    from tether.harness.governors import tool_rounds
    from tether.messages import AssistantMessage, ToolCallPart

    def round_(i: int) -> list[Any]:
        call = ToolCallPart(id=f"c{i}", name="look", arguments=json.dumps({"where": str(i)}))
        result = ToolMessage(call_id=f"c{i}", name="look", content=(TextPart(text="nothing"),))
        return [AssistantMessage(content=(call,)), result]

    summary = UserMessage(content=(TextPart(text="Summary of 4 earlier turns"),), summary_turns=4)
    messages = [UserMessage.text("find it"), *round_(1), summary, *round_(2), *round_(3)]
    assert len(tool_rounds(messages)) == 3
    assert len(tool_rounds([*messages, UserMessage.text("and the garage"), *round_(4)])) == 1


def test_a_terminal_tool_at_the_limit_keeps_its_own_reason() -> None:
    @tool(terminal=True)
    def finish(answer: str) -> str:
        """Give the final answer."""
        return answer

    steps = iter([("look", {"where": "a"}), ("finish", {"answer": "found it in b"})])
    model = FunctionModel(lambda m, r: Reply(calls=((f"c{len(m)}", *next(steps)),)))
    gov = Governor(max_tool_rounds=2, no_progress_rounds=None, discovery_rounds=None)
    result = run_sync(Agent(model, tools=[look, finish], middleware=[gov]), "find it")
    assert result.text == "found it in b" and "finish ended the run" in (result.reason or "")
