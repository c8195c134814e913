"""Many machines attacked from outside (round s15): a worker killed with SIGKILL just after a save,
the database away as a worker starts a run, a session repaired on Postgres, and a session continued
by two processes at once with no run store."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tether import Agent
from tether.messages import AssistantMessage, TextPart, ToolMessage, UserMessage
from tether.testing import FunctionModel, Reply

ROOT = Path(__file__).resolve().parents[2]


def texts(messages: list[Any]) -> list[str]:
    return [part.text for m in messages for part in m.content if isinstance(part, TextPart)]


@pytest.fixture
def worker(pg_url: str, tmp_path: Path) -> Iterator[Any]:
    """A worker of this process (the one that picks up what a killed one left)."""
    from tether.dispatch.worker import Worker
    from tether.postgres.db import database

    w = Worker(home=tmp_path / "home", agents={"answer": agent(tmp_path / "asked.log")}, db=database(pg_url))
    yield w
    w.close()


def agent(asked: Path, kill: str = "") -> Agent:
    """Answers at once, noting each question in ``asked``. ``kill``: where the process SIGKILLs
    itself: ``reply``, once the model's reply is saved and its text is in the run's stream (its
    ``turn`` not yet); ``end``, the moment the run's end is committed (before its ``done`` can reach
    the stream)."""

    def reply(messages: list[Any], request: object) -> Reply:
        with asked.open("a") as f:
            f.write("asked\n")
        return Reply(text="Your order is on its way.")

    if kill:
        from tether.postgres.runs import PgRunStore

        save = PgRunStore.save

        def save_then_die(self: Any, state: Any, **kwargs: Any) -> None:
            save(self, state, **kwargs)
            if kill == "end" and state.status == "completed":
                os.kill(os.getpid(), 9)
            if kill == "reply" and state.status == "running" and isinstance(state.messages[-1], AssistantMessage):
                deadline = time.monotonic() + 60  # a hang guard: the text is written in a moment
                while not self.db.execute("SELECT 1 FROM tether_events WHERE kind = 'text_delta'"):
                    assert time.monotonic() < deadline, "the reply's text never reached the stream"
                    time.sleep(0.01)
                os.kill(os.getpid(), 9)

        PgRunStore.save = save_then_die  # type: ignore[method-assign]
    return Agent(FunctionModel(reply))


CHILD = r"""
import sys
from pathlib import Path
sys.path.insert(0, sys.argv[1])
from tests.postgres.test_attack_pg_s15 import agent
from tether.dispatch.worker import Worker
from tether.postgres.db import database

url, run_id, asked, home, kill = sys.argv[2], sys.argv[3], Path(sys.argv[4]), Path(sys.argv[5]), sys.argv[6]
Worker(home=home, agents={"answer": agent(asked, kill)}, db=database(url)).drive(run_id)
sys.exit(3)  # the kill never came
"""


@pytest.mark.parametrize("kill", ["reply", "end"])
def test_a_worker_killed_after_a_save_leaves_the_run_told_once_and_as_saved(
    worker: Any, pg_url: str, tmp_path: Path, caplog: pytest.LogCaptureFixture, kill: str
) -> None:
    """A worker SIGKILLed at a chosen point, and the worker that gets RabbitMQ's redelivery:

    - ``reply``: the model's reply saved and its text streamed, its ``turn`` not yet written. The
      next worker wrote the reply's whole text into the stream again: every client showed "Your
      order is on its way.Your order is on its way.". Now only what was not streamed is written.
    - ``end``: the run's end committed, its ``done`` not yet in the stream. The next worker tried to
      run the ended run again, which the loop refuses, and told every client ``done`` with the
      reason "the run could not start: run ... already ended (completed); give a new prompt to
      continue the conversation" (and logged that it could not start). Now the end is told as saved.

    Either way the model is asked once, and the stream holds the answer once, one ``turn`` and one
    ``done``."""
    jobs = worker.jobs
    jobs.enqueue(
        run_id="r_kill",
        session_id="s_kill",
        owner="local",
        agent="answer",
        kind="start",
        prompt="where is my order?",
        chosen={},
        config={"message_id": "m1", "trace_id": "t" * 32},
    )
    asked = tmp_path / "asked.log"
    child = subprocess.run(
        [sys.executable, "-c", CHILD, str(ROOT), pg_url, "r_kill", str(asked), str(tmp_path / "child"), kill],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert child.returncode == -9, child.stderr[-2000:]
    assert not jobs.ended_since("r_kill", 0)

    with caplog.at_level("WARNING", logger="tether.dispatch"):
        assert worker.drive("r_kill") == "driven"  # RabbitMQ's redelivery
    assert "could not start" not in caplog.text
    events = [(kind, json.loads(data)) for _, kind, data in jobs.events_after("r_kill", 0)]
    kinds = [kind for kind, _ in events]
    assert kinds.count("done") == 1 and kinds[-1] == "done" and kinds.count("turn") == 1, kinds
    assert "".join(data["text"] for kind, data in events if kind == "text_delta") == "Your order is on its way."
    result = events[-1][1]["result"]
    assert result["status"] == "completed" and result["reason"] == "the model answered", result
    assert asked.read_text().splitlines() == ["asked"]  # paid for once
    state = worker.runs.load("r_kill")
    assert (state.status, state.reason) == ("completed", "the model answered")
    assert jobs.get("r_kill").state == "done"


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


def test_a_run_whose_worker_meets_the_database_away_as_it_starts_goes_on_once_it_is_back(
    worker: Any, pg_url: str, pg_server: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The database went away (a restart, a failover) just as a worker took a run's delivery and
    looked the run up: the worker took that for a run that could not start, and every client was
    told ``done``, ``failed``: "the run could not start: could not look up run ... in the database",
    the job was ended and the message never answered (a run already under way kept its saved state
    while its stream said it failed). The docs promise a delivery that meets the database away is
    put back and looked at again: now it is, the job stays live, and once the database is back the
    run is driven to its end, its model asked once."""
    import psycopg
    from psycopg_pool.base import AttemptWithBackoff

    from tether.postgres.db import database

    pool = database(pg_url).pool
    waits = pool.timeout
    monkeypatch.setattr(AttemptWithBackoff, "INITIAL_DELAY", 0.1)
    name = pg_url.partition("?")[0].rsplit("/", 1)[-1]

    def away(allowed: bool) -> None:  # every connection closed and new ones refused, or allowed again
        with psycopg.connect(pg_server.url, autocommit=True) as admin:
            admin.execute(f'ALTER DATABASE "{name}" ALLOW_CONNECTIONS {str(allowed).lower()}')
            if not allowed:
                admin.execute(
                    "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = %s AND pid <> "
                    "pg_backend_pid()",
                    (name,),
                )

    look_up = worker.runs.exists

    def while_away(run_id: str) -> bool:  # the first look-up meets the database away
        monkeypatch.setattr(worker.runs, "exists", look_up)
        away(False)
        pool.timeout = 0.3  # the pool's 30 s wait for a connection, shortened
        try:
            return bool(look_up(run_id))
        finally:
            away(True)
            pool.timeout = waits  # back: the pool may take a moment to connect again

    monkeypatch.setattr(worker.runs, "exists", while_away)
    jobs = worker.jobs
    jobs.enqueue(
        run_id="r_away",
        session_id="s_away",
        owner="local",
        agent="answer",
        kind="start",
        prompt="where is my order?",
        chosen={},
        config={"message_id": "m1", "trace_id": "t" * 32},
    )
    with pytest.raises(Exception, match="could not look up run r_away"):
        worker.drive("r_away")  # the task puts the delivery back: looked at again in 5 s
    assert jobs.get("r_away").live and jobs.events_after("r_away", 0) == []

    assert worker.drive("r_away") == "driven"
    events = [(kind, json.loads(data)) for _, kind, data in jobs.events_after("r_away", 0)]
    assert [kind for kind, _ in events].count("done") == 1 and events[-1][0] == "done", events
    assert events[-1][1]["result"]["status"] == "completed", events[-1]
    assert (tmp_path / "asked.log").read_text().splitlines() == ["asked"]
    assert jobs.get("r_away").state == "done"
