"""``tether mcp serve`` attacked from outside, session 13: raw JSON-RPC over stdio and over
streamable HTTP, as clients nobody on the team wrote would send it. The agent served here is held:
its model waits for a file, so a call is surely still running while the test sends what it sends
(no sleep decides it). Each test says what was wrong before its fix."""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.connectors.test_attack_mcp_round2 import Wire
from tests.connectors.test_mcp_serve import start_http
from tether.harness.store import RunStore

pytest.importorskip("mcp", reason="tether mcp serve needs the mcp extra: tether[mcp] (the [test] extra installs it)")

# The model of agent `held` notes each run it starts in `started`, then answers with its task once
# the file `go` exists (a cancelled call stops it waiting).
HELD_AGENT = """\
from pathlib import Path

import anyio

from tether import Agent
from tether.testing import FunctionModel

HERE = Path(__file__).parent


async def reply(messages, request):
    with (HERE / "started").open("a") as f:
        f.write("run\\n")
    while not (HERE / "go").exists():
        await anyio.sleep(0.02)
    return "done: " + messages[-1].content[0].text


agents = {"held": Agent(FunctionModel(reply), cwd=str(HERE))}
"""
INIT = {
    "jsonrpc": "2.0",
    "id": 0,
    "method": "initialize",
    "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}},
}


def held_home(tmp_path: Path) -> Path:
    """A home whose `[serve] agent` is the held agent's file (in tmp_path, beside `started` and `go`)."""
    (tmp_path / "agents.py").write_text(HELD_AGENT)
    home = tmp_path / "home"
    home.mkdir()
    (home / "config.toml").write_text(f'[serve]\nagent = "{tmp_path / "agents.py"}"\n')
    return home


def call(ident: Any, task: str) -> dict[str, Any]:
    params = {"name": "agent_held", "arguments": {"task": task}}
    return {"jsonrpc": "2.0", "id": ident, "method": "tools/call", "params": params}


def runs_started(tmp_path: Path, count: int) -> None:
    """Wait (at most 30 s, a hang guard) until the held model has been asked ``count`` times."""
    deadline = time.monotonic() + 30
    while not (started := tmp_path / "started").exists() or len(started.read_text().splitlines()) < count:
        assert time.monotonic() < deadline, "the held agent's run did not start"
        time.sleep(0.02)


def answered(http: httpx.Client, url: str, body: Any, headers: dict[str, str]) -> httpx.Response:
    """The answer to a POST, which must come within 30 s (a hang guard: the SSE stream of a request
    that is never answered is kept open by pings, so httpx's read timeout never fires)."""
    pool = ThreadPoolExecutor(1)
    try:
        return pool.submit(http.post, url, json=body, headers=headers).result(timeout=30)
    finally:
        pool.shutdown(wait=False)  # a hung POST ends when the server is stopped


def tasks_run(home: Path) -> list[str]:
    return sorted(r["ext"]["config"]["prompt"] for r in RunStore(home / "runs").list())


def test_stdio_refuses_a_running_ones_id_and_says_what_is_wrong_with_what_it_cannot_take(tmp_path: Path) -> None:
    """Was: a second request under a running one's id ran too (the agent ran twice, two answers came
    with id 1, and the first could no longer be cancelled); a request before initialize and params
    of the wrong shape both got only "Invalid request parameters" (-32602, no data); a notification
    sent with an id was "Method not found" (a cancellation sent so cancelled nothing). Now each is
    refused at once, saying why, and the session goes on; an answered request's id is free again."""
    home = held_home(tmp_path)
    wire = Wire(home)
    try:
        wire.send({"jsonrpc": "2.0", "id": 1, "method": "tools/list"})
        early = wire.answer()
        wire.handshake()
        wire.send({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "agent_held", "arguments": 7}})
        shape = wire.answer()
        wire.send({"jsonrpc": "2.0", "id": 3, "method": "notifications/cancelled", "params": {"requestId": 2}})
        notification = wire.answer()
        wire.send(call(1, "first"))
        runs_started(tmp_path, 1)
        wire.send(call(1, "second"))
        refused = wire.answer()
        wire.send({"jsonrpc": "2.0", "id": 4, "method": "ping"})
        pong = wire.answer()
        (tmp_path / "go").touch()
        first = wire.answer()
        wire.send(call(1, "third"))  # the first is answered: its id may be used again
        third = wire.answer()
    finally:
        code, _, err = wire.close()
    assert early is not None and early["id"] == 1 and early["error"]["code"] == -32602
    assert early["error"]["message"] == (
        "The session is not initialized, so tools/list was not run: send initialize, then notifications/initialized, "
        "first"
    )
    assert shape is not None and shape["id"] == 2 and shape["error"]["code"] == -32602
    assert "Invalid params for tools/call: " in shape["error"]["message"]
    assert "arguments: Input should be a valid dictionary" in shape["error"]["message"]
    assert notification == {
        "jsonrpc": "2.0",
        "id": 3,
        "error": {
            "code": -32600,
            "message": "Invalid request: notifications/cancelled is a notification: send it without an id",
        },
    }
    assert refused is not None and refused["id"] == 1 and refused["error"]["code"] == -32600, refused
    assert "is taken by a request still running in this session, so this one was not run" in refused["error"]["message"]
    assert pong == {"jsonrpc": "2.0", "id": 4, "result": {}}
    assert first is not None and first["id"] == 1 and first["result"]["structuredContent"]["output"] == "done: first"
    assert third is not None and third["result"]["structuredContent"]["output"] == "done: third"
    assert tasks_run(home) == ["first", "third"]
    assert code == 0 and "Traceback" not in err


def test_http_refuses_a_running_ones_id_and_answers_every_malformed_post_as_stdio_does(tmp_path: Path) -> None:
    """Was, over streamable HTTP: a second request under a running one's id ran the agent again and
    one of the two POSTs was never answered; a batch or "jsonrpc": "1.0" got -32602 with a pydantic
    dump; a request whose id is null or a float got 202 and never an answer; a notification with an
    id got "Method not found"; an unknown protocol version header was told about "_meta envelope
    keys", never about the header. Now each gets HTTP 400 and the -32600 stdio gives, and the session
    goes on."""
    home = held_home(tmp_path)
    accept = {"Accept": "application/json, text/event-stream"}
    for url in start_http(home):
        with httpx.Client(timeout=30, headers=accept) as http:
            opened = http.post(url, json=INIT)
            headers = {"mcp-session-id": opened.headers["mcp-session-id"], "mcp-protocol-version": "2025-06-18"}
            http.post(url, json={"jsonrpc": "2.0", "method": "notifications/initialized"}, headers=headers)
            with http.stream("POST", url, json=call(1, "first"), headers=headers) as first:
                assert first.status_code == 200  # the call is under way (its id taken before the answer began)
                runs_started(tmp_path, 1)
                posts = [
                    call(1, "second"),
                    [{"jsonrpc": "2.0", "id": 5, "method": "ping"}],
                    {"jsonrpc": "1.0", "id": 6, "method": "ping"},
                    {"jsonrpc": "2.0", "id": None, "method": "tools/list"},
                    {"jsonrpc": "2.0", "id": 1.5, "method": "tools/list"},
                    {"jsonrpc": "2.0", "id": 7, "method": "notifications/cancelled", "params": {"requestId": 1}},
                ]
                answers = [answered(http, url, body, headers) for body in posts]
                old = {**headers, "mcp-protocol-version": "1999-01-01"}
                answers.append(answered(http, url, {"jsonrpc": "2.0", "id": 9, "method": "ping"}, old))
                (tmp_path / "go").touch()
                said = first.read().decode()
            pong = http.post(url, json={"jsonrpc": "2.0", "id": 8, "method": "ping"}, headers=headers)
    assert [(a.status_code, a.json()["id"], a.json()["error"]["code"]) for a in answers] == [
        (400, 1, -32600),
        (400, None, -32600),
        (400, 6, -32600),
        (400, None, -32600),
        (400, None, -32600),
        (400, 7, -32600),
        (400, 9, -32600),
    ]
    messages = [a.json()["error"]["message"] for a in answers]
    assert "still running in this session, so this one was not run" in messages[0]
    assert "batches are not supported" in messages[1] and '"jsonrpc" must be "2.0"' in messages[2]
    assert messages[3].endswith("not null") and messages[4].endswith("not 1.5")
    assert messages[5].endswith("notifications/cancelled is a notification: send it without an id")
    assert 'the mcp-protocol-version header says "1999-01-01", which this server does not speak (' in messages[6]
    assert '"output":"done: first"' in said
    assert tasks_run(home) == ["first"]
    assert pong.status_code == 200 and '"id":8' in pong.text
