"""Two server processes that drive their runs themselves on one database: each knows a run the other
holds as live, not as one a restart cut."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tether.postgres.db import Database, database
from tether.postgres.runs import PgRunStore
from tether.server.runs import RunManager


@pytest.fixture
def other_machine(pg_url: str) -> Iterator[PgRunStore]:
    """A store on a pool of its own: to the run locks, another process or machine."""
    pool = Database(pg_url, max_size=2)
    yield PgRunStore(pool)
    pool.close()


def test_a_run_another_process_holds_on_the_database_is_live_not_cut(
    pg_url: str, other_machine: Any, tmp_path: Path
) -> None:
    """Was: a server on Postgres took a run another process (another server on the same database)
    held and drove for one a restart cut (live nowhere, resumable), and a message in its session
    for a free one: the Postgres run store could not say who holds a run or a session."""
    manager = RunManager(home=tmp_path, agents={}, runs=PgRunStore(database(pg_url)), sessions=Any, store=Any)
    with other_machine.lock("run_there"), other_machine.lock_session("s_there", "run_there"):
        assert manager.is_live("run_there")
        assert manager.live_run_of("s_there") == "run_there"
        assert asyncio.run(manager.settled("run_there")) is False  # a resume of it: 409, already running
    assert not manager.is_live("run_there")
    assert manager.live_run_of("s_there") is None
    assert asyncio.run(manager.settled("run_there")) is True


def test_a_stop_of_a_run_held_on_another_home_is_not_taken_as_passed_on(
    pg_url: str, other_machine: Any, tmp_path: Path
) -> None:
    """Was (57f1aed7, which passes a Stop on through a file under the home): a Stop of a run that a
    server on another home (another machine, on the same database) drives was left in this home's
    folder, where nobody looks, and answered as taken. It is refused (the route says to post it to
    that server), and the run stays live."""
    manager = RunManager(home=tmp_path, agents={}, runs=PgRunStore(database(pg_url)), sessions=Any, store=Any)
    with other_machine.lock("run_far"):
        assert manager.cancel("run_far", "stopped by the user") is False
        assert manager.is_live("run_far")
    assert not (tmp_path / "serve" / "stops" / "run_far.json").exists()
