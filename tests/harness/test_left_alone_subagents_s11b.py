"""Sub-agents' leftovers: a configuration error inside a sub-agent, the words a call stopped after
it started gets, and a child's own run among the runs a person lists and resumes."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.cli.conftest import run_main
from tests.conftest import assert_pairing
from tether import Agent, RunState, RunStore, run_sync, tool
from tether.errors import ConfigError
from tether.harness.agent import Stop
from tether.harness.context import RunContext
from tether.harness.extension import Extension
from tether.harness.middleware import Middleware
from tether.harness.subagent import children, parent_in_header
from tether.messages import Message, ToolCallPart, ToolMessage
from tether.providers.base import ModelRequest
from tether.testing import FunctionModel, Reply

SECRET = "sk-tracker-0123456789abcdef0123"


def _results(messages: list[Message]) -> list[ToolMessage]:
    return [m for m in messages if isinstance(m, ToolMessage)]


@tool(read_only=True)
def tracker(query: str) -> str:
    """Search the issue tracker."""
    raise ConfigError(f"TRACKER_TOKEN is {SECRET} and expired: set a new one in config.toml")


def _caller(name: str, args: dict[str, Any], asked: list[int]) -> FunctionModel:
    """A model that calls ``name`` as long as it gets errors back (it retries), three times at
    most, then answers around it."""

    def fn(messages: list[Message], request: ModelRequest) -> Reply | str:
        asked.append(1)
        results = _results(messages)
        if len(results) < 3:
            return Reply(calls=((f"c{len(results)}", name, args),))
        return f"worked around it: {results[-1].text}"

    return FunctionModel(fn)


def test_a_configuration_error_inside_a_sub_agent_ends_its_parent_failed_naming_the_sub_agent_and_tool(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Before: only the child failed; its parent's model got the call's error ("stopped without
    finishing ... carry on without it") and started the sub-agent again, twice, then answered
    around a problem only a person can fix. Now the parent's run ends failed too, saying which
    sub-agent's which tool is not configured right and what to change, its model not asked again;
    the key's value is in no reason and no result."""
    monkeypatch.setenv("TRACKER_TOKEN", SECRET)
    child_asked: list[int] = []
    child = Agent(_caller("tracker", {"query": "open"}, child_asked), tools=[tracker])
    lead_asked: list[int] = []
    parent = Agent(
        _caller("triage", {"task": "find open issues"}, lead_asked), tools=[child.as_tool("triage", "Triage.")]
    )
    state = RunState()
    result = run_sync(parent, "what is open?", state=state)
    assert result.status == "failed", result.reason
    assert result.reason is not None
    assert result.reason.startswith("the sub-agent triage's tool tracker is not configured right: "), result.reason
    assert "set a new one in config.toml" in result.reason and SECRET not in result.reason
    assert lead_asked == [1] and child_asked == [1]
    (answer,) = _results(state.messages)
    assert answer.status == "error" and answer.text == f"Stopped: {result.reason}"
    assert_pairing(state.messages)


def test_two_levels_down_the_reason_names_each_sub_agent_on_the_way(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TRACKER_TOKEN", SECRET)
    inner = Agent(_caller("tracker", {"query": "open"}, []), tools=[tracker])
    middle = Agent(_caller("inner", {"task": "look"}, []), tools=[inner.as_tool("inner", "Looks.")])
    top_asked: list[int] = []
    top = Agent(_caller("middle", {"task": "look"}, top_asked), tools=[middle.as_tool("middle", "Looks.")])
    result = run_sync(top, "go", state=RunState())
    assert result.status == "failed" and top_asked == [1]
    assert result.reason is not None
    assert result.reason.startswith("the sub-agent middle's sub-agent inner's tool tracker is not configured right: ")


def test_a_sub_agent_of_a_sub_agent_that_could_not_start_ends_the_whole_tree_failed() -> None:
    """Before, a child whose own sub-agent could not start (its extension's configuration) ended
    failed, and its parent's model got a call's error and started it again. Now the top run ends
    failed, naming the way down; its model is asked once."""

    class Refuses(Extension):
        name = "refuses"

        async def start(self) -> None:
            raise ConfigError("[mcp.files] needs command or url: set one in config.toml")

    inner = Agent(FunctionModel(lambda m, r: "hi"), extensions=[Refuses()])
    middle = Agent(_caller("inner", {"task": "look"}, []), tools=[inner.as_tool("inner", "Looks.")])
    top_asked: list[int] = []
    top = Agent(_caller("middle", {"task": "look"}, top_asked), tools=[middle.as_tool("middle", "Looks.")])
    result = run_sync(top, "go", state=RunState())
    assert result.status == "failed" and top_asked == [1]
    assert result.reason == (
        "the sub-agent middle's sub-agent inner could not start: [mcp.files] needs command or url: set one in config.toml"
    )


def test_a_sub_agent_that_failed_otherwise_still_goes_to_its_parent_s_model() -> None:
    """Only a configuration error stops the parent: a child that failed for its own reasons is the
    parent model's to work around, as before."""

    @tool(read_only=True)
    def flaky(query: str) -> str:
        """Search."""
        raise RuntimeError("the index is rebuilding")

    child = Agent(_caller("flaky", {"query": "x"}, []), tools=[flaky], tool_errors_are_fatal=True)
    lead_asked: list[int] = []
    parent = Agent(_caller("helper", {"task": "search"}, lead_asked), tools=[child.as_tool("helper", "Helps.")])
    result = run_sync(parent, "go", state=RunState())
    assert result.status == "completed" and len(lead_asked) == 4
    assert "stopped without finishing (failed: tool flaky failed" in str(result.output)


# --------------------------------------------------------------------------- "Not run" or "Stopped"


def test_a_call_stopped_after_its_tool_started_is_not_said_not_to_have_run(monkeypatch: pytest.MonkeyPatch) -> None:
    """Before, a tool that raised ConfigError had the result "Not run: the tool ... is not
    configured right", though it had started (and may have done part of its work). Now it says
    "Stopped: ..."; a call a middleware stops before it starts still says "Not run: ..."."""
    monkeypatch.setenv("TRACKER_TOKEN", SECRET)
    state = RunState()
    result = run_sync(Agent(_caller("tracker", {"query": "open"}, []), tools=[tracker]), "go", state=state)
    (answer,) = _results(state.messages)
    assert answer.text == f"Stopped: {result.reason}"

    class Refuse(Middleware):
        async def before_tool_call(self, ctx: RunContext, call: ToolCallPart, args: dict[str, Any]) -> Stop | None:
            return Stop("failed", "tracker calls are off today")

    state = RunState()
    agent = Agent(_caller("tracker", {"query": "open"}, []), tools=[tracker], middleware=[Refuse()])
    result = run_sync(agent, "go", state=state)
    (answer,) = _results(state.messages)
    assert result.status == "failed" and answer.text == "Not run: tracker calls are off today"


# --------------------------------------------------------------------------- a child's own run among the runs


def _family(home: Path) -> tuple[str, str, str]:
    """Under ``home``: a plain run, then a run whose sub-agent stopped for a person (the child's
    run saved as one of its own, the newest, interrupted with its parent). Their ids: parent,
    child, plain."""
    runs = RunStore(home / "runs")
    plain = RunState()
    assert run_sync(Agent(FunctionModel(lambda m, r: "hi")), "hello", state=plain, store=runs).status == "completed"

    @tool(needs_approval=True)
    def deploy(target: str) -> str:
        """Deploy."""
        return "deployed"

    child = Agent(_caller("deploy", {"target": "prod"}, []), tools=[deploy])
    parent = RunState()
    lead = Agent(_caller("ops", {"task": "deploy"}, []), tools=[child.as_tool("ops", "Ops.")])
    assert run_sync(lead, "ship it", state=parent, store=runs).status == "interrupted"
    (record,) = children(parent).values()
    return parent.run_id, str(record["run_id"]), plain.run_id


def test_tether_runs_lists_a_sub_agent_s_run_under_its_parent_only_with_all(
    tether_home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Before, a child's own run was listed beside the runs a person started, as a run of its own
    with "(no prompt recorded)", and `tether show` (last) could show it. Now `tether runs` lists
    the runs a person started and says how many sub-agents' runs it left out; --all lists each
    under its parent, indented and naming it; --json says each row's parent; `last` is never a
    child's run. RunStore.list() still gives every header (parent_in_header tells them apart)."""
    parent, child, plain = _family(tether_home)
    assert {parent_in_header(h) for h in RunStore(tether_home / "runs").list()} == {None, parent}
    code, out, err = run_main("runs", capsys=capsys)
    assert code == 0 and child not in out
    assert [line.split()[0] for line in out.splitlines()[1:]] == [parent, plain]
    assert "1 sub-agent run not listed; --all shows each under its parent" in err
    code, out, err = run_main("runs", "--all", capsys=capsys)
    lines = out.splitlines()[1:]
    assert [line.split()[0] for line in lines] == [parent, child, plain]
    assert lines[1].startswith(f"  {child}") and f"(sub-agent of run {parent})" in lines[1]
    assert "not listed" not in err
    code, out, err = run_main("runs", "--all", "--json", capsys=capsys)
    assert [(r["run_id"], r["parent_run_id"]) for r in json.loads(out)] == [
        (parent, None),
        (child, parent),
        (plain, None),
    ]
    code, out, err = run_main("runs", "--json", capsys=capsys)
    assert [r["run_id"] for r in json.loads(out)] == [parent, plain]
    # The child's run is the newest: `last` is the newest run a person started.
    code, out, err = run_main("show", capsys=capsys)
    assert code == 0 and out.startswith(f"run {parent}:")


def test_tether_resume_of_a_sub_agent_s_run_refuses_naming_the_run_to_resume(
    tether_home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Before, `tether resume CHILD` tried to resume the child alone (its answer would reach no
    parent, its spending no parent's budget). Now it is refused, naming the parent's run and the
    command that resumes the child with it; nothing is run and both runs are as they were."""
    parent, child, _ = _family(tether_home)
    runs = RunStore(tether_home / "runs")
    before = (runs.load(parent).model_dump(), runs.load(child).model_dump())
    code, _, err = run_main("resume", child, "--approve", capsys=capsys)
    assert code == 2, err
    assert f"run {child} is a sub-agent's run, started by call c0 of run {parent}" in err
    assert f"`tether resume {parent}`" in err
    fresh = RunStore(tether_home / "runs")
    assert (fresh.load(parent).model_dump(), fresh.load(child).model_dump()) == before
    # `tether show CHILD` says whose it is, and no longer tells the person to resume it alone.
    code, out, _ = run_main("show", child, capsys=capsys)
    assert code == 0 and f"a sub-agent's run, started by call c0 of run {parent}" in out
    assert f"tether resume {child}" not in out and f"next: tether show {parent}" in out
