"""More of what a user coming from the OpenAI Agents SDK or Pydantic AI tries first: an agent's
``name`` (the first line of the OpenAI Agents SDK's quickstart), a run's limit in tokens
(Pydantic AI's ``UsageLimits``), and a message's text read alike whoever wrote it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tether import Agent, RunStore, run_sync
from tether.errors import ConfigError
from tether.harness.state import RunState
from tether.messages import ToolMessage, UserMessage
from tether.testing import FunctionModel, call
from tether.tracing import JsonlTracer, read_trace


def _env(home: Path) -> dict[str, str]:
    drop = ("LLM_BASE_URL", "OPENAI_BASE_URL", "OPENAI_API_KEY", "TETHER_SESSION_STORE", "TETHER_MODEL")
    return {**{k: v for k, v in os.environ.items() if k not in drop}, "TETHER_HOME": str(home)}


def _tether(*args: str, home: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "tether", *args], env=_env(home), capture_output=True, text=True, timeout=120
    )


# --- 1. Agent(name=...) ---------------------------------------------------------------------------


def test_the_quickstarts_named_agent_runs_and_its_runs_record_the_name(tmp_path: Path) -> None:
    """Was: Agent(name="Assistant", instructions=...), the OpenAI Agents SDK quickstart's first line,
    was a bare TypeError (unexpected keyword argument 'name'). Now the name is the agent's, and
    its runs record it: in the state, the result, and the trace's last line."""
    agent = Agent(FunctionModel(lambda messages, request: "Hello."), name="Assistant", instructions="Be brief.")
    tracer = JsonlTracer(tmp_path / "traces")
    result = run_sync(agent, "Hi", tracer=tracer)
    tracer.close()
    assert result.status == "completed" and result.agent == "Assistant"
    last = read_trace(tmp_path / "traces" / f"{result.run_id}.jsonl")[-1]
    assert last["type"] == "run_stopped" and last["agent"] == "Assistant"
    unnamed = run_sync(Agent(FunctionModel(lambda messages, request: "Hello.")), "Hi")
    assert unnamed.agent is None  # an agent with no name runs as before


def test_a_named_agents_runs_are_listed_with_its_name(tmp_path: Path) -> None:
    """Was: `tether runs` listed runs by model and prompt only: which agent ran each was not kept.
    Now a run saved from a named agent carries the name, and the listing shows it."""
    home = tmp_path / "home"
    store = RunStore(home / "runs")
    result = run_sync(
        Agent(FunctionModel(lambda messages, request: "ok"), name="billing"), "refund order 7", store=store
    )
    assert RunState.model_validate(store.load(result.run_id).model_dump()).agent == "billing"
    listing = _tether("runs", "--json", home=home)
    assert listing.returncode == 0, listing.stderr
    (row,) = json.loads(listing.stdout)
    assert row["agent"] == "billing"  # (a run made in Python records no prompt)
    table = _tether("runs", home=home)
    assert "billing: (no prompt recorded)" in table.stdout, table.stdout


def test_as_tool_takes_its_name_and_description_from_the_agent() -> None:
    """Was: as_tool(name, description) had to be given both, though the agent had a description
    and (now) a name: the OpenAI Agents SDK names the tool after the agent. Now the tool is
    named after the agent (lower case, what model APIs take) and described by it."""
    child = Agent(FunctionModel(lambda messages, request: "42"), name="Fact Checker", description="Checks a claim.")
    tool = child.as_tool()
    assert (tool.name, tool.description) == ("fact_checker", "Checks a claim.")

    def parent_model(messages: list[Any], request: Any) -> Any:
        if not any(isinstance(m, ToolMessage) for m in messages):
            assert [t.name for t in request.tools] == ["fact_checker"]
            return call("c1", "fact_checker", {"task": "is it 42?"})
        return f"checked: {[m for m in messages if isinstance(m, ToolMessage)][-1].text}"

    result = run_sync(Agent(FunctionModel(parent_model), tools=[tool]), "check it")
    assert result.output == "checked: 42", result.reason
    assert child.as_tool("other", "Another.").name == "other"  # given ones win


def test_as_tool_without_any_name_says_what_to_write() -> None:
    """Was: as_tool() with no arguments was a TypeError naming the missing parameters. An unnamed
    agent now gets a ConfigError that says to name the tool or the agent."""
    with pytest.raises(ConfigError, match=r'as_tool\("name"') as caught:
        Agent(FunctionModel(lambda messages, request: "x")).as_tool()
    assert 'Agent(..., name="researcher")' in str(caught.value)
    with pytest.raises(ConfigError, match="name is the agent's name as text"):
        run_sync(Agent(FunctionModel(lambda messages, request: "x"), name=7), "hi")  # type: ignore[arg-type]


def test_an_agent_from_config_is_named_by_its_table(tmp_path: Path) -> None:
    """Was: an agent built from [agents.NAME] (tether run --agent NAME, tether serve) had no name
    of its own, only the recipe's; served agents from a Python module had only their key. Now the
    agent carries NAME, its runs record it, and an unnamed served agent is named by its key."""
    from tether.assembly.agents import build_agent, plan, served_agents
    from tether.config import load_settings

    home = tmp_path / "home"
    home.mkdir()
    (home / "config.toml").write_text('[agents.helper]\nmodel = "scripted/plan"\ninstructions = "Help."\n')
    os.environ["TETHER_HOME"] = str(home)
    try:
        settings = load_settings()
        assert build_agent(settings, plan(settings, "helper")).name == "helper"
        assert served_agents(settings)["helper"].name == "helper"
        module = tmp_path / "agents_mod.py"
        module.write_text(
            "from tether import Agent\nfrom tether.testing import FunctionModel\n"
            "agents = {'triage': Agent(FunctionModel(lambda m, r: 'x')), "
            "'named': Agent(FunctionModel(lambda m, r: 'x'), name='Kept')}\n"
        )
        served = served_agents(settings, str(module))
        assert (served["triage"].name, served["named"].name) == ("triage", "Kept")
    finally:
        del os.environ["TETHER_HOME"]
    done = _tether("run", "--agent", "helper", "--cwd", str(tmp_path), "list the files", home=home)
    assert done.returncode == 0, done.stderr
    (row,) = json.loads(_tether("runs", "--json", home=home).stdout)
    assert row["agent"] == "helper"


# --- 2. a run's limit in tokens ---------------------------------------------------------------------


class _Spender(FunctionModel):
    """A model that writes every token it is allowed (its usage says so): the worst case each time."""

    async def complete(self, request: Any) -> Any:
        from dataclasses import replace

        response = await super().complete(request)
        usage = response.message.usage.model_copy(update={"completion_tokens": request.max_tokens})
        return replace(response, message=response.message.model_copy(update={"usage": usage}))


def _loops(messages: list[Any], request: Any) -> Any:
    return call(f"c{len(messages)}", "note", {"text": "more"})


def _note(text: str) -> str:
    """Take a note."""
    return "noted " + text * 50


def test_a_runs_tokens_are_bounded_and_never_exceeded() -> None:
    """Was: no limit in tokens (Pydantic AI's UsageLimits(total_tokens_limit)): Agent(max_run_tokens=...)
    was a TypeError, and the dollar budget, the only bound, needs a price. Now each call is planned
    against what the limit leaves (its prompt plus the output it is allowed), so a model that writes
    every token it may still leaves the run inside the limit, and the run ends budget_exceeded."""
    model = _Spender(_loops)
    limit = 6000
    agent = Agent(model, tools=[_note], max_run_tokens=limit, max_tokens=1000, max_turns=40)
    result = run_sync(agent, "take notes until told to stop")
    assert result.status == "budget_exceeded", result.reason
    assert "token limit (6,000" in (result.reason or ""), result.reason
    assert result.usage.total_tokens <= limit, result.usage
    assert len(model.requests) >= 3  # it ran until the limit, not stopped at once
    assert model.requests[-1].max_tokens < 1000  # the last call was allowed only what was left
    unlimited = run_sync(Agent(_Spender(_loops), tools=[_note], max_tokens=1000, max_turns=40), "take notes")
    assert unlimited.status == "max_turns_exceeded" and unlimited.usage.total_tokens > limit


@pytest.mark.parametrize("bad", [-1, 1.5, "1000", True])
def test_a_token_limit_that_is_no_count_is_refused(bad: object) -> None:
    """Was: max_run_tokens did not exist. A value that is no whole number of tokens would be no
    limit, or stop every run: it is a ConfigError before anything is sent."""
    model = FunctionModel(lambda messages, request: "x")
    with pytest.raises(ConfigError, match="max_run_tokens must be a whole number of tokens"):
        run_sync(Agent(model, max_run_tokens=bad), "hi")  # type: ignore[arg-type]
    assert model.requests == []


# --- 3. a message's text, whoever wrote it ----------------------------------------------------------


def test_every_messages_text_reads_alike() -> None:
    """Was: UserMessage.text was only the maker of a message (UserMessage.text("hi")), so on a
    person's message `state.messages[0].text` gave a bound method (printed as such, and
    `.text.strip()` an AttributeError), where an assistant's or a tool's message gave its text. Now
    a message's `.text` is its text whatever its role; UserMessage.text("hi") still makes one."""
    state = RunState()
    model = FunctionModel(
        lambda messages, request: call("c1", "_note", {"text": "x"}) if len(messages) == 1 else "done"
    )
    result = run_sync(Agent(model, tools=[_note]), "take a note, please", state=state)
    assert result.status == "completed", result.reason
    texts = [m.text.strip() for m in state.messages]
    assert texts[0] == "take a note, please" and texts[-1] == "done" and texts[2].startswith("noted x")
    made = UserMessage.text("hi")
    assert isinstance(made, UserMessage) and made.text == "hi" and made == UserMessage.text("hi")
    assert made.model_dump(mode="json") == {  # the text stays no field: what is saved is unchanged
        "role": "user",
        "content": [{"type": "text", "text": "hi"}],
        "summary_turns": None,
        "turn_so_far": None,
    }
