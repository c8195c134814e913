"""The HTTP API from outside: real server on loopback, real runs on the scripted models."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.server.conftest import read_events, wait_until

pytest.importorskip("fastapi")


def start_session(c: httpx.Client, agent: str) -> str:
    r = c.post("/v1/sessions", json={"agent": agent})
    assert r.status_code == 201, r.text
    return str(r.json()["session_id"])


def send(c: httpx.Client, sid: str, text: str, **extra: Any) -> dict[str, Any]:
    r = c.post(f"/v1/sessions/{sid}/messages", json={"text": text, **extra})
    assert r.status_code in (200, 202), r.text
    return dict(r.json())


def finish(c: httpx.Client, run_id: str, after: int = 0) -> list[dict[str, Any]]:
    return read_events(c, f"/v1/runs/{run_id}/events", last_event_id=after or None)


# --- a run over HTTP -------------------------------------------------------------------------------


def test_a_message_starts_a_run_whose_events_stream_with_ids_and_end_with_done(served: Any) -> None:
    s = served()
    with s.client() as c:
        sid = start_session(c, "plan")
        posted = send(c, sid, "Which file mentions a timeout?")
        events = finish(c, posted["run_id"])
        assert [e["id"] for e in events] == list(range(1, len(events) + 1))
        kinds = [e["event"] for e in events]
        assert kinds[-1] == "done" and kinds.count("done") == 1
        assert {"turn", "tool_start", "tool_result", "text_delta"} <= set(kinds)
        assert all(e["type"] == e["event"] and e["run_id"] == posted["run_id"] for e in events)
        # The first event is the run's own ids, sent before its first step.
        assert kinds[0] == "started" and kinds[1] != "started" and kinds.count("started") == 1
        assert (events[0]["message_id"], events[0]["trace_id"]) == (posted["message_id"], posted["trace_id"])
        answer = "".join(e["text"] for e in events if e["event"] == "text_delta")
        done = events[-1]["result"]
        assert done["status"] == "completed" and done["output"] == answer and "timed out" in answer
        run = c.get(f"/v1/runs/{posted['run_id']}").json()
        assert run["status"] == "completed" and run["live"] is False and run["turns"] == 3
        assert run["prompt_tokens"] == done["usage"]["prompt_tokens"] and run["cost_usd"] == done["cost_usd"]
        from tether.telemetry import trace_id_for

        assert posted["trace_id"] == run["trace_id"] == trace_id_for(sid, posted["message_id"])
        # the session lists the turn, and a second message continues the same conversation
        session = c.get(f"/v1/sessions/{sid}").json()
        assert [t["run_id"] for t in session["turns"]] == [posted["run_id"]]
        assert session["title"] == "Which file mentions a timeout?"
        second = send(c, sid, "And which one is largest?")
        finish(c, second["run_id"])
        transcript = c.get(f"/v1/runs/{second['run_id']}/transcript").json()["messages"]
        texts = json.dumps(transcript)
        assert "Which file mentions a timeout?" in texts and "And which one is largest?" in texts
        trace = c.get(f"/v1/runs/{posted['run_id']}/trace").json()["lines"]
        assert trace[-1]["type"] == "run_stopped" and trace[-1]["status"] == "completed"


def test_posting_with_accept_event_stream_streams_the_run_in_the_response(served: Any) -> None:
    s = served()
    with s.client() as c:
        sid = start_session(c, "plan")
        with c.stream(
            "POST", f"/v1/sessions/{sid}/messages", json={"text": "timeout?"}, headers={"Accept": "text/event-stream"}
        ) as r:
            assert r.status_code == 200 and r.headers["content-type"].startswith("text/event-stream")
            from tests.server.conftest import parse_sse

            events = list(parse_sse(r.iter_lines()))
        assert events[-1]["event"] == "done" and events[-1]["result"]["status"] == "completed"


def test_the_same_message_id_never_starts_a_second_run(served: Any) -> None:
    s = served()
    with s.client() as c:
        sid = start_session(c, "plan")
        first = send(c, sid, "timeout?", message_id="msg-1")
        finish(c, first["run_id"])
        again = c.post(f"/v1/sessions/{sid}/messages", json={"text": "timeout?", "message_id": "msg-1"})
        assert again.status_code == 200 and again.json()["run_id"] == first["run_id"]
        assert len(c.get(f"/v1/sessions/{sid}").json()["turns"]) == 1
        other = start_session(c, "plan")
        clash = c.post(f"/v1/sessions/{other}/messages", json={"text": "x", "message_id": "msg-1"})
        assert clash.status_code == 409 and "another session" in clash.json()["error"]["message"]


def test_a_session_answers_one_message_at_a_time(served: Any) -> None:
    s = served()
    with s.client() as c:
        sid = start_session(c, "slow")
        first = send(c, sid, "scan the archive")
        busy = c.post(f"/v1/sessions/{sid}/messages", json={"text": "and again"})
        assert busy.status_code == 409
        assert first["run_id"] in busy.json()["error"]["message"] and "cancel" in busy.json()["error"]["message"]
        (Path(s.home).parent / "workspace0" / "release").write_text("go")
        assert finish(c, first["run_id"])[-1]["result"]["status"] == "completed"


def test_reconnecting_with_last_event_id_gets_exactly_what_was_missed(served: Any) -> None:
    s = served()
    with s.client() as c:
        sid = start_session(c, "slow")
        run_id = send(c, sid, "scan the archive")["run_id"]
        # the client goes away after the tool starts; the run keeps going without it
        first = read_events(c, f"/v1/runs/{run_id}/events", until=lambda e: e["event"] == "tool_start")
        (Path(s.home).parent / "workspace0" / "release").write_text("go")
        wait_until(lambda: c.get(f"/v1/runs/{run_id}").json()["status"] == "completed", what="the run to end")
        rest = read_events(c, f"/v1/runs/{run_id}/events", last_event_id=first[-1]["id"])
        everything = read_events(c, f"/v1/runs/{run_id}/events")
        assert first + rest == everything
        assert rest[0]["id"] == first[-1]["id"] + 1 and rest[-1]["event"] == "done"
        by_query = read_events(c, f"/v1/runs/{run_id}/events?after={first[-1]['id']}")
        assert by_query == rest
        # after the done event there is nothing more to wait for
        assert read_events(c, f"/v1/runs/{run_id}/events", last_event_id=everything[-1]["id"]) == []


# --- approvals -------------------------------------------------------------------------------------


def _waiting_run(c: httpx.Client) -> tuple[str, list[dict[str, Any]], dict[str, Any]]:
    sid = start_session(c, "destructive")
    run_id = send(c, sid, "free some space")["run_id"]
    events = finish(c, run_id)
    assert events[-1]["result"]["status"] == "interrupted"
    run = c.get(f"/v1/runs/{run_id}").json()
    return run_id, events, run


def test_an_approval_is_bound_to_the_waiting_call_and_its_arguments(served: Any) -> None:
    s = served()
    target = Path(s.home).parent / "workspace0" / "access.log"
    with s.client() as c:
        run_id, events, run = _waiting_run(c)
        asked = next(e for e in events if e["event"] == "approval_required")
        waiting = run["waiting"]
        assert waiting["call_id"] == asked["call_id"] and waiting["args_hash"] == asked["args_hash"]
        assert waiting["tool_name"] == "delete_file" and waiting["args"] == {"path": "access.log"}
        url = f"/v1/runs/{run_id}/decision"
        wrong_call = c.post(url, json={"call_id": "c9", "args_hash": asked["args_hash"], "approve": True})
        wrong_args = c.post(url, json={"call_id": asked["call_id"], "args_hash": "0" * 64, "approve": True})
        assert wrong_call.status_code == wrong_args.status_code == 409
        assert target.exists(), "a refused decision must not run anything"
        ok = c.post(url, json={"call_id": asked["call_id"], "args_hash": asked["args_hash"], "approve": True})
        assert ok.status_code == 202, ok.text
        again = c.post(url, json={"call_id": asked["call_id"], "args_hash": asked["args_hash"], "approve": True})
        assert again.status_code == 409  # decided once: a second click acts on nothing
        more = finish(c, run_id, after=events[-1]["id"])
        assert more[0]["id"] == events[-1]["id"] + 1
        assert [e["event"] for e in more][:2] == ["decision", "tool_start"]
        assert more[-1]["result"]["status"] == "completed" and not target.exists()
        assert (
            c.post(
                url, json={"call_id": asked["call_id"], "args_hash": asked["args_hash"], "approve": True}
            ).status_code
            == 409
        )


def test_a_rejection_with_a_reason_reaches_the_model(served: Any) -> None:
    s = served()
    target = Path(s.home).parent / "workspace0" / "access.log"
    with s.client() as c:
        run_id, w, more, decision = _decided(c, approve=False, reason="we need those logs")
        assert decision["decision"] == "rejected" and decision["reason"] == "we need those logs"
        assert "declined" in more[-1]["result"]["output"] and target.exists()
        # the model reads the refusal, with the person's words, as the call's result
        result = _result_of(c, run_id, w["call_id"])
        assert result["status"] == "rejected"
        assert _text(result) == "The user declined this call to delete_file; it was not run. Reason: we need those logs"
        lines = c.get(f"/v1/runs/{run_id}/trace").json()["lines"]
        assert {
            "type": "decision",
            "call_id": w["call_id"],
            "decision": "rejected",
            "reason": "we need those logs",
        }.items() <= next(x for x in lines if x["type"] == "decision").items()


def test_an_approval_with_a_reason_is_recorded_in_words(served: Any) -> None:
    s = served()
    target = Path(s.home).parent / "workspace0" / "access.log"
    with s.client() as c:
        run_id, w, more, decision = _decided(c, approve=True, reason="  it was rotated yesterday  ")
        assert decision["decision"] == "approved" and decision["reason"] == "it was rotated yesterday"
        assert more[-1]["result"]["status"] == "completed" and not target.exists()
        # the model reads the person's words before what the tool did
        result = _result_of(c, run_id, w["call_id"])
        assert result["status"] == "ok"
        said = _text(result)
        assert said.startswith("[The user approved this call to delete_file. Reason: it was rotated yesterday]\n")
        assert "access.log" in said.split("\n", 1)[1]
        lines = c.get(f"/v1/runs/{run_id}/trace").json()["lines"]
        assert next(x for x in lines if x["type"] == "decision")["reason"] == "it was rotated yesterday"
        # an approval without words adds none
        run_id, w, _, _ = _decided(c, approve=True)
        assert not _text(_result_of(c, run_id, w["call_id"])).startswith("[The user approved")


def _decided(
    c: httpx.Client, *, approve: bool, reason: str | None = None
) -> tuple[str, dict[str, Any], list[dict[str, Any]], dict[str, Any]]:
    """A run waiting for approval, decided (with ``reason`` when given) and read to its end: its id,
    what it waited for, the events after the decision, and the decision event."""
    run_id, events, run = _waiting_run(c)
    w = run["waiting"]
    body: dict[str, Any] = {"call_id": w["call_id"], "args_hash": w["args_hash"], "approve": approve}
    if reason is not None:
        body["reason"] = reason
    assert c.post(f"/v1/runs/{run_id}/decision", json=body).status_code == 202
    more = finish(c, run_id, after=events[-1]["id"])
    return run_id, w, more, next(e for e in more if e["event"] == "decision")


def _result_of(c: httpx.Client, run_id: str, call_id: str) -> dict[str, Any]:
    messages = c.get(f"/v1/runs/{run_id}/transcript").json()["messages"]
    found: dict[str, Any] = next(m for m in messages if m["role"] == "tool" and m["call_id"] == call_id)
    return found


def _text(message: dict[str, Any]) -> str:
    return "".join(p["text"] for p in message["content"] if p["type"] == "text")


# --- cancel and resume -----------------------------------------------------------------------------


def test_cancel_stops_a_live_run_resumably_and_resume_finishes_it(served: Any) -> None:
    s = served()
    with s.client() as c:
        sid = start_session(c, "slow")
        run_id = send(c, sid, "scan")["run_id"]
        read_events(c, f"/v1/runs/{run_id}/events", until=lambda e: e["event"] == "tool_start")
        r = c.post(f"/v1/runs/{run_id}/cancel")
        assert r.status_code == 202
        run = c.get(f"/v1/runs/{run_id}").json()
        assert run["status"] == "interrupted" and run["resumable"] and not run["live"]
        assert "stopped by the user" in run["reason"]
        assert c.post(f"/v1/runs/{run_id}/cancel").status_code == 409
        (Path(s.home).parent / "workspace0" / "release").write_text("go")
        assert c.post(f"/v1/runs/{run_id}/resume").status_code == 202
        assert finish(c, run_id)[-1]["result"]["status"] == "completed"
        done = c.post(f"/v1/runs/{run_id}/resume")
        assert done.status_code == 409 and "already ended" in done.json()["error"]["message"]


# --- who sees what ---------------------------------------------------------------------------------


def test_tokens_are_required_once_they_exist_and_each_user_sees_only_their_own(served: Any) -> None:
    s = served(tokens=["alice", "bob"])
    with httpx.Client(base_url=s.url) as anon, s.client("alice") as alice, s.client("bob") as bob:
        r = anon.get("/v1/sessions")
        assert r.status_code == 401 and r.headers["www-authenticate"] == "Bearer"
        bad = anon.get("/v1/sessions", headers={"Authorization": "Bearer tt_not-a-token"})
        assert bad.status_code == 401 and "not valid" in bad.json()["error"]["message"]
        assert alice.get("/v1/me").json() == {"user": "alice", "auth": True}
        sid = start_session(alice, "destructive")
        posted = send(alice, sid, "free some space")
        run_id, mid = posted["run_id"], posted["message_id"]
        events = finish(alice, run_id)
        w = alice.get(f"/v1/runs/{run_id}").json()["waiting"]
        assert bob.get("/v1/sessions").json()["sessions"] == []
        assert bob.get("/v1/runs").json()["runs"] == []
        for path in (
            f"/v1/sessions/{sid}",
            f"/v1/runs/{run_id}",
            f"/v1/runs/{run_id}/events",
            f"/v1/runs/{run_id}/transcript",
            f"/v1/runs/{run_id}/trace",
        ):
            r = bob.get(path)
            assert r.status_code == 404 and r.json()["error"]["code"] == "not_found", path
        for path, body in (
            (f"/v1/sessions/{sid}/messages", {"text": "hi"}),
            (f"/v1/runs/{run_id}/decision", {"call_id": w["call_id"], "args_hash": w["args_hash"], "approve": True}),
            (f"/v1/runs/{run_id}/cancel", None),
            (f"/v1/runs/{run_id}/resume", None),
            (f"/v1/messages/{mid}/feedback", {"score": "down"}),
        ):
            r = bob.post(path, json=body) if body is not None else bob.post(path)
            assert r.status_code == 404, (path, r.text)
        assert alice.get(f"/v1/runs/{run_id}").json()["status"] == "interrupted"  # bob's approval did nothing
        assert len(events) and alice.get("/v1/feedback").json()["feedback"] == []
        assert [x["session_id"] for x in alice.get("/v1/sessions").json()["sessions"]] == [sid]


def test_token_commands_store_only_a_hash(served: Any, tmp_path: Path) -> None:
    import os
    import subprocess

    env = {**os.environ, "TETHER_HOME": str(tmp_path / "h")}
    made = subprocess.run(["tether", "serve", "token", "create", "carol"], env=env, capture_output=True, text=True)
    assert made.returncode == 0, made.stderr
    token = made.stdout.strip()
    assert token.startswith("tt_") and len(token) > 40
    db = (tmp_path / "h" / "serve" / "server.db").read_bytes()
    assert token.encode() not in db
    listed = subprocess.run(["tether", "serve", "token", "list"], env=env, capture_output=True, text=True)
    assert listed.stdout.startswith("carol\t") and token not in listed.stdout
    revoked = subprocess.run(["tether", "serve", "token", "revoke", "carol"], env=env, capture_output=True, text=True)
    assert revoked.returncode == 0
    refused = subprocess.run(
        ["tether", "serve", "--host", "0.0.0.0", "--port", "0"], env=env, capture_output=True, text=True, timeout=30
    )
    assert refused.returncode == 2 and "refusing to listen on 0.0.0.0 without tokens" in refused.stderr
    assert "every token was revoked, so it would refuse everyone" in refused.stderr  # not "anyone could"


def test_after_the_last_token_is_revoked_token_list_says_what_the_server_does(served: Any) -> None:
    """Once a token has existed the server refuses everyone (never falls back to answering on
    loopback); `tether serve token list` says exactly that."""
    import os
    import subprocess

    s = served(tokens=["dave"])
    env = {**os.environ, "TETHER_HOME": str(s.home)}
    revoked = subprocess.run(["tether", "serve", "token", "revoke", "dave"], env=env, capture_output=True, text=True)
    assert revoked.returncode == 0, revoked.stderr
    listed = subprocess.run(["tether", "serve", "token", "list"], env=env, capture_output=True, text=True)
    assert "refuses every request (401)" in listed.stderr and "loopback" not in listed.stderr
    with s.client() as anon:
        assert anon.get("/v1/sessions").status_code == 401  # on loopback too
    fresh = {**os.environ, "TETHER_HOME": str(s.home / "never")}
    never = subprocess.run(["tether", "serve", "token", "list"], env=fresh, capture_output=True, text=True)
    assert "answers on loopback only" in never.stderr


def test_serve_on_a_busy_port_says_so_with_its_own_exit_code(tmp_path: Path) -> None:
    import os
    import socket
    import subprocess

    from tether.cli.serve import EXIT_CANNOT_LISTEN

    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        env = {**os.environ, "TETHER_HOME": str(tmp_path / "h")}
        out = subprocess.run(
            ["tether", "serve", "--model", "scripted/hello", "--port", str(port)],
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
        )
    assert out.returncode == EXIT_CANNOT_LISTEN != 3, out.stderr
    assert f"cannot listen on 127.0.0.1:{port}: another process already listens there" in out.stderr
    assert "--port 0" in out.stderr and "Errno" not in out.stderr


def test_tether_runs_shows_the_prompt_of_a_run_made_through_the_server(served: Any) -> None:
    import os
    import subprocess

    s = served()
    with s.client() as c:
        sid = start_session(c, "plan")
        finish(c, send(c, sid, "Which file mentions a timeout?")["run_id"])
    env = {**os.environ, "TETHER_HOME": str(s.home)}
    listed = subprocess.run(["tether", "runs"], env=env, capture_output=True, text=True)
    assert "'Which file mentions a timeout?'" in listed.stdout and "''" not in listed.stdout, listed.stdout


# --- bad input -------------------------------------------------------------------------------------


def test_bad_requests_get_clear_errors_and_change_nothing(served: Any) -> None:
    s = served(config="[serve]\nmax_body_bytes = 4096\n")
    with s.client() as c:
        sid = start_session(c, "plan")
        url = f"/v1/sessions/{sid}/messages"
        cases = [
            (
                c.post(url, content=b'{"text": "hi"', headers={"Content-Type": "application/json"}),
                400,
                "not valid JSON",
            ),
            (
                c.post(url, content=b"text=hi", headers={"Content-Type": "application/x-www-form-urlencoded"}),
                415,
                "application/json",
            ),
            (c.post(url, json={"text": ""}), 400, "text"),
            (c.post(url, json={"text": "hi", "colour": "red"}), 400, "colour is not a known field"),
            (c.post(url, json={"text": 5}), 400, "text"),
            (c.post(url, json={}), 400, "text is required"),
            (c.post(url, json={"text": "hi", "message_id": "../etc"}), 400, "message_id"),
            (c.post(url, json={"text": "x" * 5000}), 413, "larger than this server accepts"),
            (c.post("/v1/sessions/s_nope/messages", json={"text": "hi"}), 404, "no session 's_nope'"),
            (c.get("/v1/runs/run_nope"), 404, "no run 'run_nope'"),
            (c.post("/v1/sessions", json={"agent": "nobody"}), 400, "no agent 'nobody'"),
            (c.post("/v1/messages/m_nope/feedback", json={"score": "up"}), 404, "no message"),
            (c.get("/v1/nothing-here"), 404, "no route"),
        ]
        for r, status, words in cases:
            assert r.status_code == status, (status, r.text)
            assert words in r.json()["error"]["message"], r.text
        chunked = c.post(
            url, content=iter([b'{"text": "', b"y" * 5000, b'"}']), headers={"Content-Type": "application/json"}
        )
        assert chunked.status_code == 413
        assert c.get(f"/v1/sessions/{sid}").json()["turns"] == []
        run_id = send(c, sid, "timeout?")["run_id"]
        finish(c, run_id)
        bad_id = c.get(f"/v1/runs/{run_id}/events", headers={"Last-Event-ID": "abc"})
        assert bad_id.status_code == 400 and "Last-Event-ID" in bad_id.json()["error"]["message"]
        bad_score = c.post(
            f"/v1/messages/{c.get(f'/v1/runs/{run_id}').json()['message_id']}/feedback", json={"score": "meh"}
        )
        assert bad_score.status_code == 400


def test_cross_site_requests_and_foreign_hosts_are_refused(served: Any) -> None:
    s = served()
    with s.client() as c:
        evil = c.post("/v1/sessions", json={}, headers={"Origin": "https://evil.example"})
        assert evil.status_code == 403 and evil.json()["error"]["code"] == "cross_site"
        fetch_meta = c.post("/v1/sessions", json={}, headers={"Sec-Fetch-Site": "cross-site"})
        assert fetch_meta.status_code == 403
        same = c.post("/v1/sessions", json={}, headers={"Origin": s.url})
        assert same.status_code == 201
        rebound = c.get("/v1/sessions", headers={"Host": "attacker.example"})
        assert rebound.status_code == 421 and "loopback" in rebound.json()["error"]["message"]
        assert len(c.get("/v1/sessions").json()["sessions"]) == 1


def test_cors_is_off_unless_origins_are_listed(served: Any) -> None:
    app, evil = "https://app.example", "https://evil.example"

    def preflight(c: httpx.Client, origin: str) -> httpx.Response:
        return c.options(
            "/v1/sessions",
            headers={
                "Origin": origin,
                "Access-Control-Request-Method": "POST",
                "Access-Control-Request-Headers": "authorization,content-type",
            },
        )

    with served().client() as c:  # none listed: no browser page elsewhere may call it or read it
        assert "access-control-allow-origin" not in preflight(c, app).headers
        read = c.get("/v1/sessions", headers={"Origin": app})
        assert read.status_code == 200 and "access-control-allow-origin" not in read.headers
        assert c.post("/v1/sessions", json={}, headers={"Origin": app}).status_code == 403
    with served(config=f'[serve]\ncors_origins = ["{app}"]\n').client() as c:
        allowed = preflight(c, app)
        assert allowed.status_code == 200 and allowed.headers["access-control-allow-origin"] == app
        assert {"GET", "POST"} <= set(allowed.headers["access-control-allow-methods"].replace(" ", "").split(","))
        assert {"authorization", "content-type"} <= set(
            allowed.headers["access-control-allow-headers"].lower().replace(" ", "").split(",")
        )
        made = c.post("/v1/sessions", json={}, headers={"Origin": app})
        assert made.status_code == 201 and made.headers["access-control-allow-origin"] == app
        read = c.get("/v1/sessions", headers={"Origin": app})
        assert read.headers["access-control-allow-origin"] == app
        # an origin not listed is still refused, and given nothing to read
        assert "access-control-allow-origin" not in preflight(c, evil).headers
        assert c.post("/v1/sessions", json={}, headers={"Origin": evil}).status_code == 403
        assert "access-control-allow-origin" not in c.get("/v1/sessions", headers={"Origin": evil}).headers
        assert len(c.get("/v1/sessions").json()["sessions"]) == 1


def test_agents_lists_what_the_server_offers(served: Any) -> None:
    s = served(tokens=["alice"])
    with httpx.Client(base_url=s.url) as anon:
        assert anon.get("/v1/agents").status_code == 401
    with s.client("alice") as c:
        agents = c.get("/v1/agents").json()["agents"]
    assert [a["name"] for a in agents] == ["plan", "destructive", "slow", "configure", "xss", "gated"]
    assert agents[0] == {"name": "plan", "model": "scripted/plan", "description": "reads files"}
    assert agents[1] == {"name": "destructive", "model": "scripted/destructive", "description": ""}
    with served(agents_module=Path(__file__).with_name("kb_agents.py")).client() as c:
        # a model given as an object is named by its provider
        assert c.get("/v1/agents").json()["agents"] == [{"name": "kb", "model": "function", "description": ""}]
        sid = start_session(c, "kb")
        assert c.post("/v1/sessions", json={"agent": "plan"}).status_code == 400
        assert c.get(f"/v1/sessions/{sid}").json()["agent"] == "kb"


def test_limit_keeps_the_newest_of_each_list(served: Any) -> None:
    s = served()
    with s.client() as c:
        sessions, runs = [], []
        for n in range(3):
            sid = start_session(c, "xss")
            sessions.append(sid)
            run = send(c, sid, f"question {n}", message_id=f"m{n}")
            finish(c, run["run_id"])
            runs.append(run["run_id"])
            assert c.post(f"/v1/messages/m{n}/feedback", json={"score": "up"}).status_code == 201
        newest = list(reversed(runs))
        assert [r["run_id"] for r in c.get("/v1/runs").json()["runs"]] == newest
        assert [r["run_id"] for r in c.get("/v1/runs", params={"limit": 2}).json()["runs"]] == newest[:2]
        assert [x["session_id"] for x in c.get("/v1/sessions", params={"limit": 2}).json()["sessions"]] == list(
            reversed(sessions)
        )[:2]
        assert [f["message_id"] for f in c.get("/v1/feedback", params={"limit": 1}).json()["feedback"]] == ["m2"]
        assert len(c.get("/v1/feedback", params={"limit": 1000}).json()["feedback"]) == 3
        for path in ("/v1/runs", "/v1/sessions", "/v1/feedback"):
            for bad in ("0", "-1", "1001", "two"):
                r = c.get(path, params={"limit": bad})
                assert r.status_code == 400 and r.json()["error"]["message"].startswith("query.limit: "), (
                    path,
                    bad,
                    r.text,
                )


def test_the_page_and_the_openapi_document_are_served(served: Any) -> None:
    s = served()
    with s.client() as c:
        page = c.get("/")
        assert page.status_code == 200 and "text/html" in page.headers["content-type"]
        csp = page.headers["content-security-policy"]
        assert "script-src 'self'" in csp and "unsafe-inline" not in csp.split("script-src")[1].split(";")[0]
        spec = c.get("/openapi.json").json()
        for path in (
            "/v1/sessions",
            "/v1/sessions/{session_id}/messages",
            "/v1/runs/{run_id}/events",
            "/v1/runs/{run_id}/decision",
            "/v1/runs/{run_id}/cancel",
            "/v1/messages/{message_id}/feedback",
        ):
            assert path in spec["paths"], path


# --- feedback and widgets --------------------------------------------------------------------------


def test_feedback_is_joined_to_the_run_and_trace_that_earned_it(served: Any) -> None:
    s = served()
    with s.client() as c:
        sid = start_session(c, "plan")
        posted = send(c, sid, "timeout?")
        finish(c, posted["run_id"])
        url = f"/v1/messages/{posted['message_id']}/feedback"
        r = c.post(url, json={"score": "down", "comment": "wrong file"})
        assert r.status_code == 201
        got = r.json()
        assert (got["run_id"], got["trace_id"], got["score"], got["comment"]) == (
            posted["run_id"],
            posted["trace_id"],
            "down",
            "wrong file",
        )
        c.post(url, json={"score": "up"})
        listed = c.get("/v1/feedback").json()["feedback"]
        assert len(listed) == 1 and listed[0]["score"] == "up" and listed[0]["comment"] is None


def test_a_configurator_offers_buttons_then_a_form_that_keeps_earlier_choices(served: Any) -> None:
    s = served()
    with s.client() as c:
        sid = start_session(c, "configure")

        def widget_of(text: str, **extra: Any) -> dict[str, Any] | None:
            events = finish(c, send(c, sid, text, **extra)["run_id"])
            assert events[-1]["result"]["status"] == "completed", events[-1]
            return next((e["widget"] for e in events if e["event"] == "tool_result" and "widget" in e), None)

        offer = widget_of("I need a cabinet heater")
        assert offer is not None and offer["kind"] == "buttons"
        label = offer["buttons"][0]["label"]
        assert label == "I want to configure the LB series."
        form = widget_of(label)
        assert form is not None and form["kind"] == "form"
        fields = {f["name"]: f for f in form["fields"]}
        assert fields["voltage"]["type"] == "select" and fields["voltage"]["value"] == "24 V DC"
        assert fields["power"]["type"] == "number" and fields["power"]["value"] == 100
        assert (
            widget_of("Supply voltage: 230 V AC; Heating power (W): 250", values={"voltage": "230 V AC", "power": 250})
            is None
        )
        again = widget_of(label)
        assert again is not None
        assert {f["name"]: f["value"] for f in again["fields"]} == {"voltage": "230 V AC", "power": 250}


def test_a_session_can_be_renamed_and_deleted_by_its_owner_only(served: Any) -> None:
    s = served(tokens=["alice", "bob"])
    with s.client("alice") as alice, s.client("bob") as bob:
        sid = start_session(alice, "plan")
        posted = send(alice, sid, "Which file mentions a timeout?")
        finish(alice, posted["run_id"])
        renamed = alice.patch(f"/v1/sessions/{sid}", json={"title": "  Timeouts \n in logs "})
        assert renamed.status_code == 200 and renamed.json()["title"] == "Timeouts in logs"
        assert alice.patch(f"/v1/sessions/{sid}", json={"title": "   "}).status_code == 400
        assert bob.patch(f"/v1/sessions/{sid}", json={"title": "mine"}).status_code == 404
        assert bob.delete(f"/v1/sessions/{sid}").status_code == 404
        assert alice.post(f"/v1/messages/{posted['message_id']}/feedback", json={"score": "up"}).status_code == 201
        assert alice.delete(f"/v1/sessions/{sid}").json() == {"session_id": sid, "deleted": True}
        assert alice.get(f"/v1/sessions/{sid}").status_code == 404
        assert alice.get("/v1/sessions").json()["sessions"] == [] and alice.get("/v1/feedback").json()["feedback"] == []
        assert alice.get(f"/v1/runs/{posted['run_id']}").status_code == 404


def test_stop_says_who_stopped_the_run_in_words(served: Any) -> None:
    s = served()
    with s.client() as c:
        sid = start_session(c, "slow")
        posted = send(c, sid, "scan the archive")
        read_events(c, posted["events"], until=lambda e: e["event"] == "tool_start")
        stopped = c.post(f"/v1/runs/{posted['run_id']}/cancel").json()
        assert stopped["reason"].endswith("stopped by the user"), stopped["reason"]
        assert "from the API" not in stopped["reason"] and "local" not in stopped["reason"]


def test_a_message_refused_because_another_node_started_a_run_leaves_no_failed_turn(served: Any) -> None:
    """Two nodes on Postgres: the message that loses the race is answered 409 when its start is
    refused; it must not stay in the session as a run that "never began", and the same
    message_id can be sent again once the session is free."""
    from tether.errors import StoreError

    s = served()
    manager = s.app.state.core.manager
    real_start = manager.start
    refused: list[str] = []

    def start_refused_once(turn: Any, text: str, chosen: dict[str, Any]) -> Any:
        if not refused:
            refused.append(turn.run_id)
            raise StoreError(f"session {turn.session_id} is still answering (run r_other)")
        return real_start(turn, text, chosen)

    manager.start = start_refused_once
    with s.client() as c:
        sid = start_session(c, "plan")
        lost = c.post(
            f"/v1/sessions/{sid}/messages", json={"text": "Which file mentions a timeout?", "message_id": "m-race"}
        )
        assert lost.status_code == 409 and "nothing was started" in lost.json()["error"]["message"]
        session = c.get(f"/v1/sessions/{sid}").json()
        assert session["turns"] == [] and session["title"] == "New chat"
        assert c.get(f"/v1/runs/{refused[0]}").status_code == 404
        again = send(c, sid, "Which file mentions a timeout?", message_id="m-race")
        assert again["run_id"] != refused[0]
        assert finish(c, again["run_id"])[-1]["result"]["status"] == "completed"
        assert [t["status"] for t in c.get(f"/v1/sessions/{sid}").json()["turns"]] == ["completed"]


@pytest.mark.parametrize("spec_version", ["2.3", "2.4"])
def test_an_event_stream_sends_its_head_and_the_events_already_there_from_the_requests_own_task(
    spec_version: str,
) -> None:
    """Under a burst of requests, a stream started in a task of its own is queued behind every
    request waiting: the head, the retry line and a new run's ``started`` go out before the stream's
    generator (and any task) runs."""
    import asyncio

    from tether.server.app import _EventStream

    began: list[bool] = []
    sent: list[tuple[str, bytes, bool]] = []

    async def rest() -> Any:
        began.append(True)
        yield "id: 2\nevent: done\ndata: {}\n\n"

    async def send(message: dict[str, Any]) -> None:
        sent.append((message["type"], message.get("body", b""), bool(began)))

    async def receive() -> dict[str, Any]:
        await asyncio.sleep(3600)  # the client never leaves
        return {"type": "http.disconnect"}

    ready = 'retry: 1000\n\nid: 1\nevent: started\ndata: {"type":"started"}\n\n'
    scope = {"type": "http", "asgi": {"spec_version": spec_version}}
    asyncio.run(_EventStream(ready, rest())(scope, receive, send))
    assert sent[0][0] == "http.response.start" and not sent[0][2]
    assert sent[1] == ("http.response.body", ready.encode(), False)  # before the generator began
    assert sent[2][1].startswith(b"id: 2") and sent[-1][1] == b""
    assert [m[0] for m in sent].count("http.response.start") == 1
