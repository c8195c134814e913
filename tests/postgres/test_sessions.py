"""PgSessionStore where its promises differ from the files': damaged rows, racing writers, a
database that cannot be reached. The shared suite is tests/test_sessions.py."""

from __future__ import annotations

import threading
from typing import Any

import pytest

from tests.conftest import assert_pairing
from tether.errors import ConfigError, UserError
from tether.messages import AssistantMessage, TextPart, ToolCallPart, ToolMessage, UserMessage


@pytest.fixture
def store(pg_url: str) -> Any:
    from tether.postgres.db import database
    from tether.postgres.sessions import PgSessionStore

    return PgSessionStore(database(pg_url))


def test_a_damaged_row_is_dropped_and_the_repaired_history_written_back(store: Any) -> None:
    store.append("s", [UserMessage.text("go"), AssistantMessage(content=(ToolCallPart(id="a", name="t"),))])
    store.append("s", [ToolMessage(call_id="a", name="t", content=(TextPart(text="r"),))])
    store.db.execute('UPDATE tether_session_messages SET body = \'{"role": "tool", "cal\' WHERE seq = 3')
    history = store.load("s")
    assert [m.role for m in history] == ["user", "assistant", "tool"] and history[2].status == "interrupted"
    assert store.db.execute("SELECT count(*) FROM tether_session_messages") == [(3,)]  # written back whole
    store.append("s", [UserMessage.text("next")])
    assert [m.role for m in store.load("s")] == ["user", "assistant", "tool", "user"]


def test_a_damaged_row_is_kept_where_the_warning_says_before_it_is_dropped(
    store: Any, caplog: pytest.LogCaptureFixture
) -> None:
    """As the file stores keep a damaged line or row aside, the database keeps the row's text as it
    was, in the transaction that drops it, and the warning says where."""
    store.append("s", [UserMessage.text("go"), UserMessage.text("more")])
    torn = '{"role": "user", "content": [{"type": "te'
    store.db.execute("UPDATE tether_session_messages SET body = %s WHERE seq = 2", (torn,))
    with caplog.at_level("WARNING", logger="tether.sessions"):
        assert [m.role for m in store.load("s")] == ["user"]
    assert store.db.execute("SELECT session_id, seq, body FROM tether_session_damaged") == [("s", 2, torn)]
    assert "tether_session_damaged" in caplog.text and "session s" in caplog.text
    store.load("s")  # nothing left to repair: nothing kept twice
    assert store.db.execute("SELECT count(*) FROM tether_session_damaged") == [(1,)]


def test_deleting_a_session_deletes_the_rows_a_repair_kept_of_it(store: Any) -> None:
    """Deleting a session left its damaged rows in tether_session_damaged: words of a conversation
    the person asked to delete. Another session's are kept."""
    for session in ("gone", "kept"):
        store.append(session, [UserMessage.text("go"), UserMessage.text(f"my secret in {session}")])
        seq = store.db.execute("SELECT max(seq) FROM tether_session_messages WHERE session_id = %s", (session,))[0][0]
        torn = "UPDATE tether_session_messages SET body = '{\"my secret' WHERE session_id = %s AND seq = %s"
        store.db.execute(torn, (session, seq))
        assert [m.role for m in store.load(session)] == ["user"]
    store.delete("gone")
    assert store.db.execute("SELECT DISTINCT session_id FROM tether_session_damaged") == [("kept",)]


def test_a_load_with_nothing_to_repair_writes_nothing(store: Any) -> None:
    store.append("s", [UserMessage.text("one")])
    before = store.db.execute("SELECT xmin::text, updated_at FROM tether_sessions")
    assert len(store.load("s")) == 1
    assert store.db.execute("SELECT xmin::text, updated_at FROM tether_sessions") == before


def test_two_threads_racing_appends_lose_and_interleave_nothing(store: Any) -> None:
    """Each thread is a connection of its own, as another process or machine would be."""
    n = 60
    start = threading.Barrier(2)

    def writer(name: str) -> None:
        start.wait()
        for i in range(n):
            store.append(
                "shared",
                [
                    AssistantMessage(content=(ToolCallPart(id=f"{name}{i}", name="t"),)),
                    ToolMessage(call_id=f"{name}{i}", name="t", content=(TextPart(text=name),)),
                ],
            )

    threads = [threading.Thread(target=writer, args=(name,)) for name in "AB"]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    history = store.load("shared")
    assert len(history) == 4 * n
    assert_pairing(history)  # each append's two messages stayed together
    calls = [m.tool_calls[0].id for m in history if isinstance(m, AssistantMessage)]
    for name in "AB":
        assert [c for c in calls if c[0] == name] == [f"{name}{i}" for i in range(n)]  # each writer's order
    assert [s.messages for s in store.list()] == [4 * n]


def test_meta_lives_and_dies_with_its_session(store: Any) -> None:
    assert store.load_meta("s") == {}
    store.save_meta("s", {"system": "snapshot \x00 with a NUL"})
    assert store.load_meta("s") == {"system": "snapshot \x00 with a NUL"}
    store.db.execute("UPDATE tether_session_meta SET body = 'not json'")
    assert store.load_meta("s") == {}  # unreadable counts as empty, and is rewritten
    store.append("s", [UserMessage.text("hi")])
    store.delete("s")
    assert store.load("s") == [] and store.load_meta("s") == {} and store.list() == []
    with pytest.raises(UserError):
        store.append("../s", [UserMessage.text("x")])


def test_a_database_that_cannot_be_reached_refuses_to_start_without_showing_its_password() -> None:
    from tether.postgres.db import Database

    with pytest.raises(ConfigError, match="cannot connect to the database") as refused:
        Database("postgresql://tether:hunter2@127.0.0.1:1/tether?connect_timeout=2")
    assert "hunter2" not in str(refused.value)
