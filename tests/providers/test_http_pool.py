"""Clients and their connections are kept across runs in one event loop; the SSL context is built once."""

from __future__ import annotations

import asyncio
import ssl
from pathlib import Path

import pytest

from tests.conftest import scripted_openai
from tether import Agent, run
from tether.providers import http
from tether.testing import ScriptedServer
from tether.tools.files import FILE_TOOLS


def test_runs_in_one_loop_share_one_client_and_its_connection(workspace: Path) -> None:
    with ScriptedServer() as server:

        async def go() -> tuple[int, int, bool]:
            for _ in range(3):
                result = await run(Agent(scripted_openai(server), tools=FILE_TOOLS, cwd=workspace), "Which file?")
                assert result.status == "completed"
            clients = http._POOL[asyncio.get_running_loop()]
            (client,) = clients.values()
            connections = len(client._transport._pool.connections)
            await http.close_clients()
            return len(clients), connections, client.is_closed

        count, connections, closed = asyncio.run(go())
    assert count == 1, "one client per endpoint, not one per run"
    assert connections == 1, "nine requests over one kept-alive connection"
    assert closed


def test_the_ssl_context_is_built_once_per_process() -> None:
    async def go() -> None:
        for url in ("https://a.example/v1", "https://b.example/v1", "http://127.0.0.1:9/v1"):
            http.pooled_client(url, {}, 10.0)
        await http.close_clients()

    asyncio.run(go())
    asyncio.run(go())
    assert http._ssl_context.cache_info().currsize == 1


def _client_context(url: str) -> object:
    async def go() -> object:
        client = http.pooled_client(url, {}, 10.0)
        context = client._transport._pool._ssl_context
        await http.close_clients()
        return context

    return asyncio.run(go())


def test_a_plain_http_endpoint_without_a_proxy_loads_no_ca_bundle(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("http_proxy", "HTTP_PROXY", "all_proxy", "ALL_PROXY", "https_proxy", "HTTPS_PROXY"):
        monkeypatch.delenv(name, raising=False)
    local = _client_context("http://127.0.0.1:9/v1")
    assert isinstance(local, ssl.SSLContext)
    assert local.cert_store_stats()["x509_ca"] == 0, "no CA bundle parsed for a client that never uses TLS"
    # Were a TLS connection ever attempted through it, it would fail closed, never unverified.
    assert local.verify_mode == ssl.CERT_REQUIRED and local.check_hostname
    remote = _client_context("https://api.example/v1")
    assert remote is http._ssl_context() and remote.cert_store_stats()["x509_ca"] > 0


def test_a_plain_http_endpoint_behind_a_proxy_gets_the_full_context(monkeypatch: pytest.MonkeyPatch) -> None:
    # The proxy itself may be reached over TLS: its certificate must be verified.
    monkeypatch.setenv("HTTP_PROXY", "https://proxy.example:3128")
    assert _client_context("http://10.0.0.5:8000/v1") is http._ssl_context()
