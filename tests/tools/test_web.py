"""web_fetch: IPv6 forms that embed an IPv4 address, and the charset a page declares in its HTML.

No test reaches the network: addresses are checked directly, pages come from a loopback server.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.tools.test_security import _Site, fetch, run_tool
from tests.tools.test_security import sites as sites  # the fixture, shared
from tether.tools.base import ToolError
from tether.tools.web import WebFetch, WebSettings, check_address, decode_text

# --- addresses -----------------------------------------------------------------------------------

PRIVATE_V4 = ["127.0.0.1", "10.0.0.1", "192.168.1.1", "172.16.0.1", "169.254.169.254", "100.64.0.1", "0.0.0.0"]


def embeddings(v4: str) -> list[str]:
    """The IPv6 forms that carry ``v4`` inside them."""
    a, b, c, d = (int(x) for x in v4.split("."))
    hi, lo = f"{a * 256 + b:x}", f"{c * 256 + d:x}"
    return [
        f"::ffff:{v4}",  # IPv4-mapped
        f"::{v4}",  # IPv4-compatible (deprecated)
        f"::ffff:0:{v4}",  # IPv4-translated (SIIT)
        f"64:ff9b::{v4}",  # NAT64, well-known prefix
        f"64:ff9b::{hi}:{lo}",  # the same, written in hex
        f"2002:{hi}:{lo}::1",  # 6to4
        f"2002:{hi}:{lo}:1234:5678:9abc:def0:1",
    ]


@pytest.mark.parametrize("ip", [form for v4 in PRIVATE_V4 for form in embeddings(v4)])
def test_ipv6_forms_that_embed_a_private_ipv4_are_refused(ip: str) -> None:
    with pytest.raises(ToolError, match="private or local"):
        check_address(ip, "example.test", 80, allow=())


@pytest.mark.parametrize(
    "ip",
    [
        "64:ff9b:1::a00:1",
        "64:ff9b:1:ffff::1",  # NAT64 local-use (RFC 8215)
        "2001:0:4136:e378:8000:63bf:3fff:fdd2",
        "2001::1",
    ],
)  # Teredo
def test_tunnels_whose_ipv4_cannot_be_read_reliably_are_refused(ip: str) -> None:
    with pytest.raises(ToolError, match="refused"):
        check_address(ip, "example.test", 80, allow=())


@pytest.mark.parametrize(
    "ip",
    [form for form in embeddings("93.184.216.34") if not form.startswith("::")]
    + ["2606:4700::1111", "2001:4860:4860::8888"],
)
def test_ipv6_forms_of_a_public_ipv4_pass(ip: str) -> None:
    check_address(ip, "example.test", 80, allow=())  # e.g. what a DNS64 resolver answers on IPv6-only networks


def test_the_deployment_can_allow_an_embedded_address_or_a_tunnel() -> None:
    check_address("64:ff9b::10.1.2.3", "example.test", 80, allow=("10.0.0.0/8",))
    check_address("2002:a01:203::1", "example.test", 80, allow=("2002::/16",))
    check_address("2001::1", "relay.test", 443, allow=("relay.test:443",))
    with pytest.raises(ToolError):
        check_address("64:ff9b::10.1.2.3", "example.test", 80, allow=("192.168.0.0/16",))


def test_the_refusal_names_the_embedded_address() -> None:
    with pytest.raises(ToolError, match=r"169\.254\.169\.254"):
        check_address("64:ff9b::a9fe:a9fe", "metadata.test", 80, allow=())


# --- charsets ------------------------------------------------------------------------------------

RUSSIAN = "Политика ротации журналов"
JAPANESE = "ログのローテーション方針"


def page(body: str, head: str) -> str:
    return f"<html><head>{head}<title>t</title></head><body><main><p>{body}</p></main></body></html>"


@pytest.mark.parametrize(
    ("head", "encoding", "text"),
    [
        ('<meta charset="windows-1251">', "windows-1251", RUSSIAN),
        ("<META CHARSET=cp1251 />", "cp1251", RUSSIAN),
        ('<meta http-equiv="Content-Type" content="text/html; charset=Shift_JIS">', "shift_jis", JAPANESE),
        ("<meta content='text/html;charset=shift_jis' http-equiv='content-type'>", "shift_jis", JAPANESE),
    ],
)
def test_decode_text_honours_the_meta_charset_when_the_header_has_none(head: str, encoding: str, text: str) -> None:
    data = page(text, head).encode(encoding)
    assert text in decode_text(data, "text/html")


def test_the_header_charset_and_a_bom_win_over_the_meta() -> None:
    data = page(RUSSIAN, '<meta charset="shift_jis">').encode("utf-8")
    assert RUSSIAN in decode_text(data, "text/html; charset=utf-8")
    assert RUSSIAN in decode_text(b"\xef\xbb\xbf" + data, "text/html")
    assert RUSSIAN in decode_text(page(RUSSIAN, "").encode(), "text/html")  # nothing declared: UTF-8


def test_an_unknown_or_unfit_charset_falls_back_instead_of_failing() -> None:
    data = page(RUSSIAN, '<meta charset="no-such-charset">').encode()
    assert RUSSIAN in decode_text(data, "text/html; charset=no-such-charset")
    # A page that could declare utf-16 in ASCII is not utf-16 (as browsers reason): read as UTF-8.
    assert RUSSIAN in decode_text(page(RUSSIAN, '<meta charset="utf-16">').encode(), "text/html")
    assert "<meta" in decode_text(page("x", '<meta charset="windows-1251">').encode("cp1251"), "text/plain")


@pytest.fixture
def site() -> Iterator[_Site]:
    s = _Site(
        {
            "/ru": (
                200,
                {"content-type": "text/html"},
                page(RUSSIAN, '<meta charset="windows-1251">').encode("cp1251"),
            ),
            "/ja": (
                200,
                {"content-type": "text/html"},
                page(JAPANESE, '<meta http-equiv="Content-Type" content="text/html; charset=shift_jis">').encode(
                    "sjis"
                ),
            ),
        }
    )
    yield s
    s.server.shutdown()


@pytest.mark.parametrize(("path", "text"), [("/ru", RUSSIAN), ("/ja", JAPANESE)])
def test_web_fetch_reads_a_page_in_its_declared_charset(site: Any, path: str, text: str) -> None:
    out = run_tool(WebFetch(WebSettings(allow=(f"127.0.0.1:{site.port}",))), Path("."), url=site.url(path))
    assert text in out


def test_a_refused_redirect_names_the_hop_and_the_setting_that_would_allow_it(sites: Any) -> None:
    public, _ = sites
    with pytest.raises(ToolError) as refused:
        fetch(public, "/to-secret")
    message = str(refused.value)
    assert "redirected (hop 1 of the redirects)" in message and public.url("/to-secret") in message
    assert "[tools.web] allow" in message


@pytest.mark.parametrize("hostile", ["</", "<?", "<!--a</-- ", "<!"])
def test_a_page_left_open_is_parsed_without_pythons_quadratic_html_parser(
    hostile: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Python 3.11's html.parser rescans to the end of the page for every construct left open
    (CVE-2025-6069): a 1 MB page of "</" held a core for three minutes. The page is parsed by
    libxml2 (lxml) instead, in one pass; html.parser is never asked, here made to fail if it is."""
    import html.parser

    from tether.tools.web import html_to_markdown

    def refuse(*args: Any, **kwargs: Any) -> None:
        raise AssertionError("html.parser was used")

    monkeypatch.setattr(html.parser.HTMLParser, "goahead", refuse)
    page = "<html><title>Notes</title><body><main><p>Kept <b>text</b>.</p>" + hostile * 50_000
    assert html_to_markdown(page).startswith("# Notes\n\nKept **text**.")
    normal = "<html><body><article><h2>Part</h2><ul><li>one</li><li>two</li></ul></article></body></html>"
    assert html_to_markdown(normal) == "## Part\n\n* one\n* two"
