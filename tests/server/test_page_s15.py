"""The page: a message sent while the session it belongs to is still loading (a quick typist, a
slow server) is shown once, after the session's history."""

from __future__ import annotations

import re
from typing import Any

import pytest
from playwright.sync_api import Page, Route, expect

from tests.server.conftest import NEEDS_CHROMIUM
from tests.server.test_page import AGENTS, last_turn, send

pytestmark = NEEDS_CHROMIUM
expect.set_options(timeout=15_000)


@pytest.fixture
def server(served: Any) -> Any:
    return served(agents_module=AGENTS)


SESSIONS = re.compile(r".*/v1/sessions.*")  # every sessions request passes the hold


def hold_requests(page: Page, method: str, path: str) -> list[Route]:
    """The page's ``method`` requests whose address ends as ``path`` (a regular expression) are
    held, unanswered, until :func:`release`; every other request goes on."""
    held: list[Route] = []

    def hold(route: Route) -> None:
        if route.request.method == method and re.search(path + "$", route.request.url):
            held.append(route)
        else:
            route.continue_()

    page.route(SESSIONS, hold)
    return held


def hold_session_views(page: Page) -> list[Route]:
    """The page's requests for a session's view (its history) are held until :func:`release`."""
    return hold_requests(page, "GET", r"/v1/sessions/s_\w+")


def release(page: Page, held: list[Route]) -> None:
    for route in held:
        route.continue_()
    page.unroute(SESSIONS)


def test_a_message_sent_while_its_new_session_loads_is_shown_once(page: Page, server: Any) -> None:
    """Before: the session's view was fetched as the chat opened; a message sent before that answer
    came was recorded in it, so the history added the message as a second turn (two widgets, the
    first disabled). Here the answer is held until the message's run has ended."""
    held = hold_session_views(page)
    page.goto(server.url)
    expect(page.locator("#me")).to_contain_text("local")
    page.select_option("#agent-pick", "configure")
    page.click("#new-chat")
    expect(page).to_have_url(re.compile(r"#s_\w+$"))
    send(page, "I need a cabinet heater")
    expect(last_turn(page).locator(".widget-buttons h3")).to_have_text("Which series?")
    expect(last_turn(page).locator(".status")).to_have_count(0)  # the run has ended
    assert held, "the page asked for the session's view"
    release(page, held)
    expect(page.locator(".widget-buttons")).to_have_count(1)
    page.wait_for_load_state("networkidle")
    expect(page.locator(".turn")).to_have_count(1)
    page.locator(".widget-buttons").get_by_role("button", name="I want to configure the LB series.").click()
    expect(page.locator(".turn")).to_have_count(2)
    expect(last_turn(page).locator(".user-msg")).to_have_text("I want to configure the LB series.")


def test_history_comes_before_a_message_sent_while_an_old_session_loads(page: Page, server: Any) -> None:
    """An existing session opened, and a message sent before its history came: the history is shown
    first, the new message last."""
    page.goto(server.url)
    expect(page.locator("#me")).to_contain_text("local")
    page.select_option("#agent-pick", "configure")
    page.click("#new-chat")
    expect(page).to_have_url(re.compile(r"#s_\w+$"))
    session_url = page.url
    send(page, "first question")
    expect(last_turn(page).locator(".status")).to_have_count(0)
    held = hold_session_views(page)
    page.reload()  # the session opened again from its address: its history is asked for, and held
    assert page.url == session_url
    expect(page.locator("#me")).to_contain_text("local")
    send(page, "second question")
    expect(page.locator(".turn")).to_have_count(1)
    expect(last_turn(page).locator(".status")).to_have_count(0)
    release(page, held)
    expect(page.locator(".turn")).to_have_count(2)
    expect(page.locator(".turn").nth(0).locator(".user-msg")).to_have_text("first question")
    expect(page.locator(".turn").nth(1).locator(".user-msg")).to_have_text("second question")
