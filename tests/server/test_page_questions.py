"""An MCP server's question (elicitation) on the page, in a real headless Chromium: the turn shows
the server's form in the tool's step, the person fills it in and sends it, and the answer follows;
Decline tells the server no; a reload while the question waits shows it again.

``served`` comes before ``page`` in each test's arguments, so the server outlives the page."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("playwright", reason="needs tether[test] (the [test] extra installs it)")
pytest.importorskip("mcp", reason="needs tether[mcp] (the [test] extra installs it)")

from playwright.sync_api import Page, expect

from tests.server.conftest import NEEDS_CHROMIUM

pytestmark = NEEDS_CHROMIUM
expect.set_options(timeout=15_000)

AGENTS = Path(__file__).with_name("asking_agents.py")


def start(page: Page, server: Any, text: str) -> Any:
    page.goto(server.url)
    expect(page.locator("#me")).to_contain_text("local")
    page.click("#new-chat")
    page.fill("#prompt", text)
    page.press("#prompt", "Enter")
    return page.locator(".turn").last


def test_the_servers_form_is_filled_in_on_the_page_and_the_answer_follows(
    served: Any, page: Page, bookings: Path, tmp_path: Path
) -> None:
    server = served(agents_module=AGENTS)
    turn = start(page, server, "a table on Friday, please")
    card = turn.locator(".question")
    expect(card).to_contain_text("diner asks you: Who is the table on Friday for?")
    expect(turn.locator(".step .badge")).to_have_text("asks you")
    page.reload()  # the question survives a reload: it is the run's waiting
    turn = page.locator(".turn").last
    card = turn.locator(".question")
    expect(card).to_contain_text("Who is the table on Friday for?")
    card.locator("input[name=guests]").fill("4")
    card.get_by_role("button", name="Send").click()  # the name is required: the browser says so first
    assert bookings.read_text() == ""
    card.locator("input[name=name]").fill("Ada")
    card.locator("input[name=window]").check()
    box = card.locator("input[name=window]").bounding_box()
    assert box is not None and box["width"] < 40  # a checkbox, not a field-wide bar
    page.screenshot(path=str(tmp_path / "page-question.png"))
    card.get_by_role("button", name="Send").click()
    expect(turn.locator(".answer")).to_contain_text("Booked: Friday for Ada, 4 guests, window yes")
    expect(turn.locator(".decision")).to_have_text("Answered")
    expect(turn.locator(".exit")).to_contain_text("completed")
    assert bookings.read_text() == "Friday for Ada, 4 guests, window yes\n"


def test_an_answer_the_form_refuses_says_why_and_decline_tells_the_server_no(
    served: Any, page: Page, bookings: Path, console_errors: list[str]
) -> None:
    server = served(agents_module=AGENTS)
    turn = start(page, server, "a table on Friday, please")
    card = turn.locator(".question")
    card.locator("input[name=name]").fill("Ada")
    card.locator("input[name=guests]").fill("40")  # past the schema's maximum of 12
    card.locator("input[name=guests]").evaluate("e => e.removeAttribute('max')")  # as a stale page would
    card.get_by_role("button", name="Send").click()
    expect(card.locator(".error")).to_contain_text("the answer does not fit the form")
    assert sum("400 (Bad Request)" in e for e in console_errors) == 1
    console_errors.clear()
    card.get_by_role("button", name="Decline").click()
    expect(turn.locator(".answer")).to_contain_text("Not booked: the person chose decline.")
    expect(turn.locator(".decision")).to_have_text("Declined")
    assert bookings.read_text() == ""


def test_a_servers_request_for_the_model_is_allowed_on_the_page(served: Any, page: Page, bookings: Path) -> None:
    server = served(agents_module=AGENTS)
    turn = start(page, server, "a summary of the menu, please")
    card = turn.locator(".approval")
    expect(card).to_contain_text("During this call the MCP server diner asks the model: “Summarise: the menu changes")
    card.get_by_role("button", name="Allow").click()
    expect(turn.locator(".answer")).to_contain_text("the diner said: Summary: ")
    expect(turn.locator(".exit")).to_contain_text("completed")
