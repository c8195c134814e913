"""How the loop survives provider trouble: classified retries, fallback, and the first-token
timeout. Nothing below this layer retries on its own.

* Retryable errors (rate limits, timeouts, dropped connections, 5xx, 529, a stream cut before any
  content) wait with exponential backoff and jitter, capped at ``max_delay_s``, honouring
  ``retry-after`` / ``retry-after-ms`` (up to ``max_retry_after_s``); every wait is a ``retry``
  event and ends at once on Stop.
* When a model's retries are spent, or its first token (or, once it streams, its next piece) takes
  longer than ``first_token_timeout_s``, the loop switches to the next fallback model — only while
  nothing of this turn has reached the user — and says so with a ``fallback`` event. The run stays
  on the fallback afterwards.
* Authentication and bad requests fail at once; a context overflow trims and retries once.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass

from tether.errors import ConfigError, ProviderError, RetryableError

__all__ = ["FirstTokenTimeout", "RetryPolicy", "check_first_token_timeout"]


class FirstTokenTimeout(RetryableError):
    """The model produced nothing (or nothing more) within the first-token timeout: a stall."""


@dataclass(frozen=True)
class RetryPolicy:
    """How a model call that failed in a way worth trying again (a rate limit, a timeout, a dropped
    connection, a 5xx) is tried again: ``max_attempts`` per model, the first included (1 retries
    nothing), waits growing from ``base_delay_s`` up to ``max_delay_s``, ± ``jitter`` of each; a
    server's ``retry-after`` is waited as asked up to ``max_retry_after_s`` (longer: the next
    fallback model, or the run fails). ``Agent(retry=RetryPolicy(...))``; each wait is a ``retry``
    event."""

    max_attempts: int = 4  # attempts per model, the first included
    base_delay_s: float = 0.5
    max_delay_s: float = 30.0
    jitter: float = 0.25  # ± this fraction of the computed delay
    # A server may ask for a longer wait than our backoff would choose; we wait as asked up to
    # this, and give up (or fall back) when it asks for more (a quota reset tomorrow, say).
    max_retry_after_s: float = 60.0

    def __post_init__(self) -> None:
        """A policy that is no policy (NaN compares false; a negative wait) is refused when it is
        made, saying which field, rather than failing a run at its first error."""
        if not (
            isinstance(self.max_attempts, int) and not isinstance(self.max_attempts, bool) and self.max_attempts >= 1
        ):
            raise ConfigError(
                f"RetryPolicy: max_attempts must be a whole number, 1 or more (got {self.max_attempts!r})"
            )
        for name, most in (
            ("base_delay_s", math.inf),
            ("max_delay_s", math.inf),
            ("jitter", 1.0),
            ("max_retry_after_s", math.inf),
        ):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int | float) or not 0 <= value <= most:
                span = "0 or more" if most == math.inf else f"from 0 to {most:g}"
                raise ConfigError(f"RetryPolicy: {name} must be a number, {span} (got {value!r})")

    def delay(self, attempt: int, error: ProviderError, rng: random.Random | None = None) -> float | None:
        """Seconds to wait before attempt ``attempt + 1``; None when the server asks for too long.
        A wait that is no number of seconds (NaN, negative; a provider of one's own may say so) is
        not asked for: the backoff decides."""
        asked = error.retry_after
        if asked is not None and asked >= 0:  # False for NaN
            return float(asked) if asked <= self.max_retry_after_s else None
        # The exponent stops growing long after the cap is reached: 2.0 ** 1024 is an OverflowError.
        base = min(self.max_delay_s, self.base_delay_s * 2.0 ** min(max(attempt - 1, 0), 64))
        spread = float((rng or random).uniform(-self.jitter, self.jitter))
        return max(0.0, min(self.max_delay_s, base * (1 + spread)))


def check_first_token_timeout(value: object, name: str = "first_token_timeout_s") -> None:
    """``Agent(first_token_timeout_s=...)`` is None or a number of seconds above 0: 0 or less gave
    up on every request at once (each charged its prompt) and failed the run "no first token within
    0 s"; NaN was no timeout at all; a string failed the run with a TypeError."""
    number = isinstance(value, int | float) and not isinstance(value, bool)
    if value is not None and not (number and value > 0):  # type: ignore[operator]
        raise ConfigError(f"{name} must be a number of seconds above 0 (got {value!r}); leave it None for no timeout")
