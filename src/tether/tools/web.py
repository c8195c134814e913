"""Web tools: ``web_fetch`` (with SSRF protection) and ``web_search`` (a pluggable backend).

``web_fetch`` resolves the host first and refuses any address in a loopback, private, link-local,
unique-local, carrier-grade NAT or unspecified range (127.0.0.0/8, 10/8, 172.16/12, 192.168/16,
169.254/16 — the cloud metadata address included —, 100.64/10, 0/8, ::1, fc00::/7, fe80::/10 and
IPv4-mapped forms), unless the deployment allows it by ``host:port`` or network. It then connects to
the address it checked (so a second DNS answer cannot swap in another one), follows redirects
itself and checks every hop again, caps the size, and turns HTML into Markdown with
``markdownify``. Images come back as images; other binary content is refused with a message.
"""

from __future__ import annotations

import asyncio
import ipaddress
import socket
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar, Protocol
from urllib.parse import urljoin, urlsplit

from tether.messages import ImagePart, TextPart
from tether.tools.base import ToolContext, ToolError, ToolResult

__all__ = ["SearchBackend", "SearxngBackend", "WebFetch", "WebSearch", "WebSettings", "check_address"]

_BLOCKED_NETS = [ipaddress.ip_network(n) for n in (
    "127.0.0.0/8", "10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16", "169.254.0.0/16", "100.64.0.0/10",
    "0.0.0.0/8", "224.0.0.0/4", "240.0.0.0/4", "::1/128", "::/128", "fc00::/7", "fe80::/10", "ff00::/8",
)]
MAX_REDIRECTS = 5


@dataclass(frozen=True)
class WebSettings:
    """How a deployment bounds the web tools (config: ``[tools.web]``)."""

    allow: tuple[str, ...] = ()  # "host:port" or networks ("10.1.0.0/16") that may be reached anyway
    max_bytes: int = 2_000_000  # downloaded
    max_chars: int = 100_000  # returned to the model
    timeout_s: float = 20.0
    user_agent: str = "tether-web-fetch/0.1"
    search: SearchBackend | None = field(default=None, compare=False)


def _allowed(ip: ipaddress.IPv4Address | ipaddress.IPv6Address, host: str, port: int, allow: Sequence[str]) -> bool:
    for entry in allow:
        if entry in (f"{host}:{port}", f"{ip}:{port}"):
            return True
        try:
            if ip in ipaddress.ip_network(entry, strict=False):
                return True
        except ValueError:
            continue
    return False


def check_address(ip_text: str, host: str, port: int, allow: Sequence[str]) -> None:
    """Refuse a private or special address unless the deployment allowed it."""
    ip = ipaddress.ip_address(ip_text.split("%", 1)[0])
    mapped = getattr(ip, "ipv4_mapped", None)
    effective = mapped or ip
    if any(effective in net for net in _BLOCKED_NETS) and not _allowed(effective, host, port, allow):
        raise ToolError(f"refused: {host} resolves to {effective}, a private or local address; web_fetch only "
                        "reaches public addresses. Ask the user if this address should be allowed.")


async def _resolve(host: str, port: int) -> list[str]:
    loop = asyncio.get_running_loop()
    try:
        infos = await loop.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except socket.gaierror as exc:
        raise ToolError(f"could not resolve {host}: {exc.strerror}. Check the address.") from exc
    return list(dict.fromkeys(str(info[4][0]) for info in infos))


def _to_markdown(html: str) -> str:
    from bs4 import BeautifulSoup
    from markdownify import markdownify

    soup = BeautifulSoup(html, "html.parser")
    for tag in soup(["script", "style", "noscript", "svg", "iframe", "template"]):
        tag.decompose()
    main = soup.find("main") or soup.find("article") or soup.body or soup
    title = soup.title.get_text(strip=True) if soup.title else ""
    text = markdownify(str(main), heading_style="ATX", strip=["img"]).strip()
    lines = [ln.rstrip() for ln in text.splitlines()]
    compact = "\n".join(ln for i, ln in enumerate(lines) if ln or (i and lines[i - 1]))
    return f"# {title}\n\n{compact}" if title else compact


class WebFetch:
    name = "web_fetch"
    description = ("Fetch a public web page or file by URL. HTML comes back as Markdown, text as text, "
                   "images as images. Private and local addresses are refused.")
    input_schema: ClassVar[dict[str, Any]] = {
        "type": "object",
        "properties": {"url": {"type": "string", "description": "an http or https URL", "maxLength": 4000}},
        "required": ["url"],
        "additionalProperties": False,
    }
    read_only = True
    needs_approval = False

    def __init__(self, settings: WebSettings | None = None) -> None:
        self.settings = settings or WebSettings()

    async def execute(self, input: dict[str, Any], ctx: ToolContext) -> ToolResult | str:
        import httpx

        url = str(input["url"]).strip()
        async with httpx.AsyncClient(timeout=self.settings.timeout_s, follow_redirects=False,
                                     trust_env=False) as client:
            for _ in range(MAX_REDIRECTS + 1):
                response = await ctx.signal.race(self._get(client, url))
                if response.is_redirect and "location" in response.headers:
                    url = urljoin(url, response.headers["location"])
                    await response.aclose()
                    continue
                try:
                    return await self._read(response, url)
                finally:
                    await response.aclose()
        raise ToolError(f"stopped after {MAX_REDIRECTS} redirects; the page may be looping.")

    async def _get(self, client: Any, url: str) -> Any:
        import httpx

        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ToolError(f"refused: {url!r} is not an http(s) URL.")
        host = parts.hostname
        port = parts.port or (443 if parts.scheme == "https" else 80)
        addresses = await _resolve(host, port)
        for address in addresses:  # every answer must be acceptable, or a later one could be used
            check_address(address, host, port, self.settings.allow)
        ip = addresses[0]
        pinned = parts._replace(netloc=f"[{ip}]:{port}" if ":" in ip else f"{ip}:{port}").geturl()
        headers = {"host": parts.netloc.rsplit("@", 1)[-1], "user-agent": self.settings.user_agent}
        request = client.build_request("GET", pinned, headers=headers,
                                       extensions={"sni_hostname": host} if parts.scheme == "https" else {})
        try:
            return await client.send(request, stream=True)
        except httpx.HTTPError as exc:
            raise ToolError(f"could not fetch {url}: {type(exc).__name__}: {exc}") from exc

    async def _read(self, response: Any, url: str) -> ToolResult | str:
        if response.status_code >= 400:
            raise ToolError(f"{url} answered HTTP {response.status_code}.")
        cap = self.settings.max_bytes
        data = bytearray()
        async for chunk in response.aiter_bytes():
            data += chunk
            if len(data) > cap:
                break
        cut = len(data) > cap
        kind = response.headers.get("content-type", "").split(";", 1)[0].strip().lower()
        if kind.startswith("image/"):
            if cut:
                raise ToolError(f"the image at {url} is larger than {cap:,} bytes.")
            import base64

            return ToolResult([TextPart(text=f"image from {url} ({kind}, {len(data):,} bytes)"),
                               ImagePart(media_type=kind, data=base64.b64encode(bytes(data)).decode())])
        if not (kind.startswith("text/") or kind in ("application/json", "application/xml", "application/xhtml+xml",
                                                    "application/javascript", "")):
            raise ToolError(f"{url} is {kind}, which web_fetch cannot read as text.")
        text = bytes(data[:cap]).decode(response.encoding or "utf-8", errors="replace")
        if "html" in kind:
            text = _to_markdown(text)
        limit = self.settings.max_chars
        notes = []
        if cut:
            notes.append(f"[download stopped at {cap:,} bytes]")
        if len(text) > limit:
            text = text[:limit]
            notes.append(f"[cut at {limit:,} characters]")
        return "\n".join([text, *notes])


class SearchBackend(Protocol):
    async def search(self, query: str, limit: int) -> list[dict[str, str]]: ...


@dataclass(frozen=True)
class SearxngBackend:
    """A SearXNG instance's JSON API (``/search?format=json``), e.g. one the deployment runs."""

    url: str

    async def search(self, query: str, limit: int) -> list[dict[str, str]]:
        import httpx

        async with httpx.AsyncClient(timeout=20) as client:
            response = await client.get(self.url.rstrip("/") + "/search", params={"q": query, "format": "json"})
        if response.status_code >= 400:
            raise ToolError(f"the search backend answered HTTP {response.status_code}")
        results = response.json().get("results", [])
        return [{"title": r.get("title", ""), "url": r.get("url", ""), "snippet": r.get("content", "")}
                for r in results[:limit]]


class WebSearch:
    name = "web_search"
    description = "Search the web; returns titles, URLs and snippets. Use web_fetch to read a result."
    input_schema: ClassVar[dict[str, Any]] = {
        "type": "object",
        "properties": {"query": {"type": "string", "minLength": 1, "maxLength": 500},
                       "limit": {"type": "integer", "minimum": 1, "maximum": 20, "default": 5}},
        "required": ["query"],
        "additionalProperties": False,
    }
    read_only = True
    needs_approval = False

    def __init__(self, backend: SearchBackend | None = None) -> None:
        self.backend = backend

    async def execute(self, input: dict[str, Any], ctx: ToolContext) -> ToolResult | str:
        if self.backend is None:
            return ToolResult("web_search is not configured in this deployment, so no search was made. "
                              "To enable it, add to config.toml:\n[tools.web_search]\nkind = \"searxng\"\n"
                              "url = \"https://your-searxng-instance\"\n"
                              "Meanwhile, use web_fetch on a URL you already know.", is_error=True)
        hits = await ctx.signal.race(self.backend.search(str(input["query"]), int(input.get("limit", 5))))
        if not hits:
            return f"no results for {input['query']!r}"
        return "\n\n".join(f"{i}. {h['title']}\n   {h['url']}\n   {h['snippet']}" for i, h in enumerate(hits, 1))
