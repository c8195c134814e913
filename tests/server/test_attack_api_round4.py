"""The HTTP API of ``tether serve`` attacked from outside, round 4: decisions and deletes sent while
a run is ending, hostile JSON bodies, what /openapi.json declares against what the routes answer,
and half a surrogate pair in what a model wrote. Real HTTP on loopback, real runs, real files."""

from __future__ import annotations

import os
import signal
import threading
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.server.conftest import read_events, serve_process, wait_until
from tests.server.test_attacks import events, parse_stream, statuses
from tests.server.test_openapi import check

pytest.importorskip("fastapi", reason="needs tether[serve] (the [test] extra installs it)")

# One agent: "delete" asks to delete access.log (it needs approval), anything else is echoed. Its
# extension ends slowly, as an MCP server that takes its time to exit does: each run's task ends
# (after its ``done`` event) only once the file ``let-go`` is in the workspace.
AGENTS = """
import asyncio
import os

from tether import Agent
from tether.harness.extension import Extension
from tether.providers.scripted import Reply
from tether.testing import FunctionModel
from tether.tools.files import FILE_TOOLS

WORKSPACE = os.environ["TETHER_TEST_WORKSPACE"]


class SlowToStop(Extension):
    name = "slow_to_stop"

    async def stop(self):
        for _ in range(2000):
            if os.path.exists(os.path.join(WORKSPACE, "let-go")):
                return
            await asyncio.sleep(0.01)


def reply(messages, request):
    last = max(i for i, m in enumerate(messages) if m.role == "user")
    user = "".join(getattr(p, "text", "") for p in messages[last].content)
    results = [m for m in messages[last + 1:] if m.role == "tool"]
    if results:
        return "finished: " + results[-1].text[:200]
    if user.startswith("half"):  # half of a surrogate pair, as a model's JSON escapes may carry it
        return "an emoji cut in half: \\ud83d and the rest"
    if user.startswith("cut"):  # a call whose JSON arguments carry half a pair: {"path": "a\\ud83d.log"}
        return Reply(calls=((f"c{len(messages)}", "delete_file", {"path": "a\\ud83d.log"}),))
    if user.startswith("delete"):
        return Reply(calls=((f"c{len(messages)}", "delete_file", {"path": "access.log"}),))
    if user.startswith("boom"):  # a run that fails before any reply: the session does not go on
        raise RuntimeError("the model is down")
    return "echo: " + user


agents = {"slow": Agent(FunctionModel(reply), tools=FILE_TOOLS, cwd=WORKSPACE, max_turns=10,
                        extensions=[SlowToStop()])}
"""


class Slow:
    """A served ``slow`` agent whose runs end (after their ``done``) when :meth:`let_go` is called."""

    def __init__(self, served: Any, tmp_path: Path, **kw: Any) -> None:
        module = tmp_path / "round4_agents.py"
        module.write_text(AGENTS)
        self.s = served(agents_module=module, **kw)
        self.home = Path(self.s.home)
        self.workspace = self.home.parent / self.home.name.replace("home", "workspace")
        self.let_go()  # until a test holds the runs' ends

    def client(self, **kw: Any) -> httpx.Client:
        return self.s.client(**kw)

    def hold(self) -> None:
        (self.workspace / "let-go").unlink(missing_ok=True)

    def let_go(self) -> None:
        (self.workspace / "let-go").write_text("go")


def _session(c: httpx.Client) -> str:
    r = c.post("/v1/sessions", json={"agent": "slow"})
    assert r.status_code == 201, r.text
    return str(r.json()["session_id"])


def _send(c: httpx.Client, sid: str, text: str) -> str:
    r = c.post(f"/v1/sessions/{sid}/messages", json={"text": text})
    assert r.status_code == 202, r.text
    return str(r.json()["run_id"])


def _ended(c: httpx.Client, run_id: str) -> dict[str, Any]:
    def check() -> dict[str, Any] | None:
        run = c.get(f"/v1/runs/{run_id}").json()
        return run if not run["live"] and run["status"] != "running" else None

    return dict(wait_until(check, what=f"run {run_id} to end"))


def _logged_ids(a: Slow, run_id: str) -> list[int]:
    """The event ids in the run's log file, as written."""
    lines = (a.home / "serve" / "events" / f"{run_id}.log").read_text().split("\n")
    return [int(line.split("\t", 1)[0]) for line in lines if line]


class _Waits:
    """How many requests have come to wait in the server for a live run to end."""

    def __init__(self) -> None:
        self.count = 0
        self.changed = threading.Condition()

    def arrived(self) -> None:
        with self.changed:
            self.count += 1
            self.changed.notify_all()

    def until(self, count: int) -> None:
        with self.changed:  # 30 s: a hang guard only
            assert self.changed.wait_for(lambda: self.count >= count, 30), f"{count - self.count} never came to wait"


_WAITS = _Waits()


@pytest.fixture(autouse=True)
def _waits_counted(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every wait of a request for a live run to end (``RunManager.settled``) is counted as it begins,
    on the server's loop: what the tests wait for before they let the run end."""
    from tether.server.runs import RunManager

    settled = RunManager.settled

    async def counted(self: RunManager, run_id: str) -> bool:
        if run_id in self.live:
            _WAITS.arrived()
        return await settled(self, run_id)

    monkeypatch.setattr(RunManager, "settled", counted)


def _in_flight(n: int, make: Any) -> tuple[list[Any], list[threading.Thread]]:
    """``make(i)`` from ``n`` threads, once all of them have reached the server, which holds them
    until the run ends (a sleep instead let a loaded machine's late request come after the next
    one); the list their responses land in, and the threads to join."""
    out: list[Any] = [None] * n
    threads = [threading.Thread(target=lambda i=i: out.__setitem__(i, make(i))) for i in range(n)]
    waiting = _WAITS.count
    for t in threads:
        t.start()
    _WAITS.until(waiting + n)
    return out, threads


def test_two_approvals_sent_while_another_run_of_the_session_ends_get_one_202_and_one_409(
    served: Any, tmp_path: Path
) -> None:
    """Both decisions waited for the session's other run to end, then both passed ("the session is
    free": the run it found live was their own, resumed by the first) and the run was started twice,
    two event logs writing the same ids to one file. docs/server.md: a second decision is a 409."""
    a = Slow(served, tmp_path)
    with a.client() as c:
        sid = _session(c)
        run_id = _send(c, sid, "delete the log")
        asked = _ended(c, run_id)["waiting"]
        a.hold()
        # allowed: a run waiting for a decision is not live. It fails before any reply, so the
        # session does not go on (a reply would make every decision a 409: test_session_went_on).
        other = _send(c, sid, "boom")
        read_events(c, f"/v1/runs/{other}/events", until=lambda e: e["event"] == "done")
        body = {"call_id": asked["call_id"], "args_hash": asked["args_hash"], "approve": True}
        out, threads = _in_flight(
            2, lambda i: httpx.post(f"{a.s.url}/v1/runs/{run_id}/decision", json=body, timeout=30)
        )
        a.let_go()
        for t in threads:
            t.join(30)
        assert statuses(out) == [202, 409], [r.text for r in out]
        refused = next(r for r in out if r.status_code == 409).json()["error"]["message"]
        assert run_id in refused, refused
        _ended(c, run_id)
        every = events(c, run_id)
        assert [e["id"] for e in every] == list(range(1, len(every) + 1)), [(e["id"], e["event"]) for e in every]
        assert _logged_ids(a, run_id) == [e["id"] for e in every]  # one part of the run wrote its log, once
        assert [e["event"] for e in every].count("done") == 2  # the stop for approval, and the one decision's
        assert c.get("/healthz").json()["live_runs"] == 0


def test_a_body_nested_too_deep_or_not_utf8_is_a_bad_request_that_says_why(served: Any, tmp_path: Path) -> None:
    """Under max_body_bytes, yet not parsed: the answer was {"code": "error", "message": "There was
    an error parsing the body"}, unlike every other 400, and said neither why nor what to send."""
    a = Slow(served, tmp_path)
    js = {"Content-Type": "application/json"}
    with a.client() as c:
        sid = _session(c)
        for url, body, said in (
            (f"/v1/sessions/{sid}/messages", b'{"text": ' + b"[" * 5000 + b"]" * 5000 + b"}", "nests JSON too deeply"),
            ("/v1/sessions", b'{"title": ' + b"[" * 100_000 + b"]" * 100_000 + b"}", "nests JSON too deeply"),
            (f"/v1/sessions/{sid}/messages", b'{"text": "caf\xe9"}', "not UTF-8"),
        ):
            r = c.post(url, content=body, headers=js)
            assert r.status_code == 400, r.text
            assert r.json()["error"]["code"] == "bad_request" and said in r.json()["error"]["message"], r.text
        assert c.get(f"/v1/sessions/{sid}").json()["turns"] == []


def test_the_errors_routes_answer_when_a_host_or_a_file_is_wrong_are_declared_in_openapi(
    served: Any, tmp_path: Path
) -> None:
    """A client generated from /openapi.json meets these too: a Host that is not the server's
    (421, on every route), a run whose saved files cannot be read (its transcript: 409), and a
    connections key other users can read (500 on the connection routes)."""
    a = Slow(
        served,
        tmp_path,
        tokens=["alice"],
        config='[serve]\nallowed_hosts = ["api.example"]\n[mcp.crm]\nurl = "http://127.0.0.1:9/mcp"\nauth = "oauth"\n',
    )
    alice = {"Authorization": f"Bearer {a.s.tokens['alice']}", "Host": "api.example"}
    with httpx.Client(base_url=a.s.url, headers=alice, timeout=30) as c:
        doc = c.get("/openapi.json").json()
        seen = [c.get("/v1/sessions", headers={"Host": "elsewhere.example"})]
        run_id = _send(c, _session(c), "hello")
        _ended(c, run_id)
        transcript = next((a.home / "runs" / run_id).glob("messages*.jsonl"))
        transcript.unlink()
        transcript.mkdir()  # something else put in its place
        seen.append(c.get(f"/v1/runs/{run_id}/transcript"))
        key = a.home / "auth" / "connections.key"
        key.chmod(0o644)
        seen += [c.get("/v1/connections"), c.delete("/v1/connections/crm"), c.post("/v1/connections/crm")]
        assert [r.status_code for r in seen] == [421, 409, 500, 500, 500], [r.text for r in seen]
        for r in seen:
            check(doc, r)


def test_a_session_deleted_the_moment_its_answer_is_done_is_deleted(served: Any, tmp_path: Path) -> None:
    """A client may act the moment it reads ``done`` (a message, a decision and a resume wait for
    the run's last saves); a delete did not, and said the session was still answering."""
    a = Slow(served, tmp_path)
    with a.client() as c:
        sid = _session(c)
        a.hold()
        run_id = _send(c, sid, "hello")
        read_events(c, f"/v1/runs/{run_id}/events", until=lambda e: e["event"] == "done")
        out, threads = _in_flight(1, lambda i: httpx.delete(f"{a.s.url}/v1/sessions/{sid}", timeout=30))
        a.let_go()
        threads[0].join(30)
        assert out[0].status_code == 200 and out[0].json() == {"session_id": sid, "deleted": True}, out[0].text
        assert c.get(f"/v1/sessions/{sid}").status_code == 404
        assert c.get(f"/v1/runs/{run_id}").status_code == 404  # its turn went with it; the run stays in the store
        assert (a.home / "runs" / run_id).is_dir()


def test_a_resume_whose_numbers_are_not_numbers_is_refused(served: Any, tmp_path: Path) -> None:
    """``{"more_turns": true}`` was one more turn and ``{"max_budget_usd": true}`` a budget of one
    dollar; every other field of the API is strict (a string, a boolean), and so are these."""
    a = Slow(served, tmp_path)
    with a.client() as c:
        run_id = _send(c, _session(c), "hello")
        _ended(c, run_id)
        for body in ({"more_turns": True}, {"max_budget_usd": True}, {"more_turns": "5"}, {"more_turns": 2.0}):
            r = c.post(f"/v1/runs/{run_id}/resume", json=body)
            assert r.status_code == 400 and next(iter(body)) in r.json()["error"]["message"], (body, r.text)
        r = c.post(f"/v1/runs/{run_id}/resume", json={"more_turns": 2, "max_budget_usd": 1})  # an int is a number
        assert r.status_code == 409 and "already ended" in r.json()["error"]["message"], r.text


def test_a_rejection_with_content_for_a_call_that_asked_no_question_is_refused_and_the_run_waits(
    served: Any, tmp_path: Path
) -> None:
    """docs/server.md: "`content` on any other decision is refused (400)"; a rejection carrying
    it was taken, its content dropped without a word."""
    a = Slow(served, tmp_path)
    with a.client() as c:
        run_id = _send(c, _session(c), "delete the log")
        asked = _ended(c, run_id)["waiting"]
        assert asked["type"] == "approval"
        body = {"call_id": asked["call_id"], "args_hash": asked["args_hash"], "approve": False, "content": {"ok": 1}}
        r = c.post(f"/v1/runs/{run_id}/decision", json=body)
        assert r.status_code == 400 and "content" in r.json()["error"]["message"], r.text
        run = c.get(f"/v1/runs/{run_id}").json()
        assert run["waiting"] == asked and not run["live"], run
        assert (a.workspace / "access.log").exists()


def test_a_model_answer_holding_half_a_surrogate_pair_streams_whole_and_reads_back(served: Any, tmp_path: Path) -> None:
    """A lone surrogate (valid in a JSON escape, not in UTF-8) in what a model wrote broke the live
    stream mid-run: a traceback, the connection cut, and again at each reconnect while the run was
    live (a form value sent with one did the same to every later form of the session)."""
    a = Slow(served, tmp_path)
    said = "an emoji cut in half: \ufffd and the rest"  # as the saved messages have it
    with a.client() as c:
        sid = _session(c)
        with c.stream(
            "POST", f"/v1/sessions/{sid}/messages", json={"text": "half"}, headers={"Accept": "text/event-stream"}
        ) as r:
            live = parse_stream(r.read().decode("utf-8"))  # strict UTF-8: a lone surrogate is not
        assert live[-1]["event"] == "done" and live[-1]["result"]["status"] == "completed", live[-1]
        assert "".join(e["text"] for e in live if e["event"] == "text_delta") == said
        run_id = live[0]["run_id"]
        assert events(c, run_id) == live  # and the same again from the log
        transcript = c.get(f"/v1/runs/{run_id}/transcript")
        assert transcript.status_code == 200, transcript.text
        assert transcript.json()["messages"][-1]["content"][0]["text"] == said
        assert c.get(f"/v1/runs/{run_id}").json()["status"] == "completed"


def test_a_call_whose_arguments_hold_half_a_surrogate_pair_leaves_the_users_runs_readable(
    served: Any, tmp_path: Path
) -> None:
    """A model's call with ``"\\ud83d"`` in its JSON arguments, waiting for approval: its view (the
    parsed arguments, under ``waiting``) could not be written as UTF-8, so GET /v1/runs/ID, the
    listing of every run of the user and their session answered 500 in plain text."""
    a = Slow(served, tmp_path)
    with a.client() as c:
        sid = _session(c)
        run_id = _send(c, sid, "cut the cord")
        asked = _ended(c, run_id)["waiting"]
        assert asked["args"] == {"path": "a\ud83d.log"}  # as the tool would get them, escaped in the JSON
        for path in ("/v1/runs", f"/v1/sessions/{sid}", f"/v1/runs/{run_id}/transcript", f"/v1/runs/{run_id}/trace"):
            r = c.get(path)
            assert r.status_code == 200 and r.headers["content-type"] == "application/json", (path, r.text)
        body = {"call_id": asked["call_id"], "args_hash": asked["args_hash"], "approve": False, "reason": "no"}
        assert c.post(f"/v1/runs/{run_id}/decision", json=body).status_code == 202
        assert _ended(c, run_id)["status"] == "completed"


# An agent whose run processes take their time to build it: until the file ``built`` is in the
# workspace (the server's own process builds it at once).
BUILDING = """
import os, time
from tether import Agent

WORKSPACE = os.environ["TETHER_TEST_WORKSPACE"]
if os.getpid() != int(os.environ["TETHER_TEST_SERVER_PID"]):
    for _ in range(2000):
        if os.path.exists(os.path.join(WORKSPACE, "built")):
            break
        time.sleep(0.01)

agents = {"plan": Agent("scripted/hello")}
"""


def test_healthz_counts_the_run_processes_that_can_take_a_run(
    served: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """/healthz said ``run_processes: 1`` from the moment a process was started, while it was still
    building its agents (or about to fail to: then it said 1 until the process was gone, and a
    run given meanwhile waited for it); it counts those that are ready."""
    monkeypatch.setenv("TETHER_TEST_SERVER_PID", str(os.getpid()))
    module = tmp_path / "building_agents.py"
    module.write_text(BUILDING)
    s = served(agents_module=module, run_processes=1)
    workspace = Path(s.home).parent / Path(s.home).name.replace("home", "workspace")
    with s.client() as c:
        assert s.app.state.core.manager.processes.pids()  # started, and building
        assert c.get("/healthz").json() == {"ok": True, "live_runs": 0, "run_processes": 0}
        (workspace / "built").write_text("go")
        wait_until(lambda: c.get("/healthz").json()["run_processes"] == 1, what="the run process to be ready")
        sid = c.post("/v1/sessions", json={"agent": "plan"}).json()["session_id"]
        run_id = c.post(f"/v1/sessions/{sid}/messages", json={"text": "hi"}).json()["run_id"]
        assert read_events(c, f"/v1/runs/{run_id}/events")[-1]["result"]["status"] == "completed"
        assert c.get("/healthz").json() == {"ok": True, "live_runs": 0, "run_processes": 1}


def test_a_decision_that_waited_while_its_session_was_deleted_runs_nothing(served: Any, tmp_path: Path) -> None:
    """A decision that waits for a run of the session to end (another one, or its own whose done is
    out), while a delete of the session waits too: the delete went first, then the decision
    continued the run anyway (202), its deleted conversation written back. It must find no run."""
    a = Slow(served, tmp_path)
    with a.client() as c:
        for other_run in (True, False):
            sid = _session(c)
            if other_run:
                run_id = _send(c, sid, "delete the log")
                asked = _ended(c, run_id)["waiting"]
                a.hold()
                read_events(c, f"/v1/runs/{_send(c, sid, 'hello')}/events", until=lambda e: e["event"] == "done")
            else:
                a.hold()
                run_id = _send(c, sid, "delete the log")
                seen = read_events(c, f"/v1/runs/{run_id}/events", until=lambda e: e["event"] == "done")
                asked = next(e for e in seen if e["event"] == "approval_required")
            body = {"call_id": asked["call_id"], "args_hash": asked["args_hash"], "approve": True}
            gone, decided = f"{a.s.url}/v1/sessions/{sid}", f"{a.s.url}/v1/runs/{run_id}/decision"
            deleting, first = _in_flight(1, lambda i, url=gone: httpx.delete(url, timeout=30))
            deciding, then = _in_flight(1, lambda i, url=decided, b=body: httpx.post(url, json=b, timeout=30))
            a.let_go()
            for t in first + then:
                t.join(30)
            assert deleting[0].status_code == 200, (other_run, deleting[0].text)
            assert deciding[0].status_code == 404, (other_run, deciding[0].text)
            assert (a.workspace / "access.log").exists()  # the call was not run
            assert c.get("/healthz").json()["live_runs"] == 0
            assert not list((a.home / "sessions").glob(f"{sid}*")), list((a.home / "sessions").iterdir())


def test_healthz_is_not_ok_while_the_server_stops_and_refuses_messages(tmp_path: Path) -> None:
    """After SIGTERM, `tether serve` stops its runs (up to its grace) before it stops listening, and
    meanwhile answers every new message 503 "the server is shutting down"; /healthz said ok (200),
    so a load balancer kept sending it users. It answers 503, ok false."""
    home, workspace = tmp_path / "home", tmp_path / "workspace"
    home.mkdir()
    workspace.mkdir()
    module = tmp_path / "round4_agents.py"
    module.write_text(AGENTS)
    env = {**os.environ, "TETHER_HOME": str(home), "TETHER_TEST_WORKSPACE": str(workspace)}
    proc, url = serve_process("--agent", str(module), env=env)
    try:
        with httpx.Client(base_url=url, timeout=30) as c:
            assert c.get("/healthz").json() == {"ok": True, "live_runs": 0}
            sid, later = _session(c), _session(c)
            run_id = _send(c, sid, "hello")  # its end is held: the server waits for it to stop
            read_events(c, f"/v1/runs/{run_id}/events", until=lambda e: e["event"] == "done")
            proc.send_signal(signal.SIGTERM)
            # A message with too many form values: 400 until the server stops (nothing started), then 503.
            message = {"text": "hi", "values": {f"k{i}": i for i in range(101)}}
            refused = wait_until(
                lambda: (r := c.post(f"/v1/sessions/{later}/messages", json=message)).status_code == 503 and r,
                what="the server to refuse messages",
            )
            assert "shutting down" in refused.json()["error"]["message"]
            health = c.get("/healthz")
            assert health.status_code == 503 and health.json()["ok"] is False, health.text
            (workspace / "let-go").write_text("go")
        proc.wait(30)  # it stops once the held run has ended
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_a_message_retried_while_the_sessions_last_run_ends_gets_its_run_not_a_409(served: Any, tmp_path: Path) -> None:
    """docs/server.md: "posting the same id again returns the run it started". A message and its
    retry (the client lost the first response) both waited for the session's last run to end; the
    first started its run, and the retry was refused 409 "still answering (run R)", R its own run."""
    a = Slow(served, tmp_path)
    with a.client() as c:
        sid = _session(c)
        a.hold()
        read_events(c, f"/v1/runs/{_send(c, sid, 'hello')}/events", until=lambda e: e["event"] == "done")
        message = {"text": "hello again", "message_id": "m-retried"}
        url = f"{a.s.url}/v1/sessions/{sid}/messages"
        out, threads = _in_flight(2, lambda i: httpx.post(url, json=message, timeout=30))
        a.let_go()
        for t in threads:
            t.join(30)
        assert statuses(out) == [200, 202], [r.text for r in out]
        assert len({r.json()["run_id"] for r in out}) == 1
        assert len(c.get(f"/v1/sessions/{sid}").json()["turns"]) == 2
