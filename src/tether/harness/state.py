"""The run as data (law 2): a plain, JSON-serialisable ``RunState``, and what is derived from it.

The turn index and the pending calls are computed from the transcript, never kept beside it.
"""

from __future__ import annotations

import hashlib
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, computed_field, field_validator, model_validator

from tether.errors import UserError
from tether.messages import (
    AssistantMessage,
    Message,
    TextPart,
    ToolCallPart,
    ToolMessage,
    UserMessage,
    canonical_arguments,
)
from tether.status import (
    ApprovalInterruption,
    CancelledInterruption,
    Interruption,
    MaxBudgetInterruption,
    MaxTurnsInterruption,
    Misconfiguration,
    OutcomeUnknownInterruption,
    RunResult,
    RunStatus,
)
from tether.usage import Usage

__all__ = [
    "CONTROL",
    "CORRECTION",
    "ENDED_BY_TOOL",
    "WRITTEN_BY_POLICY",
    "Answer",
    "CallInFlight",
    "Intent",
    "RunState",
    "Step",
    "ToolStats",
    "approve",
    "args_hash",
    "control_message",
    "is_empty_answer",
    "is_person",
    "kill_waiting_process",
    "latest_reply",
    "new_run_id",
    "pending_tool_calls",
    "reject",
    "spent_tokens_at_resume",
    "spent_unknown_usd",
    "steps",
    "this_turn",
    "turn_start",
    "wait_for_waiting_process",
    "waiting_process",
]


def new_run_id() -> str:
    return "run_" + uuid.uuid4().hex[:16]


def args_hash(arguments: str) -> str:
    """A hash of a call's arguments (canonical JSON when valid), binding an approval to them."""
    canon = canonical_arguments(arguments)
    return hashlib.sha256((canon if canon is not None else arguments).encode()).hexdigest()[:32]


class ToolStats(BaseModel):
    model_config = ConfigDict(defer_build=True)

    calls: int = 0
    errors: int = 0
    cached: int = 0
    total_ms: float = 0.0


class Intent(BaseModel):
    """A side-effecting call that started: saved before it runs, removed when its result is.

    Found on resume without a result, it means the outcome is unknown (law 3)."""

    model_config = ConfigDict(defer_build=True)

    key: str  # the idempotency key, ``run_id:call_id``
    # A process the call started (a shell command) and what identifies that very process (its
    # start time), so a later pid reuse is not mistaken for it.
    pid: int | None = None
    process: str | None = None
    # A person saw the outcome-unknown stop and approved running the call again.
    rerun: bool = False
    # The call's result, when it finished while a call before it in its batch still ran: it goes
    # into the transcript in its place once those have theirs (law 1), and is kept here meanwhile,
    # saved with the run, so a crash before then does not make a call that finished one of unknown
    # outcome (a resume records this result; the call does not run again).
    landed: ToolMessage | None = None


class CallInFlight(BaseModel):
    """A model request about to be sent: saved first, so a request the process dies during is
    counted (the provider bills it) even though its reply never arrives."""

    model_config = ConfigDict(defer_build=True)

    model: str
    prompt_tokens: int  # estimated
    max_tokens: int
    max_cost_usd: float | None  # its worst case; None when the price is unknown

    @property
    def worst_tokens(self) -> int:
        """Its worst case in tokens: its prompt and its whole answer."""
        return self.prompt_tokens + self.max_tokens


def spent_unknown_usd(cost_unknown_usd: float, in_flight: CallInFlight | None) -> float:
    """What a run may have paid beyond the cost it counted, at the worst: the requests lost when a
    process died (``RunState.cost_unknown_usd``), and ``in_flight``, the request a run whose process
    stopped had out then (its resume counts it so; None for a run still running, whose request is
    only out). A report of the run's cost says it beside the cost, as its budget counts it."""
    lost = (in_flight.max_cost_usd or 0.0) if in_flight is not None else 0.0
    return cost_unknown_usd + lost


def spent_tokens_at_resume(state: RunState) -> int:
    """The tokens ``max_run_tokens`` counts against a run once it is resumed: its
    :attr:`RunState.spent_tokens`, and the prompt and whole answer of the request a run whose
    process stopped had out (:func:`spent_unknown_usd`'s ``in_flight``, which the resume counts so).
    A new token limit given to a resume must be above it, or the run stops again at once."""
    return state.spent_tokens + state.tokens_in_flight


# The finish reason of an assistant message a policy wrote in place of the model's answer (a
# refusal in words): the run does not take it for the model's answer (structured output).
WRITTEN_BY_POLICY = "policy"
# The finish reason of an answer a terminal tool's result became (no model wrote it).
ENDED_BY_TOOL = "tool"
# How every control message begins: the model is told it is tether speaking, not the person.
# Control messages go with one request only; they never enter the transcript.
CONTROL = "[tether control message, not from the user]"
# How a correction of a typed answer begins (tether.harness.structured): tether speaking too, kept
# in the transcript (the retries are counted from it), and no new request of the person's.
CORRECTION = "Your final answer does not match the required output schema"


def control_message(text: str) -> UserMessage:
    return UserMessage(content=(TextPart(text=f"{CONTROL} {text}"),))


def is_person(message: Message) -> bool:
    """A message the person wrote: not a compaction summary (it stands for turns), not a control
    message (tether speaking, for one request) and not a correction of a typed answer (tether
    asking again within the person's request: the windows of the limits, the loop guard and the
    governors, the read-only cache and the view of finished requests go on across it)."""
    if not isinstance(message, UserMessage) or message.summary_turns is not None:
        return False
    first = message.content[0] if message.content else None
    return not (isinstance(first, TextPart) and first.text.startswith((CONTROL, CORRECTION)))


# What compaction leaves of a tool output it removed (see tether.harness.compaction).
TRIMMED = "[This tool output was removed to fit the model's context window. Call the tool again if you need it.]"


def turn_start(messages: Sequence[Message]) -> int:
    """Where this request's messages begin: after the person's latest message (a compaction
    summary is not one). The window of the per-turn limits, the loop guard and the governors."""
    return next((i + 1 for i in range(len(messages) - 1, -1, -1) if is_person(messages[i])), 0)


def this_turn(messages: Sequence[Message]) -> list[Message]:
    """This request's messages (from :func:`turn_start`), a compaction summary among them replaced
    by the replies and results of the request it stands for (``UserMessage.turn_so_far``): what
    the per-turn limits count, which a compaction must not reset."""
    out: list[Message] = []
    for m in messages[turn_start(messages) :]:
        if isinstance(m, UserMessage) and m.turn_so_far is not None:
            out.extend(m.turn_so_far)
        else:
            out.append(m)
    return out


LEGACY = "legacy"  # the part of ``RunState.ext`` holding older runs' plug-in fields


class Answer(BaseModel):
    """A person's answer to a question that is not the loop's own (a middleware's or a tool's):
    ``question`` is what they answered. The plug-in that asked reads it when the run resumes."""

    model_config = ConfigDict(defer_build=True)

    approved: bool
    reason: str = ""
    question: Interruption
    content: dict[str, Any] | None = None  # what the person filled in, for a question that is a form


class RunState(BaseModel):
    """Everything a run is. Save it, kill the process, load it, and the run goes on."""

    model_config = ConfigDict(defer_build=True)  # validators built on first use, not at import

    run_id: str = Field(default_factory=new_run_id)
    session_id: str | None = None
    model: str | None = None
    agent: str | None = None  # the name of the agent that last ran it (Agent.name); None: unnamed
    messages: list[Message] = Field(default_factory=list)
    usage: Usage = Field(default_factory=Usage)
    cost_usd: float = 0.0
    status: RunStatus = "running"
    interruption: Interruption | None = None
    reason: str | None = None
    # Set when the run failed on something only a person can fix (see ``Stop.not_configured``):
    # a run that runs this one (a sub-agent's parent) reads it, not the reason's words.
    misconfiguration: Misconfiguration | None = None
    # call id → hash of the arguments a person approved (an approval binds to both).
    approved: dict[str, str] = Field(default_factory=dict)
    # call id → the reason a person gave for declining ("" when none was given).
    rejected: dict[str, str] = Field(default_factory=dict)
    # call id → the words a person gave with an approval, until the call's result carries them.
    approved_reasons: dict[str, str] = Field(default_factory=dict)
    # call id → intent, for side-effecting calls that started and have no result yet.
    intents: dict[str, Intent] = Field(default_factory=dict)
    # The model request being made, if any (cleared when its reply or failure is recorded).
    call_in_flight: CallInFlight | None = None
    # Charges tether could not count exactly: the worst case of requests that were in flight when
    # the process died. Counted against the budget with ``cost_usd``.
    cost_unknown_usd: float = 0.0
    # The same in tokens (each such request's prompt and its whole max_tokens): counted against
    # ``max_run_tokens`` with ``usage``, never added to it (usage is what providers reported).
    tokens_unknown: int = 0
    # Models that answered in this run with no known price: their calls cost an unknown amount,
    # so the run's cost is unknown (``RunResult.cost_usd`` is None), never a silent zero.
    unpriced_models: list[str] = Field(default_factory=list)
    tool_stats: dict[str, ToolStats] = Field(default_factory=dict)
    # Model turns made on this run's behalf outside its transcript (by a tool that runs its own
    # loop: a sub-agent, and everything below it). They count against ``max_turns`` as what they
    # cost counts against the budget (``cost_usd``), so a run's limits bound all it set going.
    delegated_turns: int = 0
    # How many of ``messages`` the bound session store already holds (see tether.sessions).
    session_synced: int = 0
    # The transcript was changed outside a run (a decision): the session mirror must be rewritten.
    session_stale: bool = False
    # The extensions' system-prompt blocks as this run sends them (a snapshot taken when its
    # session began; see tether.harness.extension). None until the run first starts.
    prompt_blocks: dict[str, str] | None = None
    # What extensions, middleware and tools keep for this run, each under its own name (plain
    # JSON: saved and resumed with the rest). The loop never reads it: see :meth:`ext_state`.
    ext: dict[str, Any] = Field(default_factory=dict)
    # A person's answer to a question a plug-in stopped the run for (see :func:`approve`), kept
    # until the plug-in reads it on resume.
    answer: Answer | None = None
    created_at: float = Field(default_factory=time.time)

    # Turns already in a session's history when this run started: they are not this run's.
    history_turns: int = 0
    # The transcript was rewritten (a compaction) since the last reply: that reply's prompt count
    # describes a history that no longer exists, and estimates do not start from it.
    usage_stale: bool = False
    # A person's message given while calls of the last reply still waited (for a decision, or
    # behind a stop): it goes into the transcript after their results, where the model reads it.
    prompt_after_calls: str | None = None
    # The store's commit this copy was loaded from or last saved as (0: never saved). The store
    # refuses a save, and the loop a resume, from a copy behind the saved run: it would do again
    # what the later commits did (a call approved on two copies would run twice).
    commit_seq: int = Field(default=0, ge=0)
    # The run's last turn whose ``turn`` event went to the trace (-1: not known, a run saved before
    # this was kept). The reply is saved before its trace line is written: a process killed
    # between the two leaves the trace a turn short, and the resumed run writes it.
    traced_turns: int = -1

    @model_validator(mode="before")
    @classmethod
    def _older_fields(cls, data: Any) -> Any:
        """Runs saved before ``ext`` kept plug-ins' state in fields of their own: each such field
        is kept, as it was, under ``ext["legacy"]`` for its plug-in to take over (see
        :meth:`legacy`); ``config`` (a front door's) moves to ``ext["config"]``."""
        if not isinstance(data, dict):
            return data
        known = cls.model_fields.keys() | {"turns"}
        older = {k: v for k, v in data.items() if k not in known}
        if not older:
            return data
        data = {k: v for k, v in data.items() if k in known}
        ext = dict(data.get("ext") or {})
        config = older.pop("config", None)
        if config:
            ext["config"] = {**config, **ext.get("config", {})}
        kept = {k: v for k, v in older.items() if v not in (None, [], {}, "")}
        if kept:
            ext[LEGACY] = {**kept, **ext.get(LEGACY, {})}
        data["ext"] = ext
        return data

    @field_validator("intents", mode="before")
    @classmethod
    def _old_intents(cls, value: Any) -> Any:
        """Runs saved before intents carried processes stored the key alone."""
        if isinstance(value, dict):
            return {k: {"key": v} if isinstance(v, str) else v for k, v in value.items()}
        return value

    # (messages counted, the last of them, their turns): the count is extended over what was
    # appended since, and recounted when the transcript shrank, was replaced, or was rewritten
    # (``transcript_rewritten``). Law 2: the transcript is the one source of truth; this only
    # avoids scanning it several times per turn.
    _turns_seen: tuple[int, Any, int] = PrivateAttr(default=(0, None, 0))
    # (messages looked at, the last of them, the index of the latest assistant message among
    # them or -1): see :func:`latest_reply`, kept and reset as ``_turns_seen`` is.
    _reply_seen: tuple[int, Any, int] = PrivateAttr(default=(0, None, -1))
    # How many times earlier messages were changed in place (see ``transcript_rewritten``): what
    # a plug-in derives from the transcript and extends as it grows is stale when this moved.
    _rewrites: int = PrivateAttr(default=0)
    # Dollars promised to work that spends for this run beside its other calls (a sub-agent's
    # budget), by key: each gives what is still unspent of its promise. Not saved: a promise ends
    # with the process that made it (a resumed sub-agent makes its own again). See ``held_usd``.
    _held: dict[str, Callable[[], float]] = PrivateAttr(default_factory=dict)
    # The same for tokens (a sub-agent's share of ``max_run_tokens``). See ``held_tokens``.
    _held_tokens: dict[str, Callable[[], int]] = PrivateAttr(default_factory=dict)

    def ext_state(self, name: str) -> dict[str, Any]:
        """The part of ``ext`` that belongs to ``name`` (an extension's, a middleware's or a
        tool's), created empty on first use. Keep plain JSON in it: it is saved with the run."""
        part = self.ext.get(name)
        if not isinstance(part, dict):
            part = self.ext[name] = {}
        return part

    def legacy(self, *fields: str) -> dict[str, Any]:
        """Take the values of ``fields`` a run saved before ``ext`` existed (see
        :meth:`_older_fields`): the plug-in that owned them moves them into its own part."""
        older = self.ext.get(LEGACY)
        if not isinstance(older, dict):
            return {}
        taken = {f: older.pop(f) for f in fields if f in older}
        if not older:
            self.ext.pop(LEGACY, None)
        return taken

    @property
    def config(self) -> dict[str, Any]:
        """What the front door that started the run keeps to rebuild its agent on resume (its
        own part of ``ext``)."""
        return self.ext_state("config")

    @config.setter
    def config(self, value: dict[str, Any]) -> None:
        self.ext["config"] = dict(value)

    @property
    def spent_usd(self) -> float:
        """What the budget counts: the cost counted, plus the worst case of lost requests."""
        return self.cost_usd + self.cost_unknown_usd

    @property
    def spent_tokens(self) -> int:
        """What ``max_run_tokens`` counts: the tokens used, plus the worst case of lost requests."""
        return self.usage.total_tokens + self.tokens_unknown

    @property
    def tokens_in_flight(self) -> int:
        """The worst case in tokens of the model request out now (0: none), not charged yet."""
        return self.call_in_flight.worst_tokens if self.call_in_flight is not None else 0

    def hold(self, key: str, unspent: Callable[[], float] | None) -> None:
        """Promise part of the budget to work that spends on its own while other calls may too (a
        sub-agent given its budget): ``unspent()`` says how much of the promise it has not spent
        yet (its spending is added to ``cost_usd`` as it goes). None lets ``key``'s promise go."""
        if unspent is None:
            self._held.pop(key, None)
        else:
            self._held[key] = unspent

    @property
    def held_usd(self) -> float:
        """What is promised and not spent yet (:meth:`hold`): a call made beside that work may not
        count on it, or the two together would take the run past its budget."""
        return sum(max(0.0, unspent()) for unspent in self._held.values())

    def hold_tokens(self, key: str, unspent: Callable[[], int] | None) -> None:
        """As :meth:`hold`, for tokens: promise part of what the run's token limit leaves to work
        that spends on its own (a sub-agent given its share; its tokens are added to ``usage`` as
        it goes). None lets ``key``'s promise go."""
        if unspent is None:
            self._held_tokens.pop(key, None)
        else:
            self._held_tokens[key] = unspent

    @property
    def held_tokens(self) -> int:
        """The tokens promised and not spent yet (:meth:`hold_tokens`): a call made beside that work
        may not count on them."""
        return sum(max(0, unspent()) for unspent in self._held_tokens.values())

    def transcript_rewritten(self) -> None:
        """Say that earlier messages were changed in place (trimming, compaction, a middleware):
        derived counts are recomputed. ``RunContext.persist(rewrite=True)`` calls it."""
        self._turns_seen = (0, None, 0)
        self._reply_seen = (0, None, -1)
        self._rewrites += 1

    @property
    def rewrites(self) -> int:
        """How many times :meth:`transcript_rewritten` was called on this object (not saved): a
        cache derived from the transcript and extended as it grows is rebuilt when this moved."""
        return self._rewrites

    @computed_field  # type: ignore[prop-decorator]
    @property
    def turns(self) -> int:
        """This run's model turns: assistant messages (plus those a compaction summary stands
        for), less those the session history brought in."""
        messages = self.messages
        seen, last, count = self._turns_seen
        if not (0 < seen <= len(messages) and messages[seen - 1] is last):
            seen, count = 0, 0
        if seen < len(messages):
            count += conversation_turns(messages[seen:])
            self._turns_seen = (len(messages), messages[-1], count)
        return count - self.history_turns

    def final_text(self) -> str:
        """The text of the last assistant message ("" before there is one)."""
        for m in reversed(self.messages):
            if isinstance(m, AssistantMessage):
                return m.text
        return ""

    def output(self) -> str:
        """Deprecated: :meth:`final_text` (``RunResult.output`` is the typed answer)."""
        import warnings

        warnings.warn("RunState.output() is now RunState.final_text()", DeprecationWarning, stacklevel=2)
        return self.final_text()

    def result(self) -> RunResult:
        answer = self.final_text()
        return RunResult(
            run_id=self.run_id,
            agent=self.agent,
            status=self.status,
            interruption=self.interruption,
            reason=self.reason,
            misconfiguration=self.misconfiguration,
            output=answer,
            text=answer,
            empty_answer=self.status == "completed" and is_empty_answer(self.messages[-1] if self.messages else None),
            turns=self.turns,
            usage=self.usage,
            cost_usd=None if self.unpriced_models else self.cost_usd,
            cost_unknown_usd=self.cost_unknown_usd,
            tokens_unknown=self.tokens_unknown,
            unpriced_models=list(self.unpriced_models),
            tool_stats={name: stats.model_dump() for name, stats in self.tool_stats.items()},
        )


def is_empty_answer(message: Message | None) -> bool:
    """Whether ``message`` is a final answer with no text: an assistant message with neither text
    (blank counts as none) nor tool calls. A run that completes on one says so (``EMPTY_ANSWER``)."""
    return isinstance(message, AssistantMessage) and not message.tool_calls and not message.text.strip()


def conversation_turns(messages: Sequence[Message]) -> int:
    """Model turns in a transcript: assistant messages plus those compaction summaries replaced."""
    return sum(
        1 + (m.continuations or 0) if isinstance(m, AssistantMessage) else (getattr(m, "summary_turns", None) or 0)
        for m in messages
        if m.role != "tool"
    )


def latest_reply(state: RunState) -> int:
    """The index of the last assistant message in ``state.messages`` (-1 when there is none).

    Looks back only over the messages appended since it was last asked: every call of one reply
    asks, and a look back over the results before it each time made a reply of n calls cost n²."""
    messages = state.messages
    seen, last, index = state._reply_seen
    if not (0 < seen <= len(messages) and messages[seen - 1] is last):
        seen, index = 0, -1
    for i in range(len(messages) - 1, seen - 1, -1):
        if isinstance(messages[i], AssistantMessage):
            index = i
            break
    state._reply_seen = (len(messages), messages[-1] if messages else None, index)
    return index


def pending_tool_calls(state: RunState) -> list[ToolCallPart]:
    """Calls in the last assistant message that have no result yet, in declared order."""
    messages = state.messages
    i = latest_reply(state)
    if i < 0:
        return []
    reply = messages[i]
    assert isinstance(reply, AssistantMessage)
    answered = {r.call_id for r in messages[i + 1 :] if isinstance(r, ToolMessage)}
    return [c for c in reply.tool_calls if c.id not in answered]


def _find_call(state: RunState, call_id: str) -> ToolCallPart:
    for c in pending_tool_calls(state):
        if c.id == call_id:
            return c
    waiting = ", ".join(f"{c.id} ({c.name})" for c in pending_tool_calls(state)) or "none"
    raise UserError(
        f"call {call_id!r} is not waiting for a decision in run {state.run_id} (waiting: {waiting}): name "
        "one of those, or none for the call the run stopped for; a reason is given apart (reason=...), not as the call"
    )


# Interruptions the loop itself asks about (a call to run or not), and those that ask nothing.
_CALL_QUESTIONS = (ApprovalInterruption, OutcomeUnknownInterruption)
_NOT_QUESTIONS = (MaxTurnsInterruption, MaxBudgetInterruption, CancelledInterruption)


def _decision_target(state: RunState, call_id: str | None) -> str:
    waiting = state.interruption
    if call_id is not None:
        return call_id
    if isinstance(waiting, _CALL_QUESTIONS):
        return waiting.call_id
    raise UserError(
        f"run {state.run_id} is not waiting for an approval (status {state.status}); nothing to approve or reject"
    )


def _plugin_question(state: RunState, call_id: str | None) -> Interruption | None:
    """The question the run stopped for when a plug-in (a middleware, a tool) asked it. Named by
    the call it came from (a sub-agent's), it is still that question, not an approval of the call."""
    waiting = state.interruption
    if waiting is None or isinstance(waiting, _CALL_QUESTIONS + _NOT_QUESTIONS):
        return None
    if call_id is not None and call_id != getattr(waiting, "call_id", None):
        return None
    return waiting


def _old_order(
    state: RunState, call_id: str | None, older: tuple[str | None, ...], reason: str | None
) -> tuple[str | None, str | None]:
    """``reject(state, reason, call_id)`` was the order before it matched ``approve``: still
    understood (with a DeprecationWarning) when the second argument cannot be a call id."""
    import warnings

    calls = {c.id for m in state.messages if isinstance(m, AssistantMessage) for c in m.tool_calls}
    # A word with no space in it is taken for a call id even when no call has it (a typo, a stale
    # id): read as a reason, it would decline another call, the one the run stopped for.
    # Not text (a batch's ids, passed whole): no call's id and no reason, refused as approve refuses it.
    if not older and (not isinstance(call_id, str) or call_id in calls or reason is not None or not _words(call_id)):
        return call_id, reason
    warnings.warn(
        "reject(state, reason, call_id) is deprecated: call reject(state, call_id, reason=...)",
        DeprecationWarning,
        stacklevel=3,
    )
    return (older[0] if older else None), call_id


def _words_of(state: RunState, reason: Any) -> str:
    """A decision's reason as the words it is recorded with; refused when it is not text. A key
    typed into it (a person pasting what they found) would reach the transcript the model reads,
    the trace and the saved run word for word: the secrets this process holds are taken out, as
    from everything a run says, and so is any text in a credential's shape."""
    if reason is not None and not isinstance(reason, str):
        raise UserError(f"the reason for a decision in run {state.run_id} must be text, not {type(reason).__name__}")
    from tether._secrets import known_secrets, withhold_credentials
    from tether.providers.http import scrubbed

    return withhold_credentials(scrubbed((reason or "").strip(), known_secrets()))[0]


def _words(text: Any) -> bool:
    return isinstance(text, str) and any(ch.isspace() for ch in text.strip())


def approve(
    state: RunState, call_id: str | None = None, *, reason: str | None = None, content: dict[str, Any] | None = None
) -> None:
    """Approve the call the run stopped for (or ``call_id``), bound to its current arguments.

    A ``reason`` is written, in words, before the call's result (the model reads it) and goes with
    the ``decision`` event. For a call whose outcome is unknown (it started before a crash and left
    no result), approving means "run it again"; tether still refuses while the process it started
    is alive. For a question a middleware or a tool asked (a sub-agent's, a policy's), the
    answer is kept in ``state.answer`` for it to read when the run resumes; ``content`` is a form's
    values, for a question that is one."""
    words = _words_of(state, reason)
    if content is not None and not isinstance(content, dict):
        raise UserError(f"content must be a dict of the form's values, not {type(content).__name__}")
    question = _plugin_question(state, call_id)
    if question is not None:
        state.answer = Answer(approved=True, reason=words, question=question, content=content)
        return
    if content is not None:
        raise UserError(f"run {state.run_id} is not waiting for a form; content answers a question that is a form")
    target = _find_call(state, _decision_target(state, call_id))
    state.approved[target.id] = args_hash(target.arguments)
    state.rejected.pop(target.id, None)
    if words:
        state.approved_reasons[target.id] = words
    else:
        state.approved_reasons.pop(target.id, None)
    intent = state.intents.get(target.id)
    if intent is not None:
        intent.rerun = True


def reject(state: RunState, call_id: str | None = None, *older: str | None, reason: str | None = None) -> None:
    """Decline the call the run stopped for (or ``call_id``); the loop writes the decision, in
    words, as the call's result. For a question a middleware or a tool asked, the answer is kept
    for it as with :func:`approve`."""
    call_id, reason = _old_order(state, call_id, older, reason)
    words = _words_of(state, reason)
    question = _plugin_question(state, call_id)
    if question is not None:
        state.answer = Answer(approved=False, reason=words, question=question)
        return
    target = _find_call(state, _decision_target(state, call_id))
    state.rejected[target.id] = words
    state.approved.pop(target.id, None)
    state.approved_reasons.pop(target.id, None)


@dataclass(frozen=True, slots=True)
class Step:
    """One model turn and the results of the calls it made (for stop conditions)."""

    index: int
    message: AssistantMessage
    results: tuple[ToolMessage, ...]


def steps(messages: Sequence[Message]) -> list[Step]:
    out: list[Step] = []
    current: AssistantMessage | None = None
    results: list[ToolMessage] = []
    for m in messages:
        if isinstance(m, AssistantMessage):
            if current is not None:
                out.append(Step(len(out), current, tuple(results)))
            current, results = m, []
        elif isinstance(m, ToolMessage):
            results.append(m)
    if current is not None:
        out.append(Step(len(out), current, tuple(results)))
    return out


def waiting_process(state: RunState) -> Intent | None:
    """The intent of the call the run stopped for, when that call started a process that is still
    alive (a shell command from before a crash); None otherwise."""
    from tether.processes import process_alive

    waiting = state.interruption
    intent = state.intents.get(waiting.call_id) if isinstance(waiting, OutcomeUnknownInterruption) else None
    if intent is None or intent.pid is None or not process_alive(intent.pid, intent.process):
        return None
    return intent


def kill_waiting_process(state: RunState) -> int | None:
    """Stop the process (and everything it started) that the waiting call left running; return
    its pid, or None when there was none."""
    from tether.processes import kill_process_tree

    intent = waiting_process(state)
    if intent is None or intent.pid is None:
        return None
    return intent.pid if kill_process_tree(intent.pid, intent.process) else None


async def wait_for_waiting_process(state: RunState, signal: Any, poll_s: float = 0.2) -> None:
    """Wait until the process the waiting call left running has exited (``signal`` may stop the
    wait: a :class:`~tether.cancel.CancelSignal`)."""
    while waiting_process(state) is not None:
        await signal.sleep(poll_s)
