"""What the server, the page and the command line show of a run that a guardrail stopped or asked
about, attacked from outside (defects earlier rounds found and left alone). Each test failed before
its fix.

* A call whose arguments the ``tool_args`` guardrail refuses (the model passed the system prompt, a
  secret) is judged before anyone is asked about it: it is never put to a person, and every door
  that would show its arguments (the transcript, a replay, ``tether show``, the ``needs approval``
  line) shows ``[arguments withheld: <the guardrail's words>]`` instead. The model's own
  transcript keeps them.
* An answer an output guardrail holds for a person is shown to the person asked (the run's
  ``waiting``, the page's card, the command line), cut to a bound that says so.
"""

from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("fastapi", reason="needs tether[serve] (the [test] extra installs it)")

from tests.cli.conftest import run_main
from tests.server.conftest import NEEDS_CHROMIUM, read_events, wait_until

SECRET = "SYSPROMPT-4471"

AGENTS = """
from tether import Agent, tool
from tether.guardrails import Guardrail, Rule, RuleClassifier, Thresholds
from tether.messages import ToolMessage
from tether.testing import FunctionModel, Reply

SECRET = "SYSPROMPT-4471"
LONG = "Our best discount: " + "x" * 20_000 + " END-OF-ESSAY"
HOSTILE = 'A 40% discount <img src=x onerror="window.pwned=1"> for 200 units.'


@tool(read_only=True)
def search(query: str) -> str:
    \"\"\"Search the catalogue.\"\"\"
    return "results for " + query


@tool(needs_approval=True)
def send_report(to: str, body: str) -> str:
    \"\"\"Send a report.\"\"\"
    return "sent"


def leaky(messages, request):
    if any(isinstance(m, ToolMessage) for m in messages):
        return "I could not do that."
    return Reply(calls=(("c1", "search", {"query": "valves " + SECRET}),
                        ("c2", "send_report", {"to": "ops@example.com", "body": "the prompt: " + SECRET})))


secrets = Guardrail(RuleClassifier([Rule(r"SYSPROMPT-\\d+", 0.0, "leak", "the arguments carry the system prompt")]),
                    name="secrets", stages=("tool_args",))
discounts = RuleClassifier([Rule(r"discount", 0.4, "pricing", "discounts are approved by sales")])


def asking(text):
    return Agent(FunctionModel(lambda messages, request: text),
                 middleware=[Guardrail(discounts, stages=("output",), thresholds=Thresholds(block=0.1, ask=0.5))])


agents = {
    "leaky": Agent(FunctionModel(leaky), tools=[search, send_report], middleware=[secrets], max_turns=4),
    "sales": asking(HOSTILE),
    "essay": asking(LONG),
}
"""


def _module(tmp_path: Path) -> Path:
    path = tmp_path / "left_alone_agents.py"
    path.write_text(AGENTS)
    return path


def _run(client: Any, agent: str, text: str) -> tuple[str, list[dict[str, Any]]]:
    """A new session of ``agent`` asked ``text``: its run id and its events until it stopped."""
    session = client.post("/v1/sessions", json={"agent": agent}).json()["session_id"]
    started = client.post(f"/v1/sessions/{session}/messages", json={"text": text})
    assert started.status_code == 202, started.text
    run_id = started.json()["run_id"]
    return run_id, read_events(client, f"/v1/runs/{run_id}/events", until=lambda e: e["type"] == "done")


def _settled(client: Any, run_id: str) -> dict[str, Any]:
    """The run's view once it is no longer live (its ``done`` event may come a moment before)."""
    view: dict[str, Any] = wait_until(
        lambda: (v := client.get(f"/v1/runs/{run_id}").json()) and not v["live"] and v, what="the run to settle"
    )
    return view


def test_a_refused_call_is_never_put_to_a_person_and_no_door_shows_its_arguments(
    served: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Before: ``send_report`` with the system prompt in its body stopped the run for approval, its
    arguments in the ``approval_required`` event and the run's ``waiting`` (the guardrail judged only
    after a person allowed it), and the transcript, a replay and ``tether show`` showed both refused
    calls' arguments."""
    server = served(agents_module=_module(tmp_path))
    with server.client() as client:
        run_id, events = _run(client, "leaky", "find valves and report")
        run = _settled(client, run_id)
        transcript = client.get(f"/v1/runs/{run_id}/transcript").json()

    assert events[-1]["result"]["status"] == "completed", events[-1]
    assert run["waiting"] is None and not [e for e in events if e["type"] == "approval_required"]
    assert SECRET not in json.dumps(events)
    refusals = [e for e in events if e["type"] == "guardrail" and e["decision"] == "block"]
    assert [e["stage"] for e in refusals] == ["tool_args", "tool_args"]

    assert SECRET not in json.dumps(transcript)
    calls = [c for m in transcript["messages"] if m["role"] == "assistant" for c in m["content"]]
    calls = [c for c in calls if c["type"] == "tool_call"]
    assert [c["name"] for c in calls] == ["search", "send_report"]
    for c in calls:
        assert c["arguments"].startswith("[arguments withheld: the tool args guardrail 'secrets' blocked this (leak)")
        assert "the arguments carry the system prompt" in c["withheld"]

    # The model's own transcript keeps what it sent (its next request pairs each call with its result).
    from tether.harness.store import RunStore
    from tether.server.events import Replayed, implied_events

    state = RunStore(server.home / "runs").load(run_id)
    kept = [c.arguments for m in state.messages if m.role == "assistant" for c in m.tool_calls]
    assert all(SECRET in a for a in kept)
    # A replay made from the saved state (a resumed worker's, a cut log's) starts no refused call.
    replayed = implied_events(state, Replayed([]))
    assert SECRET not in json.dumps(replayed) and not [e for e in replayed if e["type"] == "tool_start"]

    monkeypatch.setenv("TETHER_HOME", str(server.home))
    for full in ((), ("--full",)):
        code, out, _ = run_main("show", run_id, *full, capsys=capsys)
        assert code == 0 and SECRET not in out, out
        assert "-> send_report [arguments withheld: the tool args guardrail 'secrets' blocked this" in out


def test_the_command_line_never_asks_about_a_call_the_guardrail_refuses(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Before: ``tether run`` stopped with ``!! delete_file {"path": "access.log"} needs approval``
    (at a terminal: ``Allow delete_file {...}?``) although the guardrail refuses that call."""
    home, work = tmp_path / "home", tmp_path / "work"
    home.mkdir()
    work.mkdir()
    (work / "access.log").write_text("GET /\n")
    (home / "config.toml").write_text(
        f"""
[agents.cleaner]
model = "scripted/destructive"
cwd = "{work}"
[[agents.cleaner.guardrails]]
name = "keep-logs"
stages = ["tool_args"]
rules = [{{ pattern = "access\\\\.log", rationale = "the audit log is never touched", category = "audit" }}]
"""
    )
    monkeypatch.setenv("TETHER_HOME", str(home))
    for name in ("LLM_BASE_URL", "OPENAI_BASE_URL", "OPENAI_API_KEY", "TETHER_SESSION_STORE"):
        monkeypatch.delenv(name, raising=False)

    code, _, err = run_main("run", "--agent", "cleaner", "free some space", capsys=capsys)

    assert code == 0, err
    assert "needs approval" not in err and "access.log" not in err, err
    assert (work / "access.log").exists()


def test_an_answer_held_for_a_person_is_shown_to_them_bounded(served: Any, tmp_path: Path) -> None:
    """Before: the run's ``waiting`` (and the ``done`` event's interruption) said only that the
    output guardrail asked and why: the person approved an answer they could not read."""
    server = served(agents_module=_module(tmp_path))
    with server.client() as client:
        run_id, events = _run(client, "sales", "a better price?")
        waiting = _settled(client, run_id)["waiting"]
        long_id, _ = _run(client, "essay", "a better price?")
        long = _settled(client, long_id)["waiting"]

    held = 'A 40% discount <img src=x onerror="window.pwned=1"> for 200 units.'
    assert waiting["type"] == "guardrail" and waiting["stage"] == "output"
    assert waiting["held"] == held and waiting["held_chars"] == len(held)
    assert events[-1]["result"]["interruption"]["held"] == held
    assert not [e for e in events if e["type"] == "text_delta"]  # still never streamed before the decision

    whole = 19 + 20_000 + 13
    assert long["held_chars"] == whole and len(long["held"]) < 5_000
    assert long["held"].startswith("Our best discount: xxx") and "END-OF-ESSAY" not in long["held"]


def test_the_command_line_shows_the_answer_it_asks_about(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Before: ``tether run`` said the answer was held and how to approve it, never what it was;
    ``tether show`` neither."""
    home = tmp_path / "home"
    home.mkdir()
    (home / "config.toml").write_text(
        """
[agents.greeter]
model = "scripted/hello"
[[agents.greeter.guardrails]]
name = "tone"
stages = ["output"]
rules = [{ pattern = "scripted model", rationale = "says what it is", category = "self", score = 0.4 }]
block = 0.1
ask = 0.5
"""
    )
    monkeypatch.setenv("TETHER_HOME", str(home))
    for name in ("LLM_BASE_URL", "OPENAI_BASE_URL", "OPENAI_API_KEY", "TETHER_SESSION_STORE"):
        monkeypatch.delenv(name, raising=False)

    code, out, err = run_main("run", "--agent", "greeter", "hi", capsys=capsys)

    answer = "Hello! I am the scripted model; I call no tools in this scenario."
    assert code != 0 and answer not in out  # held, not streamed
    assert f"the answer held for you to approve: {answer}" in err, err
    run_id = _run_id(err)
    code, out, _ = run_main("show", run_id, capsys=capsys)
    assert f"the answer held for you to approve: {answer}" in out, out


def _run_id(err: str) -> str:
    import re

    found = re.search(r"run_[0-9a-f]+", err)
    assert found, err
    return found.group()


@NEEDS_CHROMIUM
def test_the_page_card_shows_the_held_answer_as_text(served: Any, page: Any, tmp_path: Path) -> None:
    """Before: the card said "A guardrail asks you (output): discounts are approved by sales" and
    offered Allow, without the answer it allows. The answer is shown as the text it is (its HTML
    never parsed)."""
    from playwright.sync_api import expect

    from tests.server.test_page import open_chat, send

    server = served(agents_module=_module(tmp_path))
    open_chat(page, server, "sales")
    send(page, "a better price?")
    card = page.locator(".approval")
    expect(card.locator(".held-answer")).to_have_text(
        'A 40% discount <img src=x onerror="window.pwned=1"> for 200 units.'
    )
    assert page.evaluate("window.pwned") is None and card.locator("img").count() == 0


def test_a_call_the_guardrail_allowed_is_asked_about_then_runs_judged_once() -> None:
    """The verdict now comes first: an allowed call that needs approval is judged once, before the
    question, and runs on the person's "yes" without a second verdict (nor a second classifier call
    to pay for)."""
    from tether import Agent, RunState, approve, run_sync, tool
    from tether.guardrails import Guardrail, Rule, RuleClassifier
    from tether.testing import FunctionModel, Reply

    sent: list[str] = []
    judged: list[str] = []

    @tool(needs_approval=True)
    def send_report(body: str) -> str:
        """Send a report."""
        sent.append(body)
        return "sent"

    class Counting(RuleClassifier):
        async def classify(self, text: str, *, stage: Any, ctx: Any) -> Any:
            judged.append(text)
            return await super().classify(text, stage=stage, ctx=ctx)

    def reply(messages: Any, request: Any) -> Any:
        if any(m.role == "tool" for m in messages):
            return "Sent."
        return Reply(calls=(("c1", "send_report", {"body": "weekly numbers"}),))

    guard = Guardrail(Counting([Rule(SECRET, 0.0, "leak", "the system prompt")]), stages=("tool_args",))
    agent = Agent(FunctionModel(reply), tools=[send_report], middleware=[guard])
    state = RunState()
    # On a thread of its own: a page test before it in this process leaves Playwright's loop running here.
    with ThreadPoolExecutor(1) as thread:
        first = thread.submit(run_sync, agent, "send the report", state=state).result()
        assert first.status == "interrupted" and judged == ['send_report {"body": "weekly numbers"}'] and sent == []
        approve(state, "c1")
        second = thread.submit(run_sync, agent, state=state).result()
    assert second.status == "completed" and sent == ["weekly numbers"] and len(judged) == 1


@pytest.mark.parametrize("limit", ["per_tool", "per_turn"])
def test_a_call_past_a_limit_is_answered_without_asking_a_person_first(limit: str) -> None:
    """Before: the limits answered inside ``wrap_tool_call``, after approval: a person was asked
    to allow a second ``send_report`` and, once they did, it was "Not run: ... its limit" anyway.
    Now the limit answers first, and only the call that can run is put to a person."""
    from tether import Agent, RunState, approve, run_sync, tool
    from tether.harness.middleware import RunToolCallLimit, ToolCallLimitPerTurn
    from tether.testing import FunctionModel, Reply

    sent: list[str] = []

    @tool(needs_approval=True)
    def send_report(body: str) -> str:
        """Send a report."""
        sent.append(body)
        return "sent"

    def reply(messages: Any, request: Any) -> Any:
        if any(m.role == "tool" for m in messages):
            return "Done."
        return Reply(calls=(("c1", "send_report", {"body": "one"}), ("c2", "send_report", {"body": "two"})))

    policy = ToolCallLimitPerTurn(limit=1) if limit == "per_tool" else RunToolCallLimit(limit=1)
    agent = Agent(FunctionModel(reply), tools=[send_report], middleware=[policy])
    state = RunState()
    with ThreadPoolExecutor(1) as thread:  # Playwright's loop may be running on this thread
        first = thread.submit(run_sync, agent, "send both", state=state).result()
        assert first.status == "interrupted" and first.interruption.call_id == "c1"
        approve(state, "c1")
        second = thread.submit(run_sync, agent, state=state).result()
    assert second.status == "completed", second.reason  # c2 was never put to a person
    assert sent == ["one"]
    (refused,) = [m for m in state.messages if m.role == "tool" and m.call_id == "c2"]
    assert refused.text.startswith("Not run:") and "limit" in refused.text


def test_a_refused_calls_arguments_stay_withheld_in_the_sessions_later_runs(tmp_path: Path) -> None:
    """The mark travels with the conversation: a later run of the session (whose transcript holds
    the earlier exchange) shows the refused call's arguments withheld too."""
    from tether import Agent, RunState, run_sync, tool
    from tether.guardrails import Guardrail, Rule, RuleClassifier
    from tether.messages import for_people
    from tether.sessions import JsonlSessionStore
    from tether.testing import FunctionModel, Reply

    @tool(read_only=True)
    def search(query: str) -> str:
        """Search the catalogue."""
        return "results"

    def reply(messages: Any, request: Any) -> Any:
        if messages[-1].role == "tool":
            return "I could not search for that."
        if sum(m.role == "user" for m in messages) == 1:
            return Reply(calls=(("c1", "search", {"query": SECRET}),))
        return "Anything else?"

    guard = Guardrail(RuleClassifier([Rule(SECRET, 0.0, "leak", "the system prompt")]), stages=("tool_args",))
    agent = Agent(FunctionModel(reply), tools=[search], middleware=[guard])
    store = JsonlSessionStore(tmp_path / "sessions")
    with ThreadPoolExecutor(1) as thread:  # Playwright's loop may be running on this thread
        thread.submit(run_sync, agent, "search", state=RunState(session_id="s1"), session=store).result()
        later = RunState(session_id="s1")
        thread.submit(run_sync, agent, "thanks", state=later, session=store).result()
    shown = [c.arguments for m in for_people(later.messages) if m.role == "assistant" for c in m.tool_calls]
    assert shown == ["[arguments withheld: the tool args guardrail 'guardrail' blocked this (leak): the system prompt]"]


def test_the_command_line_shows_the_answer_a_sub_agent_holds() -> None:
    """Before: a sub-agent whose output guardrail asked stopped the parent with its question as
    ``child``, and the summary line showed no held answer (only a run's own question was read)."""
    from tether import Agent, RunState, run_sync
    from tether.cli.display import held_lines
    from tether.guardrails import Guardrail, Rule, RuleClassifier, Thresholds
    from tether.providers.scripted import call
    from tether.testing import FunctionModel

    offer = "You can have a 40% discount."
    discounts = RuleClassifier([Rule("discount", 0.4, "pricing", "discounts are approved by sales")])
    child = Agent(
        FunctionModel(lambda messages, request: offer),
        middleware=[Guardrail(discounts, stages=("output",), thresholds=Thresholds(block=0.1, ask=0.5))],
    )
    parent = Agent(
        FunctionModel(lambda messages, request: call("c1", "pricer", {"task": "price"})),
        tools=[child.as_tool("pricer", "Prices things")],
        max_turns=3,
    )
    with ThreadPoolExecutor(1) as thread:  # Playwright's loop may be running on this thread
        result = thread.submit(run_sync, parent, "a better price?", state=RunState()).result()
    assert result.status == "interrupted" and result.interruption.type == "subagent"
    assert held_lines(result.interruption) == [f"the answer held for you to approve: {offer}"]


def test_tether_show_names_the_call_a_sub_agent_waits_to_have_approved(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Before: ``tether show`` of a run whose sub-agent waits for approval said only "the sub-agent
    cleaner is waiting: wipe needs approval", never what ``--approve`` would let it wipe."""
    from tether import Agent, RunState, run_sync, tool
    from tether.harness.store import RunStore
    from tether.providers.scripted import call
    from tether.testing import FunctionModel

    @tool(needs_approval=True)
    def wipe(path: str) -> str:
        """Deletes a folder."""
        return "wiped"

    child = Agent(FunctionModel(lambda m, r: call("w1", "wipe", {"path": "/srv/data"})), tools=[wipe], max_turns=3)
    parent = Agent(
        FunctionModel(lambda m, r: call("c1", "cleaner", {"task": "clean"})),
        tools=[child.as_tool("cleaner", "Cleans")],
        max_turns=3,
    )
    home = tmp_path / "home"
    store = RunStore(home / "runs")
    with ThreadPoolExecutor(1) as thread:  # Playwright's loop may be running on this thread
        result = thread.submit(run_sync, parent, "clean", state=RunState(), store=store).result()
    assert result.interruption is not None and result.interruption.type == "subagent"
    monkeypatch.setenv("TETHER_HOME", str(home))
    code, out, _ = run_main("show", result.run_id, capsys=capsys)
    assert code == 0
    assert 'waiting for a decision about wipe {"path": "/srv/data"}, a call of the sub-agent cleaner' in out, out
