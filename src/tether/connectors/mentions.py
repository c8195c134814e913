"""An MCP server's resources mentioned in a message: ``@SERVER:URI`` (``@docs:file:///guide.md``)
reads the resource and sends its contents with the message, as Claude Code's ``@`` mentions do.
One implementation for every door that takes a typed message (``tether chat``, ``tether serve``'s
page and API).

A mention names one of the agent's servers and a URI with a scheme; anything else that contains
``@`` (an address, ``@someone``) is left as typed. Each call starts the servers it asks (fresh
connections, stopped after), so it never shares a connection with a run in progress.
"""

from __future__ import annotations

import re
import secrets
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from tether.errors import TetherError, UserError

if TYPE_CHECKING:
    from tether.connectors.mcp import McpConnector

__all__ = ["expand_mentions", "list_resources", "mentions"]

_MENTION = re.compile(r"(?<![\w@])@([A-Za-z0-9_.-]+):([a-zA-Z][a-zA-Z0-9+.-]*:[^\s<>\"']+)")
_TRAILING = ".,;:!?)]}"  # punctuation after a mention ends the sentence, not the URI
MAX_MENTIONS = 20  # resources sent with one message (each read in full, up to max_result_chars)


def mentions(text: str) -> list[tuple[str, str]]:
    """``(server, uri)`` of each ``@SERVER:URI`` in ``text``, in order, each once."""
    found: list[tuple[str, str]] = []
    for match in _MENTION.finditer(text):
        pair = (match.group(1), match.group(2).rstrip(_TRAILING))
        if pair not in found:
            found.append(pair)
    return found


async def expand_mentions(connectors: Sequence[McpConnector], text: str) -> str:
    """``text`` with the contents of each resource it mentions from ``connectors``' servers
    appended, each in a ``<resource-KEY>`` block (``KEY`` random, new for each message, so a
    resource's text cannot close its block and write as the person); unchanged when it mentions
    none. A mentioned resource that cannot be read is a :class:`UserError` that says which and why
    (nothing is sent)."""
    from tether.connectors._resources import read_parts
    from tether.messages import TextPart

    by_name = {c.server: c for c in connectors}
    wanted = [(server, uri) for server, uri in mentions(text) if server in by_name]
    if not wanted:
        return text
    if len(wanted) > MAX_MENTIONS:
        raise UserError(
            f"the message mentions {len(wanted)} resources; at most {MAX_MENTIONS} go with one message "
            "(each is read in full): mention fewer"
        )
    read: dict[tuple[str, str], str] = {}
    for server in dict.fromkeys(server for server, _ in wanted):  # each server started once
        connector = by_name[server]
        await connector.start()
        try:
            for uri in (uri for named, uri in wanted if named == server):
                try:
                    parts = await read_parts(connector, uri)
                except TetherError as exc:
                    raise UserError(f"@{server}:{uri} could not be read: {exc}") from None
                read[(server, uri)] = "\n".join(
                    p.text if isinstance(p, TextPart) else f"(an image, {p.media_type}: not sent from a mention)"
                    for p in parts
                )
        finally:
            await connector.stop()
    tag = "resource-" + secrets.token_hex(6)
    while any(tag in said for said in read.values()):  # chosen after reading: a server cannot know it
        tag = "resource-" + secrets.token_hex(6)
    blocks = [f'<{tag} server="{server}" uri="{uri}">\n{read[(server, uri)]}\n</{tag}>' for server, uri in wanted]
    return text + "\n\n" + "\n\n".join(blocks)


async def list_resources(connectors: Sequence[McpConnector]) -> list[dict[str, Any]]:
    """Every resource of ``connectors``' servers (server, uri, name, description, mime type), then
    their URI templates (``template``: true). A server that cannot be reached is left out."""
    from tether.connectors.prompts import gather_listings

    return await gather_listings(connectors, _resources)


async def _resources(connector: McpConnector) -> list[dict[str, Any]]:
    from tether.connectors._resources import LISTED

    async def ask(client: Any) -> list[dict[str, Any]]:
        if client.server_capabilities.resources is None:
            return []
        listed = [
            {
                "uri": str(r.uri),
                "name": r.name or "",
                "description": r.description or "",
                "mime": r.mime_type or "",
                "template": False,
            }
            for r in (await client.list_resources()).resources[:LISTED]
        ]
        try:
            templates = (await client.list_resource_templates()).resource_templates[:LISTED]
        except Exception:  # a server without templates may refuse the method
            templates = []
        return listed + [
            {
                "uri": t.uri_template,
                "name": t.name or "",
                "description": t.description or "",
                "mime": t.mime_type or "",
                "template": True,
            }
            for t in templates
        ]

    found: list[dict[str, Any]] = await connector.request("its resources", ask)
    return found
