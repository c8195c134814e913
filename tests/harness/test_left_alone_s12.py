"""Left alone before session twelve: a misconfigured sub-agent told from its parent by the kind of
its stop (data), not by the words of its reason; a provider that under-reports the prompt; a child
run's id given to the server's run routes."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import Any, ClassVar

import pytest

from tests.conftest import assert_pairing
from tests.harness.test_left_alone_subagents_s11b import _caller
from tests.server.conftest import read_events, served, wait_until  # noqa: F401 (served: a fixture)
from tether import Agent, RunState, run_sync, tool
from tether.errors import ConfigError
from tether.harness.agent import Stop
from tether.harness.subagent import children
from tether.messages import AssistantMessage, TextPart, ToolCallPart, UserMessage
from tether.providers.openai_chat import OpenAIChatProvider
from tether.providers.scripted import count_prompt_tokens
from tether.status import Misconfiguration
from tether.testing import FunctionModel, ScriptedServer
from tether.tools.base import ToolContext
from tether.tools.files import FILE_TOOLS
from tether.usage import Price, Usage

# --------------------------------------------------------------------------- a misconfigured child, as data

SECRET = "sk-tracker-0123456789abcdef0123"


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


# --------------------------------------------------------------------------- a prompt under-reported

PRICE = Price(input=10.0, output=10.0)  # dollars per million tokens


def _reader_agent(workspace: Path, server: ScriptedServer, budget: float) -> Agent:
    """The scripted ``reader`` (reads a 10 KB log, and two other files, in turn, for ever) behind
    a real OpenAI-compatible server on loopback, priced, with a budget."""
    (workspace / "big.log").write_text("".join(f"{i:05d} INFO request served in {i % 97} ms\n" for i in range(300)))
    (workspace / "notes-zh.txt").write_text("日志轮换每天进行一次，旧文件压缩后保留三十天。" * 40)
    (workspace / "errors.log").write_text("ERROR worker 3 timed out after 30000 ms\n" * 50)
    provider = OpenAIChatProvider(base_url=server.base_url, api_key="unused")
    provider.model_id = "reader"  # type: ignore[attr-defined]
    return Agent(
        provider,
        tools=FILE_TOOLS,
        cwd=workspace,
        price=PRICE,
        max_budget_usd=budget,
        max_turns=25,
        compaction=False,
        dedupe_read_only=False,
    )


def _true_cost(server: ScriptedServer, state: RunState) -> float:
    """What the requests cost as the server counts their prompts (not as it reported them), with
    the replies' own counts."""
    bodies = [b for p, b, _ in server.received if p.endswith("/chat/completions")]
    prompts = sum(count_prompt_tokens(b["messages"], b.get("tools") or ()) for b in bodies)
    replies = [m for m in state.messages if isinstance(m, AssistantMessage)]
    completions = sum(m.usage.completion_tokens for m in replies if m.usage is not None)
    assert len(bodies) == len(replies)  # every request has its reply: none lost, none retried
    return PRICE.cost(Usage(prompt_tokens=prompts, completion_tokens=completions))


def test_a_server_that_reports_every_prompt_as_one_token_cannot_take_the_run_past_its_budget(
    tmp_path: Path,
) -> None:
    """Before: each reply said its prompt was 1 token, so the next call was planned from that
    count, the history it sent left out, and the run charged 1 token a prompt: it went on to its
    25 turns and spent, as the server counts, about fifty times its $0.10. Now a reported prompt
    under half of what tether counts in the request it sent is taken for one the server left out:
    the request's own count is charged (marked estimated) and plans the next call, so the run
    stops with budget_exceeded, before the call that would have gone past."""
    budget = 0.1
    with ScriptedServer(report_prompt_tokens=1) as server:
        state = RunState()
        result = run_sync(_reader_agent(tmp_path, server, budget), "Read the logs.", state=state)
        true = _true_cost(server, state)
    assert result.status == "budget_exceeded", (result.status, result.reason, true)
    assert "cannot pay for another call" in (result.reason or "")
    assert true <= budget, true
    # charged as tether counts the prompts it sent, which is within a few per cent of the server's count
    assert result.cost_usd is not None and result.cost_usd == pytest.approx(true, rel=0.05)
    replies = [m for m in state.messages if isinstance(m, AssistantMessage)]
    assert len(replies) >= 3 and all(m.usage is not None and m.usage.estimated for m in replies)


def test_an_honest_server_s_counts_are_kept() -> None:
    """The same run against a server that counts truly: its counts are charged as reported, none
    estimated, and the budget still holds."""
    budget = 0.05
    with ScriptedServer() as server, tempfile.TemporaryDirectory() as folder:
        state = RunState()
        result = run_sync(_reader_agent(Path(folder), server, budget), "Read the logs.", state=state)
        true = _true_cost(server, state)
    assert result.status == "budget_exceeded" and true <= budget
    replies = [m for m in state.messages if isinstance(m, AssistantMessage)]
    assert all(m.usage is not None and not m.usage.estimated for m in replies)
    assert result.cost_usd == pytest.approx(true)


# --------------------------------------------------------------------------- a child's run id at the server

CHILD_AGENTS = """
import os
from pathlib import Path

from tether import Agent, tool
from tether.messages import ToolMessage
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
    return "child done" if any(isinstance(m, ToolMessage) for m in messages) else call("w1", "wipe", {"path": "cache"})


def parent_reply(messages, request):
    if any(isinstance(m, ToolMessage) for m in messages):
        return "all clean"
    return call("c1", "cleaner", {"task": "clean the cache"})


child = Agent(FunctionModel(child_reply), tools=[wipe], max_turns=6)
agents = {"boss": Agent(FunctionModel(parent_reply), tools=[child.as_tool("cleaner", "Cleans up")], max_turns=6)}
"""


def test_a_child_run_s_id_is_no_run_of_its_own_at_the_server(
    served: Any,  # noqa: F811 - the fixture imported above
    tmp_path: Path,
) -> None:
    """A sub-agent's run is saved as a run of its own, but at the server only the run a person's
    message started is a run: every run route given the child's id answers 404 (no reading its
    events apart, no stop, resume or decision on it alone that its parent would not see), and the
    parent, decided on, finishes with the child's one call made once."""
    module = tmp_path / "child_agents.py"
    module.write_text(CHILD_AGENTS)
    server = served(agents_module=module)
    c = server.client()
    sid = c.post("/v1/sessions", json={}).json()["session_id"]
    run_id = c.post(f"/v1/sessions/{sid}/messages", json={"text": "clean up"}).json()["run_id"]
    read_events(c, f"/v1/runs/{run_id}/events")
    waiting = c.get(f"/v1/runs/{run_id}").json()["waiting"]
    assert waiting["type"] == "subagent" and waiting["asked"]["call_id"] == "w1"
    child = waiting["child_run_id"]
    asked = waiting["asked"]
    answers = [
        c.get(f"/v1/runs/{child}"),
        c.get(f"/v1/runs/{child}/events", headers={"Accept": "text/event-stream"}),
        c.get(f"/v1/runs/{child}/transcript"),
        c.get(f"/v1/runs/{child}/trace"),
        c.post(f"/v1/runs/{child}/cancel"),
        c.post(f"/v1/runs/{child}/resume", json={}),
        c.post(
            f"/v1/runs/{child}/decision",
            json={"call_id": asked["call_id"], "args_hash": asked["args_hash"], "approve": True},
        ),
    ]
    assert [r.status_code for r in answers] == [404] * len(answers), [r.text for r in answers]
    assert all(child in r.text for r in answers)
    assert child not in {r["run_id"] for r in c.get("/v1/runs").json()["runs"]}
    wiped = tmp_path / "workspace0" / "wiped.txt"
    assert not wiped.exists()
    decided = {"call_id": waiting["call_id"], "args_hash": waiting["args_hash"], "approve": True}
    assert c.post(f"/v1/runs/{run_id}/decision", json=decided).status_code == 202
    view = wait_until(lambda: (v := c.get(f"/v1/runs/{run_id}").json())["status"] == "completed" and v, what="the end")
    assert view["status"] == "completed" and wiped.read_text() == "cache\n"
