"""Scaling out with ``tether worker``, and what Postgres costs a turn against the files and SQLite.

    python bench/scale.py                 # 1, 2 and 4 workers, 3 rounds (about 5 minutes on 2 cores)
    python bench/scale.py --quick         # 1 round, fewer runs (under 2 minutes)
    python bench/scale.py --workers 1,2 --concurrency 4 --runs 48 --delay 0.5

Needs Debian's ``rabbitmq-server`` and ``pip install 'tether[postgres,distributed]'`` (pgserver,
psycopg, celery); without them it says so and exits 2.

**Scaling.** One private Postgres (pgserver), one RabbitMQ and one ``tether serve --workers
external`` node, each in its own process; for each level W, W ``tether worker --concurrency C``
processes. The agent is ``answer`` from examples/distributed/agents.py: one model call that
answers after ``--delay`` seconds, like a model waiting on the network, so a run is I/O-bound and
the cluster's ceiling is W*C/delay runs/s whatever the cores (the "ideal" column). Per level, after
the workers are consuming and have warmed up on W*C untimed runs:

- **idle first event**: one run at a time, POST (``Accept: text/event-stream``) to its first
  event; minus the model's delay, this is what dispatch costs a run (node → Postgres → broker →
  worker → Postgres → NOTIFY → node);
- **runs/s**: R runs posted at once from R new sessions; R / the time from the first POST to the
  last ``done``;
- **first event p50, p99** of those R runs: with more runs than W*C slots they include the wait in
  the queue, which is what more workers shorten;
- **cpu ms/run**: the node's and the workers' CPU time during the burst per run (Postgres and the
  broker not counted).

Workers are stopped (SIGTERM, then SIGKILL) between levels; every level uses new sessions.

**Postgres against SQLite per turn**, in this process, no broker: an agent whose model
(``FunctionModel``, no delay) calls ``read_file`` on a copy of examples/workspace ten times and
then answers (11 turns), run with ``run_stream(..., store=, session=)`` against no store, the
default files (``RunStore`` + ``JsonlSessionStore``), ``RunStore`` + ``SqliteSessionStore``, and
``PgRunStore`` + ``PgSessionStore`` on the same local Postgres (unix socket); wall ms per turn.

Figures are medians over ``--repeat`` rounds (levels and stores interleaved). Writes
bench/results/scale.json.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import importlib.util
import json
import os
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from bench._results import ROOT, tether_commit, write_results

AGENTS = ROOT / "examples" / "distributed" / "agents.py"
QUEUE = "tether-runs"  # tether.dispatch.engine.DEFAULT_QUEUE
TOOL_TURNS = 10


def _missing() -> str | None:
    """What this benchmark needs and cannot find, in words (None when all is there)."""
    from tether.testing.services import RabbitServer

    absent = [
        m
        for m in ("pgserver", "psycopg", "psycopg_pool", "celery", "kombu", "httpx")
        if importlib.util.find_spec(m) is None
    ]
    if absent:
        return f"{', '.join(absent)} not installed: pip install 'tether[postgres,distributed]' pgserver"
    if not RabbitServer.available():
        return "rabbitmq-server not found: apt-get install rabbitmq-server"
    return None


def _cpu_s(pid: int) -> float:
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _pct(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(p / 100 * (len(ordered) - 1)))]


# --- the cluster


class Cluster:
    """The node and the workers, each the leader of its own process group, so that stopping one
    stops whatever it started."""

    def __init__(self, root: Path, db_url: str, broker_url: str, delay_s: float) -> None:
        self.root = root
        self.broker_url = broker_url
        self.env = dict(
            os.environ,
            TETHER_HOME=str(root / "home"),
            TETHER_DATABASE_URL=db_url,
            TETHER_BROKER_URL=broker_url,
            TETHER_DEMO_MODEL_DELAY_S=str(delay_s),
            TETHER_DEMO_LEDGER=str(root / "ledger"),
            PYTHONPATH=str(ROOT),
        )
        self.procs: list[subprocess.Popen[bytes]] = []
        (root / "home").mkdir(parents=True, exist_ok=True)  # every client of the bench has one address
        (root / "home" / "config.toml").write_text("[serve]\nmax_connections_per_client = 0\n")
        node_log = root / "node.log"
        before = node_log.stat().st_size if node_log.exists() else 0  # the logs are appended to
        # Port 0: the node binds a free port itself and says which (a port picked here and bound
        # by the node later could be another process's by then).
        self.node = self._start("serve", "--workers", "external", "--port", "0", "--agent", str(AGENTS), log="node")
        self.url = self._wait_listening(node_log, before)

    def _start(self, *args: str, log: str) -> subprocess.Popen[bytes]:
        with open(self.root / f"{log}.log", "ab") as out:
            p = subprocess.Popen(
                [sys.executable, "-m", "tether", *args],
                env=self.env,
                stdout=out,
                stderr=out,
                cwd=self.root,
                start_new_session=True,
            )
        self.procs.append(p)
        return p

    def _log(self, name: str) -> str:
        path = self.root / f"{name}.log"
        return path.read_text(errors="replace")[-3000:] if path.exists() else ""

    def _wait_listening(self, log: Path, offset: int) -> str:
        """The address in the node's "listening on http://HOST:PORT/" line, once it is written."""
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if self.node.poll() is not None:
                raise SystemExit(f"tether serve exited ({self.node.returncode}):\n{self._log('node')}")
            with log.open("rb") as f:
                f.seek(offset)
                found = re.search(r"listening on (http://\S+?)/? ", f.read().decode(errors="replace"))
            if found:
                return found.group(1)
            time.sleep(0.1)
        raise SystemExit(f"tether serve did not listen within 60 s:\n{self._log('node')}")

    def consumers(self) -> int:
        """How many workers consume the run queue (one Celery consumer per worker process)."""
        import kombu

        with kombu.Connection(self.broker_url, connect_timeout=5) as conn:
            try:
                return int(conn.channel().queue_declare(queue=QUEUE, passive=True)[2])
            except conn.channel_errors:  # not declared yet: no worker has started
                return 0

    def _wait_consumers(self, n: int, procs: list[subprocess.Popen[bytes]], timeout: float = 90) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for i, p in enumerate(procs):
                if p.poll() is not None:
                    raise SystemExit(f"tether worker exited ({p.returncode}):\n{self._log(f'worker{i}')}")
            if self.consumers() == n:
                return
            time.sleep(0.2)
        raise SystemExit(f"{n} workers were not consuming within {timeout:.0f} s:\n{self._log('worker0')}")

    def start_workers(self, n: int, concurrency: int) -> list[subprocess.Popen[bytes]]:
        procs = [
            self._start(
                "worker", "--agent", str(AGENTS), "--concurrency", str(concurrency), "--name", f"w{i}", log=f"worker{i}"
            )
            for i in range(n)
        ]
        self._wait_consumers(n, procs)
        return procs

    def stop_workers(self, procs: list[subprocess.Popen[bytes]]) -> None:
        _stop(procs)
        self._wait_consumers(0, [], timeout=30)

    def close(self) -> None:
        _stop(self.procs, grace_s=10)


def _stop(procs: list[subprocess.Popen[bytes]], grace_s: float = 20) -> None:
    """SIGTERM to each process group, SIGKILL to what is left after ``grace_s``; wait until gone."""
    for p in procs:
        if p.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(p.pid, signal.SIGTERM)
    deadline = time.monotonic() + grace_s
    for p in procs:
        try:
            p.wait(max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(p.pid, signal.SIGKILL)
            p.wait(10)


# --- the clients


async def _new_sessions(client: Any, url: str, n: int) -> list[str]:
    async def one() -> str:
        r = await client.post(f"{url}/v1/sessions", json={"agent": "answer"})
        r.raise_for_status()
        return str(r.json()["session_id"])

    return list(await asyncio.gather(*(one() for _ in range(n))))


async def one_run(client: Any, url: str, sid: str) -> tuple[float, float, float]:
    """Post a message to session ``sid`` and read its events to ``done``: (seconds from the POST
    to its response's headers, to the first event; perf_counter at the done)."""
    began = time.perf_counter()
    first: float | None = None
    kind = ""
    async with client.stream(
        "POST",
        f"{url}/v1/sessions/{sid}/messages",
        json={"text": "What is two and two?"},
        headers={"Accept": "text/event-stream"},
    ) as r:
        accepted = time.perf_counter() - began
        if r.status_code not in (200, 202):
            raise SystemExit(f"POST message answered {r.status_code}: {(await r.aread())[:400]!r}")
        async for line in r.aiter_lines():
            if line.startswith("event:"):
                kind = line[6:].strip()
            elif line.startswith("data:"):
                if first is None:
                    first = time.perf_counter() - began
                if kind == "done":
                    status = json.loads(line[5:])["result"]["status"]
                    if status != "completed":
                        raise SystemExit(f"a run ended {status}: {line[:400]}")
                    return accepted, first, time.perf_counter()
    raise SystemExit(f"a stream ended without its done event (last event {kind!r})")


async def _level(
    cluster: Cluster, workers: list[subprocess.Popen[bytes]], slots: int, runs: int, idle_runs: int
) -> dict[str, float]:
    import httpx

    limits = httpx.Limits(max_connections=runs + slots + 10, max_keepalive_connections=runs + slots + 10)
    async with httpx.AsyncClient(limits=limits, timeout=120) as client:
        warm = await _new_sessions(client, cluster.url, slots + idle_runs)
        await asyncio.gather(*(one_run(client, cluster.url, s) for s in warm[:slots]))  # every worker thread once
        idle = [(await one_run(client, cluster.url, s))[1] * 1000 for s in warm[slots:]]
        sessions = await _new_sessions(client, cluster.url, runs)
        pids = [cluster.node.pid, *(w.pid for w in workers)]
        cpu0 = [_cpu_s(p) for p in pids]
        began = time.perf_counter()
        results = await asyncio.gather(*(one_run(client, cluster.url, s) for s in sessions))
        wall = max(end for _, _, end in results) - began
        cpu = [_cpu_s(p) - c for p, c in zip(pids, cpu0, strict=True)]
    firsts = [first * 1000 for _, first, _ in results]
    accepted = [a * 1000 for a, _, _ in results]
    return {
        "runs_per_s": runs / wall,
        "first_event_p50_ms": statistics.median(firsts),
        "first_event_p99_ms": _pct(firsts, 99),
        "accepted_p50_ms": statistics.median(accepted),
        "accepted_p99_ms": _pct(accepted, 99),
        "idle_first_event_ms": statistics.median(idle),
        "node_cpu_ms_per_run": cpu[0] * 1000 / runs,
        "workers_cpu_ms_per_run": sum(cpu[1:]) * 1000 / runs,
        "wall_s": wall,
    }


def scaling(
    cluster: Cluster, levels: list[int], concurrency: int, runs: int, idle_runs: int, repeat: int
) -> dict[int, dict[str, float]]:
    rows: dict[int, list[dict[str, float]]] = {w: [] for w in levels}
    for r in range(repeat):
        for w in levels if r % 2 == 0 else list(reversed(levels)):
            t0 = time.monotonic()
            workers = cluster.start_workers(w, concurrency)
            try:
                row = asyncio.run(_level(cluster, workers, w * concurrency, runs, idle_runs))
            finally:
                cluster.stop_workers(workers)
            rows[w].append(row)
            print(
                f"  round {r + 1}, {w} worker(s): {row['runs_per_s']:.1f} runs/s, first event p50 "
                f"{row['first_event_p50_ms']:.0f} ms ({time.monotonic() - t0:.0f} s with start and stop)",
                flush=True,
            )
    return {w: {k: statistics.median(row[k] for row in rows[w]) for k in rows[w][0]} for w in levels}


# --- Postgres against SQLite, per turn


def _turns_agent(workspace: Path) -> Any:
    from tether import Agent
    from tether.messages import ToolMessage
    from tether.testing import FunctionModel, call
    from tether.tools.files import FILE_TOOLS

    files = sorted(p.name for p in workspace.iterdir() if p.is_file())

    def reply(messages: list[Any], request: Any) -> Any:
        done = sum(isinstance(m, ToolMessage) for m in messages)
        if done < TOOL_TURNS:
            return call(f"call_{done}", "read_file", {"path": files[done % len(files)]})
        return f"Read {done} files; the timeout is in {files[0]}."

    return Agent(FunctionModel(reply, model_id="reader"), tools=FILE_TOOLS, cwd=workspace, max_turns=TOOL_TURNS + 2)


def _stores(kind: str, root: Path, db_url: str) -> tuple[Any, Any]:
    from tether.harness.store import RunStore
    from tether.sessions import JsonlSessionStore, SqliteSessionStore

    if kind == "none":
        return None, None
    if kind == "jsonl":
        return RunStore(root / "runs-jsonl"), JsonlSessionStore(root / "sessions-jsonl")
    if kind == "sqlite":
        return RunStore(root / "runs-sqlite"), SqliteSessionStore(root / "sessions.db")
    from tether.postgres.db import database
    from tether.postgres.runs import PgRunStore
    from tether.postgres.sessions import PgSessionStore

    return PgRunStore(database(db_url)), PgSessionStore(database(db_url))


async def _runs_per_turn(agent: Any, store: Any, session: Any, runs: int) -> float:
    """Wall ms per turn over ``runs`` runs, each in a new session."""
    from tether import run_stream

    turns = 0
    began = time.perf_counter()
    for _ in range(runs):
        sid = "s_" + uuid.uuid4().hex[:16] if session is not None else None
        async for event in run_stream(
            agent, "Which file mentions a timeout?", store=store, session=session, session_id=sid
        ):
            if event.type == "done":
                if event.result.status != "completed":
                    raise SystemExit(f"a run ended {event.result.status}: {event.result}")
                turns += event.result.turns
    return (time.perf_counter() - began) * 1000 / turns


def per_turn(root: Path, db_url: str, runs: int, repeat: int) -> dict[str, float]:
    workspace = root / "workspace"
    shutil.copytree(ROOT / "examples" / "workspace", workspace)
    agent = _turns_agent(workspace)
    kinds = ["none", "jsonl", "sqlite", "postgres"]
    stores = {k: _stores(k, root, db_url) for k in kinds}
    samples: dict[str, list[float]] = {k: [] for k in kinds}
    for k in kinds:  # warm: imports, the pool's connections, SQLite's pages
        asyncio.run(_runs_per_turn(agent, *stores[k], 2))
    for r in range(repeat):
        for k in kinds[r % len(kinds) :] + kinds[: r % len(kinds)]:
            samples[k].append(asyncio.run(_runs_per_turn(agent, *stores[k], runs)))
    return {k: statistics.median(v) for k, v in samples.items()}


# --- main


def _print(
    table: dict[int, dict[str, float]], turn_ms: dict[str, float], args: argparse.Namespace, repeat: int
) -> None:
    c, delay = args.concurrency, args.delay
    print(
        f"\nscaling: agent `answer` (one model call, {delay:g} s delay), {args.runs} runs at once, workers with "
        f"--concurrency {c}, medians of {repeat} round(s); commit {tether_commit()}, {os.cpu_count()} cpus"
    )
    print(
        f"{'workers':>7} {'runs/s':>7} {'ideal':>6} {'of ideal':>8} {'first p50 ms':>12} {'first p99 ms':>12} "
        f"{'idle first ms':>13} {'node cpu ms/run':>15} {'workers cpu ms/run':>18}"
    )
    for w, t in table.items():
        ideal = w * c / delay
        print(
            f"{w:>7} {t['runs_per_s']:>7.1f} {ideal:>6.1f} {t['runs_per_s'] / ideal:>8.0%} "
            f"{t['first_event_p50_ms']:>12.0f} {t['first_event_p99_ms']:>12.0f} {t['idle_first_event_ms']:>13.0f} "
            f"{t['node_cpu_ms_per_run']:>15.1f} {t['workers_cpu_ms_per_run']:>18.1f}"
        )
    print(
        f"(idle first event includes the model's {delay * 1000:.0f} ms: the first event a run sends is the "
        "model's reply)"
    )
    base = turn_ms["none"]
    print(
        f"\nper turn, in process: {TOOL_TURNS} read_file turns + an answer, no model delay, medians of {repeat} "
        "round(s)"
    )
    print(f"{'stores':<38} {'ms/turn':>8} {'store ms/turn':>13}")
    names = {
        "none": "none",
        "jsonl": "RunStore + JsonlSessionStore (default)",
        "sqlite": "RunStore + SqliteSessionStore",
        "postgres": "PgRunStore + PgSessionStore",
    }
    for k, ms in turn_ms.items():
        print(f"{names[k]:<38} {ms:>8.2f} {ms - base:>13.2f}")
    sq, pg = turn_ms["sqlite"], turn_ms["postgres"]
    print(
        f"Postgres / SQLite: {pg / sq:.2f}x per turn, {(pg - base) / max(sq - base, 1e-9):.2f}x the stores' "
        f"own cost; Postgres / JSONL: {pg / turn_ms['jsonl']:.2f}x"
    )


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="one round, 24 runs per level")
    ap.add_argument("--workers", default="1,2,4", help="worker counts (default 1,2,4)")
    ap.add_argument("--concurrency", type=int, default=4, help="runs each worker drives at once (default 4)")
    ap.add_argument("--runs", type=int, help="runs posted at once per level (default 48; 24 with --quick)")
    ap.add_argument("--delay", type=float, default=0.5, help="the model's delay in seconds (default 0.5)")
    ap.add_argument("--repeat", type=int, default=3, help="rounds (default 3; 1 with --quick)")
    args = ap.parse_args()
    missing = _missing()
    if missing:
        print(f"bench/scale.py: {missing}", file=sys.stderr)
        return 2
    args.runs = args.runs or (24 if args.quick else 48)
    repeat = 1 if args.quick else args.repeat
    levels = [int(x) for x in args.workers.split(",")]
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # so that the finally blocks stop everything

    from tether.testing.services import PostgresServer, RabbitServer

    t0 = time.monotonic()
    root = Path(tempfile.mkdtemp(prefix="tether-bench-scale-"))
    try:
        with PostgresServer() as pg:
            print("scaling (Postgres, RabbitMQ, one node, workers as processes):", flush=True)
            with RabbitServer() as rabbit:
                cluster = Cluster(root, pg.fresh_database(), rabbit.url, args.delay)
                try:
                    table = scaling(cluster, levels, args.concurrency, args.runs, 3 if args.quick else 5, repeat)
                finally:
                    cluster.close()
            t1 = time.monotonic()
            print(f"  {t1 - t0:.0f} s; per turn, in process:", flush=True)
            turn_ms = per_turn(root, pg.fresh_database(), 5 if args.quick else 10, 3 if args.quick else 2 * repeat + 1)
            t2 = time.monotonic()
    finally:
        shutil.rmtree(root, ignore_errors=True)
    _print(table, turn_ms, args, repeat)
    print(f"\ntook {t2 - t0:.0f} s (scaling {t1 - t0:.0f} s, per turn {t2 - t1:.0f} s)")
    write_results(
        "scale",
        {
            "commit": tether_commit(),
            "cpus": os.cpu_count(),
            "quick": args.quick,
            "repeat": repeat,
            "scaling": {
                "agent": "answer",
                "model_delay_s": args.delay,
                "concurrency_per_worker": args.concurrency,
                "runs_per_level": args.runs,
                "levels": {w: t | {"ideal_runs_per_s": w * args.concurrency / args.delay} for w, t in table.items()},
            },
            "per_turn_ms": turn_ms,
            "per_turn_tool_turns": TOOL_TURNS,
            "postgres_over_sqlite": turn_ms["postgres"] / turn_ms["sqlite"],
            "postgres_over_jsonl": turn_ms["postgres"] / turn_ms["jsonl"],
            "seconds": {"scaling": t1 - t0, "per_turn": t2 - t1},
        },
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
