"""What a user coming from the OpenAI Agents SDK or Pydantic AI tries in their first hour: per-run
dependencies for tools (``deps=`` → ``ctx.deps``), and the peers' idioms that tether writes
differently, each refused with what to write instead."""

from __future__ import annotations

import asyncio
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from tether import Agent, RunResult, RunState, RunStore, ToolContext, approve, run, run_stream, run_sync, tool
from tether.errors import ConfigError, UserError
from tether.messages import ToolMessage
from tether.testing import FunctionModel, Reply, call


def _shop_db(path: Path) -> sqlite3.Connection:
    db = sqlite3.connect(path, check_same_thread=False)  # tools run in worker threads
    db.execute("create table prices (item text primary key, cents integer)")
    db.execute("insert into prices values ('nut', 30), ('bolt', 45)")
    db.commit()
    return db


@tool(read_only=True)
def price(item: str, ctx: ToolContext) -> str:
    """The price of an item, in cents."""
    row = ctx.deps.execute("select cents from prices where item = ?", (item,)).fetchone()
    return f"{item}: {row[0]} cents" if row else f"{item}: not sold"


def _asks_price(item: str) -> Any:
    def model(messages: list[Any], request: Any) -> Any:
        results = [m for m in messages if isinstance(m, ToolMessage)]
        if not results:
            return call("c1", "price", {"item": item})
        return f"The shop says {results[-1].text}"

    return model


def test_deps_reach_a_tool_through_its_context(tmp_path: Path) -> None:
    """Was: run_sync(agent, prompt, deps=db) was a TypeError and ToolContext had no deps: a tool
    could reach a database handle only through a global or a closure made per run."""
    db = _shop_db(tmp_path / "shop.db")
    agent = Agent(FunctionModel(_asks_price("bolt")), tools=[price])
    result = run_sync(agent, "What does a bolt cost?", deps=db)
    assert result.status == "completed", result.reason
    assert result.output == "The shop says bolt: 45 cents"


def test_each_run_has_its_own_deps(tmp_path: Path) -> None:
    """Was: no per-run dependencies: two runs of one agent at once (two users) could not give the
    same tool two different handles."""
    first, second = _shop_db(tmp_path / "a.db"), _shop_db(tmp_path / "b.db")
    second.execute("update prices set cents = 99 where item = 'nut'")
    second.commit()
    agent = Agent(FunctionModel(_asks_price("nut")), tools=[price])

    async def both() -> list[Any]:
        return list(await asyncio.gather(run(agent, "nut?", deps=first), run(agent, "nut?", deps=second)))

    one, two = asyncio.run(both())
    assert (one.output, two.output) == ("The shop says nut: 30 cents", "The shop says nut: 99 cents")


def test_run_stream_and_a_tool_class_see_deps(tmp_path: Path) -> None:
    """Was: run_stream took no deps and a Tool class's execute(input, ctx) had no ctx.deps."""

    class Whoami:
        name, description, read_only, needs_approval = "whoami", "Who is asking.", True, False
        input_schema: dict[str, Any] = {"type": "object", "properties": {}}

        async def execute(self, input: dict[str, Any], ctx: ToolContext) -> str:
            return f"user {ctx.deps['user_id']}"

    def model(messages: list[Any], request: Any) -> Any:
        results = [m for m in messages if isinstance(m, ToolMessage)]
        return call("c1", "whoami", {}) if not results else results[-1].text

    async def stream() -> list[Any]:
        agent = Agent(FunctionModel(model), tools=[Whoami()])
        return [e async for e in run_stream(agent, "who am I?", deps={"user_id": 42})]

    events = asyncio.run(stream())
    assert events[-1].result.output == "user 42"


def test_a_sub_agent_s_tools_see_the_parent_s_deps(tmp_path: Path) -> None:
    """Was: nothing to hand down: a sub-agent's tools had no way to the caller's handle."""
    db = _shop_db(tmp_path / "shop.db")
    clerk = Agent(FunctionModel(_asks_price("nut")), tools=[price])

    def lead(messages: list[Any], request: Any) -> Any:
        results = [m for m in messages if isinstance(m, ToolMessage)]
        if not results:
            return Reply(calls=(("d1", "clerk", {"task": "Price a nut."}),))
        return f"The clerk reports: {results[-1].text}"

    agent = Agent(FunctionModel(lead), tools=[clerk.as_tool("clerk", "Prices items.")])
    result = run_sync(agent, "What does a nut cost?", deps=db)
    assert result.status == "completed", result.reason
    assert "nut: 30 cents" in result.output


def test_deps_are_not_saved_and_are_given_again_on_resume(tmp_path: Path) -> None:
    """Was: no deps at all; now they live for one run_* call: the saved run holds none of them,
    and a resumed run's tools see the deps given to the resume."""

    @tool(needs_approval=True)
    def charge(cents: int, ctx: ToolContext) -> str:
        """Charge the customer's card."""
        ctx.deps.append(cents)
        return "charged"

    def model(messages: list[Any], request: Any) -> Any:
        return call("c1", "charge", {"cents": 30}) if len(messages) == 1 else "Done."

    class Secret:
        def __repr__(self) -> str:
            return "SECRET-HANDLE"

    store, state = RunStore(tmp_path / "runs"), RunState()
    agent = Agent(FunctionModel(model), tools=[charge])
    first = run_sync(agent, "Charge me.", state=state, store=store, deps=Secret())
    assert first.status == "interrupted"
    saved = (tmp_path / "runs").rglob("*")
    assert not any("SECRET-HANDLE" in p.read_text(errors="replace") for p in saved if p.is_file())

    ledger: list[int] = []
    loaded = store.load(state.run_id)  # as another process would, later
    approve(loaded)
    resumed = run_sync(agent, state=loaded, store=store, deps=ledger)
    assert resumed.status == "completed", resumed.reason
    assert ledger == [30]


def test_instructions_as_a_function_are_refused_before_anything_is_sent() -> None:
    """Was: Agent(instructions=lambda: ...) (the peers' dynamic instructions) started, then the run
    ended `failed` with "AttributeError: 'function' object has no attribute 'isascii'" and a
    traceback on the log; now a ConfigError says what to write instead, and no model is asked."""
    asked: list[Any] = []
    agent = Agent(FunctionModel(lambda m, r: asked.append(m) or "hi"), instructions=lambda: "Be brief.")
    with pytest.raises(ConfigError) as caught:
        run_sync(agent, "hello")
    assert "instructions is the system prompt as text" in str(caught.value)
    assert "prompt_block()" in str(caught.value)
    assert asked == []


def test_a_message_list_as_the_prompt_says_to_pass_the_state() -> None:
    """Was: run_sync(agent, [{"role": "user", ...}]) (the OpenAI Agents SDK's input list) raised
    "AttributeError: 'list' object has no attribute 'isascii'" from deep in the loop."""
    state = RunState()
    agent = Agent(FunctionModel(lambda m, r: "hi"))
    with pytest.raises(UserError) as caught:
        run_sync(agent, [{"role": "user", "content": "hi"}], state=state)  # type: ignore[arg-type]
    assert "got list" in str(caught.value) and "state=state" in str(caught.value)
    assert state.messages == [] and state.status == "running"


@pytest.mark.parametrize(
    ("method", "told"),
    [
        ("run_sync", 'result = run_sync(agent, "...")'),
        ("run", 'result = await run(agent, "...")'),
        ("run_stream", "async for event in run_stream(agent"),
        ("run_streamed", "async for event in run_stream(agent"),
        ("tool", "pass `Agent(..., tools=[fn])`"),
        ("tool_plain", "decorate the function with `@tool`"),
        ("system_prompt", 'Agent(instructions="...")'),
    ],
)
def test_a_peer_s_run_method_on_the_agent_says_what_to_write(method: str, told: str) -> None:
    """Was: agent.run_sync("...") and @agent.tool (Pydantic AI's first lines) were a bare "'Agent'
    object has no attribute 'run_sync'", with no word of tether's run functions or tools=[...]."""
    agent = Agent(FunctionModel(lambda m, r: "hi"))
    with pytest.raises(AttributeError) as caught:
        getattr(agent, method)
    assert told in str(caught.value)
    with pytest.raises(AttributeError, match="no attribute 'colour'"):
        agent.colour  # type: ignore[attr-defined]  # noqa: B018 (any other name: Python's own words)
    assert not hasattr(agent, "execute")  # an agent is still not taken for a tool


@pytest.mark.parametrize(
    ("name", "told"),
    [
        ("final_output", "the answer is `result.output`"),
        ("all_messages", "state.messages` is the transcript"),
        ("new_messages", 'run_sync(agent, "next question", state=state)'),
        ("to_input_list", "Keep the run's state"),
    ],
)
def test_a_peer_s_name_on_the_result_says_what_to_read(name: str, told: str) -> None:
    """Was: result.final_output (the OpenAI Agents SDK) and result.all_messages() (Pydantic AI, to
    carry a conversation on) were bare "'RunResult' object has no attribute ..." errors."""
    result = run_sync(Agent(FunctionModel(lambda m, r: "hi")), "hello")
    with pytest.raises(AttributeError) as caught:
        getattr(result, name)
    assert told in str(caught.value)
    with pytest.raises(AttributeError, match="no attribute 'colour'"):
        result.colour  # type: ignore[attr-defined]  # noqa: B018 (any other name: pydantic's own words)
    assert result.output == "hi" and RunResult.model_validate_json(result.model_dump_json()) == result


def _typed_run(output_type: Any, *replies: str) -> tuple[Any, list[Any], RunState]:
    """Run an agent with ``output_type`` whose model gives ``replies`` in turn; what it was sent."""
    requests: list[Any] = []

    def model(messages: list[Any], request: Any) -> str:
        requests.append(request)
        return replies[len(requests) - 1]

    state = RunState()
    result = run_sync(Agent(FunctionModel(model), output_type=output_type), "x", state=state)
    return result, requests, state


def test_a_list_or_a_single_value_as_output_type_is_asked_for_wrapped() -> None:
    """Was: output_type=list[str] (or int, or a union of models), which both peers take, was a
    ConfigError 'the output schema must describe a JSON object'; it is now asked for as
    {"response": ...} (both wires need an object at the root) and the value is the output."""
    result, requests, _ = _typed_run(list[str], '{"response": ["nut", "bolt"]}')
    assert (result.status, result.output, result.typed) == ("completed", ["nut", "bolt"], True)
    sent = requests[0].output_schema.schema
    assert sent["type"] == "object" and sent["required"] == ["response"] and sent["additionalProperties"] is False
    assert sent["properties"]["response"]["type"] == "array"


def test_a_wrapped_answer_given_bare_is_corrected_in_words() -> None:
    """Was: refused before the run (see above). A bare 42 for output_type=int is sent back saying
    the value goes under "response", and the corrected answer is the output."""
    result, _, state = _typed_run(int, "42", '{"response": 42}')
    assert (result.status, result.output, result.turns) == ("completed", 42, 2)
    correction = state.messages[2].content[0].text
    assert 'one key, "response", holds the value' in correction


def test_a_union_of_models_is_asked_for_wrapped() -> None:
    """Was: a ConfigError (a union's schema is anyOf, not an object)."""
    from pydantic import BaseModel

    class Refund(BaseModel):
        cents: int

    class Refusal(BaseModel):
        why: str

    result, requests, _ = _typed_run(Refund | Refusal, '{"response": {"why": "no receipt"}}')
    assert result.output == Refusal(why="no receipt")
    assert "$defs" in requests[0].output_schema.schema  # the models' definitions stay at the root


def test_output_type_str_is_text() -> None:
    """Was: output_type=str (the peers' way of asking for text) was a ConfigError; it is now what
    no output_type is: the answer's text, nothing asked of the model's format."""
    result, requests, _ = _typed_run(str, "Plain words.")
    assert (result.output, result.typed) == ("Plain words.", False)
    assert requests[0].output_schema is None


def test_middleware_hooks_read_the_run_s_deps() -> None:
    """Was: no deps for a run, so a lifecycle hook (the OpenAI Agents SDK's RunHooks, which read
    the run's context) had nothing of the caller's to read; a middleware's ctx.deps is it now."""
    from tether.harness.middleware import Middleware

    seen: list[Any] = []

    class Hooks(Middleware):
        async def before_agent(self, ctx: Any) -> None:
            seen.append(("start", ctx.deps["user"]))

        async def wrap_tool_call(self, ctx: Any, call: Any, args: dict[str, Any], call_next: Any) -> Any:
            seen.append(("tool_start", call.name, ctx.deps["user"]))
            result = await call_next()
            seen.append(("tool_end", call.name, result))
            return result

    @tool(read_only=True)
    def add(a: int, b: int) -> int:
        """Add two numbers."""
        return a + b

    def model(messages: list[Any], request: Any) -> Any:
        return call("c1", "add", {"a": 1, "b": 2}) if len(messages) == 1 else "3"

    agent = Agent(FunctionModel(model), tools=[add], middleware=[Hooks()])
    assert run_sync(agent, "1 + 2?", deps={"user": "ada"}).output == "3"
    assert seen == [("start", "ada"), ("tool_start", "add", "ada"), ("tool_end", "add", "3")]


def test_instructions_that_read_deps_through_a_middleware() -> None:
    """Was: no deps, so instructions made from the caller's data (Pydantic AI's @agent.instructions
    reading ctx.deps) had to be baked into a new Agent per user; a middleware's before_model reads
    ctx.deps and adds them to the request's system prompt, each run its own."""
    from dataclasses import replace

    from tether.harness.middleware import Middleware

    class UserName(Middleware):
        async def before_model(self, ctx: Any, request: Any) -> Any:
            return replace(request, system=f"{request.system}\n\nThe user's name is {ctx.deps['name']}.")

    systems: list[str] = []

    def model(messages: list[Any], request: Any) -> str:
        systems.append(request.system)
        return "Hello."

    agent, state = Agent(FunctionModel(model), instructions="Be brief.", middleware=[UserName()]), RunState()
    run_sync(agent, "Hi.", deps={"name": "Ada"}, state=state)
    run_sync(agent, "Hi again.", deps={"name": "Grace"}, state=state)
    assert systems == ["Be brief.\n\nThe user's name is Ada.", "Be brief.\n\nThe user's name is Grace."]
