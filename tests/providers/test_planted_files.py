"""A provider's OAuth token file, ``$TETHER_HOME/auth/<endpoint>.json``, read on every model call:
something else put at its name (a named pipe, a link, a folder) is a clear error that names the
file, at once; a pipe is never waited on and a link is never followed, so no token is ever taken
from wherever it points."""

from __future__ import annotations

import asyncio
import json
import os
from pathlib import Path

import pytest

from tests.planted import promptly
from tether.errors import ConfigError
from tether.providers.auth import OAuthCredentials, save_oauth_tokens

TOKEN_URL = "http://127.0.0.1:9/token"  # never asked: nothing here gets as far as a refresh
GOOD = {"access_token": "from-elsewhere", "refresh_token": "r-elsewhere", "expires_at": 9_999_999_999}


def headers(path: Path) -> dict[str, str]:
    creds = OAuthCredentials(path, TOKEN_URL)
    result: dict[str, str] = asyncio.run(creds.headers())
    return result


@pytest.fixture
def auth(tmp_path: Path) -> Path:
    folder = tmp_path / "home" / "auth"
    folder.mkdir(parents=True, mode=0o700)
    return folder


@pytest.fixture
def victim(tmp_path: Path) -> Path:
    """A file outside the home holding tokens that look good."""
    path = tmp_path / "elsewhere" / "tokens.json"
    path.parent.mkdir()
    path.write_text(json.dumps(GOOD))
    path.chmod(0o600)
    return path


def test_a_named_pipe_at_the_token_file_is_a_clear_error_at_once(auth: Path) -> None:
    path = auth / "ep.json"
    os.mkfifo(path, 0o600)
    with pytest.raises(ConfigError, match="regular file") as caught:
        promptly(lambda: headers(path))
    assert str(path) in str(caught.value) and "move it away" in str(caught.value)


@pytest.mark.parametrize("dangling", [False, True])
def test_a_link_at_the_token_file_is_refused_and_no_token_is_read_from_its_target(
    auth: Path, victim: Path, dangling: bool
) -> None:
    """The token a request would carry comes only from the file tether wrote: a link pointing at
    good-looking tokens elsewhere (or at nothing yet) is refused, and its target is left as it was."""
    path = auth / "ep.json"
    target = victim.with_name("not-yet.json") if dangling else victim
    path.symlink_to(target)
    before = victim.read_bytes()
    with pytest.raises(ConfigError, match="regular file") as caught:
        promptly(lambda: headers(path))
    assert str(path) in str(caught.value) and "from-elsewhere" not in str(caught.value)
    assert victim.read_bytes() == before and not victim.with_name("not-yet.json").exists()
    assert path.is_symlink()  # a read removes nothing
    save_oauth_tokens(path, {**GOOD, "access_token": "mine"})  # signing in again replaces the link
    assert victim.read_bytes() == before and not victim.with_name("not-yet.json").exists()
    assert not path.is_symlink() and (path.stat().st_mode & 0o777) == 0o600
    assert headers(path) == {"authorization": "Bearer mine"}


def test_a_folder_at_the_token_file_is_a_clear_error(auth: Path) -> None:
    path = auth / "ep.json"
    path.mkdir()
    with pytest.raises(ConfigError, match="regular file") as caught:
        promptly(lambda: headers(path))
    assert str(path) in str(caught.value)


def test_a_refresh_reads_the_token_file_the_same_way(auth: Path) -> None:
    """After a 401 the refresh loads the file again, under its lock: a pipe put there meanwhile is
    the same clear error, not a refresh that never ends."""
    path = auth / "ep.json"
    os.mkfifo(path, 0o600)
    creds = OAuthCredentials(path, TOKEN_URL)
    with pytest.raises(ConfigError, match="regular file"):
        promptly(lambda: asyncio.run(creds.refresh()))


def test_a_missing_or_damaged_token_file_says_what_it_said_before(auth: Path) -> None:
    path = auth / "ep.json"
    with pytest.raises(ConfigError, match="no OAuth tokens at .*tether auth import"):
        headers(path)
    path.write_text("{not json")
    with pytest.raises(ConfigError, match="is not valid JSON"):
        headers(path)
    path.write_text("[]")
    with pytest.raises(ConfigError, match="must hold a JSON object"):
        headers(path)
    path.write_text(json.dumps({**GOOD, "access_token": "mine"}))
    assert headers(path) == {"authorization": "Bearer mine"}


@pytest.mark.parametrize("kind", ["link", "folder"])
def test_something_put_at_the_refresh_lock_is_a_clear_error_naming_it(auth: Path, victim: Path, kind: str) -> None:
    """Tokens near their end are refreshed under ``<endpoint>.json.lock``: a link there is not
    followed to make a file, a folder is not taken for the lock, and the error says what to do."""
    path = auth / "acme.json"
    save_oauth_tokens(path, {"access_token": "old", "refresh_token": "r", "expires_at": 1})
    lock = path.with_name(path.name + ".lock")
    if kind == "link":
        lock.symlink_to(victim)
    else:
        lock.mkdir()
    before = victim.read_bytes()
    with pytest.raises(ConfigError, match="lock") as caught:
        promptly(lambda: headers(path))
    assert str(lock) in str(caught.value) and "move it away" in str(caught.value)
    assert victim.read_bytes() == before
