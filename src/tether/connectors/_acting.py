"""The user a run acts for, in ``tether serve`` (see tether.connectors._accounts). Kept apart, with
nothing heavy to import, so the server can set it without loading the MCP SDK."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from contextvars import ContextVar

__all__ = ["ACTING", "acting_as"]

ACTING: ContextVar[str | None] = ContextVar("tether_acting_user", default=None)


@contextlib.contextmanager
def acting_as(user: str | None) -> Iterator[None]:
    """Within this block (and the tasks it starts), MCP connectors act for ``user`` (None: the
    person at this machine, with ``tether mcp login``'s tokens)."""
    token = ACTING.set(user)
    try:
        yield
    finally:
        ACTING.reset(token)
