"""Token usage, prices and cost.

Prices are dollars per million tokens. The catalog covers the scripted model and a few well-known
models; the config file (``[prices."provider/model"]``) overrides or extends it. An unknown price is
``None``, never zero: a budget over an unknown price is a configuration error (law 6).
"""

from __future__ import annotations

import re

from pydantic import BaseModel, ConfigDict, Field

__all__ = ["CATALOG", "ModelInfo", "Price", "Usage", "cost_usd", "lookup_price", "model_info", "unknown_price"]


class Usage(BaseModel):
    """Tokens one model call (or a whole run) consumed."""

    model_config = ConfigDict(frozen=True, defer_build=True)

    prompt_tokens: int = 0
    completion_tokens: int = 0
    cached_tokens: int = 0  # prompt tokens read from the provider's cache
    cache_write_tokens: int = 0  # prompt tokens written to the cache (Anthropic bills them higher)
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
            cache_write_tokens=self.cache_write_tokens + other.cache_write_tokens,
            estimated=self.estimated or other.estimated,
        )


class Price(BaseModel):
    """Dollars per million tokens (finite, zero or more)."""

    model_config = ConfigDict(frozen=True, defer_build=True)

    # A rate is a finite number of dollars, zero or more: a negative one would pay the budget back.
    input: float = Field(ge=0, allow_inf_nan=False)
    output: float = Field(ge=0, allow_inf_nan=False)
    cached_input: float | None = Field(default=None, ge=0, allow_inf_nan=False)
    cache_write: float | None = Field(default=None, ge=0, allow_inf_nan=False)

    def cost(self, usage: Usage) -> float:
        cached = min(usage.cached_tokens, usage.prompt_tokens)
        written = min(usage.cache_write_tokens, usage.prompt_tokens - cached)
        cached_rate = self.input if self.cached_input is None else self.cached_input
        write_rate = self.input if self.cache_write is None else self.cache_write
        return (
            (usage.prompt_tokens - cached - written) * self.input
            + cached * cached_rate
            + written * write_rate
            + usage.completion_tokens * self.output
        ) / 1e6

    @property
    def dearest_input(self) -> float:
        """The most one prompt token can cost: the input rate, or the cache-write rate when it is
        higher (Anthropic bills a prompt written to the cache at 1.25 times the input rate, and
        tether's cache breakpoints write a first request's whole prompt), or the cached rate when a
        rate table makes that the highest (a cache-write price written as ``cached_input``): the
        provider decides which of a prompt's tokens are read from its cache, not tether."""
        return max(self.input, self.cache_write or 0.0, self.cached_input or 0.0)

    def worst_case(self, prompt_tokens: int, max_tokens: int) -> float:
        return (prompt_tokens * self.dearest_input + max_tokens * self.output) / 1e6

    def affordable_output_tokens(self, prompt_tokens: int, remaining_usd: float) -> int:
        """How many output tokens ``remaining_usd`` pays for after a prompt of that size, the
        prompt at its dearest (written to the cache), so that a call it allows stays inside."""
        left = remaining_usd * 1e6 - prompt_tokens * self.dearest_input
        if left <= 0:
            return 0
        # A budget meant as "no limit" (1e308, finite and allowed) is no count: past a float's range
        # its floor division is NaN, which ended the run with an unexpected error.
        tokens = left // self.output if self.output > 0 and left < float("inf") else float("inf")
        return int(tokens) if tokens < 1 << 30 else 1 << 30


class ModelInfo(BaseModel):
    """What tether knows about a model: its price and its context window (tokens)."""

    model_config = ConfigDict(frozen=True, defer_build=True)

    price: Price | None = None
    context_window: int | None = None


def _m(inp: float, out: float, cached: float | None, window: int, write: float | None = None) -> ModelInfo:
    # Trusted constants: constructed without validation, so importing the catalog builds no validator.
    price = Price.model_construct(input=inp, output=out, cached_input=cached, cache_write=write)
    return ModelInfo.model_construct(price=price, context_window=window)


# The scripted model is priced as the reference prices its model: $2.00 in, $12.00 out.
CATALOG: dict[str, ModelInfo] = {
    "scripted": ModelInfo.model_construct(
        price=Price.model_construct(input=2.00, output=12.00), context_window=128_000
    ),
    "openai/gpt-4.1": _m(2.00, 8.00, 0.50, 1_047_576),
    "openai/gpt-4.1-mini": _m(0.40, 1.60, 0.10, 1_047_576),
    "openai/gpt-4.1-nano": _m(0.10, 0.40, 0.025, 1_047_576),
    "openai/gpt-4o": _m(2.50, 10.00, 1.25, 128_000),
    "openai/gpt-4o-mini": _m(0.15, 0.60, 0.075, 128_000),
    "openai/o3": _m(2.00, 8.00, 0.50, 200_000),
    "openai/o4-mini": _m(1.10, 4.40, 0.275, 200_000),
    "anthropic/claude-sonnet-4-5": _m(3.00, 15.00, 0.30, 200_000, 3.75),
    "anthropic/claude-haiku-4-5": _m(1.00, 5.00, 0.10, 200_000, 1.25),
    "anthropic/claude-opus-4-1": _m(15.00, 75.00, 1.50, 200_000, 18.75),
}


def model_info(model: str, overrides: dict[str, ModelInfo] | None = None) -> ModelInfo:
    """Catalog entry for ``provider/model``, with the config file's entry laid over it."""
    base = CATALOG.get(model) or (CATALOG["scripted"] if model.startswith("scripted/") else _snapshot_of(model))
    over = (overrides or {}).get(model)
    if over is None:
        return base
    return ModelInfo(price=over.price or base.price, context_window=over.context_window or base.context_window)


# A model's dated snapshot: claude-sonnet-4-5-20250929, gpt-4o-2024-08-06.
_SNAPSHOT_DATE = re.compile(r"-(?:\d{8}|\d{4}-\d{2}-\d{2})$")


def _snapshot_of(model: str) -> ModelInfo:
    """A dated snapshot of a catalog model has its model's context window (without it, compaction
    never ran before the window overflowed), but not its price: snapshots of one model have been
    priced differently (gpt-4o-2024-05-13 costs twice what gpt-4o does), so a budget still asks for it."""
    family = CATALOG.get(_SNAPSHOT_DATE.sub("", model))
    if family is None:
        return ModelInfo()
    return ModelInfo.model_construct(price=None, context_window=family.context_window)


def lookup_price(model: str, overrides: dict[str, Price] | None = None) -> Price | None:
    """The price of ``provider/model``: config overrides first, then the catalog."""
    if overrides and model in overrides:
        return overrides[model]
    return model_info(model).price


def cost_usd(usage: Usage, price: Price | None) -> float:
    """Cost of ``usage``; zero only when no price is known (callers with a budget refuse that)."""
    return price.cost(usage) if price is not None else 0.0


def unknown_price(name: str, *, primary: bool, fallback: bool) -> str:
    """Why a budget cannot be kept with ``name`` (no price known), and the fix that works for it:
    ``Agent(price=...)`` prices the primary model only, so any other model's is given in
    ``Agent(prices=...)`` (told to pass ``price=``, a person who had passed it got the same error
    again); a name one typo away from a model the catalog prices is named."""
    import difflib

    role = "the fallback model " if fallback else ""
    code = (
        "Agent(price=Price(input=..., output=...))"
        if primary
        else f"Agent(prices={{{name!r}: Price(input=..., output=...)}})"
    )
    near = difflib.get_close_matches(name, [m for m in CATALOG if "/" in m], n=1, cutoff=0.9)
    guess = f" (did you mean {near[0]}? tether knows its price)" if near else ""
    return (
        f"max_budget_usd is set but the price of {role}{name} is unknown{guess}: add it under "
        f'[models."{name}"] in config.toml (input/output dollars per million tokens) or pass {code}'
    )
