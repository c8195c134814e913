"""A new user offering tether's agents to an MCP client (`tether mcp serve`), as a desktop client
or another agent framework starts it: from a directory of its own choosing."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

CONFIG = """\
[agents.logs]
model = "scripted/plan"
description = "Answers questions about a folder of log files"
cwd = "examples/workspace"
tools = ["list_files", "read_file", "search_files"]
"""


def test_a_relative_agent_cwd_that_misses_says_where_it_was_taken_from(tmp_path: Path) -> None:
    """Was: the docs' own [agents.logs] (cwd = "examples/workspace") served by `tether mcp serve`
    that a client started in another directory (as desktop clients do) ended the server at once
    with "cwd /elsewhere/examples/workspace is not a directory": the client saw only its connection
    closed, and nothing said that a relative cwd is taken from where the command started. The line
    now says so and to give a full path; a full path serves from anywhere."""
    home, project, elsewhere = tmp_path / "home", tmp_path / "project", tmp_path / "elsewhere"
    (project / "examples" / "workspace").mkdir(parents=True)
    elsewhere.mkdir()
    home.mkdir()
    (home / "config.toml").write_text(CONFIG)
    env = {**os.environ, "TETHER_HOME": str(home)}
    serve = [sys.executable, "-m", "tether", "mcp", "serve"]
    out = subprocess.run(
        serve, cwd=elsewhere, env=env, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=60
    )
    assert out.returncode == 2, out.stderr
    assert f"cwd {elsewhere / 'examples' / 'workspace'} is not a directory" in out.stderr
    assert f"the relative cwd 'examples/workspace' is taken from where the command started, {elsewhere}" in out.stderr
    assert "give a full path" in out.stderr
    # With the full path, the same client's directory serves (stdin closed at once: exit 0).
    (home / "config.toml").write_text(
        CONFIG.replace('"examples/workspace"', repr(str(project / "examples" / "workspace")))
    )
    out = subprocess.run(
        serve, cwd=elsewhere, env=env, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=60
    )
    assert out.returncode == 0, out.stderr


MAILER = """\
[mcp.mail]
command = "{python}"
args = ["{server}", "--outbox", "{outbox}"]

[agents.mailer]
model = "scripted/mcp"
description = "Answers the newest e-mail"
cwd = "{cwd}"
mcp = ["mail"]
"""


def test_a_served_run_stopped_for_approval_resumes_with_its_agents_mcp_servers(tmp_path: Path) -> None:
    """Was: an [agents.NAME] agent with MCP servers (mcp = ["mail"]), called through `tether mcp
    serve` from the MCP SDK's own client, stopped for approval of mail__send_email and said to decide
    it with `tether show RUN_ID`'s advice; `tether resume RUN_ID --approve` then rebuilt the agent
    without its servers (the run recorded its name, model and limits only), so the approved call
    failed ("there is no tool named 'mail__send_email'") and the run ended `completed` with nothing
    sent. The run now records the agent's whole recipe, and the approved call sends, once."""
    import anyio
    from mcp import Client, StdioServerParameters

    from tether.harness.store import RunStore

    root = Path(__file__).resolve().parents[2]
    home, outbox = tmp_path / "home", tmp_path / "outbox.jsonl"
    home.mkdir()
    (home / "config.toml").write_text(
        MAILER.format(
            python=sys.executable,
            server=root / "examples" / "mcp" / "mail_server.py",
            outbox=outbox,
            cwd=tmp_path,
        )
    )
    env = {**os.environ, "TETHER_HOME": str(home)}

    async def call() -> str:
        params = StdioServerParameters(
            command=sys.executable, args=["-m", "tether", "mcp", "serve"], env={"TETHER_HOME": str(home)}
        )
        async with Client(params) as client:
            result = await client.call_tool("agent_mailer", {"task": "Answer the latest e-mail"})
            text = result.content[0].text  # type: ignore[union-attr]
            assert isinstance(text, str)
            return text

    answer = json.loads(anyio.run(call))
    assert answer["status"] == "interrupted" and "mail__send_email" in answer["waiting_for"], answer
    assert not outbox.exists()
    run_id = answer["run_id"]
    out = subprocess.run(
        [sys.executable, "-m", "tether", "resume", run_id, "--approve"],
        cwd=tmp_path,
        env=env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr
    assert "no tool named" not in out.stdout + out.stderr
    assert "ok mail__send_email" in out.stderr
    [sent] = [json.loads(line) for line in outbox.read_text().splitlines()]
    assert sent["to"] == "ana@example.com"
    assert RunStore(home / "runs").load(run_id).config.get("mcp") == ["mail"]


AGENT_FILE = """\
from tether import Agent
from tether.tools.files import FILE_TOOLS

agent = Agent("scripted/destructive", tools=FILE_TOOLS, cwd={cwd!r}, max_turns=5)
"""


def test_a_served_run_of_an_agent_file_stopped_for_approval_is_decided_with_tether_resume(tmp_path: Path) -> None:
    """Was: `tether mcp serve --agent agents.py` ran the file's agent for an MCP client; the run
    stopped for approval of delete_file and its next_step (and `tether show`) said to decide it with
    `tether resume RUN_ID --approve`, which refused it: "no agent 'default': define [agents.default]
    in config.toml", so a served Python agent's approval could not be given at all. The run now
    records the file it came from, and resume builds the agent from it (with the run's limits); a
    file that no longer defines the agent is said so, and nothing runs."""
    import anyio
    from mcp import Client, StdioServerParameters

    home, workspace = tmp_path / "home", tmp_path / "workspace"
    home.mkdir()
    workspace.mkdir()
    (workspace / "access.log").write_text("GET /\n" * 100)
    (workspace / "errors.log").write_text("worker 7 timed out\n")
    agents = tmp_path / "agents.py"
    agents.write_text(AGENT_FILE.format(cwd=str(workspace)))
    # No bytecode cache: the file is rewritten below within the second, at the same size.
    env = {**os.environ, "TETHER_HOME": str(home), "PYTHONDONTWRITEBYTECODE": "1"}

    async def call() -> str:
        params = StdioServerParameters(
            command=sys.executable,
            args=["-m", "tether", "mcp", "serve", "--agent", str(agents)],
            env={"TETHER_HOME": str(home), "PYTHONDONTWRITEBYTECODE": "1"},
        )
        async with Client(params) as client:
            result = await client.call_tool("agent_default", {"task": "Free some disk space"})
            text = result.content[0].text  # type: ignore[union-attr]
            assert isinstance(text, str)
            return text

    answer = json.loads(anyio.run(call))
    assert answer["status"] == "interrupted" and "delete_file" in answer["waiting_for"], answer
    resume = [sys.executable, "-m", "tether", "resume", answer["run_id"], "--approve"]

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [*resume, *args],
            cwd=tmp_path,
            env=env,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=120,
        )

    # A file that no longer defines the agent: said, and nothing decided or run.
    agents.write_text(AGENT_FILE.format(cwd=str(workspace)).replace("agent = ", "other = "))
    out = run()
    assert out.returncode == 2, out.stderr
    assert f"is a run of `tether mcp serve --agent {agents}` (agent 'default')" in out.stderr
    assert (workspace / "access.log").exists()
    # The file as it was: the approved call runs, once.
    agents.write_text(AGENT_FILE.format(cwd=str(workspace)))
    out = run()
    assert out.returncode == 0, out.stderr
    assert "ok delete_file" in out.stderr and not (workspace / "access.log").exists()


V1_SERVER = """\
import sys

print("Traceback (most recent call last):", file=sys.stderr)
print(
    "ModuleNotFoundError: No module named 'mcp.server.fastmcp'. This is mcp 2.x, where FastMCP was renamed to "
    "MCPServer (from mcp.server.mcpserver import MCPServer) and other APIs changed; see the migration guide at "
    "https://py.sdk.modelcontextprotocol.io/v2/migration/#fastmcp-renamed-to-mcpserver or pin 'mcp<2' to keep "
    "running v1 code.",
    file=sys.stderr,
)
sys.exit(1)
"""


def test_a_server_that_will_not_start_is_quoted_to_the_end_of_its_advice(tmp_path: Path) -> None:
    """Was: a small server written for mcp 1.x (`from mcp.server.fastmcp import FastMCP`, as most
    examples on the web still have it) failed under mcp 2 with an error whose last line ends in its
    fix, and `tether run --mcp` quoted that line cut at 300 characters, without a sign: "...or pin )",
    the fix ('mcp<2') gone. The last line is now quoted up to 1,000 characters, and a cut says so."""
    home = tmp_path / "home"
    home.mkdir()
    server = tmp_path / "v1_server.py"
    server.write_text(V1_SERVER)
    (home / "config.toml").write_text(f'[mcp.v1]\ncommand = "{sys.executable}"\nargs = ["{server}"]\n')
    env = {**os.environ, "TETHER_HOME": str(home)}
    out = subprocess.run(
        [sys.executable, "-m", "tether", "run", "--model", "scripted/hello", "--mcp", "v1", "hi"],
        cwd=tmp_path,
        env=env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 2, out.stderr
    assert "MCP server v1 did not start: the process exited with status 1" in out.stderr
    assert "or pin 'mcp<2' to keep running v1 code.)" in out.stderr
    # A line longer than that is cut, and the cut is said.
    server.write_text("import sys\nprint('x' * 1500 + 'END', file=sys.stderr)\nsys.exit(1)\n")
    out = subprocess.run(
        [sys.executable, "-m", "tether", "mcp", "list"],
        cwd=tmp_path,
        env=env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 1
    assert "x" * 1000 + "… (503 more characters))" in out.stdout + out.stderr


WEATHER = """\
from mcp.server.mcpserver import MCPServer

app = MCPServer("weather")


@app.prompt()
def forecast(city: str) -> str:
    \"\"\"Ask for a forecast.\"\"\"
    return f"What is the weather in {city}?"


app.run()
"""


def test_a_prompt_asked_without_its_required_argument_says_which_to_add(tmp_path: Path) -> None:
    """Was: a prompt of a server written with the MCP SDK (`forecast(city)`), asked without `city`
    (`tether mcp prompts wx forecast`, or `/forecast` in `tether chat --mcp wx`), said only "the MCP
    server wx could not answer the prompt forecast: Internal server error" (the SDK's words for its
    own missing argument), and a prompt it has not, the same. tether lists the prompt's arguments
    before asking: a required one left out, or an unknown prompt, is said in words, with what to
    add or the prompts there are; nothing is sent."""
    home = tmp_path / "home"
    home.mkdir()
    (tmp_path / "weather.py").write_text(WEATHER)
    (home / "config.toml").write_text(f'[mcp.wx]\ncommand = "{sys.executable}"\nargs = ["weather.py"]\n')
    env = {**os.environ, "TETHER_HOME": str(home)}

    def tether(*args: str, stdin: str = "") -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "tether", *args],
            cwd=tmp_path,
            env=env,
            input=stdin,
            capture_output=True,
            text=True,
            timeout=60,
        )

    out = tether("mcp", "prompts", "wx", "forecast")
    assert out.returncode == 2, out.stderr
    assert "the prompt forecast of the MCP server wx needs city: add city=..." in out.stderr
    assert "Internal server error" not in out.stderr
    out = tether("mcp", "prompts", "wx", "nope")
    assert out.returncode == 2 and "the MCP server wx has no prompt 'nope' (its prompts: forecast)" in out.stderr
    out = tether("mcp", "prompts", "wx", "forecast", "city=Oslo")
    assert out.returncode == 0 and "What is the weather in Oslo?" in out.stdout, out.stderr
    out = tether("chat", "--model", "scripted/hello", "--mcp", "wx", "--session", "s", stdin="/forecast\n")
    assert out.returncode == 0, out.stderr
    assert "/forecast: the prompt forecast of the MCP server wx needs city: add city=..." in out.stderr
    assert "[completed]" not in out.stderr  # nothing was sent


WHO_FILE = """\
from tether import Agent, tool
from tether.connectors._acting import ACTING
from tether.testing import FunctionModel, call


@tool(read_only=True)
def whoami() -> str:
    \"\"\"Whose accounts the run's MCP servers use.\"\"\"
    return f"acting for {{ACTING.get()}}"


def model(messages, request):
    if len(messages) == 1:
        return call("c1", "whoami")
    return "The run " + messages[-1].content[0].text


agent = Agent(FunctionModel(model), tools=[whoami], cwd={cwd!r})
"""


def test_a_served_run_of_a_token_user_resumed_from_the_command_line_acts_for_that_user(tmp_path: Path) -> None:
    """Was: (reachable once a served run resumes with its agent's MCP servers) `tether resume` of a
    run `tether mcp serve --http` made for a token's user (its config says "user": "alice") went on
    as the person at this machine: an MCP server that signs each user in (auth = "oauth") would have
    used `tether mcp login`'s account, not alice's, which the docs promise a token user's run never
    does. The resumed run now acts for its user, as where it was served."""
    from tether.harness.state import RunState
    from tether.harness.store import RunStore
    from tether.messages import TextPart, UserMessage

    home = tmp_path / "home"
    agents = tmp_path / "agents.py"
    agents.write_text(WHO_FILE.format(cwd=str(tmp_path)))
    config = {
        "agent": "default",
        "served": "mcp",
        "user": "alice",
        "prompt": "who?",
        "model": "function/function",
        "cwd": str(tmp_path),
        "max_turns": 5,
        "max_budget_usd": None,
        "max_run_tokens": None,
        "agent_spec": str(agents),
    }
    state = RunState(run_id="run_00000000000000a1", ext={"config": config})
    state.messages.append(UserMessage(content=(TextPart(text="who?"),)))
    state.status = "running"  # as a server stopped under it left it
    RunStore(home / "runs").save(state)
    out = subprocess.run(
        [sys.executable, "-m", "tether", "resume", state.run_id],
        cwd=tmp_path,
        env={**os.environ, "TETHER_HOME": str(home), "PYTHONDONTWRITEBYTECODE": "1"},
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 0, out.stderr
    assert "The run acting for alice" in out.stdout, out.stdout + out.stderr
