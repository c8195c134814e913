from __future__ import annotations

import os
import shutil
import signal
import sqlite3
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tether.testing import ScriptedServer

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE_WORKSPACE = ROOT / "examples" / "workspace"


def pytest_configure(config: pytest.Config) -> None:
    """Tests send Ctrl-C (SIGINT) to the processes they start. Started as a background job of a
    script, pytest inherits SIGINT ignored, and so would every ``tether`` it starts (Python keeps an
    ignored SIGINT ignored, as a background program should): such a test would wait for ever.
    Handled here, a signal is reset to its default in the programs exec'd from this process."""
    if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)


def _encodable(text: str) -> str:
    """``text`` with any lone surrogate (from a file name that is not UTF-8) as an escape."""
    return text.encode("utf-8", "backslashreplace").decode("utf-8")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: Any) -> Iterator[None]:
    """A test's report holds what it logged and, if it failed, why: tests that feed tether lone
    surrogates (a file name that is not UTF-8) log them, and pytest-xdist cannot send such text
    from a worker (the whole session then stops with an internal error). Escape them."""
    outcome: Any = yield
    report = outcome.get_result()
    report.sections = [(title, _encodable(content)) for title, content in report.sections]
    if report.longrepr is not None and not isinstance(report.longrepr, tuple):
        text = str(report.longrepr)
        if _encodable(text) != text:
            report.longrepr = _encodable(text)


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    """A fresh copy of the example directory the scenarios work on."""
    target = tmp_path / "workspace"
    shutil.copytree(EXAMPLE_WORKSPACE, target)
    return target


@pytest.fixture
def tether_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    home = tmp_path / "home"
    monkeypatch.setenv("TETHER_HOME", str(home))
    monkeypatch.delenv("TETHER_MODEL", raising=False)
    return home


def wait_for_trace(traces: Path, text: str, timeout: float = 30) -> Path:
    """Wait until a trace file under ``traces`` contains ``text``; return that file."""
    import time

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for f in traces.glob("*.jsonl") if traces.exists() else ():
            if text in f.read_text():
                return f
        time.sleep(0.02)
    raise AssertionError(f"no trace under {traces} mentioned {text!r} within {timeout} s")


@pytest.fixture(scope="session")
def scripted_server() -> Iterator[ScriptedServer]:
    with ScriptedServer() as server:
        yield server


@pytest.fixture
def held_stalls(monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    """While the test runs, a ScriptedServer's ``stall:SECONDS`` lasts until the event this returns is
    set (SECONDS at most: a hang guard), not SECONDS: a stall meant to outlast a timeout does so
    however late a loaded machine fires it. Set it before a ``with ScriptedServer()`` ends (its close
    waits for its requests); it is set after the test too."""
    import threading
    import time
    import types

    import tether.testing.server as scripted

    released = threading.Event()
    clock = {name: getattr(time, name) for name in dir(time) if not name.startswith("_")}
    monkeypatch.setattr(scripted, "time", types.SimpleNamespace(**{**clock, "sleep": released.wait}))
    yield released
    released.set()


def scripted_openai(server: ScriptedServer, scenario: str = "plan") -> Any:
    """The Chat Completions wire pointed at ``server``, asking for ``scenario`` (as ``openai/<scenario>``)."""
    from tether.providers.openai_chat import OpenAIChatProvider

    p = OpenAIChatProvider(base_url=server.base_url, api_key="unused")
    p.model_id = scenario  # type: ignore[attr-defined]
    return p


def scripted_anthropic(server: ScriptedServer, scenario: str = "plan") -> Any:
    """The Messages wire pointed at ``server``, asking for ``scenario`` (as ``anthropic/<scenario>``)."""
    from tether.providers.anthropic import AnthropicProvider

    p = AnthropicProvider(base_url=server.root_url, api_key="unused")
    p.model_id = scenario  # type: ignore[attr-defined]
    return p


def assert_pairing(messages: list[Any], *, complete: bool = True) -> None:
    """Law 1: every call's one result follows it, in declared order, before the next assistant
    message. ``complete=False`` allows the last calls to be still pending (a run that stopped)."""
    from tether.messages import AssistantMessage, ToolMessage

    expected: list[str] = []
    for m in messages:
        if isinstance(m, AssistantMessage):
            assert not expected, f"calls without results before the next assistant message: {expected}"
            expected = [c.id for c in m.tool_calls]
        elif isinstance(m, ToolMessage):
            assert expected and m.call_id == expected[0], f"result {m.call_id} out of order"
            expected.pop(0)
    assert not (complete and expected), f"calls without results: {expected}"


# --- Postgres: one private server per test process (pgserver), one fresh database per test --------


@pytest.fixture(scope="session")
def pg_server() -> Iterator[Any]:
    from tether.testing.services import PostgresServer

    with PostgresServer(durable=False) as server:  # thrown away after the tests: no fsync
        yield server


def _fresh_database(pg_server: Any) -> Iterator[str]:
    from tether.postgres.db import close_all

    url = pg_server.fresh_database()
    yield url
    close_all()
    pg_server.drop_database(url)


@pytest.fixture
def pg_url(pg_server: Any) -> Iterator[str]:
    yield from _fresh_database(pg_server)


@pytest.fixture(scope="module")
def db_url(pg_server: Any) -> Iterator[str]:
    """One fresh database for a whole module (its tests share a cluster: Postgres tests are slow)."""
    yield from _fresh_database(pg_server)


@pytest.fixture(params=["sqlite", "postgres"])
def backend(request: pytest.FixtureRequest) -> str:
    """Parametrises a store suite over both backends; with ``postgres``, ask for ``pg_url`` too."""
    return str(request.param)


@pytest.fixture
def serve() -> Iterator[Any]:
    """Start servers that write exactly the scripted bytes (``tests.providers.test_attack_wire_round2``'s
    ``WireServer``), as ``serve(script)``; each is shut down after the test."""
    import threading

    from tests.providers.test_attack_wire_round2 import WireServer

    started: list[Any] = []

    def start(script: list[Any]) -> Any:
        server = WireServer(script)
        threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
        started.append(server)
        return server

    yield start
    for server in started:
        server.shutdown()
        server.server_close()


def run_reader_gone(args: list[str], **kwargs: Any) -> subprocess.CompletedProcess[str]:
    """Run ``args`` with stdout a pipe whose reader left before anything was written (``| head``
    gone), stdin empty and stderr captured as text."""
    read, write = os.pipe()
    os.close(read)
    try:
        return subprocess.run(
            args, stdin=subprocess.DEVNULL, stdout=write, stderr=subprocess.PIPE, text=True, timeout=60, **kwargs
        )
    finally:
        os.close(write)


class CommitRefusedOnce:
    """A SQLite connection whose next COMMIT is refused, as a busy or full database refuses it."""

    def __init__(self, db: Any) -> None:
        self.db, self.refuse = db, True

    def execute(self, sql: str, *args: Any) -> Any:
        if sql == "COMMIT" and self.refuse:
            self.refuse = False
            raise sqlite3.OperationalError("database is locked")
        return self.db.execute(sql, *args)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.db, name)
