"""Pages that are walls, not content: bot checks, missing pages served as 200, empty script shells.

``web_fetch`` returns a page's text to the model, and a model reads whatever it gets as the page. A
Cloudflare "Just a moment…" interstitial, a CAPTCHA, a "page not found" served with status 200 or a
single-page app's empty ``<div id="root">`` would be summarised as if it were the article. This
module names such a page so the tool can answer with a failure and its reason instead.

The signals are the vendors' own markers (Cloudflare's ``cf-mitigated: challenge`` header and its
``/cdn-cgi/challenge-platform/`` scripts, reCAPTCHA, hCaptcha, Turnstile, DataDome, PerimeterX,
Imperva, AWS WAF), the interstitials' titles in the languages they are served in, and the shape of
the page: a wall has little visible text. A long article that embeds a CAPTCHA in a comment form is
still the article.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

__all__ = ["wall_reason"]

# A wall's visible text is short: an interstitial is a sentence or two, a soft 404 a paragraph.
_SHORT = 1_500
_EMPTY = 200

_CHALLENGE_MARKERS = (
    "/cdn-cgi/challenge-platform/",
    "challenges.cloudflare.com",
    "cf-browser-verification",
    "cf_chl_opt",
    "cf-turnstile",
    "g-recaptcha",
    "recaptcha/api.js",
    "h-captcha",
    "hcaptcha.com",
    "captcha-delivery.com",  # DataDome
    "px-captcha",  # PerimeterX / HUMAN
    "_incapsula_resource",  # Imperva
    "awswafintegration",  # AWS WAF's CAPTCHA
    "ddos-guard",
)

# Interstitial titles and headings, as served in the languages the vendors localise them to.
_CHALLENGE_TEXT = re.compile(
    r"just a moment|checking your browser|attention required|verify(?:ing)? you are (?:a )?human"
    r"|are you a robot|i'?m not a robot|security (?:check|verification)|please enable cookies"
    r"|un instant|vérification (?:de sécurité|que vous êtes)|vérifiez que vous êtes"
    r"|einen moment|sicherheitsüberprüfung|bestätigen sie, dass sie ein mensch"
    r"|un momento|verifica(?:ndo|ción de seguridad| che sei)|verifique que (?:é|es) (?:un )?humano"
    r"|um momento|verificação de segurança|один момент|проверка безопасности|проверяем"
    r"|しばらくお待ちください|セキュリティチェック|請稍候|请稍候|安全检查|人机验证|잠시만 기다리|보안 확인"
    r"|لحظة واحدة|التحقق من أنك إنسان",
    re.IGNORECASE,
)

_NOT_FOUND_TEXT = re.compile(
    r"\b404\b|page not found|not found|no longer available|doesn'?t exist|does not exist"
    r"|page introuvable|seite nicht gefunden|nicht gefunden|página no encontrada|no se encontró"
    r"|pagina non trovata|página não encontrada|страница не найдена|ページが見つかりません"
    r"|页面不存在|找不到页面|페이지를 찾을 수 없|الصفحة غير موجودة",
    re.IGNORECASE,
)

_SCRIPT_SHELL_TEXT = re.compile(
    r"enable javascript|javascript (?:is )?(?:required|disabled)|needs? javascript|activez javascript"
    r"|javascript aktivieren|habilita javascript|attiva javascript",
    re.IGNORECASE,
)

# Elements are found with one regex for the start and another for the end, never one ``<x.*?</x>``:
# a page of 20,000 unclosed ``<script/>`` made that rescan the rest of the page from each start
# (quadratic: 40 s of a held GIL for 180 kB, hours for 2 MB, the whole process frozen meanwhile).
_TITLE = re.compile(r"<title[^>]*>", re.IGNORECASE)
_H1 = re.compile(r"<h1[^>]*>", re.IGNORECASE)
_TAG = re.compile(r"<[^>]+>")
_HIDDEN = re.compile(r"<(script|style|title|noscript|template)\b", re.IGNORECASE)
_SPACE = re.compile(r"\s+")


_LOADING = re.compile(
    r"(?:loading|please wait|chargement|cargando|carregando|caricamento|wird geladen|laden|загрузка|読み込み中|加载中)"
    r"[.…]*",
    re.IGNORECASE,
)


def _closing(name: str) -> re.Pattern[str]:
    return re.compile(rf"</{name}\s*>", re.IGNORECASE)


def _without_tags(html: str) -> str:
    """``html`` with its tags as spaces. A ``<`` after the last ``>`` starts no tag: left out of the
    regex, which would otherwise scan to the end from each of them."""
    end = html.rfind(">") + 1
    return _TAG.sub(" ", html[:end]) + html[end:]


def _without_hidden(html: str) -> str:
    """``html`` without its scripts, styles, title, noscript and templates, in linear time."""
    kept: list[str] = []
    pos = 0
    unclosed: set[str] = set()  # no closing tag after some start: none after a later one either
    for start in _HIDDEN.finditer(html):
        name = start.group(1).lower()
        if start.start() < pos or name in unclosed:
            continue
        end = _closing(name).search(html, start.end())
        if end is None:
            unclosed.add(name)
            continue
        kept += [html[pos : start.start()], " "]
        pos = end.end()
    return "".join([*kept, html[pos:]])


def _element_text(html: str, start: re.Pattern[str], name: str) -> str | None:
    """The inside of the first element ``start`` opens, up to its closing tag; None without one."""
    opened = start.search(html, 0, html.rfind(">") + 1)  # past the last ">", no start can end
    if opened is None:
        return None
    end = _closing(name).search(html, opened.end())
    return None if end is None else html[opened.end() : end.start()]


def _body_text(html: str) -> str:
    """The text the page shows in its body (no title, scripts or styles), without spaces."""
    return _SPACE.sub("", _without_tags(_without_hidden(html)))


def _heading(html: str) -> str:
    """The page's title and first heading, as text: where a wall says what it is."""
    parts = [p for start, name in ((_TITLE, "title"), (_H1, "h1")) if (p := _element_text(html, start, name))]
    return " ".join(_without_tags(p) for p in parts).strip()


def wall_reason(status: int, headers: Mapping[str, str], html: str, text: str) -> str | None:
    """Why this response is a wall and not the page, or None when it is the page.

    ``html`` is the decoded body (empty when it was not HTML), ``text`` what the model would read.
    """
    lowered = html.lower()
    visible = len(text.strip())
    heading = _heading(html)
    if headers.get("cf-mitigated", "").lower() == "challenge":
        return "a bot check (Cloudflare answered with a challenge page)"
    marker = next((m for m in _CHALLENGE_MARKERS if m in lowered), None)
    if marker is not None and visible < _SHORT:
        return f"a bot check or CAPTCHA page (it loads {marker.strip('/')})"
    if visible < _SHORT and (_CHALLENGE_TEXT.search(heading) or (visible < _EMPTY and _CHALLENGE_TEXT.search(text))):
        return f"a bot check or security verification page ({heading or text.strip()[:80]!r})"
    if status < 400 and visible < _SHORT and _NOT_FOUND_TEXT.search(heading):
        return f"a 'page not found' page served with status {status} ({heading[:80]!r})"
    body = _body_text(html)
    bare = not body or _LOADING.fullmatch(body) is not None
    if html and "<script" in lowered and (bare or (len(body) < _EMPTY and _SCRIPT_SHELL_TEXT.search(html))):
        return "an empty page that only builds its content with JavaScript (web_fetch does not run scripts)"
    return None
