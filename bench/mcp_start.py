"""How long a run waits for its MCP servers: five stdio servers (tests/connectors/inventory_server.py,
each a fresh Python process importing the mcp SDK) started one after another, as before, and
together, as tether.harness.extension.start_extensions does now. Each server is started and
stopped; the figure is the time until all five answered their tool list. Medians of ROUNDS rounds,
both ways measured in the same run, alternating.

    python bench/mcp_start.py            # about a minute on two cores
"""

from __future__ import annotations

import asyncio
import statistics
import sys
import tempfile
import time
from pathlib import Path

from bench._results import tether_commit, write_results
from tether.connectors import McpConnector
from tether.harness.extension import start_extensions, stop_extensions

ROOT = Path(__file__).resolve().parent.parent
SERVER = ROOT / "tests" / "connectors" / "inventory_server.py"
SERVERS = 5
ROUNDS = 3


def connectors(log: Path) -> list[McpConnector]:
    table = {"command": sys.executable, "args": [str(SERVER)], "env": {"INVENTORY_LOG": str(log)}}
    return [McpConnector(f"inventory{i}", table) for i in range(SERVERS)]


async def one_after_another(servers: list[McpConnector]) -> float:
    began = time.perf_counter()
    for server in servers:
        await server.start()
    took = time.perf_counter() - began
    for server in servers:
        await server.stop()
    return took


async def together(servers: list[McpConnector]) -> float:
    began = time.perf_counter()
    opened = await start_extensions(servers)
    took = time.perf_counter() - began
    await stop_extensions(opened)
    return took


def main() -> None:
    log = Path(tempfile.mkdtemp()) / "calls.log"
    times: dict[str, list[float]] = {"one after another": [], "together": []}
    for _ in range(ROUNDS):
        times["one after another"].append(asyncio.run(one_after_another(connectors(log))))
        times["together"].append(asyncio.run(together(connectors(log))))
    base = statistics.median(times["one after another"])
    print(f"{SERVERS} stdio MCP servers until all answered, median of {ROUNDS} (commit {tether_commit()})\n")
    print(f"{'start':<20} {'median s':>9} {'vs one after another':>22}")
    rows = []
    for name, values in times.items():
        median = statistics.median(values)
        print(f"{name:<20} {median:>9.2f} {median / base:>21.2f}x")
        rows.append({"start": name, "median_s": round(median, 3), "ratio": round(median / base, 3)})
    write_results("mcp_start", {"commit": tether_commit(), "servers": SERVERS, "rounds": ROUNDS, "rows": rows})


if __name__ == "__main__":
    main()
