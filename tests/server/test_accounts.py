"""Each user's own connections in `tether serve` (tether.server.accounts): two users of the server
connect their own accounts for an MCP server that signs people in with OAuth (a real authorization
server the test starts, tests/connectors/oauth_server.py), each one's runs call it with that
user's own access token, neither can use the other's, and the tokens are sealed at rest."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.connectors.oauth_process import oauth_server
from tests.server.conftest import read_events

pytest.importorskip("mcp")
pytest.importorskip("cryptography")

OAUTH_SERVER = Path(__file__).resolve().parents[1] / "connectors" / "oauth_server.py"
AGENTS = Path(__file__).with_name("mcp_agents.py")


@pytest.fixture(scope="module")
def auth_server() -> Iterator[str]:
    with oauth_server() as url:
        yield url


@pytest.fixture
def serving(served: Any, auth_server: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Any:
    monkeypatch.setenv("TETHER_HOME", str(tmp_path / "home0"))  # the home the fixture makes first
    monkeypatch.setenv("TETHER_TEST_MCP_URL", f"{auth_server}/mcp")
    monkeypatch.delenv("TETHER_CONNECTIONS_KEY", raising=False)
    config = f'[mcp.guarded]\nurl = "{auth_server}/mcp"\nauth = "oauth"\n'
    return served(agents_module=AGENTS, tokens=["alice", "bob"], config=config)


def stats(auth_server: str) -> dict[str, Any]:
    data: dict[str, Any] = httpx.get(f"{auth_server}/stats", timeout=30).json()
    return data


def signed_in(c: httpx.Client) -> tuple[str, httpx.Cookies]:
    """POST /v1/connections/guarded, its page approved at once: where the authorization server
    sends the browser back, and the cookie the POST left in the browser that made it."""
    r = c.post("/v1/connections/guarded")
    assert r.status_code == 200, r.text
    page = r.json()["authorize_url"]
    assert "code_challenge_method=S256" in page  # PKCE
    approved = httpx.get(page, follow_redirects=False, timeout=30)
    assert approved.status_code in (302, 303, 307), approved.text
    back = approved.headers["location"]
    assert back.startswith(str(c.base_url).rstrip("/") + "/v1/connections/callback?")
    cookie = r.headers["set-cookie"].lower()
    assert "httponly" in cookie and "samesite=lax" in cookie and "path=/v1/connections" in cookie
    return back, r.cookies


def connect(c: httpx.Client) -> None:
    """The user's browser: the page's POST, the sign-in approved at once, back to the callback
    with the cookie the POST set (no bearer token: the state says whose flow it is)."""
    back, cookies = signed_in(c)
    done = httpx.get(back, cookies=cookies, timeout=60)
    assert done.status_code == 200, done.text
    assert "is connected" in done.text


def ask(c: httpx.Client) -> str:
    sid = c.post("/v1/sessions", json={"agent": "mail"}).json()["session_id"]
    r = c.post(f"/v1/sessions/{sid}/messages", json={"text": "who am I?"})
    assert r.status_code == 202, r.text
    events = read_events(c, f"/v1/runs/{r.json()['run_id']}/events", timeout=60)
    transcript = c.get(f"/v1/runs/{r.json()['run_id']}/transcript").json()["messages"]
    assert events[-1]["event"] == "done"
    return str(events[-1]) + str(transcript)


def test_each_user_connects_their_own_account_and_their_runs_use_only_it(serving: Any, auth_server: str) -> None:
    alice, bob = serving.client("alice"), serving.client("bob")
    assert alice.get("/v1/connections").json() == {"connections": [{"server": "guarded", "connected": False}]}

    connect(alice)
    assert alice.get("/v1/connections").json()["connections"][0]["connected"] is True
    assert bob.get("/v1/connections").json()["connections"][0]["connected"] is False  # alice's is hers

    # Bob has not connected: his run is not given alice's token, nor the machine's.
    before = len(stats(auth_server)["called_with"])
    said = ask(bob)
    assert "connect your account for guarded" in said
    assert len(stats(auth_server)["called_with"]) == before

    said = ask(alice)
    assert "the server said: signed in" in said
    alice_token = stats(auth_server)["called_with"][-1]

    connect(bob)
    assert "the server said: signed in" in ask(bob)
    now = stats(auth_server)
    bob_token = now["called_with"][-1]
    assert alice_token and bob_token and alice_token != bob_token
    assert alice_token in now["issued"] and bob_token in now["issued"]
    assert "the server said: signed in" in ask(alice)
    assert stats(auth_server)["called_with"][-1] == alice_token  # still her own, after bob connected

    # At rest: one sealed file per user, no token in plain text anywhere under the home; the key 0600.
    sealed = sorted((serving.home / "auth" / "users").rglob("*.sealed"))
    assert len(sealed) == 2
    for path in (serving.home).rglob("*"):
        if path.is_file():
            data = path.read_bytes()
            assert alice_token.encode() not in data and bob_token.encode() not in data, path
    key = serving.home / "auth" / "connections.key"
    assert oct(key.stat().st_mode & 0o777) == "0o600"

    # No route answers a token; bob forgetting his leaves alice's.
    assert alice_token not in alice.get("/v1/connections").text
    assert bob.delete("/v1/connections/guarded").json() == {"server": "guarded", "forgotten": True}
    assert "connect your account for guarded" in ask(bob)
    assert "the server said: signed in" in ask(alice)


def test_a_callback_with_an_unknown_state_is_refused_and_unknown_servers_are_named(serving: Any) -> None:
    r = httpx.get(f"{serving.url}/v1/connections/callback?code=x&state=forged", timeout=30)
    assert r.status_code == 400 and "unknown or already used" in r.text
    r = serving.client("alice").post("/v1/connections/nope")
    assert r.status_code == 404 and "servers with auth" in r.json()["error"]["message"]
    assert serving.client().get("/v1/connections").status_code == 401


def test_a_connections_key_others_can_read_is_a_clear_error_not_a_crash(
    serving: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Made 0600 at start; if someone widens it later, each route says what to fix (500,
    "misconfigured"), none answers 404 or crashes; and a server is not started with such a key."""
    key = serving.home / "auth" / "connections.key"
    assert oct(key.stat().st_mode & 0o777) == "0o600"  # made when the server started
    key.chmod(0o644)
    alice = serving.client("alice")
    for r in (
        alice.get("/v1/connections"),
        alice.delete("/v1/connections/guarded"),
        alice.post("/v1/connections/guarded"),
    ):
        assert r.status_code == 500, r.text
        assert r.json()["error"]["code"] == "misconfigured"
        assert "chmod 600" in r.json()["error"]["message"]

    # `tether serve` on that home refuses to start, and says why.
    env = {**os.environ, "TETHER_HOME": str(serving.home)}
    done = subprocess.run(
        [sys.executable, "-m", "tether", "serve", "--port", "0", "--model", "scripted/plan"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode != 0
    assert "can be read by other users: chmod 600" in done.stderr, done.stderr
    assert "Traceback" not in done.stderr


def test_a_connections_key_replaced_after_start_is_a_clear_error_naming_no_server_path(serving: Any) -> None:
    """A pipe (or a link) put at the key's name while the server runs: each route answers at once
    that the key cannot be used, naming it under ``$TETHER_HOME``, never the server's own path;
    once the key is put back, the routes work again."""
    key = serving.home / "auth" / "connections.key"
    saved = key.read_bytes()
    key.unlink()
    os.mkfifo(key)
    alice = serving.client("alice")
    try:
        for r in (
            alice.get("/v1/connections", timeout=10),
            alice.delete("/v1/connections/guarded", timeout=10),
            alice.post("/v1/connections/guarded", timeout=10),
        ):
            assert r.status_code == 500, r.text
            error = r.json()["error"]
            assert error["code"] == "misconfigured" and "$TETHER_HOME/auth/connections.key" in error["message"], error
            assert str(serving.home) not in r.text
        assert alice.get("/healthz", timeout=10).status_code == 200
    finally:
        key.unlink()
    key.write_bytes(saved)
    key.chmod(0o600)
    assert alice.get("/v1/connections", timeout=10).status_code == 200


def test_a_sign_in_link_sent_to_someone_else_does_not_connect_their_account_unasked(
    serving: Any, auth_server: str
) -> None:
    """Alice starts a flow and sends bob its link: bob's browser comes back without alice's
    cookie, so nothing is connected; the page names alice, and only its form (a one-use key it
    alone holds) connects the account. Through the API (no browser cookie) that is the way too."""
    alice = serving.client("alice")
    back, _ = signed_in(alice)  # the sign-in done in another browser: alice's cookie is not there

    asked = httpx.get(back, timeout=60)
    assert asked.status_code == 200 and "alice" in asked.text and "is connected" not in asked.text
    assert "form-action 'self'" in asked.headers["content-security-policy"]
    assert "frame-ancestors 'none'" in asked.headers["content-security-policy"]
    assert alice.get("/v1/connections").json()["connections"][0]["connected"] is False
    again = httpx.get(back, timeout=60)  # the link is one use: a second visit is no new question
    assert again.status_code == 400 and "unknown or already used" in again.text

    state = re.search(r"name=state value='([^']+)'", asked.text)
    key = re.search(r"name=confirm value='([^']+)'", asked.text)
    assert state and key
    form = {"Content-Type": "application/x-www-form-urlencoded", "Origin": serving.url}
    url = f"{serving.url}/v1/connections/callback"
    wrong = httpx.post(url, content=f"state={state.group(1)}&confirm=guessed", headers=form, timeout=30)
    assert wrong.status_code == 400
    assert alice.get("/v1/connections").json()["connections"][0]["connected"] is False

    done = httpx.post(url, content=f"state={state.group(1)}&confirm={key.group(1)}", headers=form, timeout=60)
    assert done.status_code == 200 and "is connected" in done.text, done.text
    assert alice.get("/v1/connections").json()["connections"][0]["connected"] is True
    assert "the server said: signed in" in ask(alice)
    reused = httpx.post(url, content=f"state={state.group(1)}&confirm={key.group(1)}", headers=form, timeout=30)
    assert reused.status_code == 400
