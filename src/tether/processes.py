"""Processes a tool started, identified so that a later check is about the same process.

A pid alone is not an identity: after a crash and a reboot, or just time, the number is reused.
On Linux a process is identified by its start time in clock ticks since boot (``/proc/PID/stat``
field 22) and the boot id; elsewhere by ``ps``'s start time. The harness saves the identity with a
call's intent, so a resume can tell "the command from before the crash is still running" from
"some other process now has that number"; the shell uses the same functions to kill a command and
everything below it (descendants are found by parent pid, so those that called ``setsid`` are found
too, and killed before their group, while their parent still holds them).
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

__all__ = ["descendants", "kill_below", "kill_process_tree", "kill_tree", "process_alive", "process_identity"]

_LINUX = sys.platform.startswith("linux")


def _boot_id() -> str:
    try:
        return Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    except OSError:
        return ""


def _stat(pid: int) -> list[str] | None:
    """Fields 3.. of ``/proc/PID/stat`` (state first); the name may hold spaces and parentheses."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except (OSError, ValueError):
        return None
    fields = text[text.rfind(")") + 2 :].split()
    return fields if len(fields) > 19 else None


def process_identity(pid: int) -> str | None:
    """What tells this process apart from any later one with the same pid; None when none runs.

    Linux: the boot id and the start time since boot (``/proc/PID/stat`` field 22). Elsewhere:
    ``ps``'s start time, to the second. A zombie counts as not running."""
    if pid <= 0:
        return None
    if _LINUX:
        fields = _stat(pid)
        if fields is None or fields[0] in ("Z", "X"):
            return None
        return f"linux:{_boot_id()}:{fields[19]}"
    try:
        out = subprocess.run(
            ["ps", "-o", "stat=,lstart=", "-p", str(pid)], capture_output=True, text=True, timeout=10, check=False
        )
    except (OSError, subprocess.SubprocessError):
        return None
    state, _, started = out.stdout.strip().partition(" ")
    if out.returncode != 0 or not started or state.startswith("Z"):
        return None
    return f"ps:{started.strip()}"


def process_alive(pid: int, identity: str | None) -> bool:
    """True only while ``pid`` runs *and* is the process that had ``identity`` (not a reused pid)."""
    return identity is not None and process_identity(pid) == identity


def kill_process_tree(pid: int, identity: str | None) -> bool:
    """Kill ``pid``, its process group and every descendant, if it is still the same process.

    Returns whether it was (a process that ended, or a pid now used by another, is left alone)."""
    if not process_alive(pid, identity):
        return False
    return kill_tree(pid)


def _table() -> dict[int, tuple[int, str]]:
    """pid -> (parent pid, state) for every process this one can see."""
    table: dict[int, tuple[int, str]] = {}
    if _LINUX:
        with contextlib.suppress(OSError):
            for entry in os.scandir("/proc"):
                if entry.name.isdigit() and (fields := _stat(int(entry.name))) is not None:
                    table[int(entry.name)] = (int(fields[1]), fields[0])
        return table
    with contextlib.suppress(OSError, subprocess.SubprocessError):
        out = subprocess.run(
            ["ps", "-A", "-o", "pid=,ppid=,stat="], capture_output=True, text=True, timeout=10, check=False
        ).stdout
        for line in out.splitlines():
            with contextlib.suppress(ValueError):
                pid, ppid, state = line.split()[:3]
                table[int(pid)] = (int(ppid), state[:1])
    return table


def descendants(root: int) -> list[int]:
    """Every live (non-zombie) process below ``root``, parents before children."""
    children: dict[int, list[int]] = {}
    states: dict[int, str] = {}
    for pid, (ppid, state) in _table().items():
        children.setdefault(ppid, []).append(pid)
        states[pid] = state
    found: list[int] = []
    todo = list(children.get(root, ()))
    while todo:
        pid = todo.pop(0)
        if states[pid] not in ("Z", "X"):
            found.append(pid)
        todo.extend(children.get(pid, ()))
    return found


def _kill(pid: int, group: bool = False) -> bool:
    try:
        (os.killpg if group else os.kill)(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        return False
    return True


def kill_below(root: int, patience_s: float = 2.0) -> bool:
    """SIGKILL every descendant of ``root``, pass after pass until none is left; whether there was one.

    ``root`` must still live: when it is a subreaper, the orphans of a pass come back to it and the
    next pass finds them; a process forked during a pass is found by the next one."""
    deadline = time.monotonic() + patience_s
    killed = False
    while (victims := descendants(root)) and time.monotonic() < deadline:
        for pid in victims:
            killed = _kill(pid) or killed
        time.sleep(0.002)  # let the killed become zombies before looking again
    return killed


def kill_tree(root: int) -> bool:
    """Kill everything below ``root``, then its process group, then ``root``; whether any was signalled."""
    if root <= 1 or root == os.getpid():  # never init, never tether itself
        return False
    below = kill_below(root)
    group = _kill(root, group=True)
    return _kill(root) or group or below
