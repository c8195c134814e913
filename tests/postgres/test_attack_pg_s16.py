"""Many machines attacked from outside (round s16): a run whose lock's connection ended (a proxy or
``idle_session_timeout`` closing it while the model thought, ``pg_terminate_backend``) while another
process continued its session."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
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


# --- a worker killed while its model's answer streamed ---------------------------------------------


ROOT = Path(__file__).resolve().parents[2]
ANSWER = "Your order left the warehouse this morning and arrives on Friday."


def streaming_agent(asked: Any, kill: bool, answer: str = ANSWER) -> Agent:
    """Streams ``answer`` in pieces, noting each question in ``asked``; with ``kill``, the process
    SIGKILLs itself once the first piece is in the run's stream (the reply is not saved yet)."""
    import asyncio
    import os

    from tether.providers.scripted import ResponseDone, StreamText, split_text

    class Streaming(FunctionModel):
        async def stream(self, request: Any) -> Any:
            response = await self.complete(request)
            for i, piece in enumerate(split_text(answer)):
                yield StreamText(piece)
                if kill and i == 0:
                    from tether.postgres.db import database

                    db = database(os.environ["S16_URL"])
                    deadline = time.monotonic() + 60  # a hang guard: the piece is written in a moment
                    while not db.execute("SELECT 1 FROM tether_events WHERE kind = 'text_delta'"):
                        assert time.monotonic() < deadline, "the first piece never reached the stream"
                        await asyncio.sleep(0.01)
                    os.kill(os.getpid(), 9)
            yield ResponseDone(response)

    def reply(messages: list[Any], request: object) -> Reply:
        with open(asked, "a") as f:
            f.write("asked\n")
        return Reply(text=answer)

    return Agent(Streaming(reply))


CHILD = r"""
import os, sys
from pathlib import Path
sys.path.insert(0, sys.argv[1])
from tests.postgres.test_attack_pg_s16 import streaming_agent
from tether.dispatch.worker import Worker
from tether.postgres.db import database

url, run_id, asked, home = sys.argv[2], sys.argv[3], Path(sys.argv[4]), Path(sys.argv[5])
os.environ["S16_URL"] = url
Worker(home=home, agents={"answer": streaming_agent(asked, True)}, db=database(url)).drive(run_id)
sys.exit(3)  # the kill never came
"""


@pytest.mark.parametrize("again", ["same", "other"])
def test_a_worker_killed_while_the_answer_streamed_does_not_leave_the_client_the_answer_twice(
    pg_url: str, tmp_path: Any, again: str
) -> None:
    """A worker SIGKILLed while its model's answer streamed: the first words were in the run's
    stream, the reply not saved. The worker that got RabbitMQ's redelivery asked the model again
    (the reply was never recorded) and streamed the whole answer after those words: every client
    showed "Your order left Your order left the warehouse ...". Now the stream holds the answer
    once when the model says the same again (``same``); when it says something else (``other``),
    the words already shown are followed by a ``retry`` event that says the answer was asked
    again, before the new answer."""
    import json
    import subprocess
    import sys

    from tether.dispatch.worker import Worker
    from tether.postgres.db import database

    other = "Friday, by noon."
    asked = tmp_path / "asked.log"
    survivor = streaming_agent(asked, False, ANSWER if again == "same" else other)
    worker = Worker(home=tmp_path / "home", agents={"answer": survivor}, db=database(pg_url))
    try:
        jobs = worker.jobs
        jobs.enqueue(
            run_id="r_cut",
            session_id="s_cut",
            owner="local",
            agent="answer",
            kind="start",
            prompt="where is my order?",
            chosen={},
            config={"message_id": "m1", "trace_id": "t" * 32},
        )
        child = subprocess.run(
            [sys.executable, "-c", CHILD, str(ROOT), pg_url, "r_cut", str(asked), str(tmp_path / "child")],
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert child.returncode == -9, child.stderr[-2000:]
        assert worker.drive("r_cut") == "driven"  # RabbitMQ's redelivery
        events = [(kind, json.loads(data)) for _, kind, data in jobs.events_after("r_cut", 0)]
        assert worker.runs.load("r_cut").cost_unknown_usd > 0  # the lost reply is counted, as the docs say
    finally:
        worker.close()
    kinds = [kind for kind, _ in events]
    shown = "".join(data["text"] for kind, data in events if kind == "text_delta")
    assert kinds.count("done") == 1 and kinds.count("turn") == 1, kinds
    assert asked.read_text().splitlines() == ["asked", "asked"]  # the lost reply is asked for again
    if again == "same":
        assert shown == ANSWER
        assert "retry" not in kinds
    else:
        first = ANSWER.split(" ")[0]
        assert shown.startswith(first) and shown.endswith(other) and shown.count(other) == 1, shown
        retry = kinds.index("retry")
        assert kinds.index("text_delta") < retry < len(kinds) - 1 - kinds[::-1].index("text_delta")
        assert "asked again" in events[retry][1]["reason"]


# --- the listener of a node or worker ----------------------------------------------------------------


def test_making_a_listener_does_not_wait_for_a_database_that_does_not_answer() -> None:
    """A node makes its listener on its event loop when its first stream starts, a worker as it
    starts. With the database not answering (a host gone from the network, a failover in progress:
    the connection is accepted, or waits, and no answer comes), ``Listener(...)`` waited 15 s for
    it, and the node's whole event loop with it: every stream, request and /healthz of the node
    stood still. Now it returns at once and connects on its own thread (and gives up on a
    connection after ``connect_timeout_s``, to try again)."""
    import socket

    from tether.dispatch.jobs import Listener

    server = socket.create_server(("127.0.0.1", 0))
    port = server.getsockname()[1]
    made, held = threading.Event(), threading.Event()
    answered: list[bool] = []

    def silent() -> None:  # takes the connection, and says nothing until the listener was made
        server.settimeout(30)
        conn, _ = server.accept()
        held.set()
        answered.append(made.wait(12))  # a hang guard, shorter than the 15 s the listener waited
        conn.close()

    t = threading.Thread(target=silent)
    t.start()
    listener = Listener(f"postgresql://tether@127.0.0.1:{port}/tether", ("tether_events",), lambda c, r: None)
    made.set()
    try:
        t.join(40)
        assert held.is_set() and answered == [True]  # made while its connection still waited for an answer
    finally:
        listener.close()
        server.close()


def test_a_listener_tells_its_followers_to_look_again_once_it_listens(pg_url: str) -> None:
    """Since making a listener no longer waits for its connection, a notification sent before it
    LISTENs is not heard: once it listens, it tells every follower to look again (a stop asked
    meanwhile reaches its run), and what is sent next is heard."""
    import psycopg

    from tether.dispatch.jobs import Listener

    heard: list[tuple[str, str | None]] = []
    listening = threading.Event()

    def on(channel: str, run_id: str | None) -> None:
        heard.append((channel, run_id))
        if run_id is None:
            listening.set()

    listener = Listener(pg_url, ("tether_cancel",), on)
    try:
        assert listening.wait(30)
        with psycopg.connect(pg_url, autocommit=True) as conn:
            conn.execute("SELECT pg_notify('tether_cancel', 'r_1')")
        deadline = time.monotonic() + 30  # a hang guard
        while ("tether_cancel", "r_1") not in heard:
            assert time.monotonic() < deadline
            time.sleep(0.02)
        assert heard[0] == ("tether_cancel", None)
    finally:
        listener.close()


# --- two workers' event writers on one run ------------------------------------------------------------


def test_the_worker_that_takes_a_run_over_is_not_left_out_of_its_stream_by_the_last_batch_of_the_first(
    pg_url: str,
) -> None:
    """A worker that lost its hold on a run (its lock's connection ended) streams on until its next
    save; another worker claims the run and numbers its events after the last one written. A batch
    of the first worker that was being committed as the second claimed (its check that the run was
    still its own made before the claim) landed on the numbers the second had counted from: the
    second worker's events with those numbers were dropped as duplicates, and every client read the
    first worker's stale text where the new worker's was. Now a claim waits for a batch being
    written, and a batch after the claim writes nothing: the new worker's events are all there."""
    import contextlib
    import json

    from tether.dispatch.jobs import EventWriter, Jobs
    from tether.postgres.db import database

    db = database(pg_url)
    jobs = Jobs(db)
    jobs.enqueue(run_id="r_two", session_id="s_two", owner="local", agent="a", kind="start", prompt="hi", chosen={})
    first = jobs.claim("r_two", "first")
    assert first is not None

    class Paused:  # the first worker's database: each batch waits before its commit until let go
        def __init__(self) -> None:
            self.inside, self.go = threading.Event(), threading.Event()

        def __getattr__(self, name: str) -> Any:
            return getattr(db, name)

        @contextlib.contextmanager
        def tx(self) -> Iterator[Any]:
            with db.tx() as conn:
                yield conn
                self.inside.set()
                assert self.go.wait(60)

    paused = Paused()
    first_jobs = Jobs(db)
    first_jobs.db = paused  # type: ignore[assignment]
    stale = EventWriter(first_jobs, "r_two", first.attempts)
    stale.append("text_delta", {"type": "text_delta", "run_id": "r_two", "text": "stale words"})
    assert paused.inside.wait(30)

    def take_over() -> EventWriter:  # as a worker does: claim the run, then stream after its last event
        second = jobs.claim("r_two", "second")
        assert second is not None
        writer = EventWriter(jobs, "r_two", second.attempts)
        writer.append("text_delta", {"type": "text_delta", "run_id": "r_two", "text": "new words"})
        return writer

    taking, took = in_thread(take_over)
    deadline = time.monotonic() + 30  # a hang guard: the claim returns, or waits for the batch's commit
    while taking.is_alive() and not db.execute(
        "SELECT 1 FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND query LIKE 'UPDATE tether_jobs%%'"
    ):
        assert time.monotonic() < deadline
        time.sleep(0.02)
    paused.go.set()
    taking.join(30)
    took[0].close()
    stale.append("text_delta", {"type": "text_delta", "run_id": "r_two", "text": "more stale words"})
    stale.close()

    stream = [json.loads(data)["text"] for _, _, data in jobs.events_after("r_two", 0)]
    assert stream == ["stale words", "new words"]


# --- memory on Postgres ---------------------------------------------------------------------------------


def test_a_memory_write_whose_connection_is_killed_is_made_again(pg_url: str) -> None:
    """The connection of a memory write killed by the server as it wrote (a restart, a failover,
    ``pg_terminate_backend``): the memory tool's call failed with the driver's "terminating
    connection due to administrator command" and the note was not saved, where a run's and a
    session's saves are made again on a new connection. Now the write is made again, once, and the
    model is told it was saved."""
    import psycopg

    from tether import run_sync
    from tether.harness.state import RunState
    from tether.memory import Memory
    from tether.messages import ToolMessage
    from tether.postgres.db import database
    from tether.testing import call

    memory = Memory.open_postgres(database(pg_url))
    memory.add("notes", "The user drinks tea.")
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute("CREATE SEQUENCE kills")
        conn.execute(
            "CREATE FUNCTION kill_once() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN "
            # once (a sequence is not rolled back with the kill)
            "IF nextval('kills') = 1 THEN PERFORM pg_terminate_backend(pg_backend_pid()); PERFORM pg_sleep(5); "
            "END IF; RETURN NEW; END $$"
        )
        conn.execute("CREATE TRIGGER kill_once BEFORE UPDATE ON memory_texts FOR EACH ROW EXECUTE FUNCTION kill_once()")

    def reply(messages: list[Any], request: object) -> Any:
        if not any(isinstance(m, ToolMessage) for m in messages):
            return call("c1", "memory", {"action": "add", "store": "notes", "text": "The user's name is Ana."})
        return Reply(text="Noted.")

    agent = Agent(FunctionModel(reply), tools=list(memory.tools()))
    state = RunState(run_id="r_memory")
    assert run_sync(agent, "remember my name is Ana", state=state).status == "completed"
    with psycopg.connect(pg_url) as conn:
        assert conn.execute("SELECT last_value FROM kills").fetchone()[0] >= 1  # the kill did happen
    told = [m.text for m in state.messages if isinstance(m, ToolMessage)]
    assert told and told[0].startswith("Saved to notes."), told
    assert memory.store("notes").entries() == ["The user drinks tea.", "The user's name is Ana."]


# --- a node's streams ---------------------------------------------------------------------------------


def test_a_node_reads_a_streams_events_off_its_event_loop(pg_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """A node follows each stream of a run on a worker by reading ``tether_events`` and
    ``tether_jobs``. It read them on its event loop: with the database slow or away (the pool
    waits 30 s for a connection), one stream's read held the node's every other stream, request
    and /healthz that long. Now the reads are made off the loop: while one waits, the loop goes on."""
    import asyncio

    from tether.dispatch.jobs import Jobs
    from tether.dispatch.remote import RemoteRuns
    from tether.postgres.db import database

    jobs = Jobs(database(pg_url))
    jobs.enqueue(run_id="r_node", session_id="s_node", owner="local", agent="a", kind="start", prompt="hi", chosen={})
    jobs.finish("r_node")
    ticked = threading.Event()
    waited: list[bool] = []
    read = jobs.events_after

    def slow_read(*args: Any) -> Any:  # the database slow: this read waits until the loop has moved on
        if not waited:
            waited.append(ticked.wait(30))  # a hang guard: the loop ticks at once, unless this holds it
        return read(*args)

    monkeypatch.setattr(jobs, "events_after", slow_read)
    runs = RemoteRuns(jobs=jobs, runs=None, sessions=None, dispatcher=None)  # type: ignore[arg-type]

    async def go() -> None:
        async def tick() -> None:
            await asyncio.sleep(0)
            ticked.set()

        ticking = asyncio.ensure_future(tick())
        assert [batch async for batch in runs.log("r_node").follow(0)] == []
        await ticking

    asyncio.run(go())
    assert waited == [True]


def test_a_node_asks_whether_a_sessions_run_is_over_off_its_event_loop(
    pg_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The same for the question a message to a busy session asks (``settled``): it read the job
    on the node's event loop."""
    import asyncio

    from tether.dispatch.jobs import Jobs
    from tether.dispatch.remote import RemoteRuns
    from tether.postgres.db import database

    jobs = Jobs(database(pg_url))
    jobs.enqueue(run_id="r_busy", session_id="s_busy", owner="local", agent="a", kind="start", prompt="hi", chosen={})
    jobs.finish("r_busy")
    ticked = threading.Event()
    waited: list[bool] = []
    get = jobs.get

    def slow_get(run_id: str) -> Any:
        if not waited:
            waited.append(ticked.wait(30))  # a hang guard: the loop ticks at once, unless this holds it
        return get(run_id)

    monkeypatch.setattr(jobs, "get", slow_get)
    runs = RemoteRuns(jobs=jobs, runs=None, sessions=None, dispatcher=None)  # type: ignore[arg-type]

    async def go() -> bool:
        async def tick() -> None:
            await asyncio.sleep(0)
            ticked.set()

        ticking = asyncio.ensure_future(tick())
        over = await runs.settled("r_busy")
        await ticking
        return over

    assert asyncio.run(go()) is True
    assert waited == [True]
