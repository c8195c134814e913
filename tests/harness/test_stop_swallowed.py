"""Issue 27: a tool that swallows its cancellation held up Stop by 9.3 s in a plain run but 1.3 s
inside a sub-agent. Cancelled work is now waited for a short, fixed bound (``ABANDON_S``), the
same on both paths, then abandoned: the run ends while such a tool is still going."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from tether import Agent, CancelSignal, run_stream
from tether.events import Done, ToolStart
from tether.harness.pump import ABANDON_S, STOP_GRACE_S
from tether.testing import FunctionModel, call


class Stubborn:
    """Ignores its cancellation and goes on for longer than any bound tether has."""

    name = "stubborn"
    description = "Works for a long time."
    input_schema: dict[str, Any] = {"type": "object", "properties": {}}
    read_only = True
    needs_approval = False

    def __init__(self) -> None:
        self.swallowed = False
        self.finished = False

    async def execute(self, input: dict[str, Any], ctx: Any) -> str:
        try:
            await asyncio.sleep(120)
        except asyncio.CancelledError:
            self.swallowed = True  # ... and carries on as if nothing happened
            await asyncio.sleep(4 * (ABANDON_S + STOP_GRACE_S))
        self.finished = True
        return "done at last"


def calls_it(tool: str) -> FunctionModel:
    return FunctionModel(
        lambda m, r: call("c1", tool, {"task": "go"} if tool == "helper" else {}) if len(m) == 1 else "ok"
    )


@pytest.mark.parametrize("where", ["plain", "sub_agent"])
def test_stop_does_not_wait_for_a_tool_that_swallows_its_cancellation(where: str) -> None:
    stubborn = Stubborn()
    worker = Agent(calls_it("stubborn"), tools=[stubborn])
    agent = worker if where == "plain" else Agent(calls_it("helper"), tools=[worker.as_tool("helper", "Helps.")])
    signal = CancelSignal()

    async def go() -> Any:
        async for event in run_stream(agent, "go", signal=signal):
            if isinstance(event, ToolStart) and event.tool_name == "stubborn":
                asyncio.get_running_loop().call_later(0.05, signal.cancel, "the user pressed Stop")
            if isinstance(event, Done):
                return event.result, stubborn.finished
        raise AssertionError("no done")

    # A safety net only (the run ends in about ABANDON_S): without the bound it never ended.
    result, finished_first = asyncio.run(asyncio.wait_for(go(), 4 * (ABANDON_S + STOP_GRACE_S) - 1))
    assert result.status == "interrupted" and result.reason == "cancelled: the user pressed Stop"
    assert stubborn.swallowed and not finished_first  # the run ended while the tool was still going
