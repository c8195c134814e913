"""The output stage: an answer is checked before any of it reaches the caller. Held whole
(``release="hold"``) or released in checked chunks (``release="chunks"``): what fails its check, and
everything after it, is never streamed; what passes arrives whole and in order; a failed attempt's
held text dies with it. In process, and over both wires against the scripted server."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any, Literal

import pytest

from tests.conftest import scripted_anthropic as anthropic
from tests.conftest import scripted_openai as openai
from tests.guardrails.common import (
    PRICE,
    Sentences,
    assert_never_streamed,
    collect,
    deltas,
    result_of,
    rules,
    sentences,
    traced,
    verdicts,
)
from tether import Agent, JsonlTracer, RunState
from tether.errors import IncompleteStreamError
from tether.events import Retry, Turn
from tether.guardrails import Guardrail, Rule
from tether.harness.retry import RetryPolicy
from tether.messages import AssistantMessage
from tether.providers.base import ModelRequest, StreamEvent, StreamText
from tether.testing import ScriptedServer

Release = Literal["hold", "chunks"]
FAST = RetryPolicy(base_delay_s=0.01, max_delay_s=0.05)
MARGIN = Rule(r"supplier margin", 0.0, "confidential", "the answer discloses an internal supplier margin")
CLEAN = (
    "The FVAM-2050-B is a pneumatic valve for water lines. It is rated for 16 bar at 20 C. "
    "Its seal kit is SK-114, sold separately."
)
LEAKY = (
    "The FVAM-2050-B is a pneumatic valve for water lines. It is rated for 16 bar at 20 C. "
    "Internal note: the supplier margin on SK-114 is 62 percent. Ask me about seals if you need more."
)
PASSED = LEAKY[: LEAKY.index("Internal note")]  # the two sentences before the one that fails
BLOCKED = LEAKY[len(PASSED) :]  # the sentence that fails its check, and everything after it


def guard(release: Release, *items: Rule, chunk_chars: int = 20) -> Guardrail:
    return Guardrail(rules(*items), stages=("output",), release=release, chunk_chars=chunk_chars)


# -- blocked: nothing of it streamed ------------------------------------------------------------


def test_a_held_answer_that_fails_is_never_streamed_and_is_recorded_in_words(tmp_path: Path) -> None:
    fm = Sentences(lambda m, r: LEAKY)
    state = RunState()
    events = collect(
        Agent(fm, middleware=[guard("hold", MARGIN)]),
        "Tell me about the FVAM-2050-B",
        state=state,
        tracer=JsonlTracer(tmp_path),
    )
    r = result_of(events)

    assert deltas(events) == []
    assert_never_streamed(events, LEAKY)
    assert r.status == "failed"
    words = f"the output guardrail 'guardrail' blocked this (confidential): {MARGIN.rationale}"
    assert r.reason == f"blocked: {words}"
    assert r.output == f"[Answer withheld: {words}.]"
    (recorded,) = [m for m in state.messages if isinstance(m, AssistantMessage)]
    assert recorded.text == r.output and "62 percent" not in state.model_dump_json()
    # The reply was made and paid for: its cost counts, with the model's own usage.
    (turn,) = [e for e in events if isinstance(e, Turn)]
    assert turn.usage.completion_tokens > 0 and r.usage == turn.usage and recorded.usage == turn.usage
    assert r.cost_usd is not None and r.cost_usd > 0 and r.cost_usd == pytest.approx(PRICE.cost(turn.usage))
    (verdict,) = verdicts(events)
    assert (verdict.decision, verdict.stage, verdict.category) == ("block", "output", "confidential")
    (line,) = [t for t in traced(tmp_path, r.run_id) if t["type"] == "guardrail"]
    assert line["decision"] == "block" and line["stage"] == "output" and line["rationale"] == MARGIN.rationale


def test_checked_chunks_stream_until_one_fails_and_nothing_after_it() -> None:
    fm = Sentences(lambda m, r: LEAKY)
    state = RunState()
    events = collect(Agent(fm, middleware=[guard("chunks", MARGIN)]), "Tell me about the FVAM-2050-B", state=state)
    r = result_of(events)

    first, second, _, _ = sentences(LEAKY)
    assert deltas(events) == [first, second]  # each released once it passed its own check
    assert "".join(deltas(events)) == PASSED
    assert_never_streamed(events, BLOCKED)
    assert r.status == "failed" and r.output.startswith("[Answer withheld: the output guardrail")
    assert [(v.decision, v.stage) for v in verdicts(events)] == [("allow", "output")] * 2 + [("block", "output")]
    assert r.cost_usd is not None and r.cost_usd > 0


# -- passed: whole and in order -----------------------------------------------------------------


@pytest.mark.parametrize("release", ["hold", "chunks"])
def test_an_answer_that_passes_arrives_whole_and_in_order(release: Release) -> None:
    fm = Sentences(lambda m, r: CLEAN)
    events = collect(Agent(fm, middleware=[guard(release, MARGIN)]), "Tell me about the FVAM-2050-B")
    r = result_of(events)
    assert r.status == "completed" and r.output == CLEAN
    assert "".join(deltas(events)) == CLEAN
    if release == "hold":
        assert deltas(events) == [CLEAN]  # held whole, released once checked
    else:
        assert deltas(events) == sentences(CLEAN)
    assert {v.decision for v in verdicts(events)} == {"allow"}


def test_a_short_tail_after_the_last_chunk_is_checked_too() -> None:
    tail = CLEAN + " The supplier margin is 62 percent."
    fm = Sentences(lambda m, r: tail)
    events = collect(Agent(fm, middleware=[guard("chunks", MARGIN, chunk_chars=70)]), "go")
    r = result_of(events)
    assert r.status == "failed"
    assert "supplier margin" not in "".join(deltas(events))


# -- a failed attempt's held text dies with it --------------------------------------------------


class CutOnce(Sentences):
    """Streams a draft, then loses the connection, on the first request only."""

    def __init__(self, draft: str, answer: str) -> None:
        super().__init__(lambda m, r: answer)
        self.draft = draft
        self.attempts = 0

    async def stream(self, request: ModelRequest) -> AsyncIterator[StreamEvent]:
        self.attempts += 1
        if self.attempts == 1:
            yield StreamText(self.draft)
            raise IncompleteStreamError("function: the connection was lost mid-stream")
        async for event in super().stream(request):
            yield event


@pytest.mark.parametrize("release", ["hold", "chunks"])
def test_a_retried_attempt_never_leaks_the_failed_attempts_held_text(release: Release) -> None:
    draft = "DRAFT-ONE: an early wording "  # shorter than a chunk: held, not yet released
    fm = CutOnce(draft, CLEAN)
    events = collect(Agent(fm, middleware=[guard(release, MARGIN, chunk_chars=40)], retry=FAST), "go")
    r = result_of(events)
    assert r.status == "completed" and r.output == CLEAN
    assert fm.attempts == 2 and len([e for e in events if isinstance(e, Retry)]) == 1
    assert "DRAFT-ONE" not in "".join(deltas(events))
    assert "".join(deltas(events)) == CLEAN


# -- both wires, against the scripted server ----------------------------------------------------

HELLO = "Hello! I am the scripted model; I call no tools in this scenario."
SCRIPTED = Rule(r"scripted model", 0.0, "identity", "the answer talks about being scripted")
SCENARIO = Rule(r"this scenario", 0.0, "identity", "the answer talks about its scenario")


@pytest.fixture
def server() -> Iterator[ScriptedServer]:
    with ScriptedServer() as s:
        yield s


def requests_to(server: ScriptedServer) -> list[dict[str, Any]]:
    return [body for _, body, _ in server.received]


@pytest.mark.parametrize("make", [openai, anthropic], ids=["openai", "anthropic"])
def test_streamed_over_the_wire_blocked_whole(server: ScriptedServer, make: Any) -> None:
    events = collect(Agent(make(server, "hello"), price=PRICE, middleware=[guard("hold", SCRIPTED)]), "hi")
    r = result_of(events)
    assert all(body.get("stream") for body in requests_to(server))  # it really was streamed
    assert r.status == "failed" and deltas(events) == []
    assert_never_streamed(events, HELLO)
    assert r.cost_usd is not None and r.cost_usd > 0 and r.usage.completion_tokens > 0


@pytest.mark.parametrize("make", [openai, anthropic], ids=["openai", "anthropic"])
def test_streamed_over_the_wire_in_chunks_nothing_from_the_failed_check_on(server: ScriptedServer, make: Any) -> None:
    events = collect(
        Agent(make(server, "hello"), price=PRICE, middleware=[guard("chunks", SCENARIO, chunk_chars=10)]), "hi"
    )
    r = result_of(events)
    assert r.status == "failed" and r.output.startswith("[Answer withheld: the output guardrail")
    shown = "".join(deltas(events))
    assert HELLO.startswith(shown)  # at most whole chunks that passed, in order
    assert_never_streamed(events, "I call no tools in this scenario.")


@pytest.mark.parametrize("make", [openai, anthropic], ids=["openai", "anthropic"])
def test_chunks_are_released_at_a_sentence_end_inside_a_delta(server: ScriptedServer, make: Any) -> None:
    """The wire's deltas are several words long and rarely end where a sentence does (the scripted
    server sends ``Hello! I am the `` then ``scripted model; I call ``): a chunk that passed must be
    released up to its last sentence end, or ``chunks`` quietly degrades to ``hold``."""
    events = collect(
        Agent(make(server, "hello"), price=PRICE, middleware=[guard("chunks", SCENARIO, chunk_chars=10)]), "hi"
    )
    assert result_of(events).status == "failed"
    assert deltas(events) == ["Hello! I am the scripted model; "]  # the first sentence passed its check


@pytest.mark.parametrize("make", [openai, anthropic], ids=["openai", "anthropic"])
@pytest.mark.parametrize("release", ["hold", "chunks"])
def test_streamed_over_the_wire_passing_whole(server: ScriptedServer, make: Any, release: Release) -> None:
    events = collect(
        Agent(make(server, "hello"), price=PRICE, middleware=[guard(release, MARGIN, chunk_chars=10)]), "hi"
    )
    r = result_of(events)
    assert r.status == "completed" and r.output == HELLO and "".join(deltas(events)) == HELLO
    if release == "hold":
        assert deltas(events) == [HELLO]


@pytest.mark.parametrize("make", [openai, anthropic], ids=["openai", "anthropic"])
def test_a_stream_cut_after_text_is_retried_without_showing_the_cut_text(server: ScriptedServer, make: Any) -> None:
    server.set_faults(["cut_after_text"])
    events = collect(Agent(make(server, "hello"), price=PRICE, retry=FAST, middleware=[guard("hold", MARGIN)]), "hi")
    r = result_of(events)
    # Without the gate this run fails: part of the reply reached the user, so it cannot be retried.
    assert r.status == "completed" and r.output == HELLO
    assert deltas(events) == [HELLO]  # the cut attempt's first words are not shown twice
    assert len([e for e in events if isinstance(e, Retry)]) == 1 and len(requests_to(server)) == 2


@pytest.mark.parametrize("make", [openai, anthropic], ids=["openai", "anthropic"])
def test_a_held_attempt_cut_after_text_is_still_counted(server: ScriptedServer, make: Any) -> None:
    """Law 6: a request whose stream was cut after text was billed. The loop counts it (estimated)
    when the text was streamed to the caller; it must count it the same when a guardrail held it."""
    clean = result_of(collect(Agent(make(server, "hello"), price=PRICE, middleware=[guard("hold", MARGIN)]), "hi"))
    server.set_faults(["cut_after_text"])
    cut = result_of(
        collect(Agent(make(server, "hello"), price=PRICE, retry=FAST, middleware=[guard("hold", MARGIN)]), "hi")
    )
    assert cut.status == "completed" and len(requests_to(server)) == 2
    assert cut.usage.estimated, "the cut attempt was not counted"
    assert cut.usage.prompt_tokens > clean.usage.prompt_tokens
    assert cut.cost_usd is not None and clean.cost_usd is not None and cut.cost_usd > clean.cost_usd


# -- text beside tool calls ---------------------------------------------------------------------


def test_text_streamed_beside_a_tool_call_is_checked_too() -> None:
    """The output check skips replies with tool calls, but their text streams through the gate all
    the same: a preamble beside a call reaches the caller unchecked."""
    from tether import tool
    from tether.testing import Reply

    @tool(read_only=True)
    def stock(part: str) -> str:
        """Units in stock."""
        return "12"

    preamble = "Internal note: the supplier margin on SK-114 is 62 percent. Checking stock now."

    def fn(messages: list[Any], request: Any) -> Any:
        if any(m.role == "tool" for m in messages):
            return "SK-114: 12 units in stock."
        return Reply(text=preamble, calls=(("c1", "stock", {"part": "SK-114"}),))

    events = collect(Agent(Sentences(fn), tools=[stock], middleware=[guard("hold", MARGIN)]), "Is SK-114 in stock?")
    assert "supplier margin" not in json.dumps(deltas(events))


# -- several output guardrails: each of them checks every piece before it is released -----------

PERMISSIVE = Rule(r"no such phrase anywhere", 0.0, "never", "never matches")


def named(name: str, release: Release, *items: Rule, chunk_chars: int = 20) -> Guardrail:
    return Guardrail(rules(*items), stages=("output",), release=release, chunk_chars=chunk_chars, name=name)


@pytest.mark.parametrize("blocker_first", [True, False], ids=["blocker-outer", "blocker-inner"])
@pytest.mark.parametrize("releases", [("chunks", "chunks"), ("hold", "chunks"), ("chunks", "hold")])
def test_two_output_guardrails_never_release_what_either_blocks(
    blocker_first: bool, releases: tuple[Release, Release]
) -> None:
    """Each output guardrail once kept its own gate and the last one's replaced the others': with a
    permissive guardrail last, a strict one's verdict never reached the stream, and the supplier
    margin streamed to the caller in checked-by-the-wrong-guardrail chunks."""
    strict = named("strict", releases[0], MARGIN)
    lenient = named("lenient", releases[1], PERMISSIVE)
    stack = [strict, lenient] if blocker_first else [lenient, strict]
    state = RunState()
    events = collect(
        Agent(Sentences(lambda m, r: LEAKY), middleware=stack), "Tell me about the FVAM-2050-B", state=state
    )
    r = result_of(events)

    assert r.status == "failed" and "'strict' blocked this (confidential)" in r.reason
    assert_never_streamed(events, BLOCKED)
    assert "62 percent" not in state.model_dump_json()
    shown = deltas(events)
    if "hold" in releases:
        assert shown == []  # one guardrail holds the whole answer: so does the gate
    else:
        assert "".join(shown) == PASSED  # the sentences both passed, each released once
    blocks = [v for v in verdicts(events) if v.decision == "block"]
    assert [v.name for v in blocks] == ["strict"]  # one verdict stops the reply; the other leaves it be
    # Every released piece was judged by both guardrails before it was shown (ending a judged text:
    # a chunk is judged with the end of what was released before it).
    for piece in shown:
        for guardrail in (strict, lenient):
            seen = guardrail.classifier.seen  # type: ignore[attr-defined]
            assert any(stage == "output" and text.endswith(piece) for stage, text in seen)


def test_two_output_guardrails_pass_a_clean_answer_whole() -> None:
    stack = [named("a", "chunks", MARGIN), named("b", "chunks", PERMISSIVE)]
    events = collect(Agent(Sentences(lambda m, r: CLEAN), middleware=stack), "go")
    r = result_of(events)
    assert r.status == "completed" and r.output == CLEAN
    assert deltas(events) == sentences(CLEAN)
    assert {v.decision for v in verdicts(events)} == {"allow"}
