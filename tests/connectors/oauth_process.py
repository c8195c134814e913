"""Starts tests/connectors/oauth_server.py for a test (a real OAuth authorization server on a free
loopback port) and stops it after: one helper for every test that signs in."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

SERVER = Path(__file__).with_name("oauth_server.py")


@contextlib.contextmanager
def oauth_server(**env: str) -> Iterator[str]:
    """The server's base address while the block runs; ``env``: TOKEN_LIFETIME, CONSENT."""
    with subprocess.Popen(
        [sys.executable, str(SERVER)],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        env={**os.environ, **env},
    ) as proc:
        try:
            assert proc.stdout is not None
            line = proc.stdout.readline()
            assert line.startswith("port "), f"the test server did not start: {line!r}"
            yield f"http://127.0.0.1:{int(line.split()[1])}"
        finally:
            proc.terminate()
            proc.wait(30)
