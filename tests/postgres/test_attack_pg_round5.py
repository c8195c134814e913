"""The Postgres stores attacked from outside (round 5): the database away for a moment while a run
saves (its connection killed, or cut after the commit was sent and before its answer came back)."""

from __future__ import annotations

import contextlib
import glob
import os
import socket
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest

from tether.messages import TextPart


class CommitCutter:
    """A Unix-socket proxy in front of the test's Postgres: once armed, it passes a COMMIT on to the
    server and then cuts that connection before the server's answer reaches the client, as a proxy
    restart or a network fault does: the commit lands, the client hears nothing."""

    def __init__(self, url: str) -> None:
        base, _, query = url.partition("?")
        params = dict(p.split("=", 1) for p in query.split("&") if p)
        (self.target,) = [p for p in glob.glob(os.path.join(params["host"], ".s.PGSQL.*")) if not p.endswith(".lock")]
        self.dir = tempfile.mkdtemp(prefix="tether-cut-")
        self.url = base + "?host=" + self.dir
        self.armed = 0
        self.cut = 0
        self._lock = threading.Lock()
        self.server = socket.socket(socket.AF_UNIX)
        self.server.bind(os.path.join(self.dir, os.path.basename(self.target)))
        self.server.listen(64)
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self.server.accept()
            except OSError:
                return
            upstream = socket.socket(socket.AF_UNIX)
            upstream.connect(self.target)
            gone = threading.Event()
            threading.Thread(target=self._pipe, args=(client, upstream, True, gone), daemon=True).start()
            threading.Thread(target=self._pipe, args=(upstream, client, False, gone), daemon=True).start()

    def _pipe(self, src: socket.socket, dst: socket.socket, from_client: bool, gone: threading.Event) -> None:
        try:
            while data := src.recv(65536):
                if gone.is_set():
                    break
                cutting = False
                if from_client and b"COMMIT\x00" in data:
                    with self._lock:
                        if self.armed:
                            self.armed -= 1
                            cutting = True
                            self.cut += 1
                            gone.set()  # no answer goes back from now on
                dst.sendall(data)
                if cutting:
                    time.sleep(0.3)  # the server commits
                    break
        except OSError:
            pass
        finally:
            for s in (src, dst):
                with contextlib.suppress(OSError):
                    s.shutdown(socket.SHUT_RDWR)
                s.close()

    def close(self) -> None:
        self.server.close()


@pytest.fixture
def cutter(pg_url: str) -> Iterator[CommitCutter]:
    proxy = CommitCutter(pg_url)
    yield proxy
    from tether.postgres.db import close_all

    close_all()
    proxy.close()


def _tool_then_answer(on_tool: Any) -> Any:
    from tether import Agent, tool
    from tether.testing import FunctionModel, Reply, call

    shipped: list[str] = []

    def ship(order: str) -> str:
        """Ship an order."""
        shipped.append(order)
        on_tool()
        return f"shipped {order}"

    def reply(messages: list[Any], request: object) -> Any:
        if len(messages) == 1:
            return call("c1", "ship", {"order": "A-1"})
        return Reply(text="all shipped")

    return Agent(FunctionModel(reply), tools=[tool(ship)], max_turns=4), shipped


def _texts(messages: list[Any]) -> list[str]:
    return [p.text for m in messages for p in m.content if isinstance(p, TextPart)]


def test_a_commit_whose_answer_was_lost_is_counted_once_and_the_run_goes_on(cutter: CommitCutter) -> None:
    """A save whose COMMIT reached the database but whose answer was lost with the connection (a
    proxy restarting, a network fault) made the run fail ("could not save run ... server closed the
    connection"); the run's final save then met its own landed commit (commit_seq one ahead) and
    was refused twice, so the database kept the run `running` for ever while the caller was told
    `failed`. Now the store asks Postgres whether that transaction committed, counts it once, and
    the run completes."""
    from tether import run_sync
    from tether.postgres.db import database
    from tether.postgres.runs import PgRunStore
    from tether.postgres.sessions import PgSessionStore

    store = PgRunStore(database(cutter.url))
    sessions = PgSessionStore(database(cutter.url))

    def arm() -> None:
        cutter.armed = 2  # the session's append of the result, then the run's save of it

    agent, shipped = _tool_then_answer(arm)
    result = run_sync(agent, "ship A-1", store=store, session=sessions, session_id="s-cut")
    assert cutter.cut == 2
    assert result.status == "completed", result.reason
    assert shipped == ["A-1"]
    saved = store.load(result.run_id)
    assert saved.status == "completed" and len(saved.messages) == 4
    assert saved.commit_seq == result_commits(cutter.url, result.run_id)
    # the session holds each message once: the append that landed was not made again
    assert [type(m).__name__ for m in sessions.load("s-cut")] == [
        "UserMessage",
        "AssistantMessage",
        "ToolMessage",
        "AssistantMessage",
    ]
    assert _texts(sessions.load("s-cut"))[-1] == "all shipped"


def result_commits(url: str, run_id: str) -> int:
    with psycopg.connect(url) as conn:
        row = conn.execute("SELECT commit_seq FROM tether_runs WHERE run_id = %s", (run_id,)).fetchone()
    assert row is not None
    return int(row[0])


def test_a_save_whose_connection_is_killed_is_made_again_and_the_run_goes_on(pg_url: str) -> None:
    """One connection killed by the server in the middle of a save (pg_terminate_backend, a
    restart, a failover) ended the run `failed` ("terminating connection due to administrator
    command"): a moment's outage lost the user's answer. Now the save is made again on a new
    connection (for up to a minute while the database is away) and the run completes."""
    from tether import run_sync
    from tether.postgres.db import database
    from tether.postgres.runs import PgRunStore

    store = PgRunStore(database(pg_url))
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute("CREATE SEQUENCE kills")
        conn.execute(
            "CREATE FUNCTION kill_once() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN "
            # the save of the tool's result, once (a sequence is not rolled back with the kill)
            "IF NEW.message_count = 3 AND nextval('kills') = 1 THEN PERFORM pg_terminate_backend(pg_backend_pid()); "
            "PERFORM pg_sleep(5); END IF; RETURN NEW; END $$"
        )
        conn.execute("CREATE TRIGGER kill_once BEFORE UPDATE ON tether_runs FOR EACH ROW EXECUTE FUNCTION kill_once()")
    agent, shipped = _tool_then_answer(lambda: None)
    result = run_sync(agent, "ship A-1", store=store)
    with psycopg.connect(pg_url) as conn:
        assert conn.execute("SELECT last_value FROM kills").fetchone()[0] >= 1  # the kill did happen
    assert result.status == "completed", result.reason
    assert shipped == ["A-1"]
    saved = store.load(result.run_id)
    assert saved.status == "completed" and _texts(saved.messages)[-1] == "all shipped"


@pytest.mark.parametrize(
    ("url", "secret"),
    [
        # a raw @ in the password: the driver takes what follows the first @ for the host
        ("postgresql://tether:Pa55@w0rd.x@127.0.0.1:1/db", "w0rd.x"),
        # a % that is not an escape: the driver quotes the whole password back
        ("postgresql://tether:50%off-Pa55@127.0.0.1:1/db", "50%off-Pa55"),
        # a space in the password: quoted back too
        ("postgresql://tether:Pa55 w0rd@127.0.0.1:1/db", "Pa55 w0rd"),
    ],
)
def test_a_database_url_the_driver_cannot_use_never_shows_its_password(
    url: str, secret: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: Any
) -> None:
    """The docs promise a database URL is never printed with its password. A URL whose password
    held a raw @, a % that is no escape or a space came back in the error of
    `tether.postgres.database(url)` (and of `tether runs`, for the @) with the password, or its part
    after the @, in clear: the driver's own message quotes it, and only the URL in front of it was
    masked. Now both are."""
    from tests.cli.conftest import run_main
    from tether.errors import ConfigError
    from tether.postgres.db import database

    with pytest.raises(ConfigError, match="cannot connect to the database") as refused:
        database(url)
    assert secret not in str(refused.value), str(refused.value)
    monkeypatch.setenv("TETHER_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("TETHER_DATABASE_URL", url)
    code, out, err = run_main("runs", capsys=capsys)
    assert code != 0 and "Traceback" not in err, err
    assert "cannot connect to the database" in err, err
    assert secret not in out + err, err


def test_a_knowledge_base_dropped_on_another_machine_is_named_not_a_raw_error(pg_url: str) -> None:
    """`tether kb drop docs` on one machine while a server on another serves an agent with that base:
    the server's next search failed with `IndexError: list index out of range` and its next
    document with psycopg's ForeignKeyViolation (raw errors from inside the store). Now both say
    the base was dropped and what to do; removing a document of it is simply nothing to remove."""
    from tether.errors import StoreError
    from tether.knowledge.base import KnowledgeBase
    from tether.postgres.db import Database, database
    from tether.postgres.knowledge import PgKnowledgeStore

    served = KnowledgeBase(PgKnowledgeStore(database(pg_url), "docs"))
    served.add_text("gaskets.txt", "gasket torque", embed=False)
    other = Database(pg_url, max_size=1)  # the other machine
    try:
        assert PgKnowledgeStore.drop(other, "docs") is True
    finally:
        other.close()
    with pytest.raises(StoreError, match=r"knowledge base 'docs' was dropped .* nothing was searched"):
        served.search("gasket", mode="keyword")
    with pytest.raises(StoreError, match=r"knowledge base 'docs' was dropped .* nothing was added"):
        served.add_text("bolts.txt", "bolt torque", embed=False)
    assert served.store.remove_document("gaskets.txt") is False
    assert PgKnowledgeStore.bases(database(pg_url)) == []
