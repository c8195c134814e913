"""config.toml, its secrets and the assembly, attacked from outside (a helper's fourth round)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tether.cli.config import redacted

SECRET = "sk-SECRET0123456789abcdef"


def write(home: Path, text: str) -> Path:
    home.mkdir(parents=True, exist_ok=True)
    path = home / "config.toml"
    path.write_text(text, encoding="utf-8")
    return path


@pytest.mark.parametrize(
    "name",
    ["apiKey", "apikey", "x-api-key", "accessToken", "access_token", "authToken", "clientSecret", "accesskey"],
)
def test_config_show_redacts_a_url_parameter_or_an_option_whose_name_is_written_without_an_underscore(
    name: str,
) -> None:
    """docs/cli.md: config show redacts such a parameter in a URL's query and the value of an MCP
    server's secret option. Many services name it `apiKey`, `accessToken`, `clientSecret` (camelCase)
    or `apikey`: before, only `api_key`-like spellings were hidden and these were printed."""
    config = {
        "mcp": {
            "web": {"url": f"https://h.example/mcp?team=docs&{name}={SECRET}&x=1"},
            "cli": {"command": "srv", "args": [f"--{name}", SECRET, f"--{name}={SECRET}", "--verbose", "docs"]},
        }
    }
    shown = redacted(config)
    assert SECRET not in json.dumps(shown), shown
    assert shown["mcp"]["web"]["url"] == f"https://h.example/mcp?team=docs&{name}=<redacted>&x=1"
    assert shown["mcp"]["cli"]["args"] == [f"--{name}", "<redacted>", f"--{name}=<redacted>", "--verbose", "docs"]


@pytest.mark.parametrize("name", ["monkey", "tokens_used", "keyboard", "key_env", "team"])
def test_config_show_keeps_a_parameter_that_only_looks_like_a_secret(name: str) -> None:
    shown = redacted({"mcp": {"web": {"url": f"https://h.example/mcp?{name}=visible"}}})
    assert shown["mcp"]["web"]["url"] == f"https://h.example/mcp?{name}=visible"
