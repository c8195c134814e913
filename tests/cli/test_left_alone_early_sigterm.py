"""SIGTERM in the first moments of ``tether chat``, ``serve`` and ``worker``, before their own
handling is installed (a chat's prompt, uvicorn's, Celery's): one line and exit 130, as everywhere
else, where it was killed by the signal's default (-15) without a word. Each test runs the real
command and sends a real signal at a point the test knows the command has reached (its database
connection accepted, its agent module's first output byte), never after a sleep."""

from __future__ import annotations

import signal
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals")  # Windows has no SIGTERM to send

ONE_LINE = "\ntether: terminated (SIGTERM)\n"
COMMANDS = {
    "chat": ["tether", "chat", "--model", "scripted/hello"],
    "serve": ["tether", "serve", "--model", "scripted/hello", "--port", "0"],
    "worker": ["tether", "worker", "--model", "scripted/hello"],
}


@pytest.fixture
def silent() -> Iterator[socket.socket]:
    """A database (and broker) on loopback that accepts a connection and never answers: the
    command waits there, in its first moments, until it is signalled."""
    with socket.create_server(("127.0.0.1", 0)) as server:
        server.settimeout(60)
        yield server


def _env(env: dict[str, str], port: int) -> dict[str, str]:
    return {
        **env,
        "TETHER_DATABASE_URL": f"postgresql://tether@127.0.0.1:{port}/tether",
        "TETHER_BROKER_URL": f"amqp://tether:tether@127.0.0.1:{port}//",
    }


def _start(argv: list[str], env: dict[str, str]) -> subprocess.Popen[str]:
    return subprocess.Popen(
        argv, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )


def _ended(proc: subprocess.Popen[str], said: str = "") -> tuple[int, str]:
    _, err = proc.communicate(timeout=60)
    return proc.returncode, said + err


def test_sigterm_while_each_command_connects_to_its_database(env: dict[str, str], silent: socket.socket) -> None:
    """chat and serve open their stores, a worker its database and broker, before any handler of
    theirs is installed: SIGTERM there was exit -15 and nothing said."""
    procs = {name: _start(argv, _env(env, silent.getsockname()[1])) for name, argv in COMMANDS.items()}
    held = [silent.accept()[0] for _ in procs]  # each is inside its first connection
    try:
        for proc in procs.values():
            proc.send_signal(signal.SIGTERM)
        ended = {name: _ended(proc) for name, proc in procs.items()}
    finally:
        for conn in held:
            conn.close()
    assert ended == {name: (130, ONE_LINE) for name in COMMANDS}


def test_sigterm_after_the_agent_modules_first_output_byte(
    env: dict[str, str], tmp_path: Path, silent: socket.socket
) -> None:
    """An agent module being imported (``--agent FILE``): its first byte written, serve and the
    worker are still starting."""
    module = tmp_path / "slow_agents.py"
    module.write_text(
        "import sys\n"
        "sys.stderr.write('importing the agents\\n'); sys.stderr.flush()\n"
        "sys.stdin.readline()  # held here until the test ends it\n"
        "from tether import Agent\n"
        "agent = Agent('scripted/hello')\n"
    )
    # serve keeps its stores in files here; a worker needs a database named (it connects after the agents)
    procs = {
        "serve": _start(["tether", "serve", "--agent", str(module)], env),
        "worker": _start(["tether", "worker", "--agent", str(module)], _env(env, silent.getsockname()[1])),
    }
    said = {}
    for name, proc in procs.items():
        assert proc.stderr is not None
        said[name] = proc.stderr.readline()
        proc.send_signal(signal.SIGTERM)
    ended = {name: _ended(proc, said[name]) for name, proc in procs.items()}
    assert ended == {name: (130, "importing the agents\n" + ONE_LINE) for name in procs}


def test_sigterm_right_after_spawn_is_never_a_traceback(env: dict[str, str], silent: socket.socket) -> None:
    """Sent at once: Python's own start (before tether's first line) still ends by the signal's
    default, silently; from there on, one line and 130. Never a traceback, never both."""
    procs = {name: _start(argv, _env(env, silent.getsockname()[1])) for name, argv in COMMANDS.items()}
    for proc in procs.values():
        proc.send_signal(signal.SIGTERM)
    for name, proc in procs.items():
        assert _ended(proc) in ((-signal.SIGTERM, ""), (130, ONE_LINE)), name


def test_a_servers_own_shutdown_ends_as_it_did(env: dict[str, str]) -> None:
    """Once uvicorn holds SIGTERM, its graceful shutdown (which sends the signal again) ends the
    process as before (0, or by the signal): the start's handler hands over to it."""
    proc = _start(["tether", "serve", "--model", "scripted/hello", "--port", "0"], env)
    assert proc.stderr is not None
    said = ""
    for line in iter(proc.stderr.readline, ""):
        said += line
        if "listening on" in line:
            break
    proc.send_signal(signal.SIGTERM)
    code, said = _ended(proc, said)
    assert code in (0, -signal.SIGTERM) and "Traceback" not in said and "terminated" not in said, said
