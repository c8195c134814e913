"""Token counting (exact, BPE) and estimation (fast, no tokenizer).

The exact counter uses the o200k_base encoding shipped inside the ``bpe-openai`` package, so it
works offline on a fresh machine; it is imported on first use because loading it costs ~100 ms.
The estimate weights CJK characters separately: ~1.5 tokens each, ~0.25 for other characters.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, Protocol

__all__ = ["count_tokens", "counter_for", "encoding", "estimate_tokens"]


class _Encoding(Protocol):
    def encode(self, text: str) -> list[int]: ...


@functools.cache
def encoding(name: str = "o200k_base") -> _Encoding:
    """The named BPE encoding, loaded once from the files the package ships."""
    import bpe_openai  # type: ignore[import-untyped]

    enc: Any = bpe_openai.get_encoding(name)
    return enc  # type: ignore[no-any-return]


@functools.lru_cache(maxsize=65536)
def count_tokens(text: str, encoding_name: str = "o200k_base") -> int:
    """Exact number of BPE tokens in ``text``. Cached: transcripts repeat the same texts."""
    if not text:
        return 0
    return len(encoding(encoding_name).encode(text))


def _is_cjk(code: int) -> bool:
    return (
        0x3000 <= code <= 0x30FF  # CJK punctuation, hiragana, katakana
        or 0x3400 <= code <= 0x4DBF  # CJK extension A
        or 0x4E00 <= code <= 0x9FFF  # CJK unified ideographs
        or 0xAC00 <= code <= 0xD7AF  # hangul syllables
        or 0xF900 <= code <= 0xFAFF  # compatibility ideographs
        or 0xFF00 <= code <= 0xFFEF  # full-width forms
    )


def estimate_tokens(text: str) -> int:
    """A tokenizer-free estimate: CJK characters ~1.5 tokens, everything else ~0.25."""
    if text.isascii():
        return (len(text) + 3) // 4
    cjk = sum(1 for ch in text if _is_cjk(ord(ch)))
    return int(cjk * 1.5 + (len(text) - cjk) * 0.25 + 0.999)


def counter_for(model: str) -> Callable[[str], int]:
    """Exact BPE counts for models whose tokenizer is o200k_base (OpenAI's current models and the
    scripted model); the CJK-weighted estimate for every other model."""
    provider, _, name = model.partition("/")
    o200k = ("gpt-4o", "gpt-4.1", "gpt-5", "o1", "o3", "o4")
    if provider == "scripted" or (provider == "openai" and name.startswith(o200k)):
        return count_tokens
    return estimate_tokens
