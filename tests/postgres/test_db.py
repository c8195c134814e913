"""The database layer every Postgres store stands on: versioned, append-only migrations applied once
however many processes start at once, and URLs that never show a password."""

from __future__ import annotations

import subprocess
import sys
from typing import Any

import pytest

from tether.errors import StoreError


@pytest.fixture
def db(pg_url: str) -> Any:
    from tether.postgres.db import Database

    pool = Database(pg_url, max_size=2)
    yield pool
    pool.close()


def _fresh(pg_url: str) -> Any:
    """Another process's pool: it has not migrated anything yet."""
    from tether.postgres.db import Database

    return Database(pg_url, max_size=2)


def test_migrations_apply_in_order_once_and_later_ones_alone(pg_url: str, db: Any) -> None:
    from tether.postgres.db import Migration

    first = [Migration(1, "orders", "CREATE TABLE orders (id text PRIMARY KEY)")]
    db.migrate("shop", first)
    db.execute("INSERT INTO orders VALUES ('o1')")
    again = _fresh(pg_url)
    again.migrate("shop", first)  # already there: nothing runs (a CREATE TABLE again would fail)
    second = [*first, Migration(2, "orders.note", "ALTER TABLE orders ADD COLUMN note text")]
    later = _fresh(pg_url)
    later.migrate("shop", second)
    assert later.execute("SELECT id, note FROM orders") == [("o1", None)]  # the data stayed
    assert later.versions()["shop"] == 2
    rows = later.execute(
        "SELECT version, name, checksum FROM tether_migrations WHERE component = 'shop' ORDER BY version"
    )
    assert rows == [(m.version, m.name, m.checksum) for m in second]
    for pool in (again, later):
        pool.close()


def test_an_edited_migration_is_refused_and_so_is_a_newer_database(pg_url: str, db: Any) -> None:
    from tether.postgres.db import Migration

    db.migrate(
        "shop",
        [
            Migration(1, "orders", "CREATE TABLE orders (id text PRIMARY KEY)"),
            Migration(2, "orders.note", "ALTER TABLE orders ADD COLUMN note text"),
        ],
    )
    edited = _fresh(pg_url)
    with pytest.raises(StoreError, match="migration 1 .* changed after it was applied.*append-only"):
        edited.migrate(
            "shop",
            [
                Migration(1, "orders", "CREATE TABLE orders (id bigint PRIMARY KEY)"),
                Migration(2, "orders.note", "ALTER TABLE orders ADD COLUMN note text"),
            ],
        )
    older = _fresh(pg_url)
    with pytest.raises(StoreError, match="at migration 2, newer than this tether knows.*upgrade tether"):
        older.migrate("shop", [Migration(1, "orders", "CREATE TABLE orders (id text PRIMARY KEY)")])
    with pytest.raises(StoreError, match="not numbered 1, 2, 3"):
        _fresh(pg_url).migrate("gaps", [Migration(2, "x", "SELECT 1")])
    for pool in (edited, older):
        pool.close()


def test_a_failing_migration_leaves_nothing_half_applied(pg_url: str, db: Any) -> None:
    from psycopg import errors

    from tether.postgres.db import Migration

    broken = [
        Migration(1, "orders", "CREATE TABLE orders (id text PRIMARY KEY)"),
        Migration(2, "typo", "ALTER TABLE ordres ADD COLUMN note text"),
    ]
    with pytest.raises(StoreError, match="nothing was changed") as raised:
        db.migrate("shop", broken)
    assert isinstance(raised.value.__cause__, errors.UndefinedTable)
    assert db.execute("SELECT to_regclass('orders')") == [(None,)]  # migration 1 rolled back with it
    fixed = _fresh(pg_url)
    fixed.migrate("shop", [broken[0], Migration(2, "note", "ALTER TABLE orders ADD COLUMN note text")])
    assert fixed.versions()["shop"] == 2
    fixed.close()


MIGRATE = """
import sys, time
from tether.postgres.db import Database, Migration
db = Database(sys.argv[1], max_size=1)
time.sleep(max(0.0, float(sys.argv[2]) - time.time()))
db.migrate("race", [Migration(1, "t", "CREATE TABLE race_t (n integer)"),
                    Migration(2, "row", "INSERT INTO race_t VALUES (1)")])
print(db.execute("SELECT count(*) FROM race_t")[0][0])
"""


def test_processes_starting_at_once_apply_each_migration_once(pg_url: str, db: Any) -> None:
    import time

    start = time.time() + 2.0
    children = [
        subprocess.Popen(
            [sys.executable, "-c", MIGRATE, pg_url, str(start)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(6)
    ]
    outs = [c.communicate(timeout=60) for c in children]
    assert all(c.returncode == 0 for c in children), [err for _, err in outs]
    assert [out.strip() for out, _ in outs] == ["1"] * 6  # the INSERT ran once, whoever got there first
    assert db.execute("SELECT count(*) FROM tether_migrations WHERE component = 'race'") == [(2,)]


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        ("postgresql://tether:hunter2@db.internal:5432/tether", "postgresql://tether:***@db.internal:5432/tether"),
        ("postgresql://tether:hun@ter2@db.internal/tether", "postgresql://tether:***@db.internal/tether"),
        (
            "postgresql://db.internal/tether?user=tether&password=hunter2&sslmode=require",
            "postgresql://db.internal/tether?user=tether&password=***&sslmode=require",
        ),
        ("postgres://db.internal/tether?sslpassword=hunter2", "postgres://db.internal/tether?sslpassword=***"),
        ("postgresql://tether@db.internal/tether", "postgresql://tether@db.internal/tether"),
    ],
)
def test_a_url_is_shown_without_its_password(url: str, shown: str) -> None:
    from tether.postgres.db import redact

    assert redact(url) == shown and "hunter2" not in redact(url)
