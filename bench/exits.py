"""Reproduce the reference's measurements of the loop's exits with tether, as tables.

    python bench/exits.py

Everything runs against the scripted model in process (o200k_base token counts, $2/$12 per
million tokens). Writes bench/results/exits.json.
"""

from __future__ import annotations

import asyncio
import json
import shutil
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from tether import Agent, CancelSignal, RunState, approve, reject, run, run_stream, tool
from tether.harness.agent import Stop
from tether.harness.state import Step
from tether.messages import TextPart, ToolMessage
from tether.tools.demo import DEMO_TOOLS
from tether.tools.files import FILE_TOOLS
from tether.usage import Price

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench._results import write_results  # noqa: E402

PRICE = Price(input=2.0, output=12.0)
RESULTS: dict[str, Any] = {}


def workspace() -> Path:
    d = Path(tempfile.mkdtemp(prefix="tether-bench-"))
    shutil.copytree(ROOT / "examples" / "workspace", d / "ws")
    return d / "ws"


def go(agent: Agent, prompt: str | None = "Which file mentions a timeout?", state: RunState | None = None) -> Any:
    return asyncio.run(run(agent, prompt, state=state))


def table(title: str, header: Sequence[str], rows: list[Sequence[Any]]) -> None:
    print(f"\n## {title}\n")
    widths = [max(len(str(x)) for x in [h, *[r[i] for r in rows]]) for i, h in enumerate(header)]
    print("  ".join(str(h).ljust(w) for h, w in zip(header, widths, strict=True)))
    for r in rows:
        print("  ".join(str(x).ljust(w) for x, w in zip(r, widths, strict=True)))
    RESULTS[title] = [dict(zip(header, map(str, r), strict=True)) for r in rows]


def per_turn_prompts(state: RunState) -> list[int]:
    return [m.usage.prompt_tokens for m in state.messages if m.role == "assistant" and m.usage]


def tool_runs(state: RunState) -> int:
    return sum(1 for m in state.messages if isinstance(m, ToolMessage) and m.status in ("ok", "error"))


def baseline() -> None:
    ws, state = workspace(), RunState()
    t0 = time.perf_counter()
    r = go(Agent("scripted/plan", tools=FILE_TOOLS, cwd=ws, max_turns=20), state=state)
    ms = (time.perf_counter() - t0) * 1000
    table(
        "plan, cap 20",
        ["turns", "tools", "in", "out", "cost", "ms", "status", "per-turn prompt tokens"],
        [
            [
                r.turns,
                tool_runs(state),
                r.usage.prompt_tokens,
                r.usage.completion_tokens,
                f"${r.cost_usd:.6f}",
                f"{ms:.0f}",
                r.status,
                per_turn_prompts(state),
            ]
        ],
    )
    print(f"   answer: {r.output!r}")


def turn_caps() -> None:
    rows, prev = [], None
    for cap in (8, 20, 50, 100):
        r = go(Agent("scripted/runaway", tools=FILE_TOOLS, cwd=workspace(), max_turns=cap))
        growth = f"x{r.cost_usd / prev:.1f}" if prev else "-"
        rows.append([cap, r.turns, f"{r.usage.prompt_tokens:,}", f"${r.cost_usd:.6f}", growth, r.status])
        prev = r.cost_usd
    table(
        "runaway under turn caps (input grows quadratically)",
        ["cap", "turns", "input tokens", "cost", "cost vs previous cap", "status"],
        rows,
    )


def reference_budget_check(budget: float) -> Any:
    """The reference's check: stop when the spend so far reaches the budget (overshoots a turn)."""

    def condition(done: Sequence[Step]) -> Stop | None:
        spent = sum(PRICE.cost(s.message.usage) for s in done if s.message.usage)
        return Stop("budget_exceeded", "spent reached budget") if spent >= budget else None

    return condition


def budgets() -> None:
    rows = []
    for budget in (0.01, 0.05, 0.25):
        ref = go(
            Agent(
                "scripted/runaway",
                tools=FILE_TOOLS,
                cwd=workspace(),
                max_turns=None,
                stop_when=[reference_budget_check(budget)],
            )
        )
        ours = go(Agent("scripted/runaway", tools=FILE_TOOLS, cwd=workspace(), max_turns=None, max_budget_usd=budget))
        rows.append(
            [
                f"${budget:.2f}",
                ref.turns,
                f"${ref.cost_usd:.6f}",
                f"{(ref.cost_usd / budget - 1) * 100:+.1f}%",
                ours.turns,
                f"${ours.cost_usd:.6f}",
                f"{(ours.cost_usd / budget - 1) * 100:+.1f}%",
                ours.status,
            ]
        )
    table(
        "budgets on runaway, no turn cap: reference check vs tether",
        [
            "budget",
            "ref turns",
            "ref spent",
            "ref vs budget",
            "tether turns",
            "tether spent",
            "tether vs budget",
            "tether status",
        ],
        rows,
    )


def error_policies() -> None:
    rows, first = [], None
    policies: list[tuple[str, dict[str, Any]]] = [
        ("fatal (tool_errors_are_fatal)", {"tool_errors_are_fatal": True}),
        ("opaque text", {"tool_error_text": lambda name, exc: "Error: something failed."}),
        ("tether default text", {}),
    ]
    for name, kw in policies:
        r = go(Agent("scripted/recover", tools=FILE_TOOLS, cwd=workspace(), **kw))
        first = first or r.cost_usd
        rows.append([name, r.status, r.turns, f"${r.cost_usd:.6f}", f"x{r.cost_usd / first:.1f}", repr(r.output)])
    table(
        "one tool failure, three policies (recover)", ["policy", "status", "turns", "cost", "vs fatal", "answer"], rows
    )


def forbidden() -> None:
    recovered = go(Agent("scripted/recover", tools=FILE_TOOLS, cwd=workspace()))
    state = RunState()
    r = go(Agent("scripted/forbidden", tools=FILE_TOOLS, cwd=workspace(), max_turns=12), state=state)
    table(
        "a read the process may not do, retried until the cap",
        ["turns", "tool runs", "in", "cost", "vs recover", "status", "answer"],
        [
            [
                r.turns,
                tool_runs(state),
                f"{r.usage.prompt_tokens:,}",
                f"${r.cost_usd:.6f}",
                f"x{r.cost_usd / recovered.cost_usd:.1f}",
                r.status,
                repr(r.output),
            ]
        ],
    )


def duplicates() -> None:
    base = go(Agent("scripted/single_read", tools=FILE_TOOLS, cwd=workspace()))
    rows = [["no repeat (baseline)", base.turns, "1", f"${base.cost_usd:.6f}", "-"]]
    for dedupe in (False, True):
        state = RunState()
        r = go(Agent("scripted/repeat", tools=FILE_TOOLS, cwd=workspace(), dedupe_read_only=dedupe), state=state)
        extra = r.cost_usd - base.cost_usd
        rows.append(
            [
                f"repeat, dedupe {'on' if dedupe else 'off'}",
                r.turns,
                tool_runs(state),
                f"${r.cost_usd:.6f}",
                f"+${extra:.6f} ({extra / base.cost_usd * 100:.0f}%)",
            ]
        )
    table("the same read-only call twice", ["run", "turns", "tool runs", "cost", "extra"], rows)

    rows = []
    for label, read_only in (("naive cache on every tool", True), ("cache only on read-only tools (tether)", False)):
        ws, deleted = workspace(), []

        @tool(name="delete_file", read_only=read_only)
        def delete(path: str) -> str:
            deleted.append(path)
            return f"deleted {path}"

        r = go(Agent("scripted/repeat_write", tools=[delete], cwd=ws))
        rows.append([label, r.turns, len(deleted), json.dumps(deleted)])
    table("the same writing call twice", ["policy", "turns", "tool runs", "files deleted"], rows)


def approvals() -> None:
    rows = []
    for label, decide in (
        ("approve", lambda s: approve(s)),
        ("reject with a reason", lambda s: reject(s, "keep the access log for the audit")),
        ("reject without a reason", lambda s: reject(s)),
        ("reference's naive reject (empty result)", None),
    ):
        ws, state = workspace(), RunState()
        agent = Agent("scripted/destructive", tools=FILE_TOOLS, cwd=ws)
        first = go(agent, "Free some disk space.", state=state)
        assert first.status == "interrupted"
        if decide is None:  # what a harness that writes no words does
            state.messages.append(ToolMessage(call_id="c2", name="delete_file", content=(TextPart(text=""),)))
        else:
            decide(state)
        r = go(agent, None, state=state)
        deleted = [] if (ws / "access.log").exists() else ["access.log"]
        rows.append([label, f"{first.status}/{first.interruption.type}", r.turns, json.dumps(deleted), repr(r.output)])
    table(
        "approval: what the agent then tells the user",
        ["decision", "first stop", "turns", "deleted", "agent says"],
        rows,
    )


class Died(BaseException):
    pass


def crash_and_resume() -> None:
    ws, runs = workspace(), []

    @tool(read_only=True, name="list_files")
    def lf() -> str:
        runs.append("list_files")
        return "\n".join(sorted(p.name for p in ws.iterdir()))

    @tool(read_only=True, name="read_file")
    def rf(path: str) -> str:
        runs.append(f"read_file:{path}")
        return (ws / path).read_text()

    from tether.harness.store import RunStore

    class DieAfterTurn2:
        def write(self, event: Any) -> None:
            if event.type == "turn" and event.turn == 2:
                raise Died

        def close(self) -> None:
            pass

    root = Path(tempfile.mkdtemp())
    agent = Agent("scripted/plan", tools=[lf, rf], cwd=ws)
    state = RunState()
    try:
        asyncio.run(
            run(agent, "Which file mentions a timeout?", state=state, store=RunStore(root), tracer=DieAfterTurn2())
        )
    except Died:
        pass
    tools_first = list(runs)
    restored = RunStore(root).load(state.run_id)
    line1 = f"turns={restored.turns} cost=${restored.cost_usd:.6f} messages={len(restored.messages)} status={restored.status}"
    r = go(agent, None, state=restored)
    runs_before_resume = len(runs)
    clean = go(agent)  # the same task, never interrupted
    del runs[runs_before_resume:]
    table(
        "crash after turn 2, resume in a new store",
        ["phase", "figures"],
        [
            ["tool runs before the crash", ", ".join(tools_first)],
            ["restored from disk", line1],
            ["resumed and finished", f"turns={r.turns} cost=${r.cost_usd:.6f} status={r.status}"],
            ["uncrashed run", f"turns={clean.turns} cost=${clean.cost_usd:.6f}"],
            ["tool runs across both", ", ".join(runs)],
            ["final cost identical", str(abs(r.cost_usd - clean.cost_usd) < 1e-12)],
        ],
    )


def cancellation() -> None:
    rows = []
    for stop_at in (None, 1.2):
        labels: list[tuple[float, str]] = []

        async def once(stop_at: float | None = stop_at) -> tuple[Any, float, float]:
            signal = CancelSignal()
            t0 = time.perf_counter()
            pressed: list[float] = []
            if stop_at is not None:

                def press() -> None:
                    pressed.append(time.perf_counter())
                    signal.cancel("user pressed Stop")

                asyncio.get_running_loop().call_later(stop_at, press)
            result = None
            async for e in run_stream(
                Agent("scripted/slow", tools=[*FILE_TOOLS, *DEMO_TOOLS], cwd=workspace()), "scan", signal=signal
            ):
                if e.type == "tool_progress":
                    labels.append(((time.perf_counter() - t0) * 1000, e.label))
                if e.type == "done":
                    result = e.result
            end = time.perf_counter()
            return result, (end - t0) * 1000, (end - pressed[0]) * 1000 if pressed else float("nan")

        result, wall, latency = asyncio.run(once())
        rows.append(
            [
                "no cancellation" if stop_at is None else f"Stop at {stop_at} s",
                f"{wall:,.0f}",
                "-" if stop_at is None else f"{latency:.1f}",
                result.status,
                repr(result.reason),
                len(labels),
            ]
        )
    table(
        "cancellation during the slow tool (3 s)",
        ["case", "stopped after ms", "Stop→stopped ms", "status", "reason", "progress events"],
        rows,
    )


def main() -> None:
    baseline()
    turn_caps()
    budgets()
    error_policies()
    forbidden()
    duplicates()
    approvals()
    crash_and_resume()
    cancellation()
    write_results("exits", RESULTS)


if __name__ == "__main__":
    main()
