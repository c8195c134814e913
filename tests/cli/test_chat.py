"""``tether chat`` (src/tether/cli/chat.py): it streams, asks before a dangerous tool, and lines
that start with "/" are commands, never messages."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from tests.cli.conftest import Terminal, tether
from tether.cli.chat import parse_line


def chat(*args: str, stdin: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["tether", "chat", *args], input=stdin, env=env, capture_output=True, text=True, timeout=60)


def user_messages(session: str, env: dict[str, str]) -> list[str]:
    out = tether("sessions", "export", session, env=env)
    lines = [json.loads(x) for x in out.stdout.splitlines()]
    return [part["text"] for m in lines if m["role"] == "user" for part in m["content"]]


def test_chat_streams_and_asks_before_a_dangerous_tool(workspace: Path, env: dict[str, str]) -> None:
    """At a terminal (the approval question is asked there only: docs/cli.md)."""
    for answer, deleted in (("y", True), ("n", False)):
        (workspace / "access.log").write_text("log\n")
        argv = [
            "tether",
            "chat",
            "--model",
            "scripted/destructive",
            "--cwd",
            str(workspace),
            "--session",
            f"chat-{answer}",
        ]
        term = Terminal(argv, env)
        term.read_until(b"you> ")
        term.type(b"free some space\n")
        term.read_until(b"[y/N] ")
        term.type(answer.encode() + b"\n")
        term.read_until(b"reason (optional): ")
        term.type(b"\n" if deleted else b"keep it\n")
        term.read_until(b"you> ")
        term.type(b"\x04")  # Ctrl-D leaves
        code, stdout, stderr = term.finish()
        assert code == 0, stderr
        assert "Allow delete_file" in stderr and "-> list_files" in stderr
        assert (workspace / "access.log").exists() is not deleted
        expected = "Deleted access.log" if deleted else "I did not delete anything"
        assert expected in stdout
        assert "tether resume" not in stderr  # the person answered: the run never stopped


def test_slash_commands_are_not_sent(workspace: Path, env: dict[str, str]) -> None:
    stdin = "/help\n/session\n/tmp is full\n//etc is a folder\nhello\n/exit\nnever sent\n"
    out = chat("--model", "scripted/hello", "--cwd", str(workspace), "--session", "talk", stdin=stdin, env=env)
    assert out.returncode == 0, out.stderr
    assert "/reset" in out.stderr and "/exit" in out.stderr  # /help listed the commands
    assert "session 'talk'" in out.stderr
    assert "/tmp is not a command" in out.stderr and "write //tmp" in out.stderr
    assert user_messages("talk", env) == ["/etc is a folder", "hello"]


def test_reset_starts_a_new_session(workspace: Path, env: dict[str, str]) -> None:
    out = chat(
        "--model",
        "scripted/hello",
        "--cwd",
        str(workspace),
        "--session",
        "first",
        stdin="one\n/reset\n/session\ntwo\n/quit\n",
        env=env,
    )
    assert out.returncode == 0, out.stderr
    new = out.stderr.split("new session '", 1)[1].split("'", 1)[0]
    assert new != "first" and f"session '{new}'" in out.stderr
    assert user_messages("first", env) == ["one"]
    assert user_messages(new, env) == ["two"]


def test_chat_refuses_a_missing_working_directory(env: dict[str, str]) -> None:
    out = chat("--model", "scripted/hello", "--cwd", "/nonexistent", stdin="hi\n", env=env)
    assert out.returncode == 2 and "--cwd" in out.stderr and "'/nonexistent' is not a directory" in out.stderr


@pytest.mark.parametrize(
    ("line", "parsed"),
    [
        ("hello", ("hello", None)),
        ("/exit", (None, "/exit")),
        ("  /Help  ", (None, "/help")),
        ("/tmp is full", (None, "/tmp")),
        ("//tmp is full", ("/tmp is full", None)),
        ("/etc/hosts looks wrong", ("/etc/hosts looks wrong", None)),  # a path is not a command
        ("/", ("/", None)),
    ],
)
def test_parse_line(line: str, parsed: tuple[str | None, str | None]) -> None:
    assert parse_line(line) == parsed
