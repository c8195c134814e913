"""Stopping for a person before a dangerous action, attacked end to end (a helper's fifth round):
decisions through the Python API and the command line, and what a saved run keeps of them.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from tests.cli.conftest import Terminal, run_main
from tether import Agent, RunState, RunStore, approve, reject, run_sync, tool
from tether.messages import Message, ToolMessage, UserMessage
from tether.providers.base import ModelRequest
from tether.status import ApprovalInterruption
from tether.testing import FunctionModel, Reply

# --- a decision is for one call --------------------------------------------------------------


def paying_agent() -> tuple[Agent, list[str]]:
    """A model that answers every message of the person with the same payment, under the same
    call id each time (as in-process models, and servers that number calls anew each turn, do)."""
    sent: list[str] = []

    @tool(needs_approval=True)
    def send_money(to: str, amount: int) -> str:
        """Send money."""
        sent.append(f"{amount} to {to}")
        return f"sent {amount} to {to}"

    def model(messages: list[Message], request: ModelRequest) -> Reply | str:
        if isinstance(messages[-1], UserMessage):
            return Reply(calls=(("c1", "send_money", {"to": "bob", "amount": 100}),))
        return "done"

    return Agent(FunctionModel(model), tools=[send_money]), sent


@pytest.mark.parametrize("first", ["approved", "rejected"])
def test_a_decision_never_answers_a_later_call_that_reused_its_call_id(first: str) -> None:
    """A person approved one payment; later in the conversation the model asked for the same
    payment again under the same call id. Before: the second payment ran without anyone being
    asked (the approval stayed kept under the id, its arguments' hash matched), so one "yes" paid
    twice; and a rejection answered the later call with a decision nobody made. Now a decision
    ends with the call's result, and the later call stops for a person of its own."""
    agent, sent = paying_agent()
    state = RunState()
    assert isinstance(run_sync(agent, "pay bob", state=state).interruption, ApprovalInterruption)
    (approve if first == "approved" else reject)(state)
    assert run_sync(agent, state=state).status == "completed"
    assert sent == (["100 to bob"] if first == "approved" else [])
    again = run_sync(agent, "and what about next month?", state=state)
    assert again.status == "interrupted" and isinstance(again.interruption, ApprovalInterruption)
    assert sent == (["100 to bob"] if first == "approved" else [])
    assert state.approved == {} and state.rejected == {}
    approve(state)
    assert run_sync(agent, state=state).status == "completed"
    assert len(sent) == (2 if first == "approved" else 1)
    results = [m for m in state.messages if isinstance(m, ToolMessage)]
    assert [r.status for r in results] == (["ok", "ok"] if first == "approved" else ["rejected", "ok"])


def test_two_calls_of_one_reply_with_one_id_are_each_asked_and_each_can_be_decided() -> None:
    """An in-process model (or a custom provider) gave two payments of one reply the same id. The
    person approved the first (bob, 100); the run then stopped for the second (eve, 900) under that
    same id, and no decision could be given: approve() said the call "is not waiting for a
    decision", and the run was stuck. Had the two calls been identical, the one "yes" ran both.
    Each call now gets an id of its own when the reply is recorded, whatever the provider."""
    sent: list[str] = []

    @tool(needs_approval=True)
    def send_money(to: str, amount: int) -> str:
        """Send money."""
        sent.append(f"{amount} to {to}")
        return "sent"

    def model(messages: list[Message], request: ModelRequest) -> Reply | str:
        if isinstance(messages[-1], UserMessage):
            return Reply(
                calls=(
                    ("c1", "send_money", {"to": "bob", "amount": 100}),
                    ("c1", "send_money", {"to": "eve", "amount": 900}),
                )
            )
        return "done"

    agent = Agent(FunctionModel(model), tools=[send_money])
    state = RunState()
    first = run_sync(agent, "pay them", state=state)
    assert isinstance(first.interruption, ApprovalInterruption) and first.interruption.args["to"] == "bob"
    approve(state)
    second = run_sync(agent, state=state)
    assert isinstance(second.interruption, ApprovalInterruption) and second.interruption.args["to"] == "eve"
    assert second.interruption.call_id != "c1" and sent == ["100 to bob"]
    reject(state, reason="not eve")
    assert run_sync(agent, state=state).status == "completed"
    assert sent == ["100 to bob"]
    results = [m for m in state.messages if isinstance(m, ToolMessage)]
    assert [r.status for r in results] == ["ok", "rejected"] and "not eve" in results[1].text


# --- the command line: only a person who read the question answers it -----------------------


@pytest.fixture
def env(tether_home: Path) -> dict[str, str]:
    """The real command's environment: its own TETHER_HOME, no provider from this machine."""
    drop = ("LLM_BASE_URL", "OPENAI_BASE_URL", "OPENAI_API_KEY", "TETHER_SESSION_STORE")
    return {**{k: v for k, v in os.environ.items() if k not in drop}, "TETHER_HOME": str(tether_home)}


def test_keys_typed_before_the_question_is_on_screen_do_not_answer_it(workspace: Path, env: dict[str, str]) -> None:
    """At a terminal, "y" and Enter typed while the run was still starting (in a chat: the next
    message typed while the reply streamed) were read as the answer to the approval question that
    came after: access.log was deleted before anyone had seen what was asked. What was typed before
    the question is dropped; the question waits for a line typed after it."""
    term = Terminal(["tether", "run", "--model", "scripted/destructive", "--cwd", str(workspace), "free space"], env)
    term.type(b"y\n\n")  # typed ahead, before any question is on screen
    term.read_until(b"[y/N] ")
    term.type(b"\x04")  # Ctrl-D: nobody answers the question itself
    code, _, seen = term.finish()
    assert code == 5, seen
    assert (workspace / "access.log").exists()
    assert "[interrupted] delete_file needs approval" in seen


def test_a_chat_message_typed_ahead_is_not_taken_for_the_answer(workspace: Path, env: dict[str, str]) -> None:
    """In `tether chat` at a terminal (read through readline), the person sent a message and at
    once typed "yes", meant as their next message: it was read as the answer to the approval
    question that came up meanwhile, and access.log was deleted. Now it is dropped, the question
    waits, and an unanswered question leaves the run waiting."""
    argv = ["tether", "chat", "--model", "scripted/destructive", "--cwd", str(workspace)]
    term = Terminal(argv, env, stdout_on_terminal=True)
    term.read_until(b"you> ")
    term.type(b"free some space\nyes\n")
    term.read_until(b"[y/N] ")
    term.type(b"\x04")  # Ctrl-D: this question is not answered
    term.read_until(b"you> ")
    term.type(b"\x04")
    code, _, seen = term.finish()
    assert code == 0, seen
    assert (workspace / "access.log").exists()
    assert "[interrupted] delete_file needs approval" in seen


@pytest.fixture
def batch_of_two(monkeypatch: pytest.MonkeyPatch, tether_home: Path) -> list[int]:
    """The command line's agent replaced by one whose model reads two private records in one
    reply (a batch of two calls, each needing approval); returns the records read."""
    import tether.assembly
    from tether.assembly import agents as assembly_agents

    ran: list[int] = []

    @tool(read_only=True, needs_approval=True)
    def peek(n: int) -> str:
        """Read a private record."""
        ran.append(n)
        return f"record {n}"

    def reply(messages: list[Message], request: ModelRequest) -> Reply | str:
        if any(isinstance(m, ToolMessage) for m in messages):
            return "done"
        return Reply(calls=(("c1", "peek", {"n": 1}), ("c2", "peek", {"n": 2})))

    def build(settings: Any, recipe: Any) -> Agent:
        return Agent(FunctionModel(reply), tools=[peek])

    monkeypatch.setattr(assembly_agents, "build_agent", build)
    monkeypatch.setattr(tether.assembly, "build_agent", build, raising=False)  # the package keeps what it lent
    return ran


def only_run(tether_home: Path) -> str:
    (run_id,) = [d.name for d in (tether_home / "runs").iterdir() if d.name.startswith("run_")]
    return run_id


def test_a_decision_given_at_the_terminal_is_kept_when_the_next_question_of_its_batch_is_not_answered(
    batch_of_two: list[int],
    workspace: Path,
    tether_home: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Two calls of one batch wait. At the terminal the person declined the first ("n", with a
    reason), then left the second question unanswered (Ctrl-D). Before: the "no" was never saved;
    the run waited on the first call again, and the `tether resume RUN --approve` its hint offered
    approved the very call the person had declined. Now the decision is saved and the run waits on
    the second call alone."""
    from tether.cli import run as cli_run

    monkeypatch.setattr(cli_run, "at_terminal", lambda json_out: not json_out)
    answers = iter(["n", "not that record", None])  # None: end of input at the second question
    monkeypatch.setattr(cli_run, "ask", lambda question: next(answers))
    code, _, err = run_main("run", "--model", "scripted/hello", "--cwd", str(workspace), "read both", capsys=capsys)
    assert code == 5, err
    run_id = only_run(tether_home)
    saved = RunStore(tether_home / "runs").load(run_id)
    assert saved.rejected == {"c1": "not that record"}
    assert isinstance(saved.interruption, ApprovalInterruption) and saved.interruption.call_id == "c2"
    # The hint's --approve now answers the call nobody decided; the declined one never runs.
    monkeypatch.setattr(cli_run, "at_terminal", lambda json_out: False)
    code, _, err = run_main("resume", run_id, "--approve", capsys=capsys)
    assert code == 0, err
    assert batch_of_two == [2]


def test_show_names_every_call_of_the_batch_that_waits(
    batch_of_two: list[int], workspace: Path, tether_home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`tether show` of a run whose batch of two calls waits named only the first ("waiting for
    approval of peek {"n": 1}"): the person deciding from it did not see the second call, which
    the next `--approve` would be about. Every call that waits is named, with its call id."""
    code, _, err = run_main("run", "--model", "scripted/hello", "--cwd", str(workspace), "read both", capsys=capsys)
    assert code == 5, err
    code, out, _ = run_main("show", only_run(tether_home), capsys=capsys)
    assert code == 0
    heading = out.split("\n\n", 1)[0]
    assert 'waiting for approval of peek {"n": 1}' in heading
    assert 'peek {"n": 2} [call c2]' in heading
    assert batch_of_two == []


def test_resume_decides_the_call_it_names_and_refuses_one_that_does_not_wait(
    batch_of_two: list[int], workspace: Path, tether_home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`tether resume RUN --approve` approved whatever the run waited on when it was loaded, not
    the call the person had seen: after someone else decided that call, the same command approved
    the next one, never shown to them (the server binds a decision to its call and arguments; the
    command line could not). `--call CALL_ID` names the call decided; a call that does not wait
    is refused (exit 2) and nothing runs. It also decides any call of a batch, in any order."""
    code, _, err = run_main("run", "--model", "scripted/hello", "--cwd", str(workspace), "read both", capsys=capsys)
    assert code == 5, err
    run_id = only_run(tether_home)
    code, _, err = run_main("resume", run_id, "--approve", "--call", "c9", capsys=capsys)
    assert code == 2 and "call 'c9' is not waiting for a decision" in err, err
    code, _, err = run_main("resume", run_id, "--call", "c1", capsys=capsys)
    assert code == 2 and "--call goes with --approve or --reject" in err
    code, _, err = run_main("resume", run_id, "--reject", "not that one", "--call", "c2", capsys=capsys)
    assert code == 5, err  # c1 still waits: nothing of the batch ran
    assert batch_of_two == []
    code, _, err = run_main("resume", run_id, "--approve", "--call", "c1", capsys=capsys)
    assert code == 0, err
    assert batch_of_two == [1], err
    saved = RunStore(tether_home / "runs").load(run_id)
    results = {m.call_id: m.status for m in saved.messages if isinstance(m, ToolMessage)}
    assert results == {"c1": "ok", "c2": "rejected"}


def test_a_decision_for_a_run_killed_while_it_ran_says_to_resume_it_first(
    workspace: Path, env: dict[str, str], tether_home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`tether resume RUN --approve` on a run whose process was killed mid-tool (`tether runs`:
    "stopped: no process") said only "not waiting for an approval (status running); nothing to
    approve or reject": not what to do. It now says the run waits for no decision and how to go on,
    and nothing is decided or run."""
    import subprocess

    proc = subprocess.Popen(
        ["tether", "run", "--model", "scripted/slow", "--cwd", str(workspace), "scan the archive"],
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    assert proc.stderr is not None
    for line in proc.stderr:  # the slow tool has started: the run is saved as running
        if line.startswith(b"-> scan_archive"):
            break
    proc.kill()
    proc.wait(timeout=30)
    run_id = only_run(tether_home)
    code, _, err = run_main("resume", run_id, "--approve", capsys=capsys)
    assert code == 2
    assert "is not waiting for a decision: its process stopped while it ran" in err
    assert f"tether resume {run_id}" in err
    saved = RunStore(tether_home / "runs").load(run_id)
    assert saved.status == "running" and saved.approved == {}  # left as it was, to resume


def test_a_new_total_budget_below_what_the_run_spent_is_refused_before_the_approved_call_runs(
    batch_of_two: list[int], workspace: Path, tether_home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """docs/cli.md: `--max-budget USD` on resume is the run's new total, "so it must be above"
    what it spent. For a run waiting for approval (not stopped at its budget) a total below that
    was taken: `tether resume RUN --approve --max-budget 0.0001` ran the approved calls, then
    stopped budget_exceeded with more spent than its budget. It is refused, nothing decided or run."""
    code, _, err = run_main("run", "--model", "scripted/hello", "--cwd", str(workspace), "read both", capsys=capsys)
    assert code == 5, err
    run_id = only_run(tether_home)
    spent = RunStore(tether_home / "runs").load(run_id).cost_usd
    assert spent > 0.0001
    code, _, err = run_main("resume", run_id, "--approve", "--max-budget", "0.0001", capsys=capsys)
    assert code == 2 and "new total budget" in err and f"${spent:.6f}" in err, err
    assert batch_of_two == []
    saved = RunStore(tether_home / "runs").load(run_id)
    assert saved.approved == {} and saved.status == "interrupted"


def test_a_run_whose_session_was_deleted_is_not_resumed_and_its_call_not_run(
    workspace: Path, tether_home: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A run of `--session s1` waited for approval; the person deleted the conversation
    (`tether sessions delete s1`). `tether resume RUN --approve` then deleted access.log and wrote
    the deleted conversation back (six messages) — the server refuses such a decision (404). It is
    refused, with why, and nothing is decided or run."""
    for name in ("LLM_BASE_URL", "OPENAI_BASE_URL", "OPENAI_API_KEY", "TETHER_SESSION_STORE"):
        monkeypatch.delenv(name, raising=False)
    argv = ("run", "--session", "s1", "--model", "scripted/destructive", "--cwd", str(workspace), "free space")
    code, _, err = run_main(*argv, capsys=capsys)
    assert code == 5, err
    code, _, err = run_main("sessions", "delete", "s1", capsys=capsys)
    assert code == 0, err
    run_id = only_run(tether_home)
    code, _, err = run_main("resume", run_id, "--approve", capsys=capsys)
    assert code == 2 and "session s1 was deleted after run" in err, err
    assert (workspace / "access.log").exists()
    code, out, err = run_main("sessions", "list", "--json", capsys=capsys)
    assert code == 0 and json.loads(out) == [], (out, err)
