"""smolagents' ToolCallingAgent (JSON tool calls, not code) with OpenAIServerModel."""

import time

_T0 = time.perf_counter()
from smolagents import OpenAIServerModel, ToolCallingAgent, tool  # noqa: E402

IMPORT_S = time.perf_counter() - _T0

import peer_common as pc  # noqa: E402

TOOLS = [tool(pc.list_files), tool(pc.read_file)]


def run_once(scenario: str, max_turns: int) -> str:
    model = OpenAIServerModel(model_id=scenario, api_base=pc.base_url(), api_key="sk-dummy")
    agent = ToolCallingAgent(
        tools=TOOLS, model=model, max_steps=max_turns, verbosity_level=-1, instructions=pc.INSTRUCTIONS
    )
    return str(agent.run(pc.PROMPT))


if __name__ == "__main__":
    from importlib.metadata import version

    pc.main(run_once, IMPORT_S, f"smolagents {version('smolagents')}")
