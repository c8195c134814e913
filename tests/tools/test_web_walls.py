"""web_fetch names pages that are walls (bot checks, soft 404s, empty script shells) as failed
fetches with a reason, and still returns ordinary pages that share their words.

Pages come from a loopback server; nothing reaches the network.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.tools.test_security import _Site, run_tool
from tether.tools._walls import wall_reason
from tether.tools.base import ToolError
from tether.tools.web import WebFetch, WebSettings, html_to_markdown

HTML = {"content-type": "text/html; charset=utf-8"}
ARTICLE = "<p>" + "Valves are rated by pressure class and by the material of their seals. " * 30 + "</p>"


def page(title: str, body: str, head: str = "") -> bytes:
    return f"<html><head><title>{title}</title>{head}</head><body>{body}</body></html>".encode()


WALLS: dict[str, tuple[int, dict[str, str], bytes, str]] = {
    # Cloudflare's interstitial: its header says so, whatever the page's words.
    "/cf-header": (403, {**HTML, "cf-mitigated": "challenge"}, page("Just a moment...", "<p>...</p>"), "Cloudflare"),
    # The same page served without the header (a cached copy, a proxy): its scripts say so.
    "/cf-script": (
        200,
        HTML,
        page(
            "Un instant…", "<div id=cf>x</div>", '<script src="/cdn-cgi/challenge-platform/h/b/orchestrate"></script>'
        ),
        "cdn-cgi/challenge-platform",
    ),
    "/recaptcha": (
        200,
        HTML,
        page("Security check", '<div class="g-recaptcha" data-sitekey="k"></div>'),
        "g-recaptcha",
    ),
    "/hcaptcha-ja": (200, HTML, page("しばらくお待ちください", '<div class="h-captcha"></div>'), "h-captcha"),
    "/verify-de": (200, HTML, page("Bestätigen Sie, dass Sie ein Mensch sind", "<p>Bitte warten.</p>"), "verification"),
    "/verify-ru": (503, HTML, page("Один момент…", "<p>Проверка безопасности</p>"), "verification"),
    "/verify-ko": (200, HTML, page("잠시만 기다리십시오", "<p>보안 확인 중</p>"), "verification"),
    "/soft-404": (200, HTML, page("Page not found", "<h1>404</h1><p>Sorry, nothing here.</p>"), "not found"),
    "/soft-404-es": (200, HTML, page("Página no encontrada", "<p>Lo sentimos.</p>"), "not found"),
    "/soft-404-zh": (200, HTML, page("页面不存在", "<p>抱歉</p>"), "not found"),
    "/shell": (
        200,
        HTML,
        page(
            "App",
            '<noscript>You need to enable JavaScript to run this app.</noscript><div id="root"></div>',
            "<script src=/app.js></script>",
        ),
        "JavaScript",
    ),
    "/shell-loading": (
        200,
        HTML,
        page("Dashboard", '<div id="app">Loading…</div><script>boot()</script>'),
        "JavaScript",
    ),
}

PAGES: dict[str, tuple[int, dict[str, str], bytes, str]] = {
    # Short and real, with a script: the page's own words are there.
    "/short": (
        200,
        HTML,
        page("Docs", "<main><h1>Hello</h1><p>A page about valves.</p></main><script>x()</script>"),
        "valves",
    ),
    # A long article with a CAPTCHA in its comment form is the article.
    "/article-captcha": (
        200,
        HTML,
        page("Valve seals", ARTICLE + '<form><div class="g-recaptcha"></div></form>'),
        "pressure class",
    ),
    # An article whose title names the 404 status is not a missing page.
    "/article-404": (200, HTML, page("What HTTP 404 means", ARTICLE), "pressure class"),
    # A long page titled "Just a moment" (a song, a poem) is content.
    "/song": (200, HTML, page("Just a moment (lyrics)", ARTICLE), "seals"),
    # Plain text and JSON are never judged by HTML markers.
    "/text": (200, {"content-type": "text/plain"}, b"not found: 404 is the status for a missing page", "404"),
    "/json": (200, {"content-type": "application/json"}, b'{"error": "not found"}', "not found"),
    "/empty-text": (200, {"content-type": "text/plain"}, b"", ""),
}


@pytest.fixture
def site() -> Iterator[_Site]:
    s = _Site({path: (status, headers, body) for path, (status, headers, body, _) in {**WALLS, **PAGES}.items()})
    yield s
    s.server.shutdown()


def fetch(site: _Site, path: str) -> Any:
    return run_tool(WebFetch(WebSettings(allow=(f"127.0.0.1:{site.port}",))), Path("."), url=site.url(path))


@pytest.mark.parametrize("path", list(WALLS))
def test_a_wall_is_a_failed_fetch_with_its_reason(site: _Site, path: str) -> None:
    with pytest.raises(ToolError) as refused:
        fetch(site, path)
    message = str(refused.value)
    assert WALLS[path][3].lower() in message.lower(), message
    assert "not the page's content" in message and "another source" in message


@pytest.mark.parametrize("path", list(PAGES))
def test_an_ordinary_page_that_shares_the_words_is_returned(site: _Site, path: str) -> None:
    assert PAGES[path][3] in fetch(site, path)


def test_an_http_error_that_is_a_bot_check_says_so_and_a_plain_one_keeps_its_status() -> None:
    body = page("Attention Required! | Cloudflare", "<p>Sorry, you have been blocked</p>").decode()
    assert wall_reason(403, {}, body, html_to_markdown(body)) is not None
    assert wall_reason(500, {}, "", "internal error") is None
