"""A stdio MCP server with one prompt, ``review(file, tone?)``, for the /command tests."""

from __future__ import annotations

from mcp.server.mcpserver import MCPServer

server = MCPServer("notes")


@server.prompt()
def review(file: str, tone: str = "kind") -> str:
    """Asks for a review of a file."""
    return f"Please review {file} in a {tone} tone."


if __name__ == "__main__":
    server.run()
