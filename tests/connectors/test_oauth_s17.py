"""The MCP authorization flow when the server refuses an access token tether still holds valid."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from tests.connectors.test_oauth import LIFETIME_S, browser, home, server, stats, whoami
from tether.cli import main
from tether.connectors import token_path

__all__ = ["home", "server"]  # the fixtures, shared with test_oauth


def test_a_token_refused_before_its_time_is_refreshed_not_a_new_sign_in(
    home: Path, server: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Was: an access token that expired on its way to the server (sent with a moment left, on a busy
    machine; or a clock ahead of the server's; or a token the server dropped) was refused 401, and the
    MCP SDK went straight to a new sign-in: a run said "the MCP server guarded needs you to sign in"
    though it held a refresh token (the CI-style failure of test_oauth under load). Now the refresh
    token is tried first and the request sent again with what it gives."""
    pages: list[str] = []
    monkeypatch.setattr("webbrowser.open", browser(pages))
    assert main(["mcp", "login", "guarded"]) == 0
    path = token_path(home, "guarded")
    saved = json.loads(path.read_text())
    saved["tokens"]["expires_at"] = time.time() + 3600  # tether takes it as good for an hour
    path.write_text(json.dumps(saved))
    before = stats(server)["refreshes"]
    time.sleep(LIFETIME_S + 1)  # the server's side of it expires (2 s)
    assert whoami(home) == "signed in"
    assert stats(server)["refreshes"] == before + 1
    assert json.loads(path.read_text())["tokens"]["access_token"] != saved["tokens"]["access_token"]
    assert len(pages) == 1  # refreshed, never signed in again
