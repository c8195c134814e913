"""The one interface the loop talks to. Provider quirks stay behind it.

Rules every wire keeps, written once here:

* a streamed reply is complete only when the provider said it finished (:func:`incomplete_stream`
  is what a stream that stopped before that raises);
* a reply cut by the token limit inside a tool call's arguments is never returned as a call
  (:func:`require_whole_arguments`);
* usage the server did not report is estimated from the request and the reply, and marked
  (:func:`complete_usage`).
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from tether.errors import IncompleteStreamError, ResponseError
from tether.messages import AssistantMessage, ImagePart, Message, ReasoningPart, TextPart, ToolCallPart
from tether.usage import Usage

__all__ = [
    "ANSWER_TOOL",
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
    "complete_usage",
    "estimate_usage",
    "incomplete_stream",
    "require_whole_arguments",
]


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


def incomplete_stream(provider: str, chars_shown: int, why: str) -> IncompleteStreamError:
    """The error for a stream that ended before its end marker (``why`` names what was missing)."""
    shown = f"after {chars_shown} characters" if chars_shown else "before anything was shown"
    return IncompleteStreamError(
        f"{provider}: the stream was cut before the provider finished ({shown}; {why})",
        provider=provider,
        chars_shown=chars_shown,
    )


def require_whole_arguments(provider: str, finish_reason: str | None, calls: Iterable[tuple[str, str]]) -> None:
    """Refuse a reply that hit the token limit inside a tool call's arguments.

    ``calls`` are (name, raw arguments). A call cut by ``max_tokens`` is complete in form but
    not in content: running it would act on arguments the model never finished (empty ones
    would even pass as ``{}``). The fix is a larger ``max_tokens``, which only the caller can
    choose, so this is a ``ResponseError`` that says so rather than a retry."""
    if finish_reason != "length":
        return
    for name, raw in calls:
        try:
            whole = isinstance(json.loads(raw), dict)
        except (ValueError, RecursionError):
            whole = False
        if not whole:
            raise ResponseError(
                f"{provider}: the reply reached max_tokens inside the arguments of a call to "
                f"{name}; it was not run. Allow more output tokens (max_tokens, or the budget).",
                provider=provider,
            )


# What a message, a tool definition or a call costs besides its text, in the model's own tokens.
# A chat template frames every message with a role marker and an end marker: Gemma's
# "<start_of_turn>user\n ... <end_of_turn>\n", ChatML's "<|im_start|>user\n ... <|im_end|>\n" and
# Llama 3's header and <|eot_id|> are 5 tokens each (the markers are single special tokens);
# OpenAI documents 3. A template whose markers the tokenizer splits as text costs more (ChatML on
# Gemma: 6 per marker). 8 was measured against llama.cpp's own counts (bench/real_server.py: 0.84
# and 1.08 of the served prompt); elsewhere it errs high, the safe side for a budget. A tool is
# rendered as its JSON (name, description, schema: counted as text) inside a wrapper of some 8-20
# tokens, depending on the template.
_PER_MESSAGE = 8
_PER_TOOL = 8
_PER_CALL = 0
_PER_IMAGE = 1500  # a large image on either API; tether does not know image sizes


def _message_tokens(m: Message, count: Callable[[str], int]) -> int:
    total = _PER_MESSAGE
    if isinstance(m, AssistantMessage):
        return total + _reply_tokens(m, count, reasoning=False)
    for p in m.content:
        total += _PER_IMAGE if isinstance(p, ImagePart) else count(p.text)
    return total


def _reply_tokens(m: AssistantMessage, count: Callable[[str], int], *, reasoning: bool = True) -> int:
    total = 0
    for p in m.content:
        if isinstance(p, TextPart) or (reasoning and isinstance(p, ReasoningPart)):
            total += count(p.text)
        elif isinstance(p, ToolCallPart):
            total += _PER_CALL + count(p.name) + count(p.arguments)
    return total


def estimate_usage(request: ModelRequest, reply: AssistantMessage, count: Callable[[str], int]) -> Usage:
    """Usage for a call the server did not report, counted from what the model reads and wrote.

    Counted: the system prompt, each message's text (a tool call's name and arguments, a tool
    result's text), each tool's name, description and JSON schema, and the reply (its text,
    reasoning and calls); plus ``_PER_MESSAGE`` per message (and one for the reply's own role
    marker), ``_PER_TOOL`` per tool, ``_PER_CALL`` per call and ``_PER_IMAGE`` per image. Not the
    request's JSON body: its field names and escaping are not tokens the model reads.

    Assumptions, so a reader knows where the estimate can be off:

    * ``count`` is the model's tokenizer when tether knows it, else an o200k-style estimate; a
      local model's own tokenizer (Gemma's SentencePiece, Llama's BPE) may differ by 10-20 %.
    * The server renders the tools into the prompt, as OpenAI does and as llama.cpp
      (``--jinja``), vLLM and Ollama do with templates that support tools. Templates add a fixed
      instruction block around the tools (tens to a few hundred tokens) that is not counted; a
      server whose template drops the tools counts fewer tokens than this estimate.
    * Markers per message are the chat template's, not the API's (see ``_PER_MESSAGE``).

    Used only where the server left its count out (see :func:`complete_usage`): whenever a
    response carries the server's own count, that count is used. Marked ``estimated``."""
    prompt = _PER_MESSAGE  # the reply's own role marker
    if request.system:
        prompt += _PER_MESSAGE + count(request.system)
    prompt += sum(_message_tokens(m, count) for m in request.messages)
    for t in request.tools:
        prompt += _PER_TOOL + count(t.name) + count(t.description) + count(json.dumps(t.input_schema))
    if request.output_schema is not None:  # sent as a response format or as one more tool
        prompt += _PER_TOOL + count(json.dumps(request.output_schema.schema))
    return Usage(prompt_tokens=prompt, completion_tokens=_reply_tokens(reply, count), estimated=True)


def complete_usage(reported: Usage | None, request: ModelRequest, reply: AssistantMessage, model: str) -> Usage:
    """``reported`` with what the server left out estimated: a missing usage, or a zero prompt or
    completion count (no real call has either), marked ``estimated``. ``model`` is
    ``provider/model``: it picks the counter (exact where tether knows the tokenizer)."""
    usage = reported or Usage()
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
