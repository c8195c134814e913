"""What the model sees of old turns (issue 30): completed turns as input and answer only, when
asked (on by default in `tether chat`), with the transcript kept whole; images sent until the
model has replied after them, then a line of text. In process and on both wires."""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

import pytest

from tether import Agent, run_sync
from tether.harness.state import RunState
from tether.harness.view import model_view
from tether.messages import AssistantMessage, ImagePart, TextPart, ToolCallPart, ToolMessage, UserMessage
from tether.providers.anthropic import AnthropicProvider
from tether.providers.openai_chat import OpenAIChatProvider
from tether.providers.scripted import Reply
from tether.sessions import JsonlSessionStore
from tether.testing import FunctionModel, ScriptedServer
from tether.tools.base import ToolResult, tool
from tether.tools.files import FILE_TOOLS

WIRES = [("openai", True), ("openai", False), ("anthropic", True), ("anthropic", False)]
PIXEL = base64.b64encode(b"\x89PNG\r\n\x1a\n" + b"\0" * 2000).decode()


def _texts(messages: Any) -> list[str]:
    return ["".join(getattr(p, "text", "") for p in m.content) if m.role != "assistant" else m.text for m in messages]


def _looker(state: list[int]) -> FunctionModel:
    """Turn by turn: call read_file on errors.log, then answer with what came back."""

    def reply(messages: list[Any], request: Any) -> Reply:
        state.append(len(messages))
        if isinstance(messages[-1], UserMessage):
            return Reply(calls=((f"c{len(state)}", "read_file", {"path": "errors.log"}),))
        return Reply(text=f"answer {len(state)}")

    return FunctionModel(reply)


def test_completed_turns_are_shown_as_input_and_answer_when_asked(workspace: Path, tmp_path: Path) -> None:
    sessions = JsonlSessionStore(tmp_path / "sessions")
    seen: list[int] = []
    model = _looker(seen)
    agent = Agent(model, tools=FILE_TOOLS, cwd=workspace, completed_turns="answers")
    for prompt in ("first", "second", "third"):
        assert run_sync(agent, prompt, session=sessions, session_id="s").status == "completed"
    last = model.requests[-1].messages  # the third turn's second request (after its tool call)
    assert _texts(last[:4]) == ["first", "answer 2", "second", "answer 4"]
    assert [m.role for m in last[4:]] == ["user", "assistant", "tool"]  # the current turn, whole
    # The record keeps every tool call and result.
    kept = sessions.load("s")
    assert sum(isinstance(m, ToolMessage) for m in kept) == 3 and len(kept) == 12
    # The default ("full") shows them all.
    full = FunctionModel(model.fn)
    run_sync(Agent(full, tools=FILE_TOOLS, cwd=workspace), "fourth", session=sessions, session_id="s")
    assert sum(isinstance(m, ToolMessage) for m in full.requests[0].messages) == 3


def test_a_turn_that_did_not_end_with_an_answer_is_shown_whole() -> None:
    call = ToolCallPart(id="c1", name="read_file", arguments="{}")
    messages: list[Any] = [
        UserMessage.text("one"),
        AssistantMessage(content=(call,), finish_reason="tool_calls"),
        ToolMessage(call_id="c1", name="read_file", content=(TextPart(text="r"),)),
        UserMessage.text("steer: look elsewhere"),  # the person spoke before an answer came
        AssistantMessage(content=(TextPart(text="ok"),)),
        UserMessage.text("summary").model_copy(update={"summary_turns": 4}),
        UserMessage.text("two"),
    ]
    assert list(model_view(messages, "answers")) == messages
    assert model_view(messages, "full") is messages


def test_the_view_of_a_turn_never_changes_so_the_prompt_cache_holds() -> None:
    calls = [ToolCallPart(id=f"c{i}", name="t", arguments="{}") for i in range(2)]
    history: list[Any] = [
        UserMessage.text("a"),
        AssistantMessage(content=(calls[0],)),
        ToolMessage(call_id="c0", name="t", content=(TextPart(text="r"),)),
        AssistantMessage(content=(TextPart(text="A"),)),
        UserMessage.text("b"),
        AssistantMessage(content=(calls[1],)),
    ]
    first = list(model_view(history, "answers"))
    history += [ToolMessage(call_id="c1", name="t", content=(TextPart(text="r"),))]
    second = list(model_view(history, "answers"))
    assert second[: len(first)] == first and all(a is b for a, b in zip(first, second, strict=False))


@tool(read_only=True)
def screenshot() -> ToolResult:
    """Take a screenshot."""
    return ToolResult([TextPart(text="the screen:"), ImagePart(media_type="image/png", data=PIXEL)])


def test_an_image_goes_to_the_model_until_it_has_replied_after_it(workspace: Path) -> None:
    replies = [
        Reply(calls=(("c1", "screenshot", {}),)),
        Reply(calls=(("c2", "list_files", {}),)),
        Reply(text="done"),
    ]
    model = FunctionModel(lambda m, r: replies.pop(0))
    state = RunState()
    result = run_sync(Agent(model, tools=[screenshot, *FILE_TOOLS], cwd=workspace), "look", state=state)
    assert result.status == "completed"

    def images(request: Any) -> int:
        return sum(isinstance(p, ImagePart) for m in request.messages if m.role != "assistant" for p in m.content)

    assert [images(r) for r in model.requests] == [0, 1, 0]
    shot = next(m for m in model.requests[2].messages if isinstance(m, ToolMessage) and m.name == "screenshot")
    assert "image/png image, 1 KB" in shot.text and "not sent again" in shot.text
    # The transcript (and so the session, the trace, the page) keeps the image.
    kept = next(m for m in state.messages if isinstance(m, ToolMessage) and m.name == "screenshot")
    assert any(isinstance(p, ImagePart) and p.data == PIXEL for p in kept.content)


def test_the_shown_form_of_an_image_message_is_reused() -> None:
    user = UserMessage(content=(TextPart(text="what is this?"), ImagePart(data=PIXEL)))
    history: list[Any] = [user, AssistantMessage(content=(TextPart(text="a PNG"),)), UserMessage.text("and?")]
    memo: dict[int, Any] = {}
    first, second = model_view(history, memo=memo), model_view(history, memo=memo)
    assert first[0] is second[0] and first[0] is not user
    assert not any(isinstance(p, ImagePart) for p in first[0].content)
    assert any(isinstance(p, ImagePart) for p in user.content)  # the original is untouched


# -- on the wire ------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def server() -> Any:
    with ScriptedServer() as s:
        yield s


def _provider(kind: str, server: ScriptedServer) -> Any:
    provider: Any = (
        OpenAIChatProvider(base_url=server.base_url)
        if kind == "openai"
        else AnthropicProvider(base_url=server.root_url)
    )
    provider.model_id = "plan"
    return provider


@pytest.mark.parametrize(("kind", "stream"), WIRES)
def test_completed_turns_on_the_wire(
    server: ScriptedServer, workspace: Path, tmp_path: Path, kind: str, stream: bool
) -> None:
    sessions = JsonlSessionStore(tmp_path / "sessions")
    agent = Agent(_provider(kind, server), tools=FILE_TOOLS, cwd=workspace, completed_turns="answers", stream=stream)
    first = run_sync(agent, "Which file mentions a timeout?", session=sessions, session_id="w")
    assert first.status == "completed" and "timeout" in first.output
    server.set_faults([])  # clears what it received
    second = run_sync(agent, "And which worker?", session=sessions, session_id="w")
    assert second.status == "completed"
    body = server.received[0][1]
    sent = json.dumps(body["messages"])
    # The first turn's two tool calls and results are not sent again; its question and answer are.
    assert "Which file mentions a timeout?" in sent and first.output in sent
    assert "list_files" not in sent and "read_file" not in sent and "tool_use" not in sent
    assert sum(isinstance(m, ToolMessage) for m in sessions.load("w")) >= 2  # kept on the record


@pytest.mark.parametrize(("kind", "stream"), WIRES)
def test_an_image_is_sent_once_on_the_wire(server: ScriptedServer, workspace: Path, kind: str, stream: bool) -> None:
    provider = _provider(kind, server)
    provider.model_id = "hello"
    server.set_faults([])
    history = RunState(messages=[UserMessage(content=(TextPart(text="what is this?"), ImagePart(data=PIXEL)))])
    agent = Agent(provider, cwd=workspace, stream=stream)
    assert run_sync(agent, state=history).status == "completed"
    assert run_sync(agent, "and now?", state=history).status == "completed"
    first, second = (json.dumps(r[1]["messages"]) for r in server.received[:2])
    assert PIXEL in first and PIXEL not in second and "not sent again" in second


def test_a_control_message_does_not_make_the_current_turn_look_completed() -> None:
    from tether.harness.state import control_message

    call = ToolCallPart(id="c1", name="read_file", arguments="{}")
    messages: list[Any] = [
        UserMessage.text("b"),
        AssistantMessage(content=(call,), finish_reason="tool_calls"),
        ToolMessage(call_id="c1", name="read_file", content=(TextPart(text="r"),)),
        AssistantMessage(content=(TextPart(text="half of it"),), finish_reason="length"),
        control_message("Your last reply was cut off by the output limit."),
    ]
    assert list(model_view(messages, "answers")) == messages


def test_the_memo_lets_go_of_messages_no_longer_shown() -> None:
    user = UserMessage(content=(TextPart(text="what is this?"), ImagePart(data=PIXEL)))
    history: list[Any] = [user, AssistantMessage(content=(TextPart(text="a PNG"),)), UserMessage.text("and?")]
    memo: dict[int, Any] = {}
    model_view(history, memo=memo)
    assert list(memo) == [id(user)]
    summary = UserMessage.text("summary").model_copy(update={"summary_turns": 1})
    model_view([summary, AssistantMessage(content=(TextPart(text="ok"),)), UserMessage.text("next")], memo=memo)
    assert memo == {}  # compaction dropped the image message: nothing keeps it alive
