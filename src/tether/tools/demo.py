"""The demo tool of the scripted agents: not a built-in, and never offered to a real model.

``scan_archive`` does nothing but take its time (progress every half second, cancellable): the
``scripted/slow`` scenario calls it to show progress and cancellation. It always answers "no problems
found", which a real model would report as fact, so only an agent whose model is scripted gets it
(:func:`tether.assembly.build_agent`), and tests that drive ``scripted/slow`` add it themselves.
"""

from __future__ import annotations

from tether.tools.base import FunctionTool, ToolContext, tool

__all__ = ["DEMO_TOOLS", "scan_archive"]


@tool(read_only=True)
async def scan_archive(ctx: ToolContext, files: int = 1200, seconds: float = 3.0) -> str:
    """Scan the archive for problems. Slow: reports progress while it works."""
    steps = 6
    for step in range(1, steps + 1):
        await ctx.signal.sleep(seconds / steps)
        ctx.progress(f"scanned {files * step // steps} of {files} files")
    return f"scanned {files} files: no problems found"


scan_archive.cacheable = False  # a scan's answer is of its moment: never reused

DEMO_TOOLS: tuple[FunctionTool, ...] = (scan_archive,)
