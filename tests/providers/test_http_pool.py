"""Clients and their connections are kept across runs in one event loop; the SSL context is built once."""

from __future__ import annotations

import asyncio
from pathlib import Path

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
