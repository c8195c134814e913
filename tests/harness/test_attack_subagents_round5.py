"""Sub-agents attacked from outside, a fifth round: the limits a child is given when something
waits between a call's start and the child's start (a middleware), hostile calls, approvals and
resumes. Models are FunctionModels; costs are checked against sums computed here from each
reply's usage and the price, not against tether's own totals.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import assert_pairing
from tests.server.conftest import read_events, served  # noqa: F401 - the served-server fixture
from tether import Agent, CancelSignal, RunState, approve, run_stream, run_sync, tool
from tether.events import Subagent
from tether.harness.extension import Extension
from tether.harness.middleware import Middleware, ToolCall
from tether.harness.subagent import children
from tether.messages import AssistantMessage, Message, ToolCallPart, ToolMessage, text_of
from tether.providers.base import ModelRequest
from tether.testing import FunctionModel, Reply
from tether.tools.base import ToolResult
from tether.usage import Price

PRICE = Price(input=2.0, output=12.0)  # FunctionModel's default


def own_cost(messages: list[Message]) -> float:
    return sum(PRICE.cost(m.usage) for m in messages if isinstance(m, AssistantMessage) and m.usage is not None)


def fan_out(n: int, name: str = "worker") -> FunctionModel:
    """A parent that hands a task to ``n`` workers in one reply, then answers."""

    def lead(messages: list[Message], request: ModelRequest) -> Reply | str:
        if any(isinstance(m, ToolMessage) for m in messages):
            return "done"
        return Reply(calls=tuple((f"c{i}", name, {"task": "spend"}) for i in range(n)))

    return FunctionModel(lead)


@tool(read_only=True, parallel=False)
def tick() -> str:
    """A step of work."""
    return "ticked"


def collect(agent: Agent, prompt: str | None, state: RunState) -> list[Any]:
    async def main() -> list[Any]:
        return [e async for e in run_stream(agent, prompt, state=state)]

    return asyncio.run(main())


def greedy(messages: list[Message], request: ModelRequest) -> Reply:
    """A child that never finishes: each reply as long as it is allowed, and one more step."""
    return Reply(text="x " * (request.max_tokens - 8), calls=((f"t{len(messages)}", "tick", {}),))


class OneAfterTheOther(Middleware):
    """Lets the second call of a batch through only once the first has its result: a policy
    that waits (a guardrail judging the arguments, a rate limiter) before the tool starts."""

    def __init__(self) -> None:
        self.first_done: asyncio.Event | None = None

    async def wrap_tool_call(
        self, ctx: Any, call: ToolCallPart, args: dict[str, Any], call_next: ToolCall
    ) -> ToolResult | str | Any:
        if self.first_done is None:
            self.first_done = asyncio.Event()
        if call.id == "c0":
            try:
                return await call_next()
            finally:
                self.first_done.set()
        await self.first_done.wait()
        return await call_next()


def test_a_child_that_starts_after_a_middleware_waited_gets_what_is_left_then_not_before() -> None:
    """Two children side by side; a middleware holds the second until the first has spent its
    share. The second's carve must come from what the parent has left when it starts (before:
    from what it had left when the batch began, so the tree ended past the parent's budget)."""
    worker = Agent(FunctionModel(greedy), tools=[tick], max_turns=50, min_output_tokens=1).as_tool(
        "worker", "Does a task."
    )
    worker.parallel = True
    state = RunState()
    parent = Agent(fan_out(2), tools=[worker], middleware=[OneAfterTheOther()], max_budget_usd=0.05)
    result = run_sync(parent, "go", state=state)
    kids = children(state)
    assert kids["c0"]["cost_usd"] > 0
    spent = own_cost(state.messages) + sum(c["cost_usd"] for c in kids.values())
    assert result.cost_usd == pytest.approx(spent)
    assert result.cost_usd is not None and result.cost_usd <= 0.05
    assert result.status == "completed" and result.output == "done"  # the greedy children left it its answer
    assert_pairing(state.messages)


def answers(name: str) -> Agent:
    return Agent(FunctionModel(lambda messages, request: f"{name} answered", model_id=name))


def test_two_different_subagents_side_by_side_both_run_under_the_default_turn_limit() -> None:
    """A lead hands a researcher and a writer their tasks in one reply (both parallel tools). Each
    must be given its share of the turns left (before: the researcher was given all 49 turns left
    of the default 50, and the writer was refused, every time: "no model turns left")."""
    researcher = answers("researcher").as_tool("researcher", "Finds things out.")
    writer = answers("writer").as_tool("writer", "Writes.")
    researcher.parallel = writer.parallel = True

    def lead(messages: list[Message], request: ModelRequest) -> Reply | str:
        results = [m.text for m in messages if isinstance(m, ToolMessage)]
        if results:
            return " | ".join(results)
        return Reply(calls=(("c0", "researcher", {"task": "find"}), ("c1", "writer", {"task": "write"})))

    state = RunState()
    result = run_sync(Agent(FunctionModel(lead), tools=[researcher, writer]), "go", state=state)
    assert result.status == "completed"
    assert result.output == "researcher answered | writer answered"
    assert state.turns + state.delegated_turns == 4


def test_two_different_subagents_side_by_side_share_the_budget() -> None:
    """The same with a budget: the first of two different sub-agents may not take all of it."""
    researcher = Agent(FunctionModel(greedy), tools=[tick], max_turns=50, min_output_tokens=1).as_tool(
        "researcher", "R."
    )
    writer = answers("writer").as_tool("writer", "Writes.")
    researcher.parallel = writer.parallel = True

    def lead(messages: list[Message], request: ModelRequest) -> Reply | str:
        results = [m.text for m in messages if isinstance(m, ToolMessage)]
        if results:
            return "done"
        return Reply(calls=(("c0", "researcher", {"task": "find"}), ("c1", "writer", {"task": "write"})))

    state = RunState()
    result = run_sync(Agent(FunctionModel(lead), tools=[researcher, writer], max_budget_usd=0.05), "go", state=state)
    assert result.status == "completed"
    kids = children(state)
    assert kids["c0"]["status"] == "budget_exceeded" and kids["c1"]["status"] == "completed"
    assert result.cost_usd is not None and result.cost_usd <= 0.05


def test_a_call_id_used_again_in_a_later_reply_runs_the_new_task() -> None:
    """A model that numbers its calls anew each reply (a provider passed as Agent(model=...); the
    HTTP wires renumber such ids, other providers need not) calls the same sub-agent twice as
    'call_0'. The second task must run, and be paid for once (before: the first answer, kept by
    call id for a resume, was returned for the second task, which never ran)."""
    asked: list[str] = []

    def child(messages: list[Message], request: ModelRequest) -> str:
        task = text_of([messages[0]])
        asked.append(task)
        return f"answer to {task}"

    worker = Agent(FunctionModel(child)).as_tool("worker", "Does a task.")

    def lead(messages: list[Message], request: ModelRequest) -> Reply | str:
        results = [m.text for m in messages if isinstance(m, ToolMessage)]
        if len(results) < 2:
            return Reply(calls=(("call_0", "worker", {"task": ["first", "second"][len(results)]}),))
        return " | ".join(results)

    state = RunState()
    events = collect(Agent(FunctionModel(lead), tools=[worker], max_budget_usd=0.05), "go", state)
    result = events[-1].result
    assert result.status == "completed"
    assert asked == ["first", "second"]
    assert result.output == "answer to first | answer to second"
    assert state.delegated_turns == 2
    ended = [e for e in events if isinstance(e, Subagent) and e.status == "completed"]
    assert len(ended) == 2 and len({e.child_run_id for e in ended}) == 2
    # tether gives the second call an id of its own (no two calls of a conversation share one)
    second = [m for m in state.messages if isinstance(m, AssistantMessage) and m.tool_calls][-1].tool_calls[0].id
    assert second != "call_0" and children(state)[second]["output"] == "answer to second"
    assert result.cost_usd == pytest.approx(own_cost(state.messages) + sum(e.cost_usd or 0 for e in ended))


def test_a_child_that_answers_nothing_is_reported_in_words() -> None:
    """A child whose model ends on an empty reply: the parent's model must read that it answered
    nothing, not an empty result it could take for "nothing found" (before: the result was '')."""
    worker = Agent(FunctionModel(lambda messages, request: "")).as_tool("worker", "Does a task.")
    state = RunState()
    result = run_sync(Agent(fan_out(1), tools=[worker]), "go", state=state)
    assert result.status == "completed"
    (answer,) = [m for m in state.messages if isinstance(m, ToolMessage)]
    assert "worker" in answer.text and "empty answer" in answer.text


def test_call_ids_used_again_side_by_side_each_run_with_its_share() -> None:
    """The same with two sub-agents side by side in each reply, both replies numbering their calls
    call_0 and call_1: every task runs (the second reply's call_0 must not read call_1's record of
    the first reply as finished and take all the turns left)."""
    asked: list[str] = []

    def child(messages: list[Message], request: ModelRequest) -> str:
        asked.append(text_of([messages[0]]))
        return f"answer to {asked[-1]}"

    worker = Agent(FunctionModel(child)).as_tool("worker", "Does a task.")
    worker.parallel = True

    def lead(messages: list[Message], request: ModelRequest) -> Reply | str:
        results = [m.text for m in messages if isinstance(m, ToolMessage)]
        if len(results) < 4:
            n = len(results)
            return Reply(calls=(("call_0", "worker", {"task": f"t{n}"}), ("call_1", "worker", {"task": f"t{n + 1}"})))
        return " | ".join(results)

    state = RunState()
    result = run_sync(Agent(FunctionModel(lead), tools=[worker]), "go", state=state)
    assert result.status == "completed"
    assert sorted(asked) == ["t0", "t1", "t2", "t3"]
    assert result.output == "answer to t0 | answer to t1 | answer to t2 | answer to t3"


def test_a_childs_record_saved_before_records_named_their_reply_is_still_resumed() -> None:
    """A run saved by an earlier tether (its children's records say nothing of the reply that made
    the call) resumes its waiting child where it stopped, not from the start."""
    asked: list[int] = []
    wiped: list[str] = []

    @tool(needs_approval=True)
    def wipe(path: str) -> str:
        """Delete a folder."""
        wiped.append(path)
        return f"wiped {path}"

    def child(messages: list[Message], request: ModelRequest) -> Reply | str:
        results = [m for m in messages if isinstance(m, ToolMessage)]
        asked.append(len(results))
        return Reply(calls=(("w1", "wipe", {"path": "cache"}),)) if not results else f"child: {results[-1].text}"

    worker = Agent(FunctionModel(child), tools=[wipe]).as_tool("worker", "Wipes.")
    parent = Agent(fan_out(1), tools=[worker])
    state = RunState()
    assert run_sync(parent, "go", state=state).status == "interrupted"
    saved = state.model_dump(mode="json")
    del saved["ext"]["subagents"]["children"]["c0"]["ext"]["subagents"]["parent"]["turn"]
    older = RunState.model_validate(saved)
    approve(older)
    result = run_sync(parent, state=older)
    assert result.status == "completed"
    assert asked == [0, 1] and wiped == ["cache"]  # the child's first turn was not asked again


LEAD_AGENTS = '''
from tether import Agent, tool
from tether.messages import ToolMessage
from tether.testing import FunctionModel, Reply

WIPED = []


@tool(needs_approval=True)
def wipe(path: str) -> str:
    """Delete a folder."""
    WIPED.append(path)
    return f"wiped {path}"


def child(messages, request):
    results = [m for m in messages if isinstance(m, ToolMessage)]
    return f"child: {results[-1].text}" if results else Reply(calls=(("w1", "wipe", {"path": "cache"}),))


def lead(messages, request):
    results = [m for m in messages if isinstance(m, ToolMessage)]
    return f"lead: {results[-1].text}" if results else Reply(calls=(("p1", "cleaner", {"task": "free space"}),))


cleaner = Agent(FunctionModel(child), tools=[wipe]).as_tool("cleaner", "Frees space.")
agents = {"lead": Agent(FunctionModel(lead), tools=[cleaner])}
'''


def test_a_childs_question_in_a_served_run_is_decided_on_the_call_the_parent_waits_for(
    served: Any,  # noqa: F811 - the fixture imported above
    tmp_path: Path,
) -> None:
    """docs/harness.md: for a run tether serve drives, a decision on the call the parent's run
    waits for reaches the child. The run shows the child's question (its tool and arguments)."""
    pytest.importorskip("fastapi")
    module = tmp_path / "lead_agents.py"
    module.write_text(LEAD_AGENTS, encoding="utf-8")
    s = served(agents_module=module)
    with s.client() as c:
        sid = c.post("/v1/sessions", json={"agent": "lead"}).json()["session_id"]
        run_id = c.post(f"/v1/sessions/{sid}/messages", json={"text": "free some space"}).json()["run_id"]
        events = read_events(c, f"/v1/runs/{run_id}/events")
        assert events[-1]["result"]["status"] == "interrupted"
        waiting = c.get(f"/v1/runs/{run_id}").json()["waiting"]
        assert waiting["type"] == "subagent" and waiting["call_id"] == "p1"
        assert waiting["child"]["tool_name"] == "wipe" and waiting["child"]["args"] == {"path": "cache"}
        decided = c.post(
            f"/v1/runs/{run_id}/decision",
            json={"call_id": waiting["call_id"], "args_hash": waiting["args_hash"], "approve": True},
        )
        assert decided.status_code == 202, decided.text
        more = read_events(c, f"/v1/runs/{run_id}/events", last_event_id=events[-1]["id"])
        assert more[-1]["result"]["status"] == "completed"
        assert more[-1]["result"]["output"] == "lead: child: wiped cache"


class _NeverStarts(Extension):
    """An extension whose start hangs (an MCP server that never answers its handshake, skills on
    a hung mount) until it is cancelled."""

    name = "never"

    def __init__(self) -> None:
        self.starting = asyncio.Event()
        self.cancelled = False

    async def start(self) -> None:
        self.starting.set()
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            self.cancelled = True
            raise

    def tools(self) -> tuple[()]:
        return ()

    def prompt_block(self) -> None:
        return None


def test_stop_while_a_child_starts_its_extensions_ends_the_child_and_the_trace_says_so() -> None:
    """Stop comes while the child is still starting (its extensions do not hear the signal). The
    child ends from here, its start cancelled, and the parent's stream says how the child ended
    (before: the child went on starting until the harness cut it from outside after its grace, and
    the stream had the child's start and no end)."""
    never = _NeverStarts()
    worker = Agent(FunctionModel(lambda messages, request: "hi"), extensions=[never]).as_tool("worker", "W.")
    signal = CancelSignal()

    async def main() -> list[Any]:
        async def press() -> None:
            await never.starting.wait()
            signal.cancel("user pressed Stop")

        presser = asyncio.create_task(press())
        events = [e async for e in run_stream(Agent(fan_out(1), tools=[worker]), "go", signal=signal)]
        await presser
        return events

    events = asyncio.run(main())
    result = events[-1].result
    assert result.status == "interrupted" and result.interruption.type == "cancelled"
    assert never.cancelled
    links = [(e.call_id, e.status) for e in events if isinstance(e, Subagent)]
    assert links == [("c0", "started"), ("c0", "interrupted")]


def test_a_blank_task_is_refused_in_words_and_starts_no_child() -> None:
    """The child sees nothing but its task: a model that sends a blank one (hostile or confused
    output) is told so, and nothing is paid for a child with nothing to do (before: the child ran,
    and was paid, on a message of three spaces)."""
    asked: list[int] = []

    def child(messages: list[Message], request: ModelRequest) -> str:
        asked.append(1)
        return "did something"

    worker = Agent(FunctionModel(child)).as_tool("worker", "Does a task.")

    def lead(messages: list[Message], request: ModelRequest) -> Reply | str:
        if any(isinstance(m, ToolMessage) for m in messages):
            return "done"
        return Reply(calls=(("c0", "worker", {"task": " \n\t "}),))

    state = RunState()
    result = run_sync(Agent(FunctionModel(lead), tools=[worker]), "go", state=state)
    assert result.status == "completed" and asked == []
    (answer,) = [m for m in state.messages if isinstance(m, ToolMessage)]
    assert answer.status == "error" and "empty" in answer.text and "worker" in answer.text
    assert state.delegated_turns == 0 and children(state) == {}
