"""Many machines attacked from outside (round s15): a session repaired on Postgres, and a session
continued by two processes at once with no run store."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tether import Agent
from tether.messages import AssistantMessage, TextPart, ToolMessage, UserMessage
from tether.testing import FunctionModel, Reply

ROOT = Path(__file__).resolve().parents[2]


def texts(messages: list[Any]) -> list[str]:
    return [part.text for m in messages for part in m.content if isinstance(part, TextPart)]


def test_a_result_no_call_can_pair_with_is_kept_aside_before_a_repair_drops_it(
    pg_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    """A session whose rows hold a tool result with no call before or after it (a hand edit, a row
    restored from a backup): the load's repair dropped it from the conversation and wrote the rest
    back, and the result's text ("shipped order 42") was gone from the database, with no warning.
    The file stores keep such a result aside; now Postgres keeps its row in
    ``tether_session_damaged``, in the transaction that drops it, and says so."""
    from tether.postgres.db import database
    from tether.postgres.sessions import PgSessionStore

    store = PgSessionStore(database(pg_url))
    ghost = ToolMessage(call_id="call_ship", name="ship_order", content=(TextPart(text="shipped order 42"),))
    store.append(
        "s_ghost",
        [UserMessage.text("ship it"), ghost, AssistantMessage(content=(TextPart(text="Shipped."),))],
    )
    with caplog.at_level("WARNING", logger="tether.sessions"):
        assert [m.role for m in store.load("s_ghost")] == ["user", "assistant"]
    kept = store.db.execute("SELECT seq, body FROM tether_session_damaged WHERE session_id = 's_ghost'")
    assert len(kept) == 1 and kept[0][0] == 2 and "shipped order 42" in kept[0][1]
    assert "tether_session_damaged" in caplog.text and "answers no call" in caplog.text
    store.load("s_ghost")  # nothing left to repair: nothing kept twice
    assert store.db.execute("SELECT count(*) FROM tether_session_damaged") == [(1,)]


def test_a_session_two_processes_continue_at_once_with_no_run_store_is_refused_to_the_second(pg_url: str) -> None:
    """The Python API on Postgres with no run store (``run_sync(agent, ..., session=PgSessionStore(db),
    session_id=...)``) held nothing: a second process sending a message to the session while the
    first one's model was thinking went ahead, and the two conversations were written into each
    other (the JSONL store refuses the second). Now the second is refused, naming the run that
    holds the session, before it reads or writes anything; once the first ends, it goes through."""
    import threading

    from tether import run_sync
    from tether.errors import StoreError
    from tether.harness.state import RunState
    from tether.postgres.db import Database, database
    from tether.postgres.sessions import PgSessionStore

    thinking, answer = threading.Event(), threading.Event()

    def slow(messages: list[Any], request: object) -> Reply:
        thinking.set()
        assert answer.wait(30)
        return Reply(text="first answer")

    here, elsewhere = database(pg_url), Database(pg_url, max_size=2)  # two machines' pools
    try:
        first: list[Any] = []
        t = threading.Thread(
            target=lambda: first.append(
                run_sync(
                    Agent(FunctionModel(slow)),
                    "first",
                    state=RunState(run_id="r_first", session_id="s_both"),
                    session=PgSessionStore(here),
                )
            )
        )
        t.start()
        assert thinking.wait(30)
        second = Agent(FunctionModel(lambda messages, request: Reply(text="second answer")))
        try:
            with pytest.raises(StoreError, match="session s_both is being continued by run r_first"):
                run_sync(second, "second", session=PgSessionStore(elsewhere), session_id="s_both")
        finally:
            answer.set()
            t.join(30)
        assert first[0].status == "completed"
        sessions = PgSessionStore(elsewhere)
        assert texts(sessions.load("s_both")) == ["first", "first answer"]
        assert run_sync(second, "second", session=sessions, session_id="s_both").status == "completed"
        assert texts(sessions.load("s_both")) == ["first", "first answer", "second", "second answer"]
    finally:
        elsewhere.close()
