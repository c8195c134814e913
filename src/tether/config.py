"""Settings: where tether keeps its data, and the optional config file.

``$TETHER_HOME`` (default: the platform's user data directory) holds ``config.toml``, ``runs/``
and ``traces/``. Nothing here runs at import; reading happens when a command asks.

``config.toml``::

    model = "openai/gpt-4.1-mini"          # the default when no --model and no TETHER_MODEL

    [prices."openai/my-finetune"]           # dollars per million tokens
    input = 0.5
    output = 2.0
"""

from __future__ import annotations

import os
import sys
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

from tether.errors import ConfigError
from tether.usage import Price

__all__ = ["Settings", "load_settings", "resolve_model", "tether_home"]

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


@dataclass(frozen=True)
class Settings:
    home: Path
    model: str | None = None
    prices: dict[str, Price] = field(default_factory=dict)


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
    prices: dict[str, Price] = {}
    for name, entry in (data.get("prices") or {}).items():
        try:
            prices[name] = Price.model_validate(entry)
        except ValueError as exc:
            raise ConfigError(
                f"{path}: [prices.{name!r}] needs numbers 'input' and 'output' "
                f"(dollars per million tokens): {exc}"
            ) from exc
    model = data.get("model")
    if model is not None and not isinstance(model, str):
        raise ConfigError(f"{path}: 'model' must be a string like \"openai/gpt-4.1-mini\"")
    return Settings(home=home, model=model, prices=prices)


def resolve_model(explicit: str | None, settings: Settings) -> str:
    """``--model``, else ``TETHER_MODEL``, else the config file's default, else a helpful error."""
    model = explicit or os.environ.get("TETHER_MODEL") or settings.model
    if not model:
        raise ConfigError(NO_MODEL_HELP.format(config=settings.home / "config.toml"))
    return model
