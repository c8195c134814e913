"""Stop during a sub-agent: time from ``CancelSignal.cancel`` to the parent's ``done`` event.

    python bench/subagents.py              # 20 runs per case (about 40 s)
    python bench/subagents.py --runs 5     # quicker
    python bench/subagents.py --steps-only # only what a long child's steps cost (below)

Two places a Stop can land, each measured in a plain run (the baseline) and in a parent whose
sub-agent (``agent.as_tool``) is doing the same thing, without and with a ``RunStore`` (fsync as
shipped, so the stop's saves are in the figure):

* **slow tool** — the reference's ``scan_archive`` (3 s, ``scripted/slow`` with the file tools);
  Stop is pressed 0.1 s after its first ``tool_progress`` event;
* **slow model call** — a request to a scripted OpenAI-compatible server on loopback (in this
  process, on a thread) that stalls (``stall:3``) before answering; Stop is pressed 0.1 s after
  the server received the request.

Then **a long child**: a child of ``--steps`` steps (default 120: one tool call a reply) run inside a
parent, against the same agent run alone, both with a ``RunStore`` (fsync as shipped); the ratio
is what a child's steps cost inside a parent (its state used to be rewritten inside the parent's at
every step: 13.6 s against 0.45 s alone for 120 steps).

The parent is a FunctionModel that delegates at once. Stop is pressed by a timer callback on the
run's event loop; the figure is the time from that call to the parent's ``done`` event reaching
the caller. Medians (and p90, max) over the runs; every run must end ``interrupted`` (cancelled),
the child saved as stopped inside the parent. Writes bench/results/subagents.json.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import platform
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench._results import tether_commit, write_results  # noqa: E402
from tether import Agent, CancelSignal, RunState, RunStore, run_stream, tool  # noqa: E402
from tether.harness.subagent import children  # noqa: E402
from tether.messages import AssistantMessage, Message, TextPart, ToolCallPart  # noqa: E402
from tether.providers.base import ModelRequest  # noqa: E402
from tether.providers.openai_chat import OpenAIChatProvider  # noqa: E402
from tether.testing import FunctionModel, ScriptedServer  # noqa: E402
from tether.tools.demo import DEMO_TOOLS  # noqa: E402
from tether.tools.files import FILE_TOOLS  # noqa: E402
from tether.usage import Usage  # noqa: E402

STALL_S = 3


def workspace() -> Path:
    d = Path(tempfile.mkdtemp(prefix="tether-bench-"))
    shutil.copytree(ROOT / "examples" / "workspace", d / "ws")
    return d / "ws"


def delegating_parent() -> FunctionModel:
    """Turn 0 hands the task to the sub-agent ``worker``; turn 1 answers."""

    def fn(messages: list[Message], request: ModelRequest) -> AssistantMessage:
        if not any(isinstance(m, AssistantMessage) for m in messages):
            call = ToolCallPart(id="p1", name="worker", arguments=json.dumps({"task": "do the slow thing"}))
            return AssistantMessage(
                content=(call,), finish_reason="tool_calls", usage=Usage(prompt_tokens=300, completion_tokens=20)
            )
        return AssistantMessage(
            content=(TextPart(text="done"),), finish_reason="stop", usage=Usage(prompt_tokens=400, completion_tokens=5)
        )

    return FunctionModel(fn)


def worker(where: str, server: ScriptedServer, ws: Path) -> Agent:
    """What does the slow thing: the slow tool, or a model whose request stalls."""
    if where == "tool":
        return Agent("scripted/slow", tools=[*FILE_TOOLS, *DEMO_TOOLS], cwd=ws)
    server.set_faults([f"stall:{STALL_S}"])
    provider = OpenAIChatProvider(base_url=server.base_url, api_key="unused")
    provider.model_id = "hello"  # type: ignore[attr-defined]
    return Agent(provider, cwd=ws)


async def once(where: str, shape: str, store: bool, server: ScriptedServer) -> tuple[float, dict[str, Any]]:
    """One run stopped in the slow part; (ms from Stop to done, what the run ended as)."""
    ws = workspace()
    inner = worker(where, server, ws)
    agent = inner if shape == "plain" else Agent(delegating_parent(), tools=[inner.as_tool("worker", "Does it.")])
    signal = CancelSignal()
    loop = asyncio.get_running_loop()
    pressed: list[float] = []

    def press() -> None:
        pressed.append(time.perf_counter())
        signal.cancel("user pressed Stop")

    armed: list[asyncio.TimerHandle] = []

    def arm() -> None:
        if not armed:
            armed.append(loop.call_later(0.1, press))

    async def when_the_request_arrives() -> None:
        while not server.received:
            await asyncio.sleep(0.002)
        arm()

    state = RunState()
    runs = RunStore(ws.parent / "runs") if store else None
    watcher = asyncio.create_task(when_the_request_arrives()) if where == "model" else None
    done_at, result = 0.0, None
    async for e in run_stream(agent, "do the slow thing", state=state, store=runs, signal=signal):
        if where == "tool" and e.type == "tool_progress":
            arm()
        if e.type == "done" and e.run_id == state.run_id:
            done_at, result = time.perf_counter(), e.result
    if watcher is not None:
        watcher.cancel()  # done already, unless the run ended before its request arrived
        with contextlib.suppress(asyncio.CancelledError):
            await watcher
    shutil.rmtree(ws.parent, ignore_errors=True)
    assert result is not None and pressed, "the run ended before Stop was pressed"
    child = children(state).get("p1") if shape == "child" else None
    said = str(child.get("reason") or "") if isinstance(child, dict) else ""
    outcome = {
        "status": result.status,
        "interruption": result.interruption.type if result.interruption else None,
        "child": f"{child.get('status')} ({said.removeprefix('cancelled: ')})" if isinstance(child, dict) else None,
    }
    return (done_at - pressed[0]) * 1000, outcome


def stepping_child(steps: int) -> Agent:
    """A child that calls a cheap read-only tool ``steps`` times, one call a reply, then answers."""

    @tool(read_only=True)
    def step(n: int) -> str:
        """One step of the work."""
        return f"step {n} done: " + "detail " * 30

    def fn(messages: list[Message], request: ModelRequest) -> AssistantMessage:
        t = sum(isinstance(m, AssistantMessage) for m in messages)
        usage = Usage(prompt_tokens=100, completion_tokens=10)
        if t < steps:
            call = ToolCallPart(id=f"s{t}", name="step", arguments=json.dumps({"n": t}))
            return AssistantMessage(content=(call,), finish_reason="tool_calls", usage=usage)
        return AssistantMessage(content=(TextPart(text="stepped"),), finish_reason="stop", usage=usage)

    return Agent(FunctionModel(fn), tools=[step], max_turns=steps + 1)


async def long_child(steps: int, shape: str) -> float:
    """Seconds for a child of ``steps`` steps, run alone or inside a parent, with a RunStore."""
    root = Path(tempfile.mkdtemp(prefix="tether-bench-"))
    inner = stepping_child(steps)
    parent = Agent(delegating_parent(), tools=[inner.as_tool("worker", "Steps.")], max_turns=steps + 10)
    agent = inner if shape == "alone" else parent
    state = RunState()
    started = time.perf_counter()
    result = None
    async for e in run_stream(agent, "step", state=state, store=RunStore(root / "runs")):
        if e.type == "done" and e.run_id == state.run_id:
            result = e.result
    took = time.perf_counter() - started
    shutil.rmtree(root, ignore_errors=True)
    assert result is not None and result.status == "completed", result
    return took


def long_child_rows(steps: int, runs: int) -> list[dict[str, Any]]:
    """Alone and inside a parent, interleaved, ``runs`` times each: medians and the ratio."""
    took: dict[str, list[float]] = {"alone": [], "inside a parent": []}
    for _ in range(runs):
        for shape in took:
            took[shape].append(asyncio.run(long_child(steps, shape)))
    alone, inside = statistics.median(took["alone"]), statistics.median(took["inside a parent"])
    print(f"\n## A child of {steps} steps (RunStore, fsync as shipped), median of {runs}\n")
    print(f"alone {alone:.2f} s   inside a parent {inside:.2f} s   ratio {inside / alone:.2f}x")
    return [
        {"steps": steps, "run": shape, "median s": round(statistics.median(xs), 3), "samples_s": xs}
        for shape, xs in took.items()
    ] + [{"steps": steps, "ratio inside/alone": round(inside / alone, 2)}]


def p90(xs: list[float]) -> float:
    s = sorted(xs)
    return s[min(len(s) - 1, round(0.9 * (len(s) - 1)))]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument("--steps", type=int, default=120, help="steps of the long child (default 120)")
    ap.add_argument("--steps-only", action="store_true", help="measure only the long child")
    args = ap.parse_args()
    long_rows = long_child_rows(args.steps, 3)
    if args.steps_only:
        return
    cases = [
        (where, shape, store) for where in ("tool", "model") for store in (False, True) for shape in ("plain", "child")
    ]
    times: dict[tuple[str, str, bool], list[float]] = {c: [] for c in cases}
    outcomes: dict[tuple[str, str, bool], set[str]] = {c: set() for c in cases}

    async def all_runs(server: ScriptedServer) -> None:
        for _ in range(args.runs):  # interleaved: every case once per round
            for case in cases:
                ms, outcome = await once(*case, server)
                times[case].append(ms)
                outcomes[case].add(
                    f"{outcome['status']}/{outcome['interruption']}"
                    + (f", child {outcome['child']}" if outcome["child"] else "")
                )

    with ScriptedServer() as server:
        asyncio.run(all_runs(server))

    rows = []
    header = ["Stop lands in", "store", "run", "median ms", "p90 ms", "max ms", "child − plain (median)", "ended as"]
    for where, shape, store in cases:
        xs = times[(where, shape, store)]
        base = statistics.median(times[(where, "plain", store)])
        rows.append(
            [
                f"slow {where}" + (" call" if where == "model" else ""),
                "RunStore" if store else "none",
                "plain (baseline)" if shape == "plain" else "inside a sub-agent",
                f"{statistics.median(xs):.2f}",
                f"{p90(xs):.2f}",
                f"{max(xs):.2f}",
                "-" if shape == "plain" else f"{statistics.median(xs) - base:+.2f} ms",
                "; ".join(sorted(outcomes[(where, shape, store)])),
            ]
        )
    widths = [max(len(str(x)) for x in [h, *[r[i] for r in rows]]) for i, h in enumerate(header)]
    print(f"\n## Stop → parent's done, {args.runs} runs per row\n")
    print("  ".join(h.ljust(w) for h, w in zip(header, widths, strict=True)))
    for r in rows:
        print("  ".join(str(x).ljust(w) for x, w in zip(r, widths, strict=True)))
    write_results(
        "subagents",
        {
            "commit": tether_commit(),
            "python": platform.python_version(),
            "runs": args.runs,
            "stall_s": STALL_S,
            "long_child": long_rows,
            "rows": [dict(zip(header, r, strict=True)) for r in rows],
            "samples_ms": {
                f"{w}/{'store' if st else 'nostore'}/{sh}": [round(x, 3) for x in times[(w, sh, st)]]
                for w, sh, st in cases
            },
        },
    )


if __name__ == "__main__":
    main()
