"""The account the one user of a server without tokens connects: ``tether mcp login``'s token file
(tether.connectors.mcp.token_path), which that user's runs use, kept as that command keeps it.
Imported only when that user connects (it brings the MCP SDK)."""

from __future__ import annotations

from tether.connectors._oauth import FileTokenStorage
from tether.providers.auth import save_oauth_tokens

__all__ = ["LoginTokenStorage"]


class LoginTokenStorage(FileTokenStorage):
    """What :class:`tether.connectors._accounts.SealedTokenStorage` offers the connection routes, on
    the unsealed file of ``tether mcp login``."""

    def connected(self) -> bool:
        return isinstance(self._read().get("tokens"), dict)

    def keep_client_for(self, redirect_uri: str) -> None:
        """Drop a client registration made for another redirect address (``tether mcp login``'s
        registers for its own loopback address; the server's callback needs its own)."""
        data = self._read()
        client = data.get("client")
        if isinstance(client, dict) and redirect_uri not in (client.get("redirect_uris") or []):
            del data["client"]
            save_oauth_tokens(self.path, data)

    def forget(self) -> bool:
        try:
            self.path.unlink()
        except FileNotFoundError:
            return False
        return True
