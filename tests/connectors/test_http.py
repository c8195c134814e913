"""tether.connectors._http: a streamable-HTTP MCP server (tests/connectors/http_server.py, in a
subprocess on a free loopback port) with fixed headers or OAuth tokens that tether refreshes."""

from __future__ import annotations

import asyncio
import logging
import os
import stat
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.connectors.conftest import HTTP_SERVER
from tests.connectors.oauth_process import port_server
from tether.cancel import CancelSignal
from tether.connectors import McpConnector, token_path
from tether.errors import ConfigError, RunCancelled
from tether.providers.auth import save_oauth_tokens
from tether.tools.base import TextPart, ToolContext


@pytest.fixture(scope="module")
def server() -> Iterator[str]:
    with port_server(HTTP_SERVER) as url:
        yield url


def stats(server: str) -> dict[str, Any]:
    data: dict[str, Any] = httpx.get(f"{server}/stats", timeout=30).json()
    return data


def oauth(server: str) -> dict[str, Any]:
    return {"url": f"{server}/mcp", "auth": "oauth", "token_url": f"{server}/token"}


def seed(home: Path, access: str, refresh: str, expires_in: float) -> Path:
    path = token_path(home, "remote")
    save_oauth_tokens(path, {"access_token": access, "refresh_token": refresh, "expires_at": time.time() + expires_in})
    return path


async def stock(connector: McpConnector, tmp_path: Path, signal: CancelSignal | None = None) -> str:
    await connector.start()
    try:
        tool = next(t for t in connector.tools() if t.name == "remote__stock")
        result = await tool.execute({"part": "FV-2050"}, ToolContext(cwd=tmp_path, signal=signal or CancelSignal()))
        return "".join(p.text for p in result.parts() if isinstance(p, TextPart))
    finally:
        await connector.stop()


def test_a_token_the_server_refuses_with_401_is_refreshed_once_and_the_call_goes_through(
    server: str, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    path = seed(tmp_path, "access-old", "refresh-1", 3600)  # not expired: only the 401 says it is stale
    before = stats(server)
    answer = asyncio.run(stock(McpConnector("remote", oauth(server), home=tmp_path), tmp_path))
    after = stats(server)
    assert answer == "FV-2050: 7 in stock (remote)"
    assert after["grants"] == before["grants"] + 1 and after["refused"] == before["refused"] + 1
    assert path.read_text().count(after["valid"]) == 1 and stat.S_IMODE(os.stat(path).st_mode) == 0o600
    assert "access-old" not in caplog.text and after["valid"] not in caplog.text and "refresh-1" not in caplog.text


def test_a_token_about_to_expire_is_refreshed_before_the_first_request(server: str, tmp_path: Path) -> None:
    seed(tmp_path, "access-old", "refresh-1", 10)  # inside the refresh margin
    before = stats(server)
    assert asyncio.run(stock(McpConnector("remote", oauth(server), home=tmp_path), tmp_path)).endswith("(remote)")
    after = stats(server)
    assert after["grants"] == before["grants"] + 1 and after["refused"] == before["refused"]


def test_a_refused_refresh_stops_the_run_with_an_error_naming_the_file_not_the_token(
    server: str, tmp_path: Path
) -> None:
    path = seed(tmp_path, "access-old", "refresh-revoked", 3600)
    with pytest.raises(ConfigError) as err:
        asyncio.run(stock(McpConnector("remote", oauth(server), home=tmp_path, start_timeout_s=60), tmp_path))
    message = str(err.value)
    assert message.startswith("MCP server remote did not start: the token endpoint refused the refresh (HTTP 400)")
    assert str(path) in message and "refresh-revoked" not in message and "access-old" not in message
    with pytest.raises(ConfigError, match="tether mcp login remote --refresh-token"):
        asyncio.run(stock(McpConnector("remote", oauth(server), home=tmp_path / "elsewhere"), tmp_path))


def test_fixed_headers_are_sent_and_a_refusal_is_reported_with_its_status(server: str, tmp_path: Path) -> None:
    seed(tmp_path, "access-old", "refresh-1", 10)
    asyncio.run(stock(McpConnector("remote", oauth(server), home=tmp_path), tmp_path))  # a token the server takes
    good = {"url": f"{server}/mcp", "headers": {"authorization": f"Bearer {stats(server)['valid']}"}}
    assert asyncio.run(stock(McpConnector("remote", good), tmp_path)) == "FV-2050: 7 in stock (remote)"
    bad = {"url": f"{server}/mcp", "headers": {"authorization": "Bearer made-up"}}
    with pytest.raises(ConfigError, match="^MCP server remote did not start: the server answered HTTP 401$"):
        asyncio.run(stock(McpConnector("remote", bad, start_timeout_s=60), tmp_path))


def test_a_stop_cancels_a_remote_call_in_flight_and_the_connection_keeps_working(server: str, tmp_path: Path) -> None:
    seed(tmp_path, "access-old", "refresh-1", 10)
    connector = McpConnector("remote", oauth(server), home=tmp_path)

    async def go() -> str:
        await connector.start()
        try:
            tools = {t.name: t for t in connector.tools()}
            signal = CancelSignal()
            asyncio.get_running_loop().call_later(0.5, signal.cancel, "stop")
            with pytest.raises(RunCancelled):
                await tools["remote__slow"].execute({"seconds": 300}, ToolContext(cwd=tmp_path, signal=signal))
            result = await tools["remote__stock"].execute(
                {"part": "A"}, ToolContext(cwd=tmp_path, signal=CancelSignal())
            )
            return "".join(p.text for p in result.parts() if isinstance(p, TextPart))
        finally:
            await connector.stop()

    assert asyncio.run(asyncio.wait_for(go(), 120)) == "A: 7 in stock (remote)"


def test_the_configured_scopes_go_with_every_refresh_and_none_are_sent_when_none_are_set(
    server: str, tmp_path: Path
) -> None:
    scoped = {**oauth(server), "scopes": ["stock.read", "stock.write"]}
    for expires_in in (10, 3600):  # refreshed before expiry, then after the server's 401
        seed(tmp_path, "access-old", "refresh-1", 10)
        asyncio.run(stock(McpConnector("remote", oauth(server), home=tmp_path), tmp_path))
        assert stats(server)["scope"] is None  # left out, not sent empty: the grant keeps its own scopes

        seed(tmp_path, "access-old", "refresh-1", expires_in)
        before = stats(server)["grants"]
        assert asyncio.run(stock(McpConnector("remote", scoped, home=tmp_path), tmp_path)).endswith("(remote)")
        after = stats(server)
        assert after["grants"] == before + 1
        assert after["scope"] == "stock.read stock.write"  # one parameter, space-separated (RFC 6749 §3.3)


def test_every_refresh_names_the_server_the_token_is_for_as_rfc_8707_and_the_mcp_spec_ask(
    server: str, tmp_path: Path
) -> None:
    """The MCP authorization spec: a client sends ``resource`` (RFC 8707), the server's canonical
    URI, in its token requests, so the token it gets is bound to that server and no other. Config
    can name another (a gateway's) or, with "", none, for a token endpoint that refuses it."""
    loud = {**oauth(server), "url": f"{server.replace('http://', 'HTTP://')}/mcp/"}
    for config, sent in [
        (oauth(server), [f"{server}/mcp"]),
        (loud, [f"{server}/mcp"]),  # scheme and host lower-cased, no trailing slash
        ({**oauth(server), "resource": "https://gateway.example.com/mcp"}, ["https://gateway.example.com/mcp"]),
        ({**oauth(server), "resource": ""}, None),
    ]:
        seed(tmp_path, "access-old", "refresh-1", 10)  # about to expire: refreshed before the first request
        assert asyncio.run(stock(McpConnector("remote", config, home=tmp_path), tmp_path)).endswith("(remote)")
        assert stats(server)["resource"] == sent, config


def test_a_scope_the_grant_does_not_cover_is_refused_by_the_token_endpoint_with_a_clear_error(
    server: str, tmp_path: Path
) -> None:
    seed(tmp_path, "access-old", "refresh-1", 10)
    wider = {**oauth(server), "scopes": ["stock.read", "admin"]}
    with pytest.raises(ConfigError, match=r"the token endpoint refused the refresh \(HTTP 400\)") as err:
        asyncio.run(stock(McpConnector("remote", wider, home=tmp_path, start_timeout_s=60), tmp_path))
    assert stats(server)["scope"] == "stock.read admin" and "refresh-1" not in str(err.value)


@pytest.fixture(scope="module")
def sse_server() -> Iterator[str]:
    with port_server(HTTP_SERVER, "sse") as url:
        yield url


def test_a_legacy_sse_server_works_with_transport_sse(sse_server: str, tmp_path: Path) -> None:
    connector = McpConnector("remote", {"url": f"{sse_server}/sse", "transport": "sse"}, home=tmp_path)
    assert asyncio.run(stock(connector, tmp_path)) == "FV-2050: 7 in stock (remote)"


def test_a_legacy_sse_url_reached_as_streamable_http_says_what_to_set(sse_server: str, tmp_path: Path) -> None:
    connector = McpConnector("remote", {"url": f"{sse_server}/sse"}, home=tmp_path, start_timeout_s=30)
    with pytest.raises(ConfigError) as caught:
        asyncio.run(connector.start())
    assert "HTTP 405" in str(caught.value) or "HTTP 404" in str(caught.value)
    assert 'set transport = "sse" in its [mcp.NAME]' in str(caught.value)
