"""Attacks on the loop's handling of tool calls and cut answers (session 16).

Each test names what a user saw before its fix."""

from __future__ import annotations

import asyncio
import json
import random
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tether import Agent, RunState, run_stream, run_sync, tool
from tether.events import Event, TextDelta
from tether.harness.length import Continuation, merge_seam
from tether.harness.store import RunStore, read_header
from tether.harness.tool_exec import _KEPT_MAX
from tether.messages import AssistantMessage, TextPart, ToolCallPart, ToolMessage
from tether.providers.scripted import Reply
from tether.testing import FunctionModel
from tether.usage import Price, Usage


def _events(agent: Agent, prompt: str | None, **kw: Any) -> list[Event]:
    async def go() -> list[Event]:
        return [e async for e in run_stream(agent, prompt, **kw)]

    return asyncio.run(go())


def _shown(events: list[Event]) -> str:
    return "".join(e.text for e in events if isinstance(e, TextDelta))


# -- a continuation that says nothing new -----------------------------------------------------------

_CUT = "The answer has three parts: first, the valve; second, "


@pytest.mark.parametrize("stream", [True, False])
@pytest.mark.parametrize("said", ["", "  \n", _CUT, _CUT[-20:]], ids=["empty", "blank", "all-again", "end-again"])
def test_a_continuation_that_says_nothing_new_does_not_complete_the_cut_answer(stream: bool, said: str) -> None:
    """Before: asked to finish a cut answer, a model that sent back nothing (or only what it had
    already written) with ``finish_reason="stop"`` ended the run ``completed``, "the model
    answered", with the half-written answer as the output. Nothing was finished: the run now ends
    ``failed``, ``incomplete:``, with the text kept, as a second cut does."""
    replies = [
        AssistantMessage(content=(TextPart(text=_CUT),), finish_reason="length"),
        AssistantMessage(content=(TextPart(text=said),) if said else (), finish_reason="stop"),
    ]
    events = _events(Agent(FunctionModel(lambda m, r: replies.pop(0)), stream=stream), "explain")
    result = events[-1].result  # type: ignore[attr-defined]
    assert result.status == "failed" and (result.reason or "").startswith("incomplete:"), result.reason
    assert "it wrote nothing new" in (result.reason or "")
    assert result.output.rstrip() == _CUT.rstrip() and result.turns == 2


def test_a_continuation_that_finishes_the_answer_still_completes() -> None:
    replies = [
        AssistantMessage(content=(TextPart(text=_CUT),), finish_reason="length"),
        AssistantMessage(content=(TextPart(text="the seal."),), finish_reason="stop"),
    ]
    result = _events(Agent(FunctionModel(lambda m, r: replies.pop(0))), "explain")[-1].result  # type: ignore[attr-defined]
    assert (result.status, result.output) == ("completed", _CUT + "the seal.")


@pytest.mark.parametrize("said", ["nothing", "a call"])
def test_with_a_budget_a_continuation_that_adds_nothing_is_not_asked_again_and_again(said: str) -> None:
    """Before: with a budget set, a continuation that wrote nothing (empty, or only a tool call,
    refused) was taken for a reply the budget had cut short, since it used fewer tokens than
    ``max_tokens``: the run asked for the continuation again and again, paying each time, until
    ``max_turns``, then ended ``budget_exceeded`` ("the remaining budget could not pay for a longer
    one") with most of the budget left. It now ends at once, ``failed``, ``incomplete:``."""
    asked: list[int] = []

    def model(messages: list[Any], request: Any) -> AssistantMessage:
        asked.append(request.max_tokens or 0)
        if len(asked) == 1:
            usage = Usage(prompt_tokens=100, completion_tokens=request.max_tokens)
            return AssistantMessage(content=(TextPart(text="word " * 50),), finish_reason="length", usage=usage)
        calls = (ToolCallPart(id=f"x{len(asked)}", name="read_file", arguments="{}"),) if said == "a call" else ()
        usage = Usage(prompt_tokens=150, completion_tokens=10 if calls else 0)
        return AssistantMessage(content=calls, finish_reason="tool_calls" if calls else "stop", usage=usage)

    agent = Agent(FunctionModel(model, price=Price(input=1.0, output=2.0)), max_budget_usd=5.0, max_tokens=200)
    result = _events(agent, "go")[-1].result  # type: ignore[attr-defined]
    assert (result.status, len(asked)) == ("failed", 2), result.reason
    assert (result.reason or "").startswith("incomplete:") and result.output.startswith("word " * 50)


# -- a continuation that repeats a long end of the cut answer ---------------------------------------

_LONG = " ".join(f"Point {i}: seat {i} of the valve is rated for {i * 3} bar." for i in range(300))


@pytest.mark.parametrize("stream", [True, False])
@pytest.mark.parametrize("repeat", [2500, 5000])
def test_a_continuation_that_repeats_the_last_pages_keeps_them_once(stream: bool, repeat: int) -> None:
    """Before: a model told to go on from where it stopped that began again a few paragraphs back
    (the last 2,500 characters of a 6,000-character answer, said again before the new text) had
    those paragraphs kept twice in the answer, the transcript and the stream: a repeat was looked
    for only in the last 2,000 characters. It is now kept once, however long."""
    first = _LONG[:6000]
    again = _LONG[6000 - repeat : 9000]
    replies = [
        AssistantMessage(content=(TextPart(text=first),), finish_reason="length"),
        AssistantMessage(content=(TextPart(text=again),), finish_reason="stop"),
    ]
    events = _events(Agent(FunctionModel(lambda m, r: replies.pop(0)), stream=stream), "list the points")
    result = events[-1].result  # type: ignore[attr-defined]
    assert (result.status, result.output) == ("completed", _LONG[:9000])
    assert _shown(events) == (_LONG[:9000] if stream else "")


def test_the_seam_is_found_and_streamed_the_same_however_long_the_repeat() -> None:
    rng = random.Random(16)
    for _ in range(200):
        cut_at = rng.randint(0, 9000)
        before = _LONG[:cut_at]
        after = _LONG[rng.randint(max(0, cut_at - 8000), cut_at + 50) : rng.randint(cut_at, 12000)]
        merged, new = merge_seam(before, after)
        cont = Continuation(AssistantMessage(content=(TextPart(text=before),), finish_reason="length"))
        shown, i = [], 0
        while i < len(after):
            step = rng.randint(1, 60)
            shown.append(cont.feed(after[i : i + step]))
            i += step
        shown.append(cont.flush())
        assert "".join(shown) == new, (len(before), len(after))
        start = _LONG.find(after)
        if len(after) >= 100 and start + 8 <= len(before) <= start + len(after):  # an overlap: said once
            assert merged == _LONG[: start + len(after)], (len(before), start, len(after))


# -- a tool that calls sys.exit ---------------------------------------------------------------------


@pytest.mark.parametrize("beside", [False, True], ids=["alone", "in-a-batch"])
def test_a_tool_that_calls_sys_exit_fails_its_call_not_the_process(tmp_path: Path, beside: bool) -> None:
    """Before: a tool wrapping a command-line parser (argparse calls ``sys.exit(2)`` on an
    argument it does not know) ended tether's own process: ``run_sync`` raised ``SystemExit``, the
    run was left saved as ``running`` and, in a batch, the calls beside it got no result. It is now
    the call's failure, in words for the model, and the run goes on."""
    import argparse

    @tool(read_only=True)
    def grep(argv: str) -> str:
        """Run grep with these arguments."""
        parser = argparse.ArgumentParser(prog="grep", exit_on_error=False)
        parser.add_argument("--pattern", required=True)
        return parser.parse_args(argv.split()).pattern

    @tool(read_only=True)
    def count() -> str:
        """Count."""
        return "3"

    def model(messages: list[Any], request: Any) -> Reply:
        if any(isinstance(m, ToolMessage) for m in messages):
            return Reply(text="done")
        calls = (("g1", "grep", {"argv": "--regexp x"}),) + ((("n1", "count", {}),) if beside else ())
        return Reply(calls=calls)

    state, store = RunState(), RunStore(tmp_path / "runs")
    result = run_sync(Agent(FunctionModel(model), tools=[grep, count]), "find x", state=state, store=store)
    assert (result.status, result.output) == ("completed", "done")
    results = {m.call_id: m for m in store.load(state.run_id).messages if isinstance(m, ToolMessage)}
    assert results["g1"].status == "error" and "sys.exit(2)" in results["g1"].text
    assert list(results) == (["g1", "n1"] if beside else ["g1"])


# -- a tool that raises CancelledError on its own -----------------------------------------------------


@pytest.mark.parametrize("beside", [False, True], ids=["alone", "in-a-batch"])
def test_a_tool_whose_awaited_task_was_cancelled_fails_its_call_not_the_run(tmp_path: Path, beside: bool) -> None:
    """Before: a tool that awaited a task or future something else cancelled (a library's inner
    task) raised ``CancelledError``, and the run ended as if Stop had been pressed, with nothing
    pressed: ``run_sync`` raised ``CancelledError``, the run was saved ``interrupted`` and, in a
    batch, the call beside it got no result. It is now the call's failure, and the run goes on;
    Stop still leaves a running call pending (``test_parallel``, ``test_every_exit``)."""

    @tool(read_only=True)
    async def fetch(url: str) -> str:
        """Fetch a page."""
        inner = asyncio.get_running_loop().create_future()
        asyncio.get_running_loop().call_soon(inner.cancel)
        return str(await inner)

    @tool(read_only=True)
    async def count() -> str:
        """Count."""
        await asyncio.sleep(0.05)
        return "3"

    def model(messages: list[Any], request: Any) -> Reply:
        if any(isinstance(m, ToolMessage) for m in messages):
            return Reply(text="done")
        return Reply(calls=(("f1", "fetch", {"url": "x"}),) + ((("n1", "count", {}),) if beside else ()))

    state, store = RunState(), RunStore(tmp_path / "runs")
    result = run_sync(Agent(FunctionModel(model), tools=[fetch, count]), "fetch", state=state, store=store)
    assert (result.status, result.output) == ("completed", "done")
    results = {m.call_id: m for m in store.load(state.run_id).messages if isinstance(m, ToolMessage)}
    assert results["f1"].status == "error" and "CancelledError" in results["f1"].text
    assert [(k, m.status) for k, m in results.items()] == [("f1", "error")] + ([("n1", "ok")] if beside else [])


# -- kill -9 while a finished call of a batch waits for the one before it ---------------------------

# A run whose reply asks for two posts at once (side effects, parallel=True). Post 1 is slow; post 2
# finishes first. In the first process, post 1 kills the process once post 2 has finished and the
# run was saved after it (or, when no save comes, a few seconds on). Every post appends a line to
# effects.log, so the test counts what took effect across processes.
_CHILD = """
import asyncio, json, os, signal, sys, time
from pathlib import Path
from tether import Agent, RunState, RunStore, run_stream, tool
from tether.harness.state import approve, reject
from tether.providers.scripted import Reply, ScriptedModel

home, run_id, mode = sys.argv[1:4]
saves, ended = [0], {}

class CountingStore(RunStore):
    def save(self, state, **kw):
        super().save(state, **kw)
        saves[0] += 1

def effect(line):
    fd = os.open(Path(home) / "effects.log", os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    os.write(fd, (line + "\\n").encode())
    os.fsync(fd)
    os.close(fd)

@tool(parallel=True)
async def post(n: int) -> str:
    \"\"\"Post message n.\"\"\"
    effect(f"post {n}")
    if n == 1 and mode == "first":
        deadline = time.monotonic() + 3
        while (2 not in ended or saves[0] <= ended[2]) and time.monotonic() < deadline:
            await asyncio.sleep(0.01)
        os.kill(os.getpid(), signal.SIGKILL)
    ended[n] = saves[0]
    return f"posted {n}"

def scenario(t, tools):
    return Reply(calls=(("c1", "post", {"n": 1}), ("c2", "post", {"n": 2}))) if t == 0 else Reply(text="done")

async def main():
    store = CountingStore(Path(home) / "runs")
    if store.exists(run_id):
        state, prompt = store.load(run_id), None
        if mode == "reject":
            reject(state, reason="post 1 went out")
        elif mode == "approve":
            approve(state)
    else:
        state, prompt = RunState(run_id=run_id), "post two"
    async for event in run_stream(Agent(ScriptedModel(scenario), tools=[post]), prompt, state=state, store=store):
        if event.type == "tool_result":
            print("result", event.call_id)
        if event.type == "done":
            print(event.result.model_dump_json())

asyncio.run(main())
"""


def _child(script: Path, home: Path, mode: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(script), str(home), "run_b", mode], capture_output=True, text=True, timeout=60
    )


@pytest.mark.parametrize("decision", ["reject", "approve"])
def test_a_call_that_finished_before_a_kill_mid_batch_is_not_asked_about_nor_run_again(
    tmp_path: Path, decision: str
) -> None:
    """Before: in a batch of two posts run at once, the second finished while the first still ran;
    its result waited in memory for the first one's. A kill -9 then, and the resumed run stopped
    for a person about both ("outcome unknown"), though the second had finished and said so: the
    person had to guess, and an approval sent it again. Its result is now saved as it lands (the
    transcript still has it after the first's): the resume asks about the first call alone, and
    the second's result is the one it returned, its post made once."""
    script = tmp_path / "child.py"
    script.write_text(_CHILD)
    home = tmp_path / "home"
    home.mkdir()
    assert _child(script, home, "first").returncode == -signal.SIGKILL
    effects = home / "effects.log"
    assert effects.read_text().splitlines() == ["post 1", "post 2"]

    asked = _child(script, home, "resume")
    result = json.loads(asked.stdout.splitlines()[-1])
    assert result["status"] == "interrupted", asked.stderr
    waiting = result["interruption"]
    assert (waiting["type"], waiting["call_id"], waiting["together"]) == ("outcome_unknown", "c1", [])
    assert "result c2" not in asked.stdout  # it waits behind c1, in call order

    done = _child(script, home, decision)
    assert json.loads(done.stdout.splitlines()[-1])["status"] == "completed", done.stderr
    state = RunStore(home / "runs").load("run_b")
    results = [m for m in state.messages if isinstance(m, ToolMessage)]
    assert [m.call_id for m in results] == ["c1", "c2"]
    assert results[1].text == "posted 2" and results[1].status == "ok"
    assert not state.intents
    posts = effects.read_text().splitlines()
    assert posts.count("post 2") == 1
    assert posts.count("post 1") == (2 if decision == "approve" else 1)


def test_results_waiting_behind_a_slow_call_are_saved_as_they_land_up_to_a_bound(tmp_path: Path) -> None:
    """The results that wait with their intents are written again at every save of the batch (the
    run's header carries them): they are kept there as they land, up to ``_KEPT_MAX`` at once;
    past that a result waits in memory as before, so a batch of large results behind one slow call
    does not make every save write them all."""
    size, others = 10_000, 40
    done: list[int] = []
    seen: dict[str, Any] = {}
    state = RunState(run_id="run_k")

    @tool(parallel=True)
    async def post(n: int) -> str:
        """Post message n."""
        if n:
            done.append(n)
            return f"posted {n} " + "x" * size
        for _ in range(300):  # until every other call landed and the run saved what it keeps of them
            await asyncio.sleep(0.01)
            header = read_header(tmp_path / "runs" / "run_k") or {}
            landed = {k: v["landed"] for k, v in header.get("intents", {}).items() if v.get("landed")}
            if len(done) == others and landed and landed == seen.get("landed"):
                break
            seen["landed"] = landed
        return "posted 0"

    def model(messages: list[Any], request: Any) -> Reply:
        if any(isinstance(m, ToolMessage) for m in messages):
            return Reply(text="done")
        return Reply(calls=tuple((f"c{n}", "post", {"n": n}) for n in range(others + 1)))

    agent = Agent(FunctionModel(model), tools=[post], max_parallel_tools=others + 1)
    result = run_sync(agent, "post", state=state, store=RunStore(tmp_path / "runs"))
    assert result.status == "completed"
    kept = seen["landed"]
    assert 0 < len(kept) < others  # some wait on disk, not all: the bound held
    assert sum(len(json.dumps(v, separators=(",", ":"))) for v in kept.values()) <= _KEPT_MAX * 1.1
    assert all(v["content"][0]["text"].startswith("posted ") for v in kept.values())
    results = [m for m in state.messages if isinstance(m, ToolMessage)]
    assert [m.call_id for m in results] == [f"c{n}" for n in range(others + 1)] and not state.intents


def test_a_kept_result_is_taken_only_for_its_own_call() -> None:
    """A result kept with an intent is recorded for that call only: one that names another call
    (an edited header) is not put in as this call's result, which would leave a result without
    its call (law 1); the call reads as of unknown outcome, as it would without it."""
    from tether.harness.state import Intent

    @tool(parallel=True)
    async def post(n: int) -> str:
        """Post message n."""
        return f"posted {n}"

    state = RunState(run_id="run_e")
    calls = (ToolCallPart(id="c1", name="post", arguments='{"n": 1}'),)
    stray = ToolMessage(call_id="zz", name="post", content=(TextPart(text="posted 9"),))
    state.messages += [AssistantMessage(content=calls, finish_reason="tool_calls")]
    state.intents["c1"] = Intent(key="run_e:c1", landed=stray)
    result = run_sync(Agent(FunctionModel(lambda m, r: Reply(text="done")), tools=[post]), state=state)
    assert (result.status, result.interruption.type) == ("interrupted", "outcome_unknown")  # type: ignore[union-attr]
    assert not [m for m in state.messages if isinstance(m, ToolMessage)]


def test_a_result_kept_with_its_intent_is_saved_in_postgres_too(pg_url: str) -> None:
    """The result a call of a batch finished with while the call before it still ran is in the
    run's saved state there too (a worker killed then resumes on another machine from it)."""
    from tether.postgres.db import database
    from tether.postgres.runs import PgRunStore

    reader = PgRunStore(database(pg_url))
    seen: list[Any] = []

    @tool(parallel=True)
    async def post(n: int) -> str:
        """Post message n."""
        if n == 2:
            return "posted 2"
        for _ in range(300):  # until the saved run holds post 2's result
            await asyncio.sleep(0.01)
            intent = reader.load("run_p").intents.get("c2") if reader.exists("run_p") else None
            if intent is not None and intent.landed is not None:
                seen.append(intent.landed)
                break
        return "posted 1"

    def model(messages: list[Any], request: Any) -> Reply:
        if any(isinstance(m, ToolMessage) for m in messages):
            return Reply(text="done")
        return Reply(calls=(("c1", "post", {"n": 1}), ("c2", "post", {"n": 2})))

    state = RunState(run_id="run_p")
    store = PgRunStore(database(pg_url))
    result = run_sync(Agent(FunctionModel(model), tools=[post]), "post", state=state, store=store)
    assert result.status == "completed"
    assert [(m.call_id, m.status, m.text) for m in seen] == [("c2", "ok", "posted 2")]
    assert [m.call_id for m in store.load("run_p").messages if isinstance(m, ToolMessage)] == ["c1", "c2"]


def test_a_tool_that_returns_an_exception_instead_of_raising_it_fails_its_call() -> None:
    """A tool that returns an exception (here tether's own ``RunCancelled``) rather than raising
    it fails its call, in words, like any exception: it neither stops the run nor fails it."""
    from tether.errors import RunCancelled

    class Ask:
        name, description, input_schema = "ask", "Ask.", {"type": "object"}
        read_only, needs_approval = True, False

        async def execute(self, args: dict[str, Any], ctx: Any) -> Any:
            return RunCancelled("a question")

    def model(messages: list[Any], request: Any) -> Reply:
        return (
            Reply(text="done")
            if any(isinstance(m, ToolMessage) for m in messages)
            else Reply(calls=(("a1", "ask", {}),))
        )

    state = RunState()
    result = run_sync(Agent(FunctionModel(model), tools=[Ask()]), "ask", state=state)
    assert (result.status, result.output) == ("completed", "done")
    (answer,) = [m for m in state.messages if isinstance(m, ToolMessage)]
    assert answer.status == "error" and "a question" in answer.text
