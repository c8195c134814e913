"""Attacks on provider trouble, fallback and compaction inside the loop (round 3).

Scripted HTTP servers on loopback, FunctionModel, and real processes killed with SIGKILL.
"""

from __future__ import annotations

import asyncio
import json
import re
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import AsyncIterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import assert_pairing
from tests.conftest import scripted_anthropic as anthropic
from tests.conftest import scripted_openai as openai
from tether import Agent, RunState, RunStore, run_stream, run_sync, tool
from tether.errors import ContextOverflowError, IncompleteStreamError
from tether.harness.retry import RetryPolicy
from tether.messages import AssistantMessage, Message, TextPart, UserMessage, text_of
from tether.providers.base import ModelRequest, ModelResponse, ResponseDone, StreamEvent, StreamText
from tether.providers.openai_chat import OpenAIChatProvider
from tether.providers.scripted import InProcessModel, Reply
from tether.sessions import JsonlSessionStore
from tether.testing import FunctionModel, ScriptedServer
from tether.tokens import estimate_tokens
from tether.usage import Price

FAST = RetryPolicy(base_delay_s=0.01, max_delay_s=0.05)
PRICE = Price(input=2.0, output=12.0)


def collect(agent: Agent, prompt: str | None, **kw: Any) -> list[Any]:
    async def go() -> list[Any]:
        return [e async for e in run_stream(agent, prompt, **kw)]

    return asyncio.run(go())


def is_summary_request(messages: list[Message]) -> bool:
    return "<transcript>" in text_of(messages[:1])


@tool(read_only=True)
def read_page(n: int) -> str:
    """Read page n of the manual."""
    return f"page {n}: " + "lorem ipsum dolor sit amet " * 60


def pages_read(text: str) -> list[int]:
    return sorted({int(n) for n in re.findall(r"page (\d+):", text)})


def reader(summary: str | None = None, pages: int = 8) -> FunctionModel:
    """Reads ``pages`` pages, one a turn (the next after the highest it has seen), then answers;
    a summary it is asked for is ``summary``, or by default lists the pages read."""

    def model(messages: list[Message], request: ModelRequest) -> Any:
        text = text_of(messages)
        if is_summary_request(messages):
            return summary or " ".join(f"page {n}: read." for n in pages_read(text))
        read = pages_read(text)
        nxt = max(read) + 1 if read else 0
        if nxt < pages:
            return Reply(calls=((f"c{nxt}", "read_page", {"n": nxt}),))
        return f"read {len(read)} pages"

    return FunctionModel(model)


# -- compaction ------------------------------------------------------------------------------------


def test_a_summary_longer_than_what_it_replaces_is_not_applied() -> None:
    """A small window (a local model's 4k) and a summariser that writes at length: before, the
    "summary" replaced ~1,800 tokens with ~2,900, three compactions each left the context above
    the threshold, and the run failed telling the user to trim the tools' outputs. A compaction
    never makes the context bigger: such a summary is dropped and old tool outputs are trimmed."""
    state = RunState()
    agent = Agent(reader("SUMMARY " + "blah blah blah " * 500), tools=[read_page], context_window=3000)
    events = collect(agent, "read the manual", state=state)
    result = events[-1].result
    compactions = [e for e in events if e.type == "compaction"]
    assert compactions and all(c.tokens_after < c.tokens_before for c in compactions), compactions
    assert result.status == "completed", result.reason
    assert not any(isinstance(m, UserMessage) and m.summary_turns for m in state.messages)


# -- provider trouble ------------------------------------------------------------------------------


def test_a_stalled_request_abandoned_at_the_first_token_timeout_is_charged(held_stalls: threading.Event) -> None:
    """A request tether gives up on at ``first_token_timeout_s`` was sent and read by the provider,
    like one cancelled by Stop (counted: its prompt, estimated) or a summary stopped for stalling
    (counted). Before, it was free: a budget could be overrun by stalled attempts nobody counted."""
    # The retry's first token must come within the timeout too: a timeout well above a loaded
    # machine's pauses (three test workers on two cores), and a stall that lasts until the run is
    # over, however late the timeout fires.
    with ScriptedServer() as server:
        plain = RunState()
        run_sync(Agent(openai(server, "hello"), price=PRICE, retry=FAST), "hi", state=plain)
        server.set_faults(["stall:60"])
        stalled = RunState()
        agent = Agent(openai(server, "hello"), price=PRICE, retry=FAST, first_token_timeout_s=5.0)
        result = run_sync(agent, "hi", state=stalled)
        held_stalls.set()
        assert len(server.received) == 2  # the stalled request, and its retry
    assert result.status == "completed"
    assert stalled.usage.estimated and stalled.usage.prompt_tokens > plain.usage.prompt_tokens
    assert stalled.cost_usd > plain.cost_usd
    assert stalled.call_in_flight is None


def test_a_max_tokens_below_min_output_tokens_is_not_taken_for_an_empty_budget() -> None:
    """``Agent(max_tokens=100, max_budget_usd=1.0)``: before, every run ended ``budget_exceeded``
    at once, "the remaining budget ($1.000000 of $1.000000) cannot pay for another call", since
    the 100 tokens asked for were compared with ``min_output_tokens`` (128) as if the budget had
    cut them. The summary call had the same flaw (compaction never summarised, it trimmed)."""
    result = run_sync(Agent("scripted/hello", max_tokens=100, max_budget_usd=1.0), "hi")
    assert result.status == "completed", result.reason
    state = RunState()
    agent = Agent(reader(), tools=[read_page], context_window=3000, max_tokens=100, max_budget_usd=1.0)
    events = collect(agent, "read the manual", state=state)
    assert events[-1].result.status == "completed", events[-1].result.reason
    assert [e.method for e in events if e.type == "compaction"][:1] == ["summary"]


CHILD = Path(__file__).with_name("compaction_crash_child.py")


def compaction_child(home: Path, log: Path, kill: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(CHILD), str(home), str(log), "run_c", kill], capture_output=True, text=True, timeout=60
    )


@pytest.mark.parametrize("kill", ["summary:1", "compaction:1"])
def test_kill_9_during_a_compaction_then_resume_loses_and_repeats_nothing(tmp_path: Path, kill: str) -> None:
    """SIGKILL inside the summary call, or right after the compacted transcript was saved; a new
    process resumes. Every page is read once, every turn asked once, the run's transcript and the
    session's are the same, pairing holds, and a summary lost in flight is counted as spent."""
    home, log = tmp_path / "home", tmp_path / "calls.log"
    killed = compaction_child(home, log, kill)
    assert killed.returncode == -9, killed.stderr
    resumed = compaction_child(home, log, "none")
    assert resumed.returncode == 0, resumed.stderr
    result = json.loads(resumed.stdout)
    assert (result["status"], result["output"]) == ("completed", "read 10 pages")
    lines = Counter(log.read_text().splitlines())
    assert all(lines[f"run {n}"] == 1 for n in range(10)), lines
    assert all(lines[f"ask {n}"] == 1 for n in range(11)), lines
    assert (result["cost_unknown_usd"] > 0) == kill.startswith("summary")
    state = RunStore(home / "runs").load("run_c")
    assert_pairing(state.messages)
    session = JsonlSessionStore(home / "sessions").load("s1")
    assert [m.model_dump(exclude={"usage"}) for m in session] == [
        m.model_dump(exclude={"usage"}) for m in state.messages
    ]
    ids = [c.id for m in state.messages for c in getattr(m, "tool_calls", ())]
    assert len(ids) == len(set(ids))
    assert any(isinstance(m, UserMessage) and m.summary_turns for m in state.messages)


@tool(read_only=True)
def dump_table(name: str) -> str:
    """Dump a whole table."""
    return "\n".join(f"row {i}: {name} " + "value " * 12 for i in range(1500))


def test_a_tool_output_that_alone_overflows_the_window_fails_saying_which_and_what_to_do() -> None:
    """One tool output larger than the model's whole window: compaction cannot help (it is the
    latest turn), the retry overflows again and the run fails, as documented. Before, the reason
    was only "function: the prompt exceeds the model's context window", which names neither the
    output nor a way out; now it names the tool, its size, and what to change."""

    def model(messages: list[Message], request: ModelRequest) -> Any:
        if estimate_tokens(text_of(messages)) > 4000:
            raise ContextOverflowError("function: the prompt exceeds the model's context window")
        if is_summary_request(messages):
            return "the user asked for the users table"
        return Reply(calls=(("c1", "dump_table", {"name": "users"}),))

    state = RunState()
    agent = Agent(FunctionModel(model), tools=[dump_table], context_window=4000, retry=FAST)
    result = run_sync(agent, "dump the users table", state=state)
    assert result.status == "failed"
    reason = result.reason or ""
    assert "context window" in reason and "dump_table" in reason, reason
    assert "ToolOutputTrimmer" in reason and "larger context window" in reason, reason
    assert_pairing(state.messages)


def test_both_providers_failing_end_in_one_failure_that_names_both() -> None:
    """The primary gives 503s until its retries are spent, the fallback 500s until its own are:
    one ``failed`` exit, one fallback event. Before, the reason spoke only of the fallback ("anthropic:
    HTTP 500 ... (gave up after 4 attempts)"), as if the model the person chose was never tried."""
    with ScriptedServer(faults=["503"] * 4) as primary, ScriptedServer(faults=["500"] * 4) as fallback:
        agent = Agent(openai(primary, "hello"), retry=FAST, fallback_models=[anthropic(fallback, "hello")])
        events = collect(agent, "hi")
    result = events[-1].result
    assert result.status == "failed" and [e.type for e in events].count("fallback") == 1
    reason = result.reason or ""
    assert reason.startswith("anthropic: HTTP 500") and "gave up after 4 attempts" in reason, reason
    assert "fallen back from openai/hello (openai: HTTP 503" in reason, reason


class _SlowToolCallServer(ThreadingHTTPServer):
    """Chat Completions that streams its first reply, one tool call, in pieces 0.4 s apart (a
    model writing a long argument), and answers in text once it has the result."""

    daemon_threads = True

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _SlowToolCallHandler)
        self.requests = 0


class _SlowToolCallHandler(BaseHTTPRequestHandler):
    server: _SlowToolCallServer

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["content-length"])))
        self.server.requests += 1
        answered = any(m["role"] == "tool" for m in body["messages"])
        self.send_response(200)
        self.send_header("content-type", "text/event-stream")
        self.end_headers()

        def chunk(delta: dict[str, Any], finish: str | None = None, pause: float = 0.0) -> None:
            time.sleep(pause)
            choice = {"index": 0, "delta": delta, "finish_reason": finish}
            self.wfile.write(b"data: " + json.dumps({"choices": [choice]}).encode() + b"\n\n")
            self.wfile.flush()

        if answered:
            chunk({"role": "assistant", "content": "noted"})
            chunk({}, "stop")
        else:
            call = {"index": 0, "id": "c1", "type": "function", "function": {"name": "note", "arguments": ""}}
            chunk({"role": "assistant", "tool_calls": [call]})
            pieces = ['{"text": "', *["a long note " for _ in range(8)], '"}']
            for piece in pieces:
                chunk({"tool_calls": [{"index": 0, "function": {"arguments": piece}}]}, pause=0.4)
            chunk({}, "tool_calls")
        self.wfile.write(b"data: [DONE]\n\n")


@tool
def note(text: str) -> str:
    """Keep a note."""
    return "kept"


def test_a_tool_call_streaming_slowly_is_not_taken_for_a_stall() -> None:
    """``first_token_timeout_s`` is about the first token. A reply that is only a tool call streams
    no text, so before, the timeout ran until the whole call was written: a model writing a long
    argument (here 4 s of pieces, against a 3 s timeout) was abandoned mid-stream every time,
    re-asked, paid again, and the run failed "no first token within 3.0 s". The pieces come 0.4 s
    apart, well inside the timeout however late a loaded machine (three test workers on two cores)
    reads them."""
    server = _SlowToolCallServer()
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        provider = OpenAIChatProvider(base_url=f"http://127.0.0.1:{server.server_address[1]}/v1", api_key="unused")
        agent = Agent(
            provider, tools=[note], first_token_timeout_s=3.0, retry=RetryPolicy(max_attempts=2, base_delay_s=0.01)
        )
        result = run_sync(agent, "take a note")
    finally:
        server.shutdown()
        server.server_close()
    assert (result.status, result.output) == ("completed", "noted"), result.reason
    assert server.requests == 2


def test_both_wires_say_that_a_tool_call_is_streaming() -> None:
    """What the fixes rest on: a tool call streams no text, so each of its pieces comes out as an
    empty text delta (shown to no one), and the loop can tell a call being written from a stall."""
    from tether.providers.anthropic import MessagesAssembler
    from tether.providers.openai_chat import StreamAssembler

    chat = StreamAssembler("openai/m")
    call = {"index": 0, "id": "c1", "type": "function", "function": {"name": "note", "arguments": ""}}
    chunks = [
        {"choices": [{"index": 0, "delta": {"role": "assistant", "tool_calls": [call]}}]},
        {"choices": [{"index": 0, "delta": {"tool_calls": [{"index": 0, "function": {"arguments": "{}"}}]}}]},
    ]
    assert [d.text for c in chunks for d in chat.feed(c)] == ["", ""]
    messages = MessagesAssembler("anthropic/m")
    events = [
        {"type": "message_start", "message": {"usage": {"input_tokens": 5}}},
        {"type": "content_block_start", "index": 0, "content_block": {"type": "tool_use", "id": "t1", "name": "x"}},
        {"type": "content_block_delta", "index": 0, "delta": {"type": "input_json_delta", "partial_json": "{}"}},
    ]
    assert [d.text for e in events for d in messages.feed(e)] == ["", ""]


class _CutThenContinued(InProcessModel):
    """A reply cut at max_tokens; its continuation's first stream starts with a repeat of the cut
    text's end and drops (retryable, nothing new shown yet); the second goes on."""

    name = "cutter"
    model_id = "m"
    price = PRICE

    def __init__(self) -> None:
        self.continuations = 0

    async def stream(self, request: ModelRequest) -> AsyncIterator[StreamEvent]:
        if "cut off by the output limit" not in text_of(request.messages[-1:]):
            text = "The quick brown fox jumps over the lazy dog"
            yield StreamText(text)
            yield ResponseDone(ModelResponse(AssistantMessage(content=(TextPart(text=text),), finish_reason="length")))
            return
        self.continuations += 1
        yield StreamText("over the lazy dog")  # the model repeats the last words first
        if self.continuations == 1:
            raise IncompleteStreamError("cutter: the stream was cut before the provider finished")
        yield StreamText(" and runs away.")
        rest = "over the lazy dog and runs away."
        yield ResponseDone(ModelResponse(AssistantMessage(content=(TextPart(text=rest),), finish_reason="stop")))


def test_a_continuation_retried_after_a_drop_does_not_show_the_seam_twice() -> None:
    """A cut answer is continued, and what the continuation repeats of the cut text is held back
    (docs: "the stream shows only the new text"). When the continuation's stream dropped while
    it held only that repeat, the retry is right (nothing new was shown), but it went on from what
    the failed attempt held: the caller was shown "...the lazy dogover the lazy dog and runs away."."""
    events = collect(Agent(_CutThenContinued(), retry=FAST), "tell me about the fox")
    result = events[-1].result
    shown = "".join(e.text for e in events if e.type == "text_delta")
    assert result.status == "completed" and [e.type for e in events].count("retry") == 1
    assert result.text == "The quick brown fox jumps over the lazy dog and runs away."
    assert shown == result.text


RETRY_CHILD = """
import asyncio, os, signal, sys
from pathlib import Path
from tether import Agent, RunState, RunStore, run_stream
from tether.providers.openai_chat import OpenAIChatProvider
from tether.usage import Price

home, base_url = Path(sys.argv[1]), sys.argv[2]
provider = OpenAIChatProvider(base_url=base_url, api_key="unused")
provider.model_id = "hello"

async def main():
    agent = Agent(provider, price=Price(input=2.0, output=12.0), max_budget_usd=1.0)
    state = RunState(run_id="run_r")
    async for event in run_stream(agent, "hi", state=state, store=RunStore(home / "runs")):
        if event.type == "retry":  # waiting out the server's retry-after: killed here
            os.kill(os.getpid(), signal.SIGKILL)

asyncio.run(main())
"""


def test_kill_9_while_waiting_to_retry_counts_no_phantom_spending(tmp_path: Path) -> None:
    """A 429 is not billed. Before, the note saved before that request stayed on disk while the
    run waited out the server's retry-after, so a run killed then (a deploy, an OOM) resumed with
    the request's worst case ($0.049 here, against a $1 budget) counted as spent-unknown."""
    with ScriptedServer(faults=["429:retry_after=30"]) as server:
        killed = subprocess.run(
            [sys.executable, "-c", RETRY_CHILD, str(tmp_path), server.base_url],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert killed.returncode == -9, killed.stderr
        store = RunStore(tmp_path / "runs")
        state = store.load("run_r")
        assert state.call_in_flight is None
        agent = Agent(openai(server, "hello"), price=PRICE, max_budget_usd=1.0)
        events = collect(agent, None, state=state, store=store)
    result = events[-1].result
    assert result.status == "completed" and result.cost_unknown_usd == 0
    assert "spent_unknown" not in [e.type for e in events]


class _StallsMidStream(InProcessModel):
    """Starts its reply (text, or a tool call's start) and then sends nothing, ever."""

    name = "staller"
    model_id = "m"
    price = PRICE

    def __init__(self, first: str) -> None:
        self.first = first

    async def stream(self, request: ModelRequest) -> AsyncIterator[StreamEvent]:
        yield StreamText(self.first)
        await asyncio.sleep(3600)
        raise AssertionError("unreachable")


def run_guarded(agent: Agent, prompt: str) -> list[Any]:
    """The run's events; a run that hangs fails the test instead of the suite."""

    async def go() -> list[Any]:
        return [e async for e in run_stream(agent, prompt)]

    return asyncio.run(asyncio.wait_for(go(), 30))


def test_a_stream_that_stalls_after_text_was_shown_ends_instead_of_hanging() -> None:
    """Before, ``first_token_timeout_s`` guarded only the first token: a stream that stalled after
    it hung the run forever (or for the HTTP client's 600 s read timeout). Now the same timeout
    bounds every wait for the next piece: text was shown, so the run fails, saying it stalled,
    with the abandoned request charged."""
    events = run_guarded(Agent(_StallsMidStream("Hello, "), first_token_timeout_s=0.3, retry=FAST), "hi")
    result = events[-1].result
    assert result.status == "failed" and "stalled" in (result.reason or ""), result.reason
    assert "reached the user" in (result.reason or "") and result.cost_usd > 0


def test_a_stream_that_stalls_inside_a_tool_call_falls_back() -> None:
    """Nothing of a tool call is shown while it streams, so a stall there falls back as a first
    token that never came does; before, it hung."""
    fallback = FunctionModel(lambda messages, request: "answered by the fallback")
    agent = Agent(_StallsMidStream(""), first_token_timeout_s=0.3, retry=FAST, fallback_models=[fallback])
    events = run_guarded(agent, "hi")
    (switch,) = [e for e in events if e.type == "fallback"]
    assert "stalled" in switch.reason
    assert (events[-1].result.status, events[-1].result.text) == ("completed", "answered by the fallback")


def overflowing_history(paragraph: str) -> list[Message]:
    history: list[Message] = []
    for i in range(8):
        history += [UserMessage.text(f"q{i}: {paragraph}"), AssistantMessage(content=(TextPart(text=f"a{i}: ok"),))]
    return history


def test_a_chinese_conversation_is_summarised_in_parts_that_fit_like_an_english_one() -> None:
    """The summariser reads the older part in parts "of about half the window". The parts were
    measured in characters (three a token), but a Chinese character is about 1.5 tokens: a part
    was over twice the window, every summary call overflowed, nothing could be compacted, and the
    conversation that an English one survives failed on the provider's overflow."""
    window = 4000
    asked: list[int] = []

    def model(messages: list[Message], request: ModelRequest) -> Any:
        tokens = estimate_tokens(text_of(messages))
        if tokens > window:
            raise ContextOverflowError("function: the prompt exceeds the model's context window")
        if is_summary_request(messages):
            asked.append(tokens)
            return "summary: the person asked about log rotation, eight times."
        return "ok"

    for paragraph in (
        "Logs rotate daily and old files are kept for thirty days. " * 48,
        "日志轮换每天进行一次，旧文件压缩后保留三十天。" * 20,
    ):
        asked.clear()
        state = RunState(messages=overflowing_history(paragraph))
        events = collect(Agent(FunctionModel(model), context_window=window), "next question", state=state)
        result = events[-1].result
        assert (result.status, [e.method for e in events if e.type == "compaction"]) == ("completed", ["summary"])
        assert asked and max(asked) <= window // 2 + 200, asked
