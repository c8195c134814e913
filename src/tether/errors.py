"""Every exception tether raises, in one tree.

Misuse by the developer or the person at the terminal is kept apart from failures during a run::

    TetherError
    ├── ConfigError            the setup is wrong: unknown model, missing key, budget without a price
    ├── UserError              a request that cannot be served: unknown run id, resume of a finished run
    ├── StoreError             a run file that cannot be read or written (says which file and why)
    ├── ProviderError          a model provider failed; carries status, body, headers, retry_after
    │   ├── RetryableError     429, 408, 409, 5xx, timeouts, dropped connections
    │   │   ├── IncompleteStreamError  a stream that stopped before its end marker (chars_shown)
    │   │   └── UnreachableError  the host cannot be reached: DNS, refused, connect timeout (host)
    │   ├── AuthError          401/403: names the variable or config entry to fix
    │   ├── QuotaExceededError  the account is out of quota or credit (a 429 or 402 that says so)
    │   ├── BadRequestError    400, 501, 505, 507, 508, 511: requests the provider will never accept
    │   │   └── ModelNotFoundError  404, or a 400 that says the model does not exist: this server lacks it
    │   ├── ContextOverflowError  the prompt does not fit the model's window
    │   └── ResponseError      the provider answered something that is not its documented format
    └── RunCancelled           the run's cancellation signal fired (carries the reason)

A tool's failure is not in this tree: it becomes a tool result the model reads. Third-party
exceptions are translated where they happen, with ``raise ... from exc``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

__all__ = [
    "AuthError",
    "BadRequestError",
    "ConfigError",
    "ContextOverflowError",
    "IncompleteStreamError",
    "ModelNotFoundError",
    "ProviderError",
    "QuotaExceededError",
    "ResponseError",
    "RetryableError",
    "RunCancelled",
    "StoreError",
    "TetherError",
    "UnreachableError",
    "UserError",
    "classify_http_error",
    "is_quota_error",
    "quota_message",
]


class TetherError(Exception):
    """Base of every error tether raises on purpose."""


class ConfigError(TetherError):
    """The configuration cannot work; the message says what to set and where."""


class UserError(TetherError):
    """A request that cannot be served as asked (unknown run, nothing to resume, ...)."""


class StoreError(TetherError):
    """A persisted run or trace could not be read or written."""


class StaleRunError(StoreError):
    """A save or a resume from a copy of a run that is behind the run as saved: another process,
    or another copy in this one, saved it since this copy was loaded. Going on from the copy would
    do again what was done since (a call approved on both copies would run twice), so nothing is
    saved or run. Load the run again and decide on what it waits for now."""

    def __init__(self, run_id: str, copy: int, current: int) -> None:
        now = "has no saved commit now (it was deleted)" if current == 0 else f"is saved at commit {current}"
        super().__init__(
            f"run {run_id} {now}, and this copy of it is at commit {copy}: it was saved since by "
            "another process or from another copy. Going on from this copy would do again what was "
            "done since (an approved call would run twice), so nothing was saved or run. Load the "
            "run again (`tether resume` does) and decide on what it waits for now."
        )
        self.run_id, self.copy, self.current = run_id, copy, current


class RunCancelled(TetherError):
    """Raised inside the loop when the cancellation signal fires."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class ProviderError(TetherError):
    """A model provider failed. Subclasses say how the loop should react."""

    def __init__(
        self,
        message: str,
        *,
        provider: str = "",
        status: int | None = None,
        body: str = "",
        headers: Mapping[str, str] | None = None,
        retry_after: float | None = None,
    ) -> None:
        super().__init__(message)
        self.provider = provider
        self.status = status
        self.body = body[:2000]
        self.headers = dict(headers or {})
        self.retry_after = retry_after


class RetryableError(ProviderError):
    """Worth another attempt after a wait: rate limits, timeouts, 5xx, dropped connections."""


class IncompleteStreamError(RetryableError):
    """A stream that stopped before the provider said the reply was finished: a dropped
    connection, or a server that closed the body early. Nothing of it is a reply.

    Retryable like any dropped connection, but ``chars_shown`` says how much text and reasoning
    already reached the caller: once any did, a retry would show the user a second, different
    answer, so the loop fails the run with this message instead."""

    def __init__(self, message: str, *, chars_shown: int = 0, **kwargs: Any) -> None:
        super().__init__(message, **kwargs)
        self.chars_shown = chars_shown


class UnreachableError(RetryableError):
    """The host could not be reached at all: its name did not resolve, nothing listens on the
    port, or the connection timed out before it was made. ``host`` (``name:port``) says which.

    Retryable (a local server that is still starting, a network that comes back), but never an
    authentication failure: no request reached the server, so nothing is known about the key."""

    def __init__(self, message: str, *, host: str = "", **kwargs: Any) -> None:
        super().__init__(message, **kwargs)
        self.host = host


class AuthError(ProviderError):
    """Credentials missing, wrong or expired. Never retried."""


class BadRequestError(ProviderError):
    """The provider will never accept this request as sent (malformed, or a status such as 507 that
    no retry changes). Never retried."""


class ModelNotFoundError(BadRequestError):
    """The server does not have what was asked for: a 404 (a model or a URL it does not know), or a
    400 whose error says the model does not exist (OpenRouter, LiteLLM, Mistral and DeepSeek answer
    an unknown model so). Never retried, but another model (a fallback) may answer: unlike a
    request that is malformed, which every server would refuse."""


class QuotaExceededError(ProviderError):
    """The account behind the key is out of quota or credit (OpenAI's ``insufficient_quota``,
    Anthropic's "credit balance is too low", OpenRouter's 402). Never retried: waiting seconds
    does not refill an account; the message says to check the plan and billing."""


class ContextOverflowError(ProviderError):
    """The prompt is longer than the model's context window."""


class ResponseError(ProviderError):
    """The provider's answer is not in its documented format."""


# Phrases providers use for a prompt that does not fit (OpenAI, Anthropic, vLLM, llama.cpp, Ollama).
_OVERFLOW_MARKERS = (
    "context_length_exceeded",
    "maximum context length",
    "context window",
    "prompt is too long",
    "too many tokens",
    "exceeds the context",
    "input is too long",
    "context length",
    "exceed_context_size",  # llama.cpp's error type ("request (N tokens) exceeds the available context size")
)


def _retry_after(headers: Mapping[str, str]) -> float | None:
    lowered = {k.lower(): v for k, v in headers.items()}
    for name, scale in (("retry-after-ms", 1000.0), ("retry-after", 1.0)):
        value = lowered.get(name)
        if value is None:
            continue
        try:
            return max(0.0, float(value) / scale)
        except ValueError:
            pass
        if scale == 1.0 and (wait := _seconds_until(value)) is not None:
            return wait  # the HTTP-date form (RFC 9110 §10.2.3)
    return None


def _seconds_until(http_date: str) -> float | None:
    """Seconds from now to an HTTP date (0 when it has passed); None when it is not one."""
    import email.utils
    import math
    import time

    try:
        when = email.utils.parsedate_to_datetime(http_date)
    except (TypeError, ValueError, IndexError):
        return None
    if when.tzinfo is None:
        return None  # HTTP dates are GMT and say so; a date without a zone says nothing sure
    return float(max(0, math.ceil(when.timestamp() - time.time())))  # the date's own resolution: seconds


# Error codes and phrases that mean the account, not the request rate, is exhausted. Matched in the
# body's error type, code, status and message only (see :func:`_error_fields`), never in text a body
# may echo back. Not "exceeded your current quota": Gemini says that of a per-minute rate limit too.
_QUOTA_MARKERS = (
    "insufficient_quota",  # OpenAI, 429
    "quota_exceeded",
    "billing_not_active",  # OpenAI, 429
    "billing_error",  # Anthropic's error type for billing trouble
    "credit balance is too low",  # Anthropic, 400
    "insufficient credits",  # OpenRouter, 402
    "insufficient balance",  # DeepSeek, 402
)
# 5xx statuses that describe the server's configuration or the request, not a passing state.
_PERMANENT_5XX = {
    501: "the server does not implement this request",
    505: "the server does not support this HTTP version",
    507: "the server has no storage left for this request",
    508: "the server detected a loop while handling the request",
    511: "the network needs authenticating first (a captive portal?)",
}


def _error_fields(body: str) -> str:
    """The parts of an error body that classify it, lowercased: the error's type, code, status and
    message (OpenAI, Anthropic and Google shapes); the whole body when it is not JSON."""
    import json

    try:
        data = json.loads(body)
    except (ValueError, RecursionError):
        return body[:2000].lower()
    parts: list[Any] = []
    for obj in (data, data.get("error") if isinstance(data, dict) else None):
        if isinstance(obj, dict):
            parts += [obj.get(k) for k in ("type", "code", "status", "message", "detail")]
        elif isinstance(obj, str):
            parts.append(obj)
    return " ".join(str(p) for p in parts if p is not None and not isinstance(p, dict | list)).lower()


def is_quota_error(body: str) -> bool:
    """True when an error body says the account is out of quota or credit."""
    fields = _error_fields(body)
    return any(marker in fields for marker in _QUOTA_MARKERS)


def quota_message(provider: str, detail: str) -> str:
    return (
        f"{provider}: the account is out of quota or credit ({detail}); retrying will not help. "
        "Check the plan and billing of the account this key belongs to."
    )


def classify_http_error(
    provider: str,
    status: int,
    body: str,
    headers: Mapping[str, str],
    *,
    key_hint: str = "the API key",
    note: str = "",
) -> ProviderError:
    """The one place an HTTP failure becomes a classified error the loop knows how to handle.

    The status decides first; the body refines it where providers reuse a status: a 429, 402, 400
    or 403 whose body says the account is out of quota or credit is a :class:`QuotaExceededError`
    (never retried), as is any 402. ``note`` is added to a refused request's message (say, the
    URL a 404 came from)."""
    kwargs: dict[str, Any] = dict(
        provider=provider, status=status, body=body, headers=headers, retry_after=_retry_after(headers)
    )
    lowered = body.lower()
    if status == 401:
        return AuthError(f"{provider}: authentication failed (HTTP {status}). Check {key_hint}.", **kwargs)
    if status == 402 or (status in (400, 403, 429) and is_quota_error(body)):
        return QuotaExceededError(quota_message(provider, f"HTTP {status}: {_short(body, 160)}"), **kwargs)
    if status == 403:
        return AuthError(f"{provider}: authentication failed (HTTP {status}). Check {key_hint}.", **kwargs)
    if status in (400, 413, 422) and any(marker in lowered for marker in _OVERFLOW_MARKERS):
        return ContextOverflowError(f"{provider}: the prompt exceeds the model's context window", **kwargs)
    if status == 404 or (status in (400, 422) and _MODEL_MISSING.search(_error_fields(body))):
        said = "" if status == 404 else "the server does not have the model asked for: "
        return ModelNotFoundError(f"{provider}: HTTP {status}: {said}{_short(body)}{note}", **kwargs)
    if status in _PERMANENT_5XX:
        return BadRequestError(
            f"{provider}: HTTP {status}: {_PERMANENT_5XX[status]}; retrying will not help. {_short(body)}".rstrip(),
            **kwargs,
        )
    if status == 500 and any(marker in lowered for marker in _REQUEST_REJECTED_MARKERS):
        # Some servers (llama-cpp-python) answer a request that fails their schema with a 500 whose
        # body says so: the same request would fail the same way every time.
        return BadRequestError(
            f"{provider}: HTTP 500, but the server says the request itself is invalid; "
            f"retrying will not help: {_short(body)}{note}",
            **kwargs,
        )
    if status in (408, 409, 429) or status >= 500:
        return RetryableError(f"{provider}: HTTP {status} {_short(body)}".rstrip(), **kwargs)
    return BadRequestError(f"{provider}: HTTP {status}: {_short(body)}{note}", **kwargs)


# What the error of a 400 says when the model asked for is not on the server (OpenAI and most answer
# 404): OpenRouter's "x is not a valid model ID", LiteLLM's "Invalid model name passed in model=x",
# Mistral's type invalid_model ("Invalid model: x"), DeepSeek's "Model Not Exist", Bedrock's "The
# provided model identifier is invalid", "The model `x` does not exist", Gemini's "models/x is not
# found for API version v1main" (its OpenAI-compatible endpoint). Read in the error's type,
# code and message only; a request refused for its shape, even about a model's abilities ("'max_tokens'
# is not supported with this model"), says none of these. The phrase is looked for up to the end of
# the sentence: a dot followed by a space or the end; one inside a name (gemini-2.5-flash,
# llama-3.1-8b) is part of it.
_MODEL_MISSING = re.compile(
    r"model_not_found|invalid_model|\binvalid model\b|not a valid model|model not exist|unknown model"
    r"|model identifier is invalid|\bmodels?\b(?:[^.]|\.(?=\S)){0,80}\b(?:does not exist|not found)"
)

# Words a 500's body uses when the server rejected the request's shape, not when it failed.
_REQUEST_REJECTED_MARKERS = ("validation error", "input should be a valid", "invalid_request_error", "field required")


def _short(body: str, limit: int = 300) -> str:
    """The start of an error body, on one line; of an HTML page (a proxy's or a CDN's 502, an
    nginx 413), its words: the markup would fill the reason before saying anything."""
    return " ".join(_page_words(body).split())[:limit]


def _page_words(body: str) -> str:
    """``body``, or, when it is an HTML page, "an HTML page: " and its title (else its text)."""
    import html
    import re

    if not re.match(r"\s*(<!doctype html|<html|<head|<body|<!--)", body[:200], re.IGNORECASE):
        return body
    title = re.search(r"<title[^>]*>(.*?)</title>", body, re.IGNORECASE | re.DOTALL)
    text = title.group(1) if title and title.group(1).strip() else body
    text = re.sub(r"<(script|style)\b.*?</\1\s*>|<!--.*?-->|<[^>]*>", " ", text, flags=re.IGNORECASE | re.DOTALL)
    return f"(an HTML page: {html.unescape(text).strip()})"
