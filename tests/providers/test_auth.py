"""OAuth refresh against a local token endpoint, and keys that never leak."""

from __future__ import annotations

import json
import os
import stat
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs

import pytest

from tether import Agent, run_sync
from tether.config import load_settings
from tether.providers.auth import save_oauth_tokens
from tether.providers.registry import resolve_provider
from tether.testing import ScriptedServer


class TokenEndpoint:
    """A minimal OAuth2 token endpoint: each refresh hands out tok-1, tok-2, ... (``answer`` says
    what a form gets: the tokens, or None for invalid_grant)."""

    def __init__(self) -> None:
        self.grants: list[Any] = []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *a: Any) -> None:
                return

            def do_POST(self) -> None:
                answer = outer.answer(parse_qs(self.rfile.read(int(self.headers["content-length"])).decode()))
                body = json.dumps(answer or {"error": "invalid_grant"}).encode()
                self.send_response(200 if answer else 400)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/token"

    def answer(self, form: dict[str, list[str]]) -> dict[str, Any] | None:
        self.grants.append(form)
        if form.get("grant_type") != ["refresh_token"] or not form.get("refresh_token", [""])[0].startswith("r"):
            return None
        n = len(self.grants)
        return {"access_token": f"tok-{n}", "token_type": "Bearer", "expires_in": 3600, "refresh_token": f"r{n}"}


@pytest.fixture
def tokens() -> Iterator[TokenEndpoint]:
    t = TokenEndpoint()
    yield t
    t.server.shutdown()


def configure(home: Path, server: ScriptedServer, tokens: TokenEndpoint) -> None:
    home.mkdir(parents=True, exist_ok=True)
    (home / "config.toml").write_text(
        f'[endpoints.corp]\nkind = "openai"\nbase_url = "{server.base_url}"\nauth = "oauth"\n'
        f'token_url = "{tokens.url}"\nclient_id = "tether-cli"\nmodels = ["hello"]\n'
    )


def bearer_tokens(server: ScriptedServer) -> list[str]:
    return [h.get("Authorization", h.get("authorization", "")) for _, _, h in server.received]


def test_expired_token_is_refreshed_before_the_call(tmp_path: Path, tokens: TokenEndpoint) -> None:
    with ScriptedServer() as server:
        configure(tmp_path, server, tokens)
        path = tmp_path / "auth" / "corp.json"
        save_oauth_tokens(path, {"access_token": "old", "refresh_token": "r0", "expires_at": time.time() - 10})
        r = run_sync(Agent("corp/hello", settings=load_settings(tmp_path)), "hi")
        assert r.status == "completed"
        assert bearer_tokens(server) == ["Bearer tok-1"]
        assert tokens.grants[0]["client_id"] == ["tether-cli"]
        saved = json.loads(path.read_text())
        assert saved["access_token"] == "tok-1" and saved["refresh_token"] == "r1"
        assert stat.S_IMODE(os.stat(path).st_mode) == 0o600


def test_a_401_refreshes_once_more_then_succeeds(tmp_path: Path, tokens: TokenEndpoint) -> None:
    with ScriptedServer(faults=["401"]) as server:
        configure(tmp_path, server, tokens)
        save_oauth_tokens(
            tmp_path / "auth" / "corp.json",
            {"access_token": "revoked", "refresh_token": "r0", "expires_at": time.time() + 3600},
        )
        r = run_sync(Agent("corp/hello", settings=load_settings(tmp_path)), "hi")
        assert r.status == "completed"
        assert bearer_tokens(server) == ["Bearer revoked", "Bearer tok-1"]


def test_a_refused_refresh_is_an_auth_failure_that_names_the_file(tmp_path: Path, tokens: TokenEndpoint) -> None:
    with ScriptedServer() as server:
        configure(tmp_path, server, tokens)
        save_oauth_tokens(
            tmp_path / "auth" / "corp.json", {"access_token": "", "refresh_token": "bad", "expires_at": 0}
        )
        r = run_sync(Agent("corp/hello", settings=load_settings(tmp_path)), "hi")
        assert r.status == "failed" and "corp.json" in (r.reason or "")
        assert not server.received


def test_api_key_from_config_is_sent_but_never_shown(tmp_path: Path) -> None:
    with ScriptedServer(faults=["401"]) as server:
        (tmp_path / "config.toml").write_text(
            f'[endpoints.k]\nkind = "anthropic"\nbase_url = "{server.root_url}"\napi_key = "sk-ant-hush"\n'
        )
        resolved = resolve_provider("k/hello", load_settings(tmp_path))
        assert "hush" not in repr(resolved.provider.__dict__)
        r = run_sync(Agent(resolved.provider), "hi")
        assert r.status == "failed" and "api_key in [endpoints.k]" in (r.reason or "")
        assert "hush" not in (r.reason or "")
        assert server.received[0][2].get("x-api-key") == "sk-ant-hush"


@pytest.mark.parametrize(
    ("env", "config", "model", "named"),
    [
        (
            {"OPENAI_API_KEY": "sk-bad", "OPENAI_BASE_URL": "SERVER"},
            "",
            "openai/plan",
            "Check the key in OPENAI_API_KEY.",
        ),
        (
            {"OPENAI_API_KEY": "sk-bad"},
            "",
            "openai/plan",
            "none was sent (LLM_API_KEY not set; OPENAI_API_KEY is sent only to api.openai.com or OPENAI_BASE_URL's host)",
        ),
        ({"LLM_API_KEY": "sk-bad", "OPENAI_API_KEY": "sk-other"}, "", "openai/plan", "Check the key in LLM_API_KEY."),
        ({}, "", "openai/plan", "none was sent (LLM_API_KEY not set)"),
        ({}, 'api_key = "sk-bad"\n', "srv/plan", "Check api_key in [endpoints.srv] in config.toml."),
        ({}, "", "srv/plan", "none was sent (no key_env or api_key in [endpoints.srv] in config.toml)"),
        ({"SRV_KEY": "sk-bad"}, 'key_env = "SRV_KEY"\n', "srv/plan", "Check the key in SRV_KEY."),
    ],
)
def test_a_401_names_where_the_key_came_from_or_that_none_was_set(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, env: dict[str, str], config: str, model: str, named: str
) -> None:
    for name in ("OPENAI_API_KEY", "LLM_API_KEY", "OPENAI_BASE_URL", "SRV_KEY"):
        monkeypatch.delenv(name, raising=False)
    with ScriptedServer(faults=["401"]) as server:
        for name, value in env.items():
            monkeypatch.setenv(name, server.base_url if value == "SERVER" else value)
        monkeypatch.setenv("LLM_BASE_URL", server.base_url)
        (tmp_path / "config.toml").write_text(f'[endpoints.srv]\nbase_url = "{server.base_url}"\n{config}')
        result = run_sync(Agent(model, settings=load_settings(tmp_path)), "hi")
    assert result.status == "failed" and named in (result.reason or ""), result.reason
    assert "sk-bad" not in (result.reason or "") and "server's authentication settings" not in (result.reason or "")


def test_openai_key_never_goes_to_another_server_that_llm_base_url_names(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """LLM_BASE_URL at a local model's or another vendor's server: OPENAI_API_KEY (the OpenAI
    account's key) is not sent there; LLM_API_KEY is, and OPENAI_BASE_URL's host keeps its pairing."""
    from tether.errors import ConfigError
    from tether.providers.openai_chat import OpenAIChatProvider

    for name in ("LLM_API_KEY", "OPENAI_BASE_URL"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-openai-account")
    with ScriptedServer() as server:
        monkeypatch.setenv("LLM_BASE_URL", server.base_url)
        assert run_sync(Agent("openai/plan", settings=load_settings(tmp_path)), "hi").status == "completed"
        assert all("authorization" not in {k.lower() for k in r[2]} for r in server.received)
        monkeypatch.setenv("LLM_API_KEY", "sk-local")
        assert run_sync(Agent("openai/plan", settings=load_settings(tmp_path)), "hi").status == "completed"
        assert server.received[-1][2].get("authorization") == "Bearer sk-local"
        monkeypatch.delenv("LLM_API_KEY")
        monkeypatch.setenv("OPENAI_BASE_URL", server.base_url)  # the OpenAI SDK's pairing: chosen
        assert run_sync(Agent("openai/plan", settings=load_settings(tmp_path)), "hi").status == "completed"
        assert server.received[-1][2].get("authorization") == "Bearer sk-openai-account"
    monkeypatch.delenv("OPENAI_BASE_URL")
    monkeypatch.setenv("LLM_BASE_URL", "https://models.example.net/v1")  # not loopback: refused, clearly
    with pytest.raises(ConfigError) as caught:
        OpenAIChatProvider()
    assert "Export LLM_API_KEY" in str(caught.value) and "models.example.net" in str(caught.value)
    assert "sk-openai-account" not in str(caught.value)
    monkeypatch.setenv("LLM_BASE_URL", "https://api.openai.com/v1")  # OpenAI itself: its key goes
    assert OpenAIChatProvider()._http.credentials.hint == "the key in OPENAI_API_KEY"


class RotatingTokens(TokenEndpoint):
    """A token endpoint whose refresh tokens are good for one use each (as many providers rotate
    them), slow enough that refreshers started together overlap. ``grants`` holds the refresh
    tokens spent, ``refused`` those presented again."""

    def __init__(self, delay_s: float = 0.2, expires_in: int = 3600) -> None:
        self.valid = {"r0"}
        self.refused: list[str] = []
        self.asked = threading.Event()  # a refresh request has arrived
        self.delay_s, self.expires_in = delay_s, expires_in
        self.lock = threading.Lock()
        super().__init__()

    def answer(self, form: dict[str, list[str]]) -> dict[str, Any] | None:
        used = form.get("refresh_token", [""])[0]
        self.asked.set()
        time.sleep(self.delay_s)
        with self.lock:
            if used not in self.valid:
                self.refused.append(used)
                return None
            self.valid.discard(used)
            self.grants.append(used)
            n = len(self.grants)
            self.valid.add(f"r{n}")
        return {"access_token": f"tok-{n}", "expires_in": self.expires_in, "refresh_token": f"r{n}"}


@pytest.fixture
def rotating() -> Iterator[RotatingTokens]:
    t = RotatingTokens()
    yield t
    t.server.shutdown()


def test_many_requests_with_an_expired_token_refresh_it_once(tmp_path: Path, rotating: RotatingTokens) -> None:
    """Twenty model requests of one process find the token expired at once: one refresh; the
    others wait for it and use its token, instead of spending the rotated refresh token again."""
    import asyncio

    from tether.providers.auth import OAuthCredentials

    path = tmp_path / "auth" / "corp.json"
    save_oauth_tokens(path, {"access_token": "old", "refresh_token": "r0", "expires_at": 0})
    creds = OAuthCredentials(path, rotating.url)

    async def all_at_once() -> list[dict[str, str]]:
        return list(await asyncio.gather(*(creds.headers() for _ in range(20))))

    headers = asyncio.run(all_at_once())
    assert {h["authorization"] for h in headers} == {"Bearer tok-1"}
    assert rotating.grants == ["r0"] and rotating.refused == []


def test_processes_sharing_a_token_file_refresh_it_once(tmp_path: Path, rotating: RotatingTokens) -> None:
    """tether serve and tether run (or workers) on one home: each process finds the token expired;
    one refreshes, the others take what it wrote."""
    import subprocess
    import sys

    path = tmp_path / "auth" / "corp.json"
    save_oauth_tokens(path, {"access_token": "old", "refresh_token": "r0", "expires_at": 0})
    go = tmp_path / "go"
    code = (
        "import asyncio, os, sys, time\n"
        "from pathlib import Path\n"
        "from tether.providers.auth import OAuthCredentials\n"
        "creds = OAuthCredentials(Path(sys.argv[1]), sys.argv[2])\n"
        "while not os.path.exists(sys.argv[3]):\n"
        "    time.sleep(0.005)\n"
        "print(asyncio.run(creds.headers())['authorization'])\n"
    )
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", code, str(path), rotating.url, str(go)], stdout=subprocess.PIPE, text=True
        )
        for _ in range(4)
    ]
    go.touch()  # all four start their refresh together
    outs = [p.communicate(timeout=60)[0].strip() for p in procs]
    assert outs == ["Bearer tok-1"] * 4 and all(p.returncode == 0 for p in procs)
    assert rotating.grants == ["r0"] and rotating.refused == []
    assert json.loads(path.read_text())["refresh_token"] == "r1"


def test_a_401_after_another_task_refreshed_takes_its_token_and_a_401_on_the_newest_refreshes(
    tmp_path: Path, rotating: RotatingTokens
) -> None:
    import asyncio

    from tether.providers.auth import OAuthCredentials

    path = tmp_path / "auth" / "corp.json"
    save_oauth_tokens(path, {"access_token": "old", "refresh_token": "r0", "expires_at": time.time() + 3600})
    first, second = OAuthCredentials(path, rotating.url), OAuthCredentials(path, rotating.url)

    async def both_refused() -> tuple[str, str]:
        await first.headers()
        await second.headers()  # both sent "old", and both got 401 for it
        await asyncio.gather(first.refresh(), second.refresh())
        return (await first.headers())["authorization"], (await second.headers())["authorization"]

    assert asyncio.run(both_refused()) == ("Bearer tok-1", "Bearer tok-1")
    assert rotating.grants == ["r0"]

    async def newest_refused() -> str:
        await first.refresh()  # a 401 on tok-1 itself: a real refresh
        return (await first.headers())["authorization"]

    assert asyncio.run(newest_refused()) == "Bearer tok-2" and rotating.grants == ["r0", "r1"]


def test_a_refresh_whose_asker_is_cancelled_still_saves_the_rotated_token_for_the_others(
    tmp_path: Path, rotating: RotatingTokens
) -> None:
    """The refresher's run is stopped while the token endpoint answers: the endpoint has already
    rotated the refresh token, so the new one must still be saved, and those waiting must get it."""
    import asyncio

    from tether.providers.auth import OAuthCredentials

    path = tmp_path / "auth" / "corp.json"
    save_oauth_tokens(path, {"access_token": "old", "refresh_token": "r0", "expires_at": 0})
    creds = OAuthCredentials(path, rotating.url)

    async def one_cancelled() -> list[Any]:
        first = asyncio.ensure_future(creds.headers())
        while not rotating.asked.is_set():  # its request is at the endpoint (which answers after 0.2 s)
            await asyncio.sleep(0.005)
        others = [asyncio.ensure_future(creds.headers()) for _ in range(3)]
        first.cancel()
        return list(await asyncio.gather(first, *others, return_exceptions=True))

    results = asyncio.run(one_cancelled())
    assert isinstance(results[0], asyncio.CancelledError)
    assert results[1:] == [{"authorization": "Bearer tok-1"}] * 3
    assert rotating.grants == ["r0"] and rotating.refused == []
    assert json.loads(path.read_text())["refresh_token"] == "r1"


def test_tokens_shorter_lived_than_the_margin_are_still_shared(tmp_path: Path) -> None:
    import asyncio

    from tether.providers.auth import OAuthCredentials

    endpoint = RotatingTokens(delay_s=0.05, expires_in=30)  # under the 60 s refresh margin
    try:
        path = tmp_path / "auth" / "corp.json"
        save_oauth_tokens(path, {"access_token": "old", "refresh_token": "r0", "expires_at": 0})
        creds = OAuthCredentials(path, endpoint.url)

        async def ten() -> list[dict[str, str]]:
            return list(await asyncio.gather(*(creds.headers() for _ in range(10))))

        assert {h["authorization"] for h in asyncio.run(ten())} == {"Bearer tok-1"}
        assert endpoint.grants == ["r0"]
    finally:
        endpoint.server.shutdown()


def test_refresh_before_any_request_refreshes_and_a_stuck_lock_is_an_error_that_names_it(
    tmp_path: Path, rotating: RotatingTokens, monkeypatch: pytest.MonkeyPatch
) -> None:
    import asyncio
    import fcntl

    from tether.errors import AuthError
    from tether.providers import auth
    from tether.providers.auth import OAuthCredentials

    path = tmp_path / "auth" / "corp.json"
    save_oauth_tokens(path, {"access_token": "revoked", "refresh_token": "r0", "expires_at": time.time() + 3600})
    creds = OAuthCredentials(path, rotating.url)
    assert asyncio.run(creds.refresh()) is True
    assert rotating.grants == ["r0"] and asyncio.run(creds.headers()) == {"authorization": "Bearer tok-1"}

    held = os.open(path.with_name("corp.json.lock"), os.O_RDWR)
    try:
        fcntl.flock(held, fcntl.LOCK_EX)  # as a stopped process would hold it
        monkeypatch.setattr(auth, "LOCK_WAIT_S", 0.3)
        with pytest.raises(AuthError, match="corp.json.lock"):
            asyncio.run(OAuthCredentials(path, rotating.url).refresh())
    finally:
        os.close(held)
