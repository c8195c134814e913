"""An MCP server that is its own OAuth authorization server (the MCP SDK's auth routes over an
in-memory provider), on a free loopback port, for the OAuth tests. It prints ``port N`` once it
listens. Its authorization page approves at once (redirects with a code): the "browser" is the
test. With ``CONSENT=1`` it is a page a person reads instead, with "Allow" and "Deny" links (for the
tests that drive a real browser). Access tokens live ``TOKEN_LIFETIME`` seconds (environment,
default 3600).

* metadata: ``/.well-known/oauth-protected-resource/mcp`` (RFC 9728) and
  ``/.well-known/oauth-authorization-server`` (RFC 8414); ``/register`` (RFC 7591); ``/authorize``
  and ``/token`` (authorization code with PKCE, refresh);
* ``/mcp``: one tool, ``whoami``, for a valid bearer token only;
* ``GET /stats``: registrations, codes issued, refreshes, the tokens issued, and the access token
  each ``whoami`` call came with (for the tests).

Run by the tests with ``sys.executable oauth_server.py``.
"""

from __future__ import annotations

import os
import secrets
import socket
import sys
import time
from html import escape
from typing import Any
from urllib.parse import urlencode

import uvicorn
from mcp.server.auth.provider import AccessToken, AuthorizationCode, RefreshToken, construct_redirect_uri
from mcp.server.auth.settings import AuthSettings, ClientRegistrationOptions
from mcp.server.mcpserver import MCPServer
from mcp.shared.auth import OAuthClientInformationFull, OAuthToken
from pydantic import AnyHttpUrl
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, Response

LIFETIME = int(os.environ.get("TOKEN_LIFETIME", "3600"))
CONSENT = os.environ.get("CONSENT") == "1"
stats: dict[str, Any] = {"registered": 0, "codes": 0, "refreshes": 0, "issued": [], "called_with": []}


class Provider:
    def __init__(self) -> None:
        self.clients: dict[str, OAuthClientInformationFull] = {}
        self.codes: dict[str, AuthorizationCode] = {}
        self.refresh: dict[str, RefreshToken] = {}
        self.access: dict[str, AccessToken] = {}

    async def get_client(self, client_id: str) -> OAuthClientInformationFull | None:
        return self.clients.get(client_id)

    async def register_client(self, client_info: OAuthClientInformationFull) -> None:
        assert client_info.client_id is not None
        self.clients[client_info.client_id] = client_info
        stats["registered"] += 1

    async def authorize(self, client: OAuthClientInformationFull, params: Any) -> str:
        code = secrets.token_hex(16)
        self.codes[code] = AuthorizationCode(
            code=code,
            scopes=params.scopes or [],
            expires_at=time.time() + 300,
            client_id=client.client_id or "",
            code_challenge=params.code_challenge,
            redirect_uri=params.redirect_uri,
            redirect_uri_provided_explicitly=params.redirect_uri_provided_explicitly,
            resource=params.resource,
        )
        stats["codes"] += 1
        back = construct_redirect_uri(str(params.redirect_uri), code=code, state=params.state)
        if not CONSENT:
            return back
        denied = construct_redirect_uri(str(params.redirect_uri), error="access_denied", state=params.state)
        return "/consent?" + urlencode({"allow": back, "deny": denied})

    async def load_authorization_code(self, client: Any, authorization_code: str) -> AuthorizationCode | None:
        return self.codes.get(authorization_code)

    async def exchange_authorization_code(self, client: Any, authorization_code: AuthorizationCode) -> OAuthToken:
        del self.codes[authorization_code.code]
        return self._issue(authorization_code.client_id, authorization_code.scopes, authorization_code.resource)

    async def load_refresh_token(self, client: Any, refresh_token: str) -> RefreshToken | None:
        return self.refresh.get(refresh_token)

    async def exchange_refresh_token(self, client: Any, refresh_token: RefreshToken, scopes: list[str]) -> OAuthToken:
        del self.refresh[refresh_token.token]
        stats["refreshes"] += 1
        return self._issue(refresh_token.client_id, scopes or refresh_token.scopes, refresh_token.resource)

    async def load_access_token(self, token: str) -> AccessToken | None:
        found = self.access.get(token)
        return found if found is not None and (found.expires_at or 0) > time.time() else None

    async def revoke_token(self, token: Any) -> None:
        return None

    def _issue(self, client_id: str, scopes: list[str], resource: str | None) -> OAuthToken:
        access, refresh = f"at-{secrets.token_hex(8)}", f"rt-{secrets.token_hex(8)}"
        self.access[access] = AccessToken(
            token=access, client_id=client_id, scopes=scopes, expires_at=int(time.time()) + LIFETIME, resource=resource
        )
        self.refresh[refresh] = RefreshToken(token=refresh, client_id=client_id, scopes=scopes, resource=resource)
        stats["issued"] += [access, refresh]
        return OAuthToken(
            access_token=access, token_type="Bearer", expires_in=LIFETIME, refresh_token=refresh, scope=" ".join(scopes)
        )


def main() -> None:
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(128)
    base = f"http://127.0.0.1:{sock.getsockname()[1]}"
    server = MCPServer(
        "guarded",
        auth_server_provider=Provider(),
        auth=AuthSettings(
            issuer_url=AnyHttpUrl(base),
            resource_server_url=AnyHttpUrl(f"{base}/mcp"),
            client_registration_options=ClientRegistrationOptions(enabled=True),
            validate_token_resource=True,
        ),
    )

    @server.tool()
    def whoami() -> str:
        """Says that the caller got in (and records, for the tests, with which access token)."""
        from mcp.server.auth.middleware.auth_context import get_access_token

        token = get_access_token()
        stats["called_with"].append(token.token if token is not None else None)
        return "signed in"

    @server.custom_route("/stats", methods=["GET"])
    async def show(request: Request) -> Response:
        return JSONResponse(stats)

    @server.custom_route("/consent", methods=["GET"])
    async def consent(request: Request) -> Response:
        allow, deny = (escape(request.query_params[k], quote=True) for k in ("allow", "deny"))
        page = (
            "<!doctype html><title>guarded: sign in</title><h1>tether wants to use your account</h1>"
            f"<a id=allow href='{allow}'>Allow</a> <a id=deny href='{deny}'>Deny</a>"
        )
        return HTMLResponse(page)

    config = uvicorn.Config(server.streamable_http_app(), log_level="warning", lifespan="on")
    print(f"port {sock.getsockname()[1]}", flush=True)
    uvicorn.Server(config).run(sockets=[sock])


if __name__ == "__main__":
    sys.exit(main())
