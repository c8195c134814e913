"""Sessions: a result written before its call, a rewrite killed half-way, a relative store path."""

from __future__ import annotations

from pathlib import Path

from tests.conftest import assert_pairing
from tether import Agent, run_sync
from tether.messages import AssistantMessage, TextPart, ToolCallPart, ToolMessage, UserMessage
from tether.sessions import INTERRUPTED_TEXT, JsonlSessionStore, repair
from tether.testing import FunctionModel


def _call(call_id: str, name: str = "t") -> AssistantMessage:
    return AssistantMessage(content=(ToolCallPart(id=call_id, name=name, arguments="{}"),))


def _result(call_id: str, text: str, name: str = "t") -> ToolMessage:
    return ToolMessage(call_id=call_id, name=name, content=(TextPart(text=text),))


def test_a_result_written_before_its_call_is_kept_right_after_it(tmp_path: Path) -> None:
    """A session file whose result line came before its call's line (a hand edit, lines out of
    order) lost the real result: it was dropped as an orphan and a placeholder saying the outcome is
    unknown was put after the call, and written back. The result is kept, once, right after its call."""
    store = JsonlSessionStore(tmp_path / "sessions", fsync=False)
    store.append("s", [UserMessage.text("go"), _call("c1"), _result("c1", "42 files")])
    path = store.path("s")
    first, call, res = path.read_text().splitlines(keepends=True)
    path.write_text(first + res + call)  # the result's line moved above its call's
    seen: list[list[str]] = []

    def model(messages: list[object], request: object) -> str:
        seen.append([getattr(m, "call_id", getattr(m, "role", "")) for m in messages])
        return "done"

    fm = FunctionModel(model)
    run_sync(Agent(fm), "and now?", session=store, session_id="s")  # the conversation goes on
    history = store.load("s")
    assert_pairing(history)
    assert [getattr(m, "call_id", m.role) for m in history] == ["user", "assistant", "c1", "user", "assistant"]
    kept = history[2]
    assert isinstance(kept, ToolMessage) and kept.text == "42 files" and kept.status == "ok"
    assert INTERRUPTED_TEXT not in path.read_text()  # no placeholder written back in its place
    assert seen[0] == ["user", "assistant", "c1", "user"]  # what the model was sent: its call, then its result
    assert repair(history) == history


def test_an_early_result_pairs_once_and_only_with_its_own_call() -> None:
    """The early result goes to the first later call with its id and tool, once: a later call that
    reuses the id gets its own result (or a placeholder), a call of another tool with that id is not
    its call, and a result whose call never comes is still dropped."""
    messages = [
        UserMessage.text("go"),
        _result("c1", "early"),
        _result("zz", "no call anywhere"),
        _result("c2", "other tool", name="u"),
        _call("c1"),
        _call("c1"),  # a duplicated line: kept once
        UserMessage.text("again"),
        _call("c2"),
        _call("c1"),  # an id reused by a later turn: not the early result's second home
        _result("c1", "second"),
    ]
    fixed = repair(messages)
    assert_pairing(fixed)
    texts = [(m.call_id, m.text) for m in fixed if isinstance(m, ToolMessage)]
    assert texts == [("c1", "early"), ("c2", INTERRUPTED_TEXT), ("c1", "second")]
    assert repair(fixed) == fixed
