"""How a run ends, as data: the five exits, the interruption, and the final result (law 5)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Annotated, Any, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field

from tether.usage import Usage

# How the reason of a run that ``max_run_tokens`` stopped (``budget_exceeded``) begins.
TOKEN_LIMIT = "the run's token limit"

__all__ = [
    "ApprovalInterruption",
    "CancelledInterruption",
    "ElicitationInterruption",
    "Interruption",
    "MaxBudgetInterruption",
    "MaxTurnsInterruption",
    "Misconfiguration",
    "OutcomeUnknownInterruption",
    "RunResult",
    "RunStatus",
    "SamplingInterruption",
    "Stop",
]

RunStatus = Literal["running", "completed", "failed", "max_turns_exceeded", "budget_exceeded", "interrupted"]

# Statuses from which ``resume`` continues the same transcript.
RESUMABLE: frozenset[str] = frozenset({"max_turns_exceeded", "budget_exceeded", "interrupted"})

# The reason of a run that completed on a final answer with no text (``RunResult.empty_answer``):
# "completed" with output "" would otherwise read as an answer that was lost.
EMPTY_ANSWER = "the model returned an empty answer (no text)"


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, defer_build=True)  # validators built on first use


class ApprovalInterruption(_Frozen):
    """A ``needs_approval`` tool is waiting for a person's decision."""

    type: Literal["approval"] = "approval"
    call_id: str
    tool_name: str
    args: Any = None
    # Other calls of the same parallel batch waiting for a decision at the same time: each is
    # approved or rejected by its ``call_id``; the run resumes once every one is decided.
    together: tuple[CallDecision, ...] = ()


class OutcomeUnknownInterruption(_Frozen):
    """A side-effecting call started before a crash and left no result: a person must decide
    whether to run it again (approve) or record what happened (reject with a reason)."""

    type: Literal["outcome_unknown"] = "outcome_unknown"
    call_id: str
    tool_name: str
    args: Any = None
    idempotency_key: str
    pid: int | None = None  # a process the call started (a shell command), if it reported one
    still_running: bool = False  # ... and it was still alive when the run stopped
    together: tuple[CallDecision, ...] = ()  # as for ApprovalInterruption


CallDecision = ApprovalInterruption | OutcomeUnknownInterruption


class GuardrailInterruption(_Frozen):
    """A guardrail's verdict fell below the deployment's "ask a person" threshold: approve to let
    the message (or answer) through, reject to refuse it."""

    type: Literal["guardrail"] = "guardrail"
    stage: str  # input | output
    key: str  # identifies the text judged; an approval lets exactly that text through
    rationale: str
    score: float
    category: str = ""
    # An output question: the answer approving delivers, for the person asked to read (its first
    # characters, up to a bound), and how long it is whole (longer than ``held``: it was cut).
    held: str | None = None
    held_chars: int = 0


class SubagentInterruption(_Frozen):
    """A sub-agent (call ``call_id``, tool ``tool_name``) stopped for a person: ``child`` is its
    question. Approving or rejecting the parent's run answers the child's question."""

    type: Literal["subagent"] = "subagent"
    call_id: str
    tool_name: str
    child_run_id: str
    child: Interruption


class ElicitationInterruption(_Frozen):
    """An MCP server asked the person for input during call ``call_id`` (elicitation) in a run that
    cannot ask at a terminal. Approving with ``content`` (the form's values) accepts; rejecting
    declines. The call is made again on resume, and the server's same question is answered with
    that answer."""

    type: Literal["elicitation"] = "elicitation"
    call_id: str
    tool_name: str
    server: str
    message: str
    requested_schema: dict[str, Any] | None = None  # the form: a flat JSON Schema object
    url: str | None = None  # or a page to open (URL mode)
    key: str  # identifies the question: the same one asked again is answered from the person's word


class SamplingInterruption(_Frozen):
    """An MCP server asked tether's model for a completion during call ``call_id`` under
    ``sampling = "ask"``, in a run that cannot ask at a terminal. Approving lets that request
    through when the call is made again; rejecting refuses it (the server reads why)."""

    type: Literal["sampling"] = "sampling"
    call_id: str
    tool_name: str
    server: str
    preview: str  # what the server wants to send; when long its start and end, and how much is left out between
    key: str  # identifies the request: the same one made again gets the person's answer


class MaxTurnsInterruption(_Frozen):
    type: Literal["max_turns"] = "max_turns"
    max_turns: int


class MaxBudgetInterruption(_Frozen):
    type: Literal["max_budget"] = "max_budget"
    max_budget_usd: float
    spent_usd: float


class CancelledInterruption(_Frozen):
    type: Literal["cancelled"] = "cancelled"
    reason: str


Interruption = Annotated[
    ApprovalInterruption
    | OutcomeUnknownInterruption
    | GuardrailInterruption
    | SubagentInterruption
    | ElicitationInterruption
    | SamplingInterruption
    | MaxTurnsInterruption
    | MaxBudgetInterruption
    | CancelledInterruption,
    Field(discriminator="type"),
]


class Misconfiguration(_Frozen):
    """Why a run ended ``failed`` on something only a person can fix, as data beside the reason's
    words: ``what`` (without its "the ": "tool NAME", through a sub-agent "sub-agent NAME's tool
    TOOL") is not configured right, or, with ``started`` False, could not start; ``why`` says what
    to change. A tool that runs a run of its own (a sub-agent) reads this of that run, never its
    words, and ends its caller's run the same way."""

    NOT_CONFIGURED: ClassVar[str] = " is not configured right: "
    NO_START: ClassVar[str] = " could not start: "

    what: str
    why: str
    started: bool = True

    @property
    def reason(self) -> str:
        """The run's reason, in words."""
        return f"the {self.what}{self.NOT_CONFIGURED if self.started else self.NO_START}{self.why}"


class RunResult(_Frozen):
    """What a finished (or stopped) run returns. ``reason`` says why in words."""

    run_id: str
    status: RunStatus
    interruption: Interruption | None = None
    reason: str | None = None
    agent: str | None = None  # the name of the agent that ran it (Agent.name); None: unnamed
    # Set when the run failed on something only a person can fix (a tool's ConfigError, a
    # sub-agent that could not start): what, and what to change.
    misconfiguration: Misconfiguration | None = None
    # The answer. With ``Agent.output_type``, once the run completed, the answer validated into it
    # (a model instance, or the parsed JSON for a JSON Schema); otherwise, and for every other run,
    # its text. ``text`` is always the text (for a typed answer, its JSON).
    output: Any = ""
    text: str = ""
    # True when the run completed on a final answer with no text (the reason then says so).
    empty_answer: bool = False
    turns: int = 0
    usage: Usage = Field(default_factory=Usage)
    # Dollars; None when a model that answered has no known price (add one under [models."..."]
    # in config.toml): an unknown cost is never reported as zero.
    cost_usd: float | None = 0.0
    # Worst case of model requests in flight when a process died: billed, but never counted.
    cost_unknown_usd: float = 0.0
    # The same in tokens (prompt and max_tokens of each), counted against max_run_tokens.
    tokens_unknown: int = 0
    unpriced_models: list[str] = []  # models that answered without a known price
    # Per tool: calls, errors, answers from the read-only cache (whole numbers), total milliseconds.
    tool_stats: dict[str, dict[str, int | float]] = {}
    typed: bool = False  # ``output`` holds the answer validated into ``Agent.output_type``

    @property
    def data(self) -> Any:
        """Deprecated: the typed answer is ``output`` (None here when the run has none)."""
        import warnings

        warnings.warn("RunResult.data is deprecated: read RunResult.output", DeprecationWarning, stacklevel=2)
        return self.output if self.typed else None

    if not TYPE_CHECKING:  # at run time only: mypy still reports a misspelt attribute

        def __getattr__(self, name: str) -> Any:
            """A peer's name for a result's part (the OpenAI Agents SDK's ``final_output``, Pydantic
            AI's ``all_messages()``) is told tether's; any other name is pydantic's to answer."""
            if name in _PEER_RESULT_NAMES:
                raise AttributeError(f"RunResult has no {name}: {_PEER_RESULT_NAMES[name]}")
            return super().__getattr__(name)


_TRANSCRIPT = (
    "a result holds no transcript. Keep the run's state (`state = RunState()`, then "
    '`run_sync(agent, "...", state=state)`): `state.messages` is the transcript, and '
    '`run_sync(agent, "next question", state=state)` goes on from it'
)
_PEER_RESULT_NAMES = {
    "final_output": (
        "the answer is `result.output` (typed with Agent.output_type, else the text); `result.text` is its text"
    ),
    "all_messages": _TRANSCRIPT,
    "new_messages": _TRANSCRIPT,
    "to_input_list": _TRANSCRIPT,
    "messages": _TRANSCRIPT,
}


@dataclass(frozen=True, slots=True)
class Stop:
    """How a run ends: one of the five exits, the reason in words, and for ``interrupted`` what it
    waits for. A stop condition or a middleware hook returns one to end the run."""

    status: RunStatus = "completed"
    reason: str = "a stop condition was met"
    interruption: Interruption | None = None
    # Set (with ``status`` "failed") when only a person can fix what ended the run.
    misconfiguration: Misconfiguration | None = None

    @classmethod
    def cancelled(cls, reason: str) -> Stop:
        """The exit for a fired cancellation signal, wherever in the loop it was heard."""
        return cls("interrupted", f"cancelled: {reason}", CancelledInterruption(reason=reason))

    @classmethod
    def not_configured(cls, what: str, why: str, *, started: bool = True) -> Stop:
        """The exit for a tool that raised ``ConfigError`` (only a person can fix it): ``what``
        ("the tool NAME"; through a sub-agent, "the sub-agent NAME's tool TOOL") is not configured
        right (or, with ``started`` False, could not start), ``why`` says what to change. The run's
        ``misconfiguration`` keeps both as data."""
        wrong = Misconfiguration(what=what.removeprefix("the "), why=why, started=started)
        return cls("failed", wrong.reason, misconfiguration=wrong)
