"""Sessions and context, round s14: a provider whose window is smaller than tether was told, and
sessions edited by hand.

The scripted model behind a real loopback HTTP server (both wires), real JSONL session files.
"""

from __future__ import annotations

import asyncio
import json
import re
import signal
import sqlite3
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest

from tests.cli.conftest import quiet_env, run_main
from tests.conftest import scripted_anthropic, scripted_openai
from tests.harness.test_attack_resilience_round3 import is_summary_request, read_page, reader
from tether import Agent, CancelSignal, RunState, RunStore, run_stream, run_sync, tool
from tether.errors import RetryableError, StoreError
from tether.events import Event
from tether.harness.compaction import SUMMARY_FAILURE_LIMIT
from tether.harness.retry import RetryPolicy
from tether.harness.state import TRIMMED
from tether.messages import AssistantMessage, Message, TextPart, ToolMessage, UserMessage, text_of
from tether.providers.base import ModelRequest
from tether.sessions import JsonlSessionStore, MemorySessionStore
from tether.testing import FunctionModel, ScriptedServer, call

__all__ = ["quiet_env"]  # a fixture, imported for the tests below

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


# -- a session edited by hand ---------------------------------------------------------------------------


def _shared_id_session(path: Path) -> None:
    """A session whose one reply called read_file twice with one id (written by hand, or by a
    tether that kept a server's shared ids), both results written, then the answer."""
    call = {"type": "tool_call", "id": "call_0", "name": "read_file"}
    lines = [
        {"role": "user", "content": [{"type": "text", "text": "read a and b"}]},
        {
            "role": "assistant",
            "content": [{**call, "arguments": '{"path": "a"}'}, {**call, "arguments": '{"path": "b"}'}],
        },
        {"role": "tool", "call_id": "call_0", "name": "read_file", "content": [{"type": "text", "text": "text of a"}]},
        {"role": "tool", "call_id": "call_0", "name": "read_file", "content": [{"type": "text", "text": "text of b"}]},
        {"role": "assistant", "content": [{"type": "text", "text": "both read"}]},
    ]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))


@pytest.mark.parametrize("wire", [scripted_openai, scripted_anthropic], ids=["openai", "anthropic"])
def test_calls_of_one_reply_sharing_an_id_each_keep_their_own_result(tmp_path: Path, wire: Any) -> None:
    """Before, repair paired both results with the first call (the second kept inside the first,
    "it may have run twice") and left the second call unanswered: every later request was refused
    by the provider (HTTP 400), and each attempt added the person's message again. Now the second
    call gets an id of its own and its own result; the conversation goes on."""
    store = JsonlSessionStore(tmp_path / "sessions", fsync=False)
    _shared_id_session(store.path("s"))
    with ScriptedServer() as server:
        result = asyncio.run(_last(Agent(wire(server, "hello"), retry=FAST), "and now?", store))
    assert result.status == "completed", result.reason
    messages = store.load("s")
    assert store.load("s") == messages  # repair is idempotent
    (reply,) = [m for m in messages if isinstance(m, AssistantMessage) and m.tool_calls]
    ids = [c.id for c in reply.tool_calls]
    assert ids[0] == "call_0" and len(set(ids)) == 2
    results = [m for m in messages if isinstance(m, ToolMessage)]
    assert [(r.call_id, r.text) for r in results] == [(ids[0], "text of a"), (ids[1], "text of b")]
    assert text_of(messages[-2:-1]) == "and now?"


async def _last(agent: Agent, prompt: str, store: JsonlSessionStore) -> Any:
    async for event in run_stream(agent, prompt, session=store, session_id="s"):
        if event.type == "done":
            return event.result
    raise AssertionError("no done event")


def test_a_session_with_calls_sharing_an_id_goes_on_from_the_command(
    quiet_env: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    _shared_id_session(quiet_env / "sessions" / "s.jsonl")
    with ScriptedServer() as server:
        monkeypatch.setenv("LLM_BASE_URL", server.base_url)
        code, out, err = run_main(
            "run", "--model", "openai/hello", "--cwd", str(tmp_path), "--session", "s", "and now?", capsys=capsys
        )
    assert code == 0, err
    code, out, err = run_main("sessions", "show", "s", capsys=capsys)
    assert code == 0 and "text of b" in out and "run twice" not in out, out + err


# -- a summary call that meets a rate limit --------------------------------------------------------------


@pytest.mark.parametrize("failures", [1, 3])
def test_a_summary_call_refused_for_a_while_is_asked_again_not_trimmed(failures: int) -> None:
    """The summary call meets a rate limit (429, retry-after 0) ``failures`` times, fewer than the
    retry policy's attempts. Before, one was a failed summary: the old tool outputs were replaced by
    a note, unread (docs: "nothing older dropped unread"), where a turn's own call waits and asks
    again. Now the summary call is asked again as a turn's is, with a ``retry`` event each time."""
    asked, pages = {"summaries": 0}, reader()

    def model(messages: list[Message], request: ModelRequest) -> Any:
        if is_summary_request(messages):
            asked["summaries"] += 1
            if asked["summaries"] <= failures:
                raise RetryableError("HTTP 429: slow down", status=429, retry_after=0.0)
        return pages.fn(messages, request)

    state = RunState()
    events = _collect(
        Agent(FunctionModel(model), tools=[read_page], context_window=3000, retry=FAST), "read", state=state
    )
    result = events[-1].result
    assert (result.status, result.text) == ("completed", "read 8 pages"), result.reason
    retries = [e for e in events if e.type == "retry"]
    assert len(retries) == failures and all("summary call" in e.reason for e in retries)
    assert {e.method for e in events if e.type == "compaction"} == {"summary"}
    assert not any(isinstance(m, ToolMessage) and m.text == TRIMMED for m in state.messages)


def test_a_summary_call_that_keeps_failing_still_trims_after_the_policys_attempts() -> None:
    pages = reader()

    def model(messages: list[Message], request: ModelRequest) -> Any:
        if is_summary_request(messages):
            raise RetryableError("HTTP 503: unavailable", status=503, retry_after=0.0)
        return pages.fn(messages, request)

    provider = FunctionModel(model)
    policy = RetryPolicy(max_attempts=2, base_delay_s=0.01, max_delay_s=0.05)
    events = _collect(Agent(provider, tools=[read_page], context_window=3000, retry=policy), "read")
    assert events[-1].result.status == "completed", events[-1].result.reason
    methods = [e.method for e in events if e.type == "compaction"]
    assert methods[0] == "trim" and methods[-1].startswith("trim (summariser disabled")
    assert sum(is_summary_request(list(r.messages)) for r in provider.requests) == 2 * SUMMARY_FAILURE_LIMIT


def test_stop_while_a_summary_call_waits_to_be_asked_again_leaves_the_transcript_as_it_was() -> None:
    pages = reader()

    def model(messages: list[Message], request: ModelRequest) -> Any:
        if is_summary_request(messages):
            raise RetryableError("HTTP 429: slow down", status=429, retry_after=30.0)
        return pages.fn(messages, request)

    state, signal = RunState(), CancelSignal()
    agent = Agent(FunctionModel(model), tools=[read_page], context_window=3000, retry=FAST)

    async def go() -> list[Event]:
        events = []
        async for event in run_stream(agent, "read", state=state, signal=signal):
            events.append(event)
            if event.type == "retry":
                before = list(state.messages)
                signal.cancel("the person pressed Stop")
        assert state.messages == before
        return events

    events = asyncio.run(go())
    assert events[-1].result.status == "interrupted", events[-1].result.reason
    assert not any(e.type == "compaction" for e in events)


# -- an older part read in parts ---------------------------------------------------------------------------


def test_each_part_of_a_long_summary_reads_the_summary_of_the_parts_before_it_whole() -> None:
    """A session of 60 questions and answers, compacted in parts (each part's summary call reads
    the summary of the parts before, then the part). Before, a part filled the call's whole room,
    and the summary before it, rendered first, was what the cut to size dropped: every summary but
    the next-to-last was lost, and with it 46 of the 56 questions the final summary stood for (the
    first question of each part too). Now the summary before is read whole and the part fills the
    rest: the chain is unbroken and every question is read."""
    asked: list[str] = []

    def model(messages: list[Message], request: ModelRequest) -> Any:
        if is_summary_request(messages):
            asked.append(text_of(messages))
            return f"SUMMARY-{len(asked) - 1} " + "covering the earlier questions " * 60
        return "an answer"

    store = MemorySessionStore()
    history = []
    for i in range(60):
        history.append(UserMessage.text(f"question Q{i:02d}: " + "lorem ipsum dolor sit amet " * 20))
        history.append(AssistantMessage(content=(TextPart(text=f"answer {i}: " + "consectetur adipiscing " * 20),)))
    store.append("s", history)
    events = _collect(Agent(FunctionModel(model), context_window=4000), "next", session=store, session_id="s")
    assert events[-1].result.status == "completed", events[-1].result.reason
    assert len(asked) > 2
    for k, text in enumerate(asked[1:], start=1):
        assert f"SUMMARY-{k - 1} " in text, k  # the summary of the parts before, read
    summarised = store.load("s")[0]
    assert summarised.summary_turns is not None and f"SUMMARY-{len(asked) - 1}" in text_of([summarised])
    read = set(re.findall(r"question (Q\d\d)", "".join(asked)))
    assert read == {f"Q{i:02d}" for i in range(summarised.summary_turns)}  # every question before the tail


SUMMARY_RETRY_CHILD = """
import asyncio, os, signal, sys
from pathlib import Path
from tests.harness.test_attack_resilience_round3 import is_summary_request, read_page, reader
from tether import Agent, RunState, RunStore, run_stream
from tether.errors import RetryableError, StoreError
from tether.testing import FunctionModel
from tether.usage import Price

pages = reader()

def model(messages, request):
    if is_summary_request(messages):
        raise RetryableError("HTTP 429: slow down", status=429, retry_after=30.0)
    return pages.fn(messages, request)

async def main():
    agent = Agent(FunctionModel(model), tools=[read_page], context_window=3000,
                  price=Price(input=2.0, output=12.0), max_budget_usd=1.0)
    state = RunState(run_id="run_s")
    async for event in run_stream(agent, "read", state=state, store=RunStore(Path(sys.argv[1]) / "runs")):
        if event.type == "retry":  # waiting to ask for the summary again: killed here
            os.kill(os.getpid(), signal.SIGKILL)

asyncio.run(main())
"""


def test_kill_9_while_a_summary_call_waits_to_be_asked_again_counts_no_phantom_spending(tmp_path: Path) -> None:
    """A refused summary call is not billed: the note saved before it is out of the run on disk
    before the wait, as a turn's is, so a run killed while it waits resumes with nothing counted
    as spent-unknown."""
    killed = subprocess.run(
        [sys.executable, "-c", SUMMARY_RETRY_CHILD, str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=Path(__file__).parent.parent,
    )
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    state = RunStore(tmp_path / "runs").load("run_s")
    assert state.call_in_flight is None


# -- a tool result whose call is not in the session ------------------------------------------------------

_ORPHAN = "OUTPUT OF A CALL WHOSE LINE WAS DELETED BY HAND"


def _orphan_lines() -> list[dict[str, Any]]:
    return [
        {"role": "user", "content": [{"type": "text", "text": "what does the log say?"}]},
        {"role": "tool", "call_id": "c9", "name": "read_file", "content": [{"type": "text", "text": _ORPHAN}]},
        {"role": "assistant", "content": [{"type": "text", "text": "it says it timed out"}]},
    ]


def test_a_tool_result_with_no_call_is_dropped_from_a_jsonl_session_but_kept_beside_it(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Before, repair dropped it and wrote the session back without it: its words were gone, with no
    copy and no warning (a line that holds no message is kept beside the session first). Now the
    file as it was is kept beside it the same way, and a warning says where."""
    store = JsonlSessionStore(tmp_path / "sessions", fsync=False)
    path = store.path("s")
    path.write_text("".join(json.dumps(line) + "\n" for line in _orphan_lines()))
    with caplog.at_level("WARNING", logger="tether.sessions"):
        messages = store.load("s")
    assert [m.role for m in messages] == ["user", "assistant"] and store.load("s") == messages
    (copy,) = path.parent.glob("s.jsonl.damaged-*")
    assert _ORPHAN in copy.read_text() and _ORPHAN not in path.read_text()
    assert str(copy) in caplog.text and "answers no call" in caplog.text
    assert [s.messages for s in store.list()] == [2]  # the copy is no session of its own


def test_a_tool_result_with_no_call_is_dropped_from_a_sqlite_session_but_kept_in_its_table(tmp_path: Path) -> None:
    from tether.messages import load_message_dict
    from tether.sessions import SqliteSessionStore

    store = SqliteSessionStore(tmp_path / "sessions.db")
    store.append("s", [load_message_dict(line) for line in _orphan_lines()])
    assert [m.role for m in store.load("s")] == ["user", "assistant"]
    store.close()
    with sqlite3.connect(tmp_path / "sessions.db") as db:
        kept = db.execute("SELECT body FROM damaged_messages WHERE session_id = 's'").fetchall()
    assert len(kept) == 1 and _ORPHAN in kept[0][0]


# -- two runs continuing one session at once, with no run store ------------------------------------------


@pytest.mark.parametrize("kind", ["jsonl", "memory"])
def test_a_second_run_on_a_session_a_run_is_continuing_is_refused_with_no_run_store(tmp_path: Path, kind: str) -> None:
    """The Python API with a session store and no run store (docs' own example): two runs on one
    session at once (two requests of a web app, two processes) both went on. Their messages
    interleaved in the file, and a compaction of one wrote the other's whole exchange out of it
    (seen: run B's request, 8 tool results and answer gone). Now the session store holds the
    session for the run that continues it: the second is refused before it reads or writes
    anything, naming the run, and a deletion is refused the same way."""
    store: Any = JsonlSessionStore(tmp_path / "sessions", fsync=False) if kind == "jsonl" else MemorySessionStore()
    started, release = threading.Event(), threading.Event()

    @tool
    def slow_step() -> str:
        """A step that takes a while."""
        started.set()
        release.wait(30)
        return "step done"

    def model(messages: list[Message], request: ModelRequest) -> Any:
        return call("s1", "slow_step") if messages[-1].role == "user" else "first request done"

    first: dict[str, Any] = {}
    thread = threading.Thread(
        target=lambda: first.update(
            result=run_sync(Agent(FunctionModel(model), tools=[slow_step]), "first", session=store, session_id="s")
        )
    )
    thread.start()
    try:
        assert started.wait(30)
        with pytest.raises(
            StoreError, match=r"session s is being continued by run run_\w+ right now; nothing was sent"
        ):
            run_sync(Agent(FunctionModel(lambda m, r: "second request done")), "second", session=store, session_id="s")
        if kind == "jsonl":
            with pytest.raises(StoreError, match="nothing was deleted"):
                store.delete("s")
    finally:
        release.set()
        thread.join(30)
    assert first["result"].status == "completed"
    assert "second" not in text_of(store.load("s"))
    result = run_sync(Agent(FunctionModel(lambda m, r: "second request done")), "second", session=store, session_id="s")
    assert result.status == "completed"
    assert [text_of([m]) for m in store.load("s") if m.role == "user"] == ["first", "second"]
    store.delete("s")
    assert store.load("s") == []


@pytest.mark.parametrize("runs", [False, True], ids=["no run store", "run store"])
def test_a_caller_that_stops_reading_at_done_can_send_the_next_message_at_once(tmp_path: Path, runs: bool) -> None:
    """``async for event in run_stream(...): if event.type == "done": return event.result`` leaves
    the generator unfinished; the run and its session were let go only when it was collected, so
    the next message, sent at once, was refused as "being continued by run ..." (with a run store,
    and with the session store's own hold). Now they are let go before ``done`` is yielded."""
    sessions = JsonlSessionStore(tmp_path / "sessions", fsync=False)
    store = RunStore(tmp_path / "runs", fsync=False) if runs else None
    agent = Agent(FunctionModel(lambda m, r: "noted"))
    kept = []  # the unfinished generators, alive: nothing collects them early

    async def ask(prompt: str) -> Any:
        stream = run_stream(agent, prompt, session=sessions, session_id="s", store=store)
        kept.append(stream)
        async for event in stream:
            if event.type == "done":
                return event.result
        raise AssertionError("no done event")

    async def conversation() -> list[str]:
        return [(await ask(p)).status for p in ("one", "two", "three")]

    assert asyncio.run(conversation()) == ["completed"] * 3
    assert [text_of([m]) for m in sessions.load("s") if m.role == "user"] == ["one", "two", "three"]
