"""The server's promises attacked from outside, as a hostile client or an unlucky operator would:
races on one call, one message id and one session; users guessing each other's ids; hostile ids,
bodies and headers; streams opened by the dozen and dropped, or never read; files planted or torn
in ``$TETHER_HOME``. Real HTTP on loopback, real runs, real files.
"""

from __future__ import annotations

import json
import os
import socket
import stat
import struct
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.server.conftest import read_events, start_uvicorn, wait_until
from tether.events import Done
from tether.status import RunResult
from tether.tracing import JsonlTracer

pytest.importorskip("fastapi")

# The agents these tests serve, written to a file the fixture loads (so tests/server/agents.py, which
# other tests share, stays as it is). One agent whose model is a function of the last user message:
# "delete" asks to delete access.log (needs approval), "wait" runs a tool that waits for the test,
# "buttons"/"form" answer with hostile widgets, "big" answers with 1.5 MB, anything else is echoed.
AGENTS = '''
import os
import time

from tether import Agent, tool
from tether.providers.scripted import Reply
from tether.server.widgets import buttons, form, select, text
from tether.testing import FunctionModel
from tether.tools.files import FILE_TOOLS

WORKSPACE = os.environ["TETHER_TEST_WORKSPACE"]
HOSTILE = ["<img src=x onerror=alert(1)>", "javascript:alert(1)", "\\u202egnp.exe", "nul\\x00byte",
           "</script><script>alert(1)</script>", "{{7*7}}", "__proto__", "x" * 3000]


@tool(read_only=True)
def wait_for_release() -> str:
    """Waits until the file `release` appears in the workspace (at most 20 s)."""
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline and not os.path.exists(os.path.join(WORKSPACE, "release")):
        time.sleep(0.02)
    return "released"


@tool(idempotent=True)
def hostile_offer(kind: str = "buttons"):
    """Offers buttons or a form whose every string is hostile markup."""
    if kind == "buttons":
        return buttons(HOSTILE, title="<b onmouseover=alert(1)>pick</b>")
    return form([select("__proto__", "<svg onload=alert(1)>", HOSTILE),
                 text("constructor", "<img src=x>", default="</textarea><script>alert(1)</script>")],
                title="<iframe src=javascript:alert(1)>", submit="<button formaction=x>")


def reply(messages, request):
    last = max(i for i, m in enumerate(messages) if m.role == "user")
    user = "".join(getattr(p, "text", "") for p in messages[last].content)
    results = [m for m in messages[last + 1:] if m.role == "tool"]
    n = len(messages)  # call ids unique within the session's conversation
    if results:
        return "finished: " + results[-1].text[:200]
    for word, name, args in (("delete", "delete_file", {"path": "access.log"}), ("wait", "wait_for_release", {}),
                             ("form", "hostile_offer", {"kind": "form"}), ("buttons", "hostile_offer", {})):
        if user.startswith(word):
            return Reply(calls=((f"c{n}", name, args),))
    if user.startswith("big"):
        return "word " * 300_000
    return "echo: " + user


agents = {"gate": Agent(FunctionModel(reply), tools=[*FILE_TOOLS, wait_for_release, hostile_offer],
                        cwd=WORKSPACE, max_turns=10)}
'''

HOSTILE = [
    "<img src=x onerror=alert(1)>",
    "javascript:alert(1)",
    "\u202egnp.exe",
    "nul\x00byte",
    "</script><script>alert(1)</script>",
    "{{7*7}}",
    "__proto__",
    "x" * 3000,
]
N = 12  # concurrent clients in the races


# --- helpers ---------------------------------------------------------------------------------------


class Attack:
    """A served ``gate`` agent, with its home and workspace at hand."""

    def __init__(self, served: Any, tmp_path: Path, **kw: Any) -> None:
        module = tmp_path / "attack_agents.py"
        module.write_text(AGENTS)
        self.s = served(agents_module=module, **kw)
        self.home = Path(self.s.home)
        self.workspace = self.home.parent / self.home.name.replace("home", "workspace")

    def client(self, user: str | None = None, **kw: Any) -> httpx.Client:
        return self.s.client(user, **kw)

    def release(self) -> None:
        (self.workspace / "release").write_text("go")


def _no_constants(name: str) -> Any:
    raise ValueError(f"{name} is not JSON (a browser's JSON.parse rejects it)")


def strict_json(text: str) -> Any:
    return json.loads(text, parse_constant=_no_constants)


def parse_stream(raw: str) -> list[dict[str, Any]]:
    """SSE as the spec reads it: lines end at LF only (never at U+2028 or U+0085, which JSON
    may carry raw), and data must be strict JSON."""
    out = []
    for block in raw.split("\n\n"):
        fields = {}
        for line in block.split("\n"):
            if line and not line.startswith(":"):
                name, _, value = line.partition(":")
                fields[name] = value[1:] if value.startswith(" ") else value
        if "data" in fields:
            event = strict_json(fields["data"])
            event["id"], event["event"] = int(fields["id"]), fields["event"]
            out.append(event)
    return out


def events(c: httpx.Client, run_id: str, *, last_event_id: Any = None, after: Any = None) -> list[dict[str, Any]]:
    """The run's whole stream (it ends when the run is not live)."""
    headers = {"Accept": "text/event-stream"}
    if last_event_id is not None:
        headers["Last-Event-ID"] = str(last_event_id)
    url = f"/v1/runs/{run_id}/events" + (f"?after={after}" if after is not None else "")
    with c.stream("GET", url, headers=headers) as r:
        assert r.status_code == 200, r.read()
        return parse_stream(r.read().decode())


def session(c: httpx.Client) -> str:
    r = c.post("/v1/sessions", json={"agent": "gate"})
    assert r.status_code == 201, r.text
    return str(r.json()["session_id"])


def send(c: httpx.Client, sid: str, text: str, **extra: Any) -> dict[str, Any]:
    r = c.post(f"/v1/sessions/{sid}/messages", json={"text": text, **extra})
    assert r.status_code == 202, r.text
    return dict(r.json())


def ended(c: httpx.Client, run_id: str) -> dict[str, Any]:
    def check() -> dict[str, Any] | None:
        run = c.get(f"/v1/runs/{run_id}").json()
        return run if not run["live"] and run["status"] != "running" else None

    return dict(wait_until(check, what=f"run {run_id} to end"))


def waiting_delete(c: httpx.Client) -> tuple[str, str, dict[str, Any]]:
    """A session and a run stopped for approval to delete access.log."""
    sid = session(c)
    run_id = send(c, sid, "delete the log")["run_id"]
    run = ended(c, run_id)
    assert run["status"] == "interrupted" and run["waiting"]["tool_name"] == "delete_file", run
    return sid, run_id, run["waiting"]


def decide(w: dict[str, Any], approve: bool = True) -> dict[str, Any]:
    return {"call_id": w["call_id"], "args_hash": w["args_hash"], "approve": approve}


def race(n: int, make: Callable[[int], httpx.Response]) -> list[httpx.Response]:
    """``make(i)`` from ``n`` threads released at the same instant."""
    gate = threading.Barrier(n)
    out: list[Any] = [None] * n

    def one(i: int) -> None:
        gate.wait()
        try:
            out[i] = make(i)
        except Exception as exc:  # reported below as the response that did not come
            out[i] = exc

    threads = [threading.Thread(target=one, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert all(isinstance(r, httpx.Response) for r in out), out
    return out


def statuses(responses: list[httpx.Response]) -> list[int]:
    return sorted(r.status_code for r in responses)


def post_from_own_client(a: Attack, path: str, body: Any = None) -> Callable[[int], Any]:
    def make(i: int) -> httpx.Response:
        with a.client() as c:  # one connection per thread: the requests really are concurrent
            return c.post(path, json=body(i) if callable(body) else body)

    return make


# --- races -----------------------------------------------------------------------------------------


def test_racing_decisions_for_one_waiting_call_run_the_tool_once(served: Any, tmp_path: Path) -> None:
    a = Attack(served, tmp_path)
    with a.client() as c:
        _, run_id, w = waiting_delete(c)
        before = events(c, run_id)
        answers = race(N, post_from_own_client(a, f"/v1/runs/{run_id}/decision", decide(w)))
        assert statuses(answers) == [202] + [409] * (N - 1), [r.text for r in answers]
        assert ended(c, run_id)["status"] == "completed"
        assert not (a.workspace / "access.log").exists()
        after = events(c, run_id, last_event_id=before[-1]["id"])
        kinds = [e["event"] for e in after]
        assert kinds.count("decision") == 1 and kinds.count("tool_start") == 1 and kinds.count("done") == 1
        transcript = c.get(f"/v1/runs/{run_id}/transcript").json()["messages"]
        results = [m for m in transcript if m["role"] == "tool" and m["call_id"] == w["call_id"]]
        assert [m["status"] for m in results] == ["ok"]


def test_racing_posts_of_one_message_id_start_one_run(served: Any, tmp_path: Path) -> None:
    a = Attack(served, tmp_path)
    with a.client() as c:
        sid = session(c)
        answers = race(
            N, post_from_own_client(a, f"/v1/sessions/{sid}/messages", {"text": "hello", "message_id": "retry-1"})
        )
        assert statuses(answers) == [200] * (N - 1) + [202]
        assert len({r.json()["run_id"] for r in answers}) == 1
        assert len(c.get(f"/v1/sessions/{sid}").json()["turns"]) == 1
        assert len(c.get("/v1/runs").json()["runs"]) == 1


def test_one_message_id_raced_into_two_sessions_starts_one_run(served: Any, tmp_path: Path) -> None:
    a = Attack(served, tmp_path)
    with a.client() as c:
        sids = [session(c) for _ in range(N)]
        answers = race(
            N, lambda i: httpx.post(f"{a.s.url}/v1/sessions/{sids[i]}/messages", json={"text": "hi", "message_id": "m"})
        )
        assert statuses(answers) == [202] + [409] * (N - 1), [r.text for r in answers]
        assert len(c.get("/v1/runs").json()["runs"]) == 1


def test_racing_messages_to_one_session_start_exactly_one_run(served: Any, tmp_path: Path) -> None:
    a = Attack(served, tmp_path)
    with a.client() as c:
        sid = session(c)
        answers = race(N, post_from_own_client(a, f"/v1/sessions/{sid}/messages", lambda i: {"text": f"wait {i}"}))
        assert statuses(answers) == [202] + [409] * (N - 1), [r.text for r in answers]
        started = next(r.json()["run_id"] for r in answers if r.status_code == 202)
        assert all(started in r.json()["error"]["message"] for r in answers if r.status_code == 409)
        a.release()
        assert ended(c, started)["status"] == "completed"
        assert [t["run_id"] for t in c.get(f"/v1/sessions/{sid}").json()["turns"]] == [started]


def test_racing_resumes_continue_a_cancelled_run_once(served: Any, tmp_path: Path) -> None:
    a = Attack(served, tmp_path)
    with a.client() as c:
        sid = session(c)
        run_id = send(c, sid, "wait")["run_id"]
        read_events(c, f"/v1/runs/{run_id}/events", until=lambda e: e["event"] == "tool_start")
        assert c.post(f"/v1/runs/{run_id}/cancel").status_code == 202
        assert ended(c, run_id)["resumable"]
        a.release()
        answers = race(N, post_from_own_client(a, f"/v1/runs/{run_id}/resume"))
        assert statuses(answers) == [202] + [409] * (N - 1), [r.text for r in answers]
        assert ended(c, run_id)["status"] == "completed"
        kinds = [e["event"] for e in events(c, run_id)]
        assert kinds.count("done") == 2 and kinds[-1] == "done"  # the cancel's, then the one resume's


def test_a_cancel_racing_a_decision_never_runs_the_call_twice(served: Any, tmp_path: Path) -> None:
    a = Attack(served, tmp_path)
    target = a.workspace / "access.log"
    with a.client() as c:
        _, run_id, w = waiting_delete(c)
        decision, cancel = race(
            2,
            lambda i: httpx.post(
                f"{a.s.url}/v1/runs/{run_id}/" + ("decision", "cancel")[i], json=decide(w) if i == 0 else None
            ),
        )
        assert decision.status_code == 202 and cancel.status_code in (202, 409), (decision.text, cancel.text)
        run = ended(c, run_id)
        for _ in range(3):  # the operator finishes the run as the API tells them to
            if run["status"] == "completed":
                break
            asked = run["waiting"]
            if asked["type"] == "cancelled":
                assert run["resumable"], run
                assert c.post(f"/v1/runs/{run_id}/resume").status_code == 202
            else:  # cut mid-call: the API asks whether to run it again, and the operator looks first
                assert asked["type"] == "outcome_unknown" and asked["call_id"] == w["call_id"], run
                gone = not target.exists()
                body = decide(asked, approve=not gone) | ({"reason": "it was deleted"} if gone else {})
                assert c.post(f"/v1/runs/{run_id}/decision", json=body).status_code == 202
            run = ended(c, run_id)
        assert run["status"] == "completed", run
        results = [e["status"] for e in events(c, run_id) if e["event"] == "tool_result"]
        assert "error" not in results and results.count("ok") <= 1, results  # never a second deletion
        assert not target.exists()


def test_a_decision_does_not_start_a_second_live_run_in_a_busy_session(served: Any, tmp_path: Path) -> None:
    a = Attack(served, tmp_path)
    with a.client() as c:
        sid, run_id, w = waiting_delete(c)
        busy = send(c, sid, "wait")["run_id"]  # allowed: the run waiting for approval is not live
        r = c.post(f"/v1/runs/{run_id}/decision", json=decide(w))
        a.release()
        ended(c, busy)
        assert r.status_code == 409 and busy in r.json()["error"]["message"], r.text


# --- who sees what ---------------------------------------------------------------------------------


def test_a_user_guessing_anothers_ids_finds_nothing_on_any_route(served: Any, tmp_path: Path) -> None:
    a = Attack(served, tmp_path, tokens=["alice", "al", "bob"])  # "al": a name that prefixes another
    seen: list[httpx.Response] = []
    with a.client("alice") as alice, a.client("al") as al, a.client("bob") as bob:
        alice.event_hooks["response"] = bob.event_hooks["response"] = al.event_hooks["response"] = [
            lambda r: seen.append(r)
        ]
        sid, run_id, w = waiting_delete(alice)
        mid, trace_id = (alice.get(f"/v1/runs/{run_id}").json()[k] for k in ("message_id", "trace_id"))
        before = events(alice, run_id)
        for other in (bob, al):
            for path in (
                f"/v1/sessions/{sid}",
                f"/v1/runs/{run_id}",
                f"/v1/runs/{run_id}/transcript",
                f"/v1/runs/{run_id}/trace",
                f"/v1/runs/{run_id}/events",
                f"/v1/runs/{run_id}/events?after=0",
                f"/v1/runs/{run_id}/events?after=1",
            ):
                r = other.get(path, headers={"Last-Event-ID": "1", "Accept": "text/event-stream"})
                assert r.status_code == 404 and r.json()["error"]["code"] == "not_found", (path, r.text)
            for path, body in (
                (f"/v1/sessions/{sid}/messages", {"text": "hi", "message_id": mid}),
                (f"/v1/runs/{run_id}/decision", decide(w)),
                (f"/v1/runs/{run_id}/cancel", None),
                (f"/v1/runs/{run_id}/resume", None),
                (f"/v1/messages/{mid}/feedback", {"score": "down"}),
            ):
                r = other.post(path, json=body)
                assert r.status_code == 404, (path, r.text)
            assert other.get("/v1/runs").json()["runs"] == other.get("/v1/feedback").json()["feedback"] == []
            # the same message id in one's own session is one's own message, never alice's run
            own = send(other, session(other), "hi", message_id=mid)
            assert own["run_id"] != run_id and own["trace_id"] != trace_id
        assert (a.workspace / "access.log").exists()
        assert alice.get(f"/v1/runs/{run_id}").json()["status"] == "interrupted"
        assert events(alice, run_id) == before and alice.get("/v1/feedback").json()["feedback"] == []
        assert [s["session_id"] for s in alice.get("/v1/sessions").json()["sessions"]] == [sid]
        # a revoked token stops at once, an open question of the revoked user included
        from tether.server.store import SqliteServerStore

        SqliteServerStore(a.home / "serve" / "server.db").revoke_token("bob")
        assert bob.get("/v1/me").status_code == 401
        assert bob.get("/v1/runs").status_code == 401
        assert alice.get("/v1/me").json() == {"user": "alice", "auth": True}
    tokens = list(a.s.tokens.values())
    for r in seen:
        text = r.read().decode("utf-8", "replace") + json.dumps(dict(r.headers))
        assert not any(t in text for t in tokens), r.request.url


def test_a_wrong_token_is_refused_without_being_echoed_and_tokens_are_in_no_file(served: Any, tmp_path: Path) -> None:
    a = Attack(served, tmp_path, tokens=["alice"])
    token = a.s.tokens["alice"]
    with a.client("alice") as c:
        _, run_id, w = waiting_delete(c)
        c.post(f"/v1/runs/{run_id}/decision", json=decide(w))
        ended(c, run_id)
        for wrong in (token[:-1], token + "x", token.upper(), "tt_" + "A" * 4000, token[3:]):
            for scheme in ("Bearer", "bearer", "Basic", "Token"):
                r = httpx.get(f"{a.s.url}/v1/runs/{run_id}", headers={"Authorization": f"{scheme} {wrong}"})
                assert r.status_code == 401 and r.json()["error"]["code"] == "unauthorized"
                assert wrong not in r.text and token not in r.text and token[3:20] not in r.text
        files = [p for p in a.home.rglob("*") if p.is_file()]
        assert any(p.suffix == ".jsonl" for p in files) and any(p.suffix == ".log" for p in files)
        for p in files:
            data = p.read_bytes()
            assert token.encode() not in data and token[3:].encode() not in data, p
        db = a.home / "serve" / "server.db"
        assert stat.S_IMODE(db.stat().st_mode) == 0o600
        assert stat.S_IMODE(db.parent.stat().st_mode) == 0o700


def test_every_file_of_the_server_db_is_private(served: Any, tmp_path: Path) -> None:
    a = Attack(served, tmp_path, tokens=["alice"])
    with a.client("alice") as c:
        mid = send(c, session(c), "hi")["message_id"]
        assert c.post(f"/v1/messages/{mid}/feedback", json={"score": "down", "comment": "private"}).status_code == 201
    modes = {p.name: stat.S_IMODE(p.stat().st_mode) for p in (a.home / "serve").glob("server.db*")}
    assert set(modes) >= {"server.db", "server.db-wal"}
    assert modes == dict.fromkeys(modes, 0o600), modes


def test_revoking_the_last_token_does_not_open_the_server(served: Any, tmp_path: Path) -> None:
    a = Attack(served, tmp_path, tokens=["alice"])
    from tether.server.store import SqliteServerStore

    SqliteServerStore(a.home / "serve" / "server.db").revoke_token("alice")
    with a.client("alice") as c:
        r = c.get("/v1/me")
        assert r.status_code == 401, r.text


# --- hostile input ---------------------------------------------------------------------------------


def test_hostile_ids_in_every_route_get_a_json_4xx_and_touch_no_file(served: Any, tmp_path: Path) -> None:
    a = Attack(served, tmp_path)
    outside = tmp_path / "outside"
    outside.write_text("keep")
    before = sorted(p for p in tmp_path.rglob("*"))
    ids = [
        "..",
        "%2e%2e",
        "..%2F..%2Foutside",
        "..%5C..%5Coutside",
        "a%00b",
        "x" * 4000,
        "%C3%A9%E2%80%AE",
        "%F0%9F%98%80",
        "run_%0A",
        "%25",
        "s_%27%20OR%201%3D1--",
    ]
    with a.client() as c:
        for ident in ids:
            for method, path in (
                ("GET", "/v1/sessions/{}"),
                ("POST", "/v1/sessions/{}/messages"),
                ("GET", "/v1/runs/{}"),
                ("GET", "/v1/runs/{}/events"),
                ("GET", "/v1/runs/{}/transcript"),
                ("GET", "/v1/runs/{}/trace"),
                ("POST", "/v1/runs/{}/decision"),
                ("POST", "/v1/runs/{}/cancel"),
                ("POST", "/v1/runs/{}/resume"),
                ("POST", "/v1/messages/{}/feedback"),
            ):
                body = {"text": "hi", "call_id": "c", "args_hash": "h", "approve": True, "score": "up"}
                url = path.format(ident)
                r = c.request(method, url, json={k: body[k] for k in _fields(path)} if method == "POST" else None)
                assert 400 <= r.status_code < 500 and r.json()["error"]["code"], (method, url, r.status_code)
        sid = session(c)
        for bad in ("../x", "m\x00", "m/1", " m", "x" * 129, "é", "m\u2028", "-m"):
            r = c.post(f"/v1/sessions/{sid}/messages", json={"text": "hi", "message_id": bad})
            assert r.status_code == 400 and "message_id" in r.json()["error"]["message"], (bad, r.text)
        assert c.get(f"/v1/sessions/{sid}").json()["turns"] == [] and c.get("/v1/runs").json()["runs"] == []
    assert sorted(p for p in tmp_path.rglob("*")) == before and outside.read_text() == "keep"


def _fields(path: str) -> tuple[str, ...]:
    return {"messages": ("text",), "decision": ("call_id", "args_hash", "approve"), "feedback": ("score",)}.get(
        path.rsplit("/", 1)[-1], ()
    )


def test_a_message_id_with_a_trailing_newline_is_refused(served: Any, tmp_path: Path) -> None:
    a = Attack(served, tmp_path)
    with a.client() as c:
        r = c.post(f"/v1/sessions/{session(c)}/messages", json={"text": "hi", "message_id": "m-1\n"})
        assert r.status_code == 400, r.text


def test_hostile_bodies_are_refused_or_kept_exactly(served: Any, tmp_path: Path) -> None:
    a = Attack(served, tmp_path, config="[serve]\nmax_body_bytes = 65536\n")
    with a.client() as c:
        sid = session(c)
        url = f"/v1/sessions/{sid}/messages"
        js = {"Content-Type": "application/json"}
        refused = [
            (b'{"text": "a\\ud800b"}', js),  # a lone surrogate
            (b'{"text": "\\udfff"}', js),
            (b"null", js),
            (b"[]", js),
            (b'["text", "hi"]', js),
            (b'"hi"', js),
            (b"{}", js),
            (b'{"text": "hi", "values": "a=1"}', js),
            (b'{"text": "hi", "values": {"a": [1]}}', js),
            (b'{"text": "hi", "values": {"a": {"b": 1}}}', js),
            (b'{"text": "hi", "values": [["a", 1]]}', js),
            (json.dumps({"text": "hi", "values": {f"k{i}": i for i in range(101)}}).encode(), js),
            (b'{"text": "hi", "values": {"a": ' + b"[" * 5000 + b"]" * 5000 + b"}}", js),
            (b'{"text": ' + b"[" * 100_000 + b"]" * 100_000 + b"}", js),  # over the limit
            (b'{"text": "hi", "values": {"a": 1' + b"0" * 5000 + b"}}", js),  # an int too long to parse
            (b'{"text": "caf\xe9"}', {"Content-Type": "application/json; charset=latin-1"}),
            (b'{"text": "hi"}', {"Content-Type": "text/plain"}),
            (b'{"text": "hi"}', {"Content-Type": "application/jsonx"}),
            (b'{"text": "hi"}', {"Content-Type": "application/x-www-form-urlencoded"}),
            (b'{"text": "hi"}', {"Content-Type": "multipart/form-data; boundary=x"}),
            (b'{"text": "hi"}', {}),
            (b'{"text": "hi", "message_id": 5}', js),
            (b'{"text": "hi", "message_id": null, "extra": 1}', js),
        ]
        for body, headers in refused:
            r = c.post(url, content=body, headers=headers)
            assert r.status_code in (400, 413, 415) and r.json()["error"]["code"], (body[:60], r.status_code, r.text)
        assert c.get(f"/v1/sessions/{sid}").json()["turns"] == []
        # what is accepted comes back exactly as sent, through the model and the stream
        text = 'nul\x00 rtl\u202e emoji\U0001f600 quote" tab\t <script>'
        plain = json.dumps({"text": text}).encode()
        for body, headers in (
            (plain, js),
            (plain, {"Content-Type": "APPLICATION/JSON"}),
            (plain, {"Content-Type": "application/json; charset=latin-1"}),
            (b'{"text": "first", "text": ' + json.dumps(text).encode() + b"}", js),
        ):  # the last wins
            r = c.post(url, content=body, headers=headers)
            assert r.status_code == 202, r.text
            run = ended(c, r.json()["run_id"])
            assert run["status"] == "completed" and run["text"] == text
            said = "".join(e["text"] for e in events(c, run["run_id"]) if e["event"] == "text_delta")
            assert said == "echo: " + text
        assert c.post("/v1/sessions", content=b"null", headers=js).status_code == 201
        assert c.post("/v1/sessions", content=b"[]", headers=js).status_code == 400


def test_nan_in_form_values_never_reaches_the_stream(served: Any, tmp_path: Path) -> None:
    a = Attack(served, tmp_path)
    with a.client() as c:
        sid = session(c)
        r = c.post(
            f"/v1/sessions/{sid}/messages",
            content=b'{"text": "ok", "values": {"constructor": NaN}}',
            headers={"Content-Type": "application/json"},
        )
        if r.status_code == 400:  # refused: nothing to check further
            return
        ended(c, r.json()["run_id"])
        run_id = send(c, sid, "form")["run_id"]
        ended(c, run_id)
        events(c, run_id)  # strict JSON: raises on NaN


def test_hostile_headers_get_clear_answers(served: Any, tmp_path: Path) -> None:
    a = Attack(served, tmp_path)
    with a.client() as c:
        run_id = send(c, session(c), "hi")["run_id"]
        ended(c, run_id)
        every = events(c, run_id)
        origin = a.s.url
        port = origin.rsplit(":", 1)[1]
        for headers, status in (
            ({"Origin": "null"}, 403),
            ({"Origin": origin.replace("127.0.0.1", "localhost")}, 403),
            ({"Origin": f"http://127.0.0.1:{int(port) + 1}"}, 403),
            ({"Origin": "https://127.0.0.1:" + port}, 403),
            ({"Sec-Fetch-Site": "cross-site"}, 403),
            ({"Sec-Fetch-Site": "same-site"}, 403),
            ({"Host": "attacker.example"}, 421),
            ({"Host": "127.0.0.1.attacker.example"}, 421),
            ({"Host": "localhost.:" + port}, 421),
            ({"Host": "[::2]:" + port}, 421),
            ({"Host": ""}, 421),
            ({"Origin": origin}, 201),
            ({"Host": f"[::1]:{port}"}, 201),
            ({"Host": "LOCALHOST:" + port}, 201),
            ({"Host": "[::1]"}, 201),
            ({"Sec-Fetch-Site": "same-origin"}, 201),
        ):
            r = c.post("/v1/sessions", json={}, headers=headers)
            assert r.status_code == status, (headers, r.text)
        assert len(c.get("/v1/sessions").json()["sessions"]) == 6  # the one made first and five; the refused made none
        for headers, after, status, expect in (
            ({"Last-Event-ID": str(10**30)}, None, 200, []),
            ({}, 10**30, 200, []),
            ({"Last-Event-ID": "-1"}, None, 400, None),
            ({}, -1, 400, None),
            ({"Last-Event-ID": "1e3"}, None, 400, None),
            ({"Last-Event-ID": "0x10"}, None, 400, None),
            ({"Last-Event-ID": ""}, None, 200, every),
            ({"Last-Event-ID": "3", "X-Pad": "p" * 8000}, None, 200, every[3:]),
        ):
            url = f"/v1/runs/{run_id}/events" + (f"?after={after}" if after is not None else "")
            r = c.get(url, headers=headers)
            assert r.status_code == status, (headers, after, r.text)
            if expect is not None:
                assert parse_stream(r.text) == expect
            else:
                assert r.json()["error"]["code"] == "bad_request"
        huge = c.get("/v1/me", headers={"X-Big": "a" * 100_000})  # uvicorn's to refuse, or to serve right
        assert huge.status_code in (400, 431) or huge.json() == {"user": "local", "auth": False}
        assert c.get("/healthz").json()["ok"] is True


# --- streams ---------------------------------------------------------------------------------------


def _raw_get(url: str, path: str, *, rcvbuf: int | None = None) -> socket.socket:
    host, port = url.removeprefix("http://").split(":")
    sock = socket.socket()
    if rcvbuf is not None:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
    sock.connect((host, int(port)))
    sock.sendall(f"GET {path} HTTP/1.1\r\nHost: {host}:{port}\r\nAccept: text/event-stream\r\n\r\n".encode())
    return sock


def test_fifty_streams_dropped_midway_leave_the_run_whole(served: Any, tmp_path: Path) -> None:
    a = Attack(served, tmp_path)
    with a.client() as c:
        run_id = send(c, session(c), "wait")["run_id"]
        socks = [_raw_get(a.s.url, f"/v1/runs/{run_id}/events") for _ in range(50)]
        for sock in socks:
            got = b""
            while b"event: tool_start" not in got:
                got += sock.recv(65536)
            # an abrupt reset, as a phone that loses its network would leave it
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            sock.close()
        a.release()
        run = ended(c, run_id)
        assert run["status"] == "completed" and run["turns"] == 2 and not run["live"]
        every = events(c, run_id)
        assert [e["id"] for e in every] == list(range(1, len(every) + 1)) and every[-1]["event"] == "done"
        assert c.get("/healthz").json() == {"ok": True, "live_runs": 0}


def test_a_client_that_never_reads_its_stream_holds_up_no_one(served: Any, tmp_path: Path) -> None:
    a = Attack(served, tmp_path)
    with a.client() as c:
        big = send(c, session(c), "big")["run_id"]
        assert ended(c, big)["status"] == "completed"
        # ~3 MB of events to a client with a tiny receive buffer that reads nothing
        stuck = [_raw_get(a.s.url, f"/v1/runs/{big}/events", rcvbuf=4096) for _ in range(3)]
        try:
            time.sleep(0.3)  # let the server fill what the sockets will take, and block on the rest
            with httpx.Client(base_url=a.s.url, timeout=10) as other_client:  # a stall is a timeout here
                other = send(other_client, session(other_client), "are you there")["run_id"]
                said = "".join(e["text"] for e in events(other_client, other) if e["event"] == "text_delta")
                assert said == "echo: are you there"
                assert other_client.get("/healthz").json()["ok"] is True
        finally:
            for sock in stuck:
                sock.close()
        body = "".join(e["text"] for e in events(c, big) if e["event"] == "text_delta")
        assert body == "word " * 300_000


def test_reconnecting_at_every_event_id_gives_exactly_the_suffix(served: Any, tmp_path: Path) -> None:
    a = Attack(served, tmp_path)
    with a.client() as c:
        _, run_id, w = waiting_delete(c)
        assert c.post(f"/v1/runs/{run_id}/decision", json=decide(w)).status_code == 202
        ended(c, run_id)
        every = events(c, run_id)
        assert [e["id"] for e in every] == list(range(1, len(every) + 1))
        assert [e["event"] for e in every].count("done") == 2  # the approval's stop, then the end
        for k in range(len(every) + 2):
            assert events(c, run_id, last_event_id=k) == every[k:], k
            assert events(c, run_id, after=k) == every[k:], k
        # ?after= wins over the header, as a page that reloads with its own cursor expects
        assert events(c, run_id, last_event_id=2, after=5) == every[5:]


def test_events_with_unicode_line_separators_survive_the_log(served: Any, tmp_path: Path) -> None:
    a = Attack(served, tmp_path)
    with a.client() as c:
        run_id = send(c, session(c), "line\u2028separator\u2029paragraph\x85next")["run_id"]
        ended(c, run_id)  # from here its events come from the file
        every = events(c, run_id)
        assert every and every[-1]["event"] == "done", [e["event"] for e in every]
        said = "".join(e["text"] for e in every if e["event"] == "text_delta")
        assert said == "echo: line\u2028separator\u2029paragraph\x85next"


# --- files -----------------------------------------------------------------------------------------


def test_a_symlink_planted_as_a_runs_event_log_is_neither_read_nor_written(served: Any, tmp_path: Path) -> None:
    a = Attack(served, tmp_path)
    outside = tmp_path / "outside.log"
    planted = '1\tturn\t{"secret": "outside"}\n2\tdone\t{"secret": "outside"}\n'
    outside.write_text(planted)
    with a.client() as c:
        _, run_id, w = waiting_delete(c)
        log = a.home / "serve" / "events" / f"{run_id}.log"
        log.unlink()
        log.symlink_to(outside)
        # Not followed: what a client gets is what a run without a log gets, made from the transcript.
        replay = events(c, run_id)
        assert [e["event"] for e in replay][-1:] == ["done"] and all("secret" not in e for e in replay)
        assert replay[-1]["result"]["status"] == "interrupted"
        assert c.post(f"/v1/runs/{run_id}/decision", json=decide(w)).status_code == 202
        assert ended(c, run_id)["status"] == "completed"
        assert all("secret" not in e for e in events(c, run_id))
    assert outside.read_text() == planted and log.is_symlink()


def test_a_symlink_planted_as_a_runs_trace_is_neither_read_nor_written(served: Any, tmp_path: Path) -> None:
    a = Attack(served, tmp_path)
    outside = tmp_path / "outside.jsonl"
    planted = '{"secret": "outside"}\n'
    outside.write_text(planted)
    with a.client() as c:
        _, run_id, w = waiting_delete(c)
        trace = a.home / "traces" / f"{run_id}.jsonl"
        trace.unlink()
        trace.symlink_to(outside)
        assert c.post(f"/v1/runs/{run_id}/decision", json=decide(w)).status_code == 202
        ended(c, run_id)
        r = c.get(f"/v1/runs/{run_id}/trace")
        assert outside.read_text() == planted
        assert r.status_code == 409 and "cannot be read" in r.json()["error"]["message"], r.text
        assert "outside" not in r.text


def test_a_torn_last_line_does_not_swallow_the_events_written_after_it(served: Any, tmp_path: Path) -> None:
    a = Attack(served, tmp_path)
    with a.client() as c:
        _, run_id, w = waiting_delete(c)
        before = events(c, run_id)
        log = a.home / "serve" / "events" / f"{run_id}.log"
        with log.open("a") as f:  # what a kill -9 in the middle of a write leaves
            f.write(f'{len(before) + 1}\ttext_delta\t{{"type":"te')
        assert events(c, run_id) == before
        assert c.post(f"/v1/runs/{run_id}/decision", json=decide(w)).status_code == 202
        ended(c, run_id)
        every = events(c, run_id)
        assert every[: len(before)] == before
        assert every[-1]["event"] == "done" and every[-1]["result"]["status"] == "completed"


def test_a_named_pipe_put_at_a_runs_event_log_never_hangs_the_server(served: Any, tmp_path: Path) -> None:
    """Opening a pipe for reading waits for a writer, and writing to one waits once it is full:
    either would stop every request. The log is read as missing, and the run goes on."""
    a = Attack(served, tmp_path)
    with a.client() as c:
        _, run_id, w = waiting_delete(c)
        log = a.home / "serve" / "events" / f"{run_id}.log"
        log.unlink()
        os.mkfifo(log)
        r = c.get(f"/v1/runs/{run_id}/events", headers={"Accept": "text/event-stream"}, timeout=10)
        assert r.status_code == 200  # answered, not waited on (the stream is replayed from the saved run)
        assert c.post(f"/v1/runs/{run_id}/decision", json=decide(w), timeout=10).status_code == 202
        assert ended(c, run_id)["status"] == "completed"  # its events went on in memory
        assert stat.S_ISFIFO(log.lstat().st_mode)
        assert c.get("/healthz").status_code == 200


def test_a_run_whose_files_were_replaced_is_listed_failed_and_the_others_still_show(
    served: Any, tmp_path: Path, caplog: Any
) -> None:
    """A pipe put at one run's transcript: that run reads as failed with a reason (its files named
    in the server's log only, not to the client), its transcript and decision are a 409, and the
    listing still shows every other run; nothing waits on the pipe."""
    a = Attack(served, tmp_path)
    with a.client() as c:
        _, good, _ = waiting_delete(c)
        _, bad, w = waiting_delete(c)
        transcript = next((a.home / "runs" / bad).glob("messages*.jsonl"))
        transcript.unlink()
        os.mkfifo(transcript)
        listed = {r["run_id"]: r for r in c.get("/v1/runs", timeout=10).json()["runs"]}
        assert listed[good]["status"] == "interrupted" and listed[good]["waiting"] is not None
        assert listed[bad]["status"] == "failed" and not listed[bad]["resumable"]
        assert "cannot be read" in listed[bad]["reason"] and str(a.home) not in listed[bad]["reason"]
        assert c.get(f"/v1/runs/{bad}", timeout=10).json()["status"] == "failed"
        r = c.get(f"/v1/runs/{bad}/transcript", timeout=10)
        assert r.status_code == 409 and "cannot be read" in r.json()["error"]["message"], r.text
        assert str(a.home) not in r.text
        r = c.post(f"/v1/runs/{bad}/decision", json=decide(w), timeout=10)
        assert r.status_code == 409, r.text
    assert stat.S_ISFIFO(transcript.lstat().st_mode)


def test_a_session_whose_lock_was_replaced_by_a_pipe_is_not_deleted_half(served: Any, tmp_path: Path) -> None:
    """The conversation goes first and the record only with it: a pipe at the session's lock is a
    409 at once, and the session is still there to delete once the pipe is removed."""
    a = Attack(served, tmp_path)
    with a.client() as c:
        sid, _, _ = waiting_delete(c)
        lock = a.home / "sessions" / f".{sid}.lock"
        lock.unlink(missing_ok=True)
        os.mkfifo(lock)
        r = c.delete(f"/v1/sessions/{sid}", timeout=10)
        assert r.status_code == 409 and "cannot be deleted" in r.json()["error"]["message"], r.text
        assert str(a.home) not in r.text
        assert c.get(f"/v1/sessions/{sid}").status_code == 200
        lock.unlink()
        assert c.delete(f"/v1/sessions/{sid}").status_code == 200
        assert c.get(f"/v1/sessions/{sid}").status_code == 404


def test_a_session_whose_agent_is_gone_after_a_restart_gets_a_clear_error(served: Any, tmp_path: Path) -> None:
    from tether.config import load_settings
    from tether.server.app import create_app

    a = Attack(served, tmp_path)
    with a.client() as c:
        sid, run_id, w = waiting_delete(c)
    a.s.stop()
    renamed = tmp_path / "renamed_agents.py"
    renamed.write_text(AGENTS.replace('{"gate":', '{"gate2":'))
    restarted = start_uvicorn(
        create_app(load_settings(a.home), agent_spec=str(renamed)), what="the restarted server", log_level="critical"
    )
    url = restarted.url
    try:
        for path, body in (
            (f"/v1/runs/{run_id}/decision", decide(w)),
            (f"/v1/sessions/{sid}/messages", {"text": "hi", "message_id": "m-1"}),
        ):
            r = httpx.post(url + path, json=body)  # each on its own connection: a 500 closes it
            assert r.status_code == 409 and r.json()["error"]["code"] == "conflict", (path, r.status_code, r.text)
        again = httpx.post(f"{url}/v1/sessions/{sid}/messages", json={"text": "hi", "message_id": "m-1"})
        assert again.status_code == 409
    finally:
        restarted.stop(10)


# --- widgets ---------------------------------------------------------------------------------------


def test_hostile_widget_labels_come_through_the_api_as_unchanged_strings(served: Any, tmp_path: Path) -> None:
    a = Attack(served, tmp_path)
    with a.client() as c:
        sid = session(c)
        widgets = {}
        for kind in ("buttons", "form"):
            run_id = send(c, sid, kind)["run_id"]
            assert ended(c, run_id)["status"] == "completed"
            live_or_saved = events(c, run_id)
            widgets[kind] = next(e["widget"] for e in live_or_saved if e["event"] == "tool_result")
        buttons, form = widgets["buttons"], widgets["form"]
        assert buttons == {
            "kind": "buttons",
            "title": "<b onmouseover=alert(1)>pick</b>",
            "buttons": [{"label": label} for label in HOSTILE],
        }
        assert (form["title"], form["submit"]) == ("<iframe src=javascript:alert(1)>", "<button formaction=x>")
        select_field, text_field = form["fields"]
        assert select_field["name"] == "__proto__" and select_field["options"] == HOSTILE
        assert select_field["label"] == "<svg onload=alert(1)>" and select_field["value"] == HOSTILE[0]
        assert text_field["value"] == "</textarea><script>alert(1)</script>"
        # a submission that names the hostile fields is kept as data and offered back as such
        chosen = {"__proto__": HOSTILE[4], "constructor": "<img src=x onerror=alert(2)>"}
        send(c, sid, "noted", values=chosen)
        wait_until(lambda: not c.get(f"/v1/sessions/{sid}").json()["turns"][-1]["live"])
        run_id = send(c, sid, "form")["run_id"]
        ended(c, run_id)
        again = next(e["widget"] for e in events(c, run_id) if e["event"] == "tool_result")
        assert {f["name"]: f["value"] for f in again["fields"]} == chosen


@pytest.mark.parametrize("run_processes", [0, 1])
def test_a_runs_failure_reason_names_no_path_of_the_server(
    served: Any, tmp_path: Path, caplog: Any, run_processes: int
) -> None:
    """A run that fails on a file of the server (the session's transcript replaced by a pipe): its
    ``done`` event, its view and its trace tell the client what happened with the server's home
    named ``$TETHER_HOME``, never as a path on the server's disk; the server's log keeps the path.
    The same when the run is driven in a run process of its own."""
    a = Attack(served, tmp_path, run_processes=run_processes)
    with a.client() as c:
        sid = session(c)
        first = send(c, sid, "hello")["run_id"]
        assert ended(c, first)["status"] == "completed"
        transcript = next((a.home / "sessions").glob(f"{sid}*.jsonl"))
        transcript.unlink()
        os.mkfifo(transcript)
        run_id = send(c, sid, "hello again")["run_id"]
        view = ended(c, run_id)
        done = [e for e in events(c, run_id) if e["type"] == "done"][-1]
        # A run that failed later has its end in its trace too, written by the tracer as it is:
        JsonlTracer(a.home / "traces").write(
            Done(run_id, RunResult(run_id=run_id, status="failed", reason=reason_of(transcript)))
        )
        trace = c.get(f"/v1/runs/{run_id}/trace", timeout=10)
    reason = done["result"]["reason"]
    assert view["status"] == "failed" and "$TETHER_HOME/sessions/" in reason, reason
    for text in (reason, view["reason"], trace.text, json.dumps(done)):
        assert str(a.home) not in text and os.path.realpath(a.home) not in text
    assert view["reason"] == reason and "$TETHER_HOME/sessions/" in trace.text
    if not run_processes:  # (a run process logs to the server's stderr, not to this test's records)
        assert any(str(transcript) in r.getMessage() for r in caplog.records)  # the operator's log keeps it
    transcript.unlink()


def reason_of(path: Path) -> str:
    return f"the session file {path} is a named pipe, not a file tether wrote"
