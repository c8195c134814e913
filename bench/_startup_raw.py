"""The raw twin of a command-line run, timed as a whole process by bench/startup.py.

    python bench/_startup_raw.py imports      # import httpx and pydantic, and exit
    python bench/_startup_raw.py run          # the 3-turn task against $TETHER_BENCH_BASE_URL
    python bench/_startup_raw.py serve        # a one-route FastAPI app under uvicorn, to ready

``run`` is the smallest honest streaming Chat Completions loop with the two file tools, printing
the answer's text as it arrives (its first byte on stdout is the "first token"). Standard library,
httpx and pydantic only (the messages go through a pydantic model, as any typed client's would).
``serve`` prints its URL when uvicorn is ready, as ``tether serve`` does.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any


def _imports() -> None:
    import httpx  # noqa: F401
    import pydantic  # noqa: F401


LIST_FILES = {
    "name": "list_files",
    "description": "List the files in the workspace, one per line with its size in bytes.",
    "parameters": {"type": "object", "properties": {}},
}
READ_FILE = {
    "name": "read_file",
    "description": "Read a text file in the workspace and return its content.",
    "parameters": {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]},
}


def _tool(name: str, args: dict[str, Any], ws: Path) -> str:
    if name == "list_files":
        return "\n".join(f"{p.name}\t{p.stat().st_size} bytes" for p in sorted(ws.iterdir()) if p.is_file())
    target = (ws / str(args.get("path", ""))).resolve()
    if ws.resolve() not in target.parents:
        return "error: outside the workspace"
    return target.read_text()


def _run() -> None:
    import httpx
    from pydantic import BaseModel

    class Call(BaseModel):
        id: str
        name: str
        arguments: str

    ws = Path(os.environ["TETHER_BENCH_WORKSPACE"])
    client = httpx.Client(base_url=os.environ["TETHER_BENCH_BASE_URL"], timeout=60)
    messages: list[dict[str, Any]] = [{"role": "user", "content": "Which file mentions a timeout?"}]
    tools = [{"type": "function", "function": f} for f in (LIST_FILES, READ_FILE)]
    for _ in range(10):
        body = {"model": "plan", "messages": messages, "tools": tools, "stream": True}
        text: list[str] = []
        calls: dict[int, dict[str, str]] = {}
        with client.stream("POST", "/chat/completions", json=body, headers={"authorization": "Bearer x"}) as r:
            r.raise_for_status()
            for line in r.iter_lines():
                if not line.startswith("data: ") or line == "data: [DONE]":
                    continue
                for choice in json.loads(line[6:]).get("choices") or []:
                    delta = choice["delta"]
                    if delta.get("content"):
                        text.append(delta["content"])
                        sys.stdout.write(delta["content"])
                        sys.stdout.flush()
                    for tc in delta.get("tool_calls") or []:
                        slot = calls.setdefault(tc["index"], {"id": "", "name": "", "arguments": ""})
                        fn = tc.get("function") or {}
                        slot["id"] = tc.get("id") or slot["id"]
                        slot["name"] = fn.get("name") or slot["name"]
                        slot["arguments"] += fn.get("arguments") or ""
        parsed = [Call.model_validate(c) for _, c in sorted(calls.items())]
        message: dict[str, Any] = {"role": "assistant", "content": "".join(text)}
        if not parsed:
            break
        message["tool_calls"] = [
            {"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}} for c in parsed
        ]
        messages.append(message)
        for c in parsed:
            out = _tool(c.name, json.loads(c.arguments or "{}"), ws)
            messages.append({"role": "tool", "tool_call_id": c.id, "content": out})
    print()


def _serve() -> None:
    import uvicorn
    from fastapi import FastAPI

    app = FastAPI()

    @app.get("/health")
    def health() -> dict[str, str]:
        return {"status": "ok"}

    config = uvicorn.Config(app, host="127.0.0.1", port=0, log_level="warning")
    server = uvicorn.Server(config)

    async def main() -> None:
        import asyncio

        task = asyncio.create_task(server.serve())
        while not server.started:
            await asyncio.sleep(0.005)
        port = server.servers[0].sockets[0].getsockname()[1]
        print(f"raw server on http://127.0.0.1:{port}", flush=True)
        await task

    import asyncio

    asyncio.run(main())


if __name__ == "__main__":
    {"imports": _imports, "run": _run, "serve": _serve}[sys.argv[1]]()
