"""Each user connects their own account from the page, in a real headless Chromium: the page opens
the MCP server's authorization page (a real OAuth server the test starts,
tests/connectors/oauth_server.py, in its consent mode) in a new tab, the person clicks Allow there,
the browser comes back to ``tether serve``, and the page shows the account connected. That user's
runs then call the server with their own token; another user's list still says not connected."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

pytest.importorskip("playwright", reason="needs tether[test] (the [test] extra installs it)")
pytest.importorskip("mcp", reason="needs tether[mcp] (the [test] extra installs it)")
pytest.importorskip("cryptography", reason="the sealed token store needs it (the mcp SDK installs it)")

from playwright.sync_api import Page, expect

from tests.connectors.oauth_process import oauth_server
from tests.server.conftest import NEEDS_CHROMIUM

pytestmark = NEEDS_CHROMIUM
expect.set_options(timeout=15_000)

AGENTS = Path(__file__).with_name("mcp_agents.py")


@pytest.fixture(scope="module")
def auth_server() -> Iterator[str]:
    with oauth_server(CONSENT="1") as url:  # a consent page a person clicks through
        yield url


@pytest.fixture
def server(served: Any, auth_server: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Any:
    monkeypatch.setenv("TETHER_HOME", str(tmp_path / "home0"))
    monkeypatch.setenv("TETHER_TEST_MCP_URL", f"{auth_server}/mcp")
    monkeypatch.delenv("TETHER_CONNECTIONS_KEY", raising=False)
    config = f'[mcp.guarded]\nurl = "{auth_server}/mcp"\nauth = "oauth"\n'
    return served(agents_module=AGENTS, tokens=["alice", "bob"], config=config)


def signed_in(page: Page, server: Any, user: str) -> None:
    """Open the page as ``user`` (their token already in the tab, as after signing in)."""
    page.context.add_init_script(f"sessionStorage.setItem('tether.token', {server.tokens[user]!r})")
    page.goto(server.url)
    expect(page.locator("#me")).to_contain_text(user)


def account(page: Page) -> Any:
    return page.locator('#account-list [data-server="guarded"]')


def listing(server: Any, user: str) -> list[dict[str, Any]]:
    with server.client(user) as c:
        connections: list[dict[str, Any]] = c.get("/v1/connections").json()["connections"]
        return connections


def test_a_person_connects_their_account_in_a_browser_and_their_run_uses_it(
    server: Any, page: Page, auth_server: str
) -> None:
    signed_in(page, server, "alice")
    expect(page.locator("#accounts")).to_be_visible()
    expect(account(page).locator(".account-state")).to_have_text("not connected")

    with page.context.expect_page() as opened:
        account(page).get_by_role("button", name="Connect").click()
    tab = opened.value
    expect(tab.locator("h1")).to_have_text("tether wants to use your account")  # the other site's page
    assert tab.url.startswith(f"{auth_server}/consent?")
    assert tab.evaluate("window.opener") is None  # cut from tether's page before it left
    tab.click("#allow")
    expect(tab.locator("body")).to_contain_text("Your account for guarded is connected")
    assert tab.url.startswith(f"{server.url}/v1/connections/callback?")

    expect(account(page).locator(".account-state")).to_have_text("connected")
    expect(account(page).get_by_role("button", name="Disconnect")).to_be_visible()
    assert listing(server, "alice") == [{"server": "guarded", "connected": True}]
    assert listing(server, "bob") == [{"server": "guarded", "connected": False}]

    # Alice's run calls the server with the token her browser got; no token ever reaches the page.
    issued = httpx.get(f"{auth_server}/stats", timeout=30).json()["issued"]
    page.click("#new-chat")
    page.fill("#prompt", "who am I?")
    page.press("#prompt", "Enter")
    turn = page.locator(".turn").last
    expect(turn.locator(".answer")).to_contain_text("the server said: signed in")
    called_with = httpx.get(f"{auth_server}/stats", timeout=30).json()["called_with"]
    assert called_with and called_with[-1] in issued
    assert not any(token in page.content() for token in issued)

    account(page).get_by_role("button", name="Disconnect").click()
    expect(account(page).locator(".account-state")).to_have_text("not connected")
    assert listing(server, "alice") == [{"server": "guarded", "connected": False}]


def test_deny_in_the_browser_leaves_the_account_unconnected_and_says_so(server: Any, page: Page) -> None:
    signed_in(page, server, "bob")
    with page.context.expect_page() as opened:
        account(page).get_by_role("button", name="Connect").click()
    tab = opened.value
    tab.click("#deny")
    expect(tab.locator("body")).to_contain_text("did not succeed: access_denied")
    tab.close()
    expect(account(page).locator(".error")).to_contain_text("the sign-in did not finish")
    expect(account(page).locator(".account-state")).to_have_text("not connected")
    assert listing(server, "bob") == [{"server": "guarded", "connected": False}]
