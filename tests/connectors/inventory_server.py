"""A stdio MCP server for the connector tests: an inventory with tools that answer, fail, hang,
crash and start processes. Every call is logged, one line each, to the file $INVENTORY_LOG (so a
test can tell how many times a tool really ran, and that a cancellation reached the server).

Run by the tests with ``sys.executable inventory_server.py``.
"""

from __future__ import annotations

import base64
import os
import signal
import subprocess
import sys
import time

import anyio
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.shared.exceptions import MCPError
from mcp_types import (
    BlobResourceContents,
    EmbeddedResource,
    ImageContent,
    ResourceLink,
    TextContent,
    TextResourceContents,
    ToolAnnotations,
)

PNG = base64.b64encode(
    bytes.fromhex(
        "89504e470d0a1a0a0000000d4948445200000001000000010806000000"
        "1f15c4890000000d49444154789c6360000002000001e221bc330000000049454e44ae426082"
    )
).decode()

READ = ToolAnnotations(read_only_hint=True, idempotent_hint=True)
SAFE_WRITE = ToolAnnotations(read_only_hint=False, destructive_hint=False, idempotent_hint=True)

server = MCPServer("inventory")


def log(line: str) -> None:
    with open(os.environ["INVENTORY_LOG"], "a", encoding="utf-8") as f:
        f.write(line + "\n")


@server.tool(annotations=READ)
def stock(part: str) -> str:
    """How many of a part are in stock."""
    log(f"stock {part}")
    return f"{part}: 12 in stock"


@server.tool(annotations=READ)
def photo(part: str) -> list[TextContent | ImageContent]:
    """A photo of a part."""
    log(f"photo {part}")
    return [
        TextContent(type="text", text=f"photo of {part}"),
        ImageContent(type="image", data=PNG, mime_type="image/png"),
    ]


@server.tool(annotations=READ)
def datasheet(part: str) -> list[EmbeddedResource | ResourceLink]:
    """The datasheet of a part, and where the drawing is."""
    return [
        EmbeddedResource(
            type="resource",
            resource=TextResourceContents(
                uri=f"inventory://parts/{part}/datasheet", mime_type="text/plain", text="Max pressure: 40 bar"
            ),
        ),
        EmbeddedResource(
            type="resource",
            resource=BlobResourceContents(
                uri=f"inventory://parts/{part}/cad", mime_type="application/octet-stream", blob="AAAA"
            ),
        ),
        ResourceLink(
            type="resource_link", uri=f"https://example.com/{part}.pdf", name="drawing", mime_type="application/pdf"
        ),
    ]


@server.tool(annotations=READ)
def clock() -> str:
    """The time now, in nanoseconds (read only, but never the same answer twice)."""
    log("clock")
    return str(time.time_ns())


@server.tool(annotations=READ)
def big(chars: int) -> str:
    """A text of ``chars`` characters: HEAD, then dots, then TAIL."""
    log(f"big {chars}")
    return "HEAD" + "." * max(chars - 8, 0) + "TAIL"


@server.tool()
async def grow(ctx: Context) -> str:
    """Adds the tool ``extra`` and tells the client its tool list changed."""

    def extra() -> str:
        """A tool that was not there at first."""
        return "extra here"

    server.add_tool(extra)
    await ctx.notify_tools_changed()  # MCP 2026-07-28: to subscriptions/listen streams
    return "grown"


@server.tool()
def reorder(part: str, quantity: int) -> str:
    """Order more of a part from the supplier (no hints: destructive by MCP's defaults)."""
    log(f"reorder {part} {quantity}")
    return f"ordered {quantity} x {part}"


@server.tool(annotations=SAFE_WRITE)
def set_note(part: str, note: str) -> str:
    """Set the note on a part (not destructive, idempotent)."""
    log(f"set_note {part}")
    return "noted"


@server.tool(annotations=READ)
def fail(part: str) -> str:
    """Always fails."""
    raise ToolError(f"part {part} is not in the catalogue")


@server.tool(annotations=READ)
def busy(part: str) -> str:
    """Refuses with a JSON-RPC error of its own whose code, -32000, is also the SDK's code for a
    connection that closed."""
    log(f"busy {part}")
    raise MCPError(code=-32000, message=f"the stock database is busy; ask about {part} again in a minute")


@server.tool(annotations=READ)
async def slow(seconds: float, ctx: Context) -> str:
    """Waits, then answers."""
    await ctx.report_progress(0, 1, "waiting")
    log("slow started")
    try:
        await anyio.sleep(seconds)
    except BaseException:
        log("slow cancelled")
        raise
    return "slow done"


@server.tool()
def crash() -> str:
    """Dies in the middle of the call."""
    log(f"crash {os.getpid()}")
    os.kill(os.getpid(), signal.SIGKILL)
    return "never"


@server.tool(annotations=READ)
def environment() -> str:
    """The names of the server's environment variables."""
    return " ".join(sorted(os.environ))


@server.tool(annotations=READ)
def spawn(leave_group: bool = False) -> str:
    """Starts a long sleep below the server (in its group, or in a session of its own)."""
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(300)"], start_new_session=leave_group)
    log(f"spawned {child.pid}")
    return str(child.pid)


if __name__ == "__main__":
    server.run()
