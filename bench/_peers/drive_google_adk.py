"""Google ADK's LlmAgent with LiteLLM's OpenAI-compatible model, in an InMemoryRunner."""

import time

_T0 = time.perf_counter()
from google.adk.agents import LlmAgent  # noqa: E402
from google.adk.agents.run_config import RunConfig  # noqa: E402
from google.adk.models.lite_llm import LiteLlm  # noqa: E402
from google.adk.runners import InMemoryRunner  # noqa: E402
from google.genai import types  # noqa: E402

IMPORT_S = time.perf_counter() - _T0

import peer_common as pc  # noqa: E402


async def run_once(scenario: str, max_turns: int) -> str:
    agent = LlmAgent(
        name="bench",
        instruction=pc.INSTRUCTIONS,
        tools=[pc.list_files, pc.read_file],
        model=LiteLlm(model=f"openai/{scenario}", api_base=pc.base_url(), api_key="sk-dummy"),
    )
    runner = InMemoryRunner(agent=agent, app_name="bench")
    session = await runner.session_service.create_session(app_name="bench", user_id="u")
    message = types.Content(role="user", parts=[types.Part(text=pc.PROMPT)])
    text = ""
    try:
        async for event in runner.run_async(
            user_id="u", session_id=session.id, new_message=message, run_config=RunConfig(max_llm_calls=max_turns)
        ):
            if event.content and event.content.parts:
                text = "".join(p.text or "" for p in event.content.parts) or text
    except Exception as exc:  # the call limit is its own exception
        if "LlmCallsLimitExceeded" not in type(exc).__name__:
            raise
        return "max turns"
    return text


if __name__ == "__main__":
    from importlib.metadata import version

    pc.main(run_once, IMPORT_S, f"google-adk {version('google-adk')}, litellm {version('litellm')}")
