"""``tether runs`` (every run, one line each), ``tether show RUN`` (a run's transcript, with every
decision in words) and ``tether trace RUN`` (its trace, one JSON line per event).

A damaged file never stops these with a traceback: a run whose header is damaged is skipped by
``runs`` (and named on stderr), and damaged trace lines are skipped by ``trace`` (and counted).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tether.cli.common import first_error, load_run, positive_int, run_store, unknown_status, usage_error
from tether.cli.common import settings as load_settings

if TYPE_CHECKING:
    from tether.config import Settings
    from tether.harness.state import RunState

__all__ = ["add_parsers"]


RUNS_SHOWN = 20


def add_parsers(sub: Any) -> None:
    r = sub.add_parser(
        "runs",
        help=f"list runs, newest first (the latest {RUNS_SHOWN}; --all for every one, with sub-agents' runs)",
    )
    r.add_argument("listing", nargs="?", choices=["list"], metavar="list", help="the same as `tether runs`")
    how_many = r.add_mutually_exclusive_group()  # --all with --limit dropped the limit without a word
    how_many.add_argument(
        "--limit", type=positive_int, default=RUNS_SHOWN, metavar="N", help=f"show the latest N (default {RUNS_SHOWN})"
    )
    how_many.add_argument(
        "--all", action="store_true", help="show every run, each sub-agent's run under the run that started it"
    )
    r.add_argument("--json", action="store_true", help="print the runs as one JSON array")
    r.set_defaults(handler=cmd_runs)
    sh = sub.add_parser("show", help="show a run's transcript")
    sh.add_argument("run_id", metavar="RUN_ID", nargs="?", default=LAST, help=_LAST_HELP)
    sh.add_argument("--full", action="store_true", help="print long messages and tool outputs whole")
    sh.set_defaults(handler=cmd_show)
    tr = sub.add_parser("trace", help="print a run's trace (JSON lines)")
    tr.add_argument("run_id", metavar="RUN_ID", nargs="?", default=LAST, help=_LAST_HELP)
    tr.set_defaults(handler=cmd_trace)


LAST = "last"
_LAST_HELP = "the run (default: last, the newest, as `tether runs` lists it first)"


def latest_run(settings: Settings, *, resumable: bool = False) -> str:
    """The newest run's id (``last``), as ``tether runs`` lists it first (a sub-agent's run is not
    one: it is listed under its parent); a usage error when none. With ``resumable`` (``tether
    resume last``), the newest that can be resumed: stopped at a limit or for a person, or saved as
    running by a process that is gone (known on this machine only: not for runs in a database)."""
    from tether.status import RESUMABLE

    held: Any = None
    if settings.database_url:
        rows, _ = _rows_of(run_store(settings).list())
    else:
        rows, _ = _rows(settings.home / "runs")
        held = run_store(settings).held
    rows = [row for row in rows if row.parent_run_id is None]
    if not rows:
        raise usage_error("there is no run yet: `tether run ...` starts one")
    if resumable:
        rows = [r for r in rows if r.status in RESUMABLE or (r.status == "running" and held and not held(r.run_id))]
        if not rows:
            raise usage_error(
                "no run can be resumed: none stopped at a limit, for a decision or by Ctrl-C (`tether runs` "
                "lists them all)"
            )
    return str(rows[0].run_id)


def _chosen(settings: Settings, run_id: str) -> str:
    return latest_run(settings) if run_id == LAST else run_id


# --- runs -------------------------------------------------------------------------------------


def cmd_runs(args: argparse.Namespace) -> int:
    from tether.cli.display import cost_text, spent_any

    settings = load_settings()
    live: Any = None  # whether a run saved as running is held by a process (on one machine only)
    if settings.database_url:  # the runs of every machine sharing the database
        rows, skipped = _rows_of(run_store(settings).list())
    else:
        rows, skipped = _rows(settings.home / "runs")
        live = run_store(settings).held
    tops = [row for row in rows if row.parent_run_id is None]
    total, hidden = len(tops), len(rows) - len(tops)
    listed = _tree(rows) if args.all else [(row, 0) for row in tops[: args.limit]]
    held = {row.run_id: live(row.run_id) for row, _ in listed if row.status == "running" and live is not None}
    lost = {row.run_id: _lost(row, held.get(row.run_id)) for row, _ in listed}
    if args.json:
        rows_out = [_json_row(row, held.get(row.run_id), lost[row.run_id]) for row, _ in listed]
        print(json.dumps(rows_out, ensure_ascii=False, indent=1))
    elif not rows and not skipped:
        print("no runs yet", file=sys.stderr)
    elif listed:
        print(f"{'run id':22} {'status':20} {'turns':>5} {'cost':>10}  model / prompt")
    for row, depth in listed if not args.json else ():
        spent = spent_any(row.usage, lost[row.run_id], row.cost_usd)
        cost = cost_text(row.cost_usd, row.model, settings, unpriced=row.unpriced_models, short=True, spent=spent)
        cost += "+" if lost[row.run_id] else ""
        status = STOPPED if held.get(row.run_id) is False else row.status
        run_id = "  " * depth + row.run_id
        print(f"{run_id:22} {status:20} {row.turns:>5} {cost:>10}  {row.model or ''}  {_prompt(row)}")
    if any(lost.values()) and not args.json:
        print(
            "(+: it may have cost more, up to the worst case of requests lost when a process died; "
            "`tether show RUN` says how much)",
            file=sys.stderr,
        )
    shown = sum(1 for row, _ in listed if row.parent_run_id is None)
    if total > shown:
        print(f"(the latest {shown} of {total} runs; --all shows every one)", file=sys.stderr)
    if hidden and not args.all:
        print(
            f"({hidden} sub-agent run{'s' if hidden > 1 else ''} not listed; --all shows each under its parent)",
            file=sys.stderr,
        )
    for run_id, why in skipped:
        print(f"tether: skipped run {run_id}: {why}", file=sys.stderr)
    return 0


def _tree(rows: list[Any]) -> list[tuple[Any, int]]:
    """Every run with how deep it lists: runs that are no sub-agent newest first, each followed by
    its sub-agents' runs (and theirs) in the order they started, one level deeper. A sub-agent's
    run whose parent is not listed (its folder deleted or damaged) lists at the top."""
    ids = {row.run_id for row in rows}
    under: dict[str, list[Any]] = {}
    for row in reversed(rows):  # oldest first
        if row.parent_run_id in ids and row.parent_run_id != row.run_id:
            under.setdefault(row.parent_run_id, []).append(row)
    listed: list[tuple[Any, int]] = []
    seen: set[str] = set()

    def add(row: Any, depth: int) -> None:
        if row.run_id in seen:  # headers edited into a loop
            return
        seen.add(row.run_id)
        listed.append((row, depth))
        for child in under.get(row.run_id, ()):
            add(child, depth + 1)

    for row in rows:
        if row.parent_run_id not in ids or row.parent_run_id == row.run_id:
            add(row, 0)
    for row in rows:  # in a loop of parents only: listed all the same
        add(row, 0)
    return listed


def _prompt(row: Any) -> str:
    """The prompt, quoted and cut, after the name of the agent that ran it (when it has one); a
    run made through the server before it kept one says so; a sub-agent's run names the run that
    started it."""
    if row.parent_run_id is not None:
        return f"(sub-agent {row.agent + ' ' if row.agent else ''}of run {row.parent_run_id})"
    prompt = row.config.get("prompt")
    if isinstance(prompt, str) and prompt:
        said = repr(prompt[:50])
    elif row.config.get("served"):
        return f"(through the server, agent {row.config.get('agent', '?')})"
    else:
        said = "(no prompt recorded)"
    return f"{row.agent}: {said}" if row.agent else said  # the agent that ran it, when it has a name


# A run saved as running that no process holds: its process stopped or was killed (it resumes).
STOPPED = "stopped: no process"


def _lost(row: Any, live: bool | None) -> float:
    """What the run may have paid beyond its cost (:func:`~tether.harness.state.spent_unknown_usd`):
    a run no process holds counts the request it had out when it stopped."""
    from tether.harness.state import spent_unknown_usd

    stopped = row.status == "running" and live is False
    return spent_unknown_usd(row.cost_unknown_usd, row.call_in_flight if stopped else None)


def _json_row(row: Any, live: bool | None = None, lost: float = 0.0) -> dict[str, Any]:
    return {
        "run_id": row.run_id,
        "status": row.status,
        "live": live,  # for a run saved as running: whether a process holds it (null: not asked)
        "parent_run_id": row.parent_run_id,  # for a sub-agent's run: the run that started it
        "turns": row.turns,
        "cost_usd": row.cost_usd,
        "cost_unknown_usd": lost,  # at most this much more: requests lost when a process died
        "model": row.model,
        "agent": row.agent,  # the name of the agent that ran it (Agent.name, [agents.NAME]); null: unnamed
        "prompt": row.config.get("prompt"),
        "session_id": row.session_id,
        "created_at": row.created_at,
    }


def _row_model() -> Any:
    from pydantic import BaseModel, model_validator

    from tether.harness.state import CallInFlight
    from tether.harness.subagent import parent_in_header
    from tether.status import RunStatus
    from tether.usage import Usage

    class Row(BaseModel):
        @model_validator(mode="before")
        @classmethod
        def _front_door_config(cls, header: Any) -> Any:
            """A front door's config is kept under ``ext`` (older runs kept it at the top)."""
            if isinstance(header, dict) and isinstance(header.get("ext"), dict) and "config" in header["ext"]:
                header = {**header, "config": {**(header.get("config") or {}), **header["ext"]["config"]}}
            if isinstance(header, dict):
                header = {**header, "parent_run_id": parent_in_header(header)}
            return header

        run_id: str
        status: RunStatus
        turns: int = 0
        cost_usd: float | None = 0.0
        cost_unknown_usd: float = 0.0
        call_in_flight: CallInFlight | None = None
        usage: Usage = Usage()
        model: str | None = None
        agent: str | None = None
        unpriced_models: list[str] = []
        config: dict[str, Any] = {}
        session_id: str | None = None
        created_at: float = 0.0
        parent_run_id: str | None = None  # a sub-agent's run: the run that started it

    return Row


def _rows_of(headers: list[dict[str, Any]]) -> tuple[list[Any], list[tuple[str, str]]]:
    """The rows of headers read from a database (newest first), and those skipped, with why."""
    from pydantic import ValidationError

    row = _row_model()
    rows, skipped = [], []
    for header in headers:
        try:
            rows.append(row.model_validate(header))
        except ValidationError as exc:
            why = unknown_status(exc) or f"its header is damaged ({first_error(exc)})"
            skipped.append((str(header.get("run_id")), why))
    return rows, skipped


def _rows(root: Path) -> tuple[list[Any], list[tuple[str, str]]]:
    """Headers that describe a run, newest first; and the runs skipped, with why."""
    from pydantic import ValidationError

    from tether.errors import StoreError
    from tether.harness.store import read_header

    row = _row_model()
    rows: list[Any] = []
    skipped: list[tuple[str, str]] = []
    for d in sorted(root.iterdir()) if root.is_dir() else ():
        if not d.is_dir():
            continue
        if d.is_symlink():  # the store reads no run through one (tether show would not find what is listed)
            skipped.append((d.name, f"{d} is a symbolic link, not a run's folder; tether does not read through one"))
            continue
        fix = f"restore it from a backup or delete {d}"
        try:
            header = read_header(d)
            if header is not None and header.get("run_id", d.name) != d.name:  # a copy (a backup) of a run's folder
                skipped.append(
                    (d.name, f"its header names run {header['run_id']!r}, as a copy of that run's folder would")
                )
            elif header is not None:
                rows.append(row.model_validate(header))
        except StoreError as exc:
            skipped.append((d.name, str(exc)))
        except OSError as exc:
            skipped.append((d.name, f"cannot read its header ({exc.strerror or exc}); {fix}"))
        except ValidationError as exc:
            skipped.append((d.name, unknown_status(exc) or f"its header is damaged ({first_error(exc)}); {fix}"))
    rows.sort(key=lambda r: r.created_at, reverse=True)
    return rows, skipped


# --- show -------------------------------------------------------------------------------------


def cmd_show(args: argparse.Namespace) -> int:
    from tether.cli.display import shown, transcript_lines
    from tether.harness.store import RunStore

    settings = load_settings()
    store = run_store(settings)
    state = load_run(store, _chosen(settings, args.run_id))
    stopped = state.status == "running" and isinstance(store, RunStore) and not store.held(state.run_id)
    for line in _heading(state, settings, stopped=stopped):
        print(shown(line))  # its reason and the waiting call's arguments are text from outside
    print()
    for line in transcript_lines(state.messages, full=args.full, full_hint=f"tether show {state.run_id} --full"):
        print(line)
    return 0


def _heading(state: RunState, settings: Settings, *, stopped: bool = False) -> list[str]:
    from tether.cli.display import args_json, cost_text, held_lines, resume_hint, spent_any, tokens_text
    from tether.harness.state import spent_unknown_usd
    from tether.harness.subagent import parent_of

    cfg = state.config
    cost: float | None = state.cost_usd
    lost = spent_unknown_usd(state.cost_unknown_usd, state.call_in_flight if stopped else None)
    spent = spent_any(state.usage, lost, cost)
    lines = [
        f"run {state.run_id}: {STOPPED if stopped else state.status}, {state.turns} turns, "
        f"tokens {tokens_text(state.usage)}, "
        f"{cost_text(cost, state.model, settings, unpriced=state.unpriced_models, spent=spent)}"
    ]
    if lost:  # as the run's summary says it, and its budget counts it
        lines.append(f"  plus up to ${lost:.6f} for requests lost when a process died")
    where = [f"model {state.model or cfg.get('model', '?')}", f"cwd {cfg.get('cwd', '?')}"]
    if state.session_id:
        where.append(f"session {state.session_id}")
    lines.append("  " + ", ".join(where))
    if state.reason:
        lines.append(f"  why it stopped: {state.reason}")
    waiting = state.interruption
    if waiting is not None and waiting.type in ("approval", "outcome_unknown"):
        args = args_json(getattr(waiting, "args", None))
        what = (
            "a decision about a call cut off before it finished,"
            if waiting.type == "outcome_unknown"
            else "approval of"
        )
        call = getattr(waiting, "call_id", "?")
        lines.append(f"  waiting for {what} {getattr(waiting, 'tool_name', '?')} {args} [call {call}]")
        for other in getattr(waiting, "together", ()):  # the rest of its batch waits with it
            more = args_json(getattr(other, "args", None))
            lines.append(f"  and for a decision about {other.tool_name} {more} [call {other.call_id}]")
    asked, via = waiting, []
    while asked is not None and asked.type == "subagent":  # what is decided is the child's question
        via.append(getattr(asked, "tool_name", "?"))
        asked = getattr(asked, "child", None)
    if via and asked is not None and asked.type in ("approval", "outcome_unknown"):
        args = args_json(getattr(asked, "args", None))
        lines.append(
            f"  waiting for a decision about {getattr(asked, 'tool_name', '?')} {args}, "
            f"a call of the sub-agent {' -> '.join(via)}"
        )
    lines.extend(f"  {line}" for line in held_lines(waiting))
    hint = resume_hint(state.run_id, state.status, waiting, state.reason)
    if stopped:
        lines.append("  its process stopped or was killed while it ran; it resumes from its last save")
        hint = f"tether resume {state.run_id}   to continue where it stopped"
    parent, call = parent_of(state)
    if parent is not None:  # resumed only with the run that started it (tether resume refuses it alone)
        lines.append(f"  a sub-agent's run, started by call {call} of run {parent}")
        hint = f"tether show {parent}   (the run that started it; resuming that run resumes this one)" if hint else None
    if hint:
        lines.append(f"  next: {hint}")
    return lines


# --- trace ------------------------------------------------------------------------------------


def cmd_trace(args: argparse.Namespace) -> int:
    from tether.errors import StoreError

    settings = load_settings()
    run_id = _chosen(settings, args.run_id)
    if not run_id or "/" in run_id or "\\" in run_id or run_id.startswith("."):
        raise usage_error(f"not a run id: {run_id!r}")
    from tether.tracing import trace_bytes

    path = settings.home / "traces" / f"{run_id}.jsonl"
    try:
        data = trace_bytes(path)
    except FileNotFoundError:
        raise usage_error(f"no trace for {run_id!r} at {path}; `tether runs` lists the runs") from None
    except OSError as exc:
        raise StoreError(f"cannot read the trace {path}: {exc.strerror or exc}") from None
    good, bad = _trace_lines(data)
    sys.stdout.write("".join(line + "\n" for line in good))
    sys.stdout.flush()
    if bad:
        last = data.count(b"\n") + 1  # the number a final line without its newline has
        torn = " (the last one cut short)" if not data.endswith(b"\n") and bad[-1] == last else ""
        numbers = ", ".join(str(n) for n in bad[:10]) + (", ..." if len(bad) > 10 else "")
        lines = f"lines {numbers} are not JSON events" if len(bad) > 1 else f"line {numbers} is not a JSON event"
        print(
            f"tether: skipped {len(bad)} damaged line{'s' if len(bad) > 1 else ''} of {path}{torn}: {lines}; "
            f"the other {len(good)} are printed",
            file=sys.stderr,
        )
    return 0


def _trace_lines(data: bytes) -> tuple[list[str], list[int]]:
    """The lines that are JSON events, and the numbers of those that are not."""
    good: list[str] = []
    bad: list[int] = []
    for number, raw in enumerate(data.split(b"\n"), start=1):
        if not raw.strip():
            continue
        try:
            line = raw.decode("utf-8")
            event = json.loads(line)
        except ValueError:  # UnicodeDecodeError is a ValueError too
            bad.append(number)
            continue
        if isinstance(event, dict):
            good.append(line)
        else:
            bad.append(number)
    return good, bad
