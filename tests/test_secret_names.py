"""Which names say their value is a secret (config.toml, a server's env, a command's flags)."""

from __future__ import annotations

import pytest

from tether._secrets import known_secrets, secret_name


@pytest.mark.parametrize(
    "name",
    [
        "API_KEY",
        "--api-key",
        "GITHUB_TOKEN",
        "apiKey",
        "accesstoken",
        "password",
        "DB_PASS",
        "SMTP_PWD",
        "--pass",
        "GPG_PASSPHRASE",
        "AWS_CREDENTIALS",
        "service_credential",
    ],
)
def test_a_secrets_name_says_so(name: str) -> None:
    assert secret_name(name)


@pytest.mark.parametrize("name", ["LOG_LEVEL", "bypass", "compass", "PWD_DIR", "key_env", "passes", "OLDPWD"])
def test_other_names_do_not(name: str) -> None:
    assert not secret_name(name)


def test_the_working_folder_in_pwd_is_never_taken_out_of_text(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PWD", "/home/someone/project")
    monkeypatch.setenv("DB_PASS", "correct-horse-battery")
    found = known_secrets()
    assert "correct-horse-battery" in found and "/home/someone/project" not in found
