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

import asyncio
import hashlib
import json
import logging
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal, Protocol

from tether.errors import ConfigError, RunCancelled, StoreError
from tether.events import Guardrail as GuardrailEvent
from tether.events import TextDelta
from tether.harness.agent import Stop
from tether.harness.context import RunContext, told
from tether.harness.length import CUT, Continuation
from tether.harness.middleware import Middleware, ModelCall, StreamKind, ToolCall
from tether.harness.state import WRITTEN_BY_POLICY, RunState, pending_tool_calls
from tether.messages import AssistantMessage, TextPart, ToolCallPart, UserMessage, text_of
from tether.providers.base import ModelRequest, ModelResponse
from tether.status import GuardrailInterruption
from tether.tools.base import ToolResult

__all__ = ["Action", "Classifier", "Guardrail", "Stage", "Thresholds", "Verdict"]

_log = logging.getLogger("tether")

Stage = Literal["input", "output", "tool_args", "tool_result"]
Action = Literal["allow", "redirect", "ask", "block"]
_STAGES = ("input", "output", "tool_args", "tool_result")


@dataclass(frozen=True)
class Verdict:
    rationale: str  # first: why (a classifier that reasons before it scores scores better)
    score: float  # 0.0 unsafe … 1.0 safe
    category: str = ""


class Classifier(Protocol):
    """Anything that judges a text: rule-based, model-based, or a deployment's own.

    A ``tool_args`` verdict is saved with the run as soon as it is given, so that a crash or a
    resume never asks (and pays) for it twice; a classifier whose verdicts cost nothing can say so
    with a ``free = True`` attribute (``RuleClassifier`` does), and spare the run those saves."""

    async def classify(self, text: str, *, stage: Stage, ctx: RunContext) -> Verdict: ...


@dataclass(frozen=True)
class Thresholds:
    """Scores below ``block`` are blocked; below ``ask``, a person decides; below ``redirect``,
    the reply is redirected; anything else is allowed. Unset thresholds are skipped."""

    block: float | None = 0.3
    ask: float | None = None
    redirect: float | None = None

    def __post_init__(self) -> None:
        # As the config file's [guardrails] tables: a NaN made a guardrail that looked armed and
        # stopped nothing (no score is below it); a string failed every run mid-way.
        for name in ("block", "ask", "redirect"):
            limit = getattr(self, name)
            if limit is None:
                continue
            if isinstance(limit, bool) or not isinstance(limit, int | float) or not 0.0 <= limit <= 1.0:
                raise ConfigError(
                    f"Thresholds: the threshold {name} ({limit!r}) is not a number from 0 to 1 "
                    "(scores run from 0.0, unsafe, to 1.0, safe); give one, or None to skip it"
                )

    def action(self, score: float) -> Action:
        for name in ("block", "ask", "redirect"):
            limit = getattr(self, name)
            if limit is not None and score < limit:
                return name
        return "allow"


# How long one verdict may take by default: a model classifier's short JSON answer comes in
# seconds; a person is not kept waiting longer for an answer that is then checked.
DEFAULT_TIMEOUT_S = 30.0
_SCORE_SLACK = 1e-9  # a score computed in floating point may land a hair outside 0 to 1


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
    # How much already released text a chunk is judged with, so that a phrase cut by a chunk's
    # boundary is still seen whole; None: the longest text the classifier's rules can match
    # (``max_match_chars``), or 256 characters when that is unbounded or unknown.
    lookbehind_chars: int | None = None
    # Reasoning streamed beside a guarded answer (``output`` stage): ``withhold`` never streams
    # it to the caller (it stays in the transcript), ``judge`` holds and releases it as the
    # answer is, ``pass`` streams it unjudged (for local use, where the caller is the person).
    reasoning: Literal["withhold", "judge", "pass"] = "withhold"
    # How long one verdict may take (None: no limit). A classifier that hangs (its model or
    # moderation service never answers) held the run, and the person waiting, for ever. Past it,
    # the verdict is ``on_timeout``'s: "block" scores 0.0 (fails closed: an answer nobody checked
    # is not released), "allow" 1.0; the thresholds turn that score into an action, as any other.
    timeout_s: float | None = DEFAULT_TIMEOUT_S
    on_timeout: Literal["block", "allow"] = "block"

    def __post_init__(self) -> None:
        # A stage spelt wrong would leave the guardrail judging nothing, and say nothing.
        stages: list[Any] = [self.stages] if isinstance(self.stages, str) else list(self.stages)
        for what, given, known in (
            ("stages", stages, _STAGES),
            ("release", [self.release], ("hold", "chunks")),
            ("reasoning", [self.reasoning], ("withhold", "judge", "pass")),
            ("on_timeout", [self.on_timeout], ("block", "allow")),
        ):
            unknown = [g for g in given if g not in known]
            if unknown:
                raise ConfigError(
                    f"Guardrail {self.name!r}: {what} {unknown[0]!r} is not one of {', '.join(map(repr, known))}"
                )
        self.stages = tuple(stages)
        if self.timeout_s is not None and not self.timeout_s > 0:  # NaN too
            raise ConfigError(f"Guardrail {self.name!r}: timeout_s must be a number of seconds above 0, or None")

    def check_config(self, agent: Any) -> None:
        """Refuse, before the run starts, a canned ``redirect_reply`` that is not an answer of
        the agent's ``output_type``: the redirected run would complete with a string where the
        caller expects typed data."""
        if self.redirect_reply is None or self.thresholds.redirect is None or agent.output_type is None:
            return
        if not {"input", "output"} & set(self.stages):
            return
        from tether.harness.structured import InvalidOutput, output_spec

        spec = output_spec(agent)
        assert spec is not None
        try:
            spec.parse(self.redirect_reply)
        except InvalidOutput as exc:
            raise ConfigError(
                f"Guardrail {self.name!r}: the agent's answers are typed ({spec.request.name}), and its "
                f"redirect_reply is not one ({exc}). Write redirect_reply as JSON that matches "
                f"{spec.request.name}, or leave it None for the model to write the redirect"
            ) from None

    def lookbehind(self) -> int:
        if self.lookbehind_chars is not None:
            return self.lookbehind_chars
        longest = getattr(self.classifier, "max_match_chars", None)
        return longest if isinstance(longest, int) else DEFAULT_LOOKBEHIND

    # -- the verdict and its event -----------------------------------------------------------

    async def judge(self, ctx: RunContext, stage: Stage, text: str) -> tuple[Action, Verdict]:
        key = _key(stage, text)
        record = _Record(ctx.state)
        # A person's approval answers the question one guardrail asked: the others of the stack
        # still judge the text (a jailbreak beside a question about a discount is still blocked).
        by = record.approved_by.get(key)
        if key in record.approved and (by is None or self._who(ctx) in by):
            verdict = Verdict(_allowed(ctx.state, key), 1.0, "approved")
            action: Action = "allow"
        else:
            verdict = await self._classify(ctx, stage, text)
            action = self.thresholds.action(verdict.score)
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

    async def _classify(self, ctx: RunContext, stage: Stage, text: str) -> Verdict:
        """The classifier's verdict; one that raises, or answers something that is not a verdict (a
        score outside 0 to 1, NaN), fails closed (score 0.0, category ``error``) like an unusable
        model verdict, and says why."""
        try:
            async with asyncio.timeout(self.timeout_s) as limit:
                given = await self.classifier.classify(text, stage=stage, ctx=ctx)
            score = float(given.score)
            # Not clamped: a 7 on a scale of 0 to 10 (7 = risky) was read as 1.0, safe, and allowed.
            if not -_SCORE_SLACK <= score <= 1.0 + _SCORE_SLACK:  # NaN too
                raise ValueError(f"its score {given.score!r} is not a number from 0 to 1")
            return Verdict(str(given.rationale), min(1.0, max(0.0, score)), str(given.category or ""))
        except (RunCancelled, StoreError, ConfigError):
            raise  # a cancel, a store that cannot write: the run's own exits; a setup that cannot work
        except TimeoutError as exc:
            if not limit.expired():
                return self._failed(ctx, stage, exc)  # the classifier's own, not this wait's
            _log.warning(
                "run %s: the guardrail %r gave no verdict at %s within %g s",
                ctx.state.run_id,
                self.name,
                stage,
                self.timeout_s,
            )
            opened = self.on_timeout == "allow"
            return Verdict(
                f"the classifier gave no verdict within {self.timeout_s:g} s; failing {'open' if opened else 'closed'}",
                1.0 if opened else 0.0,
                "timeout",
            )
        except Exception as exc:
            return self._failed(ctx, stage, exc)

    def _failed(self, ctx: RunContext, stage: Stage, exc: Exception) -> Verdict:
        """A classifier that raised (a ProviderError too: its own model or service failed, a
        moderation API's 503; raised on, it was taken for the run's model failing, which was asked
        again) fails closed, and says why."""
        said = told(exc)  # a moderation API's "key sk-... refused": the verdict is kept and shown
        _log.warning("run %s: the guardrail %r failed at %s", ctx.state.run_id, self.name, stage, exc_info=exc)
        return Verdict(f"the classifier failed ({type(exc).__name__}: {said}); failing closed", 0.0, "error")

    def _who(self, ctx: RunContext) -> str:
        """This guardrail in the run's stack: its name and place (two may share a name)."""
        at = next((i for i, mw in enumerate(ctx.agent.middleware) if mw is self), -1)
        return f"{self.name}#{at}"

    def _words(self, stage: str, action: str, verdict: Verdict) -> str:
        what = {"block": "blocked this", "redirect": "redirected this", "ask": "held this for a person to decide"}.get(
            action, action
        )
        category = f" ({verdict.category})" if verdict.category else ""
        return f"the {stage.replace('_', ' ')} guardrail {self.name!r} {what}{category}: {verdict.rationale}"

    # -- input ------------------------------------------------------------------------------

    async def before_agent(self, ctx: RunContext) -> Stop | None:
        allowed = _Record(ctx.state).part.get("args_allowed")
        if allowed:  # calls allowed that never ran (a person declined them) are judged anew if made again
            still = {c.id for c in pending_tool_calls(ctx.state)}
            for stale in [k for k in allowed if k not in still]:
                del allowed[stale]
        if "output" in self.stages:
            _Gate.join(self, ctx, "text")
            _Gate.join(self, ctx, "reasoning")
        pending = _Record(ctx.state).pending
        if pending is not None and pending.stage in self.stages:
            _take_answer(ctx, pending)
            stop = self._decided(ctx, pending)
            if stop is not None or ctx.halt is not None:
                return stop
        if "input" not in self.stages:
            return None
        messages = ctx.state.messages
        if ctx.state.prompt_after_calls is not None and messages and not isinstance(messages[-1], UserMessage):
            # A message sent while calls of the last reply waited: it joins the transcript once
            # they have their results, and is judged then, before the model reads it.
            ctx.scratch.setdefault("guardrails_after_calls", []).append(self)
        return await self._judge_input(ctx)

    async def _judge_input(self, ctx: RunContext) -> Stop | None:
        messages = ctx.state.messages
        # Another guardrail of the stack redirected the message just now, with a note for the
        # model: the message is judged as it was before the note, which a stronger verdict replaces.
        noted = bool(messages) and messages[-1] is ctx.scratch.get("guardrails_note")
        judged = messages[:-1] if noted else messages
        if not judged or not isinstance(judged[-1], UserMessage) or judged[-1].summary_turns is not None:
            return None  # a resumed run: its input was judged when it arrived
        record = _Record(ctx.state)
        text = _recent_input(judged, [*record.approved, *_session_approved(ctx)], record.notes)
        action, verdict = await self.judge(ctx, "input", text)
        if action == "allow":
            return None
        if noted:
            record.notes[:] = [k for k in record.notes if k != _note_key(messages, len(messages) - 1)]
            messages.pop()
            ctx.scratch.pop("guardrails_note", None)
            ctx.persist(rewrite=True)
        words = self._words("input", action, verdict)
        if action == "ask":
            question = GuardrailInterruption(
                stage="input",
                key=_key("input", text),
                rationale=verdict.rationale,
                score=verdict.score,
                category=verdict.category,
            )
            _Record(ctx.state).ask(question, self._who(ctx))
            ctx.stop(Stop("interrupted", f"{words}. Approve to let the message through, or reject", question))
            return None
        if action == "redirect" and self.redirect_reply is None:
            # The model writes the redirect: it reads why, and is offered no tools for it.
            note = f"{_REDIRECT_NOTE}{words}.{_REDIRECT_END}"
            messages.append(UserMessage.text(note))
            _Record(ctx.state).notes.append(_note_key(messages, len(messages) - 1))  # a person can type it too
            ctx.scratch["guardrails_note"] = messages[-1]
            ctx.persist()
            return None
        reply = self.redirect_reply if action == "redirect" else f"[Not answered: {words}.]"
        messages.append(
            AssistantMessage(
                content=(TextPart(text=reply or ""),), model=f"guardrail/{self.name}", finish_reason=WRITTEN_BY_POLICY
            )
        )
        ctx.persist()
        if action == "redirect":
            if reply:
                ctx.emit(TextDelta(ctx.state.run_id, reply))  # the answer the caller reads, streamed
            return Stop("completed", f"redirected: {words}")
        return Stop("failed", f"blocked: {words}")

    def _decided(self, ctx: RunContext, pending: GuardrailInterruption) -> Stop | None:
        """A resumed run after a question: the person's decision, or the same question again."""
        state = ctx.state
        record = _Record(state)
        if pending.key in record.rejected:
            record.pending = None
            record.part.pop("held_shown", None)
            reason = record.rejected[pending.key]
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
        if pending.key in record.approved:
            record.pending = None
            shown = record.part.pop("held_shown", None) or ""
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
                # The answer let through reaches the caller as any answer does, streamed: what of it
                # was released before the question (checked chunks, a cut reply) is not sent twice.
                last = state.messages[-1] if state.messages else None
                if isinstance(last, AssistantMessage) and not last.tool_calls:
                    text = last.text
                    ctx.emit(TextDelta(state.run_id, text[len(shown) :] if text.startswith(shown) else text))
            return None
        ctx.stop(
            Stop(
                "interrupted",
                f"the {pending.stage} guardrail {self.name!r} is still waiting for a person "
                f"({pending.rationale}). Approve, or reject",
                pending,
            )
        )
        return None

    async def before_model(self, ctx: RunContext, request: ModelRequest) -> ModelRequest | Stop:
        # Every call of the last reply has its result: the tool_args verdicts kept for them are done.
        record = _Record(ctx.state)
        if record.part.get("args_refused"):
            record.part["args_refused"] = {}
        waiting: list[Guardrail] = ctx.scratch.get("guardrails_after_calls", [])
        last = ctx.state.messages[-1] if ctx.state.messages else None
        if any(g is self for g in waiting) and isinstance(last, UserMessage):
            waiting[:] = [g for g in waiting if g is not self]
            stop = (await self._judge_input(ctx)) or ctx.halt  # ctx.halt: held for a person
            if stop is not None:
                return stop
            last = ctx.state.messages[-1]
        if isinstance(last, UserMessage) and _is_note(ctx.state.messages, -1, _Record(ctx.state).notes):
            from dataclasses import replace

            return replace(request, tools=())  # a redirect is words, not actions
        return request

    # -- output -----------------------------------------------------------------------------

    async def wrap_model_call(
        self, ctx: RunContext, request: ModelRequest, call_next: ModelCall
    ) -> ModelResponse | Stop:
        gate = _Gate.of(self, ctx, "text")
        if gate is not None and gate.owners[0] is self:
            gate.reset()  # a new attempt: what an earlier one held back is gone with it
            reasoning = _Gate.of(self, ctx, "reasoning")
            if reasoning is not None:
                reasoning.reset()
        response = await call_next(request)
        checked = await self._checked(ctx, response, gate)
        if gate is not None and gate.owners[0] is self and isinstance(checked, ModelResponse):
            gate.carry_on(checked.message)  # every output guardrail of the run has judged it
        return checked

    async def _checked(
        self, ctx: RunContext, response: ModelResponse | Stop, gate: _Gate | None
    ) -> ModelResponse | Stop:
        if "output" not in self.stages or isinstance(response, Stop):
            return response
        if gate is not None and gate.blocked is not None and gate.blocked[0] is not self:
            return response  # another output guardrail stopped this reply: it answers for it
        mine = gate.blocked[1:] if gate is not None and gate.blocked is not None else None
        if response.message.tool_calls:
            return await self._beside_calls(ctx, response, gate, mine)
        if mine is not None:
            action, verdict = mine
        else:
            text = gate.unchecked(response.message.text) if gate is not None else response.message.text
            if gate is not None:
                gate.judged = text
            if not text.strip():
                return response
            action, verdict = await self.judge(ctx, "output", text)
        if action == "ask" and gate is not None:
            # A person is asked only about what every output guardrail lets through: approving
            # delivers the whole answer, which the others (and, after a chunk that asked, this
            # one) had not judged.
            rest = text if mine is None else gate.unchecked(response.message.text)
            for owner in gate.owners:
                if rest.strip() and (owner is not self or mine is not None):
                    act, why = await owner.judge(ctx, "output", rest)
                    if act not in ("allow", "ask"):
                        return owner._stopped(ctx, response, gate, act, why)
        if action == "allow":
            return response
        return self._stopped(ctx, response, gate, action, verdict)

    def _stopped(
        self, ctx: RunContext, response: ModelResponse, gate: _Gate | None, action: Action, verdict: Verdict
    ) -> ModelResponse:
        """The reply, stopped by this guardrail's verdict: held for a person, redirected or withheld."""
        if gate is not None:
            gate.blocked = (self, action, verdict)  # the guardrails around this one leave it be
        words = self._words("output", action, verdict)
        if action == "ask":
            # Recorded, not streamed: approving delivers it (the resumed run ends with it as its
            # output); rejecting replaces it, in words (see _take_answer).
            key = _key("output", response.message.text)
            held = _whole(ctx.state, response.message) if gate is not None and gate.carry else response.message
            question = GuardrailInterruption(
                stage="output",
                key=key,
                rationale=verdict.rationale,
                score=verdict.score,
                category=verdict.category,
                held=held.text[:HELD_SHOWN],  # the person approves what they read, not blind
                held_chars=len(held.text),
            )
            record = _Record(ctx.state)
            record.ask(question, self._who(ctx))
            record.held = held
            record.part["held_shown"] = (gate.carry + gate.released) if gate is not None else ""
            ctx.stop(Stop("interrupted", f"{words}. Approve to deliver the answer, or reject", question))
            placeholder = f"[Answer held for a person to decide: {words}.]"
            return ModelResponse(message=response.message.model_copy(update={"content": (TextPart(text=placeholder),)}))
        if action == "redirect" and self.redirect_reply is not None:
            ctx.stop(Stop("completed", f"redirected: {words}"))
            withheld = self.redirect_reply
            ctx.emit(TextDelta(ctx.state.run_id, withheld))  # the answer the caller reads, streamed
        else:
            ctx.stop(Stop("failed", f"blocked: {words}"))
            withheld = f"[Answer withheld: {words}.]"
        # The reply is paid for and recorded, in words, instead of what the caller never saw.
        message = response.message.model_copy(update={"content": (TextPart(text=withheld),)})
        return ModelResponse(message=message)

    async def filter_stream(self, ctx: RunContext, text: str, kind: StreamKind) -> str:
        """Streamed text of a guarded answer waits here until it is judged (see _Gate)."""
        gate = _Gate.of(self, ctx, kind)
        if gate is None or gate.owners[0] is not self:
            return text  # not guarded, or already judged by every output guardrail of the run
        mode = gate.reasoning_mode() if kind == "reasoning" else "judge"
        if mode != "judge":
            return "" if mode == "withhold" else text
        return "".join(await gate.feed(text))

    async def flush_stream(self, ctx: RunContext, kind: StreamKind) -> str:
        gate = _Gate.of(self, ctx, kind)
        if gate is None or gate.owners[0] is not self:
            return ""
        if kind == "reasoning" and gate.reasoning_mode() != "judge":
            return ""
        # The answer's text was judged whole by wrap_model_call; reasoning is judged here, and so is
        # streamed text the reply does not hold (a wire that streamed a block it then left out).
        unjudged = kind == "reasoning" or "".join(gate.held) not in gate.judged
        return "".join(await gate.finish(judge_rest=unjudged))

    async def _beside_calls(
        self, ctx: RunContext, response: ModelResponse, gate: _Gate | None, mine: tuple[Action, Verdict] | None
    ) -> ModelResponse:
        """Text beside tool calls is checked too; if it fails, the calls go on without it."""
        said = gate.unchecked(response.message.text) if gate is not None else response.message.text
        if gate is not None:
            gate.judged = said
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

    async def before_tool_call(self, ctx: RunContext, call: ToolCallPart, args: dict[str, Any]) -> ToolResult | None:
        """The ``tool_args`` verdict, before a person is asked about the call: a refused call is
        never put to one, and its arguments are for the model alone (``args_withheld``)."""
        if "tool_args" not in self.stages:
            return None
        text = f"{call.name} {json.dumps(args, ensure_ascii=False, sort_keys=True, default=_plain)}"
        # A call allowed here and then put to a person comes back once they decide: the same
        # arguments (the decision binds to them) are not judged, nor paid for, twice.
        record = _Record(ctx.state)
        allowed: dict[str, dict[str, str]] = record.part.setdefault("args_allowed", {})
        key, who = _key("tool_args", text), self._who(ctx)
        if allowed.get(call.id, {}).get(who) == key:
            return None
        # So is a refusal of a call whose result is not written yet (a batch's calls are written
        # in order, after the ones before them ran; a batch waits for a person's decision): a
        # crash or a resume meanwhile judged it, and paid for it, again.
        refused: dict[str, dict[str, list[str]]] = record.part.setdefault("args_refused", {})
        kept = refused.get(call.id, {}).get(who)
        if kept is not None and kept[0] == key:
            return _refusal(kept[1])
        action, verdict = await self.judge(ctx, "tool_args", text)
        words = self._words("tool_args", action, verdict)
        if action == "allow":
            allowed.setdefault(call.id, {})[who] = key
        else:
            refused.setdefault(call.id, {})[who] = [key, words]
        if not getattr(self.classifier, "free", False):
            ctx.persist(durable=False)  # the verdict outlives a kill -9 before the call's result is written
        return None if action == "allow" else _refusal(words)

    async def wrap_tool_call(
        self, ctx: RunContext, call: ToolCallPart, args: dict[str, Any], call_next: ToolCall
    ) -> ToolResult | str | Stop:
        result = await call_next()
        # Judged once, for this run of it (kept while it runs: a crash meanwhile reruns it unjudged).
        _Record(ctx.state).part.get("args_allowed", {}).pop(call.id, None)
        if "tool_result" not in self.stages or isinstance(result, Stop):
            return result
        text = result if isinstance(result, str) else "".join(p.text for p in result.parts() if isinstance(p, TextPart))
        action, verdict = await self.judge(ctx, "tool_result", text)
        if action == "allow":
            return result
        return ToolResult(
            f"[The result of {call.name} was withheld: {self._words('tool_result', action, verdict)}.]", is_error=True
        )


def _refusal(words: str) -> ToolResult:
    return ToolResult(
        f"Not run: {words}. Do not try the same call again; tell the user what you could not do.",
        is_error=True,
        args_withheld=words,
    )


def _whole(state: RunState, continued: AssistantMessage) -> AssistantMessage:
    """A continuation as the loop will record it: merged into the cut reply before it (the last
    message while the continuation is asked for)."""
    cut = state.messages[-1] if state.messages else None
    return Continuation(cut).merge(continued) if isinstance(cut, AssistantMessage) else continued


def _plain(value: Any) -> Any:
    """What ``json`` cannot write of a tool's validated arguments (a nested model, a date, a
    path) as the JSON the model sent for it."""
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    from pydantic_core import to_jsonable_python

    return to_jsonable_python(value, fallback=str)


INPUT_WINDOW = 3  # user turns judged together: a jailbreak split over messages is read whole


def _note_key(messages: Sequence[Any], i: int) -> str:
    """A redirect note's key: its text after the message it follows (the redirected one), so a
    copy a person sends of an earlier note, after a reply, is not taken for tether's."""
    before = text_of(messages[i - 1 : i]) if i != 0 and len(messages) > 1 else ""
    return _key("redirect", f"{before}\n{text_of(messages[i:][:1])}")


def _is_note(messages: Sequence[Any], i: int, notes: Sequence[str]) -> bool:
    """Whether ``messages[i]`` is a redirect note a guardrail wrote, not a message that starts
    alike: recorded by its key in this run; in a session's later run (whose record starts empty),
    a note shaped as tether writes it that is not the latest message and directly follows the
    message it redirected (a person's message follows a reply)."""
    text = text_of(messages[i:][:1])
    if not (text.startswith(_REDIRECT_NOTE) and text.endswith(_REDIRECT_END)):
        return False
    if _note_key(messages, i) in notes:
        return True
    at = i % len(messages)
    before = messages[at - 1] if at > 0 else None
    return at < len(messages) - 1 and isinstance(before, UserMessage) and before.summary_turns is None


def _answered_by_guardrail(message: AssistantMessage) -> bool:
    """A reply a guardrail wrote: ``guardrail/<name>`` for a blocked or redirected message,
    ``guardrail`` for one a person declined (see _take_answer)."""
    model = message.model or ""
    return model == "guardrail" or model.startswith("guardrail/")


def _recent_input(messages: Sequence[Any], approved: Sequence[str] = (), notes: Sequence[str] = ()) -> str:
    """The last user message, after the user messages just before it (up to INPUT_WINDOW in all),
    back to the first one a guardrail answered or a person approved (judged already)."""
    judged: dict[int, str] = {}  # the window that ended at each earlier user message

    def window(end: int) -> str:
        turns: list[str] = []
        for i in range(end, -1, -1):
            message = messages[i]
            if isinstance(message, AssistantMessage) and _answered_by_guardrail(message):
                break
            if not isinstance(message, UserMessage) or message.summary_turns is not None:
                continue
            if _is_note(messages, i, notes):
                break  # the turn before it was redirected: judged already
            if turns and approved and _key("input", judged[i]) in approved:
                break  # a person let the window ending here through
            turns.append(text_of([message]))
            if len(turns) == INPUT_WINDOW:
                break
        return "\n".join(reversed(turns))

    if approved:  # each window as it was judged, after the approvals before it: earliest first
        for i, message in enumerate(messages[:-1]):
            if isinstance(message, UserMessage):
                judged[i] = window(i)
    return window(len(messages) - 1)


def _allowed(state: RunState, key: str) -> str:
    reason = _Record(state).approved_reasons.get(key)
    return "a person allowed this after an earlier verdict" + (f": {reason}" if reason else "")


class _Record:
    """What the guardrails keep in the run: ``RunState.ext["guardrails"]`` (plain JSON)."""

    # A run saved before RunState.ext kept these as fields of its own.
    _OLDER: ClassVar[dict[str, str]] = {
        "guardrail_approved": "approved",
        "guardrail_approved_reasons": "approved_reasons",
        "guardrail_pending": "pending",
        "guardrail_held": "held",
        "guardrail_rejected": "rejected",
        "guardrail_asked_by": "asked_by",  # (never kept there: a copy of a record as a whole moves)
        "guardrail_approved_by": "approved_by",
    }

    def __init__(self, state: RunState) -> None:
        self.part = state.ext_state("guardrails")
        for old, value in state.legacy(*self._OLDER).items():
            self.part.setdefault(self._OLDER[old], value)

    @property
    def approved(self) -> list[str]:
        """Keys of texts a person let through after a guardrail asked."""
        found: list[str] = self.part.setdefault("approved", [])
        return found

    @property
    def notes(self) -> list[str]:
        """Keys of the redirect notes the guardrails wrote for the model (see _is_note)."""
        found: list[str] = self.part.setdefault("redirect_notes", [])
        return found

    @property
    def approved_by(self) -> dict[str, list[str]]:
        """For each approved key, the guardrails whose question the approval answered (see
        Guardrail._who); a key approved before this was kept counts for all."""
        found: dict[str, list[str]] = self.part.setdefault("approved_by", {})
        return found

    def ask(self, question: GuardrailInterruption, who: str) -> None:
        self.pending = question
        self.part["asked_by"] = who

    @property
    def approved_reasons(self) -> dict[str, str]:
        found: dict[str, str] = self.part.setdefault("approved_reasons", {})
        return found

    @property
    def rejected(self) -> dict[str, str]:
        """Keys of texts a person refused, with their reasons."""
        found: dict[str, str] = self.part.setdefault("rejected", {})
        return found

    @property
    def pending(self) -> GuardrailInterruption | None:
        """The question waiting for a person (kept across the resume, unlike the interruption)."""
        saved = self.part.get("pending")
        return None if saved is None else GuardrailInterruption.model_validate(saved)

    @pending.setter
    def pending(self, question: GuardrailInterruption | None) -> None:
        self.part["pending"] = None if question is None else question.model_dump(mode="json")

    @property
    def held(self) -> AssistantMessage | None:
        """The answer an output question holds back."""
        saved = self.part.get("held")
        return None if saved is None else AssistantMessage.model_validate(saved)

    @held.setter
    def held(self, message: AssistantMessage | None) -> None:
        self.part["held"] = None if message is None else message.model_dump(mode="json")


_SESSION_APPROVED = 200  # the keys of approved inputs a session keeps (its latest)


def _session_approved(ctx: RunContext) -> list[str]:
    """Inputs a person let through in the session's earlier runs (a later run's record starts
    empty, and its window reaches back into them): kept in the session's metadata."""
    load = getattr(ctx.session, "load_meta", None)
    if load is None or not ctx.state.session_id:
        return []
    kept = load(ctx.state.session_id).get("guardrails_approved")
    return [k for k in kept if isinstance(k, str)] if isinstance(kept, list) else []


def _session_approve(ctx: RunContext, key: str) -> None:
    load, save = getattr(ctx.session, "load_meta", None), getattr(ctx.session, "save_meta", None)
    if load is None or save is None or not ctx.state.session_id:
        return  # a store without metadata keeps approvals per run
    kept = [k for k in _session_approved(ctx) if k != key][-(_SESSION_APPROVED - 1) :]
    save(ctx.state.session_id, {**load(ctx.state.session_id), "guardrails_approved": [*kept, key]})


def _take_answer(ctx: RunContext, pending: GuardrailInterruption) -> None:
    """A person's answer to ``pending`` (``approve``/``reject`` keep it in ``state.answer``),
    taken into the guardrails' record: an approved answer replaces its placeholder; a refusal is
    written, in words, where the model reads."""
    state, record = ctx.state, _Record(ctx.state)
    answer = state.answer
    if answer is None or not isinstance(answer.question, GuardrailInterruption) or answer.question.key != pending.key:
        return
    state.answer = None
    last = state.messages[-1] if state.messages else None
    held, record.held = record.held, None
    if answer.approved:
        if pending.key not in record.approved:
            record.approved.append(pending.key)
        who = record.part.get("asked_by")
        if isinstance(who, str) and who not in record.approved_by.setdefault(pending.key, []):
            record.approved_by[pending.key].append(who)
        if pending.stage == "input":
            _session_approve(ctx, pending.key)
        if answer.reason:
            record.approved_reasons[pending.key] = answer.reason
        if pending.stage == "output" and held is not None and isinstance(last, AssistantMessage):
            state.messages[-1] = held  # the answer the person let through replaces the placeholder
            ctx.persist(rewrite=True)
        return
    record.rejected[pending.key] = answer.reason
    said = f" Their reason: {answer.reason}" if answer.reason else ""
    note = (
        f"[Not answered: a person declined it after the {pending.stage} guardrail's verdict "
        f"({pending.rationale}).{said}]"
    )
    if pending.stage == "output" and isinstance(last, AssistantMessage) and not last.tool_calls:
        state.messages[-1] = last.model_copy(update={"content": (TextPart(text=note),)})
        ctx.persist(rewrite=True)
    else:
        state.messages.append(
            AssistantMessage(content=(TextPart(text=note),), model="guardrail", finish_reason=WRITTEN_BY_POLICY)
        )
        ctx.persist()


# A chunk ends after a sentence mark once the white space after it has arrived, or after a line
# break: a mark at the end of a delta ("62." of "62.5%", "evil." of "evil.example") ends nothing
# yet, or where the model's stream happened to split would decide what is released unjudged.
_BOUNDARY = re.compile(r"[.!?;:]\s+|\n")


def _tail(text: str) -> str:
    """``text`` from its last character that is not white space (all of it if there is none)."""
    kept = text.rstrip()
    return text[len(kept) - 1 :] if kept else text


DEFAULT_LOOKBEHIND = 256
# How much of an answer held for a person its question carries (the run's ``interruption``, a
# server's ``waiting``): a card and a terminal show it, and say when it was cut.
HELD_SHOWN = 4000
_REDIRECT_NOTE = "[Redirect: "
_REDIRECT_END = " Reply briefly that you cannot help with that here, and say what you can help with.]"


class _Gate:
    """Streamed text of a guarded answer (or its reasoning): held whole (``hold``) or released in
    checked chunks, each judged with the end of what was already released before it (a phrase
    cut by a chunk's boundary is judged whole).

    One gate per run and kind, shared by every output guardrail of the agent (kept in
    ``ctx.scratch``): a piece reaches the caller only once each of them has passed it, and if
    any of them holds the whole answer, so does the gate. (A gate per guardrail would let the
    last one release what an earlier one never saw.)"""

    def __init__(self, ctx: RunContext) -> None:
        self.owners: list[Guardrail] = []
        self.ctx = ctx
        # The text of a reply the output limit cut, which the next call continues: the
        # continuation is judged with it (a phrase cut by the limit is judged whole).
        self.carry = ""
        # The end of what the run's earlier replies released (text beside a tool call, an
        # attempt that failed): a reply is judged after it, as the caller reads the two.
        self.earlier = self.released = ""
        self.reset()

    @classmethod
    def join(cls, guardrail: Guardrail, ctx: RunContext, kind: StreamKind) -> None:
        gates = ctx.scratch.setdefault("guardrails", {})
        gate = gates.get(kind)
        if gate is None:
            gate = gates[kind] = cls(ctx)
        if guardrail not in gate.owners:
            gate.owners.append(guardrail)

    @staticmethod
    def of(guardrail: Guardrail, ctx: RunContext, kind: StreamKind) -> _Gate | None:
        gate = ctx.scratch.get("guardrails", {}).get(kind)
        return gate if isinstance(gate, _Gate) and guardrail in gate.owners else None

    def reset(self) -> None:
        self.earlier = self._last(self.earlier + self.released)
        self.held: list[str] = []
        self.held_chars = 0
        # The end of what is held from its last character that is not white space: a boundary
        # the next text completes starts there (the text before it was searched already).
        self.tail = ""
        self.released = ""
        self.judged = ""  # what the final check of the reply judged (see flush_stream)
        self.blocked: tuple[Guardrail, Action, Verdict] | None = None

    def reasoning_mode(self) -> str:
        modes = {owner.reasoning for owner in self.owners}
        return next(m for m in ("withhold", "judge", "pass") if m in modes)

    def carry_on(self, reply: AssistantMessage) -> None:
        cut = reply.finish_reason == CUT and not reply.tool_calls and self.blocked is None
        self.carry = self.carry + reply.text if cut else ""

    def _holds(self) -> bool:
        return any(owner.release != "chunks" for owner in self.owners)

    def _behind(self) -> str:
        return self._last(self.earlier + self.released)

    def _last(self, released: str) -> str:
        """The end of ``released`` a look-behind reads."""
        window = max((owner.lookbehind() for owner in self.owners), default=0)
        if window <= 0:
            return ""
        from tether.memory._normal import normalise  # what a rule reads (RuleClassifier)

        # Counted in characters as read: invisible ones, entities, runs of white space would
        # otherwise fill the window, and push out of it the start of a phrase cut by the boundary.
        start = max(0, len(released) - window)
        while start > 0 and len(normalise(released[start:])) < window:
            start = max(0, start - max(window, len(released) - start))  # doubled: few passes
        return released[start:]

    async def _passes(self, text: str) -> bool:
        for owner in self.owners:
            action, verdict = await owner.judge(self.ctx, "output", text)
            if action == "allow":
                continue
            if self.blocked is None or action != "ask":  # a block of a later owner beats a question
                self.blocked = (owner, action, verdict)
            if action != "ask":
                return False
        return self.blocked is None

    async def feed(self, text: str) -> list[str]:
        self.held.append(text)
        if self.blocked is not None or self._holds():
            return []
        # Only the tail and the new text are searched: searching all that is held at each delta
        # took quadratic time, seconds of a blocked event loop for a long answer without a boundary.
        start, tail = self.held_chars - len(self.tail), self.tail + text
        self.held_chars += len(text)
        self.tail = _tail(tail)
        size = max(owner.chunk_chars for owner in self.owners)
        cut = max((start + m.end() for m in _BOUNDARY.finditer(tail) if start + m.end() >= size), default=0)
        if not cut:
            return []
        pending = "".join(self.held)
        piece, rest = pending[:cut], pending[cut:]
        if not await self._passes(self._behind() + piece):
            return []
        self.held = [rest] if rest else []
        self.held_chars, self.tail = len(rest), _tail(rest)
        self.released += piece
        return [piece]

    def unchecked(self, full: str) -> str:
        """What the final check must still judge: all of it when held; when chunked, the rest
        with the end of what was released before it ("" when there is no rest). A continuation
        is judged after the cut reply it continues: whole when held, its end when chunked."""
        if not full.startswith(self.released):
            return (self.carry or self._last(self.earlier)) + full
        rest = full[len(self.released) :]
        if not rest.strip():
            return ""
        return (self.carry if self.carry and self._holds() else self._behind()) + rest

    async def finish(self, *, judge_rest: bool = False) -> list[str]:
        if self.blocked is not None:
            return []
        rest = "".join(self.held)
        self.held = []
        if judge_rest and rest.strip() and not await self._passes(self._behind() + rest):
            return []
        self.released += rest
        return [rest] if rest else []
