"""One attempt of a crash-soak run: load the run (or start it), apply a person's decision, run until
it stops, and SIGKILL itself at the point the driver chose. Used by ``bench/crash_soak.py``.

The driver starts every attempt in a new process (a fork of a server that has already imported
this module, so an attempt costs milliseconds, not an interpreter start) and reads what happened
from disk: the run store, the effects each side-effecting call appended to ``effects.txt`` in the
workspace (one line per effect: its idempotency key), and ``requests.log`` (one line per model
request the in-process model received: the attempt and the turn it was for).

Kill points, counted within one process: any trace event (``turn``, ``tool_start``,
``tool_result``, ``approval_required``), ``request`` (a model request in flight), ``effect_before``
and ``effect_after`` (inside a counted tool, around its effect); each with an optional delay, so a
timer fires while a tool or a request is under way. ``call_start`` kills at the start of the named
calls (for the reference runs, see the driver).
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import threading
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tether import Agent, RunState, RunStore, run_stream, tool
from tether.harness.state import approve, reject
from tether.messages import AssistantMessage, Message
from tether.providers.scripted import Reply
from tether.testing import FunctionModel
from tether.tokens import count_tokens
from tether.tools.shell import RunCommand, ShellSettings
from tether.tracing import JsonlTracer
from tether.usage import Price

PRICE = Price(input=2.0, output=12.0)
EFFECTS = "effects.txt"
MODEL_LATENCY_S = 0.02  # each model request takes this long, so kills land while one is in flight
TOOL_S = 0.02  # read-only tools
EFFECT_S = 0.02  # before and after a counted tool's effect
PARALLEL_S = 0.15  # a parallel post's own work before its effect: kills land mid-batch
SHELL = 'sleep 0.3; echo "$RUN_ID:{cid}" >> effects.txt'

count_tokens("warm")  # the fork server imports this module once: every attempt starts with the tokenizer loaded


def calls(*items: tuple[str, str, dict[str, Any]]) -> Reply:
    return Reply(calls=tuple(items))


# The scripts are functions of the turn index only, so a resumed run is asked exactly what an
# uncrashed one is. Read-only reads repeat on purpose (answered from the read cache).
def counted(t: int, tools: str) -> Reply:
    """Read-only tools and a side-effecting tool that needs no approval."""
    steps = [
        calls(("c1", "list_files", {})),
        calls(("c2", "read_file", {"path": "errors.log"}), ("c3", "record", {"note": "worker 7 timed out"})),
        calls(("c4", "record", {"note": "paged the on-call"})),
        calls(
            ("c5", "read_file", {"path": "errors.log"}),
            ("c6", "record", {"note": "ticket opened"}),
            ("c7", "record", {"note": "status page updated"}),
        ),
    ]
    return steps[t] if t < len(steps) else Reply(text="Recorded the timeout in four places.")


def approved(t: int, tools: str) -> Reply:
    """A side-effecting tool that needs a person's approval for every call."""
    steps = [
        calls(("c1", "read_file", {"path": "access.log"})),
        calls(("c2", "transfer", {"amount": 5})),
        calls(("c3", "transfer", {"amount": 7}), ("c4", "read_file", {"path": "errors.log"})),
    ]
    return steps[t] if t < len(steps) else Reply(text="Two transfers made.")


def shell(t: int, tools: str) -> Reply:
    """Slow shell commands through tether's run_command, each appending its key after a sleep."""
    steps = [
        calls(("c1", "list_files", {})),
        calls(("c2", "run_command", {"command": SHELL.format(cid="c2")})),
        calls(("c3", "run_command", {"command": SHELL.format(cid="c3")})),
    ]
    return steps[t] if t < len(steps) else Reply(text="Both commands ran.")


def server(t: int, tools: str) -> Reply:
    """The mix, served by the scripted OpenAI-compatible server in the driver's process."""
    steps = [
        calls(("c1", "list_files", {})),
        calls(("c2", "record", {"note": "worker 7 timed out"})),
        calls(("c3", "transfer", {"amount": 3}), ("c4", "read_file", {"path": "errors.log"})),
    ]
    return steps[t] if t < len(steps) else Reply(text="Recorded and transferred.")


def parallel(t: int, tools: str) -> Reply:
    """A parallel batch of three slow side effects (``post`` may run alongside others), between
    read-only batches."""
    steps = [
        calls(("c1", "list_files", {}), ("c2", "read_file", {"path": "errors.log"})),
        calls(*((f"c{i}", "post", {"channel": f"ch{i}"}) for i in (3, 4, 5))),
        calls(("c6", "read_file", {"path": "access.log"}), ("c7", "post", {"channel": "status"})),
    ]
    return steps[t] if t < len(steps) else Reply(text="Posted to four channels.")


SCRIPTS: dict[str, Callable[[int, str], Reply]] = {
    "counted": counted,
    "approved": approved,
    "shell": shell,
    "server": server,
    "parallel": parallel,
}
OVER_HTTP = frozenset({"server"})


@dataclass
class Killer:
    """Counts kill points in this process and SIGKILLs it at the chosen one."""

    point: str | None = None
    n: int = 0
    delay: float = 0.0
    calls: frozenset[str] = frozenset()
    seen: dict[str, int] = field(default_factory=dict)

    def at(self, point: str, call_id: str | None = None) -> None:
        if point == "tool_start" and call_id in self.calls:
            die()
        self.seen[point] = self.seen.get(point, 0) + 1
        if point != self.point or self.seen[point] != self.n:
            return
        if self.delay <= 0:
            die()
        timer = threading.Timer(self.delay, die)
        timer.daemon = True
        timer.start()


def die() -> None:
    os.kill(os.getpid(), signal.SIGKILL)


def append_line(path: Path, line: str) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    try:
        os.write(fd, (line + "\n").encode())
        os.fsync(fd)
    finally:
        os.close(fd)


def make_tools(scenario: str, run_id: str, killer: Killer) -> list[Any]:
    @tool(name="list_files", read_only=True)
    async def list_files(ctx: Any) -> str:
        """List the files in the working directory."""
        await asyncio.sleep(TOOL_S)
        return "\n".join(sorted(p.name for p in Path(ctx.cwd).iterdir() if p.name != EFFECTS))

    @tool(name="read_file", read_only=True)
    async def read_file(ctx: Any, path: str) -> str:
        """Read a file in the working directory."""
        await asyncio.sleep(TOOL_S)
        return (Path(ctx.cwd) / path).read_text()

    async def effect(ctx: Any) -> str:
        killer.at("effect_before")
        await asyncio.sleep(EFFECT_S)
        append_line(Path(ctx.cwd) / EFFECTS, ctx.idempotency_key)
        killer.at("effect_after")
        await asyncio.sleep(EFFECT_S)
        return "done"

    @tool(name="record")
    async def record(ctx: Any, note: str) -> str:
        """Record a note in the incident log (a side effect)."""
        return await effect(ctx)

    @tool(name="transfer", needs_approval=True)
    async def transfer(ctx: Any, amount: int) -> str:
        """Transfer money (a side effect that needs approval)."""
        return await effect(ctx)

    @tool(name="post", parallel=True)
    async def post(ctx: Any, channel: str) -> str:
        """Post to a channel (a slow side effect that may run alongside others)."""
        await asyncio.sleep(PARALLEL_S)
        return await effect(ctx)

    tools: list[Any] = [list_files, read_file]
    if scenario == "shell":
        tools.append(RunCommand(ShellSettings(require_approval=False, env={"RUN_ID": run_id})))
    else:
        tools += [record, transfer, post]
    return tools


def in_process_model(scenario: str, log: Path, attempt: int, killer: Killer) -> FunctionModel:
    script = SCRIPTS[scenario]

    async def reply(messages: list[Message], request: Any) -> Reply:
        turn = sum(isinstance(m, AssistantMessage) for m in messages)
        append_line(log, f"{attempt} {turn}")  # sent: from here on the provider bills it
        killer.at("request")
        await asyncio.sleep(MODEL_LATENCY_S)
        return script(turn, "")

    return FunctionModel(reply, model_id=scenario, price=PRICE)


class KillingTracer(JsonlTracer):
    def __init__(self, root: Path, killer: Killer) -> None:
        super().__init__(root)
        self.killer = killer

    def write(self, event: Any) -> None:
        super().write(event)
        self.killer.at(event.type, getattr(event, "call_id", None))


def make_agent(spec: dict[str, Any], killer: Killer) -> Agent:
    scenario, home = spec["scenario"], Path(spec["home"])
    tools = make_tools(scenario, spec["run_id"], killer)
    if scenario in OVER_HTTP:
        os.environ["LLM_BASE_URL"] = spec["base_url"]  # this process is the attempt's alone
        return Agent(
            f"openai/{spec['model']}",
            tools=tools,
            cwd=spec["workspace"],
            price=PRICE,
            request_extra={"user": f"{spec['tag']}:{spec['attempt']}"},
        )
    model = in_process_model(scenario, home / "requests.log", spec["attempt"], killer)
    return Agent(model, tools=tools, cwd=spec["workspace"])


def apply_decision(state: RunState, decision: list[str] | None) -> None:
    if not decision:
        return
    if decision[0] == "approve":
        approve(state)
    else:
        reject(state, decision[1])


async def run_attempt(spec: dict[str, Any]) -> dict[str, Any]:
    kill = spec.get("kill") or {}
    killer = Killer(kill.get("point"), kill.get("n", 0), kill.get("delay", 0.0), frozenset(kill.get("calls", ())))
    home = Path(spec["home"])
    store = RunStore(home / "runs")
    if store.exists(spec["run_id"]):
        state, prompt = store.load(spec["run_id"]), None
        apply_decision(state, spec.get("decision"))
    else:
        state, prompt = RunState(run_id=spec["run_id"]), "A worker timed out: handle it."
    result: dict[str, Any] = {}
    async for event in run_stream(
        make_agent(spec, killer), prompt, state=state, store=store, tracer=KillingTracer(home / "traces", killer)
    ):
        if event.type == "done":
            result = json.loads(event.result.model_dump_json())
    return result


def ready() -> None:
    """Does nothing: the driver starts one process first, so that starting the fork server is not
    counted in an attempt's time."""


def attempt(spec: dict[str, Any]) -> None:
    """The process's whole life: the result (or the error) goes to ``spec["result"]`` as JSON."""
    try:
        out = {"result": asyncio.run(run_attempt(spec))}
        code = 0
    except BaseException:
        out, code = {"error": traceback.format_exc()}, 3
    # Whole or not at all: a timer may still kill this process while it writes.
    tmp = Path(spec["result"] + ".tmp")
    tmp.write_text(json.dumps(out))
    tmp.replace(spec["result"])
    os._exit(code)
