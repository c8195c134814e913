"""Helpers for the command-line tests: the real ``tether`` command as a subprocess, or
``tether.cli.main`` in process, always with ``TETHER_HOME`` in a temporary directory."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tether.cli import main


def tether(
    *args: str, env: dict[str, str], input: str | None = None, timeout: float = 60, cwd: Any = None
) -> subprocess.CompletedProcess[str]:
    """The real command (in ``cwd``, default this process's). Without ``input`` its stdin is empty
    (never the test runner's terminal)."""
    return subprocess.run(
        ["tether", *args],
        env=env,
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=timeout,
        input=input if input is not None else "",
    )


def tether_json(*args: str, env: dict[str, str], input: str | None = None) -> dict[str, Any]:
    out = tether(*args, "--json", env=env, input=input)
    assert out.stdout, out.stderr
    result: dict[str, Any] = json.loads(out.stdout)
    return result


def run_main(*args: str, capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    """``tether.cli.main`` in process: (exit code, stdout, stderr); argparse's exit 2 included."""
    try:
        code = main(list(args))
    except SystemExit as exc:
        code = int(exc.code or 0)
    out = capsys.readouterr()
    return code, out.out, out.err


@pytest.fixture
def env(tether_home: Path) -> dict[str, str]:
    e = {
        k: v
        for k, v in os.environ.items()
        if k not in ("LLM_BASE_URL", "OPENAI_BASE_URL", "OPENAI_API_KEY", "TETHER_SESSION_STORE")
    }
    return {**e, "TETHER_HOME": str(tether_home)}


@pytest.fixture
def quiet_env(monkeypatch: pytest.MonkeyPatch, tether_home: Path) -> Path:
    """For in-process runs: no provider variables from the machine running the tests."""
    for name in ("LLM_BASE_URL", "OPENAI_BASE_URL", "OPENAI_API_KEY", "TETHER_SESSION_STORE"):
        monkeypatch.delenv(name, raising=False)
    return tether_home


class Terminal:
    """The command on a pseudo-terminal that is its controlling terminal (so Ctrl-C typed there is
    SIGINT, as at a real one): stdin and stderr on it, stdout on it too or piped."""

    def __init__(self, argv: list[str], env: dict[str, str], *, stdout_on_terminal: bool = False) -> None:
        import pty

        self.master, slave = pty.openpty()

        def controlling_terminal() -> None:
            import fcntl
            import termios

            os.setsid()
            fcntl.ioctl(0, termios.TIOCSCTTY, 0)

        self.proc = subprocess.Popen(
            argv,
            env=env,
            stdin=slave,
            stderr=slave,
            stdout=slave if stdout_on_terminal else subprocess.PIPE,
            preexec_fn=controlling_terminal,
        )
        os.close(slave)
        self.seen = b""

    def read_until(self, marker: bytes, timeout: float = 60) -> bytes:
        """Read until ``marker`` appears in what comes after what was read so far."""
        import select
        import time

        start = len(self.seen)
        deadline = time.monotonic() + timeout  # a hang guard only
        while marker not in self.seen[start:] and time.monotonic() < deadline:
            ready, _, _ = select.select([self.master], [], [], 0.1)
            if ready:
                try:
                    chunk = os.read(self.master, 4096)
                except OSError:  # the other side closed: the command ended
                    break
                if not chunk:
                    break
                self.seen += chunk
        return self.seen[start:]

    def type(self, keys: bytes) -> None:
        os.write(self.master, keys)

    def finish(self) -> tuple[int, str, str]:
        self.read_until(b"\x00never", timeout=60)
        code = self.proc.wait(timeout=60)
        stdout = self.proc.stdout.read().decode() if self.proc.stdout else ""
        os.close(self.master)
        return code, stdout, self.seen.decode(errors="replace").replace("\r\n", "\n")
