"""Sessions and context, round s14: a provider whose window is smaller than tether was told, and
sessions edited by hand.

The scripted model behind a real loopback HTTP server (both wires), real JSONL session files.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import scripted_anthropic, scripted_openai
from tether import Agent, run_stream
from tether.events import Event
from tether.harness.retry import RetryPolicy
from tether.messages import AssistantMessage, TextPart, UserMessage, text_of
from tether.sessions import JsonlSessionStore
from tether.testing import ScriptedServer

FAST = RetryPolicy(base_delay_s=0.01, max_delay_s=0.05)


def _collect(agent: Agent, prompt: str, **kwargs: Any) -> list[Event]:
    async def go() -> list[Event]:
        return [e async for e in run_stream(agent, prompt, **kwargs)]

    return asyncio.run(go())


# -- a window smaller than tether was told ------------------------------------------------------------


@pytest.mark.parametrize("wire", [scripted_openai, scripted_anthropic], ids=["openai", "anthropic"])
def test_a_window_smaller_than_tether_knew_is_summarised_in_parts_that_fit(tmp_path: Path, wire: Any) -> None:
    """A long conversation (about 9,000 tokens of questions and answers, no tool outputs) goes on
    against a server whose window is 3,000 tokens; tether does not know the window (a local server,
    a proxy). Before, the overflow asked for one summary of the whole older part, which overflowed
    too; there was no tool output to trim, and the run failed ("start a new session"): every later
    message failed the same way. Now the summary call the provider refuses is asked again with the
    transcript in smaller parts, every older question is read, only the latest turn is kept word
    for word, and the one retry fits."""
    store = JsonlSessionStore(tmp_path / "sessions", fsync=False)
    history = []
    for i in range(30):
        history.append(UserMessage.text(f"question Q{i:02d}: " + "lorem ipsum dolor sit amet " * 20))
        history.append(AssistantMessage(content=(TextPart(text=f"answer {i}: " + "consectetur adipiscing " * 20),)))
    store.append("talk", history)
    with ScriptedServer(context_window=3000) as server:
        events = _collect(Agent(wire(server, "hello"), retry=FAST), "and now?", session=store, session_id="talk")
        sent = [json.dumps(body) for _, body, _ in server.received]
    result = events[-1].result
    assert result.status == "completed", result.reason
    assert [e.method for e in events if e.type == "compaction"] == ["summary"]
    summaries = [body for body in sent if "<transcript>" in body]
    assert all(f"Q{i:02d}" in "".join(summaries) for i in range(30))  # nothing older dropped unread
    messages = store.load("talk")
    assert messages[0].summary_turns
    assert [m.role for m in messages[1:]] == ["assistant", "user", "assistant"]  # the latest turn, word for word
    assert text_of([messages[2]]) == "and now?"
