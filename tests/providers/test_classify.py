"""Errors are classified by their body as well as their status (issue 9): an account out of quota
or credit, and statuses no retry can fix, fail at once instead of four times."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tether import Agent, run
from tether.errors import (
    AuthError,
    BadRequestError,
    ContextOverflowError,
    QuotaExceededError,
    RetryableError,
    classify_http_error,
)
from tether.events import Retry
from tether.harness.retry import RetryPolicy
from tether.providers.anthropic import AnthropicProvider, stream_error
from tether.providers.openai_chat import OpenAIChatProvider
from tether.testing import ScriptedServer
from tether.tools.files import FILE_TOOLS
from tether.usage import Price

FAST = RetryPolicy(base_delay_s=0.01, max_delay_s=0.05)

OPENAI_QUOTA = {
    "error": {
        "message": "You exceeded your current quota, please check your plan and billing details.",
        "type": "insufficient_quota",
        "param": None,
        "code": "insufficient_quota",
    }
}
OPENAI_BILLING = {
    "error": {
        "message": "Your account is not active, please check your billing details on our website.",
        "type": "billing_not_active",
        "param": None,
        "code": "billing_not_active",
    }
}
ANTHROPIC_CREDIT = {
    "type": "error",
    "error": {
        "type": "invalid_request_error",
        "message": (
            "Your credit balance is too low to access the Anthropic API. Please go to Plans & Billing to upgrade or "
            "purchase credits."
        ),
    },
}
ANTHROPIC_BILLING = {"type": "error", "error": {"type": "billing_error", "message": "Billing issue."}}
OPENROUTER_CREDITS = {
    "error": {"code": 402, "message": "Insufficient credits. Add more using https://openrouter.ai/settings/credits"}
}
QUOTA_EXCEEDED = {"error": {"code": "quota_exceeded", "message": "Monthly quota exceeded."}}
# Gemini says "exceeded your current quota" for a per-minute limit too: that one passes by.
GEMINI_PER_MINUTE = {
    "error": {
        "code": 429,
        "status": "RESOURCE_EXHAUSTED",
        "message": ("You exceeded your current quota, please check your plan and billing details."),
        "details": [{"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": "27s"}],
    }
}


@pytest.mark.parametrize(
    ("status", "body"),
    [
        (429, OPENAI_QUOTA),
        (429, OPENAI_BILLING),
        (400, ANTHROPIC_CREDIT),
        (402, ANTHROPIC_BILLING),
        (402, OPENROUTER_CREDITS),
        (429, QUOTA_EXCEEDED),
        (403, QUOTA_EXCEEDED),
        (402, {"error": "x"}),
    ],
)
def test_quota_and_billing_bodies_are_permanent(status: int, body: Any) -> None:
    error = classify_http_error("openai", status, json.dumps(body), {})
    assert isinstance(error, QuotaExceededError) and not isinstance(error, RetryableError)
    assert "billing" in str(error) and "plan" in str(error)  # what to check
    assert error.status == status


@pytest.mark.parametrize(
    ("status", "body", "kind"),
    [
        (429, GEMINI_PER_MINUTE, RetryableError),  # a rate limit in quota words: still waited out
        (429, {"error": {"type": "rate_limit_error", "message": "Rate limited"}}, RetryableError),
        (401, QUOTA_EXCEEDED, AuthError),  # a wrong key is a wrong key
        (400, {"error": {"message": "prompt is too long: 250000 tokens"}}, ContextOverflowError),
        # A body that merely echoes the words (a validation error quoting the prompt) is not a quota.
        (
            400,
            {"error": {"message": "bad field", "param": "messages[0].content: 'insufficient_quota'"}},
            BadRequestError,
        ),
    ],
)
def test_other_bodies_keep_their_status_class(status: int, body: Any, kind: type) -> None:
    error = classify_http_error("openai", status, json.dumps(body), {})
    assert type(error) is kind


@pytest.mark.parametrize("status", [501, 505, 507, 508, 511])
def test_statuses_no_retry_can_fix_are_permanent(status: int) -> None:
    error = classify_http_error("local", status, "Insufficient Storage", {})
    assert isinstance(error, BadRequestError) and not isinstance(error, RetryableError)
    assert f"HTTP {status}" in str(error)


@pytest.mark.parametrize("status", [500, 502, 503, 504, 529])
def test_other_5xx_stay_retryable(status: int) -> None:
    assert isinstance(classify_http_error("local", status, "", {}), RetryableError)


def test_a_quota_plain_text_body_is_read_too() -> None:
    error = classify_http_error("openai", 429, "insufficient_quota: You exceeded your current quota", {})
    assert isinstance(error, QuotaExceededError)


def test_anthropic_billing_error_mid_stream_is_a_quota_error() -> None:
    error = stream_error({"type": "billing_error", "message": "Your credit balance is too low"}, "anthropic")
    assert isinstance(error, QuotaExceededError)


# --- through the loop: one request, not four ------------------------------------------------------


@pytest.fixture
def server() -> Iterator[ScriptedServer]:
    with ScriptedServer() as s:
        yield s


def _agent(server: ScriptedServer, kind: str, workspace: Path) -> Agent:
    provider: Any = (
        OpenAIChatProvider(base_url=server.base_url, api_key="unused")
        if kind == "openai"
        else AnthropicProvider(base_url=server.root_url, api_key="unused")
    )
    provider.model_id = "plan"
    return Agent(provider, tools=FILE_TOOLS, cwd=workspace, price=Price(input=2.0, output=12.0), retry=FAST)


@pytest.mark.parametrize("kind", ["openai", "anthropic"])
@pytest.mark.parametrize("fault", ["429_quota", "low_credit", "507"])
def test_a_permanent_failure_is_asked_once(server: ScriptedServer, workspace: Path, kind: str, fault: str) -> None:
    server.set_faults([fault] * 5)

    async def go() -> tuple[Any, list[Any]]:
        from tether import run_stream

        events = [e async for e in run_stream(_agent(server, kind, workspace), "Which file mentions a timeout?")]
        return events[-1].result, [e for e in events if isinstance(e, Retry)]

    result, retries = asyncio.run(go())
    assert result.status == "failed" and not retries
    assert len(server.received) == 1  # exactly one request reached the server
    if fault != "507":
        assert "billing" in (result.reason or "")


def test_the_same_429_without_quota_words_is_retried(server: ScriptedServer, workspace: Path) -> None:
    server.set_faults(["429"])
    result = asyncio.run(run(_agent(server, "openai", workspace), "Which file mentions a timeout?"))
    assert result.status == "completed" and len(server.received) == 4


def test_a_500_whose_body_says_the_request_is_invalid_is_not_retried() -> None:
    from tether.errors import BadRequestError, RetryableError, classify_http_error

    body = (
        "{\"error\":{\"message\":\"7 validation errors: ('body','messages',2,'content'): "
        '\'Input should be a valid string\', input None","type":"internal_server_error"}}'
    )
    assert isinstance(classify_http_error("openai", 500, body, {}), BadRequestError)
    assert isinstance(classify_http_error("openai", 500, '{"error": "out of memory"}', {}), RetryableError)
