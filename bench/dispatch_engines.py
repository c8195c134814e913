"""The dispatch engine for ``tether serve --workers external``, measured: Celery on RabbitMQ (as
``tether.dispatch.engine`` configures it) against DBOS queues on Postgres.

tether depends on neither dbos nor pgserver, so this runs in a virtual environment of its own:

    python3 -m venv /tmp/engines-venv
    /tmp/engines-venv/bin/pip install dbos celery "psycopg[binary]" pgserver
    apt-get install rabbitmq-server                  # Debian's broker, started here on a free port
    /tmp/engines-venv/bin/python bench/dispatch_engines.py        # about 4 minutes
    /tmp/engines-venv/bin/python bench/dispatch_engines.py --kill-cap 20 --tasks 50 --throughput 100

Services are tether's own test services (``tether/testing/services.py``, loaded by path so the
venv needs none of tether's dependencies): ``RabbitServer`` (rabbitmq-server on a free port) and
``PostgresServer`` (Postgres 16 from the pgserver wheel). The Celery app is
``tether.dispatch.engine.celery_app`` itself (late acknowledgement, reject on worker lost,
prefetch multiplier 1) and the worker is started with the arguments ``tether worker`` passes
(``--pool=threads --concurrency=8 --without-gossip --without-mingle --without-heartbeat``).
The DBOS side is a queue registered with ``DBOS.register_queue`` (``worker_concurrency=8``, the
same eight runs at once per worker) served by separate DBOS processes, each with its own
``executor_id`` and the same ``application_version``, enqueued to with ``DBOSClient`` — DBOS's
self-hosted setup without Conductor. DBOS is measured at its default queue polling interval (1 s)
and at 0.1 s.

Every worker is a process of its own (its own session, killed by process group) that appends one
line per event (``start``, ``step``, ``end``: task id, ``time.time()``, pid) to a file the
benchmark reads, so both engines are timed by the same clock and the same code:

1. **dispatch latency**: enqueue → task body starts, p50/p99 over ``--tasks`` tiny tasks sent
   open-loop (gaps uniform in 0-150 ms) to two idle workers;
2. **throughput**: ``--throughput`` no-op tasks enqueued at once, tasks/s from the first enqueue
   to the last task's end (with eight at once per worker, as ``tether worker`` runs);
3. **worker death**: a task of five 1-s steps; the worker that started it is SIGKILLed 2.5 s in;
   the time until the task starts again on the other worker (capped at ``--kill-cap``). DBOS
   does not recover another executor's workflows without Conductor, so after the cap the
   benchmark does what its self-hosting guide says (https://docs.dbos.dev/production/self-hosting/workflow-recovery):
   (a) the surviving executor recovers the dead executor id's pending workflows
   (``DBOS._recover_pending_workflows([id])``, what the admin API's ``/dbos-workflow-recovery``
   calls; dbos 3.4 ships no admin server), and in a second trial (b) the dead executor is
   restarted at once with the same executor id. Counted: how many times the body started and
   how many of the five steps ran again (DBOS replays finished steps from Postgres; Celery
   re-runs the body from the top). The same task without a kill, and duplicate starts among the
   latency and throughput tasks, give the normal case;
4. **idle cost**: CPU % of one core of each idle worker over 10 s, and of the broker (the Erlang
   VM) or Postgres (all its processes), next to the server's own idle cost before any worker
   started.

Writes bench/results/dispatch_engines.json.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.util
import json
import os
import random
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
APP = "tether-engines-bench"
QUEUE = "bench-engines"
VERSION = "bench"
CONCURRENCY = 8  # tether worker's default ([dispatch] concurrency)
STEPS, STEP_S, KILL_AT_S = 5, 1.0, 2.5
CLK = os.sysconf("SC_CLK_TCK")


# ---------------------------------------------------------------- shared by both sides


class Recorder:
    """One line per event, appended with a single write (atomic for lines this short)."""

    def __init__(self, path: Path) -> None:
        self.fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)

    def __call__(self, kind: str, key: str) -> None:
        os.write(self.fd, f"{kind} {key} {time.time():.6f} {os.getpid()}\n".encode())


def _services() -> Any:
    spec = importlib.util.spec_from_file_location(
        "_tether_services", ROOT / "src" / "tether" / "testing" / "services.py"
    )
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _celery_app(broker_url: str) -> tuple[Any, str]:
    """tether's own Celery app (so the figures follow engine.py), or a copy of its settings."""
    sys.path.insert(0, str(ROOT / "src"))
    try:
        from tether.dispatch.engine import celery_app

        return celery_app(broker_url, QUEUE), "tether.dispatch.engine.celery_app"
    except ImportError:
        from celery import Celery

        app = Celery("tether", broker=broker_url, set_as_current=False)
        app.conf.update(
            task_acks_late=True,
            task_reject_on_worker_lost=True,
            worker_prefetch_multiplier=1,
            task_default_queue=QUEUE,
            task_ignore_result=True,
            task_serializer="json",
            accept_content=["json"],
            broker_connection_retry_on_startup=True,
            worker_hijack_root_logger=False,
            worker_send_task_events=False,
            broker_heartbeat=10,
        )
        return app, "copy of engine.py's settings"


def _steps_body(rec: Recorder, step: Callable[[str, int, float], None], task_id: str, n: int, step_s: float) -> None:
    rec("start", task_id)
    for i in range(n):
        step(task_id, i, step_s)
    rec("end", task_id)


# ---------------------------------------------------------------- worker processes


def celery_worker(args: argparse.Namespace) -> None:
    rec = Recorder(Path(args.events) / f"ev-{args.label}.log")
    app, _ = _celery_app(args.broker)

    @app.task(name="bench.noop", acks_late=True)
    def noop(task_id: str) -> None:
        rec("start", task_id)
        rec("end", task_id)

    def step(task_id: str, i: int, step_s: float) -> None:
        rec("step", f"{task_id}:{i}")
        time.sleep(step_s)

    @app.task(name="bench.steps", acks_late=True)
    def steps(task_id: str, n: int, step_s: float) -> None:
        _steps_body(rec, step, task_id, n, step_s)

    from celery.signals import worker_ready

    worker_ready.connect(lambda **_: rec("ready", args.label), weak=False)
    app.worker_main(
        [
            "worker",
            "--pool=threads",
            f"--concurrency={CONCURRENCY}",
            "-Q",
            QUEUE,
            "-n",
            f"bench-{args.label}@%h",
            "--without-gossip",
            "--without-mingle",
            "--without-heartbeat",
            "--loglevel=WARNING",
        ]
    )


def dbos_worker(args: argparse.Namespace) -> None:
    from dbos import DBOS

    rec = Recorder(Path(args.events) / f"ev-{args.label}.log")
    DBOS(
        config={
            "name": APP,
            "system_database_url": args.db,
            "executor_id": args.label,
            "application_version": VERSION,
            "log_level": "WARNING",
        }
    )

    @DBOS.step(name="bench.step")
    def step(task_id: str, i: int, step_s: float) -> None:
        rec("step", f"{task_id}:{i}")
        time.sleep(step_s)

    @DBOS.workflow(name="bench.noop")
    def noop(task_id: str) -> None:
        rec("start", task_id)
        rec("end", task_id)

    @DBOS.workflow(name="bench.steps")
    def steps(task_id: str, n: int, step_s: float) -> None:
        _steps_body(rec, step, task_id, n, step_s)

    def recover_from_file() -> None:
        ids = (Path(args.events) / "recover").read_text().split()
        rec("recover", ",".join(ids))
        DBOS._recover_pending_workflows(ids)  # what the admin API's /dbos-workflow-recovery calls

    def recover(*_: object) -> None:
        threading.Thread(target=recover_from_file, daemon=True).start()

    signal.signal(signal.SIGUSR1, recover)
    signal.signal(signal.SIGTERM, lambda *_: os._exit(0))
    DBOS.launch()
    DBOS.register_queue(QUEUE, worker_concurrency=CONCURRENCY, polling_interval_sec=args.poll)
    rec("ready", args.label)
    while True:
        time.sleep(3600)


# ---------------------------------------------------------------- the benchmark's side


class Events:
    """What the workers wrote, read incrementally from their files."""

    def __init__(self, directory: Path) -> None:
        self.dir = directory
        self.offsets: dict[Path, int] = {}
        self.starts: dict[str, list[tuple[float, int]]] = defaultdict(list)
        self.ends: dict[str, list[tuple[float, int]]] = defaultdict(list)
        self.steps: dict[str, list[tuple[int, int]]] = defaultdict(list)
        self.ready: set[str] = set()

    def poll(self) -> None:
        for path in self.dir.glob("ev-*.log"):
            offset = self.offsets.get(path, 0)
            with open(path, "rb") as f:
                f.seek(offset)
                data = f.read()
            cut = data.rfind(b"\n") + 1
            self.offsets[path] = offset + cut
            for line in data[:cut].decode().splitlines():
                kind, key, t, pid = line.split()
                if kind == "start":
                    self.starts[key].append((float(t), int(pid)))
                elif kind == "end":
                    self.ends[key].append((float(t), int(pid)))
                elif kind == "step":
                    task, _, i = key.rpartition(":")
                    self.steps[task].append((int(i), int(pid)))
                elif kind == "ready":
                    self.ready.add(key)

    def wait(self, cond: Callable[[], bool], timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        while True:
            self.poll()
            if cond():
                return True
            if time.monotonic() > deadline:
                return False
            time.sleep(0.005)


class Workers:
    """Worker processes, each in its own session, stopped by process group."""

    def __init__(self, directory: Path, argv: Callable[[str], list[str]]) -> None:
        self.dir = directory
        self.argv = argv
        self.procs: dict[str, subprocess.Popen[bytes]] = {}

    def start(self, label: str) -> subprocess.Popen[bytes]:
        log = open(self.dir / f"{label}.out", "ab")  # noqa: SIM115 - the child owns it
        proc = subprocess.Popen(self.argv(label), stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        log.close()
        self.procs[label] = proc
        return proc

    def label_of(self, pid: int) -> str:
        return next(label for label, p in self.procs.items() if p.pid == pid)

    def kill(self, label: str, sig: int = signal.SIGKILL) -> None:
        proc = self.procs[label]
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, sig)
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(10)

    def stop_all(self) -> None:
        for proc in self.procs.values():
            if proc.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGTERM)
        for proc in self.procs.values():
            try:
                proc.wait(8)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(5)
            with contextlib.suppress(ProcessLookupError):  # anything left in the group
                os.killpg(proc.pid, signal.SIGKILL)


def _proc_stats() -> dict[int, tuple[int, int, float]]:
    """pid → (ppid, process group, CPU seconds) for every process."""
    out = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            fields = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        out[int(entry)] = (int(fields[1]), int(fields[2]), (int(fields[11]) + int(fields[12])) / CLK)
    return out


def _group(pgid: int) -> set[int]:
    return {pid for pid, (_, group, _) in _proc_stats().items() if group == pgid}


def _tree(root: int) -> set[int]:
    stats = _proc_stats()
    found, frontier = {root}, [root]
    while frontier:
        parent = frontier.pop()
        for pid, (ppid, _, _) in stats.items():
            if ppid == parent and pid not in found:
                found.add(pid)
                frontier.append(pid)
    return found


def cpu_percent(sets: dict[str, set[int]], seconds: float) -> dict[str, float]:
    """CPU % of one core used by each set of processes over ``seconds``."""

    def total(pids: set[int], stats: dict[int, tuple[int, int, float]]) -> float:
        return sum(stats[p][2] for p in pids if p in stats)

    before = _proc_stats()
    t0 = time.monotonic()
    time.sleep(seconds)
    after = _proc_stats()
    wall = time.monotonic() - t0
    return {name: round(100 * (total(pids, after) - total(pids, before)) / wall, 2) for name, pids in sets.items()}


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


class CeleryEngine:
    name = "celery"

    def __init__(self, broker_url: str, events_dir: Path) -> None:
        self.url = broker_url
        self.events_dir = events_dir
        self.app, self.config_source = _celery_app(broker_url)

    def argv(self, label: str) -> list[str]:
        return [
            sys.executable,
            __file__,
            "--worker",
            "celery",
            "--broker",
            self.url,
            "--events",
            str(self.events_dir),
            "--label",
            label,
        ]

    def enqueue(self, task_id: str, name: str, *args: Any) -> None:
        self.app.send_task(f"bench.{name}", args=[task_id, *args], queue=QUEUE)

    def close(self) -> None:
        self.app.close()


class DbosEngine:
    name = "dbos"

    def __init__(self, db_url: str, events_dir: Path, poll: float) -> None:
        from dbos import DBOSClient

        self.url = db_url
        self.events_dir = events_dir
        self.poll = poll
        self.client = DBOSClient(system_database_url=db_url, application_name=APP)

    def argv(self, label: str) -> list[str]:
        return [
            sys.executable,
            __file__,
            "--worker",
            "dbos",
            "--db",
            self.url,
            "--poll",
            str(self.poll),
            "--events",
            str(self.events_dir),
            "--label",
            label,
        ]

    def enqueue(self, task_id: str, name: str, *args: Any) -> None:
        self.client.enqueue(
            {"queue_name": QUEUE, "workflow_name": f"bench.{name}", "workflow_id": task_id, "app_version": VERSION},
            task_id,
            *args,
        )

    def close(self) -> None:
        self.client.destroy()


def measure_latency(engine: Any, ev: Events, n: int) -> dict[str, Any]:
    sent: dict[str, float] = {}
    calls = []
    for i in range(n):
        tid = f"lat-{i:04d}"
        sent[tid] = time.time()
        engine.enqueue(tid, "noop")
        calls.append(time.time() - sent[tid])
        time.sleep(random.uniform(0, 0.15))
    ok = ev.wait(lambda: all(t in ev.starts for t in sent), 60)
    lat = [1000 * (ev.starts[t][0][0] - sent[t]) for t in sent if t in ev.starts]
    return {
        "n": n,
        "started": len(lat),
        "all_started": ok,
        "p50_ms": round(_pct(lat, 0.5), 2),
        "p99_ms": round(_pct(lat, 0.99), 2),
        "max_ms": round(max(lat), 2),
        "mean_ms": round(statistics.fmean(lat), 2),
        "enqueue_call_p50_ms": round(1000 * _pct(calls, 0.5), 3),
    }


def measure_throughput(engine: Any, ev: Events, n: int) -> dict[str, Any]:
    ids = [f"tp-{i:04d}" for i in range(n)]
    t0 = time.time()
    for tid in ids:
        engine.enqueue(tid, "noop")
    t_sent = time.time()
    ok = ev.wait(lambda: all(t in ev.ends for t in ids), 180)
    done = [ev.ends[t][0][0] for t in ids if t in ev.ends]
    wall = max(done) - t0
    return {
        "n": n,
        "done": len(done),
        "all_done": ok,
        "wall_s": round(wall, 3),
        "tasks_per_s": round(len(done) / wall, 1),
        "enqueue_per_s": round(n / (t_sent - t0), 1),
    }


def _task_record(ev: Events, tid: str) -> dict[str, Any]:
    steps = ev.steps.get(tid, [])
    return {
        "body_starts": len(ev.starts.get(tid, [])),
        "ends": len(ev.ends.get(tid, [])),
        "step_runs": len(steps),
        "of_steps": STEPS,
        "ran_in_full_twice": len(ev.starts.get(tid, [])) > 1
        and len({i for i, _ in steps}) == STEPS
        and all(sum(1 for j, _ in steps if j == i) > 1 for i in range(STEPS)),
    }


def normal_case(engine: Any, ev: Events) -> dict[str, Any]:
    tid = "normal-1"
    engine.enqueue(tid, "steps", STEPS, STEP_S)
    ev.wait(lambda: tid in ev.ends, STEPS * STEP_S + 30)
    time.sleep(0.5)  # a second delivery would show by now
    ev.poll()
    return _task_record(ev, tid)


def kill_trial(
    engine: Any, ev: Events, workers: Workers, tid: str, cap: float, after_kill: Callable[[str], None] | None = None
) -> dict[str, Any]:
    """Start a five-step task, SIGKILL the worker running it mid-task; how long until it starts again."""
    engine.enqueue(tid, "steps", STEPS, STEP_S)
    if not ev.wait(lambda: tid in ev.starts, 60):
        return {"error": "the task never started"}
    t_start, pid = ev.starts[tid][0]
    victim = workers.label_of(pid)
    time.sleep(max(0.0, t_start + KILL_AT_S - time.time()))
    t_kill = time.time()
    workers.kill(victim)
    if after_kill:
        after_kill(victim)
    again = ev.wait(lambda: len(ev.starts[tid]) > 1, cap)
    out: dict[str, Any] = {"killed": victim, "killed_after_s": round(t_kill - t_start, 2), "cap_s": cap}
    if again:
        t2, pid2 = ev.starts[tid][1]
        out.update(restarted_after_s=round(t2 - t_kill, 3), restarted_on=workers.label_of(pid2))
    else:
        out["restarted_after_s"] = None
    out["_t_kill"] = t_kill
    out["_victim"] = victim
    return out


def finish(ev: Events, tid: str, out: dict[str, Any]) -> dict[str, Any]:
    ev.wait(lambda: tid in ev.ends, STEPS * STEP_S + 30)
    time.sleep(0.5)
    ev.poll()
    out.update(_task_record(ev, tid))
    return {k: v for k, v in out.items() if not k.startswith("_")}


def start_workers(ev: Events, workers: Workers, labels: list[str], engine: Any) -> float:
    t0 = time.monotonic()
    for label in labels:
        workers.start(label)
    if not ev.wait(lambda: set(labels) <= ev.ready, 90):
        raise RuntimeError(f"workers not ready: {sorted(set(labels) - ev.ready)} (logs in {workers.dir})")
    ready_s = time.monotonic() - t0
    warm = [f"warm-{label}-{i}" for label in labels for i in range(4)]
    for tid in warm:
        engine.enqueue(tid, "noop")
    if not ev.wait(lambda: all(t in ev.ends for t in warm), 60):
        raise RuntimeError(f"warm-up tasks did not run (logs in {workers.dir})")
    return round(ready_s, 2)


def run_engine(
    engine: Any, ev: Events, workers: Workers, server: Callable[[], set[int]], opts: argparse.Namespace, *, kills: bool
) -> dict[str, Any]:
    label = engine.name + (f" (poll {engine.poll:g} s)" if engine.name == "dbos" else "")
    print(f"\n== {label}", flush=True)
    res: dict[str, Any] = {}
    time.sleep(2)  # let a freshly started server settle
    res["server_idle_cpu_pct_before_workers"] = cpu_percent({"server": server()}, 5)["server"]
    names = [f"{engine.name}-w1", f"{engine.name}-w2"]
    res["workers_ready_s"] = start_workers(ev, workers, names, engine)
    time.sleep(1)
    sets = {n: _group(workers.procs[n].pid) for n in names} | {"server": server()}
    idle = cpu_percent(sets, opts.idle)
    res["idle"] = {
        "worker_cpu_pct": round(statistics.fmean(idle[n] for n in names), 2),
        "per_worker_cpu_pct": [idle[n] for n in names],
        "server_cpu_pct": idle["server"],
        "seconds": opts.idle,
    }
    print(f"   idle: {res['idle']}", flush=True)
    res["latency"] = measure_latency(engine, ev, opts.tasks)
    print(f"   latency: {res['latency']}", flush=True)
    res["throughput"] = measure_throughput(engine, ev, opts.throughput)
    print(f"   throughput: {res['throughput']}", flush=True)
    dup = [t for t in ev.starts if t.startswith(("lat-", "tp-")) and len(ev.starts[t]) > 1]
    res["duplicate_starts_normal_case"] = {"tasks": opts.tasks + opts.throughput, "started_twice": len(dup)}
    if not kills:
        return res
    res["normal_case_task"] = normal_case(engine, ev)
    print(f"   normal case: {res['normal_case_task']}", flush=True)
    res["worker_death"] = kill_section(engine, ev, workers, opts)
    return res


def kill_section(engine: Any, ev: Events, workers: Workers, opts: argparse.Namespace) -> dict[str, Any]:
    out: dict[str, Any] = {}
    trial = kill_trial(engine, ev, workers, "kill-1", opts.kill_cap)
    if trial.get("restarted_after_s") is None and "error" not in trial and engine.name == "dbos":
        # Not recovered by anyone: have the survivor recover the dead executor id, as the admin API's
        # /dbos-workflow-recovery endpoint would (dbos 3.4 ships none; this is the call it makes).
        victim = trial["_victim"]
        survivor = next(n for n in workers.procs if n != victim and workers.procs[n].poll() is None)
        (Path(engine.events_dir) / "recover").write_text(victim)
        t_act = time.time()
        os.kill(workers.procs[survivor].pid, signal.SIGUSR1)
        if ev.wait(lambda: len(ev.starts["kill-1"]) > 1, 60):
            t2, pid2 = ev.starts["kill-1"][1]
            trial["recovered_by_survivor_call_after_s"] = round(t2 - t_act, 3)
            trial["restarted_on"] = workers.label_of(pid2)
        else:
            trial["recovered_by_survivor_call_after_s"] = None
        trial["recovery"] = f"{survivor} recovers executor {victim}'s pending workflows"
    out["kill_then_wait"] = finish(ev, "kill-1", trial)
    print(f"   worker death, no help: {out['kill_then_wait']}", flush=True)
    if engine.name == "dbos":
        # The other documented path without Conductor: restart the dead executor with the same id.
        # First bring the first victim back (under its own id), so two workers run again.
        first = out["kill_then_wait"].get("killed")
        if first:
            ev.ready.discard(first)
            workers.start(first)
            ev.wait(lambda: first in ev.ready, 60)
            time.sleep(1.5)  # its queue thread picks the queue up within a second
        restarted: dict[str, float] = {}

        def restart(victim: str) -> None:
            restarted["t"] = time.time()
            workers.start(victim)

        trial2 = kill_trial(engine, ev, workers, "kill-2", 90, after_kill=restart)
        trial2["recovery"] = f"{trial2.get('killed')} restarted at once with the same executor id"
        trial2["process_start_to_restart_s"] = (
            round(ev.starts["kill-2"][1][0] - restarted["t"], 3) if len(ev.starts["kill-2"]) > 1 else None
        )
        out["kill_then_restart_same_executor_id"] = finish(ev, "kill-2", trial2)
        print(f"   worker death, restart same id: {out['kill_then_restart_same_executor_id']}", flush=True)
    return out


def _rabbit_pids(rabbit: Any) -> set[int]:
    """The broker's processes, found by the data directory in their environment: run as root, Debian's
    script starts the broker through ``su`` in a session of its own, outside RabbitServer's group."""
    marker = f"RABBITMQ_MNESIA_BASE={rabbit.dir / 'mnesia'}".encode()
    found = set()
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            with contextlib.suppress(OSError):
                if marker in Path(f"/proc/{entry}/environ").read_bytes().split(b"\0"):
                    found.add(int(entry))
    return found


def _stop_rabbit(rabbit: Any) -> None:
    pids = _rabbit_pids(rabbit)
    rabbit.stop()
    groups = set()
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            groups.add(os.getpgid(pid))
    for sig, wait in ((signal.SIGTERM, 15.0), (signal.SIGKILL, 5.0)):
        for group in groups:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(group, sig)
        deadline = time.monotonic() + wait
        while time.monotonic() < deadline and any(Path(f"/proc/{p}").exists() for p in pids):
            time.sleep(0.2)


def celery_section(svc: Any, tmp: Path, opts: argparse.Namespace) -> dict[str, Any]:
    rabbit = svc.RabbitServer()
    try:
        evdir = tmp / "celery"
        evdir.mkdir()
        engine = CeleryEngine(rabbit.url, evdir)
        workers = Workers(evdir, engine.argv)
        try:
            res = run_engine(engine, Events(evdir), workers, lambda: _rabbit_pids(rabbit), opts, kills=True)
            res["config"] = engine.config_source
            return res
        finally:
            workers.stop_all()
            engine.close()
    finally:
        _stop_rabbit(rabbit)


def dbos_section(pg: Any, tmp: Path, opts: argparse.Namespace, poll: float, *, kills: bool) -> dict[str, Any]:
    evdir = tmp / f"dbos-{poll:g}"
    evdir.mkdir()
    engine = DbosEngine(pg.fresh_database(), evdir, poll)
    workers = Workers(evdir, engine.argv)
    postmaster = int((Path(pg.directory) / "postmaster.pid").read_text().split()[0])
    try:
        return run_engine(engine, Events(evdir), workers, lambda: _tree(postmaster), opts, kills=kills)
    finally:
        workers.stop_all()
        engine.close()


def _versions() -> dict[str, str]:
    from importlib.metadata import version

    out = {p: version(p) for p in ("celery", "kombu", "dbos", "psycopg", "pgserver", "SQLAlchemy")}
    rabbit = subprocess.run(["dpkg-query", "-W", "-f=${Version}", "rabbitmq-server"], capture_output=True, text=True)
    erlang = subprocess.run(["dpkg-query", "-W", "-f=${Version}", "erlang-base"], capture_output=True, text=True)
    out["rabbitmq-server"] = rabbit.stdout.strip() or "?"
    out["erlang"] = erlang.stdout.strip() or "?"
    out["postgres"] = "16 (pgserver)"
    out["python"] = sys.version.split()[0]
    return out


def _fmt(v: Any, unit: str = "") -> str:
    return "-" if v is None else f"{v}{unit}"


def print_table(results: dict[str, Any]) -> None:
    rows = [("", *results["engines"])]
    eng = [results["engines"][k] for k in results["engines"]]
    rows.append(
        ("dispatch p50 / p99 ms", *(f"{e['latency']['p50_ms']:.1f} / {e['latency']['p99_ms']:.1f}" for e in eng))
    )
    rows.append(("throughput tasks/s", *(f"{e['throughput']['tasks_per_s']:.0f}" for e in eng)))
    rows.append(("enqueue calls/s", *(f"{e['throughput']['enqueue_per_s']:.0f}" for e in eng)))
    rows.append(
        (
            "duplicate starts (normal)",
            *(
                f"{e['duplicate_starts_normal_case']['started_twice']}/{e['duplicate_starts_normal_case']['tasks']}"
                for e in eng
            ),
        )
    )

    def death(e: dict[str, Any]) -> str:
        d = e.get("worker_death", {}).get("kill_then_wait")
        if not d:
            return "(not run)"
        if d.get("restarted_after_s") is not None:
            return f"{d['restarted_after_s']:.2f} s"
        return f"not within {d['cap_s']:g} s"

    def steps(e: dict[str, Any], key: str) -> str:
        d = e.get("worker_death", {}).get(key)
        return f"{d['body_starts']} starts, {d['step_runs']}/{STEPS} step runs" if d else "(not run)"

    def manual(e: dict[str, Any]) -> str:
        d = e.get("worker_death", {})
        parts = []
        if d.get("kill_then_wait", {}).get("recovered_by_survivor_call_after_s") is not None:
            parts.append(f"recover call {d['kill_then_wait']['recovered_by_survivor_call_after_s']:.2f} s")
        if d.get("kill_then_restart_same_executor_id", {}).get("restarted_after_s") is not None:
            parts.append(f"same-id restart {d['kill_then_restart_same_executor_id']['restarted_after_s']:.2f} s")
        return ", ".join(parts) or "-"

    rows.append(("worker killed: task restarts after", *(death(e) for e in eng)))
    rows.append(("  ... once someone acts", *(manual(e) for e in eng)))
    rows.append(("  killed task ran", *(steps(e, "kill_then_wait") for e in eng)))
    rows.append(
        (
            "  normal task ran",
            *(
                f"{e['normal_case_task']['body_starts']} start, {e['normal_case_task']['step_runs']}/{STEPS} step runs"
                if "normal_case_task" in e
                else "(not run)"
                for e in eng
            ),
        )
    )
    rows.append(("idle worker CPU %", *(f"{e['idle']['worker_cpu_pct']:.2f}" for e in eng)))
    rows.append(
        (
            "idle broker/db CPU % (before workers)",
            *(f"{e['idle']['server_cpu_pct']:.2f} ({e['server_idle_cpu_pct_before_workers']:.2f})" for e in eng),
        )
    )
    widths = [max(len(str(r[i])) for r in rows) for i in range(len(rows[0]))]
    print()
    for r in rows:
        print("  ".join(str(c).ljust(w) for c, w in zip(r, widths, strict=True)))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    ap.add_argument("--worker", choices=["celery", "dbos"], help=argparse.SUPPRESS)
    ap.add_argument("--broker", help=argparse.SUPPRESS)
    ap.add_argument("--db", help=argparse.SUPPRESS)
    ap.add_argument("--poll", type=float, default=1.0, help=argparse.SUPPRESS)
    ap.add_argument("--events", help=argparse.SUPPRESS)
    ap.add_argument("--label", help=argparse.SUPPRESS)
    ap.add_argument("--tasks", type=int, default=200, help="tiny tasks for the dispatch latency (200)")
    ap.add_argument("--throughput", type=int, default=500, help="no-op tasks for the throughput (500)")
    ap.add_argument("--kill-cap", type=float, default=60, help="seconds to wait for a killed task to restart (60)")
    ap.add_argument("--idle", type=float, default=10, help="seconds of idle CPU measured (10)")
    ap.add_argument("--keep", action="store_true", help="keep the worker logs and event files")
    ap.add_argument("--fast-poll", type=float, default=0.1, help="DBOS's second polling interval (0.1 s)")
    opts = ap.parse_args()
    if opts.worker == "celery":
        return celery_worker(opts)
    if opts.worker == "dbos":
        return dbos_worker(opts)

    svc = _services()
    tmp = Path(tempfile.mkdtemp(prefix="tether-engines-"))
    results: dict[str, Any] = {
        "versions": _versions(),
        "cpus": os.cpu_count(),
        "loadavg_1min_at_start": round(os.getloadavg()[0], 2),
        "engines": {},
    }
    sys.path.insert(0, str(ROOT))
    with contextlib.suppress(Exception):
        from bench._results import tether_commit

        results["commit"] = tether_commit()
    t0 = time.monotonic()
    try:
        results["engines"]["celery+rabbitmq"] = celery_section(svc, tmp, opts)
        pg = svc.PostgresServer()
        try:
            results["engines"]["dbos (poll 1 s)"] = dbos_section(pg, tmp, opts, 1.0, kills=True)
            results["engines"][f"dbos (poll {opts.fast_poll:g} s)"] = dbos_section(
                pg, tmp, opts, opts.fast_poll, kills=False
            )
        finally:
            pg.stop()
    except BaseException:
        print(f"\nworker logs kept in {tmp}", file=sys.stderr)
        raise
    else:
        if not opts.keep:
            shutil.rmtree(tmp, ignore_errors=True)
    results["settings"] = {
        "tasks": opts.tasks,
        "throughput": opts.throughput,
        "kill_cap_s": opts.kill_cap,
        "idle_s": opts.idle,
        "concurrency_per_worker": CONCURRENCY,
        "workers": 2,
        "task_steps": STEPS,
        "step_s": STEP_S,
        "kill_at_s": KILL_AT_S,
    }
    results["wall_s"] = round(time.monotonic() - t0, 1)
    results["loadavg_1min_at_end"] = round(os.getloadavg()[0], 2)
    print_table(results)
    try:
        from bench._results import write_results
    except ImportError:
        out = ROOT / "bench" / "results" / "dispatch_engines.json"
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps(results, indent=2))
        print(f"\nwrote {out.relative_to(ROOT)}")
    else:
        write_results("dispatch_engines", results)


if __name__ == "__main__":
    main()
