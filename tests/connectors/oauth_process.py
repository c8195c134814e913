"""Starts a test server script that prints ``port N`` once it listens (a real server on a free
loopback port) and stops it after: one helper for every test that needs one."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

SERVER = Path(__file__).with_name("oauth_server.py")


@contextlib.contextmanager
def port_server(script: Path, *args: str, **env: str) -> Iterator[str]:
    """``script``'s base address while the block runs (``args`` on its command line, ``env`` added
    to the environment)."""
    with subprocess.Popen(
        [sys.executable, str(script), *args],
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


def oauth_server(**env: str) -> contextlib.AbstractContextManager[str]:
    """The OAuth authorization server (oauth_server.py); ``env``: TOKEN_LIFETIME, CONSENT."""
    return port_server(SERVER, **env)
