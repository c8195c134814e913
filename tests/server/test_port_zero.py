"""Servers the tests start get their ports without a race: a port picked free and bound later can be
another process's by then (CI starts many servers at once). ``tether serve --port 0`` binds a port
itself and says which; a port that must refuse connections is held; a server that must be told a
number is started again on another one when its was taken."""

from __future__ import annotations

import errno
import itertools
import os
import socket
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest

from tests.server.conftest import serve_process, start_uvicorn, unused_port
from tether.testing import services
from tether.testing.services import PortTaken, on_a_free_port, port_in_use


def test_tether_serve_on_port_0_says_where_it_listens_and_two_get_two_ports(tmp_path: Path) -> None:
    env = {**os.environ, "TETHER_HOME": str(tmp_path / "home")}
    with ThreadPoolExecutor(2) as pool:  # started together, as the tests on CI start theirs
        starts = [pool.submit(serve_process, "--model", "scripted/hello", env=env) for _ in range(2)]
    try:
        urls = [start.result()[1] for start in starts]
        ports = {url.rpartition(":")[2] for url in urls}
        assert len(ports) == 2 and "0" not in ports, urls
        for url in urls:
            assert httpx.get(f"{url}/healthz", timeout=30).status_code == 200
    finally:
        for proc, _ in (start.result() for start in starts if start.exception() is None):
            proc.terminate()
            proc.wait(30)


def test_the_test_servers_bind_their_own_ports() -> None:
    from starlette.applications import Starlette
    from starlette.responses import PlainTextResponse
    from starlette.routing import Route

    def app(name: str) -> Starlette:
        return Starlette(routes=[Route("/", lambda request: PlainTextResponse(name))])

    servers = [start_uvicorn(app("a")), start_uvicorn(app("b"))]
    try:
        assert servers[0].url != servers[1].url and not servers[0].url.endswith(":0")
        assert [httpx.get(s.url, timeout=30).text for s in servers] == ["a", "b"]
    finally:
        for s in servers:
            s.stop()


def test_an_unused_port_refuses_connections_and_nobody_else_can_take_it() -> None:
    with unused_port() as port:
        with pytest.raises(ConnectionRefusedError), socket.create_connection(("127.0.0.1", port), timeout=30):
            pass
        with socket.socket() as other:  # another server, even one that asks to reuse the address
            other.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            with pytest.raises(OSError) as caught:
                other.bind(("127.0.0.1", port))
            assert caught.value.errno == errno.EADDRINUSE


def _http_server(log: Path) -> tuple[subprocess.Popen[bytes], int]:
    """Python's http.server, a server that must be told its port, started through on_a_free_port."""

    def start(port: int) -> tuple[subprocess.Popen[bytes], int]:
        argv = [sys.executable, "-u", "-m", "http.server", str(port), "--bind", "127.0.0.1"]
        with log.open("wb") as out:
            proc = subprocess.Popen(argv, stdout=out, stderr=out, cwd=log.parent)
        deadline = time.monotonic() + 30
        while "Serving HTTP" not in log.read_text():  # printed once it is bound and listening
            if proc.poll() is not None:
                if port_in_use(log.read_text()):
                    raise PortTaken(log.read_text())
                raise AssertionError(log.read_text())
            assert time.monotonic() < deadline, log.read_text()
            time.sleep(0.02)
        return proc, port

    return on_a_free_port(start)


def test_a_server_told_a_port_someone_took_starts_again_on_another(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with socket.socket() as thief:  # it takes the first port picked, before the server binds it
        thief.bind(("127.0.0.1", 0))
        thief.listen()
        taken = thief.getsockname()[1]
        picked = itertools.chain([taken], iter(services.free_port, None))
        handed: list[int] = []

        def free_port() -> int:
            handed.append(next(picked))
            return handed[-1]

        monkeypatch.setattr(services, "free_port", free_port)
        proc, port = _http_server(tmp_path / "http.log")
        try:
            assert handed[0] == taken and port == handed[-1] != taken
            assert httpx.get(f"http://127.0.0.1:{port}/", timeout=30).status_code == 200
        finally:
            proc.terminate()
            proc.wait(30)


def test_a_port_taken_every_time_is_said_after_the_last_attempt(monkeypatch: pytest.MonkeyPatch) -> None:
    tried: list[int] = []

    def start(port: int) -> None:
        tried.append(port)
        raise PortTaken(f"port {port}: Address already in use")

    with pytest.raises(PortTaken, match="Address already in use"):
        on_a_free_port(start, attempts=3)
    assert len(tried) == 3
