"""Each user's own connections: a signed-in user connects their own account for an MCP server that
signs people in with OAuth (``[mcp.NAME] auth = "oauth"``, no ``token_url``), and that user's runs
call the server with that user's tokens (tether.connectors._accounts).

* ``GET /v1/connections``: the servers a user can connect, and whether they have;
* ``POST /v1/connections/{name}``: starts the flow (discovery, registration, PKCE, as ``tether mcp
  login``) and answers the authorization page's address for the user's browser;
* ``GET /v1/connections/callback``: where the authorization server sends the browser back; its
  ``state`` (unguessable, one use, bound to the user who started) says whose flow it finishes. The
  browser that started the flow (the page's ``POST``) holds a key in a cookie, and a callback that
  brings it finishes at once; one that does not (the flow was started through the API, or in
  someone else's browser: a user could send another person their sign-in link and get that
  person's account) shows a page naming the user the account would be connected to, and finishes
  only when the person confirms it there (``POST /v1/connections/callback``, with a one-use key
  only that page holds);
* ``DELETE /v1/connections/{name}``: forgets the user's tokens.

No route ever answers a token.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import html
import secrets
import time
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qs, urlparse

from tether.config import Settings
from tether.errors import ConfigError, TetherError

__all__ = ["BROWSER_COOKIE", "Confirm", "Connections", "browser_key", "confirm_page"]

FLOW_TIMEOUT_S = 300.0
BROWSER_COOKIE = "tether_connect"  # the key of the browser that started a flow (HttpOnly, /v1/connections)


@dataclass
class _Flow:
    user: str
    server: str
    started: float
    code: asyncio.Future[Any] = field(repr=False)
    task: asyncio.Task[None] | None = field(default=None, repr=False)
    browser: str = field(default="", repr=False)  # sha256 of the starting browser's key ("" through the API)
    held: dict[str, str] | None = field(default=None, repr=False)  # the callback's query, until confirmed
    confirm: str = field(default="", repr=False)  # sha256 of the confirmation page's one-use key


class Confirm(Exception):
    """The callback came to a browser that did not start the flow: the person must confirm, on a
    page naming ``user``, that ``server``'s account is to be connected to that user. ``key`` is
    the one-use key the confirmation page posts back."""

    def __init__(self, user: str, server: str, state: str, key: str) -> None:
        super().__init__(f"connecting {server} for {user} waits for the person to confirm it")
        self.user, self.server, self.state, self.key = user, server, state, key


def browser_key(cookie: str | None) -> str:
    """The key a browser keeps for its flows: the one its cookie holds, or a new one."""
    return cookie if cookie and len(cookie) == 43 and cookie.isascii() else secrets.token_urlsafe(32)


def _digest(key: str) -> str:
    return hashlib.sha256(key.encode()).hexdigest()


class KeyUnusable(TetherError):
    """The connections key cannot be used (its file became readable by others, say): the server's
    setup is at fault, and the answer says what to fix."""


class Connections:
    """The flows under way, by their ``state``, on the server's event loop."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.flows: dict[str, _Flow] = {}

    def servers(self) -> list[str]:
        """The MCP servers a user connects their own account for."""
        return [
            name
            for name, table in self.settings.mcp.items()
            if table.enabled and table.auth == "oauth" and table.token_url is None and table.url
        ]

    def check_key(self) -> None:
        """The connections key, made if missing and checked (``ConfigError``): a server whose key
        other users could read does not start, rather than failing each request."""
        if self.servers():
            from tether.connectors._accounts import connection_key

            connection_key(self.settings.home)

    def _storage(self, user: str, server: str) -> Any:
        from tether.connectors._acting import LOCAL_USER

        home = self.settings.home
        if user == LOCAL_USER:  # a server without tokens: the tokens its runs use, `tether mcp login`'s
            from tether.connectors.mcp import token_path
            from tether.server._local_tokens import LoginTokenStorage

            return LoginTokenStorage(token_path(home, server))
        from tether.connectors._accounts import SealedTokenStorage, connection_key, user_token_path

        try:
            key = connection_key(home)
        except ConfigError as exc:  # the server's setup, not the request: not a 400 or a 404
            raise KeyUnusable(str(exc)) from None
        return SealedTokenStorage(user_token_path(home, user, server), key)

    def listing(self, user: str) -> list[dict[str, Any]]:
        return [{"server": name, "connected": self._storage(user, name).connected()} for name in self.servers()]

    def forget(self, user: str, server: str) -> bool:
        self._known(server)
        forgot: bool = self._storage(user, server).forget()
        return forgot

    def _known(self, server: str) -> None:
        if server not in self.servers():
            offered = ", ".join(self.servers()) or "none"
            raise ConfigError(
                f'no MCP server {server!r} to connect an account for (servers with auth = "oauth": {offered})'
            )

    async def start(self, user: str, server: str, callback_url: str, browser: str = "") -> str | None:
        """Start ``user``'s flow for ``server``: the authorization page's address, or None when no
        page is needed (the user's tokens still work, or were refreshed: connected already).
        ``browser`` is the key the starting browser keeps in its cookie (see :func:`browser_key`)."""
        from tether.connectors import McpConnector
        from tether.connectors._oauth import oauth_provider

        self._known(server)
        self._expire()
        self._replace(user, server)
        table = self.settings.mcp[server]
        page: asyncio.Future[str] = asyncio.get_running_loop().create_future()
        flow = _Flow(user, server, time.monotonic(), asyncio.get_running_loop().create_future())
        flow.browser = _digest(browser) if browser else ""

        async def open_page(url: str) -> None:
            state = (parse_qs(urlparse(url).query).get("state") or [""])[0]
            if not state:
                raise ConfigError(f"the authorization server of {server} was sent no state")
            self.flows[state] = flow
            page.set_result(url)

        async def get_code() -> Any:
            return await asyncio.wait_for(flow.code, FLOW_TIMEOUT_S)

        storage = self._storage(user, server)
        storage.keep_client_for(callback_url)
        connector = McpConnector(server, table.model_dump(), home=self.settings.home)
        connector.oauth_flow = oauth_provider(
            server,
            str(table.url),
            storage.path,
            list(table.scopes),
            storage=storage,
            redirect_uri=callback_url,
            open_page=open_page,
            get_code=get_code,
        )
        flow.task = asyncio.create_task(self._sign_in(connector))
        either: set[asyncio.Future[Any]] = {page, flow.task}
        done, _ = await asyncio.wait(either, timeout=60, return_when=asyncio.FIRST_COMPLETED)
        if page in done:
            return page.result()
        if flow.task in done and flow.task.cancelled():  # _replace: Connect pressed again meanwhile
            raise ConfigError(f"a newer sign-in for {server} replaced this one: follow that one")
        if flow.task in done and flow.task.exception() is None:
            return None  # signed in with what the user already had: no page to open
        flow.task.cancel()
        if flow.task in done and flow.task.exception() is not None:
            raise ConfigError(f"connecting to {server} failed: {flow.task.exception()}")
        raise ConfigError(f"connecting to {server} failed: its authorization server did not answer within 60 s")

    @staticmethod
    async def _sign_in(connector: Any) -> None:
        await connector.start()  # the SDK's flow: discovery, registration, the code, the tokens
        await connector.stop()

    async def finish(self, query: dict[str, str], browser: str | None = None) -> str:
        """The browser is back with ``code`` and ``state``: finish that flow; the server's name.
        Raises :class:`Confirm` when ``browser`` (its cookie's key) is not the one that started it."""
        self._expire()
        state = query.get("state", "")
        flow = self.flows.get(state)
        if flow is None or flow.task is None or flow.held is not None:
            raise ConfigError("this sign-in is unknown or already used: start it again from the page")
        started_here = bool(flow.browser and browser) and secrets.compare_digest(flow.browser, _digest(browser or ""))
        if "code" in query and not started_here:
            key = secrets.token_urlsafe(32)
            flow.held, flow.confirm = dict(query), _digest(key)
            raise Confirm(flow.user, flow.server, state, key)
        del self.flows[state]
        return await self._complete(flow, query)

    async def confirm(self, state: str, key: str) -> str:
        """The person confirmed, on the page :class:`Confirm` showed, whose account this is."""
        self._expire()
        flow = self.flows.get(state)
        if flow is None or flow.held is None or not secrets.compare_digest(flow.confirm, _digest(key)):
            raise ConfigError("this sign-in is unknown or already used: start it again from the page")
        del self.flows[state]
        return await self._complete(flow, flow.held)

    async def _complete(self, flow: _Flow, query: dict[str, str]) -> str:
        from mcp.shared.auth import AuthorizationCodeResult

        assert flow.task is not None
        if "code" not in query:
            flow.task.cancel()
            why = query.get("error_description") or query.get("error") or "no code came back"
            raise ConfigError(f"connecting to {flow.server} did not succeed: {why}")
        flow.code.set_result(AuthorizationCodeResult(code=query["code"], state=query["state"], iss=query.get("iss")))
        try:
            await asyncio.wait_for(flow.task, 60)
        except (TetherError, TimeoutError, Exception) as exc:
            raise ConfigError(f"connecting to {flow.server} did not succeed: {exc}") from None
        return flow.server

    def _replace(self, user: str, server: str) -> None:
        """One sign-in per user and server: a new one ends the user's unfinished one (its page then
        says to start again), so Connect pressed again and again holds one connection, not one each."""
        for state, flow in list(self.flows.items()):
            if flow.user == user and flow.server == server:
                del self.flows[state]
                if flow.task is not None:
                    flow.task.cancel()

    def _expire(self) -> None:
        now = time.monotonic()
        for state, flow in list(self.flows.items()):
            if now - flow.started > FLOW_TIMEOUT_S:
                del self.flows[state]
                if flow.task is not None:
                    flow.task.cancel()

    def close(self) -> None:
        for flow in self.flows.values():
            if flow.task is not None:
                with contextlib.suppress(Exception):
                    flow.task.cancel()
        self.flows.clear()


def confirm_page(asked: Confirm) -> str:
    """The page a callback without the starting browser's key shows: whose account this becomes."""
    user, server = html.escape(asked.user), html.escape(asked.server)
    return (
        f"<!doctype html><meta charset=utf-8><title>tether: connect {server} for {user}?</title>"
        "<link rel=icon href='data:,'>"  # no /favicon.ico asked of the host (not tether's under a prefix)
        f"<p>You signed in to <b>{server}</b>. Connecting makes that account the one the runs of the "
        f"tether user <b>{user}</b> act with.</p>"
        "<p>The sign-in was started somewhere else than this browser (through the API, or by "
        "someone who sent you its link). Connect only if you are that user.</p>"
        # Relative (as the links below): tether's app may be mounted under a prefix.
        "<form method=post action='callback'>"
        f"<input type=hidden name=state value='{html.escape(asked.state, quote=True)}'>"
        f"<input type=hidden name=confirm value='{html.escape(asked.key, quote=True)}'>"
        f"<button type=submit>Connect to {user}</button></form>"
        "<p><a href='../../'>Do not connect</a> (the sign-in lapses in five minutes)</p>"
    )


def finished_page(said: str, ok: bool) -> str:
    """What the browser shows after the authorization server sent it back."""
    title = "Connected" if ok else "Not connected"
    return (
        f"<!doctype html><meta charset=utf-8><title>tether: {title}</title>"
        "<link rel=icon href='data:,'>"
        f"<p>{html.escape(said)}</p><p><a href='../../'>Back to tether</a></p>"
    )
