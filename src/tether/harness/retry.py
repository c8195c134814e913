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

import random
from dataclasses import dataclass

from tether.errors import ProviderError, RetryableError

__all__ = ["FirstTokenTimeout", "RetryPolicy"]


class FirstTokenTimeout(RetryableError):
    """The model produced nothing (or nothing more) within the first-token timeout: a stall."""


@dataclass(frozen=True)
class RetryPolicy:
    max_attempts: int = 4  # attempts per model, the first included
    base_delay_s: float = 0.5
    max_delay_s: float = 30.0
    jitter: float = 0.25  # ± this fraction of the computed delay
    # A server may ask for a longer wait than our backoff would choose; we wait as asked up to
    # this, and give up (or fall back) when it asks for more (a quota reset tomorrow, say).
    max_retry_after_s: float = 60.0

    def delay(self, attempt: int, error: ProviderError, rng: random.Random | None = None) -> float | None:
        """Seconds to wait before attempt ``attempt + 1``; None when the server asks for too long."""
        if error.retry_after is not None:
            return error.retry_after if error.retry_after <= self.max_retry_after_s else None
        base = min(self.max_delay_s, self.base_delay_s * 2.0 ** (attempt - 1))
        spread = float((rng or random).uniform(-self.jitter, self.jitter))
        return max(0.0, min(self.max_delay_s, base * (1 + spread)))
