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


# --- one agent, every door ------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["sup port", "-x", "café", "a" * 65, "a/b"])
def test_an_agent_name_a_server_cannot_offer_is_refused_by_every_command_not_only_by_serve(
    tmp_path: Path, name: str
) -> None:
    """docs/cli.md: an [agents.NAME] table defines one agent for all five doors. A name with a space
    (or a leading dash, or 65 letters) passed `tether config check` and ran with `tether run
    --agent`, while `tether serve`, `mcp serve` and `tether worker` refused the whole file at start."""
    from tether.config import load_settings
    from tether.errors import ConfigError

    write(tmp_path, f'[agents.{json.dumps(name)}]\nmodel = "scripted/hello"\n')
    with pytest.raises(ConfigError) as caught:
        load_settings(tmp_path)
    message = str(caught.value)
    assert message.startswith(f"{tmp_path / 'config.toml'}: [agents.") and name in message, message
    assert "letters, digits" in message and "\n" not in message


def test_an_agent_name_every_door_can_offer_still_loads(tmp_path: Path) -> None:
    from tether.config import load_settings

    write(
        tmp_path, '[agents."support-2.v1_x"]\nmodel = "scripted/hello"\n[serve.agents.old]\nmodel = "scripted/hello"\n'
    )
    assert sorted(load_settings(tmp_path).agents) == ["old", "support-2.v1_x"]


def test_config_show_redacts_a_header_given_to_an_mcp_server_as_an_argument() -> None:
    """An HTTP-only MCP server is reached through a bridge whose documented usage passes the token
    as a header argument: `args = ["mcp-remote", URL, "--header", "Authorization: Bearer TOKEN"]`.
    docs/cli.md: config show redacts a token in an MCP server's args. Before: printed whole."""
    args = ["mcp-remote", "https://h.example/mcp", "--header", f"Authorization: Bearer {SECRET}"]
    args += ["--header", f"X-Api-Key:{SECRET}", "--header", "Accept: text/event-stream", "note: keep"]
    shown = redacted({"mcp": {"remote": {"command": "npx", "args": args}}})["mcp"]["remote"]["args"]
    assert shown == [
        "mcp-remote",
        "https://h.example/mcp",
        "--header",
        "Authorization: <redacted>",
        "--header",
        "X-Api-Key: <redacted>",
        "--header",
        "Accept: text/event-stream",
        "note: keep",
    ]
