"""``tether serve`` under slowloris (src/tether/server/connections.py): clients that never finish
their headers are dropped after the header timeout, one address cannot hold more than its share of
connections, and a normal request still gets through, even with few file descriptors."""

from __future__ import annotations

import os
import resource
import socket
import subprocess
import time
from pathlib import Path

import httpx

from tests.server.conftest import serve_process

SLOW_CLIENTS = 150
FD_LIMIT = 128


def _serve(home: Path, config: str) -> tuple[subprocess.Popen[str], str]:
    home.mkdir(parents=True)
    (home / "config.toml").write_text(config)
    env = {**os.environ, "TETHER_HOME": str(home)}

    def few_descriptors() -> None:
        resource.setrlimit(resource.RLIMIT_NOFILE, (FD_LIMIT, FD_LIMIT))

    return serve_process("--model", "scripted/hello", env=env, preexec_fn=few_descriptors)


def _slow_clients(url: str, n: int) -> list[socket.socket]:
    """Connections from another loopback address, each sending half a request and then nothing."""
    host, port = url.removeprefix("http://").split(":")
    out = []
    for _ in range(n):
        s = socket.socket()
        s.bind(("127.0.0.2", 0))
        s.settimeout(10)
        try:
            s.connect((host, int(port)))
            s.sendall(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ")
        except OSError:
            s.close()
            continue
        out.append(s)
    return out


def _answer(s: socket.socket) -> bytes:
    data = b""
    try:
        while chunk := s.recv(4096):
            data += chunk
    except OSError:
        pass
    return data


def test_slow_clients_are_dropped_and_others_are_still_served(tmp_path: Path) -> None:
    proc, url = _serve(tmp_path / "home", "[serve]\nheader_timeout_s = 1.5\nmax_connections_per_client = 20\n")
    slow: list[socket.socket] = []
    try:
        slow = _slow_clients(url, SLOW_CLIENTS)
        with httpx.Client(timeout=10) as c:  # from 127.0.0.1: its own share, while they hang
            assert c.get(f"{url}/healthz").json()["ok"] is True
        answers = [_answer(s) for s in slow]
        over = [a for a in answers if a.startswith(b"HTTP/1.1 429")]
        timed_out = [a for a in answers if a.startswith(b"HTTP/1.1 408")]
        assert len(over) >= SLOW_CLIENTS - 20, [a[:40] for a in answers[:25]]
        assert b"too many open connections from this address" in over[0]
        assert len(timed_out) == 20 and b"did not arrive in time" in timed_out[0]
        with httpx.Client(timeout=10) as c:
            assert c.get(f"{url}/healthz").status_code == 200
    finally:
        for s in slow:
            s.close()
        proc.terminate()
        _, err = proc.communicate(timeout=30)
    assert "Too many open files" not in err


def test_a_slow_request_that_finishes_in_time_is_served(tmp_path: Path) -> None:
    proc, url = _serve(tmp_path / "home", "[serve]\nheader_timeout_s = 3\n")
    try:
        host, port = url.removeprefix("http://").split(":")
        with socket.create_connection((host, int(port)), timeout=10) as s:
            s.sendall(b"GET /healthz HTTP/1.1\r\n")
            time.sleep(1)
            s.sendall(b"Host: 127.0.0.1\r\nConnection: close\r\n\r\n")
            assert _answer(s).startswith(b"HTTP/1.1 200")
    finally:
        proc.terminate()
        proc.wait(30)
