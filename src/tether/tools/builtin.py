"""The built-in tool set and the deployment settings that bound it (``[tools]`` in config.toml)::

[tools.shell]
approval = true            # every run_command needs a person's yes (policy "always-ask")
timeout_s = 30
output_cap_bytes = 1000000
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
from typing import Any

from tether.tools.base import FunctionTool
from tether.tools.files import EDIT_TOOLS, FILE_TOOLS
from tether.tools.shell import DEFAULT_BLOCKED, RunCommand, RunCommandUnsandboxed, ShellSettings
from tether.tools.web import SearxngBackend, WebFetch, WebSearch, WebSettings

__all__ = ["ToolSettings", "builtin_tools", "tool_settings"]


@dataclass(frozen=True)
class ToolSettings:
    shell: ShellSettings = field(default_factory=ShellSettings)
    web: WebSettings = field(default_factory=WebSettings)
    write_approval: bool = False


def tool_settings(data: dict[str, Any] | None) -> ToolSettings:
    """Read the ``[tools]`` table of config.toml. It is checked first, strictly (a quoted "no" is not
    a boolean, -5 is not a timeout, an unknown key is an error): nothing is coerced."""
    from tether.config import check_tools

    data = check_tools(data)
    shell: dict[str, Any] = data.get("shell") or {}
    blocked = (DEFAULT_BLOCKED | frozenset(shell.get("block", []))) - frozenset(shell.get("unblock", []))
    shell_settings = ShellSettings(
        require_approval=shell.get("approval"),
        timeout_s=float(shell.get("timeout_s", 30.0)),  # an int in TOML is fine: 60 means 60.0
        output_cap_bytes=shell.get("output_cap_bytes", 1_000_000),
        blocked=blocked,
        env=dict(shell.get("env") or {}),
        namespaces=shell.get("namespaces", True),
        **_sandbox_settings(shell.get("sandbox") or {}),
    )
    web: dict[str, Any] = data.get("web") or {}
    search: dict[str, Any] = data.get("web_search") or {}
    backend = SearxngBackend(search["url"]) if search else None
    web_settings = WebSettings(
        allow=tuple(web.get("allow", [])),
        max_bytes=web.get("max_bytes", 2_000_000),
        max_chars=web.get("max_chars", 100_000),
        search=backend,
    )
    files: dict[str, Any] = data.get("files") or {}
    return ToolSettings(shell=shell_settings, web=web_settings, write_approval=files.get("write_approval", False))


def _sandbox_settings(table: dict[str, Any]) -> dict[str, Any]:
    return {
        "sandbox": table.get("mode"),
        "policy": table.get("policy"),
        "writable": tuple(table.get("writable", ())),
        "network": tuple(table.get("network", ())),
        "home": table.get("home", "read-only"),
        "hide": tuple(table.get("hide", ())),
    }


def builtin_tools(settings: ToolSettings | None = None) -> list[Any]:
    """Files (list, read, search, write, edit, delete), the slow scan, shell, web fetch and search."""
    settings = settings or ToolSettings()
    edit: list[Any] = list(EDIT_TOOLS)
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
