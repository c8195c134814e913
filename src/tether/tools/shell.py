"""The shell tool and its sandboxed executor.

``run_command`` runs one command line with ``/bin/sh -c`` in the working directory, and the
executor bounds it: a timeout (30 s by default), an output cap (1 MB; the process is stopped and
the output marked), stdin closed, an environment built from scratch (the harness's own environment,
API keys included, never reaches the command, and tether never changes its own environment to pass
variables), its own process group killed as a whole on timeout or Stop, and a list of blocked
commands checked before anything runs.

The blocklist sees through simple disguises — extra spaces, quotes and backslashes, ``sudo`` and
similar prefixes, absolute paths to the binary, ``sh -c`` / ``bash -c`` wrapping, ``$(...)`` and
backticks, chains with ``;`` ``&&`` ``||`` ``|`` — but a blocklist is a speed bump, not a sandbox.
The boundary is the approval a person gives: by default every shell call needs it.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import shlex
import signal
import sys
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from tether.tools.base import ToolContext, ToolError, ToolResult

__all__ = ["DEFAULT_BLOCKED", "RunCommand", "ShellSettings", "blocked_reason", "run_sandboxed"]

DEFAULT_BLOCKED = frozenset({
    "shutdown", "reboot", "halt", "poweroff", "init", "telinit",
    "mkfs", "mke2fs", "mkswap", "fdisk", "sfdisk", "parted", "wipefs", "dd", "shred",
    "mount", "umount", "swapon", "swapoff", "insmod", "rmmod", "modprobe", "sysctl",
    "sudo", "su", "doas", "pkexec", "passwd", "chpasswd", "useradd", "userdel", "usermod", "visudo",
    "iptables", "nft", "crontab", "systemctl", "launchctl",
})
# Words that run the rest of the line as a command.
_PREFIXES = frozenset({"sudo", "doas", "env", "nice", "nohup", "time", "command", "exec", "builtin",
                       "timeout", "stdbuf", "ionice", "chroot", "xargs", "then", "do", "else", "!"})
_SHELLS = frozenset({"sh", "bash", "dash", "zsh", "ksh", "fish", "busybox"})
_SEPARATORS = re.compile(r"\|\||&&|[;&|\n()]")
_SUBSTITUTION = re.compile(r"\$\(([^()]*)\)|`([^`]*)`")
_SAFE_ENV = ("PATH", "LANG", "LC_ALL", "TZ")


@dataclass(frozen=True)
class ShellSettings:
    """How a deployment bounds the shell (config: ``[tools.shell]``)."""

    require_approval: bool = True
    timeout_s: float = 30.0
    output_cap_bytes: int = 1_000_000
    blocked: frozenset[str] = DEFAULT_BLOCKED
    env: dict[str, str] = field(default_factory=dict)  # extra variables the command gets


def _command_name(token: str) -> str:
    name = token.rsplit("/", 1)[-1]
    return re.sub(r"\.\w+$", "", name) if name.startswith("mkfs") else name


def _segments(command: str) -> list[list[str]]:
    out: list[list[str]] = []
    for part in _SEPARATORS.split(command):
        try:
            words = shlex.split(part, posix=True)
        except ValueError:
            words = part.split()
        if words:
            out.append(words)
    return out


def _rm_root(words: list[str]) -> bool:
    flags = "".join(w[1:] for w in words[1:] if w.startswith("-") and not w.startswith("--"))
    recursive = "r" in flags.lower() or "--recursive" in words
    targets = [w for w in words[1:] if not w.startswith("-")]
    return recursive and any(t in ("/", "/*", "~", "~/", "$HOME", "/home", "/etc", "/usr") for t in targets)


def _strip_prefixes(words: list[str], blocked: frozenset[str]) -> tuple[list[str], str | None]:
    """Drop ``sudo``, ``env X=1``, ``nice -n 5``, ``timeout 10``... in front of the real command."""
    while words and (_command_name(words[0]) in _PREFIXES or ("=" in words[0] and not words[0].startswith("="))):
        if _command_name(words[0]) in blocked:
            return words, f"{_command_name(words[0])!r} is blocked in this deployment"
        words = words[1:]
        while words and words[0].startswith("-"):  # options of the prefix
            words = words[1:]
        if words and re.fullmatch(r"[\d.]+[smhd]?", words[0]):  # timeout 10 cmd
            words = words[1:]
    return words, None


def _segment_reason(words: list[str], blocked: frozenset[str], depth: int) -> str | None:
    words, reason = _strip_prefixes(words, blocked)
    if reason or not words:
        return reason
    name = _command_name(words[0])
    if name in blocked:
        return f"{name!r} is blocked in this deployment"
    if name == "rm" and _rm_root(words):
        return "recursive removal of a system or home directory is blocked"
    if name in _SHELLS:  # sh -c "...": check the script too
        script = next((words[i + 1] for i, w in enumerate(words[:-1]) if w.startswith("-") and "c" in w), None)
        if script is not None:
            return blocked_reason(script, blocked, depth + 1)
    return None


def blocked_reason(command: str, blocked: Iterable[str] = DEFAULT_BLOCKED, _depth: int = 0) -> str | None:
    """Why ``command`` is refused, or None. Looks through prefixes, wrappers and substitutions."""
    blocked = frozenset(blocked)
    if _depth > 4:
        return "the command nests shells too deeply to check"
    for inner in _SUBSTITUTION.findall(command):
        reason = blocked_reason(inner[0] or inner[1], blocked, _depth + 1)
        if reason:
            return reason
    for words in _segments(_SUBSTITUTION.sub(" ", command)):
        reason = _segment_reason(words, blocked, _depth)
        if reason:
            return reason
    return None


def _environment(settings: ShellSettings, cwd: Path) -> dict[str, str]:
    """Built from scratch: a few harmless variables, then the deployment's own."""
    env = {k: os.environ[k] for k in _SAFE_ENV if k in os.environ}
    env.setdefault("PATH", "/usr/local/bin:/usr/bin:/bin")
    env.update({"HOME": str(cwd), "TERM": "dumb", "PWD": str(cwd)})
    env.update(settings.env)
    return env


def _kill_group(proc: asyncio.subprocess.Process) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)


async def run_sandboxed(command: str, ctx: ToolContext, settings: ShellSettings) -> tuple[int | None, bytes, str]:
    """Run ``command``; return (exit code or None when stopped, the first ``cap`` bytes, note)."""
    proc = await asyncio.create_subprocess_exec(
        "/bin/sh", "-c", command, cwd=ctx.cwd, env=_environment(settings, ctx.cwd),
        stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT,
        start_new_session=True,  # its own process group: one kill reaches every child
    )
    assert proc.stdout is not None
    cap = settings.output_cap_bytes
    chunks: list[bytes] = []
    size = 0
    note = ""

    async def drain() -> None:
        nonlocal size, note
        assert proc.stdout is not None
        while True:
            chunk = await proc.stdout.read(65536)
            if not chunk:
                return
            if size < cap:
                chunks.append(chunk[: cap - size])
            size += len(chunk)
            if size > cap:  # memory stays bounded: stop the flood instead of reading it all
                note = f"[output truncated at {cap:,} bytes; the command was stopped]"
                _kill_group(proc)
                return

    try:
        await asyncio.wait_for(ctx.signal.race(drain()), timeout=settings.timeout_s)
        code: int | None = await asyncio.wait_for(proc.wait(), timeout=5) if not note else None
    except TimeoutError:
        note = f"[timed out after {settings.timeout_s:g} s; the command and its children were stopped]"
        code = None
    finally:
        _kill_group(proc)  # children left running in the group go too
        with contextlib.suppress(TimeoutError, ProcessLookupError):
            await asyncio.wait_for(proc.wait(), timeout=5)
    return code, b"".join(chunks), note


class RunCommand:
    """The ``run_command`` tool, configured by a deployment's :class:`ShellSettings`."""

    name = "run_command"
    description = (
        "Run a shell command in the working directory and return its exit code and output "
        "(stdout and stderr together). No input can be typed into it. Long or endless commands are "
        "stopped after a timeout."
    )
    input_schema: ClassVar[dict[str, Any]] = {
        "type": "object",
        "properties": {"command": {"type": "string", "description": "the command line, run with /bin/sh -c",
                                   "minLength": 1, "maxLength": 10000}},
        "required": ["command"],
        "additionalProperties": False,
    }
    read_only = False

    def __init__(self, settings: ShellSettings | None = None) -> None:
        self.settings = settings or ShellSettings()
        self.needs_approval = self.settings.require_approval

    async def execute(self, input: dict[str, Any], ctx: ToolContext) -> ToolResult | str:
        command = str(input["command"])
        reason = blocked_reason(command, self.settings.blocked)
        if reason:
            raise ToolError(f"refused: {reason}. The command was not run; do not try to get around this. "
                            "If the task needs it, tell the user what you would run and why.")
        if not sys.platform.startswith(("linux", "darwin")):
            raise ToolError("run_command needs a POSIX system")
        code, output, note = await run_sandboxed(command, ctx, self.settings)
        text = output.decode("utf-8", errors="replace")
        status = f"exit code {code}" if code is not None else "stopped"
        body = f"{status}\n{text}" + (f"\n{note}" if note else "")
        return ToolResult(body, is_error=code != 0)
