"""The one interface the loop talks to. Provider quirks stay behind it.

Rules every wire keeps, written once here:

* a streamed reply is complete only when the provider said it finished (:func:`incomplete_stream`
  is what a stream that stopped before that raises);
* a reply cut by the token limit is returned as it came, with ``finish_reason="length"`` and a
  cut tool call's arguments as far as they got: the loop continues cut text and never runs a cut
  call (:mod:`tether.harness.length`);
* each tool call has an id of its own in the conversation (:func:`distinct_call_ids`);
* usage the server did not report is estimated from the request and the reply, and marked
  (:func:`complete_usage`); a count no call can have (negative, infinite, not a number) is
  one it did not report (:func:`token_count`).
"""

from __future__ import annotations

import re
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from tether.errors import IncompleteStreamError
from tether.messages import AssistantMessage, Message, ToolCallPart
from tether.usage import Usage

__all__ = [
    "ANSWER_TOOL",
    "STOPPED_BY_PROVIDER",
    "IncompleteStreamError",
    "ModelLister",
    "ModelRequest",
    "ModelResponse",
    "OutputSchema",
    "Provider",
    "ResponseDone",
    "StreamEvent",
    "StreamReasoning",
    "StreamText",
    "ToolDefinition",
    "body_extra",
    "call_name",
    "complete_usage",
    "distinct_call_ids",
    "estimate_usage",
    "incomplete_stream",
    "prompt_tokens",
    "reply_tokens",
    "sent_call_name",
    "token_count",
]


# Finish reasons of a reply the provider stopped before the model was done, in words for a run's
# reason: the model's refusal (OpenAI's ``refusal`` field, Anthropic's ``stop_reason: refusal``)
# and a content filter (``finish_reason: content_filter``: OpenAI, Azure). Its text may be cut
# short, or empty; asked again, the same request is stopped again.
STOPPED_BY_PROVIDER = {
    "refusal": "the model refused to answer",
    "content_filter": "the provider's content filter stopped the reply",
    # Anthropic's server tools (web search, code execution) pause a long turn; the paused reply is
    # to be sent back as it came, server tool blocks and all, which tether does not keep.
    "pause_turn": "the server paused the turn (a server tool ran long), and tether does not resume a paused turn",
}


@dataclass(frozen=True, slots=True)
class ToolDefinition:
    name: str
    description: str
    input_schema: dict[str, Any]


# The tool a wire without a native JSON-schema reply format offers for the final answer; tools of
# an agent with an output type may not use this name.
ANSWER_TOOL = "final_answer"


@dataclass(frozen=True, slots=True)
class OutputSchema:
    """The shape the final answer must take (structured output). Each wire asks for it in its own
    way and returns the answer as the reply's text, a JSON document: Chat Completions through its
    native ``response_format``; Messages through an :data:`ANSWER_TOOL` tool whose call the wire
    turns back into text."""

    name: str  # ``^[a-zA-Z0-9_-]{1,64}$``, as both APIs require
    schema: dict[str, Any]  # a JSON Schema whose root is an object
    description: str = ""


@dataclass(frozen=True, slots=True)
class ModelRequest:
    model: str  # the provider's own model id (after ``provider/`` was split off)
    messages: Sequence[Message]
    system: str | None = None
    tools: Sequence[ToolDefinition] = ()
    max_tokens: int | None = None
    # A stable id for the conversation (session or run): providers with a cache key use it.
    cache_key: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)
    output_schema: OutputSchema | None = None  # the final answer must match it (structured output)


@dataclass(frozen=True, slots=True)
class ModelResponse:
    message: AssistantMessage  # carries usage, model and finish_reason


@dataclass(frozen=True, slots=True)
class StreamText:
    text: str
    # What the model wrote that is shown to no one (a tool call's arguments, with ``text`` empty):
    # the provider bills it, so a reply lost after it (a cut, a stall, Stop) is charged for it.
    unshown: str = ""


@dataclass(frozen=True, slots=True)
class StreamReasoning:
    text: str


@dataclass(frozen=True, slots=True)
class ResponseDone:
    response: ModelResponse


StreamEvent = StreamText | StreamReasoning | ResponseDone


@runtime_checkable
class Provider(Protocol):
    """A model behind one interface. ``stream`` ends with exactly one :class:`ResponseDone`."""

    name: str

    async def complete(self, request: ModelRequest) -> ModelResponse: ...

    def stream(self, request: ModelRequest) -> AsyncIterator[StreamEvent]: ...

    async def validate_auth(self) -> None: ...

    async def aclose(self) -> None: ...


@runtime_checkable
class ModelLister(Protocol):
    """A provider that can ask its server which models it serves (``tether models``). Apart from
    :class:`Provider` so that a provider without a listing (``FunctionModel``) still fits it."""

    async def list_models(self) -> list[str]:
        """Model ids as the server names them (without ``provider/``), in its order. Raises the
        same classified errors as a request: :class:`~tether.errors.AuthError`,
        :class:`~tether.errors.UnreachableError`, ..."""
        ...


# The name a call that had none is sent back under: both APIs refuse an empty one in the history
# (OpenAI: "empty string. Expected a string with minimum length 1"; Anthropic: "tool_use.name:
# String should have at least 1 character"), and it is what a tool's name may be on both.
NAMELESS_CALL = "no_tool_name"
# What a tool's name may be on both APIs; OpenAI checks the names in the history too ("Invalid
# 'messages[9].tool_calls[0].function.name': string does not match pattern").
_SENDABLE_NAME = re.compile(r"[a-zA-Z0-9_-]{1,64}")


def call_name(value: Any) -> str:
    """A tool call's name as a wire read it; "" for a call that named no tool (the name left out,
    null, or only spaces), on every path alike: the loop answers it with an error the model can act
    on (which tools exist), rather than the reply being refused or the call run as a tool named "  "."""
    return value if isinstance(value, str) and value.strip() else ""


def sent_call_name(name: str) -> str:
    """The name a call goes back to a server under: its own when the APIs take it; a name made up
    (``multi_tool_use.parallel``, ``git diff``, another server's) with each character they refuse
    as ``_``, cut to 64; :data:`NAMELESS_CALL` for none. Sent as made up, the next request was
    refused, and the run failed for a call the model had already been told is not a tool (the
    result it reads keeps the name as the model wrote it)."""
    if _SENDABLE_NAME.fullmatch(name):
        return name
    return re.sub(r"[^a-zA-Z0-9_-]", "_", name.strip())[:64] or NAMELESS_CALL


def incomplete_stream(provider: str, chars_shown: int, why: str) -> IncompleteStreamError:
    """The error for a stream that ended before its end marker (``why`` names what was missing)."""
    shown = f"after {chars_shown} characters" if chars_shown else "before anything was shown"
    return IncompleteStreamError(
        f"{provider}: the stream was cut before the provider finished ({shown}; {why})",
        provider=provider,
        chars_shown=chars_shown,
    )


# Counts past this are not a call's: no context window is within orders of magnitude of it, and
# every count below it, times any price, is a finite cost.
MAX_TOKEN_COUNT = 2**53


def token_count(value: Any) -> int:
    """A token count from a server's usage, or 0 (what a server that sends none reports) when it is
    not one a call can have: negative, not a number (words, NaN, ``Infinity``, which Python's JSON
    reader accepts), or past :data:`MAX_TOKEN_COUNT`. Kept as it came, such a count made the run's
    cost negative, infinite or an ``OverflowError``; as 0 it is estimated (:func:`complete_usage`)."""
    if isinstance(value, str) and value.strip().isdecimal() and len(value) <= 20:
        value = int(value)  # a count sent as a JSON string
    if isinstance(value, bool) or not isinstance(value, int | float):
        return 0
    if not 0 <= value < MAX_TOKEN_COUNT:  # False for NaN too
        return 0
    return int(value)


def body_extra(request: ModelRequest, limits: tuple[str, ...]) -> dict[str, Any]:
    """``request.extra`` (``Agent(request_extra=...)``), to lay over a wire's body, with each of
    ``limits`` it names (the wire's fields for the reply's token limit) no higher than the request's
    ``max_tokens``: that limit is the one a budget planned the call with (law 6), and an extra that
    raised it (``{"max_completion_tokens": 20000}`` for a reasoning model) let a run of $0.05 end
    at $0.20. An extra may lower it, or name the field the model reads; a value that is no count
    (None, words) is the request's limit."""
    extra, limit = request.extra, request.max_tokens
    if limit is None or not any(name in extra for name in limits):
        return extra
    out = dict(extra)
    for name in limits:
        if name in out:
            value = out[name]
            count = isinstance(value, int) and not isinstance(value, bool) and value > 0
            out[name] = min(value, limit) if count else limit
    return out


def estimate_usage(request: ModelRequest, reply: AssistantMessage, count: Callable[[str], int]) -> Usage:
    """Usage for a call the server did not report, counted from what the model reads and wrote.

    Counted: the system prompt, each message's text (a tool call's name and arguments, a tool
    result's text), each tool's name, description and JSON schema, and the reply (its text,
    reasoning and calls); plus ``PER_MESSAGE`` per message (and one for the reply's own role
    marker), ``PER_TOOL`` per tool, ``PER_CALL`` per call and ``PER_IMAGE`` per image (the one
    estimate of :mod:`tether.tokens`). Not the
    request's JSON body: its field names and escaping are not tokens the model reads.

    Assumptions, so a reader knows where the estimate can be off:

    * ``count`` is the model's tokenizer when tether knows it, else an o200k-style estimate; a
      local model's own tokenizer (Gemma's SentencePiece, Llama's BPE) may differ by 10-20 %.
    * The server renders the tools into the prompt, as OpenAI does and as llama.cpp
      (``--jinja``), vLLM and Ollama do with templates that support tools. Templates add a fixed
      instruction block around the tools (tens to a few hundred tokens) that is not counted; a
      server whose template drops the tools counts fewer tokens than this estimate.
    * Markers per message are the chat template's, not the API's (see ``tether.tokens.PER_MESSAGE``).

    Used only where the server left its count out (see :func:`complete_usage`): whenever a
    response carries the server's own count, that count is used. Marked ``estimated``."""
    return Usage(
        prompt_tokens=prompt_tokens(request, count), completion_tokens=reply_tokens(reply, count), estimated=True
    )


def reply_tokens(reply: AssistantMessage, count: Callable[[str], int]) -> int:
    """What ``reply`` wrote in tokens (its text, reasoning and calls), as :func:`estimate_usage`
    counts it."""
    from tether.tokens import PER_MESSAGE, message_tokens

    return message_tokens(reply, count, reasoning=True) - PER_MESSAGE


def prompt_tokens(request: ModelRequest, count: Callable[[str], int]) -> int:
    """The prompt of ``request`` in tokens, as :func:`estimate_usage` counts it: the system
    prompt, the messages, the tool definitions and the structured-output schema (which the server
    puts into the prompt too), with each one's markers."""
    from tether.tokens import fixed_tokens, message_tokens

    schema = request.output_schema.schema if request.output_schema is not None else None
    tools = ((t.name, t.description, t.input_schema) for t in request.tools)
    prompt = fixed_tokens(request.system, tools, count, output_schema=schema)
    return prompt + sum(message_tokens(m, count) for m in request.messages)


def complete_usage(reported: Usage | None, request: ModelRequest, reply: AssistantMessage, model: str) -> Usage:
    """``reported`` with what the server left out estimated: a missing usage, or a zero prompt or
    completion count (no real call has either), marked ``estimated``; a count no call can have is
    one it left out. The loop applies it to every reply (a provider passed as ``Agent(model=...)``
    may report none). ``model`` is ``provider/model``: it picks the counter (exact where tether
    knows the tokenizer)."""
    usage = _possible(reported or Usage())
    need_prompt = usage.prompt_tokens <= 0
    need_completion = usage.completion_tokens <= 0 and bool(reply.content)
    if not (need_prompt or need_completion):
        return usage
    from tether.tokens import count_tokens, counter_for, encoding_loaded, estimate_tokens

    count = counter_for(model)
    if count is count_tokens and not encoding_loaded():
        count = estimate_tokens  # an estimate either way: not worth a second's tokenizer load on the loop
    guess = estimate_usage(request, reply, count)
    return usage.model_copy(
        update={
            "prompt_tokens": guess.prompt_tokens if need_prompt else usage.prompt_tokens,
            "completion_tokens": guess.completion_tokens if need_completion else usage.completion_tokens,
            "estimated": True,
        }
    )


def _possible(usage: Usage) -> Usage:
    """``usage`` with each count no call can have (see :func:`token_count`) as 0, not sent: a
    provider passed as ``Agent(model=...)`` (the wires read counts through :func:`token_count`)
    may report a negative one, which would pay the budget back, or one no float can price."""
    counts = {name: getattr(usage, name) for name in _COUNTS}
    possible = {name: token_count(value) for name, value in counts.items()}
    return usage if possible == counts else usage.model_copy(update=possible)


_COUNTS = ("prompt_tokens", "completion_tokens", "cached_tokens", "cache_write_tokens")


def distinct_call_ids(reply: AssistantMessage, earlier: Sequence[Message] = ()) -> AssistantMessage:
    """``reply`` with an id of its own in the conversation for each tool call. Some servers give
    parallel calls one id (DeepSeek, GLM, Kimi's Anthropic-compatible endpoint), number them anew
    each turn, or send none: kept, two results would answer one id (results pair with calls by
    id), the next request would be refused ("Duplicate value for 'tool_call_id'", "tool_use ids
    must be unique"), and a person's decision on an earlier call (approvals and rejections are
    kept by call id) would answer a later one the person never saw. An id that is empty,
    repeated in the reply or a call's id in ``earlier`` gets a new random one."""
    ids = [call.id for call in reply.tool_calls]
    if not ids:
        return reply
    seen = {call.id for m in earlier if isinstance(m, AssistantMessage) for call in m.tool_calls}
    if all(ids) and len(set(ids)) == len(ids) and seen.isdisjoint(ids):
        return reply
    import uuid

    content = []
    for part in reply.content:
        if isinstance(part, ToolCallPart):
            if not part.id or part.id in seen:
                part = part.model_copy(update={"id": f"call_{uuid.uuid4().hex[:24]}"})
            seen.add(part.id)
        content.append(part)
    return reply.model_copy(update={"content": tuple(content)})
