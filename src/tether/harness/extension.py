"""Extensions: what a layer above the loop (cross-session notes, a document index, folders of
instructions, outside tool servers) adds to an agent, through one small seam the loop knows,
without knowing any of them by name.

An extension may give the model tools and a block of the system prompt, and may hold resources
for the length of a run: ``start`` is awaited before the run reads its tools (an extension that
talks to outside tool servers starts them there) and ``stop`` when the run's ``run_stream`` call
ends, however it ends. The block is a
*snapshot*: it is read once when a session (or a run outside any session) begins, saved with the
run and the session, and sent unchanged on every call after, so the cached prompt prefix stays
byte-identical; what changes during a session reaches the prompt in the next one.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping, Sequence
from contextvars import ContextVar
from pathlib import Path
from typing import Any

__all__ = [
    "STARTING_IN",
    "Extension",
    "snapshot_blocks",
    "start_extensions",
    "starting_in",
    "stop_extensions",
    "system_prompt",
]

# The cwd of the run whose extensions are starting (None: the process's current directory), for an
# extension that tells an outside server where the run works (an MCP server's roots).
STARTING_IN: ContextVar[Path | None] = ContextVar("tether_starting_in", default=None)


@contextlib.contextmanager
def starting_in(cwd: Path | str | None) -> Iterator[None]:
    """Extensions started inside this block read ``cwd`` (the agent's) from :data:`STARTING_IN`."""
    token = STARTING_IN.set(Path(cwd) if cwd else None)
    try:
        yield
    finally:
        STARTING_IN.reset(token)


class Extension:
    """Base class: adds nothing. ``name`` keys the extension's block in a snapshot."""

    name: str = "extension"

    def tools(self) -> Sequence[Any]:
        """Tools the agent gains (ordinary :class:`~tether.tools.base.Tool` objects)."""
        return ()

    def tool_origin(self, tool: Any) -> str:
        """Where ``tool`` (one of :meth:`tools`) comes from, in words a person can act on: said when
        another tool of the agent has its name."""
        return f"a tool of the extension {self.name!r}"

    def prompt_block(self) -> str | None:
        """Text for the system prompt, read when a session begins; None adds nothing."""
        return None

    def check_together(self, extensions: Sequence[Any]) -> None:
        """Before any extension of the run starts: raise :class:`~tether.errors.ConfigError` when this
        one cannot work beside ``extensions`` (all of the agent's, this one among them), such as two
        that would give their tools one name."""

    async def start(self) -> None:
        """Before the run reads :meth:`tools`: start what the tools need. An exception stops the
        run before anything runs, like a configuration error. It need not hear Stop: a Stop while
        it starts cancels it, and what it had opened it closes as the cancellation goes through."""

    async def stop(self) -> None:
        """When the run's ``run_stream`` call ends (completed, stopped, failed or cancelled)."""


async def start_extensions(extensions: Sequence[Any]) -> list[Any]:
    """Refuse those that cannot work together (``check_together``), before any starts; then start
    them together (five servers take as long as the slowest, not the sum); if one fails, give up
    the starts still under way (the run will not start: a slow server does not keep the failure
    waiting), stop those that started and raise the first failure."""
    import asyncio

    for ext in extensions:  # refused together before any starts: nothing to stop
        check = getattr(ext, "check_together", None)
        if callable(check):
            check(extensions)

    async def start(ext: Any) -> None:
        opener = getattr(ext, "start", None)
        if opener is not None:
            await opener()

    tasks = [asyncio.ensure_future(start(ext)) for ext in extensions]
    failure: BaseException | None = None
    try:
        if tasks:
            await asyncio.wait(tasks, return_when=asyncio.FIRST_EXCEPTION)
    except BaseException as exc:  # cancelled while they start: none is left half open
        failure = exc
    if failure is not None or not all(t.done() for t in tasks):
        for task in tasks:
            task.cancel()
        await asyncio.shield(asyncio.wait(tasks)) if tasks else None
    opened = [e for e, t in zip(extensions, tasks, strict=True) if not t.cancelled() and t.exception() is None]
    failure = failure or next((t.exception() for t in tasks if not t.cancelled() and t.exception()), None)
    if failure is not None:
        await stop_extensions(opened)
        raise failure
    return opened


async def stop_extensions(opened: Sequence[Any]) -> None:
    """Stop in reverse order; a failing stop is logged, and the others still stop."""
    import asyncio
    import logging

    for ext in reversed(opened):
        closer = getattr(ext, "stop", None)
        if closer is None:
            continue
        try:
            await asyncio.shield(closer())
        except asyncio.CancelledError:
            raise
        except Exception:
            logging.getLogger("tether").exception("extension %s failed to stop", getattr(ext, "name", ext))


def snapshot_blocks(extensions: Sequence[Extension], saved: Mapping[str, str]) -> dict[str, str]:
    """The blocks a run sends: ``saved`` ones (the session's snapshot) for the extensions that
    have one, and a fresh read for those that do not. Blocks of extensions no longer present
    are dropped."""
    out: dict[str, str] = {}
    for ext in extensions:
        if ext.name in out:
            from tether.errors import ConfigError

            raise ConfigError(f"two extensions are named {ext.name!r}; give each its own name")
        if ext.name in saved:
            out[ext.name] = saved[ext.name]
            continue
        block = ext.prompt_block()
        if block:
            out[ext.name] = block
    return out


def system_prompt(instructions: str, blocks: Mapping[str, str]) -> str:
    """The agent's instructions, then each block, separated by a blank line."""
    return "\n\n".join(part for part in (instructions, *blocks.values()) if part)
