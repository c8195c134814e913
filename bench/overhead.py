"""Harness overhead per turn against a fair floor, startup, first-run cost and memory.

    python bench/overhead.py            # about 5 minutes
    python bench/overhead.py --quick    # about 1 minute: fewer repetitions (one 200-turn run per case)
    python bench/overhead.py --only loops,startup,first,rss,server

**loops** — a scripted server runs in its own process (``tether scripted serve --port 0``) and
reports the seconds it spent serving; overhead per turn = (client wall time − server time) /
requests served. The floor is a raw httpx loop that keeps one ``AsyncClient`` per wire for the
whole process, as a careful hand-written loop would, with dict messages and one JSON encode per
request. Against it: tether (a new ``Agent("openai/plan")`` or ``Agent("anthropic/plan")`` per run,
as a program would build it), tether with a ``RunStore`` and a ``JsonlTracer`` (fsync as shipped),
and the same with fsync off. Both wires (Chat Completions, Messages), 3 turns (``plan``) and 200
turns (``runaway`` capped at 200), streaming and not. Every harness gets the same two tools with
the same bodies (``bench/_peers/peer_common.py``). All runs share one event loop; the kinds are
interleaved (the order rotates every repetition) and the figures are medians.

**startup** — wall time of ``python -c "import tether"``, ``… from tether import Agent, run,
tool`` and ``tether --help`` against ``python -c pass``, interleaved, medians. The targets are
absolute; the bare interpreter is printed beside them for scale.

**first** — in a fresh process: the first run's time minus the median of the next five (``plan``,
no store and with store), medians over several processes.

**rss** — peak RSS (``VmHWM``, the ``ru_maxrss`` of its own memory) of a process that does one 200-turn run: raw loop, tether,
tether with store and tracer; each in its own process, interleaved, medians.

**server** — RSS of a fresh ``tether scripted serve`` before, during and after a few thousand
requests (200-turn runs of the raw loop, both wires, streaming and not); flat means no growth over
the second half (a bounded cache may fill in the first).

Writes bench/results/overhead.json.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import resource
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
sys.path.insert(0, str(ROOT / "bench" / "_peers"))

from peer_common import PROMPT, TOOL_IMPLS, TOOL_SPECS, list_files, read_file  # noqa: E402

from bench._results import start_server, tether_commit, write_results  # noqa: E402

WORKSPACE = ROOT / "examples" / "workspace"
KINDS = ("raw", "tether", "tether+store", "tether+store-nofsync")
TARGETS = {
    "ratio": 2.0,  # tether / raw, per turn, at 3 and 200 turns, streaming and not
    "ratio_store": 3.0,  # tether with RunStore + JsonlTracer (fsync as shipped) / raw
    "import_tether_ms": 30.0,
    "import_api_ms": 150.0,
    "help_ms": 100.0,
    "first_run_extra_ms": 50.0,
    "rss_factor": 1.2,
    "rss_extra_mb": 20.0,
    "server_growth_mb": 20.0,  # over the second half of the requests: caches may fill, then must stop
}
ISSUE_RAW_IMPORT_MS = 50.0  # the raw loop's import where the startup targets were set (issue 10's table)


# --------------------------------------------------------------------------- the raw floor

_CLIENTS: dict[str, httpx.AsyncClient] = {}


def raw_client(wire: str) -> httpx.AsyncClient:
    """One client per wire for the whole process (and its connection pool), as a careful loop keeps."""
    client = _CLIENTS.get(wire)
    if client is None:
        base = os.environ["TETHER_BENCH_BASE_URL"]
        if wire == "anthropic":
            client = httpx.AsyncClient(
                base_url=base.removesuffix("/v1"),
                timeout=60,
                headers={"anthropic-version": "2023-06-01", "x-api-key": "dummy"},
            )
        else:
            client = httpx.AsyncClient(base_url=base, timeout=60, headers={"authorization": "Bearer dummy"})
        _CLIENTS[wire] = client
    return client


async def close_raw_clients() -> None:
    for client in _CLIENTS.values():
        await client.aclose()
    _CLIENTS.clear()


OPENAI_TOOLS = [{"type": "function", "function": spec} for spec in TOOL_SPECS]
ANTHROPIC_TOOLS = [
    {"name": s["name"], "description": s["description"], "input_schema": s["parameters"]} for s in TOOL_SPECS
]
JSON_HEADERS = {"content-type": "application/json"}


async def raw_openai(scenario: str, max_turns: int, stream: bool) -> int:
    """The smallest honest Chat Completions loop: dict messages, one JSON encode per request."""
    client = raw_client("openai")
    messages: list[dict[str, Any]] = [{"role": "user", "content": PROMPT}]
    turns = 0
    while turns < max_turns:
        body: dict[str, Any] = {"model": scenario, "messages": messages, "tools": OPENAI_TOOLS, "max_tokens": 4096}
        if stream:
            body["stream"] = True
            body["stream_options"] = {"include_usage": True}
            message = await _raw_openai_stream(client, json.dumps(body).encode())
        else:
            r = await client.post("/chat/completions", content=json.dumps(body).encode(), headers=JSON_HEADERS)
            r.raise_for_status()
            message = r.json()["choices"][0]["message"]
        turns += 1
        if message.get("content") is None:
            message["content"] = ""  # the strictest servers refuse null beside tool calls
        messages.append(message)
        calls = message.get("tool_calls") or []
        if not calls:
            break
        for c in calls:
            out = TOOL_IMPLS[c["function"]["name"]](json.loads(c["function"]["arguments"] or "{}"))
            messages.append({"role": "tool", "tool_call_id": c["id"], "content": out})
    return turns


async def _raw_openai_stream(client: httpx.AsyncClient, content: bytes) -> dict[str, Any]:
    text: list[str] = []
    calls: dict[int, dict[str, Any]] = {}
    async with client.stream("POST", "/chat/completions", content=content, headers=JSON_HEADERS) as r:
        r.raise_for_status()
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
    message: dict[str, Any] = {"role": "assistant", "content": "".join(text)}
    if calls:
        message["tool_calls"] = [
            {"id": s["id"], "type": "function", "function": {"name": s["name"], "arguments": s["args"]}}
            for _, s in sorted(calls.items())
        ]
    return message


async def raw_anthropic(scenario: str, max_turns: int, stream: bool) -> int:
    """The smallest honest Messages loop: dict messages, one JSON encode per request."""
    client = raw_client("anthropic")
    messages: list[dict[str, Any]] = [{"role": "user", "content": PROMPT}]
    turns = 0
    while turns < max_turns:
        body: dict[str, Any] = {"model": scenario, "max_tokens": 4096, "messages": messages, "tools": ANTHROPIC_TOOLS}
        if stream:
            body["stream"] = True
            blocks = await _raw_anthropic_stream(client, json.dumps(body).encode())
        else:
            r = await client.post("/v1/messages", content=json.dumps(body).encode(), headers=JSON_HEADERS)
            r.raise_for_status()
            blocks = r.json()["content"]
        turns += 1
        messages.append({"role": "assistant", "content": blocks})
        calls = [b for b in blocks if b["type"] == "tool_use"]
        if not calls:
            break
        messages.append(
            {
                "role": "user",
                "content": [
                    {"type": "tool_result", "tool_use_id": c["id"], "content": TOOL_IMPLS[c["name"]](c["input"])}
                    for c in calls
                ],
            }
        )
    return turns


async def _raw_anthropic_stream(client: httpx.AsyncClient, content: bytes) -> list[dict[str, Any]]:
    blocks: dict[int, dict[str, Any]] = {}
    partial: dict[int, str] = {}
    async with client.stream("POST", "/v1/messages", content=content, headers=JSON_HEADERS) as r:
        r.raise_for_status()
        async for line in r.aiter_lines():
            if not line.startswith("data: "):
                continue
            event = json.loads(line[6:])
            kind = event["type"]
            if kind == "content_block_start":
                blocks[event["index"]] = dict(event["content_block"])
                partial[event["index"]] = ""
            elif kind == "content_block_delta":
                delta, block = event["delta"], blocks[event["index"]]
                if delta["type"] == "text_delta":
                    block["text"] = block.get("text", "") + delta["text"]
                elif delta["type"] == "input_json_delta":
                    partial[event["index"]] += delta["partial_json"]
    for i, block in blocks.items():
        if block["type"] == "tool_use":
            block["input"] = json.loads(partial[i]) if partial[i] else {}
    return [blocks[i] for i in sorted(blocks)]


# --------------------------------------------------------------------------- tether

_TETHER_TOOLS: list[Any] = []


def tether_tools() -> list[Any]:
    """The same two tool bodies as the raw loop's, as tether tools."""
    if not _TETHER_TOOLS:
        from tether import tool

        _TETHER_TOOLS.extend([tool(read_only=True)(list_files), tool(read_only=True)(read_file)])
    return _TETHER_TOOLS


async def tether_run(
    wire: str, scenario: str, max_turns: int, stream: bool, home: Path | None, fsync: bool = True
) -> int:
    from tether import Agent, JsonlTracer, RunStore, run

    agent = Agent(f"{wire}/{scenario}", tools=tether_tools(), cwd=WORKSPACE, max_turns=max_turns, stream=stream)
    store = RunStore(home / "runs", fsync=fsync) if home else None
    tracer = JsonlTracer(home / "traces") if home else None
    try:
        result = await run(agent, PROMPT, store=store, tracer=tracer)
    finally:
        if tracer is not None:
            tracer.close()
    return result.turns


_HOMES: dict[str, Path] = {}


def home_for(kind: str) -> Path | None:
    """One home per kind for the whole benchmark, as a program keeps its ``$TETHER_HOME``: each run
    adds its own directory under ``runs/`` and its own trace file, inside the timed region; making
    and deleting the home itself is not part of a run, so it happens outside it."""
    if not kind.startswith("tether+store"):
        return None
    if kind not in _HOMES:
        _HOMES[kind] = Path(tempfile.mkdtemp(prefix="tether-overhead-"))
    return _HOMES[kind]


def remove_homes() -> None:
    for home in _HOMES.values():
        shutil.rmtree(home, ignore_errors=True)
    _HOMES.clear()


async def one_run(kind: str, wire: str, scenario: str, max_turns: int, stream: bool) -> int:
    if kind == "raw":
        loop = raw_anthropic if wire == "anthropic" else raw_openai
        return await loop(scenario, max_turns, stream)
    return await tether_run(wire, scenario, max_turns, stream, home_for(kind), fsync=not kind.endswith("nofsync"))


# --------------------------------------------------------------------------- the server


def stop_server(proc: subprocess.Popen[str]) -> None:
    proc.terminate()
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def use_server(base: str) -> None:
    """Point both loops at ``base``: the raw clients by variable, tether by its ordinary variables."""
    os.environ.pop("LLM_BASE_URL", None)
    os.environ["TETHER_BENCH_BASE_URL"] = base
    os.environ["OPENAI_BASE_URL"] = base
    os.environ["ANTHROPIC_BASE_URL"] = base.removesuffix("/v1")
    os.environ.setdefault("OPENAI_API_KEY", "dummy")
    os.environ.setdefault("ANTHROPIC_API_KEY", "dummy")


class Stats:
    def __init__(self, base: str) -> None:
        self.client = httpx.AsyncClient(base_url=base.removesuffix("/v1"), timeout=30)

    async def get(self) -> tuple[int, float]:
        s = (await self.client.get("/_stats")).json()
        return int(s["requests"]), float(s["server_s"])


async def timed(stats: Stats, coro: Any) -> dict[str, float]:
    n0, s0 = await stats.get()
    t0 = time.perf_counter()
    await coro
    wall = time.perf_counter() - t0
    await asyncio.sleep(0.01)  # the server counts a request just after sending its answer
    n1, s1 = await stats.get()
    requests, served = n1 - n0, s1 - s0
    return {
        "requests": requests,
        "ms": (wall - served) * 1000,
        "wall_ms_per_turn": wall / requests * 1000,
        "ms_per_turn": (wall - served) / requests * 1000,
    }


# --------------------------------------------------------------------------- sections


async def loops_section(base: str, plan_reps: int, long_reps: int, long_turns: int) -> list[dict[str, Any]]:
    stats = Stats(base)
    out: list[dict[str, Any]] = []
    # Warm every path once (imports, the server's tokenizer, the raw clients' connections).
    for wire in ("openai", "anthropic"):
        for kind in KINDS:
            for stream in (False, True):
                await one_run(kind, wire, "plan", 3, stream)
    head = (
        f"{'wire':9} {'turns':>5} {'stream':6} {'raw':>7} {'tether':>7} {'ratio':>6} {'+store':>7} {'ratio':>6} "
        f"{'nofsync':>8} {'ratio':>6}   targets: ratio ≤ {TARGETS['ratio']:.0f}, with store ≤ "
        f"{TARGETS['ratio_store']:.0f} (ms/turn = client wall − server time, per request)"
    )
    print(head)
    for wire in ("openai", "anthropic"):
        for scenario, cap, reps in (("plan", 3, plan_reps), ("runaway", long_turns, long_reps)):
            for stream in (False, True):
                samples: dict[str, list[dict[str, float]]] = {k: [] for k in KINDS}
                for rep in range(reps):
                    order = KINDS[rep % len(KINDS) :] + KINDS[: rep % len(KINDS)]
                    for kind in order:
                        samples[kind].append(await timed(stats, one_run(kind, wire, scenario, cap, stream)))
                row: dict[str, Any] = {
                    "wire": wire,
                    "scenario": scenario,
                    "stream": stream,
                    "reps": reps,
                    "turns": int(statistics.median(s["requests"] for s in samples["tether"])),
                }
                for kind in KINDS:
                    key = kind.replace("+", "_").replace("-", "_")
                    row[f"{key}_ms_per_turn"] = statistics.median(s["ms_per_turn"] for s in samples[kind])
                    row[f"{key}_wall_ms_per_turn"] = statistics.median(s["wall_ms_per_turn"] for s in samples[kind])
                raw = row["raw_ms_per_turn"]
                row["ratio"] = row["tether_ms_per_turn"] / raw
                row["ratio_store"] = row["tether_store_ms_per_turn"] / raw
                row["ratio_store_nofsync"] = row["tether_store_nofsync_ms_per_turn"] / raw
                row["meets_ratio"] = row["ratio"] <= TARGETS["ratio"]
                row["meets_ratio_store"] = row["ratio_store"] <= TARGETS["ratio_store"]
                out.append(row)
                flag = ("ok" if row["meets_ratio"] else "MISS") + "/" + ("ok" if row["meets_ratio_store"] else "MISS")
                print(
                    f"{wire:9} {row['turns']:>5} {stream!s:6} {raw:>7.3f} {row['tether_ms_per_turn']:>7.3f} "
                    f"{row['ratio']:>6.2f} {row['tether_store_ms_per_turn']:>7.3f} {row['ratio_store']:>6.2f} "
                    f"{row['tether_store_nofsync_ms_per_turn']:>8.3f} {row['ratio_store_nofsync']:>6.2f}   {flag}",
                    flush=True,
                )
    await stats.client.aclose()
    await close_raw_clients()
    remove_homes()
    return out


def startup_section(repeats: int) -> dict[str, Any]:
    tether_bin = str(Path(sys.executable).with_name("tether"))
    if not Path(tether_bin).exists():
        tether_bin = shutil.which("tether") or "tether"
    cmds = {
        "python_ms": [sys.executable, "-c", "pass"],
        # What the raw loop imports (the issue measured 0.05 s for it where it set the targets) and
        # what tether's typed state stands on: the machine's yardsticks, measured in the same run.
        "raw_loop_import_ms": [sys.executable, "-c", "import asyncio, json, httpx"],
        "pydantic_floor_ms": [sys.executable, "-c", "import asyncio, pydantic; from pydantic import BaseModel"],
        "import_tether_ms": [sys.executable, "-c", "import tether"],
        "import_api_ms": [sys.executable, "-c", "from tether import Agent, run, tool"],
        "help_ms": [tether_bin, "--help"],
    }
    times: dict[str, list[float]] = {k: [] for k in cmds}
    for cmd in cmds.values():  # one unmeasured pass: the page cache, .pyc files
        subprocess.run(cmd, check=True, capture_output=True)
    for _ in range(repeats):
        for k, cmd in cmds.items():
            t0 = time.perf_counter()
            subprocess.run(cmd, check=True, capture_output=True)
            times[k].append((time.perf_counter() - t0) * 1000)
    out: dict[str, Any] = {k: statistics.median(v) for k, v in times.items()}
    out["repeats"] = repeats
    py = out["python_ms"]
    print(f"\nstartup (medians of {repeats}, interleaved; python -c pass = {py:.0f} ms in this run)")
    for key, label in (
        ("import_tether_ms", "import tether"),
        ("import_api_ms", "from tether import Agent, run, tool"),
        ("help_ms", "tether --help"),
    ):
        ok = out[key] <= TARGETS[key]
        out[f"meets_{key.removesuffix('_ms')}"] = ok
        print(
            f"  {label:38} {out[key]:>6.0f} ms  (+{out[key] - py:.0f} over python)   "
            f"target ≤ {TARGETS[key]:.0f} ms  {'ok' if ok else 'MISS'}"
        )
    # The targets were set in ms on the issue's machine, where the raw loop imported in 50 ms; the
    # same targets as ratios to the raw loop's import hold on any machine.
    raw = out["raw_loop_import_ms"]
    print(
        f"  yardsticks: the raw loop's imports {raw:.0f} ms (50 ms where the targets were set); "
        f"asyncio + pydantic {out['pydantic_floor_ms']:.0f} ms"
    )
    for key, label in (
        ("import_tether_ms", "import tether"),
        ("import_api_ms", "from tether import Agent, run, tool"),
        ("help_ms", "tether --help"),
    ):
        ratio, limit = out[key] / raw, TARGETS[key] / ISSUE_RAW_IMPORT_MS
        out[f"{key.removesuffix('_ms')}_vs_raw_import"] = ratio
        out[f"meets_{key.removesuffix('_ms')}_as_ratio"] = ratio <= limit
        print(
            f"  {label:38} {ratio:>6.2f}× the raw loop's import   target ≤ {limit:.1f}×  "
            f"{'ok' if ratio <= limit else 'MISS'}"
        )
    return out


def child(args: list[str]) -> dict[str, Any]:
    proc = subprocess.run([sys.executable, __file__, "--child", *args], capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise RuntimeError(f"child {args} failed: {proc.stderr[-2000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def first_section(base: str, processes: int) -> dict[str, Any]:
    out: dict[str, Any] = {"processes": processes}
    print(f"\nfirst run in a process vs later runs (plan, openai wire; medians of {processes} processes)")
    samples: dict[str, list[dict[str, Any]]] = {"tether": [], "tether+store": [], "raw": []}
    for _ in range(processes):
        for kind in samples:
            samples[kind].append(child(["first", kind, base]))
    for kind, rows in samples.items():
        first = statistics.median(r["first_ms"] for r in rows)
        later = statistics.median(r["later_ms"] for r in rows)
        extra = statistics.median(r["first_ms"] - r["later_ms"] for r in rows)
        ok = extra <= TARGETS["first_run_extra_ms"]
        out[kind] = {"first_run_ms": first, "later_run_ms": later, "extra_ms": extra, "meets": ok}
        target = (
            f"target ≤ {TARGETS['first_run_extra_ms']:.0f} ms  {'ok' if ok else 'MISS'}" if kind != "raw" else "(floor)"
        )
        print(
            f"  {kind:14} first {first:>7.1f} ms   later {later:>6.1f} ms   first − later {extra:>6.1f} ms   {target}"
        )
    return out


def rss_section(base: str, processes: int, turns: int) -> dict[str, Any]:
    kinds = ("raw", "tether", "tether+store")
    samples: dict[str, list[float]] = {k: [] for k in kinds}
    for i in range(processes):
        for kind in kinds[i % 3 :] + kinds[: i % 3]:
            samples[kind].append(child(["rss", kind, base, str(turns)])["maxrss_mb"])
    out: dict[str, Any] = {"processes": processes, "turns": turns}
    raw = statistics.median(samples["raw"])
    limit = TARGETS["rss_factor"] * raw + TARGETS["rss_extra_mb"]
    print(
        f"\npeak RSS of one {turns}-turn run in a fresh process (VmHWM, medians of {processes}); "
        f"target ≤ {TARGETS['rss_factor']}× raw + {TARGETS['rss_extra_mb']:.0f} MB = {limit:.0f} MB"
    )
    for kind in kinds:
        mb = statistics.median(samples[kind])
        ok = mb <= limit
        out[kind] = {"peak_rss_mb": mb, "meets": ok}
        print(f"  {kind:14} {mb:>6.1f} MB   {'(floor)' if kind == 'raw' else ('ok' if ok else 'MISS')}")
    out["limit_mb"] = limit
    return out


def peak_rss_mb() -> float:
    """This process's peak RSS. ``ru_maxrss`` would do, but on Linux a child started by vfork/exec
    inherits its parent's figure as a floor; ``VmHWM`` is the peak of this process's own memory."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def rss_mb(pid: int) -> tuple[float, float]:
    """(VmRSS, VmHWM) of a process in MB."""
    fields = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        name, _, value = line.partition(":")
        if name in ("VmRSS", "VmHWM"):
            fields[name] = int(value.split()[0]) / 1024
    return fields["VmRSS"], fields["VmHWM"]


async def _drive(requests: int, turns: int) -> int:
    sent = 0
    i = 0
    while sent < requests:
        wire = ("openai", "anthropic")[i % 2]
        stream = (i // 2) % 2 == 1
        loop = raw_anthropic if wire == "anthropic" else raw_openai
        sent += await loop("runaway", min(turns, requests - sent), stream)
        i += 1
    await close_raw_clients()
    return sent


def server_section(requests: int, turns: int) -> dict[str, Any]:
    proc, base = start_server([sys.executable, "-m", "tether.cli", "scripted", "serve", "--port", "0"])
    checkpoints: list[dict[str, float]] = []
    try:
        use_server(base)
        asyncio.run(_drive(3, 3))  # warm: the tokenizer is loaded on the first request
        before, _ = rss_mb(proc.pid)
        checkpoints.append({"requests": 0, "rss_mb": before})
        t0 = time.perf_counter()
        sent = 0
        for quarter in range(1, 5):
            sent += asyncio.run(_drive(requests * quarter // 4 - sent, turns))
            checkpoints.append({"requests": sent, "rss_mb": rss_mb(proc.pid)[0]})
        seconds = time.perf_counter() - t0
        after, peak = rss_mb(proc.pid)
    finally:
        stop_server(proc)
    growth = after - before
    late = after - checkpoints[2]["rss_mb"]  # over the second half of the requests
    ok = late <= TARGETS["server_growth_mb"]
    path = " → ".join(f"{c['rss_mb']:.0f}" for c in checkpoints)
    print(
        f"\ntether scripted serve: RSS {before:.0f} MB after warm-up → {after:.0f} MB after {sent} requests "
        f"({turns}-turn runs, both wires, streaming and not; peak {peak:.0f} MB, {seconds:.0f} s)\n"
        f"  along the way: {path} MB; growth {growth:+.0f} MB, "
        f"{late:+.0f} MB over the second half   target: flat (second half ≤ {TARGETS['server_growth_mb']:.0f} MB) "
        f"{'ok' if ok else 'MISS'}"
    )
    return {
        "requests": sent,
        "turns_per_run": turns,
        "rss_before_mb": before,
        "rss_after_mb": after,
        "peak_mb": peak,
        "growth_mb": growth,
        "growth_second_half_mb": late,
        "checkpoints": checkpoints,
        "meets": ok,
    }


# --------------------------------------------------------------------------- child processes


def run_child(argv: list[str]) -> None:
    mode, kind, base = argv[0], argv[1], argv[2]
    use_server(base)
    if kind != "raw":
        from tether import Agent, run, tool  # noqa: F401 - imported before timing, as a program would

        tether_tools()
    out: dict[str, Any] = {}

    async def main() -> None:
        stats = Stats(base)
        if mode == "first":
            times = [(await timed(stats, one_run(kind, "openai", "plan", 3, False)))["ms"] for _ in range(6)]
            out["first_ms"], out["later_ms"] = times[0], statistics.median(times[1:])
        else:
            await one_run(kind, "openai", "runaway", int(argv[3]), False)
        await stats.client.aclose()
        await close_raw_clients()

    try:
        asyncio.run(main())
    finally:
        remove_homes()
    out["maxrss_mb"] = peak_rss_mb()
    print(json.dumps(out))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="about a minute: fewer repetitions and requests")
    parser.add_argument(
        "--only",
        default="loops,startup,first,rss,server",
        help="comma-separated sections: loops, startup, first, rss, server",
    )
    parser.add_argument(
        "--reps",
        type=int,
        help="repetitions of the 3-turn runs (default 15, quick 5); the "
        "200-turn runs get a third of them, at least 3 (quick: 1)",
    )
    parser.add_argument("--turns", type=int, default=200, help="length of the long runs (default 200)")
    parser.add_argument("--server-requests", type=int, help="requests sent to the server in the memory check")
    parser.add_argument("--child", nargs=argparse.REMAINDER, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        run_child(args.child)
        return
    sections = {s.strip() for s in args.only.split(",") if s.strip()}
    plan_reps = args.reps or (5 if args.quick else 15)
    long_reps = 1 if args.quick and not args.reps else max(3, plan_reps // 3)
    results: dict[str, Any] = {
        "machine": {
            "python": platform.python_version(),
            "cpus": os.cpu_count(),
            "platform": platform.platform(),
            "load_average_at_start": os.getloadavg(),
            "tether_commit": tether_commit(),
        },
        "quick": args.quick,
        "targets": TARGETS,
        "units": "ms per turn = (client wall − server time) / requests",
    }
    previous = ROOT / "bench" / "results" / "overhead.json"
    if sections != {"loops", "startup", "first", "rss", "server"} and previous.exists():
        try:  # a partial run keeps the other sections' last figures
            old = json.loads(previous.read_text())
            results.update(
                {k: v for k, v in old.items() if k in ("loops", "startup", "first_run", "rss", "server_rss")}
            )
        except ValueError:
            pass
    started = time.perf_counter()
    if "loops" in sections or "first" in sections or "rss" in sections:
        proc, base = start_server([sys.executable, "-m", "tether.cli", "scripted", "serve", "--port", "0"])
        try:
            use_server(base)
            if "loops" in sections:
                results["loops"] = asyncio.run(loops_section(base, plan_reps, long_reps, args.turns))
            if "first" in sections:
                results["first_run"] = first_section(base, 3 if args.quick else 7)
            if "rss" in sections:
                results["rss"] = rss_section(base, 1 if args.quick else 3, args.turns)
        finally:
            stop_server(proc)
    if "startup" in sections:
        results["startup"] = startup_section(5 if args.quick else 15)
    if "server" in sections:
        results["server_rss"] = server_section(args.server_requests or (1000 if args.quick else 4000), args.turns)
    results["seconds"] = time.perf_counter() - started
    write_results("overhead", results)


if __name__ == "__main__":
    main()
