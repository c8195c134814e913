"""PgRunStore where its promises differ from the files': damaged rows, appends that leave earlier rows
alone, the run lock across processes, and saves cut by SIGKILL. The shared suite is
tests/harness/test_store.py."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest

from tests.conftest import assert_pairing
from tether.errors import StoreError, UserError
from tether.harness.state import RunState
from tether.messages import AssistantMessage, TextPart, ToolCallPart, ToolMessage, UserMessage


@pytest.fixture
def db(pg_url: str) -> Any:
    from tether.postgres.db import database

    return database(pg_url)


@pytest.fixture
def other_machine(pg_url: str) -> Iterator[Any]:
    """A store on a pool of its own: to the run locks, another process or machine."""
    from tether.postgres.db import Database
    from tether.postgres.runs import PgRunStore

    pool = Database(pg_url, max_size=2)
    yield PgRunStore(pool)
    pool.close()


def store_of(db: Any) -> Any:
    from tether.postgres.runs import PgRunStore

    return PgRunStore(db)


def turn(n: int) -> list[Any]:
    return [
        AssistantMessage(content=(TextPart(text=str(n)), ToolCallPart(id=f"c{n}", name="t"))),
        ToolMessage(call_id=f"c{n}", name="t", content=(TextPart(text=str(n)),)),
    ]


def saved_run(db: Any, turns: int = 2) -> RunState:
    state = RunState(run_id="run_pg", messages=[UserMessage.text("go")])
    for n in range(turns):
        state.messages.extend(turn(n))
    store_of(db).save(state)
    return state


def test_a_turn_inserts_its_messages_and_leaves_the_earlier_rows_alone(db: Any) -> None:
    state = saved_run(db)
    before = db.execute("SELECT seq, xmin::text FROM tether_run_messages ORDER BY seq")
    state.messages.extend(turn(9))
    store_of(db).save(state)
    after = db.execute("SELECT seq, xmin::text FROM tether_run_messages ORDER BY seq")
    assert after[: len(before)] == before and len(after) == len(before) + 2
    assert db.execute("SELECT message_count FROM tether_runs") == [(7,)]
    assert db.execute("SELECT commit_seq FROM tether_runs") == [(2,)] and state.commit_seq == 2


def test_a_run_saved_before_commit_numbers_loads_and_goes_on(pg_url: str) -> None:
    """A database made by a tether without the commit number column: the run saved there loads as
    commit 0, and its next save is commit 1 (a copy loaded before that save is then refused)."""
    import json

    from tether.errors import StaleRunError
    from tether.postgres.db import Database, database
    from tether.postgres.runs import MIGRATIONS

    older = Database(pg_url, max_size=1)  # the older tether's process
    older.migrate("runs", MIGRATIONS[:1])
    header = RunState(run_id="run_old").model_dump(mode="json", exclude={"messages", "commit_seq"})
    older.execute(
        "INSERT INTO tether_runs (run_id, header, message_count, created_at) VALUES (%s, %s, 0, 0)",
        ("run_old", json.dumps(header)),
    )
    older.close()
    db = database(pg_url)
    store = store_of(db)  # migrates
    assert db.versions()["runs"] == len(MIGRATIONS)
    state, behind = store.load("run_old"), store.load("run_old")
    assert state.commit_seq == 0
    state.messages.append(UserMessage.text("go on"))
    store.save(state)
    assert state.commit_seq == 1 and store.load("run_old").messages == state.messages
    with pytest.raises(StaleRunError, match="is saved at commit 1, and this copy of it is at commit 0"):
        store.save(behind)


def test_damaged_message_rows_are_named(db: Any) -> None:
    saved_run(db)
    db.execute('UPDATE tether_run_messages SET body = \'{"role": "assistant", "conte\' WHERE seq = 1')
    with pytest.raises(StoreError, match=r"run run_pg, message 2 in the database is not a message.*backup"):
        store_of(db).load("run_pg")
    db.execute("DELETE FROM tether_run_messages WHERE seq = 4")
    with pytest.raises(StoreError, match="has 4 of the 5 messages its header counts"):
        store_of(db).load("run_pg")


def test_a_header_that_does_not_describe_a_run_is_a_clear_error(db: Any) -> None:
    saved_run(db)
    for header, why in [
        ("{not json", "not a JSON object"),
        ("[1]", "not a JSON object"),
        ('{"status": "exploded"}', "status"),
    ]:
        db.execute("UPDATE tether_runs SET header = %s", (header,))
        with pytest.raises(StoreError, match=f"header of run run_pg in the database does not describe a run.*{why}"):
            store_of(db).load("run_pg")
    assert store_of(db).exists("run_pg")


def test_a_non_durable_save_leaves_the_pooled_connection_durable(pg_url: str) -> None:
    from tether.postgres.db import Database

    # One connection, so the next statement runs on the one the save used; durable by default
    # whatever the test server's setting.
    durable_url = pg_url + ("&" if "?" in pg_url else "?") + "options=-c%20synchronous_commit%3Don"
    one = Database(durable_url, max_size=1)
    try:
        assert one.execute("SHOW synchronous_commit") == [("on",)]
        state = saved_run(one)
        state.messages.append(UserMessage.text("quick"))
        store_of(one).save(state, durable=False)
        assert one.execute("SHOW synchronous_commit") == [("on",)]
        assert len(store_of(one).load("run_pg").messages) == 6
    finally:
        one.close()


def test_errors_do_not_show_the_database_password(db: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    store = store_of(db)
    monkeypatch.setattr(db, "url", "postgresql://tether:hunter2@db.example/tether")
    with pytest.raises(UserError) as missing:
        store.load("run_missing")
    assert "hunter2" not in str(missing.value) and "tether:***@db.example" in str(missing.value)


# --- the run lock ---------------------------------------------------------------------------------


def test_a_lock_whose_holder_is_ending_is_taken_not_refused(db: Any, pg_url: str) -> None:
    # A holder lets go by ending its connection, which the server takes in after the close returned:
    # a run resumed the moment its last process ended was refused "running in another process"
    # (seen as this file's reentrancy test failing on a loaded machine).
    import psycopg

    holder = psycopg.connect(pg_url, autocommit=True)
    holder.execute("SELECT pg_advisory_lock(hashtextextended('tether.run:run_z', 0))")
    ending = threading.Timer(0.1, holder.close)  # the grace is 2 s: this ends well inside it
    ending.start()
    try:
        with store_of(db).lock("run_z"):
            pass
    finally:
        ending.join()
        holder.close()


def test_the_lock_is_reentrant_in_a_process_and_held_until_the_outermost_block_ends(
    db: Any, other_machine: Any
) -> None:
    here, also_here = store_of(db), store_of(db)
    with here.lock("run_x"):
        with also_here.lock("run_x"):  # a worker holds it, then run_stream takes it again
            pass
        with pytest.raises(StoreError, match="run run_x is running in another process"), other_machine.lock("run_x"):
            pass
        with other_machine.lock("run_y"):  # one run's lock does not hold another
            pass
    with other_machine.lock("run_x"), pytest.raises(StoreError, match="another process"), here.lock("run_x"):
        pass
    with here.lock("run_x"):  # the refused attempt left nothing behind
        pass
    with pytest.raises(UserError), here.lock("../x"):
        pass


HOLDER = """
import sys, time
from tether.postgres.db import database
from tether.postgres.runs import PgRunStore
with PgRunStore(database(sys.argv[1])).lock("run_held"):
    print("locked", flush=True)
    time.sleep(120)
"""


def test_a_worker_killed_with_sigkill_lets_go_of_its_run(pg_url: str, other_machine: Any) -> None:
    child = subprocess.Popen([sys.executable, "-c", HOLDER, pg_url], stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout is not None and child.stdout.readline().strip() == "locked"
        with pytest.raises(StoreError, match="another process"), other_machine.lock("run_held"):
            pass
        os.kill(child.pid, signal.SIGKILL)
        child.wait(10)
        deadline = time.monotonic() + 10
        while True:  # the server ends the session when it reads the dropped connection: at once here
            try:
                with other_machine.lock("run_held"):
                    break
            except StoreError:
                assert time.monotonic() < deadline, "the lock outlived the process that held it"
                time.sleep(0.05)
    finally:
        child.kill()
        child.wait()


# --- saves cut by SIGKILL -------------------------------------------------------------------------

SAVER = """
import sys
from tether.harness.state import RunState
from tether.messages import AssistantMessage, TextPart, ToolCallPart, ToolMessage
from tether.postgres.db import database
from tether.postgres.runs import PgRunStore

store = PgRunStore(database(sys.argv[1]))
state = store.load("run_soak") if store.exists("run_soak") else RunState(run_id="run_soak")
n = start = state.config.get("turn", 0)
if state.messages and isinstance(state.messages[-1], AssistantMessage):  # killed while its call ran
    state.messages.append(ToolMessage(call_id=f"c{n}", name="t", content=(TextPart(text=str(n)),)))
while True:
    n += 1
    state.messages.append(AssistantMessage(content=(TextPart(text=str(n)), ToolCallPart(id=f"c{n}", name="t"))))
    state.config = {"turn": n, "count": len(state.messages)}
    store.save(state, durable=n % 2 == 0)
    state.messages.append(ToolMessage(call_id=f"c{n}", name="t", content=(TextPart(text=str(n)),)))
    if n % 5 == 0:  # a compaction: the two oldest turns go and the transcript is written anew
        state.messages = state.messages[4:]
    state.config = {"turn": n, "count": len(state.messages)}
    store.save(state, rewrite=n % 5 == 0)
    if n == start + 2:  # two turns saved: the kill then lands anywhere after them
        print("saving", flush=True)
"""


def test_saves_cut_by_sigkill_always_load_a_whole_commit(pg_url: str, db: Any) -> None:
    rng = random.Random(16)
    store = store_of(db)
    turns = []
    for _ in range(4):
        child = subprocess.Popen([sys.executable, "-c", SAVER, pg_url], stdout=subprocess.PIPE, text=True)
        try:
            assert child.stdout is not None and child.stdout.readline().strip() == "saving"
            time.sleep(rng.uniform(0.01, 0.2))
        finally:
            os.kill(child.pid, signal.SIGKILL)
            child.wait(10)
        state = store.load("run_soak")
        assert state.config["count"] == len(state.messages)  # header and messages of one commit
        assert_pairing(state.messages, complete=False)
        numbers = [int(m.text) for m in state.messages if isinstance(m, AssistantMessage)]
        assert numbers == list(range(numbers[0], state.config["turn"] + 1))  # none lost, none repeated
        turns.append(state.config["turn"])
    # each child went on from the last commit, two turns at least: the last is past 4 wherever the kills landed
    assert turns == sorted(turns) and turns[-1] > 4, turns


# --- the lock fences the holder's saves -----------------------------------------------------------


def _end_lock_connection(db: Any, run_id: str) -> None:
    """What a proxy closing an idle connection, or ``pg_terminate_backend``, does to a run's lock."""
    ended = db.execute(
        "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = %s", (f"tether: run {run_id}",)
    )
    assert ended == [(True,)]
    deadline = time.monotonic() + 10
    while db.execute("SELECT 1 FROM pg_stat_activity WHERE application_name = %s", (f"tether: run {run_id}",)):
        assert time.monotonic() < deadline
        time.sleep(0.02)


def test_a_lock_whose_connection_ended_is_taken_again_when_no_one_else_took_the_run(
    db: Any, other_machine: Any
) -> None:
    from tether.postgres.runs import RunHeld

    state = saved_run(db)
    here = store_of(db)
    with here.lock("run_pg"):
        state = here.load("run_pg")
        _end_lock_connection(db, "run_pg")
        state.messages.extend(turn(2))
        here.save(state)  # no one else has the run: the save takes the lock again and goes on
        assert not here.lost("run_pg")
        with pytest.raises(RunHeld), other_machine.lock("run_pg"):  # held again, by this process
            pass
        state.messages.extend(turn(3))
        here.save(state)
    assert len(other_machine.load("run_pg").messages) == 9


def test_a_process_whose_run_was_taken_saves_nothing_more(db: Any, other_machine: Any) -> None:
    from tether.postgres.runs import RunLockLost

    saved_run(db)
    here = store_of(db)
    with here.lock("run_pg"):
        state = here.load("run_pg")
        _end_lock_connection(db, "run_pg")
        with other_machine.lock("run_pg"):  # another worker picks the run up meanwhile
            state.messages.extend(turn(2))
            with pytest.raises(RunLockLost, match="taken over by another process"):
                here.save(state)  # the intent record that would precede a side effect
            assert here.lost("run_pg")
            theirs = other_machine.load("run_pg")
            assert len(theirs.messages) == 5  # nothing of the loser's save was written
            theirs.messages.extend(turn(7))
            other_machine.save(theirs)
        with pytest.raises(RunLockLost):  # refused for good, even once the other lets go
            here.save(state)
    assert [m.call_id for m in other_machine.load("run_pg").messages if isinstance(m, ToolMessage)] == [
        "c0",
        "c1",
        "c7",
    ]


def test_a_run_saved_by_another_while_the_lock_was_gone_is_not_overwritten(db: Any, other_machine: Any) -> None:
    from tether.postgres.runs import RunLockLost

    saved_run(db)
    here = store_of(db)
    with here.lock("run_pg"):
        state = here.load("run_pg")
        _end_lock_connection(db, "run_pg")
        with other_machine.lock("run_pg"):  # took the run, moved it on, and let go again
            theirs = other_machine.load("run_pg")
            theirs.messages.extend(turn(7))
            other_machine.save(theirs)
        state.messages.extend(turn(2))
        with pytest.raises(RunLockLost):  # the lock is free again, but the run is not as this process left it
            here.save(state)
    assert len(other_machine.load("run_pg").messages) == 7


def test_a_run_that_loses_its_lock_mid_run_acts_no_more(db: Any, other_machine: Any) -> None:
    from tether import Agent, tool
    from tether.harness.loop import run
    from tether.testing import FunctionModel, Reply, call

    acted: list[str] = []

    def act(step: str) -> str:
        """Do one step of work in the world."""
        acted.append(step)
        if step == "one":  # meanwhile the lock's connection ends and another worker takes the run
            _end_lock_connection(db, "run_fence")
            taken.enter_context(other_machine.lock("run_fence"))
        return f"did {step}"

    def reply(messages: list[Any], request: Any) -> Any:
        done = sum(isinstance(m, ToolMessage) for m in messages)
        return call(f"c{done}", "act", {"step": ["one", "two"][done]}) if done < 2 else Reply(text="all done")

    import contextlib

    taken = contextlib.ExitStack()
    with taken:
        agent = Agent(FunctionModel(reply), tools=[tool(act)], max_turns=5)
        result = asyncio_run(run(agent, "go", state=RunState(run_id="run_fence"), store=store_of(db)))
        assert acted == ["one"]  # the second step's intent could not be recorded, so it never ran
        assert result.status == "failed" and "taken over by another process" in (result.reason or "")
        saved = other_machine.load("run_fence")  # as last committed before the loss: the call, no result
        assert saved.status == "running" and not any(isinstance(m, ToolMessage) for m in saved.messages)


def asyncio_run(coro: Any) -> Any:
    import asyncio

    return asyncio.run(coro)
