"""The command line as a person meets it, attacked a third time: hostile model output at the
terminal (the approval question, the streamed answer, ``tether show``), Ctrl-C and Ctrl-D in
``tether chat`` on a real pseudo-terminal that is the command's controlling terminal, a full disk
under ``$TETHER_HOME``, and listings read while another process writes. Every test runs the real
command in a subprocess with its own ``TETHER_HOME``."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.cli.conftest import Terminal, tether

# A program that is the `tether` command with one more scripted scenario, `hostile`: it asks to
# delete a file whose name carries a right-to-left override (so "gol.ssecca" reads "access.log"),
# an 8-bit CSI and an OSC sequence, then answers with a clipboard-writing escape (OSC 52) and a
# carriage return that would hide the start of its line.
HOSTILE_TETHER = """\
import sys

from tether.providers.scripted import SCENARIOS, Reply, call


def hostile(t, tools):
    if t == 0:
        return call("c1", "delete_file", {"path": "\\u202egol.ssecca\\x1b]0;pwned\\x07\\x9b31m"})
    return Reply(text="Done.\\x1b]52;c;ZXZpbA==\\x07 hidden\\rshown\\nsecond line")


SCENARIOS["hostile"] = hostile
from tether.cli import main

sys.exit(main())
"""

RAW = ("\u202e", "\x9b", "\x1b", "\x07", "\r")  # what must never reach a terminal as is


@pytest.fixture
def hostile(tmp_path: Path) -> list[str]:
    script = tmp_path / "hostile_tether.py"
    script.write_text(HOSTILE_TETHER)
    return [sys.executable, str(script)]


def _no_raw_controls(text: str) -> None:
    """No control character as is (a terminal's own line ends aside)."""
    text = text.replace("\r\n", "\n").replace("\n", "")
    for char in RAW:
        assert char not in text, (char, text)


def _run_ids(env: dict[str, str]) -> list[str]:
    out = tether("runs", "--json", "--all", env=env)
    assert out.returncode == 0, out.stderr
    return [row["run_id"] for row in json.loads(out.stdout)]


# --- hostile model output at the terminal ------------------------------------------------------


def test_the_approval_question_shows_the_calls_arguments_escaped(
    hostile: list[str], workspace: Path, env: dict[str, str]
) -> None:
    """A right-to-left override in a file name makes `Allow delete_file {"path": "<RLO>gol.ssecca"}`
    read as access.log: the person must see the characters the model sent, escaped, before saying
    yes. The decline still reaches the model."""
    term = Terminal([*hostile, "run", "--model", "scripted/hostile", "--cwd", str(workspace), "free space"], env)
    question = term.read_until(b"[y/N]").decode(errors="replace")
    assert "Allow delete_file" in question
    _no_raw_controls(question)
    assert "\\u202egol.ssecca" in question and "\\x9b31m" in question
    term.type(b"n\n")
    term.read_until(b"reason (optional): ")
    term.type(b"\n")
    code, _, seen = term.finish()
    assert code == 0, seen
    _no_raw_controls(seen)
    assert "declined delete_file" in seen


def test_show_prints_a_waiting_calls_arguments_escaped(
    hostile: list[str], workspace: Path, env: dict[str, str]
) -> None:
    out = subprocess.run(
        [*hostile, "run", "--model", "scripted/hostile", "--cwd", str(workspace), "free space", "--json"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        input="",
    )
    assert out.returncode == 5, out.stderr
    _no_raw_controls(out.stderr)  # the "!! ... needs approval" line too
    (run_id,) = _run_ids(env)
    shown = tether("show", run_id, env=env)
    assert shown.returncode == 0, shown.stderr
    waiting = next(line for line in shown.stdout.splitlines() if "waiting for approval of" in line)
    assert "\\u202egol.ssecca" in waiting and "\\x9b31m" in waiting
    _no_raw_controls(shown.stdout)


def test_a_streamed_answer_is_escaped_at_a_terminal_and_exact_in_a_pipe(
    hostile: list[str], workspace: Path, env: dict[str, str]
) -> None:
    """At a terminal the answer's escapes (OSC 52 writes the clipboard) and carriage returns are
    written visibly, its lines kept; through a pipe a script gets the answer byte for byte."""
    (workspace / "access.log").unlink()  # nothing to approve on the way: decline it at once
    argv = [*hostile, "run", "--model", "scripted/hostile", "--cwd", str(workspace), "go"]
    term = Terminal(argv, env, stdout_on_terminal=True)
    term.read_until(b"[y/N]")
    term.type(b"n\n\n")
    code, _, seen = term.finish()
    assert code == 0, seen
    answer = seen[seen.index("Done.") :]
    assert answer.startswith("Done.\\x1b]52;c;ZXZpbA==\\x07 hidden\\x0dshown\nsecond line"), answer
    _no_raw_controls(answer)

    piped = subprocess.run([*argv, "--json"], env=env, capture_output=True, text=True, timeout=60, input="")
    assert piped.returncode == 5, piped.stderr
    resumed = subprocess.run(  # bytes: text mode would read the carriage return as a line end
        [*hostile, "resume", json.loads(piped.stdout)["run_id"], "--reject", "no"],
        env=env,
        capture_output=True,
        timeout=60,
        input=b"",
    )
    assert resumed.returncode == 0, resumed.stderr
    assert resumed.stdout == b"Done.\x1b]52;c;ZXZpbA==\x07 hidden\rshown\nsecond line\n"


# --- tether chat at a real terminal ------------------------------------------------------------


def test_chat_ctrl_c_stops_the_reply_and_keeps_the_chat(
    workspace: Path, env: dict[str, str], tether_home: Path
) -> None:
    argv = ["tether", "chat", "--model", "scripted/slow", "--cwd", str(workspace), "--session", "s1"]
    term = Terminal(argv, env, stdout_on_terminal=True)
    term.read_until(b"you> ")
    term.type(b"scan the archive\n")
    term.read_until(b".. scanned")  # the slow tool is running
    term.type(b"\x03")  # Ctrl-C: stops this reply only
    stopped = term.read_until(b"you> ").decode(errors="replace")
    assert "[interrupted] cancelled" in stopped and "scanned 1200 of 1200" not in stopped
    term.type(b"/session\n")
    assert b"session 's1'" in term.read_until(b"you> ")
    term.type(b"\x04")  # Ctrl-D at the prompt: leaves
    code, _, seen = term.finish()
    assert code == 0 and "Traceback" not in seen
    statuses = [json.loads(tether("runs", "--json", env=env).stdout)[0]["status"]]
    assert statuses == ["interrupted"]


def test_chat_ends_when_terminated_during_a_reply(workspace: Path, env: dict[str, str]) -> None:
    """SIGTERM (kill, a service manager, `timeout`) during a reply saves the run, resumable, and
    ends the chat, as it ends `tether run`: it used to stop the reply only and wait at the prompt."""
    import signal

    argv = ["tether", "chat", "--model", "scripted/slow", "--cwd", str(workspace), "--session", "s1"]
    term = Terminal(argv, env, stdout_on_terminal=True)
    term.read_until(b"you> ")
    term.type(b"scan the archive\n")
    term.read_until(b".. scanned")
    term.proc.send_signal(signal.SIGTERM)
    code, _, seen = term.finish()
    assert code == 130, seen
    assert "[interrupted] cancelled: terminated (SIGTERM)" in seen and "tether resume run_" in seen
    assert not seen.rstrip().endswith("you>")
    (run,) = json.loads(tether("runs", "--json", env=env).stdout)
    assert run["status"] == "interrupted"


def test_chat_ctrl_d_at_an_approval_question_leaves_the_run_waiting_and_the_chat_open(
    workspace: Path, env: dict[str, str]
) -> None:
    term = Terminal(
        ["tether", "chat", "--model", "scripted/destructive", "--cwd", str(workspace)], env, stdout_on_terminal=True
    )
    term.read_until(b"you> ")
    term.type(b"free some space\n")
    term.read_until(b"[y/N]")
    term.type(b"\x04")  # Ctrl-D: nobody answers this question
    after = term.read_until(b"you> ").decode(errors="replace")
    assert "[interrupted] delete_file needs approval" in after and "--approve" in after
    term.type(b"\x04")  # Ctrl-D at the prompt: leaves
    code, _, seen = term.finish()
    assert code == 0 and "Traceback" not in seen
    assert (workspace / "access.log").exists()
    (run_id,) = _run_ids(env)
    resumed = tether("resume", run_id, "--approve", env=env)  # the run waits, resumable
    assert resumed.returncode == 0, resumed.stderr
    assert not (workspace / "access.log").exists()


def test_chat_sends_a_pasted_message_longer_than_the_terminals_line_whole(workspace: Path, env: dict[str, str]) -> None:
    """A terminal's line discipline keeps 4,095 characters of a line and drops the rest without a
    word: a pasted document of 7,000 characters must reach the model whole."""
    term = Terminal(
        ["tether", "chat", "--model", "scripted/hello", "--cwd", str(workspace), "--session", "long"],
        env,
        stdout_on_terminal=True,
    )
    term.read_until(b"you> ")
    message = "".join(f"word{i:05d} " for i in range(700)) + "END"
    for start in range(0, len(message), 512):  # as a paste arrives: in pieces
        term.type(message[start : start + 512].encode())
    term.type(b"\n")
    term.read_until(b"you> ")
    term.type(b"\x04")
    code, _, seen = term.finish()
    assert code == 0 and "Traceback" not in seen
    exported = tether("sessions", "export", "long", env=env)
    assert exported.returncode == 0, exported.stderr
    users = [json.loads(line) for line in exported.stdout.splitlines() if json.loads(line)["role"] == "user"]
    assert [user["content"][0]["text"] for user in users] == [message]


def test_chat_refuses_a_home_that_cannot_keep_runs_before_the_first_message(
    workspace: Path, env: dict[str, str], tether_home: Path
) -> None:
    """`runs` under $TETHER_HOME is a file: the chat used to greet, take the person's message and
    only then stop with exit 2, the message lost. It is refused before the prompt."""
    tether_home.mkdir()
    (tether_home / "runs").write_text("not a folder")
    out = tether("chat", "--model", "scripted/hello", "--cwd", str(workspace), input="a long message\n", env=env)
    assert out.returncode == 2, out.stderr
    assert "runs is a file, not a folder" in out.stderr
    assert "you> " not in out.stderr and "Traceback" not in out.stderr


# --- a full disk under $TETHER_HOME ------------------------------------------------------------


def test_a_full_disk_is_one_line_per_problem_and_a_failed_exit(
    workspace: Path, env: dict[str, str], tmp_path: Path
) -> None:
    """$TETHER_HOME on an 8 KiB file system that fills during the run (a tmpfs mounted in a user
    namespace): the run ends failed (exit 1, one JSON object on stdout), and what tether logs
    about the saves that fail is a line each on stderr, never Python's traceback."""
    if shutil.which("unshare") is None:
        pytest.skip("unshare is not installed to mount a small file system as no one")
    full = tmp_path / "full"
    full.mkdir()
    probe = subprocess.run(
        ["unshare", "-Urm", "mount", "-t", "tmpfs", "-o", "size=8k", "tmpfs", str(full)], capture_output=True
    )
    if probe.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs in a user namespace here: {probe.stderr.decode(errors='replace')}")
    script = (
        'mount -t tmpfs -o size=8k tmpfs "$1" && shift && exec tether run --model scripted/plan --cwd "$@" '
        '"Which file mentions a timeout?" --json'
    )
    out = subprocess.run(
        ["unshare", "-Urm", "sh", "-c", script, "sh", str(full), str(workspace)],
        env={**env, "TETHER_HOME": str(full / "home")},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert "Traceback" not in out.stderr, out.stderr
    assert out.returncode == 1, out.stderr
    result: dict[str, Any] = json.loads(out.stdout)
    assert result["status"] == "failed" and "No space left on device" in result["reason"]
    logged = [line for line in out.stderr.splitlines() if "No space left on device" in line]
    assert logged and all(line.startswith(("tether: ", "[failed]")) for line in logged), out.stderr
