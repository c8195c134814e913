"""Attacks on "no secrets in code or logs" (round 5): a key tether holds (from the environment,
a database or broker URL's password) quoted in an unexpected exception's message must not reach
the run's reason, its ``done`` event, its saved state, its session, its trace or the log.

Planted fake keys in the environment; every file tether wrote is read back for them.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import secrets
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx
import pytest

from tether import Agent, RunStore, run_stream, tool
from tether.config import load_settings
from tether.errors import AuthError, ProviderError, QuotaExceededError, RetryableError
from tether.events import Done, Fallback, Retry
from tether.harness.agent import Stop
from tether.harness.middleware import Middleware
from tether.harness.retry import RetryPolicy
from tether.messages import AssistantMessage, ToolCallPart
from tether.sessions import JsonlSessionStore
from tether.testing.function_model import FunctionModel
from tether.tools.base import ToolResult
from tether.tracing import JsonlTracer


def planted() -> str:
    return "sk-test-" + secrets.token_hex(16)


def everything_written(root: Path) -> str:
    return "\n".join(p.read_text(errors="replace") for p in sorted(root.rglob("*")) if p.is_file())


def run_all(agent: Agent, root: Path) -> list[Any]:
    store = RunStore(root / "runs")
    tracer = JsonlTracer(root / "traces")
    sessions = JsonlSessionStore(root / "sessions", fsync=False)

    async def go() -> list[Any]:
        return [e async for e in run_stream(agent, "hi", store=store, tracer=tracer, session=sessions, session_id="s1")]

    return asyncio.run(go())


def assert_hidden(key: str, events: list[Any], root: Path, caplog: pytest.LogCaptureFixture) -> str:
    done = events[-1]
    assert isinstance(done, Done) and done.result.status == "failed"
    reason = done.result.reason or ""
    assert key not in reason and key[:14] not in reason, reason
    assert "***" in reason  # the message is still there, the key taken out
    written = everything_written(root)
    assert written and key not in written and key[:14] not in written
    logged = "\n".join(r.getMessage() + (r.exc_text or "") for r in caplog.records)
    assert "stopped by an unexpected error" in logged
    assert key not in logged
    return reason


@pytest.mark.parametrize("variable", ["OPENAI_API_KEY", "ANTHROPIC_API_KEY", "GITHUB_TOKEN", "LLM_API_KEY"])
def test_a_provider_quoting_an_env_key_in_its_error_leaves_it_nowhere(
    variable: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    key = planted()
    monkeypatch.setenv(variable, key)

    def boom(messages: Any, request: Any) -> str:
        raise RuntimeError(f"auth failed with {key}")

    caplog.set_level(logging.ERROR, logger="tether")
    events = run_all(Agent(model=FunctionModel(boom)), tmp_path)
    reason = assert_hidden(key, events, tmp_path, caplog)
    assert "RuntimeError: auth failed with ***" in reason
    assert "RuntimeError: auth failed with ***" in caplog.text  # the log keeps the traceback, not the key


def test_a_middleware_quoting_the_database_password_leaves_it_nowhere(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    password = planted()
    url = f"postgresql://tether:{password}@db.internal/tether"
    monkeypatch.setenv("TETHER_DATABASE_URL", url)

    class Leaky(Middleware):
        async def before_agent(self, ctx: Any) -> None:
            raise ConnectionError(f"could not reach {url}")

    caplog.set_level(logging.ERROR, logger="tether")
    events = run_all(Agent(model=FunctionModel(lambda m, r: "ok"), middleware=[Leaky()]), tmp_path)
    assert_hidden(password, events, tmp_path, caplog)


def calls_then_answers(seen: list[str]) -> FunctionModel:
    """Calls ``fetch`` once, then answers; keeps the text of every request it was sent."""

    def reply(messages: list[Any], request: Any) -> Any:
        seen.append("\n".join(m.model_dump_json() for m in messages))
        if len(messages) == 1:
            call = ToolCallPart(id="c1", name="fetch", arguments='{"url": "https://api.example.com"}')
            return AssistantMessage(content=(call,), finish_reason="tool_calls")
        return "done"

    return FunctionModel(reply)


@pytest.mark.parametrize("fatal", [False, True])
def test_a_tool_quoting_an_env_key_in_its_error_sends_it_nowhere(
    fatal: bool, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    key = planted()
    monkeypatch.setenv("OPENAI_API_KEY", key)

    @tool
    def fetch(url: str) -> str:
        """Fetch a URL."""
        raise RuntimeError(f"auth failed with {key}")

    seen: list[str] = []
    agent = Agent(model=calls_then_answers(seen), tools=[fetch], tool_errors_are_fatal=fatal)
    done = run_all(agent, tmp_path)[-1]
    assert done.result.status == ("failed" if fatal else "completed")
    assert key not in (done.result.reason or "")
    if fatal:
        assert done.result.reason == "tool fetch failed: auth failed with ***"
    else:  # the model read the error, without the key
        assert "auth failed with ***" in seen[-1] and key not in seen[-1]
    written = everything_written(tmp_path)
    assert "auth failed with ***" in written and key not in written


def test_an_error_result_quoting_a_url_password_keeps_it_nowhere(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An MCP server's ``isError`` text, a connector's "Error: ..." result: a ToolResult the tool
    returned, not an exception it raised."""
    password = planted()
    monkeypatch.setenv("TETHER_BROKER_URL", f"amqp://tether:{password}@mq.internal//")

    @tool
    def fetch(url: str) -> ToolResult:
        """Fetch a URL."""
        return ToolResult(f"Error: upstream said: bad credentials tether:{password}", is_error=True)

    seen: list[str] = []
    done = run_all(Agent(model=calls_then_answers(seen), tools=[fetch]), tmp_path)[-1]
    assert done.result.status == "completed"
    assert "bad credentials tether:***" in seen[-1] and password not in seen[-1]
    assert password not in everything_written(tmp_path)


def test_keys_written_in_config_toml_are_kept_out_too(tmp_path: Path) -> None:
    """An endpoint's api_key, an MCP server's env token, its header and its --token argument: a
    server or tool that quotes one back in an error leaves it in no reason, session or trace."""
    api_key, env_token, header, argument = planted(), planted(), planted(), planted()
    home = tmp_path / "home"
    home.mkdir()
    (home / "config.toml").write_text(
        f"""
[endpoints.local]
kind = "openai"
base_url = "http://127.0.0.1:11434/v1"
api_key = "{api_key}"
models = ["qwen"]

[mcp.github]
command = "github-mcp"
args = ["--token", "{argument}"]
env = {{ GITHUB_TOKEN = "{env_token}" }}

[mcp.docs]
url = "https://docs.example.com/mcp"
headers = {{ authorization = "Bearer {header}" }}
"""
    )
    load_settings(home)
    quoted = f"keys: {api_key} {env_token} {header} {argument}"

    @tool
    def fetch(url: str) -> str:
        """Fetch a URL."""
        raise PermissionError(quoted)

    seen: list[str] = []
    root = tmp_path / "out"
    done = run_all(Agent(model=calls_then_answers(seen), tools=[fetch], tool_errors_are_fatal=True), root)[-1]
    assert done.result.reason == "tool fetch failed: keys: *** *** *** ***"
    written = everything_written(root)
    for key in (api_key, env_token, header, argument):
        assert key not in written


def test_an_extension_quoting_a_key_as_it_starts_leaves_it_out_of_the_served_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A served run refused before it began (an MCP server that would not start, an extension
    that could not sign in): its ``done`` event and its saved state carry the reason, not the key."""
    from tether.cancel import CancelSignal
    from tether.harness.state import RunState
    from tether.server.runs import drive
    from tether.server.store import TurnRecord

    key = planted()
    monkeypatch.setenv("GITHUB_TOKEN", key)

    class SignsIn:
        async def start(self) -> None:
            raise RuntimeError(f"github said 401 Bad credentials for token {key}")

    agent = Agent(model=FunctionModel(lambda m, r: "ok"), extensions=[SignsIn()])
    store = RunStore(tmp_path / "runs")
    state = RunState(session_id="s1")
    turn = TurnRecord("m1", state.run_id, "s1", "ann", "support", "t1", "hi", 0.0)
    emitted: list[tuple[str, dict[str, Any]]] = []
    sessions = JsonlSessionStore(tmp_path / "sessions", fsync=False)
    asyncio.run(
        drive(
            turn,
            agent,
            state,
            "hi",
            {},
            lambda k, d: emitted.append((k, d)),
            CancelSignal(),
            store,
            sessions,
            lambda t, resumed, cost: None,
        )
    )
    kind, data = emitted[-1]
    assert kind == "done" and data["result"]["status"] == "failed"
    assert data["result"]["reason"] == "the run could not start: github said 401 Bad credentials for token ***"
    assert key not in everything_written(tmp_path)


def test_an_mcp_servers_last_words_quoting_its_token_stay_out_of_the_cli(tmp_path: Path) -> None:
    """`tether run --mcp gh` printed "did not start ... (its last words: bad token <key>)", the
    token being the one config.toml gives the server in its env table."""
    key = planted()
    home, workspace = tmp_path / "home", tmp_path / "ws"
    home.mkdir()
    workspace.mkdir()
    said = "import os, sys; sys.stderr.write('bad token ' + os.environ['GITHUB_TOKEN'] + chr(10)); sys.exit(1)"
    (home / "config.toml").write_text(
        f"""
[mcp.gh]
command = {json.dumps(sys.executable)}
args = ["-c", {json.dumps(said)}]
env = {{ GITHUB_TOKEN = "{key}" }}
"""
    )
    ran = subprocess.run(
        [
            sys.executable,
            "-m",
            "tether",
            "run",
            "--model",
            "scripted/plan",
            "--cwd",
            str(workspace),
            "--mcp",
            "gh",
            "hi",
        ],
        env={**os.environ, "TETHER_HOME": str(home)},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert ran.returncode == 2 and "its last words: bad token [redacted]" in ran.stderr, ran.stderr
    assert key not in ran.stdout + ran.stderr


SIGNS_IN = """
import os

from tether import Agent
from tether.testing import FunctionModel


class SignsIn:
    async def start(self):
        raise RuntimeError("github said 401 Bad credentials for token " + os.environ["GITHUB_TOKEN"])


agents = {"support": Agent(model=FunctionModel(lambda m, r: "ok"), extensions=[SignsIn()])}
"""


@pytest.mark.parametrize("run_processes", ["0", "1"])
def test_a_key_a_served_run_could_not_start_with_stays_out_of_the_api_and_the_server_log(
    run_processes: str, tmp_path: Path
) -> None:
    """`tether serve` wrote "run ... could not start: ... token <key>" in its log (and, before
    refused() took it out, in the run's done event and saved reason), from its own process and
    from its run processes alike."""
    from tests.server.conftest import serve_process

    key = planted()
    home = tmp_path / "home"
    home.mkdir()
    module = tmp_path / "signs_in.py"
    module.write_text(SIGNS_IN)
    env = {**os.environ, "TETHER_HOME": str(home), "GITHUB_TOKEN": key}
    proc, url = serve_process("--agent", str(module), "--run-processes", run_processes, env=env)
    try:
        with httpx.Client(base_url=url, timeout=30) as c:
            sid = c.post("/v1/sessions", json={"agent": "support"}).json()["session_id"]
            started = c.post(f"/v1/sessions/{sid}/messages", json={"text": "hi"}).json()
            events = c.get(f"/v1/runs/{started['run_id']}/events", params={"after": 0}).text
            seen = c.get(f"/v1/runs/{started['run_id']}").text
    finally:
        proc.kill()  # every line it logs is flushed as written
        _, log = proc.communicate(timeout=30)
    assert "event: done" in events, events
    assert "Bad credentials for token ***" in seen, seen
    assert "could not start" in log, log
    for text in (events, seen, log, everything_written(home)):
        assert key not in text


@pytest.mark.parametrize("error", [AuthError, RetryableError, QuotaExceededError])
def test_a_providers_own_error_quoting_an_env_key_leaves_it_out_of_retries_fallbacks_and_the_reason(
    error: type[ProviderError], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A provider of one's own raising tether's provider errors: the reason, the ``retry`` and
    ``fallback`` events (the trace) and the saved run said the key it quoted."""
    key = planted()
    monkeypatch.setenv("ANTHROPIC_API_KEY", key)

    def refuses(messages: Any, request: Any) -> str:
        raise error(f"my-gateway: the key {key} was refused", provider="my-gateway", body=f'{{"key": "{key}"}}')

    fallback = FunctionModel(refuses, model_id="second")
    agent = Agent(
        model=FunctionModel(refuses),
        fallback_models=[fallback],
        retry=RetryPolicy(base_delay_s=0.001, max_delay_s=0.002, max_attempts=2),
    )
    events = run_all(agent, tmp_path)
    done = events[-1]
    assert done.result.status == "failed" and "my-gateway: the key *** was refused" in (done.result.reason or "")
    said = [e for e in events if isinstance(e, Retry | Fallback)]
    assert said or error is AuthError  # retried, or passed on to the fallback
    assert all(key not in e.reason for e in said)
    assert key not in everything_written(tmp_path)


def test_what_is_no_key_is_left_as_it_was(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A path in a variable named like a key and a server's ``NODE_ENV = "production"`` are not
    keys: an error that says them keeps them (hiding them would garble every message)."""
    monkeypatch.setenv("SSL_CERT_KEY", "/etc/ssl/private/server-key.pem")
    home = tmp_path / "home"
    home.mkdir()
    (home / "config.toml").write_text('[mcp.gh]\ncommand = "github-mcp"\nenv = { NODE_ENV = "production" }\n')
    load_settings(home)
    words = "in production, /etc/ssl/private/server-key.pem could not be read"

    @tool
    def fetch(url: str) -> str:
        """Fetch a URL."""
        raise OSError(words)

    done = run_all(Agent(model=calls_then_answers([]), tools=[fetch], tool_errors_are_fatal=True), tmp_path)[-1]
    assert done.result.reason == f"tool fetch failed: {words}"


def test_a_stop_a_middleware_words_with_a_key_keeps_it_nowhere(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    key = planted()
    monkeypatch.setenv("OPENAI_API_KEY", key)

    class Quota(Middleware):
        async def before_model(self, ctx: Any, request: Any) -> Any:
            return Stop("failed", f"the quota service refused the key {key}")

    done = run_all(Agent(model=FunctionModel(lambda m, r: "ok"), middleware=[Quota()]), tmp_path)[-1]
    assert done.result.reason == "the quota service refused the key ***"
    assert key not in everything_written(tmp_path)


def test_a_sub_agents_failure_quoting_a_key_reaches_neither_the_parent_nor_its_files(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    key = planted()
    monkeypatch.setenv("OPENAI_API_KEY", key)

    def boom(messages: Any, request: Any) -> str:
        raise RuntimeError(f"auth failed with {key}")

    child = Agent(model=FunctionModel(boom))
    seen: list[str] = []

    def lead(messages: list[Any], request: Any) -> Any:
        seen.append("\n".join(m.model_dump_json() for m in messages))
        if len(messages) == 1:
            call = ToolCallPart(id="c1", name="researcher", arguments='{"task": "read the logs"}')
            return AssistantMessage(content=(call,), finish_reason="tool_calls")
        return "done"

    agent = Agent(model=FunctionModel(lead), tools=[child.as_tool("researcher", "Reads the logs.")])
    done = run_all(agent, tmp_path)[-1]
    assert done.result.status == "completed"
    assert "auth failed with ***" in seen[-1] and key not in seen[-1]
    assert key not in everything_written(tmp_path)


def test_a_guardrail_classifier_failing_with_a_key_keeps_it_out_of_the_verdict(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """A deployment's own classifier (a moderation API) failing "key sk-... refused": the verdict
    (the run's reason, the answer it stands for, the session, the trace) said the key."""
    from tether.guardrails.core import Guardrail

    key = planted()
    monkeypatch.setenv("OPENAI_API_KEY", key)

    class Moderation:
        async def classify(self, text: str, *, stage: str, ctx: Any) -> Any:
            raise RuntimeError(f"moderation API refused key {key}")

    caplog.set_level(logging.WARNING, logger="tether")
    agent = Agent(model=FunctionModel(lambda m, r: "ok"), middleware=[Guardrail(Moderation())])
    done = run_all(agent, tmp_path)[-1]
    assert "the classifier failed (RuntimeError: moderation API refused key ***)" in (done.result.reason or "")
    assert key not in everything_written(tmp_path) and key not in caplog.text
