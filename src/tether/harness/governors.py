"""Governors: a run that goes nowhere ends with a useful report, not at its turn limit.

:class:`~tether.harness.loop_guard.LoopGuard` catches the same call again and again. The
governors catch work that goes nowhere in other ways, each counted in *tool rounds* (one model
reply that called tools, with its results) since the person's latest message, so a new message (a
steer in chat or on the page) starts every window again:

* **a cap on tool rounds** (``max_tool_rounds``): a nudge at ``nudge_share`` of it;
* **no progress** (``no_progress_rounds``): rounds in a row without successful work. An error, a
  refusal, a skipped or cached call is not work, and neither is a write with no effect: an empty
  result, or the same write (same tool, same arguments) that already succeeded in the window;
* **discovery stalls** (``discovery_rounds``): rounds in a row that only read or search. A round
  where any tool that is not read-only succeeds is new evidence and resets the count.

Each nudges first, at ``nudge_share`` of its limit, in a control message the model reads with that
request only. At its limit the next model call is offered no tools and asked for a status report:
what was done, what was found, what is left. That report is the answer, and the run's reason names
the governor. Control messages are marked as not the user's and never enter the transcript, the
session or the trace: they are built again for each request from the transcript itself, so a
resumed run sees the same ones.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

from tether.errors import ConfigError
from tether.harness.agent import Stop
from tether.harness.context import RunContext
from tether.harness.middleware import Middleware
from tether.messages import (
    AssistantMessage,
    Message,
    TextPart,
    ToolCallPart,
    ToolMessage,
    UserMessage,
    canonical_arguments,
)
from tether.providers.base import ModelRequest

__all__ = ["CONTROL", "Governor", "Round", "tool_rounds"]

# How every control message begins: the model is told it is tether speaking, not the person.
CONTROL = "[tether control message, not from the user]"
_KEY = "governor"  # state.ext: the verdict that ended tool use, kept for a resume and the reason


@dataclass(frozen=True, slots=True)
class Round:
    """One model reply that called tools, and the results it got."""

    calls: tuple[ToolCallPart, ...]
    results: dict[str, ToolMessage]  # by call id

    def done(self) -> list[tuple[ToolCallPart, ToolMessage]]:
        return [(c, self.results[c.id]) for c in self.calls if c.id in self.results]


def tool_rounds(messages: Sequence[Message]) -> list[Round]:
    """The tool rounds since the person's latest message (a control message is never in it)."""
    start = max((i for i, m in enumerate(messages) if isinstance(m, UserMessage)), default=-1) + 1
    rounds: list[Round] = []
    for i in range(start, len(messages)):
        m = messages[i]
        if isinstance(m, AssistantMessage) and m.tool_calls:
            ids = {c.id for c in m.tool_calls}
            results = {r.call_id: r for r in messages[i + 1 :] if isinstance(r, ToolMessage) and r.call_id in ids}
            rounds.append(Round(tuple(m.tool_calls), results))
    return rounds


@dataclass
class Governor(Middleware):
    """The three governors in one middleware; ``None`` turns one off. Defaults suit an interactive
    agent; a long batch job may want a larger ``max_tool_rounds``."""

    max_tool_rounds: int | None = 40
    no_progress_rounds: int | None = 6
    discovery_rounds: int | None = 20
    nudge_share: float = 0.8

    def __post_init__(self) -> None:
        for name in ("max_tool_rounds", "no_progress_rounds", "discovery_rounds"):
            value = getattr(self, name)
            if value is not None and value < 2:
                raise ConfigError(f"Governor({name}={value}): use 2 or more, or None to turn it off")
        if not 0 < self.nudge_share < 1:
            raise ConfigError(f"Governor(nudge_share={self.nudge_share}): a share between 0 and 1, like 0.8")

    async def before_model(self, ctx: RunContext, request: ModelRequest) -> ModelRequest | Stop:
        rounds = tool_rounds(ctx.state.messages)
        verdict = ctx.state.ext.get(_KEY)
        if verdict is not None and verdict.get("rounds", -1) != len(rounds):
            del ctx.state.ext[_KEY]  # from an earlier request (or before a steer): not this one's
            verdict = None
        if verdict is None:
            verdict = self._limit(ctx, rounds)
        if verdict is not None:
            ctx.state.ext[_KEY] = verdict  # saved with the request's intent: a resume asks the same
            ctx.answer_only = True
            return _report(request, verdict["why"])
        nudges = self._nudges(ctx, rounds)
        return _with_control(request, " ".join(nudges)) if nudges else request

    async def after_agent(self, ctx: RunContext, status: str) -> Stop | None:
        verdict = ctx.state.ext.get(_KEY)
        if verdict is None or status != "completed" or ctx.halt is None:
            return None
        if verdict.get("rounds") != len(tool_rounds(ctx.state.messages)):
            return None  # an earlier request's verdict: this run ended on its own
        return Stop("completed", f"{verdict['why']}; the answer is the model's status report")

    def _counts(self, ctx: RunContext, rounds: list[Round]) -> dict[str, tuple[int, int | None]]:
        return {
            "tool rounds": (len(rounds), self.max_tool_rounds),
            "rounds without progress": (_streak(rounds, lambda r: not _progress(r, rounds)), self.no_progress_rounds),
            "rounds of only reading or searching": (
                _streak(rounds, lambda r: not _new_evidence(ctx, r)),
                self.discovery_rounds,
            ),
        }

    def _limit(self, ctx: RunContext, rounds: list[Round]) -> dict[str, Any] | None:
        for what, (count, limit) in self._counts(ctx, rounds).items():
            if limit is not None and count >= limit:
                return {"rounds": len(rounds), "why": f"{count} {what} (limit {limit})"}
        return None

    def _nudges(self, ctx: RunContext, rounds: list[Round]) -> list[str]:
        out = []
        for what, (count, limit) in self._counts(ctx, rounds).items():
            if limit is not None and count >= max(1, int(limit * self.nudge_share)):
                out.append(f"{count} {what} so far; at {limit} tools are withdrawn.")
        if out:
            out.append(
                "Stop repeating what has not worked: change approach, or answer the user now with "
                "what you have and what is left."
            )
        return out


def _streak(rounds: list[Round], idle: Any) -> int:
    n = 0
    for r in reversed(rounds):
        if not idle(r):
            break
        n += 1
    return n


def _progress(r: Round, rounds: list[Round]) -> bool:
    """Whether a round did successful work: a result that is ``ok``, not empty, and not the same
    write as one that already succeeded earlier in the window."""
    earlier = rounds[: rounds.index(r)]
    done_before = {_key(c) for e in earlier for c, res in e.done() if res.status == "ok"}
    return any(res.status == "ok" and res.text.strip() and _key(c) not in done_before for c, res in r.done())


def _key(call: ToolCallPart) -> tuple[str, str | None]:
    return call.name, canonical_arguments(call.arguments)


def _new_evidence(ctx: RunContext, r: Round) -> bool:
    for res in r.results.values():
        tool = ctx.tools.get(res.name)
        if res.status == "ok" and tool is not None and not getattr(tool, "read_only", False):
            return True
    return False


def _control(text: str) -> UserMessage:
    return UserMessage(content=(TextPart(text=f"{CONTROL} {text}"),))


def _with_control(request: ModelRequest, text: str) -> ModelRequest:
    return replace(request, messages=[*request.messages, _control(text)])


def _report(request: ModelRequest, why: str) -> ModelRequest:
    ask = (
        f"Tool use for this request has ended: {why}. No more tools can be called. Write your answer "
        "to the user now as a status report: what was done, what was found, and what is left to do."
    )
    return replace(_with_control(request, ask), tools=())
