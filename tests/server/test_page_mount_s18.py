"""The page of ``tether serve`` in Chromium where a new user met it failing: tether's app mounted
under a prefix in the user's own FastAPI app (docs/server.md, "In your own FastAPI app"), and a
run stopped at one of its limits, which Resume alone cannot continue."""

from __future__ import annotations

import re
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi import FastAPI
from playwright.sync_api import Page, expect

from tests.server.conftest import EXAMPLE_WORKSPACE, NEEDS_CHROMIUM, Uvicorn, start_uvicorn
from tether import Agent
from tether.config import load_settings
from tether.server import create_app
from tether.tools.files import FILE_TOOLS

pytestmark = NEEDS_CHROMIUM
expect.set_options(timeout=15_000)
QUESTION = "Which file mentions a timeout?"


@pytest.fixture
def served() -> Iterator[list[Uvicorn]]:
    ups: list[Uvicorn] = []
    yield ups
    for up in ups:
        up.stop()


def _serve(tmp_path: Path, served: list[Uvicorn], prefix: str, **limits: Any) -> str:
    """The scripted agent "plan" (three turns: two tool calls and the answer) with ``limits``,
    served by tether's app mounted at ``prefix`` ("" for the root) of an app of the user's: the
    page's address."""
    workspace = tmp_path / "workspace"
    shutil.copytree(EXAMPLE_WORKSPACE, workspace)
    agent = Agent("scripted/plan", tools=FILE_TOOLS, cwd=str(workspace), **limits)
    tether_app = create_app(load_settings(tmp_path / "home"), agents={"plan": agent})
    if prefix:
        app = FastAPI(lifespan=tether_app.router.lifespan_context)
        app.mount(prefix, tether_app)

        @app.get("/orders")
        def orders() -> dict[str, Any]:
            return {"orders": []}

        up = start_uvicorn(app, lifespan="on")
    else:
        up = start_uvicorn(tether_app, lifespan="on")
    served.append(up)
    return up.url + prefix


def _ask(page: Page, url: str) -> Any:
    """Open the page at ``url``, start a chat and send the question: its turn."""
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    page.goto(url)
    expect(page.locator("#me")).to_contain_text("local")
    page.click("#new-chat")
    expect(page).to_have_url(re.compile(r"#s_\w+$"))
    expect(page.locator("#send")).to_be_enabled()
    page.fill("#prompt", QUESTION)
    page.press("#prompt", "Enter")
    assert not errors, errors
    return page.locator(".turn").last


@pytest.mark.parametrize("address", ["/agents/", "/agents"])
def test_the_page_works_with_tethers_app_mounted_under_a_prefix(
    page: Page, tmp_path: Path, served: list[Uvicorn], address: str
) -> None:
    """Was: mounted at /agents, the page loaded /static/app.js and asked /v1/... at the host's root
    (404s: a blank page that could not sign in or start a chat). Its files and the API are now
    asked for under the page's own address, so it opens a chat, sends and streams the answer."""
    url = _serve(tmp_path, served, "/agents")
    asked: list[str] = []
    page.on("request", lambda r: asked.append(r.url))
    turn = _ask(page, url.removesuffix("/agents") + address)
    expect(turn.locator(".step .tool-name")).to_have_text(["list_files", "read_file"])
    expect(turn.locator(".answer")).to_contain_text("errors.log mentions a timeout: ")
    expect(turn.locator(".exit")).to_contain_text("completed")
    expect(page.locator(".sessions a.active")).to_contain_text(QUESTION)
    host = url.removesuffix("/agents")
    strays = [u for u in asked if u.startswith(host) and not u.startswith(url + "/")]
    redirected = [host + "/agents"] if address == "/agents" else []  # to /agents/, by the user's app
    assert strays == redirected, strays


def _resume_form(turn: Any, label: str, why: str) -> Any:
    expect(turn.locator(".resume-why")).to_contain_text(why)
    return turn.get_by_label(label)


def test_a_run_stopped_at_its_budget_resumes_with_the_new_budget_the_page_offers(
    page: Page, tmp_path: Path, served: list[Uvicorn]
) -> None:
    """Was: Resume sent an empty body, and a run stopped at its dollar budget got a 409 ("resume it
    with {"max_budget_usd": X}") the page's user could not act on. The page now says the budget
    stopped it and offers a new total above what was spent; resumed with it, the run finishes."""
    turn = _ask(page, _serve(tmp_path, served, "", max_budget_usd=0.00001))
    expect(turn.locator(".exit")).to_contain_text("budget_exceeded")
    budget = _resume_form(turn, "New budget in all, $", "Stopped at its budget: $")
    expect(budget).to_have_value("0.01")  # spent $0.000000 here; at least a cent more, rounded up to a cent
    turn.get_by_role("button", name="Resume").click()
    expect(turn.locator(".answer")).to_contain_text("errors.log mentions a timeout: ")
    expect(turn.locator(".exit")).to_contain_text("completed")
    expect(turn.locator(".note.error")).to_have_count(0)


def test_a_run_stopped_at_its_token_limit_resumes_with_a_larger_one(
    page: Page, tmp_path: Path, served: list[Uvicorn]
) -> None:
    """Was: a run stopped by max_run_tokens (budget_exceeded, "the run's token limit ...") got the
    same empty Resume and a 409 asking for {"max_run_tokens": N}. The page now names the token
    limit and what was used, and resumes with the new limit typed in."""
    turn = _ask(page, _serve(tmp_path, served, "", max_run_tokens=600))
    expect(turn.locator(".exit")).to_contain_text("budget_exceeded")
    tokens = _resume_form(turn, "New token limit, in all", "Stopped at its token limit: 274 tokens used.")
    expect(tokens).to_have_value("1000")  # twice what was used, rounded up to a thousand
    tokens.fill("5000")
    turn.get_by_role("button", name="Resume").click()
    expect(turn.locator(".exit")).to_contain_text("completed")
    expect(turn.locator(".answer")).to_contain_text("errors.log mentions a timeout: ")


def test_a_run_stopped_at_its_turn_limit_resumes_with_more_turns(
    page: Page, tmp_path: Path, served: list[Uvicorn]
) -> None:
    """Was: a run stopped at max_turns got a 409 asking for {"more_turns": N} from the page's
    Resume. The page now offers more turns (as many as it took, at least 5) and the run goes on."""
    turn = _ask(page, _serve(tmp_path, served, "", max_turns=1))
    expect(turn.locator(".exit")).to_contain_text("max_turns_exceeded")
    more = _resume_form(turn, "More turns", "Stopped at its turn limit after 1 turn.")
    expect(more).to_have_value("5")
    turn.get_by_role("button", name="Resume").click()
    expect(turn.locator(".exit")).to_contain_text("completed")
    expect(turn.locator(".answer")).to_contain_text("errors.log mentions a timeout: ")


def test_a_browser_connects_its_account_with_tethers_app_mounted_under_a_prefix(
    page: Page, tmp_path: Path, served: list[Uvicorn], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Was: mounted at /agents, the cookie that marks the browser which started a sign-in was set
    for /v1/connections, so the browser never sent it to /agents/v1/connections/callback: the sign-in
    asked "connect for local?" as if started elsewhere, and that page's form posted to
    /v1/connections/callback (404). The cookie now follows the prefix, and the pages link relatively:
    a sign-in started through the API and confirmed in Chromium connects too."""
    import httpx

    from tests.connectors.oauth_process import oauth_server

    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("TETHER_HOME", str(home))
    monkeypatch.delenv("TETHER_CONNECTIONS_KEY", raising=False)
    with oauth_server() as auth:
        (home / "config.toml").write_text(f'[mcp.guarded]\nurl = "{auth}/mcp"\nauth = "oauth"\n')
        tether_app = create_app(load_settings(home), agents={"helper": Agent("scripted/hello")})
        app = FastAPI(lifespan=tether_app.router.lifespan_context)
        app.mount("/agents", tether_app)
        up = start_uvicorn(app, lifespan="on")
        served.append(up)
        with httpx.Client(base_url=up.url, timeout=60) as browser:
            r = browser.post("/agents/v1/connections/guarded")
            assert r.status_code == 200, r.text
            assert "path=/agents/v1/connections" in r.headers["set-cookie"].lower()
            approved = httpx.get(r.json()["authorize_url"], follow_redirects=False, timeout=30)
            back = approved.headers["location"]
            assert back.startswith(f"{up.url}/agents/v1/connections/callback?"), back
            done = browser.get(back)  # the browser's own cookies, as a browser sends them
            assert done.status_code == 200 and "is connected" in done.text, done.text
            assert "href='../../'" in done.text  # back to the page, under the mount
            listed = browser.get("/agents/v1/connections").json()["connections"]
            assert [c["connected"] for c in listed if c["server"] == "guarded"] == [True], listed
            assert browser.delete("/agents/v1/connections/guarded").json()["forgotten"]
            started = httpx.post(f"{up.url}/agents/v1/connections/guarded", timeout=60).json()  # no cookie
            approved = httpx.get(started["authorize_url"], follow_redirects=False, timeout=30)
            page.goto(approved.headers["location"])
            page.get_by_role("button", name="Connect to local").click()
            expect(page.locator("body")).to_contain_text("Your account for guarded is connected")
            page.get_by_role("link", name="Back to tether").click()
            expect(page).to_have_url(f"{up.url}/agents/")
            expect(page.locator("#me")).to_contain_text("local")
