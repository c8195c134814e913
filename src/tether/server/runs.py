"""Runs in the server's process: each one a task that outlives the request that started it, with
its events numbered in an :class:`EventLog` any number of clients can follow and rejoin.

A run is the library's run: saved after every change in the run store, traced, resumable. The
server adds ownership (who may see it), one live run per session, and a clean stop on shutdown
(every live run is cancelled and saved as ``interrupted``, resumable).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tether.cancel import CancelSignal
from tether.events import Done
from tether.harness.agent import Agent
from tether.harness.loop import run_stream
from tether.harness.state import RunState, pending_tool_calls
from tether.harness.store import RunStore
from tether.server.events import EventLog, args_hash, event_data
from tether.server.store import ServerStore, TurnRecord
from tether.sessions import SessionStore
from tether.status import ApprovalInterruption, OutcomeUnknownInterruption
from tether.tracing import JsonlTracer

__all__ = ["LiveRun", "RunManager", "waiting"]

_log = logging.getLogger("tether.server")


@dataclass
class LiveRun:
    run_id: str
    session_id: str
    signal: CancelSignal
    log: EventLog
    task: asyncio.Task[None] | None = None
    state: RunState | None = field(default=None, repr=False)


def waiting(state: RunState) -> dict[str, Any] | None:
    """What the run waits for, as a decision must quote it: the call, its arguments and their hash."""
    w = state.interruption
    if w is None or state.status != "interrupted":
        return None
    if isinstance(w, ApprovalInterruption | OutcomeUnknownInterruption):
        call = next((c for c in pending_tool_calls(state) if c.id == w.call_id), None)
        raw = call.arguments if call is not None else ""
        return {"type": w.type, "call_id": w.call_id, "tool_name": w.tool_name, "args": w.args,
                "args_hash": args_hash(raw),
                "still_running": getattr(w, "still_running", False)}
    data = w.model_dump(mode="json")
    if w.type == "guardrail":
        data |= {"call_id": f"guardrail:{data['key']}", "args_hash": args_hash(data["key"])}
    elif w.type == "subagent":
        call = next((c for c in pending_tool_calls(state) if c.id == data["call_id"]), None)
        data["args_hash"] = args_hash(call.arguments if call is not None else "")
    return data


class RunManager:
    """Starts, follows, cancels and resumes the server's runs."""

    def __init__(self, *, home: Path, agents: dict[str, Agent], runs: RunStore, sessions: SessionStore,
                 store: ServerStore, telemetry: Any = None) -> None:
        self.home = home
        self.agents = agents
        self.runs = runs
        self.sessions = sessions
        self.store = store
        self.telemetry = telemetry
        self.live: dict[str, LiveRun] = {}
        self.by_session: dict[str, str] = {}
        self.closing = False

    def log_path(self, run_id: str) -> Path:
        return self.home / "serve" / "events" / f"{run_id}.log"

    def log(self, run_id: str) -> EventLog:
        live = self.live.get(run_id)
        return live.log if live is not None else EventLog.load(self.log_path(run_id))

    def state(self, run_id: str) -> RunState | None:
        live = self.live.get(run_id)
        if live is not None and live.state is not None:
            return live.state
        if not self.runs.exists(run_id):
            return None
        return self.runs.load(run_id)

    def live_run_of(self, session_id: str) -> str | None:
        return self.by_session.get(session_id)

    def start(self, turn: TurnRecord, text: str, chosen: dict[str, Any]) -> LiveRun:
        """Start the run that answers ``turn``: it begins now and goes on whoever listens."""
        state = RunState(run_id=turn.run_id, session_id=turn.session_id,
                         config={"agent": turn.agent, "message_id": turn.message_id, "trace_id": turn.trace_id,
                                 "served": True})
        return self._launch(turn, state, text, self.agents[turn.agent], chosen)

    def resume(self, turn: TurnRecord, state: RunState, chosen: dict[str, Any], *,
               more_turns: int | None = None, max_budget_usd: float | None = None) -> LiveRun:
        agent = self.agents[turn.agent]
        changes: dict[str, Any] = {}
        if more_turns is not None:
            changes["max_turns"] = state.turns + more_turns
        if max_budget_usd is not None:
            changes["max_budget_usd"] = max_budget_usd
        if changes:
            agent = dataclasses.replace(agent, **changes)
        return self._launch(turn, state, None, agent, chosen)

    def _launch(self, turn: TurnRecord, state: RunState, prompt: str | None, agent: Agent,
                chosen: dict[str, Any]) -> LiveRun:
        log = self.live[turn.run_id].log if turn.run_id in self.live else EventLog.load(self.log_path(turn.run_id))
        log.live = True
        live = LiveRun(turn.run_id, turn.session_id, CancelSignal(), log, state=state)
        self.live[turn.run_id] = live
        self.by_session[turn.session_id] = turn.run_id
        live.task = asyncio.get_running_loop().create_task(self._drive(live, turn, agent, state, prompt, chosen),
                                                           name=f"tether-run-{turn.run_id}")
        return live

    def _tracer(self, turn: TurnRecord) -> Any:
        tracers: list[Any] = [JsonlTracer(self.home / "traces")]
        if self.telemetry is not None:
            tracers.append(self.telemetry.tracer(trace_id=turn.trace_id, attributes={
                "tether.run_id": turn.run_id, "tether.session_id": turn.session_id,
                "tether.message_id": turn.message_id, "tether.agent": turn.agent}))
        if len(tracers) == 1:
            return tracers[0]
        from tether.tracing import FanoutTracer

        return FanoutTracer(*tracers)

    async def _drive(self, live: LiveRun, turn: TurnRecord, agent: Agent, state: RunState, prompt: str | None,
                     chosen: dict[str, Any]) -> None:
        log = live.log
        saw_done = False
        try:
            async for event in run_stream(agent, prompt, state=state, store=self.runs, tracer=self._tracer(turn),
                                          signal=live.signal, session=self.sessions):
                log.append(event.type, event_data(event, chosen))
                saw_done = saw_done or event.type == "done"
        except Exception as exc:  # refused before it began: a configuration error, a run held elsewhere
            _log.warning("run %s could not start: %s", turn.run_id, exc)
            if not saw_done:
                self._refused(state, prompt is not None, f"the run could not start: {exc}", log)
        except asyncio.CancelledError:  # the server is going away: run_stream saved the stop
            if not saw_done:
                log.append("done", {"type": "done", "run_id": state.run_id, "result": state.result().model_dump(
                    mode="json")})
            raise
        finally:
            self.live.pop(turn.run_id, None)
            if self.by_session.get(turn.session_id) == turn.run_id:
                del self.by_session[turn.session_id]
            log.close()
            with contextlib.suppress(Exception):
                self.store.touch_session(turn.session_id)

    def _refused(self, state: RunState, new: bool, reason: str, log: EventLog) -> None:
        if new:  # nothing was saved yet: record the run as failed so it is not left without an exit
            state.status, state.reason = "failed", reason
            with contextlib.suppress(Exception):
                self.runs.save(state)
            result = state.result()
        else:  # a resume refused (held by another process): the saved run is left as it is
            result = state.result().model_copy(update={"reason": reason})
        log.append("done", event_data(Done(state.run_id, result)))

    def cancel(self, run_id: str, reason: str) -> bool:
        live = self.live.get(run_id)
        if live is None:
            return False
        live.signal.cancel(reason)
        return True

    async def shutdown(self, grace_s: float = 10.0) -> None:
        """Stop every live run (saved ``interrupted``, resumable) and wait for them to end."""
        self.closing = True
        tasks = [r.task for r in self.live.values() if r.task is not None]
        for r in list(self.live.values()):
            r.signal.cancel("the server is shutting down; resume the run to continue it")
        if tasks:
            _, pending = await asyncio.wait(tasks, timeout=grace_s)
            for t in pending:
                t.cancel()
            if pending:
                await asyncio.wait(pending, timeout=2.0)

