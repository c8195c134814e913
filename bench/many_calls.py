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
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench._results import ROOT, tether_commit
from tether import Agent, RunState, run_sync
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


def one_run(calls: int, parallel: bool, root: Path, fsync: bool = True) -> tuple[float, int]:
    agent = make_agent(calls, parallel)
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
    parser.add_argument("--calls", type=int, nargs="+", default=[100, 1000, 5000])
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
    disk = "store on, no fsync" if args.no_fsync else "store on"
    print(f"side-effecting calls in one reply, {disk}, median of {args.repeat} (commit {tether_commit()})\n")
    print("| tool | calls | wall (s) | per call (ms) | fsyncs per run |")
    print("|---|---|---|---|---|")
    for row in rows:
        print(
            f"| {row['mode']} | {row['calls']:,} | {row['median_s']:.3f} | {row['per_call_ms']:.3f} | {row['fsyncs']:g} |"
        )
    out = ROOT / "bench" / "results" / "many_calls.json"
    kept = json.loads(out.read_text()) if out.exists() else {}
    kept[args.label] = {"commit": tether_commit(), "repeat": args.repeat, "fsync": not args.no_fsync, "rows": rows}
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(kept, indent=2))
    print(f"\nwrote {out.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
