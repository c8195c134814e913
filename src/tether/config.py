"""Settings: where tether keeps its data, and the optional config file.

``$TETHER_HOME`` (default: the platform's user data directory) holds ``config.toml``, ``runs/``
and ``traces/``. Nothing here runs at import; reading happens when a command asks.

``config.toml``::

    model = "openai/gpt-4.1-mini"          # the default when no --model and no TETHER_MODEL
    fallback_models = ["anthropic/claude-haiku-4-5"]

    [models."openai/my-finetune"]           # price (dollars per million tokens) and window
    input = 0.5
    output = 2.0
    context_window = 128000

    [endpoints.local]                       # --model local/qwen2.5
    kind = "openai"                         # openai | anthropic
    base_url = "http://127.0.0.1:11434/v1"
    key_env = "LOCAL_API_KEY"               # or api_key = "...", or auth = "oauth" + token_url
    models = ["qwen2.5"]
"""

from __future__ import annotations

import os
import sys
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, ValidationError

from tether.errors import ConfigError
from tether.usage import ModelInfo, Price

__all__ = ["Endpoint", "Settings", "load_settings", "resolve_model", "tether_home"]

NO_MODEL_HELP = """\
No model is configured. Choose one of:
  - pass --model, e.g.  tether run --model openai/gpt-4.1-mini "..."  (needs OPENAI_API_KEY)
  - set TETHER_MODEL=openai/gpt-4.1-mini in the environment
  - add  model = "openai/gpt-4.1-mini"  to {config}
For a local OpenAI-compatible server set LLM_BASE_URL (e.g. http://127.0.0.1:11434/v1) and use
--model openai/<name>. To try tether with no key and no network, use the scripted model:
  tether run --model scripted/plan --cwd examples/workspace "Which file mentions a timeout?"
"""


def _platform_data_dir() -> Path:
    home = Path.home()
    if sys.platform == "win32":
        base = os.environ.get("LOCALAPPDATA") or str(home / "AppData" / "Local")
        return Path(base) / "tether"
    if sys.platform == "darwin":
        return home / "Library" / "Application Support" / "tether"
    return Path(os.environ.get("XDG_DATA_HOME") or home / ".local" / "share") / "tether"


def tether_home() -> Path:
    """``$TETHER_HOME`` or the platform's user data directory (not created here)."""
    env = os.environ.get("TETHER_HOME")
    return Path(env).expanduser() if env else _platform_data_dir()


class Endpoint(BaseModel):
    """A named model endpoint from ``[endpoints.NAME]``: ``--model NAME/<model>`` reaches it."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str
    kind: Literal["openai", "anthropic"] = "openai"
    base_url: str
    key_env: str | None = None
    api_key: str | None = None
    auth: Literal["key", "none", "oauth"] = "key"
    token_url: str | None = None
    client_id: str | None = None
    models: tuple[str, ...] = ()


@dataclass(frozen=True)
class Settings:
    home: Path
    model: str | None = None
    fallback_models: tuple[str, ...] = ()
    models: dict[str, ModelInfo] = field(default_factory=dict)
    endpoints: dict[str, Endpoint] = field(default_factory=dict)
    session_store: str | None = None  # jsonl[:DIR] | sqlite[:PATH] | memory
    tools: dict[str, Any] = field(default_factory=dict)  # the raw [tools] table (tether.tools.builtin reads it)

    @property
    def prices(self) -> dict[str, Price]:
        return {name: info.price for name, info in self.models.items() if info.price is not None}


def load_settings(home: Path | None = None) -> Settings:
    """Read ``config.toml`` under ``home``; a missing file is fine, a broken one is an error."""
    home = home or tether_home()
    path = home / "config.toml"
    if not path.exists():
        return Settings(home=home)
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise ConfigError(f"cannot read {path}: {exc}. Fix or remove the file.") from exc
    models: dict[str, ModelInfo] = {}
    for table in ("prices", "models"):
        for name, entry in (data.get(table) or {}).items():
            models[name] = _model_entry(path, table, name, entry)
    endpoints: dict[str, Endpoint] = {}
    for name, entry in (data.get("endpoints") or {}).items():
        try:
            endpoints[name] = Endpoint.model_validate({**entry, "name": name})
        except (ValidationError, TypeError) as exc:
            raise ConfigError(f"{path}: [endpoints.{name}] is not valid: {exc}") from exc
    model = data.get("model")
    if model is not None and not isinstance(model, str):
        raise ConfigError(f"{path}: 'model' must be a string like \"openai/gpt-4.1-mini\"")
    fallbacks = data.get("fallback_models") or []
    if not isinstance(fallbacks, list) or not all(isinstance(m, str) for m in fallbacks):
        raise ConfigError(f"{path}: 'fallback_models' must be a list of model strings")
    store = data.get("session_store")
    if store is not None and not isinstance(store, str):
        raise ConfigError(f"{path}: 'session_store' must be a string like \"sqlite\" or \"jsonl:/path\"")
    tools = data.get("tools") or {}
    if not isinstance(tools, dict):
        raise ConfigError(f"{path}: [tools] must be a table")
    return Settings(home=home, model=model, fallback_models=tuple(fallbacks), models=models, endpoints=endpoints,
                    session_store=store, tools=tools)


def _model_entry(path: Path, table: str, name: str, entry: Any) -> ModelInfo:
    if not isinstance(entry, dict):
        raise ConfigError(f"{path}: [{table}.{name!r}] must be a table")
    window = entry.get("context_window")
    price_fields = {k: v for k, v in entry.items() if k != "context_window"}
    try:
        price = Price.model_validate(price_fields) if price_fields else None
    except ValidationError as exc:
        raise ConfigError(
            f"{path}: [{table}.{name!r}] needs numbers 'input' and 'output' (dollars per million "
            f"tokens), optionally 'cached_input', 'cache_write', 'context_window': {exc}"
        ) from exc
    if window is not None and (not isinstance(window, int) or window <= 0):
        raise ConfigError(f"{path}: [{table}.{name!r}] context_window must be a positive integer")
    return ModelInfo(price=price, context_window=window)


def resolve_model(explicit: str | None, settings: Settings) -> str:
    """``--model``, else ``TETHER_MODEL``, else the config file's default, else a helpful error."""
    model = explicit or os.environ.get("TETHER_MODEL") or settings.model
    if not model:
        raise ConfigError(NO_MODEL_HELP.format(config=settings.home / "config.toml"))
    return model
