"""Session stores: repair on load, crash damage, concurrent appends, refusal to start."""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.harness.test_crash import assert_pairing
from tether import Agent, RunState, run_sync
from tether.errors import ConfigError, UserError
from tether.messages import AssistantMessage, Message, TextPart, ToolCallPart, ToolMessage, UserMessage
from tether.sessions import (
    INTERRUPTED_TEXT,
    JsonlSessionStore,
    MemorySessionStore,
    SqliteSessionStore,
    open_session_store,
    repair,
)
from tether.tools.files import FILE_TOOLS


def user(text: str) -> UserMessage:
    return UserMessage.text(text)


def calls(*ids: str) -> AssistantMessage:
    return AssistantMessage(content=tuple(ToolCallPart(id=i, name="t") for i in ids))


def result(call_id: str, text: str = "r") -> ToolMessage:
    return ToolMessage(call_id=call_id, name="t", content=(TextPart(text=text),))


def test_repair_fills_orders_and_drops() -> None:
    messages: list[Message] = [
        user("go"), calls("a", "b", "c"),
        result("c"), result("zz"), result("a"), result("a", "dup"),  # b missing, zz orphan, a duplicated
        calls("d"), user("next"),  # d never answered
    ]
    fixed = repair(messages)
    assert_pairing(fixed)
    assert [getattr(m, "call_id", m.role) for m in fixed] == ["user", "assistant", "a", "b", "c", "assistant", "d", "user"]
    assert fixed[3].status == "interrupted" and fixed[3].text == INTERRUPTED_TEXT
    assert fixed[2].text == "r"  # the first result is kept
    assert repair(fixed) == fixed


# --- property: whatever a crash leaves, load yields a paired history, and repair is idempotent ---

def _events() -> st.SearchStrategy[list[Any]]:
    ids = st.sampled_from(["a", "b", "c", "d", "e"])
    event = st.one_of(
        st.builds(lambda t: ("user", t), st.text(alphabet="xyz 你好", min_size=1, max_size=5)),
        st.builds(lambda xs: ("calls", xs), st.lists(ids, min_size=1, max_size=3, unique=True)),
        st.builds(lambda i: ("result", i), ids),
        st.just(("shuffle", None)),
        st.just(("torn", None)),
        st.builds(lambda n: ("truncate", n), st.integers(min_value=1, max_value=200)),
    )
    return st.lists(event, max_size=25)


def _apply(store: Any, session: str, events: list[Any], path: Path | None) -> None:
    turn = 0
    for kind, arg in events:
        if kind == "user":
            store.append(session, [user(arg)])
        elif kind == "calls":
            turn += 1
            store.append(session, [calls(*[f"{turn}{x}" for x in arg])])
        elif kind == "result":
            store.append(session, [result(f"{turn}{arg}")])
        elif kind == "shuffle":
            store.rewrite(session, list(reversed(store.load(session))))
        elif path is not None and path.exists():
            data = path.read_bytes()
            if kind == "torn":
                path.write_bytes(data + b'{"role":"tool","call_id":"x","na')
            else:
                path.write_bytes(data[: max(0, len(data) - arg)])


def _stores(tmp: Path) -> list[tuple[Any, Path | None]]:
    jsonl = JsonlSessionStore(tmp / "jsonl", fsync=False)
    return [(MemorySessionStore(), None), (jsonl, jsonl.path("s")), (SqliteSessionStore(tmp / "s.db"), None)]


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(events=_events())
def test_load_always_obeys_pairing_and_repair_is_idempotent(events: list[Any]) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        for store, path in _stores(Path(tmp)):
            _apply(store, "s", events, path)
            loaded = store.load("s")
            assert_pairing(loaded)
            assert repair(loaded) == loaded
            assert store.load("s") == loaded  # the repaired history was written back


def test_torn_last_line_is_dropped_and_the_next_append_survives(tmp_path: Path) -> None:
    store = JsonlSessionStore(tmp_path)
    store.append("s", [user("one"), user("two")])
    path = store.path("s")
    path.write_bytes(path.read_bytes() + b'{"role":"user","cont')
    store.append("s", [user("three")])
    assert [m.content[0].text for m in store.load("s")] == ["one", "two", "three"]  # type: ignore[union-attr]
    assert all(json.loads(line) for line in path.read_text().splitlines())


APPENDER = """
import sys
from tether.sessions import JsonlSessionStore
from tether.messages import UserMessage
store = JsonlSessionStore(sys.argv[1])
for i in range(int(sys.argv[3])):
    store.append("shared", [UserMessage.text(f"{sys.argv[2]}-{i}-" + "x" * 3000)])
"""


def test_two_processes_appending_lose_and_interleave_nothing(tmp_path: Path) -> None:
    n = 300
    procs = [subprocess.Popen([sys.executable, "-c", APPENDER, str(tmp_path), name, str(n)]) for name in ("A", "B")]
    assert [p.wait(timeout=120) for p in procs] == [0, 0]
    lines = (tmp_path / "shared.jsonl").read_text().splitlines()
    assert len(lines) == 2 * n and all(json.loads(line)["role"] == "user" for line in lines)
    texts = [m.content[0].text.split("-")[:2] for m in JsonlSessionStore(tmp_path).load("shared")]  # type: ignore[union-attr]
    for name in ("A", "B"):
        assert [int(i) for who, i in texts if who == name] == list(range(n))  # each writer's order kept


def test_a_durable_store_that_cannot_open_refuses_to_start(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("x")
    with pytest.raises(ConfigError, match="not writable"):
        JsonlSessionStore(blocker / "sessions")
    with pytest.raises(ConfigError, match="cannot open"):
        SqliteSessionStore(blocker / "s.db")
    with pytest.raises(ConfigError, match="unknown session store"):
        open_session_store("redis://x", tmp_path)
    with pytest.raises(UserError):
        MemorySessionStore().load("../etc/passwd")


@pytest.mark.parametrize("kind", ["memory", "jsonl", "sqlite"])
def test_a_conversation_continues_across_runs(kind: str, tmp_path: Path, workspace: Path) -> None:
    store = open_session_store(kind if kind != "jsonl" else f"jsonl:{tmp_path / 's'}", tmp_path)
    agent = Agent("scripted/plan", tools=FILE_TOOLS, cwd=workspace)
    first = run_sync(agent, "Which file mentions a timeout?", session=store, session_id="work")
    assert first.status == "completed"
    assert len(store.load("work")) == 6
    second = run_sync(Agent("scripted/hello"), "And thanks.", session=store, session_id="work")
    assert second.status == "completed"
    history = store.load("work")
    assert len(history) == 8 and history[6].content[0].text == "And thanks."  # type: ignore[union-attr]
    assert [s.session_id for s in store.list()] == ["work"]
    store.delete("work")
    assert store.load("work") == []


def test_resume_reconciles_a_session_a_crash_left_ahead(tmp_path: Path, workspace: Path) -> None:
    store = JsonlSessionStore(tmp_path)
    state = RunState(session_id="w")
    run_sync(Agent("scripted/destructive", tools=FILE_TOOLS, cwd=workspace), "free space", state=state,
             session=store)
    store.append("w", [user("written by a process that died before saving its run")])
    from tether.harness.state import reject

    reject(state, "no")
    run_sync(Agent("scripted/destructive", tools=FILE_TOOLS, cwd=workspace), state=state, session=store)
    history = store.load("w")
    assert [m.role for m in history] == [m.role for m in state.messages]
    assert_pairing(history)
