"""Session stores and context: load-and-repair time, append throughput, prompt-prefix stability.

    python bench/sessions.py [--sizes 1000,10000,100000]

Baselines in the same run: reading the same JSONL with a bare ``json.loads`` per line, and
appending the same lines to a plain file. Writes bench/results/sessions.json.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench._results import write_results  # noqa: E402
from tether import Agent, RunState, run_stream  # noqa: E402
from tether.messages import AssistantMessage, Message, TextPart, ToolCallPart, ToolMessage, UserMessage  # noqa: E402
from tether.providers.openai_chat import OpenAIChatProvider  # noqa: E402
from tether.sessions import JsonlSessionStore, SqliteSessionStore  # noqa: E402
from tether.testing import ScriptedServer  # noqa: E402
from tether.tools.files import FILE_TOOLS  # noqa: E402

RESULTS: dict[str, Any] = {}


def transcript(n: int) -> list[Message]:
    out: list[Message] = []
    i = 0
    while len(out) < n:
        out.append(UserMessage.text(f"question {i}: which file mentions a timeout?"))
        out.append(
            AssistantMessage(
                content=(
                    TextPart(text="Let me look."),
                    ToolCallPart(id=f"c{i}", name="read_file", arguments=json.dumps({"path": f"log{i}.txt"})),
                ),
                model="scripted/plan",
            )
        )
        out.append(ToolMessage(call_id=f"c{i}", name="read_file", content=(TextPart(text="worker timed out " * 20),)))
        out.append(AssistantMessage(content=(TextPart(text=f"log{i}.txt mentions a timeout."),)))
        i += 1
    return out[:n]


def timed(fn: Any, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times) * 1000


def load_and_repair(sizes: list[int]) -> None:
    print(
        f"\n## load and repair (median ms)\n\n{'messages':>9} {'json.loads baseline':>20} {'jsonl load':>11} "
        f"{'ratio':>6} {'jsonl repair':>13} {'sqlite load':>12} {'sqlite repair':>14}"
    )
    rows = []
    for n in sizes:
        tmp = Path(tempfile.mkdtemp())
        messages = transcript(n)
        repeats = 5 if n <= 10_000 else 3
        jsonl = JsonlSessionStore(tmp / "j", fsync=False)
        jsonl.rewrite("s", messages)
        path = jsonl.path("s")
        clean = path.read_bytes()
        baseline = timed(lambda: [json.loads(x) for x in path.read_bytes().splitlines()], repeats)
        load = timed(lambda: jsonl.load("s"), repeats)
        damaged = clean + b'{"role":"assistant","content":[{"type":"tool_call","id":"zz","name":"read_file"}]}\n{"ro'

        def repair_jsonl() -> None:
            path.write_bytes(damaged)
            jsonl.load("s")

        repair = timed(repair_jsonl, repeats)
        sqlite = SqliteSessionStore(tmp / "s.db")
        sqlite.rewrite("s", messages)
        sload = timed(lambda: sqlite.load("s"), repeats)

        def repair_sqlite() -> None:
            sqlite.append("s", [AssistantMessage(content=(ToolCallPart(id="zz", name="read_file"),))])
            sqlite.load("s")

        srepair = timed(repair_sqlite, repeats)
        print(
            f"{n:>9,} {baseline:>20.1f} {load:>11.1f} {load / baseline:>6.1f} {repair:>13.1f} {sload:>12.1f} "
            f"{srepair:>14.1f}"
        )
        rows.append(
            {
                "messages": n,
                "baseline_ms": baseline,
                "jsonl_load_ms": load,
                "jsonl_repair_ms": repair,
                "sqlite_load_ms": sload,
                "sqlite_repair_ms": srepair,
            }
        )
        shutil.rmtree(tmp, ignore_errors=True)
    RESULTS["load_and_repair"] = rows


def append_throughput(count: int = 2000) -> None:
    messages = transcript(count)
    lines = [m.model_dump_json(exclude_none=True).encode() + b"\n" for m in messages]
    rows = []
    print(f"\n## append, one message per call ({count} messages)\n")
    for fsync in (False, True):
        n = count if not fsync else count // 4
        tmp = Path(tempfile.mkdtemp())
        t0 = time.perf_counter()
        with open(tmp / "plain.jsonl", "ab") as f:
            for line in lines[:n]:
                f.write(line)
                f.flush()
                if fsync:
                    import os

                    os.fsync(f.fileno())
        plain = n / (time.perf_counter() - t0)
        store = JsonlSessionStore(tmp / "j", fsync=fsync)
        t0 = time.perf_counter()
        for m in messages[:n]:
            store.append("s", [m])
        ours = n / (time.perf_counter() - t0)
        sqlite = SqliteSessionStore(tmp / "s.db")
        t0 = time.perf_counter()
        for m in messages[:n]:
            sqlite.append("s", [m])
        sq = n / (time.perf_counter() - t0)
        label = "fsync" if fsync else "no fsync"
        print(
            f"{label:9} plain file {plain:>10,.0f}/s   JsonlSessionStore {ours:>9,.0f}/s ({ours / plain:.2f}x)   "
            f"SqliteSessionStore {sq:>9,.0f}/s (WAL, synchronous=NORMAL)"
        )
        rows.append({"fsync": fsync, "plain_per_s": plain, "jsonl_per_s": ours, "sqlite_per_s": sq})
        shutil.rmtree(tmp, ignore_errors=True)
    RESULTS["append"] = rows


def prefix_stability(turns: int = 200, window: int = 32000) -> None:
    ws = Path(tempfile.mkdtemp()) / "ws"
    shutil.copytree(ROOT / "examples" / "workspace", ws)
    (ws / "big.log").write_text("".join(f"{i:05d} INFO request served in {i % 97} ms\n" for i in range(300)))
    (ws / "notes-zh.txt").write_text("日志轮换每天进行一次，旧文件压缩后保留三十天。" * 40)
    with ScriptedServer(context_window=window) as server:
        provider = OpenAIChatProvider(base_url=server.base_url)
        provider.model_id = "reader"  # type: ignore[attr-defined]
        agent = Agent(
            provider, tools=FILE_TOOLS, cwd=ws, max_turns=turns, context_window=window, dedupe_read_only=False
        )

        async def go() -> list[Any]:
            return [e async for e in run_stream(agent, "Read the logs, over and over.", state=RunState())]

        events = asyncio.run(go())
        bodies = [b for p, b, _ in server.received if b.get("tools")]
    compactions = [e for e in events if e.type == "compaction"]
    encoded = [json.dumps(b["messages"], separators=(",", ":")) for b in bodies]
    same = [encoded[i].startswith(encoded[i - 1][:-1]) for i in range(1, len(encoded))]
    broken = len(same) - sum(same)
    saved = sum(c.tokens_before - c.tokens_after for c in compactions)
    print(f"\n## prompt prefix across a {turns}-turn run (window {window} tokens)\n")
    print(
        f"requests {len(bodies)}, compactions {len(compactions)}, requests whose prefix equals the previous "
        f"request: {sum(same)}/{len(same)} ({sum(same) / len(same):.1%}); changed prefixes {broken} "
        f"(expected: one after each compaction = {len(compactions)}); tokens saved by compaction {saved:,}; "
        f"status {events[-1].result.status}"
    )
    RESULTS["prefix"] = {
        "requests": len(bodies),
        "compactions": len(compactions),
        "prefix_equal": sum(same),
        "compared": len(same),
        "changed": broken,
        "tokens_saved": saved,
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sizes", default="1000,10000,100000")
    args = parser.parse_args()
    load_and_repair([int(x) for x in args.sizes.split(",")])
    append_throughput()
    prefix_stability()
    write_results("sessions", RESULTS)


if __name__ == "__main__":
    main()
