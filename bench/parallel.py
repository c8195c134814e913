"""Parallel tool batches: five 1-second read-only tools in one reply, with the store on.

    python bench/parallel.py [--seconds 1.0] [--calls 5] [--repeat 3]

The same run three ways, each a whole run (two model turns, the store saving every step):
the tools as they are (read-only, so they run together), the same tools marked
``parallel=False`` (one after another: the baseline), and the floor (one tool's sleep). Prints
medians and the ratio; the issue's target is ≤ 1.2 s for five 1-second tools.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench._results import tether_commit, write_results
from tether import Agent, RunState, run_sync
from tether.harness.store import RunStore
from tether.messages import ToolMessage
from tether.providers.scripted import Reply
from tether.testing import FunctionModel
from tether.tools.base import tool


def make_agent(seconds: float, calls: int, parallel: bool | None) -> Agent:
    @tool(read_only=True, parallel=parallel)
    async def fetch_page(n: int) -> str:
        """Fetch page n (a slow read)."""
        await asyncio.sleep(seconds)
        return f"page {n}"

    def reply(messages: list[Any], request: Any) -> Reply | str:
        if any(isinstance(m, ToolMessage) for m in messages):
            return "read every page"
        return Reply(calls=tuple((f"c{i}", "fetch_page", {"n": i}) for i in range(calls)))

    return Agent(FunctionModel(reply), tools=[fetch_page])


def one_run(seconds: float, calls: int, parallel: bool | None, root: Path) -> float:
    agent = make_agent(seconds, calls, parallel)
    store = RunStore(root)
    started = time.perf_counter()
    result = run_sync(agent, "fetch the pages", state=RunState(), store=store)
    took = time.perf_counter() - started
    assert result.status == "completed", result.reason
    return took


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=float, default=1.0)
    parser.add_argument("--calls", type=int, default=5)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    rows: dict[str, list[float]] = {"parallel (read-only default)": [], "one after another (parallel=False)": []}
    with tempfile.TemporaryDirectory() as tmp:
        for i in range(args.repeat):  # interleaved: the machine's noise falls on both alike
            rows["parallel (read-only default)"].append(one_run(args.seconds, args.calls, None, Path(tmp) / f"p{i}"))
            rows["one after another (parallel=False)"].append(
                one_run(args.seconds, args.calls, False, Path(tmp) / f"s{i}")
            )
    par = statistics.median(rows["parallel (read-only default)"])
    seq = statistics.median(rows["one after another (parallel=False)"])
    print(f"{args.calls} read-only tools of {args.seconds:g} s in one reply, store on, median of {args.repeat}\n")
    print(f"| mode | wall (s) | ratio to one tool's {args.seconds:g} s |")
    print("|---|---|---|")
    for name, times in rows.items():
        med = statistics.median(times)
        print(f"| {name} | {med:.3f} | {med / args.seconds:.2f}× |")
    print(f"\nparallel is {seq / par:.1f}× faster than one after another; target ≤ {1.2 * args.seconds:g} s")
    write_results(
        "parallel",
        {
            "commit": tether_commit(),
            "calls": args.calls,
            "seconds": args.seconds,
            "parallel_s": rows["parallel (read-only default)"],
            "sequential_s": rows["one after another (parallel=False)"],
            "parallel_median_s": par,
            "sequential_median_s": seq,
        },
    )


if __name__ == "__main__":
    main()
