"""Session stores: repair on load, crash damage, concurrent appends, refusal to start.

The property tests run on the single-machine stores (``backend`` "sqlite": memory, JSONL, SQLite)
and on Postgres; so do the tests parametrised by ``kind``. Postgres-only ones are in tests/postgres.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from collections.abc import Callable
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
        user("go"),
        calls("a", "b", "c"),
        result("c"),
        result("zz"),
        result("a"),
        result("a", "dup"),  # b missing, zz orphan, a duplicated
        calls("d"),
        user("next"),  # d never answered
    ]
    fixed = repair(messages)
    assert_pairing(fixed)
    assert [getattr(m, "call_id", m.role) for m in fixed] == [
        "user",
        "assistant",
        "a",
        "b",
        "c",
        "assistant",
        "d",
        "user",
    ]
    assert fixed[3].status == "interrupted" and fixed[3].text == INTERRUPTED_TEXT
    assert fixed[2].text.startswith("r[") and fixed[2].text.endswith("dup")  # the first leads; the second is kept in it
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
        st.just(("load", None)),  # someone looks while tools run: placeholders are written back
        st.builds(lambda i: ("placeholder", i), ids),
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
        elif kind == "placeholder":
            store.append(session, [placeholder(f"{turn}{arg}")])
        elif kind == "load":
            store.load(session)
        elif kind == "shuffle":
            store.rewrite(session, list(reversed(store.load(session))))
        elif path is not None and path.exists():
            data = path.read_bytes()
            if kind == "torn":
                path.write_bytes(data + b'{"role":"tool","call_id":"x","na')
            else:
                path.write_bytes(data[: max(0, len(data) - arg)])


Stores = Callable[[Path], list[tuple[Any, Path | None]]]


def _local_stores(tmp: Path) -> list[tuple[Any, Path | None]]:
    jsonl = JsonlSessionStore(tmp / "jsonl", fsync=False)
    return [(MemorySessionStore(), None), (jsonl, jsonl.path("s")), (SqliteSessionStore(tmp / "s.db"), None)]


@pytest.fixture
def stores(backend: str, request: pytest.FixtureRequest) -> Stores:
    """The stores each example of a property test starts afresh (session "s" empty), with the file
    each keeps it in when a test may damage that."""
    if backend == "sqlite":
        return _local_stores
    from tether.postgres.db import database
    from tether.postgres.sessions import PgSessionStore

    store = PgSessionStore(database(request.getfixturevalue("pg_url")))

    def fresh(tmp: Path) -> list[tuple[Any, Path | None]]:
        store.delete("s")
        return [(store, None)]

    return fresh


def open_kind(kind: str, tmp_path: Path, request: pytest.FixtureRequest) -> Any:
    if kind == "postgres":
        from tether.postgres.db import database
        from tether.postgres.sessions import PgSessionStore

        return PgSessionStore(database(request.getfixturevalue("pg_url")))
    store = open_session_store(kind if kind != "jsonl" else f"jsonl:{tmp_path / 's'}", tmp_path)
    if kind == "memory":  # the process's one store: emptied of what earlier tests in this worker left
        for info in store.list():
            store.delete(info.session_id)
    return store


# One database per test, shared by its examples: each starts by emptying session "s".
PROPERTY = settings(
    max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture]
)


@PROPERTY
@given(events=_events())
def test_load_always_obeys_pairing_and_repair_is_idempotent(stores: Stores, events: list[Any]) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        for store, path in stores(Path(tmp)):
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


def test_the_session_database_is_created_private(tmp_path: Path) -> None:
    import os
    import stat

    old = os.umask(0o022)
    try:
        store = SqliteSessionStore(tmp_path / "sessions.db")
        store.append("s", [UserMessage.text("hi")])
        store.close()
    finally:
        os.umask(old)
    made = sorted(tmp_path.glob("sessions.db*"))
    assert made and {p.name: oct(stat.S_IMODE(p.stat().st_mode)) for p in made} == {p.name: "0o600" for p in made}


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


@pytest.mark.parametrize("kind", ["memory", "jsonl", "sqlite", "postgres"])
def test_a_conversation_continues_across_runs(
    kind: str, tmp_path: Path, workspace: Path, request: pytest.FixtureRequest
) -> None:
    store = open_kind(kind, tmp_path, request)
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
    run_sync(Agent("scripted/destructive", tools=FILE_TOOLS, cwd=workspace), "free space", state=state, session=store)
    store.append("w", [user("written by a process that died before saving its run")])
    from tether.harness.state import reject

    reject(state, reason="no")
    run_sync(Agent("scripted/destructive", tools=FILE_TOOLS, cwd=workspace), state=state, session=store)
    history = store.load("w")
    assert [m.role for m in history] == [m.role for m in state.messages]
    assert_pairing(history)


def test_resuming_a_run_after_a_later_run_continued_its_session_removes_nothing(
    tmp_path: Path, workspace: Path
) -> None:
    """A run stopped for approval, another run in the same session, then the first resumed: the
    later exchange was dropped (the stopped run's state taken as the truth). The resume is refused
    with the reason, the session and the stopped run are left as they were."""
    from tether.errors import UserError
    from tether.harness.state import reject

    store = JsonlSessionStore(tmp_path)
    state = RunState(session_id="w")
    destructive = Agent("scripted/destructive", tools=FILE_TOOLS, cwd=workspace)
    assert run_sync(destructive, "free space", state=state, session=store).status == "interrupted"
    later = run_sync(Agent("scripted/hello"), "hello there", session=store, session_id="w")
    assert later.status == "completed"
    before = store.load("w")
    reject(state, reason="no")
    with pytest.raises(UserError, match="went on after run .* nothing was changed"):
        run_sync(destructive, state=state, session=store)
    assert store.load("w") == before
    assert any(m.role == "user" and "hello there" in str(m.content) for m in before)


# --- a real result wins over the placeholder repair wrote; repair never deletes a real result -----


def placeholder(call_id: str) -> ToolMessage:
    return ToolMessage(call_id=call_id, name="t", content=(TextPart(text=INTERRUPTED_TEXT),), status="interrupted")


@pytest.mark.parametrize("order", ["placeholder-first", "real-first"])
def test_a_real_result_wins_over_the_placeholder_in_either_order(order: str) -> None:
    pair = [placeholder("a"), result("a", "real")]
    fixed = repair([user("go"), calls("a"), *(pair if order == "placeholder-first" else pair[::-1])])
    assert [getattr(m, "call_id", m.role) for m in fixed] == ["user", "assistant", "a"]
    assert fixed[2].status == "ok" and fixed[2].text == "real"
    assert repair(fixed) == fixed


def test_a_second_different_result_is_kept_inside_the_first() -> None:
    fixed = repair([user("go"), calls("a"), result("a", "first"), result("a", "second"), result("a", "first")])
    assert [getattr(m, "call_id", m.role) for m in fixed] == ["user", "assistant", "a"]
    kept = fixed[2]
    assert isinstance(kept, ToolMessage) and kept.text.startswith("first")
    assert "second" in kept.text and "later" in kept.text  # said in words, not silently merged
    assert kept.text.count("first") == 1  # an exact duplicate carries nothing new and is not repeated
    assert repair(fixed) == fixed


def test_a_late_result_reaches_its_placeholder_across_later_messages() -> None:
    fixed = repair(
        [user("go"), calls("a"), placeholder("a"), user("meanwhile"), result("a", "real"), result("zz", "orphan")]
    )
    assert [getattr(m, "call_id", m.role) for m in fixed] == ["user", "assistant", "a", "user"]
    assert fixed[2].text == "real"  # the call exists, so its result is not an orphan; zz has no call
    assert repair(fixed) == fixed


@pytest.mark.parametrize("kind", ["memory", "jsonl", "sqlite", "postgres"])
def test_a_load_while_a_tool_runs_does_not_lose_its_result(
    kind: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    store = open_kind(kind, tmp_path, request)
    store.append("s", [user("go"), calls("a", "b")])
    during = store.load("s")  # someone looks while the tools run: the placeholders are written back
    assert [m.status for m in during if isinstance(m, ToolMessage)] == ["interrupted", "interrupted"]
    store.append("s", [result("a", "real a")])  # the run goes on and appends as it always did
    store.load("s")
    store.append("s", [result("b", "real b")])
    history = store.load("s")
    assert [m.text for m in history if isinstance(m, ToolMessage)] == ["real a", "real b"]
    assert INTERRUPTED_TEXT not in export_text(history)
    assert store.load("s") == history


def export_text(messages: list[Message]) -> str:
    from tether.sessions import export_jsonl

    return export_jsonl(messages)


def _quiet_events() -> st.SearchStrategy[list[Any]]:
    ids = st.sampled_from(["a", "b", "c"])
    return st.lists(
        st.one_of(
            st.just(("user", None)),
            st.builds(lambda xs: ("calls", xs), st.lists(ids, min_size=1, max_size=3, unique=True)),
            st.builds(lambda i, back: ("result", (i, back)), ids, st.integers(min_value=0, max_value=2)),
            st.just(("load", None)),
        ),
        max_size=30,
    )


@PROPERTY
@given(events=_quiet_events())
def test_repair_never_loses_a_result_whose_call_exists(stores: Stores, events: list[Any]) -> None:
    """Without damage, every result appended for a declared call survives loads (placeholders, late
    results and duplicates included), and no placeholder remains where a real result exists."""
    with tempfile.TemporaryDirectory() as tmp:
        for store, _ in stores(Path(tmp)):
            turn, n, owed = 0, 0, {}
            for kind, arg in events:
                if kind == "user":
                    store.append("s", [user("u")])
                elif kind == "calls":
                    turn += 1
                    store.append("s", [calls(*[f"{turn}{x}" for x in arg])])
                elif kind == "result":
                    call_id = f"{max(turn - arg[1], 0)}{arg[0]}"  # now, or late for an earlier turn
                    n += 1
                    store.append("s", [result(call_id, f"<r{n}>")])
                    owed.setdefault(call_id, []).append(f"<r{n}>")
                else:
                    store.load("s")
            history = store.load("s")
            assert_pairing(history)
            assert repair(history) == history
            by_id = {m.call_id: m for m in history if isinstance(m, ToolMessage)}
            for call_id, texts in owed.items():
                if call_id in by_id:  # else the call was never declared: an orphan, rightly dropped
                    assert all(t in by_id[call_id].text for t in texts)
                    assert by_id[call_id].status == "ok"


def test_a_marker_written_before_its_wording_changed_is_still_one() -> None:
    """Sessions saved with the marker's earlier words ("the process stopped", which was untrue for a
    call left waiting for a decision) are still read as holding a marker, not a real result."""
    from tether.sessions import is_placeholder

    older = ToolMessage(
        call_id="a",
        name="t",
        content=(
            TextPart(
                text="[No result: this call was interrupted before it finished (the process stopped). "
                "Its outcome is unknown; check before relying on it, or call it again.]"
            ),
        ),
        status="interrupted",
    )
    assert is_placeholder(older)
    assert "waiting for a person's decision" in INTERRUPTED_TEXT
    assert not is_placeholder(
        ToolMessage(call_id="a", name="t", content=(TextPart(text="done"),), status="interrupted")
    )
