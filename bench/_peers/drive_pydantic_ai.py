"""Pydantic AI with its OpenAI chat model; one provider (and client) for the process."""

import time

_T0 = time.perf_counter()
from pydantic_ai import Agent  # noqa: E402
from pydantic_ai.exceptions import UsageLimitExceeded  # noqa: E402
from pydantic_ai.providers.openai import OpenAIProvider  # noqa: E402
from pydantic_ai.usage import UsageLimits  # noqa: E402

try:
    from pydantic_ai.models.openai import OpenAIChatModel as ChatModel
except ImportError:  # older releases
    from pydantic_ai.models.openai import OpenAIModel as ChatModel

IMPORT_S = time.perf_counter() - _T0

import peer_common as pc  # noqa: E402

PROVIDER: list[OpenAIProvider] = []


async def run_once(scenario: str, max_turns: int) -> str:
    if not PROVIDER:
        PROVIDER.append(OpenAIProvider(base_url=pc.base_url(), api_key="sk-dummy"))
    agent = Agent(
        ChatModel(scenario, provider=PROVIDER[0]), instructions=pc.INSTRUCTIONS, tools=[pc.list_files, pc.read_file]
    )
    try:
        result = await agent.run(pc.PROMPT, usage_limits=UsageLimits(request_limit=max_turns))
    except UsageLimitExceeded:
        return "max turns"
    return str(result.output)


if __name__ == "__main__":
    from importlib.metadata import version

    pc.main(run_once, IMPORT_S, f"pydantic-ai-slim {version('pydantic-ai-slim')}")
