"""Checks every request passes before any route sees it (plain ASGI, so streams stay streams):

- the ``Host`` is this server's (without tokens, only loopback names: a web page elsewhere cannot
  reach a local server through DNS rebinding);
- a request that changes something (POST, PUT, PATCH, DELETE) from a browser comes from the page
  itself: an ``Origin`` (or ``Sec-Fetch-Site``) of another site is refused, and a body must be
  JSON, which a cross-site form cannot send without a preflight that CORS (off by default) fails;
- a body is no larger than ``max_body`` bytes, whether it says its length or not.

And :class:`Unstarted`: nothing is served before the app's lifespan has begun (an app that mounts
tether's does not run it unless told to).
"""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Callable, Mapping
from typing import Any

__all__ = ["LOCAL_ONLY", "Guard", "Lifespan", "Unstarted", "is_stop", "route_path"]

Scope = dict[str, Any]
Receive = Callable[[], Any]
Send = Callable[[dict[str, Any]], Any]

LOOPBACK_HOSTS = frozenset({"127.0.0.1", "localhost", "::1", "[::1]"})
_UNSAFE = frozenset({"POST", "PUT", "PATCH", "DELETE"})
# Where a page of the server's own posts a form (the sign-in confirmation; its key is its guard).
_FORM_PATHS = frozenset({"/v1/connections/callback"})
# The request state's key for whether the server has no tokens (loopback only), asked once per request.
LOCAL_ONLY = "tether_local_only"
_AWAY = "the database could not be reached; try again in a moment"
_STOP = re.compile(r"/v1/runs/[^/]+/cancel")


class Guard:
    def __init__(
        self,
        app: Any,
        *,
        max_body: int,
        allowed_hosts: list[str],
        cors_origins: list[str],
        local_only: Callable[[], bool],
        known_local: Callable[[], bool | None] = lambda: None,
    ) -> None:
        self.app = app
        self.max_body = max_body
        self.allowed_hosts = {h.lower() for h in allowed_hosts}
        self.cors_origins = set(cors_origins)
        self.local_only = local_only
        self.known_local = known_local  # local_only's last answer, for a Stop while the database is away

    def _local_only(self) -> tuple[bool, str | None]:
        """Whether the server has no tokens; or why the store cannot say now (503): it refuses for
        now (a database migrated by a newer tether), or its database is away."""
        try:
            return self.local_only(), None
        except Exception as exc:
            if getattr(exc, "unavailable", False):
                return False, str(exc)
            psycopg = sys.modules.get("psycopg")  # loaded by the Postgres stores when they are in use
            if psycopg is not None and isinstance(exc, psycopg.OperationalError):
                return False, _AWAY
            raise

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope.get("headers") or ()}
        local, away = self._local_only()
        if away is not None:
            # A Stop goes on (a run driven here stops without the database), as the server was last known.
            known = self.known_local() if away == _AWAY and is_stop(scope["method"], route_path(scope)) else None
            if known is None:
                await _reply(send, 503, "unavailable", away)
                return
            local = known
        scope.setdefault("state", {})[LOCAL_ONLY] = local  # asked once per request; the caller check reads it
        refusal = self._refusal(scope, headers, local)
        if refusal is not None:
            await _reply(send, *refusal)
            return
        length = headers.get("content-length")
        if length is not None and (not length.isdigit() or int(length) > self.max_body):
            await _reply(
                send,
                413,
                "too_large",
                f"the body is larger than this server accepts ({self.max_body:,} "
                "bytes; [serve] max_body_bytes in config.toml)",
            )
            return
        received = 0
        started = refused = False
        limit = self.max_body

        async def limited_receive() -> Any:
            nonlocal received, refused
            message = await receive()
            if message["type"] == "http.request" and not refused:
                received += len(message.get("body", b""))
                if received > limit:  # a body that did not say its length: answer now, stop the route
                    refused = True
                    if not started:
                        await _reply(
                            send, 413, "too_large", f"the body is larger than this server accepts ({limit:,} bytes)"
                        )
                    return {"type": "http.disconnect"}
            return message

        async def tracking_send(message: dict[str, Any]) -> None:
            nonlocal started
            if refused:
                return  # the 413 went out already; what the route says after it goes nowhere
            started = started or message["type"] == "http.response.start"
            await send(message)

        await self.app(scope, limited_receive, tracking_send)

    def _refusal(self, scope: Scope, headers: dict[str, str], local: bool) -> tuple[int, str, str] | None:
        host = headers.get("host", "")
        name = _host_name(host)
        if local and name not in LOOPBACK_HOSTS and name not in self.allowed_hosts:
            return (
                421,
                "wrong_host",
                f"this server has no tokens, so it answers only on loopback; {host!r} is not "
                "(create a token with tether serve token create NAME, or add the name to "
                "[serve] allowed_hosts)",
            )
        if self.allowed_hosts and not local and name not in self.allowed_hosts:
            return (421, "wrong_host", f"{host!r} is not one of this server's names ([serve] allowed_hosts)")
        if scope["method"] in _UNSAFE:
            origin = headers.get("origin")
            scheme = scope.get("scheme", "http")
            if origin is not None and origin != f"{scheme}://{host}" and origin not in self.cors_origins:
                return (403, "cross_site", _cross_site(scope["method"], origin, scheme, host))
            if origin is None and headers.get("sec-fetch-site") in ("cross-site", "same-site"):
                return (403, "cross_site", f"refused a {scope['method']} from another site")
            has_body = headers.get("content-length", "0") != "0" or "transfer-encoding" in headers
            ctype = headers.get("content-type", "").split(";")[0].strip().lower()
            form = route_path(scope) in _FORM_PATHS and ctype == "application/x-www-form-urlencoded"
            if has_body and ctype != "application/json" and not form:
                return (415, "unsupported_media_type", "send the body as JSON with Content-Type: application/json")
        return None


class Lifespan:
    """Whether the app's lifespan has begun (its start: runs a kill cut are ended, old event logs
    cut) and not yet ended (live runs stopped, saved ``interrupted``)."""

    def __init__(self) -> None:
        self.running = False


class Unstarted:
    """Answers every request 500 ``misconfigured`` while the app's lifespan is not running.

    Starlette and FastAPI do not run the lifespan of an app mounted in another: without it a run
    cut by a kill would never be ended (its stream open with nothing said, for ever), and a shutdown
    would not stop the live runs. So rather than serve half an app, it says how to run its lifespan."""

    def __init__(self, app: Any, *, lifespan: Lifespan) -> None:
        self.app = app
        self.lifespan = lifespan

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and not self.lifespan.running:
            await _reply(send, 500, "misconfigured", NOT_STARTED)
            return
        await self.app(scope, receive, send)


NOT_STARTED = (
    "tether's app is not running: its lifespan has not begun (or has ended). An app that mounts it "
    "does not run a mounted app's lifespan: give yours tether's, FastAPI(lifespan=tether_app.router."
    "lifespan_context), or enter tether_app.router.lifespan_context(tether_app) in your own lifespan "
    "(docs/server.md, In your own FastAPI app); an ASGI server must run with its lifespan on"
)


def _cross_site(method: str, origin: str, scheme: str, host: str) -> str:
    """Why a change from ``origin`` is refused. The page's own name under another scheme is most
    often this server behind a proxy that ends TLS without saying so: refused all the same (a page
    on that name over plain http is another origin), with what the proxy must send."""
    seen, _, name = origin.partition("://")
    if name == host and seen != scheme:
        return (
            f"refused a {method} from {origin}: this server was reached over {scheme}, not {seen}. Behind a "
            "proxy that ends TLS, have it send X-Forwarded-Proto (tether serve trusts it from "
            "the addresses in FORWARDED_ALLOW_IPS, loopback by default), or list the origin in "
            "[serve] cors_origins"
        )
    return f"refused a {method} from another site ({origin})"


def route_path(scope: Mapping[str, Any]) -> str:
    """The request's path as this app's routes see it: without the prefix an app that mounts this
    one put before it (``root_path``), as Starlette's router takes it off."""
    path, root = str(scope.get("path", "")), str(scope.get("root_path", ""))
    return path[len(root) :] if root and path.startswith(root + "/") else path


def is_stop(method: str, path: str) -> bool:
    """Whether a request is a Stop (``POST /v1/runs/{id}/cancel``)."""
    return method == "POST" and _STOP.fullmatch(path) is not None


def _host_name(host: str) -> str:
    host = host.strip().lower()
    if host.startswith("["):
        return host[: host.find("]") + 1] if "]" in host else host
    return host.rsplit(":", 1)[0] if host.count(":") == 1 else host


async def _reply(send: Send, status: int, code: str, message: str) -> None:
    body = json.dumps({"error": {"code": code, "message": message}}).encode()
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())],
        }
    )
    await send({"type": "http.response.body", "body": body})
