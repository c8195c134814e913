"""``tether serve`` under many concurrent streams, against the library's own cost in the same run.

    python bench/serve.py                 # 10, 100 and 500 concurrent streams (about 2 minutes)
    python bench/serve.py --quick         # 10 and 100
    python bench/serve.py --levels 10,50
    python bench/serve.py --servers 2     # clients dealt to two independent servers (see --help)

The server runs in its own process (``tether serve --port 0``) with the scripted model
(``scripted/plan``: three model turns, two file tools, a streamed answer), persistence and
tracing as shipped. For each level N, N clients each create a session and post a message with
``Accept: text/event-stream`` at once, and read the run's events to ``done``:

- **first event**: from sending the POST to receiving the first event (``started``, sent as the
  run is accepted), p50 and p99;
- **first step**: to the first event after it (the run's first model turn or tool: what waits for
  a durable save and the model), p50 and p99;
- **events/s**: all events received / wall time of the level;
- **server cpu ms/turn**: the server process's CPU time during the level / turns served (what
  one turn costs the server, whatever the client's share of the 2 cores);
- **library ms/turn**: the same scenario run in this process with ``run_stream`` and a
  ``RunStore`` + ``JsonlTracer`` (as the server runs it), CPU seconds per turn; the ratio says
  what the HTTP layer, the SSE encoding and the event log add.

**idle session memory**: the server's RSS after creating 1,000 more sessions that each finished
one run, minus before, per session (its runs done, nothing live).

Figures are medians over ``--repeat`` rounds (levels interleaved). Writes bench/results/serve.json.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from bench._results import ROOT, tether_commit, write_results

AGENTS = """
from tether import Agent
from tether.tools.files import FILE_TOOLS
agents = {"plan": Agent("scripted/plan", tools=FILE_TOOLS, cwd=%r, max_turns=10)}
"""


def _cpu_s(pid: int, *, children: bool = True) -> float:
    """CPU time of the server process and of its live children (its run processes)."""
    total = 0.0
    for p in [pid, *(_children(pid) if children else ())]:
        try:
            fields = Path(f"/proc/{p}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        total += (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    return total


def _children(pid: int) -> list[int]:
    try:
        return [
            int(c)
            for t in os.listdir(f"/proc/{pid}/task")
            for c in Path(f"/proc/{pid}/task/{t}/children").read_text().split()
        ]
    except OSError:
        return []


def _rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def _pct(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(p / 100 * (len(ordered) - 1)))]


class Server:
    def __init__(self, root: Path, run_threads: int | None = None, run_processes: int | None = None) -> None:
        (root / "home").mkdir(parents=True, exist_ok=True)
        # Every client of the bench comes from one address: no per-address connection limit.
        threads = f"run_threads = {run_threads}\n" if run_threads else ""
        processes = f"run_processes = {run_processes}\n" if run_processes is not None else ""
        (root / "home" / "config.toml").write_text(f"[serve]\nmax_connections_per_client = 0\n{threads}{processes}")
        workspace = root / "workspace"
        shutil.copytree(ROOT / "examples" / "workspace", workspace)
        module = root / "agents.py"
        module.write_text(AGENTS % str(workspace))
        env = {**os.environ, "TETHER_HOME": str(root / "home")}
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "tether", "serve", "--port", "0", "--agent", str(module)],
            env=env,
            stderr=subprocess.PIPE,
            text=True,
        )
        assert self.proc.stderr is not None
        line = self.proc.stderr.readline()
        if "listening on" not in line:
            raise SystemExit(f"tether serve did not start: {line}{self.proc.stderr.read()}")
        self.url = line.split("listening on ", 1)[1].split("/ ", 1)[0]
        self.log: list[str] = []  # drained, so a chatty server never blocks on a full pipe
        import threading

        threading.Thread(target=lambda: self.log.extend(self.proc.stderr or ()), daemon=True).start()

    def stop(self) -> None:
        self.proc.terminate()
        self.proc.wait(30)


async def one_stream(client: Any, url: str) -> tuple[float, int, int, float]:
    """(seconds to the first event, events, turns, seconds to the first step's event: the first
    after ``started``) of one new session's first message."""
    sid = (await client.post(f"{url}/v1/sessions", json={"agent": "plan"})).json()["session_id"]
    began = time.perf_counter()
    first = step = None
    events = turns = 0
    last = ""
    async with client.stream(
        "POST",
        f"{url}/v1/sessions/{sid}/messages",
        json={"text": "Which file mentions a timeout?"},
        headers={"Accept": "text/event-stream"},
    ) as r:
        async for line in r.aiter_lines():
            if line.startswith("data:"):
                events += 1
                last = line
                if first is None:
                    first = time.perf_counter() - began
                if step is None and not line.startswith('data: {"type":"started"'):
                    step = time.perf_counter() - began
                if line.startswith('data: {"type":"done"'):
                    turns = json.loads(line[5:])["result"]["turns"]
    if turns != 3:
        raise SystemExit(f"a run did not complete: its last event was {last[:400]}")
    return first or 0.0, events, turns, step or 0.0


class _Lean:
    """A client as small as a load generator should be: one plain connection per request, HTTP/1.1
    by hand, chunked SSE read line by line. httpx's pool, at 500 streams, cost this process more
    CPU than the server spent serving them (15 s against 8 s on 2 cores), so its figures measured
    the client; this one costs a fraction of the server's time."""

    def __init__(self, url: str) -> None:
        hostport = url.split("//", 1)[1]
        self.host, port = hostport.rsplit(":", 1)
        self.port = int(port)

    async def _open(self, path: str, body: dict[str, Any], accept: str) -> tuple[Any, Any, bool]:
        reader, writer = await asyncio.open_connection(self.host, self.port)
        data = json.dumps(body).encode()
        writer.write(
            (
                f"POST {path} HTTP/1.1\r\nHost: {self.host}:{self.port}\r\nContent-Type: application/json\r\n"
                f"Accept: {accept}\r\nContent-Length: {len(data)}\r\nConnection: close\r\n\r\n"
            ).encode()
            + data
        )
        head = (await reader.readuntil(b"\r\n\r\n")).decode("latin-1").lower()
        if not head.startswith(("http/1.1 200", "http/1.1 201")):
            raise SystemExit(f"the server answered {head.splitlines()[0]!r} to {path}")
        return reader, writer, "transfer-encoding: chunked" in head

    async def _chunks(self, reader: Any, chunked: bool) -> AsyncIterator[bytes]:
        if not chunked:
            yield await reader.read()
            return
        while True:
            size = int((await reader.readuntil(b"\r\n")).split(b";", 1)[0], 16)
            if size == 0:
                return
            yield (await reader.readexactly(size + 2))[:-2]

    async def post_json(self, path: str, body: dict[str, Any]) -> Any:
        reader, writer, chunked = await self._open(path, body, "application/json")
        data = b"".join([c async for c in self._chunks(reader, chunked)])
        writer.close()
        return json.loads(data)

    async def sse_lines(self, path: str, body: dict[str, Any]) -> AsyncIterator[str]:
        reader, writer, chunked = await self._open(path, body, "text/event-stream")
        pending = b""
        try:
            async for chunk in self._chunks(reader, chunked):
                pending += chunk
                *lines, pending = pending.split(b"\n")
                for line in lines:
                    yield line.decode()
        finally:
            writer.close()


async def lean_stream(client: _Lean) -> tuple[float, int, int, float]:
    """:func:`one_stream` with the lean client."""
    sid = (await client.post_json("/v1/sessions", {"agent": "plan"}))["session_id"]
    began = time.perf_counter()
    first = step = None
    events = turns = 0
    last = ""
    async for line in client.sse_lines(f"/v1/sessions/{sid}/messages", {"text": "Which file mentions a timeout?"}):
        if line.startswith("data:"):
            events += 1
            last = line
            if first is None:
                first = time.perf_counter() - began
            if step is None and not line.startswith('data: {"type":"started"'):
                step = time.perf_counter() - began
            if line.startswith('data: {"type":"done"'):
                turns = json.loads(line[5:])["result"]["turns"]
    if turns != 3:
        raise SystemExit(f"a run did not complete: its last event was {last[:400]}")
    return first or 0.0, events, turns, step or 0.0


CLIENT = {"kind": "lean"}


async def level(servers: list[Server], n: int) -> dict[str, float]:
    """One level: ``n`` clients at once, dealt in turn to ``servers`` (one, unless ``--servers``)."""
    import httpx

    limits = httpx.Limits(max_connections=n + 10, max_keepalive_connections=n + 10)
    pids = [s.proc.pid for s in servers]
    async with httpx.AsyncClient(limits=limits, timeout=120) as client:
        cpu0 = sum(_cpu_s(p) for p in pids)
        http0 = sum(_cpu_s(p, children=False) for p in pids)
        own0 = time.process_time()
        began = time.perf_counter()
        if CLIENT["kind"] == "lean":
            leans = [_Lean(s.url) for s in servers]
            results = await asyncio.gather(*(lean_stream(leans[i % len(leans)]) for i in range(n)))
        else:
            results = await asyncio.gather(*(one_stream(client, servers[i % len(servers)].url) for i in range(n)))
        wall = time.perf_counter() - began
        cpu = sum(_cpu_s(p) for p in pids) - cpu0
        http = sum(_cpu_s(p, children=False) for p in pids) - http0
        own = time.process_time() - own0
    firsts = [r[0] * 1000 for r in results]
    steps = [r[3] * 1000 for r in results]
    events = sum(r[1] for r in results)
    turns = sum(r[2] for r in results)
    return {
        "first_event_p50_ms": statistics.median(firsts),
        "first_event_p99_ms": _pct(firsts, 99),
        "first_step_p50_ms": statistics.median(steps),
        "first_step_p99_ms": _pct(steps, 99),
        "events_per_s": events / wall,
        "server_cpu_ms_per_turn": cpu * 1000 / turns,
        "client_cpu_s": own,
        "server_cpu_s": cpu,
        "http_process_cpu_s": http,
        "wall_s": wall,
    }


async def library_per_turn(root: Path, runs: int) -> float:
    """CPU ms per turn of the same scenario through run_stream with a RunStore and a JsonlTracer."""
    from tether import Agent, RunStore, run_stream
    from tether.tools.files import FILE_TOOLS
    from tether.tracing import JsonlTracer

    workspace = root / "lib-workspace"
    shutil.copytree(ROOT / "examples" / "workspace", workspace, dirs_exist_ok=True)
    store = RunStore(root / "lib-runs")
    agent = Agent("scripted/plan", tools=FILE_TOOLS, cwd=workspace, max_turns=10)
    turns = 0
    async for _ in run_stream(agent, "warm up", store=store, tracer=JsonlTracer(root / "lib-traces")):
        pass
    cpu0 = time.process_time()
    for _ in range(runs):
        async for event in run_stream(
            agent, "Which file mentions a timeout?", store=store, tracer=JsonlTracer(root / "lib-traces")
        ):
            if event.type == "done":
                turns += event.result.turns
    return (time.process_time() - cpu0) * 1000 / turns


async def idle_memory(server: Server, sessions: int) -> float:
    import httpx

    async with httpx.AsyncClient(timeout=120, limits=httpx.Limits(max_connections=50)) as client:
        await asyncio.gather(*(one_stream(client, server.url) for _ in range(20)))  # warm: caches filled
        await asyncio.sleep(0.5)
        before = _rss_mb(server.proc.pid)
        sem = asyncio.Semaphore(40)

        async def bounded() -> None:
            async with sem:
                await one_stream(client, server.url)

        await asyncio.gather(*(bounded() for _ in range(sessions)))
        await asyncio.sleep(0.5)
        return (_rss_mb(server.proc.pid) - before) * 1024 / sessions


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="levels 10 and 100, one round, 300 idle sessions")
    ap.add_argument("--levels", help="comma-separated concurrency levels (default 10,100,500)")
    ap.add_argument("--repeat", type=int, default=3, help="rounds per level (default 3)")
    ap.add_argument("--idle", type=int, help="sessions for the idle-memory figure (default 1000, --quick 300)")
    ap.add_argument("--client", choices=("lean", "httpx"), default="lean", help="the load generator (see _Lean)")
    ap.add_argument("--run-threads", type=int, help="[serve] run_threads for the server (default: its own, 1)")
    ap.add_argument("--run-processes", type=int, help="[serve] run_processes for the server (default: its own, 0)")
    ap.add_argument(
        "--servers",
        type=int,
        default=1,
        help="independent servers (each its own home) sharing each level's clients: the best case of "
        "several HTTP processes (default 1)",
    )
    args = ap.parse_args()
    CLIENT["kind"] = args.client
    levels = [int(x) for x in (args.levels or ("10,100" if args.quick else "10,100,500")).split(",")]
    repeat = 1 if args.quick else args.repeat
    idle_n = args.idle if args.idle is not None else 300 if args.quick else 1000
    root = Path(tempfile.mkdtemp(prefix="tether-bench-serve-"))
    try:
        servers = [Server(root / f"s{i}", args.run_threads, args.run_processes) for i in range(args.servers)]
        server = servers[0]
        try:
            rows: dict[int, list[dict[str, float]]] = {n: [] for n in levels}
            lib: list[float] = []
            for r in range(repeat):
                asyncio.run(level(servers, 5 * len(servers)))  # warm-up
                for n in levels if r % 2 == 0 else list(reversed(levels)):
                    rows[n].append(asyncio.run(level(servers, n)))
                lib.append(asyncio.run(library_per_turn(root, 20)))
            idle_kb = asyncio.run(idle_memory(server, idle_n)) if idle_n else 0.0
        finally:
            for s in servers:
                s.stop()
    finally:
        shutil.rmtree(root, ignore_errors=True)
    lib_ms = statistics.median(lib)
    table = {n: {k: statistics.median(row[k] for row in rows[n]) for k in rows[n][0]} for n in levels}
    print(f"tether serve, scripted/plan (3 turns, 2 tools), medians of {repeat} round(s); commit {tether_commit()}")
    print(
        f"{'streams':>8} {'first p50 ms':>13} {'first p99 ms':>13} {'step p50 ms':>12} {'step p99 ms':>12} "
        f"{'events/s':>9} {'server cpu ms/turn':>19} "
        f"{'x library':>10} {'server cpu s':>13} {'of it http':>11} {'client cpu s':>13}"
    )
    for n, t in table.items():
        print(
            f"{n:>8} {t['first_event_p50_ms']:>13.1f} {t['first_event_p99_ms']:>13.1f} "
            f"{t['first_step_p50_ms']:>12.1f} {t['first_step_p99_ms']:>12.1f} {t['events_per_s']:>9.0f} "
            f"{t['server_cpu_ms_per_turn']:>19.2f} {t['server_cpu_ms_per_turn'] / lib_ms:>10.2f} "
            f"{t['server_cpu_s']:>13.1f} {t['http_process_cpu_s']:>11.1f} {t['client_cpu_s']:>13.1f}"
        )
    print(
        f"load average at the end: {os.getloadavg()[0]:.1f} ({os.cpu_count()} cores); client: {args.client}; "
        f"run processes: {args.run_processes or 0}; servers: {args.servers}"
    )
    print(f"library (run_stream + RunStore + JsonlTracer, in process): {lib_ms:.2f} cpu ms/turn")
    print(f"idle session (its run done): {idle_kb:.1f} KB of server RSS each, over {idle_n} sessions")
    write_results(
        "serve",
        {
            "commit": tether_commit(),
            "levels": table,
            "library_cpu_ms_per_turn": lib_ms,
            "idle_session_kb": idle_kb,
            "repeat": repeat,
            "cpus": os.cpu_count(),
            "client": args.client,
            "run_processes": args.run_processes or 0,
            "servers": args.servers,
            "load": os.getloadavg()[0],
        },
    )


if __name__ == "__main__":
    main()
