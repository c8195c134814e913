"""The canonical message model: one shape for the loop, the stores, the trace and every wire.

A message is a tagged union on ``role``; its content is a list of parts, a tagged union on
``type``. Messages are frozen, so a wire module may cache its translation of one by identity.
Provider formats never leak past the provider layer.
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Callable, Sequence
from typing import Annotated, Any, ClassVar, Literal, TypeVar, overload

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter

from tether.usage import Usage

__all__ = [
    "AssistantMessage",
    "ImagePart",
    "Message",
    "ReasoningPart",
    "TextPart",
    "ToolCallPart",
    "ToolMessage",
    "TurnMessage",
    "UserMessage",
    "clean_text",
    "clean_value",
    "dump_message",
    "for_people",
    "load_message",
    "parse_arguments",
    "text_of",
    "withheld_arguments",
    "withheld_text",
]


class _Frozen(BaseModel):
    # Validators are built on first use, not at import: ``import tether`` stays cheap.
    model_config = ConfigDict(frozen=True, defer_build=True)


class TextPart(_Frozen):
    """Text written by the person, the model or a tool."""

    type: Literal["text"] = "text"
    text: str


class ImagePart(_Frozen):
    """An image, inline as base64 ``data`` or by ``url``."""

    type: Literal["image"] = "image"
    media_type: str = "image/png"
    data: str = ""  # base64; empty when ``url`` is used
    url: str | None = None


class ReasoningPart(_Frozen):
    """The model's reasoning, kept to send back to the provider that wrote it."""

    type: Literal["reasoning"] = "reasoning"
    text: str = ""
    # Provider-specific proof that the reasoning is unaltered (signature or encrypted payload).
    signature: str | None = None
    redacted: bool = False  # the provider sent only an encrypted payload (in ``signature``)


class ToolCallPart(_Frozen):
    """A call the model asked for: its ``id``, the tool's ``name`` and its ``arguments`` (JSON text)."""

    type: Literal["tool_call"] = "tool_call"
    id: str
    name: str
    # The arguments exactly as the model produced them: a JSON text that may be invalid.
    arguments: str = "{}"


UserPart = Annotated[TextPart | ImagePart, Field(discriminator="type")]
AssistantPart = Annotated[TextPart | ReasoningPart | ToolCallPart, Field(discriminator="type")]


class _TextOrMake:
    """``UserMessage.text``: on the class, what makes a message of text (``UserMessage.text("hi")``,
    as it always did); on a message, its text, as ``AssistantMessage.text`` and ``ToolMessage.text``
    read theirs (it was the maker there too: ``messages[0].text`` gave a bound method, and
    ``messages[0].text.strip()`` an AttributeError)."""

    @overload
    def __get__(self, message: None, owner: type[UserMessage]) -> Callable[[str], UserMessage]: ...
    @overload
    def __get__(self, message: UserMessage, owner: type[UserMessage]) -> str: ...
    def __get__(self, message: UserMessage | None, owner: type[UserMessage]) -> Callable[[str], UserMessage] | str:
        if message is None:
            return functools.partial(_make_user_message, owner)
        return "".join(p.text for p in message.content if isinstance(p, TextPart))


def _make_user_message(cls: type[UserMessage], text: str) -> UserMessage:
    return cls(content=(TextPart(text=text),))


class UserMessage(_Frozen):
    """What the person sent (text and images), or the summary that replaced earlier turns."""

    role: Literal["user"] = "user"
    content: tuple[UserPart, ...]
    # Set on the message that replaced earlier turns at compaction: how many model turns it stands
    # for, so the turn count (derived from the transcript) survives compaction.
    summary_turns: int | None = None
    # Set on it too when the person's latest message was among the turns it replaced: the replies
    # and tool results since that message (results cut short), so that what counts a request's
    # rounds and calls (the governors, the loop guard, the tool call limits) still counts them.
    # Never sent to a model.
    turn_so_far: tuple[TurnMessage, ...] | None = None

    # ``UserMessage.text("hi")`` makes a message; ``message.text`` reads one's text, as on the others.
    text: ClassVar[_TextOrMake] = _TextOrMake()


class AssistantMessage(_Frozen):
    """A reply of the model: text, reasoning and tool calls, with the model, its usage and why it ended."""

    role: Literal["assistant"] = "assistant"
    content: tuple[AssistantPart, ...] = ()
    model: str | None = None  # the model that produced this message
    usage: Usage | None = None
    finish_reason: str | None = None
    # Set on a reply the output limit cut that was then continued (see tether.harness.length):
    # how many continuations were merged into it. Each was a model turn of its own.
    continuations: int | None = None

    @property
    def tool_calls(self) -> list[ToolCallPart]:
        return [p for p in self.content if isinstance(p, ToolCallPart)]

    @property
    def text(self) -> str:
        return "".join(p.text for p in self.content if isinstance(p, TextPart))


ToolResultStatus = Literal["ok", "error", "cached", "rejected", "interrupted", "skipped"]


class ToolMessage(_Frozen):
    """The result of one tool call. ``status`` records what tether decided; the words the model
    reads about that decision are in ``content`` (law 4)."""

    role: Literal["tool"] = "tool"
    call_id: str
    name: str
    content: tuple[UserPart, ...]
    status: ToolResultStatus = "ok"
    cached_from: str | None = None  # the earlier call whose result this repeats
    # Why the call's arguments are for the model alone: a policy refused them (the system prompt
    # or a secret passed to a tool). What shows the transcript to people shows this instead.
    args_withheld: str | None = None

    @property
    def is_error(self) -> bool:
        return self.status in ("error", "rejected", "interrupted", "skipped")

    @property
    def text(self) -> str:
        return "".join(p.text for p in self.content if isinstance(p, TextPart))


Message = Annotated[UserMessage | AssistantMessage | ToolMessage, Field(discriminator="role")]
TurnMessage = Annotated[AssistantMessage | ToolMessage, Field(discriminator="role")]


def withheld_arguments(messages: Sequence[Message]) -> dict[int, dict[str, str]]:
    """The calls whose arguments are for the model alone (their result says ``args_withheld``): for
    each reply that made such a call, by its index in ``messages``, the call's id and why."""
    out: dict[int, dict[str, str]] = {}
    reply: int | None = None
    for i, m in enumerate(messages):
        if isinstance(m, AssistantMessage):
            reply = i
        elif isinstance(m, ToolMessage) and m.args_withheld is not None and reply is not None:
            out.setdefault(reply, {})[m.call_id] = m.args_withheld
    return out


def withheld_text(why: str) -> str:
    """What a person is shown in place of a call's withheld arguments."""
    return f"[arguments withheld: {why}]"


def for_people(messages: Sequence[Message]) -> list[Message]:
    """``messages`` as a person may read them: each call whose arguments are for the model alone
    (:func:`withheld_arguments`) has ``[arguments withheld: why]`` in their place."""
    out = list(messages)
    for i, calls in withheld_arguments(messages).items():
        reply = out[i]
        assert isinstance(reply, AssistantMessage)
        content = tuple(
            p.model_copy(update={"arguments": withheld_text(calls[p.id])})
            if isinstance(p, ToolCallPart) and p.id in calls
            else p
            for p in reply.content
        )
        out[i] = reply.model_copy(update={"content": content})
    return out


@functools.cache
def _adapter() -> TypeAdapter[Message]:
    return TypeAdapter(Message)  # built on first use, like the models


def dump_message(message: Message) -> str:
    """One message as one line of JSON (no newline inside)."""
    return message.model_dump_json(exclude_none=True)


def load_message(line: str | bytes) -> Message:
    """Parse what :func:`dump_message` wrote; raises ``pydantic.ValidationError`` on garbage."""
    return _adapter().validate_json(line)


def load_message_dict(data: object) -> Message:
    return _adapter().validate_python(data)


def text_of(messages: Sequence[Message]) -> str:
    """All the text of ``messages``, for estimates and searches."""
    out: list[str] = []
    for m in messages:
        if isinstance(m, AssistantMessage):
            out.append(m.text)
            out.extend(c.name + c.arguments for c in m.tool_calls)
        else:
            out.append(m.text)
    return "\n".join(out)


NOT_JSON: object = object()  # what parse_arguments returns for arguments that are not JSON


def parse_arguments(arguments: str) -> object:
    """A call's JSON arguments parsed, or ``NOT_JSON`` when they are not valid JSON — including
    JSON nested too deeply to parse (hostile output can nest 100,000 levels)."""
    try:
        return json.loads(arguments or "{}")
    except (ValueError, RecursionError):
        return NOT_JSON


def canonical_arguments(arguments: str) -> str | None:
    """A canonical form of a call's JSON arguments (sorted keys), or None when not valid JSON."""
    value = parse_arguments(arguments)
    if value is NOT_JSON:
        return None
    try:
        return json.dumps(value, sort_keys=True, separators=(",", ":"))
    except (ValueError, RecursionError):
        return None


_LONE_SURROGATE = re.compile("[\ud800-\udfff]")


def clean_text(text: str) -> str:
    """``text`` without lone surrogates (replaced by U+FFFD; valid pairs joined into one
    character), so it can always be written as UTF-8.

    They reach tether from a model's ``\\ud800`` escapes and from file names that are not UTF-8
    (``os.fsdecode``); one left in a message would make every later save of the run fail."""
    if text.isascii() or not _LONE_SURROGATE.search(text):
        return text
    return text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "replace")


def clean_value(value: Any) -> Any:
    """``value`` (parsed JSON) with :func:`clean_text` applied to every string, keys included."""
    if isinstance(value, str):
        return clean_text(value)
    if isinstance(value, dict):
        return {clean_text(k) if isinstance(k, str) else k: clean_value(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [clean_value(v) for v in value]
    return value


_M = TypeVar("_M", UserMessage, AssistantMessage, ToolMessage)


def clean_message(message: _M) -> _M:
    """``message`` with every text field passed through :func:`clean_text` (the same object when
    nothing needed cleaning, which is almost always)."""
    try:
        message.model_dump_json()
        return message
    except ValueError:  # pydantic's serialisation error on a lone surrogate
        return type(message).model_validate(clean_value(message.model_dump()))
