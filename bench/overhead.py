"""Harness overhead per turn: tether against a minimal raw httpx loop, same server, same tools.

    python bench/overhead.py [--repeats N]

The scripted server runs in its own process (``tether scripted serve``) and reports the seconds it
spent serving; overhead = client wall time − server time, per turn. Scenarios: ``plan`` (3 turns)
and ``runaway`` capped at 200 turns, streaming and not. Also times ``import tether`` and
``tether --help`` against a bare ``python -c pass``. Writes bench/results/overhead.json.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench._results import write_results  # noqa: E402

WORKSPACE = ROOT / "examples" / "workspace"
TOOLS_WIRE = None  # filled from tether's own definitions so both loops send the same tools


def start_server() -> tuple[subprocess.Popen[str], str]:
    proc = subprocess.Popen([sys.executable, "-m", "tether.cli", "scripted", "serve", "--port", "0"],
                            stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    url = proc.stdout.readline().strip().rsplit(" ", 1)[-1]
    return proc, url


def raw_tools(ws: Path) -> dict[str, Any]:
    def list_files(args: dict[str, Any]) -> str:
        return "\n".join(f"{p.name}\t{p.stat().st_size} bytes" for p in sorted(ws.iterdir()) if p.is_file())

    def read_file(args: dict[str, Any]) -> str:
        return (ws / args["path"]).read_text()

    return {"list_files": list_files, "read_file": read_file}


async def raw_loop(base: str, scenario: str, max_turns: int, stream: bool, ws: Path) -> int:
    """The smallest honest agent loop: dict messages, one JSON encode per request."""
    from tether.harness.context import tool_definitions
    from tether.providers.openai_chat import tools_to_wire
    from tether.providers.registry import resolve_provider  # noqa: F401 - same import cost class
    from tether.tools.files import FILE_TOOLS

    tools_wire = tools_to_wire(tool_definitions({t.name: t for t in FILE_TOOLS}))
    impl = raw_tools(ws)
    messages: list[dict[str, Any]] = [{"role": "user", "content": "Which file mentions a timeout?"}]
    turns = 0
    async with httpx.AsyncClient(base_url=base, timeout=60) as client:
        while turns < max_turns:
            body: dict[str, Any] = {"model": scenario, "messages": messages, "tools": tools_wire, "max_tokens": 4096}
            if stream:
                body["stream"] = True
                body["stream_options"] = {"include_usage": True}
            content = json.dumps(body).encode()
            if stream:
                message = await raw_stream(client, content)
            else:
                r = await client.post("/chat/completions", content=content,
                                      headers={"content-type": "application/json"})
                message = r.json()["choices"][0]["message"]
            turns += 1
            messages.append(message)
            calls = message.get("tool_calls") or []
            if not calls:
                break
            for c in calls:
                out = impl[c["function"]["name"]](json.loads(c["function"]["arguments"]))
                messages.append({"role": "tool", "tool_call_id": c["id"], "content": out})
    return turns


async def raw_stream(client: httpx.AsyncClient, content: bytes) -> dict[str, Any]:
    text: list[str] = []
    calls: dict[int, dict[str, Any]] = {}
    async with client.stream("POST", "/chat/completions", content=content,
                             headers={"content-type": "application/json"}) as r:
        async for line in r.aiter_lines():
            if not line.startswith("data: ") or line == "data: [DONE]":
                continue
            chunk = json.loads(line[6:])
            for choice in chunk.get("choices") or []:
                delta = choice["delta"]
                if delta.get("content"):
                    text.append(delta["content"])
                for tc in delta.get("tool_calls") or []:
                    slot = calls.setdefault(tc["index"], {"id": None, "name": None, "args": ""})
                    slot["id"] = tc.get("id") or slot["id"]
                    fn = tc.get("function") or {}
                    slot["name"] = fn.get("name") or slot["name"]
                    slot["args"] += fn.get("arguments") or ""
    message: dict[str, Any] = {"role": "assistant", "content": "".join(text) or None}
    if calls:
        message["tool_calls"] = [{"id": s["id"], "type": "function",
                                  "function": {"name": s["name"], "arguments": s["args"]}}
                                 for _, s in sorted(calls.items())]
    return message


async def raw_anthropic_loop(root: str, scenario: str, max_turns: int, stream: bool, ws: Path) -> int:
    """The smallest honest Messages-API loop: dict messages, one JSON encode per request."""
    from tether.harness.context import tool_definitions
    from tether.tools.files import FILE_TOOLS

    tools = [{"name": d.name, "description": d.description, "input_schema": d.input_schema}
             for d in tool_definitions({t.name: t for t in FILE_TOOLS})]
    impl = raw_tools(ws)
    messages: list[dict[str, Any]] = [{"role": "user", "content": [{"type": "text", "text": "Which file?"}]}]
    turns = 0
    headers = {"content-type": "application/json", "anthropic-version": "2023-06-01"}
    async with httpx.AsyncClient(base_url=root, timeout=60, headers=headers) as client:
        while turns < max_turns:
            body: dict[str, Any] = {"model": scenario, "max_tokens": 4096, "messages": messages, "tools": tools}
            if stream:
                body["stream"] = True
                blocks = await raw_anthropic_stream(client, json.dumps(body).encode())
            else:
                r = await client.post("/v1/messages", content=json.dumps(body).encode())
                blocks = r.json()["content"]
            turns += 1
            messages.append({"role": "assistant", "content": blocks})
            calls = [b for b in blocks if b["type"] == "tool_use"]
            if not calls:
                break
            messages.append({"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": c["id"], "content": impl[c["name"]](c["input"])} for c in calls]})
    return turns


async def raw_anthropic_stream(client: httpx.AsyncClient, content: bytes) -> list[dict[str, Any]]:
    blocks: dict[int, dict[str, Any]] = {}
    partial: dict[int, str] = {}
    async with client.stream("POST", "/v1/messages", content=content) as r:
        async for line in r.aiter_lines():
            if not line.startswith("data: "):
                continue
            event = json.loads(line[6:])
            if event["type"] == "content_block_start":
                blocks[event["index"]] = dict(event["content_block"])
                partial[event["index"]] = ""
            elif event["type"] == "content_block_delta":
                delta, block = event["delta"], blocks[event["index"]]
                if delta["type"] == "text_delta":
                    block["text"] = block.get("text", "") + delta["text"]
                elif delta["type"] == "input_json_delta":
                    partial[event["index"]] += delta["partial_json"]
    for i, block in blocks.items():
        if block["type"] == "tool_use" and partial[i]:
            block["input"] = json.loads(partial[i])
    return [blocks[i] for i in sorted(blocks)]


async def tether_loop(base: str, scenario: str, max_turns: int, stream: bool, ws: Path, persist: Path | None,
                      fsync: bool = True, wire: str = "openai") -> int:
    from tether import Agent, RunStore, run
    from tether.providers.anthropic import AnthropicProvider
    from tether.providers.openai_chat import OpenAIChatProvider
    from tether.tools.files import FILE_TOOLS
    from tether.tracing import JsonlTracer

    provider: Any = (AnthropicProvider(base_url=base.removesuffix("/v1")) if wire == "anthropic"
                     else OpenAIChatProvider(base_url=base))
    agent = Agent(provider, tools=FILE_TOOLS, cwd=ws, max_turns=max_turns, stream=stream)
    agent.model.model_id = scenario  # type: ignore[union-attr]
    store = RunStore(persist / "runs", fsync=fsync) if persist else None
    tracer = JsonlTracer(persist / "traces") if persist else None
    result = await run(agent, "Which file mentions a timeout?", store=store, tracer=tracer)
    return result.turns


def server_seconds(base: str) -> float:
    return float(httpx.get(base.removesuffix("/v1") + "/_stats").json()["server_s"])


def measure(base: str, kind: str, scenario: str, max_turns: int, stream: bool, repeats: int,
            wire: str = "openai") -> dict[str, float]:
    per_turn: list[float] = []
    turns = 0
    for _ in range(repeats):
        ws_root = Path(tempfile.mkdtemp(prefix="tether-overhead-"))
        ws = ws_root / "ws"
        shutil.copytree(WORKSPACE, ws)
        before = server_seconds(base)
        t0 = time.perf_counter()
        if kind == "raw":
            loop = raw_anthropic_loop(base.removesuffix("/v1"), scenario, max_turns, stream, ws) \
                if wire == "anthropic" else raw_loop(base, scenario, max_turns, stream, ws)
            turns = asyncio.run(loop)
        else:
            persist = ws_root / "home" if kind.startswith("tether+persist") else None
            turns = asyncio.run(tether_loop(base, scenario, max_turns, stream, ws, persist,
                                            fsync=not kind.endswith("nofsync"), wire=wire))
        wall = time.perf_counter() - t0
        served = server_seconds(base) - before
        per_turn.append((wall - served) / turns * 1000)
        shutil.rmtree(ws_root, ignore_errors=True)
    return {"turns": turns, "overhead_ms_per_turn": statistics.median(per_turn)}


def startup(cmd: list[str], repeats: int = 11) -> float:
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        subprocess.run(cmd, check=True, capture_output=True)
        times.append((time.perf_counter() - t0) * 1000)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeats", type=int, default=7)
    args = parser.parse_args()
    proc, base = start_server()
    results: dict[str, Any] = {"loops": [], "startup": {}}
    try:
        # Warm both sides once (tokenizer load on the server, imports on the client).
        asyncio.run(raw_loop(base, "plan", 3, False, WORKSPACE))
        asyncio.run(tether_loop(base, "plan", 3, False, WORKSPACE, None))
        print(f"{'wire':9} {'scenario':16} {'stream':6} {'turns':>5} {'raw ms/turn':>12} {'tether ms/turn':>15} "
              f"{'ratio':>6} {'+persist':>9} {'ratio':>6} {'+persist+fsync':>15} {'ratio':>6}")
        cases = [(w, sc, cap, rep, st) for w in ("openai", "anthropic")
                 for sc, cap, rep in (("plan", 3, args.repeats * 3), ("runaway", 200, max(3, args.repeats // 2)))
                 for st in (False, True)]
        for wire, scenario, cap, repeats, stream in cases:
            raw = measure(base, "raw", scenario, cap, stream, repeats, wire)
            ours = measure(base, "tether", scenario, cap, stream, repeats, wire)
            kept = measure(base, "tether+persist-nofsync", scenario, cap, stream, repeats, wire)
            durable = measure(base, "tether+persist", scenario, cap, stream, repeats, wire)
            ratio = ours["overhead_ms_per_turn"] / raw["overhead_ms_per_turn"]
            ratio_k = kept["overhead_ms_per_turn"] / raw["overhead_ms_per_turn"]
            ratio_p = durable["overhead_ms_per_turn"] / raw["overhead_ms_per_turn"]
            label = f"{scenario} ({cap})"
            print(f"{wire:9} {label:16} {stream!s:6} {ours['turns']:>5} {raw['overhead_ms_per_turn']:>12.3f} "
                  f"{ours['overhead_ms_per_turn']:>15.3f} {ratio:>6.2f} {kept['overhead_ms_per_turn']:>9.3f} "
                  f"{ratio_k:>6.2f} {durable['overhead_ms_per_turn']:>15.3f} {ratio_p:>6.2f}")
            results["loops"].append({"wire": wire, "scenario": scenario, "turns": ours["turns"], "stream": stream,
                                     "raw_ms_per_turn": raw["overhead_ms_per_turn"],
                                     "tether_ms_per_turn": ours["overhead_ms_per_turn"],
                                     "tether_persist_ms_per_turn": kept["overhead_ms_per_turn"],
                                     "tether_persist_fsync_ms_per_turn": durable["overhead_ms_per_turn"],
                                     "ratio": ratio, "ratio_persist": ratio_k, "ratio_persist_fsync": ratio_p})
    finally:
        proc.terminate()
        proc.wait()

    py = startup([sys.executable, "-c", "pass"])
    imp = startup([sys.executable, "-c", "import tether"])
    api = startup([sys.executable, "-c", "from tether import Agent, run, tool"])
    tether_bin = shutil.which("tether") or "tether"
    helped = startup([tether_bin, "--help"])
    results["startup"] = {"python_ms": py, "import_tether_ms": imp, "import_api_ms": api, "help_ms": helped}
    print(f"\npython -c pass: {py:.0f} ms | import tether: {imp:.0f} ms (+{imp - py:.0f}) | "
          f"from tether import Agent, run, tool: {api:.0f} ms (+{api - py:.0f}) | tether --help: {helped:.0f} ms")
    write_results("overhead", results)


if __name__ == "__main__":
    os.environ.pop("LLM_BASE_URL", None)
    main()
