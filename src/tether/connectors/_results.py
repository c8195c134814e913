"""What an MCP tool's result becomes for the model: text parts, image parts, and words for the rest.

Text is kept as text and images as images. What the model cannot be shown directly (audio, a
resource the server embedded or linked, binary data) is described in a line: its URI, its type, and
its text when it has one. ``isError`` makes the result a tool error the model reads.
"""

from __future__ import annotations

import json
from typing import Any

import mcp_types as types

from tether.messages import ImagePart, TextPart
from tether.tools.base import ToolResult

__all__ = ["to_tool_result"]


def to_tool_result(result: types.CallToolResult) -> ToolResult:
    parts: list[TextPart | ImagePart] = [part for block in result.content if (part := _part(block)) is not None]
    if not parts and result.structured_content is not None:
        parts.append(TextPart(text=json.dumps(result.structured_content, ensure_ascii=False)))
    if not parts:
        parts.append(TextPart(text="(the tool returned no content)"))
    return ToolResult(parts, is_error=bool(result.is_error))


def _part(block: Any) -> TextPart | ImagePart | None:
    if isinstance(block, types.TextContent):
        return TextPart(text=block.text)
    if isinstance(block, types.ImageContent):
        return ImagePart(media_type=block.mime_type, data=block.data)
    if isinstance(block, types.AudioContent):
        return TextPart(text=f"[audio ({block.mime_type}, {len(block.data) * 3 // 4:,} bytes): not shown]")
    if isinstance(block, types.ResourceLink):
        about = " ".join(x for x in (block.name, f"- {block.description}" if block.description else "") if x)
        return TextPart(text=f"[resource link {block.uri}{_mime(block.mime_type)}] {about}".rstrip())
    if isinstance(block, types.EmbeddedResource):
        return _resource(block.resource)
    return TextPart(text=f"[content of type {getattr(block, 'type', '?')!r}: not shown]")


def _resource(res: types.TextResourceContents | types.BlobResourceContents) -> TextPart | ImagePart:
    if isinstance(res, types.TextResourceContents):
        return TextPart(text=f"[resource {res.uri}{_mime(res.mime_type)}]\n{res.text}")
    if res.mime_type and res.mime_type.startswith("image/"):
        return ImagePart(media_type=res.mime_type, data=res.blob)
    return TextPart(
        text=f"[resource {res.uri}{_mime(res.mime_type)}: {len(res.blob) * 3 // 4:,} bytes of binary data, not shown]"
    )


def _mime(mime: str | None) -> str:
    return f" ({mime})" if mime else ""
