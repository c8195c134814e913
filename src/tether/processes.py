"""Processes a tool started, identified so that a later check is about the same process.

A pid alone is not an identity: after a crash and a reboot, or just time, the number is reused.
On Linux a process is identified by its pid, its start time in clock ticks since boot
(``/proc/PID/stat`` field 22) and the boot id; elsewhere by ``ps``'s start time. The harness saves
the identity with a call's intent, so a resume can tell "the command from before the crash is still
running" from "some other process now has that number".
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
from pathlib import Path

__all__ = ["kill_process_tree", "process_alive", "process_identity"]


def _boot_id() -> str:
    try:
        return Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    except OSError:
        return ""


def process_identity(pid: int) -> str | None:
    """What identifies the process ``pid`` now, or None when there is none (or it is a zombie)."""
    if sys.platform.startswith("linux"):
        try:
            stat = Path(f"/proc/{pid}/stat").read_text()
        except OSError:
            return None
        # The command name (field 2) may hold spaces and parentheses: split after the last ')'.
        fields = stat[stat.rfind(")") + 2 :].split()
        if not fields or fields[0] in ("Z", "X"):
            return None
        return f"linux:{_boot_id()}:{fields[19]}"
    try:
        out = subprocess.run(["ps", "-o", "lstart=", "-p", str(pid)], capture_output=True, text=True,
                             timeout=5, check=False)
    except (OSError, subprocess.SubprocessError):
        return None
    started = out.stdout.strip()
    return f"ps:{started}" if out.returncode == 0 and started else None


def process_alive(pid: int, identity: str | None) -> bool:
    """Whether the very process that had ``identity`` is still running as ``pid``.

    With no identity recorded (the save was cut short), any live process with that pid counts:
    when it cannot be told apart, assume the command may still be acting."""
    now = process_identity(pid)
    return now is not None and (identity is None or now == identity)


def _descendants(pid: int) -> list[int]:
    """Every process under ``pid`` (Linux), found through ``/proc/PID/task/*/children``."""
    found: list[int] = []
    todo = [pid]
    while todo:
        current = todo.pop()
        for children in Path(f"/proc/{current}/task").glob("*/children"):
            with contextlib.suppress(OSError, ValueError):
                kids = [int(c) for c in children.read_text().split()]
                found.extend(kids)
                todo.extend(kids)
    return found


def kill_process_tree(pid: int, identity: str | None) -> bool:
    """Kill ``pid``, its process group and its descendants if it is still the same process; return
    whether it was (a process that already exited, or a reused pid, is left alone)."""
    if not process_alive(pid, identity):
        return False
    victims = _descendants(pid) if sys.platform.startswith("linux") else []
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGKILL)
    for victim in [pid, *victims]:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(victim, signal.SIGKILL)
    return True
