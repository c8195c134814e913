"""The scripted server is as strict as the real servers where that proves a fix (issue 9): faults
for quota, 507 and tool input that is not JSON; the llama.cpp dialect; listing faults on GET."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from tether.errors import ConfigError
from tether.testing import ScriptedServer
from tether.testing.validate import assistant_content_problem, check_openai

ANTHROPIC = {"anthropic-version": "2023-06-01"}


@pytest.fixture
def server() -> Iterator[ScriptedServer]:
    with ScriptedServer() as s:
        yield s


def chat(server: ScriptedServer, scenario: str = "single_read", **extra: Any) -> httpx.Response:
    return httpx.post(
        f"{server.base_url}/chat/completions",
        json={"model": scenario, "messages": [{"role": "user", "content": "go"}], **extra},
    )


def messages(server: ScriptedServer, scenario: str = "single_read", **extra: Any) -> httpx.Response:
    body = {
        "model": scenario,
        "max_tokens": 256,
        "messages": [{"role": "user", "content": "go"}],
        "tools": [{"name": "read_file", "description": "Read.", "input_schema": {"type": "object"}}],
        **extra,
    }
    return httpx.post(f"{server.root_url}/v1/messages", json=body, headers=ANTHROPIC)


def test_quota_faults_answer_in_each_apis_shape(server: ScriptedServer) -> None:
    server.set_faults(["429_quota", "429_quota", "low_credit", "507"])
    openai = chat(server)
    assert openai.status_code == 429 and openai.json()["error"]["code"] == "insufficient_quota"
    anthropic = messages(server)
    assert anthropic.status_code == 429 and anthropic.json()["error"]["type"] == "insufficient_quota"
    credit = messages(server)
    assert credit.status_code == 400 and "credit balance is too low" in credit.json()["error"]["message"]
    assert chat(server).status_code == 507
    assert chat(server).status_code == 200  # faults are consumed one per request


def test_bad_tool_json_on_both_endpoints(server: ScriptedServer) -> None:
    server.set_faults(["bad_tool_json", "bad_tool_json", "bad_tool_json"])
    arguments = chat(server).json()["choices"][0]["message"]["tool_calls"][0]["function"]["arguments"]
    with pytest.raises(ValueError):
        json.loads(arguments)
    (use,) = [b for b in messages(server).json()["content"] if b["type"] == "tool_use"]
    assert isinstance(use["input"], str)  # a compatible server's form: the text, not an object
    with httpx.stream(
        "POST",
        f"{server.root_url}/v1/messages",
        headers=ANTHROPIC,
        json={
            "model": "single_read",
            "max_tokens": 256,
            "stream": True,
            "messages": [{"role": "user", "content": "go"}],
        },
    ) as response:
        events = [json.loads(line[5:]) for line in response.iter_lines() if line.startswith("data:")]
    partial = "".join(
        e["delta"]["partial_json"]
        for e in events
        if e["type"] == "content_block_delta" and e["delta"]["type"] == "input_json_delta"
    )
    with pytest.raises(ValueError):
        json.loads(partial)


def test_status_faults_reach_the_model_listing_and_others_wait(server: ScriptedServer) -> None:
    server.set_faults(["401", "no_usage"])
    assert httpx.get(f"{server.base_url}/models").status_code == 401
    assert httpx.get(f"{server.base_url}/models").status_code == 200  # no_usage is left for a reply
    assert "usage" not in chat(server).json()


def test_repeat_ids_fault_streams_the_id_in_every_chunk(server: ScriptedServer) -> None:
    server.set_faults(["repeat_ids"])
    with httpx.stream(
        "POST",
        f"{server.base_url}/chat/completions",
        json={"model": "single_read", "stream": True, "messages": [{"role": "user", "content": "go"}]},
    ) as response:
        chunks = [
            json.loads(line[5:])
            for line in response.iter_lines()
            if line.startswith("data:") and line != "data: [DONE]"
        ]
    deltas = [tc for c in chunks for ch in c["choices"] for tc in ch["delta"].get("tool_calls") or []]
    assert len(deltas) == 3 and all(tc["id"] == "c1" for tc in deltas)
    assert [tc["function"]["name"] for tc in deltas] == ["read_file", None, None]


def test_assistant_content_must_be_a_string_or_parts() -> None:
    call = [{"id": "c1", "type": "function", "function": {"name": "list_files", "arguments": "{}"}}]
    history: list[dict[str, Any]] = [{"role": "user", "content": "go"}]
    tool = {"role": "tool", "tool_call_id": "c1", "content": "x"}
    for assistant, ok in [
        ({"role": "assistant", "content": "", "tool_calls": call}, True),
        ({"role": "assistant", "content": [{"type": "text", "text": "hi"}], "tool_calls": call}, True),
        ({"role": "assistant", "content": None, "tool_calls": call}, False),
        ({"role": "assistant", "tool_calls": call}, False),
        ({"role": "assistant", "content": 3, "tool_calls": call}, False),
    ]:
        body = {"messages": [*history, assistant, tool]}
        assert (check_openai(body) is None) is ok
        assert (assistant_content_problem(body) is None) is ok


def test_an_unknown_dialect_is_refused() -> None:
    with pytest.raises(ConfigError, match="llama.cpp"):
        ScriptedServer(dialect="llama-cpp")
