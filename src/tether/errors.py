"""Every exception tether raises, in one tree.

Misuse by the developer or the person at the terminal is kept apart from failures during a run::

    TetherError
    ├── ConfigError            the setup is wrong: unknown model, missing key, budget without a price
    ├── UserError              a request that cannot be served: unknown run id, resume of a finished run
    ├── StoreError             a run file that cannot be read or written (says which file and why)
    ├── ProviderError          a model provider failed; carries status, body, headers, retry_after
    │   ├── RetryableError     429, 408, 409, 5xx, timeouts, dropped connections
    │   │   └── IncompleteStreamError  a stream that stopped before its end marker (chars_shown)
    │   ├── AuthError          401/403: names the variable or config entry to fix
    │   ├── BadRequestError    400 and other requests the provider will never accept
    │   ├── ContextOverflowError  the prompt does not fit the model's window
    │   └── ResponseError      the provider answered something that is not its documented format
    └── RunCancelled           the run's cancellation signal fired (carries the reason)

A tool's failure is not in this tree: it becomes a tool result the model reads. Third-party
exceptions are translated where they happen, with ``raise ... from exc``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = [
    "AuthError",
    "BadRequestError",
    "ConfigError",
    "ContextOverflowError",
    "IncompleteStreamError",
    "ProviderError",
    "ResponseError",
    "RetryableError",
    "RunCancelled",
    "StoreError",
    "TetherError",
    "UserError",
    "classify_http_error",
]


class TetherError(Exception):
    """Base of every error tether raises on purpose."""


class ConfigError(TetherError):
    """The configuration cannot work; the message says what to set and where."""


class UserError(TetherError):
    """A request that cannot be served as asked (unknown run, nothing to resume, ...)."""


class StoreError(TetherError):
    """A persisted run or trace could not be read or written."""


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


class AuthError(ProviderError):
    """Credentials missing, wrong or expired. Never retried."""


class BadRequestError(ProviderError):
    """The provider refuses this request as malformed. Never retried."""


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
            continue  # an HTTP date: fall back to our own backoff
    return None


def classify_http_error(
    provider: str, status: int, body: str, headers: Mapping[str, str], *, key_hint: str = "the API key"
) -> ProviderError:
    """The one place an HTTP failure becomes a classified error the loop knows how to handle."""
    kwargs: dict[str, Any] = dict(provider=provider, status=status, body=body, headers=headers,
                                  retry_after=_retry_after(headers))
    lowered = body.lower()
    if status in (401, 403):
        return AuthError(f"{provider}: authentication failed (HTTP {status}). Check {key_hint}.", **kwargs)
    if status in (400, 413, 422) and any(marker in lowered for marker in _OVERFLOW_MARKERS):
        return ContextOverflowError(f"{provider}: the prompt exceeds the model's context window", **kwargs)
    if status in (408, 409, 429) or status >= 500:
        return RetryableError(f"{provider}: HTTP {status} {_short(body)}".rstrip(), **kwargs)
    return BadRequestError(f"{provider}: HTTP {status}: {_short(body)}", **kwargs)


def _short(body: str) -> str:
    return " ".join(body.split())[:300]
