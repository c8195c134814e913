"""The run's governance against a misbehaving model, attacked from outside (session 14): typed
answers, the loop guard and the governors.

* A pydantic model that refers to itself (a tree, a thread of replies) was refused as an
  ``output_type``: "the output schema must describe a JSON object". Its JSON Schema's root is a
  reference into ``$defs`` (pydantic writes it so); the definition it points to now stands at the
  root, so both wires get the object they need, and a JSON Schema dict written the same way works
  too.
* A correction of a typed answer (a user message tether writes) was taken for a new message from
  the person: it started the governors', the loop guard's and the per-turn limits' windows again,
  so a model that gave its status report in prose got its tools back (and 40 more rounds), a model
  searching in circles was counted from zero, and ``completed_turns="answers"`` hid the request's
  tool results from the retry.
* The same call many times side by side in one reply (a batch of parallel calls) all ran: the
  guard's stop waits for an earlier alike call that carries its note, and a batch is judged before
  any of its calls has a result. One after another, the fifth was not run; side by side now too.
* A governor's reason replaced the loop's: a status report with no text, a refusal, or a report
  cut at max_tokens ended "the answer is the model's status report" as if it were whole.
* The continuation of a cut status report carried the governor's "write your answer now as a
  status report" after "go on from where it stopped": a model that did what it read last wrote a
  new report after the cut one.
* A typed answer with words around a valid object ("Here is the report:" and a fenced object) was
  told 'the answer is not valid JSON: Expecting value at line 1 column 1'; it is told what stands
  around the object now.
* A reworded query inside an object or a list (``{"q": {"text": ...}}``) was compared as a whole
  JSON value, never alike: the rewordings the guard stops at the top level ran on unnoticed.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from pydantic import BaseModel

from tests.conftest import assert_pairing
from tether import Agent, RunState, run_sync, tool
from tether.harness.governors import Governor
from tether.harness.loop_guard import LoopGuard
from tether.messages import AssistantMessage, Message, TextPart, ToolMessage, UserMessage, text_of
from tether.providers.anthropic import answer_tool
from tether.providers.base import ModelRequest
from tether.providers.openai_chat import response_format
from tether.status import EMPTY_ANSWER
from tether.testing import FunctionModel, Reply

# -- 1. a typed answer that refers to itself ---------------------------------------------------


class Node(BaseModel):
    name: str
    children: list[Node]


NODE_SCHEMA: dict[str, Any] = {
    "$defs": {
        "node": {
            "type": "object",
            "properties": {
                "name": {"type": "string"},
                "children": {"type": "array", "items": {"$ref": "#/$defs/node"}},
            },
            "required": ["name", "children"],
        }
    },
    "$ref": "#/$defs/node",
    "title": "Tree",
}


def test_a_typed_answer_that_refers_to_itself_is_asked_for_and_validated() -> None:
    sent: list[ModelRequest] = []

    def model(messages: list[Message], request: ModelRequest) -> str:
        sent.append(request)
        if len(sent) == 1:
            return '{"name": "root", "children": [{"name": "leaf", "children": "none"}]}'
        return '{"name": "root", "children": [{"name": "leaf", "children": []}]}'

    for output_type in (Node, NODE_SCHEMA):
        sent.clear()
        # Before: ConfigError, 'the output schema must describe a JSON object ("type": "object")'.
        result = run_sync(Agent(FunctionModel(model), output_type=output_type), "the tree, please")
        assert result.status == "completed" and result.typed, result.reason
        leaf = result.output.children[0] if output_type is Node else result.output["children"][0]
        assert (leaf.name if output_type is Node else leaf["name"]) == "leaf"
        assert len(sent) == 2  # the wrong shape deep in the tree was corrected
        schema = sent[0].output_schema
        assert schema is not None and schema.schema["type"] == "object" and "$ref" not in schema.schema
        fmt = response_format(schema)["json_schema"]
        assert fmt["strict"] is True  # every field required: strict mode takes it, references and all
        assert fmt["schema"]["$defs"] and answer_tool(schema)["input_schema"]["type"] == "object"


# -- 2. a correction of a typed answer is tether speaking, not the person -----------------------


class Report(BaseModel):
    summary: str
    files: int


@tool(read_only=True)
def ls(path: str) -> str:
    """List a directory."""
    return f"{path}: a.txt b.txt"


def _wanderer(offered: list[bool]) -> FunctionModel:
    """Lists a new directory whenever tools are offered; asked without them, answers in prose the
    first time (a status report in words, as asked) and in JSON after."""

    def reply(messages: list[Message], request: ModelRequest) -> Reply | str:
        offered.append(bool(request.tools))
        if request.tools:
            return Reply(calls=((f"c{len(offered)}", "ls", {"path": f"dir{len(offered)}"}),))
        if offered.count(False) == 1:
            return "I listed three directories and found two files in each."
        return '{"summary": "listed three directories", "files": 6}'

    return FunctionModel(reply)


def test_a_correction_does_not_give_back_the_tools_a_governor_withdrew() -> None:
    offered: list[bool] = []
    agent = Agent(_wanderer(offered), tools=[ls], middleware=[Governor(max_tool_rounds=3)], output_type=Report)
    result = run_sync(agent, "what is here?")
    assert result.status == "completed", result.reason
    assert result.reason == "3 tool rounds (limit 3); the answer is the model's status report"
    assert result.output == Report(summary="listed three directories", files=6)
    # Before: the correction started the windows again as if the person had written: tools came
    # back (three more rounds, another status report) [True, True, True, False, True, True, True, False].
    assert offered == [True, True, True, False, False]
    assert result.tool_stats["ls"]["calls"] == 3


def test_a_correction_does_not_start_the_loop_guards_count_again() -> None:
    searches: list[str] = []

    @tool(read_only=True)
    def search(query: str) -> str:
        """Search the catalog."""
        searches.append(query)
        return "FVAM-2050-B: a ball valve"

    def reply(messages: list[Message], request: ModelRequest) -> Reply | str:
        done = sum(isinstance(m, ToolMessage) for m in messages)
        if done in (4, 9) and not isinstance(messages[-1], UserMessage):  # an answer in prose
            return "The seals are probably PTFE."
        return Reply(calls=((f"s{done}", "search", {"query": "FVAM-2050-B seal material"}),))

    agent = Agent(
        FunctionModel(reply), tools=[search], middleware=[LoopGuard()], output_type=Report, dedupe_read_only=False
    )
    result = run_sync(agent, "What are the FVAM-2050-B seals made of?")
    # Before: the count began again after the correction: four more searches, then a second
    # prose answer; 'failed ... did not match the output schema' after 8 searches.
    assert result.status == "failed" and (result.reason or "").startswith("stopped a loop: search was called 5 times")
    assert len(searches) == 4


def test_a_correction_keeps_the_requests_tool_results_in_view() -> None:
    """``completed_turns="answers"`` shows a finished request as its prompt and its answer: a
    correction was taken for a new request, and the model lost the results it had gathered."""
    seen: list[list[Message]] = []

    def reply(messages: list[Message], request: ModelRequest) -> Reply | str:
        seen.append(messages)
        if len(seen) == 1:
            return Reply(calls=(("c1", "ls", {"path": "logs"}),))
        return "two files" if len(seen) == 2 else '{"summary": "two files", "files": 2}'

    agent = Agent(FunctionModel(reply), tools=[ls], output_type=Report, completed_turns="answers")
    result = run_sync(agent, "what is in logs?")
    assert result.status == "completed" and result.output == Report(summary="two files", files=2)
    assert any(isinstance(m, ToolMessage) and "a.txt b.txt" in m.text for m in seen[2])  # before: gone


# -- 3. the same call again and again within one reply, side by side ----------------------------


def test_the_same_call_many_times_in_one_parallel_batch_is_stopped_at_the_fifth() -> None:
    """Eight identical calls of a tool that runs side by side, in one reply: the guard judges a
    batch before any of its calls has a result, so no earlier call carried a note yet, and the
    stop (which waits for one) never came: all eight ran. Calls one after another in a reply were
    stopped at the fifth; side by side they are now too, the third and fourth carrying the note."""
    sent: list[str] = []

    @tool(parallel=True)
    async def page(who: str) -> str:
        """Page someone."""
        sent.append(who)
        return f"paged {who}"

    def reply(messages: list[Message], request: ModelRequest) -> Reply | str:
        if any(isinstance(m, ToolMessage) for m in messages):
            return "done"
        return Reply(calls=tuple((f"c{i}", "page", {"who": "oncall"}) for i in range(8)))

    state = RunState()
    result = run_sync(Agent(FunctionModel(reply), tools=[page], middleware=[LoopGuard()]), "page oncall", state=state)
    assert result.status == "failed", result.reason  # before: completed, eight pages sent
    assert (result.reason or "").startswith("stopped a loop: page was called 5 times with the same arguments")
    assert sent == ["oncall"] * 4
    results = [m for m in state.messages if isinstance(m, ToolMessage)]
    assert [m.text.startswith("Not run: stopped a loop") for m in results] == [False] * 4 + [True] * 4
    assert ["Loop check" in m.text for m in results[:4]] == [False, False, True, True]
    assert_pairing(state.messages)


# -- 4. what the run says about a status report that is not one ---------------------------------


@pytest.mark.parametrize(
    ("report", "said"),
    [
        (AssistantMessage(content=(), finish_reason="stop"), "asked for a status report, " + EMPTY_ANSWER),
        (
            AssistantMessage(content=(TextPart(text="I cannot help with that."),), finish_reason="refusal"),
            "the answer is the model's status report (the model refused to answer)",
        ),
        (
            AssistantMessage(content=(TextPart(text="I listed d1, d2 and"),), finish_reason="length"),
            "the answer is the model's status report (it reached max_tokens and was cut)",
        ),
    ],
)
def test_a_status_report_that_is_empty_refused_or_cut_says_so(report: AssistantMessage, said: str) -> None:
    """The governor's reason took the place of the loop's: a report with no text, a refusal, or
    a report cut at max_tokens (continue_cut_text off) ended 'the answer is the model's status
    report' as if the report were whole."""

    def reply(messages: list[Message], request: ModelRequest) -> Reply | AssistantMessage:
        if request.tools:
            return Reply(calls=((f"c{len(messages)}", "ls", {"path": f"d{len(messages)}"}),))
        return report

    agent = Agent(FunctionModel(reply), tools=[ls], middleware=[Governor(max_tool_rounds=2)], continue_cut_text=False)
    result = run_sync(agent, "what is here?")
    assert result.status == "completed"
    assert result.reason == f"2 tool rounds (limit 2); {said}"


# -- 5. a cut status report is continued, not asked for again ------------------------------------


def test_a_cut_status_report_is_continued_not_written_again() -> None:
    """The continuation of a cut reply carries one instruction: go on from where it stopped. The
    governor added its own after it (at the limit: "write your answer now as a status report"),
    and a model that follows the latest instruction wrote a new report: the answer was the cut
    one and a second one after it, run together."""
    CUT = "Status: I listed d0, d1 and d2; each holds a.txt. What is left is to"
    last_words: list[str] = []

    def reply(messages: list[Message], request: ModelRequest) -> Reply | AssistantMessage:
        if request.tools:
            n = sum(isinstance(m, ToolMessage) for m in messages)
            return Reply(calls=((f"c{n}", "ls", {"path": f"d{n}"}),))
        last_words.append(text_of([messages[-1]]))
        if len(last_words) == 1:
            return AssistantMessage(content=(TextPart(text=CUT),), finish_reason="length")
        if "status report" in last_words[-1]:  # a model that does what it read last: a new report
            return AssistantMessage(
                content=(TextPart(text="Done: three listings. Left: reading."),), finish_reason="stop"
            )
        return AssistantMessage(content=(TextPart(text=" read a.txt."),), finish_reason="stop")

    agent = Agent(FunctionModel(reply), tools=[ls], middleware=[Governor(max_tool_rounds=3)])
    result = run_sync(agent, "what is here?")
    assert result.status == "completed" and result.turns == 5
    assert result.reason == "3 tool rounds (limit 3); the answer is the model's status report"
    assert "Continue it from exactly where it stopped" in last_words[1]  # before: the report request
    assert result.text == CUT + " read a.txt."  # before: CUT + "Done: three listings. Left: reading."


# -- 6. a JSON answer with words around it is told so --------------------------------------------


def test_a_json_answer_with_words_around_it_is_told_what_to_cut() -> None:
    """A model asked for JSON in words often writes "Here is the report:" and a fenced object.
    The correction (and a failed run's reason) said 'the answer is not valid JSON: Expecting value
    at line 1 column 1', which reads as if the object were wrong; it now says what stands around
    it."""
    good = '{"summary": "two files", "files": 2}'
    told: list[str] = []

    def reply(messages: list[Message], request: ModelRequest) -> str:
        if isinstance(messages[-1], UserMessage) and len(messages) > 1:
            told.append(text_of([messages[-1]]))
            return good if "before it ('Here is the report:" in told[-1] else "Here is the report: " + good
        return f"Here is the report:\n```json\n{good}\n```\nHope this helps!"

    result = run_sync(Agent(FunctionModel(reply), output_type=Report), "what is in logs?")
    assert result.status == "completed" and result.output == Report(summary="two files", files=2)
    assert len(told) == 1
    assert "text around its JSON object: before it ('Here is the report:" in told[0]
    assert "after it ('```\\nHope this helps!')" in told[0]
    result = run_sync(Agent(FunctionModel(lambda m, r: "Sure! " + good), output_type=Report, output_retries=0), "?")
    assert result.status == "failed"
    assert (result.reason or "").endswith(
        "the answer has text around its JSON object: before it ('Sure! '): send the JSON object alone"
    )


# -- 7. rewordings inside an object or a list are rewordings ------------------------------------


QUERIES = [
    "what are the FVAM-2050-B seals made of",
    "FVAM-2050-B seal material",
    "material of the FVAM-2050-B seals",
    "FVAM-2050-B seals material composition",
    "FVAM-2050-B seal made of what material",
    "FVAM-2050-B sealing material",
]


@pytest.mark.parametrize("shape", ["top", "object", "list"])
def test_reworded_queries_inside_an_object_or_a_list_are_stopped_as_at_the_top(shape: str) -> None:
    """A search tool whose query sits in an object (``{"q": {"text": ...}}``, as many MCP tools
    take it) or a list: the same rewordings that were stopped at the top level were compared as
    whole JSON values there, never alike: not one was nudged, and a model that kept rewording ran
    on to the governors' limits (20 rounds of searching)."""
    ran: list[str] = []

    @tool(read_only=True)
    def find(q: Any) -> str:
        """Search the catalog."""
        ran.append(json.dumps(q))
        return "FVAM-2050-B: ball valve, PTFE seats"

    def wrap(text: str) -> Any:
        return {"top": text, "object": {"text": text, "limit": 5}, "list": [text]}[shape]

    def reply(messages: list[Message], request: ModelRequest) -> Reply | str:
        n = sum(isinstance(m, ToolMessage) for m in messages)
        if n == len(QUERIES):
            return "I could not find the seal material."
        return Reply(calls=((f"s{n}", "find", {"q": wrap(QUERIES[n])}),))

    result = run_sync(Agent(FunctionModel(reply), tools=[find], middleware=[LoopGuard()]), "seal material?")
    assert result.status == "failed", result.reason  # before, in an object or a list: completed, six searches
    assert (result.reason or "").startswith("stopped a loop: find was called 5 times with nearly the same")
    assert len(ran) == 4
