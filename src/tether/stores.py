"""Which store keeps what: files and SQLite under ``$TETHER_HOME`` (the default: nothing to
install, nothing to start), or Postgres for every store when ``database_url`` is set
(``config.toml`` or ``$TETHER_DATABASE_URL``; see tether.postgres). The one place that chooses."""

from __future__ import annotations

import re
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from tether.config import Settings
    from tether.memory import Memory
    from tether.postgres.db import Database

__all__ = [
    "KB_NAME",
    "database_of",
    "kb_exists",
    "kb_names",
    "kb_where",
    "knowledge_store",
    "memory",
    "run_store",
    "server_store",
]

KB_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")  # a base's name becomes a file name


def database_of(settings: Settings) -> Database | None:
    """The process's pool for ``settings.database_url`` (migrations run as each store opens)."""
    if not settings.database_url:
        return None
    from tether.postgres.db import database

    return database(settings.database_url)


def run_store(settings: Settings) -> Any:
    db = database_of(settings)
    if db is not None:
        from tether.postgres.runs import PgRunStore

        return PgRunStore(db)
    from tether.harness.store import RunStore

    return RunStore(settings.home / "runs")


def server_store(settings: Settings) -> Any:
    db = database_of(settings)
    if db is not None:
        from tether.postgres.server import PgServerStore

        return PgServerStore(db)
    from tether.server.store import SqliteServerStore

    return SqliteServerStore(settings.home / "serve" / "server.db")


def memory(settings: Settings, scope: str, project: Path | str) -> Memory:
    """The user's memory with the limits of ``[memory]``: files under ``$TETHER_HOME/memory``, or
    rows in Postgres when ``database_url`` is set."""
    from tether.memory import DEFAULT_NOTES_LIMIT, DEFAULT_PROFILE_LIMIT, Memory

    cfg = settings.memory
    profile_limit = cfg.profile_limit or DEFAULT_PROFILE_LIMIT
    notes_limit = cfg.notes_limit or DEFAULT_NOTES_LIMIT
    db = database_of(settings)
    if db is not None:
        return Memory.open_postgres(
            db,
            scope=scope,  # type: ignore[arg-type]
            project=Path(project),
            profile_limit=profile_limit,
            notes_limit=notes_limit,
        )
    return Memory.open(
        settings.home,
        scope=scope,  # type: ignore[arg-type]
        project=Path(project),
        profile_limit=profile_limit,
        notes_limit=notes_limit,
    )


def knowledge_store(settings: Settings, name: str) -> Any:
    """Knowledge base ``name``: ``$TETHER_HOME/kb/NAME.db``, or its rows in Postgres."""
    db = database_of(settings)
    if db is not None:
        from tether.postgres.knowledge import PgKnowledgeStore

        return PgKnowledgeStore(db, name)
    from tether.knowledge.store import SqliteKnowledgeStore

    return SqliteKnowledgeStore(settings.home / "kb" / f"{name}.db")


def kb_exists(settings: Settings, name: str) -> bool:
    """Whether base ``name`` was made (its embedder is recorded when it is)."""
    db = database_of(settings)
    if db is None:
        return (settings.home / "kb" / f"{name}.db").exists()
    from tether.postgres.knowledge import MIGRATIONS

    db.migrate("knowledge", MIGRATIONS)
    return bool(
        db.execute(
            "SELECT 1 FROM kb_bases b JOIN kb_meta m ON m.kb = b.id AND m.key = 'embedder' WHERE b.name = %s", (name,)
        )
    )


def kb_names(settings: Settings) -> list[str]:
    """The knowledge bases made, by name, sorted."""
    db = database_of(settings)
    if db is not None:
        from tether.postgres.knowledge import PgKnowledgeStore

        return PgKnowledgeStore.bases(db)
    names = sorted(p.name[: -len(".db")] for p in (settings.home / "kb").glob("*.db"))
    return [n for n in names if KB_NAME.fullmatch(n)]


def kb_where(settings: Settings, name: str) -> str:
    """Where base ``name`` lives, for messages (a database without its password)."""
    if settings.database_url:
        from tether.postgres.db import redact

        return f"{redact(settings.database_url)}, base {name}"
    return str(settings.home / "kb" / f"{name}.db")
