"""The user a run acts for, in ``tether serve`` (see tether.connectors._accounts). Kept apart, with
nothing heavy to import, so the server can set it without loading the MCP SDK."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from contextvars import ContextVar

__all__ = [
    "ACTING",
    "LOCAL_USER",
    "SERVED",
    "SERVE_CALLS",
    "SERVE_CALLS_META",
    "SERVE_DEPTH",
    "acting_as",
    "acting_for",
]

ACTING: ContextVar[str | None] = ContextVar("tether_acting_user", default=None)
# The one user of a server without bearer tokens (runs it starts keep this owner, workers too).
LOCAL_USER = "local"
# A run of `tether serve`: nobody at the server's terminal may be asked anything for it.
SERVED: ContextVar[bool] = ContextVar("tether_served_run", default=False)
# The environment variable that counts the `tether mcp serve` processes started one inside another,
# this one included: each passes it to its stdio MCP servers, so a loop of them stops (serve.MAX_DEPTH).
SERVE_DEPTH = "TETHER_MCP_SERVE_DEPTH"
# The same count for calls, which one process may serve to itself (over HTTP): how many agent_NAME
# calls of `tether mcp serve` the current run is inside, sent with each MCP tool call it makes in
# the request's ``_meta`` under SERVE_CALLS_META.
SERVE_CALLS: ContextVar[int] = ContextVar("tether_serve_calls", default=0)
SERVE_CALLS_META = "tether/serve_depth"


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


def acting_for(owner: str) -> contextlib.AbstractContextManager[None]:
    """:func:`acting_as` the owner of a served run: their own accounts, or, for the one user of a
    server without tokens (``LOCAL_USER``), ``tether mcp login``'s."""
    return acting_as(None if owner == LOCAL_USER else owner)
