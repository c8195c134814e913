"""A streamable-HTTP MCP server with its own OAuth token endpoint, on a free loopback port, for
the connector tests. It prints ``port N`` on stdout once it listens.

* ``POST /token`` grants a refresh-token request (``refresh_token=refresh-1``): a new access token
  ``access-K`` each time, the same refresh token. It counts the grants and keeps the ``scope`` asked
  for (``None`` when the request had none); a scope outside ``GRANTED`` is refused ``invalid_scope``,
  as RFC 6749 §6 has it for scopes the refresh token was not issued with. It keeps the ``resource``
  values (RFC 8707) too.
* ``/mcp`` needs ``authorization: Bearer <the last token granted>``; any other token gets 401.
  So a token stored before the server started (``access-old``) is refused once, and works after a
  refresh.
* ``GET /stats`` says how many grants and how many 401s there were, and the valid token.

Run by the tests with ``sys.executable http_server.py``.
"""

from __future__ import annotations

import socket
import sys
from typing import Any

import anyio
import uvicorn
from mcp.server.mcpserver import MCPServer
from mcp_types import ToolAnnotations
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

server = MCPServer("inventory")
state: dict[str, Any] = {"grants": 0, "refused": 0, "valid": "", "scope": None, "resource": None}
GRANTED = {"stock.read", "stock.write"}  # what refresh-1 was issued with


@server.tool(annotations=ToolAnnotations(read_only_hint=True))
def stock(part: str) -> str:
    """How many of a part are in stock."""
    return f"{part}: 7 in stock (remote)"


@server.tool(annotations=ToolAnnotations(read_only_hint=True))
async def slow(seconds: float) -> str:
    """Waits, then answers."""
    await anyio.sleep(seconds)
    return "slow done"


@server.custom_route("/token", methods=["POST"])
async def token(request: Request) -> Response:
    form = await request.form()
    if form.get("grant_type") != "refresh_token" or form.get("refresh_token") != "refresh-1":
        return JSONResponse({"error": "invalid_grant"}, status_code=400)
    scope = form.get("scope")
    state["scope"] = scope
    state["resource"] = form.getlist("resource") or None
    if isinstance(scope, str) and not set(scope.split(" ")) <= GRANTED:
        return JSONResponse({"error": "invalid_scope"}, status_code=400)
    state["grants"] += 1
    state["valid"] = f"access-{state['grants']}"
    return JSONResponse({"access_token": state["valid"], "token_type": "Bearer", "expires_in": 3600})


@server.custom_route("/stats", methods=["GET"])
async def stats(request: Request) -> Response:
    return JSONResponse(state)


def guarded(app):  # type: ignore[no-untyped-def]
    """Only /mcp needs the token; a wrong one is answered 401 before the MCP app sees it."""

    async def asgi(scope, receive, send):  # type: ignore[no-untyped-def]
        if scope["type"] == "http" and scope["path"].startswith("/mcp"):
            headers = dict(scope["headers"])
            if not state["valid"] or headers.get(b"authorization") != f"Bearer {state['valid']}".encode():
                state["refused"] += 1
                await JSONResponse({"error": "invalid_token"}, status_code=401)(scope, receive, send)
                return
        await app(scope, receive, send)

    return asgi


def main() -> None:
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(128)  # connections wait in the backlog until uvicorn accepts them
    # `http_server.py sse`: the legacy HTTP+SSE transport (GET /sse, POST /messages/), without tokens.
    app = server.sse_app() if sys.argv[1:] == ["sse"] else guarded(server.streamable_http_app())
    config = uvicorn.Config(app, log_level="warning", lifespan="on")
    print(f"port {sock.getsockname()[1]}", flush=True)
    uvicorn.Server(config).run(sockets=[sock])


if __name__ == "__main__":
    sys.exit(main())
