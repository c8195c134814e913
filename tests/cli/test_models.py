"""`tether models`: what is configured, and whether each provider answers — in words that say why."""

from __future__ import annotations

from tests.cli.conftest import tether
from tether.testing import ScriptedServer


def test_a_server_behind_llm_base_url_is_asked_for_its_own_models(env: dict[str, str]) -> None:
    with ScriptedServer() as server:
        out = tether("models", env={**env, "LLM_BASE_URL": server.base_url})
    assert out.returncode == 0, out.stderr
    served = [line for line in out.stdout.splitlines() if line.startswith("openai/")]
    assert any(line.split()[0] == "openai/plan" and "ok (served)" in line for line in served), out.stdout
    assert not any(line.startswith("openai/gpt-") for line in served), "not OpenAI's catalogue"


def test_a_host_that_does_not_resolve_is_not_called_an_auth_failure(env: dict[str, str]) -> None:
    out = tether("models", env={**env, "LLM_BASE_URL": "http://no-such-host.invalid/v1", "LLM_API_KEY": "sk-x"})
    assert out.returncode == 1, out.stderr  # the one configured provider does not answer
    assert "no configured provider answered" in out.stderr
    lines = [line for line in out.stdout.splitlines() if line.startswith("openai/")]
    assert lines and all("cannot reach no-such-host.invalid:80" in line for line in lines), out.stdout
    assert "auth failed" not in out.stdout
    # OpenAI's key is not that server's: not sent, and the line says which key to set
    out = tether("models", env={**env, "LLM_BASE_URL": "http://no-such-host.invalid/v1", "OPENAI_API_KEY": "sk-x"})
    assert "Export LLM_API_KEY" in out.stdout and "sk-x" not in out.stdout + out.stderr, out.stdout


def test_models_exit_code_says_whether_a_configured_provider_answers(env: dict[str, str]) -> None:
    with ScriptedServer() as server:
        dead = f"http://127.0.0.1:{server.port}/v1"
    out = tether("models", env={**env, "LLM_BASE_URL": dead, "LLM_API_KEY": "sk-x"})
    assert out.returncode == 1 and "cannot reach" in out.stdout, out.stdout
    bare = tether("models", env=env)  # nothing configured: the scripted model alone is no failure
    assert bare.returncode == 0 and "scripted/plan" in bare.stdout, bare.stderr


def test_models_json(env: dict[str, str]) -> None:
    import json

    with ScriptedServer() as server:
        out = tether("models", "--json", env={**env, "LLM_BASE_URL": server.base_url})
    rows = json.loads(out.stdout)
    assert out.returncode == 0
    assert {"model": "openai/plan", "ok": True, "status": "ok (served)"} in rows
    assert all(set(r) == {"model", "ok", "status"} for r in rows)
