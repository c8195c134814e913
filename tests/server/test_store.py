"""The server's store, one suite over both backends (SQLite and Postgres): every method of
``ServerStore``, the ordering rules, "the first message_id wins" under a race, tokens kept only as
hashes, and auth that stays required once a token has existed."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tether.server.store import FeedbackRecord, ServerStore, SessionRecord, TurnRecord, hash_token

Opener = Callable[[], ServerStore]


@pytest.fixture(scope="module")
def server_database(pg_server: Any) -> str:
    """One database for this module's Postgres tests (each test empties its tables): a fresh
    database per test costs a third of a second to make."""
    return str(pg_server.fresh_database())


@pytest.fixture
def open_store(backend: str, request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Opener]:
    """Opens another store on the same data each call: another process, or another machine."""
    opened: list[ServerStore] = []

    if backend == "sqlite":
        from tether.server.store import SqliteServerStore

        def make() -> ServerStore:
            return SqliteServerStore(tmp_path / "serve" / "server.db")
    else:
        from tether.postgres.db import Database
        from tether.postgres.server import MIGRATIONS, PgServerStore

        url = request.getfixturevalue("server_database")
        pools: list[Database] = [Database(url, max_size=1)]
        pools[0].migrate("server", MIGRATIONS)
        for table in ("server_sessions", "server_turns", "server_feedback", "server_tokens", "server_meta"):
            pools[0].execute(f"DELETE FROM {table}")

        def make() -> ServerStore:
            pools.append(Database(url, max_size=4))  # a pool of its own, as on another machine
            return PgServerStore(pools[-1])

    def opener() -> ServerStore:
        opened.append(make())
        return opened[-1]

    yield opener
    for s in opened:
        s.close()
    if backend == "postgres":
        for db in pools:
            db.close()


@pytest.fixture
def store(open_store: Opener) -> ServerStore:
    return open_store()


def session(sid: str, owner: str = "alice", *, updated: float = 1.0, **kw: Any) -> SessionRecord:
    return SessionRecord(
        session_id=sid, owner=owner, agent="helper", title=f"title {sid}", created=1.0, updated=updated, **kw
    )


def turn(mid: str, run: str, *, owner: str = "alice", sid: str = "s1", created: float = 1.0) -> TurnRecord:
    return TurnRecord(
        message_id=mid,
        run_id=run,
        session_id=sid,
        owner=owner,
        agent="helper",
        trace_id=f"trace-{run}",
        text=f"text of {mid}",
        created=created,
    )


# --- sessions ----------------------------------------------------------------------------------


def test_sessions_belong_to_their_owner_newest_first(store: ServerStore) -> None:
    store.add_session(session("s1", updated=10.0, chosen={"colour": "red"}))
    store.add_session(session("s2", updated=30.0))
    store.add_session(session("s3", updated=20.0))
    store.add_session(session("b1", owner="bob"))
    assert store.session("s1", "alice") == session("s1", updated=10.0, chosen={"colour": "red"})
    assert store.session("s1", "bob") is None and store.session("nope", "alice") is None
    assert [s.session_id for s in store.sessions("alice")] == ["s2", "s3", "s1"]
    assert [s.session_id for s in store.sessions("bob")] == ["b1"]
    assert store.sessions("carol") == []


def test_touch_session_merges_chosen_and_moves_it_to_the_top(store: ServerStore) -> None:
    store.add_session(session("s1", updated=1.0, chosen={"colour": "red", "size": "S"}))
    store.add_session(session("s2", updated=2.0))
    before = time.time()
    store.touch_session("s1", chosen={"size": "L", "count": 3, "nested": {"a": [1, 2.5, None]}})
    got = store.session("s1", "alice")
    assert got is not None
    assert got.chosen == {"colour": "red", "size": "L", "count": 3, "nested": {"a": [1, 2.5, None]}}
    assert got.updated >= before
    assert [s.session_id for s in store.sessions("alice")] == ["s1", "s2"]
    store.touch_session("s2")  # no values: only the time
    store.touch_session("s2", chosen={})
    s2 = store.session("s2", "alice")
    assert s2 is not None and s2.chosen == {} and s2.updated >= got.updated
    store.touch_session("missing", chosen={"x": 1})  # nothing to touch: no error, nothing made
    assert store.session("missing", "alice") is None


def test_rename_session(store: ServerStore) -> None:
    store.add_session(session("s1"))
    store.rename_session("s1", "Quarterly report")
    got = store.session("s1", "alice")
    assert got is not None and got.title == "Quarterly report"
    assert got.public() == {
        "session_id": "s1",
        "agent": "helper",
        "title": "Quarterly report",
        "created": 1.0,
        "updated": 1.0,
    }


def test_delete_session_takes_its_turns_and_their_feedback_for_its_owner_only(store: ServerStore) -> None:
    store.add_session(session("s1"))
    store.add_session(session("s2"))
    for t in (turn("m1", "r1"), turn("m2", "r2"), turn("m3", "r3", sid="s2")):
        store.add_turn(t)
    for mid, run in (("m1", "r1"), ("m3", "r3")):
        store.put_feedback(FeedbackRecord(mid, run, f"trace-{run}", "alice", "up", None, 1.0))
    assert store.delete_session("s1", "bob") is False and store.session("s1", "alice") is not None
    assert store.delete_session("s1", "alice") is True and store.delete_session("s1", "alice") is False
    assert store.session("s1", "alice") is None and store.turns("alice", "s1") == []
    assert [f.message_id for f in store.feedback("alice")] == ["m3"]
    assert [t.message_id for t in store.turns("alice", "s2")] == ["m3"]
    store.delete_turn("m3", "bob")  # not bob's: nothing goes
    assert store.turn("m3", "alice") is not None
    store.delete_turn("m3", "alice")
    assert store.turn("m3", "alice") is None and store.turn_for_run("r3", None) is None


def test_forms_submitted_at_once_on_two_machines_both_count(open_store: Opener) -> None:
    a, b = open_store(), open_store()
    a.add_session(session("s1"))
    start = threading.Barrier(2)

    def submit(s: ServerStore, who: str) -> None:
        start.wait()
        for i in range(15):
            s.touch_session("s1", chosen={f"{who}{i}": i})

    threads = [threading.Thread(target=submit, args=(s, w)) for s, w in ((a, "a"), (b, "b"))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    got = a.session("s1", "alice")
    assert got is not None and got.chosen == {f"{w}{i}": i for w in "ab" for i in range(15)}


# --- turns -------------------------------------------------------------------------------------


def test_turns_by_message_by_run_and_in_order(store: ServerStore) -> None:
    first, second, third = turn("m1", "r1", created=5.0), turn("m2", "r2", created=7.0), turn("m3", "r3", created=5.0)
    other = turn("m9", "r9", sid="s2", created=6.0)
    bobs = turn("m1", "rb", owner="bob")  # the same message id, another owner: a turn of its own
    for t in (first, second, third, other, bobs):
        assert store.add_turn(t) == t
    assert store.turn("m1", "alice") == first and store.turn("m1", "bob") == bobs
    assert store.turn("m2", "bob") is None
    assert store.turn_for_run("r2", "alice") == second
    assert store.turn_for_run("r2", "bob") is None
    assert store.turn_for_run("rb", None) == bobs
    assert store.turn_for_run("nope", None) is None
    # In a session: oldest first, equal times in the order they were added.
    assert [t.message_id for t in store.turns("alice", "s1")] == ["m1", "m3", "m2"]
    # All of an owner's: newest first.
    assert [t.message_id for t in store.turns("alice")][:2] == ["m2", "m9"]
    assert {t.message_id for t in store.turns("alice")} == {"m1", "m2", "m3", "m9"}
    assert store.turns("carol") == []


def test_first_message_id_wins(store: ServerStore) -> None:
    original = turn("m1", "r1", created=1.0)
    assert store.add_turn(original) == original
    retry = turn("m1", "r2", created=2.0)  # the client sent the same message again
    assert store.add_turn(retry) == original
    assert store.turn_for_run("r2", None) is None
    assert store.turns("alice") == [original]


def test_a_run_id_answers_one_message_only(store: ServerStore) -> None:
    store.add_turn(turn("m1", "r1"))
    with pytest.raises(Exception):  # noqa: B017 - sqlite3.IntegrityError or psycopg's UniqueViolation
        store.add_turn(turn("m2", "r1"))
    assert store.turn("m2", "alice") is None


def test_the_same_message_on_two_machines_at_once_makes_one_turn(open_store: Opener) -> None:
    """Both requests get the record that won, whichever it was; nothing else is stored."""
    a, b = open_store(), open_store()
    rounds = 12
    start = threading.Barrier(2)
    got: dict[str, list[TurnRecord]] = {"a": [], "b": []}
    errors: list[BaseException] = []

    def post(s: ServerStore, who: str) -> None:
        try:
            for i in range(rounds):
                start.wait()
                got[who].append(s.add_turn(turn(f"m{i}", f"run-{who}-{i}", created=float(i))))
        except BaseException as exc:
            errors.append(exc)
            start.abort()

    threads = [threading.Thread(target=post, args=(s, w)) for s, w in ((a, "a"), (b, "b"))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert got["a"] == got["b"]  # one winner per message, and both were told the same
    stored = sorted(a.turns("alice"), key=lambda t: t.created)
    assert stored == got["a"] and len(stored) == rounds
    for i, t in enumerate(stored):
        loser = "b" if t.run_id.startswith("run-a-") else "a"
        assert a.turn_for_run(f"run-{loser}-{i}", None) is None


# --- feedback ----------------------------------------------------------------------------------


def test_feedback_is_one_per_message_and_owner_newest_first(store: ServerStore) -> None:
    store.put_feedback(FeedbackRecord("m1", "r1", "t1", "alice", "up", None, 1.0))
    store.put_feedback(FeedbackRecord("m2", "r2", "t2", "alice", "down", "too long", 2.0))
    store.put_feedback(FeedbackRecord("m1", "rb", "tb", "bob", "down", None, 3.0))
    store.put_feedback(FeedbackRecord("m1", "r1", "t1", "alice", "down", "changed my mind", 4.0))  # replaces
    assert store.feedback("alice") == [
        FeedbackRecord("m1", "r1", "t1", "alice", "down", "changed my mind", 4.0),
        FeedbackRecord("m2", "r2", "t2", "alice", "down", "too long", 2.0),
    ]
    assert [f.public()["score"] for f in store.feedback("bob")] == ["down"]
    assert "owner" not in store.feedback("bob")[0].public()
    assert store.feedback("carol") == []


# --- tokens ------------------------------------------------------------------------------------


def test_tokens_find_their_user_and_a_new_one_replaces_the_old(store: ServerStore) -> None:
    assert not store.has_tokens() and not store.auth_required() and store.token_names() == []
    alice = store.add_token("alice")
    bob = store.add_token("Bob")
    assert alice.startswith("tt_") and len(alice) > 40 and alice != bob
    assert store.user_for_token(alice) == "alice" and store.user_for_token(bob) == "Bob"
    assert store.user_for_token("tt_wrong") is None and store.user_for_token("") is None
    assert [n for n, _ in store.token_names()] == ["Bob", "alice"]  # byte order, as SQLite sorts
    assert all(c > 0 for _, c in store.token_names())
    again = store.add_token("alice")
    assert store.user_for_token(again) == "alice" and store.user_for_token(alice) is None
    assert store.has_tokens() and store.auth_required()


def test_revoking_the_last_token_keeps_auth_required(open_store: Opener) -> None:
    store = open_store()
    token = store.add_token("alice")
    assert store.revoke_token("alice") is True
    assert store.revoke_token("alice") is False and store.revoke_token("nobody") is False
    assert store.user_for_token(token) is None
    assert not store.has_tokens()
    assert store.auth_required()  # locked, not open to anyone
    assert open_store().auth_required()  # and so after a restart, or on another machine


def test_a_token_made_elsewhere_requires_auth_at_once(open_store: Opener) -> None:
    """A yes is remembered; a no is asked again on every call: a token made by another process
    (``tether serve token create`` beside a running server) counts from its next request."""
    server, cli = open_store(), open_store()
    assert not server.auth_required() and not server.auth_required()
    cli.add_token("alice")
    assert server.auth_required()
    assert cli.revoke_token("alice") and server.auth_required()


def test_no_plaintext_token_is_stored_anywhere(
    backend: str, store: ServerStore, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    tokens = [store.add_token(name) for name in ("alice", "bob")]
    secret_part = [t.removeprefix("tt_") for t in tokens]
    if backend == "sqlite":
        import sqlite3

        db = sqlite3.connect(tmp_path / "serve" / "server.db")
        tables = [r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type='table'")]
        dump = "\n".join(repr(row) for t in tables for row in db.execute(f"SELECT * FROM {t}"))
        db.close()
        raw = b"".join(p.read_bytes() for p in (tmp_path / "serve").iterdir())
        assert not any(s.encode() in raw for s in secret_part)
    else:
        import psycopg

        with psycopg.connect(request.getfixturevalue("server_database")) as conn:
            tables = [r[0] for r in conn.execute("SELECT tablename FROM pg_tables WHERE schemaname = 'public'")]
            dump = "\n".join(repr(row) for t in tables for row in conn.execute(f'SELECT * FROM "{t}"'))
    assert tables and not any(s in dump for s in secret_part)
    assert all(hash_token(t) in dump for t in tokens)  # what is stored: the hash


def test_a_link_put_at_the_databases_wal_is_a_clear_error_naming_the_database(tmp_path: Path) -> None:
    from tether.errors import ConfigError
    from tether.server.store import SqliteServerStore

    path = tmp_path / "serve" / "server.db"
    SqliteServerStore(path).close()
    elsewhere = tmp_path / "elsewhere"
    elsewhere.write_bytes(b"keep")
    wal = path.with_name("server.db-wal")
    wal.unlink(missing_ok=True)
    wal.symlink_to(elsewhere)
    with pytest.raises(ConfigError, match="cannot open the server's database") as caught:
        SqliteServerStore(path)
    assert str(path) in str(caught.value) and "-wal" in str(caught.value)
    assert elsewhere.read_bytes() == b"keep"


@pytest.mark.parametrize("side", ["-wal", "-shm"])
def test_a_named_pipe_beside_the_database_is_a_clear_error_at_start(tmp_path: Path, side: str) -> None:
    """SQLite opens a pipe put at its -wal without a word and fails every write after, naming no
    file: the store refuses it at start, and says which."""
    import os

    from tether.errors import ConfigError
    from tether.server.store import SqliteServerStore

    path = tmp_path / "serve" / "server.db"
    SqliteServerStore(path).close()
    sidecar = path.with_name(f"server.db{side}")
    sidecar.unlink(missing_ok=True)
    os.mkfifo(sidecar)
    with pytest.raises(ConfigError, match=f"{side} file beside it is a named pipe"):
        SqliteServerStore(path)
