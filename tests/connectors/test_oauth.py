"""The MCP authorization flow (tether.connectors._oauth) against a real authorization server the
test starts (tests/connectors/oauth_server.py, the MCP SDK's auth routes): discovery (RFC 9728,
RFC 8414), dynamic client registration (RFC 7591), the authorization code with PKCE caught on
loopback by `tether mcp login`, and refresh. The "browser" follows the authorization page's
redirect with an HTTP client."""

from __future__ import annotations

import asyncio
import json
import stat
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.connectors.oauth_process import oauth_server
from tether.cancel import CancelSignal
from tether.cli import main
from tether.connectors import McpConnector, token_path
from tether.errors import ConfigError
from tether.tools.base import TextPart, ToolContext

SERVER = Path(__file__).resolve().parent / "oauth_server.py"
LIFETIME_S = 2


@pytest.fixture(scope="module")
def server() -> Iterator[str]:
    with oauth_server(TOKEN_LIFETIME=str(LIFETIME_S)) as url:
        yield url


def stats(server: str) -> dict[str, Any]:
    data: dict[str, Any] = httpx.get(f"{server}/stats", timeout=30).json()
    return data


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, server: str) -> Path:
    home = tmp_path / "home"
    home.mkdir()
    (home / "config.toml").write_text(f'[mcp.guarded]\nurl = "{server}/mcp"\nauth = "oauth"\n')
    monkeypatch.setenv("TETHER_HOME", str(home))
    monkeypatch.delenv("TETHER_MCP_REFRESH_TOKEN", raising=False)
    return home


def browser(pages: list[str]) -> Any:
    """Plays the person's browser: opens the page, which approves at once and redirects to tether's
    loopback address, and follows that redirect."""

    def open_page(url: str, *args: Any, **kwargs: Any) -> bool:
        pages.append(url)
        approved = httpx.get(url, follow_redirects=False, timeout=30)
        assert approved.status_code in (302, 303, 307), approved.text
        assert approved.headers["location"].startswith("http://127.0.0.1:")
        httpx.get(approved.headers["location"], timeout=30)
        return True

    return open_page


def whoami(home: Path) -> str:
    table = {"url": None, "auth": "oauth"}
    config = (home / "config.toml").read_text()
    table["url"] = config.split('url = "')[1].split('"')[0]
    connector = McpConnector("guarded", table, home=home)

    async def go() -> str:
        await connector.start()
        try:
            tool = next(t for t in connector.tools() if t.name == "guarded__whoami")
            result = await tool.execute({}, ToolContext(cwd=home, signal=CancelSignal()))
            return "".join(p.text for p in result.parts() if isinstance(p, TextPart))
        finally:
            await connector.stop()

    return asyncio.run(asyncio.wait_for(go(), 120))


def test_login_discovers_registers_signs_in_with_pkce_and_runs_refresh(
    home: Path, server: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    before = stats(server)
    pages: list[str] = []
    monkeypatch.setattr("webbrowser.open", browser(pages))
    assert main(["mcp", "login", "guarded"]) == 0
    assert "signed in to the MCP server guarded (1 tools)" in capsys.readouterr().err
    (page,) = pages
    assert page.startswith(f"{server}/authorize?") and "code_challenge_method=S256" in page  # PKCE
    after = stats(server)
    assert after["registered"] == before["registered"] + 1 and after["codes"] == before["codes"] + 1

    path = token_path(home, "guarded")
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    saved = json.loads(path.read_text())
    assert saved["tokens"]["access_token"] in after["issued"] and saved["client"]["client_id"]

    assert whoami(home) == "signed in"  # a run uses the stored tokens, no browser
    time.sleep(LIFETIME_S + 1)  # the access token expires
    assert whoami(home) == "signed in"
    assert stats(server)["refreshes"] >= after["refreshes"] + 1
    assert json.loads(path.read_text())["tokens"]["access_token"] != saved["tokens"]["access_token"]
    assert len(pages) == 1  # refreshed, never signed in again


def test_a_run_without_tokens_says_to_log_in(home: Path) -> None:
    with pytest.raises(ConfigError, match="run `tether mcp login guarded`"):
        whoami(home)
