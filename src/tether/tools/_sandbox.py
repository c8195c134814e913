"""Where a shell command runs, how the harness is hidden from it, and how everything it started dies.

On Linux a command's life is tied to tether's with ``PR_SET_PDEATHSIG``: a tether killed by SIGKILL
takes the command down with it, so a dead tether leaves no orphan command acting behind a person's
back. Then one of two ways:

* In namespaces: ``setpriv --pdeathsig KILL`` (then a check that tether is still the parent, see
  :func:`_tie`) ``unshare --pid --fork --mount-proc --kill-child`` (plus
  ``--user --map-current-user`` when tether is not root). The command is PID 1 of its own PID
  namespace with its own ``/proc``: no process of tether's exists for it, so neither does tether's
  environment. When that PID 1 dies, the kernel kills everything in the namespace, ``setsid`` or not.
* Without them: under a small *keeper*, this very file run as ``python -I -S _sandbox.py`` (which is
  why it imports only the standard library). The keeper is a child subreaper
  (``PR_SET_CHILD_SUBREAPER``): every orphan of the command, including those that left its session,
  is re-parented to the keeper instead of init, so walking ``/proc`` down from the keeper finds them
  all. When the command ends, or tether dies, the keeper kills whatever is left.

This is the process isolation of every command, and all of it with the OS sandbox ``off``; the
sandbox itself (``_jail``: bubblewrap, its own PID namespace included) replaces the ``unshare``
wrapper when it is on, and is tied to tether by :func:`sandboxed_argv` the same way.

util-linux ``unshare`` rather than bubblewrap here: it is part of every Linux base system (on Debian
util-linux is Essential) while ``bwrap`` often is not installed, and a PID namespace with its own
``/proc`` is exactly what is needed here; one mechanism is one path to test. Which way works is found
once per process by running a trivial command through it.

tether itself is made non-dumpable before its first command: its ``/proc/PID/environ`` (and ``mem``,
``maps``...) then belongs to root, so a same-user process cannot open it even without namespaces, and
no core dump holds its keys. Root bypasses that, which is why the namespace matters when tether runs
as root. Side effects: a same-user debugger (``gdb``, ``py-spy``) cannot attach without root, and a
non-root tether cannot read its own ``/proc/self/environ``.

On macOS there is no PID namespace, no subreaper and no parent-death signal: the command runs in its
own process group, survives a killed tether, and same-user processes can read tether's environment
(``ps -E``).
"""

from __future__ import annotations

import functools
import logging
import os
import shutil
import signal
import subprocess
import sys
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, NoReturn

SandboxKind = Literal["pid+mount namespace", "user+pid+mount namespace", "non-dumpable only", "none (macOS)", "none"]
KeeperMode = Literal["exec", "reap"]

_log = logging.getLogger("tether.tools.shell")
_LINUX = sys.platform.startswith("linux")
_PR_SET_PDEATHSIG = 1
_PR_SET_DUMPABLE = 4
_PR_SET_CHILD_SUBREAPER = 36
_UNSHARE: str | None = None  # None: look it up on PATH (tests point it elsewhere)
_SYSTEM_PATH = "/usr/bin:/bin:/usr/sbin:/sbin"
_ISOLATED = ("--pid", "--fork", "--mount-proc", "--kill-child")
_CANDIDATES: tuple[tuple[SandboxKind, tuple[str, ...]], ...] = (
    ("pid+mount namespace", _ISOLATED),  # root only
    ("user+pid+mount namespace", ("--user", "--map-current-user", *_ISOLATED)),
    ("user+pid+mount namespace", ("--user", "--map-root-user", *_ISOLATED)),  # util-linux < 2.38
)
# PID 1, and /proc/self is PID 1 too: a PID namespace with its own /proc, not the host's.
# Run by /bin/sh after setpriv set the parent-death signal: $PPID is read after it took effect.
_SAME_PARENT = '[ "$PPID" = "$0" ] || exit 137; exec "$@"'
_CHECK = 'read pid rest </proc/self/stat && [ "$pid" = 1 ] && [ "$$" = 1 ] && echo isolated'


@dataclass(frozen=True)
class Plan:
    """How commands start on this machine: what isolation they get and what goes before ``sh -c``."""

    kind: SandboxKind
    keeper: KeeperMode | None
    wrapper: tuple[str, ...] = ()
    setpriv: str | None = None  # ties the command to tether (see _tie)


_plans: dict[bool, Plan] = {}
_lock = threading.Lock()
_hardened = False  # made non-dumpable already


def plan(namespaces: bool = True) -> Plan:
    """The plan for this process, found once (the probe runs a trivial command) and cached."""
    with _lock:
        found = _plans.get(namespaces)
        if found is None:
            found = _plans[namespaces] = _choose(namespaces)
    return found


def command_argv(command: str, namespaces: bool = True) -> list[str]:
    """The argv that runs ``command`` under the plan; makes tether non-dumpable first."""
    global _hardened
    if not _hardened:
        _hardened = True
        _make_non_dumpable()
    return _argv(plan(namespaces), command)


def sandboxed_argv(program: list[str]) -> list[str]:
    """The argv that runs ``program`` (bubblewrap's, which makes its own namespaces) tied to tether."""
    global _hardened
    if not _hardened:
        _hardened = True
        _make_non_dumpable()
    setpriv = _setpriv()
    keeper: KeeperMode | None = None if setpriv or not _keeper_works() else "exec"
    return _argv(Plan("none", keeper, setpriv=setpriv), program)


@functools.cache
def _setpriv() -> str | None:
    return _which("setpriv")


def _argv(chosen: Plan, command: str | list[str]) -> list[str]:
    script = ["/bin/sh", "-c", command] if isinstance(command, str) else command
    if chosen.keeper is None:
        return [*_tie(chosen.setpriv), *chosen.wrapper, *script]
    return [sys.executable, "-I", "-S", __file__, chosen.keeper, str(os.getpid()), *chosen.wrapper, *script]


def _tie(setpriv: str | None, parent: int | None = None) -> list[str]:
    """``setpriv --pdeathsig KILL``, then a check that ``parent`` (tether) is still the parent: a
    tether that died between the fork and the ``prctl`` sends no signal, and the command would run
    on as an orphan (issue 27: two were left by a crash soak). The check exits 137 instead."""
    if setpriv is None:
        return []
    return [setpriv, "--pdeathsig", "KILL", "/bin/sh", "-c", _SAME_PARENT, str(parent or os.getpid())]


def _choose(namespaces: bool) -> Plan:
    if not _LINUX:
        kind: SandboxKind = "none (macOS)" if sys.platform == "darwin" else "none"
        _log.info(
            "shell commands run in their own process group only (%s): a same-user command can read "
            "tether's environment",
            kind,
        )
        return Plan(kind, None)
    if namespaces:
        found, why = _probe_namespaces()
        if found is not None:
            _log.debug("shell commands run in a %s", found.kind)
            return found
        _log.warning(
            "shell commands run without a PID namespace (%s): tether is non-dumpable, so a command "
            "running as the same non-root user cannot read its environment, but one running as root "
            "can",
            why,
        )
    keeper = _keeper_works()
    if not keeper:
        _log.warning(
            "the shell's keeper process cannot start (%s -I -S %s): a command's descendants that "
            "leave its session may outlive it",
            sys.executable,
            __file__,
        )
    return Plan("non-dumpable only", "reap" if keeper else None)


def _works(candidate: Plan, check: str) -> bool | str:
    """True when ``check`` run under ``candidate`` prints ``isolated``; else what went wrong."""
    try:
        done = subprocess.run(
            _argv(candidate, check),
            cwd="/",
            env={"PATH": _SYSTEM_PATH},
            stdin=subprocess.DEVNULL,
            capture_output=True,
            timeout=30,
            check=False,
        )
    except (OSError, subprocess.SubprocessError) as exc:
        return f"{candidate.wrapper[:1] or candidate.keeper}: {exc}"
    if done.stdout.strip() == b"isolated":
        return True
    said = done.stderr.decode(errors="replace").strip().splitlines()
    return said[-1] if said else f"exit status {done.returncode}"


@functools.cache
def _keeper_works() -> bool:
    return bool(sys.executable) and Path(__file__).is_file() and _works(Plan("none", "reap"), "echo isolated") is True


def _which(name: str) -> str | None:
    return shutil.which(name) or shutil.which(name, path=_SYSTEM_PATH)


def _probe_namespaces() -> tuple[Plan | None, str]:
    unshare = _UNSHARE or _which("unshare")
    if unshare is None:
        return None, "util-linux unshare is not installed"
    # setpriv sets the parent-death signal without starting Python; a tether that died between the
    # fork and the prctl is caught by the parent check after it (_tie), as the keeper does.
    setpriv = _which("setpriv")
    why = "unshare refused"
    for kind, flags in _CANDIDATES:
        if kind == "pid+mount namespace" and os.geteuid() != 0:
            continue
        candidate = Plan(kind, None if setpriv or not _keeper_works() else "exec", (unshare, *flags), setpriv)
        works = _works(candidate, _CHECK)
        if works is True:
            return candidate, ""
        why = str(works)
    return None, why


def _libc() -> Any:
    import ctypes

    return ctypes.CDLL(None, use_errno=True)


def _make_non_dumpable() -> None:
    if _LINUX and _libc().prctl(_PR_SET_DUMPABLE, 0, 0, 0, 0) != 0:
        _log.warning("could not make tether non-dumpable; same-user processes can read its environment")


# --- the keeper (run as a program) ---------------------------------------------------------------


def _keep(mode: str, parent: int, program: list[str]) -> NoReturn:
    libc = _libc()
    # Python ignores SIGPIPE and SIGXFSZ; an ignored signal stays ignored across exec.
    for sig in (signal.SIGPIPE, signal.SIGXFSZ):
        signal.signal(sig, signal.SIG_DFL)
    libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL if mode == "exec" else signal.SIGTERM, 0, 0, 0)
    if os.getppid() != parent:  # tether died before the line above could take effect
        os._exit(128 + signal.SIGKILL)
    if mode == "exec":
        os.execv(program[0], program)
    libc.prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
    signal.signal(signal.SIGTERM, lambda *_: _give_up())  # tether is gone: take everything down
    child = os.fork()
    if child == 0:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        try:
            os.execv(program[0], program)
        except OSError as exc:
            os.write(2, f"{program[0]}: {exc.strerror}\n".encode())
        os._exit(127)
    null = os.open(os.devnull, os.O_RDWR)  # the output pipe ends when the command's side closes
    os.dup2(null, 1)
    os.dup2(null, 2)
    status = _wait_for(child)
    kill_below(os.getpid())
    _exit_like(status)


def _wait_for(child: int) -> int:
    """Reap orphans as they come back to the keeper, until ``child`` ends; its wait status."""
    while True:
        try:
            pid, status = os.waitpid(-1, 0)
        except ChildProcessError:
            return 0
        if pid == child:
            return status


def _give_up() -> NoReturn:
    kill_below(os.getpid())
    os._exit(128 + signal.SIGTERM)


def _exit_like(status: int) -> NoReturn:
    if os.WIFSIGNALED(status):
        sig = os.WTERMSIG(status)
        signal.signal(sig, signal.SIG_DFL)
        os.kill(os.getpid(), sig)
        os._exit(128 + sig)
    os._exit(os.waitstatus_to_exitcode(status) if os.WIFEXITED(status) else 1)


if __name__ == "__main__":
    # The keeper runs this file alone (python -I -S: no site-packages, so no tether package): it
    # loads its one helper, the standard-library-only tether/processes.py, by path.
    import importlib.util

    _spec = importlib.util.spec_from_file_location("_tether_processes", Path(__file__).parent.parent / "processes.py")
    assert _spec is not None and _spec.loader is not None
    _processes = importlib.util.module_from_spec(_spec)
    _spec.loader.exec_module(_processes)
    kill_below = _processes.kill_below
    _keep(sys.argv[1], int(sys.argv[2]), sys.argv[3:])
else:
    from tether.processes import kill_below
