"""A process that loads a run waiting for approval, waits until told, then approves its copy and
resumes it (tests/harness/test_stale_copy.py): by then another process may have done so first."""

from __future__ import annotations

import sys
import time
from pathlib import Path

from tether import Agent, RunStore, approve, run_sync, tool
from tether.errors import StaleRunError
from tether.messages import Message, ToolMessage
from tether.providers.base import ModelRequest
from tether.testing import FunctionModel, Reply


def deleting_agent(log: Path) -> Agent:
    """An agent whose one call needs approval; each run of the call adds a line to ``log``."""

    @tool(needs_approval=True)
    def delete(path: str) -> str:
        """Delete a file."""
        with log.open("a") as f:
            f.write(f"deleted {path}\n")
        return f"deleted {path}"

    def model(messages: list[Message], request: ModelRequest) -> Reply | str:
        if any(isinstance(m, ToolMessage) for m in messages):
            return "deleted"
        return Reply(calls=(("c1", "delete", {"path": "a.log"}),))

    return Agent(FunctionModel(model), tools=[delete])


def main(root: str, run_id: str, log: str, go: str) -> int:
    store = RunStore(root)
    state = store.load(run_id)
    print("loaded", flush=True)
    while not Path(go).exists():
        time.sleep(0.01)
    approve(state)
    try:
        run_sync(deleting_agent(Path(log)), state=state, store=store)
    except StaleRunError as exc:
        print(f"refused: {exc}", flush=True)
        return 3
    print("ran", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:5]))
