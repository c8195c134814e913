"""Token usage, prices and cost.

Prices are dollars per million tokens. The catalog covers the scripted model and a few well-known
models; the config file (``[prices."provider/model"]``) overrides or extends it. An unknown price is
``None``, never zero: a budget over an unknown price is a configuration error (law 6).
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

__all__ = ["Price", "Usage", "cost_usd", "lookup_price"]


class Usage(BaseModel):
    """Tokens one model call (or a whole run) consumed."""

    model_config = ConfigDict(frozen=True)

    prompt_tokens: int = 0
    completion_tokens: int = 0
    cached_tokens: int = 0
    # True when the provider sent no usage and tether counted the tokens itself.
    estimated: bool = False

    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            prompt_tokens=self.prompt_tokens + other.prompt_tokens,
            completion_tokens=self.completion_tokens + other.completion_tokens,
            cached_tokens=self.cached_tokens + other.cached_tokens,
            estimated=self.estimated or other.estimated,
        )


class Price(BaseModel):
    """Dollars per million tokens."""

    model_config = ConfigDict(frozen=True)

    input: float
    output: float
    cached_input: float | None = None

    def cost(self, usage: Usage) -> float:
        cached = min(usage.cached_tokens, usage.prompt_tokens)
        cached_rate = self.input if self.cached_input is None else self.cached_input
        return (
            (usage.prompt_tokens - cached) * self.input
            + cached * cached_rate
            + usage.completion_tokens * self.output
        ) / 1e6

    def worst_case(self, prompt_tokens: int, max_tokens: int) -> float:
        return (prompt_tokens * self.input + max_tokens * self.output) / 1e6

    def affordable_output_tokens(self, prompt_tokens: int, remaining_usd: float) -> int:
        """How many output tokens ``remaining_usd`` pays for after a prompt of that size."""
        left = remaining_usd * 1e6 - prompt_tokens * self.input
        if left <= 0:
            return 0
        return int(left // self.output) if self.output > 0 else 1 << 30


# The scripted model is priced as the reference prices its model: $2.00 in, $12.00 out.
_CATALOG: dict[str, Price] = {
    "scripted": Price(input=2.00, output=12.00),
    "openai/gpt-4.1": Price(input=2.00, output=8.00, cached_input=0.50),
    "openai/gpt-4.1-mini": Price(input=0.40, output=1.60, cached_input=0.10),
    "openai/gpt-4.1-nano": Price(input=0.10, output=0.40, cached_input=0.025),
    "openai/gpt-4o": Price(input=2.50, output=10.00, cached_input=1.25),
    "openai/gpt-4o-mini": Price(input=0.15, output=0.60, cached_input=0.075),
    "openai/o3": Price(input=2.00, output=8.00, cached_input=0.50),
    "openai/o4-mini": Price(input=1.10, output=4.40, cached_input=0.275),
    "anthropic/claude-sonnet-4-5": Price(input=3.00, output=15.00, cached_input=0.30),
    "anthropic/claude-haiku-4-5": Price(input=1.00, output=5.00, cached_input=0.10),
    "anthropic/claude-opus-4-1": Price(input=15.00, output=75.00, cached_input=1.50),
}


def lookup_price(model: str, overrides: dict[str, Price] | None = None) -> Price | None:
    """The price of ``provider/model``: config overrides first, then the catalog."""
    for table in (overrides or {}, _CATALOG):
        if model in table:
            return table[model]
    provider = model.split("/", 1)[0]
    if provider == "scripted":
        return _CATALOG["scripted"]
    return None


def cost_usd(usage: Usage, price: Price | None) -> float:
    """Cost of ``usage``; zero only when no price is known (callers with a budget refuse that)."""
    return price.cost(usage) if price is not None else 0.0
