"""The floor: a raw httpx loop that keeps one AsyncClient for the whole process."""

import time

_T0 = time.perf_counter()
import httpx  # noqa: E402

IMPORT_S = time.perf_counter() - _T0

import json  # noqa: E402

import peer_common as pc  # noqa: E402

TOOLS = [{"type": "function", "function": spec} for spec in pc.TOOL_SPECS]
CLIENT: list[httpx.AsyncClient] = []


async def run_once(scenario: str, max_turns: int) -> str:
    if not CLIENT:
        CLIENT.append(
            httpx.AsyncClient(base_url=pc.base_url(), timeout=60, headers={"authorization": "Bearer sk-dummy"})
        )
    client = CLIENT[0]
    messages = [{"role": "system", "content": pc.INSTRUCTIONS}, {"role": "user", "content": pc.PROMPT}]
    for _ in range(max_turns):
        body = {"model": scenario, "messages": messages, "tools": TOOLS}
        r = await client.post(
            "/chat/completions", content=json.dumps(body).encode(), headers={"content-type": "application/json"}
        )
        r.raise_for_status()
        message = r.json()["choices"][0]["message"]
        messages.append(message)
        calls = message.get("tool_calls") or []
        if not calls:
            return message.get("content") or ""
        for c in calls:
            out = pc.TOOL_IMPLS[c["function"]["name"]](json.loads(c["function"]["arguments"] or "{}"))
            messages.append({"role": "tool", "tool_call_id": c["id"], "content": out})
    return "max turns"


if __name__ == "__main__":
    pc.main(run_once, IMPORT_S, f"httpx {httpx.__version__}")
