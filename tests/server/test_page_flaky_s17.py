"""The page while it starts: a message typed before the page knows which conversation it shows."""

from __future__ import annotations

import re
from typing import Any

import pytest
from playwright.sync_api import Page, Route, expect

from tests.server.conftest import NEEDS_CHROMIUM
from tests.server.test_page import AGENTS, last_turn, send

pytestmark = NEEDS_CHROMIUM
expect.set_options(timeout=15_000)


SESSIONS = re.compile(r".*/v1/sessions.*")


@pytest.fixture
def server(served: Any) -> Any:
    return served(agents_module=AGENTS)


def test_a_message_typed_while_the_page_starts_waits_for_the_session_of_the_address(page: Page, server: Any) -> None:
    """Was: Send was enabled from the first paint, but the page took the session in its address only
    after the agents, sessions and accounts had come; Enter pressed in between (once the user's name
    showed) found no session, so it started a new chat and sent the message there, and the reloaded
    conversation was left. test_page_s15's reload test hit it on a loaded machine. Here the agents'
    answer is held: Send stays off and the typed text stays in the box until the session is open."""
    page.goto(server.url)
    expect(page.locator("#me")).to_contain_text("local")
    page.select_option("#agent-pick", "configure")
    page.click("#new-chat")
    expect(page).to_have_url(re.compile(r"#s_\w+$"))
    session_url = page.url
    send(page, "first question")
    expect(last_turn(page).locator(".status")).to_have_count(0)

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
    expect(page.locator("#me")).to_contain_text("local")
    page.select_option("#agent-pick", "configure")
    page.click("#new-chat")
    expect(page).to_have_url(re.compile(r"#s_\w+$"))
    send(page, "I need a cabinet heater")
    expect(page.locator(".turn")).to_have_count(1)
    for _ in range(1000):  # a hang guard only: until the message's request is out (held)
        if held["message"]:
            break
        page.wait_for_timeout(20)  # route handlers run while Playwright waits
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
    page.goto(server.url)
    expect(page.locator("#me")).to_contain_text("local")
    page.select_option("#agent-pick", "configure")
    page.click("#new-chat")
    expect(page).to_have_url(re.compile(r"#s_\w+$"))
    first_url = page.url
    send(page, "first question")
    expect(last_turn(page).locator(".status")).to_have_count(0)

    held: list[Route] = []

    def hold(route: Route) -> None:
        if route.request.method == "POST" and re.search(r"/v1/sessions$", route.request.url):
            held.append(route)
        else:
            route.continue_()

    page.route(SESSIONS, hold)
    page.click("#new-chat")
    send(page, "I need a cabinet heater")
    for _ in range(1000):  # a hang guard only: until New chat's request is out (held)
        if held:
            break
        page.wait_for_timeout(20)  # route handlers run while Playwright waits
    for route in held:
        route.continue_()
    page.unroute(SESSIONS)
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
