"""A stdio MCP server with one prompt, ``review(file, tone?)``, for the /command tests, and two
resources, ``notes://guide`` and the template ``notes://day/{n}``, for the @mention tests."""

from __future__ import annotations

from mcp.server.mcpserver import MCPServer

server = MCPServer("notes")


@server.prompt()
def review(file: str, tone: str = "kind") -> str:
    """Asks for a review of a file."""
    return f"Please review {file} in a {tone} tone."


@server.resource("notes://guide", name="guide", description="How we write notes")
def guide() -> str:
    return "Write notes in the present tense."


@server.resource("notes://day/{n}", name="day")
def day(n: str) -> str:
    return f"Notes of day {n}: nothing yet."


if __name__ == "__main__":
    server.run()
