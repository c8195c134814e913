"""The scripted server speaks Chat Completions well enough for the official openai client."""

from __future__ import annotations

import json

import openai

from tether.testing import SCENARIOS, ScriptedServer, scripted_completion


def test_official_client_lists_models_and_completes(scripted_server: ScriptedServer) -> None:
    client = openai.OpenAI(base_url=scripted_server.base_url, api_key="unused", max_retries=0)
    assert {m.id for m in client.models.list()} == set(SCENARIOS)
    r = client.chat.completions.create(model="plan", messages=[{"role": "user", "content": "go"}])
    (call,) = r.choices[0].message.tool_calls or []
    assert call.function.name == "list_files" and r.choices[0].finish_reason == "tool_calls"
    assert r.usage is not None and r.usage.prompt_tokens > 0


def test_official_client_streams_tool_call_deltas_and_usage(scripted_server: ScriptedServer) -> None:
    client = openai.OpenAI(base_url=scripted_server.base_url, api_key="unused", max_retries=0)
    messages = [
        {"role": "user", "content": "go"},
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "list_files", "arguments": "{}"}}],
        },
        {"role": "tool", "tool_call_id": "c1", "content": "errors.log"},
    ]
    stream = client.chat.completions.create(
        model="scripted/plan", messages=messages, stream=True, stream_options={"include_usage": True}
    )
    args, names, usage, finish = "", [], None, None
    for chunk in stream:
        if chunk.usage:
            usage = chunk.usage
        for choice in chunk.choices:
            finish = choice.finish_reason or finish
            for tc in choice.delta.tool_calls or []:
                names += [tc.function.name] if tc.function and tc.function.name else []
                args += tc.function.arguments or "" if tc.function else ""
    assert names == ["read_file"] and json.loads(args) == {"path": "errors.log"}
    assert finish == "tool_calls" and usage is not None and usage.completion_tokens > 0


def test_unknown_scenario_is_a_400(scripted_server: ScriptedServer) -> None:
    client = openai.OpenAI(base_url=scripted_server.base_url, api_key="unused", max_retries=0)
    try:
        client.chat.completions.create(model="nope", messages=[{"role": "user", "content": "go"}])
    except openai.BadRequestError as exc:
        assert "unknown scripted scenario" in str(exc)
    else:
        raise AssertionError("expected a 400")


def test_max_tokens_cuts_the_reply() -> None:
    body = scripted_completion("hello", [{"role": "user", "content": "x"}], max_tokens=3)
    assert body["choices"][0]["finish_reason"] == "length"
    assert body["usage"]["completion_tokens"] == 3


def test_scripted_model_is_stateless() -> None:
    convo = [{"role": "user", "content": "x"}]
    assert scripted_completion("plan", convo)["choices"] == scripted_completion("plan", convo)["choices"]


def test_official_anthropic_client_completes_and_streams(scripted_server: ScriptedServer) -> None:
    import anthropic

    client = anthropic.Anthropic(base_url=scripted_server.root_url, api_key="unused", max_retries=0)
    tools = [{"name": "list_files", "description": "List files.", "input_schema": {"type": "object", "properties": {}}}]
    message = client.messages.create(
        model="plan", max_tokens=256, tools=tools, messages=[{"role": "user", "content": "go"}]
    )
    (use,) = [b for b in message.content if b.type == "tool_use"]
    assert use.name == "list_files" and message.stop_reason == "tool_use"
    history = [
        {"role": "user", "content": "go"},
        {"role": "assistant", "content": [{"type": "tool_use", "id": use.id, "name": use.name, "input": {}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": use.id, "content": "errors.log"}]},
    ]
    with client.messages.stream(
        model="plan", max_tokens=256, tools=tools, messages=history, thinking={"type": "enabled", "budget_tokens": 128}
    ) as stream:
        final = stream.get_final_message()
    kinds = [b.type for b in final.content]
    assert kinds == ["thinking", "tool_use"]
    assert final.content[1].input == {"path": "errors.log"}  # assembled from partial JSON by the SDK
    assert final.content[0].signature and final.usage.output_tokens > 0


def test_the_server_keeps_a_bounded_number_of_requests() -> None:
    import httpx

    from tether.testing import server as server_module

    with ScriptedServer() as server:
        body = {"model": "hello", "messages": [{"role": "user", "content": "x" * 1000}]}
        with httpx.Client() as client:
            for _ in range(server_module.KEEP_REQUESTS + 50):
                client.post(server.base_url + "/chat/completions", json=body).raise_for_status()
        assert len(server.received) == server_module.KEEP_REQUESTS
