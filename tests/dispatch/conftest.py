"""Servers with external workers, in this process: uvicorn nodes on free loopback ports sharing
one Postgres database, and a worker driving each queued run on a thread (ThreadDispatcher). The
multi-process test (test_cluster.py) starts real processes and a real broker instead."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.server.conftest import start_uvicorn

ROOT = Path(__file__).resolve().parents[2]
AGENTS = ROOT / "examples" / "distributed" / "agents.py"


@dataclass
class Cluster:
    settings: Any
    worker: Any
    dispatcher: Any
    ledger: Path
    nodes: list[tuple[str, Any, threading.Thread]]

    def node(self) -> str:
        from tether.server.app import create_app

        app = create_app(self.settings, agents=self.worker.agents, workers="external", dispatcher=self.dispatcher)
        up = start_uvicorn(app, what="the node", lifespan="on", timeout_graceful_shutdown=3)
        self.nodes.append((up.url, up.server, up.thread))
        return up.url

    def shipped(self) -> list[str]:
        path = self.ledger / "shipped.log"
        return path.read_text().splitlines() if path.exists() else []

    def calls(self) -> list[str]:
        path = self.ledger / "calls.log"
        return path.read_text().splitlines() if path.exists() else []


@pytest.fixture
def cluster(tmp_path: Path, pg_url: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[Callable[..., Cluster]]:
    from tether.config import Settings
    from tether.dispatch.engine import ThreadDispatcher
    from tether.dispatch.worker import Worker
    from tether.postgres.db import database
    from tether.server.agents import load_agents

    made: list[Cluster] = []

    def make(model_delay_s: float = 0.02, tool_s: float = 0.1) -> Cluster:
        ledger = tmp_path / "ledger"
        monkeypatch.setenv("TETHER_DEMO_LEDGER", str(ledger))
        monkeypatch.setenv("TETHER_DEMO_MODEL_DELAY_S", str(model_delay_s))
        monkeypatch.setenv("TETHER_DEMO_TOOL_S", str(tool_s))
        settings = Settings(home=tmp_path / "home", database_url=pg_url)
        agents = load_agents(settings, str(AGENTS))
        worker = Worker(home=settings.home, agents=agents, db=database(pg_url))
        c = Cluster(settings, worker, ThreadDispatcher(worker.drive), ledger, [])
        made.append(c)
        return c

    yield make
    for c in made:
        for _, server, thread in c.nodes:
            server.should_exit = True
            thread.join(10)
        c.dispatcher.close()
        c.worker.close()
