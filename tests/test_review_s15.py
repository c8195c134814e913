"""Session 15's changes read as a demanding user reads them: what the review found in the code.

A model the server does not have, answered 400, falls back (a96422d, a94d04b), but only when its
name had no dot: the phrase was looked for in the words after "model" up to the first ".", and
nearly every real model name holds one (``gemini-2.5-flash``, ``llama-3.1-8b``, ``gpt-4.1``).
"""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest

from tether import Agent, run_sync
from tether.errors import BadRequestError, ModelNotFoundError, classify_http_error
from tether.providers.openai_chat import OpenAIChatProvider, stream_error

GEMINI = {
    "error": {
        "code": 400,
        "message": "models/gemini-2.5-flash-lite is not found for API version v1main, or is not supported "
        "for generateContent. Call ListModels to see the list of available models.",
        "status": "NOT_FOUND",
    }
}
VLLM = {"error": {"message": "The model `meta-llama/Llama-3.1-8B-Instruct` does not exist.", "type": "BadRequestError"}}
# Refused for its shape, a model named in it: no fallback (every server would refuse it).
SHAPE = {
    "error": {
        "message": "Unsupported parameter: 'max_tokens' is not supported with this model. Use "
        "'max_completion_tokens' instead.",
        "type": "invalid_request_error",
        "code": "unsupported_parameter",
    }
}


@pytest.mark.parametrize("body", [GEMINI, VLLM], ids=["gemini-2.5", "llama-3.1"])
def test_a_400_for_a_missing_model_whose_name_has_a_dot_is_a_missing_model(body: dict[str, Any]) -> None:
    """Before: a BadRequestError, so the run failed at once with a fallback that would have answered."""
    assert isinstance(classify_http_error("p", 400, json.dumps(body), {}), ModelNotFoundError)
    assert isinstance(stream_error(body["error"], "p"), ModelNotFoundError)  # the same error inside a stream
    shape = classify_http_error("p", 400, json.dumps(SHAPE), {})
    assert isinstance(shape, BadRequestError) and not isinstance(shape, ModelNotFoundError)


def _answering(status: int, body: dict[str, Any], model: str, asked: list[str]) -> OpenAIChatProvider:
    """A Chat Completions endpoint in process (no network) that answers every request alike."""

    def answer(request: httpx.Request) -> httpx.Response:
        asked.append(model)
        return httpx.Response(status, json=body)

    made = OpenAIChatProvider("https://gateway.example/v1", "sk-test", transport=httpx.MockTransport(answer))
    made.model_id = model  # type: ignore[attr-defined]
    return made


def test_a_gemini_model_it_does_not_have_falls_back_to_the_next_model() -> None:
    asked: list[str] = []
    reply = {
        "choices": [{"message": {"role": "assistant", "content": "from the backup"}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 10, "completion_tokens": 3},
    }
    primary = _answering(400, GEMINI, "gemini-2.5-flash-lite", asked)
    backup = _answering(200, reply, "backup", asked)
    result = run_sync(Agent(primary, fallback_models=[backup], stream=False), "hi")
    assert (result.status, result.text) == ("completed", "from the backup"), result.reason
    assert asked == ["gemini-2.5-flash-lite", "backup"]  # not retried: asked of the next model
