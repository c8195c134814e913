"""Bad input to every built-in tool, web search, tool settings, and the edit-run-answer scenario."""

from __future__ import annotations

import json
import os
import subprocess
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import ROOT
from tether import Agent, RunState, run_sync
from tether.errors import ConfigError
from tether.messages import ToolMessage
from tether.testing import FunctionModel, Reply
from tether.tools.base import ToolInputError, validate_arguments
from tether.tools.builtin import builtin_tools, tool_settings
from tether.tools.sandbox import sandbox_status
from tether.tools.web import SearxngBackend, WebSearch

TOOLS = {t.name: t for t in builtin_tools()}

BAD_INPUTS = [
    ("read_file", "{}", "path"),
    ("read_file", '{"path": ["a"]}', "path"),
    ("read_file", '{"path": "a", "start_line": "first"}', "start_line"),
    ("write_file", '{"path": "a"}', "content"),
    ("edit_file", '{"path": "a", "old_text": 1, "new_text": "b"}', "old_text"),
    ("search_files", '{"pattern": null}', "pattern"),
    ("list_files", '{"pattern": 5}', "pattern"),
    ("delete_file", '"a.txt"', "JSON object"),
    ("run_command", "{}", "command"),
    ("run_command", json.dumps({"command": "x" * 20000}), "command"),
    ("run_command", '{"command": "ls", "shell": "zsh"}', "shell"),
    ("web_fetch", '{"url": 7}', "url"),
    ("web_search", '{"query": ""}', "query"),
    ("web_search", '{"query": "q", "limit": 500}', "limit"),
    ("read_file", '{"path": "a"', "not valid JSON"),
]


@pytest.mark.parametrize(("name", "arguments", "mentions"), BAD_INPUTS)
def test_bad_arguments_say_what_to_fix(name: str, arguments: str, mentions: str) -> None:
    with pytest.raises(ToolInputError) as info:
        validate_arguments(TOOLS[name], arguments)
    message = str(info.value)
    assert mentions in message and name in message
    assert "Schema" in message or "schema" in message


def test_bad_arguments_through_the_loop_become_results(workspace: Path) -> None:
    calls = [
        (f"b{i}", name, json.loads(args) if args.startswith("{") else {})
        for i, (name, args, _) in enumerate(BAD_INPUTS[:6])
    ]
    fm = FunctionModel(lambda m, r: Reply(calls=tuple(calls)) if len(m) == 1 else "done")
    state = RunState()
    result = run_sync(Agent(fm, tools=builtin_tools(), cwd=workspace), "go", state=state)
    assert result.status == "completed"
    assert all(m.status == "error" for m in state.messages if isinstance(m, ToolMessage))


def test_edit_file_missing_and_ambiguous_text_fail_clearly(workspace: Path) -> None:
    from tests.tools.test_security import run_tool

    (workspace / "a.txt").write_text("one two one")
    with pytest.raises(Exception, match="not found"):
        run_tool(TOOLS["edit_file"], workspace, path="a.txt", old_text="three", new_text="x")
    with pytest.raises(Exception, match="appears 2 times"):
        run_tool(TOOLS["edit_file"], workspace, path="a.txt", old_text="one", new_text="x")
    assert (
        run_tool(TOOLS["edit_file"], workspace, path="a.txt", old_text="two", new_text="2")
        == "edited a.txt: replaced 1 occurrence"
    )
    assert (workspace / "a.txt").read_text() == "one 2 one"
    hits = run_tool(TOOLS["search_files"], workspace, pattern=r"one \d")
    assert hits == "a.txt:1: one 2 one"
    with pytest.raises(Exception, match="regular expression"):
        run_tool(TOOLS["search_files"], workspace, pattern="(")


def test_web_search_unconfigured_says_how_and_searxng_works() -> None:
    from tests.tools.test_security import run_tool

    unconfigured = run_tool(WebSearch(), Path("."), query="tether")
    assert unconfigured.is_error and "[tools.web_search]" in unconfigured.content

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *a: Any) -> None:
            return

        def do_GET(self) -> None:
            body = json.dumps({"results": [{"title": "Tether", "url": "https://example.org/t", "content": "harness"}]})
            self.send_response(200)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(body)))
            self.end_headers()
            self.wfile.write(body.encode())

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        found = run_tool(
            WebSearch(SearxngBackend(f"http://127.0.0.1:{server.server_address[1]}")), Path("."), query="tether"
        )
        assert found == "1. Tether\n   https://example.org/t\n   harness"
    finally:
        server.shutdown()


def test_tool_settings_from_config() -> None:
    settings = tool_settings(
        {
            "shell": {"approval": False, "timeout_s": 5, "block": ["git"], "unblock": ["crontab"], "env": {"CI": "1"}},
            "web": {"allow": ["10.0.0.0/8"]},
            "files": {"write_approval": True},
        }
    )
    tools = {t.name: t for t in builtin_tools(settings)}
    assert not tools["run_command"].needs_approval and tools["run_command"].settings.timeout_s == 5
    assert "git" in settings.shell.blocked and "crontab" not in settings.shell.blocked
    assert settings.shell.env == {"CI": "1"} and settings.web.allow == ("10.0.0.0/8",)
    assert tools["write_file"].needs_approval and tools["edit_file"].needs_approval
    # The default: in the sandbox without asking where there is one (escalation asks), else every call asks.
    sandboxed = TOOLS["run_command"].status.available
    assert TOOLS["run_command"].needs_approval is not sandboxed
    assert ("run_command_unsandboxed" in TOOLS) is sandboxed
    if sandboxed:
        assert TOOLS["run_command_unsandboxed"].needs_approval  # a person decides every escalation
    with pytest.raises(ConfigError):
        tool_settings({"shell": {"timeout_s": "soon"}})
    with pytest.raises(ConfigError, match="web_search"):
        tool_settings({"web_search": {"kind": "google"}})


def test_fix_scenario_end_to_end_through_the_cli(tmp_path: Path) -> None:
    project = tmp_path / "project"
    project.mkdir()
    (project / "greet.py").write_text((ROOT / "examples" / "project" / "greet.py").read_text())
    home = tmp_path / "home"
    home.mkdir()
    home.joinpath("config.toml").write_text('[tools.shell.sandbox]\npolicy = "always-ask"\n')
    env = {**os.environ, "TETHER_HOME": str(home)}
    first = subprocess.run(
        ["tether", "run", "--model", "scripted/fix", "--cwd", str(project), "--json", "Fix the greeting and check it"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    stopped = json.loads(first.stdout)
    assert first.returncode == 5 and stopped["interruption"]["tool_name"] == "run_command"
    assert 'f"hello, {name}!"' in (project / "greet.py").read_text()  # the edit is done, the command waits
    second = subprocess.run(
        ["tether", "resume", stopped["run_id"], "--approve", "--json"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    result = json.loads(second.stdout)
    assert result["status"] == "completed"
    assert result["output"] == "Fixed the typo in greet.py; running it now prints: hello, world!"
    assert result["tool_stats"]["run_command"]["calls"] == 1 and result["tool_stats"]["edit_file"]["errors"] == 0
    trace = [json.loads(x) for x in (home / "traces" / f"{stopped['run_id']}.jsonl").read_text().splitlines()]
    assert trace[-1]["tool_stats"]["read_file"]["calls"] == 1

    (project / "greet.py").write_text((ROOT / "examples" / "project" / "greet.py").read_text())
    home.joinpath("config.toml").write_text("[tools.shell]\napproval = false\n")
    direct = subprocess.run(
        ["tether", "run", "--model", "scripted/fix", "--cwd", str(project), "--json", "Fix it"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert direct.returncode == 0 and "hello, world!" in json.loads(direct.stdout)["output"]

    (project / "greet.py").write_text((ROOT / "examples" / "project" / "greet.py").read_text())
    home.joinpath("config.toml").write_text("")  # the default: in the sandbox without asking, where there is one
    default = subprocess.run(
        ["tether", "run", "--model", "scripted/fix", "--cwd", str(project), "--json", "Fix it"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    if sandbox_status().available:
        assert default.returncode == 0 and "hello, world!" in json.loads(default.stdout)["output"]
        assert "shell: sandbox workspace-write (bubblewrap, network off)" in default.stderr
        run_id = json.loads(default.stdout)["run_id"]
        lines = [json.loads(x) for x in (home / "traces" / f"{run_id}.jsonl").read_text().splitlines()]
        said = [x["label"] for x in lines if x["type"] == "tool_progress" and x["tool_name"] == "run_command"]
        assert said == ["sandbox: workspace-write, network off"]  # the mode of the call, in the trace
    else:
        assert default.returncode == 5 and "shell: no sandbox (" in default.stderr


def test_an_inline_tool_runs_on_the_loop_thread_and_a_plain_one_in_a_worker() -> None:
    import asyncio
    import threading

    from tether.cancel import CancelSignal
    from tether.tools.base import ToolContext, tool

    @tool(inline=True)
    def quick() -> str:
        """Quick."""
        return str(threading.get_ident())

    @tool
    def plain() -> str:
        """Plain."""
        return str(threading.get_ident())

    async def go() -> tuple[str, str, str]:
        ctx = ToolContext(cwd=Path("."), signal=CancelSignal())
        return str(threading.get_ident()), str(await quick.execute({}, ctx)), str(await plain.execute({}, ctx))

    loop_thread, inline_thread, worker_thread = asyncio.run(go())
    assert inline_thread == loop_thread != worker_thread


def test_the_scripted_demo_scan_is_not_a_built_in_tool() -> None:
    """scan_archive always answers "no problems found": a real model would report it as fact."""
    from tether.tools.demo import DEMO_TOOLS
    from tether.tools.files import FILE_TOOLS

    assert "scan_archive" not in TOOLS and "scan_archive" not in {t.name for t in FILE_TOOLS}
    assert [t.name for t in DEMO_TOOLS] == ["scan_archive"]
