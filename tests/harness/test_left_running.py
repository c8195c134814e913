"""A side effect that may still be happening is never started a second time (law 3)."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tether import Agent, CancelSignal, RunState, RunStore, approve, reject, run, run_stream, tool
from tether.harness.state import Intent, kill_waiting_process, waiting_process
from tether.messages import AssistantMessage, ToolCallPart, ToolMessage, UserMessage
from tether.processes import process_alive, process_identity
from tether.status import OutcomeUnknownInterruption
from tether.testing import FunctionModel
from tether.tools.shell import RunCommand, ShellSettings

# Linux and macOS both: tether.processes reads /proc on one and ps on the other. Windows has no
# process groups or signals to test with.
# Why skipped on Windows: these tests start process groups and send them POSIX signals
# (killpg, SIGKILL), which Windows does not have; tether.processes covers Windows differently.
pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="POSIX process groups and signals")


def crashed_state(pid: int | None) -> RunState:
    """A run whose process died while the call ``c1`` to ``act`` was running."""
    state = RunState(
        messages=[
            UserMessage.text("deploy"),
            AssistantMessage(content=(ToolCallPart(id="c1", name="act", arguments="{}"),)),
        ]
    )
    state.intents["c1"] = Intent(
        key=f"{state.run_id}:c1", pid=pid, process=process_identity(pid) if pid is not None else None
    )
    return state


def stopped_for_a_person(state: RunState) -> RunState:
    """What the first resume after the crash leaves: waiting for a decision about ``c1``."""
    state.status = "interrupted"
    state.interruption = OutcomeUnknownInterruption(
        call_id="c1", tool_name="act", idempotency_key="k", pid=state.intents["c1"].pid, still_running=True
    )
    return state


@pytest.fixture
def leftover() -> Any:
    proc = subprocess.Popen(["sleep", "60"], start_new_session=True)
    yield proc
    proc.kill()
    proc.wait()


def test_a_live_leftover_blocks_a_second_copy_until_it_is_stopped(leftover: Any) -> None:
    runs: list[int] = []

    @tool
    def act() -> str:
        """Deploy."""
        runs.append(1)
        return "deployed"

    agent = Agent(FunctionModel(lambda m, r: "done"), tools=[act])
    state = crashed_state(leftover.pid)
    result = asyncio.run(run(agent, state=state))
    assert result.status == "interrupted" and result.interruption.type == "outcome_unknown"
    assert result.interruption.still_running and result.interruption.pid == leftover.pid
    assert f"process {leftover.pid} is still running" in result.reason
    assert waiting_process(state) is not None

    approve(state)  # the person says "run it again" without looking: the first copy still lives
    result = asyncio.run(run(agent, state=state))
    assert result.status == "interrupted" and runs == []
    assert "a second copy will not be started" in result.reason

    assert kill_waiting_process(state) == leftover.pid
    leftover.wait(timeout=10)
    assert waiting_process(state) is None
    result = asyncio.run(run(agent, state=state))
    assert result.status == "completed" and runs == [1]


def test_a_reused_pid_is_not_mistaken_for_the_leftover(leftover: Any) -> None:
    state = crashed_state(leftover.pid)
    state.intents["c1"].process = "linux:another-boot:12345"  # what the crashed command was
    assert not process_alive(leftover.pid, state.intents["c1"].process)
    stopped_for_a_person(state)
    reject(state, reason="checked by hand: it did not deploy")
    result = asyncio.run(run(Agent(FunctionModel(lambda m, r: "ok"), tools=[]), state=state))
    assert result.status == "completed"
    assert kill_waiting_process(state) is None
    assert process_identity(leftover.pid) is not None, "a process that only shares the number was left alone"


def test_the_shell_reports_its_process_and_it_is_saved_with_the_intent(tmp_path: Path) -> None:
    store = RunStore(tmp_path / "runs")
    replies = iter(
        [
            AssistantMessage(content=(ToolCallPart(id="c1", name="run_command", arguments='{"command": "sleep 30"}'),)),
            "stopped",
        ]
    )
    agent = Agent(
        FunctionModel(lambda m, r: next(replies)),
        tools=[RunCommand(ShellSettings(require_approval=False))],
        cwd=tmp_path,
    )
    signal = CancelSignal()
    seen: dict[str, Any] = {}

    async def watch() -> None:
        for _ in range(1000):  # the pid is saved as soon as the process exists
            if store.exists("run_shell"):
                intent = store.load("run_shell").intents.get("c1")
                if intent is not None and intent.pid is not None:
                    seen["intent"] = intent
                    seen["alive"] = process_alive(intent.pid, intent.process)
                    break
            await asyncio.sleep(0.01)
        signal.cancel("enough")

    async def go() -> Any:
        watcher = asyncio.create_task(watch())
        result = await run(agent, "wait a bit", state=RunState(run_id="run_shell"), store=store, signal=signal)
        await watcher
        return result

    result = asyncio.run(go())
    assert result.status == "interrupted"
    intent = seen["intent"]
    assert intent.process is not None and seen["alive"]
    for _ in range(200):
        if not process_alive(intent.pid, intent.process):
            break
        os.sched_yield()
        asyncio.run(asyncio.sleep(0.02))
    assert not process_alive(intent.pid, intent.process), "Stop reaches the command"


def test_cli_resume_kill_stops_the_leftover(leftover: Any, tmp_path: Path) -> None:
    home = tmp_path / "home"
    state = stopped_for_a_person(crashed_state(leftover.pid))
    state.config = {"model": "scripted/hello", "cwd": str(tmp_path)}
    RunStore(home / "runs").save(state)
    env = {**os.environ, "TETHER_HOME": str(home)}
    out = subprocess.run(
        ["tether", "resume", state.run_id, "--kill", "--reject", "stopped it before it finished", "--json"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert f"stopped process {leftover.pid}" in out.stderr
    leftover.wait(timeout=10)
    saved = RunStore(home / "runs").load(state.run_id)
    (result,) = [m for m in saved.messages if isinstance(m, ToolMessage)]
    assert "stopped it before it finished" in result.text


def test_stopping_a_command_leaves_no_task_exception_unretrieved(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    # An exception nobody retrieves is logged later from a finalizer; in CPython 3.11 that logging
    # parses source (traceback carets), which breaks an ast.parse running at that moment
    # ("AST constructor recursion depth mismatch") — pytest's own assertion rewriting among them.
    import ast
    import inspect

    source = Path(inspect.getfile(ast)).read_text()
    replies = iter(
        [
            AssistantMessage(content=(ToolCallPart(id="c1", name="run_command", arguments='{"command": "sleep 30"}'),)),
            "stopped",
        ]
    )
    agent = Agent(
        FunctionModel(lambda m, r: next(replies)),
        tools=[RunCommand(ShellSettings(require_approval=False))],
        cwd=tmp_path,
    )
    signal = CancelSignal()

    async def go() -> None:
        async for event in run_stream(agent, "wait", signal=signal):
            if event.type == "tool_start":
                asyncio.get_running_loop().call_later(0.5, signal.cancel, "enough")
            if event.type == "done":
                assert event.result.status == "interrupted"
                ast.parse(source)

    with caplog.at_level("ERROR", logger="asyncio"):
        asyncio.run(go())
    assert "never retrieved" not in caplog.text


def test_cli_resume_wait_waits_for_the_leftover_then_decides(tmp_path: Path) -> None:
    """``--wait``: the command a crashed run left running finishes on its own; only then is the
    decision (here: approve, which runs the call again, once) applied. The leftover ends when the
    test says so, after tether has said it waits (a leftover of a fixed two seconds ended before
    a loaded machine had started tether)."""
    finish = tmp_path / "finish"
    proc = subprocess.Popen(["sh", "-c", f'while [ ! -e "{finish}" ]; do sleep 0.05; done'], start_new_session=True)
    home = tmp_path / "home"
    state = stopped_for_a_person(crashed_state(proc.pid))
    state.config = {"model": "scripted/hello", "cwd": str(tmp_path)}
    RunStore(home / "runs").save(state)
    env = {**os.environ, "TETHER_HOME": str(home)}
    try:
        resume = subprocess.Popen(
            ["tether", "resume", state.run_id, "--wait", "--reject", "it finished on its own", "--json"],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        assert resume.stderr is not None
        said = []
        for line in resume.stderr:  # tether says it waits, then the leftover may end
            said.append(line)
            if "waiting for process" in line:
                break
        assert resume.poll() is None, "resume returned while the leftover still ran"
        finish.touch()
        stdout, rest = resume.communicate(timeout=60)
        assert proc.wait(timeout=10) == 0, "the leftover did not end on its own"
    finally:
        proc.kill()
        proc.wait()
    out = subprocess.CompletedProcess(resume.args, resume.returncode, stdout, "".join(said) + rest)
    assert f"waiting for process {proc.pid} to exit" in out.stderr
    assert "stopped process" not in out.stderr  # it waited; it did not kill
    assert proc.returncode == 0  # the leftover ran to its end
    saved = RunStore(home / "runs").load(state.run_id)
    (result,) = [m for m in saved.messages if isinstance(m, ToolMessage)]
    assert "it finished on its own" in result.text
