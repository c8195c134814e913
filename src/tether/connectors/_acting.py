"""The user a run acts for, in ``tether serve`` (see tether.connectors._accounts). Kept apart, with
nothing heavy to import, so the server can set it without loading the MCP SDK."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from contextvars import ContextVar

__all__ = ["ACTING", "SERVED", "acting_as"]

ACTING: ContextVar[str | None] = ContextVar("tether_acting_user", default=None)
# A run of `tether serve`: nobody at the server's terminal may be asked anything for it.
SERVED: ContextVar[bool] = ContextVar("tether_served_run", default=False)


@contextlib.contextmanager
def acting_as(user: str | None) -> Iterator[None]:
    """Within this block (and the tasks it starts), a served run's: MCP connectors act for ``user``
    (None: the one user of a server without tokens, with ``tether mcp login``'s tokens), and never
    ask at the terminal of the server's process."""
    token, served = ACTING.set(user), SERVED.set(True)
    try:
        yield
    finally:
        SERVED.reset(served)
        ACTING.reset(token)
