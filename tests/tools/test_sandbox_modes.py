"""Sandbox modes, approval policies, the proxy, ordinary work in the sandbox, and saying what holds (issue 31)."""

from __future__ import annotations

import asyncio
import json
import logging
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import zipfile
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from tests.tools.sandboxed import needs_sandbox
from tether.cancel import CancelSignal
from tether.errors import ConfigError
from tether.tools import _jail, _sandbox
from tether.tools.base import ToolContext, ToolError, ToolResult
from tether.tools.builtin import builtin_tools, tool_settings
from tether.tools.sandbox import sandbox_status
from tether.tools.shell import RunCommand, RunCommandUnsandboxed, ShellSettings

LINUX = sys.platform.startswith("linux")


@pytest.fixture
def tmp_path() -> Iterator[Path]:
    """A directory outside /tmp: the sandbox gives each command its own empty /tmp, so what the
    tests put beside the workspace must live elsewhere to be seen (and refused) from inside."""
    path = Path(tempfile.mkdtemp(prefix="tether-sandbox-test-", dir="/var/tmp" if os.path.isdir("/var/tmp") else None))
    yield path
    shutil.rmtree(path, ignore_errors=True)


def run(tool: Any, cwd: Path, command: str, progress: list[str] | None = None, **more: Any) -> ToolResult:
    ctx = ToolContext(cwd=cwd, signal=CancelSignal(), on_progress=progress.append if progress is not None else None)
    out = asyncio.run(tool.execute({"command": command, **more}, ctx))
    assert isinstance(out, ToolResult)
    return out


def text(result: ToolResult) -> str:
    assert isinstance(result.content, str)
    return result.content


# --- modes ---------------------------------------------------------------------------------------


@needs_sandbox
def test_workspace_write_writes_the_workspace_and_a_private_tmp_only(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    progress: list[str] = []
    out = run(
        RunCommand(ShellSettings(sandbox="workspace-write")),
        ws,
        "echo hi > a.txt && echo t > /tmp/t && cat /tmp/t",
        progress,
    )
    assert text(out) == "exit code 0\nt\n" and (ws / "a.txt").read_text() == "hi\n"
    assert not Path("/tmp/t").exists() or Path("/tmp/t").read_text() != "t\n"  # /tmp was private
    assert progress == ["sandbox: workspace-write, network off"]  # the mode, in the trace (tool_progress)
    refused = run(RunCommand(ShellSettings(sandbox="workspace-write")), ws, f"touch {tmp_path}/outside")
    assert refused.is_error and not (tmp_path / "outside").exists()
    assert "[refused: write outside the workspace blocked by the sandbox" in text(refused)


@needs_sandbox
def test_read_only_mode_writes_nothing_but_tmp(tmp_path: Path) -> None:
    tool = RunCommand(ShellSettings(sandbox="read-only"))
    out = run(tool, tmp_path, "cat /etc/hostname >/dev/null && echo x > /tmp/x && cat /tmp/x && touch here")
    assert "x\n" in text(out) and out.is_error and not (tmp_path / "here").exists()
    assert "write anywhere but /tmp (read-only mode) blocked by the sandbox" in text(out)


@needs_sandbox
def test_listed_paths_are_writable_and_git_only_when_listed(tmp_path: Path) -> None:
    ws, extra = tmp_path / "ws", tmp_path / "extra"
    (ws / ".git").mkdir(parents=True)
    extra.mkdir()
    plain = run(RunCommand(ShellSettings(sandbox="workspace-write")), ws, f"touch .git/x; touch {extra}/y")
    assert not (ws / ".git" / "x").exists() and not (extra / "y").exists()
    listed = RunCommand(ShellSettings(sandbox="workspace-write", writable=(".git", str(extra))))
    assert not run(listed, ws, f"touch .git/x {extra}/y").is_error
    assert (ws / ".git" / "x").exists() and (extra / "y").exists()
    assert "refused" in text(plain)


@needs_sandbox
def test_hidden_homes_show_nothing_but_the_workspace(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    home = tmp_path / "home"
    ws = home / "project"
    ws.mkdir(parents=True)
    (home / "diary.txt").write_text("private")
    monkeypatch.setenv("HOME", str(home))
    shown = run(RunCommand(ShellSettings(sandbox="workspace-write")), ws, f"cat {home}/diary.txt")
    hidden = run(
        RunCommand(ShellSettings(sandbox="workspace-write", home="hidden")),
        ws,
        f"ls -a {home}; cat {home}/diary.txt; touch ok",
    )
    assert "private" in text(shown)
    assert "private" not in text(hidden) and "project" in text(hidden) and (ws / "ok").exists()


@needs_sandbox
def test_extra_hidden_paths_are_never_readable(tmp_path: Path) -> None:
    (tmp_path / "keys").mkdir()
    (tmp_path / "keys" / "k").write_text("sk-hidden")
    ws = tmp_path / "ws"
    ws.mkdir()
    out = run(
        RunCommand(ShellSettings(sandbox="read-only", hide=(str(tmp_path / "keys"),))), ws, f"cat {tmp_path}/keys/k"
    )
    assert "sk-hidden" not in text(out) and "hidden by the sandbox" in text(out)


# --- ordinary work -------------------------------------------------------------------------------


def make_wheel(where: Path) -> None:
    """A minimal wheel of the package ``tinypkg`` (a zip with its metadata), built without network."""
    where.mkdir()
    files = {
        "tinypkg/__init__.py": "ANSWER = 42\n",
        "tinypkg-1.0.dist-info/METADATA": "Metadata-Version: 2.1\nName: tinypkg\nVersion: 1.0\n",
        "tinypkg-1.0.dist-info/WHEEL": "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
    }
    record = "".join(f"{name},,\n" for name in files) + "tinypkg-1.0.dist-info/RECORD,,\n"
    with zipfile.ZipFile(where / "tinypkg-1.0-py3-none-any.whl", "w") as whl:
        for name, body in {**files, "tinypkg-1.0.dist-info/RECORD": record}.items():
            whl.writestr(name, body)


@needs_sandbox
def test_ordinary_work_runs_in_the_sandbox(tmp_path: Path) -> None:
    """Build and test a small project, git status and commit, pip install into a workspace venv."""
    ws, wheels = tmp_path / "ws", tmp_path / "wheels"
    ws.mkdir()
    make_wheel(wheels)
    (ws / "calc.py").write_text("def add(a, b):\n    return a + b\n")
    (ws / "test_calc.py").write_text(
        "import unittest, calc\nclass T(unittest.TestCase):\n    def test(self):\n        self.assertEqual(calc.add(2, 3), 5)\n"
    )
    py = sys.executable
    tool = RunCommand(ShellSettings(sandbox="workspace-write", timeout_s=300))
    built = run(tool, ws, f"{py} -m compileall -q . && {py} -m unittest -q 2>&1")
    assert text(built).startswith("exit code 0") and "OK" in text(built)
    git = "git -c user.name=t -c user.email=t@example.com"
    first = run(tool, ws, f"git init -q && git add -A && {git} commit -qm first && git status --short && echo done")
    assert text(first) == "exit code 0\ndone\n"
    # made in the sandbox: later commands may commit (what they add that git would run is taken out)
    assert text(run(tool, ws, f"echo '# 2' >> calc.py && {git} commit -qam 2 && git log --oneline | wc -l")) == (
        "exit code 0\n2\n"
    )
    (ws / ".git/made-in-tether-sandbox").unlink()  # now as a repository the person made: read-only
    refused = run(tool, ws, f"echo '# more' >> calc.py && {git} commit -qam third")
    assert refused.is_error and "blocked by the sandbox" in text(refused) and ".git" in text(refused)
    with_git = RunCommand(ShellSettings(sandbox="workspace-write", writable=(".git",), timeout_s=300))
    assert text(run(with_git, ws, f"{git} commit -qam third && git log --oneline | wc -l")) == "exit code 0\n3\n"
    pip = run(
        tool,
        ws,
        f"{py} -m venv .venv && .venv/bin/python -m pip install -q --no-index --find-links {wheels} tinypkg "
        "&& .venv/bin/python -c 'import tinypkg; print(tinypkg.ANSWER)'",
    )
    assert text(pip).endswith("42\n"), text(pip)


# --- the network through tether's proxy -----------------------------------------------------------


class Site(BaseHTTPRequestHandler):
    hits: list[str] = []

    def do_GET(self) -> None:
        Site.hits.append(f"{self.server.server_address[1]}{self.path}")
        body = b"hello from the allowed host\n"
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def sites() -> Iterator[tuple[int, int]]:
    servers = [ThreadingHTTPServer(("127.0.0.1", 0), Site) for _ in range(2)]
    for server in servers:
        threading.Thread(target=server.serve_forever, daemon=True).start()
    Site.hits = []
    yield servers[0].server_address[1], servers[1].server_address[1]
    for server in servers:
        server.shutdown()


@needs_sandbox
def test_allowed_hosts_go_through_the_proxy_and_nothing_else_leaves(
    tmp_path: Path, sites: tuple[int, int], caplog: pytest.LogCaptureFixture
) -> None:
    allowed, other = sites
    tool = RunCommand(ShellSettings(sandbox="workspace-write", network=(f"127.0.0.1:{allowed}",)))
    progress: list[str] = []
    with caplog.at_level(logging.INFO, logger="tether.tools.shell"):
        ok = run(
            tool,
            tmp_path,
            f"curl -sS http://127.0.0.1:{allowed}/plain && curl -sS -p http://127.0.0.1:{allowed}/tunnel",
            progress,
        )
        blocked = run(tool, tmp_path, f"curl -sS -o /dev/null -w '%{{http_code}}\\n' http://127.0.0.1:{other}/x")
        direct = run(tool, tmp_path, f"curl -sS --noproxy '*' http://127.0.0.1:{allowed}/direct")
    assert text(ok) == "exit code 0\nhello from the allowed host\nhello from the allowed host\n"
    assert "403" in text(blocked) and f"network access to 127.0.0.1:{other} blocked by the sandbox" in text(blocked)
    assert direct.is_error and "network access blocked by the sandbox" in text(direct)
    assert Site.hits == [f"{allowed}/plain", f"{allowed}/tunnel"]  # the other site and the direct call: nothing
    assert progress[0] == f"sandbox: workspace-write, network 127.0.0.1:{allowed}"
    assert progress[1:] == [f"sandbox proxy: 127.0.0.1:{allowed} allowed (127.0.0.1)"] * 2  # in the trace too
    said = [r.getMessage() for r in caplog.records if "sandbox proxy" in r.getMessage()]
    assert any(f"127.0.0.1:{allowed} allowed" in m for m in said) and any(
        f"127.0.0.1:{other} refused" in m for m in said
    )


def test_host_allow_list_matching() -> None:
    from tether.tools._netproxy import host_allowed

    allow = ["pypi.org", "*.github.com", "127.0.0.1:8080"]
    assert host_allowed("pypi.org", 443, allow) and host_allowed("PyPI.org.", 80, allow)
    assert host_allowed("api.github.com", 443, allow) and not host_allowed("github.com.evil.io", 443, allow)
    assert not host_allowed("evilpypi.org", 443, allow) and not host_allowed("xgithub.com", 443, allow)
    assert host_allowed("127.0.0.1", 8080, allow) and not host_allowed("127.0.0.1", 8081, allow)


# --- policies, escalation, and saying what holds -----------------------------------------------------


@needs_sandbox
def test_policies_decide_who_is_asked() -> None:
    assert not RunCommand(ShellSettings()).needs_approval  # the default: ask-to-escalate
    assert RunCommand(ShellSettings(policy="always-ask")).needs_approval
    assert RunCommand(ShellSettings(require_approval=True)).status.policy == "always-ask"  # approval = true
    assert RunCommand(ShellSettings(require_approval=False)).status.policy == "never-ask"
    assert RunCommandUnsandboxed(ShellSettings()).needs_approval  # a person decides every escalation
    names = [t.name for t in builtin_tools(tool_settings({"shell": {"sandbox": {"policy": "never-ask"}}}))]
    assert "run_command" in names and "run_command_unsandboxed" not in names
    off = sandbox_status(ShellSettings(sandbox="off"))
    assert off.policy == "always-ask" and off.sentence == "shell: no sandbox (mode = off); every command asks you first"


@needs_sandbox
def test_a_refusal_offers_escalation_only_under_ask_to_escalate(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    asks = run(RunCommand(ShellSettings()), ws, f"touch {tmp_path}/out")
    never = run(RunCommand(ShellSettings(policy="never-ask")), ws, f"touch {tmp_path}/out")
    assert "call run_command_unsandboxed" in text(asks)
    assert "cannot run outside the sandbox in this deployment" in text(never)
    outside = run(RunCommandUnsandboxed(ShellSettings()), ws, f"touch {tmp_path}/out && echo made", reason="needs it")
    assert text(outside) == "exit code 0\nmade\n" and (tmp_path / "out").exists()


def test_without_a_sandbox_the_default_asks_and_an_explicit_mode_refuses(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_jail, "bwrap_path", lambda: None)
    default = RunCommand(ShellSettings())
    assert default.needs_approval and default.status.mode == "off"
    if LINUX:
        assert default.status.sentence.startswith("shell: no sandbox (bubblewrap is not installed: apt-get install")
    strict = RunCommand(ShellSettings(sandbox="workspace-write"))
    assert "NOT AVAILABLE" in strict.status.sentence
    with pytest.raises(ToolError, match="sandbox NOT AVAILABLE.*was not run"):
        run(strict, tmp_path, "touch never")
    assert not (tmp_path / "never").exists()


@needs_sandbox
def test_the_run_s_first_line_says_which_sandbox(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    env = {**os.environ, "TETHER_HOME": str(home)}
    argv = ["tether", "run", "--model", "scripted/plan", "--cwd", str(tmp_path), "--json", "hi"]
    done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=120)
    first = done.stderr.splitlines()[0]
    assert first == (
        "shell: sandbox workspace-write (bubblewrap, network off); commands run without asking; "
        "running one outside the sandbox asks you"
    )
    (home / "config.toml").write_text('[tools.shell.sandbox]\nmode = "read-only"\nnetwork = ["pypi.org"]\n')
    done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=120)
    assert done.stderr.splitlines()[0].startswith(
        "shell: sandbox read-only (bubblewrap, network only to pypi.org (through tether's proxy))"
    )


def test_sandbox_settings_from_config() -> None:
    settings = tool_settings(
        {
            "shell": {
                "sandbox": {"mode": "read-only", "policy": "never-ask", "writable": [".git"], "network": ["pypi.org"]}
            }
        }
    ).shell
    assert (settings.sandbox, settings.policy, settings.writable, settings.network) == (
        "read-only",
        "never-ask",
        (".git",),
        ("pypi.org",),
    )
    with pytest.raises(ConfigError, match="mode"):
        tool_settings({"shell": {"sandbox": {"mode": "strict"}}})
    with pytest.raises(ConfigError, match="policy"):
        tool_settings({"shell": {"sandbox": {"policy": "sometimes"}}})
    with pytest.raises(ConfigError, match="not a URL"):
        tool_settings({"shell": {"sandbox": {"network": ["https://pypi.org/simple"]}}})
    allowed = ["pypi.org", "*.github.com", "10.0.0.5:8080", "127.0.0.1"]
    assert tool_settings({"shell": {"sandbox": {"network": allowed}}}).shell.network == tuple(allowed)


# --- the parent-death signal (issue 27) -------------------------------------------------------------


@pytest.mark.skipif(not LINUX or _sandbox._setpriv() is None, reason="setpriv ties commands to tether on Linux")
def test_a_command_whose_parent_is_gone_before_the_death_signal_does_not_run(tmp_path: Path) -> None:
    """The crash soak's orphans: tether died between the fork and PR_SET_PDEATHSIG. After setting it,
    the command checks its parent is still tether; here it is not (tether "is" pid 1), so nothing runs."""
    setpriv = _sandbox._setpriv()
    orphan = subprocess.run([*_sandbox._tie(setpriv, parent=1), "/bin/sh", "-c", f"touch {tmp_path}/ran"])
    assert orphan.returncode == 137 and not (tmp_path / "ran").exists()
    tied = subprocess.run([*_sandbox._tie(setpriv, parent=os.getpid()), "/bin/sh", "-c", f"touch {tmp_path}/ran"])
    assert tied.returncode == 0 and (tmp_path / "ran").exists()
    # and both ways of starting a command carry the check
    assert _sandbox._SAME_PARENT in _sandbox.command_argv("true")
    assert _sandbox._SAME_PARENT in _sandbox.sandboxed_argv(["/bin/true"])
    assert json.dumps(_sandbox._tie(setpriv)).count(str(os.getpid())) == 1


# --- escalation through the loop ----------------------------------------------------------------


@needs_sandbox
def test_the_model_asks_to_escalate_and_a_person_decides(tmp_path: Path) -> None:
    """A refused write goes back to the model in words; its escalation stops the run for a person;
    approved, it runs outside the sandbox; the escalated call is a recorded, separate tool call."""
    from tether import Agent, RunState, run_sync
    from tether.harness.state import approve
    from tether.testing import FunctionModel, call

    ws = tmp_path / "ws"
    ws.mkdir()
    target = tmp_path / "outside.txt"
    command = f"echo hi > {target}"
    replies = iter(
        [
            call("c1", "run_command", {"command": command}),
            call("c2", "run_command_unsandboxed", {"command": command, "reason": "the task writes beside the project"}),
            "done",
        ]
    )
    agent = Agent(FunctionModel(lambda m, r: next(replies)), tools=builtin_tools(), cwd=ws)
    state = RunState()
    first = run_sync(agent, "write it", state=state)
    assert first.status == "interrupted" and first.interruption is not None
    assert first.interruption.tool_name == "run_command_unsandboxed" and not target.exists()
    refusal = next(m.text for m in state.messages if getattr(m, "call_id", None) == "c1")  # as the model read it
    assert "write outside the workspace blocked by the sandbox" in refusal and "run_command_unsandboxed" in refusal
    approve(state, "c2")
    assert run_sync(agent, None, state=state).status == "completed"
    assert target.read_text() == "hi\n"


@needs_sandbox
def test_an_allowed_host_that_does_not_answer_is_a_502_with_the_reason(tmp_path: Path) -> None:
    from tests.server.conftest import unused_port

    with unused_port() as port:  # nothing listens there
        tool = RunCommand(ShellSettings(sandbox="workspace-write", network=(f"127.0.0.1:{port}",)))
        out = run(
            tool,
            tmp_path,
            f"curl -sS http://127.0.0.1:{port}/; curl -sS -o /dev/null -w '%{{http_code}}' http://127.0.0.1:{port}/",
        )
    assert "tether's proxy could not reach 127.0.0.1:" in text(out) and "502" in text(out)
