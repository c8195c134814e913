"""What a person waits for at the command line: whole processes, each beside its raw twin.

    python bench/startup.py                   # every row, median of 5 (about a minute)
    python bench/startup.py --repeat 9 --label after

Each row times whole processes (wall time from ``fork`` to exit, or to a marker for the rows that
wait for something; peak RSS from ``wait4``), tether's and its raw counterpart's in alternation, and
reports medians and their ratio:

- ``--help``: ``tether --help`` against a process that imports httpx and pydantic;
- ``run http``: ``tether run --model openai/plan`` against a local scripted server (``tether
  scripted serve``), the 3-turn task, against bench/_startup_raw.py making the same three streamed
  requests with httpx and pydantic;
- ``run scripted``: ``tether run --model scripted/plan`` (the model in process), against the same
  raw process;
- ``memory add``, ``kb search``: against the import-only process;
- ``chat 1st token``: ``tether chat`` given the task on stdin, to the first byte of the answer on
  stdout, against the raw process to its first streamed byte;
- ``serve ready``: ``tether serve --port 0`` to its "listening on" line, against a one-route
  FastAPI app under uvicorn to ready;
- ``first - second``: one process runs the task twice, and the first run's extra time over the
  second is reported (target: at most 50 ms): with the library (its imports done first, as a
  program does at its start), and through ``tether.cli.main`` (imports included, so they count).

Targets (issue 24): run ≤ 2× the raw wall time and ≤ 2× its peak RSS; --help ≤ 1×; memory add and kb
search ≤ 2×. Writes bench/results/startup.json (one entry per ``--label``).
"""

from __future__ import annotations

import argparse
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

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from bench._results import ROOT, start_server, tether_commit

RAW = str(ROOT / "bench" / "_startup_raw.py")
PROMPT = "Which file mentions a timeout?"
TETHER = [sys.executable, "-m", "tether"]

TWICE = """
import contextlib, io, sys, time
from tether.cli import main
argv = ["run", "--model", "scripted/plan", "--cwd", sys.argv[1], sys.argv[2]]
times = []
for _ in range(2):
    t = time.perf_counter()
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        code = main(argv)
    times.append(time.perf_counter() - t)
    assert code == 0, code
print(times[0], times[1])
"""
# The library as a program uses it: its imports done (at the program's start), then two runs.
TWICE_LIBRARY = """
import sys, tempfile, time
from tether import Agent, RunStore, run_sync
from tether.tools.files import FILE_TOOLS
store = RunStore(tempfile.mkdtemp())
agent = Agent("scripted/plan", tools=FILE_TOOLS, cwd=sys.argv[1])
times = []
for _ in range(2):
    t = time.perf_counter()
    assert run_sync(agent, sys.argv[2], store=store).status == "completed"
    times.append(time.perf_counter() - t)
print(times[0], times[1])
"""


def timed(
    argv: list[str], env: dict[str, str], marker: str | None = None, where: str = "stdout"
) -> tuple[float, float]:
    """(wall seconds, peak RSS MB) of one process: to its exit, or to ``marker`` on ``where``
    (any byte when the marker is empty), after which it is stopped."""
    watched = subprocess.PIPE if marker is not None else subprocess.DEVNULL
    began = time.perf_counter()
    proc = subprocess.Popen(
        argv,
        env=env,
        stdin=subprocess.PIPE,
        stdout=watched if where == "stdout" else subprocess.DEVNULL,
        stderr=watched if where == "stderr" else subprocess.DEVNULL,
        cwd=ROOT,
    )
    assert proc.stdin is not None
    if "chat" in argv:
        proc.stdin.write(PROMPT.encode() + b"\n")
        proc.stdin.flush()
    if marker is None:
        proc.stdin.close()
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - began
        proc.returncode = os.waitstatus_to_exitcode(status)
        if proc.returncode != 0:
            raise SystemExit(f"{' '.join(argv)} exited {proc.returncode}")
        return wall, usage.ru_maxrss / 1024
    stream = proc.stdout if where == "stdout" else proc.stderr
    assert stream is not None
    seen = b""
    while True:
        chunk = os.read(stream.fileno(), 65536)
        if not chunk:
            raise SystemExit(f"{' '.join(argv)} ended before {marker!r}: {seen[-400:]!r}")
        seen += chunk
        if marker.encode() in seen:
            break
    wall = time.perf_counter() - began
    proc.terminate()
    proc.stdin.close()
    _, _, usage = os.wait4(proc.pid, 0)
    proc.returncode = 0
    stream.close()
    return wall, usage.ru_maxrss / 1024


def rows(ws: Path) -> list[tuple[str, list[str], list[str], str | None, str, str | None, float]]:
    """(name, tether argv, raw argv, tether's marker, where, raw's marker, wall target)."""
    raw_imports = [sys.executable, RAW, "imports"]
    raw_run = [sys.executable, RAW, "run"]
    return [
        ("--help", [*TETHER, "--help"], raw_imports, None, "stdout", None, 1.0),
        (
            "run http",
            [*TETHER, "run", "--model", "openai/plan", "--cwd", str(ws), PROMPT],
            raw_run,
            None,
            "",
            None,
            2.0,
        ),
        (
            "run scripted",
            [*TETHER, "run", "--model", "scripted/plan", "--cwd", str(ws), PROMPT],
            raw_run,
            None,
            "",
            None,
            2.0,
        ),
        ("memory add", [*TETHER, "memory", "add", "--notes", "NOTE"], raw_imports, None, "", None, 2.0),
        ("kb search", [*TETHER, "kb", "search", "timeout"], raw_imports, None, "", None, 2.0),
        (
            "chat 1st token",
            [*TETHER, "chat", "--model", "openai/plan", "--cwd", str(ws)],
            raw_run,
            "",
            "stdout",
            "",
            0.0,
        ),
        (
            "serve ready",
            [*TETHER, "serve", "--port", "0", "--model", "scripted/plan", "--cwd", str(ws)],
            [sys.executable, RAW, "serve"],
            "listening on",
            "stderr",
            "raw server on",
            0.0,
        ),
    ]


def measure(repeat: int, env: dict[str, str], ws: Path, only: set[str] | None = None) -> list[dict[str, Any]]:
    out = []
    for name, targv, rargv, tmark, where, rmark, target in rows(ws):
        if only is not None and name not in only:
            continue
        t_wall, t_rss, r_wall, r_rss = [], [], [], []
        for _ in range(repeat):
            argv = [a.replace("NOTE", f"bench note {time.time_ns()}") for a in targv]
            w, m = timed(argv, env, tmark, where or "stdout")
            t_wall.append(w)
            t_rss.append(m)
            w, m = timed(rargv, env, rmark, "stdout")
            r_wall.append(w)
            r_rss.append(m)
        row = {
            "row": name,
            "tether_ms": statistics.median(t_wall) * 1000,
            "raw_ms": statistics.median(r_wall) * 1000,
            "tether_rss_mb": statistics.median(t_rss),
            "raw_rss_mb": statistics.median(r_rss),
            "target": target or None,
        }
        row["ratio"] = row["tether_ms"] / row["raw_ms"]
        row["rss_ratio"] = row["tether_rss_mb"] / row["raw_rss_mb"]
        out.append(row)
        print(
            f"{name:15} {row['tether_ms']:>8.0f} {row['raw_ms']:>8.0f} {row['ratio']:>6.2f}x "
            f"{row['tether_rss_mb']:>7.1f} {row['raw_rss_mb']:>7.1f} {row['rss_ratio']:>6.2f}x  "
            + (f"≤ {target:.0f}x" if target else ""),
            flush=True,
        )
    return out


def first_vs_second(repeat: int, env: dict[str, str], ws: Path, code: str, name: str) -> dict[str, float]:
    firsts, seconds = [], []
    for _ in range(repeat):
        done = subprocess.run(
            [sys.executable, "-c", code, str(ws), PROMPT], env=env, capture_output=True, text=True, check=True, cwd=ROOT
        )
        a, b = map(float, done.stdout.split())
        firsts.append(a * 1000)
        seconds.append(b * 1000)
    row = {"first_ms": statistics.median(firsts), "second_ms": statistics.median(seconds)}
    row["extra_ms"] = statistics.median(a - b for a, b in zip(firsts, seconds, strict=True))
    print(
        f"{name:24} first {row['first_ms']:.0f} ms, second {row['second_ms']:.0f} ms: "
        f"+{row['extra_ms']:.0f} ms (≤ 50 ms)"
    )
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--label", default="current")
    parser.add_argument(
        "--rows", help='only these rows, comma-separated (e.g. "kb search,--help"); "twice" for the first - second rows'
    )
    args = parser.parse_args()
    only = {r.strip() for r in args.rows.split(",")} if args.rows else None
    tmp = Path(tempfile.mkdtemp(prefix="tether-startup-"))
    server = None
    try:
        ws = tmp / "workspace"
        shutil.copytree(ROOT / "examples" / "workspace", ws)
        server, base = start_server([*TETHER, "scripted", "serve", "--port", "0"])
        env = {
            **os.environ,
            "TETHER_HOME": str(tmp / "home"),
            "OPENAI_BASE_URL": base,
            "OPENAI_API_KEY": "dummy",
            "TETHER_BENCH_BASE_URL": base,
            "TETHER_BENCH_WORKSPACE": str(ws),
        }
        env.pop("LLM_BASE_URL", None)
        env.pop("TETHER_MODEL", None)
        subprocess.run([*TETHER, "kb", "add", str(ws)], env=env, check=True, capture_output=True)
        # The first search on a machine keeps the local embedder's loaded model in
        # $TETHER_HOME/cache (once; timed here and reported apart from the rows).
        began = time.perf_counter()
        subprocess.run([*TETHER, "kb", "search", "timeout"], env=env, check=True, capture_output=True)
        first_search_ms = (time.perf_counter() - began) * 1000
        load = os.getloadavg()[0]
        print(f"load average {load:.1f}; medians of {args.repeat}\n")
        print(f"{'row':15} {'tether':>8} {'raw':>8} {'ratio':>7} {'rss MB':>7} {'raw MB':>7} {'ratio':>7}  target")
        table = measure(args.repeat, env, ws, only)
        twice = twice_cli = None
        if only is None or "twice" in only:
            twice = first_vs_second(args.repeat, env, ws, TWICE_LIBRARY, "first - second (library)")
            twice_cli = first_vs_second(args.repeat, env, ws, TWICE, "first - second (cli)")
        print(f"the first kb search on a machine (writes the model cache): {first_search_ms:.0f} ms")
    finally:
        if server is not None:
            server.terminate()
            server.wait()
        shutil.rmtree(tmp, ignore_errors=True)
    out = ROOT / "bench" / "results" / "startup.json"
    data = json.loads(out.read_text()) if out.exists() else {}
    data[args.label] = {
        "commit": tether_commit(),
        "load": load,
        "repeat": args.repeat,
        "rows": table,
        "twice": twice,
        "twice_cli": twice_cli,
        "first_kb_search_ms": first_search_ms,
    }
    out.write_text(json.dumps(data, indent=2))
    print(f"\nwrote {out.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
