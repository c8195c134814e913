"""Connectors: tools from outside tether, through the extension seam (tether.harness.extension).

:class:`McpConnector` gives an agent the tools of one MCP server (``[mcp.NAME]`` in config.toml):
it starts a stdio server or reaches a streamable-HTTP one, offers its tools as ``NAME__tool``, asks
a person before destructive ones, and stops everything it started when the run's call ends::

    from tether import Agent
    from tether.connectors import McpConnector

    mail = McpConnector("mail", {"command": "python", "args": ["examples/mcp/mail_server.py"]})
    agent = Agent("openai/gpt-4.1-mini", extensions=[mail])

Names are loaded on first use, so importing this package (or a module in it) is cheap; the ``mcp``
SDK (``pip install 'tether[mcp]'``) is imported when a server starts.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from tether._lazy import lazy_exports

_EXPORTS = {
    "DEFAULT_TIMEOUT_S": "tether.connectors.mcp",
    "McpConnector": "tether.connectors.mcp",
    "McpTool": "tether.connectors.mcp",
    "needs_approval": "tether.connectors.mcp",
    "token_path": "tether.connectors.mcp",
    "tool_name": "tether.connectors.mcp",
}

__all__ = ["DEFAULT_TIMEOUT_S", "McpConnector", "McpTool", "needs_approval", "token_path", "tool_name"]


__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS, globals())


if TYPE_CHECKING:
    from tether.connectors.mcp import DEFAULT_TIMEOUT_S, McpConnector, McpTool, needs_approval, token_path, tool_name
