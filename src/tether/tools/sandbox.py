"""Sandbox modes and approval policies for ``run_command``, and what holds on this machine.

Modes (``[tools.shell.sandbox] mode``):

* ``read-only``: a command reads what the user can (secrets excepted) and writes only a private
  temporary directory (``/tmp``, empty and gone when the command ends).
* ``workspace-write``: it also writes inside the run's working directory and the listed paths;
  ``.tether`` and every git repository's folder found in them stay read-only unless listed or
  made by an earlier command, and the hooks and settings that run programs a command gives a
  repository it may write are taken out after it (``_gitguard``).
* ``off``: no sandbox (the PID namespace and the kill-everything-on-exit of ``_sandbox`` still hold).

Under a sandbox the network is off (hosts can be allowed through tether's proxy), and ``~/.ssh``,
``~/.aws``, ``~/.config/gcloud``, tether's home and similar are never readable.

Policies (``policy``): ``never-ask`` (commands run in the sandbox; a refusal goes back to the
model), ``ask-to-escalate`` (the same, and the model may ask, through ``run_command_unsandboxed``,
to run one command outside; a person decides), ``always-ask`` (every command waits for a person).

The defaults: ``workspace-write`` with ``ask-to-escalate`` where the sandbox is available, and
where it is not, today's behaviour (no sandbox, every command asks), said in so many words by
:func:`sandbox_status`, which ``tether run`` prints on its first line. A mode asked for explicitly
that cannot be had here is never replaced by another: every command is refused with the reason.
"""

from __future__ import annotations

import re
import sys
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal, get_args

from tether.tools import _jail

if TYPE_CHECKING:
    from tether.tools.shell import ShellSettings

__all__ = [
    "APPROVAL_POLICIES",
    "SANDBOX_MODES",
    "ApprovalPolicy",
    "SandboxMode",
    "SandboxStatus",
    "refusal_note",
    "sandbox_status",
]

SandboxMode = Literal["read-only", "workspace-write", "off"]
ApprovalPolicy = Literal["never-ask", "ask-to-escalate", "always-ask"]
SANDBOX_MODES: tuple[str, ...] = get_args(SandboxMode)
APPROVAL_POLICIES: tuple[str, ...] = get_args(ApprovalPolicy)
MECHANISM = "bubblewrap"


@dataclass(frozen=True)
class SandboxStatus:
    """What ``run_command`` does here under given settings, and the sentence that says it."""

    mode: SandboxMode  # the mode commands really run in
    policy: ApprovalPolicy  # the policy really applied
    available: bool  # whether the OS sandbox can be built on this machine
    why_not: str  # when it cannot: why, and what to do
    refused: bool = False  # a mode was asked for that cannot be had: every command is refused
    network: tuple[str, ...] = ()

    @property
    def sentence(self) -> str:
        """One line for a person: ``tether run``'s first line, ``tether config check``."""
        asks = {
            "never-ask": "commands run without asking",
            "ask-to-escalate": "commands run without asking; running one outside the sandbox asks you",
            "always-ask": "every command asks you first",
        }[self.policy]
        if self.refused:
            return (
                f"shell: sandbox NOT AVAILABLE ({self.why_not}); every command is refused until "
                'it is installed or [tools.shell.sandbox] mode = "off" is set'
            )
        if self.mode == "off":
            why = f" ({self.why_not})" if not self.available else " (mode = off)"
            return f"shell: no sandbox{why}; {asks}"
        net = f"network only to {', '.join(self.network)} (through tether's proxy)" if self.network else "network off"
        return f"shell: sandbox {self.mode} ({MECHANISM}, {net}); {asks}"


def _why_unavailable() -> str:
    if not sys.platform.startswith("linux"):
        return f"no sandbox for {sys.platform} in tether yet"
    bwrap = _jail.bwrap_path()
    if bwrap is None:
        return "bubblewrap is not installed: apt-get install bubblewrap (or your distribution's package)"
    said = _jail.probe(bwrap)
    if said is None:
        return ""
    return f"bubblewrap cannot make namespaces here: {said}. Allow unprivileged user namespaces, or run as root"


def sandbox_status(settings: ShellSettings | None = None) -> SandboxStatus:
    """What holds for ``settings`` (default: the defaults) on this machine; the probe runs once."""
    why_not = _why_unavailable()
    available = not why_not
    asked = settings.sandbox if settings else None
    if asked is None:
        mode: SandboxMode = "workspace-write" if available else "off"
    else:
        mode = asked
    refused = mode != "off" and not available
    if settings and settings.policy is not None:
        policy: ApprovalPolicy = settings.policy
    elif settings and settings.require_approval is not None:
        policy = "always-ask" if settings.require_approval else "never-ask"
    else:
        policy = "ask-to-escalate" if mode != "off" else "always-ask"
    if mode == "off" and policy == "ask-to-escalate":  # nothing to escalate from: ask every time
        policy = "always-ask"
    network = settings.network if settings and mode != "off" else ()
    return SandboxStatus(mode, policy, available, why_not, refused, network)


# --- reading a refusal ---------------------------------------------------------------------------

_READ_ONLY = re.compile(r"read-only file system", re.I)
_NO_NETWORK = re.compile(
    r"network is unreachable|temporary failure in name resolution|could not resolve|name or service not known|"
    r"no address associated|name resolution|getaddrinfo failed|nodename nor servname|failed to resolve|"
    r"connection refused",  # 127.0.0.1 is the sandbox's own loopback: the host's services are not there
    re.I,
)
_PROXY_403 = re.compile(r"blocked by tether's sandbox|403 forbidden|tunnel connection failed: 403", re.I)


# Commands that fail quietly without a network (getent exits 2 and says nothing).
_NETWORK_TOOLS = re.compile(
    r"(?:^|[\s;&|(`$])(?:curl|wget|getent|host|dig|nslookup|ping|nc|ncat|ssh|scp|rsync|ftp|telnet|"
    r"pip3?|npm|yarn|apt(?:-get)?|git\s+(?:clone|fetch|pull|push|ls-remote))\b"
)


def _network_refused(output: str, command: str, code: int | None) -> bool:
    """Whether the network's absence shows: a network tool that failed, or words of a refused
    connection from a command that failed or names a network tool (``curl ... | head`` exits 0). The
    same words printed by a command that succeeded are data (``grep "Connection refused" app.log``):
    read as a refusal, they had the model ask a person to run a harmless command outside the sandbox."""
    tool = _NETWORK_TOOLS.search(command) is not None
    said = _NO_NETWORK.search(output) is not None or _PROXY_403.search(output) is not None
    return (said and (code != 0 or tool)) or (code != 0 and tool)


def refusal_note(
    output: str,
    status: SandboxStatus,
    refused_hosts: list[str],
    hidden: list[str],
    command: str = "",
    code: int | None = 0,
) -> str:
    """Words for what the sandbox refused, judged from the command's output (and, for tools that
    fail without a word, from the command and its exit code); "" when nothing was."""
    found: list[str] = []
    if _READ_ONLY.search(output):
        where = "outside the workspace" if status.mode == "workspace-write" else "anywhere but /tmp (read-only mode)"
        found.append(
            f"write {where} blocked by the sandbox (writable: the working directory and the listed "
            "paths; .git and .tether only when listed; /tmp is private)"
            if status.mode == "workspace-write"
            else f"write {where} blocked by the sandbox"
        )
    if refused_hosts:
        found.append(
            f"network access to {', '.join(sorted(set(refused_hosts)))} blocked by the sandbox (allowed: "
            f"{', '.join(status.network) or 'none'})"
        )
    elif _network_refused(output, command, code):
        allowed = f"only {', '.join(status.network)} through the proxy" if status.network else "the network is off"
        allowed += "; 127.0.0.1 is the sandbox's own loopback, not the host's"
        found.append(f"network access blocked by the sandbox ({allowed})")
    shown = [h for h in hidden if h in output]
    if shown:
        found.append(f"{', '.join(shown)} hidden by the sandbox (secrets are never readable)")
    if not found:
        return ""
    then = {
        "ask-to-escalate": "If the task really needs it, call run_command_unsandboxed with the same command "
        "and the reason; a person decides.",
        "never-ask": "Commands cannot run outside the sandbox in this deployment: tell the user what you "
        "would need, or do the task another way.",
        "always-ask": "Tell the user what you would need.",
    }[status.policy]
    return f"[refused: {'; '.join(found)}. {then}]"
