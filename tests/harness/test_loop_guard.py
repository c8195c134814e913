"""Loop detection: exact and near repeats nudged, then stopped; what is not a loop; thresholds; the
read-only cache and the per-tool limits alongside; a stubborn scripted model; after the stop."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import assert_pairing
from tether import Agent, RunState, RunStore, run_sync, tool
from tether.errors import ConfigError, UserError
from tether.harness.loop_guard import LoopGuard, word_overlap
from tether.harness.middleware import ToolCallLimitPerTurn
from tether.messages import AssistantMessage, Message, ToolMessage
from tether.providers.scripted import SEARCHER_QUERIES
from tether.testing import FunctionModel, Reply, call

NUDGE = "[Loop check: "
STOPPED = "Not run: stopped a loop: "


class Searches:
    """A ``search_kb`` tool that returns the same passages whatever it is asked, and counts its runs."""

    def __init__(self) -> None:
        self.queries: list[str] = []

        @tool(read_only=True, name="search_kb")
        def search_kb(query: str) -> str:
            """Search the knowledge base."""
            self.queries.append(query)
            return "[1] catalog/valves.md:6-14 FVAM-2050-B: forged brass body. Seal kit: SK-77."

        self.tool = search_kb


@tool(read_only=True)
def ping(n: int = 0) -> str:
    """Ping."""
    return f"pong {n}"


def turn_of(messages: Sequence[Message]) -> int:
    return sum(isinstance(m, AssistantMessage) for m in messages)


def searching(queries: Sequence[str], answer: str = "done") -> FunctionModel:
    """A model that searches ``queries`` one per turn, then answers."""

    def fn(messages: list[Message], request: Any) -> Any:
        t = turn_of(messages)
        return call(f"c{t + 1}", "search_kb", {"query": queries[t]}) if t < len(queries) else answer

    return FunctionModel(fn)


def results(state: RunState, name: str = "search_kb") -> list[ToolMessage]:
    return [m for m in state.messages if isinstance(m, ToolMessage) and m.name == name]


def run(model: Any, tools: Sequence[Any], middleware: Sequence[Any], **agent: Any) -> tuple[Any, RunState]:
    state = RunState()
    result = run_sync(
        Agent(model, tools=tools, middleware=middleware, **agent),
        "What are the FVAM-2050-B seals made of?",
        state=state,
    )
    assert_pairing(state.messages)
    return result, state


# -- what counts as the same question -----------------------------------------------------------


def test_word_overlap_sees_rewordings_and_tells_identifiers_apart() -> None:
    assert word_overlap("seal material of FVAM-2050-B", "FVAM-2050-B seal material") == 1.0  # order, stop words
    assert word_overlap("FVAM-2050-B seals", "FVAM-2050-B seal") == 1.0  # plural folded
    assert word_overlap("what are the FVAM-2050-B seals made of", "FVAM-2050-B seal material") == 0.5
    # A different part, a different file: not the same question, however alike the words.
    assert word_overlap("FVAM-2050-A seal material", "FVAM-2050-B seal material") == 0.0
    assert word_overlap("read errors.log", "read access.log") == 0.0
    # One shared identifier and one other word each: different questions, below the default.
    assert word_overlap("FVAM-2050-B dimensions", "FVAM-2050-B weight") < 0.5
    assert word_overlap("FVAM-2050-B pressure rating", "FVAM-2050-B seal material") < 0.5
    assert word_overlap("material de las juntas del FVAM-2050-B", "FVAM-2050-B juntas material") == 1.0


# Hand-written: how models re-ask one question when the first search did not answer it, and
# legitimate sequences of different questions about one product (the measurement behind 0.5).
REWORDINGS = {
    "switching frequency": [
        "BIM-UNT-AP6X maximum switching frequency",
        "switching frequency of BIM-UNT-AP6X",
        "what is the max switching frequency for the BIM-UNT-AP6X sensor",
        "BIM-UNT-AP6X switching frequency Hz",
        "BIM-UNT-AP6X frequency specification",
        "max switching frequency BIM-UNT-AP6X datasheet",
        "BIM-UNT-AP6X sensor switching frequency",
    ],
    "juntas": [
        "material de las juntas del FVAM-2050-B",
        "¿de qué material son las juntas del FVAM-2050-B?",
        "juntas FVAM-2050-B material",
        "FVAM-2050-B material de juntas",
        "material juntas válvula FVAM-2050-B",
        "juntas del FVAM-2050-B",
        "FVAM-2050-B juntas",
    ],
}
RESEARCH = [
    "FVAM-2050-B datasheet",
    "FVAM-2050-B body material",
    "FVAM-2050-B ball material",
    "FVAM-2050-B seat material",
    "FVAM-2050-B seal kit",
    "SK-77 seal kit contents",
    "SK-77 seal material",
    "FVAM-2050-B pressure rating",
    "FVAM-2050-B temperature range",
    "FVAM-2050-B flow coefficient Kv",
    "FVAM-2050-B end connections",
    "FVAM-2050-B weight",
    "FVAM-2050-B actuator mounting ISO 5211",
    "FVAM-2050-B pneumatic actuator",
    "FVAM-2050-B electric actuator",
    "FVAM-2050-B certifications",
    "FVAM-2050-B maintenance interval",
    "FVAM-2050-B seal replacement procedure",
    "FVAM-2050-B spare parts",
    "FVAM-2050-B price",
    "FVAM-2050-A seal material",
    "FVAM-2050-C seal material",
    "FVAM-3050-B seal material",
]


@pytest.mark.parametrize("topic", sorted(REWORDINGS))
def test_reworded_searches_are_stopped_by_default(topic: str) -> None:
    s = Searches()
    r, _ = run(searching(REWORDINGS[topic]), [s.tool], [LoopGuard()])
    assert r.status == "failed" and r.reason.startswith("stopped a loop: search_kb was called 5 times")
    assert len(s.queries) < len(REWORDINGS[topic])


def test_a_run_of_different_questions_is_not_stopped() -> None:
    s = Searches()
    r, state = run(searching(RESEARCH), [s.tool], [LoopGuard()])
    assert r.status == "completed" and s.queries == RESEARCH
    # Words cannot tell "body material", "ball material", "seat material" from a rewording: the
    # third gets a nudge (cheap), and nothing here comes near a stop.
    assert [m.call_id for m in results(state) if NUDGE in m.text] == ["c4"]


# -- nudge, then stop ---------------------------------------------------------------------------


def test_exact_repeats_are_nudged_then_the_fifth_is_not_run() -> None:
    s = Searches()
    r, state = run(searching(["FVAM-2050-B seal material"] * 8), [s.tool], [LoopGuard()], dedupe_read_only=False)
    out = results(state)
    assert [NUDGE in m.text for m in out] == [False, False, True, True, False]
    assert "you have called search_kb with the same arguments 3 times" in out[2].text
    assert "the results did not change" in out[2].text and "answer with what you have, or ask the user" in out[2].text
    assert "4 times" in out[3].text
    assert len(s.queries) == 4  # the fifth was not run ...
    assert out[4].text.startswith(STOPPED) and out[4].status == "error"  # ... and its result says why
    assert r.status == "failed" and r.reason == out[4].text.removeprefix("Not run: ")
    assert r.reason.startswith("stopped a loop: search_kb was called 5 times with the same arguments")
    assert '{"query": "FVAM-2050-B seal material"}' in r.reason


def test_near_repeats_are_nudged_at_the_third_and_say_what_was_reworded() -> None:
    queries = ["seal material of FVAM-2050-B", "FVAM-2050-B seal material", "which FVAM-2050-B seals material"]
    s = Searches()
    r, state = run(searching(queries), [s.tool], [LoopGuard()])
    out = results(state)
    assert r.status == "completed" and len(s.queries) == 3
    assert NUDGE not in out[1].text
    assert out[2].text.startswith(out[0].text)  # the tool's own words come first, the note after
    assert "called search_kb with nearly the same query 3 times" in out[2].text


def test_the_nudge_is_in_what_the_model_reads_next() -> None:
    s = Searches()
    model = searching(["FVAM-2050-B seal material"] * 3)
    run(model, [s.tool], [LoopGuard()], dedupe_read_only=False)
    last_sent = model.requests[-1].messages[-1]
    assert isinstance(last_sent, ToolMessage) and NUDGE in last_sent.text


def test_a_model_is_told_before_it_is_stopped() -> None:
    # Each of the first four is alike to the fifth, not to one another: the fifth is the first
    # call to reach the count, so it runs with a note; the next alike call is stopped.
    queries = [
        "FVAM-2050-B body material",
        "FVAM-2050-B seal kit",
        "FVAM-2050-B seat material",
        "FVAM-2050-B seal torque",
        "FVAM-2050-B seal material",
        "FVAM-2050-B seal material",
    ]
    s = Searches()
    r, state = run(searching(queries), [s.tool], [LoopGuard()], dedupe_read_only=False)
    out = results(state)
    assert [NUDGE in m.text for m in out[:5]] == [False, False, False, False, True]
    assert "5 times" in out[4].text and "The next call like it will not be run" in out[4].text
    assert r.status == "failed" and len(s.queries) == 5 and "called 6 times" in r.reason


def test_results_that_changed_are_described_as_such() -> None:
    answers = iter(["no results", "1 result: SK-77", "3 results: SK-77, SK-81, EPDM"])

    @tool(name="search_kb")
    def search_kb(query: str) -> str:
        """Search."""
        return next(answers)

    _, state = run(searching(["FVAM-2050-B seal material"] * 3), [search_kb], [LoopGuard()])
    assert "the results changed" in results(state)[2].text


# -- not a loop ---------------------------------------------------------------------------------


def test_other_tools_and_different_arguments_are_not_counted() -> None:
    def fn(messages: list[Message], request: Any) -> Any:
        t = turn_of(messages)
        if t >= 12:
            return "done"
        if t % 2:
            return call(f"p{t}", "ping", {"n": t})  # same tool, a different number each time
        return call(f"s{t}", "search_kb", {"query": RESEARCH[t]})

    s = Searches()
    r, state = run(FunctionModel(fn), [s.tool, ping], [LoopGuard()])
    assert r.status == "completed"
    assert not [m for m in state.messages if isinstance(m, ToolMessage) and NUDGE in m.text]


def test_a_successful_write_in_between_starts_a_new_streak() -> None:
    runs: list[int] = []

    @tool
    def run_tests() -> str:
        """Run the test suite."""
        runs.append(1)
        return f"{len(runs)} failed"

    @tool
    def edit_file(path: str, text: str) -> str:
        """Edit a file."""
        return "edited"

    def fix_and_test(messages: list[Message], request: Any) -> Any:  # edit, test, edit, test, ...
        t = turn_of(messages)
        if t >= 14:
            return "fixed"
        if t % 2:
            return call(f"t{t}", "run_tests")
        return call(f"e{t}", "edit_file", {"path": "app.py", "text": f"attempt {t}"})

    r, state = run(FunctionModel(fix_and_test), [run_tests, edit_file], [LoopGuard()])
    assert r.status == "completed" and len(runs) == 7
    assert not [m for m in state.messages if isinstance(m, ToolMessage) and NUDGE in m.text]

    runs.clear()  # the same tests again and again with nothing changed in between: a loop
    only_tests = FunctionModel(lambda m, req: call(f"t{turn_of(m)}", "run_tests") if turn_of(m) < 8 else "done")
    r, state = run(only_tests, [run_tests, edit_file], [LoopGuard()])
    assert r.status == "failed" and len(runs) == 4


def test_alike_writes_that_succeed_are_work_and_alike_writes_that_fail_are_a_loop() -> None:
    @tool
    def edit_file(path: str, old_text: str, new_text: str) -> str:
        """Replace old_text with new_text."""
        if "(self, req)" in old_text:
            raise ValueError(f"{old_text!r} is not in {path}")
        return "edited"

    names = ["create", "update", "delete", "show", "archive", "restore"]

    def edits(broken: bool) -> FunctionModel:  # alike edits of one file, one after another
        def fn(messages: list[Message], request: Any) -> Any:
            t = turn_of(messages)
            if t >= len(names):
                return "done"
            old = f"def {names[t]}(self, {'req' if broken else 'request'})"
            return call(
                f"e{t}",
                "edit_file",
                {"path": "app.py", "old_text": old, "new_text": f"def {names[t]}(self, request: Request)"},
            )

        return FunctionModel(fn)

    assert word_overlap("def create(self, request)", "def update(self, request)") >= 0.5  # alike
    r, state = run(edits(broken=False), [edit_file], [LoopGuard()])
    assert r.status == "completed"
    assert not [m for m in state.messages if isinstance(m, ToolMessage) and NUDGE in m.text]
    r, state = run(edits(broken=True), [edit_file], [LoopGuard()])
    assert r.status == "failed" and "edit_file was called 5 times with nearly the same arguments" in r.reason


# -- configuration ------------------------------------------------------------------------------


def test_thresholds_are_configurable() -> None:
    same = ["FVAM-2050-B seal material"] * 8
    s = Searches()
    r, state = run(searching(same), [s.tool], [LoopGuard(nudge_after=2, stop_after=3)], dedupe_read_only=False)
    assert [NUDGE in m.text for m in results(state)] == [False, True, False]
    assert r.status == "failed" and len(s.queries) == 2 and "called 3 times" in r.reason

    s = Searches()
    r, state = run(searching(same), [s.tool], [LoopGuard(stop_after=None)], dedupe_read_only=False)
    assert r.status == "completed" and len(s.queries) == 8  # nudges only
    assert [NUDGE in m.text for m in results(state)] == [False, False, *[True] * 6]
    assert "will not be run" not in results(state)[2].text

    reworded = list(SEARCHER_QUERIES[:8])
    s = Searches()
    r, _ = run(searching(reworded), [s.tool], [LoopGuard(similarity=0.9)])
    assert r.status == "completed" and len(s.queries) == 8  # strict: these rewordings are not repeats
    s = Searches()
    r, _ = run(searching(reworded), [s.tool], [LoopGuard(similarity=0.3)])
    assert r.status == "failed" and len(s.queries) == 4  # lax: they are, sooner than by default


@pytest.mark.parametrize("guard", [LoopGuard(tools={"ping"}), LoopGuard(ignore={"search_kb"})], ids=["tools", "ignore"])
def test_which_tools_are_watched_is_configurable(guard: LoopGuard) -> None:
    s = Searches()
    r, state = run(searching(["FVAM-2050-B seal material"] * 8), [s.tool], [guard], dedupe_read_only=False)
    assert r.status == "completed" and len(s.queries) == 8
    assert not [m for m in results(state) if NUDGE in m.text]


@pytest.mark.parametrize("bad", [{"nudge_after": 1}, {"stop_after": 1}, {"similarity": 0}, {"similarity": 1.5}])
def test_nonsense_thresholds_are_refused(bad: dict[str, Any]) -> None:
    with pytest.raises(ConfigError):
        LoopGuard(**bad)


# -- answers that never pass through the middleware ---------------------------------------------


def test_answers_from_the_read_only_cache_still_count(tmp_path: Path) -> None:
    s = Searches()
    store = RunStore(tmp_path / "runs")
    model = searching(["FVAM-2050-B seal material"] * 8)
    state = RunState()
    r = run_sync(Agent(model, tools=[s.tool], middleware=[LoopGuard()]), "Seals?", state=state, store=store)
    out = results(state)
    assert len(s.queries) == 1 and [m.status for m in out] == ["ok", *["cached"] * 4]
    assert [NUDGE in m.text for m in out] == [False, False, True, True, True]
    assert "the same arguments 3 times" in out[2].text and "did not change" in out[2].text
    assert isinstance(model.requests[3].messages[-1], ToolMessage) and NUDGE in model.requests[3].messages[-1].text
    assert r.status == "failed" and r.reason.startswith("stopped a loop: search_kb was called 5 times")
    assert r.reason in out[4].text and "The run stops here." in out[4].text
    assert len(model.requests) == 5  # no sixth request: stopped before asking the model again
    saved = results(store.load(state.run_id))
    assert [m.text for m in saved] == [m.text for m in out]  # the rewritten results were saved
    assert_pairing(state.messages)


def test_a_cached_copy_of_a_nudged_result_is_judged_afresh() -> None:
    # The third search is nudged; then the model repeats it exactly, and the read-only cache answers
    # with a copy of that result, old note included: each copy gets its own, current note instead.
    queries = ["seal material of FVAM-2050-B", "FVAM-2050-B seal material", *["which FVAM-2050-B seals material"] * 6]
    s = Searches()
    r, state = run(searching(queries), [s.tool], [LoopGuard()])
    out = results(state)
    assert len(s.queries) == 3 and [m.status for m in out] == ["ok", "ok", "ok", "cached", "cached"]
    assert [m.text.count(NUDGE) for m in out] == [0, 0, 1, 1, 1]
    assert "4 times" in out[3].text and "3 times" not in out[3].text
    assert r.status == "failed" and r.reason in out[4].text


# -- a stubborn scripted model ------------------------------------------------------------------


def test_the_scripted_searcher_is_nudged_then_stopped() -> None:
    s = Searches()
    r, state = run("scripted/searcher", [s.tool], [LoopGuard()])
    out = results(state)
    assert r.status == "failed" and r.reason.startswith(
        "stopped a loop: search_kb was called 5 times with nearly the same query"
    )
    assert len(s.queries) == 5 and s.queries == list(SEARCHER_QUERIES[:5])  # well before fifteen
    assert NUDGE in out[2].text and "nearly the same query 3 times" in out[2].text
    said = [m.text for m in state.messages if isinstance(m, AssistantMessage) and m.text]
    assert said and said[0].startswith("The note says to stop")  # it read the nudge, and went on
    assert out[-1].text.startswith(STOPPED) and r.reason in out[-1].text


def test_the_scripted_searcher_searches_fifteen_times_without_the_guard() -> None:
    s = Searches()
    r, _ = run("scripted/searcher", [s.tool], [])
    assert r.status == "completed" and len(s.queries) == 15
    assert r.output == "After 15 searches: the FVAM-2050-B uses seal kit SK-77."


def test_the_scripted_searcher_on_the_catalog(monkeypatch: pytest.MonkeyPatch, tether_home: Path) -> None:
    from tether.knowledge import HashingEmbedder, KnowledgeBase, KnowledgeTools

    monkeypatch.chdir(Path(__file__).resolve().parents[2] / "examples")
    kb = KnowledgeBase.open(embedder=HashingEmbedder(), name="catalog")
    kb.add_path("catalog")
    state = RunState()
    r = run_sync(
        Agent("scripted/searcher", extensions=[KnowledgeTools(kb)], middleware=[LoopGuard()]),
        "What are the FVAM-2050-B seals made of?",
        state=state,
    )
    out = results(state)
    assert r.status == "failed" and sum(m.status == "ok" for m in out) == 5
    # Each answer echoes its own query, the passages are the same: "barely changed", in words.
    assert "nearly the same query 3 times" in out[2].text and "the results barely changed" in out[2].text


# -- with the per-tool limits -------------------------------------------------------------------


def test_with_a_per_tool_limit_that_spares_search_both_work() -> None:
    def fn(messages: list[Message], request: Any) -> Any:  # a ping and a search every turn
        t = turn_of(messages)
        return Reply(calls=((f"p{t}", "ping", {"n": t}), (f"s{t}", "search_kb", {"query": SEARCHER_QUERIES[t]})))

    s = Searches()
    limit = ToolCallLimitPerTurn(limit=3, always_on=frozenset({"search_kb"}))
    r, state = run(FunctionModel(fn), [s.tool, ping], [limit, LoopGuard()])
    pings = results(state, "ping")
    assert [m.status for m in pings] == ["ok"] * 3 + ["error"] * (len(pings) - 3)
    assert "its limit" in pings[3].text  # the limit still answers in words
    assert r.status == "failed" and r.reason.startswith("stopped a loop: search_kb") and len(s.queries) == 5


@pytest.mark.parametrize("order", ["limit first", "guard first"])
def test_with_a_per_tool_limit_on_search_both_work(order: str) -> None:
    s = Searches()
    limit, guard = ToolCallLimitPerTurn(limit=3), LoopGuard()
    r, state = run("scripted/searcher", [s.tool], [limit, guard] if order == "limit first" else [guard, limit])
    out = results(state)
    assert len(s.queries) == 3  # the limit let three run ...
    assert all("its limit" in m.text for m in out[3:5])  # ... and refused the next, in words
    assert NUDGE in out[2].text and NUDGE in out[4].text  # the guard nudged, whichever came first
    assert r.status == "failed" and r.reason.startswith("stopped a loop: search_kb was called 5 times")
    assert r.reason in out[-1].text


# -- after the stop -----------------------------------------------------------------------------


def test_after_the_stop_resume_is_refused_and_a_new_message_starts_over() -> None:
    s = Searches()
    agent = Agent("scripted/searcher", tools=[s.tool], middleware=[LoopGuard()])
    state = RunState()
    assert run_sync(agent, "What are the FVAM-2050-B seals made of?", state=state).status == "failed"
    with pytest.raises(UserError, match="already ended"):
        run_sync(agent, state=state)
    before = len(results(state))
    r = run_sync(agent, "Search once more, please.", state=state)  # the person spoke: a new count
    assert_pairing(state.messages)
    new = results(state)[before:]
    # Counted with the earlier calls, the first new search would have been stopped at once.
    assert new[0].status == "ok" and NUDGE not in new[0].text and NUDGE not in new[1].text
    assert any(NUDGE in m.text for m in new)  # ... and it is nudged again, then stopped again
    assert r.status == "failed" and new[-1].text.startswith(STOPPED)
