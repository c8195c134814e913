"""Postgres stores: what one machine keeps in files and SQLite, shared by many machines.

Selected by one setting, ``database_url = "postgresql://..."`` in ``config.toml`` (or
``$TETHER_DATABASE_URL``). Each store keeps the interface of its single-machine twin; the schema
of each is built by versioned, append-only migrations (:mod:`tether.postgres.db`). ``psycopg``
and its pool are imported only when a Postgres store is opened (``pip install 'tether[postgres]'``).
"""

from tether.postgres.db import Database, Migration, database, redact
from tether.postgres.knowledge import PgKnowledgeStore
from tether.postgres.memory import PgTextStore
from tether.postgres.runs import PgRunStore
from tether.postgres.server import PgServerStore
from tether.postgres.sessions import PgSessionStore

__all__ = [
    "Database",
    "Migration",
    "PgKnowledgeStore",
    "PgRunStore",
    "PgServerStore",
    "PgSessionStore",
    "PgTextStore",
    "database",
    "redact",
]
