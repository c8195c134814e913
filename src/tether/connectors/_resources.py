"""An MCP server's resources, for the model: two tools a connector adds when the server has them.

``SERVER__mcp_resources`` lists what the server offers (its resources, and its templates: URIs with
``{placeholders}`` the model fills in); ``SERVER__mcp_read_resource(uri)`` reads one, which is also
how the model follows a resource link a tool's result gave it. Both only read, and are never
answered from an earlier call (a resource may change). What they return is bounded like a tool's
result (``max_result_chars``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, ClassVar

import mcp_types as types

from tether.connectors._results import bounded
from tether.errors import ConfigError
from tether.messages import ImagePart, TextPart
from tether.tools.base import ToolContext, ToolResult

if TYPE_CHECKING:
    from mcp import Client

    from tether.connectors.mcp import McpConnector

__all__ = ["list_text", "prompt_messages", "prompts_text", "read_parts", "resource_tools"]

LISTED = 200  # resources and templates shown, each


def resource_tools(connector: McpConnector, name: Callable[[str, list[str]], str]) -> list[Any]:
    """The resource tools of ``connector``'s server, named by ``name(tool, taken)`` (the connector's
    own naming, so they never clash with the server's tools)."""
    taken = [t.name for t in connector._tools]
    listing = ListResources(connector, name("mcp_resources", taken))
    reading = ReadResource(connector, name("mcp_read_resource", [*taken, listing.name]))
    return [listing, reading]


async def list_text(connector: McpConnector) -> str:
    """What the server offers, a line each: resources, then templates."""

    async def ask(client: Client) -> tuple[list[types.Resource], list[types.ResourceTemplate]]:
        resources = (await client.list_resources()).resources[:LISTED]
        templates: list[types.ResourceTemplate] = []
        if client.server_capabilities.resources is not None:
            try:
                templates = (await client.list_resource_templates()).resource_templates[:LISTED]
            except Exception:  # a server without templates may refuse the method
                templates = []
        return resources, templates

    resources, templates = await connector.request("its resources", ask)
    lines = [f"- {r.uri}{_about(r.name, r.mime_type, r.description)}" for r in resources]
    lines += [f"- {t.uri_template} (template){_about(t.name, t.mime_type, t.description)}" for t in templates]
    if not lines:
        return f"The MCP server {connector.server} offers no resources."
    return f"Resources of the MCP server {connector.server} (read one by its URI):\n" + "\n".join(lines)


async def read_parts(connector: McpConnector, uri: str) -> list[TextPart | ImagePart]:
    """The resource's contents as the model sees a tool's result."""
    from tether.connectors._results import _part

    async def ask(client: Client) -> types.ReadResourceResult:
        return await client.read_resource(uri)

    result: types.ReadResourceResult = await connector.request(f"the resource {uri}", ask)
    parts = [p for c in result.contents if (p := _part(types.EmbeddedResource(type="resource", resource=c)))]
    return bounded(parts or [TextPart(text=f"(the resource {uri} is empty)")], connector.max_result_chars)


def _about(name: str | None, mime: str | None, description: str | None) -> str:
    words = " ".join(x for x in (name or "", f"({mime})" if mime else "") if x)
    return (f": {words}" if words else "") + (f" - {' '.join(description.split())[:300]}" if description else "")


class _ResourceTool:
    read_only = True
    cacheable = False  # a resource may change between two reads
    needs_approval = False
    input_schema: ClassVar[dict[str, Any]] = {"type": "object", "properties": {}}

    def __init__(self, connector: McpConnector, name: str) -> None:
        self.connector = connector
        self.name = name


class ListResources(_ResourceTool):
    def __init__(self, connector: McpConnector, name: str) -> None:
        super().__init__(connector, name)
        self.description = (
            f"List the resources of the MCP server {connector.server} (documents, records, files it offers to "
            "read), with their URIs, and its URI templates. Read one with the read-resource tool."
        )

    async def execute(self, input: dict[str, Any], ctx: ToolContext) -> ToolResult:
        try:
            return ToolResult(await list_text(self.connector))
        except ConfigError as exc:
            return ToolResult(f"Error: {exc}", is_error=True)


class ReadResource(_ResourceTool):
    input_schema: ClassVar[dict[str, Any]] = {
        "type": "object",
        "properties": {"uri": {"type": "string", "description": "the resource's URI, as listed or linked"}},
        "required": ["uri"],
        "additionalProperties": False,
    }

    def __init__(self, connector: McpConnector, name: str) -> None:
        super().__init__(connector, name)
        self.description = (
            f"Read a resource of the MCP server {connector.server} by its URI: one its resource list gives, one "
            "made from a template, or one a tool's result linked to ([resource link URI])."
        )

    async def execute(self, input: dict[str, Any], ctx: ToolContext) -> ToolResult:
        try:
            return ToolResult(await read_parts(self.connector, str(input["uri"])))
        except ConfigError as exc:
            return ToolResult(f"Error: {exc}", is_error=True)


async def prompts_text(connector: McpConnector) -> str:
    """The server's prompts, a line each, with their arguments."""

    async def ask(client: Client) -> list[types.Prompt]:
        return (await client.list_prompts()).prompts[:LISTED]

    prompts: list[types.Prompt] = await connector.request("its prompts", ask)
    if not prompts:
        return f"The MCP server {connector.server} offers no prompts."
    lines = []
    for p in prompts:
        args = " ".join(f"{a.name}{'' if a.required else '?'}" for a in p.arguments or [])
        lines.append(f"- {p.name}{' ' + args if args else ''}{_about(None, None, p.description)}")
    return "\n".join(lines)


async def prompt_messages(connector: McpConnector, name: str, arguments: dict[str, str]) -> list[tuple[str, str]]:
    """The messages of the prompt ``name`` filled in with ``arguments``: (role, text) each."""

    async def ask(client: Client) -> types.GetPromptResult:
        return await client.get_prompt(name, arguments)

    result: types.GetPromptResult = await connector.request(f"the prompt {name}", ask)
    out: list[tuple[str, str]] = []
    for message in result.messages:
        part = _part_of(message.content)
        out.append((message.role, part.text if isinstance(part, TextPart) else f"[image ({part.media_type})]"))
    return out


def _part_of(content: Any) -> TextPart | ImagePart:
    from tether.connectors._results import _part

    part = _part(content)
    return part if part is not None else TextPart(text="")
