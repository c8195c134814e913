"""Issue 23, "one agent, every door": one ``[agents.support]`` in config.toml with every feature
(memory, a knowledge base, a skill, an MCP server over stdio, a guardrail, a typed answer and
limits), driven through ``tether run``, ``tether chat``, ``tether serve`` (HTTP), ``tether mcp serve``
(an MCP client calling ``agent_support``) and ``tether worker`` (queued by ``tether serve --workers
external``; RabbitMQ and Postgres). Each door is the real command, pointed at one recording
scripted OpenAI-compatible server; each sends the same bytes for the tool list, the system prompt,
the answer's schema and the token limit its budget allows, and each stops at the same turn limit
(the scenario needs three turns; the agent allows two).

Every store is in Postgres (``database_url``), so the worker door sees the same memory and knowledge
base as the others; the test is skipped where Debian's rabbitmq-server is missing only for that door.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.server.conftest import logged_url, parse_sse
from tether.testing import ScriptedServer
from tether.testing.services import RabbitServer

ROOT = Path(__file__).resolve().parents[2]
TETHER = [sys.executable, "-m", "tether"]
QUESTION = "Which worker timed out, and after how long?"
NOTE = "The on-call engineer reads every timeout report."
SKILL = """\
---
name: triage
description: How to triage a timeout in the logs
---
Read errors.log first, then say which worker timed out.
"""
CONFIG = """\
database_url = "{database_url}"

[models."openai/structured"]
input = 2.0
output = 12.0

[dispatch]
broker_url = "{broker_url}"

[mcp.mail]
command = "{python}"
args = ["{mail_server}", "--outbox", "{outbox}"]

[agents.support]
model = "openai/structured"
description = "Reports timeouts found in the logs"
instructions = "You report timeouts. Cite the file you read."
cwd = "{workspace}"
tools = ["list_files", "read_file", "search_files"]
max_turns = 2  # the structured scenario needs 3 turns: every door must stop after 2
max_budget_usd = 0.5
memory = "user"
skills = true
kb = ["catalog"]
mcp = ["mail"]
output_schema = "{schema}"

[[agents.support.guardrails]]
name = "no-secrets"
stages = ["input"]
jailbreaks = true
rules = [{{ pattern = "private key", rationale = "asks for a secret", category = "secrets" }}]
"""


def signature(body: dict[str, Any]) -> dict[str, str]:
    """What the agent's definition decides in a request, as the bytes sent (re-serialised the same
    way for every door): the tools, the system prompt, the answer's schema, the token limit."""
    system = [m for m in body["messages"] if m["role"] == "system"]
    return {
        "tools": json.dumps(body.get("tools"), sort_keys=False),
        "system": json.dumps(system),
        "response_format": json.dumps(body.get("response_format")),
        "max_tokens": json.dumps(body.get("max_tokens", body.get("max_completion_tokens"))),
    }


class Doors:
    def __init__(self, home: Path, model: ScriptedServer, env: dict[str, str], tmp: Path) -> None:
        self.home, self.model, self.env, self.tmp = home, model, env, tmp
        self.procs: list[subprocess.Popen[bytes]] = []

    def first_request(self, drive: Any) -> dict[str, str]:
        """Drive one door; the signature of the first model request it sent, and how many it sent
        (the turn limit: the same at every door)."""
        before = len(self.model.received)
        drive()
        sent = self.model.received[before:]
        assert sent, "the door sent no request to the model"
        return {**signature(sent[0][1]), "requests": str(len(sent))}

    def command(self, *args: str, stdin: str = "", code: int = 0) -> subprocess.CompletedProcess[str]:
        out = subprocess.run(
            [*TETHER, *args], env=self.env, capture_output=True, text=True, input=stdin, timeout=180, cwd=self.tmp
        )
        assert out.returncode == code, out.stderr
        return out

    def start(self, *args: str, name: str, ready: str) -> None:
        """A long-running command, waited for until its log says ``ready``."""
        log, proc = self._started(*args, name=name)
        deadline = time.monotonic() + 90
        while ready not in log.read_text():
            assert proc.poll() is None and time.monotonic() < deadline, log.read_text()
            time.sleep(0.05)

    def serve(self, *args: str, name: str) -> str:
        """``tether serve --port 0 ARGS``; the address it says it listens on."""
        log, proc = self._started("serve", "--port", "0", *args, name=name)
        return logged_url(log, proc)

    def _started(self, *args: str, name: str) -> tuple[Path, subprocess.Popen[bytes]]:
        log = self.tmp / f"{name}.log"
        with log.open("wb") as err:
            proc = subprocess.Popen(
                [*TETHER, *args], env=self.env, stdout=err, stderr=err, stdin=subprocess.DEVNULL, cwd=self.tmp
            )
        self.procs.append(proc)
        return log, proc

    def stop(self) -> None:
        for proc in self.procs:
            if proc.poll() is None:
                proc.terminate()
                try:
                    proc.wait(20)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait(5)


def run_over_http(url: str) -> None:
    """One message to the agent over the HTTP API, followed to its end."""
    with httpx.Client(base_url=url, timeout=120) as c:
        sid = c.post("/v1/sessions", json={"agent": "support"}).json()["session_id"]
        headers = {"Accept": "text/event-stream"}
        with c.stream("POST", f"/v1/sessions/{sid}/messages", json={"text": QUESTION}, headers=headers) as r:
            assert r.status_code in (200, 202), r.read()
            if r.headers["content-type"].startswith("text/event-stream"):
                events = list(parse_sse(r.iter_lines()))
                assert events[-1]["event"] == "done", events[-1]
                return
            run_id = json.loads(r.read())["run_id"]
        with c.stream("GET", f"/v1/runs/{run_id}/events", headers=headers) as r:
            events = list(parse_sse(r.iter_lines()))
        assert events and events[-1]["event"] == "done", events


def call_mcp_agent(env: dict[str, str], cwd: Path) -> dict[str, Any]:
    import anyio
    from mcp import Client, StdioServerParameters

    async def go() -> dict[str, Any]:
        params = StdioServerParameters(command=TETHER[0], args=[*TETHER[1:], "mcp", "serve"], env=env, cwd=str(cwd))
        async with Client(params) as client:
            names = {t.name for t in (await client.list_tools()).tools}
            assert "agent_support" in names, names
            result = await client.call_tool("agent_support", {"task": QUESTION})
            assert not result.is_error, result
            return dict(result.structured_content or {})

    return anyio.run(go)


@pytest.fixture
def doors(tmp_path: Path, pg_url: str) -> Iterator[Doors]:
    rabbit = RabbitServer() if RabbitServer.available() else None
    home, workspace, docs = tmp_path / "home", tmp_path / "workspace", tmp_path / "docs"
    shutil.copytree(ROOT / "examples" / "workspace", workspace)
    shutil.copytree(ROOT / "examples" / "catalog", docs / "catalog")
    (home / "skills" / "triage").mkdir(parents=True)
    (home / "skills" / "triage" / "SKILL.md").write_text(SKILL)
    config = CONFIG.format(
        database_url=pg_url,
        broker_url=rabbit.url if rabbit else "amqp://guest:guest@127.0.0.1:1//",
        python=sys.executable,
        mail_server=ROOT / "examples" / "mcp" / "mail_server.py",
        outbox=tmp_path / "outbox.jsonl",
        workspace=workspace,
        schema=ROOT / "examples" / "timeout_report.schema.json",
    )
    (home / "config.toml").write_text(config)
    keep = {k: v for k, v in os.environ.items() if k not in ("OPENAI_API_KEY", "TETHER_MODEL", "TETHER_DATABASE_URL")}
    with ScriptedServer() as model:
        env = {**keep, "TETHER_HOME": str(home), "LLM_BASE_URL": model.base_url, "OPENAI_API_KEY": "unused"}
        d = Doors(home, model, env, tmp_path)
        d.command("kb", "--name", "catalog", "add", str(docs / "catalog"), "--embedder", "none")
        d.command("memory", "add", NOTE)
        d.rabbit = rabbit  # type: ignore[attr-defined]
        try:
            yield d
        finally:
            d.stop()
            if rabbit is not None:
                rabbit.stop()


def test_one_agent_sends_the_same_tools_and_system_prompt_from_every_door(doors: Doors) -> None:
    seen: dict[str, dict[str, str]] = {}
    seen["tether run"] = doors.first_request(lambda: doors.command("run", "--agent", "support", QUESTION, code=3))
    seen["tether chat"] = doors.first_request(
        lambda: doors.command("chat", "--agent", "support", stdin=QUESTION + "\n")
    )

    url = doors.serve(name="serve")
    seen["tether serve"] = doors.first_request(lambda: run_over_http(url))

    answer: dict[str, Any] = {}
    seen["tether mcp serve"] = doors.first_request(lambda: answer.update(call_mcp_agent(doors.env, doors.tmp)))
    assert answer["status"] == "max_turns_exceeded" and answer["turns"] == 2, answer

    if doors.rabbit is not None:  # type: ignore[attr-defined]
        node = doors.serve("--workers", "external", name="node")
        doors.start("worker", "--concurrency", "2", name="worker", ready="agents: support")
        seen["tether worker"] = doors.first_request(lambda: run_over_http(node))
        # A node with --workers external runs nothing itself: the request came from the worker.

    first = seen["tether run"]
    # Every feature is there, from the first door on.
    tools = [t["function"]["name"] for t in json.loads(first["tools"])]
    assert {"list_files", "read_file", "search_files", "mail__list_messages", "load_skill"} <= set(tools), tools
    assert any(name.startswith("search_kb") for name in tools), tools
    system = json.loads(first["system"])[0]["content"]
    assert system.startswith("You report timeouts.") and NOTE in system and "triage" in system, system
    assert json.loads(first["response_format"]) is not None
    assert first["requests"] == "2"  # max_turns = 2
    for door, sent in seen.items():
        for part in ("tools", "system", "response_format", "max_tokens", "requests"):
            assert sent[part] == first[part], f"{door} sends another {part} than tether run"
    if doors.rabbit is None:  # type: ignore[attr-defined]
        pytest.skip("the worker door needs Debian's rabbitmq-server; the other four doors agree")
