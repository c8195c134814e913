"""Kill -9 at random points, resume in a new process until the run ends, and count what went wrong.

    python bench/crash_soak.py [--seed 7] [--runs 25] [--max-kills 4]
                               [--scenarios counted,approved,shell,server,parallel] [--start-method forkserver|spawn]

Five scenarios, each with side effects that are counted (every effect appends its idempotency key,
``run_id:call_id``, to ``effects.txt``, so a duplicate is two equal lines):

* ``counted``: read-only tools and ``record``, a side-effecting tool that needs no approval;
* ``approved``: ``transfer``, a side-effecting tool that needs approval for every call;
* ``shell``: tether's ``run_command`` (no approval) running ``sleep 0.3; echo "$RUN_ID:cN" >> effects.txt``;
* ``server``: the model is the scripted OpenAI-compatible server on loopback in this process;
* ``parallel``: a parallel batch of three slow ``post`` calls (side effects that may run
  alongside each other), then a read and a post together.

Every attempt is a new process (forked from a server that has imported tether; ``--start-method
spawn`` starts a fresh interpreter each time instead). Kills are seeded: at instrumented points
(trace events, a model request in flight, just before or after a tool's effect, each with an
optional delay so the kill lands mid-tool) and by a timer at a random delay. The first kill of the
first runs of each scenario is chosen to hit the cases that matter (an effect done but not
recorded, an approved call cut short, a shell command left running, a request in flight).

The driver plays the person. At an ``approval`` stop it approves. At an ``outcome_unknown`` stop it
first waits until no process is left in the run's workspace (a killed tether's shell command may
still be running and could still append), then looks at ``effects.txt``: if the effect happened it
rejects with "it went through", otherwise it approves.

Per scenario: duplicated side effects; results that say the opposite of what happened; re-paid
model requests (a request for a turn whose reply was already saved when its process started, or a
second request for one turn in one process: no faults are injected, so nothing justifies a retry);
lost and extra messages and the final cost against a reference run; broken pairing in any saved
state; unresumable runs (a resume that crashes or hangs, a run left ``running``, no end within
40 attempts). The reference is the same scenario with the same decisions and no kill; where the
person rejected a call, the reference reaches that decision by stopping at the call's start, so
its transcript is what the crashed run's should be. Final cost may exceed the reference by at
most ``cost_unknown_usd`` (requests in flight at a kill), and every request the model's side saw
must be paid for by the recorded cost plus that spent-unknown amount: what is left over is
uncounted spend. Target: zero of each.

Also shown: requests the model's side received whose reply was never recorded (in flight at a
kill), and how many requests tether counted as spent-unknown; more counted than unrecorded means
kills between saving a request's intent and sending it (tether cannot tell; it counts the worst).

Writes bench/results/crash_soak.json.
"""

from __future__ import annotations

import argparse
import difflib
import json
import multiprocessing
import os
import random
import shutil
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench import _crash_child as child  # noqa: E402
from bench._results import write_results  # noqa: E402
from tether import RunState, RunStore  # noqa: E402
from tether.events import snake_keys  # noqa: E402
from tether.messages import AssistantMessage, Message, ToolMessage  # noqa: E402
from tether.providers.scripted import SCENARIOS, Reply  # noqa: E402
from tether.testing import ScriptedServer  # noqa: E402

TERMINAL = frozenset({"completed", "failed", "max_turns_exceeded", "budget_exceeded"})
WENT_THROUGH = "it went through"
SIDE_EFFECTS = frozenset({"record", "transfer", "run_command", "post"})
MAX_ATTEMPTS = 40
ATTEMPT_TIMEOUT_S = 60.0
ORPHAN_WAIT_S = 10.0
KILL_PROBABILITY = 0.9  # per attempt, until the run's kill budget is spent
TIMER_SHARE = 0.35  # of kills: a timer at a random delay instead of an instrumented point
SERVER_MODEL = "crash_soak_server"
SERVER_LATENCY_S = 0.05

# The first kill of run i is KEY_KILLS[scenario][i] (while there is one): the cases that matter.
KEY_KILLS: dict[str, list[dict[str, Any]]] = {
    "counted": [
        {"point": "effect_after", "n": 1},
        {"point": "request", "n": 2, "delay": 0.01},
        {"point": "effect_before", "n": 2},
    ],
    "approved": [
        {"point": "effect_after", "n": 1},
        {"point": "effect_before", "n": 1},
        {"point": "effect_after", "n": 2},
    ],
    "shell": [{"point": "tool_start", "n": 2, "delay": 0.1}, {"point": "tool_start", "n": 3, "delay": 0.25}],
    "server": [{"point": "tool_result", "n": 1, "delay": 0.02}, {"point": "effect_after", "n": 1}],
    # Mid-batch: one post done and unrecorded while its siblings run; all three started, none done.
    "parallel": [{"point": "effect_after", "n": 1}, {"point": "tool_start", "n": 5, "delay": 0.05}],
}

KILL_POINTS = [
    "timer",
    "request",
    "turn",
    "tool_start",
    "effect_before",
    "effect_after",
    "tool_result",
    "approval_required",
]
GUARANTEES = [
    "duplicated effects",
    "untrue results",
    "re-paid requests",
    "lost messages",
    "extra messages",
    "broken pairing",
    "unresumable",
    "wrong exit",
    "cost off",
    "uncounted spend (µ$)",
]


@dataclass
class Attempt:
    index: int
    turns_before: int  # model replies saved on disk when this process started
    kill: dict[str, Any] | None
    decision: list[str] | None
    exitcode: int | None = None
    seconds: float = 0.0
    killed: bool = False
    result: dict[str, Any] | None = None
    error: str | None = None


@dataclass
class Run:
    scenario: str
    label: str
    dir: Path
    attempts: list[Attempt] = field(default_factory=list)
    final: RunState | None = None
    problems: list[str] = field(default_factory=list)
    unresumable: bool = False
    broken_pairing: int = 0
    seen: Counter[str] = field(default_factory=Counter)  # what the person met: stops, orphans

    @property
    def run_id(self) -> str:
        return f"run_{self.label}"

    @property
    def home(self) -> Path:
        return self.dir / "home"

    @property
    def workspace(self) -> Path:
        return self.dir / "workspace"

    def fail(self, why: str) -> None:
        self.unresumable = True
        self.problems.append(why)

    def load(self) -> RunState | None:
        store = RunStore(self.home / "runs")
        return store.load(self.run_id) if store.exists(self.run_id) else None

    def effects(self) -> Counter[str]:
        path = self.workspace / child.EFFECTS
        return Counter(path.read_text().splitlines()) if path.exists() else Counter()


@dataclass
class KillPlan:
    """Where the next attempt dies: a seeded choice among the kill points the rest of the run will
    pass, read off the uncrashed run's sequence of points from where the saved run stands."""

    rng: random.Random
    sequence: list[str]  # the kill points an uncrashed run passes, in order
    seconds: float  # how long the uncrashed run's processes took, all together
    max_kills: int
    first: dict[str, Any] | None = None
    kills: int = 0

    def next(self, turns: int, results: int) -> dict[str, Any] | None:
        if self.kills >= self.max_kills:
            return None
        if self.first is not None:
            return self.first
        rest = self.sequence[self._position(turns, results) :]
        if not rest or self.rng.random() > KILL_PROBABILITY:
            return None
        if self.rng.random() < TIMER_SHARE:
            share = len(rest) / len(self.sequence)
            return {"timer": round(self.rng.uniform(0.0, self.seconds * share), 3)}
        j = self.rng.randrange(len(rest))
        # After a tool starts, a delay up to the shell command's length lands inside the tool.
        longest = 0.35 if rest[j] == "tool_start" else 0.05
        delay = 0.0 if self.rng.random() < 0.5 else round(self.rng.uniform(0.0, longest), 3)
        return {"point": rest[j], "n": rest[: j + 1].count(rest[j]), "delay": delay}

    def _position(self, turns: int, results: int) -> int:
        """Where a process resuming a run with ``turns`` replies and ``results`` tool results starts."""
        seen_turns = seen_results = 0
        for i, point in enumerate(self.sequence):
            if seen_turns >= turns and seen_results >= results:
                return i
            seen_turns += point == "turn"
            seen_results += point == "tool_result"
        return len(self.sequence)

    def killed(self) -> None:
        self.kills += 1
        self.first = None


def pairing_problem(messages: list[Message], complete: bool) -> str | None:
    """Law 1 on a saved transcript; calls still pending at its end are allowed unless ``complete``."""
    expected: list[str] = []
    for i, m in enumerate(messages):
        if isinstance(m, ToolMessage):
            if not expected or m.call_id != expected[0]:
                return f"message {i}: result {m.call_id} where {expected[:1]} was due"
            expected.pop(0)
        elif expected:
            return f"message {i}: calls {expected} have no results before it"
        elif isinstance(m, AssistantMessage):
            expected = [c.id for c in m.tool_calls]
    return f"calls {expected} never got results" if expected and complete else None


def processes_in(workspace: Path) -> list[int]:
    """Our processes still working in ``workspace`` (Linux; elsewhere none are seen)."""
    found = []
    target = str(workspace.resolve())
    for entry in Path("/proc").glob("[0-9]*"):
        try:
            cwd = os.readlink(entry / "cwd")
        except OSError:
            continue
        if cwd == target or cwd.startswith(target + "/"):
            found.append(int(entry.name))
    return found


def wait_until_idle(workspace: Path) -> float:
    """Wait until no process works in ``workspace``; return the seconds waited."""
    t0 = time.monotonic()
    if not Path("/proc/self/cwd").exists():
        time.sleep(1.0)  # no way to see the command: a grace period longer than its sleep
        return 1.0
    while processes_in(workspace) and time.monotonic() - t0 < ORPHAN_WAIT_S:
        time.sleep(0.02)
    return time.monotonic() - t0


def slowed(script: Any) -> Any:
    def reply(t: int, tools: str) -> Reply:
        time.sleep(SERVER_LATENCY_S)  # in the server's thread: a kill can land while a request is served
        return script(t, tools)

    return reply


class Launcher:
    """Runs one attempt in a new process; a timer kill is SIGKILL sent from here."""

    def __init__(self, method: str) -> None:
        self.ctx = multiprocessing.get_context(method)
        if method == "forkserver":  # what an attempt would otherwise import lazily, every time
            self.ctx.set_forkserver_preload(
                ["bench._crash_child", "tether.testing", "httpx", "httpcore", "anyio", "jsonschema"]
            )
        ready = self.ctx.Process(target=child.ready)  # start the fork server now, not in the first timed attempt
        ready.start()
        ready.join()

    def run(self, spec: dict[str, Any], timer: float | None) -> tuple[int | None, float, bool]:
        """(exit code, seconds, hung) of one attempt."""
        process = self.ctx.Process(target=child.attempt, args=(spec,), daemon=True)
        t0 = time.perf_counter()
        process.start()
        process.join(timer if timer is not None else ATTEMPT_TIMEOUT_S)
        hung = process.is_alive() and timer is None
        if process.is_alive():
            process.kill()
            process.join()
        return process.exitcode, time.perf_counter() - t0, hung


class Soak:
    def __init__(self, root: Path, seed: int, method: str, max_kills: int) -> None:
        self.root, self.seed, self.max_kills = root, seed, max_kills
        self.launcher = Launcher(method)
        self.server = ScriptedServer().start()
        SCENARIOS[SERVER_MODEL] = slowed(child.server)
        self.references: dict[tuple[str, tuple[tuple[str, str], ...]], Run] = {}
        self.labels: Counter[str] = Counter()

    def close(self) -> None:
        SCENARIOS.pop(SERVER_MODEL, None)
        self.server.stop()

    def new_run(self, scenario: str, kind: str) -> Run:
        label = f"{scenario}_{kind}{self.labels[scenario + kind]:03d}"
        self.labels[scenario + kind] += 1
        run = Run(scenario, label, self.root / label)
        shutil.copytree(ROOT / "examples" / "workspace", run.workspace)
        run.home.mkdir(parents=True)
        return run

    # -- one attempt, and what the person does between attempts --

    def attempt(
        self, run: Run, index: int, turns_before: int, kill: dict[str, Any] | None, decision: list[str] | None
    ) -> Attempt:
        att = Attempt(index, turns_before, kill, decision)
        result_path = run.dir / f"attempt-{index}.json"
        spec = {
            "scenario": run.scenario,
            "home": str(run.home),
            "workspace": str(run.workspace),
            "run_id": run.run_id,
            "attempt": index,
            "kill": kill,
            "decision": decision,
            "result": str(result_path),
            "base_url": self.server.base_url,
            "model": SERVER_MODEL,
            "tag": run.label,
        }
        timer = kill.get("timer") if kill else None
        att.exitcode, att.seconds, hung = self.launcher.run(spec, timer)
        att.killed = att.exitcode == -9 and not hung
        if hung:
            att.error = f"hung for {ATTEMPT_TIMEOUT_S:g} s"
        elif result_path.exists():
            out = json.loads(result_path.read_text())
            att.result, att.error = out.get("result"), out.get("error")
        elif not att.killed:
            att.error = f"exited with {att.exitcode} and left no result"
        run.attempts.append(att)
        return att

    def decide(self, run: Run, state: RunState, forced: dict[str, str]) -> list[str] | None:
        stop = state.interruption
        if stop is None:
            return None
        run.seen[f"{stop.type} stops"] += 1
        if stop.type == "approval":
            return ["approve"]
        if stop.type != "outcome_unknown":
            return None
        if stop.call_id in forced:
            return ["reject", forced[stop.call_id]]
        if processes_in(run.workspace):
            run.seen["commands alive at the stop"] += 1
            run.seen["... reported running by tether"] += bool(getattr(stop, "still_running", False))
            run.seen["seconds waited for them"] += round(wait_until_idle(run.workspace), 2)
        if run.effects()[stop.idempotency_key]:
            run.seen["rejected: it went through"] += 1
            return ["reject", WENT_THROUGH]
        run.seen["approved again: not done"] += 1
        return ["approve"]

    def drive(self, run: Run, plan: KillPlan | None, forced: dict[str, str]) -> Run:
        """Attempts until the run ends; ``forced`` (reference runs) stops at those calls' start and
        rejects them with the given reason."""
        decision: list[str] | None = None
        state = RunState(run_id=run.run_id)
        for index in range(MAX_ATTEMPTS):
            kill = self.next_kill(plan, forced, state, decision)
            att = self.attempt(run, index, _turns(state), kill, decision)
            if att.killed and plan is not None:
                plan.killed()
            if att.error:
                return self._fail(run, f"attempt {index} (decision {decision}): {att.error.strip().splitlines()[-1]}")
            saved = self.check_saved(run, att)
            if saved is None:
                return run
            state = saved
            if state.status in TERMINAL:
                run.final = state
                return run
            if state.status == "interrupted":
                decision = self.decide(run, state, forced)
                if decision is None:
                    return self._fail(run, f"stopped {state.interruption} with nothing a person can decide")
            elif not att.killed:
                return self._fail(run, f"attempt {index} ended but the run is `{state.status}` on disk")
            else:
                decision = None
        return self._fail(run, f"no end after {MAX_ATTEMPTS} attempts")

    @staticmethod
    def next_kill(
        plan: KillPlan | None, forced: dict[str, str], state: RunState, decision: list[str] | None
    ) -> dict[str, Any] | None:
        if plan is None:
            return {"calls": sorted(forced)} if forced else None
        if state.intents and decision is None:
            return None  # it stops for a person at once: a kill here would test nothing
        return plan.next(_turns(state), sum(isinstance(m, ToolMessage) for m in state.messages))

    def _fail(self, run: Run, why: str) -> Run:
        run.fail(why)
        try:
            run.final = run.load()
        except Exception as exc:  # already counted as unresumable; say why too
            run.problems.append(f"the saved run cannot be loaded: {exc}")
        return run

    def check_saved(self, run: Run, att: Attempt) -> RunState | None:
        try:
            state = run.load()
        except Exception as exc:  # the store itself is part of what is tested
            run.fail(f"attempt {att.index}: the saved run cannot be loaded: {exc}")
            return None
        if state is None:
            if att.killed:  # killed before the first save: there is no run yet, start it again
                return RunState(run_id=run.run_id)
            run.fail(f"attempt {att.index} ended and saved nothing")
            return None
        problem = pairing_problem(state.messages, complete=state.status in TERMINAL)
        if problem:
            run.broken_pairing += 1
            run.problems.append(f"attempt {att.index}: pairing: {problem}")
        if att.result and att.result["status"] != state.status:
            run.problems.append(f"attempt {att.index}: returned {att.result['status']} but saved {state.status}")
        return state

    # -- reference runs and kill plans --

    def reference(self, scenario: str, forced: dict[str, str]) -> Run:
        key = (scenario, tuple(sorted(forced.items())))
        if key not in self.references:
            self.references[key] = self.drive(self.new_run(scenario, "ref"), None, forced)
        return self.references[key]

    def plan(self, scenario: str, index: int, baseline: Run) -> KillPlan:
        first = KEY_KILLS.get(scenario, [])
        rng = random.Random(f"{self.seed}:{scenario}:{index}")
        return KillPlan(
            rng,
            kill_sequence(scenario, baseline),
            sum(a.seconds for a in baseline.attempts),
            self.max_kills,
            first[index] if index < len(first) else None,
        )

    # -- judging one crashed run against its reference --

    def requests(self, run: Run) -> list[tuple[int, int]]:
        """(attempt, turn) of every model request the run made, as the model's side saw them."""
        if run.scenario in child.OVER_HTTP:
            out = []
            for _, body, _ in self.server.received:
                tag, _, attempt = str(body.get("user", "")).rpartition(":")
                if tag == run.label:
                    out.append((int(attempt), sum(m.get("role") == "assistant" for m in body["messages"])))
            return out
        log = run.home / "requests.log"
        lines = log.read_text().splitlines() if log.exists() else []
        return [(int(a), int(t)) for a, t in (line.split() for line in lines)]

    def judge(self, run: Run) -> Counter[str]:
        f: Counter[str] = Counter(runs=1, attempts=len(run.attempts))
        f["kills"] = sum(a.killed for a in run.attempts)
        f["timer kills"] = sum(a.killed and "timer" in (a.kill or {}) for a in run.attempts)
        f.update(f"kill@{(a.kill or {}).get('point', 'timer')}" for a in run.attempts if a.killed)
        f["unresumable"] = int(run.unresumable)
        f["broken pairing"] = run.broken_pairing
        f.update(run.seen)
        effects = run.effects()
        f["duplicated effects"] = sum(n - 1 for n in effects.values() if n > 1)
        final = run.final
        if final is None:
            return f
        # From the transcript: a decision is cleared once its call's result is recorded.
        rejected = {
            m.call_id: WENT_THROUGH
            for m in final.messages
            if isinstance(m, ToolMessage) and m.status == "rejected" and WENT_THROUGH in m.text
        }
        ref = self.reference(run.scenario, rejected)
        f["untrue results"] = untrue_results(final, effects)
        self._judge_requests(run, final, f)
        if not run.unresumable:  # a run that never ended is counted there, not as lost messages
            self._judge_against(run, final, ref, f)
        return f

    def _judge_requests(self, run: Run, final: RunState, f: Counter[str]) -> None:
        before = {a.index: a.turns_before for a in run.attempts}
        per_process: Counter[tuple[int, int]] = Counter()
        replies = [m for m in final.messages if isinstance(m, AssistantMessage)]
        billed = 0.0
        for attempt, turn in self.requests(run):
            per_process[(attempt, turn)] += 1
            if turn < before.get(attempt, 0) or per_process[(attempt, turn)] > 1:
                f["re-paid requests"] += 1
                run.problems.append(f"attempt {attempt}: asked again for turn {turn}")
            if turn < len(replies) and replies[turn].usage is not None:
                billed += child.PRICE.cost(replies[turn].usage)
        f["requests"] += sum(per_process.values())
        f["unrecorded requests"] += sum(per_process.values()) - len(replies) - f["re-paid requests"]
        trace = run.home / "traces" / f"{run.run_id}.jsonl"
        f["counted in flight"] += trace.read_text().count('"type":"spent_unknown"') if trace.exists() else 0
        unknown = float(getattr(final, "cost_unknown_usd", 0.0))
        f["uncounted spend (µ$)"] += round(max(0.0, billed - final.cost_usd - unknown) * 1e6)
        f["spent-unknown (µ$)"] += round(unknown * 1e6)

    def _judge_against(self, run: Run, final: RunState, ref: Run, f: Counter[str]) -> None:
        if ref.final is None or ref.unresumable:
            run.problems.append(f"no reference run to compare with: {ref.problems}")
            return
        mine, theirs = _dumps(final.messages), _dumps(ref.final.messages)
        matched = sum(b.size for b in difflib.SequenceMatcher(None, theirs, mine, autojunk=False).get_matching_blocks())
        f["lost messages"] = len(theirs) - matched
        f["extra messages"] = len(mine) - matched
        f["wrong exit"] = int(final.status != ref.final.status)
        over = final.cost_usd - ref.final.cost_usd
        unknown = float(getattr(final, "cost_unknown_usd", 0.0))
        f["cost off"] = int(not -1e-9 <= over <= unknown + 1e-9)
        f["cost over reference (µ$)"] += round(over * 1e6)
        if f["lost messages"] or f["extra messages"] or f["cost off"]:
            run.problems.append(
                f"against {ref.label}: lost {f['lost messages']}, extra {f['extra messages']}, "
                f"cost {final.cost_usd:.6f} vs {ref.final.cost_usd:.6f} (unknown {unknown:.6f})"
            )

    def scenario(self, scenario: str, runs: int) -> tuple[Counter[str], list[str]]:
        baseline = self.reference(scenario, {})
        totals: Counter[str] = Counter()
        problems = [f"{baseline.label}: {p}" for p in baseline.problems]
        for index in range(runs):
            run = self.drive(self.new_run(scenario, "crash"), self.plan(scenario, index, baseline), {})
            totals.update(self.judge(run))
            for key, n in run.effects().items():
                if n > 1:
                    run.problems.append(f"effect {key} happened {n} times")
            problems += [f"{run.label}: {p}" for p in run.problems]
        return totals, problems


def _turns(state: RunState) -> int:
    return sum(isinstance(m, AssistantMessage) for m in state.messages)


def kill_sequence(scenario: str, baseline: Run) -> list[str]:
    """The kill points of the uncrashed run in order: its trace events, with each model request
    before its ``turn`` and each counted effect after its ``tool_start``."""
    trace = baseline.home / "traces" / f"{baseline.run_id}.jsonl"
    out: list[str] = []
    for line in trace.read_text().splitlines():
        event = snake_keys(json.loads(line))
        kind = event["type"]
        if kind == "turn" and scenario not in child.OVER_HTTP:
            out.append("request")
        if kind in ("turn", "tool_start", "tool_result", "approval_required"):
            out.append(kind)
        if kind == "tool_start" and event.get("tool_name") in ("record", "transfer"):
            out += ["effect_before", "effect_after"]
    return out


def untrue_results(final: RunState, effects: Counter[str]) -> int:
    """Side-effecting calls whose recorded result and the effects log disagree, plus effects that
    belong to no call."""
    untrue, keys = 0, set()
    for m in final.messages:
        if isinstance(m, ToolMessage) and m.name in SIDE_EFFECTS:
            key = f"{final.run_id}:{m.call_id}"
            keys.add(key)
            claims = m.status == "ok" or (m.status == "rejected" and WENT_THROUGH in m.text)
            untrue += claims != (effects[key] > 0)
    return untrue + sum(1 for key in effects if key not in keys)


def _dumps(messages: list[Message]) -> list[str]:
    return [json.dumps(m.model_dump(mode="json", exclude={"usage"}), sort_keys=True) for m in messages]


def soak(
    seed: int = 7,
    runs: int = 25,
    max_kills: int = 4,
    scenarios: list[str] | None = None,
    method: str = "forkserver",
    keep: bool = False,
) -> dict[str, Any]:
    """Run the soak; return ``{"config", "scenarios": {name: figures}, "problems": {name: [...]}}``."""
    root = Path(tempfile.mkdtemp(prefix="tether-soak-"))
    names = scenarios or list(child.SCRIPTS)
    out: dict[str, Any] = {
        "config": {"seed": seed, "runs": runs, "max_kills": max_kills, "start_method": method},
        "scenarios": {},
        "problems": {},
    }
    soaker = Soak(root, seed, method, max_kills)
    t0 = time.perf_counter()
    try:
        for name in names:
            figures, problems = soaker.scenario(name, runs)
            out["scenarios"][name] = dict(figures)
            out["problems"][name] = problems
    finally:
        soaker.close()
        for name in names:  # a command left running must not write into a deleted directory
            for d in root.glob(f"{name}_*"):
                wait_until_idle(d / "workspace")
        if not keep:
            shutil.rmtree(root, ignore_errors=True)
    out["config"]["seconds"] = round(time.perf_counter() - t0, 1)
    if keep:
        out["config"]["kept"] = str(root)
    return out


def table(title: str, columns: list[str], results: dict[str, Any]) -> None:
    rows = [[name, *(str(fig.get(c, 0)) for c in columns)] for name, fig in results["scenarios"].items()]
    header = ["scenario", *columns]
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
    print(f"\n## {title}\n")
    for r in [header, *rows]:
        print("  ".join(x.rjust(w) if i else x.ljust(w) for i, (x, w) in enumerate(zip(r, widths, strict=True))))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--runs", type=int, default=25, help="crashed runs per scenario")
    parser.add_argument("--max-kills", type=int, default=4, help="kills per run at most")
    parser.add_argument("--scenarios", default=",".join(child.SCRIPTS))
    parser.add_argument("--start-method", default="forkserver", choices=["forkserver", "spawn"])
    parser.add_argument("--keep", action="store_true", help="keep the runs' directories and print where")
    args = parser.parse_args()
    results = soak(args.seed, args.runs, args.max_kills, args.scenarios.split(","), args.start_method, args.keep)
    table(
        "what was done",
        [
            "runs",
            "attempts",
            "kills",
            "timer kills",
            "requests",
            "unrecorded requests",
            "counted in flight",
            "approval stops",
            "outcome_unknown stops",
        ],
        results,
    )
    table(
        "where the kills landed (delayed ones under the point that started the timer)",
        [f"kill@{p}" for p in KILL_POINTS],
        results,
    )
    table("guarantees (target: 0 everywhere)", GUARANTEES, results)
    table(
        "costs (µ$) and the person's decisions at outcome_unknown",
        [
            "cost over reference (µ$)",
            "spent-unknown (µ$)",
            "rejected: it went through",
            "approved again: not done",
            "commands alive at the stop",
            "... reported running by tether",
        ],
        results,
    )
    for name, problems in results["problems"].items():
        for p in problems[:12]:
            print(f"  {name}: {p}")
        if len(problems) > 12:
            print(f"  {name}: ... {len(problems) - 12} more in the results file")
    print(f"\n{results['config']['seconds']} s, seed {args.seed}")
    write_results("crash_soak", results)


if __name__ == "__main__":
    main()
