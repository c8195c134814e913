"""The command line under signals and at its prompts, attacked a fifth time: SIGTERM (``kill``, a
service manager) while a question waits at the terminal (an approval, the chat's ``you>``), typed-
ahead keys at an MCP server's question, and listings read by a pipe that closes early. Each test
runs the real command on a pseudo-terminal (or a pipe) with its own ``TETHER_HOME``."""

from __future__ import annotations

import json
import signal
from pathlib import Path

import pytest

from tests.cli.conftest import Terminal, run_main, tether
from tests.cli.test_attack_cli_round4 import ASKING_SERVER, BOOKER_TETHER  # the booker scenario, the diner


def _runs(capsys: pytest.CaptureFixture[str]) -> list[dict[str, object]]:
    code, out, err = run_main("runs", "--json", "--all", capsys=capsys)
    assert code == 0, err
    rows: list[dict[str, object]] = json.loads(out)
    return rows


def _terminate(term: Terminal) -> None:
    """SIGTERM, as `kill` sends it. A signal that lands in the instant readline handles a key is heard
    only at its next wait (CPython checks signals when select is interrupted), so it is sent again
    while the command is still there, as a person would run `kill` again."""
    import subprocess

    for _ in range(20):  # a hang guard only
        term.proc.send_signal(signal.SIGTERM)
        term.read_until(b"\n", timeout=1)
        try:
            term.proc.wait(timeout=1)
            return
        except subprocess.TimeoutExpired:
            continue


def _terminal_sane(term: Terminal) -> None:
    """The terminal is left as the command found it: echo and line editing on."""
    import termios

    lflag = termios.tcgetattr(term.master)[3]
    assert lflag & termios.ECHO and lflag & termios.ICANON, lflag


# --- SIGTERM while a question waits ----------------------------------------------------------


def test_run_terminated_at_an_approval_question_stops_waiting_and_resumable(
    workspace: Path, env: dict[str, str], capsys: pytest.CaptureFixture[str]
) -> None:
    """SIGTERM while `Allow ...? [y/N]` waits: the run stays waiting for the decision, the summary
    and resume hint are printed, the exit code is the run's (5). Was: killed by the signal (-15),
    no summary."""
    term = Terminal(
        ["tether", "run", "--model", "scripted/destructive", "--cwd", str(workspace), "free some space"],
        env,
        stdout_on_terminal=True,
    )
    term.read_until(b"[y/N]")
    _terminate(term)
    code, _, seen = term.finish()
    assert code == 5, seen
    assert "Traceback" not in seen and "--approve" in seen and "tether resume run_" in seen
    (run,) = _runs(capsys)
    assert run["status"] == "interrupted"
    resumed = tether("resume", str(run["run_id"]), "--approve", env=env)
    assert resumed.returncode == 0, resumed.stderr
    assert not (workspace / "access.log").exists()


def test_chat_terminated_at_an_approval_question_ends_130_with_the_run_resumable(
    workspace: Path, env: dict[str, str], capsys: pytest.CaptureFixture[str]
) -> None:
    term = Terminal(
        ["tether", "chat", "--model", "scripted/destructive", "--cwd", str(workspace), "--session", "s1"],
        env,
        stdout_on_terminal=True,
    )
    term.read_until(b"you> ")
    term.type(b"free some space\n")
    term.read_until(b"[y/N]")
    _terminate(term)
    code, _, seen = term.finish()
    assert code == 130, seen
    assert "Traceback" not in seen and "tether resume run_" in seen
    assert not seen.rstrip().endswith("you>")
    (run,) = _runs(capsys)
    assert run["status"] == "interrupted" and (workspace / "access.log").exists()
    code, out, err = run_main("show", str(run["run_id"]), capsys=capsys)
    assert code == 0 and "delete_file" in out, err


def test_chat_terminated_at_its_prompt_ends_130_and_keeps_the_session(
    workspace: Path, env: dict[str, str], capsys: pytest.CaptureFixture[str]
) -> None:
    """SIGTERM at `you> ` after a reply: exit 130, the session kept, the terminal sane (readline had
    switched echo off). Was: -15 (asyncio's run had put SIGTERM back to its default)."""
    term = Terminal(
        ["tether", "chat", "--model", "scripted/plan", "--cwd", str(workspace), "--session", "s1"],
        env,
        stdout_on_terminal=True,
    )
    term.read_until(b"you> ")
    term.type(b"Which file mentions a timeout?\n")
    term.read_until(b"you> ")
    term.type(b"half a mess")  # typed, not sent
    term.proc.send_signal(signal.SIGTERM)  # once, while readline may be handling the keys
    term.read_until(b"\x00never", timeout=60)  # until the command has left the terminal
    term.proc.wait(timeout=60)
    _terminal_sane(term)
    code, _, seen = term.finish()
    assert code == 130, seen
    assert "Traceback" not in seen
    code, out, err = run_main("sessions", "show", "s1", capsys=capsys)
    assert code == 0 and "Which file mentions a timeout?" in out, err
    assert "half a mess" not in out


# --- typed-ahead keys at an MCP server's question --------------------------------------------


def test_keys_typed_before_a_servers_question_are_not_its_answers(
    tmp_path: Path, workspace: Path, env: dict[str, str], tether_home: Path
) -> None:
    """What was typed before an MCP server's question was on screen (the chat's next message, typed
    while the reply was on its way) is dropped, as before an approval question. Was: the typed line
    answered `(press Enter)`, and the next line typed, meant for `name`, declined the booking."""
    import sys

    script = tmp_path / "booker_tether.py"
    script.write_text(BOOKER_TETHER)
    bookings = tmp_path / "bookings.txt"
    bookings.write_text("")
    tether_home.mkdir(parents=True, exist_ok=True)
    (tether_home / "config.toml").write_text(
        "[mcp.diner]\n"
        f"command = {sys.executable!r}\n"
        f"args = [{str(ASKING_SERVER)!r}]\n"
        f"env = {{ BOOKINGS = {str(bookings)!r} }}\n"
        'approval = "never"\n'
    )
    argv = [sys.executable, str(script), "chat", "--model", "scripted/booker", "--cwd", str(workspace)]
    term = Terminal([*argv, "--mcp", "diner"], env, stdout_on_terminal=True)
    term.read_until(b"you> ")
    term.type(b"book a table\nMallory\n")  # the second line typed ahead, before any question
    term.read_until(b"(press Enter) ")
    term.type(b"\n")
    got = term.read_until(b": ", timeout=10)
    assert b"name" in got, term.seen
    for typed, field in ((b"Ada\n", b"guests"), (b"2\n", b"window"), (b"\n", None)):
        term.type(typed)
        if field is not None:
            assert field in term.read_until(b": ", timeout=10), term.seen.decode(errors="replace")
    assert b"the diner said: Booked" in term.read_until(b"you> "), term.seen
    term.type(b"/exit\n")
    code, _, seen = term.finish()
    assert code == 0, seen
    assert "Ada" in bookings.read_text() and "Mallory" not in bookings.read_text()


# --- listings read by a pipe that closes early (`| head`) ------------------------------------


def _to_a_closed_pipe(argv: list[str], env: dict[str, str]) -> tuple[int, str]:
    """The command with stdout a pipe whose reader has already left: (exit code, stderr)."""
    import os
    import subprocess

    read, write = os.pipe()
    os.close(read)
    try:
        done = subprocess.run(
            ["tether", *argv], env=env, stdout=write, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, text=True
        )
    finally:
        os.close(write)
    return done.returncode, done.stderr


def test_sessions_piped_to_a_reader_that_left_is_141_not_a_store_error(
    workspace: Path, env: dict[str, str], capsys: pytest.CaptureFixture[str]
) -> None:
    """`tether sessions list --json | head` whose reader left: exit 141 and nothing said, as every
    other listing. Was: `tether: cannot use the sessions: Broken pipe. Check that file's owner and
    mode, and the disk's room`, exit 2 (the pipe read as a damaged store)."""
    code, _, err = run_main(
        "run", "--model", "scripted/plan", "--cwd", str(workspace), "--session", "s1", "hi", capsys=capsys
    )
    assert code == 0, err
    for argv in (["sessions", "list", "--json"], ["sessions", "export", "s1"]):
        code, err = _to_a_closed_pipe(argv, env)
        assert (code, err) == (141, ""), argv


# --- stdin closed, Ctrl-D: at each question ---------------------------------------------------


def test_an_mcp_server_with_stdin_closed_is_asked_nothing_not_a_traceback(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`tether run --mcp NAME ... <&-` (a service started with no stdin: sys.stdin is None): the
    server's questions are declined, as with no terminal. Was: AttributeError: 'NoneType' object has
    no attribute 'isatty' as the agent was built, a traceback and exit 1."""
    import sys

    from tether.connectors import McpConnector

    monkeypatch.setattr(sys, "stdin", None)
    connector = McpConnector("diner", {"command": sys.executable, "args": [str(ASKING_SERVER)]}, home=tmp_path)
    assert connector.client_side.asker.ask is None  # nobody to ask: declined


def test_kb_drop_with_stdin_closed_or_ctrl_d_keeps_the_base(
    env: dict[str, str], tether_home: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """`tether kb drop NAME` asks at a terminal. With stdin closed it was a traceback (AttributeError,
    exit 1), and Ctrl-D at its question a traceback (EOFError): now the usage line (exit 2) and
    "kept" (exit 1), the base there either way."""
    import sys

    base = tether_home / "kb" / "docs.db"
    base.parent.mkdir(parents=True)
    base.write_bytes(b"")
    monkeypatch.setattr(sys, "stdin", None)  # started with stdin closed (<&-)
    code, _, err = run_main("kb", "drop", "docs", capsys=capsys)
    assert code == 2 and "add --yes" in err, err
    monkeypatch.undo()
    term = Terminal(["tether", "kb", "drop", "docs"], env, stdout_on_terminal=True)
    term.read_until(b"[y/N] ")
    term.type(b"\x04")
    code, _, seen = term.finish()
    assert code == 1 and "kept" in seen and "Traceback" not in seen, seen
    assert base.exists()


# --- SIGHUP: the terminal window closed ------------------------------------------------------


def test_chat_whose_terminal_closes_mid_reply_saves_the_run_stopped_not_killed(
    workspace: Path, env: dict[str, str], capsys: pytest.CaptureFixture[str]
) -> None:
    """The terminal closed (SIGHUP) while a tool runs: the run stops as at a Stop, saved
    `interrupted` and resumable, and the command exits without writing to the terminal that is
    gone. Was: killed by the signal (-1), the run left `stopped: no process` in the middle of its
    tool call."""
    import os

    argv = ["tether", "chat", "--model", "scripted/slow", "--cwd", str(workspace), "--session", "s1"]
    term = Terminal(argv, env, stdout_on_terminal=True)
    term.read_until(b"you> ")
    term.type(b"scan the archive\n")
    term.read_until(b".. scanned")
    os.close(term.master)  # the window closes: SIGHUP
    assert term.proc.wait(timeout=60) == 130
    (run,) = _runs(capsys)
    assert run["status"] == "interrupted" and run["live"] is None, run
    code, out, err = run_main("show", str(run["run_id"]), capsys=capsys)
    assert code == 0 and "SIGHUP" in out + err, out


def test_mcp_serve_with_stdin_closed_says_so_in_one_line(env: dict[str, str]) -> None:
    """`tether mcp serve <&-` (over stdio, with no stdin to read a client from). Was: two
    tracebacks ending in OSError: [Errno 22] Invalid argument (the loop's own descriptor took the
    place of stdin), exit 1. Now one line, exit 2."""
    import os
    import subprocess

    done = subprocess.run(
        ["tether", "mcp", "serve"], env=env, capture_output=True, text=True, timeout=60, preexec_fn=lambda: os.close(0)
    )
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
    assert "standard input is closed" in done.stderr and "--http" in done.stderr


def test_a_write_to_a_terminal_closed_before_its_sighup_is_handled_stops_the_run_as_sighup(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """The window closes while a step line is written: the write fails (EIO) before the SIGHUP the
    kernel sends is handled. It ended the command with exit 1 (seen once under load in the full
    suite); it is now the hang-up itself: the run is stopped, as SIGHUP stops it."""
    import errno
    import io

    from tether.cancel import CancelSignal
    from tether.cli import run as cli_run
    from tether.cli import signals as cli_signals
    from tether.config import Settings

    class Closed(io.StringIO):
        def write(self, text: str) -> int:
            raise OSError(errno.EIO, "Input/output error")

    monkeypatch.setattr(cli_signals, "_terminal_gone", lambda: None)  # no real descriptors to redirect here
    monkeypatch.setattr(cli_signals, "_terminated", False)
    printer = cli_run.Printer(Settings(home=tmp_path), quiet=False)
    printer.cancel = CancelSignal()
    monkeypatch.setattr("sys.stderr", Closed())
    printer._err("-> scan_archive {}")
    monkeypatch.setattr("sys.stdout", Closed())
    printer.out("some text")
    assert printer.cancel.cancelled and printer.cancel.reason == cli_run.HUNG_UP
    assert cli_run.terminated()

    class Full(io.StringIO):
        def write(self, text: str) -> int:
            raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr("sys.stderr", Full())
    with pytest.raises(OSError):
        printer._err("another line")  # any other failure of the terminal is not taken for a hang-up
