"""What the model is shown of the transcript: the transcript stays whole on disk and on the
record the person sees; a request may carry less of it.

* **Completed turns** (``Agent.completed_turns = "answers"``): a turn is a person's message and
  everything up to the next one. Once it ended with a final answer (a reply that calls no tool),
  and a newer message of the person's follows, the model is shown its input and its answer only:
  the tool calls and results in between stay in the transcript, not in the request. The view of a
  turn never changes once it is made, so a provider's prompt cache keeps working. A turn that did
  not end with an answer (stopped, failed, steered mid-way) is shown whole.
* **Images** are sent until the model has replied after them. Later requests carry a line of text
  in each one's place (what it was, how large), not its bytes: a screenshot read once is not paid
  for in every later request.

The transcript itself keeps the latest ``Agent.max_images`` images from tools
(:func:`keep_latest_images`): one older is replaced there by the line the requests already carry
for it, so a run of many screenshots holds neither the process nor a request full of them.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from typing import Literal

from tether.harness.state import is_person
from tether.messages import AssistantMessage, ImagePart, Message, TextPart, ToolMessage, UserMessage

__all__ = ["CompletedTurns", "image_reference", "keep_latest_images", "model_view"]

CompletedTurns = Literal["full", "answers"]


def model_view(
    messages: Sequence[Message],
    completed_turns: CompletedTurns = "full",
    memo: dict[int, tuple[Message, Message]] | None = None,
) -> Sequence[Message]:
    """``messages`` as the next request carries them (the same list when nothing changes).
    ``memo`` keeps each message shown in another form, so the next request gets the same object."""
    shown = _answers_only(messages) if completed_turns == "answers" else messages
    return _images_once(shown, {} if memo is None else memo)


def _answers_only(messages: Sequence[Message]) -> Sequence[Message]:
    starts = [i for i, m in enumerate(messages) if is_person(m)]
    if len(starts) < 2:
        return messages
    out: list[Message] = list(messages[: starts[0]])
    for start, end in itertools.pairwise(starts):  # every turn but the latest
        turn = messages[start:end]
        last = turn[-1]
        answered = isinstance(last, AssistantMessage) and not last.tool_calls and len(turn) > 2
        out.extend((turn[0], last) if answered else turn)
    out.extend(messages[starts[-1] :])
    return out if len(out) < len(messages) else messages


def image_reference(image: ImagePart) -> TextPart:
    """The line that stands in for an image the model has already seen."""
    return TextPart(text=f"[{_what(image)}: shown to the model before its reply above; not sent again]")


def _what(image: ImagePart) -> str:
    if image.url:
        return f"{image.media_type} image at {image.url}"
    return f"{image.media_type} image, {len(image.data) * 3 // 4 // 1024} KB"


def _images_once(messages: Sequence[Message], memo: dict[int, tuple[Message, Message]]) -> Sequence[Message]:
    last_reply = next((i for i in range(len(messages) - 1, -1, -1) if isinstance(messages[i], AssistantMessage)), -1)
    seen = [i for i in range(last_reply) if _has_image(messages[i])]  # sent before the model's reply
    if not seen:
        memo.clear()
        return messages
    out, used = list(messages), {}
    for i in seen:
        m = messages[i]
        original, shown = memo.get(id(m), (None, None))
        if original is not m or shown is None:
            parts = tuple(image_reference(p) if isinstance(p, ImagePart) else p for p in m.content)
            shown = m.model_copy(update={"content": parts})
        used[id(m)] = (m, shown)
        out[i] = shown
    memo.clear()  # only what this request shows: a message compaction dropped is let go
    memo.update(used)
    return out


def _has_image(message: Message) -> bool:
    return isinstance(message, UserMessage | ToolMessage) and any(isinstance(p, ImagePart) for p in message.content)


def keep_latest_images(messages: list[Message], limit: int) -> set[int]:
    """Replace in ``messages`` every image from a tool but the latest ``limit`` by a line of text;
    the ids of the messages replaced (empty: nothing changed). A person's images are kept.

    An image the model has replied after becomes the line requests already carry in its place
    (:func:`image_reference`), so no request changes and a prompt cache keeps hitting; one it has
    not seen yet (more images in one round of calls than ``limit``) is left out with why."""
    last_reply = next((i for i in range(len(messages) - 1, -1, -1) if isinstance(messages[i], AssistantMessage)), -1)
    kept, replaced = 0, set()
    for i in range(len(messages) - 1, -1, -1):
        m = messages[i]
        if not isinstance(m, ToolMessage) or not _has_image(m):
            continue
        parts: list[TextPart | ImagePart] = []
        for p in reversed(m.content):  # the latest image of a result is the last one kept
            if isinstance(p, ImagePart) and kept >= limit:
                p = image_reference(p) if i < last_reply else _left_out(p, limit)
            elif isinstance(p, ImagePart):
                kept += 1
            parts.append(p)
        if any(new is not old for new, old in zip(reversed(parts), m.content, strict=True)):
            messages[i] = m.model_copy(update={"content": tuple(reversed(parts))})
            replaced.add(id(m))
    return replaced


def _left_out(image: ImagePart, limit: int) -> TextPart:
    return TextPart(
        text=f"[{_what(image)}: left out, not shown to the model: a run keeps the latest {limit} images from tools "
        "(max_images). Ask for fewer images at a time.]"
    )
