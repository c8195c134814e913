"""The page of ``tether serve`` in a real headless Chromium, against the real server and the
scripted models of ``page_agents.py``: what a person sees and clicks.

Screenshots go to the directory in ``TETHER_SCREENSHOTS`` when it is set (else the test's
temporary directory). The README's picture of the page is ``serve-page.png`` from
``test_the_readme_screenshot``: ``TETHER_SCREENSHOTS=docs/images python -m pytest
tests/server/test_page.py -k readme_screenshot`` makes it again."""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

import httpx
import pytest

pytest.importorskip("playwright")

from playwright.sync_api import Browser, Page, expect

from tests.server.conftest import NEEDS_CHROMIUM

pytestmark = NEEDS_CHROMIUM

AGENTS = Path(__file__).with_name("page_agents.py")
expect.set_options(timeout=15_000)


@pytest.fixture
def server(served: Any) -> Any:
    return served(agents_module=AGENTS)


def shot(page: Page, tmp_path: Path, name: str, filename: str | None = None) -> Path:
    folder = Path(os.environ.get("TETHER_SCREENSHOTS") or tmp_path)
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / (filename or f"page-{name}.png")
    page.screenshot(path=str(path))
    return path


def open_chat(page: Page, server: Any, agent: str) -> None:
    """Open the page, pick ``agent`` and start a new chat."""
    page.goto(server.url)
    expect(page.locator("#me")).to_contain_text("local")
    page.select_option("#agent-pick", agent)
    page.click("#new-chat")
    expect(page).to_have_url(re.compile(r"#s_\w+$"))


def send(page: Page, text: str) -> None:
    expect(page.locator("#send")).to_be_enabled()
    page.fill("#prompt", text)
    page.press("#prompt", "Enter")


def last_turn(page: Page) -> Any:
    return page.locator(".turn").last


def workspace(server: Any) -> Path:
    return server.home.parent / server.home.name.replace("home", "workspace")


def test_a_streamed_answer_with_its_tool_steps_and_exit_line(page: Page, server: Any, tmp_path: Path) -> None:
    open_chat(page, server, "plan")
    send(page, "Which file mentions a timeout?")
    turn = last_turn(page)
    expect(turn.locator(".user-msg")).to_have_text("Which file mentions a timeout?")
    steps = turn.locator(".step")
    expect(steps).to_have_count(2)
    expect(steps.nth(0).locator(".tool-name")).to_have_text("list_files")
    expect(steps.nth(1).locator(".tool-name")).to_have_text("read_file")
    expect(steps.nth(1).locator(".tool-args")).to_have_text('{"path":"errors.log"}')
    expect(steps.locator(".badge")).to_have_text(["ok", "ok"])
    expect(turn.locator(".answer")).to_contain_text("errors.log mentions a timeout: ")
    exit_line = turn.locator(".exit")
    expect(exit_line).to_contain_text("completed")
    expect(exit_line).to_contain_text(re.compile(r"3 turns · [\d,]+ tokens · \$0\.\d{4}"))
    # The session is in the sidebar under its first message, and selected.
    expect(page.locator(".sessions a.active")).to_contain_text("Which file mentions a timeout?")
    expect(page.locator("#title")).to_have_text("Which file mentions a timeout?")
    shot(page, tmp_path, "answer")


def test_a_dropped_stream_is_read_on_from_the_last_event_id(page: Page, server: Any, tmp_path: Path) -> None:
    """The first events request is cut after its third event (no done); the page asks again with
    Last-Event-ID: 3 and shows every step and the answer once."""
    asked: list[str | None] = []

    def cut_the_first(route: Any) -> None:
        asked.append(route.request.headers.get("last-event-id"))
        if len(asked) > 1:
            return route.continue_()
        body = route.fetch().text()
        kept = body[: body.index("\n\n", body.index("id: 3\n")) + 2]
        return route.fulfill(status=200, headers={"Content-Type": "text/event-stream"}, body=kept)

    page.route("**/v1/runs/*/events", cut_the_first)
    open_chat(page, server, "plan")
    send(page, "Which file mentions a timeout?")
    turn = last_turn(page)
    expect(turn.locator(".exit")).to_contain_text("completed")
    assert asked[:2] == [None, "3"]
    expect(turn.locator(".step .tool-name")).to_have_text(["list_files", "read_file"])
    expect(turn.locator(".answer")).to_have_count(1)
    expect(turn.locator(".answer")).to_have_text(re.compile(r"^errors\.log mentions a timeout: [^\n]*30000 ms\s*$"))


def test_allow_runs_the_tool_and_the_answer_follows(page: Page, server: Any, tmp_path: Path) -> None:
    open_chat(page, server, "destructive")
    send(page, "Free some space")
    card = page.locator(".approval")
    expect(card).to_contain_text('Allow delete_file {"path":"access.log"}?')
    expect(last_turn(page).locator(".status")).to_have_text("Waiting for your decision.")
    assert (workspace(server) / "access.log").exists()
    shot(page, tmp_path, "approval")
    card.get_by_label("Reason").fill("it is last week's log")
    card.get_by_role("button", name="Allow").click()
    turn = last_turn(page)
    expect(turn.locator(".answer").last).to_have_text("Deleted access.log to free space.")
    expect(card).to_have_count(0)
    step = turn.locator(".step", has=page.locator(".tool-name", has_text="delete_file"))
    expect(step.locator(".badge")).to_have_text("ok")
    expect(step.locator(".decision")).to_have_text("Allowed: it is last week's log")
    expect(turn.locator(".exit")).to_contain_text("completed")
    assert not (workspace(server) / "access.log").exists()
    page.reload()  # replayed from the events: the approval's decision event carries the words typed
    step = last_turn(page).locator(".step", has=page.locator(".tool-name", has_text="delete_file"))
    expect(step.locator(".decision")).to_have_text("Allowed: it is last week's log")


def test_deny_with_a_reason_reaches_the_model(page: Page, server: Any, tmp_path: Path) -> None:
    open_chat(page, server, "destructive")
    send(page, "Free some space")
    card = page.locator(".approval")
    card.get_by_label("Reason").fill("keep the access log for the audit")
    card.get_by_role("button", name="Deny").click()
    turn = last_turn(page)
    expect(turn.locator(".answer").last).to_have_text("I did not delete anything: you declined the deletion.")
    step = turn.locator(".step", has=page.locator(".tool-name", has_text="delete_file"))
    expect(step.locator(".badge")).to_have_text("rejected")
    expect(step.locator(".decision")).to_have_text("Denied: keep the access log for the audit")
    expect(turn.locator(".exit")).to_contain_text("completed")
    assert (workspace(server) / "access.log").exists()
    shot(page, tmp_path, "denied")


def test_reload_while_waiting_for_approval_shows_the_question_again(page: Page, server: Any, tmp_path: Path) -> None:
    open_chat(page, server, "destructive")
    send(page, "Free some space")
    expect(page.locator(".approval")).to_be_visible()
    url = page.url
    page.reload()
    assert page.url == url
    turn = last_turn(page)
    expect(turn.locator(".user-msg")).to_have_text("Free some space")
    expect(turn.locator(".step .tool-name")).to_have_text(["list_files", "delete_file"])
    card = page.locator(".approval")
    expect(card).to_contain_text('Allow delete_file {"path":"access.log"}?')
    card.get_by_role("button", name="Allow").click()
    expect(turn.locator(".answer").last).to_have_text("Deleted access.log to free space.")
    expect(turn.locator(".exit")).to_contain_text("completed")


def test_reload_during_a_slow_tool_catches_up_and_keeps_streaming(page: Page, server: Any, tmp_path: Path) -> None:
    open_chat(page, server, "slow")
    send(page, "Scan the archive")
    step = last_turn(page).locator(".step")
    expect(step.locator(".badge")).to_have_text("running")
    expect(step.locator(".progress")).to_contain_text("of 1200 files")
    page.reload()
    step = last_turn(page).locator(".step")
    expect(step.locator(".tool-name")).to_have_text("scan_archive")
    expect(step.locator(".badge")).to_have_text("running")  # caught up: still running, not done
    expect(step.locator(".progress")).to_contain_text(re.compile(r"scanned \d+ of 1200 files"))
    shot(page, tmp_path, "slow-tool")
    expect(step.locator(".badge")).to_have_text("ok")
    expect(last_turn(page).locator(".answer")).to_contain_text("The archive scan finished: scanned 1200 files")
    expect(last_turn(page).locator(".exit")).to_contain_text("completed")


def test_stop_cancels_the_live_run_and_resume_finishes_it(page: Page, server: Any, tmp_path: Path) -> None:
    open_chat(page, server, "slow")
    send(page, "Scan the archive")
    turn = last_turn(page)
    expect(turn.locator(".step .badge")).to_have_text("running")
    page.click("#stop")
    expect(turn.locator(".exit")).to_contain_text("interrupted")
    expect(turn.locator(".exit")).to_contain_text("stopped by the user")
    expect(turn.locator(".exit")).not_to_contain_text("from the API")
    expect(page.locator("#stop")).to_be_hidden()
    expect(page.locator("#send")).to_be_enabled()
    page.reload()  # the run is resumable: the page offers it, and a click finishes it
    turn = last_turn(page)
    turn.get_by_role("button", name="Resume").click()
    expect(turn.locator(".answer")).to_contain_text("The archive scan finished")
    expect(turn.locator(".exit")).to_contain_text("completed")
    # The page remembers that the run was stopped, live and after a reload (the replay)
    expect(turn.locator(".note")).to_contain_text("Stopped by the user, then resumed.")
    page.reload()
    expect(last_turn(page).locator(".exit")).to_contain_text("completed")
    expect(last_turn(page).locator(".note")).to_contain_text("Stopped by the user, then resumed.")


def test_a_button_click_becomes_the_next_message(page: Page, server: Any, tmp_path: Path) -> None:
    open_chat(page, server, "configure")
    send(page, "I need a cabinet heater")
    buttons = page.locator(".widget-buttons")
    expect(buttons.locator("h3")).to_have_text("Which series?")
    buttons.get_by_role("button", name="I want to configure the LB series.").click()
    expect(page.locator(".turn")).to_have_count(2)
    expect(last_turn(page).locator(".user-msg")).to_have_text("I want to configure the LB series.")
    expect(last_turn(page).locator(".widget-form h3")).to_have_text("Configure the LB series")
    expect(buttons.get_by_role("button").first).to_be_disabled()  # an earlier turn's widget is spent
    shot(page, tmp_path, "buttons")


def test_a_button_clicked_while_its_run_still_answers_is_sent_when_that_run_ends(page: Page, server: Any) -> None:
    # The buttons come with a tool's result; the run goes on to its answer. A click in between was
    # "Not sent: session ... is still answering", and the spent button could not be clicked again.
    open_chat(page, server, "held")
    send(page, "I need a cabinet heater")
    first, second = page.locator(".turn").nth(0), page.locator(".turn").nth(1)
    first.get_by_role("button", name="I want to configure the LB series.").click()
    expect(page.locator(".turn")).to_have_count(2)
    expect(second.locator(".status")).to_have_text("Sends when the answer above ends…")
    (workspace(server) / "release").write_text("")
    expect(first.locator(".answer")).to_have_text("Pick a series above.")
    expect(second.locator(".answer")).to_have_text("You said: I want to configure the LB series.")
    expect(second.locator(".note")).to_have_count(0)


def test_a_form_submission_becomes_the_next_message_and_a_later_form_keeps_it(
    page: Page, server: Any, tmp_path: Path
) -> None:
    open_chat(page, server, "configure")
    send(page, "I want to configure the LB series.")
    form = page.locator(".widget-form").last
    expect(form.get_by_label("Supply voltage")).to_have_value("24 V DC")
    expect(form.get_by_label("Heating power (W)")).to_have_value("100")
    form.get_by_label("Supply voltage").select_option("230 V AC")
    form.get_by_label("Heating power (W)").fill("150")
    form.get_by_label("Notes").fill("for the cellar")
    form.get_by_label("Express delivery").check()
    shot(page, tmp_path, "form")
    form.get_by_role("button", name="Use these options").click()
    said = "Supply voltage: 230 V AC; Heating power (W): 150; Notes: for the cellar; Express delivery: yes"
    expect(last_turn(page).locator(".user-msg")).to_have_text(said)
    expect(last_turn(page).locator(".answer")).to_contain_text("Noted your configuration: Supply voltage: 230 V AC")
    expect(form.get_by_role("button", name="Use these options")).to_be_disabled()
    send(page, "I want to configure the LB series.")
    expect(page.locator(".turn")).to_have_count(3)
    later = last_turn(page).locator(".widget-form")
    expect(later.get_by_label("Supply voltage")).to_have_value("230 V AC")
    expect(later.get_by_label("Heating power (W)")).to_have_value("150")
    expect(later.get_by_label("Notes")).to_have_value("for the cellar")
    expect(later.get_by_label("Express delivery")).to_be_checked()


def test_thumbs_down_with_a_comment_is_recorded(page: Page, server: Any, tmp_path: Path) -> None:
    open_chat(page, server, "plan")
    send(page, "Which file mentions a timeout?")
    turn = last_turn(page)
    expect(turn.locator(".exit")).to_be_visible()
    turn.get_by_role("button", name="Bad answer").click()
    expect(turn.locator(".feedback-saved")).to_have_text("Feedback recorded")
    turn.get_by_label("Comment").fill("it should name the worker")
    turn.get_by_role("button", name="Save comment").click()
    expect(turn.locator(".feedback-saved")).to_have_text("Feedback and comment recorded")
    shot(page, tmp_path, "feedback")
    feedback = httpx.get(f"{server.url}/v1/feedback").json()["feedback"]
    assert [(f["score"], f["comment"]) for f in feedback] == [("down", "it should name the worker")]
    page.reload()  # the page shows what was recorded
    expect(last_turn(page).locator(".thumb.chosen")).to_have_attribute("data-score", "down")


def test_hostile_markup_in_an_answer_does_not_run(
    page: Page, server: Any, tmp_path: Path, console_errors: list[str]
) -> None:
    open_chat(page, server, "xss")
    send(page, "Say something")
    answer = last_turn(page).locator(".answer")
    expect(last_turn(page).locator(".exit")).to_contain_text("completed")
    expect(answer.locator("strong")).to_have_text("bold")
    expect(answer.locator("li")).to_have_text(["one", "two"])
    expect(answer).to_contain_text("a link")
    expect(answer).to_contain_text("another")
    page.wait_for_timeout(300)  # time for an onerror or an animation to fire, if one got through
    assert page.evaluate("typeof window.__xss") == "undefined"
    assert answer.locator("script, iframe, svg, animate, [onerror], [onbegin]").count() == 0
    assert page.locator("#chat [onerror], #chat [onbegin], #chat script").count() == 0
    hrefs = answer.locator("a[href]").evaluate_all("links => links.map(a => a.getAttribute('href'))")
    assert not any(h.strip().lower().startswith("javascript:") for h in hrefs)
    link = page.evaluate("renderMarkdown('[docs](https://example.com/)').querySelector('a').outerHTML")
    assert 'rel="noopener noreferrer"' in link and 'target="_blank"' in link
    # Raw HTML in an answer is shown as the text it is, never handed to a parser (where the browser
    # would report each blocked handler as an error, which the page fixture fails on).
    expect(answer).to_contain_text('<img src="x" onerror=')
    expect(answer).to_contain_text("<script>")
    assert answer.locator("img").count() == 0
    assert page.evaluate("renderMarkdown('![chart](/c.png)').querySelector('img').getAttribute('src')") == "/c.png"
    shot(page, tmp_path, "xss")


def test_a_token_is_asked_for_when_the_server_needs_one(
    page: Page, served: Any, tmp_path: Path, console_errors: list[str]
) -> None:
    server = served(agents_module=AGENTS, tokens=["alice"])
    page.goto(server.url)
    expect(page.locator("#login")).to_be_visible()
    page.fill("#token", "not-a-token")
    page.click("#login-form button")
    expect(page.locator("#login-error")).to_contain_text("not valid")
    shot(page, tmp_path, "token")
    page.fill("#token", server.tokens["alice"])
    page.click("#login-form button")
    expect(page.locator("#me")).to_contain_text("alice")
    expect(page.locator("#login")).to_be_hidden()
    page.select_option("#agent-pick", "plan")
    page.click("#new-chat")
    send(page, "Which file mentions a timeout?")
    expect(last_turn(page).locator(".exit")).to_contain_text("completed")
    # The two refusals before the token (no token, a wrong one) are logged by the browser as failed loads.
    assert sum("401 (Unauthorized)" in e for e in console_errors) == 2
    console_errors.clear()


def test_the_readme_screenshot(page: Page, server: Any, tmp_path: Path) -> None:
    """The README's picture: four conversations in the sidebar, the configurator's buttons and
    form, answers with their exit lines, and a thumbs-up."""

    def answered(agent: str, text: str) -> Any:
        open_chat(page, server, agent)
        send(page, text)
        return last_turn(page)

    expect(answered("slow", "Scan the archive for problems").locator(".exit")).to_contain_text("completed")
    turn = answered("destructive", "Can you free some space in the workspace?")
    page.locator(".approval").get_by_label("Reason").fill("it is last week's log")
    page.locator(".approval").get_by_role("button", name="Allow").click()
    expect(turn.locator(".exit")).to_contain_text("completed")
    expect(answered("plan", "Which file mentions a timeout?").locator(".exit")).to_contain_text("completed")
    answered("configure", "I need a cabinet heater for a control cabinet")
    page.locator(".widget-buttons").get_by_role("button", name="I want to configure the LB series.").click()
    form = last_turn(page).locator(".widget-form")
    form.get_by_label("Supply voltage").select_option("230 V AC")
    form.get_by_label("Heating power (W)").fill("150")
    form.get_by_label("Notes").fill("outdoor cabinet, north wall")
    form.get_by_label("Express delivery").check()
    form.get_by_role("button", name="Use these options").click()
    turn = last_turn(page)
    expect(turn.locator(".answer")).to_contain_text("Noted your configuration: Supply voltage: 230 V AC")
    expect(turn.locator(".exit")).to_contain_text("completed")
    turn.get_by_role("button", name="Good answer").click()
    expect(turn.locator(".feedback-saved")).to_have_text("Feedback recorded")
    expect(page.locator(".sessions a")).to_have_count(4)
    expect(page.locator(".sessions a").first).to_contain_text("I need a cabinet heater")
    expect(page.locator(".turn")).to_have_count(3)
    page.locator("#prompt").blur()
    path = shot(page, tmp_path, "readme", filename="serve-page.png")
    assert path.stat().st_size > 10_000


def test_a_message_the_server_refuses_says_why_in_its_turn(page: Page, server: Any, console_errors: list[str]) -> None:
    """A refused message (here a 409 from a session still answering) shows its reason where the
    answer would be; the page once threw while placing it (the status line was already gone)."""
    import json

    open_chat(page, server, "plan")
    body = json.dumps({"error": {"code": "conflict", "message": "session s_x is still answering (run run_y)"}})
    page.route(
        "**/v1/sessions/*/messages", lambda route: route.fulfill(status=409, content_type="application/json", body=body)
    )
    send(page, "Which file mentions a timeout?")
    turn = last_turn(page)
    expect(turn.locator(".error")).to_contain_text("Not sent: session s_x is still answering")
    expect(page.locator("#send")).to_be_enabled()
    refused = [e for e in console_errors if "409" in e]  # the browser logs the refused request itself
    console_errors[:] = [e for e in console_errors if e not in refused]


# --- a phone, the sign-in screen, answers from elsewhere, forms, and managing sessions --------------


def test_the_page_at_phone_width_collapses_the_sidebar(browser: Browser, server: Any, tmp_path: Path) -> None:
    context = browser.new_context(viewport={"width": 390, "height": 844}, has_touch=True, is_mobile=True)
    page = context.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    page.on("console", lambda msg: errors.append(msg.text) if msg.type == "error" else None)
    try:
        page.goto(server.url)
        expect(page.locator("#me")).to_contain_text("local")
        expect(page.locator(".sidebar")).to_be_hidden()
        expect(page.locator("#prompt")).to_be_visible()
        assert page.evaluate("document.documentElement.scrollWidth") <= 390
        box = page.locator("#send").bounding_box()
        assert box is not None and box["x"] + box["width"] <= 390
        page.click("#menu")
        expect(page.locator(".sidebar")).to_be_visible()
        page.select_option("#agent-pick", "configure")
        page.click("#new-chat")
        expect(page.locator(".sidebar")).to_be_hidden()
        send(page, "I want to configure something.")
        turn = last_turn(page)
        turn.get_by_role("button", name="I want to configure the LB series.").click()
        form = last_turn(page).locator("form.widget-form")
        expect(form).to_be_visible()
        assert page.evaluate("document.documentElement.scrollWidth") <= 390
        for label in form.locator("label").all():
            lb, ib = label.bounding_box(), label.locator("input, select").first.bounding_box()
            assert lb is not None and ib is not None and ib["x"] + ib["width"] <= lb["x"] + lb["width"] + 1
        shot(page, tmp_path, "phone")
        assert not errors, errors
    finally:
        context.close()


def test_the_sign_in_screen_offers_nothing_to_start(page: Page, served: Any, console_errors: list[str]) -> None:
    server = served(agents_module=AGENTS, tokens=["alice"])
    dialogs: list[str] = []
    page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
    page.goto(server.url)
    expect(page.locator("#login")).to_be_visible()
    expect(page.locator("#new-chat")).to_be_disabled()
    page.locator("#new-chat").click(force=True)
    page.wait_for_timeout(200)
    assert dialogs == []
    page.fill("#token", server.tokens["alice"])
    page.click("#login-form button")
    expect(page.locator("#new-chat")).to_be_enabled()
    console_errors.clear()  # the first 401, logged by the browser as a failed load


def test_images_from_elsewhere_are_links_and_removed_links_are_text(page: Page, server: Any) -> None:
    page.goto(server.url)
    expect(page.locator("#me")).to_contain_text("local")
    html = page.evaluate(
        """() => {
        const box = document.createElement('div');
        box.className = 'answer';
        box.append(renderMarkdown('![the chart](https://cdn.example.com/c.png) and [bad](javascript:alert(1))'));
        document.getElementById('chat').append(box);
        const a = box.querySelector('a:not([href])');
        return {
            images: box.querySelectorAll('img').length,
            link: box.querySelector('a.image-link')?.getAttribute('href'),
            text: box.querySelector('a.image-link')?.textContent,
            removedColor: getComputedStyle(a).color,
            textColor: getComputedStyle(box).color,
            removedTitle: a.title,
        };
    }"""
    )
    assert html["images"] == 0 and html["link"] == "https://cdn.example.com/c.png"
    assert html["text"] == "image: the chart"
    assert html["removedColor"] == html["textColor"] and "link removed" in html["removedTitle"]


def test_a_long_form_label_wraps_inside_its_column(page: Page, server: Any) -> None:
    page.goto(server.url)
    expect(page.locator("#me")).to_contain_text("local")
    span_right, input_left = page.evaluate(
        """() => {
        const form = formWidget({title: 't', fields: [{name: 'x', type: 'text',
            label: 'Maximum_permitted_operating_temperature_of_the_heating_element_in_degrees'}]});
        document.getElementById('chat').append(form);
        const span = form.querySelector('label span'), input = form.querySelector('label input');
        return [span.getBoundingClientRect().right, input.getBoundingClientRect().left];
    }"""
    )
    assert span_right <= input_left


def test_a_session_can_be_copied_renamed_and_deleted(browser: Browser, server: Any) -> None:
    context = browser.new_context(viewport={"width": 1280, "height": 800})
    context.grant_permissions(["clipboard-read", "clipboard-write"], origin=server.url)
    page = context.new_page()
    dialogs: list[str] = []
    page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
    try:
        open_chat(page, server, "plan")
        send(page, "Which file mentions a timeout?")
        expect(last_turn(page).locator(".exit")).to_contain_text("completed")
        page.click("#copy-session")
        copied = page.evaluate("navigator.clipboard.readText()")
        assert copied.startswith("You: Which file mentions a timeout?") and "timed out" in copied
        page.click("#rename-session")
        page.fill(".title-edit", "Timeouts")
        page.press(".title-edit", "Enter")
        expect(page.locator("#title")).to_have_text("Timeouts")
        expect(page.locator("#sessions a.active .session-title")).to_have_text("Timeouts")
        page.click("#delete-session")
        expect(page.locator("#delete-session")).to_have_text("Delete? Click again")
        page.click("#delete-session")
        expect(page.locator("#sessions a")).to_have_count(0)
        expect(page.locator("#title")).to_have_text("New chat")
        with httpx.Client(base_url=server.url) as c:
            assert c.get("/v1/sessions").json()["sessions"] == []
        assert dialogs == []
    finally:
        context.close()


def offered(page: Page, *texts: str) -> Any:
    """The one suggestion under the prompt, holding each of ``texts``."""
    hint = page.locator("#prompt-hints button")
    expect(hint).to_have_count(1)
    for text in texts:
        expect(hint).to_contain_text(text)
    return hint


def first_message_sent(page: Page, srv: Any) -> str:
    """The text of the first message of the session's only run (what the model was sent)."""
    with srv.client() as c:
        [turn] = c.get(f"/v1/sessions/{page.url.rsplit('#', 1)[1]}").json()["turns"]
        messages = c.get(f"/v1/runs/{turn['run_id']}/transcript").json()["messages"]
    text: str = messages[0]["content"][0]["text"]
    return text


def test_an_mcp_prompt_is_offered_while_typing_and_sent_filled_in(served: Any, page: Page, tmp_path: Path) -> None:
    from tests.server.test_prompts import _agents

    srv = served(agents_module=_agents(tmp_path))
    open_chat(page, srv, "notes")
    page.fill("#prompt", "/rev")
    hint = offered(page, "/review file=… [tone=…]", "Asks for a review of a file.")
    hint.click()
    expect(page.locator("#prompt")).to_have_value("/review file=")
    expect(page.locator("#prompt-hints")).to_be_hidden()
    page.fill("#prompt", "/etc")  # no prompt is named so: nothing offered
    expect(page.locator("#prompt-hints")).to_be_hidden()
    send(page, "/review file=a.py tone=blunt")
    expect(last_turn(page)).to_contain_text("Hello! I am the scripted model")
    assert first_message_sent(page, srv) == "Please review a.py in a blunt tone."


def test_an_mcp_resource_is_offered_after_an_at_and_sent_with_the_message(
    served: Any, page: Page, tmp_path: Path
) -> None:
    from tests.server.test_prompts import _agents

    srv = served(agents_module=_agents(tmp_path))
    open_chat(page, srv, "notes")
    page.locator("#prompt").press_sequentially("follow @gui")
    hint = offered(page, "@notes:notes://guide", "guide: How we write notes")
    hint.click()
    expect(page.locator("#prompt")).to_have_value("follow @notes:notes://guide ")
    page.locator("#prompt").press_sequentially("@notes:")
    expect(hint).to_have_count(2)  # the resource and the template
    page.fill("#prompt", "ada@example.com")  # an address is not a mention: nothing offered
    expect(page.locator("#prompt-hints")).to_be_hidden()
    send(page, "follow @notes:notes://guide please")
    expect(last_turn(page)).to_contain_text("Hello! I am the scripted model")
    assert "Write notes in the present tense." in first_message_sent(page, srv)
