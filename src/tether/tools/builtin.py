"""The built-in tool set and the deployment settings that bound it (``[tools]`` in config.toml)::

    [tools.shell]
    approval = true            # every run_command needs a person's yes (the default)
    timeout_s = 30
    output_cap_bytes = 1000000
    block = ["git"]            # more commands to refuse
    unblock = ["crontab"]      # defaults to allow anyway
    env = { CI = "1" }         # variables the command gets (nothing else leaks from tether's own)

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

from tether.errors import ConfigError
from tether.tools.base import FunctionTool
from tether.tools.files import EDIT_TOOLS, FILE_TOOLS
from tether.tools.shell import DEFAULT_BLOCKED, RunCommand, ShellSettings
from tether.tools.web import SearxngBackend, WebFetch, WebSearch, WebSettings

__all__ = ["ToolSettings", "builtin_tools", "tool_settings"]


@dataclass(frozen=True)
class ToolSettings:
    shell: ShellSettings = field(default_factory=ShellSettings)
    web: WebSettings = field(default_factory=WebSettings)
    write_approval: bool = False


def _table(data: dict[str, Any], name: str) -> dict[str, Any]:
    value = data.get(name) or {}
    if not isinstance(value, dict):
        raise ConfigError(f"config.toml: [tools.{name}] must be a table")
    return value


def tool_settings(data: dict[str, Any] | None) -> ToolSettings:
    """Read the ``[tools]`` table of config.toml; a wrong value is a clear error."""
    data = data or {}
    try:
        shell = _table(data, "shell")
        blocked = (DEFAULT_BLOCKED | frozenset(shell.get("block", []))) - frozenset(shell.get("unblock", []))
        shell_settings = ShellSettings(
            require_approval=bool(shell.get("approval", True)),
            timeout_s=float(shell.get("timeout_s", 30.0)),
            output_cap_bytes=int(shell.get("output_cap_bytes", 1_000_000)),
            blocked=blocked,
            env={str(k): str(v) for k, v in (shell.get("env") or {}).items()},
        )
        web = _table(data, "web")
        search = _table(data, "web_search")
        backend = None
        if search:
            if search.get("kind") != "searxng" or not search.get("url"):
                raise ConfigError('config.toml: [tools.web_search] needs kind = "searxng" and url = "..."')
            backend = SearxngBackend(str(search["url"]))
        web_settings = WebSettings(allow=tuple(str(a) for a in web.get("allow", [])),
                                   max_bytes=int(web.get("max_bytes", 2_000_000)),
                                   max_chars=int(web.get("max_chars", 100_000)), search=backend)
        files = _table(data, "files")
        return ToolSettings(shell=shell_settings, web=web_settings, write_approval=bool(files.get("write_approval")))
    except (TypeError, ValueError) as exc:
        raise ConfigError(f"config.toml: a value under [tools] has the wrong type: {exc}") from exc


def builtin_tools(settings: ToolSettings | None = None) -> list[Any]:
    """Files (list, read, search, write, edit, delete), the slow scan, shell, web fetch and search."""
    settings = settings or ToolSettings()
    edit: list[Any] = list(EDIT_TOOLS)
    if settings.write_approval:
        edit = [FunctionTool(t.fn, name=t.name, description=t.description, read_only=t.read_only,
                             needs_approval=True) if t.name in ("write_file", "edit_file") else t for t in edit]
    return [*FILE_TOOLS, *edit, RunCommand(settings.shell), WebFetch(settings.web), WebSearch(settings.web.search)]
