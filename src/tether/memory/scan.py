"""The security scan every memory write passes: offline, no model, a reason in words.

Memory is pasted into the system prompt of every future session, so it is the door a prompt
injection would use to stay. The scan looks at text the way a model reads it, not the way it is
spelled:

1. characters a reader cannot see are refused outright: zero-width characters, bidi embeddings,
   overrides and isolates, Unicode tag characters, soft hyphens (a zero-width joiner between
   emoji and the joiners that Arabic and Indic scripts need are fine);
2. the text is decoded (HTML entities, ``%xx``, ``\\uXXXX``) and normalised into views: NFKC and
   case folding (full-width letters become ASCII); accents stripped and look-alike letters folded to
   Latin with Unicode's confusables table (from ``confusable-homoglyphs``); leetspeak undone
   inside words; letters spaced out one by one joined again; everything squeezed together;
3. rules in several languages run on the view they need: instruction overrides and their
   paraphrases, role hijack, fake system and developer messages (in markdown, HTML, chat-template
   tokens, JSON), commands that read or send secrets, instructions to hide or to repeat something
   in every answer; a word mixing Latin with Cyrillic or Greek look-alikes is refused as a homoglyph;
4. base64 runs that decode to text are scanned again, and refused when what they carry is.

A deployment adds its own checks (a model-based guardrail, say) behind the same interface:
anything with ``scan(text) -> Finding | None``.
"""

from __future__ import annotations

import base64
import binascii
import functools
import html
import json
import re
import unicodedata
import urllib.parse
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from tether.memory import _normal

if TYPE_CHECKING:
    from tether.memory import _model

__all__ = [
    "Finding",
    "ModelScanner",
    "PatternScanner",
    "Scanner",
    "default_scanner",
    "latin_lookalikes",
    "scan_context_text",
    "views",
]


@dataclass(frozen=True)
class Finding:
    """What a scan refused: its kind (``rule``), what was found and where (``reason``), and what
    the person saving a memory note can do instead (``advice``). ``message`` joins the last two,
    as a refused memory write says it; a guardrail's rationale or a dropped tool description gives
    the reason alone."""

    rule: str  # invisible, homoglyph, override, role_hijack, fake_system, exfiltration, persistence, encoded
    reason: str  # what was found, written for the model and the person
    advice: str = ""  # what the person writing a memory note can do instead ("" when nothing is said)

    @property
    def message(self) -> str:
        """The reason and the advice: what a memory write that is refused says."""
        return f"{self.reason}; {self.advice}" if self.advice else self.reason


class Scanner(Protocol):
    def scan(self, text: str) -> Finding | None: ...


class PatternScanner:
    """The offline default: normalisation, then rules (see the module's description)."""

    def scan(self, text: str) -> Finding | None:
        return _scan(text, depth=0)


def default_scanner() -> Scanner:
    """The scan memory writes pass by default: :class:`ModelScanner`."""
    return ModelScanner()


# -- invisible characters -------------------------------------------------------------------

_BIDI = {0x061C, 0x200E, 0x200F, *range(0x202A, 0x202F), *range(0x2066, 0x206A)}
_JOINERS = {0x200C, 0x200D}
# Scripts whose writing needs ZWJ/ZWNJ between letters (Arabic, Persian, Indic, Sinhala...).
_JOINING_SCRIPTS = ((0x0600, 0x08FF), (0x0900, 0x0DFF), (0xFB50, 0xFEFF))


def _joining_letter(ch: str) -> bool:
    return any(lo <= ord(ch) <= hi for lo, hi in _JOINING_SCRIPTS)


def _pictographic(ch: str) -> bool:
    o = ord(ch)
    return o >= 0x1F000 or 0x2600 <= o <= 0x27BF or o in (0xFE0F, 0x2640, 0x2642, 0x2695, 0x2696, 0x2708)


def _invisible(text: str) -> Finding | None:
    found = _normal.hidden(text)
    if found is None:
        return None
    return Finding(
        "invisible",
        f"it contains {found.describe()}; such characters can hide or reorder text",
        "write it again in plain characters",
    )


def _flag_tag(text: str, i: int) -> bool:
    j = i
    while j > 0 and 0xE0020 <= ord(text[j - 1]) <= 0xE007F:
        j -= 1
    return j > 0 and text[j - 1] == "\U0001f3f4" and len(text[j : i + 1]) <= 7


# -- normalisation --------------------------------------------------------------------------


@functools.lru_cache(maxsize=1)
def _fold_table() -> dict[int, str]:
    """Non-ASCII letters that look like an ASCII letter or digit → that character (Unicode's
    confusables, as shipped by confusable-homoglyphs), plus a few look-alikes it leaves out."""
    from importlib.resources import files

    data = json.loads(files("confusable_homoglyphs").joinpath("confusables.json").read_bytes())
    table: dict[int, str] = {}
    for ch, glyphs in data.items():
        if len(ch) != 1 or ord(ch) < 0x80 or not ch.isalpha():
            continue
        for g in glyphs:
            c = g.get("c", "")
            if len(c) == 1 and c.isascii() and c.isalnum():
                table[ord(ch)] = c.lower()
                break
    from tether.memory import _rules

    table.update({ord(k): v for k, v in _rules.EXTRA_LOOKALIKES.items()})
    return table


_LEET = str.maketrans(
    {
        "0": "o",
        "1": "i",
        "3": "e",
        "4": "a",
        "5": "s",
        "7": "t",
        "8": "b",
        "9": "g",
        "@": "a",
        "$": "s",
        "!": "i",
        "|": "i",
        "+": "t",
        "€": "e",
    }
)
_ESCAPES = re.compile(r"\\u([0-9a-fA-F]{4})|\\x([0-9a-fA-F]{2})")


def _decode(text: str) -> str:
    text = html.unescape(text)
    if re.search(r"%[0-9a-fA-F]{2}", text):
        text = urllib.parse.unquote(text)
    return _ESCAPES.sub(lambda m: chr(int(m.group(1) or m.group(2), 16)), text)


@dataclass(frozen=True)
class Views:
    plain: str  # NFKC, case-folded, invisible characters removed: for non-Latin scripts
    latin: str  # plain, accents stripped, look-alikes folded to Latin; punctuation kept: commands, markup
    words: str  # latin as words: leetspeak undone, spaced letters joined, punctuation gone
    compact: str  # words without spaces: for words split by spaces, dots or dashes
    leet: str  # latin with leetspeak undone inside words, punctuation kept
    raw: str  # as written (case kept): for labels in capitals


_SPACED = re.compile(r"(?<![\w])(?:\w[ .\-_*·/|]){2,}\w(?![\w])")
_CJK_GAP = re.compile(r"(?<=[\u3040-\u30ff\u4e00-\u9fff])[ \u3000]+(?=[\u3040-\u30ff\u4e00-\u9fff])")


def views(text: str) -> Views:
    plain = unicodedata.normalize("NFKC", _decode(text))
    plain = "".join(ch for ch in plain if unicodedata.category(ch) != "Cf").casefold()
    # "i g n o r e   a l l" → "ignore   all"; "忽 略 之 前" → "忽略之前"
    plain = _CJK_GAP.sub("", _SPACED.sub(lambda m: re.sub(r"[ .\-_*·/|]", "", m.group(0)), plain))
    stripped = "".join(ch for ch in unicodedata.normalize("NFKD", plain) if unicodedata.category(ch) != "Mn")
    latin = stripped.translate(_fold_table())
    leet = re.sub(
        r"[a-z0-9@$!|+€]+",
        lambda m: (
            m.group(0).translate(_LEET)
            if re.search(r"[a-z]", m.group(0)) and re.search(r"[0-9@$!|+€]", m.group(0))
            else m.group(0)
        ),
        latin,
    )
    tokens = []
    for token in re.sub(r"[^a-z0-9@$!|+€]+", " ", latin).split():
        if re.search(r"[a-z]", token) and re.search(r"[0-9@$!|+€]", token):
            token = token.translate(_LEET)
        token = re.sub(r"[^a-z0-9]", "", token)
        if token:
            tokens.append(token)
    words = " ".join(_join_spaced(tokens))
    return Views(plain, latin, words, words.replace(" ", ""), leet, text)


def _join_spaced(tokens: list[str]) -> list[str]:
    """``i g n o r e all`` → ``ignore all``: a run of three or more one-letter tokens is a word."""
    out: list[str] = []
    run: list[str] = []
    for t in [*tokens, ""]:
        if len(t) == 1:
            run.append(t)
            continue
        if len(run) >= 3:
            out.append("".join(run))
        else:
            out.extend(run)
        run = []
        if t:
            out.append(t)
    return out


# -- the rules ------------------------------------------------------------------------------


def _homoglyph(text: str) -> Finding | None:
    """A word with Latin letters and Cyrillic or Greek letters that look like Latin ones."""
    table = _fold_table()
    for word in re.findall(r"\w+", unicodedata.normalize("NFKC", text)):
        latin = sum(1 for ch in word if "a" <= ch.lower() <= "z")
        alien = [ch for ch in word if ord(ch) in table and _script(ch) in ("CYRILLIC", "GREEK")]
        if latin >= 1 and alien and len(word) >= 3:
            return Finding(
                "homoglyph",
                f"the word \u201c{word}\u201d mixes Latin letters with "
                f"{_script(alien[0]).title()} look-alikes ({alien[0]!r}), a way to slip words past checks",
            )
    return None


def _script(ch: str) -> str:
    return unicodedata.name(ch, "").split(" ", 1)[0]


def latin_lookalikes(text: str) -> str:
    """``text`` with each word that mixes Latin letters with Cyrillic or Greek look-alikes written
    in Latin letters alone (``wеathеr`` with two Cyrillic ``е`` becomes ``weather``), one character
    for one; words in one script are left as they are (a Russian word is not a misspelt English
    one). What a rule written in Latin letters should also be matched against."""
    if text.isascii():
        return text
    table = _fold_table()

    def fold(m: re.Match[str]) -> str:
        word = m.group(0)
        if word.isascii() or not any("a" <= c.lower() <= "z" for c in word):
            return word
        alien = [c for c in word if not c.isascii() and _script(c) in ("CYRILLIC", "GREEK")]
        if not alien:
            return word
        folded = "".join(table.get(ord(c), c) if c in alien else c for c in word)
        return folded if len(folded) == len(word) else word

    return re.sub(r"\w+", fold, text)


_B64 = re.compile(r"[A-Za-z0-9+/_-]{16,}={0,2}")


def _payloads(text: str) -> list[str]:
    """Runs of base64 (or base64url) that decode to readable text."""
    out = []
    for m in _B64.finditer(text.replace("\n", "")):
        token = m.group(0).rstrip("=")
        if not re.search(r"[0-9+/_-]|[a-z][A-Z]|[A-Z][a-z]", token):
            continue
        for alphabet in (None, b"-_"):
            try:
                raw = base64.b64decode(token + "=" * (-len(token) % 4), altchars=alphabet, validate=True)
                decoded = raw.decode("utf-8")
            except (binascii.Error, ValueError):
                continue
            printable = sum(ch.isprintable() or ch in "\n\t" for ch in decoded)
            nested = _B64.fullmatch(decoded.strip()) is not None  # base64 of base64: decode again
            # Two words apart (found as two letters, a gap, two letters: `\w{2,}` tried from every
            # letter of a long word, each to its end, was quadratic: 400,000 characters, minutes).
            if decoded and printable / len(decoded) > 0.9 and (nested or re.search(r"\w\w\W+\w\w", decoded)):
                out.append(decoded)
                break
    return out


def _scan(text: str, depth: int) -> Finding | None:
    finding = _invisible(text) or _homoglyph(text)
    if finding is not None:
        return finding
    from tether.memory import _rules

    v = views(text)
    for rule in (*_rules.RULES, *_rules.COMBOS):
        hit = rule.match(v)
        if hit is not None:
            return Finding(rule.family, f"{rule.reason} (\u201c{_snippet(hit)}\u201d)")
    if depth < 3:
        for decoded in _payloads(text):
            inner = _scan(decoded, depth + 1)
            if inner is not None:
                return _encoded(inner)
    return None


def _encoded(inner: Finding) -> Finding:
    """The refusal of a text whose base64 payload decodes to ``inner``'s (said once, however deep)."""
    if inner.rule == "encoded":
        return inner
    return Finding(
        "encoded",
        f"it carries an encoded payload (base64) that decodes to text that is refused: {inner.reason}",
        inner.advice,
    )


def _snippet(text: str) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= 60 else flat[:59] + "\u2026"


# -- the default scanner: structure first, then the learned model -----------------------------

_KIND_REASONS = {
    "override": (
        "it tells the assistant to ignore or drop the instructions it was given",
        "write what the user wants as a fact about the user, not as an order to the assistant",
    ),
    "obsolete": (
        "it declares the assistant's earlier instructions obsolete, withdrawn or void",
        "if a document or setup changed, name that document, not the assistant's instructions",
    ),
    "system_override": (
        "it claims to replace the system prompt or to switch the assistant's safety checks off",
        "memory cannot change the system prompt; save only facts and preferences",
    ),
    "role_hijack": (
        "it gives the assistant a new identity without rules, or one that obeys any order",
        "to save a persona for a story or a game, say whose it is and what it is for",
    ),
    "exfiltration": (
        "it asks to read, print or send secrets (keys, tokens, passwords, private files) or sends them to an address",
        "save where a secret is kept or how to get access, never the secret or a command that sends it",
    ),
    "persistence": (
        "it tells the assistant to hide this note, keep it alive, or slip something into every answer",
        "save what the user asked for, openly, without telling the assistant to conceal it",
    ),
    "fake_system": (
        "it imitates a system or developer message (chat-template tokens, a role label, or a message "
        "marked with the system's role)",
        "remove the role label or the markup and save the fact itself",
    ),
}
RULE_NAMES = frozenset({*_KIND_REASONS, "invisible", "homoglyph", "encoded"})
# The model's verdicts: its fake_system is read from the wording (the markup and role labels are
# found before it is asked), so its reason names no markup.
_MODEL_REASONS = {
    **_KIND_REASONS,
    "fake_system": (
        "it gives the assistant standing orders as if it were the system, the developer or its maker",
        "a note cannot give orders for the system; save the fact itself, as something about the user",
    ),
}

_TEMPLATE = re.compile(
    r"<\|\s*(?:im_start|im_end|system|endoftext|start_header_id|end_header_id|eot_id)\s*\|>|<<\s*sys\s*>>|"
    r"\[/?inst\]|</?\s*(?:system|developer)(?:_message|_prompt)?\s*>",
    re.I,
)
_ROLE_LABEL = re.compile(
    r"(?m)^\W{0,6}(?:SYSTEM|SYSTEM MESSAGE|SYSTEMNACHRICHT|SYSTÈME|SISTEMA|DEVELOPER|DÉVELOPPEUR|ENTWICKLER|"
    r"СИСТЕМА|СИСТЕМНОЕ СООБЩЕНИЕ|ADMIN|ADMINISTRATOR|ROOT|系统|系統|システム|시스템|النظام|सिस्टम)\s*[:：\]】>]"
)
# A chat message written as data, marked as the system's or the developer's: a JSON object
# (``{"role": "system", "content": ...}``) or a YAML entry (``role: developer`` with a ``content:``
# line). A mention of the role alone ("use system messages", ``{"role": "system"}``) is not one.
_ROLE_JSON = re.compile(r'"role"\s*:\s*"(?:system|developer)"', re.I)
_CONTENT_JSON = re.compile(r'"content"\s*:', re.I)
_ROLE_YAML = re.compile(r"(?m)^[ \t]*(?:-[ \t]+)?role[ \t]*:[ \t]*[\"']?(?:system|developer)\b[\"']?[ \t]*$", re.I)
_CONTENT_YAML = re.compile(r"(?m)^[ \t]*(?:-[ \t]+)?content[ \t]*:", re.I)


def _role_message(text: str) -> str | None:
    """The role of a chat message written as data, marked as the system's or the developer's,
    with its content beside it (within 200 characters): what a fake system message looks like
    when it is pasted from an API call or a config file."""
    for role, content in ((_ROLE_JSON, _CONTENT_JSON), (_ROLE_YAML, _CONTENT_YAML)):
        for m in role.finditer(text):
            if content.search(text, max(0, m.start() - 200), m.end() + 200):
                return m.group(0).strip()
    return None


_SENDER = re.compile(
    r"\b(?:curl|wget|invoke-webrequest|invoke-restmethod|iwr|irm|nc|ncat|netcat|scp|rsync|ftp|"
    r"requests\.(?:get|post|put)|urllib\.request|urlopen|fetch\(|httpx\.(?:get|post)|http\.post)\b",
    re.I,
)
_SECRET_REF = re.compile(
    r"\$\{?[a-z_]*(?:key|token|secret|passw(?:or)?d|pwd|cred|auth)[a-z0-9_]*\}?|%[a-z_]*(?:key|token|secret)[a-z_]*%|"
    r"\bos\.environ|\bprocess\.env|\bgetenv\(|\bprintenv\b|\benv\s*\||\bset\s*\||"
    r"authorization:\s*(?:bearer|basic|token)\s+\S+|\s-u\s+\S+:\S+|"
    r"(?<![\w.])\.env\b(?!\.(?:example|sample|template|dist))|\.ssh/|\bid_(?:rsa|dsa|ecdsa|ed25519)\b|"
    r"\.aws/(?:credentials|config)|\.netrc|\.git-credentials|\.npmrc|\.pypirc|\.pgpass|/etc/shadow|"
    r"\.kube/config|\.docker/config\.json|\bkeychain\b",
    re.I,
)


def _homoglyph_word(text: str) -> Finding | None:
    """A word with Latin letters and Cyrillic or Greek ones (no look-alike table needed)."""
    if text.isascii():
        return None
    for word in re.findall(r"\w{3,}", unicodedata.normalize("NFKC", text)):
        if word.isascii() or not any("a" <= c.lower() <= "z" for c in word):
            continue
        alien = next((c for c in word if not c.isascii() and _script(c) in ("CYRILLIC", "GREEK")), None)
        if alien is not None:
            return Finding(
                "homoglyph",
                f"the word \u201c{word}\u201d mixes Latin letters with {_script(alien).title()} ones "
                f"({alien!r}), a way to slip words past checks",
                "write it in one script",
            )
    return None


def _structure(text: str, norm: str) -> Finding | None:
    m = _TEMPLATE.search(norm) or _ROLE_LABEL.search(text)
    if m:
        return _kind_finding("fake_system", m.group(0))
    role = _role_message(text)
    if role is not None:
        return _kind_finding("fake_system", role)
    if _SENDER.search(norm):
        # the text as written too: undoing leetspeak reads "=$KEY" as "=skey"
        m = _SECRET_REF.search(norm) or _SECRET_REF.search(text)
        if m:
            return _kind_finding("exfiltration", m.group(0))
    return None


def _kind_finding(kind: str, evidence: str) -> Finding:
    what, advice = _KIND_REASONS[kind]
    return Finding(kind, f"{what} (\u201c{_snippet(evidence)}\u201d)", advice)


def _windows(norm: str, size: int = 320) -> list[str]:
    """The text whole when short; else runs of whole sentences up to ``size`` characters, and the
    same runs shifted by half, so an injection inside a long text is read without what surrounds it
    diluting it, and one that straddles two runs is read whole in a shifted one. Linear in the text."""
    if len(norm) <= size:
        return [norm]
    sentences = [s[: size * 2] for s in _normal.SENTENCE_END.split(norm) if s]
    out = []
    for offset in (0, size // 2):
        window, used = "", 0
        for sentence in sentences:
            if used < offset:  # the shifted pass starts half a window in
                used += len(sentence) + 1
                continue
            if window and len(window) + len(sentence) > size:
                out.append(window)
                window = ""
            window = f"{window} {sentence}" if window else sentence
        if window:
            out.append(window)
    return out


class ModelScanner:
    """The default scan: characters with no visible form, mixed-script words, chat-template
    markup and commands that send secrets, encoded payloads (base64, three levels); then a small
    linear model trained in the repository (``tether.memory._model``) for what a note *says*."""

    def scan(self, text: str) -> Finding | None:
        return _model_scan(text, depth=0)


def _model_scan(text: str, depth: int) -> Finding | None:
    from tether.memory import _model

    finding = _invisible(text) or _homoglyph_word(text)
    if finding is not None:
        return finding
    norm = _normal.normalise(text)
    finding = _structure(_normal.decode(text), norm)
    if finding is not None:
        return finding
    model = _model.load()
    judged: list[tuple[str, float | None]] = [(window, None) for window in _windows(norm)]  # the model's own
    if model.window_threshold is not None:  # and runs of a few words, at a stricter threshold
        judged += [(w, model.window_threshold) for w in _model.word_windows(norm)]
    if model.sentence_threshold is not None:  # and each sentence alone, at a stricter threshold too
        judged += [(s, model.sentence_threshold) for s in _model.sentences(norm, _normal.lines(text))]
    for window, threshold in judged:
        verdict = model.judge(window, threshold)
        if verdict is not None:
            kind, p = verdict
            what, advice = _MODEL_REASONS[kind]
            quoted = _snippet(_likeliest_sentence(model, window))
            return Finding(kind, f"{what} (\u201c{quoted}\u201d, {p:.0%} sure by the scan's model)", advice)
    if depth < 3 and len(text) >= 16:
        for decoded in _payloads(text):
            inner = _model_scan(decoded, depth + 1)
            if inner is not None:
                return _encoded(inner)
    apart = _normal.as_words(text)  # "ignore-all-previous-instructions" read as the words it joins
    return _model_scan(apart, depth + 1) if apart != text and depth < 3 else None


def _likeliest_sentence(model: _model.Model, text: str) -> str:
    """What a refusal quotes: of a text of several sentences, the one the model reads most surely
    as an injection (the order, not the facts before it); else the text."""
    from tether.memory import _model

    pieces = [p for p in _model.sentences(text) if not _model._too_short(p)]
    if not pieces:
        return text
    return max(pieces, key=lambda piece: 1.0 - model.scores(piece)["note"])


def scan_context_text(text: str, *, source: str, scanner: Scanner | None = None) -> Finding | None:
    """The memory scan, for text that enters the model's context from outside: a skill's
    description, an MCP tool's description, an MCP server's instructions. ``source`` names it in
    the reason (``"the MCP server 'docs': tool 'search' description"``). Tool results are not
    scanned: they are data the model reads, and are marked as such."""
    finding = (scanner or default_scanner()).scan(text)
    if finding is None:
        return None
    return Finding(finding.rule, f"{source}: {finding.reason}")  # the advice is for memory notes


CONTEXT_POLICIES = ("drop", "warn", "off")


def context_policy() -> str:
    """What to do with flagged text from outside (``TETHER_CONTEXT_SCAN``): ``drop`` (the default:
    the skill or tool is left out, and the reason is logged and shown), ``warn`` (it is kept, and the
    reason is shown to the person before the run uses it), ``off`` (not scanned)."""
    import os

    value = os.environ.get("TETHER_CONTEXT_SCAN", "drop").strip().lower() or "drop"
    if value not in CONTEXT_POLICIES:
        from tether.errors import ConfigError

        raise ConfigError(f"TETHER_CONTEXT_SCAN={value!r}: use one of {', '.join(CONTEXT_POLICIES)}")
    return value


def accept_context(
    text: str, *, source: str, problems: list[str] | None = None, scanner: Scanner | None = None
) -> bool:
    """Whether text from outside may enter the model's context, under :func:`context_policy`.
    A flagged text's reason is logged as a warning, and appended to ``problems`` when given."""
    import logging

    policy = context_policy()
    if policy == "off" or not text:
        return True
    finding = scan_context_text(text, source=source, scanner=scanner)
    if finding is None:
        return True
    what = "dropped" if policy == "drop" else "kept, as configured (TETHER_CONTEXT_SCAN=warn), though"
    message = f"{what} {finding.reason}"
    logging.getLogger("tether.context").warning("%s", message)
    if problems is not None:
        problems.append(message)
    return policy != "drop"
