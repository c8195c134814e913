"""tether.connectors._http against a hostile streamable-HTTP server (tests/connectors/hostile_server.py,
in a thread on a free loopback port): HTTP 500, a body that is not JSON or not JSON-RPC, an event
stream cut mid-event, a call that never answers, answers too large to read, a 403 naming scopes, a
401 in the middle of a session. Each becomes a tool error the model can read, the session goes on
(no reconnection), a run with them all completes with every call paired with its result, and the
token the server echoes back reaches neither the model, the run nor the logs."""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.connectors.hostile_server import HostileServer
from tether import Agent, run
from tether.cancel import CancelSignal
from tether.connectors import McpConnector, token_path
from tether.harness.state import RunState
from tether.messages import AssistantMessage, Message, TextPart, ToolMessage
from tether.providers.auth import save_oauth_tokens
from tether.providers.scripted import Reply
from tether.testing import FunctionModel
from tether.tools.base import ToolContext

FAILURES = {
    "status_500": "failed on the MCP server h: it answered HTTP 500 Internal Server Error",
    "garbage": "failed on the MCP server h: its answer is not JSON (Unterminated string",
    "not_jsonrpc": "failed on the MCP server h: its answer is JSON but not a JSON-RPC response",
    "drop": "the answer of the MCP server h to this call to h__drop broke off (SSE stream ended without a response)",
    "drop_json": "failed on the MCP server h: its answer broke off (RemoteProtocolError)",
    "huge": "failed on the MCP server h: its answer is larger than 16 MiB, so it was not read",
    "huge_stream": "broke off (SSE stream failed: Server-sent event exceeded the 1048576 byte limit.)",
    "echo_error": "failed on the MCP server h: bad token [redacted]?",
    "forbidden": "it answered HTTP 403 Forbidden (it needs the scopes 'stock.read stock.admin': add them to "
    "scopes in [mcp.NAME]",
}


@pytest.fixture
def server() -> Iterator[HostileServer]:
    with HostileServer() as hostile:
        yield hostile


def connector(server: HostileServer, home: Path, **extra: Any) -> McpConnector:
    save_oauth_tokens(
        token_path(home, "h"),
        {"access_token": "hostile-0", "refresh_token": "refresh-h", "expires_at": time.time() + 3600},
    )
    return McpConnector(
        "h", {"url": f"{server.url}/mcp", "auth": "oauth", "token_url": f"{server.url}/token", **extra}, home=home
    )


def leaked(text: str) -> bool:
    return "hostile-" in text or "refresh-h" in text


async def call(mcp: McpConnector, name: str, tmp_path: Path) -> tuple[bool, str]:
    tool = next(t for t in mcp.tools() if t.server_tool == name)
    result = await tool.execute({}, ToolContext(cwd=tmp_path, signal=CancelSignal()))
    return result.is_error, "".join(p.text for p in result.parts() if isinstance(p, TextPart))


@pytest.mark.parametrize("name", sorted(FAILURES))
def test_a_broken_answer_is_a_tool_error_in_words_and_the_session_goes_on(
    name: str, server: HostileServer, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    mcp = connector(server, tmp_path)

    async def go() -> tuple[tuple[bool, str], tuple[bool, str]]:
        await mcp.start()
        try:
            return await call(mcp, name, tmp_path), await call(mcp, "ok", tmp_path)
        finally:
            await mcp.stop()

    (failed, said), after = asyncio.run(asyncio.wait_for(go(), 120))
    assert failed and said.startswith("Error: ") and FAILURES[name] in said
    assert after == (False, "fine")
    assert server.sessions == 1 and server.calls == [name, "ok"]  # not reconnected, not sent again
    assert not leaked(said) and not leaked(caplog.text)


def test_a_call_that_never_answers_ends_at_timeout_s_and_the_next_call_works(
    server: HostileServer, tmp_path: Path
) -> None:
    mcp = connector(server, tmp_path, timeout_s=1)

    async def go() -> tuple[tuple[bool, str], tuple[bool, str]]:
        await mcp.start()
        try:
            return await call(mcp, "stall", tmp_path), await call(mcp, "ok", tmp_path)
        finally:
            await mcp.stop()

    (failed, said), after = asyncio.run(asyncio.wait_for(go(), 120))
    assert failed and said == (
        "Error: h__stall did not answer within 1 s (timeout_s of [mcp.h]), so the call was "
        "cancelled. It is safe to call it again."
    )
    assert after == (False, "fine") and server.sessions == 1


def test_a_401_in_the_middle_of_a_session_is_refreshed_once_and_the_call_goes_through(
    server: HostileServer, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    mcp = connector(server, tmp_path)

    async def go() -> tuple[tuple[bool, str], tuple[bool, str]]:
        await mcp.start()
        try:
            return await call(mcp, "rotate", tmp_path), await call(mcp, "ok", tmp_path)
        finally:
            await mcp.stop()

    assert asyncio.run(asyncio.wait_for(go(), 120)) == ((False, "rotated"), (False, "fine"))
    assert server.grants == 1 and server.calls == ["rotate", "rotate", "ok"]  # sent again once, with the new token
    stored = json.loads(token_path(tmp_path, "h").read_text())
    assert stored["access_token"] == server.valid == "hostile-1" and not leaked(caplog.text)


def test_a_run_through_every_failure_completes_with_each_call_answered_in_words(
    server: HostileServer, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    names = [*sorted(FAILURES), "ok"]

    def reply(messages: list[Message], request: Any) -> Reply | str:
        if not any(isinstance(m, AssistantMessage) for m in messages):
            return Reply(calls=tuple((f"c{i}", f"h__{name}", {}) for i, name in enumerate(names)))
        return " | ".join(m.text for m in messages if isinstance(m, ToolMessage))

    agent = Agent(FunctionModel(reply), extensions=[connector(server, tmp_path)], cwd=tmp_path)
    state = RunState()
    result = asyncio.run(asyncio.wait_for(run(agent, "Check everything.", state=state), 300))
    assert result.status == "completed"
    answered = [m for m in state.messages if isinstance(m, ToolMessage)]
    assert [m.call_id for m in answered] == [f"c{i}" for i in range(len(names))]  # paired, in order
    for name, message in zip(names, answered, strict=True):
        assert (message.text == "fine") if name == "ok" else (message.is_error and FAILURES[name] in message.text)
    assert server.sessions == 1 and sorted(server.calls) == sorted(names)
    assert not leaked(state.model_dump_json()) and not leaked(caplog.text)
