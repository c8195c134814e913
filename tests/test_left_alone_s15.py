"""Defects the last review noticed in guardrails, approvals, sessions and the loop guard, each
confirmed from outside and fixed. Each test says what was wrong before its fix."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

from tests.server.conftest import read_events, served  # noqa: F401  (served: the fixture)
from tether import Agent, run_sync
from tether.errors import ConfigError
from tether.events import Guardrail as GuardrailEvent
from tether.guardrails import Guardrail, ModelClassifier, Rule, RuleClassifier, Thresholds, Verdict
from tether.testing import FunctionModel, Reply

# --- guardrails --------------------------------------------------------------------------------


class Hangs:
    """A classifier whose service never answers."""

    async def classify(self, text: str, *, stage: Any, ctx: Any) -> Verdict:
        await asyncio.Event().wait()
        raise AssertionError("unreachable")


def events_of(agent: Agent, prompt: str) -> list[Any]:
    from tether import run_stream

    async def go() -> list[Any]:
        return [e async for e in run_stream(agent, prompt)]

    return asyncio.run(asyncio.wait_for(go(), 20))  # the bound of the test, not of the behaviour


def test_a_classifier_that_never_answers_gives_a_verdict_at_its_time_limit() -> None:
    """Was: a classifier that hung (its model or moderation service never answered) held the run,
    and the customer, for ever: there was no time limit on a verdict. Now ``timeout_s`` bounds it
    (30 s by default) and its expiry is a verdict, failing closed unless ``on_timeout="allow"``,
    which the deployment's thresholds turn into an action."""
    agent = Agent(
        FunctionModel(lambda m, r: "The FVAM-2050-B is rated for 16 bar."),
        middleware=[Guardrail(Hangs(), stages=("output",), timeout_s=0.1)],
    )
    events = events_of(agent, "rating?")
    result = events[-1].result
    assert result.status == "failed" and "16 bar" not in str(result.output)
    assert "no verdict within 0.1 s" in result.reason
    assert not [e for e in events if e.type == "text_delta"]  # nothing unchecked was released
    verdict = next(e for e in events if isinstance(e, GuardrailEvent))
    assert (verdict.decision, verdict.category, verdict.score) == ("block", "timeout", 0.0)

    # the deployment's policy decides: an internal tool may let the answer through
    relaxed = Agent(agent.model, middleware=[Guardrail(Hangs(), stages=("output",), timeout_s=0.1, on_timeout="allow")])
    assert asyncio.run(asyncio.wait_for(_run(relaxed, "rating?"), 20)).output == "The FVAM-2050-B is rated for 16 bar."
    with pytest.raises(ConfigError, match="timeout_s"):
        Guardrail(Hangs(), timeout_s=0)


async def _run(agent: Agent, prompt: str) -> Any:
    from tether import run

    return await run(agent, prompt)


def test_a_model_classifier_that_hangs_is_stopped_and_its_call_is_charged() -> None:
    """The same through a ``ModelClassifier`` whose model never answers: the run ends blocked at
    the limit, and the call it sent is charged (estimated), as a call cut by a cancel is."""

    async def hang(messages: Any, request: Any) -> str:
        await asyncio.Event().wait()
        return ""

    judge = ModelClassifier("no secrets", model=FunctionModel(hang, model_id="judge"))
    answer = FunctionModel(lambda m, r: "Rated 16 bar.")
    agent = Agent(answer, middleware=[Guardrail(judge, stages=("output",), timeout_s=0.1)])
    alone = run_sync(Agent(answer), "rating?")
    result = asyncio.run(asyncio.wait_for(_run(agent, "rating?"), 20))
    assert result.status == "failed" and "no verdict within 0.1 s" in result.reason
    assert result.usage.estimated and result.usage.completion_tokens > alone.usage.completion_tokens
    assert result.cost_usd > alone.cost_usd


SECRET_ANSWER = "Rated 16 bar. Seal kit SK-114. Supplier margin 62%. Ask me more."


def test_a_model_classifiers_rationale_does_not_hand_over_what_it_withheld() -> None:
    """Was: a ``ModelClassifier``'s rationale was passed on as the model wrote it, and a model
    often quotes what it judged ("the answer says 'Supplier margin 62%'"): the blocked answer's
    words reached the caller in the run's reason, its output and the ``guardrail`` event. Past the
    input stage, what the rationale repeats of the text (quotations, phrases, numbers and codes)
    is now written "…"."""

    def judge(messages: Any, request: Any) -> str:
        return json.dumps(
            {
                "rationale": 'The answer says "Supplier margin 62%" and gives the supplier margin of 62% '
                "for seal kit SK-114, which is confidential.",
                "score": 0.0,
                "category": "unsafe",
            }
        )

    classifier = ModelClassifier("no margins", model=FunctionModel(judge, model_id="judge"))
    agent = Agent(FunctionModel(lambda m, r: SECRET_ANSWER), middleware=[Guardrail(classifier, stages=("output",))])
    events = events_of(agent, "Tell me about the FVAM-2050-B")
    result = events[-1].result
    verdict = next(e for e in events if isinstance(e, GuardrailEvent))
    assert result.status == "failed"
    for shown in (result.reason, str(result.output), verdict.rationale):
        for leaked in ("62", "SK-114", "Supplier margin 62"):
            assert leaked not in shown, shown
        assert "confidential" in shown  # the reasons are kept
    # the person's own message is quoted back as it was: nothing of it is withheld from them
    at_input = Agent(agent.model, middleware=[Guardrail(classifier)])
    assert "Supplier margin 62%" in run_sync(at_input, SECRET_ANSWER).reason


class Answer(BaseModel):
    text: str


def test_a_canned_redirect_of_a_typed_agent_is_a_typed_answer_or_refused_before_the_run() -> None:
    """Was: an agent with an ``output_type`` whose guardrail redirected with a canned reply
    completed with that string as its ``output`` (``typed`` false) where the caller expected an
    ``Answer``. A reply that is not a typed answer is now refused before anything runs, saying
    what to write; one written as the type's JSON comes back typed."""
    off_topic = RuleClassifier([Rule(r"weather", 0.4, "off_topic", "off topic")])
    model = FunctionModel(lambda m, r: json.dumps({"text": "Sunny weather."}))
    for stage in ("input", "output"):
        canned = Guardrail(
            off_topic, stages=(stage,), thresholds=Thresholds(block=0.2, redirect=0.5), redirect_reply="Valves only."
        )
        with pytest.raises(ConfigError, match=r"redirect_reply is not one .*JSON that matches Answer"):
            run_sync(Agent(model, output_type=Answer, middleware=[canned]), "weather?")
        assert not model.requests
        typed = Guardrail(
            off_topic,
            stages=(stage,),
            thresholds=Thresholds(block=0.2, redirect=0.5),
            redirect_reply=Answer(text="Valves only.").model_dump_json(),
        )
        result = run_sync(Agent(model, output_type=Answer, middleware=[typed]), "weather?")
        assert result.status == "completed" and result.typed and result.output == Answer(text="Valves only.")


# --- approvals: a new message instead of a decision ---------------------------------------------


def test_a_chat_message_instead_of_a_decision_tells_the_model_the_call_was_not_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Was: in `tether chat` (from a pipe, where nobody is asked), a deletion waited for approval
    and the person typed a new message instead of deciding: the next run, a new one in the session,
    read the call with the placeholder a load writes for a call a crash cut, "whether it took effect
    is unknown", and the model told the person it did not know whether access.log was deleted.
    The call never ran: the run that stopped notes its waiting calls with the session, and the new
    message declines them in words ("it was not run"), as it does when it goes to the run itself."""
    from tests.conftest import EXAMPLE_WORKSPACE

    workspace = tmp_path / "ws"
    shutil.copytree(EXAMPLE_WORKSPACE, workspace)
    home = tmp_path / "home"
    env = {k: v for k, v in os.environ.items() if k not in ("LLM_BASE_URL", "OPENAI_BASE_URL", "TETHER_SESSION_STORE")}
    argv = [sys.executable, "-m", "tether", "chat", "--model", "scripted/destructive", "--cwd", str(workspace)]
    out = subprocess.run(
        [*argv, "--session", "s1"],
        input="free some space\nwhat happened?\n",
        capture_output=True,
        text=True,
        env={**env, "TETHER_HOME": str(home)},
        timeout=60,
    )
    assert out.returncode == 0, out.stderr
    assert "delete_file needs approval" in out.stderr
    assert out.stdout.strip() == "I did not delete anything: you declined the deletion."  # was: "I do not know ..."
    assert (workspace / "access.log").exists()
    results = [json.loads(line) for line in (home / "sessions" / "s1.jsonl").read_text().splitlines()]
    deletion = [m for m in results if m.get("call_id") == "c2" and m["role"] == "tool"]
    assert [(m["status"], m["content"][0]["text"][:46]) for m in deletion] == [
        ("rejected", "The user declined this call to delete_file; it")
    ]


# --- approvals over HTTP: the 409's words; a secret in a decision's reason ----------------------

PAYER = """
from tether import Agent, tool
from tether.messages import ToolMessage
from tether.testing import FunctionModel, Reply

@tool(needs_approval=True)
def send_money(to: str, amount: int) -> str:
    \"\"\"Send money.\"\"\"
    return f"sent {amount} to {to}"

def model(messages, request):
    if not any(isinstance(m, ToolMessage) for m in messages):
        return Reply(calls=(("c1", "send_money", {"to": "bob", "amount": 100}),))
    return "done: " + messages[-1].text

agents = {"payer": Agent(FunctionModel(model), tools=[send_money])}
"""
KEY = "sk-proj-" + "Zq7" * 12  # a key in the shape OpenAI gives them


def test_a_refused_decision_says_what_differs_and_a_key_in_a_reason_is_not_kept(
    served: Any,  # noqa: F811
    tmp_path: Path,
) -> None:
    """Was: a decision quoting another call's id was refused (409) "with other arguments than the
    ones approved", sending the client to look at the arguments when the call was another; and a
    key typed into a decision's reason (a person pasting what they found) went word for word into
    the transcript the model reads, the trace and the saved run. The 409 now says which differs;
    a reason's secrets are taken out as tether takes them out of whatever a run says."""
    module = tmp_path / "payer_agents.py"
    module.write_text(PAYER)
    s = served(agents_module=module)
    with s.client() as c:
        r = c.post("/v1/sessions", json={"agent": "payer"})
        run_id = c.post(f"/v1/sessions/{r.json()['session_id']}/messages", json={"text": "pay bob"}).json()["run_id"]
        asked = [e for e in read_events(c, f"/v1/runs/{run_id}/events") if e["event"] == "approval_required"][-1]
        other_call = c.post(
            f"/v1/runs/{run_id}/decision",
            json={"call_id": "call_elsewhere", "args_hash": asked["args_hash"], "approve": True},
        )
        assert other_call.status_code == 409
        said = other_call.json()["error"]["message"]
        assert "not for call call_elsewhere" in said and "other arguments" not in said, said
        other_args = c.post(
            f"/v1/runs/{run_id}/decision", json={"call_id": asked["call_id"], "args_hash": "0" * 16, "approve": True}
        )
        assert other_args.status_code == 409 and "other arguments" in other_args.json()["error"]["message"]
        decision = {
            "call_id": asked["call_id"],
            "args_hash": asked["args_hash"],
            "approve": False,
            "reason": f"bob's account is closed; use key {KEY} for the new one",
        }
        assert c.post(f"/v1/runs/{run_id}/decision", json=decision).status_code == 202
        done = read_events(c, f"/v1/runs/{run_id}/events")[-1]
        transcript = c.get(f"/v1/runs/{run_id}/transcript").text
    assert done["event"] == "done" and done["result"]["status"] == "completed"
    assert "bob's account is closed" in transcript and "[credential withheld: an API key]" in transcript
    assert KEY[:20] not in transcript and KEY[:20] not in done["result"]["output"]
    for written in Path(s.home).rglob("*"):
        if written.is_file():
            assert KEY[:20].encode() not in written.read_bytes(), written


# --- sessions: a message from the person with nothing in it -------------------------------------


@pytest.mark.parametrize("kind", ["jsonl", "sqlite"])
def test_an_empty_message_in_a_session_edited_by_hand_is_never_sent_empty(tmp_path: Path, kind: str) -> None:
    """Was: a message from the person with no words (`"text": ""`, blanks, `"content": []`: a
    session file edited by hand) was loaded as it was and sent to the provider on every later
    request, and providers that refuse an empty text ("text content blocks must be non-empty")
    failed each one. The load's repair now says, in its place, that it was empty (and drops a blank
    text beside an image), and writes that back."""
    from tether import sessions
    from tether.messages import ImagePart, UserMessage, dump_message, load_message
    from tether.sessions import JsonlSessionStore, SqliteSessionStore

    pixel = ImagePart(media_type="image/png", data="iVBORw0KGgo=")
    lines = [
        {"role": "user", "content": [{"type": "text", "text": "hi"}]},
        {"role": "assistant", "content": [{"type": "text", "text": "hello"}], "model": "m", "finish_reason": "stop"},
        {"role": "user", "content": [{"type": "text", "text": ""}]},
        {"role": "assistant", "content": [{"type": "text", "text": "?"}], "model": "m", "finish_reason": "stop"},
        {"role": "user", "content": []},
        {
            "role": "user",
            "content": [
                {"type": "text", "text": " \n "},
                json.loads(dump_message(UserMessage(content=(pixel,))))["content"][0],
            ],
        },
    ]
    if kind == "jsonl":
        (tmp_path / "s1.jsonl").write_text("".join(json.dumps(line) + "\n" for line in lines))
        store: Any = JsonlSessionStore(tmp_path)
    else:
        store = SqliteSessionStore(tmp_path / "s.db")
        store.append("s1", [load_message(json.dumps(line)) for line in lines])
    sent: list[list[Any]] = []

    def model(messages: Any, request: Any) -> str:
        sent.append([part for m in messages if m.role == "user" for part in m.content])
        return "ok"

    result = run_sync(Agent(FunctionModel(model)), "next", session=store, session_id="s1")
    assert result.status == "completed"
    texts = [getattr(p, "text", None) for p in sent[0]]
    assert all(t is None or t.strip() for t in texts), texts  # was: "", then " \n " beside the image
    empty = sessions.EMPTY_MESSAGE_TEXT
    assert texts == ["hi", empty, empty, None, "next"]  # None: the image, kept
    assert store.load("s1")[2].content[0].text == empty  # written back: the same each load


# --- the loop guard -----------------------------------------------------------------------------


def _searcher(*, window: int | None, limit_of: Any, page_words: int) -> tuple[Any, list[str]]:
    """A model that searches for the same thing again and again, reading a long page between two
    searches (so a small window summarises each search soon after it ran)."""
    from tether import tool
    from tether.harness.loop_guard import LoopGuard
    from tether.messages import ToolMessage, text_of

    runs: list[str] = []

    @tool(read_only=True, parallel=False)
    def search(query: str, limit: float = 5) -> str:
        """Search."""
        runs.append(query)
        return f"results for {query}: nothing relevant here"

    @tool(read_only=True, parallel=False)
    def read_page(n: int) -> str:
        """Read a page."""
        return f"page {n}: " + "lorem ipsum dolor " * page_words

    def model(messages: Any, request: Any) -> Any:
        if "<transcript>" in text_of(messages[:1]):
            return "Searched several times; nothing found."
        if not request.tools:
            return "Status: still searching."
        k = len(runs)
        if page_words and isinstance(messages[-1], ToolMessage) and messages[-1].name == "search":
            return Reply(calls=((f"r{k}", "read_page", {"n": k}),))
        return Reply(calls=((f"s{k}", "search", {"query": "FVAM-2050-B seal material", "limit": limit_of(k)}),))

    agent = Agent(
        FunctionModel(model),
        tools=[search, read_page],
        context_window=window,
        max_turns=40,
        dedupe_read_only=False,
        middleware=[LoopGuard()],
    )
    return run_sync(agent, "what are the seals made of"), runs


def test_the_loop_guard_stops_a_model_whose_notes_a_compaction_summarised() -> None:
    """Was: the guard stops only a model that was told (an earlier alike call's result carries its
    note, a text part of its own). A compaction's record of the turn keeps each result cut short
    and in one text, so the note was no part of its own there (or cut off): with a small window the
    model was nudged again and again and never stopped (20 searches, the run ended at max_turns).
    The guard now keeps the calls it noted with the run."""
    result, runs = _searcher(window=1500, limit_of=lambda k: 5, page_words=80)
    assert result.status == "failed" and "stopped a loop" in (result.reason or ""), result.reason
    assert len(runs) == 4, runs  # the fifth is not run


def test_the_loop_guard_reads_5_and_5_0_as_the_same_argument() -> None:
    """Was: arguments were compared as JSON text, where `5` and `5.0` differ: a model alternating
    them (the same search, its limit written either way) was half as often a repeat, and ran twice
    as many searches before it was stopped (8, not 4)."""
    result, runs = _searcher(window=None, limit_of=lambda k: 5.0 if k % 2 else 5, page_words=0)
    assert result.status == "failed" and "called 5 times with the same arguments" in (result.reason or "")
    assert len(runs) == 4, runs
