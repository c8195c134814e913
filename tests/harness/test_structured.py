"""Structured output (src/tether/harness/structured.py): the final answer validated into
``Agent.output_type``, corrections in words for a bounded number of retries, ``RunResult.output``;
on both wires against the scripted server, in process, on resume, and through ``tether run``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

from tests.cli.conftest import tether
from tests.conftest import assert_pairing, scripted_anthropic, scripted_openai
from tether import Agent, RunState, run_sync
from tether.errors import ConfigError
from tether.harness.store import RunStore
from tether.harness.structured import CORRECTION
from tether.messages import AssistantMessage, Message, UserMessage
from tether.providers.base import ModelRequest
from tether.providers.scripted import STRUCTURED_SCHEMA
from tether.testing import FunctionModel, ScriptedServer
from tether.tools.files import FILE_TOOLS
from tether.usage import Price

PRICE = Price(input=2.0, output=12.0)
GOOD: dict[str, Any] = {
    "file": "errors.log",
    "worker": 7,
    "timeout_ms": 30000,
    "summary": "worker 7 timed out after 30000 ms",
}


class TimeoutReport(BaseModel):
    file: str
    worker: int
    timeout_ms: int
    summary: str


def corrections(messages: list[Message]) -> list[str]:
    return [
        m.content[0].text
        for m in messages
        if isinstance(m, UserMessage)  # type: ignore[union-attr]
        and m.content[0].text.startswith(CORRECTION)
    ]  # type: ignore[union-attr]


def check_first_fails_second_passes(state: RunState, result: Any) -> None:
    """The run the ``structured`` scenario makes: a read, an invalid answer, one correction naming
    both problems, a valid answer."""
    assert result.status == "completed", result.reason
    assert result.turns == 3
    answers = [m for m in state.messages if isinstance(m, AssistantMessage) and not m.tool_calls]
    assert len(answers) == 2
    with pytest.raises(ValueError):
        TimeoutReport.model_validate_json(answers[0].text)
    [correction] = corrections(state.messages)
    assert state.messages.index(answers[0]) + 1 == state.messages.index(answers[1]) - 1  # right between them
    assert "worker: Input should be a valid integer" in correction and "'seven'" in correction
    assert "summary: Field required" in correction
    assert json.loads(result.text) == GOOD  # the answer's text is its JSON
    assert result.typed
    assert_pairing(state.messages)


def test_pydantic_model_in_process(workspace: Path) -> None:
    state = RunState()
    agent = Agent("scripted/structured", tools=FILE_TOOLS, cwd=workspace, output_type=TimeoutReport)
    result = run_sync(agent, "Which worker timed out?", state=state)
    check_first_fails_second_passes(state, result)
    assert isinstance(result.output, TimeoutReport) and result.output.worker == 7  # the typed answer
    with pytest.warns(DeprecationWarning, match="RunResult.output"):
        assert result.data is result.output  # its earlier name, for one release
    dumped = json.loads(result.model_dump_json())  # the result still serialises: the answer as JSON
    assert dumped["output"] == GOOD and json.loads(dumped["text"]) == GOOD and dumped["typed"] is True
    assert result.cost_usd and result.usage.prompt_tokens > 0  # every retry is a paid turn


def test_json_schema_dict_in_process(workspace: Path) -> None:
    state = RunState()
    agent = Agent("scripted/structured", tools=FILE_TOOLS, cwd=workspace, output_type=STRUCTURED_SCHEMA)
    result = run_sync(agent, "Which worker timed out?", state=state)
    assert result.status == "completed" and result.output == GOOD
    [correction] = corrections(state.messages)
    assert "worker: 'seven' is not of type 'integer'" in correction
    assert "'summary' is a required property" in correction


def test_untyped_runs_keep_text_only(workspace: Path) -> None:
    r = run_sync(Agent("scripted/plan", tools=FILE_TOOLS, cwd=workspace), "Which file mentions a timeout?")
    assert r.status == "completed" and not r.typed and "timed out" in r.output


@pytest.mark.parametrize("wire", ["openai", "anthropic"])
@pytest.mark.parametrize("stream", [True, False])
def test_first_fails_second_passes_on_both_wires(
    scripted_server: ScriptedServer, workspace: Path, wire: str, stream: bool
) -> None:
    scripted_server.set_faults([])  # also forgets earlier requests
    make = scripted_openai if wire == "openai" else scripted_anthropic
    state = RunState()
    agent = Agent(
        make(scripted_server, "structured"),
        tools=FILE_TOOLS,
        cwd=workspace,
        stream=stream,
        price=PRICE,
        output_type=TimeoutReport,
    )
    result = run_sync(agent, "Which worker timed out?", state=state)
    check_first_fails_second_passes(state, result)
    assert result.output == TimeoutReport(**GOOD)
    bodies = [body for _, body, _ in scripted_server.received]
    assert len(bodies) == 3
    if wire == "openai":
        fmt = bodies[0]["response_format"]
        assert fmt["type"] == "json_schema" and fmt["json_schema"]["name"] == "TimeoutReport"
        assert fmt["json_schema"]["strict"] is True  # every field required: strict mode can take it
        assert fmt["json_schema"]["schema"]["additionalProperties"] is False
        sent = [m["content"] for m in bodies[2]["messages"] if m["role"] == "user"]
    else:
        answer_tool = bodies[0]["tools"][-1]
        assert answer_tool["name"] == "final_answer"
        assert answer_tool["input_schema"] == TimeoutReport.model_json_schema()
        assert bodies[0]["tool_choice"] == {"type": "any"}  # the agent has other tools too
        # The invalid answer went back as the assistant's text, not as a call waiting for a result.
        assistant = [m for m in bodies[2]["messages"] if m["role"] == "assistant"][-1]
        assert [b["type"] for b in assistant["content"]] == ["text"]
        sent = [b.get("text") for m in bodies[2]["messages"] if m["role"] == "user" for b in m["content"]]
    assert any(isinstance(t, str) and t.startswith(CORRECTION) for t in sent)  # the model read the correction


def test_anthropic_answer_streams_as_text(scripted_server: ScriptedServer, workspace: Path) -> None:
    from tether import run_stream

    agent = Agent(
        scripted_anthropic(scripted_server, "structured"),
        tools=FILE_TOOLS,
        cwd=workspace,
        price=PRICE,
        output_type=TimeoutReport,
    )

    async def collect() -> list[Any]:
        return [e async for e in run_stream(agent, "Which worker timed out?")]

    import asyncio

    events = asyncio.run(collect())
    streamed = "".join(e.text for e in events if e.type == "text_delta")
    assert json.dumps(GOOD) in streamed and events[-1].result.status == "completed"


def test_anthropic_with_thinking_asks_in_words(scripted_server: ScriptedServer, workspace: Path) -> None:
    """Extended thinking refuses a forced tool choice: the choice stays auto and the system prompt
    says to answer through the tool; the scripted server would refuse the request otherwise."""
    scripted_server.set_faults([])
    agent = Agent(
        scripted_anthropic(scripted_server, "structured"),
        tools=FILE_TOOLS,
        cwd=workspace,
        price=PRICE,
        output_type=TimeoutReport,
        request_extra={"thinking": {"type": "enabled", "budget_tokens": 1024}},
    )
    result = run_sync(agent, "Which worker timed out?")
    assert result.status == "completed", result.reason
    assert result.output == TimeoutReport(**GOOD)
    body = scripted_server.received[0][1]
    assert "tool_choice" not in body and "final_answer tool" in body["system"][0]["text"]


def test_retries_exhausted_fails_saying_what_failed(workspace: Path) -> None:
    state = RunState()
    agent = Agent("scripted/structured", tools=FILE_TOOLS, cwd=workspace, output_type=TimeoutReport, output_retries=0)
    result = run_sync(agent, "Which worker timed out?", state=state)
    assert result.status == "failed" and not result.typed
    assert result.reason is not None and "did not match the output schema TimeoutReport" in result.reason
    assert "worker: Input should be a valid integer" in result.reason and "summary: Field required" in result.reason
    assert corrections(state.messages) == [] and result.turns == 2


def test_bounded_retries_each_a_model_call() -> None:
    bad = FunctionModel(lambda messages, request: '{"file": "errors.log"}')
    state = RunState()
    agent = Agent(bad, output_type=STRUCTURED_SCHEMA, output_retries=2)
    result = run_sync(agent, "Report.", state=state)
    assert result.status == "failed"
    assert result.reason is not None and "after 2 corrections" in result.reason
    assert "'worker' is a required property" in result.reason
    assert len(bad.requests) == 3 and result.turns == 3  # the answer, then two retries
    assert len(corrections(state.messages)) == 2
    assert all(r.output_schema is not None and r.output_schema.name == "TimeoutReport" for r in bad.requests)


def test_not_json_and_fenced_json() -> None:
    replies = iter(["Worker 7 timed out.", "```json\n" + json.dumps(GOOD) + "\n```"])
    state = RunState()
    result = run_sync(
        Agent(FunctionModel(lambda m, r: next(replies)), output_type=TimeoutReport), "Report.", state=state
    )
    [correction] = corrections(state.messages)
    assert "the answer is not valid JSON" in correction
    assert result.status == "completed" and result.output == TimeoutReport(**GOOD)


def test_corrections_count_since_the_latest_prompt(workspace: Path) -> None:
    """A new prompt in the same conversation starts a fresh allowance of retries."""
    state = RunState()
    agent = Agent("scripted/structured", tools=FILE_TOOLS, cwd=workspace, output_type=TimeoutReport, output_retries=1)
    assert run_sync(agent, "Which worker timed out?", state=state).status == "completed"
    answers = iter(['{"file": 1}', json.dumps(GOOD)])
    again = Agent(FunctionModel(lambda m, r: next(answers)), output_type=TimeoutReport, output_retries=1)
    result = run_sync(again, "And again?", state=state)
    assert result.status == "completed", result.reason
    assert len(corrections(state.messages)) == 2


@pytest.mark.parametrize("wire", ["in_process", "anthropic"])
def test_resume_between_the_failed_answer_and_the_retry(
    scripted_server: ScriptedServer, workspace: Path, tmp_path: Path, wire: str
) -> None:
    store = RunStore(tmp_path / "runs")
    model: Any = "scripted/structured" if wire == "in_process" else scripted_anthropic(scripted_server, "structured")
    agent = Agent(model, tools=FILE_TOOLS, cwd=workspace, output_type=TimeoutReport, max_turns=2, price=PRICE)
    first = run_sync(agent, "Which worker timed out?", store=store)
    assert first.status == "max_turns_exceeded"  # stopped before the retry was asked
    saved = store.load(first.run_id)
    assert corrections(saved.messages) and isinstance(saved.messages[-1], UserMessage)
    model = "scripted/structured" if wire == "in_process" else scripted_anthropic(scripted_server, "structured")
    resumed = run_sync(
        Agent(model, tools=FILE_TOOLS, cwd=workspace, output_type=TimeoutReport, max_turns=5, price=PRICE),
        state=saved,
        store=store,
    )
    assert resumed.status == "completed", resumed.reason
    assert resumed.output == TimeoutReport(**GOOD)
    final = store.load(first.run_id)
    assert len(corrections(final.messages)) == 1 and final.turns == 3  # nothing asked or written twice
    assert_pairing(final.messages)


def test_resume_after_a_crash_before_the_correction(workspace: Path, tmp_path: Path) -> None:
    """The process died after the invalid answer was saved and before the correction was: the
    resumed run checks the answer, writes the correction once, and asks again."""
    store = RunStore(tmp_path / "runs")
    agent = Agent("scripted/structured", tools=FILE_TOOLS, cwd=workspace, output_type=TimeoutReport, max_turns=2)
    first = run_sync(agent, "Which worker timed out?", store=store)
    state = store.load(first.run_id)
    del state.messages[-1]  # as saved when the answer was recorded
    state.status = "interrupted"
    assert isinstance(state.messages[-1], AssistantMessage) and not corrections(state.messages)
    resumed = run_sync(
        Agent("scripted/structured", tools=FILE_TOOLS, cwd=workspace, output_type=TimeoutReport),
        state=state,
        store=store,
    )
    assert resumed.status == "completed" and resumed.output == TimeoutReport(**GOOD)
    assert len(corrections(store.load(first.run_id).messages)) == 1


def test_configuration_refused_before_the_run() -> None:
    from tether import tool

    @tool
    def final_answer(text: str) -> str:
        """A tool that would shadow the answer tool."""
        return text

    calls: list[ModelRequest] = []
    model = FunctionModel(lambda m, r: calls.append(r) or "{}")
    with pytest.raises(ConfigError, match="final_answer"):
        run_sync(Agent(model, tools=[final_answer], output_type=TimeoutReport), "x")
    with pytest.raises(ConfigError, match="JSON object"):
        run_sync(Agent(model, output_type={"type": "array", "items": {"type": "integer"}}), "x")
    with pytest.raises(ConfigError, match="not a valid JSON Schema"):
        run_sync(Agent(model, output_type={"type": "object", "properties": 5}), "x")
    with pytest.raises(ConfigError, match="output_retries"):
        run_sync(Agent(model, output_type=TimeoutReport, output_retries=-1), "x")
    assert calls == []


@pytest.fixture
def env(tether_home: Path) -> dict[str, str]:
    import os

    drop = ("LLM_BASE_URL", "OPENAI_BASE_URL", "OPENAI_API_KEY", "TETHER_SESSION_STORE")
    return {**{k: v for k, v in os.environ.items() if k not in drop}, "TETHER_HOME": str(tether_home)}


def test_cli_output_schema(workspace: Path, env: dict[str, str], tmp_path: Path) -> None:
    schema = tmp_path / "report.schema.json"
    schema.write_text(json.dumps(STRUCTURED_SCHEMA))
    out = tether(
        "run",
        "--model",
        "scripted/structured",
        "--cwd",
        str(workspace),
        "--output-schema",
        str(schema),
        "Which worker timed out?",
        env=env,
    )
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout) == GOOD  # stdout holds the validated JSON alone
    out = tether(
        "run",
        "--model",
        "scripted/structured",
        "--cwd",
        str(workspace),
        "--output-schema",
        str(schema),
        "--json",
        "Which worker timed out?",
        env=env,
    )
    result = json.loads(out.stdout)
    assert result["status"] == "completed" and result["output"] == GOOD and json.loads(result["text"]) == GOOD
    assert result["typed"] is True


def test_cli_output_schema_resume_keeps_the_schema(workspace: Path, env: dict[str, str], tmp_path: Path) -> None:
    schema = tmp_path / "report.schema.json"
    schema.write_text(json.dumps(STRUCTURED_SCHEMA))
    out = tether(
        "run",
        "--model",
        "scripted/structured",
        "--cwd",
        str(workspace),
        "--output-schema",
        str(schema),
        "--max-turns",
        "2",
        "--json",
        "Which worker timed out?",
        env=env,
    )
    stopped = json.loads(out.stdout)
    assert stopped["status"] == "max_turns_exceeded" and stopped["typed"] is False
    assert isinstance(stopped["output"], str)  # no typed answer: the text, as for any run
    out = tether("resume", stopped["run_id"], "--max-turns", "3", env=env)
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout) == GOOD


@pytest.mark.parametrize(
    ("content", "says"),
    [
        (None, "cannot read"),
        ("{", "is not JSON"),
        ("[1]", "must hold a JSON Schema object"),
        ('{"type": "array"}', "must describe a JSON object"),
        ('{"type": "object", "required": "x"}', "not a valid JSON Schema"),
    ],
)
def test_cli_bad_schema_file_is_a_usage_error(
    content: str | None, says: str, env: dict[str, str], tmp_path: Path
) -> None:
    schema = tmp_path / "schema.json"
    if content is not None:
        schema.write_text(content)
    out = tether("run", "--model", "scripted/structured", "--output-schema", str(schema), "x", env=env)
    assert out.returncode == 2 and out.stdout == ""
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and says in lines[0] and "--output-schema" in lines[0]
