"""Credentials for providers: an API key, nothing (a local server), or OAuth2 tokens.

OAuth tokens live in ``$TETHER_HOME/auth/<endpoint>.json`` with file mode 0600. They are refreshed
with the standard refresh-token grant (RFC 6749 §6) shortly before they expire, and once more when a
provider answers 401. Secrets never enter messages, traces or errors: errors name the variable or
the file to fix, never the value.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Protocol

from tether.errors import AuthError, ConfigError
from tether.fileio import atomic_write, open_own, private_dir, read_own

__all__ = ["ApiKey", "Credentials", "NoAuth", "OAuthCredentials", "is_loopback", "save_oauth_tokens"]

REFRESH_MARGIN_S = 60.0


class Credentials(Protocol):
    hint: str  # what a person must fix when authentication fails, without the secret

    async def headers(self) -> dict[str, str]: ...

    async def refresh(self) -> bool:
        """After a 401: try to obtain fresh credentials once; False when there is nothing to do."""
        ...


class NoAuth:
    """No credentials: a local server, or an endpoint configured without a key. ``hint`` says so
    when the server answers 401 anyway, naming where a key would come from."""

    def __init__(self, hint: str = "whether the server needs a key: none was sent") -> None:
        self.hint = hint

    async def headers(self) -> dict[str, str]:
        return {}

    async def refresh(self) -> bool:
        return False


class ApiKey:
    """A key sent in a header. Space around it (the line break of a key file, a ``.env`` with CRLF
    line ends) is dropped; a key with a character no header can carry inside it is a
    :class:`ConfigError` naming ``hint``, never the key: sent, it would fail every request with the
    header, key included, in the error."""

    def __init__(self, value: str, *, hint: str, header: str = "authorization", scheme: str = "Bearer") -> None:
        value = value.strip()
        bad = next((i for i, ch in enumerate(value) if not "!" <= ch <= "~"), None)
        if not value:
            raise ConfigError(f"{hint} is blank: set it to the key")
        if bad is not None:
            raise ConfigError(
                f"{hint} has a character an HTTP header cannot carry (a space, a control or a non-ASCII "
                f"character) at position {bad + 1}: copy the key again"
            )
        self._value = value
        self.hint = hint
        self.header = header  # the header it goes in (a base URL's user and password cannot share it)
        self._scheme = scheme

    async def headers(self) -> dict[str, str]:
        return {self.header: f"{self._scheme} {self._value}" if self._scheme else self._value}

    async def refresh(self) -> bool:
        return False

    def __repr__(self) -> str:  # never show the key
        return f"ApiKey(hint={self.hint!r})"


def is_loopback(host: str) -> bool:
    """Whether ``host`` is this machine (``localhost``, 127.0.0.0/8, ``::1``, ``0.0.0.0``)."""
    import ipaddress

    host = host.strip("[]").lower()
    if host == "localhost" or host.endswith(".localhost"):
        return True
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return False
    return address.is_loopback or address.is_unspecified


def canonical_resource(url: str) -> str:
    """The canonical URI of a server, as the MCP authorization spec names it for RFC 8707's
    ``resource``: scheme and host in lower case, no fragment, no trailing slash."""
    from urllib.parse import urlsplit, urlunsplit

    parts = urlsplit(url)
    return urlunsplit((parts.scheme.lower(), parts.netloc.lower(), parts.path.rstrip("/"), parts.query, ""))


def save_oauth_tokens(path: Path, tokens: dict[str, Any]) -> None:
    """Write a token file atomically, readable only by its owner."""
    private_dir(path.parent)
    atomic_write(path, json.dumps(tokens).encode())


GRANT_S = 60.0  # the whole token request, however slowly its answer trickles in
LOCK_WAIT_S = 90.0  # a refresh takes seconds; a holder this slow is stuck (a stopped process)


def _good_for(tokens: dict[str, Any], seconds: float) -> bool:
    """Whether the access token is there and lives at least ``seconds`` more."""
    return bool(tokens.get("access_token")) and float(tokens.get("expires_at") or 0) - time.time() > seconds


def _lifetime(expires_in: Any) -> float:
    """An access token's lifetime in seconds from the token endpoint's ``expires_in``: an hour when
    it is left out or is no positive number ("one hour", NaN, -30). It is read after the endpoint
    rotated the refresh token: raising here would lose the new one before it is saved."""
    import math

    try:
        seconds = float(expires_in)
    except (TypeError, ValueError):
        return 3600.0
    return seconds if math.isfinite(seconds) and seconds > 0 else 3600.0


async def _lock_tokens(path: Path) -> int:
    """An exclusive lock on ``<path>.lock`` (a descriptor to close), waited for without blocking
    the event loop, given up cleanly when the waiting task is cancelled, and at most
    ``LOCK_WAIT_S``: then an error that names the lock's file."""
    import asyncio
    import fcntl

    lock_path = path.with_name(path.name + ".lock")
    try:  # a link, a pipe or a folder put at its name is refused
        fd = open_own(lock_path, os.O_RDWR | os.O_CREAT)
    except OSError as exc:
        raise ConfigError(
            f"cannot open the OAuth tokens' lock {lock_path}: {exc.strerror or exc}; move it away and retry"
        ) from None
    deadline = time.monotonic() + LOCK_WAIT_S
    try:
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                return fd
            except BlockingIOError:
                if time.monotonic() > deadline:
                    raise AuthError(
                        f"another process has been refreshing the OAuth tokens for {LOCK_WAIT_S:.0f} s and holds "
                        f"{lock_path}; if no tether process is running, retry (a stopped one may hold it)"
                    ) from None
                await asyncio.sleep(0.02)
    except BaseException:
        os.close(fd)
        raise


class OAuthCredentials:
    """Bearer tokens from a token file, refreshed with the refresh-token grant."""

    header = "authorization"  # the header the token goes in

    def __init__(
        self,
        token_path: Path,
        token_url: str,
        client_id: str | None = None,
        *,
        scopes: Sequence[str] = (),
        resource: str | None = None,
    ) -> None:
        self.token_path = token_path
        self.token_url = token_url
        self.client_id = client_id
        self.scopes = tuple(scopes)  # sent with each refresh (RFC 6749 §6); none: the grant's own
        self.resource = resource  # the server the token is for (RFC 8707), sent with each refresh
        self.hint = f"the OAuth tokens in {token_path} (sign in again, or fix token_url in config.toml)"
        self.refreshes = 0
        self._sent: str | None = None  # the access token last handed out, for refresh() after a 401

    def _load(self) -> dict[str, Any]:
        try:  # a link or a named pipe put at the name is refused (never followed, never waited on)
            data = json.loads(read_own(self.token_path).decode("utf-8"))
        except FileNotFoundError as exc:
            raise ConfigError(
                f"no OAuth tokens at {self.token_path}: create it with "
                "`tether auth import ENDPOINT --refresh-token TOKEN`"
            ) from exc
        except OSError as exc:
            raise ConfigError(
                f"cannot read the OAuth tokens at {self.token_path}: {exc.strerror or exc}. It must be a regular "
                "file (not a link, a named pipe or a folder): move it away and sign in again with "
                "`tether auth import ENDPOINT --refresh-token TOKEN`"
            ) from None
        except ValueError as exc:
            raise ConfigError(f"{self.token_path} is not valid JSON: {exc}") from exc
        if not isinstance(data, dict):
            raise ConfigError(f"{self.token_path} must hold a JSON object")
        return data

    async def headers(self) -> dict[str, str]:
        tokens = self._load()
        if not _good_for(tokens, REFRESH_MARGIN_S):
            tokens = await self._refresh(tokens.get("access_token"))
        self._sent = str(tokens["access_token"])
        return {"authorization": f"Bearer {self._sent}"}

    async def refresh(self) -> bool:
        # The token this object last sent is the one refused; none sent yet: refresh regardless.
        await self._refresh(self._sent, force=self._sent is None)
        return True

    async def _refresh(self, stale: str | None, *, force: bool = False) -> dict[str, Any]:
        """New tokens for the access token ``stale`` (expired, or refused with a 401). One refresh
        at a time per token file, across tasks, threads and processes: a rotating refresh token
        is good for one use, so whoever waited for another refresher takes the tokens it wrote
        instead of spending the old refresh token (the server would refuse it, and the run with
        it). The refresh itself runs to its end and saves what it got even when the task that
        asked is cancelled: a rotated refresh token that was never saved would lock everyone out."""
        import asyncio

        lock = await _lock_tokens(self.token_path)

        async def under_lock() -> dict[str, Any]:
            try:
                tokens = self._load()
                if not force and tokens.get("access_token") != stale and _good_for(tokens, 0):
                    return tokens  # refreshed by someone else while this one waited (however short it lives)
                return await self._grant(tokens)
            finally:
                os.close(lock)

        return await asyncio.shield(asyncio.ensure_future(under_lock()))

    async def _grant(self, tokens: dict[str, Any]) -> dict[str, Any]:
        import asyncio

        import httpx

        refresh_token = tokens.get("refresh_token")
        if not refresh_token:
            raise AuthError(f"the access token expired and there is no refresh token; check {self.hint}")
        form = {"grant_type": "refresh_token", "refresh_token": refresh_token}
        if self.client_id:
            form["client_id"] = self.client_id
        if self.scopes:  # space-separated (RFC 6749 §3.3); left out, never empty, when none are set
            form["scope"] = " ".join(self.scopes)
        if self.resource:  # RFC 8707 §2: a token bound to this server, not usable at another
            form["resource"] = self.resource
        from urllib.parse import urlsplit

        local = is_loopback(urlsplit(self.token_url).hostname or "")  # reached directly, as a provider on this machine
        try:
            async with httpx.AsyncClient(timeout=30, trust_env=not local) as client:
                response = await asyncio.wait_for(client.post(self.token_url, data=form), GRANT_S)
        except TimeoutError as exc:
            raise AuthError(f"the token endpoint {self.token_url} did not answer within {GRANT_S:.0f} s") from exc
        except httpx.HTTPError as exc:
            raise AuthError(f"could not reach the token endpoint {self.token_url}: {type(exc).__name__}") from exc
        if response.status_code >= 400:
            raise AuthError(
                f"the token endpoint refused the refresh (HTTP {response.status_code}); check {self.hint}",
                status=response.status_code,
            )
        try:
            fresh = response.json()
            access = fresh["access_token"]
        except (ValueError, KeyError, TypeError) as exc:
            raise AuthError(f"the token endpoint's answer has no access_token; check {self.hint}") from exc
        tokens = {
            "access_token": access,
            "refresh_token": fresh.get("refresh_token") or refresh_token,
            "expires_at": time.time() + _lifetime(fresh.get("expires_in")),
        }
        save_oauth_tokens(self.token_path, tokens)
        self.refreshes += 1
        return tokens
