"""The built-in tool set and the deployment settings that bound it (``[tools]`` in config.toml)::

[tools.shell]
approval = true            # every run_command needs a person's yes (policy "always-ask")
timeout_s = 30
output_cap_bytes = 1000000
shown_chars = 30000        # of the output, the model is given the start and the end
block = ["git"]            # more commands to refuse
unblock = ["crontab"]      # defaults to allow anyway
env = { CI = "1" }         # variables the command gets (nothing else leaks from tether's own)

[tools.shell.sandbox]      # see tether.tools.sandbox
mode = "workspace-write"   # read-only | workspace-write | off (default: workspace-write where available)
policy = "ask-to-escalate" # never-ask | ask-to-escalate | always-ask
writable = [".git"]        # more writable paths (relative: in the working directory)
network = ["pypi.org", "files.pythonhosted.org"]   # hosts reachable through tether's proxy
home = "read-only"         # or "hidden": the homes outside the workspace
hide = ["~/work/keys"]     # more paths never readable

[tools.files]
write_approval = false     # true: write_file and edit_file need a yes too

[tools.web]
allow = ["127.0.0.1:8080", "10.20.0.0/16"]   # private addresses web_fetch may reach anyway
max_bytes = 2000000

[tools.web_search]
kind = "searxng"
url = "https://search.example.com"
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from tether.tools.base import FunctionTool
from tether.tools.files import FILE_TOOLS, edit_tools
from tether.tools.shell import DEFAULT_BLOCKED, RunCommand, RunCommandUnsandboxed, ShellSettings
from tether.tools.web import SearxngBackend, WebFetch, WebSearch, WebSettings

if TYPE_CHECKING:
    from tether.config import SandboxTable, ToolsTable

__all__ = ["ToolSettings", "builtin_tools", "tool_settings"]


@dataclass(frozen=True)
class ToolSettings:
    shell: ShellSettings = field(default_factory=ShellSettings)
    web: WebSettings = field(default_factory=WebSettings)
    write_approval: bool = False


def tool_settings(data: ToolsTable | dict[str, Any] | None) -> ToolSettings:
    """Read the ``[tools]`` table of config.toml. A dict is checked first, strictly (a quoted "no" is
    not a boolean, -5 is not a timeout, an unknown key is an error): nothing is coerced."""
    from tether.config import SandboxTable, ShellTable, WebTable, check_tools

    table = check_tools(data)
    shell = table.shell or ShellTable()
    blocked = (DEFAULT_BLOCKED | frozenset(shell.block or ())) - frozenset(shell.unblock or ())
    shell_settings = ShellSettings(
        require_approval=shell.approval,
        timeout_s=float(30.0 if shell.timeout_s is None else shell.timeout_s),  # 60 in TOML means 60.0
        output_cap_bytes=shell.output_cap_bytes or 1_000_000,
        shown_chars=shell.shown_chars or 30_000,
        blocked=blocked,
        env=dict(shell.env or {}),
        namespaces=True if shell.namespaces is None else shell.namespaces,
        **_sandbox_settings(shell.sandbox or SandboxTable()),
    )
    web = table.web or WebTable()
    search = table.web_search
    web_settings = WebSettings(
        allow=tuple(web.allow or ()),
        max_bytes=web.max_bytes or 2_000_000,
        max_chars=web.max_chars or 100_000,
        search=SearxngBackend(search.url) if search else None,
    )
    write_approval = bool(table.files and table.files.write_approval)
    return ToolSettings(shell=shell_settings, web=web_settings, write_approval=write_approval)


def _sandbox_settings(table: SandboxTable) -> dict[str, Any]:
    return {
        "sandbox": table.mode,
        "policy": table.policy,
        "writable": tuple(table.writable),
        "network": tuple(table.network),
        "home": table.home,
        "hide": tuple(table.hide),
    }


def builtin_tools(settings: ToolSettings | None = None) -> list[Any]:
    """Files (list, read, search, write, edit, delete), shell, web fetch and search."""
    settings = settings or ToolSettings()
    edit: list[Any] = list(edit_tools(settings.shell.writable))  # what the sandbox may write, they may
    if settings.write_approval:
        edit = [
            FunctionTool(t.fn, name=t.name, description=t.description, read_only=t.read_only, needs_approval=True)
            if t.name in ("write_file", "edit_file")
            else t
            for t in edit
        ]
    shell = RunCommand(settings.shell)
    escalate = [RunCommandUnsandboxed(settings.shell)] if shell.status.policy == "ask-to-escalate" else []
    return [*FILE_TOOLS, *edit, shell, *escalate, WebFetch(settings.web), WebSearch(settings.web.search)]
