"""What an MCP tool's result becomes for the model: text parts, image parts, and words for the rest.

Text is kept as text and images as images. What the model cannot be shown directly (audio, a
resource the server embedded or linked, binary data) is described in a line: its URI, its type, and
its text when it has one. ``isError`` makes the result a tool error the model reads.

A result is kept within bounds as the built-in tools' are: text past ``max_chars`` (``[mcp.NAME]
max_result_chars``, default 100,000 like ``read_file``) keeps its head and its tail, with a line
saying how much was cut between them; an image past ``MAX_IMAGE_BYTES`` is described, not sent,
and so is each image that would take one result's images past ``MAX_RESULT_IMAGE_BYTES`` (many
images each under the limit would make a request no provider takes). How many images a run keeps
is the agent's ``max_images``.
"""

from __future__ import annotations

import base64
import binascii
import json
from typing import Any

import mcp_types as types

from tether.messages import ImagePart, TextPart
from tether.tools.base import ToolResult, cut_middle

__all__ = ["DEFAULT_MAX_CHARS", "MAX_IMAGE_BYTES", "bounded", "to_tool_result"]

DEFAULT_MAX_CHARS = 100_000  # the built-in read_file's cap
MAX_IMAGE_BYTES = 5 * 1024 * 1024  # decoded; what the providers accept for one image
# One result's images, in all, decoded: Anthropic takes requests up to 32 MB (images in base64, a
# third larger), OpenAI up to 50 MB; a stdio answer may be 64 MiB.
MAX_RESULT_IMAGE_BYTES = 10 * 1024 * 1024
SENT_IMAGE_TYPES = ("image/png", "image/jpeg", "image/gif", "image/webp")  # what every provider takes


def to_tool_result(result: types.CallToolResult, max_chars: int = DEFAULT_MAX_CHARS) -> ToolResult:
    parts: list[TextPart | ImagePart] = [part for block in result.content if (part := _part(block)) is not None]
    if not parts and result.structured_content is not None:
        parts.append(TextPart(text=json.dumps(result.structured_content, ensure_ascii=False)))
    if not parts:
        parts.append(TextPart(text="(the tool returned no content)"))
    return ToolResult(bounded(parts, max_chars), is_error=bool(result.is_error))


def bounded(parts: list[TextPart | ImagePart], max_chars: int) -> list[TextPart | ImagePart]:
    """``parts`` with their text within ``max_chars`` in all: when it is longer, the text parts
    become one that keeps the first two thirds and the last third of the budget, and says what was
    cut. Images stay where they were, after the text. An image that would take them past
    ``MAX_RESULT_IMAGE_BYTES`` in all is described in a line instead."""
    parts = _images_bounded(parts)
    total = sum(len(p.text) for p in parts if isinstance(p, TextPart))
    if total <= max_chars:
        return parts
    text = "\n".join(p.text for p in parts if isinstance(p, TextPart))
    head = max_chars * 2 // 3

    def note(cut: str) -> str:
        return (
            f"\n[... {len(cut):,} of {len(text):,} characters cut here: the result is longer than "
            f"{max_chars:,} characters (max_result_chars of the server's [mcp.NAME]); ask the tool for a smaller "
            "part if the middle matters ...]\n"
        )

    images = [p for p in parts if isinstance(p, ImagePart)]
    return [TextPart(text=cut_middle(text, head, max_chars - head, note)), *images]


def _images_bounded(parts: list[TextPart | ImagePart]) -> list[TextPart | ImagePart]:
    kept: list[TextPart | ImagePart] = []
    count = size = 0
    for part in parts:
        if isinstance(part, ImagePart):
            n = _decoded(part.data)
            if size + n > MAX_RESULT_IMAGE_BYTES:
                limit = MAX_RESULT_IMAGE_BYTES // (1024 * 1024)
                part = TextPart(
                    text=f"[image ({part.media_type}, {n:,} bytes): not shown, the {count} images before it in this "
                    f"result already hold {size:,} bytes, and one result sends the model at most {limit} MiB of "
                    "images; ask the tool for fewer or smaller ones if it matters]"
                )
            else:
                count, size = count + 1, size + n
        kept.append(part)
    return kept


def _part(block: Any) -> TextPart | ImagePart | None:
    if isinstance(block, types.TextContent):
        return TextPart(text=block.text)
    if isinstance(block, types.ImageContent):
        return _image(block.mime_type, block.data, "image")
    if isinstance(block, types.AudioContent):
        return TextPart(text=f"[audio ({block.mime_type}, {_decoded(block.data):,} bytes): not shown]")
    if isinstance(block, types.ResourceLink):
        about = " ".join(x for x in (block.name, f"- {block.description}" if block.description else "") if x)
        return TextPart(text=f"[resource link {block.uri}{_mime(block.mime_type)}] {about}".rstrip())
    if isinstance(block, types.EmbeddedResource):
        return _resource(block.resource)
    return TextPart(text=f"[content of type {getattr(block, 'type', '?')!r}: not shown]")


def _image(mime: str, data: str, what: str) -> TextPart | ImagePart:
    size = _decoded(data)
    if size > MAX_IMAGE_BYTES:
        limit = MAX_IMAGE_BYTES // (1024 * 1024)
        return TextPart(text=f"[{what} ({mime}, {size:,} bytes): not shown, larger than {limit} MiB]")
    # Sent as it is, data that is not an image would make the provider refuse the run's next request
    # (an HTTP 400 that ends the run): a server's broken image is described instead.
    if not mime.lower().startswith("image/"):
        return TextPart(text=f"[{what} ({mime}): not shown, its type is not an image type]")
    kind = mime.split(";")[0].strip().lower()  # parameters and case: no provider takes them
    if kind not in SENT_IMAGE_TYPES:  # SVG, TIFF, BMP...: an image type no provider takes
        return TextPart(text=f"[{what} ({mime}): not shown, models are sent only PNG, JPEG, GIF and WebP images]")
    try:
        base64.b64decode(data, validate=True)
    except binascii.Error:
        return TextPart(text=f"[{what} ({mime}): not shown, its data is not valid base64]")
    return ImagePart(media_type=kind, data=data)


def _resource(res: types.TextResourceContents | types.BlobResourceContents) -> TextPart | ImagePart:
    if isinstance(res, types.TextResourceContents):
        return TextPart(text=f"[resource {res.uri}{_mime(res.mime_type)}]\n{res.text}")
    if res.mime_type and res.mime_type.startswith("image/"):
        return _image(res.mime_type, res.blob, f"resource {res.uri}")
    return TextPart(
        text=f"[resource {res.uri}{_mime(res.mime_type)}: {_decoded(res.blob):,} bytes of binary data, not shown]"
    )


def _decoded(data: str) -> int:
    return len(data) * 3 // 4


def _mime(mime: str | None) -> str:
    return f" ({mime})" if mime else ""
