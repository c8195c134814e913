"""The page while it starts: a message typed before the page knows which conversation it shows."""

from __future__ import annotations

import re
from typing import Any

import pytest
from playwright.sync_api import Page, Route, expect

from tests.server.conftest import NEEDS_CHROMIUM
from tests.server.test_page import AGENTS, last_turn, send
from tests.server.test_page_s15 import SESSIONS, hold_requests, release

pytestmark = NEEDS_CHROMIUM
expect.set_options(timeout=15_000)


@pytest.fixture
def server(served: Any) -> Any:
    return served(agents_module=AGENTS)


def new_chat(page: Page) -> str:
    """New chat with the configure agent, once the page has started: its address."""
    expect(page.locator("#me")).to_contain_text("local")
    page.select_option("#agent-pick", "configure")
    page.click("#new-chat")
    expect(page).to_have_url(re.compile(r"#s_\w+$"))
    return page.url


def answered_chat(page: Page, server: Any) -> str:
    """A chat whose first question is answered: its address."""
    page.goto(server.url)
    url = new_chat(page)
    send(page, "first question")
    expect(last_turn(page).locator(".status")).to_have_count(0)
    return url


def until_held(page: Page, held: list[Route]) -> None:
    """Until a request the test holds is out (a hang guard only, not a clock the test reads)."""
    for _ in range(1000):
        if held:
            return
        page.wait_for_timeout(20)  # route handlers run while Playwright waits


def test_a_message_typed_while_the_page_starts_waits_for_the_session_of_the_address(page: Page, server: Any) -> None:
    """Was: Send was enabled from the first paint, but the page took the session in its address only
    after the agents, sessions and accounts had come; Enter pressed in between (once the user's name
    showed) found no session, so it started a new chat and sent the message there, and the reloaded
    conversation was left. test_page_s15's reload test hit it on a loaded machine. Here the agents'
    answer is held: Send stays off and the typed text stays in the box until the session is open."""
    session_url = answered_chat(page, server)
    held: list[Route] = []

    def hold(route: Route) -> None:
        held.append(route)

    page.route(re.compile(r".*/v1/agents$"), hold)
    page.reload()
    expect(page.locator("#me")).to_contain_text("local")  # what the test above waited for
    page.fill("#prompt", "second question")
    page.press("#prompt", "Enter")
    expect(page.locator("#send")).to_be_disabled()
    assert held, "the page asked for its agents"
    for route in held:
        route.continue_()
    page.unroute(re.compile(r".*/v1/agents$"))

    expect(page.locator(".turn")).to_have_count(1)
    expect(page.locator("#prompt")).to_have_value("second question")  # nothing lost
    assert page.url == session_url
    expect(page.locator("#send")).to_be_enabled()  # the history's run replayed
    page.press("#prompt", "Enter")
    expect(page.locator(".turn")).to_have_count(2)
    expect(last_turn(page).locator(".status")).to_have_count(0)
    expect(page.locator(".turn").nth(0).locator(".user-msg")).to_have_text("first question")
    expect(page.locator(".turn").nth(1).locator(".user-msg")).to_have_text("second question")
    assert page.url == session_url
    with server.client() as client:
        assert len(client.get("/v1/sessions").json()["sessions"]) == 1


def test_a_chat_started_while_the_page_starts_is_not_replaced_under_a_message_being_sent(
    page: Page, server: Any
) -> None:
    """Was: once its lists had come, the page opened the session in its address whatever had been
    opened meanwhile. New chat clicked as soon as the agents showed (before the conversations'
    list came) opened the new chat, and a message sent there was cut off: the page opened that chat
    again over it, which aborted the message's request, and the turn vanished, never sent. Here the
    list is held until the message is on its way."""
    held: dict[str, list[Route]] = {"list": [], "message": []}

    def hold(route: Route) -> None:
        request = route.request
        if request.method == "GET" and re.search(r"/v1/sessions$", request.url):
            held["list"].append(route)
        elif request.method == "POST" and re.search(r"/v1/sessions/s_\w+/messages$", request.url):
            held["message"].append(route)
        else:
            route.continue_()

    page.route(SESSIONS, hold)
    page.goto(server.url)
    new_chat(page)
    send(page, "I need a cabinet heater")
    expect(page.locator(".turn")).to_have_count(1)
    until_held(page, held["message"])
    assert len(held["message"]) == 1 and held["list"], held
    held["list"].pop(0).continue_()  # the page's own first list: the page starts on
    expect(page.locator("#sessions a")).to_have_count(1)  # it came: what the page does next is done
    for route in held["message"] + held["list"]:
        route.continue_()
    page.unroute(SESSIONS)
    expect(last_turn(page).locator(".widget-buttons h3")).to_have_text("Which series?")
    expect(last_turn(page).locator(".status")).to_have_count(0)
    expect(page.locator(".turn")).to_have_count(1)
    with server.client() as client:
        [session] = client.get("/v1/sessions").json()["sessions"]
        assert len(client.get(f"/v1/sessions/{session['session_id']}").json()["turns"]) == 1


def test_a_message_sent_while_new_chat_is_being_made_goes_to_the_new_chat(page: Page, server: Any) -> None:
    """Was: New chat showed the new chat only once the server had made it; a message sent before
    (typed at once after the click) went to the conversation still shown, and vanished from view as
    the new chat opened (on a page with none shown it made a second new chat of its own, racing
    the first). Page tests that click New chat and press Enter at once could hit it under load. Here
    the server's answer to New chat is held until the message has been sent."""
    first_url = answered_chat(page, server)
    held = hold_requests(page, "POST", r"/v1/sessions")  # New chat's
    page.click("#new-chat")
    send(page, "I need a cabinet heater")
    until_held(page, held)
    release(page, held)
    expect(page).not_to_have_url(first_url)
    expect(last_turn(page).locator(".widget-buttons h3")).to_have_text("Which series?")
    expect(last_turn(page).locator(".status")).to_have_count(0)
    expect(page.locator(".turn")).to_have_count(1)
    expect(last_turn(page).locator(".user-msg")).to_have_text("I need a cabinet heater")
    with server.client() as client:
        sessions = client.get("/v1/sessions").json()["sessions"]
        turns = {s["session_id"]: client.get(f"/v1/sessions/{s['session_id']}").json()["turns"] for s in sessions}
    assert sorted(len(t) for t in turns.values()) == [1, 1], turns
    assert turns[first_url.rsplit("#", 1)[1]][0]["text"] == "first question"
