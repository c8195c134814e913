"""One connection pool per database URL and process, and the migrations that build each store's
tables.

Migrations are versioned and append-only: each store lists its own as ``Migration(version, name,
sql)`` from 1 up. ``tether_migrations`` records what was applied with a checksum of its SQL; a
migration that was changed after it was applied, or a database newer than this tether, is refused
with a message that says what to do. Applying takes a transaction-scoped advisory lock, so many
processes starting at once apply each migration exactly once.

A process that is running when a newer tether migrates a store it uses stops using the database
(:class:`SchemaNewer`) rather than write rows in a shape the newer schema does not expect: the
migration announces itself with ``NOTIFY tether_schema`` (nodes and workers listen, see
:meth:`Database.schema_changed`), and every process reads the versions again every
``schema_check_s`` seconds anyway, one small query, for a missed notification.
"""

from __future__ import annotations

import contextlib
import contextvars
import hashlib
import logging
import re
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from tether.errors import ConfigError, StoreError

__all__ = [
    "SCHEMA_CHANNEL",
    "Database",
    "Migration",
    "SchemaNewer",
    "database",
    "giving_up_at",
    "redact",
    "storable",
    "unreachable",
]

_MIGRATION_LOCK = 0x7E7E_0001  # pg_advisory_xact_lock key held while migrations are applied
SCHEMA_CHANNEL = "tether_schema"  # payload: the component whose tables were migrated
_log = logging.getLogger(__name__)
_T = TypeVar("_T")

# Set by whoever makes a save on this thread that should stop waiting for the database when told
# (a served run's Stop): see :func:`giving_up_at`.
_give_up: contextvars.ContextVar[threading.Event | None] = contextvars.ContextVar("tether_give_up", default=None)
_GIVE_UP_POLL_S = 0.5  # how long one attempt waits for a connection, when a give-up may come meanwhile


@contextlib.contextmanager
def giving_up_at(event: threading.Event | None) -> Iterator[None]:
    """Within it, :meth:`Database.transact` on this thread stops waiting for a database that is
    away once ``event`` is set (from any thread), raising what the last attempt met: a run stopped
    while its save waits is not kept waiting for the save (its driver saves it once the database is
    back). Once set, a transaction is still tried once (waiting half a second at most for a
    connection): the database may be there."""
    token = _give_up.set(event)
    try:
        yield
    finally:
        _give_up.reset(token)


def redact(url: str) -> str:
    """``url`` without its password: what errors and logs may show."""
    from tether.config import url_without_password

    url = url_without_password(url)
    return re.sub(r"([?&](?:ssl)?password=)[^&#]*", r"\1***", url, flags=re.IGNORECASE)


def _scrubbed(text: str, url: str) -> str:
    """``text`` (a driver's error about ``url``) without the password of ``url``: the driver quotes
    a password it cannot parse (a stray % or a space), or the part of it after a raw @ as a host."""
    from urllib.parse import unquote

    from tether.config import url_without_password

    mask = "\x00"
    masked = url_without_password(url, mask)
    start = masked.find(mask)
    if start < 0:
        return text
    password = url[start : len(url) - (len(masked) - start - len(mask))]
    after = password.partition("@")[2]
    for secret in (password, unquote(password)):
        if len(secret) >= 3:
            text = text.replace(secret, "***")
        text = text.replace(f'"{secret}"', '"***"').replace(f"'{secret}'", "'***'")
    if after:  # "failed to resolve host 'rest-of-password@db.internal'"
        text = re.sub(rf"{re.escape(after)}@", "***@", text)
    return text


def storable(value: Any) -> Any:
    """``value`` (a string, or parsed JSON) as a Postgres text or jsonb column can hold it: NUL,
    which neither can (a client may send one), becomes U+FFFD, as lone surrogates do, which UTF-8
    cannot carry."""
    if isinstance(value, str):
        from tether.messages import clean_text

        return clean_text(value).replace("\x00", "\ufffd")
    if isinstance(value, dict):
        return {storable(k): storable(v) for k, v in value.items()}
    if isinstance(value, list):
        return [storable(v) for v in value]
    return value


class SchemaNewer(StoreError):
    """The database was migrated by a newer tether than this process knows: it writes nothing
    more to it (a server answers 503 with this message) until it is upgraded."""

    unavailable = True


def _newer(component: str, version: int, known: int) -> str:
    return (
        f"this database was migrated by a newer tether (its {component} tables at migration {version}, newer "
        f"than this tether knows ({known})); upgrade tether on this machine (this worker or server): it writes "
        "nothing to the database until then"
    )


@dataclass(frozen=True)
class Migration:
    version: int
    name: str
    sql: str

    @property
    def checksum(self) -> str:
        return hashlib.sha256(self.sql.encode()).hexdigest()[:16]


class Database:
    """A pool of connections to one Postgres database (autocommit; ``tx()`` for a transaction)."""

    retry_s = 60.0  # how long ``transact`` waits for a database that went away (a restart, a failover)
    schema_check_s = 30.0  # how often the migrations are read again, should a notification be missed

    def __init__(self, url: str, *, min_size: int = 1, max_size: int = 10) -> None:
        try:
            import psycopg
            from psycopg_pool import ConnectionPool
        except ImportError as exc:
            raise ConfigError(
                "database_url names Postgres, but psycopg is not installed: pip install 'tether[postgres]'"
            ) from exc
        self.url = url
        self._migrated: set[str] = set()
        self._known: dict[str, int] = {}  # the migrations this process knows of each store it opened
        self._refusal: str | None = None  # why it uses the database no more (a newer tether migrated it)
        self._next_check = 0.0
        self._lock = threading.Lock()
        try:  # one direct connection first: its error says what is wrong (the pool's only retries)
            psycopg.connect(url, connect_timeout=10).close()
        except Exception as exc:
            raise ConfigError(
                f"cannot connect to the database {redact(url)}: {_reason(exc, url)}. Check "
                "database_url in config.toml (or $TETHER_DATABASE_URL) and that the "
                "server is running."
            ) from None
        self.pool = ConnectionPool(
            url,
            min_size=min_size,
            max_size=max_size,
            open=True,
            timeout=30,
            kwargs={"autocommit": True},
            name="tether",
            check=_check,
        )

    @contextlib.contextmanager
    def connection(self) -> Iterator[Any]:
        """A pooled connection in autocommit mode (:class:`SchemaNewer` once a newer tether migrated
        a store this process uses)."""
        with self._pooled() as conn:
            yield conn

    @contextlib.contextmanager
    def tx(self) -> Iterator[Any]:
        """A pooled connection inside one transaction (committed at the end, rolled back on error)."""
        with self._pooled() as conn, conn.transaction():
            yield conn

    @contextlib.contextmanager
    def _pooled(self, timeout: float | None = None) -> Iterator[Any]:
        with self.pool.connection(timeout) as conn:
            if self._known and time.monotonic() >= self._next_check:
                self._read_schema(conn)
            if self._refusal is not None:
                raise SchemaNewer(self._refusal)
            yield conn

    def _read_schema(self, conn: Any) -> None:
        """Whether a newer tether migrated a store this process uses (then it refuses every use)."""
        rows = conn.execute(
            "SELECT component, max(version) FROM tether_migrations WHERE component = ANY(%s) "
            "GROUP BY component ORDER BY component",
            (list(self._known),),
        ).fetchall()
        ahead = [(str(c), int(v)) for c, v in rows if int(v) > self._known.get(str(c), int(v))]
        self._refusal = _newer(ahead[0][0], ahead[0][1], self._known[ahead[0][0]]) if ahead else None
        self._next_check = time.monotonic() + self.schema_check_s
        if self._refusal is not None:
            _log.error("%s", self._refusal)

    def schema_changed(self) -> None:
        """A migration was announced (``NOTIFY tether_schema``), or may have been missed: the
        versions are read again before the database is next used."""
        self._next_check = 0.0

    def transact(self, body: Callable[[Any], _T], *, retry_s: float | None = None) -> _T:
        """``body(conn)`` in one transaction, committed; done again while the database is away (a
        restart, a failover, the connection killed) for up to ``retry_s`` seconds (the pool's
        ``retry_s`` by default). A commit whose answer was lost with its connection is looked up
        (``pg_xact_status``), not made twice."""
        deadline = time.monotonic() + (self.retry_s if retry_s is None else retry_s)
        pause = 0.05
        give_up = _give_up.get()
        while True:
            xid: list[str] = []
            try:  # a pool that cannot reconnect is waited for no longer than the deadline either
                wait = max(0.1, deadline - time.monotonic())
                if give_up is not None:  # the wait for a connection ends in time to hear it
                    wait = min(wait, _GIVE_UP_POLL_S)
                with self._pooled(timeout=wait) as conn, conn.transaction():
                    result = body(conn)
                    xid.append(str(conn.execute("SELECT pg_current_xact_id()::text").fetchone()[0]))
                return result
            except Exception as exc:
                if not (_transient(exc) or _transient(exc.__cause__)) or time.monotonic() + pause > deadline:
                    raise
                if give_up is not None and give_up.is_set():
                    _log.warning("the database is away (%s); not waiting for it any more (stopped)", _reason(exc))
                    raise
                _log.warning("the database is away (%s); trying again", _reason(exc))
                _pause(pause, give_up)
                pause = min(pause * 2, 2.0)
                if xid and self._committed(xid[0], deadline, exc):
                    return result

    def _committed(self, xid: str, deadline: float, away: Exception) -> bool:
        """Whether transaction ``xid``, whose commit was sent when its connection broke, committed."""
        pause = 0.05
        while True:
            try:
                status = self.execute("SELECT pg_xact_status(%s::xid8)", (xid,))[0][0]
            except Exception as exc:
                if not _transient(exc):
                    raise
                status = "unknown"
            if status != "in progress" and status != "unknown":
                return bool(status == "committed")
            give_up = _give_up.get()
            if time.monotonic() + pause > deadline or (give_up is not None and give_up.is_set()):
                raise away
            _pause(pause, give_up)
            pause = min(pause * 2, 2.0)

    def execute(self, sql: str, args: Sequence[Any] | dict[str, Any] = ()) -> list[tuple[Any, ...]]:
        """Run one statement; its rows (an empty list when it returns none)."""
        with self.connection() as conn:
            cur = conn.execute(sql, args)
            return cur.fetchall() if cur.description is not None else []

    def migrate(self, component: str, migrations: Sequence[Migration]) -> None:
        """Bring ``component``'s tables to the last of ``migrations`` (once per process)."""
        import psycopg

        if component in self._migrated:
            return
        with self._lock:
            if component in self._migrated:
                return
            _check_sequence(component, migrations)
            try:
                self._apply(component, migrations)
            except psycopg.Error as exc:  # rolled back: nothing of it was applied
                raise StoreError(
                    f"could not create or update the {component} tables in the database {redact(self.url)} "
                    f"({_reason(exc, self.url)}); nothing was changed. tether's user there needs the right to create "
                    "tables, and the names tether_* must be free for tether's own"
                ) from exc
            self._migrated.add(component)
            self._known[component] = len(migrations)

    def _apply(self, component: str, migrations: Sequence[Migration]) -> None:
        """Apply what is missing of ``migrations`` in one transaction, under the migrations' lock."""
        with self.tx() as conn:
            conn.execute("SELECT pg_advisory_xact_lock(%s)", (_MIGRATION_LOCK,))
            conn.execute(
                "CREATE TABLE IF NOT EXISTS tether_migrations (component text NOT NULL, "
                "version integer NOT NULL, name text NOT NULL, checksum text NOT NULL, "
                "applied_at timestamptz NOT NULL DEFAULT now(), PRIMARY KEY (component, version))"
            )
            applied = {
                v: (n, c)
                for v, n, c in conn.execute(
                    "SELECT version, name, checksum FROM tether_migrations WHERE component = %s", (component,)
                )
            }
            known = {m.version: m for m in migrations}
            newer = sorted(v for v in applied if v not in known)
            if newer:
                raise SchemaNewer(_newer(component, newer[-1], len(migrations)))
            if len(applied) < len(migrations):  # processes running an older tether stop writing
                conn.execute("SELECT pg_notify(%s, %s)", (SCHEMA_CHANNEL, component))
            for m in migrations:
                if m.version in applied:
                    if applied[m.version][1] != m.checksum:
                        raise StoreError(
                            f"migration {m.version} ({m.name}) of the {component} tables was "
                            "changed after it was applied; migrations are append-only: undo the "
                            "edit and add a new migration instead"
                        )
                    continue
                conn.execute(m.sql)
                conn.execute(
                    "INSERT INTO tether_migrations (component, version, name, checksum) VALUES (%s, %s, %s, %s)",
                    (component, m.version, m.name, m.checksum),
                )

    def versions(self) -> dict[str, int]:
        """Each component's last applied migration."""
        with self.pool.connection() as conn:  # read even by a process that refuses to use the database
            if not conn.execute("SELECT to_regclass('tether_migrations') IS NOT NULL").fetchone()[0]:
                return {}
            rows = conn.execute(
                "SELECT component, max(version) FROM tether_migrations GROUP BY component ORDER BY component"
            ).fetchall()
        return {str(c): int(v) for c, v in rows}

    def close(self) -> None:
        self.pool.close()


def _pause(seconds: float, give_up: threading.Event | None) -> None:
    """Sleep between attempts, or less when told to give up meanwhile."""
    if give_up is None:
        time.sleep(seconds)
    else:
        give_up.wait(seconds)


def _check(conn: Any) -> None:
    """Raise for a pooled connection the server closed while it sat idle (``idle_session_timeout``,
    a proxy, a restart), so the pool hands out another instead of a run failing on its next save.
    An idle connection the server sent nothing has nothing to say: only one that did costs a round
    trip."""
    import select

    from psycopg_pool import ConnectionPool

    if conn.closed or select.select([conn.fileno()], [], [], 0)[0]:
        ConnectionPool.check_connection(conn)


def _transient(exc: BaseException | None) -> bool:
    """A connection that broke, or a server that is restarting: worth trying again."""
    import psycopg

    if not isinstance(exc, psycopg.OperationalError):
        return False
    code = exc.sqlstate
    return code is None or code.startswith("08") or code in ("57P01", "57P02", "57P03")


def unreachable(exc: BaseException | None) -> bool:
    """Whether ``exc``, or an error that caused it (a store's :class:`StoreError` wraps the
    driver's), is the database away: a broken connection, a server restarting, no connection to
    be had in time."""
    while exc is not None:
        if _transient(exc):
            return True
        exc = exc.__cause__
    return False


def _check_sequence(component: str, migrations: Sequence[Migration]) -> None:
    versions = [m.version for m in migrations]
    if versions != list(range(1, len(versions) + 1)):
        raise StoreError(f"the {component} migrations are not numbered 1, 2, 3, ...: {versions}")


def _reason(exc: BaseException, url: str = "") -> str:
    text = " ".join(str(exc).split()) or type(exc).__name__
    return redact(_scrubbed(text, url) if url else text)[:300]


_pools: dict[str, Database] = {}
_pools_lock = threading.Lock()


def database(url: str) -> Database:
    """This process's pool for ``url`` (made on first use, shared by every store on that database)."""
    with _pools_lock:
        db = _pools.get(url)
        if db is None:
            db = _pools[url] = Database(url)
        return db


def close_all() -> None:
    """Close every pool this process opened (tests; a worker shutting down)."""
    with _pools_lock:
        for db in _pools.values():
            with contextlib.suppress(Exception):
                db.close()
        _pools.clear()
