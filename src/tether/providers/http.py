"""The HTTP seam every wire module shares: one pooled httpx client, credentials, error translation.

Nothing retries here: retries are the loop's policy (see :mod:`tether.harness.retry`), so no
request is ever repeated silently underneath it. The single exception is authentication: on a 401
the credentials get one chance to refresh (an OAuth token that expired early) before the error is
raised.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

from tether.errors import RetryableError, classify_http_error
from tether.providers.auth import Credentials

__all__ = ["HttpTransport", "sse_events"]


class HttpTransport:
    def __init__(self, provider: str, base_url: str, credentials: Credentials, *,
                 headers: dict[str, str] | None = None, timeout_s: float = 600.0) -> None:
        self.provider = provider
        self.base_url = base_url.rstrip("/")
        self.credentials = credentials
        self._headers = {"content-type": "application/json", **(headers or {})}
        self._timeout_s = timeout_s
        self._client: Any = None

    def _http(self) -> Any:
        if self._client is None:
            import httpx

            self._client = httpx.AsyncClient(base_url=self.base_url, headers=self._headers,
                                             timeout=self._timeout_s)
        return self._client

    async def request(self, method: str, path: str, body: bytes | None = None, *, stream: bool = False) -> Any:
        """Send; return the response (open, when ``stream``) or raise a classified error."""
        for attempt in (1, 2):
            response = await self._send_once(method, path, body, stream)
            if response.status_code < 400:
                return response
            text = (await response.aread()).decode(errors="replace")
            await response.aclose()
            if response.status_code == 401 and attempt == 1 and await self.credentials.refresh():
                continue
            raise classify_http_error(self.provider, response.status_code, text, dict(response.headers),
                                      key_hint=self.credentials.hint)
        raise AssertionError("unreachable")

    async def _send_once(self, method: str, path: str, body: bytes | None, stream: bool) -> Any:
        import httpx

        client = self._http()
        headers = await self.credentials.headers()
        try:
            req = client.build_request(method, path, content=body, headers=headers)
            return await client.send(req, stream=stream)
        except httpx.TimeoutException as exc:
            raise RetryableError(f"{self.provider}: request timed out ({type(exc).__name__})",
                                 provider=self.provider) from exc
        except httpx.TransportError as exc:
            raise RetryableError(f"{self.provider}: connection failed ({type(exc).__name__}: {exc})",
                                 provider=self.provider) from exc

    async def aclose(self) -> None:
        if self._client is not None:
            await self._client.aclose()
            self._client = None


async def sse_events(response: Any, provider: str) -> AsyncIterator[str]:
    """The ``data:`` payloads of a server-sent event stream; a cut stream is retryable."""
    import httpx

    try:
        async for line in response.aiter_lines():
            if line.startswith("data:"):
                yield line[5:].strip()
    except httpx.TransportError as exc:
        raise RetryableError(f"{provider}: the stream was cut ({type(exc).__name__})", provider=provider) from exc
    finally:
        await response.aclose()
