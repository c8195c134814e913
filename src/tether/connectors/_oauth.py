"""OAuth as the MCP authorization specification describes it, for ``[mcp.NAME] auth = "oauth"``
without a ``token_url``: discovery of the server's authorization server (RFC 9728 protected-resource
metadata, RFC 8414 server metadata), dynamic client registration (RFC 7591), the authorization-code
grant with PKCE through the person's browser, and refresh. The MCP SDK's ``OAuthClientProvider``
does the protocol; tether gives it a token file and the loopback redirect.

``tether mcp login NAME`` runs the browser step once: it listens on ``127.0.0.1`` for the redirect,
opens the authorization page (and prints its address), and stores what it gets in
``$TETHER_HOME/auth/mcp-NAME.json`` (mode 0600): the tokens and the client registration. A run
reuses them and refreshes the access token; it never opens a browser, and when the person must
sign in again it says to run ``tether mcp login NAME``.
"""

from __future__ import annotations

import asyncio
import json
import threading
import time
from collections.abc import AsyncGenerator, Awaitable, Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlparse

from mcp.client.auth import OAuthClientProvider
from mcp.shared.auth import AuthorizationCodeResult, OAuthClientInformationFull, OAuthClientMetadata, OAuthToken

from tether.errors import ConfigError
from tether.tools.base import _in_thread

__all__ = ["FileTokenStorage", "Loopback", "oauth_provider"]

LOGIN_TIMEOUT_S = 300.0
REREAD_S = 2.0  # after a refused refresh, how long to wait for another run to store the fresh tokens


class FileTokenStorage:
    """The SDK's ``TokenStorage`` on one file, written atomically and readable only by its owner."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def _read(self) -> dict[str, Any]:
        from tether.fileio import read_own

        try:  # a link or a named pipe put at the name is refused (never followed, never waited on)
            data = json.loads(read_own(self.path))
        except (OSError, ValueError):
            return {}
        return data if isinstance(data, dict) else {}

    def _write(self, key: str, value: dict[str, Any]) -> None:
        from tether.providers.auth import save_oauth_tokens

        data = self._read()
        data[key] = value
        save_oauth_tokens(self.path, data)

    async def get_tokens(self) -> OAuthToken | None:
        tokens = self._read().get("tokens")
        if not isinstance(tokens, dict):
            return None
        return OAuthToken.model_validate({k: v for k, v in tokens.items() if k != "expires_at"})

    async def set_tokens(self, tokens: OAuthToken) -> None:
        saved = tokens.model_dump(mode="json", exclude_none=True)
        if tokens.expires_in is not None:  # kept as a moment: "expires in" means nothing once read back
            saved["expires_at"] = time.time() + tokens.expires_in
        self._write("tokens", saved)

    def expires_at(self) -> float | None:
        value = (self._read().get("tokens") or {}).get("expires_at")
        return float(value) if isinstance(value, int | float) else None

    async def get_client_info(self) -> OAuthClientInformationFull | None:
        client = self._read().get("client")
        return OAuthClientInformationFull.model_validate(client) if isinstance(client, dict) else None

    async def set_client_info(self, client_info: OAuthClientInformationFull) -> None:
        self._write("client", client_info.model_dump(mode="json", exclude_none=True))

    def secrets(self) -> set[str]:
        """The tokens in the file (for redacting what a server echoes)."""
        tokens = self._read().get("tokens") or {}
        return {v for k, v in tokens.items() if k in ("access_token", "refresh_token") and isinstance(v, str) and v}


class Loopback:
    """Catches the authorization server's redirect on ``http://127.0.0.1:PORT/callback``."""

    def __init__(self, port: int = 0) -> None:
        self.result: dict[str, str] | None = None
        self._got = threading.Event()
        loopback = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                url = urlparse(self.path)
                if url.path != "/callback":
                    self.send_error(404)
                    return
                query = {k: v[0] for k, v in parse_qs(url.query).items()}
                loopback.result = query
                loopback._got.set()
                ok = "code" in query
                self.send_response(200 if ok else 400)
                self.send_header("content-type", "text/plain; charset=utf-8")
                self.end_headers()
                said = "tether: signed in; you can close this page." if ok else "tether: the sign-in did not succeed."
                self.wfile.write(said.encode())

            def log_message(self, *args: Any) -> None:  # nothing on the terminal
                return

        self._http = ThreadingHTTPServer(("127.0.0.1", port), Handler)
        self._thread = threading.Thread(target=self._http.serve_forever, daemon=True)
        self._thread.start()

    @property
    def redirect_uri(self) -> str:
        return f"http://127.0.0.1:{self._http.server_address[1]}/callback"

    async def code(self) -> AuthorizationCodeResult:
        # A daemon worker: Ctrl-C during the sign-in does not wait out LOGIN_TIMEOUT_S at shutdown.
        got = await _in_thread(self._got.wait, {"timeout": LOGIN_TIMEOUT_S})
        result, self.result = self.result or {}, None
        self._got.clear()  # a second sign-in in the same login waits for its own redirect
        if not got or "code" not in result:
            from tether.connectors._client_side import printable

            why = result.get("error_description") or result.get("error") or f"no answer within {LOGIN_TIMEOUT_S:g} s"
            # Printed at the terminal, and anything that reaches the port may have written it.
            raise ConfigError(f"the sign-in did not finish: {printable(why[:300])}")
        return AuthorizationCodeResult(code=result["code"], state=result.get("state"), iss=result.get("iss"))

    def close(self) -> None:
        self._http.shutdown()
        self._http.server_close()


class _Provider(OAuthClientProvider):
    """The SDK's provider, told when the stored access token expires: without that it takes a token
    read from the file as fresh, is refused 401, and asks the person to sign in again instead of
    refreshing."""

    async def _initialize(self) -> None:
        await super()._initialize()
        storage = self.context.storage
        if isinstance(storage, FileTokenStorage):
            self.context.token_expiry_time = storage.expires_at()

    async def _auth_flow(self, request: Any) -> AsyncGenerator[Any, Any]:
        """The SDK's flow, with one step first when the server refuses (401) an access token this
        side still held valid: it expired on the way (a token with a second left, a busy machine, a
        clock ahead of ours) or the server dropped it. The SDK then asks the person to sign in again;
        a refresh token, when there is one, is tried first, and the request sent once more with what
        it gives. Not when this request's token was refreshed just before it (the flow's first request
        is then the refresh)."""
        flow = super()._auth_flow(request)
        outgoing = await flow.__anext__()
        tried = outgoing is not request
        while True:
            response = yield outgoing
            if outgoing is request and response.status_code == 401 and not tried and self.context.can_refresh_token():
                tried = True
                refreshed = yield await self._refresh_token()
                if await self._handle_refresh_response(refreshed):
                    self._add_auth_header(request)
                    response = yield request
            try:
                outgoing = await flow.asend(response)
            except StopAsyncIteration:
                return

    async def _handle_refresh_response(self, response: Any) -> bool:
        """A refused refresh may have lost a race: an authorization server that rotates refresh tokens
        (OAuth 2.1 asks it of public clients) refuses the second use of one, and another run (a
        thread, a process) that found the token expired too may have just spent it and stored fresh
        tokens. Those are read again (for up to REREAD_S while the file still holds the spent one)
        instead of asking the person to sign in again."""
        spent = self.context.current_tokens.refresh_token if self.context.current_tokens else None
        refreshed = await super()._handle_refresh_response(response)
        if refreshed or spent is None:
            return refreshed
        deadline = time.monotonic() + REREAD_S
        while True:
            await self._initialize()
            stored = self.context.current_tokens
            if self.context.is_token_valid() and stored is not None and stored.refresh_token != spent:
                return True
            if stored is None or stored.refresh_token != spent or time.monotonic() > deadline:
                self.context.clear_tokens()
                return False
            await asyncio.sleep(0.1)  # the other run has its answer, and is storing it


def oauth_provider(
    server: str,
    url: str,
    path: Path,
    scopes: list[str],
    *,
    loopback: Loopback | None = None,
    open_page: Callable[[str], Awaitable[None]] | None = None,
    storage: FileTokenStorage | None = None,
    redirect_uri: str | None = None,
    get_code: Callable[[], Awaitable[AuthorizationCodeResult]] | None = None,
    sign_in: str | None = None,
) -> OAuthClientProvider:
    """The SDK's provider for the server at ``url`` with tokens in ``path`` (or ``storage``). Without
    ``loopback`` or ``get_code`` (a run), a needed sign-in is an error that says how to sign in
    (``sign_in``, default: run ``tether mcp login``). ``tether serve`` gives ``redirect_uri`` (its
    callback route), ``open_page`` and ``get_code`` for a user's flow."""
    how = sign_in or f"run `tether mcp login {server}`"

    async def refuse(url: str) -> None:
        raise ConfigError(f"the MCP server {server} needs you to sign in: {how}")

    async def no_code() -> AuthorizationCodeResult:
        raise ConfigError(f"the MCP server {server} needs you to sign in: {how}")

    if loopback is not None:
        redirect_uri, get_code = loopback.redirect_uri, loopback.code
    metadata = OAuthClientMetadata.model_validate(
        {
            "client_name": "tether",
            "redirect_uris": [redirect_uri or "http://127.0.0.1/callback"],
            "grant_types": ["authorization_code", "refresh_token"],
            "response_types": ["code"],
            "token_endpoint_auth_method": "none",
            "scope": " ".join(scopes) or None,
        }
    )
    return _Provider(
        server_url=url,
        client_metadata=metadata,
        storage=storage or FileTokenStorage(path),
        redirect_handler=open_page if get_code is not None and open_page is not None else refuse,
        callback_handler=get_code or no_code,
    )
