"""Web tools: ``web_fetch`` (with SSRF protection) and ``web_search`` (a pluggable backend).

``web_fetch`` resolves the host first and refuses any address in a loopback, private, link-local,
unique-local, carrier-grade NAT or unspecified range (127.0.0.0/8, 10/8, 172.16/12, 192.168/16,
169.254/16 — the cloud metadata address included —, 100.64/10, 0/8, ::1, fc00::/7, fe80::/10),
unless the deployment allows it by ``host:port`` or network. An IPv6 address that carries an IPv4
one (IPv4-mapped ``::ffff:0:0/96``, IPv4-translated ``::ffff:0:0:0/96``, IPv4-compatible ``::/96``,
NAT64 ``64:ff9b::/96``, 6to4 ``2002::/16``) is judged by the IPv4 address inside it as well; NAT64
local-use (``64:ff9b:1::/48``, where the IPv4 address's position depends on the operator) and
Teredo (``2001::/32``, a tunnel whose client address is obfuscated) are refused outright. It then
connects to the address it checked (so a second DNS answer cannot swap in another one), follows
redirects itself and checks every hop again, caps the size, and turns HTML into Markdown with
``markdownify``; a page is decoded with the charset of its byte-order mark, else of the
``Content-Type`` header, else of its ``<meta charset>`` (or ``http-equiv``) tag, else UTF-8.
Images a model can be shown (PNG, JPEG, GIF, WebP, told by their bytes) come back as images, SVG as
text; other images and other binary content are refused with a message. A page that is a
wall and not content (a bot check or CAPTCHA, in any language it is served in; a "not found" page
served with status 200; an empty shell that builds itself with scripts) is a failed fetch with its
reason (``tools/_walls.py``), never text the model would take for the page.
"""

from __future__ import annotations

import asyncio
import codecs
import functools
import ipaddress
import json
import re
import socket
import zlib
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar, Protocol
from urllib.parse import urljoin, urlsplit

from tether.messages import ImagePart, TextPart
from tether.tools.base import ToolContext, ToolError, ToolResult, _in_thread

__all__ = [
    "SearchBackend",
    "SearxngBackend",
    "WebFetch",
    "WebSearch",
    "WebSettings",
    "check_address",
    "decode_text",
]

_BLOCKED_NETS = [
    ipaddress.ip_network(n)
    for n in (
        "127.0.0.0/8",
        "10.0.0.0/8",
        "172.16.0.0/12",
        "192.168.0.0/16",
        "169.254.0.0/16",
        "100.64.0.0/10",
        "0.0.0.0/8",
        "224.0.0.0/4",
        "240.0.0.0/4",
        "::1/128",
        "::/128",
        "fc00::/7",
        "fe80::/10",
        "ff00::/8",
    )
]
# Tunnels whose IPv4 address cannot be read reliably: refused unless allowed.
_TUNNELS = {
    ipaddress.ip_network("64:ff9b:1::/48"): "a local-use NAT64 address",
    ipaddress.ip_network("2001::/32"): "a Teredo tunnel address",
}
# Forms that carry an IPv4 address in their last 32 bits (mapped and 6to4 have properties of their own).
_LOW_32 = [ipaddress.ip_network(n) for n in ("64:ff9b::/96", "::ffff:0:0:0/96", "::/96")]
MAX_REDIRECTS = 5
# What web_fetch asks for and undoes itself (httpx would undo each chunk whole: see _Inflater).
_ENCODINGS = {"gzip": 16 + zlib.MAX_WBITS, "x-gzip": 16 + zlib.MAX_WBITS, "deflate": zlib.MAX_WBITS}
MAX_ENCODINGS = 2


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


def _embedded_ipv4(ip: ipaddress.IPv6Address) -> ipaddress.IPv4Address | None:
    if ip.ipv4_mapped is not None:
        return ip.ipv4_mapped
    if ip.sixtofour is not None:
        return ip.sixtofour
    if any(ip in net for net in _LOW_32):
        return ipaddress.IPv4Address(int(ip) & 0xFFFF_FFFF)
    return None


def check_address(ip_text: str, host: str, port: int, allow: Sequence[str]) -> None:
    """Refuse a private or special address, or one that carries such an address inside it, unless
    the deployment allowed it (by ``host:port``, or a network holding the address or the IPv4
    address inside it)."""
    ip = ipaddress.ip_address(ip_text.split("%", 1)[0])
    inner = _embedded_ipv4(ip) if isinstance(ip, ipaddress.IPv6Address) else None
    if any(_allowed(a, host, port, allow) for a in (ip, inner) if a is not None):
        return
    tunnel = next((what for net, what in _TUNNELS.items() if ip in net), None)
    if tunnel is not None:
        raise ToolError(
            f"refused: {host} resolves to {ip}, {tunnel}, which can hide a private or local "
            "address; web_fetch only reaches public addresses. Ask the user if this address "
            f'should be allowed (a deployment allows it with [tools.web] allow = ["{host}:{port}"]).'
        )
    for candidate in (ip, inner):
        if candidate is not None and any(candidate in net for net in _BLOCKED_NETS):
            shown = str(ip) if candidate is ip else f"{ip} (which carries {inner})"
            raise ToolError(
                f"refused: {host} resolves to {shown}, a private or local address; web_fetch "
                "only reaches public addresses. Ask the user if this address should be allowed "
                f'(a deployment allows it with [tools.web] allow = ["{host}:{port}"]).'
            )


async def _resolve(host: str, port: int) -> list[str]:
    loop = asyncio.get_running_loop()
    try:
        infos = await loop.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except socket.gaierror as exc:
        raise ToolError(f"could not resolve {host}: {exc.strerror}. Check the address.") from exc
    except UnicodeError:  # Python's IDNA encoding of the name for the resolver refused it
        raise ToolError(
            f"could not resolve {host}: it is not a valid host name (a part between dots is empty or "
            "longer than 63 characters). Check the address."
        ) from None
    return list(dict.fromkeys(str(info[4][0]) for info in infos))


_BOMS = ((codecs.BOM_UTF8, "utf-8-sig"), (codecs.BOM_UTF16_LE, "utf-16"), (codecs.BOM_UTF16_BE, "utf-16"))
# Both <meta charset="x"> and <meta http-equiv="Content-Type" content="text/html; charset=x">.
_META_CHARSET = re.compile(rb"""<meta[^>]*?charset\s*=\s*["']?\s*([A-Za-z0-9._:-]+)""", re.IGNORECASE)
_CHARSET_PARAM = re.compile(r"""charset\s*=\s*["']?\s*([A-Za-z0-9._:-]+)""", re.IGNORECASE)
_META_SCAN = 4096  # bytes; the HTML standard looks at 1024, pages in the wild put the tag later


def _codec(label: str | None) -> str | None:
    """The Python codec for a charset label, as browsers read labels; None if unknown."""
    if not label:
        return None
    try:
        name = codecs.lookup(label.strip()).name
    except LookupError:
        return None
    # Browsers read Latin-1 and ASCII labels as windows-1252, a superset that pages rely on.
    return "cp1252" if name in ("latin-1", "iso8859-1", "ascii") else name


def decode_text(data: bytes, content_type: str) -> str:
    """Decode a response body: by its byte-order mark, else the ``Content-Type`` charset, else
    (for HTML) the ``<meta>`` charset in its first bytes, else UTF-8. Never fails: bytes that do
    not fit the encoding become U+FFFD."""
    encoding = next((name for bom, name in _BOMS if data.startswith(bom)), None)
    if encoding is None:
        header = _CHARSET_PARAM.search(content_type)
        encoding = _codec(header.group(1) if header else None)
    if encoding is None and "html" in content_type.split(";", 1)[0].lower():
        meta = _META_CHARSET.search(data[:_META_SCAN])
        encoding = _codec(meta.group(1).decode("ascii") if meta else None)
        if encoding is not None and encoding.startswith("utf-16"):
            encoding = "utf-8"  # a tag readable as ASCII means the page is not UTF-16 (the HTML standard's rule)
    return data.decode(encoding or "utf-8", errors="replace")


_SPACES = re.compile(r"[\t \r\n]+")
_SPACES_2 = re.compile(r"[\t \r\n]{2,}")
_PRE_RUN = 64
_PRE_SPACES = re.compile(rf"[ \n]{{{_PRE_RUN + 1},}}")


def _calm_whitespace(main: Any) -> None:
    """Shorten the runs of white space markdownify would backtrack over: its regexes rescan a run from
    each of its characters (40 kB of spaces held the GIL for 33 s: the whole process stood still;
    2 MB, a day). Outside ``<pre>`` a run becomes what markdownify makes of it anyway (a line break if
    it holds one, else a space); inside, a run longer than 64 is cut to 64."""
    from bs4.element import NavigableString

    in_pre: dict[int, bool] = {}  # per element: whether it is, or is inside, a <pre>
    for text in list(main.find_all(string=True)):
        if type(text) is not NavigableString:  # comments and the like are not shown
            continue
        if _inside_pre(text, in_pre):
            calm = _PRE_SPACES.sub(lambda m: m.group()[:_PRE_RUN], text)
        elif _SPACES_2.search(text):
            calm = _SPACES.sub(lambda m: "\n" if "\n" in m.group() or "\r" in m.group() else " ", text)
        else:
            continue
        if calm != text:
            text.replace_with(calm)


def _inside_pre(node: Any, known: dict[int, bool]) -> bool:
    """Whether ``node`` has a ``<pre>`` above it; ``known`` remembers each element's answer, so a
    page of thousands of nested elements is walked once, not once per string."""
    climbed = []
    element = node.parent
    while element is not None and id(element) not in known:
        climbed.append(element)
        element = element.parent
    inside = known[id(element)] if element is not None else False
    for element in reversed(climbed):
        inside = inside or element.name == "pre"
        known[id(element)] = inside
    return inside


_MAX_DEPTH = 128  # what is deeper is kept as text: markdownify recurses per level (about 400 overflowed)
_LIST_CHUNK = 100  # an <ol> is cut into lists of this many items: markdownify counts each item's elders
_NUMBER = re.compile(r"[0-9]{1,9}")


@functools.cache
def _not_converters() -> tuple[str, ...]:
    """The element names markdownify would convert with one of its own methods that is no converter:
    it calls ``convert_<name>`` for each element, and ``convert_soup(soup)`` is its entry point, so a
    ``<soup>`` raised TypeError. Those whose parameters are not a converter's (``convert_p``'s, in
    whichever release is installed), given as ``strip`` (the element dropped, its text kept)."""
    import inspect

    from markdownify import MarkdownConverter

    converter = list(inspect.signature(MarkdownConverter.convert_p).parameters)  # type: ignore[attr-defined]
    return tuple(
        name[len("convert_") :].lower()
        for name, fn in inspect.getmembers(MarkdownConverter, inspect.isfunction)
        if name.startswith("convert_") and list(inspect.signature(fn).parameters) != converter
    )


def _tame(soup: Any, main: Any) -> None:
    """Make a page markdownify converts whatever its markup: what is nested deeper than
    ``_MAX_DEPTH`` elements kept as its text alone (markdownify recursed once a level and overflowed
    at about 400), a list's ``start`` or a cell's ``colspan`` that is not a plain number dropped (its
    int() raised on ``²``, ``三`` or 5,000 digits), and a long ``<ol>`` cut into consecutive lists
    numbered on (it counted each item's elders: 20,000 items took a minute)."""
    from bs4.element import Tag

    stack = [(child, 1) for child in main.contents if isinstance(child, Tag)]
    while stack:
        element, depth = stack.pop()
        attrs = element.attrs
        for name in ("start", "colspan") if "start" in attrs or "colspan" in attrs else ():
            value = attrs.get(name)
            if value is not None and not (isinstance(value, str) and _NUMBER.fullmatch(value)):
                del element[name]
        children = [child for child in element.contents if isinstance(child, Tag)]
        if depth < _MAX_DEPTH:
            stack.extend((child, depth + 1) for child in children)
        elif children:  # its text in one piece (not unwrapped: each move in bs4 climbs every ancestor)
            text = element.get_text(" ")
            element.clear()
            element.append(text)
    for ol in main.find_all("ol"):
        items, start, last = ol.find_all("li", recursive=False), int(ol.get("start") or 1), ol
        for first in range(_LIST_CHUNK, len(items), _LIST_CHUNK):
            rest = soup.new_tag("ol", attrs={"start": str(start + first)})
            for item in items[first : first + _LIST_CHUNK]:
                rest.append(item.extract())
            last.insert_after(rest)
            last = rest


def html_to_markdown(html: str) -> str:
    """Readable Markdown from a page: scripts and styles dropped, <main>/<article> preferred,
    the <title> as the first heading."""
    from bs4 import BeautifulSoup
    from markdownify import MarkdownConverter

    # lxml (libxml2) parses in linear time. Python 3.11's html.parser is quadratic on constructs left
    # open (CVE-2025-6069): a 1 MB page of "</" or "<?" held a core for three minutes.
    soup = BeautifulSoup(html, "lxml")
    for tag in soup(["script", "style", "noscript", "svg", "iframe", "template"]):
        tag.decompose()
    main = soup.find("main") or soup.find("article") or soup.body or soup
    _calm_whitespace(main)
    _tame(soup, main)
    title = soup.title.get_text(strip=True) if soup.title else ""
    converter = MarkdownConverter(heading_style="ATX", strip=["img", *_not_converters()])
    text = converter.convert_soup(main).strip()
    lines = [ln.rstrip() for ln in text.splitlines()]
    compact = "\n".join(ln for i, ln in enumerate(lines) if ln or (i and lines[i - 1]))
    return f"# {title}\n\n{compact}" if title else compact


class _Inflater:
    """A response's ``Content-Encoding`` undone with a bound on what each call may produce.

    httpx decompresses each network chunk whole before anyone can look at its size: a few kilobytes
    of gzip inside gzip became gigabytes in one call, and the process ran out of memory long before
    ``max_bytes`` was checked. Here each layer stops at ``limit`` bytes a call and keeps the rest of
    its input for the next one.
    """

    def __init__(self, header: str, limit: int, url: str) -> None:
        names = [n.strip().lower() for n in header.split(",") if n.strip().lower() not in ("", "identity")]
        unknown = [n for n in names if n not in _ENCODINGS]
        if unknown or len(names) > MAX_ENCODINGS:
            raise ToolError(
                f"{url} was sent with Content-Encoding {header!r}, which web_fetch did not ask for and "
                "cannot read (it asks for gzip or deflate, once). Try another source."
            )
        self._layers = [(zlib.decompressobj(_ENCODINGS[n]), n == "deflate") for n in reversed(names)]
        self._limit = limit

    def feed(self, data: bytes) -> bytes:
        """What ``data`` (b"": nothing more) decodes to, at most about ``limit`` bytes beyond what
        a call has given before."""
        out = self._through(data)
        while len(out) <= self._limit:
            left = sum(len(d.unconsumed_tail) for d, _ in self._layers)
            more = self._through(b"")
            out += more
            if not more and sum(len(d.unconsumed_tail) for d, _ in self._layers) >= left:
                break
        return out

    def _through(self, data: bytes) -> bytes:
        for i, (layer, raw_fallback) in enumerate(self._layers):
            try:
                data = layer.decompress(layer.unconsumed_tail + data, self._limit + 1)
            except zlib.error:
                if not raw_fallback:
                    raise
                # "deflate" is meant to be zlib-wrapped, but some servers send it raw (httpx tries both)
                layer = zlib.decompressobj(-zlib.MAX_WBITS)
                data = layer.decompress(data, self._limit + 1)
            if raw_fallback:  # the first call decided the format, as httpx's does
                self._layers[i] = (layer, False)
        return data


# The image formats both model APIs take, by their first bytes: a model sent any other (an icon, a
# TIFF, a page served as image/png) refuses the whole request, and the image stays in the transcript.
_IMAGE_MAGIC = (
    (b"\x89PNG\r\n\x1a\n", "image/png"),
    (b"\xff\xd8\xff", "image/jpeg"),
    (b"GIF87a", "image/gif"),
    (b"GIF89a", "image/gif"),
)


_TEXT_KINDS = frozenset(
    {"application/json", "application/xml", "application/xhtml+xml", "application/javascript", "image/svg+xml", ""}
)


def _image_type(data: bytes) -> str | None:
    if data[:4] == b"RIFF" and data[8:12] == b"WEBP":
        return "image/webp"
    return next((kind for magic, kind in _IMAGE_MAGIC if data.startswith(magic)), None)


def _image(data: bytes, kind: str, url: str) -> ToolResult:
    """An image the model can be shown: PNG, JPEG, GIF or WebP, as its bytes say (not the header)."""
    import base64

    found = _image_type(data)
    if found is None:
        raise ToolError(
            f"{url} is served as {kind}, but it is not a PNG, JPEG, GIF or WebP image, the formats a "
            "model can be shown; nothing was read. Look for the same image in one of those formats."
        )
    return ToolResult(
        [
            TextPart(text=f"image from {url} ({found}, {len(data):,} bytes)"),
            ImagePart(media_type=found, data=base64.b64encode(data).decode()),
        ]
    )


class WebFetch:
    name = "web_fetch"
    description = (
        "Fetch a public web page or file by URL. HTML comes back as Markdown, text as text, "
        "images as images. Private and local addresses are refused."
    )
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
        url = str(input["url"]).strip()
        timeout = self.settings.timeout_s
        try:
            # The whole fetch, not each read: httpx's timeout is per read, so a server that sends a
            # byte now and then would hold the call for as long as it liked.
            async with asyncio.timeout(timeout):
                return await self._fetch(url, ctx)
        except TimeoutError:
            raise ToolError(
                f"{url} did not finish within {timeout:g} s (the server is too slow, or the response "
                "never ends); nothing was read. Try another source, or ask the user to paste the content."
            ) from None

    async def _fetch(self, first: str, ctx: ToolContext) -> ToolResult | str:
        import httpx

        url = first
        async with httpx.AsyncClient(
            timeout=self.settings.timeout_s, follow_redirects=False, trust_env=False
        ) as client:
            for hop in range(MAX_REDIRECTS + 1):
                try:
                    response = await ctx.signal.race(self._get(client, url))
                except ToolError as exc:
                    if hop == 0:
                        raise
                    # Say which hop: the model asked for a public page that sent it elsewhere.
                    raise ToolError(
                        f"{first} redirected (hop {hop} of the redirects) to {url}, and that was {exc}"
                    ) from exc
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
        if parts.scheme.lower() not in ("http", "https") or not parts.hostname:
            raise ToolError(f"refused: {url!r} is not an http(s) URL.")
        try:  # httpx's reading of the host: an international name in its ASCII (IDNA) form
            parsed = httpx.URL(url)
            host, port = parsed.raw_host.decode("ascii"), parsed.port or (443 if parsed.scheme == "https" else 80)
        except (httpx.InvalidURL, UnicodeError, ValueError) as exc:
            raise ToolError(f"refused: {url!r} is not a valid URL ({exc}); check the address.") from None
        addresses = await _resolve(host, port)
        for address in addresses:  # every answer must be acceptable, or a later one could be used
            check_address(address, host, port, self.settings.allow)
        ip = addresses[0]
        pinned = parts._replace(netloc=f"[{ip}]:{port}" if ":" in ip else f"{ip}:{port}").geturl()
        headers = {
            "host": parsed.netloc.decode("ascii"),
            "user-agent": self.settings.user_agent,
            "accept-encoding": ", ".join(n for n in _ENCODINGS if n != "x-gzip"),
        }
        request = client.build_request(
            "GET", pinned, headers=headers, extensions={"sni_hostname": host} if parsed.scheme == "https" else {}
        )
        try:
            return await client.send(request, stream=True)
        except httpx.HTTPError as exc:
            raise ToolError(f"could not fetch {url}: {type(exc).__name__}: {exc}") from exc
        except httpx.InvalidURL as exc:  # httpx reads a redirect's Location even when not following it
            raise ToolError(
                f"could not fetch {url}: it redirects to an address that is not a URL web_fetch can "
                f"follow ({exc}). Try another source."
            ) from exc

    async def _read(self, response: Any, url: str) -> ToolResult | str:
        import httpx

        cap = self.settings.max_bytes
        data = bytearray()
        inflate = _Inflater(response.headers.get("content-encoding", ""), cap, url)
        try:
            async for chunk in response.aiter_raw():
                data += inflate.feed(chunk)
                if len(data) > cap:
                    break
            else:
                data += inflate.feed(b"")
        except httpx.HTTPError as exc:
            raise ToolError(f"could not read {url}: {type(exc).__name__}: {exc}") from exc
        except zlib.error as exc:
            raise ToolError(f"could not read {url}: its compressed content is damaged ({exc}).") from exc
        cut = len(data) > cap
        kind = response.headers.get("content-type", "").split(";", 1)[0].strip().lower()
        if response.status_code >= 400:
            await self._page_text(response, url, kind, bytes(data[:cap]))
            raise ToolError(f"{url} answered HTTP {response.status_code}.")
        if kind.startswith("image/") and kind != "image/svg+xml":  # SVG is text: read below
            if cut:
                raise ToolError(f"the image at {url} is larger than {cap:,} bytes.")
            return _image(bytes(data), kind, url)
        if not (kind.startswith("text/") or kind in _TEXT_KINDS):
            raise ToolError(f"{url} is {kind}, which web_fetch cannot read as text.")
        text = await self._page_text(response, url, kind, bytes(data[:cap]))
        limit = self.settings.max_chars
        notes = []
        if cut:
            notes.append(f"[download stopped at {cap:,} bytes]")
        if len(text) > limit:
            text = text[:limit]
            notes.append(f"[cut at {limit:,} characters]")
        return "\n".join([text, *notes])

    async def _page_text(self, response: Any, url: str, kind: str, body: bytes) -> str:
        """:meth:`_refuse_wall` on a worker thread: parsing and converting 2 MB of HTML takes seconds
        of CPU, which on the event loop would stall every stream, Stop and run sharing it."""
        args = {"response": response, "url": url, "kind": kind, "body": body}
        text: str = await _in_thread(self._refuse_wall, args)
        return text

    @staticmethod
    def _refuse_wall(response: Any, url: str, kind: str, body: bytes) -> str:
        """The page's text, or a ToolError when the page is a wall (a bot check, a missing page
        served as 200, an empty script shell): its text is not the page's content (tools/_walls)."""
        from tether.tools._walls import wall_reason

        html = decode_text(body, response.headers.get("content-type", "")) if body else ""
        text = html_to_markdown(html) if "html" in kind else html
        reason = wall_reason(response.status_code, response.headers, html if "html" in kind else "", text)
        if reason is not None:
            raise ToolError(
                f"{url} gave {reason}, not the page's content (HTTP {response.status_code}). Do not read "
                "it as the page: try another source for the same information, or ask the user to paste it."
            )
        return text


SEARCH_MAX_BYTES = 5_000_000  # one search's answer, decoded
SEARCH_FIELD_CHARS = 1_000  # a result's title, URL or snippet, as given to the model


class SearchBackend(Protocol):
    async def search(self, query: str, limit: int) -> list[dict[str, str]]: ...


@dataclass(frozen=True)
class SearxngBackend:
    """A SearXNG instance's JSON API (``/search?format=json``), e.g. one the deployment runs."""

    url: str

    async def search(self, query: str, limit: int) -> list[dict[str, str]]:
        import httpx

        # Named by scheme, host and port only: a URL may carry a user and password.
        parts = urlsplit(self.url)
        where = f"the search backend (SearXNG at {parts.scheme}://{parts.hostname or '?'}" + (
            f":{parts.port})" if parts.port else ")"
        )
        later = "No search was made: use web_fetch on a URL you already know, or tell the user the search is down."
        try:
            async with (
                httpx.AsyncClient(timeout=20) as client,
                client.stream(
                    "GET", self.url.rstrip("/") + "/search", params={"q": query, "format": "json"}
                ) as response,
            ):
                body = bytearray()
                async for chunk in response.aiter_bytes():  # decoded: a compressed bomb counts at full size
                    body += chunk
                    if len(body) > SEARCH_MAX_BYTES:
                        raise ToolError(
                            f"{where} answered with more than {SEARCH_MAX_BYTES // 1_000_000} MB, so its answer "
                            f"was not read (a search's is a few kilobytes). {later}"
                        )
        except httpx.TimeoutException:
            raise ToolError(f"{where} did not answer within 20 s. {later}") from None
        except (httpx.HTTPError, ValueError) as exc:  # refused, unresolvable, a cut connection, a bad URL
            why = str(exc) or type(exc).__name__
            raise ToolError(f"{where} could not be reached ({why}). {later}") from None
        if response.status_code >= 400:
            raise ToolError(
                f"{where} answered HTTP {response.status_code}"
                + (
                    " (its JSON output may be off: formats = [json] in its settings.yml)"
                    if response.status_code == 403
                    else ""
                )
                + f". {later}"
            )
        try:
            results = json.loads(bytes(body)).get("results", [])
            if not isinstance(results, list):
                raise TypeError
        except (ValueError, AttributeError, TypeError):
            raise ToolError(
                f'{where} answered with what is not SearXNG\'s JSON (a list under "results"); check that '
                f"[tools.web_search] url is the instance's address and its JSON output is on. {later}"
            ) from None
        return [
            {"title": _field(r, "title"), "url": _field(r, "url"), "snippet": _field(r, "content")}
            for r in results
            if isinstance(r, dict)
        ][:limit]


def _field(result: dict[str, Any], name: str) -> str:
    value = result.get(name)
    if not isinstance(value, str):
        return ""
    return value if len(value) <= SEARCH_FIELD_CHARS else value[:SEARCH_FIELD_CHARS] + "…"


class WebSearch:
    name = "web_search"
    description = "Search the web; returns titles, URLs and snippets. Use web_fetch to read a result."
    input_schema: ClassVar[dict[str, Any]] = {
        "type": "object",
        "properties": {
            "query": {"type": "string", "minLength": 1, "maxLength": 500},
            "limit": {"type": "integer", "minimum": 1, "maximum": 20, "default": 5},
        },
        "required": ["query"],
        "additionalProperties": False,
    }
    read_only = True
    needs_approval = False

    def __init__(self, backend: SearchBackend | None = None) -> None:
        self.backend = backend

    async def execute(self, input: dict[str, Any], ctx: ToolContext) -> ToolResult | str:
        if self.backend is None:
            return ToolResult(
                "web_search is not configured in this deployment, so no search was made. "
                'To enable it, add to config.toml:\n[tools.web_search]\nkind = "searxng"\n'
                'url = "https://your-searxng-instance"\n'
                "Meanwhile, use web_fetch on a URL you already know.",
                is_error=True,
            )
        hits = await ctx.signal.race(self.backend.search(str(input["query"]), int(input.get("limit", 5))))
        if not hits:
            return f"no results for {input['query']!r}"
        return "\n\n".join(f"{i}. {h['title']}\n   {h['url']}\n   {h['snippet']}" for i, h in enumerate(hits, 1))
