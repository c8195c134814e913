"""Many side-effecting tool calls in one model reply, with the store on (fsyncs included).

    python bench/many_calls.py [--calls 100 1000 5000] [--repeat 3] [--label after] [--no-fsync]

One run per row: a reply that asks for N calls of a tool with side effects (neither read-only
nor idempotent, so each call leaves a durable intent before it starts), then a final answer.
Two tools: one as side effects are by default (a barrier: each call waits for the one before,
and its intent is made durable as it starts), and one marked ``parallel=True`` (one batch: every
intent made durable together before any call starts, then at most ``max_parallel_tools`` at
once). The tool itself does nothing, so what is measured is tether's own cost per call: the
intent, the result, the saves and their fsyncs, and what the loop reads of the run's state per
call. Prints the median wall time of ``--repeat`` runs per size, the time per call, and the
fsyncs the run made (counted by wrapping ``os.fsync``/``os.fdatasync``). ``--no-fsync`` runs the store with
``fsync=False``: what is left is tether's own work, without the disk's flushes. Compare commits by running it on each
(``--label`` names the entry in bench/results/many_calls.json; other labels are kept).

The ``loop guard`` rows (``--guard-calls``, default 200 and 2,000) run the same reply of side
effects one after another with ``LoopGuard()`` in the middleware, and report the time spent inside
the guard's hooks alone (its tool's own time taken out). ``--calls`` with no sizes runs only them.
Measured (median of 3, store on, no fsync, on a busy shared machine; before = 6a99e8d, a walk back
over the reply's results for each call; after = an index of the turn extended as it grows; labels
``s11-guard-before`` and ``s11-guard-after`` in the results):

| calls | in the guard before (s) | after (s) | before / after |
|---|---|---|---|
| 200 | 0.205 | 0.109 | 1.9 |
| 2,000 | 22.4 | 0.81 | 28 |
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench._results import ROOT, tether_commit
from tether import Agent, RunState, run_sync
from tether.harness.loop_guard import LoopGuard
from tether.harness.store import RunStore
from tether.messages import ToolMessage
from tether.providers.scripted import Reply
from tether.testing import FunctionModel
from tether.tools.base import tool

_SYNCS = [0]


def _counting(real: Any) -> Any:
    def sync(fd: int) -> None:
        _SYNCS[0] += 1
        real(fd)

    return sync


def make_agent(calls: int, parallel: bool) -> Agent:
    @tool(parallel=parallel or None)
    async def post(n: int) -> str:
        """Post message n (a side effect)."""
        return f"posted {n}"

    def reply(messages: list[Any], request: Any) -> Reply | str:
        if any(isinstance(m, ToolMessage) for m in messages):
            return "posted them all"
        return Reply(calls=tuple((f"c{i}", "post", {"n": i}) for i in range(calls)))

    return Agent(FunctionModel(reply), tools=[post])


class TimedGuard(LoopGuard):
    """``LoopGuard`` with a clock on its hooks: ``spent`` is the time inside them, less the tool's."""

    spent = 0.0

    async def before_tool_call(self, ctx: Any, call: Any, args: Any) -> Any:
        started = time.perf_counter()
        try:
            return await super().before_tool_call(ctx, call, args)
        finally:
            self.spent += time.perf_counter() - started

    async def before_model(self, ctx: Any, request: Any) -> Any:
        started = time.perf_counter()
        try:
            return await super().before_model(ctx, request)
        finally:
            self.spent += time.perf_counter() - started

    async def wrap_tool_call(self, ctx: Any, call: Any, args: Any, call_next: Any) -> Any:
        inner = 0.0

        async def timed() -> Any:
            nonlocal inner
            started = time.perf_counter()
            try:
                return await call_next()
            finally:
                inner += time.perf_counter() - started

        started = time.perf_counter()
        try:
            return await super().wrap_tool_call(ctx, call, args, timed)
        finally:
            self.spent += time.perf_counter() - started - inner


def one_run(
    calls: int, parallel: bool, root: Path, fsync: bool = True, guard: TimedGuard | None = None
) -> tuple[float, int]:
    agent = make_agent(calls, parallel)
    if guard is not None:
        agent = replace(agent, middleware=[guard])
    store = RunStore(root, fsync=fsync)
    before = _SYNCS[0]
    started = time.perf_counter()
    result = run_sync(agent, "post them", state=RunState(), store=store)
    took = time.perf_counter() - started
    assert result.status == "completed", result.reason
    assert result.tool_stats["post"]["calls"] == calls
    return took, _SYNCS[0] - before


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--calls", type=int, nargs="*", default=[100, 1000, 5000])
    parser.add_argument("--guard-calls", type=int, nargs="*", default=[200, 2000])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--label", default="latest")
    parser.add_argument("--no-fsync", action="store_true", help="the store skips its fsyncs")
    args = parser.parse_args()
    os.fsync = _counting(os.fsync)
    if hasattr(os, "fdatasync"):
        os.fdatasync = _counting(os.fdatasync)
    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory() as tmp:
        for calls, parallel in [(n, p) for p in (False, True) for n in args.calls]:
            runs = [
                one_run(calls, parallel, Path(tmp) / f"{calls}-{parallel}-{i}", not args.no_fsync)
                for i in range(args.repeat)
            ]
            times = [t for t, _ in runs]
            med = statistics.median(times)
            rows.append(
                {
                    "mode": "parallel=True" if parallel else "one after another",
                    "calls": calls,
                    "wall_s": times,
                    "median_s": med,
                    "per_call_ms": med / calls * 1000,
                    "fsyncs": statistics.median(s for _, s in runs),
                }
            )
        for calls in args.guard_calls:
            guards = [TimedGuard() for _ in range(args.repeat)]
            runs = [
                one_run(calls, False, Path(tmp) / f"guard-{calls}-{i}", not args.no_fsync, guard)
                for i, guard in enumerate(guards)
            ]
            med = statistics.median(t for t, _ in runs)
            rows.append(
                {
                    "mode": "loop guard, one after another",
                    "calls": calls,
                    "wall_s": [t for t, _ in runs],
                    "median_s": med,
                    "per_call_ms": med / calls * 1000,
                    "fsyncs": statistics.median(s for _, s in runs),
                    "guard_s": statistics.median(g.spent for g in guards),
                }
            )
    disk = "store on, no fsync" if args.no_fsync else "store on"
    print(f"side-effecting calls in one reply, {disk}, median of {args.repeat} (commit {tether_commit()})\n")
    print("| tool | calls | wall (s) | per call (ms) | fsyncs per run | in the loop guard (s) |")
    print("|---|---|---|---|---|---|")
    for row in rows:
        guard = f"{row['guard_s']:.3f}" if "guard_s" in row else "—"
        print(
            f"| {row['mode']} | {row['calls']:,} | {row['median_s']:.3f} | {row['per_call_ms']:.3f} "
            f"| {row['fsyncs']:g} | {guard} |"
        )
    out = ROOT / "bench" / "results" / "many_calls.json"
    kept = json.loads(out.read_text()) if out.exists() else {}
    kept[args.label] = {"commit": tether_commit(), "repeat": args.repeat, "fsync": not args.no_fsync, "rows": rows}
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(kept, indent=2))
    print(f"\nwrote {out.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
