"""Left alone before session twelve: a misconfigured sub-agent told from its parent by the kind of
its stop (data), not by the words of its reason; a provider that under-reports the prompt; a child
run's id given to the server's run routes."""

from __future__ import annotations

import json
from typing import Any, ClassVar

import pytest

from tests.conftest import assert_pairing
from tether import Agent, RunState, run_sync, tool
from tether.errors import ConfigError
from tether.harness.agent import Stop
from tether.harness.subagent import children
from tether.messages import AssistantMessage, Message, TextPart, ToolCallPart, ToolMessage, UserMessage
from tether.providers.base import ModelRequest
from tether.status import Misconfiguration
from tether.testing import FunctionModel, Reply
from tether.tools.base import ToolContext

# --------------------------------------------------------------------------- a misconfigured child, as data

SECRET = "sk-tracker-0123456789abcdef0123"


def _results(messages: list[Message]) -> list[ToolMessage]:
    return [m for m in messages if isinstance(m, ToolMessage)]


def _caller(name: str, args: dict[str, Any], asked: list[int]) -> FunctionModel:
    """Calls ``name`` as long as it gets errors back (a model that retries), three times at most,
    then answers with the last result."""

    def fn(messages: list[Message], request: ModelRequest) -> Reply | str:
        asked.append(1)
        results = _results(messages)
        if len(results) < 3:
            return Reply(calls=((f"c{len(results)}", name, args),))
        return f"worked around it: {results[-1].text}"

    return FunctionModel(fn)


@tool(read_only=True)
def tracker(query: str) -> str:
    """Search the issue tracker."""
    raise ConfigError(f"TRACKER_TOKEN is {SECRET} and expired: set a new one in config.toml")


class Window:
    """Whether deploys are open on ``day``: a policy that stops the run on a Friday (a tool may
    return a Stop)."""

    name, description = "window", "Whether deploys are open on a day."
    input_schema: ClassVar[dict[str, Any]] = {"type": "object", "properties": {"day": {"type": "string"}}}
    read_only, needs_approval = True, False

    async def execute(self, input: dict[str, Any], ctx: ToolContext) -> Stop:
        return Stop("failed", "the deploy window is not configured right: no deploys on a Friday")


def _lead(tools: list[Any], asked: list[int]) -> Agent:
    return Agent(_caller("helper", {"task": "do it"}, asked), tools=tools)


def test_a_child_stopped_by_a_tool_whose_words_sound_misconfigured_is_the_parent_model_s_to_work_around() -> None:
    """The child's tool ends its run with its own Stop, whose reason happens to read 'the ... is not
    configured right: ...'. Before, the parent took those words for a misconfiguration and ended
    failed ('the sub-agent helper's deploy window is not configured right'), its model never told.
    Now only a stop that is one (a ConfigError) ends the parent: this is a call's error its model
    reads and works around."""
    child = Agent(_caller("window", {"day": "friday"}, []), tools=[Window()])
    asked: list[int] = []
    state = RunState()
    result = run_sync(_lead([child.as_tool("helper", "Helps.")], asked), "deploy", state=state)
    assert result.status == "completed", result.reason
    assert result.misconfiguration is None and len(asked) == 4
    assert "stopped without finishing (failed: the deploy window is not configured right" in str(result.output)
    assert_pairing(state.messages)


def test_a_child_whose_stop_condition_words_sound_like_a_start_failure_does_not_fail_its_parent() -> None:
    """The same for the other words: a stop condition's 'the sub-agent x could not start: ...' in a
    child was taken for its own sub-agent's failed start, and failed the parent."""
    child = Agent(
        FunctionModel(lambda m, r: "child answer"),
        stop_when=[lambda steps: Stop("failed", "the sub-agent x could not start: the queue is full")],
    )
    asked: list[int] = []
    result = run_sync(_lead([child.as_tool("helper", "Helps.")], asked), "go")
    assert result.status == "completed", result.reason
    assert len(asked) == 4 and result.misconfiguration is None


def test_a_child_s_configuration_error_is_kept_as_data_in_the_child_and_its_parent(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """What ended each run is data beside the words: the child's state and result say its tool
    ``tracker`` is not configured right and why (no key in it); the parent's say the sub-agent's
    tool is; its model was asked once."""
    monkeypatch.setenv("TRACKER_TOKEN", SECRET)
    child = Agent(_caller("tracker", {"query": "open"}, []), tools=[tracker])
    asked: list[int] = []
    state = RunState()
    result = run_sync(_lead([child.as_tool("helper", "Helps.")], asked), "what is open?", state=state)
    assert result.status == "failed" and asked == [1]
    wrong = result.misconfiguration
    assert wrong is not None and wrong.what == "sub-agent helper's tool tracker" and wrong.started
    assert "set a new one in config.toml" in wrong.why and SECRET not in wrong.why
    assert state.misconfiguration == wrong and result.reason == wrong.reason
    (record,) = children(state).values()
    kept = record["misconfiguration"]
    assert kept["what"] == "tool tracker" and SECRET not in json.dumps(record)
    # saved and loaded again, the parent still says so
    assert RunState.model_validate_json(state.model_dump_json()).misconfiguration == wrong


def test_the_parent_reads_the_kind_of_stop_not_its_words(monkeypatch: pytest.MonkeyPatch) -> None:
    """Reword the reason (another language, a clearer sentence) and a misconfigured child still
    ends its parent failed: nothing reads the words back."""
    monkeypatch.setenv("TRACKER_TOKEN", SECRET)
    monkeypatch.setattr(Misconfiguration, "NOT_CONFIGURED", " needs a person to fix its settings: ")
    child = Agent(_caller("tracker", {"query": "open"}, []), tools=[tracker])
    asked: list[int] = []
    result = run_sync(_lead([child.as_tool("helper", "Helps.")], asked), "go")
    assert result.status == "failed" and asked == [1]
    assert result.reason is not None
    assert result.reason.startswith("the sub-agent helper's tool tracker needs a person to fix its settings: ")


def _older_parent(record: dict[str, Any]) -> RunState:
    """A parent saved before the kind of stop was data: its call to ``helper`` pending, the child's
    answer kept (finished before a crash), with no ``misconfiguration`` key."""
    call = ToolCallPart(id="c0", name="helper", arguments=json.dumps({"task": "do it"}))
    state = RunState.model_validate(
        {
            "status": "running",
            "messages": [
                UserMessage(content=(TextPart(text="go"),)).model_dump(mode="json"),
                AssistantMessage(content=(call,), finish_reason="tool_calls").model_dump(mode="json"),
            ],
        }
    )
    children(state)["c0"] = {"done": True, "run_id": "run_child", "parent_turn": 1, "output": None, **record}
    return state


@pytest.mark.parametrize(
    ("reason", "expected"),
    [
        (
            "the tool tracker is not configured right: set TRACKER_TOKEN",
            "the sub-agent helper's tool tracker is not configured right: set TRACKER_TOKEN",
        ),
        (
            "the sub-agent inner could not start: [mcp.files] needs command or url",
            "the sub-agent helper's sub-agent inner could not start: [mcp.files] needs command or url",
        ),
    ],
)
def test_an_older_saved_parent_s_kept_child_answer_is_still_read_as_then(reason: str, expected: str) -> None:
    """A run saved by an earlier tether resumes as it would have: its kept record has only words."""
    asked: list[int] = []
    state = _older_parent({"status": "failed", "reason": reason})
    child = Agent(FunctionModel(lambda m, r: "never asked"))
    result = run_sync(_lead([child.as_tool("helper", "Helps.")], asked), None, state=state)
    assert result.status == "failed" and result.reason == expected and asked == []
    assert result.misconfiguration is not None and result.misconfiguration.reason == expected


def test_an_older_saved_failed_run_loads_with_no_misconfiguration_field() -> None:
    older = RunState().model_dump(mode="json")
    older.pop("misconfiguration")
    older |= {"status": "failed", "reason": "the tool tracker is not configured right: set it"}
    loaded = RunState.model_validate(older)
    assert loaded.status == "failed" and loaded.misconfiguration is None
    assert "misconfiguration" not in loaded.model_fields_set


def test_an_older_saved_child_state_that_ended_misconfigured_still_fails_its_parent() -> None:
    """A child saved whole in its parent's record by an earlier tether, which ended failed on its
    tool's configuration before the parent kept its answer (a crash between the two): no field
    says so, its words do, and the parent still ends failed."""
    child = RunState(status="failed", reason="the tool tracker is not configured right: set TRACKER_TOKEN")
    child.ext_state("subagents")["parent"] = {"run_id": "run_parent", "call_id": "c0", "depth": 1, "turn": 1}
    saved = child.model_dump(mode="json")
    saved.pop("misconfiguration")
    state = _older_parent({})
    children(state)["c0"] = saved
    asked: list[int] = []
    worker = Agent(FunctionModel(lambda m, r: "never asked"))
    result = run_sync(_lead([worker.as_tool("helper", "Helps.")], asked), None, state=state)
    assert result.status == "failed" and asked == []
    assert result.reason == "the sub-agent helper's tool tracker is not configured right: set TRACKER_TOKEN"
