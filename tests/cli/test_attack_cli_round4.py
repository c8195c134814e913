"""The command line as a person meets it, attacked a fourth time: an MCP server's question at the
terminal that a Stop leaves behind in ``tether chat``, output to a pipe that closes early, and exit
codes against docs/cli.md. Each test runs the real command with its own ``TETHER_HOME``."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from tests.cli.conftest import Terminal, tether

ASKING_SERVER = Path(__file__).resolve().parents[1] / "connectors" / "asking_server.py"

# The `tether` command with one more scripted scenario, `booker`: a message that says "book" calls
# the diner's book_table (whose server asks the person a question); any other message is echoed.
BOOKER_TETHER = """\
import sys

from tether.providers.scripted import SCENARIOS, Reply, call


def booker(t, since, user):
    if since:
        return Reply(text="the diner said: " + since[:80])
    if "book" in user:
        return call("c1", "diner__book_table", {"day": "Friday"})
    return Reply(text="echo: " + user)


SCENARIOS["booker"] = booker
from tether.cli import main

sys.exit(main())
"""


@pytest.fixture
def booker(tmp_path: Path, tether_home: Path) -> list[str]:
    script = tmp_path / "booker_tether.py"
    script.write_text(BOOKER_TETHER)
    (tmp_path / "bookings.txt").write_text("")
    tether_home.mkdir(parents=True, exist_ok=True)
    (tether_home / "config.toml").write_text(
        "[mcp.diner]\n"
        f"command = {sys.executable!r}\n"
        f"args = [{str(ASKING_SERVER)!r}]\n"
        f"env = {{ BOOKINGS = {str(tmp_path / 'bookings.txt')!r} }}\n"
        'approval = "never"\n'
    )
    return [sys.executable, str(script)]


def test_chat_stop_at_a_servers_question_leaves_the_next_line_to_the_chat(
    booker: list[str], workspace: Path, env: dict[str, str], tmp_path: Path
) -> None:
    """Ctrl-C while an MCP server's question is on screen stops the reply. Was: the thread reading
    the answer kept reading, and took the next line the person typed at `you> ` as its answer:
    the message was never sent."""
    bookings = tmp_path / "bookings.txt"
    argv = [*booker, "chat", "--model", "scripted/booker", "--cwd", str(workspace), "--mcp", "diner"]
    term = Terminal(argv, env, stdout_on_terminal=True)
    term.read_until(b"you> ")
    term.type(b"book a table\n")
    term.read_until(b"(press Enter) ")
    term.type(b"\x03")  # Stop
    term.read_until(b"you> ")
    term.type(b"hello again\n")
    seen = term.read_until(b"echo: hello again", timeout=20)
    assert b"echo: hello again" in seen, seen
    # A question that is answered still reads each answer, and the server acts on them once.
    term.read_until(b"you> ")
    term.type(b"book a table\n")
    term.read_until(b"(press Enter) ", timeout=5)
    term.type(b"\n")
    for field, typed in ((b"name", b"Ada\n"), (b"guests", b"2\n"), (b"window", b"\n")):
        got = term.read_until(b": ", timeout=5)
        assert field in got, term.seen
        term.type(typed)
    assert b"the diner said: Booked" in term.read_until(b"you> ")
    term.type(b"/exit\n")
    code, _, _ = term.finish()
    assert code == 0
    assert bookings.read_text().count("Ada") == 1


# --- the answer piped to a reader that leaves early (`tether run ... | head -1`) ----------------


def _piped_to_a_reader_that_leaves(argv: list[str], env: dict[str, str], first: int = 1) -> tuple[int, str]:
    """The command with stdout a pipe whose reader takes ``first`` bytes and leaves (`| head -c 1`):
    (exit code, stderr). A short answer may be written whole before a reader that took a byte
    leaves (then nothing fails, and the exit is 0, as a shell's would be): ``first=0`` leaves at once."""
    import subprocess

    proc = subprocess.Popen(
        ["tether", *argv], env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    assert proc.stdout is not None and proc.stderr is not None
    if first:
        proc.stdout.read(first)
    proc.stdout.close()  # the reader goes away
    err = proc.stderr.read().decode()
    return proc.wait(timeout=60), err


@pytest.mark.parametrize("scenario", ["essay", "plan"])
def test_an_answer_piped_to_head_still_ends_with_the_summary_line(
    scenario: str, workspace: Path, env: dict[str, str]
) -> None:
    """`tether run ... | head -1`: the reader leaves after the first line. Was: the next write raised
    BrokenPipeError up to the command's end; stderr stopped after the steps, with no summary line,
    no run id and no way to resume (an essay's run was left interrupted without a word). Now the
    run stops as a Stop does, the summary line and the resume hint are on stderr, exit 141."""
    code, err = _piped_to_a_reader_that_leaves(
        ["run", "--model", f"scripted/{scenario}", "--cwd", str(workspace), "go"],
        env,
        first=1 if scenario == "essay" else 0,  # the plan's short answer fits in the pipe whole
    )
    assert "Traceback" not in err
    summary = [line for line in err.splitlines() if line.startswith("[")]
    assert len(summary) == 1 and "run_" in summary[0], err
    run_id = summary[0].rsplit(" ", 1)[-1]
    if "[interrupted]" in summary[0]:
        assert code == 141 and "stdout" in summary[0] and f"tether resume {run_id}" in err
    else:
        # The essay (1.8 KB) fits in the pipe: on a loaded machine the reader may take its byte
        # after all of it was written, and then nothing fails (exit 0, as a shell's would be).
        assert summary[0].startswith("[completed]") and code in (0, 141), (code, err)
    assert code == 141 or scenario == "essay", (code, err)


# --- `tether chat` with its messages piped in ----------------------------------------------------


def test_piped_chat_messages_are_sent_never_taken_as_an_approval(workspace: Path, env: dict[str, str]) -> None:
    """`printf 'free some disk space\\nyes\\n' | tether chat`: the second line is the second message.
    Was: chat asked its approval question on the pipe, so "yes" allowed the deletion (a "no" or
    any other message declined it, and was never sent). Now, as `tether run` in a script does,
    the run waits for `tether resume` and the next line is sent."""
    assert (workspace / "access.log").exists()
    out = tether(
        "chat", "--model", "scripted/destructive", "--cwd", str(workspace), env=env, input="free some disk space\nyes\n"
    )
    assert out.returncode == 0, out.stderr
    assert (workspace / "access.log").exists(), "a piped message approved the deletion"
    assert "needs approval" in out.stderr and "tether resume run_" in out.stderr
    listed = tether("runs", "--json", env=env)
    assert [row["prompt"] for row in json.loads(listed.stdout)] == ["yes", "free some disk space"]


def test_show_of_a_run_whose_reason_holds_half_a_surrogate_pair_writes_it_escaped(tmp_path: Path) -> None:
    """A run that failed with half an emoji in its reason (a model's or an error's text) ended
    `tether show` in a UnicodeEncodeError traceback: no terminal encoding can write it. It is
    written as its escape, as control characters are."""
    import asyncio
    import os

    from tether import Agent, RunStore, run
    from tether.testing import FunctionModel

    def broken(messages: object, request: object) -> str:
        raise RuntimeError("the model said \ud83d and stopped")

    home = tmp_path / "home"
    store = RunStore(home / "runs")
    result = asyncio.run(run(Agent(FunctionModel(broken), cwd=tmp_path), "hi", store=store))
    assert result.status == "failed" and "\ud83d" in result.reason
    out = tether("show", result.run_id, env={**os.environ, "TETHER_HOME": str(home)})
    assert out.returncode == 0, out.stderr
    assert "Traceback" not in out.stderr and "the model said \\ud83d and stopped" in out.stdout + out.stderr
