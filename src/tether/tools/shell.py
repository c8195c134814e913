"""The shell tool and its sandboxed executor.

``run_command`` runs one command line with ``/bin/sh -c`` in the working directory, and the
executor bounds it: a timeout (30 s by default), an output cap (1 MB; the process is stopped and
the output marked), stdin closed, an environment built from scratch (tether never changes its own
environment to pass variables), everything the command started killed on timeout, Stop or its end,
and a list of blocked commands checked before anything runs.

What keeps the harness's environment (API keys included) from the command depends on the platform;
:func:`sandbox_kind` says which holds here (details in ``_sandbox``):

* ``"pid+mount namespace"`` (Linux, root) and ``"user+pid+mount namespace"`` (Linux, unprivileged
  user namespaces allowed): the command runs in its own PID namespace with its own ``/proc``; no
  process of tether's is visible to it, and every descendant dies with it, ``setsid`` or not.
* ``"non-dumpable only"`` (Linux without namespaces): tether is non-dumpable, so a command running as
  the same non-root user cannot open its ``/proc`` entries; root can. A subreaper still finds and
  kills every descendant.
* ``"none (macOS)"``: only the built environment; a same-user process can read tether's (``ps -E``).

On Linux the command dies with tether, even when tether is killed with SIGKILL; on macOS it may
outlive it. Either way the tool reports the process it started through ``ctx.on_process``, and
:func:`process_alive` / :func:`kill_process_tree` let a resume check and stop that very process.

The blocklist sees through simple disguises — extra spaces, quotes and backslashes, ``sudo`` and
similar prefixes, absolute paths to the binary, ``sh -c`` / ``bash -c`` wrapping, ``$(...)`` and
backticks, chains with ``;`` ``&&`` ``||`` ``|``, spellings of a path (``//``, ``/./``, ``/usr/*``,
``~``, ``${HOME}``) — and knows the famous forms (recursive removal, ``chmod``/``chown`` or
``find -delete`` of a system directory, fork bombs, writes to disk devices). It is a speed bump, not
a sandbox. The boundary is the operating-system sandbox (:mod:`tether.tools.sandbox`: bubblewrap,
``read-only`` / ``workspace-write`` / ``off``, network off or through tether's proxy, secrets
hidden), under which commands run without a person; where there is none, the approval a person
gives, which every command then needs. ``run_command_unsandboxed`` (:class:`RunCommandUnsandboxed`)
runs one command outside the sandbox after a person approves it.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import itertools
import logging
import os
import posixpath
import re
import shlex
import signal
import sys
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, Literal

from tether.processes import kill_process_tree, kill_tree, process_alive, process_identity
from tether.tools import _gitguard, _jail, _sandbox
from tether.tools._netproxy import SOCKET_NAME, NetProxy
from tether.tools._sandbox import SandboxKind
from tether.tools.base import ToolContext, ToolError, ToolResult, cut_middle
from tether.tools.sandbox import ApprovalPolicy, SandboxMode, SandboxStatus, refusal_note, sandbox_status

__all__ = [
    "DEFAULT_BLOCKED",
    "RunCommand",
    "RunCommandUnsandboxed",
    "SandboxKind",
    "ShellSettings",
    "blocked_reason",
    "kill_process_tree",
    "process_alive",
    "process_identity",
    "run_sandboxed",
    "sandbox_kind",
]

DEFAULT_BLOCKED = frozenset(
    {
        "shutdown",
        "reboot",
        "halt",
        "poweroff",
        "init",
        "telinit",
        "mkfs",
        "mke2fs",
        "mkswap",
        "fdisk",
        "sfdisk",
        "parted",
        "wipefs",
        "dd",
        "shred",
        "mount",
        "umount",
        "swapon",
        "swapoff",
        "insmod",
        "rmmod",
        "modprobe",
        "sysctl",
        "sudo",
        "su",
        "doas",
        "pkexec",
        "passwd",
        "chpasswd",
        "useradd",
        "userdel",
        "usermod",
        "visudo",
        "iptables",
        "nft",
        "crontab",
        "systemctl",
        "launchctl",
    }
)
# Words that run the rest of the line as a command.
_PREFIXES = frozenset(
    {
        "sudo",
        "doas",
        "env",
        "nice",
        "nohup",
        "time",
        "command",
        "exec",
        "builtin",
        "timeout",
        "stdbuf",
        "ionice",
        "chroot",
        "xargs",
        "then",
        "do",
        "else",
        "!",
    }
)
_SHELLS = frozenset({"sh", "bash", "dash", "zsh", "ksh", "fish", "busybox"})
_SEPARATORS = re.compile(r"\|\||&&|[;&|\n()]")
_SUBSTITUTION = re.compile(r"\$\(([^()]*)\)|`([^`]*)`")
_SAFE_ENV = ("PATH", "LANG", "LC_ALL", "TZ")
# Directories whose recursive removal, chmod or find -delete is refused (and the user's home).
_PROTECTED = frozenset(
    {
        "/",
        "/bin",
        "/boot",
        "/dev",
        "/etc",
        "/home",
        "/lib",
        "/lib64",
        "/opt",
        "/proc",
        "/root",
        "/sbin",
        "/sys",
        "/usr",
        "/var",
    }
)
_HOME_WORD = re.compile(r"^(?:~|\$HOME|\$\{HOME\})(?=/|$)")
_REDIRECT_TARGET = re.compile(r"(?:>>?\|?|\bof=)\s*['\"]?(/dev/[^\s'\"]+)")
_DISK = re.compile(r"/dev/(?:sd|hd|vd|xvd|nvme|mmcblk|dm-|md|loop|nbd|sr|mapper/|disk/)")
_FIND_RUNS = frozenset({"-exec", "-execdir", "-ok", "-okdir"})
_DESTROYERS = frozenset({"rm", "shred", "unlink", "rmdir", "truncate", "wipe", "srm"})
_COPIERS = frozenset({"cp", "mv", "install", "rsync"})
_NAME = r"[^\s(){}|&;<>'\"]+"
# A name starts only where a word does (the lookbehind), and bodies are looked for only up to the last
# "}": tried at every character, or scanning to the end for a "}" that is not there, the match was
# quadratic, and 10,000 characters held the event loop for seconds.
_FUNCTION = re.compile(
    rf"(?:\bfunction\s+({_NAME})\s*(?:\(\s*\))?|(?<![^\s(){{}}|&;<>'\"])({_NAME})\s*\(\s*\))\s*\{{([^}}]*)\}}"
)


@dataclass(frozen=True)
class ShellSettings:
    """How a deployment bounds the shell (config: ``[tools.shell]`` and ``[tools.shell.sandbox]``)."""

    # The old switch: True is the policy "always-ask", False "never-ask"; None leaves it to ``policy``.
    require_approval: bool | None = None
    timeout_s: float = 30.0
    output_cap_bytes: int = 1_000_000
    # What the model is given of the output: its start and its end, what lies between counted.
    shown_chars: int = 30_000
    blocked: frozenset[str] = DEFAULT_BLOCKED
    env: dict[str, str] = field(default_factory=dict)  # extra variables the command gets
    # Linux: run each command in its own PID and mount namespace when the machine allows it. False
    # keeps the plain path (a subreaper still kills every descendant) for hosts where it misbehaves.
    namespaces: bool = True
    # The operating-system sandbox (tether.tools.sandbox). None: workspace-write with ask-to-escalate
    # where the sandbox is available, no sandbox and always-ask where it is not.
    sandbox: SandboxMode | None = None
    policy: ApprovalPolicy | None = None
    writable: tuple[str, ...] = ()  # more writable paths (relative ones are in the working directory)
    network: tuple[str, ...] = ()  # hosts reachable through tether's proxy: "pypi.org", "*.github.com"
    home: Literal["read-only", "hidden"] = "read-only"  # the homes outside the workspace
    hide: tuple[str, ...] = ()  # more paths never readable (secrets in homes and tether's home always are)


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


def _protected(word: str) -> bool:
    """Whether ``word`` names a system directory or the home, however it is spelled."""
    home = os.path.expanduser("~")
    path = _HOME_WORD.sub(lambda _: home, word)
    if not path.startswith("/"):
        return False
    path = posixpath.normpath(re.sub("/+", "/", path))
    while path.endswith(("/*", "/.*")):  # everything inside it
        path = posixpath.dirname(path)
    return path in _PROTECTED or path == posixpath.normpath(home)


def _recursive(words: list[str], letters: str) -> bool:
    flags = "".join(w[1:] for w in words[1:] if w.startswith("-") and not w.startswith("--"))
    return "--recursive" in words or any(letter in flags for letter in letters)


def _names_protected(words: list[str]) -> bool:
    return any(_protected(w) for w in words[1:] if not w.startswith("-"))


def _disk(word: str) -> bool:
    return bool(_DISK.match(re.sub(r"/+(?:\./+)*", "/", word)))


def _find_reason(words: list[str], blocked: frozenset[str]) -> str | None:
    """``find / -delete`` and ``find /etc -exec rm``; ``-exec`` of a blocked command anywhere."""
    rest = words[1:]
    while rest and (rest[0] in ("-H", "-L", "-P") or rest[0].startswith("-O")):
        rest = rest[1:]
    starts = list(itertools.takewhile(lambda w: not w.startswith(("-", "(", "!", ")")), rest))
    actions = rest[len(starts) :]
    runs = [_command_name(actions[i + 1]) for i, w in enumerate(actions[:-1]) if w in _FIND_RUNS]
    for name in runs:
        if name in blocked:
            return f"{name!r} is blocked in this deployment"
    destroys = "-delete" in actions or any(name in _DESTROYERS for name in runs)
    if destroys and any(_protected(start) for start in starts):
        return "deleting a system or home directory with find is blocked"
    return None


def _destructive(name: str, words: list[str], blocked: frozenset[str]) -> str | None:
    if name == "rm" and _recursive(words, "rR") and _names_protected(words):
        return "recursive removal of a system or home directory is blocked"
    if name in ("chmod", "chown", "chgrp") and _recursive(words, "R") and _names_protected(words):
        return f"recursive {name} of a system or home directory is blocked"
    if name == "find":
        return _find_reason(words, blocked)
    targets = [w for w in words[1:] if not w.startswith("-")]
    if (name == "tee" and any(_disk(t) for t in targets)) or (name in _COPIERS and targets and _disk(targets[-1])):
        return "writing to a disk device is blocked"
    return None


def _whole_line_reason(command: str) -> str | None:
    """What only the whole line shows: a fork bomb, a redirection onto a disk device."""
    for match in _FUNCTION.finditer(command, 0, command.rfind("}") + 1):  # no body ends after the last }
        name = re.escape(match.group(1) or match.group(2))
        if re.search(rf"(?:^|[\s;|&(]){name}\s*[|&]", match.group(3)):  # calls itself in a pipe or background
            return "a fork bomb is blocked"
    if any(_disk(target) for target in _REDIRECT_TARGET.findall(re.sub(r"/+(?:\./+)*", "/", command))):
        return "writing to a disk device is blocked"
    return None


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
    if name in _SHELLS:  # sh -c "...": check the script too
        script = next((words[i + 1] for i, w in enumerate(words[:-1]) if w.startswith("-") and "c" in w), None)
        if script is not None:
            return blocked_reason(script, blocked, depth + 1)
    return _destructive(name, words, blocked)


def blocked_reason(command: str, blocked: Iterable[str] = DEFAULT_BLOCKED, _depth: int = 0) -> str | None:
    """Why ``command`` is refused, or None. Looks through prefixes, wrappers and substitutions."""
    blocked = frozenset(blocked)
    if _depth > 4:
        return "the command nests shells too deeply to check"
    whole = _whole_line_reason(command)
    if whole:
        return whole
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


def sandbox_kind(namespaces: bool = True) -> SandboxKind:
    """What keeps tether's environment from a shell command on this machine (found once, cached).

    ``namespaces=False`` answers for :attr:`ShellSettings.namespaces` turned off."""
    return _sandbox.plan(namespaces).kind


def _stop(proc: asyncio.subprocess.Process) -> None:
    if proc.returncode is None:  # while it lives: what it started is found below it
        kill_tree(proc.pid)
    else:  # what is left of its process group (it may outlive its leader where nothing else kills it)
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGKILL)


_log = logging.getLogger("tether.tools.shell")
_WARNED: set[Path] = set()  # workspaces too big for the git repositories' walk, said once each
_PROXY_DIR = "/tmp/.tether-proxy"  # where the proxy's socket appears inside the sandbox
_BRIDGE = Path(__file__).with_name("_bridge.py")


def _hidden(ctx: ToolContext, settings: ShellSettings) -> list[Path]:
    """What a command may never read: the secrets of every home, tether's home, ``hide``."""
    return _jail.secret_paths(ctx.cwd / Path(p).expanduser() for p in settings.hide)


def _jail_for(
    ctx: ToolContext, settings: ShellSettings, mode: SandboxMode, proxy_dir: Path | None, hidden: list[Path]
) -> _jail.Jail:
    return _jail.Jail(
        cwd=ctx.cwd,
        writable=tuple(ctx.cwd / Path(p).expanduser() for p in settings.writable),
        write_cwd=mode == "workspace-write",
        hide_homes=settings.home == "hidden",
        hidden=tuple(hidden),
        readable=(Path(sys.base_prefix), Path(sys.prefix), _BRIDGE.parent) if proxy_dir else (),
        binds=((proxy_dir, _PROXY_DIR),) if proxy_dir else (),
    )


async def _start_argv(
    command: str, ctx: ToolContext, settings: ShellSettings, status: SandboxStatus, proxy_dir: Path | None
) -> tuple[list[str], list[Path], _gitguard.Survey | None]:
    """The argv for ``command``, in the sandbox ``status`` says or outside it (mode off), the
    paths hidden from it, and the repositories in what it may write (workspace-write)."""
    if status.mode == "off":
        return await asyncio.to_thread(_sandbox.command_argv, command, settings.namespaces), [], None
    bwrap = _jail.bwrap_path()
    if bwrap is None:  # removed since the probe: refuse rather than run unconfined
        raise ToolError("refused: the sandbox (bubblewrap) is no longer installed; the command was not run.")
    inner = ["/bin/sh", "-c", command]
    if proxy_dir is not None:
        inner = [sys.executable, "-I", "-S", str(_BRIDGE), f"{_PROXY_DIR}/{SOCKET_NAME}", *inner]

    def build() -> tuple[list[str], list[Path], _gitguard.Survey | None]:  # file system lookups: off the event loop
        if status.mode == "workspace-write":  # a home it may write: its secrets made before they are hidden
            _jail.cover_missing_secrets([ctx.cwd, *(ctx.cwd / Path(p).expanduser() for p in settings.writable)])
        hidden = _hidden(ctx, settings)
        jail = _jail_for(ctx, settings, status.mode, proxy_dir, hidden)
        survey = None
        if jail.write_cwd:  # every repository in what the command may write: read-only, and checked after
            survey = _gitguard.survey(_jail.writable_roots(jail), (_jail.real(p) for p in jail.writable))
            jail = dataclasses.replace(jail, repositories=(*survey.bound, *survey.tree_bound), made=survey.made)
        return _sandbox.sandboxed_argv([*_jail.jail_args(jail, bwrap), *inner]), hidden, survey

    return await asyncio.to_thread(build)


def _unsandboxed(status: SandboxStatus) -> SandboxStatus:
    return dataclasses.replace(status, mode="off", network=())


def _refuse_unrunnable(command: str, ctx: ToolContext) -> None:
    """A ToolError, in words, for a command that cannot start whatever the sandbox."""
    if "\0" in str(ctx.cwd) or "\0" in command:  # the kernel cannot take it: nothing starts
        where = "the working directory" if "\0" in str(ctx.cwd) else "the command"
        raise ToolError(f"the command did not run: {where} contains a NUL character, which no path or command can hold")
    if not os.path.isdir(ctx.cwd):  # removed during the run (or a file put there): say so, not a bare errno
        what = "is not a directory" if os.path.lexists(ctx.cwd) else "no longer exists"
        raise ToolError(
            f"the command did not run: the working directory {ctx.cwd} {what}. No command can run until "
            "it is back; tell the user."
        )


async def run_sandboxed(
    command: str, ctx: ToolContext, settings: ShellSettings, *, outside: bool = False
) -> tuple[int | None, bytes, str]:
    """Run ``command``; return (exit code or None when stopped, the first ``cap`` bytes, note).

    It runs in the sandbox the settings ask for (:func:`tether.tools.sandbox.sandbox_status`), or
    outside it when ``outside`` (a command a person approved to escalate). The note says what was
    cut short and what the sandbox refused, in words.

    As soon as the process exists its pid goes to ``ctx.on_process`` (the process to check with
    :func:`process_alive` and stop with :func:`kill_process_tree`); if that report fails, the command
    is killed and the error raised, so nothing runs unrecorded. On Linux the process is tied to the
    thread that runs the event loop: it dies if that thread, or tether, ends first.
    """
    _refuse_unrunnable(command, ctx)
    status = sandbox_status(settings)
    if outside:
        status = _unsandboxed(status)
    elif status.refused:
        raise ToolError(f"refused: {status.sentence}. The command was not run.")
    ctx.progress(
        f"sandbox: {status.mode}" + (f", network {', '.join(status.network) or 'off'}" if status.mode != "off" else "")
    )
    proxy = NetProxy(status.network, on_decision=ctx.progress) if status.network else None
    env = _environment(settings, ctx.cwd)
    if status.mode != "off":
        env["TMPDIR"] = "/tmp"
    hidden: list[Path] = []
    survey: _gitguard.Survey | None = None
    started = 0
    try:
        proxy_dir = await proxy.start() if proxy is not None else None
        for _attempt in range(2):
            argv, hidden, survey = await _start_argv(command, ctx, settings, status, proxy_dir)
            started = time.time_ns()
            code, output, note = await _run(argv, env, ctx, settings)
            # A hidden path vanished between the listing and bubblewrap's start (SQLite removes a
            # -journal, or a -wal when its last connection closes): the command never ran, so once
            # more, listed again. Once: a second such loss is said as it is. (Outside it, none is hidden.)
            if not _jail.cover_lost(code, output, hidden):
                break
    except BaseException:  # stopped: what the command wrote into a repository is still taken out
        if survey is not None:
            _git_note(_checked(survey, started, ctx), survey, ctx)
        raise
    finally:
        if proxy is not None:
            await proxy.close()
    if status.mode != "off":  # a pipeline can hide a refusal behind exit code 0: read the output
        text = output.decode("utf-8", errors="replace")
        said = refusal_note(text, status, proxy.refused if proxy else [], [str(p) for p in hidden], command, code)
        why = _gitguard.read_only_note(survey, text, ctx.cwd) if survey is not None else ""
        note = "\n".join(n for n in (note, said, why) if n)
    if survey is not None:
        undone = await asyncio.to_thread(_checked, survey, started, ctx)
        note = "\n".join(n for n in (note, _git_note(undone, survey, ctx)) if n)
    return code, output, note


def _checked(survey: _gitguard.Survey, started: int, ctx: ToolContext) -> list[str]:
    """What the check after a command took out; a check that failed is one more thing said, in
    words, not an error that would take the command's own output with it."""
    try:
        return _gitguard.check(survey, started, ctx.cwd)
    except Exception as exc:
        _log.exception("checking the git repositories in %s after a command failed", ctx.cwd)
        return [
            f"the check itself failed ({type(exc).__name__}: {exc}): what the command wrote into a repository "
            f"may be {_gitguard.LEFT}, so the user must look before running git there"
        ]


def _git_note(undone: list[str], survey: _gitguard.Survey, ctx: ToolContext) -> str:
    """Words for what the check after a command took out of repositories, for the model and, on the
    ``tether.tools.shell`` logger and as progress, for the person."""
    if not survey.complete:
        said = (
            f"more than {_gitguard.MAX_FOLDERS:,} folders in {ctx.cwd} to look through for git repositories; "
            "those past them were neither read-only for the command nor checked after it"
        )
        ctx.progress(f"sandbox: {said}")
        if ctx.cwd not in _WARNED:  # once per workspace: every command would say it again
            _WARNED.add(ctx.cwd)
            _log.warning("%s", said)
    if not undone:
        return ""
    for what in undone:
        ctx.progress(f"sandbox: taken out of a git repository: {what}")
        _log.warning("a sandboxed command wrote into a git repository what git would run; taken out: %s", what)
    left = any(_gitguard.LEFT in what for what in undone)
    return (
        "[refused: this command wrote into a git repository what git would run outside the sandbox, with "
        f"the user's rights, at their next git command: {'; '.join(undone)}. "
        + (
            "Some of it could not be taken out (said above): tell the user now, before they run git there. "
            if left
            else "Nothing is lost (each is kept where it says; git reads nothing from there), but the repository "
            "no longer runs it. "
        )
        + "Do not try to put it back: if the task needs a hook or such a setting, tell the user what and why.]"
    )


async def _run(
    argv: list[str], env: dict[str, str], ctx: ToolContext, settings: ShellSettings
) -> tuple[int | None, bytes, str]:
    proc = await asyncio.create_subprocess_exec(
        *argv,
        cwd=ctx.cwd,
        env=env,
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
        start_new_session=True,  # its own process group and session, apart from tether's terminal
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
                _stop(proc)
                return

    async def finish() -> int | None:
        await drain()
        # The output can end long before the command does (it closed or redirected its stdout):
        # the rest of the timeout is still its own.
        return None if note else await proc.wait()

    try:
        if ctx.on_process is not None:
            ctx.on_process(proc.pid)
        code = await ctx.signal.race(asyncio.wait_for(finish(), timeout=settings.timeout_s))
    except TimeoutError:
        note = f"[timed out after {settings.timeout_s:g} s; the command and its children were stopped]"
        code = None
    finally:
        _stop(proc)  # whatever it left running goes too
        with contextlib.suppress(TimeoutError, ProcessLookupError):
            await asyncio.wait_for(proc.wait(), timeout=5)
    return code, b"".join(chunks), note


class RunCommand:
    """The ``run_command`` tool, configured by a deployment's :class:`ShellSettings`.

    ``status`` says which sandbox and approval policy hold (found when the tool is made); the tool
    needs approval only under the ``always-ask`` policy."""

    name = "run_command"
    description = (
        "Run a shell command in the working directory and return its exit code and output "
        "(stdout and stderr together). No input can be typed into it. Long or endless commands are "
        "stopped after a timeout."
    )
    input_schema: ClassVar[dict[str, Any]] = {
        "type": "object",
        "properties": {
            "command": {
                "type": "string",
                "description": "the command line, run with /bin/sh -c",
                "minLength": 1,
                "maxLength": 10000,
            }
        },
        "required": ["command"],
        "additionalProperties": False,
    }
    read_only = False
    outside = False  # run outside the sandbox (run_command_unsandboxed)

    def __init__(self, settings: ShellSettings | None = None) -> None:
        self.settings = settings or ShellSettings()
        self.status = sandbox_status(self.settings)
        self.needs_approval = self.status.policy == "always-ask" or self.outside
        if self.status.mode != "off" and not self.outside:
            self.description = f"{RunCommand.description} {_sandbox_words(self.status)}"

    async def execute(self, input: dict[str, Any], ctx: ToolContext) -> ToolResult | str:
        command = str(input["command"])
        reason = blocked_reason(command, self.settings.blocked)
        if reason:
            raise ToolError(
                f"refused: {reason}. The command was not run; do not try to get around this. "
                "If the task needs it, tell the user what you would run and why."
            )
        if not sys.platform.startswith(("linux", "darwin")):
            raise ToolError("run_command needs a POSIX system")
        code, output, note = await run_sandboxed(command, ctx, self.settings, outside=self.outside)
        text = shown_output(output.decode("utf-8", errors="replace"), self.settings.shown_chars)
        status = f"exit code {code}" if code is not None else "stopped"
        body = f"{status}\n{text}" + (f"\n{note}" if note else "")
        return ToolResult(body, is_error=code != 0)


def shown_output(text: str, limit: int) -> str:
    """``text`` as the model is given it: whole when it fits in ``limit`` characters; else its
    start (a third) and its end (two thirds: a build or a test run says what failed last), cut at
    line ends where one is near, with what lies between counted and how to see it."""

    def note(left: str) -> str:
        return (
            f"[... {len(left):,} characters ({left.count(chr(10)):,} lines) of the output left out here: "
            "run the command again through grep, head or tail to see them ...]\n"
        )

    return cut_middle(text, limit // 3, limit - limit // 3, note, at_lines=True)


def _sandbox_words(status: SandboxStatus) -> str:
    writes = "the working directory and /tmp" if status.mode == "workspace-write" else "only /tmp"
    net = f"the network only to {', '.join(status.network)}" if status.network else "no network"
    escalate = (
        " When the sandbox refuses something the task needs, run_command_unsandboxed can run the "
        "command outside it once a person agrees."
        if status.policy == "ask-to-escalate"
        else ""
    )
    return f"Commands run in a sandbox ({status.mode}): they can write {writes}, with {net}.{escalate}"


class RunCommandUnsandboxed(RunCommand):
    """``run_command_unsandboxed``: one command outside the sandbox, after a person says yes
    (offered under the ``ask-to-escalate`` policy)."""

    name = "run_command_unsandboxed"
    description = (
        "Run a shell command OUTSIDE the sandbox, after a person approves it. Use it only when "
        "run_command was refused by the sandbox (a write outside the workspace, the network) and the "
        "task cannot be done another way; say why in `reason`."
    )
    input_schema: ClassVar[dict[str, Any]] = {
        "type": "object",
        "properties": {
            "command": RunCommand.input_schema["properties"]["command"],
            "reason": {
                "type": "string",
                "description": "why it must run outside the sandbox, for the person who decides",
                "minLength": 1,
                "maxLength": 2000,
            },
        },
        "required": ["command", "reason"],
        "additionalProperties": False,
    }
    outside = True
