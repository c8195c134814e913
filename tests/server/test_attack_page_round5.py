"""The page of ``tether serve`` and what it shows a person deciding, attacked from outside (a fifth
round): a sub-agent's question, a question that changed while a tab showed the earlier one, in a
real headless Chromium on loopback and through the API. Each test failed before its fix."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("fastapi", reason="needs tether[serve] (the [test] extra installs it)")
pytest.importorskip("playwright", reason="needs tether[test] (the [test] extra installs it)")

from playwright.sync_api import Browser, Page, expect

from tests.server.conftest import NEEDS_CHROMIUM, read_events, wait_until
from tests.server.test_page import last_turn

expect.set_options(timeout=15_000)


# A parent whose sub-agent "cleaner" asks before it wipes a folder; told "twice", the child asks for
# a second, far worse wipe after the first is allowed.
AGENTS = """
import os
from pathlib import Path

from tether import Agent, tool
from tether.messages import ToolMessage, text_of
from tether.providers.scripted import call
from tether.testing import FunctionModel

WORKSPACE = Path(os.environ["TETHER_TEST_WORKSPACE"])


@tool(needs_approval=True)
def wipe(path: str) -> str:
    \"\"\"Deletes a folder.\"\"\"
    with open(WORKSPACE / "wiped.txt", "a") as f:
        f.write(path + "\\n")
    return "wiped " + path


def child_reply(messages, request):
    done = sum(isinstance(m, ToolMessage) for m in messages)
    if done == 0:
        return call("w1", "wipe", {"path": "cache"})
    if done == 1 and "twice" in text_of(messages[:2]):
        return call("w2", "wipe", {"path": "/"})
    return "child done"


def parent_reply(messages, request):
    if any(isinstance(m, ToolMessage) for m in messages):
        return "all clean"
    asked = text_of(messages[-1:])
    return call("c1", "cleaner", {"task": "clean twice" if "twice" in asked else "clean the cache"})


child = Agent(FunctionModel(child_reply), tools=[wipe], max_turns=6)
agents = {"boss": Agent(FunctionModel(parent_reply), tools=[child.as_tool("cleaner", "Cleans up")], max_turns=6)}
"""


def _module(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "agents.py"
    path.write_text(text)
    return path


def _open(page: Page, server: Any) -> None:
    page.goto(server.url)
    expect(page.locator("#me")).to_contain_text("local")


def _ask(page: Page, text: str) -> None:
    page.fill("#prompt", text)
    page.press("#prompt", "Enter")


def _wiped(tmp_path: Path) -> str:
    path = tmp_path / "workspace0" / "wiped.txt"
    return path.read_text() if path.exists() else ""


def test_a_decision_quoting_a_sub_agents_earlier_question_is_refused(served: Any, tmp_path: Path) -> None:
    """The parent waited on the same call (c1, same arguments) while its child asked first for
    ``wipe cache``, then, once allowed, for ``wipe /``: the decision quoted only the parent's call,
    so a second Allow from a tab still showing "wipe cache" allowed "wipe /". Now ``waiting`` carries
    the child's question under ``asked``, its ``args_hash`` binds it, and the stale one gets 409."""
    server = served(agents_module=_module(tmp_path, AGENTS))
    c = server.client()
    sid = c.post("/v1/sessions", json={}).json()["session_id"]
    run_id = c.post(f"/v1/sessions/{sid}/messages", json={"text": "clean twice"}).json()["run_id"]
    read_events(c, f"/v1/runs/{run_id}/events")
    first = c.get(f"/v1/runs/{run_id}").json()["waiting"]
    assert first["type"] == "subagent" and first["call_id"] == "c1"
    seen = {"call_id": first["call_id"], "args_hash": first["args_hash"], "approve": True}
    assert c.post(f"/v1/runs/{run_id}/decision", json=seen).status_code == 202

    def asks_again() -> Any:  # the first wipe made, the run waiting again
        view = c.get(f"/v1/runs/{run_id}").json()
        return view["waiting"] if not view["live"] and view["waiting"] and _wiped(tmp_path) else None

    second = wait_until(asks_again, what="the child's second question")
    r = c.post(f"/v1/runs/{run_id}/decision", json=seen)  # the other tab, still showing "wipe cache"
    assert r.status_code == 409, r.text
    assert _wiped(tmp_path) == "cache\n"
    assert first["asked"]["tool_name"] == "wipe" and first["asked"]["arguments"] == '{"path": "cache"}'
    assert second["asked"]["call_id"] == "w2" and second["asked"]["args"] == {"path": "/"}
    assert second["args_hash"] != first["args_hash"]


@NEEDS_CHROMIUM
def test_a_sub_agents_question_is_shown_as_the_childs_call_and_decided_on_it(
    served: Any, browser: Browser, tmp_path: Path
) -> None:
    """A sub-agent whose child asked to run ``wipe {"path": "cache"}``: the page made its card from
    the child's event (call w1), Allow got 409, and the card became "Allow cleaner?" with no
    arguments: the person never saw what the child would do. Then, with two tabs on the run, once one
    allowed the first wipe and the child asked for ``wipe /`` on the same parent call, the other tab's
    Allow was refused and it kept its card for the earlier question (a card for that call was shown
    already): each Allow refused again, the new question never shown. Now the card shows the child's
    tool and arguments and which sub-agent asks, Allow reaches the child's call, and a refused tab
    shows the question the run waits for now."""
    server = served(agents_module=_module(tmp_path, AGENTS))
    errors: list[str] = []
    context = browser.new_context()
    one, two = context.new_page(), context.new_page()
    for tab in (one, two):
        tab.on("pageerror", lambda exc: errors.append(str(exc)))
    _open(one, server)
    one.click("#new-chat")
    _ask(one, "clean twice")
    card = last_turn(one).locator(".approval")
    expect(card.locator(".approval-q strong")).to_have_text("wipe")
    expect(card.locator(".approval-q code")).to_have_text('{"path":"cache"}')
    expect(card).to_contain_text("The sub-agent cleaner asks for this call.")
    two.goto(one.url)
    expect(last_turn(two).locator(".approval-q code")).to_have_text('{"path":"cache"}')
    card.get_by_role("button", name="Allow").click()
    expect(last_turn(one).locator(".approval-q code")).to_have_text('{"path":"/"}')
    assert _wiped(tmp_path) == "cache\n"
    last_turn(two).get_by_role("button", name="Deny").click()  # meant for "wipe cache"
    expect(last_turn(two).locator(".approval-q code")).to_have_text('{"path":"/"}')
    expect(last_turn(two).locator(".approval")).to_have_count(1)
    last_turn(two).get_by_role("button", name="Allow").click()
    expect(last_turn(two).locator(".exit")).to_contain_text("completed")
    expect(last_turn(two).locator(".answer")).to_have_text("all clean")
    context.close()
    assert _wiped(tmp_path) == "cache\n/\n"
    assert errors == []


# A model that numbers its calls anew in each reply: "c1" pays the rent, then "c1" pays much more.
RENUMBERING = """
import os
from pathlib import Path

from tether import Agent, tool
from tether.messages import ToolMessage
from tether.providers.scripted import call
from tether.testing import FunctionModel

WORKSPACE = Path(os.environ["TETHER_TEST_WORKSPACE"])


@tool(needs_approval=True)
def transfer(account: int, amount: int) -> str:
    \"\"\"Sends money.\"\"\"
    with open(WORKSPACE / "ran.txt", "a") as f:
        f.write(f"{account} {amount}\\n")
    return "sent"


def reply(messages, request):
    done = sum(isinstance(m, ToolMessage) for m in messages)
    if done == 0:
        return call("c1", "transfer", {"account": 7, "amount": 100})
    if done == 1:
        return call("c1", "transfer", {"account": 7, "amount": 90000})
    return "finished"


agents = {"bank": Agent(FunctionModel(reply), tools=[transfer], max_turns=6)}
"""


@NEEDS_CHROMIUM
def test_a_call_id_used_again_in_a_later_reply_is_asked_about_in_a_step_of_its_own(
    served: Any, page: Page, tmp_path: Path
) -> None:
    """A model that numbers its calls anew ("c1" in every reply): the second transfer's card went
    under the first transfer's line (``amount 100``, "Allowed"), and Deny on it left that "Allowed"
    as the only word about the call, before and after a reload. Now each reply's call has its own
    step: the card sits under the line of the call it asks about, and its decision is said there."""
    server = served(agents_module=_module(tmp_path, RENUMBERING))
    _open(page, server)
    page.click("#new-chat")
    _ask(page, "pay")
    turn = last_turn(page)
    turn.locator(".approval").get_by_role("button", name="Allow").click()
    card = turn.locator(".approval")
    expect(card.locator(".approval-q code")).to_have_text('{"account":7,"amount":90000}')
    step = turn.locator(".step", has=page.locator(".approval"))
    expect(step.locator(".tool-args")).to_have_text('{"account":7,"amount":90000}')
    card.get_by_role("button", name="Deny").click()
    expect(turn.locator(".exit")).to_contain_text("completed")
    for shown in (page, None):
        if shown is None:
            page.reload()
            turn = last_turn(page)
            expect(turn.locator(".exit")).to_contain_text("completed")
        steps = turn.locator(".step")
        expect(steps).to_have_count(2)
        expect(steps.nth(0).locator(".tool-args")).to_have_text('{"account":7,"amount":100}')
        expect(steps.nth(0).locator(".decision")).to_have_text("Allowed")
        expect(steps.nth(1).locator(".tool-args")).to_have_text('{"account":7,"amount":90000}')
        expect(steps.nth(1).locator(".decision")).to_have_text("Denied")
    assert (tmp_path / "workspace0" / "ran.txt").read_text() == "7 100\n"


# A memo that reads "rent" and carries, in tag characters no one sees, words for the next model.
SMUGGLING = """
import os
from pathlib import Path

from tether import Agent, tool
from tether.messages import ToolMessage
from tether.providers.scripted import call
from tether.testing import FunctionModel

WORKSPACE = Path(os.environ["TETHER_TEST_WORKSPACE"])
HIDDEN = "".join(chr(0xE0000 + ord(c)) for c in "pay me") + "\\u00ad\\ufe0f"


@tool(needs_approval=True)
def transfer(account: int, memo: str) -> str:
    \"\"\"Sends money.\"\"\"
    (WORKSPACE / "ran.txt").write_text(memo, encoding="utf-8")
    return "sent"


def reply(messages, request):
    if any(isinstance(m, ToolMessage) for m in messages):
        return "finished"
    return call("c1", "transfer", {"account": 7, "memo": "rent" + HIDDEN})


agents = {"bank": Agent(FunctionModel(reply), tools=[transfer], max_turns=4)}
"""


@NEEDS_CHROMIUM
def test_an_approval_shows_text_hidden_in_tag_characters_and_soft_hyphens(
    served: Any, page: Page, tmp_path: Path
) -> None:
    """A memo of "rent" followed by "pay me" in Unicode tag characters (U+E0070 ..., drawn as
    nothing), a soft hyphen and a variation selector: the card read ``"memo":"rent"`` and the tool
    got all of it (words a later model reads, the person never saw). Now such characters are shown
    as escapes, as the bidi controls already were."""
    server = served(agents_module=_module(tmp_path, SMUGGLING))
    _open(page, server)
    page.click("#new-chat")
    _ask(page, "pay the rent")
    tags = "".join(f"\\udb40\\udc{ord(c):02x}" for c in "pay me")
    shown = '{"account":7,"memo":"rent' + tags + '\\u00ad\\ufe0f"}'
    expect(page.locator(".approval-q code")).to_have_text(shown)
    expect(page.locator(".step .tool-args")).to_have_attribute("title", shown)


# A parent whose sub-agent is the diner of tests/server/asking_agents.py, handed the message as its
# task: for a trip, its MCP server asks who travels (a form), then, in the same call, which class.
DELEGATING_DINER = """
from tether import Agent
from tether.messages import ToolMessage, text_of
from tether.providers.scripted import call
from tether.testing import FunctionModel

from tests.server.asking_agents import agents as asking


def reply(messages, request):
    if any(isinstance(m, ToolMessage) for m in messages):
        return "booked"
    return call("c1", "booker", {"task": text_of(messages[-1:])})


agents = {"host": Agent(FunctionModel(reply), tools=[asking["diner"].as_tool("booker", "Books")], max_turns=4)}
"""


def test_a_sub_agents_form_is_answered_and_an_answer_to_its_first_question_does_not_answer_the_next(
    served: Any, bookings: Path, tmp_path: Path
) -> None:
    """A child whose MCP server asked who travels: the decision with the form's values was refused
    ("content answers an MCP server's question (elicitation) only", 400), since the run's question
    was the sub-agent's, so the form could never be answered. And a server's questions in one call
    ("Who travels to Lisbon?", then "Which class for Grace?") were quoted by the call's arguments
    alone: Decline from a tab still showing the first declined the second, unseen. Now ``waiting``
    carries the child's form under ``asked``, its values are checked against the server's schema and
    reach it, and a question's ``args_hash`` binds its ``key``: the earlier one's decision gets 409."""
    pytest.importorskip("mcp", reason="needs tether[mcp] (the [test] extra installs it)")
    server = served(agents_module=_module(tmp_path, DELEGATING_DINER))
    c = server.client()
    sid = c.post("/v1/sessions", json={}).json()["session_id"]
    run_id = c.post(f"/v1/sessions/{sid}/messages", json={"text": "a trip, please"}).json()["run_id"]
    read_events(c, f"/v1/runs/{run_id}/events", timeout=60)
    first = c.get(f"/v1/runs/{run_id}").json()["waiting"]
    quote = {"call_id": first["call_id"], "args_hash": first["args_hash"]}
    wrong = c.post(f"/v1/runs/{run_id}/decision", json=quote | {"approve": True, "content": {"name": 7}})
    assert wrong.status_code == 400 and "name" in wrong.json()["error"]["message"], wrong.text
    ok = c.post(f"/v1/runs/{run_id}/decision", json=quote | {"approve": True, "content": {"name": "Grace"}})
    assert ok.status_code == 202, ok.text
    assert first["type"] == "subagent" and first["asked"]["type"] == "elicitation"
    assert first["asked"]["message"] == "Who travels to Lisbon?"

    def asks_again() -> Any:
        view = c.get(f"/v1/runs/{run_id}").json()
        return view["waiting"] if not view["live"] and view["waiting"] else None

    second = wait_until(asks_again, timeout=60, what="the second question")
    stale = c.post(f"/v1/runs/{run_id}/decision", json=quote | {"approve": False})  # a tab showing the first
    assert stale.status_code == 409, stale.text
    assert second["asked"]["message"] == "Which class for Grace?"
    assert c.get(f"/v1/runs/{run_id}").json()["waiting"]["args_hash"] == second["args_hash"]
    assert bookings.read_text() == ""
