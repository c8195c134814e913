"""The list routes (``GET /v1/runs``, ``/v1/sessions``, ``/v1/feedback``) on both server stores:
a page reads from the database only the rows it shows, newest first, the caller's alone."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from tether import Agent
from tether.config import load_settings
from tether.server.app import create_app
from tether.server.store import FeedbackRecord, SessionRecord, TurnRecord

EACH = 60  # sessions, turns and feedback records per user


class _Rows:
    """The rows each statement of a store fetched, as (SQL, count): a wrapper on its connection."""

    def __init__(self) -> None:
        self.fetched: list[tuple[str, int]] = []


class _SqliteCursor:
    def __init__(self, cursor: Any, sql: str, rows: _Rows) -> None:
        self._cursor, self._sql, self._rows = cursor, sql, rows

    def fetchall(self) -> list[Any]:
        found = self._cursor.fetchall()
        self._rows.fetched.append((self._sql, len(found)))
        return list(found)

    def fetchone(self) -> Any:
        found = self._cursor.fetchone()
        self._rows.fetched.append((self._sql, int(found is not None)))
        return found

    def __getattr__(self, name: str) -> Any:
        return getattr(self._cursor, name)


class _SqliteConnection:
    def __init__(self, db: Any, rows: _Rows) -> None:
        self._db, self._rows = db, rows

    def execute(self, sql: str, args: Any = ()) -> _SqliteCursor:
        return _SqliteCursor(self._db.execute(sql, args), sql, self._rows)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._db, name)


class _PgDatabase:
    def __init__(self, db: Any, rows: _Rows) -> None:
        self._db, self._rows = db, rows

    def execute(self, sql: str, args: Any = ()) -> list[tuple[Any, ...]]:
        found: list[tuple[Any, ...]] = self._db.execute(sql, args)
        self._rows.fetched.append((sql, len(found)))
        return found

    def __getattr__(self, name: str) -> Any:
        return getattr(self._db, name)


@pytest.fixture
def served(backend: str, request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[TestClient, Any, _Rows]]:
    """The app on a store of ``backend`` holding EACH records of each kind for `local` (the caller
    of a server without tokens) and for `bob`, with times that tie in pairs; and the rows its
    connection fetched from then on."""
    home = tmp_path / "home"
    home.mkdir()
    if backend == "sqlite":
        from tether.server.store import SqliteServerStore

        store: Any = SqliteServerStore(home / "server.db")
    else:
        from tether.postgres.db import Database
        from tether.postgres.server import PgServerStore

        store = PgServerStore(Database(request.getfixturevalue("pg_url")))
    for owner in ("local", "bob"):
        for i in range(EACH):
            at = 1_000.0 + i // 2  # two of each kind at every time: ties keep a fixed order
            sid = f"s_{owner}_{i}"
            store.add_session(SessionRecord(sid, owner, "helper", f"{owner} {i}", at, at))
            store.add_turn(TurnRecord(f"m{i}", f"run_{owner}_{i}", sid, owner, "helper", f"t{i}", f"hi {i}", at))
            store.put_feedback(FeedbackRecord(f"m{i}", f"run_{owner}_{i}", f"t{i}", owner, "up", None, at))
    rows = _Rows()
    if backend == "sqlite":
        store._db = _SqliteConnection(store._db, rows)
    else:
        store.db = _PgDatabase(store.db, rows)
    app = create_app(load_settings(home), agents={"helper": Agent("scripted/hello")}, store=store, run_processes=0)
    with TestClient(app, base_url="http://127.0.0.1") as client:
        yield client, store, rows


LISTS = [("/v1/runs", "runs", "run_id", "run_local_"), ("/v1/sessions", "sessions", "session_id", "s_local_")]
LISTS.append(("/v1/feedback", "feedback", "run_id", "run_local_"))


@pytest.mark.parametrize(("route", "key", "field", "prefix"), LISTS)
def test_a_page_of_a_list_fetches_only_its_rows(
    served: tuple[TestClient, Any, _Rows], route: str, key: str, field: str, prefix: str
) -> None:
    """Was: each list read every row the caller owned (all 60 here; 20,000 took 50-130 ms) and cut
    the page in Python. The page is now cut in the query: no statement of a list of 7 fetches more
    than 7 rows, and the page is the caller's 7 newest, in the same order as the whole list."""
    client, _store, rows = served
    rows.fetched.clear()
    page = client.get(route, params={"limit": 7})
    assert page.status_code == 200, page.text
    assert rows.fetched, "the wrapper saw no query: it wraps the wrong connection"
    assert max(n for _, n in rows.fetched) <= 7, rows.fetched
    whole = client.get(route, params={"limit": 1000})
    assert whole.status_code == 200, whole.text
    listed = [item[field] for item in whole.json()[key]]
    assert len(listed) == EACH and all(i.startswith(prefix) for i in listed)  # bob's never
    newest = sorted(range(EACH), key=lambda i: (i // 2, i), reverse=True)  # ties: the later one first
    assert listed == [f"{prefix}{i}" for i in newest]
    assert [item[field] for item in page.json()[key]] == listed[:7]
