"""The shell cannot read the harness, nothing it starts outlives it, the well-known forms are refused (issue 8).

Every process these tests start sleeps for a unique tagged duration, so it can be found (``pgrep``) and, if a
test fails, cleaned up by pid. Waits are hang detectors only: they end as soon as the condition holds.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import re
import secrets
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tether.cancel import CancelSignal
from tether.errors import RunCancelled
from tether.tools import shell
from tether.tools.base import ToolContext, ToolError, ToolResult

LINUX = sys.platform.startswith("linux")
HANG = 60.0  # seconds: only ever reached when something is broken
# The OS sandbox (bubblewrap), and with it off, the PID namespace and the subreaper.
PATHS = [
    pytest.param("sandbox", id="sandbox"),
    pytest.param(True, id="namespaces"),
    pytest.param(False, id="subreaper"),
]
NAMESPACE_KINDS = ("pid+mount namespace", "user+pid+mount namespace")


def wait_until(condition: Callable[[], bool], what: str, timeout: float = HANG) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"still waiting for {what} after {timeout:g} s")
        time.sleep(0.02)


def run_tool(tool: Any, cwd: Path, command: str) -> Any:
    return asyncio.run(tool.execute({"command": command}, ToolContext(cwd=cwd, signal=CancelSignal())))


@pytest.fixture
def sleeps() -> Iterator[Callable[[], str]]:
    """Unique ``sleep`` durations; whatever still sleeps one of them at the end is killed by pid."""
    made: list[str] = []

    def new() -> str:
        made.append(f"3600.{secrets.randbelow(10**9):09d}")
        return made[-1]

    yield new
    for tag in made:
        for pid in sleeping(tag):
            os.kill(pid, 9)


def sleeping(tag: str) -> list[int]:
    """Processes whose command line is exactly ``sleep <tag>``."""
    out = subprocess.run(["pgrep", "-f", f"^sleep {re.escape(tag)}$"], capture_output=True, text=True)
    return [int(p) for p in out.stdout.split()]


def path_settings(path: Any, **kwargs: Any) -> dict[str, Any]:
    """The settings of one of PATHS, as keyword arguments of ShellSettings."""
    if path == "sandbox":
        return {"sandbox": "workspace-write", **kwargs}
    return {"sandbox": "off", "namespaces": path, **kwargs}


def settings_for(path: Any, **kwargs: Any) -> shell.ShellSettings:
    return shell.ShellSettings(**path_settings(path, **kwargs))


def namespaces_or_skip(namespaces: Any) -> None:
    # These test the isolation a platform has: elsewhere (macOS) only a process group exists, and
    # the namespace path needs a kernel and user allowed to make one (CI, as root, always is).
    if not LINUX:
        pytest.skip("process isolation beyond a process group is Linux-only")
    if namespaces == "sandbox":
        from tether.tools.sandbox import sandbox_status

        if not sandbox_status().available:
            pytest.skip(f"no OS sandbox here: {sandbox_status().why_not}")
        return
    if namespaces and shell.sandbox_kind(namespaces=True) not in NAMESPACE_KINDS:
        pytest.skip(f"no PID namespace here ({shell.sandbox_kind()})")


# --- the blocklist -------------------------------------------------------------------------------

MISSED = [
    "rm -rf //",
    "rm -rf /.",
    "rm -rf /./",
    "rm -rf /home/",
    "rm -rf /etc/",
    "rm -rf ${HOME}",
    "rm -rf ~/*",
    "rm -rf /usr/*",
    'rm -rf "$HOME"/',
    "rm -fr /var/.",
    "rm -rf /usr/..",
    "rm --recursive --force /boot//",
    "rm -rf -- /opt/./",
    "rm -Rf ///lib/*",
    "rm -rf /root",
    "cd /tmp && rm -rf ~/",
    "sh -c 'rm -rf ~/*'",
    "find / -delete",
    "find / -name '*' -delete",
    "find /etc -type f -exec rm {} \\;",
    "find // -execdir rm -f {} +",
    "find -L / -ok shred {} ;",
    "find ~ -delete",
    ":(){ :|:& };:",
    ":(){ :|: & };:",
    ": () { : | : & } ; :",
    "bomb(){ bomb|bomb& };bomb",
    "f() { f | f & }; f",
    "function boom { boom | boom & }; boom",
    "bash -c ':(){ :|:& };:'",
    "chmod -R 777 /",
    "chmod -R 000 /etc/",
    "chown -R nobody /",
    "chgrp -R users /usr/*",
    "chown --recursive me:me ~",
    "chmod -fR a+w //",
    "echo x > /dev/sda",
    "cat x > /dev/sd*",
    "head -c 1M /dev/zero >/dev/vda",
    "tee /dev/sda < x",
    "echo x | tee -a /dev/nvme0n1p1",
    "cat img >> /dev//sdb",
    "cp disk.img /dev/mmcblk0",
    "pv x 1>/dev/xvda",
    "bash -c 'cat x > /dev/sda'",
    "cat x &>/dev/dm-0",
    "dd if=x of=/dev/nvme0n1",
]

HARMLESS = [
    "rm -rf build/",
    "rm -rf ./home",
    "rm -rf home/etc",
    "rm -rf node_modules/*",
    "rm -rf /tmp/build",
    "rm -rf ~/.cache/pip",
    "rm -f /tmp/x.log",
    "rm -r dist",
    "find . -name '*.pyc' -delete",
    "find /usr -name python3",
    "find / -name '*.conf' -print",
    "find src -exec grep -l TODO {} +",
    "find . -type d -name __pycache__ -exec rm -rf {} +",
    "chmod -R 755 ./dist",
    "chown -R 1000:1000 build",
    "chmod 644 notes.txt",
    "echo hi > out.txt",
    "echo x > /dev/null",
    "make 2>/dev/stderr >/dev/stdout",
    "ls -l /dev/sda",
    "lsblk /dev/nvme0n1",
    "tee out.log < in.txt",
    "cat /dev/sda1.txt",
    "cp a.img backup/",
    "f(){ echo hi; }; f",
    "sleep 1 & wait",
    "a | b & c",
    "x=$HOME; echo $x ~",
    "git log --format='%h' | head",
]


@pytest.mark.parametrize("command", MISSED)
def test_well_known_destructive_forms_are_refused_before_anything_runs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, command: str
) -> None:
    assert shell.blocked_reason(command) is not None

    async def must_not_run(*args: Any) -> Any:
        raise AssertionError(f"{command!r} was started")

    monkeypatch.setattr(shell, "run_sandboxed", must_not_run)
    with pytest.raises(ToolError, match="refused"):
        run_tool(shell.RunCommand(), tmp_path, command)


@pytest.mark.parametrize("command", HARMLESS)
def test_ordinary_commands_are_not_refused(command: str) -> None:
    assert shell.blocked_reason(command) is None


def test_dd_stays_blocked_by_name() -> None:
    assert shell.blocked_reason("dd if=a of=b") == "'dd' is blocked in this deployment"


# --- the harness's environment -------------------------------------------------------------------

# Reads the environment of its parent, of every ancestor, and of every process /proc shows.
SNOOP = (
    "tr '\\0' '\\n' </proc/$PPID/environ; p=$$; "
    "while [ \"$p\" -gt 1 ] 2>/dev/null; do tr '\\0' '\\n' < /proc/$p/environ; "
    "p=$(awk '/^PPid:/{print $2}' /proc/$p/status); done; "
    "for f in /proc/[0-9]*/environ; do tr '\\0' '\\n' < $f; done; echo snooped"
)

TETHER = """
import asyncio, json, sys
from pathlib import Path
from tether.cancel import CancelSignal
from tether.tools.base import ToolContext
from tether.tools.shell import RunCommand, ShellSettings
settings = ShellSettings(timeout_s=HANG, **json.loads(sys.argv[2]))
out = asyncio.run(RunCommand(settings).execute({"command": sys.argv[3]},
                                               ToolContext(cwd=Path(sys.argv[1]), signal=CancelSignal())))
print(getattr(out, "content", out))
""".replace("HANG", repr(HANG))


def tether_in_a_child(
    cwd: Path, command: str, settings: dict[str, Any], secret: str, as_user: tuple[list[str], dict[str, Any]] = ([], {})
) -> str:
    """Run the shell tool in a fresh Python process started with ``secret`` in its environment."""
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "OPENAI_API_KEY": secret, "HOME": str(cwd)}
    env.update({k: os.environ[k] for k in ("PYTHONPATH",) if k in os.environ})  # the same tether as this test
    prefix, ids = as_user
    done = subprocess.run(
        [*prefix, sys.executable, "-c", TETHER, str(cwd), json.dumps(settings), command],
        env=env,
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=HANG * 2,
        **ids,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_the_command_cannot_read_the_environment_tether_started_with(tmp_path: Path) -> None:
    """As whoever runs the tests (root in CI): the command sees no process of the harness at all."""
    namespaces_or_skip(True)
    secret = "sk-" + secrets.token_hex(16)
    out = tether_in_a_child(tmp_path, SNOOP, {}, secret)
    assert "snooped" in out
    assert secret not in out


@pytest.fixture
def unprivileged() -> Iterator[tuple[Path, tuple[list[str], dict[str, Any]]]]:
    """A directory, and how to start a process there without privileges that can import tether."""
    if not LINUX:  # it switches user with setpriv and reads /proc: both Linux's
        pytest.skip("switching to an unprivileged user here uses util-linux's setpriv (Linux)")
    path = Path(tempfile.mkdtemp(prefix="tether-unprivileged-"))
    path.chmod(0o777)
    ways: list[tuple[list[str], dict[str, Any]]] = [([], {})]
    if os.geteuid() == 0:  # become nobody: through setpriv, or through Popen's own switch
        setpriv = shutil.which("setpriv")
        ways = [([setpriv, "--reuid=65534", "--regid=65534", "--clear-groups"], {})] if setpriv else []
        ways.append(([], {"user": 65534, "group": 65534, "extra_groups": []}))
    for prefix, ids in ways:
        try:
            probe = subprocess.run(
                [*prefix, sys.executable, "-c", "import os, tether.tools.shell; print(os.geteuid())"],
                cwd=path,
                capture_output=True,
                text=True,
                timeout=HANG,
                **ids,
            )
        except OSError:
            continue
        if probe.returncode == 0 and probe.stdout.strip() != "0":
            yield path, (prefix, ids)
            break
    else:  # e.g. the venv lives under a mode-0700 home no other user can enter
        pytest.skip("no unprivileged user can run tether here")
    shutil.rmtree(path, ignore_errors=True)


@pytest.mark.parametrize("namespaces", PATHS)
def test_an_unprivileged_command_cannot_read_tether_environment(
    unprivileged: tuple[Path, tuple[list[str], dict[str, Any]]], namespaces: Any
) -> None:
    """Without root, either path holds: a user namespace hides tether, or tether is non-dumpable."""
    cwd, as_user = unprivileged
    secret = "sk-" + secrets.token_hex(16)
    out = tether_in_a_child(cwd, SNOOP, path_settings(namespaces), secret, as_user)
    assert "snooped" in out
    assert secret not in out


def test_sandbox_kind_says_what_holds() -> None:
    kinds = (*NAMESPACE_KINDS, "non-dumpable only", "none (macOS)", "none")
    assert shell.sandbox_kind() in kinds
    if LINUX:
        assert shell.sandbox_kind(namespaces=False) == "non-dumpable only"
        if os.geteuid() == 0 and shell.sandbox_kind() in NAMESPACE_KINDS:
            assert shell.sandbox_kind() == "pid+mount namespace"
    elif sys.platform == "darwin":
        assert shell.sandbox_kind() == "none (macOS)"


def test_a_failing_probe_falls_back_and_says_so_once(
    workspace: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    if not LINUX:  # the probe being faked is the Linux namespace probe; macOS has none to fail
        pytest.skip("the namespace probe exists only on Linux")
    from tether.tools import _sandbox

    monkeypatch.setattr(_sandbox, "_UNSHARE", "/bin/false")
    monkeypatch.setattr(_sandbox, "_plans", {})
    with caplog.at_level(logging.INFO, logger="tether.tools.shell"):
        first = run_tool(shell.RunCommand(settings_for(True)), workspace, "echo one")
        second = run_tool(shell.RunCommand(settings_for(True)), workspace, "echo two")
    assert first.content == "exit code 0\none\n" and second.content == "exit code 0\ntwo\n"
    assert shell.sandbox_kind() == "non-dumpable only"
    said = [r for r in caplog.records if "namespace" in r.getMessage()]
    assert len(said) == 1 and said[0].levelno == logging.WARNING


@pytest.mark.parametrize("namespaces", PATHS)
def test_exit_codes_output_and_directory_are_the_command_s_own(workspace: Path, namespaces: Any) -> None:
    namespaces_or_skip(namespaces)
    tool = shell.RunCommand(settings_for(namespaces))
    out = run_tool(tool, workspace, "yes | head -n 1; pwd; echo err >&2; cat; exit 3")
    assert isinstance(out, ToolResult) and out.is_error  # yes died of SIGPIPE quietly: not inherited as ignored
    assert out.content == f"exit code 3\ny\n{workspace.resolve()}\nerr\n"


# --- descendants ---------------------------------------------------------------------------------


def escapees(tag: str) -> str:
    """Two sleepers that leave the session (one orphaned at once), then one that ignores TERM and
    holds the output open; it starts only when the other two are running."""
    return (
        f"setsid sleep {tag} >/dev/null 2>&1 & (setsid sleep {tag} >/dev/null 2>&1 &); "
        f"while [ $(pgrep -c -f '^sleep {tag}$') -lt 2 ]; do sleep 0.05; done; "
        f"trap '' TERM; exec sleep {tag}"
    )


@pytest.mark.parametrize("namespaces", PATHS)
def test_timeout_kills_descendants_that_called_setsid(workspace: Path, namespaces: Any, sleeps: Any) -> None:
    namespaces_or_skip(namespaces)
    tag = sleeps()
    out = run_tool(shell.RunCommand(settings_for(namespaces, timeout_s=3)), workspace, escapees(tag))
    assert "timed out" in out.content
    wait_until(lambda: sleeping(tag) == [], "every sleeper to die")


@pytest.mark.parametrize("namespaces", PATHS)
def test_stop_kills_descendants_that_called_setsid(workspace: Path, namespaces: Any, sleeps: Any) -> None:
    namespaces_or_skip(namespaces)
    tag = sleeps()

    async def go() -> None:
        signal = CancelSignal()
        ctx = ToolContext(cwd=workspace, signal=signal)
        tool = shell.RunCommand(settings_for(namespaces, timeout_s=HANG))
        task = asyncio.create_task(tool.execute({"command": escapees(tag)}, ctx))
        await asyncio.to_thread(wait_until, lambda: len(sleeping(tag)) == 3, "three sleepers")
        signal.cancel("user pressed Stop")
        await task

    with pytest.raises(RunCancelled):
        asyncio.run(go())
    wait_until(lambda: sleeping(tag) == [], "every sleeper to die")


@pytest.mark.parametrize("namespaces", PATHS)
def test_a_finished_command_leaves_no_setsid_descendant(workspace: Path, namespaces: Any, sleeps: Any) -> None:
    namespaces_or_skip(namespaces)
    tag = sleeps()
    command = (
        f"setsid sleep {tag} >/dev/null 2>&1 & "
        f"while [ $(pgrep -c -f '^sleep {tag}$') -lt 1 ]; do sleep 0.05; done; echo started"
    )
    out = run_tool(shell.RunCommand(settings_for(namespaces, timeout_s=HANG)), workspace, command)
    assert out.content == "exit code 0\nstarted\n"
    wait_until(lambda: sleeping(tag) == [], "the sleeper to die")


# --- the process a call started: reported, identified, killed --------------------------------------


def test_process_identity_tells_a_live_process_from_a_gone_one() -> None:
    me = shell.process_identity(os.getpid())
    assert me is not None and me == shell.process_identity(os.getpid())
    assert shell.process_alive(os.getpid(), me)
    assert not shell.process_alive(os.getpid(), me + "0")  # same pid, another start: pid reuse
    assert not shell.process_alive(os.getpid(), None)
    done = subprocess.Popen(["true"])
    done.wait()
    assert shell.process_identity(done.pid) is None
    assert not shell.kill_process_tree(done.pid, me)


@pytest.mark.parametrize("namespaces", PATHS)
def test_the_reported_process_can_be_checked_and_killed_with_everything_it_started(
    workspace: Path, namespaces: Any, sleeps: Any
) -> None:
    namespaces_or_skip(namespaces)
    tag = sleeps()
    reported: list[int] = []

    async def go() -> tuple[int, str, int | None]:
        ctx = ToolContext(cwd=workspace, signal=CancelSignal(), on_process=reported.append)
        settings = settings_for(namespaces, timeout_s=HANG)
        task = asyncio.create_task(shell.run_sandboxed(escapees(tag), ctx, settings))
        await asyncio.to_thread(wait_until, lambda: len(sleeping(tag)) == 3, "three sleepers")
        [pid] = reported
        identity = shell.process_identity(pid)
        assert identity is not None and shell.process_alive(pid, identity)
        assert not shell.kill_process_tree(pid, identity + "0")  # not the same process: untouched
        assert shell.process_alive(pid, identity) and len(sleeping(tag)) == 3
        assert await asyncio.to_thread(shell.kill_process_tree, pid, identity)
        code, _, _ = await asyncio.wait_for(task, HANG)
        return pid, identity, code

    pid, identity, code = asyncio.run(go())
    assert code != 0
    wait_until(lambda: sleeping(tag) == [], "every sleeper to die")
    assert not shell.process_alive(pid, identity)
    assert not shell.kill_process_tree(pid, identity)


def test_a_failing_report_stops_the_command(workspace: Path, sleeps: Any) -> None:
    """If the harness cannot record the process, the command must not run unrecorded."""
    tag = sleeps()

    def refuse(pid: int) -> None:
        raise OSError("disk full")

    ctx = ToolContext(cwd=workspace, signal=CancelSignal(), on_process=refuse)
    with pytest.raises(OSError, match="disk full"):
        asyncio.run(shell.run_sandboxed(f"exec sleep {tag}", ctx, shell.ShellSettings(timeout_s=HANG)))
    wait_until(lambda: sleeping(tag) == [], "the sleeper to die")


KILLED_TETHER = """
import asyncio, json, sys
from pathlib import Path
from tether.cancel import CancelSignal
from tether.tools.base import ToolContext
from tether.tools.shell import ShellSettings, process_identity, run_sandboxed
report = Path(sys.argv[2])
def on_process(pid):
    report.with_suffix(".tmp").write_text(json.dumps([pid, process_identity(pid)]))
    report.with_suffix(".tmp").rename(report)
ctx = ToolContext(cwd=Path(sys.argv[1]), signal=CancelSignal(), on_process=on_process)
asyncio.run(run_sandboxed(sys.argv[3], ctx, ShellSettings(timeout_s=HANG, **json.loads(sys.argv[4]))))
""".replace("HANG", repr(HANG))


@pytest.mark.parametrize("namespaces", PATHS)
def test_a_command_does_not_outlive_a_killed_tether(
    workspace: Path, tmp_path: Path, namespaces: Any, sleeps: Any
) -> None:
    namespaces_or_skip(namespaces)
    tag = sleeps()
    report = tmp_path / "process.json"
    child = subprocess.Popen(
        [
            sys.executable,
            "-c",
            KILLED_TETHER,
            str(workspace),
            str(report),
            escapees(tag),
            json.dumps(path_settings(namespaces)),
        ]
    )
    try:
        wait_until(lambda: child.poll() is not None or len(sleeping(tag)) == 3, "three sleepers")
        assert child.poll() is None and report.exists()
        pid, identity = json.loads(report.read_text())
        assert shell.process_alive(pid, identity)
    finally:
        child.kill()  # SIGKILL: tether gets no chance to clean up
        child.wait()
    wait_until(
        lambda: not shell.process_alive(pid, identity) and sleeping(tag) == [],
        "the command and its descendants to die with tether",
    )
    assert not shell.kill_process_tree(pid, identity)


def test_a_nul_in_the_working_directory_says_the_command_did_not_run(tmp_path: Path) -> None:
    tool = shell.RunCommand(shell.ShellSettings(require_approval=False))
    marker = tmp_path / "ran"
    ctx = ToolContext(cwd=Path(str(tmp_path) + "\0evil"), signal=CancelSignal())
    with pytest.raises(ToolError, match="the command did not run: the working directory contains a NUL"):
        asyncio.run(tool.execute({"command": f"touch {marker}"}, ctx))
    assert not marker.exists()
