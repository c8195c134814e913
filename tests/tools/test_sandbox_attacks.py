"""The attack suite of issue 31: under ``workspace-write`` no attack succeeds, as root and as ``nobody``.

Each leg starts tether in a fresh Python process (as root, then as ``nobody`` through setpriv) with
a fake home holding secrets, a tether home, a workspace, and canaries outside it; every command
runs through ``run_command`` and prints ``BREACH`` only if its attack worked. The test then judges
from outside: no ``BREACH``, no secret in any output, every canary as it was, no connection on the
loopback servers, no mount on the host. A control leg runs the safe half of the attacks with the
sandbox off and shows they do work there, so the suite is not passing by accident.

The blocklist's destructive forms aimed at the real system (``rm -rf /``, ``mkfs``, fork bombs,
``reboot``) are not run without the blocklist on this shared machine: they stay refused before
anything runs (checked here too), and their disguised forms aim at canaries instead.
"""

from __future__ import annotations

import base64
import json
import os
import secrets
import shutil
import socket
import stat
import subprocess
import sys
import sysconfig
import tempfile
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tether.tools import shell
from tether.tools.sandbox import sandbox_status

pytestmark = pytest.mark.skipif(not sandbox_status().available, reason=f"no sandbox here: {sandbox_status().why_not}")
SRC = Path(shell.__file__).resolve().parents[2]
NOBODY = 65534

CHILD = """
import asyncio, json, sys
from pathlib import Path
from tether.cancel import CancelSignal
from tether.tools.base import ToolContext, ToolError
from tether.tools.shell import RunCommand, ShellSettings
job = json.loads(sys.stdin.read())
tool = RunCommand(ShellSettings(**job["settings"]))
async def one(command):
    try:
        out = await tool.execute({"command": command}, ToolContext(cwd=Path(job["cwd"]), signal=CancelSignal()))
    except ToolError as exc:
        return "ToolError: " + str(exc)
    return getattr(out, "content", out)
async def main():
    return {name: await one(command) for name, command in job["commands"].items()}
print(json.dumps(asyncio.run(main())))
"""

# The blocklist's disguises (issue 31's 13 that got through), each aimed at a canary outside.
DISGUISES = {
    "ifs": "dd${IFS}if=/dev/zero${IFS}of=OUT/ifs${IFS}count=1 && echo BREACH",
    "variable": "c=dd; $c if=/dev/zero of=OUT/var count=1 && echo BREACH",
    "eval": 'eval "d""d if=/dev/zero of=OUT/eval count=1" && echo BREACH',
    "base64": "echo B64 | base64 -d | sh && echo BREACH",
    "glob": "/usr/bin/d[d] if=/dev/zero of=OUT/glob count=1 && echo BREACH",
    "brace": "{ dd if=/dev/zero of=OUT/brace count=1; } && echo BREACH",
    "subst": "$(echo dd) if=/dev/zero of=OUT/subst count=1 && echo BREACH",
    "printf": "$(printf '\\144\\144') if=/dev/zero of=OUT/printf count=1 && echo BREACH",
    "rm-home": 'eval "rm -rf HOME/*"; test -e HOME/notes.txt || echo BREACH',
    "rm-var": "x=rm; $x -rf OUT/dir && echo BREACH",
    "chmod-var": "c=chmod; $c 000 OUT/canary.txt && echo BREACH",
    "su-printf": "$(printf su) root -c 'touch OUT/su' && echo BREACH",
}
WRITES = {
    "home": "touch HOME/pwned && echo BREACH",
    "home-rc": "echo evil >> HOME/.bashrc && echo BREACH",
    "other-tmp": "touch OTHER/pwned && echo BREACH",
    "etc": "touch /etc/tether-pwned-TAG && echo BREACH",
    "tether-home": "touch THOME/pwned && echo BREACH",
    "git-hook": "echo evil > .git/hooks/pre-commit && echo BREACH",
    "tether-config": "touch .tether/pwned && echo BREACH",
    "symlink-write": "ln -s OUT/canary.txt sl && echo pwned > sl && echo BREACH",
    "hardlink-write": "ln OUT/canary.txt hl && echo pwned >> hl && echo BREACH",
    "proc-root-write": "for p in /proc/[0-9]*; do touch $p/rootOUT/proc 2>/dev/null && echo BREACH; done; true",
}
READS = {
    "ssh": "cat HOME/.ssh/id_rsa",
    "aws": "cat HOME/.aws/credentials",
    "gcloud": "cat HOME/.config/gcloud/credentials.db",
    "tether-home-read": "cat THOME/secret.txt; cat THOME/config.toml",
    "grep": "grep -r sk- HOME THOME 2>&1 | head",
    "tar": "tar c HOME/.ssh 2>&1 | base64 | head",
    "symlink-read": "ln -s HOME/.ssh/id_rsa k && cat k",
    "proc-root-read": "for p in /proc/[0-9]*; do cat $p/rootHOME/.ssh/id_rsa; done 2>/dev/null; true",
    "environ": "cat /proc/TPID/environ; tr '\\0' '\\n' < /proc/1/environ | grep sk-",
}
NETWORK = {
    "tcp": "python3 -c \"import socket; socket.create_connection(('127.0.0.1', TCP), 3); print('BREACH')\"",
    "tcp-curl": "curl -s -m 3 http://127.0.0.1:TCP/ && echo BREACH",
    "tcp-bash": "bash -c 'echo hi > /dev/tcp/127.0.0.1/TCP' && echo BREACH",
    "udp": "python3 -c \"import socket; s=socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.sendto(b'x', ('127.0.0.1', UDP))\"",
    "udp-out": "python3 -c \"import socket; s=socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.sendto(b'x', ('8.8.8.8', 53)); print('BREACH')\"",
    "dns": "getent hosts pypi.org && echo BREACH",
    "dns-python": "python3 -c \"import socket; socket.getaddrinfo('pypi.org', 443); print('BREACH')\"",
    "metadata": "curl -s -m 3 http://169.254.169.254/latest/meta-data/ && echo BREACH",
    "unix-run": "python3 -c \"import socket; s=socket.socket(socket.AF_UNIX); s.connect('RUNSOCK'); print('BREACH')\"",
    "unix-abstract": "python3 -c \"import socket; s=socket.socket(socket.AF_UNIX); s.connect('\\0ABSTRACT'); print('BREACH')\"",
}
ESCAPES = {
    "mount": "mkdir -p m && mount -t tmpfs none m && echo BREACH",
    "mount-var": "mkdir -p m && x=mount; $x --bind / m && echo BREACH",
    "unshare-user": "unshare -U -r sh -c 'echo BREACH'",
    "unshare-mount": "unshare -m true && echo BREACH",
    "ptrace": "python3 -c \"import ctypes; r=ctypes.CDLL(None).ptrace(16, TPID, 0, 0); print('BREACH' if r == 0 else 'no')\"",
    "strace": "strace -p TPID -e trace=none true 2>&1 | head -3; kill -0 TPID && echo BREACH",
    "kill": "kill -9 TPID && echo BREACH",
    "setuid": '[ "$(SUID -u)" = 0 ] && [ "$(id -u)" != 0 ] && echo BREACH',
    "chroot": "chroot / true && echo BREACH",
}
# The control leg (sandbox off, as root): attacks that are safe to let succeed on this machine.
CONTROL = ["variable", "eval", "base64", "home", "other-tmp", "tether-home", "ssh", "tcp", "udp", "proc-root-read"]


@dataclass
class Scene:
    """Everything one leg attacks, made for the user ``uid``."""

    root: Path
    ws: Path
    home: Path
    thome: Path
    out: Path
    other: Path
    secret: str
    tag: str
    suid: Path
    runsock: Path
    abstract: str


def _own(path: Path, uid: int) -> None:
    for dirpath, dirnames, filenames in os.walk(path):
        for name in [dirpath, *(os.path.join(dirpath, n) for n in dirnames + filenames)]:
            os.lchown(name, uid, uid)


def make_scene(uid: int) -> Scene:
    # Not under /tmp, which the sandbox replaces: everything attacked is visible to the command.
    root = Path(tempfile.mkdtemp(prefix="tether-attack-", dir="/var/tmp"))
    root.chmod(0o755)
    secret = "sk-" + secrets.token_hex(16)
    home, thome, ws, out = root / "home", root / "tether-home", root / "ws", root / "out"
    for p in (home / ".ssh", home / ".aws", home / ".config" / "gcloud", thome, ws / ".git" / "hooks", ws / ".tether"):
        p.mkdir(parents=True)
    (out / "dir").mkdir(parents=True)
    for f in (
        home / ".ssh/id_rsa",
        home / ".aws/credentials",
        home / ".config/gcloud/credentials.db",
        thome / "secret.txt",
    ):
        f.write_text(f"{secret}\n")
    (thome / "config.toml").write_text(f"# {secret}\n[tools.shell]\ntimeout_s = 30\n")
    (home / "notes.txt").write_text("keep\n")
    (home / ".bashrc").write_text("# rc\n")
    (out / "canary.txt").write_text("canary\n")
    (out / "dir" / "keep").write_text("keep\n")
    _own(root, uid)
    other = Path(tempfile.mkdtemp(prefix="tether-other-user-"))
    other.chmod(0o1777)  # writable by anyone: only the sandbox stands in the way
    suid = root / "suid-id"
    shutil.copy2("/usr/bin/id", suid)
    os.chown(suid, 0, 0)
    suid.chmod(0o4755)
    runsock = Path("/run") / f"tether-attack-{secrets.token_hex(4)}.sock"
    return Scene(
        root, ws, home, thome, out, other, secret, secrets.token_hex(4), suid, runsock, f"tether-{secrets.token_hex(4)}"
    )


class Listeners:
    """A TCP server, a UDP socket and two Unix sockets on the host; counts what reaches them."""

    def __init__(self, scene: Scene) -> None:
        self.tcp = socket.create_server(("127.0.0.1", 0))
        self.udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.udp.bind(("127.0.0.1", 0))
        self.unix = socket.socket(socket.AF_UNIX)
        self.unix.bind(str(scene.runsock))
        scene.runsock.chmod(0o777)
        self.abstract = socket.socket(socket.AF_UNIX)
        self.abstract.bind("\0" + scene.abstract)
        self.reached: list[str] = []
        for s, name in ((self.tcp, "tcp"), (self.unix, "unix"), (self.abstract, "abstract")):
            s.listen(8)
            threading.Thread(target=self._accept, args=(s, name), daemon=True).start()
        threading.Thread(target=self._receive, daemon=True).start()

    def _accept(self, s: socket.socket, name: str) -> None:
        while True:
            try:
                conn, _ = s.accept()
            except OSError:
                return
            self.reached.append(name)
            conn.sendall(b"HTTP/1.0 200 OK\r\n\r\nhello\n")
            conn.close()

    def _receive(self) -> None:
        try:
            self.udp.recvfrom(100)
            self.reached.append("udp")
        except OSError:
            return

    def close(self, scene: Scene) -> None:
        for s in (self.tcp, self.udp, self.unix, self.abstract):
            s.close()
        scene.runsock.unlink(missing_ok=True)


def commands(scene: Scene, listeners: Listeners, tether_pid: str) -> dict[str, str]:
    b64 = base64.b64encode(f"dd if=/dev/zero of={scene.out}/b64 count=1".encode()).decode()
    subs = {
        "B64": b64,
        "THOME": str(scene.thome),  # before HOME, which it contains
        "OUT": str(scene.out),
        "HOME": str(scene.home),
        "OTHER": str(scene.other),
        "TAG": scene.tag,
        "TCP": str(listeners.tcp.getsockname()[1]),
        "UDP": str(listeners.udp.getsockname()[1]),
        "RUNSOCK": str(scene.runsock),
        "ABSTRACT": scene.abstract,
        "SUID": str(scene.suid),
        "TPID": tether_pid,
    }
    out: dict[str, str] = {}
    for group in (DISGUISES, WRITES, READS, NETWORK, ESCAPES):
        for name, command in group.items():
            for key, value in subs.items():
                command = command.replace(key, value)
            out[name] = command
    return out


def python_for(uid: int) -> tuple[list[str], dict[str, str]]:
    """A Python that ``uid`` can run with this tether and its dependencies; (argv prefix, env)."""
    paths = f"{SRC}:{sysconfig.get_paths()['purelib']}"
    if uid == os.geteuid():
        return [sys.executable], {"PYTHONPATH": paths}
    setpriv = shutil.which("setpriv")
    python = f"/usr/bin/python{sys.version_info.major}.{sys.version_info.minor}"
    if setpriv is None or not os.path.exists(python):
        pytest.skip(f"switching to nobody needs setpriv and {python}")
    prefix = [setpriv, f"--reuid={uid}", f"--regid={uid}", "--clear-groups", python]
    probe = subprocess.run([*prefix, "-c", "import tether.tools.shell"], env={"PYTHONPATH": paths}, capture_output=True)
    if probe.returncode != 0:
        pytest.skip(f"nobody cannot import tether here: {probe.stderr.decode()[-200:]}")
    return prefix, {"PYTHONPATH": paths}


def tether_as(uid: int, scene: Scene, settings: dict[str, Any], make: Any) -> dict[str, str]:
    """Start tether as ``uid`` in the scene's workspace; run ``make(tether_pid)``'s commands in order
    through ``run_command``; their outputs by name."""
    prefix, env = python_for(uid)
    env |= {"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": str(scene.home), "TETHER_HOME": str(scene.thome)}
    env["OPENAI_API_KEY"] = scene.secret
    child = subprocess.Popen(
        [*prefix, "-c", f"import os; print(os.getpid(), flush=True); exec({CHILD!r})"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        cwd=scene.ws,
        env=env,
        text=True,
    )
    assert child.stdout is not None and child.stdin is not None
    job = {"settings": settings, "cwd": str(scene.ws), "commands": make(child.stdout.readline().strip())}
    stdout, stderr = child.communicate(json.dumps(job), timeout=600)
    assert child.returncode == 0, stderr[-2000:]
    outputs: dict[str, str] = json.loads(stdout.splitlines()[-1])
    return outputs


def run_leg(
    uid: int, settings: dict[str, Any], only: list[str] | None = None
) -> tuple[Scene, dict[str, str], list[str]]:
    """Make a scene for ``uid``, run every attack (or ``only`` those) through tether as ``uid``."""
    scene = make_scene(uid)
    listeners = Listeners(scene)

    def make(pid: str) -> dict[str, str]:
        every = commands(scene, listeners, pid)
        return {k: every[k] for k in (only or every)}

    try:
        outputs = tether_as(uid, scene, settings, make)
    finally:
        listeners.close(scene)
    return scene, outputs, listeners.reached


def breaches(scene: Scene, outputs: dict[str, str], reached: list[str]) -> list[str]:
    """Every sign, seen from outside, that an attack worked."""
    found = [f"{name}: {out[-300:]!r}" for name, out in outputs.items() if "BREACH" in out or scene.secret in out]
    found += [f"reached the host's {what} listener" for what in reached]
    written = sorted(p.name for p in scene.out.iterdir()) + sorted(p.name for p in scene.other.iterdir())
    if written != ["canary.txt", "dir"]:
        found.append(f"files written outside: {written}")
    if (scene.out / "canary.txt").read_text() != "canary\n" or stat.S_IMODE(
        (scene.out / "canary.txt").stat().st_mode
    ) == 0:
        found.append("the canary outside was changed")
    if not (scene.out / "dir" / "keep").exists() or not (scene.home / "notes.txt").exists():
        found.append("files outside were removed")
    if sorted(p.name for p in scene.home.iterdir()) != [".aws", ".bashrc", ".config", ".ssh", "notes.txt"]:
        found.append(f"the home changed: {sorted(p.name for p in scene.home.iterdir())}")
    if (scene.home / ".bashrc").read_text() != "# rc\n":
        found.append("~/.bashrc was changed")
    if sorted(p.name for p in scene.thome.iterdir()) != ["config.toml", "secret.txt"]:
        found.append("tether's home changed")
    if Path(f"/etc/tether-pwned-{scene.tag}").exists():
        found.append("/etc was written")
    if list((scene.ws / ".git" / "hooks").iterdir()) or list((scene.ws / ".tether").iterdir()):
        found.append(".git or .tether in the workspace was written")
    if str(scene.ws) in Path("/proc/self/mountinfo").read_text():
        found.append("a mount appeared on the host")
    return found


def cleanup(scene: Scene) -> None:
    Path(f"/etc/tether-pwned-{scene.tag}").unlink(missing_ok=True)
    shutil.rmtree(scene.root, ignore_errors=True)
    shutil.rmtree(scene.other, ignore_errors=True)


@pytest.fixture
def legs() -> Iterator[list[Scene]]:
    made: list[Scene] = []
    yield made
    for scene in made:
        cleanup(scene)


@pytest.mark.skipif(os.geteuid() != 0, reason="the two legs need root to make the scene and become nobody")
@pytest.mark.parametrize("uid", [pytest.param(0, id="root"), pytest.param(NOBODY, id="nobody")])
def test_no_attack_succeeds_under_workspace_write(uid: int, legs: list[Scene]) -> None:
    scene, outputs, reached = run_leg(uid, {"sandbox": "workspace-write"})
    legs.append(scene)
    assert len(outputs) == sum(map(len, (DISGUISES, WRITES, READS, NETWORK, ESCAPES)))
    assert breaches(scene, outputs, reached) == []
    # A refusal reads as one, not as a bare errno.
    assert "write outside the workspace blocked by the sandbox" in outputs["etc"]
    assert "network access blocked by the sandbox" in outputs["dns"]
    assert "network access blocked by the sandbox" in outputs["tcp"]


@pytest.mark.skipif(os.geteuid() != 0, reason="the control leg writes as root where only root can clean up")
def test_the_same_attacks_work_without_the_sandbox(legs: list[Scene]) -> None:
    """The suite is not passing by accident: with the sandbox off the safe half of it succeeds."""
    scene, outputs, reached = run_leg(0, {"sandbox": "off", "policy": "never-ask"}, only=CONTROL)
    legs.append(scene)
    found = breaches(scene, outputs, reached)
    for name in ("variable", "eval", "base64", "ssh", "proc-root-read"):
        assert any(line.startswith(f"{name}:") for line in found), (name, outputs[name])
    assert "reached the host's tcp listener" in found and "reached the host's udp listener" in found
    assert any("files written outside" in line for line in found)
    assert any("the home changed" in line for line in found)
    assert "tether's home changed" in found


@pytest.mark.parametrize("command", ["sudo touch MARK", "rm -rf /", "mkfs.ext4 /dev/sda", ":(){ :|:& };:", "reboot"])
def test_the_blocklist_still_stands_in_front_of_the_sandbox(command: str) -> None:
    assert shell.blocked_reason(command) is not None


@pytest.mark.skipif(os.geteuid() != 0, reason="becoming nobody needs root")
def test_ordinary_work_runs_as_nobody_too(legs: list[Scene]) -> None:
    """Build and test a project, git status and commit (.git listed), pip install from a local wheel
    into a workspace venv: under workspace-write, with tether running as nobody."""
    from tests.tools.test_sandbox_modes import make_wheel

    scene = make_scene(NOBODY)
    legs.append(scene)
    make_wheel(scene.root / "wheels")
    (scene.ws / "calc.py").write_text("def add(a, b):\n    return a + b\n")
    (scene.ws / "test_calc.py").write_text(
        "import unittest, calc\nclass T(unittest.TestCase):\n    def test(self):\n        self.assertEqual(calc.add(2, 3), 5)\n"
    )
    shutil.rmtree(scene.ws / ".git")
    _own(scene.root, NOBODY)
    git = "git -c user.name=t -c user.email=t@example.com"
    work = {
        "build": "python3 -m compileall -q . && python3 -m unittest -q 2>&1 | tail -1",
        "git": f"git init -q && git add -A && {git} commit -qm first && echo x >> calc.py && {git} commit -qam second"
        " && git status --short && git log --oneline | wc -l",
        "pip": f"python3 -m venv .venv && .venv/bin/python -m pip install -q --no-index --find-links {scene.root}/wheels"
        " tinypkg && .venv/bin/python -c 'import tinypkg; print(tinypkg.ANSWER)'",
        "whoami": "id -u",
    }
    settings = {"sandbox": "workspace-write", "writable": [".git"], "timeout_s": 300}
    outputs = tether_as(NOBODY, scene, settings, lambda _: work)
    assert outputs["build"] == "exit code 0\nOK\n", outputs["build"]
    assert outputs["git"] == "exit code 0\n2\n", outputs["git"]
    assert outputs["pip"].endswith("42\n"), outputs["pip"]
    assert outputs["whoami"] == f"exit code 0\n{NOBODY}\n"
