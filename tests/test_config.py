"""config.toml (src/tether/config.py): every section checked with its types before use, and
every mistake said in one line naming the file, the key, what is wrong and the fix."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

from tether.config import load_settings
from tether.errors import ConfigError

# (config.toml, what the one line must say after "<path>: ")
MISTAKES = [
    (
        '[tools.shell]\napproval = "no"\n',
        '[tools.shell] approval must be true or false (no quotes), not "no" (write approval = false)',
    ),
    ("[tools.shell]\ntimeout_s = -5\n", "[tools.shell] timeout_s must be greater than 0, not -5"),
    ("[tools.shell]\ntimeout_s = inf\n", "[tools.shell] timeout_s must be a finite number, not inf"),
    ('[tools.shell]\ntimeout_s = "30"\n', '[tools.shell] timeout_s must be a number, not "30" (write timeout_s = 30'),
    ("[tools.shell]\noutput_cap_bytes = 1.5\n", "[tools.shell] output_cap_bytes must be a whole number, not 1.5"),
    (  # an environment's values may be secrets: never shown (tether config show redacts them too)
        "[tools.shell]\nenv = { CI = 1 }\n",
        "[tools.shell] env.CI must be a string in quotes (the value given is not shown: it may be a secret)",
    ),
    ('[tools.shell]\nblock = "git"\n', "[tools.shell] block must be a list"),
    ("[tools.shel]\napproval = false\n", "[tools.shel] is not a known table (did you mean [tools.shell]?)"),
    ("[tools.shell]\napprove = false\n", "approve is not a known setting in [tools.shell] (did you mean approval?)"),
    ("[tools.files]\nwrite_approval = 1\n", "[tools.files] write_approval must be true or false"),
    ('[tools.web]\nallow = ["nonsense"]\n', '[tools.web] allow[0] must be "host:port" or a network'),
    ("[tools.web]\nmax_bytes = 0\n", "[tools.web] max_bytes must be greater than 0, not 0"),
    (
        '[tools.web_search]\nkind = "google"\nurl = "https://s"\n',
        '[tools.web_search] kind must be "searxng", not "google"',
    ),
    ('[tools.web_search]\nkind = "searxng"\n', "[tools.web_search] needs url"),
    ("[tools]\nshell = 3\n", "[tools.shell] must be a table, not 3"),
    ('modle = "openai/gpt-4.1"\n', "modle is not a known setting at the top of the file (did you mean model?)"),
    ("model = 3\n", "model must be a string in quotes, not 3"),
    ('fallback_models = "openai/x"\n', "fallback_models must be a list"),
    (
        'session_store = "postgres"\n',
        'session_store must be jsonl, jsonl:DIR, sqlite, sqlite:PATH or memory, not "postgres"',
    ),
    ('[endpoint.local]\nbase_url = "http://h"\n', "[endpoint] is not a known table (did you mean [endpoints]?)"),
    (
        '[endpoints.x]\nkind = "cohere"\nbase_url = "http://h"\n',
        '[endpoints.x] kind must be "openai" or "anthropic", not "cohere"',
    ),
    ('[endpoints.x]\nbase_url = "localhost:8080"\n', "[endpoints.x] base_url must be an http:// or https:// URL"),
    ('[endpoints.x]\nkind = "openai"\n', "[endpoints.x] needs base_url"),
    ('[endpoints.x]\nbase_url = "http://h"\nauth = "oauth"\n', '[endpoints.x] auth = "oauth" needs token_url'),
    (
        '[endpoints.x]\nbase_url = "http://h"\nmodle = ["a"]\n',
        "modle is not a known setting in [endpoints.x] (did you mean models?)",
    ),
    ('[models."a/b"]\ninput = "cheap"\noutput = 1\n', '[models."a/b"] input must be a number, not "cheap"'),
    ('[models."a/b"]\ninput = -1\noutput = 1\n', '[models."a/b"] input must be 0 or more, not -1'),
    ('[models."a/b"]\ninput = 1\n', '[models."a/b"] needs both input and output'),
    ('[models."a/b"]\ncontext_window = 0\n', '[models."a/b"] context_window must be greater than 0'),
    ('[models."a/b"]\ninput = 1\noutput = 2\nwindow = 8\n', 'window is not a known setting in [models."a/b"]'),
    ('[models."gpt-x"]\ninput = 1\noutput = 2\n', '[models.gpt-x] names no provider: write [models."openai/gpt-x"]'),
    ('[prices."a/b"]\ninput = true\noutput = 2\n', '[prices."a/b"] input must be a number, not true'),
]


def write(home: Path, text: str) -> Path:
    home.mkdir(parents=True, exist_ok=True)
    path = home / "config.toml"
    path.write_text(text)
    return path


@pytest.mark.parametrize(("text", "message"), MISTAKES, ids=[m[:40] for _, m in MISTAKES])
def test_each_mistake_is_one_line_with_the_file_the_key_and_the_fix(text: str, message: str, tmp_path: Path) -> None:
    path = write(tmp_path, text)
    with pytest.raises(ConfigError) as caught:
        load_settings(tmp_path)
    said = str(caught.value)
    assert said.startswith(f"{path}: ") and message in said, said
    assert "\n" not in said and "pydantic" not in said and "For further information" not in said


def test_a_full_valid_file_loads(tmp_path: Path) -> None:
    write(
        tmp_path,
        """\
model = "local/qwen2.5"
fallback_models = ["anthropic/claude-haiku-4-5"]
session_store = "sqlite"

[endpoints.local]
kind = "openai"
base_url = "http://127.0.0.1:11434/v1"
models = ["qwen2.5"]

[endpoints.corp]
kind = "anthropic"
base_url = "https://llm.example.com"
auth = "oauth"
token_url = "https://auth.example.com/token"
client_id = "tether"

[models."local/qwen2.5"]
input = 0
output = 0.0
context_window = 32768

[models."openai/big"]
context_window = 1000000

[tools.shell]
approval = false
timeout_s = 30
output_cap_bytes = 1000000
block = ["git"]
unblock = ["crontab"]
env = { CI = "1" }

[tools.files]
write_approval = true

[tools.web]
allow = ["127.0.0.1:8080", "10.20.0.0/16", "::1"]
max_bytes = 2000000
max_chars = 100000

[tools.web_search]
kind = "searxng"
url = "https://search.example.com"
""",
    )
    settings = load_settings(tmp_path)
    assert settings.model == "local/qwen2.5" and settings.session_store == "sqlite"
    assert settings.endpoints["local"].models == ("qwen2.5",) and settings.endpoints["corp"].auth == "oauth"
    assert settings.prices["local/qwen2.5"].input == 0.0 and "openai/big" not in settings.prices
    assert settings.models["openai/big"].context_window == 1_000_000
    assert settings.tools.shell is not None and settings.tools.shell.approval is False
    assert settings.tools.web is not None and settings.tools.web.allow == ["127.0.0.1:8080", "10.20.0.0/16", "::1"]


def test_the_command_refuses_a_bad_config_in_one_line(tmp_path: Path) -> None:
    import os

    path = write(tmp_path, "[tools.shel]\napproval = false\n")
    out = subprocess.run(
        ["tether", "run", "--model", "scripted/hello", "hi"],
        env={**os.environ, "TETHER_HOME": str(tmp_path)},
        capture_output=True,
        text=True,
        timeout=60,
        stdin=subprocess.DEVNULL,
    )
    assert out.returncode == 2
    assert out.stderr == f"tether: {path}: [tools.shel] is not a known table (did you mean [tools.shell]?)\n"
    assert not (tmp_path / "runs").exists()


def test_tool_settings_from_python_are_checked_like_the_config_file() -> None:
    from tether.errors import ConfigError
    from tether.tools.builtin import tool_settings

    for bad, words in (
        ({"shell": {"approval": "no"}}, "true or false"),
        ({"shell": {"timeout_s": -5}}, "greater than 0"),
        ({"shel": {}}, "did you mean [tools.shell]"),
    ):
        with pytest.raises(ConfigError, match=re.escape(words)):
            tool_settings(bad)
    settings = tool_settings({"shell": {"approval": False, "timeout_s": 60, "namespaces": False}})
    assert settings.shell.require_approval is False and settings.shell.timeout_s == 60.0
    assert settings.shell.namespaces is False


def test_a_named_pipe_at_config_toml_is_a_clear_error_at_once_and_a_linked_one_is_read(tmp_path: Path) -> None:
    """Every command reads config.toml first: a pipe there would hold each of them (the server
    too) waiting for a writer. A link is a dotfiles setup, and is followed."""
    import os
    import threading

    from tether.config import load_settings
    from tether.errors import ConfigError

    home = tmp_path / "home"
    home.mkdir()
    os.mkfifo(home / "config.toml")
    out: list[BaseException] = []

    def load() -> None:
        try:
            load_settings(home)
        except BaseException as exc:
            out.append(exc)

    thread = threading.Thread(target=load, daemon=True)
    thread.start()
    thread.join(5)
    assert not thread.is_alive(), "load_settings waited on a named pipe"
    assert isinstance(out[0], ConfigError) and "config.toml" in str(out[0]) and "not a regular file" in str(out[0])
    (home / "config.toml").unlink()
    dotfiles = tmp_path / "dotfiles.toml"
    dotfiles.write_text('model = "scripted/plan"\n')
    (home / "config.toml").symlink_to(dotfiles)
    assert load_settings(home).model == "scripted/plan"
