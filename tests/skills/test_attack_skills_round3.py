"""Skills attacked from outside (a helper's third round): a skill tool that blocks when Stop comes,
planted links, pipes and loops in skill folders, hostile front matter and descriptions."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest

from tests.skills.conftest import write_skill
from tether import Agent, CancelSignal, run_sync
from tether.messages import Message, ToolMessage
from tether.providers.base import ModelRequest
from tether.skills import Skills
from tether.skills import tools as skill_tools
from tether.testing import FunctionModel, Reply

# --- Stop while a skill's tool blocks -------------------------------------------------------------


def test_run_sync_returns_at_stop_while_a_skill_read_blocks(home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """load_skill reads files; on a hung network mount the read blocks and cannot hear Stop.
    run_sync must return at Stop without waiting for it (before: the tool ran on asyncio's default
    executor, whose thread asyncio.run waits for at shutdown, so Stop waited for the read)."""
    write_skill(home / "skills", "deploy")
    release, started, finished = threading.Event(), threading.Event(), threading.Event()

    def hung_read(skill: Any) -> str:
        started.set()
        release.wait(10)  # a hang guard, not a timing
        finished.set()
        return "the instructions"

    monkeypatch.setattr(skill_tools, "render_skill", hung_read)

    def model(messages: list[Message], request: ModelRequest) -> Reply | str:
        if any(isinstance(m, ToolMessage) for m in messages):
            return "ok"
        return Reply(calls=(("c1", "load_skill", {"name": "deploy"}),))

    signal = CancelSignal()

    def stop_when_started() -> None:
        if started.wait(10):
            signal.cancel_threadsafe("user pressed Stop")

    threading.Thread(target=stop_when_started, daemon=True).start()
    agent = Agent(FunctionModel(model), extensions=[Skills.open(home, cwd=home / "no-project")])
    try:
        result = run_sync(agent, "deploy it", signal=signal)
        assert not finished.is_set(), "run_sync waited for the blocked skill read"
    finally:
        release.set()
    assert result.status == "interrupted" and "user pressed Stop" in (result.reason or "")
