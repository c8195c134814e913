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
session or the trace. Nothing about them is stored: counts, nudges and the verdict are worked out
again for each request from the transcript, so a resumed run is told the same things.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

from tether.errors import ConfigError
from tether.harness.agent import Stop
from tether.harness.context import RunContext
from tether.harness.length import continues, is_cut
from tether.harness.middleware import Middleware
from tether.harness.state import CONTROL, ENDED_BY_TOOL, WRITTEN_BY_POLICY, control_message, is_empty_answer, this_turn
from tether.messages import (
    AssistantMessage,
    Message,
    ToolCallPart,
    ToolMessage,
    canonical_arguments,
)
from tether.providers.base import STOPPED_BY_PROVIDER, ModelRequest
from tether.status import EMPTY_ANSWER

__all__ = ["CONTROL", "Governor", "Round", "tool_rounds"]


@dataclass(frozen=True, slots=True)
class Round:
    """One model reply that called tools, and the results it got."""

    calls: tuple[ToolCallPart, ...]
    results: dict[str, ToolMessage]  # by call id

    def done(self) -> list[tuple[ToolCallPart, ToolMessage]]:
        return [(c, self.results[c.id]) for c in self.calls if c.id in self.results]


def tool_rounds(messages: Sequence[Message]) -> list[Round]:
    """The tool rounds since the person's latest message (a control message is never in it)."""
    rounds: list[Round] = []
    turn = this_turn(messages)  # a compaction summary's share of it counts too
    for i, m in enumerate(turn):
        if isinstance(m, AssistantMessage) and m.tool_calls:
            ids = {c.id for c in m.tool_calls}
            results = {r.call_id: r for r in turn[i + 1 :] if isinstance(r, ToolMessage) and r.call_id in ids}
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
        last = ctx.state.messages[-1] if ctx.state.messages else None
        if isinstance(last, AssistantMessage) and continues(last):
            # The continuation of a cut reply (a status report, say), offered no tools already:
            # a second instruction after "go on from where it stopped" would start it over.
            return request
        counts = self._counts(ctx)
        why = _reached(counts)
        if why is not None:
            ctx.answer_only = True  # a reply that calls a tool anyway keeps its words only
            return _report(request, why)
        nudges = [
            f"{count} {what} so far; at {limit} tools are withdrawn."
            for what, (count, limit) in counts.items()
            if limit is not None and count >= max(1, int(limit * self.nudge_share))
        ]
        if not nudges:
            return request
        advice = (
            "Stop repeating what has not worked: change approach, or answer the user now with what "
            "you have and what is left."
        )
        return _with_control(request, " ".join([*nudges, advice]))

    async def after_agent(self, ctx: RunContext, status: str) -> Stop | None:
        """A run that answered after a limit was reached answered with the status report: its
        reason says which limit. Worked out from the transcript, as the report request was."""
        last = ctx.state.messages[-1] if ctx.state.messages else None
        if status != "completed" or not isinstance(last, AssistantMessage):
            return None
        if last.finish_reason in (ENDED_BY_TOOL, WRITTEN_BY_POLICY):
            return None  # a terminal tool's result or a policy's words, not a reply to the report request
        why = _reached(self._counts(ctx))
        return None if why is None else Stop("completed", _report_reason(why, last))

    def _counts(self, ctx: RunContext) -> dict[str, tuple[int, int | None]]:
        """Each governor's count and limit, from the tool rounds since the person's latest message."""
        rounds = tool_rounds(ctx.state.messages)
        progress: list[bool] = []
        evidence: list[bool] = []
        succeeded: set[tuple[str, str | None]] = set()  # (tool, arguments) that already succeeded
        for r in rounds:
            ok = [(c, res) for c, res in r.done() if res.status == "ok"]
            progress.append(any(res.text.strip() and _key(c) not in succeeded for c, res in ok))
            succeeded.update(_key(c) for c, _ in ok)
            evidence.append(any(not getattr(ctx.tools.get(c.name), "read_only", True) for c, _ in ok))
        return {
            "tool rounds": (len(rounds), self.max_tool_rounds),
            "rounds without progress": (_trailing_false(progress), self.no_progress_rounds),
            "rounds of only reading or searching": (_trailing_false(evidence), self.discovery_rounds),
        }


def _reached(counts: dict[str, tuple[int, int | None]]) -> str | None:
    """The first governor at its limit, in words; None while every one is below."""
    for what, (count, limit) in counts.items():
        if limit is not None and count >= limit:
            return f"{count} {what} (limit {limit})"
    return None


def _report_reason(why: str, report: AssistantMessage) -> str:
    """The run's reason: the limit, and what the report is. A report with no text, or one the
    provider stopped or the output limit cut, is said to be so (the loop's own reason said it)."""
    if is_empty_answer(report):
        return f"{why}; asked for a status report, {EMPTY_ANSWER}"
    flaw = STOPPED_BY_PROVIDER.get(report.finish_reason or "")
    if flaw is None and is_cut(report):
        flaw = "it reached max_tokens and was cut"
    return f"{why}; the answer is the model's status report" + (f" ({flaw})" if flaw else "")


def _trailing_false(flags: list[bool]) -> int:
    """How many rounds in a row, back from the latest, did not count."""
    n = 0
    for flag in reversed(flags):
        if flag:
            break
        n += 1
    return n


def _key(call: ToolCallPart) -> tuple[str, str | None]:
    return call.name, canonical_arguments(call.arguments)


def _with_control(request: ModelRequest, text: str) -> ModelRequest:
    return replace(request, messages=[*request.messages, control_message(text)])


def _report(request: ModelRequest, why: str) -> ModelRequest:
    ask = (
        f"Tool use for this request has ended: {why}. No more tools can be called. Write your answer "
        "to the user now as a status report: what was done, what was found, and what is left to do."
    )
    return replace(_with_control(request, ask), tools=())
