"""Replies cut off by the output limit (issue 30): cut text is continued once and merged, the
stream shows only new text, a second cut ends the run incomplete with the text kept; a cut tool
call is never run, is asked again smaller, and fails the run on the third cut. On both wires,
streamed and not, against the scripted server on loopback."""

from __future__ import annotations

import asyncio
import random
from pathlib import Path
from typing import Any

import pytest

from tether import Agent, run_stream, run_sync
from tether.events import Event, TextDelta, ToolStart
from tether.harness.length import CUT_RETRIES, MIN_SEAM, Continuation, merge_seam
from tether.harness.loop_guard import LoopGuard
from tether.harness.state import CONTROL, RunState
from tether.harness.store import RunStore
from tether.messages import AssistantMessage, TextPart, ToolCallPart, ToolMessage
from tether.providers.anthropic import AnthropicProvider
from tether.providers.openai_chat import OpenAIChatProvider
from tether.providers.scripted import ESSAY, NOTES
from tether.testing import FunctionModel, ScriptedServer
from tether.tools.files import EDIT_TOOLS, FILE_TOOLS

TOOLS = (*FILE_TOOLS, *EDIT_TOOLS)

WIRES = [("openai", True), ("openai", False), ("anthropic", True), ("anthropic", False)]


@pytest.fixture(scope="module")
def server() -> Any:
    with ScriptedServer() as s:
        yield s


def _provider(kind: str, server: ScriptedServer, scenario: str) -> Any:
    if kind == "openai":
        provider: Any = OpenAIChatProvider(base_url=server.base_url)
    else:
        provider = AnthropicProvider(base_url=server.root_url)
    provider.model_id = scenario
    return provider


def _events(agent: Agent, prompt: str, **kw: Any) -> list[Event]:
    async def go() -> list[Event]:
        return [e async for e in run_stream(agent, prompt, **kw)]

    return asyncio.run(go())


def _said(message: Any) -> str:
    return "".join(p.text for p in message.content if isinstance(p, TextPart))


def _replies(state: RunState) -> list[AssistantMessage]:
    return [m for m in state.messages if isinstance(m, AssistantMessage)]


# -- the seam ---------------------------------------------------------------------------------------


def test_merge_seam_keeps_a_repeated_overlap_once() -> None:
    assert merge_seam("The valve is rated for 16 bar at", "rated for 16 bar at 120 °C.") == (
        "The valve is rated for 16 bar at 120 °C.",
        " 120 °C.",
    )
    assert merge_seam("no overlap here", " and more") == ("no overlap here and more", " and more")


def test_a_short_repeat_is_not_a_seam() -> None:
    # "that" then "that's why": a word said twice on purpose is kept, not eaten.
    before, after = "He said that", "that's why it failed."
    assert len("that") < MIN_SEAM
    assert merge_seam(before, after) == (before + after, after)


def test_the_streamed_continuation_is_exactly_the_new_text_however_it_is_split() -> None:
    rng = random.Random(30)
    words = ["the", "valve", "seal", "kit", "rated", "bar", "steel", "body", "seat", "ring", "spring"]
    for _ in range(400):
        before = " ".join(rng.choice(words) for _ in range(rng.randint(0, 40)))
        overlap = before[len(before) - rng.randint(0, len(before)) :] if rng.random() < 0.7 else ""
        after = overlap + " ".join(rng.choice(words) for _ in range(rng.randint(0, 20)))
        cont = Continuation(AssistantMessage(content=(TextPart(text=before),), finish_reason="length"))
        shown, i = [], 0
        while i < len(after):
            step = rng.randint(1, 7)
            shown.append(cont.feed(after[i : i + step]))
            i += step
        shown.append(cont.flush())
        assert "".join(shown) == merge_seam(before, after)[1], (before, after)


# -- cut text, in process ---------------------------------------------------------------------------


def test_cut_text_is_continued_once_and_merged(workspace: Path) -> None:
    state = RunState()
    events = _events(Agent("scripted/essay", cwd=workspace, max_tokens=250), "write it", state=state)
    result = events[-1].result  # type: ignore[attr-defined]
    assert (result.status, result.output, result.turns) == ("completed", ESSAY, 2)
    # The stream showed every word once: the repeat at the seam was held back, not shown twice.
    assert "".join(e.text for e in events if isinstance(e, TextDelta)) == ESSAY
    [reply] = _replies(state)
    assert (reply.text, reply.continuations, reply.finish_reason) == (ESSAY, 1, "stop")
    # The control message went with the continuation only: never in the transcript.
    assert not any(CONTROL in _said(m) for m in state.messages if m.role == "user")


def test_a_continuation_that_is_cut_too_ends_the_run_incomplete_with_the_text_kept(workspace: Path) -> None:
    result = run_sync(Agent("scripted/essay", cwd=workspace, max_tokens=120), "write it")
    assert result.status == "failed" and result.turns == 2
    assert result.reason is not None and result.reason.startswith("incomplete:")
    assert "max_tokens (120)" in result.reason and "text so far is kept" in result.reason
    assert 100 < len(result.output) < len(ESSAY) and ESSAY.startswith(result.output)


def test_continuation_can_be_turned_off(workspace: Path) -> None:
    result = run_sync(Agent("scripted/essay", cwd=workspace, max_tokens=250, continue_cut_text=False), "go")
    assert (result.status, result.turns) == ("completed", 1)
    assert result.reason == "the reply reached max_tokens (250) and was cut"


def test_a_continuation_offers_no_tools_and_one_that_calls_a_tool_is_refused(workspace: Path) -> None:
    seen: list[Any] = []
    wrote = workspace / "x.txt"

    def model(messages: list[Any], request: Any) -> AssistantMessage:
        seen.append(request)
        if len(seen) == 1:
            return AssistantMessage(content=(TextPart(text="The first half of the answer, "),), finish_reason="length")
        call = ToolCallPart(id="c9", name="write_file", arguments='{"path": "x.txt", "content": "x"}')
        return AssistantMessage(content=(TextPart(text="and the second half."), call), finish_reason="tool_calls")

    state = RunState()
    result = run_sync(Agent(FunctionModel(model), tools=TOOLS, cwd=workspace), "go", state=state)
    assert len(seen) == 2 and seen[0].tools and seen[1].tools == ()
    assert _said(seen[1].messages[-1]).startswith(CONTROL)
    assert result.status == "completed" and not wrote.exists()
    assert result.output.startswith("The first half of the answer, and the second half.")
    assert "no tools were offered" in result.output
    assert not any(isinstance(m, ToolMessage) for m in state.messages)


def test_a_crash_before_the_continuation_continues_on_resume(workspace: Path, tmp_path: Path) -> None:
    """The cut reply is saved before the continuation is asked for: a run stopped there continues
    it on resume, once, and pays for the cut reply once."""
    calls: list[int] = []

    def model(messages: list[Any], request: Any) -> AssistantMessage:
        calls.append(len(request.messages))
        if len(calls) == 1:
            return AssistantMessage(content=(TextPart(text="Half of the answer, "),), finish_reason="length")
        if len(calls) == 2:
            raise KeyboardInterrupt  # the process dies while the continuation is out
        return AssistantMessage(content=(TextPart(text="of the answer, and the rest."),), finish_reason="stop")

    store = RunStore(tmp_path / "runs")
    state = RunState()
    agent = Agent(FunctionModel(model), cwd=workspace)
    with pytest.raises(KeyboardInterrupt):
        run_sync(agent, "go", state=state, store=store)
    saved = store.load(state.run_id)
    assert [m.text for m in _replies(saved)] == ["Half of the answer, "]
    result = run_sync(agent, state=saved, store=store)
    assert (result.status, result.output) == ("completed", "Half of the answer, and the rest.")
    assert len(calls) == 3


@pytest.mark.parametrize(("kind", "stream"), WIRES)
def test_cut_text_on_the_wire(server: ScriptedServer, workspace: Path, kind: str, stream: bool) -> None:
    state = RunState()
    agent = Agent(_provider(kind, server, "essay"), cwd=workspace, max_tokens=250, stream=stream)
    events = _events(agent, "write it", state=state)
    result = events[-1].result  # type: ignore[attr-defined]
    assert (result.status, result.output, result.turns) == ("completed", ESSAY, 2)
    shown = "".join(e.text for e in events if isinstance(e, TextDelta))
    assert shown == (ESSAY if stream else "")
    agent = Agent(_provider(kind, server, "essay"), cwd=workspace, max_tokens=120, stream=stream)
    result = run_sync(agent, "write it")
    assert result.status == "failed" and result.reason is not None and result.reason.startswith("incomplete:")
    assert ESSAY.startswith(result.output) and len(result.output) > 100


# -- cut tool calls ---------------------------------------------------------------------------------


def _writes(events: list[Event]) -> list[ToolStart]:
    return [e for e in events if isinstance(e, ToolStart) and e.tool_name == "write_file"]


def _write_notes(
    server: ScriptedServer, workspace: Path, kind: str, stream: bool, max_tokens: int
) -> tuple[RunState, list[Event], Any]:
    """The ``writer`` scenario on one wire: (its state, its events, its result)."""
    state = RunState()
    agent = Agent(_provider(kind, server, "writer"), tools=TOOLS, cwd=workspace, max_tokens=max_tokens, stream=stream)
    events = _events(agent, "write the notes", state=state)
    return state, events, events[-1].result  # type: ignore[attr-defined]


@pytest.mark.parametrize(("kind", "stream"), WIRES)
def test_a_cut_tool_call_is_never_run_and_is_asked_again_smaller(
    server: ScriptedServer, workspace: Path, kind: str, stream: bool
) -> None:
    state, events, result = _write_notes(server, workspace, kind, stream, max_tokens=400)
    assert result.status == "completed", result.reason
    half = NOTES[: len(NOTES) // 2]
    assert (workspace / "draft.txt").read_text() == half  # only the complete, smaller call ran
    assert len(_writes(events)) == 1
    cut = next(m for m in state.messages if isinstance(m, ToolMessage))
    assert cut.status == "error" and "cut off by the output limit (400 tokens)" in cut.text
    assert "at most about 200 tokens" in cut.text


@pytest.mark.parametrize(("kind", "stream"), WIRES)
def test_a_call_cut_three_times_fails_the_run_with_the_reason(
    server: ScriptedServer, workspace: Path, kind: str, stream: bool
) -> None:
    state, events, result = _write_notes(server, workspace, kind, stream, max_tokens=40)
    assert result.status == "failed" and not (workspace / "draft.txt").exists() and not _writes(events)
    assert result.reason is not None and f"{CUT_RETRIES + 1} times in a row" in result.reason
    assert "raise max_tokens" in result.reason
    sizes = [m.text.split("at most about ")[1].split()[0] for m in state.messages if isinstance(m, ToolMessage)]
    assert sizes == ["20", "10", "5"]  # half, then half again


def test_complete_calls_before_the_cut_one_still_run(workspace: Path) -> None:
    (workspace / "a.txt").write_text("alpha")
    replies = [
        AssistantMessage(
            content=(
                ToolCallPart(id="r1", name="read_file", arguments='{"path": "a.txt"}'),
                ToolCallPart(id="w1", name="write_file", arguments="{}"),  # cut before any argument
            ),
            finish_reason="length",
        ),
        AssistantMessage(content=(TextPart(text="Read a.txt; will write in parts."),), finish_reason="stop"),
    ]
    state = RunState()
    result = run_sync(Agent(FunctionModel(lambda m, r: replies.pop(0)), tools=TOOLS, cwd=workspace), "go", state=state)
    assert result.status == "completed"
    read, cut = [m for m in state.messages if isinstance(m, ToolMessage)]  # in call order
    assert (read.call_id, read.status) == ("r1", "ok") and "alpha" in read.text
    assert (cut.call_id, cut.status) == ("w1", "error") and "not run" in cut.text


def test_a_cut_call_that_needs_approval_is_answered_without_asking(workspace: Path) -> None:
    from tether.tools.base import tool

    ran: list[str] = []

    @tool(needs_approval=True)
    def run_command(command: str) -> str:
        """Run a shell command."""
        ran.append(command)
        return "ran"

    replies = [
        AssistantMessage(
            content=(ToolCallPart(id="s1", name="run_command", arguments='{"command": "rm -rf /tm'),),
            finish_reason="length",
        ),
        AssistantMessage(content=(TextPart(text="I will not."),), finish_reason="stop"),
    ]
    agent = Agent(FunctionModel(lambda m, r: replies.pop(0)), tools=[run_command], cwd=workspace)
    result = run_sync(agent, "go")
    assert (result.status, result.output, ran) == ("completed", "I will not.", [])


def test_a_cut_call_stays_answered_after_a_crash(workspace: Path, tmp_path: Path) -> None:
    """The cut call is answered from the transcript: a run resumed after the cut reply was saved
    never runs it either."""
    replies: list[Any] = [
        AssistantMessage(
            content=(ToolCallPart(id="w1", name="write_file", arguments='{"path": "n.txt", "content": "ab'),),
            finish_reason="length",
        ),
    ]

    def model(messages: list[Any], request: Any) -> AssistantMessage:
        if not replies:
            raise KeyboardInterrupt
        reply: AssistantMessage = replies.pop(0)
        return reply

    store = RunStore(tmp_path / "runs")
    state = RunState()
    agent = Agent(FunctionModel(model), tools=TOOLS, cwd=workspace, middleware=[LoopGuard()])
    with pytest.raises(KeyboardInterrupt):
        run_sync(agent, "go", state=state, store=store)
    replies.append(AssistantMessage(content=(TextPart(text="ok"),), finish_reason="stop"))
    result = run_sync(agent, state=store.load(state.run_id), store=store)
    assert result.status == "completed" and not (workspace / "n.txt").exists()


def test_a_cut_typed_answer_is_asked_again_whole_not_continued(workspace: Path) -> None:
    seen: list[Any] = []
    replies = [
        AssistantMessage(content=(TextPart(text='{"city": "Par'),), finish_reason="length"),
        AssistantMessage(content=(TextPart(text='{"city": "Paris"}'),), finish_reason="stop"),
    ]

    def model(messages: list[Any], request: Any) -> AssistantMessage:
        seen.append(request)
        return replies.pop(0)

    schema = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}
    result = run_sync(Agent(FunctionModel(model), cwd=workspace, output_type=schema), "Where?")
    assert result.status == "completed" and result.output == {"city": "Paris"}
    assert not _said(seen[1].messages[-1]).startswith(CONTROL)  # the schema's correction, not "continue"


def test_the_merged_answer_is_what_the_store_and_the_session_keep(workspace: Path, tmp_path: Path) -> None:
    """The merged reply replaces the cut one already saved: a reload (a resume, a reopened
    session) reads the whole answer, not the half the limit cut."""
    from tether.sessions import JsonlSessionStore

    store, sessions = RunStore(tmp_path / "runs"), JsonlSessionStore(tmp_path / "sessions")
    state = RunState(session_id="s")
    result = run_sync(
        Agent("scripted/essay", cwd=workspace, max_tokens=250), "go", state=state, store=store, session=sessions
    )
    assert result.output == ESSAY
    saved = _replies(store.load(state.run_id))
    assert [(m.text, m.continuations) for m in saved] == [(ESSAY, 1)]
    assert [(m.text, m.continuations) for m in sessions.load("s") if isinstance(m, AssistantMessage)] == [(ESSAY, 1)]
    assert store.load(state.run_id).turns == 2
