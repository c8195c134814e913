"""After-agent hooks: after the answer is delivered, decide whether a follow-up step runs.

:class:`FollowUp` looks at the last ``window`` messages that are not tool traffic (8, as in the
reference's lead capture), asks a classifier for the conversation's intent (the verdict's
``category`` is the intent, its ``score`` the confidence), and runs ``action`` when the intent is
one of ``intents`` with enough confidence. The decision is a ``guardrail`` event at stage
``after_agent``; what the action does is its own business (save a lead, open a ticket, start a
sub-agent), and its failure is logged, never turned into a failed answer.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field

from tether.errors import ConfigError, RunCancelled
from tether.events import Guardrail as GuardrailEvent
from tether.guardrails.core import _SCORE_SLACK, DEFAULT_TIMEOUT_S, Classifier, Verdict
from tether.harness.agent import Stop
from tether.harness.context import RunContext, told
from tether.harness.middleware import Middleware
from tether.messages import AssistantMessage, Message, ToolMessage, UserMessage, text_of

__all__ = ["FollowUp", "recent_talk"]

_log = logging.getLogger("tether")


def recent_talk(messages: Sequence[Message], window: int = 8) -> str:
    """The last ``window`` messages that are conversation, not tool calls or results, as text."""
    talk: list[str] = []
    for m in reversed(messages):
        if isinstance(m, ToolMessage) or (isinstance(m, AssistantMessage) and not m.text.strip()):
            continue
        role = "user" if isinstance(m, UserMessage) else "assistant"
        said = m.text if isinstance(m, AssistantMessage) else text_of([m])
        talk.append(f"{role}: {said.strip()}")
        if len(talk) == window:
            break
    return "\n".join(reversed(talk))


@dataclass
class FollowUp(Middleware):
    classifier: Classifier
    intents: frozenset[str]
    action: Callable[[RunContext, Verdict], Awaitable[None]]
    window: int = 8
    min_score: float = 0.5
    name: str = "follow_up"
    statuses: frozenset[str] = field(default_factory=lambda: frozenset({"completed"}))
    # As a Guardrail's: the answer is delivered, and a classifier that never answers must not hold
    # the run open (no `done`, run_sync never returning); no verdict in time is no follow-up.
    timeout_s: float | None = DEFAULT_TIMEOUT_S

    def __post_init__(self) -> None:
        if self.timeout_s is not None and not self.timeout_s > 0:  # NaN too
            raise ConfigError(f"FollowUp {self.name!r}: timeout_s must be a number of seconds above 0, or None")

    async def after_agent(self, ctx: RunContext, status: str) -> Stop | None:
        if status not in self.statuses:
            return None
        verdict = await self._verdict(ctx)
        runs = verdict.category in self.intents and verdict.score >= self.min_score
        ctx.emit(
            GuardrailEvent(
                ctx.state.run_id,
                "follow_up" if runs else "no_follow_up",
                verdict.rationale,
                verdict.score,
                stage="after_agent",
                category=verdict.category,
                name=self.name,
            )
        )
        if runs:
            try:
                await self.action(ctx, verdict)
            except Exception:  # the answer is delivered: a failed follow-up must not undo it
                _log.exception("run %s: the follow-up %s failed", ctx.state.run_id, self.name)
        return None

    async def _verdict(self, ctx: RunContext) -> Verdict:
        """The intent classifier's verdict. One that raises, answers no verdict (a score outside 0
        to 1, NaN: a 7 out of 10 is no confidence) or none in time is no follow-up, and says why,
        without the secrets this process holds (a service's "key sk-... refused")."""
        try:
            async with asyncio.timeout(self.timeout_s) as limit:
                talk = recent_talk(ctx.state.messages, self.window)
                given = await self.classifier.classify(talk, stage="input", ctx=ctx)
            score = float(given.score)
            if not -_SCORE_SLACK <= score <= 1.0 + _SCORE_SLACK:
                raise ValueError(f"its score {given.score!r} is not a number from 0 to 1")
            return Verdict(str(given.rationale), min(1.0, max(0.0, score)), str(given.category or ""))
        except RunCancelled:
            raise
        except TimeoutError as exc:
            if limit.expired():
                _log.warning(
                    "run %s: the follow-up %s gave no verdict within %g s", ctx.state.run_id, self.name, self.timeout_s
                )
                return Verdict(f"the intent classifier gave no verdict within {self.timeout_s:g} s", 0.0, "timeout")
            return self._failed(ctx, exc)
        except Exception as exc:  # as for the action: the answer is delivered, a failed intent check is no follow-up
            return self._failed(ctx, exc)

    def _failed(self, ctx: RunContext, exc: Exception) -> Verdict:
        said = told(exc)
        _log.warning("run %s: the follow-up %s could not judge the intent", ctx.state.run_id, self.name, exc_info=exc)
        return Verdict(f"the intent classifier failed ({type(exc).__name__}: {said})", 0.0, "error")
