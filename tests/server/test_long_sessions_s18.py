"""``tether serve`` with long sessions and long runs (session eighteen): a session's view read every
turn's whole run (each holds the conversation up to it), and a run's transcript and trace came as
one JSON body each, with no way to read them a part at a time. Each test failed before its fix."""

from __future__ import annotations

import json
import time
import tracemalloc
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tether.harness.state import RunState
from tether.harness.store import RunStore
from tether.messages import AssistantMessage, TextPart, ToolCallPart, ToolMessage, UserMessage
from tether.server.store import SessionRecord, TurnRecord
from tether.status import CancelledInterruption
from tether.tracing import read_trace


@pytest.fixture(params=["files", "postgres"])
def server(request: pytest.FixtureRequest, served: Any) -> Any:
    """A server whose runs are in files, or in Postgres."""
    if request.param == "files":
        return served()
    return served(config=f'database_url = "{request.getfixturevalue("pg_url")}"\n')


def _session(s: Any, turns: int) -> tuple[str, list[str]]:
    """A session of ``turns`` finished runs as a served one leaves them (the k-th run's transcript
    holds the conversation up to it): its id and its runs' ids. The last run was stopped (resumable)."""
    core = s.app.state.core
    sid = f"s_long{turns}"
    now = time.time()
    core.store.add_session(SessionRecord(sid, "local", "plan", "long", now, now))
    messages: list[Any] = []
    runs = []
    for k in range(turns):
        run_id = f"run_{sid}_{k}"
        messages += [UserMessage.text(f"question {k}"), AssistantMessage(content=(TextPart(text=f"answer {k}"),))]
        state = RunState(run_id=run_id, session_id=sid, agent="plan", messages=list(messages), status="completed")
        state.history_turns = k  # the turns before it came with the session's history
        if k == turns - 1:
            state.status, state.interruption = "interrupted", CancelledInterruption(reason="stopped by a person")
        core.runs.save(state)
        core.store.add_turn(TurnRecord(f"m_{sid}_{k}", run_id, sid, "local", "plan", f"t{k}", f"question {k}", now + k))
        runs.append(run_id)
    return sid, runs


def _count_messages_read(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Every message a run store parses (files or Postgres) adds one to the returned counter."""
    import tether.harness.store as files
    import tether.postgres.runs as postgres

    count = [0]
    for module in (files, postgres):
        original = module.load_message

        def counted(line: Any, original: Any = original) -> Any:
            count[0] += 1
            return original(line)

        monkeypatch.setattr(module, "load_message", counted)
    return count


def test_a_sessions_view_reads_no_more_for_each_turn_as_the_session_grows(
    server: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Was: the view of a session read each turn's run whole, and the k-th run holds the
    conversation up to it (2k messages), so a session of n turns parsed about n² messages: 800 turns
    took 3.2 s per view, 4 times 400 turns' (the page asks for it each time a session is opened).
    Each turn's status now comes from its run's saved header, and says what the run's own view says."""
    parsed = _count_messages_read(monkeypatch)
    read: dict[int, int] = {}
    with server.client() as c:
        for n in (8, 16):
            sid, runs = _session(server, n)
            before = parsed[0]
            view = c.get(f"/v1/sessions/{sid}").json()
            read[n] = parsed[0] - before
            assert [t["run_id"] for t in view["turns"]] == runs
            for turn in view["turns"]:
                run = c.get(f"/v1/runs/{turn['run_id']}").json()
                assert (turn["status"], turn["resumable"], turn["live"]) == (run["status"], run["resumable"], False)
            assert [t["status"] for t in view["turns"]] == ["completed"] * (n - 1) + ["interrupted"]
            assert view["turns"][-1]["resumable"] is True
    # Twice the turns, at most twice the work (before: 72 then 272 messages parsed).
    assert read[16] <= 2 * read[8] + 8, read


def test_opening_a_long_session_reads_no_more_for_each_turn_as_it_grows(
    server: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Was: the page opens a session with its view, then asks each turn's run (GET /v1/runs/ID)
    once its events are replayed; each run's view loaded the run whole (the conversation up to it),
    so opening a session of n turns parsed about n² messages however its own view was read. A run's
    view now reads its header (its turns as saved) and loads the run only when it waits on a call."""
    parsed = _count_messages_read(monkeypatch)
    read: dict[int, int] = {}
    with server.client() as c:
        for n in (8, 16):
            sid, runs = _session(server, n)
            before = parsed[0]
            views = [c.get(f"/v1/runs/{run_id}").json() for run_id in runs]
            listed = c.get("/v1/runs", params={"limit": n}).json()["runs"]
            read[n] = parsed[0] - before
            assert [v["turns"] for v in views] == [1] * n  # each run's own, not its history's
            assert [v["status"] for v in views] == ["completed"] * (n - 1) + ["interrupted"]
            assert views[-1]["resumable"] is True and views[-1]["waiting"]["type"] == "cancelled"
            assert len(listed) == n and {r["turns"] for r in listed} == {1}
        if isinstance(server.app.state.core.runs, RunStore):
            _cut_short(server, runs[0])
            for shown in (c.get(f"/v1/runs/{runs[0]}").json(), c.get(f"/v1/sessions/{sid}").json()["turns"][0]):
                assert (shown["status"], shown["resumable"]) == ("completed", False), shown
    assert read[16] <= 2 * read[8] + 8, read  # before: 144 then 544


def _cut_short(s: Any, run_id: str) -> None:
    """The run stopped by a person in a commit saved without fsync, whose transcript then lost its
    last bytes (a power cut): the run is its commit before, completed. Its header alone says
    interrupted and resumable; a view must not offer what a resume would not find."""
    runs = RunStore(s.app.state.core.runs.root, fsync=False)
    state = runs.load(run_id)
    state.messages.append(UserMessage.text("one more thing"))
    state.status, state.interruption = "interrupted", CancelledInterruption(reason="stopped by a person")
    runs.save(state, durable=False)
    runs.close()
    transcript = next((s.home / "runs" / run_id).glob("messages*.jsonl"))
    with open(transcript, "r+b") as f:
        f.truncate(transcript.stat().st_size - 5)


def _long_run(s: Any, size: int) -> str:
    """A finished run of ``size`` messages: a reply with a call, then its result, in turn; the call in
    message 3 had arguments a guardrail refused (its result says so), read on a page of its own."""
    core = s.app.state.core
    run_id, sid = f"run_long{size}", f"s_run{size}"
    now = time.time()
    core.store.add_session(SessionRecord(sid, "local", "plan", "long run", now, now))
    messages: list[Any] = [UserMessage.text("look through the archive")]
    for i in range(1, size):
        if i % 2:
            call = ToolCallPart(id=f"call_{i}", name="read_file", arguments=json.dumps({"path": f"{i}.md"}))
            messages.append(AssistantMessage(content=(TextPart(text=f"reading {i}"), call)))
        else:
            withheld = "it held the system prompt" if i == 4 else None
            text = (TextPart(text=f"line {i}"),)
            messages.append(
                ToolMessage(call_id=f"call_{i - 1}", name="read_file", content=text, args_withheld=withheld)
            )
    core.runs.save(RunState(run_id=run_id, session_id=sid, agent="plan", messages=messages, status="completed"))
    core.store.add_turn(TurnRecord(f"m_{run_id}", run_id, sid, "local", "plan", "t", "look", now))
    return run_id


def _pages(c: httpx.Client, path: str, key: str, limit: int, after: int = 0) -> Iterator[dict[str, Any]]:
    while after is not None:
        r = c.get(path, params={"after": after, "limit": limit})
        assert r.status_code == 200, r.text
        page = r.json()
        assert len(page[key]) <= limit
        yield page
        after = page["next"]


def test_a_transcript_read_a_page_at_a_time_gives_every_message_once_in_order(
    server: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Was: GET /v1/runs/{id}/transcript was one JSON body of every message (18 MiB for 40,000
    messages, held as dicts and then as bytes at once: 185 MiB for that request), and ``after`` and
    ``limit`` were ignored. Pages now hold at most ``limit`` messages with ``next`` for the rest; put
    together they are the whole transcript, a call's withheld arguments hidden on its page too
    (its result, which says so, is on the next), and the run is read once for all of them."""
    run_id = _long_run(server, 23)
    path = f"/v1/runs/{run_id}/transcript"
    with server.client() as c:
        whole = c.get(path).json()
        assert list(whole) == ["run_id", "messages", "next"] and whole["next"] is None
        assert len(whole["messages"]) == 23
        call = whole["messages"][3]["content"][1]
        assert call["arguments"] == "[arguments withheld: it held the system prompt]"
        assert call["withheld"] == "it held the system prompt"
        parsed = _count_messages_read(monkeypatch)
        pages = list(_pages(c, path, "messages", 4))
        assert parsed[0] == 23  # the run is loaded once for its six pages, not once a page
        assert [p["next"] for p in pages] == [4, 8, 12, 16, 20, None]
        assert [m for p in pages for m in p["messages"]] == whole["messages"]
        assert pages[0]["messages"][3]["content"][1] == call  # its result is on the second page
        rest = c.get(path, params={"after": 20}).json()  # no limit: everything after
        assert rest["messages"] == whole["messages"][20:] and rest["next"] is None


def test_a_transcript_paged_while_its_run_goes_on_shows_what_was_added(server: Any) -> None:
    """Was: no pages. The pages a client reads come from the run as last saved, never from an older
    read kept for paging: messages saved between two pages are on the next ones."""
    run_id = _long_run(server, 6)
    path = f"/v1/runs/{run_id}/transcript"
    runs = server.app.state.core.runs
    with server.client() as c:
        first = c.get(path, params={"limit": 4}).json()
        assert first["next"] == 4
        state = runs.load(run_id)
        state.messages += [UserMessage.text("and the rest?"), AssistantMessage(content=(TextPart(text="done"),))]
        runs.save(state)
        second = c.get(path, params={"after": 4, "limit": 4}).json()
        assert [m["role"] for m in second["messages"]] == ["tool", "assistant", "user", "assistant"]
        assert second["next"] is None
        assert len(c.get(path).json()["messages"]) == 8


def _trace(s: Any, run_id: str, lines: int) -> Path:
    """The run's trace: ``lines`` events, with a line that is not an object and a line torn by a
    crash in the middle, and a torn last line."""
    path = s.home / "traces" / f"{run_id}.jsonl"
    path.parent.mkdir(exist_ok=True)
    with open(path, "w") as f:
        for i in range(lines):
            if i == lines // 2:
                f.write('[1, 2]\n{"run_id": "torn\n')
            f.write(json.dumps({"runId": run_id, "type": "tool_result", "callId": f"call_{i}", "ms": i}) + "\n")
        f.write('{"run_id": "cut sho')
    return path


def test_a_trace_read_a_page_at_a_time_gives_every_line_once_in_order(served: Any) -> None:
    """Was: GET /v1/runs/{id}/trace was one JSON body of every line, ``after`` and ``limit`` ignored.
    Pages put together are the whole trace, as ``tether trace`` reads it (a torn line, or one that is
    not an object, is no line on any page), and lines written between two pages are on the next."""
    s = served()
    run_id = _long_run(s, 3)
    trace = _trace(s, run_id, 17)
    path = f"/v1/runs/{run_id}/trace"
    with s.client() as c:
        whole = c.get(path).json()
        assert list(whole) == ["run_id", "lines", "next"] and whole["next"] is None
        assert whole["lines"] == read_trace(trace) and len(whole["lines"]) == 17
        pages = list(_pages(c, path, "lines", 5))
        assert [p["next"] for p in pages] == [5, 10, 15, None]
        assert [line for p in pages for line in p["lines"]] == whole["lines"]
        assert pages[0]["lines"][0]["call_id"] == "call_0"  # snake_case, as ever
        with open(trace, "a") as f:  # the torn last line, finished, and one more
            f.write('"}\n' + json.dumps({"run_id": run_id, "type": "run_stopped"}) + "\n")
        more = c.get(path, params={"after": 15, "limit": 5}).json()
        assert more["lines"] == read_trace(trace)[15:] and more["lines"][-1]["type"] == "run_stopped"
        assert more["next"] is None


@pytest.mark.parametrize("record", ["transcript", "trace"])
def test_a_bad_cursor_is_refused_with_what_to_send(served: Any, record: str) -> None:
    """Was: ``after`` and ``limit`` were ignored, whatever they held (a client whose cursor was
    wrong got every item again, as if it were right). A cursor past the end, negative or not a
    number, and a limit out of range, are a 400 that says what was wrong and what to send."""
    s = served()
    run_id = _long_run(s, 5)
    _trace(s, run_id, 5)
    path = f"/v1/runs/{run_id}/{record}"
    items = "messages" if record == "transcript" else "lines"
    with s.client() as c:
        r = c.get(path, params={"after": 6})
        assert r.status_code == 400, r.text
        message = r.json()["error"]["message"]
        assert f"after=6 is past the end of the {record} of run {run_id}, which holds 5 {items}" in message
        assert "`next`" in message
        for bad, said in (
            ({"after": -1}, "query.after"),
            ({"after": "x"}, "query.after"),
            ({"limit": 0}, "query.limit"),
        ):
            r = c.get(path, params=bad)
            assert r.status_code == 400 and said in r.json()["error"]["message"], r.text
        assert c.get(path, params={"after": 5}).json() == {"run_id": run_id, items: [], "next": None}


def test_a_long_trace_is_sent_without_holding_it_whole_twice(served: Any) -> None:
    """Was: the trace was read into a list of every line as dicts, copied again with the home
    hidden, then encoded into one body: 73 MiB for a trace file of 7 MiB. Lines are encoded one at a
    time as they are sent now: the request holds about the file and little more."""
    s = served()
    run_id = _long_run(s, 3)
    trace = _trace(s, run_id, 20_000)
    size = trace.stat().st_size
    with s.client() as c:
        c.get(f"/v1/runs/{run_id}").raise_for_status()  # the first request's own allocations, before
        tracemalloc.start()
        try:
            base = tracemalloc.get_traced_memory()[0]
            received = 0
            with c.stream("GET", f"/v1/runs/{run_id}/trace") as r:
                for chunk in r.iter_raw():  # thrown away as it comes
                    received += len(chunk)
            peak = tracemalloc.get_traced_memory()[1] - base
        finally:
            tracemalloc.stop()
    assert r.status_code == 200 and received > size // 2
    assert peak < 3 * size, (peak, size)
