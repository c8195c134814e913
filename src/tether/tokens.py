"""Token counting (exact, BPE) and estimation (fast, no tokenizer).

The exact counter uses the o200k_base encoding shipped inside the ``bpe-openai`` package, so it
works offline on a fresh machine. Its Rust tokenizer is loaded directly (~0.1 s): the package's
Python wrapper, on import, decodes three whole rank tables into dictionaries (1–3 s and ~130 MB)
that counting never reads; when the direct load fails (another version of the package), the
wrapper is used. :func:`load_counter` loads it in a worker thread, so a run can load it at its
start without holding up the event loop (a Stop during the load is heard at once). The estimate weights CJK characters
separately (~1.5 tokens each), and emoji, combining marks and symbols, which a BPE splits into
several tokens (~1 to 2 each); ~0.25 for other characters.

Counting never raises: a text the tokenizer refuses or cannot handle is estimated instead.
"""

from __future__ import annotations

import asyncio
import functools
import hashlib
import re
import sys
import threading
from collections.abc import Callable, Iterable, Iterator
from typing import Any, Protocol

from tether._lru import ByteLRU

__all__ = [
    "COUNT_CACHE_BYTES",
    "count_tokens",
    "counter_for",
    "encoding",
    "encoding_loaded",
    "estimate_tokens",
    "load_counter",
    "preload",
    "token_bound",
]


class _Encoding(Protocol):
    def encode(self, text: str) -> list[int]: ...

    def encode_ordinary(self, text: str) -> list[int]: ...


_load_lock = threading.Lock()


class _RustEncoding:
    """bpe-openai's Rust tokenizer without its Python wrapper. ``encode`` is ``encode_ordinary``:
    special tokens in a text are text, as they are to the provider."""

    __slots__ = ("_backend",)

    def __init__(self, backend: Any) -> None:
        self._backend = backend

    def encode_ordinary(self, text: str) -> list[int]:
        if len(text) >= 1_000_000:  # as the wrapper: pieces (count_tokens) stay far below
            raise ValueError("text too long to encode in one call")
        try:
            return list(self._backend.encode(text))
        except UnicodeEncodeError:  # a lone surrogate: replaced, as the wrapper does
            return list(self._backend.encode(text.encode("utf-16", "surrogatepass").decode("utf-16", "replace")))

    encode = encode_ordinary


def _rust_backend(name: str) -> _Encoding | None:
    """The Rust tokenizer loaded from the package's extension module, without importing the
    package (whose ``__init__`` builds the rank tables); None when that is not possible."""
    import importlib.machinery
    import importlib.util
    from pathlib import Path

    try:
        spec = importlib.util.find_spec("bpe_openai")
        if spec is None or spec.origin is None:
            return None
        module = sys.modules.get("bpe_openai._bindings")
        if module is None:
            found = sorted(Path(spec.origin).parent.glob("_bindings.*"))
            paths = [p for p in found if p.suffix in (".so", ".pyd")]
            if not paths:
                return None
            loader = importlib.machinery.ExtensionFileLoader("bpe_openai._bindings", str(paths[0]))
            ext = importlib.util.spec_from_file_location("bpe_openai._bindings", paths[0], loader=loader)
            if ext is None:
                return None
            module = importlib.util.module_from_spec(ext)
            loader.exec_module(module)
            sys.modules["bpe_openai._bindings"] = module  # the package reuses it if imported later
        return _RustEncoding(module.tokenizer_for_encoding(name))
    except Exception:  # any other layout: the package's own API below
        return None


@functools.cache
def _load(name: str) -> _Encoding:
    fast = _rust_backend(name)
    if fast is not None:
        return fast
    import bpe_openai  # type: ignore[import-untyped]

    enc: Any = bpe_openai.get_encoding(name)
    return enc  # type: ignore[no-any-return]


def encoding_loaded() -> bool:
    """Whether an encoding is loaded already (counting will not wait for a load)."""
    return _load.cache_info().currsize > 0


def encoding(name: str = "o200k_base") -> _Encoding:
    """The named BPE encoding, loaded once from the files the package ships (thread-safe: a second
    caller waits for the first load instead of loading it again)."""
    with _load_lock:
        return _load(name)


# bpe_openai refuses a text of 1,000,000 characters or more, and one that makes more than 200,000
# tokens. A character is at most 4 tokens (one per UTF-8 byte), so pieces of this size pass both.
PIECE_CHARS = 32_768
# Texts up to this size are cached by value; longer ones by a 16-byte digest (hashing a megabyte
# takes ~2 ms, counting it ~30 ms), so the cache never keeps a megabyte tool output alive.
_SHORT = 1_024
# The counts cache is bounded by the bytes it keeps (texts of any size go through it, whole
# rendered prompts among them): 16 MiB holds about 13,000 texts of 1 KiB, 40,000 of 100 characters,
# or 60,000 longer ones kept by digest.
COUNT_CACHE_BYTES = 16 << 20
_counts: ByteLRU[tuple[str, str | bytes], int] = ByteLRU(COUNT_CACHE_BYTES)


def count_tokens(text: str, encoding_name: str = "o200k_base") -> int:
    """Number of BPE tokens in ``text``: exact for any text up to :data:`PIECE_CHARS` characters,
    and for longer ones the sum over pieces cut at line or word boundaries (equal to the exact
    count, or within a few tokens of it when a piece must be cut inside a run of text without
    whitespace). Cached (:data:`COUNT_CACHE_BYTES`): transcripts repeat the same texts. Never
    raises: when the tokenizer fails, the result is :func:`estimate_tokens`."""
    if not text:
        return 0
    if len(text) <= _SHORT:
        kept: str | bytes = text
    else:
        kept = hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=16).digest()
    key = (encoding_name, kept)
    cached = _counts.get(key)
    if cached is not None:
        return cached
    count = _count(text, encoding_name)
    _counts.put(key, count, sys.getsizeof(kept) + sys.getsizeof(key))  # the name is shared, not counted
    return count


def _count(text: str, encoding_name: str) -> int:
    try:
        enc = encoding(encoding_name)
        # encode_ordinary: "<|endoftext|>" in a tool output is text, as it is to the provider.
        return sum(len(enc.encode_ordinary(piece)) for piece in _pieces(text))
    except Exception:  # counting must not end a run: the estimate is the fallback
        return estimate_tokens(text)


def _pieces(text: str, size: int = PIECE_CHARS) -> Iterator[str]:
    """``text`` in pieces of at most ``size`` characters, cut where the tokenizer's pre-split cuts
    anyway: after a newline that starts a line, else before a space, else anywhere."""
    start, end = 0, len(text)
    while end - start > size:
        limit = start + size
        floor = start + size // 2
        cut = _line_start(text, floor, limit)
        if cut < 0:
            space = text.rfind(" ", floor, limit)
            cut = space if space > start else limit
        yield text[start:cut]
        start = cut
    yield text[start:]


def _line_start(text: str, floor: int, limit: int) -> int:
    """The last index in (floor, limit] just after a newline and at a non-space character."""
    newline = text.rfind("\n", floor, limit)
    while newline >= 0:
        if not text[newline + 1 : newline + 2].isspace():
            return newline + 1
        newline = text.rfind("\n", floor, newline)
    return -1


# Characters a BPE splits into more tokens than a letter, by how many more (measured on o200k_base),
# counted by runs with regular expressions (a loop over the characters takes 0.3 s and more a megabyte).
_HEAVIER = (
    # CJK ideographs, kana, hangul, full-width forms: ~1.5
    (re.compile("[\u3000-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff\uff00-\uffef]+"), 1.25),
    # emoji, flags, mathematical letters, rarer CJK (beyond the Basic Multilingual Plane): 1.4 to 3;
    # a lone surrogate (sent as U+FFFD): ~1.3
    (re.compile("[\U00010000-\U0010ffff\ud800-\udfff]+"), 1.75),
    # combining marks (stacked in "zalgo" text: ~1.6), the variation selector of "❤️", the joiner
    # inside emoji sequences
    (re.compile("[\u0300-\u036f\u1ab0-\u1aff\u1dc0-\u1dff\u20d0-\u20ff\ufe00-\ufe2f\u200d]+"), 1.25),
    (re.compile("[\u2190-\u2bff]+"), 0.75),  # arrows, mathematical operators, symbols, dingbats: ~1.3
)


def estimate_tokens(text: str) -> int:
    """A tokenizer-free estimate: CJK characters ~1.5 tokens, emoji and other characters beyond
    the Basic Multilingual Plane ~2, combining marks ~1.5, symbols and arrows ~1, everything else
    ~0.25."""
    if text.isascii():
        return (len(text) + 3) // 4
    extra = sum(weight * sum(map(len, pattern.findall(text))) for pattern, weight in _HEAVIER)
    return int(len(text) * 0.25 + extra + 0.999)


def token_bound(text: str) -> int:
    """An upper bound of ``text``'s BPE tokens that needs no tokenizer: its UTF-8 bytes (every
    token of a byte-level BPE is at least one byte). Below a threshold by this bound, a decision
    needs no exact count."""
    return len(text) if text.isascii() else len(text.encode("utf-8", "surrogatepass"))


def counter_for(model: str) -> Callable[[str], int]:
    """Exact BPE counts for models whose tokenizer is o200k_base (OpenAI's current models); the
    CJK-weighted estimate for every other model (the scripted model's own rule: exact for it)."""
    provider, _, name = model.partition("/")
    o200k = ("gpt-4o", "gpt-4.1", "gpt-5", "o1", "o3", "o4")
    if provider == "openai" and name.startswith(o200k):
        return count_tokens
    return estimate_tokens


async def preload(encoding_name: str = "o200k_base") -> bool:
    """Load the encoding in a worker thread; True when it is ready. Awaiting this keeps the event
    loop free (and cancellable) while the tokenizer loads; a failure is not raised, since counting
    falls back to the estimate anyway."""
    try:
        await asyncio.to_thread(encoding, encoding_name)
    except Exception:  # see the docstring
        return False
    return True


async def load_counter(model: str) -> Callable[[str], int]:
    """:func:`counter_for` ``model``, with its tokenizer already loaded off the event loop: call it
    when a run starts, so no count inside the run waits for a load."""
    counter = counter_for(model)
    if counter is count_tokens:
        await preload()
    return counter


# -- what a prompt costs: the one estimate budgets, compaction and unreported usage share ---------

# What a message, a tool definition or a call costs besides its text, in the model's own tokens.
# A chat template frames every message with a role marker and an end marker: Gemma's
# "<start_of_turn>user\n ... <end_of_turn>\n", ChatML's "<|im_start|>user\n ... <|im_end|>\n" and
# Llama 3's header and <|eot_id|> are 5 tokens each (the markers are single special tokens);
# OpenAI documents 3. A template whose markers the tokenizer splits as text costs more (ChatML on
# Gemma: 6 per marker). 8 was measured against llama.cpp's own counts (bench/real_server.py: 0.84
# and 1.08 of the served prompt); elsewhere it errs high, the safe side for a budget. A tool is
# rendered as its JSON (name, description, schema: counted as text) inside a wrapper of some 8-20
# tokens, depending on the template; a call, as its name and arguments in a few framing tokens.
PER_MESSAGE = 8
PER_TOOL = 8
PER_CALL = 4
PER_IMAGE = 1500  # a large image on either API; tether does not know image sizes


def tool_tokens(name: str, description: str, schema: Any, count: Callable[[str], int] = count_tokens) -> int:
    """What one tool definition adds to every prompt: its name, description and JSON schema."""
    import json

    return PER_TOOL + count(name) + count(description) + count(json.dumps(schema))


def message_tokens(message: Any, count: Callable[[str], int] = count_tokens, *, reasoning: bool = False) -> int:
    """What one message (of :mod:`tether.messages`) adds to a prompt: its text, calls and images,
    in its frame. Reasoning is not sent back to the model, so not counted unless ``reasoning``."""
    total = PER_MESSAGE
    for part in message.content:
        kind = part.type
        if kind == "text" or (reasoning and kind == "reasoning"):
            total += count(part.text)
        elif kind == "tool_call":
            total += PER_CALL + count(part.name) + count(part.arguments)
        elif kind == "image":
            total += PER_IMAGE
    return total


def fixed_tokens(
    system: str | None,
    tools: Iterable[tuple[str, str, Any]],
    count: Callable[[str], int] = count_tokens,
    *,
    output_schema: Any = None,
) -> int:
    """What every prompt of a run sends besides its messages: the reply's own role marker, the
    system prompt, the tool definitions (name, description, schema) and a structured-output
    schema (sent as a response format or as one more tool)."""
    import json

    total = PER_MESSAGE + (PER_MESSAGE + count(system) if system else 0)
    total += sum(tool_tokens(name, description, schema, count) for name, description, schema in tools)
    if output_schema is not None:
        total += PER_TOOL + count(json.dumps(output_schema))
    return total
