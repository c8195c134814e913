"""The command line attacked as a user meets it (session 16): the real ``tether`` command as a
subprocess, each with its own ``TETHER_HOME``."""

from __future__ import annotations

import socket

from tests.cli.conftest import tether


def test_scripted_serve_on_a_busy_port_or_an_unknown_host_is_one_line_not_a_traceback(env: dict[str, str]) -> None:
    """`tether scripted serve --port N` where another process listens printed Python's traceback
    (OSError: Address already in use) and exit code 1, the code of a failed run; an unknown --host
    did the same (socket.gaierror). Now: one line naming the address and what to do, and exit code
    6, as `tether serve` says it cannot listen."""
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen(1)
        port = busy.getsockname()[1]
        out = tether("scripted", "serve", "--port", str(port), env=env, timeout=30)
    assert out.returncode == 6, out.stderr
    assert "Traceback" not in out.stderr
    assert f"cannot listen on 127.0.0.1:{port}" in out.stderr and "--port" in out.stderr, out.stderr
    assert out.stdout == ""  # no address announced: nothing serves there

    out = tether("scripted", "serve", "--host", "nosuch.invalid", env=env, timeout=30)
    assert out.returncode == 6 and "Traceback" not in out.stderr, out.stderr
    assert "cannot listen on nosuch.invalid" in out.stderr, out.stderr
