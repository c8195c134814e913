"""tether's MCP client against a server nobody here wrote: ``@modelcontextprotocol/server-everything``
(the MCP project's reference server of every feature), over stdio, streamable HTTP and legacy SSE.

The package is not downloaded by the test (tests reach no network): install it once into the cache
directory the test reads, ``$TETHER_TEST_NPM_CACHE`` (default ``~/.cache/tether-test-npm``)::

    npm install --prefix ~/.cache/tether-test-npm/everything @modelcontextprotocol/server-everything

Without Node, or without the package there, the tests skip and say why.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tether.cancel import CancelSignal
from tether.connectors import McpConnector
from tether.connectors._client_side import Asker
from tether.connectors._resources import list_text, prompt_messages, prompts_text
from tether.harness.state import RunState
from tether.messages import ImagePart, TextPart
from tether.testing.services import PortTaken, on_a_free_port, port_in_use
from tether.tools.base import ToolContext, ToolResult

CACHE = Path(os.environ.get("TETHER_TEST_NPM_CACHE", Path.home() / ".cache" / "tether-test-npm"))
PACKAGE = CACHE / "everything" / "node_modules" / "@modelcontextprotocol" / "server-everything" / "dist" / "index.js"
INSTALL = f"npm install --prefix {CACHE / 'everything'} @modelcontextprotocol/server-everything"


def _missing() -> str | None:
    if shutil.which("node") is None:
        return "Node is not installed (server-everything is a Node program)"
    if not PACKAGE.exists():
        return f"@modelcontextprotocol/server-everything is not in {CACHE}: {INSTALL}"
    return None


pytestmark = pytest.mark.skipif(_missing() is not None, reason=_missing() or "")


class Person:
    """Answers the questions tether asks at the terminal, and keeps them."""

    def __init__(self, answers: dict[str, str]) -> None:
        self.answers = answers
        self.asked: list[str] = []

    async def ask(self, question: str) -> str:
        self.asked.append(question)
        return next((a for key, a in self.answers.items() if key in question), "")


def listens(pid: int, port: int) -> bool:
    """Whether process ``pid`` holds a socket listening on ``port`` (Linux: its descriptors against
    the kernel's socket tables)."""
    held: set[str] = set()
    with contextlib.suppress(FileNotFoundError):  # it ended, or closed one meanwhile
        for fd in os.listdir(f"/proc/{pid}/fd"):
            held.add(os.readlink(f"/proc/{pid}/fd/{fd}"))
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for row in Path(table).read_text().splitlines()[1:]:
            local, state, inode = row.split()[1], row.split()[3], row.split()[9]
            if state == "0A" and int(local.rpartition(":")[2], 16) == port and f"socket:[{inode}]" in held:
                return True
    return False


def served(transport: str, log: Path) -> Iterator[str]:
    """The server on a port it is told (it reads PORT, and says "port 0" for 0), again on another
    one when that was taken before it listened. It says "... port N" even when it could not listen
    there (Express calls back with the error), so the test asks the kernel whether it listens."""

    def start(port: int) -> tuple[subprocess.Popen[bytes], int]:
        env = {"PATH": os.environ["PATH"], "PORT": str(port)}
        with log.open("w") as err:  # a file, not a pipe: a pipe nobody reads would stall the server
            proc = subprocess.Popen(["node", str(PACKAGE), transport], env=env, stderr=err, stdout=subprocess.DEVNULL)
        deadline = time.monotonic() + 60
        while proc.poll() is None and not listens(proc.pid, port):
            assert time.monotonic() < deadline, log.read_text()[-2000:]
            time.sleep(0.05)
        if proc.poll() is not None:
            # The streamable HTTP transport says a port in use was and exits 1; the SSE one says
            # nothing of it and exits 0 (its event loop has nothing left to do).
            if port_in_use(log.read_text()) or proc.returncode == 0:
                raise PortTaken(log.read_text()[-2000:])
            raise AssertionError(log.read_text()[-2000:])
        return proc, port

    proc, port = on_a_free_port(start)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        proc.terminate()
        proc.wait(30)


@pytest.fixture(scope="module")
def http_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    yield from served("streamableHttp", tmp_path_factory.mktemp("http") / "server.log")


@pytest.fixture(scope="module")
def sse_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    yield from served("sse", tmp_path_factory.mktemp("sse") / "server.log")


def table(transport: str, http_url: str | None, sse_url: str | None) -> dict[str, Any]:
    extra = {"sampling": "allow", "sampling_model": "scripted/hello", "timeout_s": 60}
    if transport == "stdio":
        return {"command": "node", "args": [str(PACKAGE), "stdio"], **extra}
    if transport == "http":
        return {"url": f"{http_url}/mcp", **extra}
    return {"url": f"{sse_url}/sse", "transport": "sse", **extra}


def session(connector: McpConnector, work: Any) -> Any:
    async def go() -> Any:
        await connector.start()
        try:
            return await work(connector)
        finally:
            await connector.stop()

    return asyncio.run(asyncio.wait_for(go(), 180))  # a guard against a hang, not a measurement


def text(result: ToolResult) -> str:
    return "\n".join(p.text for p in result.parts() if isinstance(p, TextPart))


@pytest.fixture(params=["stdio", "http", "sse"])
def transport(request: pytest.FixtureRequest) -> str:
    name: str = request.param
    return name


@pytest.fixture
def connector(transport: str, request: pytest.FixtureRequest, tmp_path: Path) -> McpConnector:
    http = request.getfixturevalue("http_url") if transport == "http" else None
    sse = request.getfixturevalue("sse_url") if transport == "sse" else None
    person = Person({"name ": "Ada Lovelace", "check": "yes", "integer": "7", "press Enter": ""})
    c = McpConnector("every", table(transport, http, sse), workspace=tmp_path, asker=Asker(person.ask))
    c.person = person  # type: ignore[attr-defined]
    return c


def test_its_tools_results_progress_roots_sampling_and_elicitation(connector: McpConnector, tmp_path: Path) -> None:
    progress: list[str] = []
    state = RunState()
    ctx = ToolContext(cwd=tmp_path, signal=CancelSignal(), state=state, on_progress=progress.append)

    async def work(c: McpConnector) -> dict[str, ToolResult]:
        tools = {t.name.removeprefix("every__"): t for t in c.tools()}
        calls = {
            "echo": {"message": "hello there"},
            "get-sum": {"a": 2, "b": 40},
            "get-tiny-image": {},
            "trigger-long-running-operation": {"duration": 1, "steps": 2},
            "get-structured-content": {"location": "New York"},
            "get-annotated-message": {"messageType": "error", "includeImage": True},
            "get-roots-list": {},
            "trigger-sampling-request": {"prompt": "Say hello", "maxTokens": 50},
            "trigger-elicitation-request": {},
            "get-resource-links": {"count": 2},
        }
        out = {name: await tools[name].execute(args, ctx) for name, args in calls.items()}
        link = next(line for line in text(out["get-resource-links"]).splitlines() if line.startswith("[resource link"))
        out["followed"] = await tools["mcp_read_resource"].execute({"uri": link.split()[2]}, ctx)
        out["templated"] = await tools["mcp_read_resource"].execute({"uri": "demo://resource/dynamic/text/3"}, ctx)
        return out

    out = session(connector, work)
    assert all(not r.is_error for r in out.values()), {k: text(v) for k, v in out.items() if v.is_error}
    assert text(out["echo"]) == "Echo: hello there"
    assert "42" in text(out["get-sum"])
    assert any(isinstance(p, ImagePart) and p.media_type == "image/png" for p in out["get-tiny-image"].parts())
    assert "Long running operation completed" in text(out["trigger-long-running-operation"])
    assert [p for p in progress if p.startswith(("1/2", "2/2"))], progress  # the server's progress, as the run's
    assert "temperature" in text(out["get-structured-content"])
    assert tmp_path.resolve().as_uri() in text(out["get-roots-list"])  # the workspace is the root
    assert "Hello! I am the scripted model" in text(out["trigger-sampling-request"])
    assert state.usage.completion_tokens > 0  # the run paid for the server's completion
    assert "Name: Ada Lovelace" in text(out["trigger-elicitation-request"])
    assert any("Please provide inputs" in q for q in connector.person.asked)  # type: ignore[attr-defined]
    assert text(out["followed"]).startswith("[resource demo://resource/")
    assert "3" in text(out["templated"])
    assert "simulate-research-query" in connector.refused  # it requires MCP Tasks
    assert connector.instructions and "Everything Server" in connector.instructions
    assert connector.prompt_block() is not None and connector.prompt_block().startswith("# The MCP server every")


def test_its_resources_and_prompts(connector: McpConnector) -> None:
    async def work(c: McpConnector) -> tuple[str, str, list[tuple[str, str]]]:
        return await list_text(c), await prompts_text(c), await prompt_messages(c, "args-prompt", {"city": "Lyon"})

    listed, prompts, messages = session(connector, work)
    assert "demo://resource/static/document/architecture.md" in listed
    assert "demo://resource/dynamic/text/{resourceId} (template)" in listed
    assert "- simple-prompt" in prompts and "args-prompt city state?" in prompts
    assert messages and messages[0][0] == "user" and "Lyon" in messages[0][1]


def test_sampling_asks_the_person_by_default_and_a_no_is_the_servers_answer(tmp_path: Path) -> None:
    person = Person({"Allow?": "n"})
    cfg = {"command": "node", "args": [str(PACKAGE), "stdio"], "sampling_model": "scripted/hello"}
    connector = McpConnector("every", cfg, workspace=tmp_path, asker=Asker(person.ask))
    ctx = ToolContext(cwd=tmp_path, signal=CancelSignal(), state=RunState())

    async def work(c: McpConnector) -> ToolResult:
        tool = next(t for t in c.tools() if t.name == "every__trigger-sampling-request")
        return await tool.execute({"prompt": "Say hello"}, ctx)

    result = session(connector, work)
    assert [q for q in person.asked if "asks tether's model" in q and "Say hello" in q]
    assert "declined" in text(result) and "Hello! I am" not in text(result)


def test_a_subscribed_resource_says_when_it_changed(tmp_path: Path) -> None:
    cfg = {"command": "node", "args": [str(PACKAGE), "stdio"]}
    connector = McpConnector("every", cfg, workspace=tmp_path, asker=Asker())
    uri = "demo://resource/static/document/architecture.md"

    async def work(c: McpConnector) -> str:
        toggle = next(t for t in c.tools() if t.name == "every__toggle-subscriber-updates")
        await toggle.execute({}, ToolContext(cwd=tmp_path, signal=CancelSignal()))
        async for changed in c.watch(uri):  # the server sends an update every 5 s
            return changed
        raise AssertionError("the subscription ended")

    assert session(connector, work) == uri


def test_in_a_served_run_its_question_stops_the_run_and_the_answer_reaches_it(transport: str, request: Any) -> None:
    """``trigger-elicitation-request`` in a run of `tether serve` (no terminal to ask at): the run
    stops with the server's form; the person's answer, given as a decision, reaches the server when
    the call is made again."""
    from tether import Agent, approve, run_sync
    from tether.connectors._acting import acting_as
    from tether.connectors.forms import schema_form
    from tether.messages import ToolMessage
    from tether.providers.scripted import call
    from tether.testing import FunctionModel

    http = request.getfixturevalue("http_url") if transport == "http" else None
    sse = request.getfixturevalue("sse_url") if transport == "sse" else None
    nobody = Person({})  # must never be asked: a served run's questions go to its user

    def reply(messages: list[Any], _: Any) -> Any:
        answers = [m for m in messages if isinstance(m, ToolMessage)]
        return f"said: {answers[-1].text}" if answers else call("c1", "every__trigger-elicitation-request", {})

    connector = McpConnector("every", {**table(transport, http, sse), "approval": "never"}, asker=Asker(nobody.ask))
    agent = Agent(FunctionModel(reply), extensions=[connector], max_turns=4)
    state = RunState()
    with acting_as(None):
        first = run_sync(agent, "go", state=state)
        asked = first.interruption
        assert first.status == "interrupted" and asked is not None and asked.type == "elicitation"
        assert asked.server == "every" and asked.requested_schema is not None
        fields = {f["name"]: f for f in schema_form(asked.requested_schema)["fields"]}
        assert fields["email"]["input"] == "email" and fields["birthdate"]["input"] == "date"
        assert fields["titledSingleSelectEnum"]["option_labels"]["hero-2"] == "Green Lantern"
        assert fields["untitledMultipleSelectEnum"]["multiple"] is True
        approve(state, content={"name": "Grace Hopper", "check": True, "email": "grace@example.com", "integer": 7})
        done = run_sync(agent, state=state)
    assert done.status == "completed", done.reason
    assert "Name: Grace Hopper" in done.text and "grace@example.com" in done.text
    assert nobody.asked == []
