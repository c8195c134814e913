"""Identifiers: the tokens of a query that name one thing (a part number, an SKU, an error code, a
version), and where a text holds one exactly.

One character changes the product (``FVAM-2050-B`` and ``FVAM-2050-C`` are twins whose text and
vectors are nearly the same), so a chunk that holds the query's identifier exactly ranks above every
chunk that does not, in every search mode.

An identifier is letters and digits joined by ``-``, ``_``, ``.`` or ``/`` that holds a digit
(``FVAM-2050-B``, ``SK-77``, ``1.2.3``, ``x86_64``), letters and digits run together
(``RS485``, ``E1234``), or words joined by ``_`` (``O_NONBLOCK``, ``pthread_create``). Plain
words and plain numbers are not. A text holds an identifier when it appears with edges: not
inside a longer identifier (``FVAM-2050-BX``, ``X-FVAM-2050-B``, ``FVAM-2050-B.1``, ``2.1.3``
for ``1.3``), case aside. A sentence's full stop after it is an edge, and so is a Chinese,
Japanese, Korean, Thai, Lao, Burmese or Khmer letter (those scripts put no space between words: a
Thai word inside a sentence is found as a Chinese one is).
"""

from __future__ import annotations

import re
from functools import cache, lru_cache

from tether.knowledge.store import CJK, UNSPACED

__all__ = ["identifiers", "literal"]

# A letter or digit, but not of the scripts written without spaces: in 型号FVAM-2050-B采用 the
# identifier is FVAM-2050-B, and the characters around it are its edges (ข้าวผัด in a Thai
# sentence had Thai letters against it, and exact search never found it).
_WORD = f"[^\\W_{CJK}{UNSPACED}]"
_DIGIT = re.compile(r"\d")
_LETTER = re.compile(r"[^\W\d_]")
MAX_IDENTIFIERS = 4  # a query that lists more is a list, not a lookup: the first four are pinned


def identifiers(query: str) -> list[str]:
    """The identifier-like tokens of ``query``, each once, in order (at most four)."""
    if "_" not in query and _DIGIT.search(query) is None:
        return []  # each holds a digit or "_": a query of words needs no pattern (3 ms to compile)
    found: dict[str, str] = {}  # casefolded → as written
    for m in _candidate().finditer(query):
        token = m.group(0)
        joined = any(j in token for j in "-_./")
        digit = _DIGIT.search(token) is not None
        letter = _LETTER.search(token) is not None
        named = (digit and (joined or letter)) or "_" in token
        if named:
            found.setdefault(token.casefold(), token)
            if len(found) == MAX_IDENTIFIERS:
                break  # each one was compared with all before it: a query of 15,000 part numbers took 6 s
    return list(found.values())


@cache
def _candidate() -> re.Pattern[str]:
    return re.compile(f"{_WORD}+(?:[-_./]{_WORD}+)*")


# A hyphen in an identifier as a word processor (and the PDF made from it) may write it: hyphen,
# non-breaking hyphen, figure dash, en dash, minus. FVAM\u20112050\u2011B was not FVAM-2050-B.
_DASH = "[\\-\u2010\u2011\u2012\u2013\u2212]"
_JOINED = "[_\\-\u2010\u2011]"  # what would carry an identifier on past its edge (an en dash is a range's)


@lru_cache(maxsize=256)
def literal(token: str) -> re.Pattern[str]:
    """The pattern of ``token`` standing alone: no letter, digit, ``_`` or hyphen against either
    side, and no ``.`` with a digit beyond it (``FVAM-2050-B.1`` is another part). Its hyphens
    match any of ``_DASH``."""
    body = "".join(_DASH if re.fullmatch(_DASH, ch) else re.escape(ch) for ch in token)
    return re.compile(
        f"(?<!{_WORD})(?<!{_JOINED})(?<!\\d\\.)" + body + f"(?!{_WORD})(?!{_JOINED})(?!\\.\\d)", re.IGNORECASE
    )
