"""The normaliser every scan runs first: the memory scan, the context scan and the input
guardrail's jailbreak check all read text through it.

Two jobs:

* :func:`hidden` finds the first character that has no visible form: zero-width characters,
  bidi controls, Unicode tag characters, variation selectors that follow no character they
  belong to (a run of them after an emoji is text smuggled in invisibly), Hangul fillers, the
  braille blank, the combining grapheme joiner and other format characters. The joiners that
  emoji sequences and Arabic or Indic writing need are visible in effect and pass.
* :func:`normalise` gives the text a model should read: escapes decoded (HTML entities, ``%xx``,
  ``\\uXXXX``), NFKC (full-width letters become ASCII), case folded, invisible characters dropped,
  accents stripped from Latin letters, leetspeak undone inside words that mix letters and digits
  (not in a code such as ``A1`` when nothing else is leetspeak), letters spaced out one by one
  joined again, white space collapsed.

Only the standard library: this runs on every memory write and must cost well under a millisecond.
"""

from __future__ import annotations

import html
import re
import unicodedata
import urllib.parse
from dataclasses import dataclass

__all__ = ["SENTENCE_END", "Hidden", "as_words", "hidden", "lines", "normalise"]

# Where a normalised text is cut into sentences: after each mark (so "e.g." or "deploy.sh" is cut
# too, into pieces too short to be judged), before the spaces that follow.
SENTENCE_END = re.compile(r"(?<=[.!?;。！？；\n])\s*")

_BIDI = frozenset({0x061C, 0x200E, 0x200F, *range(0x202A, 0x202F), *range(0x2066, 0x206A)})
_JOINERS = frozenset({0x200C, 0x200D})
# Characters that render as nothing (or as a blank) although they are not white space.
_BLANKS = frozenset({0x034F, 0x115F, 0x1160, 0x17B4, 0x17B5, 0x180E, 0x2800, 0x3164, 0xFFA0, 0x1D159})
_JOINING_SCRIPTS = ((0x0600, 0x08FF), (0x0900, 0x0DFF), (0xFB50, 0xFEFF))


@dataclass(frozen=True)
class Hidden:
    index: int  # 0-based position in the text
    char: str
    what: str  # "a direction-changing character", "a variation selector", ...

    def describe(self) -> str:
        name = unicodedata.name(self.char, "an unnamed character")
        return f"{self.what}, U+{ord(self.char):04X} {name}, at character {self.index + 1}"


def _joining_letter(ch: str) -> bool:
    return any(lo <= ord(ch) <= hi for lo, hi in _JOINING_SCRIPTS)


def _pictographic(ch: str) -> bool:
    o = ord(ch)
    return o >= 0x1F000 or 0x2600 <= o <= 0x27BF or o in (0xFE0F, 0x2640, 0x2642, 0x2695, 0x2696, 0x2708)


def _ideograph(ch: str) -> bool:
    o = ord(ch)
    return 0x3400 <= o <= 0x9FFF or 0x20000 <= o <= 0x3FFFF or 0xF900 <= o <= 0xFAFF


def _selector(o: int) -> bool:
    return 0xFE00 <= o <= 0xFE0F or 0xE0100 <= o <= 0xE01EF


def _flag_tag(text: str, i: int) -> bool:
    j = i
    while j > 0 and 0xE0020 <= ord(text[j - 1]) <= 0xE007F:
        j -= 1
    return j > 0 and text[j - 1] == "\U0001f3f4" and len(text[j : i + 1]) <= 7


def _what(text: str, i: int) -> str | None:
    """Why the character at ``i`` has no visible form, or None when it is fine."""
    ch = text[i]
    o = ord(ch)
    before = text[i - 1] if i else ""
    after = text[i + 1] if i + 1 < len(text) else ""
    if o in _BLANKS:
        return "a character that shows as nothing (a blank filler)"
    if _selector(o):
        # One presentation selector after a symbol, or one ideographic selector after a CJK
        # ideograph, is how such text is written; a run of them, or one after anything else, hides bytes.
        ok = before and not _selector(ord(before)) and not (after and _selector(ord(after)))
        if ok and (o in (0xFE0E, 0xFE0F) or (_ideograph(before) and (o >= 0xE0100 or o <= 0xFE0D))):
            return None
        return "a variation selector that belongs to no character (text can hide in them)"
    if o in _BIDI:
        return "a direction-changing character"
    if 0xE0000 <= o <= 0xE007F:
        return None if o >= 0xE0020 and _flag_tag(text, i) else "a Unicode tag character (invisible text)"
    if unicodedata.category(ch) != "Cf":
        return None
    joined = bool(before and after) and (
        (_pictographic(before) and _pictographic(after)) or (_joining_letter(before) and _joining_letter(after))
    )
    if o in _JOINERS and before and after and joined:
        return None
    return "an invisible character"


def hidden(text: str) -> Hidden | None:
    """The first character with no visible form, or None."""
    for i, ch in enumerate(text):
        o = ord(ch)
        if o < 0xAD:
            continue
        what = _what(text, i)
        if what is not None:
            return Hidden(i, ch, what)
    return None


def _drop(ch: str) -> bool:
    o = ord(ch)
    return (
        o in _BLANKS
        or _selector(o)
        or 0xE0000 <= o <= 0xE007F
        or (o >= 0xAD and unicodedata.category(ch) == "Cf" and o not in _JOINERS)
    )


def _stray_joiner(text: str, i: int) -> bool:
    """A zero-width joiner or non-joiner that joins no emoji and no letters that join (see _what)."""
    return ord(text[i]) in _JOINERS and _what(text, i) is not None


_ESCAPES = re.compile(r"\\u([0-9a-fA-F]{4})|\\x([0-9a-fA-F]{2})")
_LEET = str.maketrans({"0": "o", "1": "i", "3": "e", "4": "a", "5": "s", "7": "t", "@": "a", "$": "s", "!": "i"})
# From where a word starts only: tried from every digit of a long run of them, each attempt to the
# run's end, it was quadratic (200,000 digits: four minutes on the event loop).
_MIXED = re.compile(r"(?<![a-z0-9@$!])[a-z0-9@$!]*[a-z][a-z0-9@$!]*")
# An order or seat code, one or two capitals then digits ("A1", "B7", "X11"), is kept as written
# when nothing else in the text is leetspeak: read as leetspeak, "Refund order A1" said "order ai".
# Beside leetspeak ("B3 qu13t"), such a word is leetspeak too.
_LEETISH = re.compile(r"[0-9@$!]")
_CAPITAL_CODE = re.compile(r"(?<![^\W\d_])[A-Z]{1,2}[0-9]+(?![^\W\d_])")
_SPACED = re.compile(r"(?<!\w)(?:\w[ .\-_*·/|]){2,}\w(?!\w)")
_CJK_GAP = re.compile(
    r"(?<=[\u3040-\u30ff\u4e00-\u9fff\uac00-\ud7af])[ \u3000]+(?=[\u3040-\u30ff\u4e00-\u9fff\uac00-\ud7af])"
)
_SPACE = re.compile(r"\s+")


def decode(text: str) -> str:
    """HTML entities, ``%xx`` and ``\\uXXXX`` escapes, decoded once."""
    if "&" in text:
        text = html.unescape(text)
    if "%" in text and re.search(r"%[0-9a-fA-F]{2}", text):
        text = urllib.parse.unquote(text)
    if "\\" in text:
        text = _ESCAPES.sub(lambda m: chr(int(m.group(1) or m.group(2), 16)), text)
    return text


def _strip_latin_accents(text: str) -> str:
    """Latin letters without their accents: composed ones (``ä``, ``ṁ``; not Vietnamese letters,
    ``ế``, which the scans' Vietnamese is written with) and the combining marks NFKC leaves after
    a letter (an underline, a strike-through: ``i̲g̲n̲o̲r̲e̲`` reads ``ignore`` to a model, and to the
    scans)."""
    if text.isascii():
        return text
    out: list[str] = []
    for ch in text:
        if "\u00c0" <= ch <= "\u024f" or "\u1e00" <= ch <= "\u1e9f":
            base = unicodedata.normalize("NFKD", ch)[0]
            out.append(base if base.isascii() else ch)
        elif out and out[-1].isascii() and unicodedata.combining(ch):
            continue  # a mark on a Latin letter, a digit or a space (other scripts are written with theirs)
        else:
            out.append(ch)
    return "".join(out)


def _unleet(text: str, codes: set[str]) -> str:
    if not _LEETISH.search(text):
        return text
    mixed = [w for w in _MIXED.findall(text) if not w.isalpha()]
    if not mixed:
        return text
    if any(w not in codes and sum(c.isalpha() for c in w) >= 3 for w in mixed):
        codes = set()  # the text is written in leetspeak: a code-like word is leetspeak too
    return _MIXED.sub(lambda m: m.group(0) if m.group(0) in codes else m.group(0).translate(_LEET), text)


def normalise(text: str) -> str:
    """The text as a reader sees it, folded for matching (see the module's description)."""
    text = unicodedata.normalize("NFKC", decode(text))
    codes = {m.group(0).casefold() for m in _CAPITAL_CODE.finditer(text)}
    text = text.casefold()
    if not text.isascii():
        # A joiner is dropped too where it joins nothing (between Latin letters: ``mar\u200dgin``).
        text = "".join(ch for i, ch in enumerate(text) if not _drop(ch) and not _stray_joiner(text, i))
        text = _strip_latin_accents(text)
    text = _unleet(text, codes)
    text = _SPACED.sub(lambda m: re.sub(r"[ .\-_*·/|]", "", m.group(0)), text)
    text = _CJK_GAP.sub("", text)
    return _SPACE.sub(" ", text).strip()


# Three words or more joined by - or _. A match starts only where a word does: tried from every
# letter of a long run (a DNA sequence, a minified blob), each attempt to the run's end, it was
# quadratic (200,000 letters: a quarter of an hour on the event loop, past any guardrail's limit).
_JOINED = re.compile(r"(?<![^\W\d_])[^\W\d_]+(?:[-_][^\W\d_]+){2,}")
_HUMPS = re.compile(r"(?<![^\W\d_])[A-Za-z][a-z]+(?:[A-Z][a-z]+){2,}(?![^\W\d_])")  # ThreeWordsOrMore
# A word of ten letters or more in one case, alone between spaces or punctuation (not in a link, a
# path, an address or an identifier), that may be English words run together with no separator.
_GLUED = re.compile(r"(?<![\w./@:#=~\\-])(?:[a-z]{10,60}|[A-Z]{10,60})(?![\w/@\\-]|\.\w|:/)")
# What such a run must contain to be read apart: a word an order is made of. Anything else (a
# German compound, a hash, a name) stays as written, and costs no more than this search.
_GLUED_CORE = re.compile(
    r"ignor|disregard|forget|overrid|bypass|instruction|prompt|rules|jailbr|developer|unrestrict|"
    r"unfilter|uncensor|obey|reveal|secret|password|credential|token|apikey|youarenow|dan"
)
# The English words an order is written in: what a run of letters is read apart into. A run is read
# apart only when these words cover all of it, three of them or more (see _segment).
_WORDS = """
    a about above act add address admin administrator ai all always an and answer answers any
    anything api are as assistant at be been before below bot but by bypass can cannot character
    chatbot config content copy credentials dan delete developer directives disable disabled
    disregard do does drop dump earlier enable enabled end env environment every everything evil
    expired file files filter filters follow following for forget former free freed from
    give guardrails guidelines has have hide hidden i ignore immediately in initial instruction
    instructions into is it its jailbreak jailbroken just keep key keys leak limits longer me
    message messages mode model must my never new no not note now obey obsolete of off old on only
    or original other output override password passwords persona please post pretend previous
    print prior prompt prompts remove repeat replaced reply reveal role roleplay root rule rules
    safety say secret secrets send share should show system tell that the their them these this
    those to token tokens turned unfiltered unlocked unrestricted uncensored upload user void was
    were what whatever will with without you your yourself
"""
_LEXICON = frozenset(_WORDS.split())


def _segment(run: str) -> str | None:
    """``run`` (lower case) as the fewest words of :data:`_LEXICON` that cover it exactly, three
    or more, joined by spaces; None when no such reading exists. Linear in the run's length."""
    none = len(run) + 1  # more words than a run can have: no reading found yet
    count = [0] + [none] * len(run)  # the fewest words that cover run[:end]
    begin = [0] * (len(run) + 1)  # where the last of them begins
    for end in range(1, len(run) + 1):
        for start in range(max(0, end - 16), end):
            if count[start] + 1 < count[end] and run[start:end] in _LEXICON:
                count[end], begin[end] = count[start] + 1, start
    if not 3 <= count[-1] < none:
        return None
    words, end = [], len(run)
    while end:
        words.append(run[begin[end] : end])
        end = begin[end]
    return " ".join(reversed(words))


def _apart(m: re.Match[str]) -> str:
    run = m.group(0)
    if not _GLUED_CORE.search(run.lower()):
        return run
    return _segment(run.lower()) or run


def as_words(text: str) -> str:
    """``text`` with words run together read apart: joined by dashes or underscores
    (``ignore-all-previous-instructions``, ``ignore_all_previous``), by capitals
    (``IgnoreAllPreviousInstructions``), or by nothing at all (``ignoreallpreviousinstructions``,
    ``YOUARENOWDAN``: a run in one case that the English words of an order cover exactly, three or
    more); two joined words (``e-mail``, ``JavaScript``), links, paths, identifiers and words
    no order is made of stay."""
    text = _JOINED.sub(lambda m: re.sub(r"[-_]+", " ", m.group(0)), text)
    text = _HUMPS.sub(lambda m: re.sub(r"(?<=[a-z])(?=[A-Z])", " ", m.group(0)), text)
    return _GLUED.sub(_apart, text)


def lines(text: str) -> list[str]:
    """The text's non-empty lines, each normalised alone: where its line breaks were, which
    :func:`normalise` turns into spaces (a model reads a text's lines as one)."""
    return [line for line in map(normalise, text.splitlines()) if line]
