"""The openai SDK in a minimal loop, with one AsyncOpenAI client for the whole process."""

import time

_T0 = time.perf_counter()
import openai  # noqa: E402

IMPORT_S = time.perf_counter() - _T0

import json  # noqa: E402

import peer_common as pc  # noqa: E402

TOOLS = [{"type": "function", "function": spec} for spec in pc.TOOL_SPECS]
CLIENT: list[openai.AsyncOpenAI] = []


async def run_once(scenario: str, max_turns: int) -> str:
    if not CLIENT:
        CLIENT.append(openai.AsyncOpenAI(base_url=pc.base_url(), api_key="sk-dummy"))
    client = CLIENT[0]
    messages = [{"role": "system", "content": pc.INSTRUCTIONS}, {"role": "user", "content": pc.PROMPT}]
    for _ in range(max_turns):
        r = await client.chat.completions.create(model=scenario, messages=messages, tools=TOOLS)
        msg = r.choices[0].message
        messages.append(msg.model_dump(exclude_none=True))
        if not msg.tool_calls:
            return msg.content or ""
        for c in msg.tool_calls:
            out = pc.TOOL_IMPLS[c.function.name](json.loads(c.function.arguments or "{}"))
            messages.append({"role": "tool", "tool_call_id": c.id, "content": out})
    return "max turns"


if __name__ == "__main__":
    pc.main(run_once, IMPORT_S, f"openai {openai.__version__}")
