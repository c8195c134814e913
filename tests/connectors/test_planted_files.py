"""The files behind MCP connections (tether.connectors._accounts and ._oauth): the connections key
``auth/connections.key``, each user's sealed tokens ``auth/users/<hash>/mcp-NAME.sealed``, and
``tether mcp login``'s ``auth/mcp-NAME.json``. Something else put at one of those names (a named
pipe, a link, a folder) is never waited on (``GET /v1/connections`` reads them on the server's
loop) and never followed: the key never comes from a link's target, a user never gets tokens
through a link to someone else's file, and nothing outside is changed."""

from __future__ import annotations

import asyncio
import json
import os
from pathlib import Path

import pytest
from cryptography.fernet import Fernet  # the mcp package requires it
from mcp.shared.auth import OAuthToken

from tests.planted import promptly
from tether.connectors._accounts import KEY_ENV, SealedTokenStorage, connection_key, user_token_path
from tether.connectors._oauth import FileTokenStorage
from tether.errors import ConfigError


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.delenv(KEY_ENV, raising=False)
    (tmp_path / "home").mkdir(mode=0o700)
    return tmp_path / "home"


def token(access: str) -> OAuthToken:
    return OAuthToken(access_token=access, token_type="Bearer", expires_in=3600, refresh_token=f"r-{access}")


# --- the connections key -------------------------------------------------------------------------


def test_a_named_pipe_at_the_connections_key_is_a_clear_error_at_once(home: Path) -> None:
    path = home / "auth" / "connections.key"
    path.parent.mkdir(mode=0o700)
    os.mkfifo(path, 0o600)  # mode 0600: the old mode check let it through to the read
    with pytest.raises(ConfigError, match="regular file") as caught:
        promptly(lambda: connection_key(home))
    assert str(path) in str(caught.value) and KEY_ENV in str(caught.value)


@pytest.mark.parametrize("dangling", [False, True])
def test_a_link_at_the_connections_key_is_refused_and_its_target_never_becomes_the_key(
    home: Path, tmp_path: Path, dangling: bool
) -> None:
    """Whoever planted the link knows what it points at: a key read from there would let them
    unseal every user's tokens. A link pointing at nothing yet is not written through either."""
    theirs = tmp_path / "theirs.key"
    theirs.write_bytes(Fernet.generate_key() + b"\n")
    theirs.chmod(0o600)  # passes the mode check the old code made through the link
    before = theirs.read_bytes()
    path = home / "auth" / "connections.key"
    path.parent.mkdir(mode=0o700)
    target = tmp_path / "not-yet.key" if dangling else theirs
    path.symlink_to(target)
    with pytest.raises(ConfigError, match="regular file") as caught:
        promptly(lambda: connection_key(home))
    assert str(path) in str(caught.value) and before.strip().decode() not in str(caught.value)
    assert theirs.read_bytes() == before and not (tmp_path / "not-yet.key").exists()
    assert path.is_symlink()


def test_a_folder_at_the_connections_key_is_a_clear_error(home: Path) -> None:
    path = home / "auth" / "connections.key"
    path.mkdir(parents=True)
    with pytest.raises(ConfigError, match="regular file") as caught:
        promptly(lambda: connection_key(home))
    assert str(path) in str(caught.value)


def test_the_key_file_is_still_made_private_once_and_checked(home: Path) -> None:
    key = connection_key(home)
    path = home / "auth" / "connections.key"
    Fernet(key)  # a real key
    assert (path.stat().st_mode & 0o777) == 0o600 and connection_key(home) == key
    path.chmod(0o644)
    with pytest.raises(ConfigError, match="can be read by other users"):
        connection_key(home)


# --- a user's sealed tokens ----------------------------------------------------------------------


def test_a_named_pipe_at_a_users_sealed_tokens_reads_as_not_connected_at_once(home: Path) -> None:
    path = user_token_path(home, "alice", "docs")
    path.parent.mkdir(parents=True, mode=0o700)
    os.mkfifo(path, 0o600)
    storage = SealedTokenStorage(path, connection_key(home))
    assert promptly(storage.connected) is False
    assert promptly(lambda: asyncio.run(storage.get_tokens())) is None


def test_a_link_from_one_users_tokens_to_anothers_never_hands_over_the_others_tokens(home: Path) -> None:
    """Bob's sealed file, under the same key: a link planted at Alice's name would make Bob's
    tokens Alice's. It reads as not connected, and Alice's sign-in replaces the link, not Bob's file."""
    key = connection_key(home)
    bob = SealedTokenStorage(user_token_path(home, "bob", "docs"), key)
    asyncio.run(bob.set_tokens(token("bobs-token")))
    bobs_file = bob.path.read_bytes()
    alice_path = user_token_path(home, "alice", "docs")
    alice_path.parent.mkdir(parents=True, mode=0o700)
    alice_path.symlink_to(bob.path)
    alice = SealedTokenStorage(alice_path, key)
    assert promptly(alice.connected) is False
    assert promptly(lambda: asyncio.run(alice.get_tokens())) is None and alice.secrets() == set()
    asyncio.run(alice.set_tokens(token("alices-token")))
    assert bob.path.read_bytes() == bobs_file and asyncio.run(bob.get_tokens()) == token("bobs-token")
    assert not alice_path.is_symlink() and asyncio.run(alice.get_tokens()) == token("alices-token")


# --- tether mcp login's token file ---------------------------------------------------------------


def test_a_named_pipe_at_the_mcp_token_file_reads_as_no_tokens_at_once(home: Path) -> None:
    path = home / "auth" / "mcp-docs.json"
    path.parent.mkdir(mode=0o700)
    os.mkfifo(path, 0o600)
    storage = FileTokenStorage(path)
    assert promptly(lambda: asyncio.run(storage.get_tokens())) is None
    assert promptly(storage.secrets) == set() and promptly(storage.expires_at) is None


def test_a_link_at_the_mcp_token_file_is_not_followed(home: Path, tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere.json"
    elsewhere.write_text(json.dumps({"tokens": {"access_token": "from-elsewhere", "token_type": "Bearer"}}))
    before = elsewhere.read_bytes()
    path = home / "auth" / "mcp-docs.json"
    path.parent.mkdir(mode=0o700)
    path.symlink_to(elsewhere)
    storage = FileTokenStorage(path)
    assert promptly(lambda: asyncio.run(storage.get_tokens())) is None and storage.secrets() == set()
    asyncio.run(storage.set_tokens(token("mine")))  # the sign-in replaces the link
    assert elsewhere.read_bytes() == before
    assert not path.is_symlink() and storage.secrets() == {"mine", "r-mine"}
