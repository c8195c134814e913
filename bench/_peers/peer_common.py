"""What every peer driver shares: the task, the two tools, the timing, the JSON it prints.

Standard library only: it runs under each peer's own virtual environment, where tether is not
installed. A driver times its own imports first, then calls :func:`main` with a function that runs
the task once (``run_once(scenario, max_turns)``, sync or async); :func:`main` runs it as asked
and prints one JSON line.

Per-turn figures are the client's wall time minus the seconds the scripted server says it spent
serving (``GET /_stats``), divided by the requests it served: the harness's own cost per model
call, whatever the server's speed.
"""

from __future__ import annotations

import argparse
import asyncio
import inspect
import json
import os
import resource
import statistics
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

PROMPT = "Which file mentions a timeout?"
LIST_FILES_DOC = "List the files in the workspace, one per line with its size in bytes."
READ_FILE_DOC = "Read a text file in the workspace and return its content."
# Every harness is told the same; frameworks that insist on a system prompt add their own.
INSTRUCTIONS = "You answer questions about the files in a workspace. Use the tools."


def workspace() -> Path:
    return Path(
        os.environ.get("TETHER_BENCH_WORKSPACE", Path(__file__).resolve().parents[2] / "examples" / "workspace")
    )


def list_files() -> str:
    """List the files in the workspace, one per line with its size in bytes."""
    ws = workspace()
    return "\n".join(f"{p.name}\t{p.stat().st_size} bytes" for p in sorted(ws.iterdir()) if p.is_file())


def read_file(path: str) -> str:
    """Read a text file in the workspace and return its content.

    Args:
        path: file name
    """
    ws = workspace().resolve()
    target = (ws / path).resolve()
    if ws not in target.parents:
        return f"error: {path} is outside the workspace"
    try:
        return target.read_text()
    except OSError as exc:
        return f"error: {exc}"


# The same two tools as JSON schemas, for loops that write them by hand.
TOOL_SPECS: list[dict[str, Any]] = [
    {"name": "list_files", "description": LIST_FILES_DOC, "parameters": {"type": "object", "properties": {}}},
    {
        "name": "read_file",
        "description": READ_FILE_DOC,
        "parameters": {
            "type": "object",
            "properties": {"path": {"type": "string", "description": "file name"}},
            "required": ["path"],
        },
    },
]
TOOL_IMPLS = {"list_files": lambda args: list_files(), "read_file": lambda args: read_file(args["path"])}


def base_url() -> str:
    """The OpenAI-style base URL (``…/v1``) of the scripted server."""
    return os.environ["TETHER_BENCH_BASE_URL"]


def root_url() -> str:
    return base_url().removesuffix("/v1")


def server_stats() -> tuple[int, float]:
    with urllib.request.urlopen(root_url() + "/_stats", timeout=30) as r:
        stats = json.loads(r.read())
    return int(stats["requests"]), float(stats["server_s"])


def maxrss_mb() -> float:
    """Peak RSS of this process. Not ``ru_maxrss``: on Linux a process started by vfork/exec
    inherits its parent's ``ru_maxrss`` as a floor; ``VmHWM`` is the peak of its own memory."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux


def main(run_once: Any, import_s: float, version: str = "", setup: Any = None) -> None:
    """Run the task as the command line says and print one JSON line.

    ``--scenario plan --runs N``: N runs of the 3-turn task (the first is reported apart as
    ``first``); ``--scenario runaway --max-turns 200 --runs 1 --warmup 1``: one long run after an
    uncounted 3-turn run (so the long run's figure is the per-turn cost, not the first run's). A run that ends in
    the harness's own max-turns error is a normal end here; any other error is reported.
    """
    ap = argparse.ArgumentParser()
    ap.add_argument("--scenario", default="plan")
    ap.add_argument("--max-turns", type=int, default=10)
    ap.add_argument("--runs", type=int, default=1)
    ap.add_argument("--warmup", type=int, default=0, help="3-turn runs first, not counted")
    args = ap.parse_args()
    out: dict[str, Any] = {"import_s": import_s, "version": version, "scenario": args.scenario, "runs": []}
    loop = asyncio.new_event_loop()  # one loop for every run: clients a harness keeps stay usable
    try:
        if setup is not None:
            setup()
        for _ in range(args.warmup):
            result = run_once("plan", 10)
            if inspect.isawaitable(result):
                loop.run_until_complete(result)
        for _ in range(args.runs):
            n0, s0 = server_stats()
            t0 = time.perf_counter()
            result = run_once(args.scenario, args.max_turns)
            if inspect.isawaitable(result):
                result = loop.run_until_complete(result)
            wall = time.perf_counter() - t0
            time.sleep(0.01)  # the server counts a request just after sending its answer
            n1, s1 = server_stats()
            requests, served = n1 - n0, s1 - s0
            out["runs"].append(
                {
                    "requests": requests,
                    "wall_s": wall,
                    "server_s": served,
                    "ms_per_turn": (wall - served) / max(requests, 1) * 1000,
                    "answer": str(result)[:200] if result is not None else None,
                }
            )
    except BaseException as exc:
        out["error"] = f"{type(exc).__name__}: {str(exc)[:500]}"
    finally:
        try:
            loop.close()
        except Exception:
            pass
    out["maxrss_mb"] = maxrss_mb()
    sys.stdout.write("\n" + json.dumps(out) + "\n")
    sys.stdout.flush()


def median(xs: list[float]) -> float | None:
    return statistics.median(xs) if xs else None
