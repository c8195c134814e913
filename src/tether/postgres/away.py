"""Run and session stores that note the database away for the run that uses them.

The loop ends a run whose save failed ``failed``, whatever the cause. Whoever drives the run (a
server, a worker) must know when the cause was the database away, so that the run goes on once it
is back instead of telling its client an end that its saved state does not have
(:func:`tether.server.runs.run_parts`).
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator, Sequence

from tether.harness.state import RunState
from tether.messages import Message
from tether.postgres.db import Database, giving_up_at, unreachable
from tether.postgres.runs import PgRunStore
from tether.postgres.sessions import PgSessionStore

__all__ = ["Watch", "WatchedRuns", "WatchedSessions"]


class Watch:
    """The last failure of a watched store that was the database away (None: none was).
    ``stopping``: set (from any thread) when the run is stopped; a save that waits for the database
    then stops waiting, and fails as the database away (its driver saves the run once it is back)."""

    def __init__(self, stopping: threading.Event | None = None) -> None:
        self.away: Exception | None = None
        self.stopping = stopping

    @contextlib.contextmanager
    def watching(self) -> Iterator[None]:
        try:
            with giving_up_at(self.stopping):
                yield
        except Exception as exc:
            if unreachable(exc):
                self.away = exc
            raise


class WatchedRuns(PgRunStore):
    def __init__(self, db: Database, watch: Watch) -> None:
        super().__init__(db)
        self.watch = watch

    def save(self, state: RunState, *, rewrite: bool = False, durable: bool = True) -> None:
        with self.watch.watching():
            super().save(state, rewrite=rewrite, durable=durable)


class WatchedSessions(PgSessionStore):
    def __init__(self, db: Database, watch: Watch) -> None:
        super().__init__(db)
        self.watch = watch

    def append(self, session_id: str, messages: Sequence[Message]) -> None:
        with self.watch.watching():
            super().append(session_id, messages)

    def rewrite(self, session_id: str, messages: Sequence[Message]) -> None:
        with self.watch.watching():
            super().rewrite(session_id, messages)
