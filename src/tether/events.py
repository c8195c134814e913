"""The event vocabulary: one tagged union for the stream a caller iterates and for the trace.

Every event carries ``run_id`` (law 8). ``to_trace`` gives the JSON line the trace stores; the
deltas are streamed but not traced, and ``done`` is traced as ``run_stopped``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Literal

from tether.status import RunResult
from tether.usage import Usage

__all__ = [
    "ApprovalRequired",
    "Compaction",
    "Decision",
    "Done",
    "Event",
    "Fallback",
    "Guardrail",
    "MemoryRejected",
    "MemoryWrite",
    "ReasoningDelta",
    "Retrieval",
    "Retry",
    "SideCall",
    "SpentUnknown",
    "Subagent",
    "TextDelta",
    "ToolProgress",
    "ToolResultEvent",
    "ToolStart",
    "Turn",
]


@dataclass(slots=True, frozen=True)
class TextDelta:
    run_id: str
    text: str
    type: Literal["text_delta"] = "text_delta"


@dataclass(slots=True, frozen=True)
class ReasoningDelta:
    run_id: str
    text: str
    type: Literal["reasoning_delta"] = "reasoning_delta"


@dataclass(slots=True, frozen=True)
class Turn:
    """One model call finished: its tokens, the run's cost so far, why the model stopped."""

    run_id: str
    turn: int
    model: str
    usage: Usage
    cost_usd: float | None  # cumulative for the run; None once a model without a known price answered
    finish_reason: str | None
    max_tokens: int | None = None  # what the call was allowed, after budget capping
    # Written again by a resumed run: the process that recorded the reply was killed before its
    # trace line was written (or just after: a trace that has the line keeps one).
    restored: bool = False
    type: Literal["turn"] = "turn"


@dataclass(slots=True, frozen=True)
class ToolStart:
    run_id: str
    call_id: str
    tool_name: str
    args: str
    type: Literal["tool_start"] = "tool_start"


@dataclass(slots=True, frozen=True)
class ToolProgress:
    run_id: str
    call_id: str
    tool_name: str
    label: str
    type: Literal["tool_progress"] = "tool_progress"


@dataclass(slots=True, frozen=True)
class ToolResultEvent:
    run_id: str
    call_id: str
    tool_name: str
    ok: bool
    ms: float
    status: str = "ok"  # ok | error | cached | rejected | interrupted | cancelled (no result: still pending)
    widget: dict[str, Any] | None = None  # a form or buttons the tool offers a person (ToolResult.widget)
    type: Literal["tool_result"] = "tool_result"


@dataclass(slots=True, frozen=True)
class ApprovalRequired:
    run_id: str
    call_id: str
    tool_name: str
    args: str
    reason: str = "approval"  # or "outcome_unknown"
    type: Literal["approval_required"] = "approval_required"


@dataclass(slots=True, frozen=True)
class Decision:
    """A person's decision about a call the run stopped for, as the resumed run acts on it."""

    run_id: str
    call_id: str
    tool_name: str
    decision: str  # approved | rejected
    reason: str = ""
    type: Literal["decision"] = "decision"


@dataclass(slots=True, frozen=True)
class Compaction:
    """The transcript was compacted (``method``: ``summary``, or ``trim`` and why). ``tokens_before``
    and ``tokens_after`` are one measure, comparable: tether's count of the whole next prompt (the
    system prompt, the tool definitions and the transcript), before and after; never the provider's
    count of an earlier prompt, which may use another tokenizer or leave cached tokens out."""

    run_id: str
    tokens_before: int
    tokens_after: int
    method: str = "summary"  # summary | trim | message_count
    type: Literal["compaction"] = "compaction"


@dataclass(slots=True, frozen=True)
class Retry:
    run_id: str
    attempt: int
    reason: str
    wait_s: float
    type: Literal["retry"] = "retry"


@dataclass(slots=True, frozen=True)
class Fallback:
    run_id: str
    from_model: str
    to_model: str
    reason: str
    type: Literal["fallback"] = "fallback"


@dataclass(slots=True, frozen=True)
class SideCall:
    """A model call besides the run's turns (a compaction's summary, a guardrail's verdict), charged
    to the run: the model, its tokens and its own cost (None: the model has no known price). Traced
    only (as :class:`TraceOnly`), so that every call the run paid for has a line of its own."""

    run_id: str
    model: str
    prompt_tokens: int
    completion_tokens: int
    cost_usd: float | None
    usage_estimated: bool = False
    duration_s: float = 0.0  # from the request sent to its reply's end (or its cut)
    type: Literal["side_call"] = "side_call"


@dataclass(slots=True, frozen=True)
class SpentUnknown:
    """A model request was in flight when the process died: the provider billed it, its reply was
    lost. Its worst case is counted against the budget as ``cost_unknown_usd``."""

    run_id: str
    model: str
    prompt_tokens: int  # estimated
    max_tokens: int
    max_cost_usd: float | None  # None when the model's price is unknown
    type: Literal["spent_unknown"] = "spent_unknown"


@dataclass(slots=True, frozen=True)
class Guardrail:
    """A guardrail's verdict (tether.guardrails): what it decided (allow, redirect, ask, block),
    why, its score (0.0 unsafe … 1.0 safe), at which stage, and which guardrail."""

    run_id: str
    decision: str
    rationale: str
    score: float | None = None
    stage: str = ""  # input | output | tool_args | tool_result
    category: str = ""
    name: str = ""
    type: Literal["guardrail"] = "guardrail"


@dataclass(slots=True, frozen=True)
class Subagent:
    """A sub-agent (``agent.as_tool``) started or stopped inside call ``call_id`` of run
    ``run_id``; its own events carry ``child_run_id``."""

    run_id: str
    call_id: str
    name: str
    child_run_id: str
    status: str  # started | completed | failed | max_turns_exceeded | budget_exceeded | interrupted
    cost_usd: float | None = None
    reason: str = ""
    type: Literal["subagent"] = "subagent"


@dataclass(slots=True, frozen=True)
class MemoryWrite:
    """Cross-session memory changed (tether.memory): which store, how, and its usage after."""

    run_id: str
    store: str  # "profile" | "notes"
    action: str  # "add" | "replace" | "remove"
    text: str  # the entry written (or removed)
    chars: int
    limit: int
    type: Literal["memory_write"] = "memory_write"


@dataclass(slots=True, frozen=True)
class MemoryRejected:
    """A memory write was refused: ``rule`` names the check (``scan:<rule>``, ``limit``,
    ``ambiguous``, ``not_found``, ``empty``), ``reason`` is what the model was told."""

    run_id: str
    store: str
    action: str
    rule: str
    reason: str
    type: Literal["memory_rejected"] = "memory_rejected"


@dataclass(slots=True, frozen=True)
class Retrieval:
    """What a knowledge-base tool call retrieved, for the trace (emitted as :class:`TraceOnly`):
    each hit's ``chunk_id``, ``document``, ``start_line``, ``end_line`` and ``score``, never its text."""

    run_id: str
    call_id: str
    tool_name: str
    mode: str
    hits: tuple[dict[str, Any], ...]
    type: Literal["retrieval"] = "retrieval"


@dataclass(slots=True, frozen=True)
class Done:
    """The last event of every stream; ``result`` says which of the five exits the run took."""

    run_id: str
    result: RunResult
    type: Literal["done"] = "done"


@dataclass(slots=True, frozen=True)
class TraceOnly:
    """Not an event of the stream: ``event`` goes to the trace, in its place among the others,
    and is not yielded (a sub-agent's last line, which must not end its parent's stream)."""

    event: Any
    run_id: str = ""
    type: Literal["trace_only"] = "trace_only"


Event = (
    TextDelta
    | ReasoningDelta
    | Turn
    | ToolStart
    | ToolProgress
    | ToolResultEvent
    | ApprovalRequired
    | Decision
    | Compaction
    | Retry
    | Fallback
    | SpentUnknown
    | SideCall
    | Guardrail
    | Subagent
    | MemoryWrite
    | MemoryRejected
    | Retrieval
    | Done
)

_NOT_TRACED = frozenset({"text_delta", "reasoning_delta"})


def to_trace(event: Event) -> dict[str, Any] | None:
    """The trace line for ``event`` (``run_id`` first; every key in snake_case, as the events'
    fields are named), or None for deltas. Traces written before tether 0.x used camelCase keys
    (``runId``, ``costUsd``): :func:`tether.tracing.read_trace` reads both."""
    if event.type in _NOT_TRACED:
        return None
    line: dict[str, Any] = {"run_id": event.run_id}
    if isinstance(event, Done):
        r = event.result
        line.update(
            type="run_stopped",
            status=r.status,
            reason=r.reason,
            interruption=r.interruption.model_dump() if r.interruption else None,
            turns=r.turns,
            prompt_tokens=r.usage.prompt_tokens,
            completion_tokens=r.usage.completion_tokens,
            cost_usd=None if r.cost_usd is None else round(r.cost_usd, 8),
            cost_unknown_usd=round(r.cost_unknown_usd, 8),
            tool_stats=r.tool_stats,
        )
        if r.agent:  # which agent ran it (Agent.name); unnamed agents' lines are as they were
            line["agent"] = r.agent
        return line
    if isinstance(event, Turn):
        line.update(
            type="turn",
            turn=event.turn,
            model=event.model,
            prompt_tokens=event.usage.prompt_tokens,
            completion_tokens=event.usage.completion_tokens,
            total_tokens=event.usage.total_tokens,
            cached_tokens=event.usage.cached_tokens,
            usage_estimated=event.usage.estimated,
            cost_usd=None if event.cost_usd is None else round(event.cost_usd, 8),
            finish=event.finish_reason,
            max_tokens=event.max_tokens,
        )
        if event.restored:
            line["restored"] = True
        return line
    for name in event.__slots__:
        if name == "widget" and event.widget is None:  # type: ignore[union-attr]
            continue
        if name != "run_id":
            line[name] = getattr(event, name)
    return line


_CAMEL = re.compile(r"(?<=[a-z0-9])([A-Z])")


def snake_keys(line: dict[str, Any]) -> dict[str, Any]:
    """A trace line with its top-level keys in snake_case: older traces wrote ``runId``,
    ``costUsd``, ``toolName``; readers see one casing whichever wrote the file."""
    if not any(_CAMEL.search(key) for key in line):
        return line
    return {_CAMEL.sub(r"_\1", key).lower(): value for key, value in line.items()}
