"""Middleware: policies a deployment chooses, run at fixed points of the loop.

Hooks, and the order a stack runs them in (the order of ``Agent(middleware=[...])``):

============================  =====================================================================
``before_agent(ctx)``         once per ``run_stream`` call, before the loop; in list order
``before_model(ctx, req)``    before every model call; in list order; returns the request to send
``wrap_model_call(ctx, req,   around the provider call; the first middleware is the outermost
call_next)``
``before_tool_call(ctx,       each call after validation, before anyone is asked about it or it
call, args)``                 runs; in list order; a result answers the call in its place (it is
                              neither asked about nor run), a Stop ends the run there (the call
                              is not run, nor asked about), None lets it go on
``wrap_tool_call(ctx, call,   around each tool execution (after validation and approval); the first
args, call_next)``            is the outermost; returns the result the model will read
``filter_stream(ctx, text,    each piece of the reply streaming to the caller (``kind``: ``text`` or
kind)``                       ``reasoning``); in list order, each seeing what the one before let
                              through; returns what may reach the caller now (``""`` holds it back)
``flush_stream(ctx, kind)``   the reply is complete, every ``wrap_model_call`` returned it and the
                              run goes on; returns what the middleware still holds and releases
``after_agent(ctx, halt)``    once the loop has stopped, before ``done``; in reverse list order
============================  =====================================================================

Holding streamed text back (until a policy has judged it) is
``filter_stream`` returning less than it got, and ``flush_stream`` giving it back; what a retried
attempt held is forgotten by the middleware when its ``wrap_model_call`` starts again.

Any hook may end the run by returning :class:`~tether.harness.agent.Stop` (one of the five exits
with a reason); ``wrap_tool_call`` and ``before_tool_call`` end it after the call's result is
written (``Not run: <reason>``), so pairing holds.
``ctx`` is the run's :class:`~tether.harness.context.RunContext`: ``ctx.state`` is the run, and a
hook that rewrites ``ctx.state.messages`` calls ``ctx.persist(rewrite=True)``.

The loop's own rules (limits, approvals, dedupe) are not middleware: they always apply.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Literal

from tether.errors import ConfigError, ContextOverflowError, ProviderError
from tether.harness.agent import Stop
from tether.harness.context import RunContext
from tether.harness.state import conversation_turns, this_turn
from tether.messages import AssistantMessage, Message, TextPart, ToolCallPart, ToolMessage, UserMessage
from tether.providers.base import ModelRequest, ModelResponse
from tether.tools.base import ToolResult

__all__ = [
    "ContextOverflowCleanup",
    "Middleware",
    "RunToolCallLimit",
    "StreamKind",
    "StripToolHistory",
    "SummarizeByMessageCount",
    "ToolCallLimitPerTurn",
    "ToolOutputTrimmer",
]

StreamKind = Literal["text", "reasoning"]
ModelCall = Callable[[ModelRequest], Awaitable["ModelResponse | Stop"]]
ToolCall = Callable[[], Awaitable["ToolResult | str | Stop"]]


class Middleware:
    """Base class: every hook does nothing. Override the ones a policy needs."""

    async def before_agent(self, ctx: RunContext) -> Stop | None:
        return None

    async def before_model(self, ctx: RunContext, request: ModelRequest) -> ModelRequest | Stop:
        return request

    async def wrap_model_call(
        self, ctx: RunContext, request: ModelRequest, call_next: ModelCall
    ) -> ModelResponse | Stop:
        return await call_next(request)

    async def before_tool_call(
        self, ctx: RunContext, call: ToolCallPart, args: dict[str, Any]
    ) -> ToolResult | str | Stop | None:
        return None

    async def wrap_tool_call(
        self, ctx: RunContext, call: ToolCallPart, args: dict[str, Any], call_next: ToolCall
    ) -> ToolResult | str | Stop:
        return await call_next()

    async def filter_stream(self, ctx: RunContext, text: str, kind: StreamKind) -> str:
        return text

    async def flush_stream(self, ctx: RunContext, kind: StreamKind) -> str:
        return ""

    async def after_agent(self, ctx: RunContext, status: str) -> Stop | None:
        return None


def hook_result(mw: Any, hook: str, value: Any, expected: Any, what: str) -> Any:
    """``value`` when the hook returned what it must; otherwise a :class:`ConfigError` naming the
    middleware and the hook (one that forgot its ``return`` gave None), instead of an assertion
    deep in the loop, or streamed text silently dropped."""
    if isinstance(value, expected):
        return value
    raise ConfigError(f"middleware {type(mw).__name__}: {hook} returned {type(value).__name__}; it must return {what}")


_HELD = "the text that may reach the caller now, a str ('' holds it back)"


async def filter_stream(stack: Sequence[Middleware], ctx: RunContext, text: str, kind: StreamKind) -> str:
    """What of ``text`` every middleware lets reach the caller now."""
    for mw in stack:
        if not text:
            break
        text = hook_result(mw, "filter_stream", await mw.filter_stream(ctx, text, kind), str, _HELD)
    return text


async def flush_stream(stack: Sequence[Middleware], ctx: RunContext, kind: StreamKind) -> str:
    """What the middleware held back and now release: each release passes the ones after it."""
    carried = ""
    for mw in stack:
        if carried:
            carried = hook_result(mw, "filter_stream", await mw.filter_stream(ctx, carried, kind), str, _HELD)
        carried += hook_result(mw, "flush_stream", await mw.flush_stream(ctx, kind), str, "the text it releases, a str")
    return carried


async def before_tool_call(
    stack: Sequence[Middleware], ctx: RunContext, call: ToolCallPart, args: dict[str, Any]
) -> ToolResult | str | Stop | None:
    """The first answer a middleware gives ``call`` before it is asked about or run (None: none)."""
    for mw in stack:
        answer = await mw.before_tool_call(ctx, call, args)
        if answer is not None:
            shape = "a result (text, a ToolResult), a Stop, or None"
            return hook_result(mw, "before_tool_call", answer, _TOOL_RESULT, shape)  # type: ignore[no-any-return]
    return None


def chain_model(stack: Sequence[Middleware], ctx: RunContext, innermost: ModelCall) -> ModelCall:
    call = innermost
    for mw in reversed(stack):
        call = _bind_model(mw, ctx, call)
    return call


def _bind_model(mw: Middleware, ctx: RunContext, call_next: ModelCall) -> ModelCall:
    async def call(request: ModelRequest) -> ModelResponse | Stop:
        response = await mw.wrap_model_call(ctx, request, call_next)
        return hook_result(mw, "wrap_model_call", response, ModelResponse | Stop, "the response (or a Stop)")  # type: ignore[no-any-return]

    return call


def chain_tool(
    stack: Sequence[Middleware], ctx: RunContext, call: ToolCallPart, args: dict[str, Any], innermost: ToolCall
) -> ToolCall:
    run = innermost
    for mw in reversed(stack):
        run = _bind_tool(mw, ctx, call, args, run)
    return run


def _bind_tool(
    mw: Middleware, ctx: RunContext, call: ToolCallPart, args: dict[str, Any], call_next: ToolCall
) -> ToolCall:
    async def run() -> ToolResult | str | Stop:
        inner: list[Any] = []

        async def next_() -> ToolResult | str | Stop:
            inner.append(await call_next())
            return inner[-1]  # type: ignore[no-any-return]

        result = await mw.wrap_tool_call(ctx, call, args, next_)
        if inner and not isinstance(inner[-1], _TOOL_RESULT):
            return result  # the tool's own wrong answer: the loop says so, naming the tool
        return hook_result(mw, "wrap_tool_call", result, _TOOL_RESULT, "the result (text, a ToolResult, or a Stop)")  # type: ignore[no-any-return]

    return run


_TOOL_RESULT = (ToolResult, str, Stop)


def calls_this_turn(messages: Sequence[Message]) -> list[ToolCallPart]:
    """Tool calls since the person's latest message (a compaction summary is not one)."""
    return [c for m in this_turn(messages) if isinstance(m, AssistantMessage) for c in m.tool_calls]


def _text(result: ToolResult | str) -> str:
    if isinstance(result, str):
        return result
    return "".join(p.text for p in result.parts() if isinstance(p, TextPart))


@dataclass
class ToolCallLimitPerTurn(Middleware):
    """Each tool may be called ``limit`` times per turn; then it disappears from what the model
    sees (and a call to it anyway is answered, in words, without running it). ``always_on`` tools
    are never removed."""

    limit: int = 3
    always_on: frozenset[str] = field(default_factory=frozenset)

    def _counts(self, ctx: RunContext) -> dict[str, int]:
        counts: dict[str, int] = {}
        for c in calls_this_turn(ctx.state.messages):
            counts[c.name] = counts.get(c.name, 0) + 1
        return counts

    async def before_model(self, ctx: RunContext, request: ModelRequest) -> ModelRequest | Stop:
        counts = self._counts(ctx)
        tools = tuple(t for t in request.tools if t.name in self.always_on or counts.get(t.name, 0) < self.limit)
        return replace(request, tools=tools) if len(tools) != len(request.tools) else request

    async def before_tool_call(self, ctx: RunContext, call: ToolCallPart, args: dict[str, Any]) -> ToolResult | None:
        # Before a person is asked about it: a call past the limit is never put to one.
        same = [c.id for c in calls_this_turn(ctx.state.messages) if c.name == call.name]
        position = same.index(call.id) if call.id in same else len(same)
        if call.name not in self.always_on and position >= self.limit:
            return ToolResult(
                f"Not run: {call.name} has been called {self.limit} times this turn, its limit. "
                "Answer with what you have, or use another tool.",
                is_error=True,
            )
        return None


@dataclass
class RunToolCallLimit(Middleware):
    """At most ``limit`` tool calls in a turn, all tools together. Past it, calls are answered
    without running and the model is offered no tools, so it must answer."""

    limit: int = 30

    async def before_model(self, ctx: RunContext, request: ModelRequest) -> ModelRequest | Stop:
        if len(calls_this_turn(ctx.state.messages)) >= self.limit and request.tools:
            return replace(request, tools=())
        return request

    async def before_tool_call(self, ctx: RunContext, call: ToolCallPart, args: dict[str, Any]) -> ToolResult | None:
        made = calls_this_turn(ctx.state.messages)
        position = next((i for i, c in enumerate(made) if c.id == call.id), len(made))
        if position >= self.limit:  # answered before a person is asked about it, as above
            return ToolResult(
                f"Not run: this turn reached its limit of {self.limit} tool calls. Answer with what you have.",
                is_error=True,
            )
        return None


@dataclass
class ToolOutputTrimmer(Middleware):
    """Cut any tool output longer than ``max_chars`` and say, in words, what was cut."""

    max_chars: int = 100_000

    async def wrap_tool_call(
        self, ctx: RunContext, call: ToolCallPart, args: dict[str, Any], call_next: ToolCall
    ) -> ToolResult | str | Stop:
        result = await call_next()
        if isinstance(result, Stop):
            return result
        text = _text(result)
        if len(text) <= self.max_chars:
            return result
        note = (
            f"\n[Output trimmed: showing the first {self.max_chars:,} of {len(text):,} characters. "
            f"To see the rest, call {call.name} again asking for less at a time "
            "(a line range, a narrower pattern, a smaller page).]"
        )
        if isinstance(result, str):
            return ToolResult(text[: self.max_chars] + note)
        return ToolResult(text[: self.max_chars] + note, is_error=result.is_error, widget=result.widget)


@dataclass
class SummarizeByMessageCount(Middleware):
    """When the transcript passes ``trigger`` messages, summarise the oldest ones and keep the
    newest ``keep`` verbatim. Tool calls and results are left out of the summary (too verbose to
    summarise usefully) and a call is never separated from its result."""

    trigger: int = 70
    keep: int = 50

    async def before_model(self, ctx: RunContext, request: ModelRequest) -> ModelRequest | Stop:
        from tether.harness.compaction import _latest_request, summarize, summary_message, turn_record

        messages = ctx.state.messages
        if len(messages) <= self.trigger:
            return request
        cut = len(messages) - self.keep
        while cut > 0 and isinstance(messages[cut], ToolMessage):
            cut -= 1  # never split a call from its result
        older = messages[:cut]
        talk = [
            m for m in older if not isinstance(m, ToolMessage) and not (isinstance(m, AssistantMessage) and not m.text)
        ]
        talk = [
            m.model_copy(update={"content": tuple(p for p in m.content if not isinstance(p, ToolCallPart))})
            if isinstance(m, AssistantMessage)
            else m
            for m in talk
        ]
        if cut <= 0:
            return request
        try:
            summary = await summarize(ctx, talk) if talk else "(no conversation, only tool calls)"
        except ProviderError:
            return request  # keep the history as it is; the next call tries again
        # As compaction's summary: the person's latest request, if it was among the older messages,
        # kept word for word (it was paraphrased, or lost), and the replies and results of that
        # request recorded, so the per-turn limits still count them (they started again at zero).
        latest, record = _latest_request(messages, cut), turn_record(messages, cut)
        messages[:cut] = [summary_message(summary, conversation_turns(older), latest, record)]
        ctx.persist(rewrite=True)
        return replace(request, messages=messages)


@dataclass
class ContextOverflowCleanup(Middleware):
    """On a context-overflow error, drop the tool history before the latest turn from the request
    and try once more."""

    async def wrap_model_call(
        self, ctx: RunContext, request: ModelRequest, call_next: ModelCall
    ) -> ModelResponse | Stop:
        try:
            return await call_next(request)
        except ContextOverflowError:
            stripped = strip_tool_history(request.messages, keep_last_turn=True)
            # Say so where the model reads: it must not think the earlier tool work never happened.
            note = UserMessage.text(
                "[Earlier tool calls and their results were removed from this request to "
                "fit the context window; call a tool again if you need its output.]"
            )
            return await call_next(replace(request, messages=[note, *stripped]))


@dataclass
class StripToolHistory(Middleware):
    """After the agent answers, remove tool calls and results from the stored transcript, for
    deployments that want short sessions."""

    async def after_agent(self, ctx: RunContext, status: str) -> Stop | None:
        if status == "completed":
            ctx.state.messages[:] = strip_tool_history(ctx.state.messages, keep_last_turn=False)
            ctx.persist(rewrite=True)
        return None


def strip_tool_history(messages: Sequence[Message], *, keep_last_turn: bool) -> list[Message]:
    """The transcript without tool calls and results (pairs go together, so pairing holds)."""
    last = max((i for i, m in enumerate(messages) if isinstance(m, AssistantMessage)), default=len(messages))
    out: list[Message] = []
    for i, m in enumerate(messages):
        if keep_last_turn and i >= last:
            out.append(m)
        elif isinstance(m, ToolMessage):
            continue
        elif isinstance(m, AssistantMessage) and m.tool_calls:
            kept = tuple(p for p in m.content if not isinstance(p, ToolCallPart))
            if any(isinstance(p, TextPart) and p.text for p in kept):
                out.append(m.model_copy(update={"content": kept}))
        else:
            out.append(m)
    return out
