"""An MCP server's prompts as ``/commands``: ``/PROMPT key=value ...`` (or ``/SERVER:PROMPT``)
fills the prompt in, and its text becomes the person's message. One implementation for every door
that takes a typed message (``tether chat``, ``tether serve``'s page and API).

Each call starts the servers it asks (fresh connections, stopped after), so it never shares a
connection with a run in progress.
"""

from __future__ import annotations

import shlex
from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, Any

from tether.errors import UserError

if TYPE_CHECKING:
    from tether.connectors.mcp import McpConnector

__all__ = [
    "check_arguments",
    "expand_prompt",
    "filled_prompt",
    "gather_listings",
    "is_prompt_line",
    "list_prompts",
    "parse_prompt_line",
]


def parse_prompt_line(line: str) -> tuple[str | None, str, dict[str, str]]:
    """``(server or None, prompt, arguments)`` of ``/[SERVER:]PROMPT key=value ...``; a
    :class:`UserError` that says how to write it when the arguments are not ``key=value``."""
    name, _, rest = line.strip()[1:].partition(" ")
    try:
        pairs = [word.partition("=") for word in shlex.split(rest)]
    except ValueError as exc:
        raise UserError(f"/{name}: {exc}") from None
    if any(not eq or not key for key, eq, _ in pairs):
        raise UserError(f"/{name}: write its arguments as key=value (tether mcp prompts SERVER lists them)")
    server, _, prompt = name.rpartition(":")
    return server or None, prompt, {k: v for k, _, v in pairs}


def is_prompt_line(text: str) -> bool:
    """Whether ``text`` looks like ``/NAME ...`` (a path such as ``/etc/hosts`` does not)."""
    first = text.strip().split(" ", 1)[0]
    return len(first) > 1 and first.startswith("/") and "/" not in first[1:]


async def expand_prompt(connectors: Sequence[McpConnector], line: str) -> str | None:
    """The text of the prompt ``line`` names, filled in, from the first of ``connectors`` (not
    started; each is started and stopped here) that has it; None when none has it."""
    from tether.connectors._resources import prompt_messages

    server, prompt, arguments = parse_prompt_line(line)
    for connector in connectors:
        if server is not None and connector.server != server:
            continue
        await connector.start()
        try:
            try:
                listed = await _prompts(connector)
            except Exception:  # a server without prompts (or that fails to list them) has not this one
                continue
            found = next((p for p in listed if p["name"] == prompt), None)
            if found is not None:
                check_arguments(connector.server, found, arguments)
                messages = await prompt_messages(connector, prompt, arguments)
                return "\n\n".join(text for _, text in messages)
        finally:
            await connector.stop()
    return None


async def filled_prompt(connector: McpConnector, prompt: str, arguments: dict[str, str]) -> list[tuple[str, str]]:
    """The messages of the prompt ``prompt`` of ``connector``'s server (started), filled in: a
    :class:`UserError` naming the server's prompts when it has no such one, or the arguments it
    requires that ``arguments`` leaves out, before the server is asked for it."""
    from tether.connectors._resources import prompt_messages

    listed = await _prompts(connector)
    found = next((p for p in listed if p["name"] == prompt), None)
    if found is None:
        names = ", ".join(p["name"] for p in listed) or "none"
        raise UserError(f"the MCP server {connector.server} has no prompt {prompt!r} (its prompts: {names})")
    check_arguments(connector.server, found, arguments)
    return await prompt_messages(connector, prompt, arguments)


def check_arguments(server: str, prompt: dict[str, Any], arguments: dict[str, str]) -> None:
    """A :class:`UserError` naming the arguments ``prompt`` (as listed) requires that ``arguments``
    leaves out: asked without them, a server answers only "Internal server error", or fills the
    prompt in with nothing."""
    missing = [a["name"] for a in prompt["arguments"] if a["required"] and a["name"] not in arguments]
    if missing:
        add = " ".join(f"{name}=..." for name in missing)
        raise UserError(f"the prompt {prompt['name']} of the MCP server {server} needs {', '.join(missing)}: add {add}")


async def list_prompts(connectors: Sequence[McpConnector]) -> list[dict[str, Any]]:
    """Every prompt of ``connectors``' servers: server, name, description and arguments (name,
    description, required). A server that cannot be reached is left out."""
    return await gather_listings(connectors, _prompts)


async def gather_listings(
    connectors: Sequence[McpConnector], listing: Callable[[McpConnector], Awaitable[list[dict[str, Any]]]]
) -> list[dict[str, Any]]:
    """``listing(connector)`` of each server, started and stopped here, each item with its
    ``server``. A server that cannot be reached or answer is left out: one down does not hide the
    others' items."""
    out: list[dict[str, Any]] = []
    for connector in connectors:
        try:
            await connector.start()
        except Exception:
            continue
        try:
            out += [{"server": connector.server, **item} for item in await listing(connector)]
        except Exception:
            continue
        finally:
            await connector.stop()
    return out


async def _prompts(connector: McpConnector) -> list[dict[str, Any]]:
    async def ask(client: Any) -> list[dict[str, Any]]:
        return [
            {
                "name": p.name,
                "description": p.description or "",
                "arguments": [
                    {"name": a.name, "description": a.description or "", "required": bool(a.required)}
                    for a in p.arguments or ()
                ],
            }
            for p in (await client.list_prompts()).prompts
        ]

    found: list[dict[str, Any]] = await connector.request("its prompts", ask)
    return found
