"""The Postgres stores attacked from outside (round 4): a session deleted while a run on another
machine continues it, and the promises the file stores keep, kept on Postgres too."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.cli.conftest import run_main
from tether.messages import AssistantMessage, TextPart, UserMessage


def texts(messages: list[Any]) -> list[str]:
    return [part.text for m in messages for part in m.content if isinstance(part, TextPart)]


@pytest.fixture
def other_machine(pg_url: str) -> Iterator[Any]:
    """A run store on a pool of its own: to the locks, another process or machine."""
    from tether.postgres.db import Database
    from tether.postgres.runs import PgRunStore

    pool = Database(pg_url, max_size=2)
    yield PgRunStore(pool)
    pool.close()


def test_deleting_a_session_a_run_on_another_machine_continues_is_refused(
    pg_url: str, tether_home: Path, other_machine: Any, monkeypatch: pytest.MonkeyPatch, capsys: Any
) -> None:
    """On a Postgres deployment `tether sessions delete` said `deleted session s_talk` while a worker's
    run continued it; the run's next append made the session again, a fragment without its
    beginning. Now the deletion is refused, naming the run, and goes through once the run stops."""
    from tether.postgres.db import database
    from tether.postgres.sessions import PgSessionStore

    monkeypatch.setenv("TETHER_DATABASE_URL", pg_url)
    sessions = PgSessionStore(database(pg_url))
    sessions.append("s_talk", [UserMessage.text("wait for it")])
    with other_machine.lock("run_talk"), other_machine.lock_session("s_talk", "run_talk"):
        code, _, err = run_main("sessions", "delete", "s_talk", capsys=capsys)
        assert code == 2 and "Traceback" not in err, err
        assert "session s_talk is being continued by run run_talk" in err and "nothing was deleted" in err
        # the run goes on: its answer follows the question it answers
        sessions.append("s_talk", [AssistantMessage(content=(TextPart(text="done waiting"),))])
    assert texts(sessions.load("s_talk")) == ["wait for it", "done waiting"]
    code, _, err = run_main("sessions", "delete", "s_talk", capsys=capsys)
    assert code == 0 and "deleted session s_talk" in err
    assert sessions.list() == []
    # and the deletion let go: a run may take the session now
    with other_machine.lock("run_next"), other_machine.lock_session("s_talk", "run_next"):
        pass


def test_a_run_whose_reason_holds_a_lone_surrogate_is_saved_with_its_exit(pg_url: str) -> None:
    """A run that ended for a reason holding half a surrogate pair (an error's text, a stop's words
    from a client) could not be saved on Postgres (UTF-8 cannot carry it: a UnicodeEncodeError,
    not even a StoreError): the final save failed twice, and the run stayed `running` in the
    database for ever. The file store keeps the reason as it was; so does Postgres now."""
    from tether import Agent, run_sync
    from tether.postgres.db import database
    from tether.postgres.runs import PgRunStore
    from tether.testing import FunctionModel

    def model(messages: Any, request: Any) -> str:
        raise RuntimeError("the provider said \ud83d and stopped")

    store = PgRunStore(database(pg_url))
    result = run_sync(Agent(FunctionModel(model)), "go", store=store)
    assert result.status == "failed" and "the provider said \ud83d" in (result.reason or "")
    saved = store.load(result.run_id)
    assert saved.status == "failed" and saved.reason == result.reason
    assert [r["status"] for r in store.list()] == ["failed"]


def test_two_deliveries_of_one_run_to_one_worker_drive_it_once(tmp_path: Path, pg_url: str) -> None:
    """A run's message delivered twice to the same worker process at once (RabbitMQ hands back a
    delivery past its consumer_timeout, or a look-again lands while the run is driven): the run
    lock is re-entrant within a process, so both threads took it, both claimed the job and both
    drove the run: the model was paid twice for the same turn, two `done`s were written. The
    second delivery must step aside as it does on another worker."""
    import threading
    import time

    from tether import Agent
    from tether.dispatch.worker import Worker
    from tether.postgres.db import database
    from tether.testing import FunctionModel, Reply

    paid: list[int] = []
    gate = threading.Barrier(2)

    def reply(messages: list[Any], request: object) -> Any:
        paid.append(len(messages))
        time.sleep(0.3)  # both deliveries are in flight while the model thinks
        return Reply(text="once")

    worker = Worker(
        home=tmp_path / "home",
        agents={"a": Agent(FunctionModel(reply), max_turns=3)},
        db=database(pg_url),
        lock_wait_s=0.5,
    )
    try:
        worker.jobs.enqueue(
            run_id="r-twice",
            session_id="s-twice",
            owner="local",
            agent="a",
            kind="start",
            prompt="go",
            chosen={},
            config={"message_id": "m-twice", "trace_id": "t" * 32},
        )
        outcomes: list[str] = []

        def deliver() -> None:
            gate.wait()
            outcomes.append(worker.drive("r-twice"))

        threads = [threading.Thread(target=deliver) for _ in range(2)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(30)
        assert outcomes.count("driven") == 1 and len(outcomes) == 2, outcomes
        assert paid == [1]
        kinds = [k for _, k, _ in worker.jobs.events_after("r-twice", 0, 5000)]
        assert kinds.count("done") == 1 and kinds.count("turn") == 1, kinds
    finally:
        worker.close()


def test_a_nul_in_a_documents_name_or_metadata_is_not_a_raw_database_error(pg_url: str) -> None:
    """`KnowledgeBase.add_text` on Postgres with a NUL in the document's metadata failed with
    psycopg's UntranslatableCharacter ("unsupported Unicode escape sequence"), and with one in its
    name with a DataError: tracebacks from inside the database driver. The metadata is now kept
    with U+FFFD for the NUL (as the server's records are); a name is refused, saying why."""
    from tether.errors import StoreError
    from tether.knowledge.base import KnowledgeBase
    from tether.postgres.db import database
    from tether.postgres.knowledge import PgKnowledgeStore

    kb = KnowledgeBase(PgKnowledgeStore(database(pg_url)))
    kb.add_text("gaskets.txt", "gasket torque", meta={"source": "upload\x00one"}, embed=False)
    (info,) = kb.store.documents()
    assert info.meta == {"source": "upload\ufffdone"}
    assert [h.citation for h in kb.search("gasket", mode="keyword").hits] == ["gaskets.txt:1-1"]
    with pytest.raises(StoreError, match=r"NUL character .* Name it without"):
        kb.add_text("a\x00b.txt", "torque", embed=False)
    assert [d.name for d in kb.store.documents()] == ["gaskets.txt"]
    assert kb.store.remove_document("a\x00b.txt") is False


def test_a_database_away_for_a_few_seconds_loses_none_of_a_runs_events(
    pg_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A worker's events (the text deltas, the turns, the `done`) are written by a thread of their
    own; with the database away for more than about 3 s (five tries), it dropped the batch for good:
    the streams of every client missed those events, the ids they saw skipped numbers, and a `done`
    in that batch never came. Now the writer keeps trying (a failover takes longer than 3 s)."""
    import psycopg

    from tether.dispatch.jobs import EventWriter, Jobs
    from tether.postgres.db import Database

    db = Database(pg_url, max_size=2)
    jobs = Jobs(db)
    real_tx = db.tx
    away = [7]  # tries that meet the database away: more than the five the writer made

    def tx() -> Any:
        if away[0] > 0:
            away[0] -= 1
            raise psycopg.OperationalError("the database system is starting up")
        return real_tx()

    monkeypatch.setattr(db, "tx", tx)
    monkeypatch.setattr(EventWriter, "retry_s", 0.01, raising=False)  # a quicker test, the same tries
    try:
        writer = EventWriter(jobs, "r-away")
        for n in range(3):
            writer.append("text_delta", {"type": "text_delta", "text": str(n)})
        writer.append("done", {"type": "done"})
        writer.close()
        rows = jobs.events_after("r-away", 0)
        assert [(i, k) for i, k, _ in rows] == [(1, "text_delta"), (2, "text_delta"), (3, "text_delta"), (4, "done")]
        assert away[0] == 0
    finally:
        db.close()
