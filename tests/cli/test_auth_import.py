"""``tether auth import``: the refresh token from stdin (``--refresh-token -``) or the environment,
so it need not show in ``ps`` or the shell's history; stored 0600, never printed."""

from __future__ import annotations

import io
import json
import os
import stat
import sys
from pathlib import Path

import pytest

from tests.connectors.test_cli import configure, tether

ENDPOINT = ('[endpoints.corp]\nkind = "openai"\nbase_url = "https://llm.example.com/v1"\nauth = "oauth"\n'
            'token_url = "https://auth.example.com/token"\n')


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("TETHER_HOME", str(home))
    for name in ("TETHER_REFRESH_TOKEN", "TETHER_ACCESS_TOKEN", "TETHER_MODEL"):
        monkeypatch.delenv(name, raising=False)
    configure(home, ENDPOINT)
    return home


def stored(home: Path) -> dict[str, object]:
    path = home / "auth" / "corp.json"
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    data: dict[str, object] = json.loads(path.read_text())
    return data


def test_the_refresh_token_comes_from_stdin_with_a_dash(home: Path, capsys: pytest.CaptureFixture[str],
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TETHER_REFRESH_TOKEN", "from-the-environment")  # a dash means stdin, even so
    monkeypatch.setattr(sys, "stdin", io.StringIO("r-stdin\n"))
    code, out, err = tether(capsys, "auth", "import", "corp", "--refresh-token", "-")
    assert code == 0 and "r-stdin" not in out + err
    assert stored(home)["refresh_token"] == "r-stdin"
    for given in ("", "two words\n"):
        monkeypatch.setattr(sys, "stdin", io.StringIO(given))
        code, _, err = tether(capsys, "auth", "import", "corp", "--refresh-token", "-")
        assert code == 2 and "--refresh-token -: stdin" in err and "two" not in err
    assert stored(home)["refresh_token"] == "r-stdin"  # a refused import changed nothing


def test_the_tokens_come_from_the_environment_when_no_flag_gives_them(
        home: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    code, _, err = tether(capsys, "auth", "import", "corp")
    assert code == 2 and "--refresh-token -" in err and "TETHER_REFRESH_TOKEN" in err
    assert not (home / "auth" / "corp.json").exists()
    monkeypatch.setenv("TETHER_REFRESH_TOKEN", "r-env")
    monkeypatch.setenv("TETHER_ACCESS_TOKEN", "a-env")
    code, out, err = tether(capsys, "auth", "import", "corp", "--expires-in", "600")
    assert code == 0 and "r-env" not in out + err and "a-env" not in out + err
    tokens = stored(home)
    assert tokens["refresh_token"] == "r-env" and tokens["access_token"] == "a-env"
    assert isinstance(tokens["expires_at"], float) and tokens["expires_at"] > 0
