"""``tether serve`` attacked from outside (round sixteen): a server killed mid-run and started again,
long sessions read while other requests wait, and runs that never began. Each test failed before
its fix."""

from __future__ import annotations

import json
import shutil
import signal
import socket
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.server.conftest import EXAMPLE_WORKSPACE, read_events, wait_until
from tests.server.test_api import _waiting_run, finish, send, start_session
from tests.server.test_restart import Process

ASK = "Which file mentions a timeout?"


def _killed_before_its_first_save(tmp_path: Path) -> tuple[Path, str, str]:
    """A ``tether serve`` killed (-9) while a message's run waited in its extension's start (the
    "gated" agent), before the run's first save: the server's home, the session and the run."""
    home, workspace = tmp_path / "home", tmp_path / "killed"
    shutil.copytree(EXAMPLE_WORKSPACE, workspace)
    first = Process(home, workspace)
    with first.client() as c:
        sid = c.post("/v1/sessions", json={"agent": "gated"}).json()["session_id"]
        run_id = c.post(f"/v1/sessions/{sid}/messages", json={"text": ASK, "message_id": "m-first"}).json()["run_id"]
        wait_until(lambda: (workspace / "gate-reached").exists(), what="the run at its extension's start")
    assert first.stop(signal.SIGKILL) == -signal.SIGKILL
    return home, sid, run_id


def test_a_run_that_never_began_is_not_begun_by_a_resume_after_its_session_went_on(served: Any, tmp_path: Path) -> None:
    """A run the kill cut before it began, its session gone on since (another message sent and
    answered after the restart): its Resume began it then, and its question was answered after the
    later exchange (the conversation read "List the files", its answer, then the older question),
    while the session listed it first. A message sent again with its message_id is not begun in
    that case (round fifteen); a resume is not either now: 409, nothing run, and the run's view no
    longer offers a Resume that would be refused."""
    home, sid, cut = _killed_before_its_first_save(tmp_path)
    second = served(home=home)  # started again where the killed one stopped
    (tmp_path / "workspace0" / "open-gate").write_text("go")
    with second.client() as c:
        later = c.post(f"/v1/sessions/{sid}/messages", json={"text": "List the files"}).json()["run_id"]
        assert read_events(c, f"/v1/runs/{later}/events")[-1]["result"]["status"] == "completed"
        view = c.get(f"/v1/runs/{cut}").json()
        assert view["resumable"] is False and "another message" in view["reason"], view
        r = c.post(f"/v1/runs/{cut}/resume")
        assert r.status_code == 409, r.text
        assert "went on" in r.json()["error"]["message"] and "new message" in r.json()["error"]["message"]
        assert c.get(f"/v1/runs/{cut}/transcript").json()["messages"] == []  # it never ran
        assert c.get(f"/v1/runs/{cut}").json()["live"] is False
        said = [m for m in c.get(f"/v1/runs/{later}/transcript").json()["messages"] if m["role"] == "user"]
        assert len(said) == 1


def _answered_meanwhile(
    server: Any, monkeypatch: pytest.MonkeyPatch, holder: Any, request: Callable[[httpx.Client], Any]
) -> Any:
    """``request`` made while ``holder.load`` (a read of a run's files: a store's, or the class
    EventLog's) is held until another client has been answered: read on the server's event loop,
    that other request could not be answered at all. What ``request`` returned."""
    original = holder.load
    reading, release = threading.Event(), threading.Event()

    def held(*args: Any, **kwargs: Any) -> Any:
        reading.set()
        release.wait(60)  # a long session's files, being read
        return original(*args, **kwargs)

    if isinstance(holder, type):
        monkeypatch.setattr(holder, "load", classmethod(lambda cls, *args, **kwargs: held(*args, **kwargs)))
    else:
        monkeypatch.setattr(holder, "load", held)
    answer: list[Any] = []

    def ask() -> None:
        with server.client() as c:
            answer.append(request(c))

    asking = threading.Thread(target=ask)
    asking.start()
    try:
        assert reading.wait(30), "the files were never read"
        with httpx.Client(base_url=server.url, timeout=10) as other:
            assert other.get("/healthz").status_code == 200  # answered while the files are read
    finally:
        release.set()
        asking.join(60)
    assert answer, "the request got no answer"
    return answer[0]


@pytest.mark.parametrize("read", ["state", "events"])
def test_a_decision_reads_the_runs_files_while_the_server_answers_others(
    served: Any, monkeypatch: pytest.MonkeyPatch, read: str
) -> None:
    """A decision (and a resume) read the waiting run's saved state, which holds the session's
    whole conversation, and its whole event log, on the event loop that answers every request: a
    long session's run held every other request and stream of the server meanwhile. Both are read
    off the loop now."""
    from tether.server import runs

    s = served()
    with s.client() as c:
        run_id, events, run = _waiting_run(c)
        w = run["waiting"]
        body = {"call_id": w["call_id"], "args_hash": w["args_hash"], "approve": False, "reason": "keep it"}
        holder = s.app.state.core.manager.runs if read == "state" else runs.EventLog
        decide = lambda other: other.post(f"/v1/runs/{run_id}/decision", json=body)  # noqa: E731
        r = _answered_meanwhile(s, monkeypatch, holder, decide)
        assert r.status_code == 202, r.text
        more = read_events(c, f"/v1/runs/{run_id}/events", last_event_id=events[-1]["id"])
        assert more[0]["id"] == events[-1]["id"] + 1 and more[-1]["event"] == "done"
        assert more[-1]["result"]["status"] == "completed"


@pytest.mark.parametrize("route", ["session", "runs", "run", "transcript", "sessions", "feedback"])
def test_reading_a_sessions_runs_holds_no_other_request(
    served: Any, monkeypatch: pytest.MonkeyPatch, route: str
) -> None:
    """A session's view read each turn's saved run state on the event loop; each holds the
    conversation up to it, so a session of 200 turns held every other request of the server about a
    second each time the page opened it (and 500 turns, several), growing with the square of its
    length; so did the list of runs, a run's view and its transcript. They are read off the loop."""
    s = served()
    with s.client() as c:
        sid = start_session(c, "plan")
        run_id = send(c, sid, ASK)["run_id"]
        assert finish(c, run_id)[-1]["result"]["status"] == "completed"
        path = {
            "session": f"/v1/sessions/{sid}",
            "runs": "/v1/runs",
            "run": f"/v1/runs/{run_id}",
            "transcript": f"/v1/runs/{run_id}/transcript",
            "sessions": "/v1/sessions",  # a user's sessions and feedback: all read, then cut to the limit
            "feedback": "/v1/feedback",
        }[route]
        if route in ("sessions", "feedback"):
            assert c.post(f"/v1/messages/{send(c, sid, 'thanks')['message_id']}/feedback", json={"score": "up"})
            store = _Listing(s.app.state.core.store, route)
        elif route in ("session", "runs", "run"):  # a run's view reads its header (whole: when it waits on a call)
            store = _HeaderReads()
        else:
            store = s.app.state.core.manager.runs
        r = _answered_meanwhile(s, monkeypatch, store, lambda other: other.get(path))
        assert r.status_code == 200, r.text
        shown = {"transcript": "timed out", "sessions": sid, "feedback": '"up"'}.get(route, "completed")
        assert shown in r.text and (run_id in r.text or route in ("sessions", "feedback")), r.text


class _Listing:
    """A server store whose ``sessions`` or ``feedback`` is its ``load`` (what
    :func:`_answered_meanwhile` holds)."""

    def __init__(self, store: Any, what: str) -> None:
        self.store, self.what = store, what

    @property
    def load(self) -> Any:
        return getattr(self.store, self.what)

    @load.setter
    def load(self, held: Any) -> None:
        setattr(self.store, self.what, held)


class _HeaderReads:
    """The server's read of a run's saved header (what a run's view, and a session's view of each
    of its runs, reads) as a ``load`` (what :func:`_answered_meanwhile` holds)."""

    @property
    def load(self) -> Any:
        from tether.server import runs

        return runs.read_header

    @load.setter
    def load(self, held: Any) -> None:
        from tether.server import runs

        runs.read_header = held


def test_a_run_cut_by_a_kill_ends_its_stream_with_a_done_that_says_so_after_the_restart(
    served: Any, tmp_path: Path
) -> None:
    """``tether serve`` killed (-9) mid-run, then started again: the run's stream ended after its
    last event with no ``done``, however often it was read, so a browser's EventSource (which
    reconnects whenever a stream ends) asked again every second for ever, and a client could not
    tell the run had stopped from a dropped connection. At its start the server now ends such a run's
    events with a ``done``: ``interrupted``, saying the server stopped and to resume it. A resume goes
    on with ids after it, and a part cut by a second kill ends the same way."""
    home, workspace = tmp_path / "home", tmp_path / "killed"
    shutil.copytree(EXAMPLE_WORKSPACE, workspace)
    first = Process(home, workspace)
    with first.client() as c:
        sid = c.post("/v1/sessions", json={"agent": "slow"}).json()["session_id"]
        run_id = c.post(f"/v1/sessions/{sid}/messages", json={"text": "scan"}).json()["run_id"]
        seen = read_events(c, f"/v1/runs/{run_id}/events", until=lambda e: e["event"] == "tool_start")
    assert first.stop(signal.SIGKILL) == -signal.SIGKILL

    def cut_end(c: httpx.Client, after: int) -> dict[str, Any]:
        """The events after ``after``: what the run's part streamed, then its one ``done``."""
        ended = read_events(c, f"/v1/runs/{run_id}/events", last_event_id=after, timeout=10)
        assert [e["event"] for e in ended].count("done") == 1 and ended[-1]["event"] == "done", ended
        assert [e["id"] for e in ended] == list(range(after + 1, after + 1 + len(ended)))
        result = ended[-1]["result"]
        assert result["status"] == "interrupted" and "resume it" in result["reason"], result
        return ended[-1]

    second = Process(home, workspace)
    try:
        with second.client() as c:
            done = cut_end(c, seen[-1]["id"])
            assert done["id"] == seen[-1]["id"] + 1
            assert read_events(c, f"/v1/runs/{run_id}/events", timeout=10)[:-1] == seen  # and from 0
            view = c.get(f"/v1/runs/{run_id}").json()
            assert view["live"] is False and view["resumable"] is True
            assert c.post(f"/v1/runs/{run_id}/resume").status_code == 202
            wait_until(lambda: c.get(f"/v1/runs/{run_id}").json()["live"], what="the resumed run")
    finally:
        assert second.stop(signal.SIGKILL) == -signal.SIGKILL  # cut again, in its resumed part
    third = served(home=home)
    (tmp_path / "workspace0" / "release").write_text("go")
    with third.client() as c:
        again = cut_end(c, done["id"])
        third.app.state.core.manager.prune_events(-3600)  # its log cut to its last id, as after a week
        replayed = read_events(c, f"/v1/runs/{run_id}/events", timeout=10)  # from 0: made from its state
        assert replayed[-1]["event"] == "done" and replayed[-1]["result"]["reason"] == again["result"]["reason"]
        assert c.post(f"/v1/runs/{run_id}/resume").status_code == 202
        rest = read_events(c, f"/v1/runs/{run_id}/events", last_event_id=again["id"])
        assert rest[0]["id"] == again["id"] + 1
        assert rest[-1]["result"]["status"] == "completed" and "scan complete" in rest[-1]["result"]["output"]
        assert not (home / "serve" / "starts" / f"{run_id}.json").exists()


def _rss_mb() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise AssertionError("no VmRSS in /proc/self/status")


def test_clients_that_read_a_live_runs_long_log_slowly_do_not_each_hold_all_of_it(served: Any) -> None:
    """A live run's stream opened from 0 (a page reloaded) wrote every event the run had so far in
    one write: its whole log as one string, which the server kept until a slow client had taken it.
    Four clients of a live run with a 33 MB log that read nothing held 331 MB of the server's
    memory (and one address may hold 64 connections). The events go a piece of about 1 MB at a
    time now, the next once the client took the last, as a finished run's do (round fifteen)."""
    server = served()  # in this process: its memory is this process's
    with server.client() as c:
        sid = c.post("/v1/sessions", json={"agent": "slow"}).json()["session_id"]
        run_id = c.post(f"/v1/sessions/{sid}/messages", json={"text": "scan"}).json()["run_id"]
        read_events(c, f"/v1/runs/{run_id}/events", until=lambda e: e["event"] == "tool_start")
        assert c.post(f"/v1/runs/{run_id}/cancel").status_code == 202
        wait_until(lambda: not c.get(f"/v1/runs/{run_id}").json()["live"], what="the stop")
        path = server.home / "serve" / "events" / f"{run_id}.log"
        kept = path.read_text().splitlines()
        delta = json.dumps({"type": "text_delta", "run_id": run_id, "text": "word " * 16})
        with path.open("w") as f:  # a long answer before the stop, as many deltas
            f.writelines(f"{n}\ttext_delta\t{delta}\n" for n in range(1, 200_000))
            f.writelines(f"{n}\t{line.split(chr(9), 1)[1]}\n" for n, line in enumerate(kept, 200_000))
        last = 200_000 + len(kept) - 1
        assert c.post(f"/v1/runs/{run_id}/resume").status_code == 202  # live again, in its tool
        host, port = server.url.removeprefix("http://").split(":")
        before = _rss_mb()
        slow = []
        for _ in range(4):  # clients that reload the page and then read nothing
            sock = socket.create_connection((host, int(port)))
            sock.sendall(f"GET /v1/runs/{run_id}/events HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n".encode())
            assert sock.recv(64).startswith(b"HTTP/1.1 200")
            slow.append(sock)
        assert c.get(f"/v1/runs/{run_id}").json()["live"] is True
        grown = _rss_mb() - before
        for sock in slow:
            sock.close()
        assert grown < 150, f"four streams of a live run's 33 MB log took {grown:.0f} MB"
        (server.home.parent / "workspace0" / "release").write_text("go")
        tail = read_events(c, f"/v1/runs/{run_id}/events", last_event_id=last - 1)
        assert tail[0]["id"] == last and tail[1]["id"] == last + 1
        assert tail[-1]["event"] == "done" and tail[-1]["result"]["status"] == "completed"


def test_a_start_with_the_database_away_asks_it_about_one_cut_run_not_each(tmp_path: Path) -> None:
    """The server ends the runs a kill cut as it starts, before it listens, asking the run store
    about each; on Postgres, with the database away, each ask waits for a connection (30 s): a
    server that a kill left with many cut runs would take minutes to listen. The first ask that
    finds the database away ends the pass; the next start ends the rest."""
    import psycopg

    from tests.server.test_restart import _manager
    from tether.server.events import EventLog

    manager = _manager(tmp_path)
    for run_id in ("run_a", "run_b", "run_c"):
        manager.accept(run_id, "scan")
        log = EventLog.load(manager.log_path(run_id))
        log.append("started", {"type": "started", "run_id": run_id})
        log.close()
    asked: list[str] = []

    def away(run_id: str) -> bool:
        asked.append(run_id)
        raise psycopg.OperationalError("connection refused")  # what the pool's wait ends with

    manager.runs.exists = away
    assert manager.end_cut_runs() == 0
    assert len(asked) == 1
    assert all(manager.start_path(r).exists() for r in ("run_a", "run_b", "run_c"))  # kept for the next start
    del manager.runs.exists  # the database is back
    assert manager.end_cut_runs() == 3
    for run_id in ("run_a", "run_b", "run_c"):
        last = EventLog.load(manager.log_path(run_id)).items[-1]
        assert last[1] == "done" and '"status":"interrupted"' in last[2] and "resume it to start it" in last[2]


def test_a_number_too_long_to_read_is_refused_in_words_a_client_can_use(served: Any) -> None:
    """A body with a whole number of 5,000 digits was refused with Python's words, cut short
    mid-word: "... Exceeds the limit (4300 digits) for integer string conversion: value has 5000
    digits; use sys.set_int_max_str_digits() t); send a JSON object", advice for the server's
    code that no client can follow. It now says what was too long and what to send instead."""
    s = served()
    with s.client() as c:
        sid = start_session(c, "plan")
        body = b'{"text": "a", "values": {"boxes": ' + b"9" * 5000 + b"}}"
        r = c.post(f"/v1/sessions/{sid}/messages", content=body, headers={"Content-Type": "application/json"})
        assert r.status_code == 400
        message = r.json()["error"]["message"]
        assert "sys." not in message and "4,300 digits" in message and "as a string" in message, message
        assert c.get(f"/v1/sessions/{sid}").json()["turns"] == []  # nothing was sent


def test_a_run_live_in_another_process_is_not_ended_by_a_server_that_starts(tmp_path: Path) -> None:
    """A server that starts ends the runs a kill left live (their start records are still there).
    A run another process holds right now (a second server on the same home, a run process still
    stopping) is not cut: a done added to its log would take the id its own next event gets, and
    a replay would then skip that event. It is ended at a later start, once nothing holds it."""
    from tests.server.test_restart import _manager
    from tether.harness.state import RunState
    from tether.harness.store import RunStore
    from tether.server.events import EventLog

    manager = _manager(tmp_path)
    manager.accept("run_held", "scan")
    manager.runs.save(RunState(run_id="run_held"))  # saved running, as a live run is
    log = EventLog.load(manager.log_path("run_held"))
    log.append("started", {"type": "started", "run_id": "run_held"})
    log.close()
    with RunStore(tmp_path / "runs").lock("run_held"):  # held by another process's store
        assert manager.end_cut_runs() == 0
        assert [kind for _, kind, _ in EventLog.load(manager.log_path("run_held")).items] == ["started"]
    assert manager.end_cut_runs() == 1
    last = EventLog.load(manager.log_path("run_held")).items[-1]
    assert last[1] == "done" and "the server stopped while this run was running" in last[2]
