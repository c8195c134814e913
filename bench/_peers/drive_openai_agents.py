"""OpenAI Agents SDK over Chat Completions, one AsyncOpenAI client for the process, tracing off."""

import time

_T0 = time.perf_counter()
from agents import (  # noqa: E402
    Agent,
    MaxTurnsExceeded,
    OpenAIChatCompletionsModel,
    Runner,
    function_tool,
    set_tracing_disabled,
)
from openai import AsyncOpenAI  # noqa: E402

IMPORT_S = time.perf_counter() - _T0

import peer_common as pc  # noqa: E402

set_tracing_disabled(True)
TOOLS = [function_tool(pc.list_files), function_tool(pc.read_file)]
CLIENT: list[AsyncOpenAI] = []


async def run_once(scenario: str, max_turns: int) -> str:
    if not CLIENT:
        CLIENT.append(AsyncOpenAI(base_url=pc.base_url(), api_key="sk-dummy"))
    agent = Agent(
        name="bench",
        instructions=pc.INSTRUCTIONS,
        tools=TOOLS,
        model=OpenAIChatCompletionsModel(model=scenario, openai_client=CLIENT[0]),
    )
    try:
        result = await Runner.run(agent, pc.PROMPT, max_turns=max_turns)
    except MaxTurnsExceeded:
        return "max turns"
    return str(result.final_output)


if __name__ == "__main__":
    from importlib.metadata import version

    pc.main(run_once, IMPORT_S, f"openai-agents {version('openai-agents')}")
