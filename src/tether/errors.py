"""Every exception tether raises, in one tree.

Misuse by the developer or the person at the terminal is kept apart from failures during a run::

    TetherError
    ├── ConfigError            the setup is wrong: unknown model, missing key, budget without a price
    ├── UserError              a request that cannot be served: unknown run id, resume of a finished run
    ├── StoreError             a run file that cannot be read or written (says which file and why)
    ├── ProviderError          a model provider failed; carries status, body, headers, retry_after
    │   ├── RetryableError     429, 408, 409, 5xx, timeouts, dropped connections
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

__all__ = [
    "AuthError",
    "BadRequestError",
    "ConfigError",
    "ContextOverflowError",
    "ProviderError",
    "ResponseError",
    "RetryableError",
    "RunCancelled",
    "StoreError",
    "TetherError",
    "UserError",
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


class AuthError(ProviderError):
    """Credentials missing, wrong or expired. Never retried."""


class BadRequestError(ProviderError):
    """The provider refuses this request as malformed. Never retried."""


class ContextOverflowError(ProviderError):
    """The prompt is longer than the model's context window."""


class ResponseError(ProviderError):
    """The provider's answer is not in its documented format."""
