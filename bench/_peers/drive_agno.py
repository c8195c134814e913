"""Agno's Agent with its OpenAI-compatible model class.

Agno's ``tool_call_limit`` answers calls past the limit with an error and lets the model go on
asking (the runaway scenario would never end), so the turn cap is a tool that raises Agno's own
``StopAgentRun`` once the model has been asked ``max_turns`` times.
"""

import time

_T0 = time.perf_counter()
from agno.agent import Agent  # noqa: E402
from agno.exceptions import StopAgentRun  # noqa: E402
from agno.models.openai.like import OpenAILike  # noqa: E402

IMPORT_S = time.perf_counter() - _T0

import peer_common as pc  # noqa: E402

CALLS = {"n": 0, "limit": 0}


def _cap() -> None:
    CALLS["n"] += 1
    if CALLS["n"] >= CALLS["limit"]:
        raise StopAgentRun("turn limit reached")


def list_files() -> str:
    """List the files in the workspace, one per line with its size in bytes."""
    _cap()
    return pc.list_files()


def read_file(path: str) -> str:
    """Read a text file in the workspace and return its content.

    Args:
        path: file name
    """
    _cap()
    return pc.read_file(path)


async def run_once(scenario: str, max_turns: int) -> str:
    CALLS.update(n=0, limit=max_turns)
    agent = Agent(
        model=OpenAILike(id=scenario, base_url=pc.base_url(), api_key="sk-dummy"),
        tools=[list_files, read_file],
        instructions=pc.INSTRUCTIONS,
        telemetry=False,
    )
    result = await agent.arun(pc.PROMPT)
    return str(result.content)


if __name__ == "__main__":
    from importlib.metadata import version

    pc.main(run_once, IMPORT_S, f"agno {version('agno')}")
