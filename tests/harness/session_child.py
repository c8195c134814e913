"""A process that continues a session with a run whose one tool blocks until told
(tests/harness/test_session_lock.py): while it blocks, the session is this run's."""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Any

from tether import Agent, RunStore, run_sync, tool
from tether.messages import Message, ToolMessage
from tether.providers.base import ModelRequest
from tether.sessions import JsonlSessionStore
from tether.testing import FunctionModel, Reply


def waiting_agent(go: Path | None) -> Agent:
    """Calls ``wait`` once (which blocks until ``go`` exists), then answers."""

    @tool(read_only=True)
    def wait() -> str:
        """Wait for the signal."""
        print("waiting", flush=True)
        while go is not None and not go.exists():
            time.sleep(0.01)
        return "went"

    def model(messages: list[Message], request: ModelRequest) -> Reply | str:
        if isinstance(messages[-1], ToolMessage):
            return "done waiting"
        return Reply(calls=(("w1", "wait", {}),))

    return Agent(FunctionModel(model), tools=[wait])


def run_store(where: str) -> Any:
    if where.startswith("postgresql://"):
        from tether.postgres import database
        from tether.postgres.runs import PgRunStore

        return PgRunStore(database(where))
    return RunStore(where)


def main(runs: str, sessions: str, session_id: str, go: str) -> int:
    result = run_sync(
        waiting_agent(Path(go)),
        "wait for it",
        store=run_store(runs),
        session=JsonlSessionStore(sessions),
        session_id=session_id,
    )
    print(result.status, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:5]))
