"""What the shell's operating-system sandbox costs a trivial command, and what the candidates cost.

    python bench/sandbox.py            # about a minute
    python bench/sandbox.py --runs 50  # fewer repetitions

**tool** — ``run_command`` running ``true`` end to end (``RunCommand.execute``: blocklist, argv,
process start, output, refusal check) with the sandbox ``off`` (today's PID namespace), and under
``read-only``, ``workspace-write``, and ``workspace-write`` with one allowed host (which starts
tether's proxy and the bridge inside). The kinds are interleaved (the order rotates every
repetition); the figures are medians, and "added" is the median minus the median of ``off``
measured in the same run. The target (issue 31): at most 15 ms added for ``workspace-write``.

**candidates** — the mechanisms considered, as bare process starts of ``/bin/sh -c true``
(``subprocess.run``, interleaved, medians): the plain shell; util-linux ``unshare`` as tether used
it before (PID + mount namespace); ``unshare`` with a network namespace too; bubblewrap as tether
runs it (user, mount, PID, network, IPC, UTS namespaces, read-only binds, secrets hidden); and a
``python -I -S`` helper, the least a Landlock + seccomp layer written in Python would add before
the command (it must run in the child, between fork and exec).

Also records the machine: kernel, root or not, unprivileged user namespaces, Landlock ABI, bwrap,
and the load average before and after (on a shared machine the figures follow the load).

Writes bench/results/sandbox.json.
"""

from __future__ import annotations

import argparse
import asyncio
import ctypes
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench._results import tether_commit, write_results  # noqa: E402
from tether.cancel import CancelSignal  # noqa: E402
from tether.tools import _jail, _sandbox  # noqa: E402
from tether.tools.base import ToolContext  # noqa: E402
from tether.tools.sandbox import sandbox_status  # noqa: E402
from tether.tools.shell import RunCommand, ShellSettings  # noqa: E402

TOOL_KINDS: dict[str, ShellSettings] = {
    "off": ShellSettings(sandbox="off", policy="never-ask"),
    "read-only": ShellSettings(sandbox="read-only"),
    "workspace-write": ShellSettings(sandbox="workspace-write"),
    "workspace-write + proxy": ShellSettings(sandbox="workspace-write", network=("pypi.org",)),
}


def machine() -> dict[str, Any]:
    libc = ctypes.CDLL(None, use_errno=True)
    landlock = libc.syscall(444, None, 0, 1) if sys.platform.startswith("linux") else -1  # ABI version query
    userns = Path("/proc/sys/user/max_user_namespaces")
    clone = Path("/proc/sys/kernel/unprivileged_userns_clone")
    bwrap = _jail.bwrap_path()
    return {
        "kernel": platform.release(),
        "root": os.geteuid() == 0,
        "max_user_namespaces": userns.read_text().strip() if userns.exists() else None,
        "unprivileged_userns_clone": clone.read_text().strip() if clone.exists() else "(no such switch: allowed)",
        "landlock_abi": landlock if landlock > 0 else None,
        "bwrap": subprocess.run([bwrap, "--version"], capture_output=True, text=True).stdout.strip() if bwrap else None,
        "sandbox": sandbox_status().sentence,
        "load_average_1min_at_start": round(os.getloadavg()[0], 2),
        "cpus": os.cpu_count(),
    }


def tool_medians(runs: int, cwd: Path) -> dict[str, float]:
    tools = {name: RunCommand(settings) for name, settings in TOOL_KINDS.items()}
    times: dict[str, list[float]] = {name: [] for name in tools}

    async def go() -> None:
        names = list(tools)
        for i in range(runs + 3):
            order = names[i % len(names) :] + names[: i % len(names)]
            for name in order:
                ctx = ToolContext(cwd=cwd, signal=CancelSignal())
                start = time.perf_counter()
                out = await tools[name].execute({"command": "true"}, ctx)
                took = time.perf_counter() - start
                assert getattr(out, "content", out) == "exit code 0\n", (name, out)
                if i >= 3:  # the first rounds warm the caches (the probe, imports)
                    times[name].append(took * 1000)

    asyncio.run(go())
    return {name: statistics.median(ts) for name, ts in times.items()}


def candidate_argvs(cwd: Path) -> dict[str, list[str]]:
    script = ["/bin/sh", "-c", "true"]
    unshare = shutil.which("unshare") or "unshare"
    user = [] if os.geteuid() == 0 else ["--user", "--map-current-user"]
    out = {
        "plain sh": script,
        "unshare pid+mount (before)": [unshare, *user, "--pid", "--fork", "--mount-proc", "--kill-child", *script],
        "unshare pid+mount+net": [unshare, *user, "--pid", "--net", "--fork", "--mount-proc", "--kill-child", *script],
        "python -I -S helper (Landlock in Python)": [
            sys.executable,
            "-I",
            "-S",
            "-c",
            "import os; os.execv('/bin/sh', ['sh', '-c', 'true'])",
        ],
    }
    bwrap = _jail.bwrap_path()
    if bwrap is not None:
        jail = _jail.Jail(cwd=cwd, hidden=tuple(_jail.secret_paths()))
        out["bubblewrap (workspace-write)"] = [*_jail.jail_args(jail, bwrap), *script]
    return out


def candidate_medians(runs: int, cwd: Path) -> dict[str, float]:
    argvs = candidate_argvs(cwd)
    times: dict[str, list[float]] = {name: [] for name in argvs}
    names = list(argvs)
    for i in range(runs + 3):
        for name in names[i % len(names) :] + names[: i % len(names)]:
            start = time.perf_counter()
            done = subprocess.run(argvs[name], cwd=cwd, capture_output=True)
            took = time.perf_counter() - start
            assert done.returncode == 0, (name, done.stderr)
            if i >= 3:
                times[name].append(took * 1000)
    return {name: statistics.median(ts) for name, ts in times.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=100)
    args = parser.parse_args()
    if not sandbox_status().available:
        raise SystemExit(f"no sandbox here to measure: {sandbox_status().why_not}")
    about = machine()
    for key, value in about.items():
        print(f"{key:>28}: {value}")
    with tempfile.TemporaryDirectory(prefix="tether-bench-sandbox-", dir="/var/tmp") as cwd:
        tool = tool_medians(args.runs, Path(cwd))
        candidates = candidate_medians(args.runs, Path(cwd))
    about["load_average_1min_at_end"] = round(os.getloadavg()[0], 2)
    print(f"load average (1 min) at the end: {about['load_average_1min_at_end']} on {about['cpus']} CPUs")
    base = tool["off"]
    print(f"\nrun_command('true'), median of {args.runs} (interleaved)")
    print(f"{'mode':<26}{'median ms':>10}{'added ms':>10}")
    for name, ms in tool.items():
        print(f"{name:<26}{ms:>10.2f}{ms - base:>+10.2f}")
    added = tool["workspace-write"] - base
    print(f"target: workspace-write adds <= 15 ms: {'met' if added <= 15 else 'NOT met'} ({added:+.2f} ms)")
    plain = candidates["plain sh"]
    print(f"\ncandidates: /bin/sh -c true started {args.runs} times each (interleaved)")
    print(f"{'mechanism':<42}{'median ms':>10}{'vs plain':>10}")
    for name, ms in candidates.items():
        print(f"{name:<42}{ms:>10.2f}{ms - plain:>+10.2f}")
    write_results(
        "sandbox",
        {
            "commit": tether_commit(),
            "runs": args.runs,
            "machine": about,
            "tool_median_ms": tool,
            "tool_added_ms": {k: v - base for k, v in tool.items()},
            "target_met": added <= 15,
            "candidates_median_ms": candidates,
            "sandbox_off_isolation": _sandbox.plan().kind,
        },
    )


if __name__ == "__main__":
    main()
