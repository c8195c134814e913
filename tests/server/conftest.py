"""The server for tests: the real app under uvicorn on a free loopback port, in a thread, with
TETHER_HOME in a temporary directory; and a small SSE client.

Ports, for every test folder: a server the tests start binds port 0 and says where it listens
(``start_uvicorn``, ``serve_process``, ``listening_url``), since a port picked free and bound later
can be taken meanwhile by another process (CI starts many servers at once); a port that must refuse
connections is held bound (``unused_port``); a server that must be told a number starts through
``tether.testing.services.on_a_free_port``, again on another port when its was taken."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE_WORKSPACE = ROOT / "examples" / "workspace"
TEST_AGENTS = Path(__file__).with_name("agents.py")
CHROMIUM = Path("/usr/bin/chromium")  # Debian's, driven by Playwright offline
# A browser is a system package pip cannot bring; .ci/run installs Debian's chromium, so CI runs these.
NEEDS_CHROMIUM = pytest.mark.skipif(not CHROMIUM.exists(), reason="no browser: apt-get install chromium (CI does)")


def serve_process(*args: str, env: dict[str, str], **popen: Any) -> tuple[subprocess.Popen[str], str]:
    """``tether serve --port 0 ARGS`` in a process of its own (kill -9 reaches it alone), and its
    address once it says it listens."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "tether", "serve", "--port", "0", *args],
        env=env,
        stderr=subprocess.PIPE,
        text=True,
        **popen,
    )
    assert proc.stderr is not None
    line = proc.stderr.readline()
    url = listening_url(line)
    if url is None:
        proc.kill()
        raise AssertionError(f"tether serve did not start: {line}{proc.stderr.read()}")
    return proc, url


def listening_url(text: str) -> str | None:
    """The address in ``tether serve``'s "listening on http://HOST:PORT/" line, if ``text`` has it."""
    found = re.search(r"listening on (http://\S+?)/? ", text)
    return found.group(1) if found else None


def logged_url(log: Path, proc: subprocess.Popen[Any], timeout: float = 90) -> str:
    """The address a ``tether serve --port 0`` writing to ``log`` says it listens on, once it does."""
    deadline = time.monotonic() + timeout
    while (url := listening_url(log.read_text(errors="replace"))) is None:
        assert proc.poll() is None and time.monotonic() < deadline, log.read_text(errors="replace")
        time.sleep(0.05)
    return url


@contextlib.contextmanager
def unused_port() -> Iterator[int]:
    """A loopback port nothing listens on, while the block runs: held bound but not listening, so a
    connection to it is refused and no other process can take it meanwhile."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        yield int(s.getsockname()[1])


@dataclass
class Uvicorn:
    url: str
    server: Any
    thread: threading.Thread

    def stop(self, timeout: float = 30) -> None:
        self.server.should_exit = True
        self.thread.join(timeout)


def start_uvicorn(app: Any, *, what: str = "the test server", **config: Any) -> Uvicorn:
    """``app`` under uvicorn in a thread, once it has started, on a loopback port it bound itself
    (port 0); ``config``: uvicorn.Config's other options (log_level defaults to warning)."""
    import uvicorn

    config = {"log_level": "warning", **config}
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=0, **config))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 20
    while not server.started:
        if time.monotonic() > deadline or not thread.is_alive():
            raise RuntimeError(f"{what} did not start")
        time.sleep(0.01)
    port = server.servers[0].sockets[0].getsockname()[1]
    return Uvicorn(f"http://127.0.0.1:{port}", server, thread)


@dataclass
class Served:
    url: str
    home: Path
    tokens: dict[str, str]
    server: Any
    thread: threading.Thread
    app: Any
    headers: dict[str, str] = field(default_factory=dict)

    def client(self, user: str | None = None, **kw: Any) -> httpx.Client:
        headers = {"Authorization": f"Bearer {self.tokens[user]}"} if user else {}
        return httpx.Client(base_url=self.url, headers=headers, timeout=30, **kw)

    def stop(self) -> None:
        self.server.should_exit = True
        self.thread.join(30)


@pytest.fixture
def served(tmp_path: Path) -> Iterator[Callable[..., Served]]:
    """``served(agents_module=PATH, tokens=["alice", ...], config="toml text")`` → a running server."""
    from tether.config import load_settings
    from tether.server.app import create_app

    started: list[Served] = []

    def start(
        agents_module: str | Path | None = None,
        tokens: list[str] | None = None,
        config: str = "",
        home: Path | None = None,
        run_processes: int | None = None,
    ) -> Served:
        """``home``: an earlier server's, to start again where it stopped; ``run_processes``: the
        runs driven in that many processes of their own (tests/server/test_run_processes.py)."""
        if home is None:
            home = tmp_path / f"home{len(started)}"
            home.mkdir()
        workspace = tmp_path / f"workspace{len(started)}"
        shutil.copytree(EXAMPLE_WORKSPACE, workspace)
        if config:
            (home / "config.toml").write_text(config)
        settings = load_settings(home)
        from tether.server.store import SqliteServerStore

        store = SqliteServerStore(home / "serve" / "server.db")
        made = {name: store.add_token(name) for name in tokens or ()}
        os.environ["TETHER_TEST_WORKSPACE"] = str(workspace)
        app = create_app(
            settings, agent_spec=str(agents_module or TEST_AGENTS), store=store, run_processes=run_processes
        )
        up = start_uvicorn(app, lifespan="on", timeout_graceful_shutdown=5)
        s = Served(up.url, home, made, up.server, up.thread, app)
        started.append(s)
        return s

    yield start
    for s in started:
        s.stop()


def read_events(
    client: httpx.Client,
    path: str,
    *,
    last_event_id: int | None = None,
    until: Callable[[dict[str, Any]], bool] | None = None,
    timeout: float = 30,
) -> list[dict[str, Any]]:
    """The events of an SSE stream (each with ``id`` and ``event`` added), until the stream ends or
    ``until(event)`` is true."""
    headers = {"Accept": "text/event-stream"}
    if last_event_id is not None:
        headers["Last-Event-ID"] = str(last_event_id)
    out: list[dict[str, Any]] = []
    with client.stream("GET", path, headers=headers, timeout=timeout) as r:
        assert r.status_code == 200, r.read()
        assert r.headers["content-type"].startswith("text/event-stream")
        for ev in parse_sse(r.iter_lines()):
            out.append(ev)
            if until is not None and until(ev):
                break
    return out


def parse_sse(lines: Any) -> Iterator[dict[str, Any]]:
    fields: dict[str, str] = {}
    for line in lines:
        if line == "":
            if "data" in fields:
                ev = json.loads(fields["data"])
                ev["id"], ev["event"] = int(fields.get("id", "0")), fields.get("event", "message")
                yield ev
            fields = {}
        elif line.startswith(":"):
            continue
        else:
            name, _, value = line.partition(":")
            fields[name] = value[1:] if value.startswith(" ") else value


def wait_until(check: Callable[[], Any], timeout: float = 20, what: str = "the condition") -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = check()
        if value:
            return value
        time.sleep(0.02)
    raise AssertionError(f"{what} did not happen within {timeout} s")


def run_async(coro: Any) -> Any:
    return asyncio.run(coro)


# --- a real headless Chromium, for the tests of the page (Playwright imported only by them) -------


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=str(CHROMIUM), args=["--no-sandbox"])
        yield browser
        browser.close()


@pytest.fixture
def console_errors() -> list[str]:
    return []


@pytest.fixture
def page(browser: Any, console_errors: list[str], served: Any) -> Iterator[Any]:
    """A fresh page; the test fails if the page throws or logs an error (a CSP violation, a 404).

    It asks for ``served`` so that every server a test starts outlives the page: the page is closed
    first, and a request it still makes at teardown is never refused."""
    context = browser.new_context(viewport={"width": 1280, "height": 800})
    page = context.new_page()
    errors = console_errors
    page.on("pageerror", lambda exc: errors.append(f"page error: {exc}"))
    page.on("console", lambda msg: errors.append(f"console: {msg.text}") if msg.type == "error" else None)
    yield page
    context.close()
    assert not errors, errors


@pytest.fixture
def bookings(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The file tests/connectors/asking_server.py appends each booking to (its side effect)."""
    path = tmp_path / "bookings.txt"
    path.touch()
    monkeypatch.setenv("BOOKINGS", str(path))
    return path
