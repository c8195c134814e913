"""Each user's own connections, for ``tether serve``: the OAuth tokens a signed-in user got for an
MCP server (``[mcp.NAME] auth = "oauth"``), kept per user and encrypted at rest, and the user a run
acts for.

* :data:`ACTING` names the user whose run is running (the server sets it around a run with
  :func:`acting_as`). A connector then connects with that user's tokens and no one else's; with no
  user (``tether run``, ``tether chat``, a server without tokens) it uses ``tether mcp login``'s.
* :class:`SealedTokenStorage` is the MCP SDK's token storage on one file per user and server,
  ``$TETHER_HOME/auth/users/<hash of the user>/mcp-NAME.sealed``, sealed with Fernet (AES-128-CBC
  with HMAC-SHA256, from ``cryptography``, which the ``mcp`` package already requires).
* The key is ``$TETHER_CONNECTIONS_KEY`` (a Fernet key: ``python -c "from cryptography.fernet
  import Fernet; print(Fernet.generate_key().decode())"``), else ``$TETHER_HOME/auth/connections.key``,
  made on first use with mode 0600. It is never stored beside the tokens' rows or in a database.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
from pathlib import Path
from typing import Any

from tether.connectors._acting import ACTING, acting_as
from tether.connectors._oauth import FileTokenStorage
from tether.errors import ConfigError

__all__ = ["ACTING", "KEY_ENV", "SealedTokenStorage", "acting_as", "connection_key", "user_token_path"]

KEY_ENV = "TETHER_CONNECTIONS_KEY"


def user_token_path(home: Path, user: str, server: str) -> Path:
    """Where ``user``'s sealed tokens for the MCP server ``server`` live (the user's name is hashed:
    a name never becomes a path)."""
    if "/" in server or "\\" in server or server in ("", ".", ".."):
        raise ConfigError(f"[mcp.{server}]: a server with OAuth tokens needs a name without / or \\")
    digest = hashlib.sha256(user.encode()).hexdigest()[:32]
    return home / "auth" / "users" / digest / f"mcp-{server}.sealed"


def connection_key(home: Path) -> bytes:
    """The key that seals users' tokens: ``$TETHER_CONNECTIONS_KEY``, else the 0600 key file in
    ``$TETHER_HOME/auth`` (made on first use)."""
    from cryptography.fernet import Fernet

    given = os.environ.get(KEY_ENV, "").strip()
    if given:
        try:
            Fernet(given.encode())
        except ValueError:
            raise ConfigError(
                f"${KEY_ENV} is not a Fernet key (32 url-safe base64 bytes); make one with "
                '`python -c "from cryptography.fernet import Fernet; print(Fernet.generate_key().decode())"`'
            ) from None
        return given.encode()
    path = home / "auth" / "connections.key"
    from tether.fileio import open_own, private_dir

    if not os.path.lexists(path):  # (a home that cannot be written to still reads its key)
        private_dir(path.parent)
        with contextlib.suppress(FileExistsError):  # two processes: the first one's key wins
            # O_EXCL never opens what is there, a link included (dangling or not)
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0), 0o600)
            with os.fdopen(fd, "wb") as f:
                f.write(Fernet.generate_key())
    try:
        fd = open_own(path, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))  # no link, no pipe: a regular file
    except OSError as exc:
        raise ConfigError(
            f"cannot read the connections key {path}: {exc.strerror or exc}. It must be a regular file "
            f"tether made (not a link, a named pipe or a folder): move it away and a new key is made "
            f"(every user then signs in to their connections again), or set ${KEY_ENV}"
        ) from None
    with os.fdopen(fd, "rb") as f:  # the file checked is the file read
        if os.fstat(f.fileno()).st_mode & 0o077:
            raise ConfigError(f"{path} can be read by other users: chmod 600 it (it seals every user's tokens)")
        return f.read().strip()


class SealedTokenStorage(FileTokenStorage):
    """:class:`FileTokenStorage` whose file is sealed with the connections key."""

    def __init__(self, path: Path, key: bytes) -> None:
        from cryptography.fernet import Fernet

        super().__init__(path)
        self._fernet = Fernet(key)

    def _read(self) -> dict[str, Any]:
        from cryptography.fernet import InvalidToken

        from tether.fileio import read_own

        try:
            data = json.loads(self._fernet.decrypt(read_own(self.path)))
        except OSError:  # missing, or not a regular file tether wrote (a link, a pipe): not connected
            return {}
        except (InvalidToken, ValueError):  # another key, or damaged: as if never connected
            return {}
        return data if isinstance(data, dict) else {}

    def _write(self, key: str, value: dict[str, Any]) -> None:
        from tether.fileio import atomic_write, private_dir

        data = self._read()
        data[key] = value
        private_dir(self.path.parent)
        atomic_write(self.path, self._fernet.encrypt(json.dumps(data).encode()))

    def connected(self) -> bool:
        return isinstance(self._read().get("tokens"), dict)

    def keep_client_for(self, redirect_uri: str) -> None:
        """Drop a client registration made for another redirect address (a run that found no
        tokens registers before it can say so; the server's callback needs its own)."""
        data = self._read()
        client = data.get("client")
        if isinstance(client, dict) and redirect_uri not in (client.get("redirect_uris") or []):
            del data["client"]
            from tether.fileio import atomic_write

            atomic_write(self.path, self._fernet.encrypt(json.dumps(data).encode()))

    def forget(self) -> bool:
        try:
            self.path.unlink()
        except FileNotFoundError:
            return False
        return True
