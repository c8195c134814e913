"""The HTTP seam every wire module shares: one pooled httpx client, credentials, error translation,
and the reading of replies (JSON bodies and server-sent event streams).

Nothing retries here: retries are the loop's policy (see :mod:`tether.harness.retry`), so no
request is ever repeated silently underneath it. The single exception is authentication: on a 401
the credentials get one chance to refresh (an OAuth token that expired early) before the error is
raised.

Every third-party exception raised while sending a request or reading its answer leaves this
module as a classified :class:`~tether.errors.ProviderError` (:func:`transport_error`), and every
string a reply carries has its lone surrogates replaced (:func:`decode_json`). A server may echo
the key it was sent back in an error body: :meth:`HttpTransport.scrubbing` takes the credentials
out of every error before it reaches a reason, a trace or a saved run.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
import re
import time
import weakref
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Sequence
from typing import Any, Protocol

from tether.errors import (
    BadRequestError,
    ConfigError,
    ProviderError,
    ResponseError,
    RetryableError,
    UnreachableError,
    classify_http_error,
)
from tether.messages import AssistantMessage, ImagePart, Message, clean_value
from tether.providers.auth import Credentials, is_loopback
from tether.providers.base import StreamReasoning, StreamText, incomplete_stream

__all__ = [
    "AnswerTimedOut",
    "HttpTransport",
    "ReplyAssembler",
    "assembled",
    "checked_base_url",
    "clean_arguments",
    "close_clients",
    "decode_json",
    "env_proxy",
    "images_refused",
    "model_ids",
    "pooled_client",
    "read_json",
    "scrubbed",
    "stream_reply",
    "transport_error",
]


class AnswerTimedOut(RetryableError):
    """The request went out and its answer did not come within the read timeout (the provider's
    ``timeout_s``). A stream's server answers at once and writes as it goes, so this says it has
    not begun; a reply not streamed is written whole first, and may be written, and billed, still."""


def transport_error(exc: BaseException, provider: str, doing: str, *, host: str = "", via: str = "") -> ProviderError:
    """The one translation of a failure while sending a request or reading its answer.

    * A connection that could not be made (a name that does not resolve, nothing listening, a
      connect timeout): :class:`UnreachableError` naming ``host``: nothing reached the server, so
      it says nothing about the credentials. With a proxy (``via``) the connection made is to the
      proxy, so the proxy is what could not be reached, and is named.
    * Timeouts, dropped connections, broken HTTP framing (``httpx.TransportError``) and
      ``OSError``: :class:`RetryableError`. The same request can succeed on a new connection.
    * A body that cannot be decoded (``httpx.DecodingError``: a garbled gzip body), JSON that
      does not parse, any other httpx error: :class:`ResponseError`. TCP and TLS deliver bytes
      intact, so such bytes are what the server or a proxy produced, and asking again (and paying
      again) would get the same garbage: the run fails with the reason instead.
    """
    import httpx

    kind = _describe(exc)
    if isinstance(exc, httpx.ConnectError | httpx.ConnectTimeout) and via:
        return UnreachableError(
            f"{provider}: cannot reach the proxy {via}, which the environment (HTTPS_PROXY, HTTP_PROXY or "
            f"ALL_PROXY) puts between tether and {host or 'the host'} ({kind}). Check the proxy, or leave the "
            "host out of it with NO_PROXY.",
            provider=provider,
            host=_host(via),
        )
    if isinstance(exc, httpx.ConnectError | httpx.ConnectTimeout):
        where = host or "the host"
        if "ssl" in kind.lower() or "certificate" in kind.lower():
            advice = "The TLS handshake failed: check the URL's scheme and the server's certificate."
        else:
            advice = "Check the host name, that the server is running and listening there, and the network."
        return UnreachableError(f"{provider}: cannot reach {where} ({kind}). {advice}", provider=provider, host=host)
    if isinstance(exc, httpx.ProxyError):
        return _proxy_refused(exc, provider, host, via)
    if isinstance(exc, httpx.ReadTimeout):
        return AnswerTimedOut(f"{provider}: timed out {doing} ({kind})", provider=provider)
    if isinstance(exc, httpx.TimeoutException):
        return RetryableError(f"{provider}: timed out {doing} ({kind})", provider=provider)
    if isinstance(exc, httpx.TransportError | OSError):
        return RetryableError(f"{provider}: the connection failed {doing} ({kind})", provider=provider)
    return ResponseError(f"{provider}: the answer could not be read {doing} ({kind})", provider=provider)


# What an error says when a server refuses a request's images (a model without vision): OpenAI's
# "image_url is only supported by certain models", vLLM's "At most 0 image(s) may be provided",
# llama.cpp's "image input is not supported" (as HTTP 500), Ollama's "does not support images".
_IMAGE_WORDS = ("image", "vision", "multimodal", "mmproj")


@contextlib.contextmanager
def images_refused(provider: str, model: str, messages: Sequence[Message]) -> Iterator[None]:
    """A request carrying images that the server refuses (400, 422, or llama.cpp's 500) with an
    error about them fails at once, saying the model takes no images and what to do: as sent, it
    read as the server's JSON, or (llama.cpp) as a failure retried four times, and the next request
    carries the same images."""
    try:
        yield
    except (BadRequestError, RetryableError) as exc:
        status = exc.status
        said = f"{exc} {exc.body}".lower()
        if status not in (400, 422, 500) or not any(w in said for w in _IMAGE_WORDS) or not _has_images(messages):
            raise
        raise BadRequestError(
            f"{provider}: the model {model} refused the request's images (HTTP {status}: {_detail(exc)}): it may "
            "not read images. Use a model that does, or tools that return text instead of images.",
            provider=provider,
            status=status,
            body=exc.body,
        ) from exc


def _has_images(messages: Sequence[Message]) -> bool:
    return any(isinstance(p, ImagePart) for m in messages for p in m.content)


def _detail(exc: ProviderError) -> str:
    """The error's own message, when its body is JSON that has one; else the body's first words."""
    try:
        data = json.loads(exc.body)
    except ValueError:
        data = None
    error = data.get("error", data) if isinstance(data, dict) else None
    message = error.get("message") if isinstance(error, dict) else None
    text = message if isinstance(message, str) else exc.body or str(exc)
    return " ".join(text.split())[:300]


def _proxy_refused(exc: BaseException, provider: str, host: str, via: str) -> ProviderError:
    """The proxy answered the tunnel to ``host`` with an error status (``407 Proxy Authentication
    Required``, ``403 Forbidden``, ``502 Bad Gateway``). A 4xx is the proxy's decision, the same on
    every attempt: it fails at once, saying what to check; a 5xx may pass, and is retried."""
    said = f"the proxy {via or 'set in the environment'} answered {exc} to the connection to {host or 'the host'}"
    words = str(exc).split(maxsplit=1)
    status = int(words[0]) if words and words[0].isdigit() else None
    if status is not None and 400 <= status < 500:
        return BadRequestError(
            f"{provider}: {said}; retrying will not help. Check the user and password in the proxy's URL "
            "(HTTPS_PROXY, HTTP_PROXY or ALL_PROXY) and whether it lets this host through, or leave the host "
            "out of it with NO_PROXY.",
            provider=provider,
            status=status,
        )
    return RetryableError(f"{provider}: {said}", provider=provider, status=status)


def _describe(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__


def _failures() -> tuple[type[BaseException], ...]:
    """What the network and the bytes on it can raise (bugs, such as a TypeError, are not here)."""
    import httpx

    return (httpx.HTTPError, OSError, ValueError)


_ESCAPED_SURROGATE = re.compile(r"\\u[dD][89a-fA-F][0-9a-fA-F]{2}")


def decode_json(raw: str, provider: str, what: str) -> Any:
    """Parse ``raw`` (a body or a stream event) with every string's lone surrogates replaced; a
    :class:`ResponseError` when it is not JSON."""
    try:
        value = json.loads(raw)
        # Only a \\uD8xx-\\uDFxx escape makes a surrogate: skip the walk for the other 99.9 %.
        return clean_value(value) if _ESCAPED_SURROGATE.search(raw) else value
    except (ValueError, RecursionError) as exc:
        raise ResponseError(
            f"{provider}: malformed {what} (not JSON): {raw[:200]}", provider=provider, body=raw[:500]
        ) from exc


def clean_arguments(arguments: str) -> str:
    """A tool call's JSON arguments without lone surrogates: they arrive as escapes *inside* the
    arguments' own JSON text, so they survive :func:`decode_json` and would reach the tool."""
    if not _ESCAPED_SURROGATE.search(arguments):
        return arguments
    try:
        value = json.loads(arguments)
    except (ValueError, RecursionError):
        return arguments  # not JSON: the tool layer answers it with an error; nothing to clean
    cleaned = clean_value(value)
    # Escaped pairs (an emoji) decode whole: only a lone surrogate makes the text change.
    return arguments if cleaned == value else json.dumps(cleaned, ensure_ascii=False)


class HttpTransport:
    def __init__(
        self,
        provider: str,
        base_url: str,
        credentials: Credentials,
        *,
        headers: dict[str, str] | None = None,
        timeout_s: float = 600.0,
        transport: Any = None,
    ) -> None:
        self.provider = provider
        # A query in the base URL (Azure's ?api-version=...) goes with every request: joined to
        # the URL as written, the paths would land inside it.
        base, _, self._query = base_url.partition("?")
        # A user and password in the base URL (a gateway behind HTTP Basic auth) are sent as the
        # Authorization header by tether itself, not left in the URL for httpx, which put them
        # there silently, over the Bearer key, and kept them out of what errors are scrubbed of.
        self._basic, userinfo_secrets = basic_auth(base)
        self.base_url = without_userinfo(base).rstrip("/")
        self.host = _host(self.base_url)
        self.proxy = env_proxy(self.base_url) if transport is None else ""
        self.credentials = credentials
        self._headers = {"content-type": "application/json", **(headers or {})}
        self.timeout_s = timeout_s  # the read timeout; also how long a stream may send only keep-alives
        self._transport = transport  # an httpx transport instead of the network (tests, custom routing)
        self._client: Any = None
        self._secrets: tuple[str, ...] = ()  # the credentials last sent, taken out of errors
        self._userinfo_secrets = userinfo_secrets  # the URL's password, as written and as sent
        if self._basic and getattr(credentials, "header", "").lower() == "authorization":
            raise self._clash(credentials)

    def _http(self) -> Any:
        if self._transport is None:
            return pooled_client(self.base_url, self._headers, self.timeout_s)
        if self._client is None:
            import httpx

            self._client = httpx.AsyncClient(
                base_url=self.base_url, headers=self._headers, timeout=self.timeout_s, transport=self._transport
            )
        return self._client

    async def request(self, method: str, path: str, body: bytes | None = None, *, stream: bool = False) -> Any:
        """Send; return the response (open, when ``stream``; read, otherwise) or raise a classified
        error."""
        with self.scrubbing():
            for attempt in (1, 2):
                # Always sent as a stream: the status is known before the body is read, so an error
                # status is reported as such even when its body turns out to be unreadable.
                response = await self._send_once(method, path, body)
                if 300 <= response.status_code < 400:
                    raise await self._redirected(response, path)
                if response.status_code < 400:
                    if not stream:
                        await self._read(response)
                    return response
                text = await self._error_text(response)
                if response.status_code == 401 and attempt == 1 and await self.credentials.refresh():
                    continue
                note = self._not_found_note(path) if response.status_code == 404 else ""
                raise classify_http_error(
                    self.provider,
                    response.status_code,
                    text,
                    dict(response.headers),
                    key_hint=self.credentials.hint,
                    note=note,
                )
        raise AssertionError("unreachable")

    @contextlib.contextmanager
    def scrubbing(self) -> Iterator[None]:
        """Take the credentials this transport sent out of any :class:`ProviderError` raised inside:
        its message, body and headers. A server may quote the key back ("Incorrect API key
        provided: sk-..."), and the message becomes the run's reason, its trace and its saved
        state."""
        try:
            yield
        except ProviderError as exc:
            self._scrub(exc)
            raise

    def _scrub(self, exc: ProviderError) -> None:
        if not self._secrets:
            return
        secrets = self._secrets
        exc.args = (scrubbed(str(exc), secrets),)
        exc.body = scrubbed(exc.body, secrets)
        exc.headers = {k: scrubbed(v, secrets) for k, v in exc.headers.items()}

    async def _redirected(self, response: Any, path: str) -> ProviderError:
        """A redirect is never followed: the key would go wherever it points (another host, plain
        HTTP), and a POST turned into a GET by a 301 loses its body. It is a wrong base URL, said
        once with the place the server points to, and not retried."""
        await self._error_text(response)
        to = without_userinfo(response.headers.get("location") or "") or "no location given"
        url = without_userinfo(self.base_url) + path
        return BadRequestError(
            f"{self.provider}: HTTP {response.status_code}: {url} redirects to {to}. tether follows no "
            "redirect (the key would go along): set the base URL to where the API really is.",
            provider=self.provider,
            status=response.status_code,
            headers=dict(response.headers),
        )

    def _not_found_note(self, path: str) -> str:
        """Where a 404 came from: a base URL with one ``/v1`` too many or too few shows here."""
        url = without_userinfo(self.base_url) + path
        hint = ""
        if "/v1" not in url.split("?")[0]:
            hint = " (OpenAI-compatible base URLs usually end in /v1)"
        return f" [at {url}{hint}]"

    async def _send_once(self, method: str, path: str, body: bytes | None) -> Any:
        client = self._http()
        try:
            headers = await self.credentials.headers()
            if self._basic:
                if any(name.lower() == "authorization" for name in headers):
                    raise self._clash(self.credentials)
                headers = {**headers, "authorization": self._basic}
            # The ones sent before stay too: a request still out may have carried a token since refreshed.
            self._secrets = _secret_values(headers, (*self._userinfo_secrets, *self._secrets))
            if self._query:
                path += ("&" if "?" in path else "?") + self._query
            req = client.build_request(method, path, content=body, headers=headers)
            return await client.send(req, stream=True)
        except _failures() as exc:
            raise transport_error(exc, self.provider, "sending the request", host=self.host, via=self.proxy) from exc

    def _clash(self, credentials: Credentials) -> ConfigError:
        """A user and password in the base URL and credentials sent in the Authorization header:
        a request carries one such header, so one of them would silently not be sent."""
        return ConfigError(
            f"the base URL of the {self.provider} provider ({self.base_url}) has a user and password "
            f"(user:password@), sent as HTTP Basic authorization, and {credentials.hint} is sent in the same "
            "Authorization header: a request can carry only one of them. Take user:password@ out of the base "
            "URL, or the key out of the configuration."
        )

    async def _read(self, response: Any) -> None:
        try:
            await response.aread()
        except _failures() as exc:
            raise transport_error(exc, self.provider, "reading the response", host=self.host, via=self.proxy) from exc
        finally:
            await _quietly(response.aclose)

    @staticmethod
    async def _error_text(response: Any) -> str:
        try:
            body: bytes = await response.aread()
            return body.decode(errors="replace")
        except _failures() as exc:  # the status says what happened; the body is only detail
            return f"(the error body could not be read: {type(exc).__name__})"
        finally:
            await _quietly(response.aclose)

    async def aclose(self) -> None:
        """Close this transport's own client; a pooled one stays open for the next run (see
        :func:`close_clients`)."""
        if self._client is not None:
            await self._client.aclose()
            self._client = None


# Clients, with their connection pools, kept across runs: one per event loop and endpoint. A new
# client would cost an SSL context (the CA bundle parsed: 20-80 ms) and new connections; a client
# belongs to the loop it was made in, hence one pool per loop.
_POOL: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, dict[tuple[Any, ...], Any]] = weakref.WeakKeyDictionary()


@functools.cache
def _ssl_context() -> Any:
    """One SSL context per process (httpx's default: certifi, or SSL_CERT_FILE / SSL_CERT_DIR)."""
    import httpx

    return httpx.create_ssl_context()


@functools.cache
def _no_tls_context() -> Any:
    """A context that trusts no certificate: given to clients that never make a TLS connection, so
    they skip loading the CA bundle, and a TLS connection one did attempt would fail closed."""
    import ssl

    return ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)  # verifies hostname and certificate; trusts none


def client_ssl_context(base_url: str) -> Any:
    """The SSL context a client for ``base_url`` gets. A plain ``http://`` endpoint reached without
    a proxy (a local server, mostly) never makes a TLS connection: the client only sends to its
    base URL and follows no redirect. It gets :func:`_no_tls_context`, and the first run in a
    process does not pay for parsing the CA bundle. Every other client gets the full context."""
    from urllib.parse import urlsplit
    from urllib.request import getproxies  # httpx imports it too, for the same variables

    parts = urlsplit(base_url)
    proxies = {} if is_loopback(parts.hostname or "") else getproxies()
    if parts.scheme == "http" and not (proxies.get("http") or proxies.get("all")):
        return _no_tls_context()
    return _ssl_context()


def env_proxy(base_url: str) -> str:
    """The proxy the environment puts requests to ``base_url`` through (``HTTPS_PROXY``,
    ``HTTP_PROXY`` or ``ALL_PROXY``, unless ``NO_PROXY`` names the host), without its user and
    password; "" for none. Never one for this machine: a proxy that reaches ``127.0.0.1`` reaches
    its own loopback, not this one's (see :func:`pooled_client`)."""
    from urllib.parse import urlsplit
    from urllib.request import getproxies, proxy_bypass

    parts = urlsplit(base_url)
    host = parts.hostname or ""
    if is_loopback(host):
        return ""
    proxies = getproxies()
    proxy = proxies.get(parts.scheme) or proxies.get("all") or ""
    if not proxy or proxy_bypass(host):
        return ""
    return without_userinfo(proxy if "://" in proxy else f"http://{proxy}")


def pooled_client(base_url: str, headers: dict[str, str], timeout_s: float) -> Any:
    """The running loop's client for this endpoint, made on first use. A server on this machine
    is reached directly even when the environment sets a proxy: the proxy would connect to its
    own loopback (and the environment is read only for proxies here: the SSL context is given)."""
    from urllib.parse import urlsplit

    import httpx

    clients = _POOL.setdefault(asyncio.get_running_loop(), {})
    key = (base_url, tuple(sorted(headers.items())), timeout_s)
    client = clients.get(key)
    if client is None or client.is_closed:
        client = clients[key] = httpx.AsyncClient(
            base_url=base_url,
            headers=headers,
            timeout=timeout_s,
            verify=client_ssl_context(base_url),
            trust_env=not is_loopback(urlsplit(base_url).hostname or ""),
        )
    return client


async def close_clients() -> None:
    """Close the running loop's pooled clients (their connections). ``run_sync`` and the command
    line call it before their loop ends; a server that runs many runs in one loop keeps them."""
    clients = _POOL.pop(asyncio.get_running_loop(), {})
    for client in clients.values():
        await _quietly(client.aclose)


def _host(url: str) -> str:
    """``name:port`` of a URL (the port the scheme implies when none is written)."""
    from urllib.parse import urlsplit

    parts = urlsplit(url)
    try:
        port = parts.port or {"https": 443, "http": 80}.get(parts.scheme)
    except ValueError:  # a port that is not a number: the URL is reported as written
        return parts.netloc
    name = parts.hostname or ""
    name = f"[{name}]" if ":" in name else name
    return f"{name}:{port}" if port else name


def checked_base_url(url: str, source: str) -> str:
    """``url`` when requests can be sent to it: an ``http://`` or ``https://`` URL with a host and
    a port from 1 to 65535. Anything else is a :class:`ConfigError` naming ``source`` (where the URL
    was set) before any request: without a scheme (``localhost:11434/v1``, a common slip) every
    request failed as a dropped connection, four times; a port out of range crashed the run."""
    from urllib.parse import urlsplit

    parts = urlsplit(url)
    try:
        port_ok = parts.port is None or parts.port > 0
    except ValueError:  # not a number, or past 65535
        port_ok = False
    if parts.scheme in ("http", "https") and parts.hostname and port_ok:
        return url
    raise ConfigError(
        f"{source} is {without_userinfo(url)!r}, not an http:// or https:// URL with a host (and a port from 1 "
        "to 65535): write it in full, e.g. http://localhost:11434/v1 for a server on this machine"
    )


def _secret_values(headers: dict[str, str], known: tuple[str, ...] = ()) -> tuple[str, ...]:
    """The credentials in a request's auth headers, each as sent, without its scheme (``Bearer``)
    and without the space around it (a header that cannot be sent is quoted in the error with its
    line break escaped), with the last few ``known`` ones, longest first; too short to be a
    secret, a value is left alone."""
    values = {
        v
        for value in headers.values()
        for v in (value, value.rpartition(" ")[2], value.strip().rpartition(" ")[2].strip())
        if len(v) >= 8
    }
    values.update(known[:8])
    return tuple(sorted(values, key=len, reverse=True))


_SECRET_START = 12  # a secret's first characters shown at a cut: "sk-proj-" and 4 more, at most 11


def scrubbed(text: str, secrets: tuple[str, ...]) -> str:
    """``text`` with each secret replaced by ``***``, and the start of one too: an error shows a
    preview of what the server sent (its first 300 characters, say), and a preview cut inside a
    quoted key keeps all of it but its end."""
    for secret in secrets:
        text = text.replace(secret, "***")
    for secret in secrets:
        for size in range(len(secret) - 1, _SECRET_START - 1, -1):
            if secret[:size] in text:
                text = text.replace(secret[:size], "***")
                break
    return text


def basic_auth(url: str) -> tuple[str, tuple[str, ...]]:
    """The ``Authorization`` value for the ``user:password@`` of ``url`` ("" for none), and the
    secrets an error must not show of it: the password, as written and decoded (the user, when
    there is no password: a token given as the user name, ``https://TOKEN@host``), and the encoded
    pair the header carries."""
    import base64
    from urllib.parse import unquote, urlsplit

    parts = urlsplit(url)
    if "@" not in parts.netloc:
        return "", ()
    user, _, password = parts.netloc.rpartition("@")[0].partition(":")
    pair = base64.b64encode(f"{unquote(user)}:{unquote(password)}".encode()).decode()
    secret = password or user
    return f"Basic {pair}", tuple(s for s in {secret, unquote(secret), pair} if len(s) >= 8)


def without_userinfo(url: str) -> str:
    """The URL without ``user:password@``: error messages never carry credentials."""
    from urllib.parse import urlsplit, urlunsplit

    parts = urlsplit(url)
    if "@" not in parts.netloc:
        return url
    return urlunsplit(parts._replace(netloc=parts.netloc.rsplit("@", 1)[1]))


async def _quietly(close: Callable[[], Awaitable[Any]]) -> None:
    """Close something attached to a connection that may have broken already: closing it cannot
    fail in a way worth reporting over the error that is on its way."""
    with contextlib.suppress(*_failures()):
        await close()


def model_ids(data: Any, provider: str) -> list[str]:
    """``data[].id`` of a model listing (the shape OpenAI, Anthropic and compatible servers share)."""
    entries = data.get("data") if isinstance(data, dict) else None
    if not isinstance(entries, list):
        raise ResponseError(
            f"{provider}: the model list has no 'data' array: {str(data)[:200]}",
            provider=provider,
            body=str(data)[:500],
        )
    return [str(m["id"]) for m in entries if isinstance(m, dict) and m.get("id")]


def read_json(response: Any, provider: str) -> Any:
    """The JSON body of a read response (see :func:`decode_json`). A body that is not JSON and
    does not say it is (a login page, a proxy's HTML) is named by its content type, as a stream's
    is (:func:`stream_reply`), with the advice to check the base URL."""
    text = bytes(response.content).decode("utf-8", errors="replace")
    try:
        return decode_json(text, provider, "response")
    except ResponseError as exc:
        kind = response.headers.get("content-type") or "no content type"
        if "json" in kind.lower():
            raise
        raise ResponseError(
            f"{provider}: the server answered with {kind}, not JSON: {' '.join(text.split())[:200]}. Check the "
            "base URL: a login page, a proxy or a server that does not speak this API answers like this.",
            provider=provider,
            body=text[:500],
        ) from exc


class ReplyAssembler(Protocol):
    """What :func:`stream_reply` feeds: one per wire, collecting events into a reply."""

    chars_shown: int  # characters of text and reasoning handed to the caller so far

    @property
    def finished(self) -> bool:
        """True once the provider said the reply is complete (its end marker arrived)."""
        ...

    def feed(self, event: Any) -> list[StreamText | StreamReasoning]: ...

    def message(self) -> AssistantMessage: ...


async def stream_reply(
    response: Any, provider: str, assembler: ReplyAssembler, *, idle_s: float | None = None
) -> AsyncIterator[StreamText | StreamReasoning]:
    """Read a server-sent event stream into ``assembler``, yielding the deltas it returns.

    A failure while reading becomes a classified error here. A transient one before the end
    marker is an :class:`~tether.providers.base.IncompleteStreamError` saying how much the caller
    already saw; after the end marker it only cost what follows the reply (a usage chunk, the
    ``[DONE]`` line), so the reply stands, as it does when what follows is an error event or a
    line that is no JSON (a gateway's own failure after the reply). Whether a stream that ended
    cleanly is complete is the assembler's ``message()`` to decide, by the same rule.

    A body that ends inside an event (the last line is not JSON, and nothing follows it) was cut,
    as a dropped connection is: an event is whole only with the blank line after it. A body that
    is not an event stream at all (an HTML login page, a JSON document) is a ``ResponseError``
    naming its content type: asking again would get the same page.

    Keep-alives (comments such as OpenRouter's ``: OPENROUTER PROCESSING``, Anthropic's ``ping``
    events) keep the connection's read timeout from firing: a server that sends only them would be
    waited on for ever. ``idle_s`` (the provider's ``timeout_s``) bounds them as that timeout bounds
    silence: a stream with nothing but keep-alives for that long is a cut one."""
    response.encoding = "utf-8"  # an event stream is UTF-8 whatever charset its header names (as browsers read it)
    lines = response.aiter_lines()
    events = 0  # ``data:`` lines so far
    name = ""  # the ``event:`` name of the event being read
    heard = time.monotonic()  # when the last event that was not a keep-alive came
    try:
        while True:
            line = await _next_line(lines, provider, assembler)
            if line is None:
                return
            line = line.removeprefix("\ufeff")  # a byte order mark before the first field is not part of it
            if line.startswith("error:"):  # llama.cpp's servers write a failure as an ``error:`` field
                line, name = "data:" + line[6:], "error"
            payload = line[5:].strip() if line.startswith("data:") else ""
            if payload and name != "ping" and not _PING.match(payload):
                heard = time.monotonic()
            elif idle_s is not None and time.monotonic() - heard > idle_s:
                if assembler.finished:
                    return  # what follows the reply cannot undo it
                why = f"nothing but keep-alives for {idle_s:g} s, the provider's timeout_s"
                raise incomplete_stream(provider, assembler.chars_shown, why)
            if not line.startswith("data:"):
                if not events and not _is_sse_line(line):
                    raise _not_an_event_stream(response, provider, line)
                name = line[6:].strip() if line.startswith("event:") else name if line.strip() else ""
                continue  # event names, comments, keep-alives
            events += 1
            if payload == "[DONE]":  # Chat Completions' terminator; read on so the connection is reused
                continue
            deltas = await _fed(payload, name, provider, assembler, lines)
            if deltas is None:
                return
            for delta in deltas:
                assembler.chars_shown += len(delta.text)
                yield delta
    finally:
        await _quietly(lines.aclose)
        await _quietly(response.aclose)


async def _fed(
    payload: str, name: str, provider: str, assembler: ReplyAssembler, lines: AsyncIterator[str]
) -> list[StreamText | StreamReasoning] | None:
    """The deltas of one ``data:`` payload fed to ``assembler``; None when the reading ends there:
    after the end marker, what follows cannot undo the reply (an error event a gateway writes
    after it, a line that is no JSON)."""
    finished = assembler.finished
    try:
        try:
            event = (
                _error_event(payload, provider) if name == "error" else decode_json(payload, provider, "stream event")
            )
        except ResponseError:
            if not finished and await _next_line(lines, provider, assembler) is None:  # the body ended here: a cut
                raise incomplete_stream(provider, assembler.chars_shown, "the body ended inside an event") from None
            raise
        with _shape_errors(provider, payload):
            return assembler.feed(event)
    except ProviderError:
        if finished:
            return None
        raise


def _error_event(payload: str, provider: str) -> dict[str, Any]:
    """The data of an ``error`` event in the one shape both wires read as a failure, ``{"type":
    "error", "error": ...}``: Anthropic's is already; llama.cpp and others send the error's own
    fields (``{"code": 400, "message": ...}``), or its words, which would otherwise read as an
    empty chunk or a malformed one."""
    try:
        data: Any = decode_json(payload, provider, "stream event")
    except ResponseError:
        data = payload
    if isinstance(data, dict) and data.get("error"):
        return {**data, "type": "error"}
    return {"type": "error", "error": data}


async def _next_line(lines: AsyncIterator[str], provider: str, assembler: ReplyAssembler) -> str | None:
    """The stream's next line; None at its end (or at a failure after the end marker, which cost
    only what follows the reply)."""
    try:
        return await anext(lines)
    except StopAsyncIteration:
        return None
    except _failures() as exc:
        if assembler.finished:
            return None
        error = transport_error(exc, provider, "reading the stream")
        if isinstance(error, RetryableError):
            raise incomplete_stream(provider, assembler.chars_shown, _describe(exc)) from exc
        raise error from exc


_SSE_FIELDS = ("data", "event", "id", "retry")
# Anthropic's keep-alive event, when a server sends it without its ``event: ping`` line.
_PING = re.compile(r'\{\s*"type"\s*:\s*"ping"\s*\}$')


def _is_sse_line(line: str) -> bool:
    """A line an event stream may carry: blank, a comment, or one of its fields."""
    return not line.strip() or line.startswith(":") or line.partition(":")[0] in _SSE_FIELDS


def _not_an_event_stream(response: Any, provider: str, line: str) -> ResponseError:
    kind = response.headers.get("content-type") or "no content type"
    return ResponseError(
        f"{provider}: the server answered the streamed request with {kind}, not an event stream: "
        f"{' '.join(line.split())[:200]}. Check the base URL: a login page, a proxy or a server "
        "that does not speak this API answers like this.",
        provider=provider,
        body=line[:500],
    )


def assembled(assembler: ReplyAssembler, provider: str) -> AssistantMessage:
    """The assembler's reply (an ``IncompleteStreamError`` when the stream never finished)."""
    with _shape_errors(provider, ""):
        return assembler.message()


@contextlib.contextmanager
def _shape_errors(provider: str, payload: str) -> Iterator[None]:
    """JSON of the wrong shape (a missing key, a list for an object) is a response in no documented
    format: a ``ResponseError``, not a crash."""
    try:
        yield
    except (KeyError, IndexError, TypeError, AttributeError, ValueError) as exc:
        raise ResponseError(
            f"{provider}: unexpected stream event ({type(exc).__name__}: {exc}): {payload[:200]}",
            provider=provider,
            body=payload[:500],
        ) from exc
