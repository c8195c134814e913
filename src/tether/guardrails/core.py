"""Guardrails: a classifier gives a verdict with its reasons, a deployment's thresholds decide.

A verdict is ``rationale`` first (the classifier reasons before it scores), then ``score`` (0.0
unsafe … 1.0 safe), then a ``category``. :class:`Thresholds` turn a score into an action — allow,
redirect (a canned reply, or one the model writes), ask a person, block — so a strict customer-facing
agent and a permissive internal one share one classifier. :class:`Guardrail` is middleware that
runs a classifier at the stages it is given:

* ``input`` — the person's message, before the first model call of the run;
* ``output`` — the answer, before any of it reaches the caller (streamed text is held back, or
  released in checked chunks);
* ``tool_args`` / ``tool_result`` — a tool's arguments before it runs, its result before the
  model reads it.

Every verdict is a ``guardrail`` event in the stream and the trace; one that changes the course of
the run is written into the transcript in words (law 4).
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

from tether.events import Guardrail as GuardrailEvent
from tether.harness.agent import Stop
from tether.harness.context import RunContext
from tether.harness.limits import Halt
from tether.harness.middleware import Middleware, ModelCall, ToolCall
from tether.messages import AssistantMessage, TextPart, ToolCallPart, UserMessage, text_of
from tether.providers.base import ModelRequest, ModelResponse
from tether.status import GuardrailInterruption
from tether.tools.base import ToolResult

__all__ = ["Action", "Classifier", "Guardrail", "Stage", "Thresholds", "Verdict"]

Stage = Literal["input", "output", "tool_args", "tool_result"]
Action = Literal["allow", "redirect", "ask", "block"]


@dataclass(frozen=True)
class Verdict:
    rationale: str  # first: why (a classifier that reasons before it scores scores better)
    score: float  # 0.0 unsafe … 1.0 safe
    category: str = ""


class Classifier(Protocol):
    """Anything that judges a text: rule-based, model-based, or a deployment's own."""

    async def classify(self, text: str, *, stage: Stage, ctx: RunContext) -> Verdict: ...


@dataclass(frozen=True)
class Thresholds:
    """Scores below ``block`` are blocked; below ``ask``, a person decides; below ``redirect``,
    the reply is redirected; anything else is allowed. Unset thresholds are skipped."""

    block: float | None = 0.3
    ask: float | None = None
    redirect: float | None = None

    def action(self, score: float) -> Action:
        for name in ("block", "ask", "redirect"):
            limit = getattr(self, name)
            if limit is not None and score < limit:
                return name
        return "allow"


def _key(stage: str, text: str) -> str:
    return f"{stage}:{hashlib.sha256(text.encode('utf-8', 'surrogatepass')).hexdigest()[:16]}"


@dataclass
class Guardrail(Middleware):
    """``Agent(middleware=[Guardrail(classifier, stages=("input", "output"), thresholds=...)])``.

    ``redirect_reply``: the canned answer for a redirected input; None asks the model to decline
    briefly and say what it can help with instead. ``release``: ``"hold"`` keeps the whole streamed
    answer back until it passes; ``"chunks"`` releases it in checked pieces of about
    ``chunk_chars``."""

    classifier: Classifier
    stages: Sequence[Stage] = ("input",)
    thresholds: Thresholds = field(default_factory=Thresholds)
    name: str = "guardrail"
    redirect_reply: str | None = None
    release: Literal["hold", "chunks"] = "hold"
    chunk_chars: int = 200

    # -- the verdict and its event -----------------------------------------------------------

    async def judge(self, ctx: RunContext, stage: Stage, text: str) -> tuple[Action, Verdict]:
        key = _key(stage, text)
        if key in ctx.state.guardrail_approved:
            verdict = Verdict(_allowed(ctx.state, key), 1.0, "approved")
            action: Action = "allow"
        else:
            verdict = await self.classifier.classify(text, stage=stage, ctx=ctx)
            score = min(1.0, max(0.0, float(verdict.score)))
            verdict = Verdict(verdict.rationale, score, verdict.category)
            action = self.thresholds.action(score)
        ctx.emit(
            GuardrailEvent(
                ctx.state.run_id,
                action,
                verdict.rationale,
                verdict.score,
                stage=stage,
                category=verdict.category,
                name=self.name,
            )
        )
        return action, verdict

    def _words(self, stage: str, action: str, verdict: Verdict) -> str:
        what = {"block": "blocked this", "redirect": "redirected this", "ask": "held this for a person to decide"}.get(
            action, action
        )
        category = f" ({verdict.category})" if verdict.category else ""
        return f"the {stage.replace('_', ' ')} guardrail {self.name!r} {what}{category}: {verdict.rationale}"

    # -- input ------------------------------------------------------------------------------

    async def before_agent(self, ctx: RunContext) -> Stop | None:
        if "output" in self.stages:
            _Gate.join(self, ctx)
        pending = ctx.state.guardrail_pending
        if pending is not None and pending.stage in self.stages:
            stop = self._decided(ctx, pending)
            if stop is not None or ctx.halt is not None:
                return stop
        if "input" not in self.stages:
            return None
        messages = ctx.state.messages
        if not messages or not isinstance(messages[-1], UserMessage) or messages[-1].summary_turns is not None:
            return None  # a resumed run: its input was judged when it arrived
        text = _recent_input(messages, ctx.state.guardrail_approved)
        action, verdict = await self.judge(ctx, "input", text)
        if action == "allow":
            return None
        words = self._words("input", action, verdict)
        if action == "ask":
            question = GuardrailInterruption(
                stage="input",
                key=_key("input", text),
                rationale=verdict.rationale,
                score=verdict.score,
                category=verdict.category,
            )
            ctx.state.guardrail_pending = question
            ctx.stop(Halt("interrupted", f"{words}. Approve to let the message through, or reject", question))
            return None
        if action == "redirect" and self.redirect_reply is None:
            # The model writes the redirect: it reads why, and is offered no tools for it.
            messages.append(
                UserMessage.text(
                    f"{_REDIRECT_NOTE}{words}. Reply briefly that you cannot help with "
                    "that here, and say what you can help with.]"
                )
            )
            ctx.persist()
            return None
        reply = self.redirect_reply if action == "redirect" else f"[Not answered: {words}.]"
        messages.append(AssistantMessage(content=(TextPart(text=reply or ""),), model=f"guardrail/{self.name}"))
        ctx.persist()
        if action == "redirect":
            return Stop("completed", f"redirected: {words}")
        return Stop("failed", f"blocked: {words}")

    def _decided(self, ctx: RunContext, pending: GuardrailInterruption) -> Stop | None:
        """A resumed run after a question: the person's decision, or the same question again."""
        state = ctx.state
        if pending.key in state.guardrail_rejected:
            state.guardrail_pending = None
            reason = state.guardrail_rejected[pending.key]
            ctx.emit(
                GuardrailEvent(
                    state.run_id,
                    "block",
                    f"a person declined it{': ' + reason if reason else ''}",
                    pending.score,
                    stage=pending.stage,
                    category="rejected",
                    name=self.name,
                )
            )
            return Stop(
                "failed",
                f"rejected: a person declined it after the {pending.stage} guardrail "
                f"{self.name!r}'s verdict ({pending.rationale})",
            )
        if pending.key in state.guardrail_approved:
            state.guardrail_pending = None
            if pending.stage == "output":
                ctx.emit(
                    GuardrailEvent(
                        state.run_id,
                        "allow",
                        _allowed(state, pending.key),
                        1.0,
                        stage="output",
                        category="approved",
                        name=self.name,
                    )
                )
            return None
        ctx.stop(
            Halt(
                "interrupted",
                f"the {pending.stage} guardrail {self.name!r} is still waiting for a person "
                f"({pending.rationale}). Approve, or reject",
                pending,
            )
        )
        return None

    async def before_model(self, ctx: RunContext, request: ModelRequest) -> ModelRequest | Stop:
        last = ctx.state.messages[-1] if ctx.state.messages else None
        if isinstance(last, UserMessage) and text_of([last]).startswith(_REDIRECT_NOTE):
            from dataclasses import replace

            return replace(request, tools=())  # a redirect is words, not actions
        return request

    # -- output -----------------------------------------------------------------------------

    async def wrap_model_call(
        self, ctx: RunContext, request: ModelRequest, call_next: ModelCall
    ) -> ModelResponse | Stop:
        response = await call_next(request)
        if "output" not in self.stages or isinstance(response, Stop):
            return response
        gate = ctx.text_gate if isinstance(ctx.text_gate, _Gate) and self in ctx.text_gate.owners else None
        if gate is not None and gate.blocked is not None and gate.blocked[0] is not self:
            return response  # another output guardrail stopped this reply: it answers for it
        mine = gate.blocked[1:] if gate is not None and gate.blocked is not None else None
        if response.message.tool_calls:
            return await self._beside_calls(ctx, response, gate, mine)
        if mine is not None:
            action, verdict = mine
        else:
            text = gate.unchecked(response.message.text) if gate is not None else response.message.text
            if not text.strip():
                return response
            action, verdict = await self.judge(ctx, "output", text)
        if action == "allow":
            return response
        if gate is not None:
            gate.blocked = (self, action, verdict)  # the guardrails around this one leave it be
        words = self._words("output", action, verdict)
        if action == "ask":
            # Recorded, not streamed: approving delivers it (the resumed run ends with it as its
            # output); rejecting replaces it, in words (tether.harness.state.reject).
            key = _key("output", response.message.text)
            question = GuardrailInterruption(
                stage="output", key=key, rationale=verdict.rationale, score=verdict.score, category=verdict.category
            )
            ctx.state.guardrail_pending = question
            ctx.state.guardrail_held = response.message
            ctx.stop(Halt("interrupted", f"{words}. Approve to deliver the answer, or reject", question))
            placeholder = f"[Answer held for a person to decide: {words}.]"
            return ModelResponse(message=response.message.model_copy(update={"content": (TextPart(text=placeholder),)}))
        if action == "redirect" and self.redirect_reply is not None:
            ctx.stop(Halt("completed", f"redirected: {words}"))
            withheld = self.redirect_reply
        else:
            ctx.stop(Halt("failed", f"blocked: {words}"))
            withheld = f"[Answer withheld: {words}.]"
        # The reply is paid for and recorded, in words, instead of what the caller never saw.
        message = response.message.model_copy(update={"content": (TextPart(text=withheld),)})
        return ModelResponse(message=message)

    async def _beside_calls(
        self, ctx: RunContext, response: ModelResponse, gate: _Gate | None, mine: tuple[Action, Verdict] | None
    ) -> ModelResponse:
        """Text beside tool calls is checked too; if it fails, the calls go on without it."""
        said = gate.unchecked(response.message.text) if gate is not None else response.message.text
        if not said.strip() and mine is None:
            return response
        act, why = mine if mine is not None else await self.judge(ctx, "output", said)
        if act == "allow":
            return response
        if gate is not None:
            gate.blocked = (self, act, why)  # what it held is never released
        calls = tuple(p for p in response.message.content if not isinstance(p, TextPart))
        return ModelResponse(message=response.message.model_copy(update={"content": calls}))

    # -- tools ------------------------------------------------------------------------------

    async def wrap_tool_call(
        self, ctx: RunContext, call: ToolCallPart, args: dict[str, Any], call_next: ToolCall
    ) -> ToolResult | str | Stop:
        if "tool_args" in self.stages:
            text = f"{call.name} {json.dumps(args, ensure_ascii=False, sort_keys=True)}"
            action, verdict = await self.judge(ctx, "tool_args", text)
            if action != "allow":
                return ToolResult(
                    f"Not run: {self._words('tool_args', action, verdict)}. Do not try the same "
                    "call again; tell the user what you could not do.",
                    is_error=True,
                )
        result = await call_next()
        if "tool_result" not in self.stages or isinstance(result, Stop):
            return result
        text = result if isinstance(result, str) else "".join(p.text for p in result.parts() if isinstance(p, TextPart))
        action, verdict = await self.judge(ctx, "tool_result", text)
        if action == "allow":
            return result
        return ToolResult(
            f"[The result of {call.name} was withheld: {self._words('tool_result', action, verdict)}.]", is_error=True
        )


INPUT_WINDOW = 3  # user turns judged together: a jailbreak split over messages is read whole


def _recent_input(messages: Sequence[Any], approved: Sequence[str] = ()) -> str:
    """The last user message, after the user messages just before it (up to INPUT_WINDOW in all),
    back to the first one a guardrail answered or a person approved (judged already)."""
    turns: list[str] = []
    for i in range(len(messages) - 1, -1, -1):
        message = messages[i]
        if isinstance(message, AssistantMessage) and (message.model or "").startswith("guardrail/"):
            break
        if not isinstance(message, UserMessage) or message.summary_turns is not None:
            continue
        text = text_of([message])
        if text.startswith(_REDIRECT_NOTE):
            break  # the turn before it was redirected: judged already
        if turns and approved and _key("input", _recent_input(messages[: i + 1])) in approved:
            break  # a person let the window ending here through
        turns.append(text)
        if len(turns) == INPUT_WINDOW:
            break
    return "\n".join(reversed(turns))


def _allowed(state: Any, key: str) -> str:
    reason = state.guardrail_approved_reasons.get(key)
    return "a person allowed this after an earlier verdict" + (f": {reason}" if reason else "")


_BOUNDARY = re.compile(r"[.!?;:\n](?:\s+|$)")
_REDIRECT_NOTE = "[Redirect: "


class _Gate:
    """Streamed text for a guarded answer: held whole (``hold``) or released in checked chunks.

    One gate per run, shared by every output guardrail of the agent: a piece reaches the caller
    only once each of them has passed it, and if any of them holds the whole answer, so does the
    gate. (A gate per guardrail would let the last one release what an earlier one never saw.)"""

    def __init__(self, ctx: RunContext) -> None:
        self.owners: list[Guardrail] = []
        self.ctx = ctx
        self.reset()

    @classmethod
    def join(cls, guardrail: Guardrail, ctx: RunContext) -> None:
        gate = ctx.text_gate if isinstance(ctx.text_gate, cls) else None
        if gate is None:
            gate = ctx.text_gate = cls(ctx)
        if guardrail not in gate.owners:
            gate.owners.append(guardrail)

    def reset(self) -> None:
        self.held: list[str] = []
        self.released = ""
        self.blocked: tuple[Guardrail, Action, Verdict] | None = None

    async def feed(self, text: str) -> list[str]:
        self.held.append(text)
        if self.blocked is not None or any(owner.release != "chunks" for owner in self.owners):
            return []
        pending = "".join(self.held)
        size = max(owner.chunk_chars for owner in self.owners)
        cut = max((m.end() for m in _BOUNDARY.finditer(pending) if m.end() >= size), default=0)
        if not cut:
            return []
        piece, rest = pending[:cut], pending[cut:]
        for owner in self.owners:
            action, verdict = await owner.judge(self.ctx, "output", piece)
            if action != "allow":
                self.blocked = (owner, action, verdict)
                return []
        self.held = [rest] if rest else []
        self.released += piece
        return [piece]

    def unchecked(self, full: str) -> str:
        """What the final check must still judge: all of it when held, the rest when chunked."""
        return full[len(self.released) :] if full.startswith(self.released) else full

    async def finish(self) -> list[str]:
        if self.blocked is not None:
            return []
        rest = "".join(self.held)
        self.held = []
        self.released += rest
        return [rest] if rest else []
