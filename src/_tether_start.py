"""The ``tether`` command's entry point, outside the ``tether`` package so that it runs before it.

The console script imports the module it names, and importing ``tether.cli`` imports ``tether``
first, which must do nothing at import (no signal handler). That import (typing, re, argparse) was
about half of a command's first moments, where SIGTERM killed it with the signal's default, silently
(exit -15). Here SIGTERM is caught before it, with the C module ``_signal`` (``signal`` would bring
``enum``: 4 ms), and ends the command as it does later: one line, exit 130. Python's own start
(about 10 ms of the 22 that came before tether.cli's handler) is still the default's.
"""

from __future__ import annotations

import _signal  # type: ignore[import-not-found]  # no stubs: signal's C half
import sys

__all__ = ["main"]


class _Terminated(BaseException):
    """SIGTERM while the command imported tether."""


def _on_term(signum: int, frame: object) -> None:
    raise _Terminated


def main() -> int:
    """``tether.cli.main`` with SIGTERM ending the command in words from here on (tether.cli's own
    handler takes over as it starts)."""
    # try/except rather than contextlib.suppress: contextlib is not loaded yet, and this runs first.
    try:  # noqa: SIM105
        _signal.signal(_signal.SIGTERM, _on_term)
    except (AttributeError, ValueError):  # no SIGTERM here, or not the main thread
        pass
    try:
        from tether.cli import main as cli_main

        return cli_main()
    except _Terminated:
        try:  # noqa: SIM105
            print("\ntether: terminated (SIGTERM)", file=sys.stderr, flush=True)
        except OSError:  # stderr closed
            pass
        return 130
