"""Model strings, named endpoints from config.toml, prices and windows, cache keys."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from tether import Agent, RunState, run_sync
from tether.config import load_settings
from tether.errors import ConfigError
from tether.messages import AssistantMessage
from tether.providers.anthropic import AnthropicProvider
from tether.providers.openai_chat import CACHE_KEY_LIMIT, OpenAIChatProvider, clamp_cache_key
from tether.providers.registry import canonical_model, resolve_provider
from tether.testing import ScriptedServer
from tether.tools.files import FILE_TOOLS
from tether.usage import Price, model_info


@pytest.mark.parametrize(
    ("bare", "full"),
    [
        ("gpt-4.1-mini", "openai/gpt-4.1-mini"),
        ("o3", "openai/o3"),
        ("o4-mini", "openai/o4-mini"),
        ("claude-sonnet-4-5", "anthropic/claude-sonnet-4-5"),
        ("local/qwen2.5", "local/qwen2.5"),
        ("openrouter/meta/llama-3", "openrouter/meta/llama-3"),
    ],
)
def test_model_strings(bare: str, full: str) -> None:
    assert canonical_model(bare) == full


def test_unknown_names_say_how_to_write_them(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="provider/model"):
        canonical_model("mistral-large")
    with pytest.raises(ConfigError, match=r"\[endpoints.nowhere\]"):
        resolve_provider("nowhere/x", load_settings(tmp_path))


def test_conventional_base_url_variables(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("LLM_BASE_URL", raising=False)
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:9/v1")
    monkeypatch.setenv("ANTHROPIC_BASE_URL", "http://127.0.0.1:9")
    assert isinstance(resolve_provider("openai/x").provider, OpenAIChatProvider)
    assert resolve_provider("openai/x").provider.base_url == "http://127.0.0.1:9/v1"  # type: ignore[attr-defined]
    assert resolve_provider("claude-x").provider.base_url == "http://127.0.0.1:9"  # type: ignore[attr-defined]
    monkeypatch.setenv("LLM_BASE_URL", "http://127.0.0.1:8/v1")
    assert resolve_provider("openai/x").provider.base_url == "http://127.0.0.1:8/v1"  # type: ignore[attr-defined]


def test_named_endpoint_reaches_a_local_server_with_config_prices(tmp_path: Path, workspace: Path) -> None:
    with ScriptedServer() as server:
        (tmp_path / "config.toml").write_text(
            f'[endpoints.local]\nkind = "openai"\nbase_url = "{server.base_url}"\nmodels = ["plan"]\n\n'
            '[models."local/plan"]\ninput = 1.0\noutput = 4.0\ncontext_window = 32768\n'
        )
        settings = load_settings(tmp_path)
        assert model_info("local/plan", settings.models).context_window == 32768
        r = run_sync(Agent("local/plan", tools=FILE_TOOLS, cwd=workspace, settings=settings, max_budget_usd=0.5), "q")
        assert r.status == "completed"
        assert r.cost_usd == pytest.approx(Price(input=1.0, output=4.0).cost(r.usage))
        assert server.received[0][1]["model"] == "plan"
        assert "prompt_cache_key" not in server.received[0][1]  # not sent to compatible servers


def test_bad_endpoint_config_is_a_clear_error(tmp_path: Path) -> None:
    (tmp_path / "config.toml").write_text('[endpoints.x]\nkind = "cohere"\nbase_url = "http://h"\n')
    with pytest.raises(ConfigError, match=r"\[endpoints.x\]"):
        load_settings(tmp_path)
    (tmp_path / "config.toml").write_text('[models."a/b"]\ninput = "cheap"\noutput = 1\n')
    with pytest.raises(ConfigError, match="input"):
        load_settings(tmp_path)


def test_cache_key_is_the_session_and_fits_the_limit(workspace: Path) -> None:
    assert clamp_cache_key("run_abc") == "run_abc"
    long = "session-" + "x" * 100
    assert len(clamp_cache_key(long)) == CACHE_KEY_LIMIT and clamp_cache_key(long) != clamp_cache_key(long + "y")
    with ScriptedServer() as server:
        provider = OpenAIChatProvider(base_url=server.base_url, send_cache_key=True)
        provider.model_id = "plan"  # type: ignore[attr-defined]
        price = Price(input=2.0, output=8.0, cached_input=0.5)
        state = RunState(session_id=long)
        r = run_sync(Agent(provider, tools=FILE_TOOLS, cwd=workspace, price=price), "q", state=state)
        keys = {body["prompt_cache_key"] for _, body, _ in server.received}
        assert keys == {clamp_cache_key(long)}
        turns = [m for m in state.messages if isinstance(m, AssistantMessage)]
        assert turns[0].usage.cached_tokens == 0 and turns[1].usage.cached_tokens > 0  # type: ignore[union-attr]
        assert r.cost_usd == pytest.approx(sum(price.cost(m.usage) for m in turns if m.usage))


def test_catalog_knows_prices_and_windows() -> None:
    info = model_info("anthropic/claude-sonnet-4-5")
    assert info.price is not None and info.price.cache_write == 3.75 and info.context_window == 200_000
    assert model_info("openai/unknown-model").price is None


def test_tether_models_lists_endpoints_and_checks_auth(tmp_path: Path) -> None:
    with ScriptedServer() as server:
        (tmp_path / "config.toml").write_text(
            f'[endpoints.local]\nkind = "openai"\nbase_url = "{server.base_url}"\nmodels = ["plan", "hello"]\n'
            f'[endpoints.ant]\nkind = "anthropic"\nbase_url = "{server.root_url}"\nmodels = ["plan"]\n'
        )
        env = {
            k: v
            for k, v in os.environ.items()
            if k not in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "LLM_BASE_URL", "OPENAI_BASE_URL", "ANTHROPIC_BASE_URL")
        }
        out = subprocess.run(
            ["tether", "models"], env={**env, "TETHER_HOME": str(tmp_path)}, capture_output=True, text=True, timeout=60
        )
        assert out.returncode == 0, out.stderr
        rows = dict(line.split(None, 1) for line in out.stdout.splitlines())
        # Endpoints are asked for the models they serve (the scripted server serves its scenarios).
        assert rows["local/plan"].strip() == "ok (served)" and rows["ant/plan"].strip() == "ok (served)"
        assert rows["local/runaway"].strip() == "ok (served)"
        assert "OPENAI_API_KEY" in rows["openai/gpt-4.1"]
        assert rows["scripted/plan"].strip() == "ok"


def test_cli_fallback_flag(tmp_path: Path, workspace: Path) -> None:
    with ScriptedServer(faults=["503"] * 8) as broken, ScriptedServer() as healthy:
        (tmp_path / "config.toml").write_text(
            f'[endpoints.a]\nbase_url = "{broken.base_url}"\n[endpoints.b]\nkind = "anthropic"\n'
            f'base_url = "{healthy.root_url}"\n'
        )
        env = {**os.environ, "TETHER_HOME": str(tmp_path)}
        out = subprocess.run(
            ["tether", "run", "--model", "a/plan", "--fallback", "b/plan", "--cwd", str(workspace), "--json", "q"],
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert out.returncode == 0, out.stderr
        assert "falling back from a/plan to b/plan" in out.stderr
        assert json.loads(out.stdout)["status"] == "completed"
        assert isinstance(resolve_provider("b/plan", load_settings(tmp_path)).provider, AnthropicProvider)
