"""The page of ``tether serve`` attacked from outside (a fourth round): hostile model output, two
tabs on one approval, keyboard-only use, in a real headless Chromium on loopback. Each test failed
before its fix."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("fastapi", reason="needs tether[serve] (the [test] extra installs it)")
pytest.importorskip("playwright", reason="needs tether[test] (the [test] extra installs it)")

from playwright.sync_api import Browser, Page, expect

from tests.server.conftest import NEEDS_CHROMIUM
from tests.server.test_page import last_turn

expect.set_options(timeout=15_000)


AGENTS = """
import os
from pathlib import Path

from tether import Agent, ToolContext, tool
from tether.messages import AssistantMessage, ToolCallPart, ToolMessage, text_of
from tether.providers.scripted import call
from tether.testing import FunctionModel

WORKSPACE = Path(os.environ["TETHER_TEST_WORKSPACE"])


@tool(needs_approval=True)
def transfer(account: int, memo: str) -> str:
    \"\"\"Sends the money to an account.\"\"\"
    with open(WORKSPACE / "ran.txt", "a") as f:
        f.write(f"{account} {memo}\\n")
    return "sent"


@tool(idempotent=True)
async def wait(ctx: ToolContext) -> str:
    \"\"\"Waits while the workspace holds a file named hold.\"\"\"
    while (WORKSPACE / "hold").exists():
        await ctx.signal.sleep(0.05)
    return "waited"


def reply(messages, request):
    if any(isinstance(m, ToolMessage) for m in messages):
        return "finished"
    asked = text_of(messages[-1:])
    if "twice" in asked:
        raw = '{"account": 7, "memo": "rent", "account": 999}'
        return AssistantMessage(content=(ToolCallPart(id="c1", name="transfer", arguments=raw),))
    if "wait" in asked:
        return call("c1", "wait", {})
    if "nest" in asked:
        return "> " * 3000 + "the end of a deep quote"
    return call("c1", "transfer", {"account": 7, "memo": "rent"})


agents = {"bank": Agent(FunctionModel(reply), tools=[transfer, wait], max_turns=4)}
"""


def _module(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / f"{name}.py"
    path.write_text(text)
    return path


def _open(page: Page, server: Any) -> None:
    page.goto(server.url)
    expect(page.locator("#me")).to_contain_text("local")


def _ask(page: Page, text: str) -> None:
    page.fill("#prompt", text)
    page.press("#prompt", "Enter")


@NEEDS_CHROMIUM
def test_an_answer_nested_deeper_than_markdown_goes_is_shown_as_its_text(
    served: Any, page: Page, tmp_path: Path
) -> None:
    """An answer of 3,000 nested quotes ("> > > …") overflowed marked's stack: a page error, and the
    answer stayed blank (the run said completed, with nothing to read). Now an answer Markdown cannot
    render is shown as the plain text it is."""
    server = served(agents_module=_module(tmp_path, "agents", AGENTS))
    _open(page, server)
    page.click("#new-chat")
    _ask(page, "nest")
    expect(page.locator(".turn .exit")).to_contain_text("completed")
    expect(page.locator(".turn .answer")).to_contain_text("the end of a deep quote")


@NEEDS_CHROMIUM
def test_an_approval_decided_in_another_tab_shows_what_was_decided_there(
    served: Any, browser: Browser, tmp_path: Path
) -> None:
    """Two tabs showed the same Allow card; after Allow in one, Deny in the other said only "run ... is
    not waiting for a decision" under a card still asking, and "Waiting for your decision." stayed for
    good: the person never learned the transfer had been allowed and made. Now the refused tab reads
    on: its card goes, the call says Allowed, and the run's answer and exit follow."""
    server = served(agents_module=_module(tmp_path, "agents", AGENTS))
    context = browser.new_context()
    one, two = context.new_page(), context.new_page()
    errors: list[str] = []
    for tab in (one, two):
        tab.on("pageerror", lambda exc: errors.append(str(exc)))
    _open(one, server)
    one.click("#new-chat")
    _ask(one, "pay the rent")
    expect(one.locator(".approval")).to_be_visible()
    two.goto(one.url)
    expect(two.locator(".approval")).to_be_visible()
    one.get_by_role("button", name="Allow").click()
    expect(one.locator(".turn .exit")).to_contain_text("completed")
    two.get_by_role("button", name="Deny").click()
    turn = two.locator(".turn").last
    expect(turn.locator(".exit")).to_contain_text("completed")
    expect(turn.locator(".decision")).to_have_text("Allowed")
    expect(turn.locator(".answer")).to_have_text("finished")
    assert turn.locator(".approval").count() == 0
    context.close()
    assert errors == []
    assert (tmp_path / "workspace0" / "ran.txt").read_text() == "7 rent\n"


@NEEDS_CHROMIUM
def test_an_approval_whose_conversation_another_tab_deleted_says_so_and_asks_no_more(
    served: Any, browser: Browser, tmp_path: Path
) -> None:
    """A conversation deleted in a second tab while the first showed its Allow card: Allow there said
    "no run 'run_…' (it does not exist, or it is not yours)" under a card still asking, with
    "Waiting for your decision." for good. Now the card goes and the turn says its conversation was
    deleted; nothing runs."""
    server = served(agents_module=_module(tmp_path, "agents", AGENTS))
    context = browser.new_context()
    one, two = context.new_page(), context.new_page()
    _open(one, server)
    one.click("#new-chat")
    _ask(one, "pay the rent")
    expect(one.locator(".approval")).to_be_visible()
    two.goto(one.url)
    expect(two.locator(".approval")).to_be_visible()
    two.click("#delete-session")
    two.click("#delete-session")
    expect(two.locator("#title")).to_have_text("New chat")
    one.get_by_role("button", name="Allow").click()
    turn = one.locator(".turn").last
    expect(turn.locator(".error")).to_contain_text("Its conversation was deleted")
    expect(turn.locator(".approval")).to_have_count(0)
    expect(turn.locator(".status")).to_have_count(0)
    context.close()
    assert not (tmp_path / "workspace0" / "ran.txt").exists()


@NEEDS_CHROMIUM
def test_a_run_resumed_in_another_tab_first_is_shown_going_on_not_only_refused(
    served: Any, browser: Browser, tmp_path: Path
) -> None:
    """Two tabs offered Resume for the run Stop stopped; after one resumed it, Resume in the other
    said only "Could not resume: …" and offered Resume again, the run's end never shown there.
    Now that tab reads on and shows the answer and the exit."""
    server = served(agents_module=_module(tmp_path, "agents", AGENTS))
    (tmp_path / "workspace0" / "hold").touch()
    context = browser.new_context()
    one, two = context.new_page(), context.new_page()
    _open(one, server)
    one.click("#new-chat")
    _ask(one, "wait")
    expect(last_turn(one).locator(".step .badge")).to_have_text("running")
    one.click("#stop")
    expect(last_turn(one).locator(".exit")).to_contain_text("interrupted")
    (tmp_path / "workspace0" / "hold").unlink()
    two.goto(one.url)
    expect(last_turn(two).get_by_role("button", name="Resume")).to_be_visible()
    last_turn(one).get_by_role("button", name="Resume").click()
    expect(last_turn(one).locator(".exit")).to_contain_text("completed")
    last_turn(two).get_by_role("button", name="Resume").click()
    turn = last_turn(two)
    expect(turn.locator(".answer")).to_have_text("finished")
    expect(turn.locator(".exit")).to_contain_text("completed")
    expect(turn.get_by_role("button", name="Resume")).to_have_count(0)
    context.close()


@NEEDS_CHROMIUM
def test_an_approval_for_arguments_naming_a_key_twice_says_the_tool_gets_the_last(
    served: Any, page: Page, tmp_path: Path
) -> None:
    """A model wrote ``{"account": 7, "memo": "rent", "account": 999}``: the card asked to allow
    account 7 first and foremost, and the tool got 999 (JSON keeps the last of a repeated key), with
    nothing said. Now the card says which keys are named more than once and that the last counts."""
    server = served(agents_module=_module(tmp_path, "agents", AGENTS))
    _open(page, server)
    page.click("#new-chat")
    _ask(page, "pay twice")
    card = page.locator(".approval")
    expect(card).to_contain_text('"account":7,"memo":"rent","account":999')
    expect(card).to_contain_text('The arguments name "account" more than once: the tool gets only the last value')
    card.get_by_role("button", name="Allow").click()
    expect(page.locator(".turn .exit")).to_contain_text("completed")
    assert (tmp_path / "workspace0" / "ran.txt").read_text() == "999 rent\n"
