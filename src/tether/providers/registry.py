"""Model strings → providers. ``provider/model`` splits at the first ``/``; a bare name maps by
its prefix (``gpt-``, ``o1``, ``o3``, ``o4``, ``chatgpt-`` → openai; ``claude`` → anthropic)."""

from __future__ import annotations

from dataclasses import dataclass

from tether.errors import ConfigError
from tether.providers.base import Provider

__all__ = ["ResolvedModel", "canonical_model", "resolve_provider"]

_PREFIXES = (("gpt-", "openai"), ("o1", "openai"), ("o3", "openai"), ("o4", "openai"),
             ("chatgpt-", "openai"), ("claude", "anthropic"))


@dataclass(frozen=True)
class ResolvedModel:
    provider: Provider
    model_id: str  # what the provider's API is sent
    name: str  # the canonical ``provider/model`` string, used for prices and the transcript


def canonical_model(model: str) -> str:
    """``gpt-4.1`` → ``openai/gpt-4.1``; ``provider/model`` is returned as it is."""
    if "/" in model:
        return model
    for prefix, provider in _PREFIXES:
        if model.startswith(prefix):
            return f"{provider}/{model}"
    raise ConfigError(
        f"cannot tell which provider serves {model!r}: write it as provider/model, "
        "e.g. openai/gpt-4.1-mini or scripted/plan"
    )


def resolve_provider(model: str) -> ResolvedModel:
    name = canonical_model(model)
    provider, model_id = name.split("/", 1)
    if not model_id:
        raise ConfigError(f"{model!r} names no model after the provider")
    if provider == "scripted":
        from tether.providers.scripted import ScriptedModel

        return ResolvedModel(ScriptedModel(model_id), model_id, name)
    if provider == "openai":
        from tether.providers.openai_chat import OpenAIChatProvider

        return ResolvedModel(OpenAIChatProvider(), model_id, name)
    raise ConfigError(
        f"unknown provider {provider!r} in {model!r}. Available: openai (any OpenAI-compatible "
        "server via LLM_BASE_URL), scripted (offline test model)."
    )
