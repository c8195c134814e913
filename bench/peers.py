"""tether side by side with other agent harnesses, on one scripted server, with the same tools.

    python bench/peers.py                        # every peer: install (once), then measure
    python bench/peers.py --peers openai,agno    # only these (tether and the raw floor are added)
    python bench/peers.py --turns 200 --reps 3 --runs 5
    python bench/peers.py --install-only         # create or update the virtual environments
    python bench/peers.py --reinstall            # rebuild them from PyPI
    python bench/peers.py --list                 # the peers and what each installs

Each peer gets its own virtual environment, created once from PyPI under
``$TETHER_PEERS_CACHE`` (default ``~/.cache/tether-peers/<name>``) and reused; the raw floor and
tether run in this project's environment. Each peer's driver is a small script in
``bench/_peers/`` run with its own environment's Python; it prints one JSON line.

One scripted server (``bench/_peers/server.py``: :class:`tether.testing.ScriptedServer` in its own
process) answers everyone; the model name picks the scenario: ``plan`` (the 3-turn task:
list_files, read_file, answer) and ``runaway`` (list_files forever, capped by each harness's own
turn limit at ``--turns``). Every harness gets the same prompt, the same two tools with the same
bodies (``list_files`` and ``read_file`` over examples/workspace), and a dummy API key.

For every repetition (``--reps``, default 3) and every peer, in an order that rotates from one
repetition to the next, two fresh processes: one does ``--runs`` 3-turn runs (the first run is
reported apart, the rest are "ms/turn, 3-turn task"), one does an uncounted 3-turn run and then a
single ``--turns`` run (its ms/turn, and the process's peak RSS). Import time is timed by the driver around its own imports. ms/turn is
the client's wall time minus the server's time, per model request. Figures are medians over the
repetitions. A peer that fails to install or to run is reported with the reason.

Writes bench/results/peers.json.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench._results import start_server, tether_commit, write_results  # noqa: E402

DRIVERS = ROOT / "bench" / "_peers"
WORKSPACE = ROOT / "examples" / "workspace"
CACHE = Path(os.environ.get("TETHER_PEERS_CACHE") or Path.home() / ".cache" / "tether-peers")


@dataclass(frozen=True)
class Peer:
    name: str
    label: str
    driver: str
    packages: tuple[str, ...] = ()  # empty: runs in this project's environment
    env: dict[str, str] = field(default_factory=dict)


PEERS: tuple[Peer, ...] = (
    Peer("raw", "raw httpx loop that keeps its client (the floor)", "drive_raw.py"),
    Peer("openai", "openai SDK, minimal loop", "drive_openai.py", ("openai",)),
    Peer("openai-agents", "OpenAI Agents SDK", "drive_openai_agents.py", ("openai-agents",)),
    Peer("pydantic-ai", "Pydantic AI", "drive_pydantic_ai.py", ("pydantic-ai-slim[openai]",)),
    Peer("langgraph", "LangChain / LangGraph", "drive_langgraph.py", ("langchain-openai", "langgraph")),
    Peer("smolagents", "smolagents", "drive_smolagents.py", ("smolagents[openai]",)),
    Peer("agno", "Agno", "drive_agno.py", ("agno", "openai")),
    Peer("google-adk", "Google ADK", "drive_google_adk.py", ("google-adk", "litellm")),
    Peer("strands", "Strands Agents", "drive_strands.py", ("strands-agents[openai]",)),
    Peer("tether", "tether, no store", "drive_tether.py"),
    Peer(
        "tether-store",
        "tether with RunStore + tracer (as the CLI runs)",
        "drive_tether.py",
        env={"TETHER_BENCH_STORE": "1"},
    ),
)
ALWAYS = ("raw", "tether", "tether-store")

# Nothing phones home, nothing fetches at import: the machine may have no way out.
QUIET_ENV = {
    "OPENAI_API_KEY": "sk-dummy",
    "DO_NOT_TRACK": "1",
    "OTEL_SDK_DISABLED": "true",
    "ANONYMIZED_TELEMETRY": "false",
    "AGNO_TELEMETRY": "false",
    "LANGCHAIN_TRACING_V2": "false",
    "LANGSMITH_TRACING": "false",
    "OPENAI_AGENTS_DISABLE_TRACING": "1",
    "LITELLM_LOCAL_MODEL_COST_MAP": "True",
    "LITELLM_TELEMETRY": "False",
    "HF_HUB_OFFLINE": "1",
    "TOKENIZERS_PARALLELISM": "false",
    "PYTHONWARNINGS": "ignore",
}


# --------------------------------------------------------------------------- environments


def venv_dir(peer: Peer) -> Path:
    return CACHE / peer.name


def python_of(peer: Peer) -> Path:
    return Path(sys.executable) if not peer.packages else venv_dir(peer) / "bin" / "python"


def _marker(peer: Peer) -> Path:
    return venv_dir(peer) / "tether-peer.json"


def installed(peer: Peer) -> dict[str, Any] | None:
    """The install record when the environment holds exactly this peer's packages."""
    if not peer.packages:
        return {"packages": [], "versions": {}}
    try:
        record = json.loads(_marker(peer).read_text())
    except (OSError, ValueError):
        return None
    ok = record.get("packages") == list(peer.packages) and python_of(peer).exists()
    return record if ok else None


def _reason(text: str) -> str:
    """The useful lines of a failed pip run."""
    lines = [ln for ln in text.splitlines() if ln.strip()]
    picked = [ln for ln in lines if ln.startswith(("ERROR", "error:")) or "No matching distribution" in ln]
    return " | ".join((picked or lines[-6:])[:6])[:800]


def install(peer: Peer, *, reinstall: bool = False, timeout_s: float = 1200) -> dict[str, Any]:
    """Create (once) the peer's virtual environment and install its packages from PyPI."""
    if not peer.packages:
        return {"ok": True, "where": "this project's environment"}
    if reinstall and venv_dir(peer).exists():
        shutil.rmtree(venv_dir(peer))
    record = installed(peer)
    if record is not None:
        return {"ok": True, "where": str(venv_dir(peer)), "versions": record.get("versions", {}), "cached": True}
    print(f"  installing {peer.name}: pip install {' '.join(peer.packages)} into {venv_dir(peer)}", flush=True)
    t0 = time.perf_counter()
    d = venv_dir(peer)
    if d.exists():
        shutil.rmtree(d)
    d.parent.mkdir(parents=True, exist_ok=True)
    base_python = getattr(sys, "_base_executable", sys.executable)
    made = subprocess.run([base_python, "-m", "venv", str(d)], capture_output=True, text=True)
    if made.returncode != 0:
        return {"ok": False, "reason": "venv: " + _reason(made.stderr + made.stdout)}
    pip = [str(python_of(peer)), "-m", "pip", "install", "--disable-pip-version-check", "--quiet"]
    try:
        got = subprocess.run([*pip, *peer.packages], capture_output=True, text=True, timeout=timeout_s)
    except subprocess.TimeoutExpired:
        return {"ok": False, "reason": f"pip install timed out after {timeout_s:.0f} s"}
    if got.returncode != 0:
        return {"ok": False, "reason": "pip install: " + _reason(got.stderr + got.stdout)}
    freeze = subprocess.run(
        [str(python_of(peer)), "-m", "pip", "freeze", "--disable-pip-version-check"], capture_output=True, text=True
    )
    versions = dict(ln.split("==", 1) for ln in freeze.stdout.splitlines() if "==" in ln)
    record = {
        "packages": list(peer.packages),
        "versions": versions,
        "python": platform.python_version(),
        "installed_at": time.strftime("%Y-%m-%d %H:%M:%S"),
        "seconds": time.perf_counter() - t0,
    }
    _marker(peer).write_text(json.dumps(record, indent=2))
    return {"ok": True, "where": str(d), "versions": versions, "cached": False}


def main_versions(peer: Peer, versions: dict[str, str]) -> str:
    """The versions of the peer's own packages (not its dependencies)."""
    if not peer.packages:
        from importlib.metadata import version

        return f"tether {version('tether')}" if peer.name.startswith("tether") else f"httpx {version('httpx')}"
    names = [p.split("[", 1)[0] for p in peer.packages]
    lowered = {k.lower().replace("_", "-"): v for k, v in versions.items()}
    return ", ".join(f"{n} {lowered.get(n.lower(), '?')}" for n in names)


# --------------------------------------------------------------------------- the server

# --------------------------------------------------------------------------- measuring


def drive(
    peer: Peer, base: str, scenario: str, max_turns: int, runs: int, timeout_s: float, warmup: int = 0
) -> dict[str, Any]:
    env = {
        **os.environ,
        **QUIET_ENV,
        **peer.env,
        "TETHER_BENCH_BASE_URL": base,
        "TETHER_BENCH_WORKSPACE": str(WORKSPACE),
        "OPENAI_BASE_URL": base,
        "PYTHONPATH": str(DRIVERS),
    }
    env.pop("LLM_BASE_URL", None)
    if peer.packages:
        env.pop("VIRTUAL_ENV", None)
    cmd = [
        str(python_of(peer)),
        str(DRIVERS / peer.driver),
        "--scenario",
        scenario,
        "--max-turns",
        str(max_turns),
        "--runs",
        str(runs),
        "--warmup",
        str(warmup),
    ]
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s, env=env, cwd=str(WORKSPACE))
    except subprocess.TimeoutExpired:
        return {"error": f"no answer within {timeout_s:.0f} s"}
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("{")]
    if not lines:
        tail = (proc.stderr or proc.stdout).strip().splitlines()[-8:]
        return {"error": f"exit {proc.returncode}: " + " | ".join(tail)[:800]}
    out: dict[str, Any] = json.loads(lines[-1])
    if "error" not in out and not out.get("runs"):
        out["error"] = "no run finished"
    return out


def measure(peers: list[Peer], base: str, reps: int, runs: int, turns: int, timeout_s: float) -> dict[str, Any]:
    samples: dict[str, dict[str, list[Any]]] = {
        p.name: {
            "import_s": [],
            "first_ms": [],
            "short": [],
            "long": [],
            "rss": [],
            "requests_short": [],
            "requests_long": [],
            "errors": [],
            "answers": [],
        }
        for p in peers
    }
    for rep in range(reps):
        order = peers[rep % len(peers) :] + peers[: rep % len(peers)]
        for peer in order:
            s = samples[peer.name]
            for scenario, cap, n, warm in (("plan", 10, runs, 0), ("runaway", turns, 1, 1)):
                got = drive(peer, base, scenario, cap, n, timeout_s, warm)
                if "import_s" in got:
                    s["import_s"].append(got["import_s"])
                if got.get("error"):
                    s["errors"].append(f"{scenario}: {got['error']}")
                    print(f"  rep {rep + 1} {peer.name:14} {scenario:8} ERROR {got['error'][:200]}", flush=True)
                    continue
                done = got["runs"]
                if scenario == "plan":
                    s["first_ms"].append(done[0]["ms_per_turn"] * done[0]["requests"])
                    later = done[1:] or done
                    s["short"].append(statistics.median(r["ms_per_turn"] for r in later))
                    s["requests_short"].append(done[-1]["requests"])
                    s["answers"].append(done[-1].get("answer"))
                else:
                    s["long"].append(done[0]["ms_per_turn"])
                    s["requests_long"].append(done[0]["requests"])
                    s["rss"].append(got["maxrss_mb"])
                print(
                    f"  rep {rep + 1} {peer.name:14} {scenario:8} "
                    f"{statistics.median(r['ms_per_turn'] for r in (done[1:] or done)):8.2f} ms/turn "
                    f"({done[-1]['requests']} requests)  import {got['import_s']:.2f} s  "
                    f"rss {got['maxrss_mb']:.0f} MB",
                    flush=True,
                )
    return samples


def med(xs: list[float]) -> float | None:
    return statistics.median(xs) if xs else None


def summarise(peer: Peer, s: dict[str, list[Any]], setup: dict[str, Any]) -> dict[str, Any]:
    row: dict[str, Any] = {
        "name": peer.name,
        "label": peer.label,
        "packages": list(peer.packages),
        "version": main_versions(peer, setup.get("versions", {})) if setup.get("ok") else None,
        "installed": setup.get("ok", False),
    }
    if not setup.get("ok"):
        row["status"] = "install failed"
        row["reason"] = setup.get("reason")
        return row
    row.update(
        {
            "import_s": med(s["import_s"]),
            "first_run_ms": med(s["first_ms"]),
            "ms_per_turn_3": med(s["short"]),
            "ms_per_turn_long": med(s["long"]),
            "peak_rss_mb": med(s["rss"]),
            "requests_3": med(s["requests_short"]),
            "requests_long": med(s["requests_long"]),
            "samples": {
                "ms_per_turn_3": s["short"],
                "ms_per_turn_long": s["long"],
                "peak_rss_mb": s["rss"],
                "import_s": s["import_s"],
            },
            "answer": next((a for a in s["answers"] if a), None),
        }
    )
    if s["errors"]:
        row["errors"] = s["errors"]
    if not s["short"] and not s["long"]:
        row["status"] = "did not run"
        row["reason"] = s["errors"][0] if s["errors"] else "no figures"
    elif s["errors"]:
        row["status"] = "partly ran"
        row["reason"] = s["errors"][0]
    else:
        row["status"] = "ran"
    return row


def fmt(x: float | None, spec: str) -> str:
    return format(x, spec) if x is not None else "—"


def print_table(rows: list[dict[str, Any]], turns: int) -> None:
    print(
        f"\n| harness | version | import s | first run ms | ms/turn, 3-turn task | ms/turn at {turns} turns | "
        "peak RSS MB | requests (3-turn / long) |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for r in rows:
        if r["status"] in ("install failed", "did not run"):
            print(f"| {r['label']} | {r.get('version') or '—'} | {r['status']}: {r.get('reason')} | | | | | |")
            continue
        print(
            f"| {r['label']} | {r.get('version') or ''} | {fmt(r['import_s'], '.2f')} | {fmt(r['first_run_ms'], '.0f')} | "
            f"{fmt(r['ms_per_turn_3'], '.2f')} | {fmt(r['ms_per_turn_long'], '.2f')} | {fmt(r['peak_rss_mb'], '.0f')} | "
            f"{fmt(r['requests_3'], '.0f')} / {fmt(r['requests_long'], '.0f')} |"
            + (f" ({r['status']}: {r['reason'][:160]})" if r["status"] == "partly ran" else "")
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument(
        "--peers", help="comma-separated names (see --list); tether and the raw floor are always added; default: all"
    )
    parser.add_argument("--turns", type=int, default=200, help="length of the long run (default 200)")
    parser.add_argument("--reps", type=int, default=3, help="interleaved repetitions (default 3)")
    parser.add_argument("--runs", type=int, default=5, help="3-turn runs per process; the first is reported apart")
    parser.add_argument("--timeout", type=float, default=600, help="seconds one driver process may take")
    parser.add_argument("--install-only", action="store_true")
    parser.add_argument("--reinstall", action="store_true", help="rebuild the peers' environments")
    parser.add_argument("--list", action="store_true")
    args = parser.parse_args()
    if args.list:
        for p in PEERS:
            print(f"{p.name:14} {p.label:50} {' '.join(p.packages) or '(this environment)'}")
        return
    chosen = list(PEERS)
    if args.peers:
        wanted = {n.strip() for n in args.peers.split(",") if n.strip()}
        unknown = wanted - {p.name for p in PEERS}
        if unknown:
            parser.error(f"unknown peers {sorted(unknown)}; known: {', '.join(p.name for p in PEERS)}")
        chosen = [p for p in PEERS if p.name in wanted or p.name in ALWAYS]
    print(f"environments under {CACHE}")
    setups = {p.name: install(p, reinstall=args.reinstall) for p in chosen}
    for name, setup in setups.items():
        if not setup["ok"]:
            print(f"  {name}: install failed: {setup['reason']}")
    if args.install_only:
        return
    runnable = [p for p in chosen if setups[p.name]["ok"]]
    proc, base = start_server([sys.executable, str(DRIVERS / "server.py")])
    started = time.perf_counter()
    try:
        print(
            f"scripted server at {base}; {args.reps} repetitions, {args.runs} 3-turn runs and one "
            f"{args.turns}-turn run per peer per repetition"
        )
        samples = measure(runnable, base, args.reps, args.runs, args.turns, args.timeout)
    finally:
        proc.terminate()
        proc.wait()
    rows = [summarise(p, samples.get(p.name, {}), setups[p.name]) for p in chosen]
    print_table(rows, args.turns)
    write_results(
        "peers",
        {
            "machine": {
                "python": platform.python_version(),
                "cpus": os.cpu_count(),
                "platform": platform.platform(),
                "load_average_at_start": os.getloadavg(),
                "tether_commit": tether_commit(),
            },
            "settings": {"reps": args.reps, "runs": args.runs, "turns": args.turns, "cache": str(CACHE)},
            "units": {
                "import_s": "seconds the driver spent importing what it uses",
                "ms_per_turn": "(client wall − server time) / model requests; 3-turn: median of runs after "
                "the first in each process, then median over repetitions",
                "peak_rss_mb": "VmHWM of the process that did the long run",
            },
            "seconds": time.perf_counter() - started,
            "peers": rows,
        },
    )


if __name__ == "__main__":
    main()
