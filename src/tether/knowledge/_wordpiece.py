"""BERT's uncased WordPiece tokenizer in plain Python, for the one short text of a query.

The ``tokenizers`` package (Rust) tokenizes what a base is filled with, in batches. Loading it costs
a search about 25 ms (its import, and ``Tokenizer.from_str`` building the 30,522-entry vocabulary),
more than the rest of the query's embedding; reading the vocabulary into a dict takes about 4 ms,
and a query of a few words is tokenized here in microseconds. The steps and character classes are
those of tokenizers' ``BertNormalizer`` (clean text, pad CJK ideographs, strip accents, lowercase),
``BertPreTokenizer`` (split on whitespace and isolate punctuation) and ``WordPiece`` (greedy
longest match, ``##`` for a continuation, ``[UNK]`` for a word it cannot spell or longer than 100
characters), with the special tokens matched in the raw text first, as its added vocabulary does.
tests/knowledge/test_wordpiece.py holds the two to the same ids over every code point and over
texts in many scripts.
"""

from __future__ import annotations

import functools
import re
import unicodedata
from collections.abc import Callable

__all__ = ["WordPiece"]

_SPECIAL = re.compile(r"(\[PAD\]|\[UNK\]|\[CLS\]|\[SEP\]|\[MASK\])")
_CJK = (
    (0x4E00, 0x9FFF),
    (0x3400, 0x4DBF),
    (0x20000, 0x2A6DF),
    (0x2A700, 0x2B73F),
    (0x2B740, 0x2B81F),
    (0x2B920, 0x2CEAF),
    (0xF900, 0xFAFF),
    (0x2F800, 0x2FA1F),
)


_CONTROL = frozenset(("Cc", "Cf", "Co", "Cs"))  # not Cn: an unassigned character is kept (an [UNK])


# Characters on which Python's Unicode tables (14.0 in Python 3.11) and those tokenizers was built
# with disagree: a mark, a punctuation or a format character that tokenizers does not know as one
# (or, for two, knows as another). A text holding one is left to tokenizers itself (ids() returns
# None); so is every text but plain ASCII under another Unicode version, where this table is not
# known to be right. tests/knowledge/test_wordpiece.py finds these over every code point, against the
# tokenizers installed (0.23.3 when the table was made; another version's Unicode tables could class
# a few more rare characters apart, and a query holding one would get other ids than its chunks).
_TABLES = "14.0.0"
_DISAGREE = (
    (0x61D, 0x61D),
    (0x7FD, 0x7FD),
    (0x890, 0x891),
    (0x898, 0x89F),
    (0x8CA, 0x8E2),
    (0x9FD, 0x9FE),
    (0xA76, 0xA76),
    (0xAFA, 0xAFF),
    (0xB55, 0xB55),
    (0xC04, 0xC04),
    (0xC3C, 0xC3C),
    (0xC77, 0xC77),
    (0xC84, 0xC84),
    (0xD00, 0xD00),
    (0xD3B, 0xD3C),
    (0xD81, 0xD81),
    (0xEBA, 0xEBA),
    (0x166D, 0x166D),
    (0x1734, 0x1734),
    (0x180F, 0x180F),
    (0x1885, 0x1886),
    (0x1ABF, 0x1ACE),
    (0x1B7D, 0x1B7E),
    (0x1DF6, 0x1DFB),
    (0x2E43, 0x2E4F),
    (0x2E52, 0x2E5D),
    (0xA82C, 0xA82C),
    (0xA8C5, 0xA8C5),
    (0xA8FF, 0xA8FF),
    (0xA9BD, 0xA9BD),
    (0x10D24, 0x10D27),
    (0x10EAB, 0x10EAD),
    (0x10F46, 0x10F50),
    (0x10F55, 0x10F59),
    (0x10F82, 0x10F89),
    (0x11070, 0x11070),
    (0x11073, 0x11074),
    (0x110C2, 0x110C2),
    (0x110CD, 0x110CD),
    (0x111C9, 0x111C9),
    (0x111CF, 0x111CF),
    (0x1123E, 0x1123E),
    (0x1133B, 0x1133B),
    (0x11438, 0x1143F),
    (0x11442, 0x11444),
    (0x11446, 0x11446),
    (0x1144B, 0x1144F),
    (0x1145A, 0x1145B),
    (0x1145D, 0x1145E),
    (0x11660, 0x1166C),
    (0x116B9, 0x116B9),
    (0x1182F, 0x11837),
    (0x11839, 0x1183B),
    (0x1193B, 0x1193C),
    (0x1193E, 0x1193E),
    (0x11943, 0x11946),
    (0x119D4, 0x119D7),
    (0x119DA, 0x119DB),
    (0x119E0, 0x119E0),
    (0x119E2, 0x119E2),
    (0x11A01, 0x11A0A),
    (0x11A33, 0x11A38),
    (0x11A3B, 0x11A47),
    (0x11A51, 0x11A56),
    (0x11A59, 0x11A5B),
    (0x11A8A, 0x11A96),
    (0x11A98, 0x11A9C),
    (0x11A9E, 0x11AA2),
    (0x11C30, 0x11C36),
    (0x11C38, 0x11C3D),
    (0x11C3F, 0x11C3F),
    (0x11C41, 0x11C45),
    (0x11C70, 0x11C71),
    (0x11C92, 0x11CA7),
    (0x11CAA, 0x11CB0),
    (0x11CB2, 0x11CB3),
    (0x11CB5, 0x11CB6),
    (0x11D31, 0x11D36),
    (0x11D3A, 0x11D3A),
    (0x11D3C, 0x11D3D),
    (0x11D3F, 0x11D45),
    (0x11D47, 0x11D47),
    (0x11D90, 0x11D91),
    (0x11D95, 0x11D95),
    (0x11D97, 0x11D97),
    (0x11EF3, 0x11EF4),
    (0x11EF7, 0x11EF8),
    (0x11FFF, 0x11FFF),
    (0x12FF1, 0x12FF2),
    (0x13430, 0x13438),
    (0x16E97, 0x16E9A),
    (0x16F4F, 0x16F4F),
    (0x16FE2, 0x16FE2),
    (0x16FE4, 0x16FE4),
    (0x1CF00, 0x1CF2D),
    (0x1CF30, 0x1CF46),
    (0x1E000, 0x1E006),
    (0x1E008, 0x1E018),
    (0x1E01B, 0x1E021),
    (0x1E023, 0x1E024),
    (0x1E026, 0x1E02A),
    (0x1E130, 0x1E136),
    (0x1E2AE, 0x1E2AE),
    (0x1E2EC, 0x1E2EF),
    (0x1E944, 0x1E94A),
    (0x1E95E, 0x1E95F),
)


@functools.lru_cache(maxsize=1)
def _disagreeing() -> re.Pattern[str]:
    """``_DISAGREE`` as one character class, compiled for the first query that is not ASCII (about
    4 ms: not at import)."""
    return re.compile("[" + "".join(f"\\U{low:08x}-\\U{high:08x}" for low, high in _DISAGREE) + "]")


def _disagrees(text: str) -> bool:
    if text.isascii():
        return False
    return unicodedata.unidata_version != _TABLES or _disagreeing().search(text) is not None


def _cjk(code: int) -> bool:
    return any(low <= code <= high for low, high in _CJK)


class _Classes(dict[int, str]):
    """A ``str.translate`` table that classes each character the first time it is seen (at most
    ``_SEEN`` kept, so that a stream of rare characters cannot grow it without end)."""

    def __init__(self, classify: Callable[[str], str]) -> None:
        super().__init__()
        self.classify = classify

    def __missing__(self, code: int) -> str:
        out = self.classify(chr(code))
        if len(self) >= _SEEN:
            self.clear()
        self[code] = out
        return out


_SEEN = 20_000


def _cleaned(ch: str) -> str:
    """clean_text and handle_chinese_chars: controls dropped, whitespace one space, ideographs
    set apart."""
    if ch in "\t\n\r":
        return " "
    if ch in "\x00\ufffd" or unicodedata.category(ch) in _CONTROL:
        return ""
    if ch.isspace():
        return " "
    return f" {ch} " if _cjk(ord(ch)) else ch


def _split(ch: str) -> str:
    """strip_accents (after NFD), lowercase one character at a time as tokenizers does (Python's
    str.lower would write a final sigma), and BertPreTokenizer's punctuation, a word of its own."""
    category = unicodedata.category(ch)
    if category == "Mn":
        return ""
    if category[0] == "P" or (ch.isascii() and "!" <= ch <= "~" and not ch.isalnum()):
        return f" {ch} "
    return ch.lower()


_CLEANED = _Classes(_cleaned)
_SPLIT = _Classes(_split)


def _words(text: str) -> list[str]:
    """BertNormalizer (clean_text, handle_chinese_chars, strip_accents, lowercase), then
    BertPreTokenizer (split on whitespace, each punctuation character a word of its own)."""
    cleaned = text.translate(_CLEANED)
    if not cleaned.isascii():
        cleaned = unicodedata.normalize("NFD", cleaned)
    return cleaned.translate(_SPLIT).split()


class WordPiece:
    """The ids of one text, ``[CLS] … [SEP]``, truncated to ``max_tokens`` in all."""

    def __init__(self, vocab: dict[str, int], max_tokens: int, max_chars: int = 100) -> None:
        self.vocab = vocab
        self.max_tokens = max_tokens
        self.max_chars = max_chars
        self.unk = vocab["[UNK]"]

    @classmethod
    def parse(cls, vocab: str, max_tokens: int) -> WordPiece:
        """From a ``vocab.txt``'s text: one token a line, its id its line number."""
        words = vocab.split("\n")
        if words and words[-1] == "":
            words.pop()
        return cls(dict(zip(words, range(len(words)), strict=True)), max_tokens)

    def _word(self, word: str) -> list[int]:
        if len(word) > self.max_chars:
            return [self.unk]
        ids: list[int] = []
        start = 0
        while start < len(word):
            end = len(word)
            while end > start:
                piece = word[start:end] if start == 0 else "##" + word[start:end]
                found = self.vocab.get(piece)
                if found is not None:
                    ids.append(found)
                    break
                end -= 1
            else:
                return [self.unk]
            start = end
        return ids

    def ids(self, text: str) -> list[int] | None:
        """The ids, or None when ``text`` holds a character this module cannot class as
        tokenizers does (see ``_DISAGREE``)."""
        if _disagrees(text):
            return None
        ids: list[int] = []
        for i, part in enumerate(_SPECIAL.split(text)):
            if i % 2:
                ids.append(self.vocab[part])
                continue
            for word in _words(part):
                ids.extend(self._word(word))
        if self.max_tokens >= 2:  # as tokenizers: a limit below its two added tokens cuts nothing
            ids = ids[: self.max_tokens - 2]
        return [self.vocab["[CLS]"], *ids, self.vocab["[SEP]"]]
