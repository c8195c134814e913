"""``tether serve``: agents over HTTP — sessions, runs streamed as Server-Sent Events, approvals
from a browser, feedback joined to traces, and a page at ``/``.

Needs the ``serve`` extra (``pip install "tether[serve]"``). ``create_app`` returns the ASGI app,
for ``tether serve`` or any ASGI server.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

__all__ = ["create_app"]


def __getattr__(name: str) -> Any:
    if name == "create_app":
        from tether.server.app import create_app

        return create_app
    raise AttributeError(f"module 'tether.server' has no attribute {name!r}")


if TYPE_CHECKING:
    from tether.server.app import create_app
