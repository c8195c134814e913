"""Many machines attacked from outside (round s16): a run whose lock's connection ended (a proxy or
``idle_session_timeout`` closing it while the model thought, ``pg_terminate_backend``) while another
process continued its session."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from tether import Agent
from tether.messages import TextPart
from tether.testing import FunctionModel, Reply


def texts(messages: list[Any]) -> list[str]:
    return [part.text for m in messages for part in m.content if isinstance(part, TextPart)]


def end_lock_connection(db: Any, run_id: str) -> None:
    """What a proxy closing an idle connection, or ``pg_terminate_backend``, does to a run's locks."""
    name = f"tether: run {run_id}"
    assert db.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = %s", (name,))
    deadline = time.monotonic() + 10  # a hang guard
    while db.execute("SELECT 1 FROM pg_stat_activity WHERE application_name = %s", (name,)):
        assert time.monotonic() < deadline
        time.sleep(0.02)


class Thinking:
    """A model that answers ``text`` once the test lets it (``go``), saying when it starts thinking."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.thinking = threading.Event()
        self.go = threading.Event()

    def __call__(self, messages: list[Any], request: object) -> Reply:
        self.thinking.set()
        assert self.go.wait(60)
        return Reply(text=self.text)


@pytest.fixture
def machines(pg_url: str) -> Iterator[tuple[Any, Any]]:
    """Two pools of one database: to the locks, two machines."""
    from tether.postgres.db import Database, database

    elsewhere = Database(pg_url, max_size=3)
    yield database(pg_url), elsewhere
    elsewhere.close()


def in_thread(target: Callable[[], Any]) -> tuple[threading.Thread, list[Any]]:
    out: list[Any] = []

    def body() -> None:
        try:
            out.append(target())
        except Exception as exc:  # the test looks at it
            out.append(exc)

    t = threading.Thread(target=body)
    t.start()
    return t, out


def start_run(
    db: Any, model: Thinking, prompt: str, run_id: str, *, run_store: bool
) -> tuple[threading.Thread, list[Any]]:
    from tether import run_sync
    from tether.harness.state import RunState
    from tether.postgres.runs import PgRunStore
    from tether.postgres.sessions import PgSessionStore

    store = PgRunStore(db) if run_store else None
    state = RunState(run_id=run_id, session_id="s_shared")
    return in_thread(
        lambda: run_sync(Agent(FunctionModel(model)), prompt, state=state, store=store, session=PgSessionStore(db))
    )


@pytest.mark.parametrize("run_store", [True, False], ids=["run-store", "no-run-store"])
@pytest.mark.parametrize("other", ["still-thinking", "finished"])
def test_a_run_that_lost_its_session_writes_nothing_into_the_conversation_another_continued(
    machines: tuple[Any, Any], run_store: bool, other: str
) -> None:
    """Run A's model was thinking when the connection holding its locks ended; run B, on another
    machine, then continued the same session (its lock was free). When A's model answered, A's
    answer was appended into B's conversation before A's run save noticed it had lost its hold:
    B's session read "A question, B question, A answer, B answer", and B's model was shown A's
    answer from then on (``still-thinking``). Had B finished meanwhile (``finished``), A took the
    free locks again and went on, its answer appended after B's. The docs promise a process that
    lost its run or session "writes nothing more"; now A's write is refused (``RunLockLost``,
    naming the session), with or without a run store, and B's conversation is B's own."""
    from tether.postgres.sessions import PgSessionStore

    here, elsewhere = machines
    a, b = Thinking("A answer"), Thinking("B answer")
    ta, out_a = start_run(here, a, "A question", "r_a", run_store=run_store)
    assert a.thinking.wait(30)
    end_lock_connection(here, "r_a")
    tb, out_b = start_run(elsewhere, b, "B question", "r_b", run_store=run_store)
    assert b.thinking.wait(30)
    if other == "finished":
        b.go.set()
        tb.join(30)
    a.go.set()
    ta.join(30)
    b.go.set()
    tb.join(30)

    assert not isinstance(out_b[0], Exception) and out_b[0].status == "completed", out_b
    assert out_a[0].status == "failed" and "session s_shared was taken over by another process" in out_a[0].reason
    assert texts(PgSessionStore(elsewhere).load("s_shared")) == ["A question", "B question", "B answer"]


@pytest.mark.parametrize("run_store", [True, False], ids=["run-store", "no-run-store"])
def test_a_run_whose_lock_connection_ended_with_no_one_else_there_goes_on(
    machines: tuple[Any, Any], run_store: bool
) -> None:
    """The other side of the fence: nobody else took the session, so the run takes its locks
    again and ends as usual, and the session is its own; its next message goes through."""
    from tether.postgres.sessions import PgSessionStore

    here, elsewhere = machines
    a = Thinking("A answer")
    ta, out_a = start_run(here, a, "A question", "r_a", run_store=run_store)
    assert a.thinking.wait(30)
    end_lock_connection(here, "r_a")
    a.go.set()
    ta.join(30)
    assert out_a[0].status == "completed", out_a
    b = Thinking("B answer")
    b.go.set()
    tb, out_b = start_run(elsewhere, b, "B question", "r_b", run_store=run_store)
    tb.join(30)
    assert out_b[0].status == "completed", out_b
    assert texts(PgSessionStore(elsewhere).load("s_shared")) == ["A question", "A answer", "B question", "B answer"]
