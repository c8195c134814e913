"""Calls a run left waiting for a person's decision, told apart in its session from calls a crash cut.

A session holds the transcript, not the run: a call of its last reply without a result reads the
same there whether it waited for a decision (it never ran) or started before the process died
(whether it took effect is unknown), and a load gives both the same placeholder. A run that stops
to ask about calls notes them in the session's metadata; a new message in the session is then an
answer to them, as it is to the run itself: they are declined, not run, and the model is told so.
Any run that takes the session up again (a resume, a new message) uses the note up.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

from tether.harness.state import RunState, pending_tool_calls
from tether.messages import AssistantMessage, Message, ToolMessage
from tether.sessions import is_placeholder
from tether.status import ApprovalInterruption

__all__ = ["forget_waiting", "note_waiting", "unwaited"]

_log = logging.getLogger("tether")
_KEY = "calls_waiting"  # in the session's metadata: {"run_id": ..., "calls": [call ids]}


def note_waiting(session: Any, state: RunState) -> None:
    """At a run's end: the calls it leaves waiting for a decision (none started; a call cut by a
    stop or a crash is not one), kept with its session. (The run took any earlier note away as it
    took the session up.)"""
    load, save = getattr(session, "load_meta", None), getattr(session, "save_meta", None)
    if load is None or save is None or not state.session_id or not isinstance(state.interruption, ApprovalInterruption):
        return
    waiting = [c.id for c in pending_tool_calls(state) if c.id not in state.intents]  # nothing was cut: it asks
    if not waiting:
        return
    try:
        save(state.session_id, {**load(state.session_id), _KEY: {"run_id": state.run_id, "calls": waiting}})
    except Exception as exc:  # not kept: the calls read as of unknown outcome, as they did before the note
        _log.warning("run %s: its calls waiting for a decision could not be noted", state.run_id, exc_info=exc)


def forget_waiting(session: Any, session_id: str) -> list[str]:
    """The calls the session's last run left waiting (see :func:`note_waiting`), and the note taken
    away: the run taking the session up decides them, or runs them."""
    load, save = getattr(session, "load_meta", None), getattr(session, "save_meta", None)
    if load is None or save is None:
        return []
    meta = load(session_id)
    kept = meta.get(_KEY)
    if kept is None:
        return []
    save(session_id, {k: v for k, v in meta.items() if k != _KEY})
    calls = kept.get("calls") if isinstance(kept, dict) else None
    return [c for c in calls if isinstance(c, str)] if isinstance(calls, list) else []


def unwaited(history: Sequence[Message], waiting: Sequence[str]) -> list[Message] | None:
    """``history`` without the placeholders a load gave the ``waiting`` calls of its last reply (they
    are pending again, for the new message to decline), or None when there are none to take out."""
    last = next((i for i in range(len(history) - 1, -1, -1) if isinstance(history[i], AssistantMessage)), None)
    if last is None or not waiting:
        return None
    tail = history[last + 1 :]
    if not all(isinstance(m, ToolMessage) for m in tail):
        return None  # the conversation went on after them
    ids = {c.id for c in history[last].tool_calls} & set(waiting)  # type: ignore[union-attr]
    kept = [m for m in tail if not (isinstance(m, ToolMessage) and m.call_id in ids and is_placeholder(m))]
    return None if len(kept) == len(tail) else [*history[: last + 1], *kept]
