"""The session store a command names, else the environment's, else the config file's."""

from __future__ import annotations

import contextlib
import logging
import os
from pathlib import Path
from typing import TYPE_CHECKING

from tether.errors import ConfigError

if TYPE_CHECKING:
    from tether.config import Settings
    from tether.sessions import SessionStore

__all__ = ["check_home", "session_store"]


def session_store(spec: str | None, settings: Settings) -> SessionStore:
    """The session store named by ``spec`` (``--session-store``), else ``$TETHER_SESSION_STORE``,
    else ``session_store`` in config.toml, else Postgres when ``database_url`` is set, else JSONL
    under ``$TETHER_HOME``. One that cannot open is refused in one line saying how to choose another."""
    from tether.config import check_session_store
    from tether.sessions import open_session_store

    if spec:
        source = "--session-store"
    elif os.environ.get("TETHER_SESSION_STORE"):
        spec, source = os.environ["TETHER_SESSION_STORE"], "$TETHER_SESSION_STORE"
        try:
            check_session_store(spec)
        except ValueError as exc:
            raise ConfigError(f"$TETHER_SESSION_STORE {exc}, not {spec!r}") from None
    elif settings.session_store:
        spec, source = settings.session_store, f"session_store in {settings.home / 'config.toml'}"
    elif settings.database_url:
        from tether.postgres.sessions import PgSessionStore
        from tether.stores import database_of

        db = database_of(settings)
        assert db is not None
        return PgSessionStore(db)
    else:
        source = "the default (JSONL under $TETHER_HOME/sessions)"
    if spec:
        _say_if_left_behind(spec, source, settings.home)
    try:
        return open_session_store(spec, settings.home)
    except ConfigError as exc:
        cause = exc.__cause__
        why = f"{cause.strerror or cause}" if isinstance(cause, OSError) else str(exc)
        raise ConfigError(
            f"cannot open the session store {spec or 'jsonl'} (from {source}): {why}. Choose another "
            "with --session-store jsonl:DIR or sqlite:PATH, $TETHER_SESSION_STORE, or session_store "
            "in config.toml"
        ) from None


def _say_if_left_behind(spec: str, source: str, home: Path) -> None:
    """A relative path in ``spec`` is under ``home``; it used to be under the folder tether ran in.
    Sessions found there (written before) are named in a warning each time, until they are moved
    or the path written whole, not silently left out of every conversation."""
    from tether.sessions import store_path

    kind, _, where = spec.partition(":")
    if not where or where.startswith("~") or os.path.isabs(where):
        return
    with contextlib.suppress(OSError, ConfigError):
        used, here = store_path(where, home, source), Path(where).absolute()
        if not here.exists() or (used.exists() and os.path.samefile(here, used)):
            return
        if here.is_file() if kind == "sqlite" else any(here.glob("*.jsonl")):
            logging.getLogger("tether.sessions").warning(
                "the session store %s (from %s) is %s, under $TETHER_HOME as every relative path of the "
                "configuration is, not %s in the folder tether runs in, which holds sessions written "
                "before: move them there, or write the store's absolute path",
                spec,
                source,
                used,
                here,
            )


def check_home(settings: Settings) -> None:
    """A run keeps its header under ``$TETHER_HOME/runs`` and its trace under ``traces``: a home
    where they cannot be written is said in one line before anything runs, not as a traceback from
    the run's first save (`tether run`, `chat`, and each agent call of `tether mcp serve`)."""
    from tether.fileio import in_the_way, private_dir

    for folder in ("traces",) if settings.database_url else ("runs", "traces"):
        path = settings.home / folder
        try:
            private_dir(path)
            writable = os.access(path, os.W_OK | os.X_OK)
        except OSError as exc:
            problem = in_the_way(path) or f"{exc.filename or path}: {exc.strerror or exc}"
            raise ConfigError(
                f"cannot keep runs in {settings.home} ($TETHER_HOME): {problem}. Set TETHER_HOME to a "
                "folder you can write"
            ) from None
        if not writable:
            raise ConfigError(
                f"cannot keep runs in {settings.home} ($TETHER_HOME): {path} is not writable. Fix its "
                "permissions, or set TETHER_HOME to a folder you can write"
            )
