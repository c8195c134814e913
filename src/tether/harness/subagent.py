"""A whole agent behind a tool: ``child.as_tool(name, description)``.

The child runs its own loop with its own transcript (the parent sees only its answer) and its
own limits, inside the parent's:

* **cancellation** — the child listens to the parent's signal: one Stop ends the whole tree;
* **budget** — the child may spend at most what the parent has left when the call starts, less
  a reserve for the parent's own next call (``ToolContext.reserve_usd``), and its own
  ``max_budget_usd`` if lower; what it spent is added to the parent's cost. Its turns are carved
  the same way, one kept for the parent's next call, and so are its tokens under the parent's
  ``max_run_tokens`` (``ToolContext.reserve_tokens`` kept; what it used added to the parent's
  usage). A greedy child never leaves its parent unable to answer;
* **persistence** — the child's state is saved at every step (as a run of its own in the
  parent's store, the parent keeping a reference; without such a store, inside the parent's
  record, :func:`children`), so a parent killed during a child resumes the child where it
  stopped: nothing re-paid, nothing re-run. A finished child's answer is kept, so a resume never
  runs it twice;
* **approvals** — a child that stops for a person stops the parent too
  (:class:`~tether.status.SubagentInterruption`, which carries the child's question); ``approve``
  and ``reject`` on the parent's state reach the child when the parent resumes;
* **trace** — the child's events go into the parent's stream and trace (with the child's run
  id), between ``subagent`` events that link the child run to the parent run and call.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import replace
from typing import TYPE_CHECKING, Any, ClassVar, NamedTuple

from tether.errors import ConfigError
from tether.events import Done, ReasoningDelta, Subagent, TextDelta, TraceOnly
from tether.status import EMPTY_ANSWER, Misconfiguration, Stop
from tether.tools.base import ToolContext, ToolError, ToolInterrupt, ToolResult
from tether.usage import Usage

if TYPE_CHECKING:
    from tether.harness.agent import Agent
    from tether.harness.state import RunState
    from tether.status import Stop

__all__ = [
    "DEFAULT_MAX_DEPTH",
    "AgentTool",
    "ToolInterrupt",
    "children",
    "depth_of",
    "parent_in_header",
    "parent_of",
    "saved_child",
]


_NAME = "subagents"  # this feature's part of RunState.ext
DEFAULT_MAX_DEPTH = 4  # levels of delegation below the first run (an agent given itself recurses)
MAX_ANSWER_CHARS = 100_000  # of a child's answer the parent reads (and keeps): as read_file's bound
MAX_REASON_CHARS = 2_000  # of a child's reason for stopping: a sentence, not a tool's whole error


def children(state: RunState) -> dict[str, Any]:
    """A parent's sub-agent calls: call id → the child's saved state while it runs (or, when the
    child is saved as a run of its own, a reference to it: :func:`saved_child` reads either), then
    its kept answer (``{"done": true, ...}``; its text only until the call's result is in the
    transcript, see :func:`_let_go`). Kept in the parent's ``RunState.ext``."""
    part = state.ext_state(_NAME)
    older = state.legacy("children", "parent_run_id", "parent_call_id")  # runs saved before ext
    if older.get("children"):
        part.setdefault("children", older["children"])
    if older.get("parent_run_id"):
        part.setdefault("parent", {"run_id": older["parent_run_id"], "call_id": older.get("parent_call_id")})
    found: dict[str, Any] = part.setdefault("children", {})
    return found


def depth_of(state: RunState) -> int:
    """How many levels of delegation lie above this run: 0 for a run that is no sub-agent."""
    parent_of(state)  # takes over what an older save kept
    parent = state.ext_state(_NAME).get("parent") or {}
    return int(parent.get("depth") or (1 if parent.get("run_id") else 0))


def parent_in_header(header: Any) -> str | None:
    """The run id of the parent of the run whose saved header (:meth:`RunStore.list
    <tether.harness.store.RunStore.list>`'s rows) this is; None for a run that is no sub-agent.
    A child saved as a run of its own is listed among the runs: this tells it apart."""
    ext = header.get("ext") if isinstance(header, dict) else None
    part = ext.get(_NAME) if isinstance(ext, dict) else None
    parent = part.get("parent") if isinstance(part, dict) else None
    run_id = parent.get("run_id") if isinstance(parent, dict) else None
    return run_id if isinstance(run_id, str) and run_id else None


def parent_of(state: RunState) -> tuple[str | None, str | None]:
    """A sub-agent's parent: (its run id, the call that started this child); (None, None) for a
    run that is no sub-agent."""
    children(state)  # takes over what an older save kept
    parent = state.ext_state(_NAME).get("parent") or {}
    return parent.get("run_id"), parent.get("call_id")


class _TraceOnlyUp:
    """The child's tracer: what its run puts in the trace only (its side calls, its retrievals, its
    own sub-agents' last lines) goes up into the parent's stream as trace-only lines, to reach the
    trace files; without it they were lost. The rest of the child's events come up as its stream."""

    def __init__(self, ctx: ToolContext, run_id: str) -> None:
        self.ctx, self.run_id = ctx, run_id

    def write(self, event: Any) -> None:
        if event.type in ("side_call", "retrieval") or (event.type == "done" and event.run_id != self.run_id):
            self.ctx.emit(TraceOnly(event))

    def close(self) -> None:
        pass


_APART = "saved_apart"  # a running child's record that says where its state is: its own run in the store


def _apart(runs: Any) -> bool:
    """Whether ``runs`` can keep a child's state as a run of its own (it saves and loads runs)."""
    return callable(getattr(runs, "save", None)) and callable(getattr(runs, "load", None))


class _ChildStore:
    """Saves the child's state, and the parent with it.

    With a store that loads runs back (RunStore, PgRunStore), the child is saved there as a run of
    its own, its transcript appended as any run's, and the parent keeps only a reference to it
    while it runs (what it spent, how far it got): saving the child's whole state inside the
    parent's at each of its steps made a child of n steps cost n² (120 steps: 13.6 s, against
    0.45 s run alone). The child is saved first, so the parent's reference never points past it; a
    crash between the two leaves the parent's record behind the child's, and what the child spent
    since is charged from its own record at its next save. A child stopped for a person is kept
    whole in the parent's record (its question is read from there). Without such a store, the
    child's state is saved inside the parent's, as before."""

    def __init__(self, ctx: ToolContext) -> None:
        self.ctx = ctx
        self.runs = ctx.runs if _apart(ctx.runs) else None
        # The child's own run held, and checked current, as any run's (see the loop's _hold).
        self.lock = getattr(self.runs, "lock", None)
        self.check_current = getattr(self.runs, "check_current", None)

    def save(self, state: RunState, *, rewrite: bool = False, durable: bool = True) -> None:
        parent, call_id = self.ctx.state, self.ctx.call_id
        before = children(parent).get(call_id)
        if self.runs is not None:
            self.runs.save(state, rewrite=rewrite, durable=durable)
        charge_child(parent, call_id, state)  # in the same save: the parent's cost is always whole
        whole = self.runs is None or state.status == "interrupted"
        children(parent)[call_id] = _whole(before, state, rewrite) if whole else _reference(state)
        if self.ctx.on_save is not None:
            # The parent's record of a running child changes only in what it spent, which its own
            # record says too: made durable when it first points there, or holds the child whole.
            first = not (isinstance(before, dict) and before.get(_APART))
            self.ctx.on_save(durable and (whole or first))


def _whole(before: Any, child: RunState, rewrite: bool) -> dict[str, Any]:
    """The child's whole state as its record in the parent's, its messages taken from the record
    ``before`` as far as they are unchanged (no rewrite, as a store appends): dumping every one of
    them at every step made a child of n steps cost n² without a store too."""
    kept = before.get("messages") if isinstance(before, dict) and before.get("run_id") == child.run_id else None
    if rewrite or not isinstance(kept, list) or len(kept) > len(child.messages):
        return child.model_dump(mode="json")
    record = child.model_dump(mode="json", exclude={"messages"})
    new = child.model_copy(update={"messages": child.messages[len(kept) :]})
    kept.extend(new.model_dump(mode="json", include={"messages"})["messages"])
    record["messages"] = kept
    return record


def _reference(child: RunState) -> dict[str, Any]:
    """A running child's record in its parent's state, its state being saved as a run of its own:
    what :func:`charged`, :func:`_of_this_reply` and :func:`_let_go` read, and where it is."""
    return {
        _APART: True,
        "run_id": child.run_id,
        "status": child.status,
        "cost_usd": child.cost_usd,
        "cost_unknown_usd": child.cost_unknown_usd,
        "tokens_unknown": child.tokens_unknown,
        "usage": child.usage.model_dump(mode="json"),
        "turns": child.turns,
        "delegated_turns": child.delegated_turns,
        "ext": {_NAME: {"parent": child.ext_state(_NAME).get("parent")}},
    }


def saved_child(parent: RunState, call_id: str, runs: Any = None) -> RunState | None:
    """The state of the child that call ``call_id`` of ``parent`` runs, as last saved: from the
    parent's record, or, for a running child saved as a run of its own, from ``runs`` (the store
    the parent is saved in). None when the call has no running or stopped child (a finished one's
    answer is kept, not its state). A :class:`~tether.errors.ConfigError` when the child's state
    is in a store not given."""
    saved = children(parent).get(call_id)
    if not isinstance(saved, dict) or saved.get("done"):
        return None
    if not saved.get(_APART):
        from tether.harness.state import RunState

        return _newest(RunState.model_validate(saved), runs)
    if not _apart(runs):
        raise ConfigError(
            f"the sub-agent of call {call_id} is saved as run {saved.get('run_id')!r} in the store the "
            f"run {parent.run_id} was saved in: resume it with that store"
        )
    loaded: RunState = runs.load(str(saved["run_id"]))
    return loaded


def _newest(kept: RunState, runs: Any) -> RunState:
    """A child kept whole in its parent's record (it stopped for a person), or its own run in
    ``runs`` if that was saved since: the child is saved before its parent, so a kill between the
    two (the child's first step after a decision) leaves the parent's copy behind. Resumed from
    that copy, the child was refused as stale and the approved call never ran (its parent's model
    read the store's error as the call's)."""
    exists = getattr(runs, "exists", None)
    if not _apart(runs) or not callable(exists) or not exists(kept.run_id):
        return kept
    saved: RunState = runs.load(kept.run_id)
    return saved if saved.commit_seq > kept.commit_seq else kept


def charged(parent: RunState, call_id: str) -> tuple[float, float]:
    """What the child's spending has already added to the parent's cost: its last saved record
    says (a state dump, or the kept answer), so there is no second account to keep in step."""
    saved = children(parent).get(call_id)
    if not isinstance(saved, dict):
        return 0.0, 0.0
    return float(saved.get("cost_usd") or 0.0), float(saved.get("cost_unknown_usd") or 0.0)


def charged_turns(parent: RunState, call_id: str) -> int:
    """The model turns of the child (and of its own sub-agents) already counted in the parent's
    ``delegated_turns``, as its last saved record says."""
    saved = children(parent).get(call_id)
    if not isinstance(saved, dict):
        return 0
    return int(saved.get("turns") or 0) + int(saved.get("delegated_turns") or 0)


def charged_usage(parent: RunState, call_id: str) -> Usage:
    """The child's tokens (and its own sub-agents') already added to the parent's usage, as its
    last saved record says. A record kept before they were added (no ``usage`` in a reference or
    an answer) counts none: the child's tokens are added at its next save."""
    saved = children(parent).get(call_id)
    usage = saved.get("usage") if isinstance(saved, dict) else None
    return Usage.model_validate(usage) if isinstance(usage, dict) else Usage()


def _charged_unknown_tokens(parent: RunState, call_id: str) -> int:
    """The worst case of the child's requests lost in a kill already added to the parent's
    ``tokens_unknown``, as its last saved record says."""
    saved = children(parent).get(call_id)
    return int(saved.get("tokens_unknown") or 0) if isinstance(saved, dict) else 0


def charged_tokens(parent: RunState, call_id: str) -> int:
    """All the child's tokens already counted against the parent's token limit: its usage and its
    lost requests' worst case (what :func:`charged` is for dollars). Given back to its share on
    resume, and taken from what was promised to it."""
    return charged_usage(parent, call_id).total_tokens + _charged_unknown_tokens(parent, call_id)


def charge_child(parent: RunState, call_id: str, child: RunState) -> None:
    """Add to the parent's cost, usage and delegated turns what the child spent since its last
    saved record (never twice); called before that record is replaced."""
    cost, unknown = charged(parent, call_id)
    turns = charged_turns(parent, call_id)
    parent.cost_usd += child.cost_usd - cost
    parent.cost_unknown_usd += child.cost_unknown_usd - unknown
    parent.tokens_unknown += child.tokens_unknown - _charged_unknown_tokens(parent, call_id)
    parent.delegated_turns += child.turns + child.delegated_turns - turns
    before, now = charged_usage(parent, call_id), child.usage
    if now != before:
        parent.usage = parent.usage + Usage(
            prompt_tokens=max(0, now.prompt_tokens - before.prompt_tokens),
            completion_tokens=max(0, now.completion_tokens - before.completion_tokens),
            cached_tokens=max(0, now.cached_tokens - before.cached_tokens),
            cache_write_tokens=max(0, now.cache_write_tokens - before.cache_write_tokens),
            estimated=now.estimated,
        )
    for model in child.unpriced_models:
        if model not in parent.unpriced_models:
            parent.unpriced_models.append(model)


def _given(parent: RunState) -> dict[str, Any]:
    """The limits given to the parent's children that have not finished: call id → ``usd``,
    ``turns`` and ``tokens`` (None: unbounded)."""
    found: dict[str, Any] = parent.ext_state(_NAME).setdefault("given", {})
    return found


class _Beside(NamedTuple):
    """What the children running beside a call were given and have not spent yet, and how many
    calls beside it that share the parent's limits have yet to start (see :func:`_beside`)."""

    usd: float = 0.0
    turns: int = 0
    tokens: int = 0
    waiting: int = 0


def _beside(ctx: ToolContext, name: str) -> _Beside:
    """The children of this parent's reply that run beside this call (a parallel batch): what those
    started were given and have not spent yet, in dollars, turns and tokens, and how many calls of this
    tool, or of another sub-agent tool running side by side, after this one have yet to start.
    Together they may not spend past the parent's limits, so this call gets its share of the rest.
    Only calls still pending count (a record a crash left is no promise)."""
    from tether.harness.state import pending_tool_calls

    parent = ctx.state
    given, kept = _given(parent), children(parent)
    usd, turns, tokens, waiting, after = 0.0, 0, 0, 0, False
    for call in pending_tool_calls(parent):
        limits, record = given.get(call.id), kept.get(call.id)
        if call.id == ctx.call_id or (
            isinstance(record, dict) and record.get("done") and _of_this_reply(parent, record)
        ):
            after = after or call.id == ctx.call_id
            continue
        if not isinstance(limits, dict):
            waiting += after and _shares(ctx, call.name, name)
            continue
        if limits.get("usd") is not None:
            usd += max(0.0, float(limits["usd"]) - sum(charged(parent, call.id)))
        if limits.get("turns") is not None:
            turns += max(0, int(limits["turns"]) - charged_turns(parent, call.id))
        if limits.get("tokens") is not None:
            tokens += max(0, int(limits["tokens"]) - charged_tokens(parent, call.id))
    return _Beside(usd, turns, tokens, waiting)


def _let_go(parent: RunState) -> None:
    """What the records of calls that have their results need not keep: the transcript holds the
    answer (up to 100,000 characters each), and a stopped child's whole state is of no use once its
    call was settled otherwise (declined). Saved with every save of the parent, they made each
    save, and each step of a later child, rewrite them all. What the child spent, and how it
    ended, stays."""
    from tether.harness.state import pending_tool_calls

    waiting = {call.id for call in pending_tool_calls(parent)}
    kept = children(parent)
    for call_id, record in list(kept.items()):
        if call_id in waiting or not isinstance(record, dict):
            continue
        if record.get("done"):
            record.pop("output", None)
            continue
        parent_turn = (((record.get("ext") or {}).get(_NAME) or {}).get("parent") or {}).get("turn")
        kept[call_id] = {"done": True, "parent_turn": parent_turn} | {
            key: record.get(key)
            for key in (
                "run_id",
                "status",
                "reason",
                "misconfiguration",
                "cost_usd",
                "cost_unknown_usd",
                "tokens_unknown",
                "usage",
                "turns",
                "delegated_turns",
            )
        }


def _record_of_this_call(parent: RunState, call_id: str) -> Any:
    """The kept record of the child this call started (its saved state, or its answer); None when
    it has none. A record of an earlier reply's call with the same id (a model that numbers its
    calls anew each reply) is that call's, which has its result: it is let go (its cost stays in
    the parent's), and this call starts its own child."""
    saved = children(parent).get(call_id)
    if not isinstance(saved, dict) or _of_this_reply(parent, saved):
        return saved
    children(parent).pop(call_id)
    _given(parent).pop(call_id, None)
    return None


def _of_this_reply(parent: RunState, saved: dict[str, Any]) -> bool:
    """Whether a child's record is of a call of the parent's last reply (or kept before records
    said which reply's call started them), not of an earlier call with the same id."""
    if saved.get("done"):
        turn = saved.get("parent_turn")
    else:
        turn = (((saved.get("ext") or {}).get(_NAME) or {}).get("parent") or {}).get("turn")
    return turn is None or turn == parent.turns


def _shares(ctx: ToolContext, tool_name: str, name: str) -> bool:
    """Whether a call of ``tool_name`` beside a call of ``name`` starts a sub-agent that shares the
    parent's limits with it: a call of the same tool, or of another sub-agent tool that runs side
    by side (a researcher and a writer in one reply)."""
    tool = ctx.tools.get(tool_name)
    return tool_name == name or (isinstance(tool, AgentTool) and bool(getattr(tool, "parallel", False)))


def _misconfiguration(child: RunState, result: Any) -> dict[str, Any] | None:
    """What only a person can fix that ended the child, as its record in the parent keeps it (the
    reason why within MAX_REASON_CHARS); None for any other end. A child state saved before the
    kind of stop was kept as data (no such field in the save) is read from its words, as then."""
    wrong = result.misconfiguration
    if wrong is None and "misconfiguration" not in child.model_fields_set and result.status == "failed":
        wrong = _older_misconfiguration(result.reason)
    return None if wrong is None else wrong.model_copy(update={"why": _brief(wrong.why)}).model_dump(mode="json")


def _kept_misconfiguration(done: dict[str, Any]) -> Misconfiguration | None:
    """What a finished child's kept record says only a person can fix; a record kept before that
    was data (no such key) is read from the reason's words, as it was then."""
    if "misconfiguration" not in done:
        return _older_misconfiguration(done.get("reason")) if done.get("status") == "failed" else None
    kept = done["misconfiguration"]
    return Misconfiguration.model_validate(kept) if isinstance(kept, dict) else None


def _older_misconfiguration(reason: str | None) -> Misconfiguration | None:
    """A misconfiguration as runs saved before it was data said it, in the words of their reason:
    "the WHAT is not configured right: WHY", or "the sub-agent NAME could not start: WHY"."""
    if not reason:
        return None
    if reason.startswith("the ") and Misconfiguration.NOT_CONFIGURED in reason:
        what, _, why = reason.partition(Misconfiguration.NOT_CONFIGURED)
        return Misconfiguration(what=what.removeprefix("the "), why=why)
    if reason.startswith("the sub-agent ") and Misconfiguration.NO_START in reason:
        what, _, why = reason.partition(Misconfiguration.NO_START)
        return Misconfiguration(what=what.removeprefix("the "), why=why, started=False)
    return None


def _brief(reason: str | None) -> str | None:
    """A child's reason for stopping within MAX_REASON_CHARS, saying how much more it had."""
    if reason is None or len(reason) <= MAX_REASON_CHARS:
        return reason
    return f"{reason[:MAX_REASON_CHARS]} [... {len(reason) - MAX_REASON_CHARS:,} more characters of the reason cut]"


def _bounded(text: str | None, name: str) -> str | None:
    """A child's answer within MAX_ANSWER_CHARS: its first two thirds and its last third, with a
    line between them saying what was cut."""
    if text is None or len(text) <= MAX_ANSWER_CHARS:
        return text
    head = MAX_ANSWER_CHARS * 2 // 3
    tail = MAX_ANSWER_CHARS - head
    note = (
        f"\n[... {len(text) - head - tail:,} of {len(text):,} characters cut here: the answer of the sub-agent "
        f"{name} is longer than {MAX_ANSWER_CHARS:,} characters; ask it for a shorter one if the middle matters ...]\n"
    )
    return text[:head] + note + text[len(text) - tail :]


class AgentTool:
    input_schema: ClassVar[dict[str, Any]] = {
        "type": "object",
        "properties": {
            "task": {
                "type": "string",
                "description": "what the sub-agent should do, in full: it sees nothing of this conversation",
            }
        },
        "required": ["task"],
        "additionalProperties": False,
    }
    read_only = False
    needs_approval = False
    # It listens to the run's signal and ends by itself (its stop saved, traced and accounted):
    # on Stop the harness lets it finish that instead of cancelling it from outside.
    ends_on_cancel = True
    # Running the call again resumes the child from its saved state (or returns its kept answer).
    idempotent = True

    def __init__(self, agent: Agent, name: str, description: str, *, max_depth: int = DEFAULT_MAX_DEPTH) -> None:
        self.agent = agent
        self.name = name
        self.description = description
        self.max_depth = max_depth

    async def execute(self, input: dict[str, Any], ctx: ToolContext) -> ToolResult | str | Stop:
        from tether.harness.state import RunState

        if ctx.run_agent is None:
            raise ToolError(
                f"{self.name} runs an agent, which only a running loop can do (its context has no run_agent)"
            )
        parent = ctx.state
        _let_go(parent)
        saved = _record_of_this_call(parent, ctx.call_id)
        if isinstance(saved, dict) and saved.get("done"):
            return self._answer(saved)  # finished before a crash: its answer is kept, not re-run
        if isinstance(saved, dict):
            child = saved_child(parent, ctx.call_id, ctx.runs)
            assert child is not None
            if child.status in ("completed", "failed"):  # it ended, and the process died before its answer was kept
                return self._keep(ctx, child, child.result())
            self._apply_decision(parent, child, ctx.call_id)
            prompt = None
        else:
            refused = self._blank(input) or self._refusal(ctx) or self._no_budget(ctx) or self._no_tokens(ctx)
            if refused is not None:
                return refused
            child = RunState()
            depth = depth_of(parent) + 1
            child.ext_state(_NAME)["parent"] = {
                "run_id": ctx.run_id,
                "call_id": ctx.call_id,
                "depth": depth,
                "turn": parent.turns,  # the parent's reply that made the call: its id may come again later
            }
            prompt = str(input["task"])
        agent = replace(
            self.agent, max_budget_usd=self._budget(ctx), max_turns=self._turns(ctx), max_run_tokens=self._tokens(ctx)
        )
        if getattr(self, "parallel", False):  # what the calls beside it may not count on (_beside)
            given = {"usd": agent.max_budget_usd, "turns": agent.max_turns, "tokens": agent.max_run_tokens}
            _given(ctx.state)[ctx.call_id] = given
        carve, tokens, call_id = agent.max_budget_usd, agent.max_run_tokens, ctx.call_id
        if carve is not None and ctx.budget_left_usd is not None:
            # What a call beside it (a policy's verdict, a server's sampling request) may not count
            # on: the child's budget, less what it has spent (added to the parent's cost as it goes).
            parent.hold(call_id, lambda: carve - sum(charged(parent, call_id)))
        if tokens is not None and ctx.tokens_left is not None:  # the same for its tokens
            parent.hold_tokens(call_id, lambda: tokens - charged_tokens(parent, call_id))
        try:
            return await self._run_child(ctx, agent, child, prompt)
        finally:
            parent.hold(call_id, None)
            parent.hold_tokens(call_id, None)

    async def _run_child(
        self, ctx: ToolContext, agent: Agent, child: RunState, prompt: str | None
    ) -> ToolResult | str | Stop:
        """Run (or resume) ``child`` with its limits, and keep its answer in the parent's state."""
        assert ctx.run_agent is not None  # checked as the call began
        # A resumed child's with what it had spent before: a trace's spans then charge its next
        # turn's cost to it, not to its parent's next turn.
        before = None if prompt is not None else child.cost_usd
        ctx.emit(Subagent(ctx.run_id, ctx.call_id, self.name, child.run_id, "started", before))
        result, store = None, _ChildStore(ctx)
        try:
            # A Stop while the child starts (its extensions) ends the child at once, its own way.
            up = _TraceOnlyUp(ctx, child.run_id)
            async for event in ctx.run_agent(
                agent, prompt, state=child, store=store, signal=ctx.signal, tracer=up, deps=ctx.deps
            ):
                if isinstance(event, Done):
                    result = event.result
                    ctx.emit(TraceOnly(event))  # the child's trace ends with its stop line; the stream goes on
                elif not isinstance(event, TextDelta | ReasoningDelta):
                    ctx.emit(event)  # the child's steps, with its own run id, in the parent's trace
        except ConfigError as exc:  # refused as it started (what its extensions brought): the person's to fix
            return self._misconfigured(ctx, child, exc)
        assert result is not None
        self._stop_with_child(ctx, child, result)
        return self._keep(ctx, child, result)

    def check_config(self, parent: Agent, seen: set[int], check_agent: Callable[[Agent, set[int]], Any]) -> None:
        """When the parent's run starts: refuse (:class:`ConfigError`, naming this tool) a child
        whose configuration cannot work (a model of no known provider, a key not set, a limit that
        is no amount, no price under the parent's budget). That is the person's to fix: told to the
        parent's model as a call's error, it would only be retried or worked around. What the
        child's extensions bring is known once they start, and checked then (:meth:`execute`)."""
        if id(self) in seen:  # an agent given itself as a tool: checked once
            return
        seen.add(id(self))
        # Its cwd is checked when it starts: the parent may make that folder first.
        child = replace(self.agent, extensions=(), cwd=None)
        if child.max_budget_usd is None and parent.max_budget_usd is not None:
            child = replace(child, max_budget_usd=parent.max_budget_usd)  # it is given a share of the parent's
        try:
            check_agent(child, seen)
        except ConfigError as exc:
            raise ConfigError(f"the sub-agent {self.name}: {exc}") from None

    def _misconfigured(self, ctx: ToolContext, child: RunState, exc: ConfigError) -> Stop:
        """A child that could not start for its configuration ends the parent ``failed``, saying
        why: the parent's model could not fix it."""
        from tether._secrets import known_secrets
        from tether.providers.http import scrubbed

        _given(ctx.state).pop(ctx.call_id, None)
        stop = Stop.not_configured(f"sub-agent {self.name}", scrubbed(str(exc), known_secrets()), started=False)
        ctx.emit(Subagent(ctx.run_id, ctx.call_id, self.name, child.run_id, "failed", child.cost_usd, stop.reason))
        return stop

    def _stop_with_child(self, ctx: ToolContext, child: RunState, result: Any) -> None:
        """A child that stopped for Stop or for a person stops the parent too, the call pending."""
        waits = result.status == "interrupted" and result.interruption is not None
        if not ctx.signal.cancelled and not (waits and result.interruption.type != "cancelled"):
            return
        status = result.status if ctx.signal.cancelled else "interrupted"
        ctx.emit(
            Subagent(
                ctx.run_id, ctx.call_id, self.name, child.run_id, status, result.cost_usd, _brief(result.reason) or ""
            )
        )
        ctx.signal.raise_if_cancelled()
        from tether.status import SubagentInterruption

        raise ToolInterrupt(
            f"the sub-agent {self.name} is waiting: {_brief(result.reason)}",
            SubagentInterruption(
                call_id=ctx.call_id, tool_name=self.name, child_run_id=child.run_id, child=result.interruption
            ),
        )

    def _blank(self, input: dict[str, Any]) -> ToolResult | None:
        """A task with no words: the child sees nothing else, so it would be paid to guess."""
        if str(input.get("task", "")).strip():
            return None
        return ToolResult(
            f"Not run: the task for the sub-agent {self.name} is empty. It sees nothing of this "
            "conversation: say in full what it should do.",
            is_error=True,
        )

    def _refusal(self, ctx: ToolContext) -> ToolResult | None:
        """Checked before a new child starts: the depth of delegation, and the turns left to the
        whole tree (a parent's ``max_turns`` bounds everything it sets going)."""
        depth = depth_of(ctx.state) + 1
        if depth > self.max_depth:
            return ToolResult(
                f"Not run: the sub-agent {self.name} would be {depth} levels of delegation deep, past the "
                f"limit of {self.max_depth} (max_depth). Do the task here, or answer with what you have.",
                is_error=True,
            )
        if ctx.turns_left is not None and self._turns_share(ctx) <= 0:
            beside = ", beside those the sub-agents running with it were given" if self._siblings(ctx).turns else ""
            return ToolResult(
                f"Not run: this run has no model turns left for the sub-agent {self.name}{beside} (its "
                "max_turns counts the turns of every sub-agent it starts, and its last turn is kept for "
                "its own answer). Answer with what you have.",
                is_error=True,
            )
        return None

    def _no_budget(self, ctx: ToolContext) -> ToolResult | None:
        budget = self._budget(ctx)
        if budget is None or budget > 0:
            return None
        left = ctx.budget_left_usd or 0.0
        beside = " and for the sub-agents running beside this one" if self._siblings(ctx).usd > 0 else ""
        return ToolResult(
            f"Not run: the budget left (${max(0.0, left):.6f}) is kept for this run's own answer{beside}, "
            f"so the sub-agent {self.name} has nothing to spend. Answer with what you have.",
            is_error=True,
        )

    def _budget(self, ctx: ToolContext) -> float | None:
        """The child's budget: its own, within its share of what the parent has left when the call
        starts, less the parent's reserve for its own next call (the share: see :func:`_beside`).
        What the child spent before a stop is already in the parent's spending, so it is given
        back to the carve on resume."""
        limit = self.agent.max_budget_usd
        if ctx.budget_left_usd is None:
            return limit
        spent_before = sum(charged(ctx.state, ctx.call_id))
        usd, _, _, waiting = self._siblings(ctx)
        # A request the parent has out beside it (a policy's verdict on another call's result) is
        # not charged yet: its worst case is not the child's to spend.
        note = ctx.state.call_in_flight
        out = (note.max_cost_usd or 0.0) if note is not None else 0.0
        carve = (ctx.budget_left_usd - ctx.reserve_usd - usd - out) / (1 + waiting) + spent_before
        return min(limit if limit is not None else math.inf, max(0.0, carve))

    def _turns(self, ctx: ToolContext) -> int | None:
        """The child's max_turns: its own, within its share of the turns the parent has left (as
        the budget)."""
        limit = self.agent.max_turns
        if ctx.turns_left is None:
            return limit
        left = max(0, self._turns_share(ctx) + charged_turns(ctx.state, ctx.call_id))
        return left if limit is None else min(limit, left)

    def _turns_share(self, ctx: ToolContext) -> int:
        """This call's share of the turns left, less the one the parent keeps for its own next call
        (to read the answer and reply, as the budget keeps ``reserve_usd``): a child given every
        turn left ended its parent ``max_turns_exceeded`` with no answer."""
        assert ctx.turns_left is not None
        _, turns, _, waiting = self._siblings(ctx)
        return -(-max(0, ctx.turns_left - 1 - turns) // (1 + waiting))  # rounded up: never past what is left

    def _siblings(self, ctx: ToolContext) -> _Beside:
        """:func:`_beside`, for a tool whose calls may run at the same time; one at a time, each
        child starts when the one before it has ended and spent what it spent."""
        return _beside(ctx, self.name) if getattr(self, "parallel", False) else _Beside()

    def _tokens(self, ctx: ToolContext) -> int | None:
        """The child's ``max_run_tokens``: its own, within its share of what the parent's token
        limit leaves when the call starts, less the parent's reserve for its own next call and a
        request it has out (as the budget). What the child used before a stop (and the worst case of
        a request of its lost in a kill) is already counted in the parent, so it is given back to
        the carve on resume."""
        limit = self.agent.max_run_tokens
        if ctx.tokens_left is None:
            return limit
        beside = self._siblings(ctx)
        out: int = ctx.state.tokens_in_flight
        share = (ctx.tokens_left - ctx.reserve_tokens - beside.tokens - out) // (1 + beside.waiting)
        carve = max(0, share + charged_tokens(ctx.state, ctx.call_id))
        return carve if limit is None else min(limit, carve)

    def _no_tokens(self, ctx: ToolContext) -> ToolResult | None:
        """A child the parent's token limit leaves nothing to use is not started (as the budget's)."""
        tokens = self._tokens(ctx)
        if ctx.tokens_left is None or tokens is None or tokens > 0:
            return None
        beside = " and for the sub-agents running beside this one" if self._siblings(ctx).tokens > 0 else ""
        return ToolResult(
            f"Not run: the tokens left of this run's token limit ({max(0, ctx.tokens_left):,}) are kept for "
            f"its own answer{beside}, so the sub-agent {self.name} has none to use. Answer with what you have.",
            is_error=True,
        )

    def _keep(self, ctx: ToolContext, child: RunState, result: Any) -> ToolResult | str | Stop:
        """Keep the finished child's answer in the parent's state (its cost already added), in one save."""
        # cost_usd is what the child spent (0.0 where a model had no price: the parent then lists
        # that model as unpriced, and reports its own cost as unknown).
        done = {
            "done": True,
            "run_id": child.run_id,
            "status": result.status,
            "reason": _brief(result.reason),
            "misconfiguration": _misconfiguration(child, result),
            "output": _bounded(result.text, self.name),
            "cost_usd": child.cost_usd,
            "cost_unknown_usd": child.cost_unknown_usd,
            "tokens_unknown": child.tokens_unknown,
            "usage": child.usage.model_dump(mode="json"),
            "turns": result.turns,
            "delegated_turns": child.delegated_turns,
            "parent_turn": (child.ext_state(_NAME).get("parent") or {}).get("turn"),
        }
        charge_child(ctx.state, ctx.call_id, child)
        children(ctx.state)[ctx.call_id] = done
        if getattr(self, "parallel", False):
            _given(ctx.state).pop(ctx.call_id, None)  # all it spent is in the parent's cost now
        if ctx.on_save is not None:
            ctx.on_save(True)
        ctx.emit(
            Subagent(
                ctx.run_id, ctx.call_id, self.name, child.run_id, result.status, result.cost_usd, done["reason"] or ""
            )
        )
        return self._answer(done)

    def _answer(self, done: dict[str, Any]) -> ToolResult | str | Stop:
        # Only a person can fix a child's configuration: told to this run's model, it would work around it.
        wrong = _kept_misconfiguration(done)
        if wrong is not None:
            return Stop.not_configured(f"sub-agent {self.name}'s {wrong.what}", wrong.why, started=wrong.started)
        if done["status"] == "completed" and not done.get("output"):  # said, not read as "nothing found"
            return f"(The sub-agent {self.name} completed without an answer: {done.get('reason') or EMPTY_ANSWER}.)"
        if done["status"] == "completed":
            return str(done["output"])
        partial = f" What it had so far: {done['output']}" if done.get("output") else ""
        return ToolResult(
            f"The sub-agent {self.name} stopped without finishing ({done['status']}: "
            f"{_brief(done.get('reason'))}).{partial} Carry on without it, or try a smaller task.",
            is_error=True,
        )

    @staticmethod
    def _apply_decision(parent: RunState, child: RunState, call_id: str) -> None:
        """A person's decision on the parent's SubagentInterruption, handed to the child."""
        from tether.harness.state import approve, reject
        from tether.status import SubagentInterruption

        answer = parent.answer
        if answer is not None and isinstance(answer.question, SubagentInterruption):
            if answer.question.call_id != call_id:
                return
            parent.answer = None
            approved, reason, content = answer.approved, answer.reason, answer.content
        else:  # a run saved before RunState.answer: a decision kept per call
            older = parent.legacy("child_decisions").get("child_decisions") or {}
            decision = older.pop(call_id, None)
            if older:
                parent.ext.setdefault("legacy", {})["child_decisions"] = older
            if decision is None:
                return
            approved, reason, content = bool(decision.get("approve")), decision.get("reason"), None
        if child.interruption is None:
            return
        if approved:
            from tether.errors import UserError

            try:
                approve(child, reason=reason, content=content)  # a form's values go with it
            except UserError:  # the child's question is no form: the values answer nothing there
                approve(child, reason=reason)
        else:
            reject(child, reason=reason)
