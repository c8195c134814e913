"""Model strings → providers.

``provider/model`` splits at the first ``/``. A bare name maps by its prefix (``gpt-``, ``o1``,
``o3``, ``o4``, ``chatgpt-``, ``text-`` → openai; ``claude`` → anthropic). ``provider`` is one of
the built-ins (``openai``, ``anthropic``, ``scripted``) or a named endpoint from ``config.toml``.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

from tether.errors import ConfigError
from tether.providers.base import Provider

__all__ = [
    "BUILTIN_PROVIDERS",
    "ResolvedModel",
    "canonical_model",
    "configured_models",
    "instance_model",
    "resolve_provider",
]

_PREFIXES = (
    ("gpt-", "openai"),
    ("o1", "openai"),
    ("o3", "openai"),
    ("o4", "openai"),
    ("chatgpt-", "openai"),
    ("text-", "openai"),
    ("claude", "anthropic"),
)
BUILTIN_PROVIDERS = ("openai", "anthropic", "scripted")


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
        "e.g. openai/gpt-4.1-mini, anthropic/claude-sonnet-4-5 or scripted/plan"
    )


def instance_model(provider: Any) -> tuple[str, str]:
    """The model id a :class:`Provider` given as an instance is asked for (its ``model_id``, as
    ``OpenAIChatProvider(..., model_id="gpt-4.1-mini")`` sets it; without one, its own name) and
    its ``provider/model`` name."""
    model_id = str(getattr(provider, "model_id", None) or provider.name)
    return model_id, f"{provider.name}/{model_id}"


def resolve_provider(model: str, settings: Any = None) -> ResolvedModel:
    """Build the provider for ``model``. ``settings`` (a :class:`tether.config.Settings`) supplies
    named endpoints; without it only the built-ins resolve."""
    name = canonical_model(model)
    provider, model_id = name.split("/", 1)
    if not model_id:
        raise ConfigError(f"{model!r} names no model after the provider")
    endpoints = getattr(settings, "endpoints", {}) or {}
    if provider in endpoints:
        return ResolvedModel(_endpoint_provider(endpoints[provider], settings), model_id, name)
    if provider == "scripted":
        from tether.providers.scripted import ScriptedModel

        return ResolvedModel(ScriptedModel(model_id), model_id, name)
    if provider == "openai":
        from tether.providers.openai_chat import OpenAIChatProvider

        return ResolvedModel(OpenAIChatProvider(), model_id, name)
    if provider == "anthropic":
        from tether.providers.anthropic import AnthropicProvider

        return ResolvedModel(AnthropicProvider(), model_id, name)
    import difflib

    names = [*BUILTIN_PROVIDERS, *endpoints]
    near = difflib.get_close_matches(provider, names, n=1, cutoff=0.6)  # opnai, anthropc
    meant = f" Did you mean {near[0]}/{model_id}?" if near else ""
    raise ConfigError(
        f"unknown provider {provider!r} in {model!r}.{meant} Known: {', '.join(names)}. Add an "
        f"[endpoints.{provider}] table to config.toml to reach another OpenAI- or Anthropic-compatible server."
    )


def _endpoint_provider(endpoint: Any, settings: Any) -> Provider:
    from tether.providers.auth import ApiKey, Credentials, NoAuth, OAuthCredentials

    credentials: Credentials
    where = f"[endpoints.{endpoint.name}] in config.toml"
    header, scheme = ("x-api-key", "") if endpoint.kind == "anthropic" else ("authorization", "Bearer")
    if endpoint.auth == "oauth":
        if not endpoint.token_url:
            raise ConfigError(f'{where}: auth = "oauth" needs token_url')
        credentials = OAuthCredentials(
            settings.home / "auth" / f"{endpoint.name}.json", endpoint.token_url, endpoint.client_id
        )
    elif endpoint.auth == "none":
        credentials = NoAuth(f'whether the server needs a key: none was sent (auth = "none" in {where})')
    elif endpoint.key_env:
        key = os.environ.get(endpoint.key_env)
        if not key:
            raise ConfigError(f"{endpoint.key_env} is not set (named by key_env in {where})")
        credentials = ApiKey(key, hint=f"the key in {endpoint.key_env}", header=header, scheme=scheme)
    elif endpoint.api_key:
        credentials = ApiKey(endpoint.api_key, hint=f"api_key in {where}", header=header, scheme=scheme)
    else:
        credentials = NoAuth(f"whether the server needs a key: none was sent (no key_env or api_key in {where})")
    if endpoint.kind == "anthropic":
        from tether.providers.anthropic import AnthropicProvider

        return AnthropicProvider(endpoint.base_url, credentials=credentials, name=endpoint.name)
    from tether.providers.openai_chat import OpenAIChatProvider

    return OpenAIChatProvider(endpoint.base_url, credentials=credentials, name=endpoint.name, send_cache_key=False)


def configured_models(settings: Any) -> list[str]:
    """Model strings a person can use here: configured endpoints' models, config defaults, the
    catalog of the built-in providers whose credentials are present, and the scripted scenarios."""
    from tether.providers.scripted import SCENARIOS
    from tether.usage import CATALOG

    names: list[str] = []
    for endpoint in (getattr(settings, "endpoints", {}) or {}).values():
        names += [f"{endpoint.name}/{m}" for m in endpoint.models]
    for m in [getattr(settings, "model", None), *getattr(settings, "fallback_models", ())]:
        if m:
            names.append(canonical_model(m))
    names += [m for m in CATALOG if "/" in m]
    names += [f"scripted/{s}" for s in SCENARIOS]
    return list(dict.fromkeys(names))
