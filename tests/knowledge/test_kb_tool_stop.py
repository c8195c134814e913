"""A knowledge base search that blocks (a base another process is writing, a slow disk) does not
hold up ``run_sync`` at Stop: the search runs on the sync tools' daemon workers, left behind by a
Stop, not on the loop's default executor, which ``asyncio.run`` waits for at shutdown."""

from __future__ import annotations

import threading
from typing import Any

from tether import Agent, CancelSignal, run_sync
from tether.knowledge import HashingEmbedder, KnowledgeBase, KnowledgeTools
from tether.testing import FunctionModel, Reply


def test_run_sync_returns_at_stop_while_a_kb_search_blocks() -> None:
    release, started, finished = threading.Event(), threading.Event(), threading.Event()
    kb = KnowledgeBase.open(":memory:", embedder=HashingEmbedder(64))
    kb.add_text("a.md", "# Valves\n\nThe FVAM-2050-B is fitted with seal kit SK-77.\n")

    def blocking_search(*args: Any, **kw: Any) -> Any:
        started.set()
        release.wait(10)  # a hang guard, not a timing
        finished.set()
        raise RuntimeError("released")

    kb.search = blocking_search  # type: ignore[method-assign]

    def model(messages: list[Any], request: Any) -> Reply:
        if any(m.role == "tool" for m in messages):
            return Reply("done")
        return Reply("", calls=(("c1", "search_kb", {"query": "seal kit"}),))

    signal = CancelSignal()

    def stop_when_started() -> None:
        if started.wait(10):
            signal.cancel_threadsafe("user pressed Stop")

    threading.Thread(target=stop_when_started, daemon=True).start()
    try:
        result = run_sync(Agent(FunctionModel(model), extensions=[KnowledgeTools(kb)]), "look it up", signal=signal)
        assert not finished.is_set(), "run_sync waited for the blocked search"
    finally:
        release.set()
    assert result.status == "interrupted" and "user pressed Stop" in (result.reason or "")
