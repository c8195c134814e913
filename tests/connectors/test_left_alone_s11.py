"""MCP servers: the values of a stdio server's ``env`` kept out of what tether shows of the
server's own words (a crash message, its stderr, its errors, its results), and two servers whose
names give their tools the same names refused before either starts.

Real subprocess servers (small scripts written by each test), through the Python API and the CLI."""

from __future__ import annotations

import asyncio
import json
import logging
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from tests.connectors.conftest import tether
from tether import Agent, RunState, run
from tether.connectors import McpConnector
from tether.errors import ConfigError
from tether.messages import Message, ToolMessage
from tether.testing import FunctionModel, Reply

KEY = "sk-live-4f9a2c7e1b3d5a8f"  # named a key (API_KEY)
PASSWORD = "correct-horse-battery"  # named plainly (DB_PASS), not shaped like a key
ENV = {"API_KEY": KEY, "DB_PASS": PASSWORD, "LOG_LEVEL": "debug", "DATA": "/srv/stock.db"}

# Writes its environment on stderr and exits 3 (with ``die``, or when $FLAG exists), or serves
# tools that answer and fail quoting it; ``dies`` creates $FLAG and exits, so it does not start again.
SERVER = """
import os, sys
said = " ".join(f"{k}={v}" for k, v in sorted(os.environ.items()) if k not in ("PATH", "LC_CTYPE"))
flag = os.environ.get("FLAG")
if sys.argv[1:] == ["die"] or (flag and os.path.exists(flag)):
    sys.stderr.write(f"fatal: cannot start with {said}\\n")
    sys.exit(3)
from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.shared.exceptions import MCPError
server = MCPServer("leaky")

@server.tool()
def fails() -> str:
    \"\"\"Fails.\"\"\"
    raise ToolError(f"failed with {said}")

@server.tool()
def refuses() -> str:
    \"\"\"Refuses.\"\"\"
    raise MCPError(code=-32001, message=f"refused with {said}")

@server.tool()
def answers() -> str:
    \"\"\"Answers.\"\"\"
    return f"answer with {said}"

@server.tool()
def dies() -> str:
    \"\"\"Dies.\"\"\"
    open(flag, "w").close()
    os._exit(4)

server.run("stdio")
"""


@pytest.fixture
def server(tmp_path: Path) -> Path:
    path = tmp_path / "leaky_server.py"
    path.write_text(SERVER)
    return path


# --- 1. the values of a server's env ---------------------------------------------------------------


def test_a_server_that_prints_its_env_and_fails_to_start_has_the_values_withheld(server: Path) -> None:
    """Was: the start failure quoted the server's last stderr line as written, API_KEY and DB_PASS included."""
    connector = McpConnector("leaky", {"command": sys.executable, "args": [str(server), "die"], "env": ENV})
    with pytest.raises(ConfigError) as err:
        asyncio.run(asyncio.wait_for(connector.start(), 60))
    assert str(err.value) == (
        "MCP server leaky did not start: the process exited with status 3 (its last words: fatal: cannot start "
        "with API_KEY=[redacted] DATA=/srv/stock.db DB_PASS=[redacted] LOG_LEVEL=debug)"
    )


def test_a_running_servers_errors_results_and_restart_withhold_its_env_from_the_run_and_the_log(
    server: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Was: a tool error (isError, or a JSON-RPC refusal) and a result quoted the env as the server
    wrote it, into the run's transcript (its session, the model's next request), and so did the reason a server that died and
    would not start again is down."""
    names = ("fails", "refuses", "answers", "dies", "answers")

    def reply(messages: list[Message], request: Any) -> Reply | str:
        if not any(isinstance(m, ToolMessage) for m in messages):
            return Reply(calls=tuple((f"c{i}", f"leaky__{name}", {}) for i, name in enumerate(names)))
        return "done"

    env = {**ENV, "FLAG": str(tmp_path / "died")}
    table = {"command": sys.executable, "args": [str(server)], "env": env, "approval": "never"}
    agent = Agent(FunctionModel(reply), extensions=[McpConnector("leaky", table)], cwd=tmp_path)
    state = RunState()
    with caplog.at_level(logging.WARNING, logger="tether"):
        result = asyncio.run(asyncio.wait_for(run(agent, "go", state=state), 90))
    assert result.status == "completed"
    fails, refuses, answers, dies, down = (m.text for m in state.messages if isinstance(m, ToolMessage))
    said = "API_KEY=[redacted] DATA=/srv/stock.db DB_PASS=[redacted] FLAG="
    assert said in fails and said in refuses
    # A result is data: only what is a secret by its name or shape is taken out of it (DB_PASS is,
    # by its name; LOG_LEVEL's value and the path are left alone).
    assert "API_KEY=[redacted] DATA=/srv/stock.db DB_PASS=[redacted] FLAG=" in answers
    for words in (dies, down):  # it died, and would not start again
        assert "did not start again" in words and said in words
    saved = state.model_dump_json().replace(answers, "")
    for secret in (KEY, PASSWORD):
        assert secret not in saved and secret not in caplog.text
    assert KEY not in answers


class _Echoes(BaseHTTPRequestHandler):
    """Refuses every JSON-RPC request, quoting the path it was sent to (its query string included)."""

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["content-length"])))
        error = {"code": -32600, "message": f"no such path {self.path}"}
        out = json.dumps({"jsonrpc": "2.0", "id": body.get("id"), "error": error}).encode()
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(out)))
        self.end_headers()
        self.wfile.write(out)

    def log_message(self, *args: Any) -> None:
        pass


def test_an_http_server_that_quotes_the_key_in_its_url_has_it_withheld() -> None:
    """Was: a server whose error quoted the request's path showed ``?api_key=`` whole, though a
    configured header's value it quoted was withheld."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Echoes)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}/mcp?api_key={KEY}"
        with pytest.raises(ConfigError) as err:
            asyncio.run(asyncio.wait_for(McpConnector("web", {"url": url}).start(), 60))
    finally:
        server.shutdown()
        server.server_close()
    assert str(err.value) == "MCP server web did not start: no such path /mcp?api_key=[redacted]"


def test_mcp_list_and_run_withhold_the_env_a_server_that_will_not_start_prints(
    home: Path, server: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Was: `tether mcp list` showed the server's last line whole; `tether run` hid API_KEY (a
    secret of config.toml) but not DB_PASS."""
    env = ", ".join(f"{k} = {json.dumps(v)}" for k, v in ENV.items())
    (home / "config.toml").write_text(
        f'[mcp.leaky]\ncommand = {json.dumps(sys.executable)}\nargs = [{json.dumps(str(server))}, "die"]\n'
        f"env = {{ {env} }}\n"
    )
    code, out, err = tether(capsys, "mcp", "list")
    assert code == 1
    assert out.splitlines()[1] == (
        "  not working: MCP server leaky did not start: the process exited with status 3 (its last words: fatal: "
        "cannot start with API_KEY=[redacted] DATA=/srv/stock.db DB_PASS=[redacted] LOG_LEVEL=debug)"
    )
    code, out, err = tether(capsys, "run", "--model", "scripted/plan", "--mcp", "leaky", "hello")
    assert code == 2
    assert "(its last words: fatal: cannot start with API_KEY=" in err and "DB_PASS=[redacted]" in err
    assert KEY not in out + err and PASSWORD not in out + err


def test_mcp_list_hides_a_secret_in_a_servers_arguments_or_url(home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Was: each server's line showed its command line and URL as configured, keys included."""
    (home / "config.toml").write_text(
        f'[mcp.gh]\ncommand = {json.dumps(sys.executable)}\nargs = ["-c", "raise SystemExit(1)", "--api-key", "{KEY}"]\n'
        f'[mcp.web]\nurl = "http://127.0.0.1:9/mcp?api_key={KEY}"\nenabled = false\n'
    )
    code, out, err = tether(capsys, "mcp", "list")
    assert code == 1 and KEY not in out + err
    heads = [line for line in out.splitlines() if not line.startswith(" ")]
    assert heads == [
        f"gh  stdio  {sys.executable} -c raise SystemExit(1) --api-key <redacted>",
        "web  http  http://127.0.0.1:9/mcp?api_key=<redacted>",
    ]


# --- 2. servers whose tools would have the same names ----------------------------------------------


def test_which_server_names_clash() -> None:
    from tether.connectors.mcp import name_clash

    assert name_clash("my.server", "my_server") is not None
    assert name_clash("my server", "my@server") is not None
    assert name_clash("mail", "mail") == (
        "two MCP servers are named 'mail': their tools would have the same names (mail__TOOL); give each its own name"
    )
    assert name_clash("my-server", "my_server") is None  # "-" is kept: my-server__x and my_server__x
    assert name_clash("mail", "calendar") is None


CLASH = (
    "the MCP servers 'my.server' and 'my_server' would both name their tools my_server__TOOL (characters other "
    "than letters, digits, _ and - become _), so one's tools would take the other's names: rename one of them "
    "([mcp.NAME] in config.toml, or McpConnector's first argument) so that the two differ in a letter, digit, "
    "_ or -"
)


def test_an_agent_given_two_servers_whose_tools_names_clash_is_refused_before_either_starts(
    server: Path, tmp_path: Path
) -> None:
    """Was: both servers started, then the run was refused with "two tools are named
    'my_server__answers'", which named neither server."""
    asked: list[int] = []
    table = {"command": sys.executable, "args": [str(server)]}
    first, second = McpConnector("my.server", table), McpConnector("my_server", table)
    agent = Agent(FunctionModel(lambda m, r: asked.append(1) or "hi"), extensions=[first, second], cwd=tmp_path)
    with pytest.raises(ConfigError) as err:
        asyncio.run(asyncio.wait_for(run(agent, "go", state=RunState()), 60))
    assert str(err.value) == CLASH
    assert first.pids == [] and second.pids == [] and asked == []  # nothing started, nothing asked


def test_config_tables_whose_tools_names_clash_are_refused_by_run_and_shown_by_mcp_list(
    home: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    started = tmp_path / "started"
    program = f"open({str(started)!r}, 'a').write('x'); import sys; sys.exit(1)"
    tables = "".join(
        f'[mcp.{name}]\ncommand = {json.dumps(sys.executable)}\nargs = ["-c", {json.dumps(program)}]\n'
        for name in ('"my.server"', "my_server")
    )
    (home / "config.toml").write_text(tables)
    code, out, err = tether(capsys, "run", "--model", "scripted/plan", "--mcp", "all", "hello")
    assert code == 2
    assert err.splitlines() == [f"tether: {CLASH}"]  # said alone: before the sandbox's line, as a missing key is
    assert not started.exists()  # refused before either server started
    code, out, err = tether(capsys, "mcp", "list")
    assert code == 1
    assert out.splitlines()[-1] == f"not usable together: {CLASH}"
    # One of them alone is no clash.
    started.unlink()
    code, out, err = tether(capsys, "run", "--model", "scripted/plan", "--mcp", "my_server", "hello")
    assert code == 2 and "MCP server my_server did not start" in err and CLASH not in err
