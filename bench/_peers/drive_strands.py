"""Strands Agents with its OpenAI model provider; the turn cap is a hook (Strands has none)."""

import time

_T0 = time.perf_counter()
from strands import Agent, tool  # noqa: E402
from strands.hooks import BeforeModelCallEvent, HookProvider  # noqa: E402
from strands.models.openai import OpenAIModel  # noqa: E402

IMPORT_S = time.perf_counter() - _T0

import peer_common as pc  # noqa: E402

TOOLS = [tool(pc.list_files), tool(pc.read_file)]


class TurnCap(Exception):
    pass


class MaxTurns(HookProvider):
    def __init__(self, limit: int) -> None:
        self.limit, self.calls = limit, 0

    def register_hooks(self, registry, **kwargs) -> None:
        registry.add_callback(BeforeModelCallEvent, self.before_model)

    def before_model(self, event) -> None:
        self.calls += 1
        if self.calls > self.limit:
            raise TurnCap()


async def run_once(scenario: str, max_turns: int) -> str:
    model = OpenAIModel(client_args={"base_url": pc.base_url(), "api_key": "sk-dummy"}, model_id=scenario)
    agent = Agent(
        model=model, tools=TOOLS, system_prompt=pc.INSTRUCTIONS, callback_handler=None, hooks=[MaxTurns(max_turns)]
    )
    try:
        result = await agent.invoke_async(pc.PROMPT)
    except Exception as exc:
        if (
            not isinstance(exc, TurnCap)
            and not isinstance(exc.__cause__ or exc.__context__, TurnCap)
            and "TurnCap" not in repr(exc)
        ):
            raise
        return "max turns"
    return str(result)


if __name__ == "__main__":
    from importlib.metadata import version

    pc.main(run_once, IMPORT_S, f"strands-agents {version('strands-agents')}")
