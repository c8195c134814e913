"""Counting never crashes and never blocks (issue 8): long texts are counted in pieces, a failing
tokenizer falls back to the estimate, and the tokenizer loads in a worker thread."""

from __future__ import annotations

import asyncio
import base64
import random
import sys
import threading
from typing import Any

import pytest

from tether import tokens
from tether._lru import ByteLRU
from tether.tokens import count_tokens, encoding, estimate_tokens, load_counter, preload


def _text(chars: int, seed: int, newline: bool = True) -> str:
    """Log- and code-like text in several scripts, with blank lines and runs of spaces."""
    rnd = random.Random(seed)
    words = [
        "configuration",
        "initialization",
        "connection",
        "successfully",
        "international",
        "processing",
        "timeout",
        "worker",
        "errors.log",
        "backoff",
        "café",
        "naïve",
        "東京",
        "функция",
        "return",
        "  ",
        "\t",
        "12345",
        "https://example.com/path?query=value",
        "self.assertEqual(result)",
    ]
    out: list[str] = []
    size = 0
    while size < chars:
        end = rnd.choice(["\n", "\n", "\n\n", "  \n", ".\n"]) if newline else " "
        line = " ".join(rnd.choice(words) for _ in range(rnd.randint(0, 18))) + end
        out.append(line)
        size += len(line)
    return "".join(out)[:chars]


def test_a_text_just_under_the_tokenizer_limit_counts_exactly_in_pieces() -> None:
    text = _text(999_990, seed=8)  # bpe_openai encodes this in one call: the exact reference
    exact = len(encoding().encode_ordinary(text))
    assert count_tokens(text) == exact
    line = _text(999_990, seed=9, newline=False)  # one line: pieces are cut before spaces
    assert count_tokens(line) == len(encoding().encode_ordinary(line))


def test_a_megabyte_counts_without_raising() -> None:
    big = _text(1_000_000, seed=3)  # bpe_openai refuses 1,000,000 characters
    dense = base64.b64encode(random.Random(4).randbytes(900_000)).decode()  # 1.2 MB, one "word"
    assert count_tokens(big) > 0 and count_tokens(big * 2) > 0
    # No whitespace to cut at, and more than the 200,000 tokens bpe_openai encodes in one call:
    # pieces cut inside a word cost at most a token or two each.
    slices = sum(len(encoding().encode_ordinary(dense[i : i + 100_000])) for i in range(0, len(dense), 100_000))
    assert abs(count_tokens(dense) - slices) <= 0.001 * slices


def test_special_token_text_is_ordinary_text() -> None:
    # A tool output may contain the literal text "<|endoftext|>": it is text, not a reason to fail.
    assert count_tokens("log line <|endoftext|> more") > 5


def test_a_failing_tokenizer_falls_back_to_the_estimate(monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(name: str) -> Any:
        raise RuntimeError("tokenizer data missing")

    monkeypatch.setattr(tokens, "_load", broken)
    for text in ("a short text never counted before (fallback 1)", _text(50_000, seed=11)):
        assert count_tokens(text) == estimate_tokens(text)


def test_long_texts_are_not_kept_alive_by_the_cache() -> None:
    text = _text(200_000, seed=12)
    before = sys.getrefcount(text)
    first = count_tokens(text)
    assert sys.getrefcount(text) == before
    assert count_tokens(text) == first  # cached by digest all the same


def test_the_counts_cache_is_bounded_by_bytes(monkeypatch: pytest.MonkeyPatch) -> None:
    # 65,536 entries of any size were once the only bound; now the bytes kept are.
    monkeypatch.setattr(tokens, "_counts", ByteLRU(256 * 1024))
    monkeypatch.setattr(tokens, "_count", lambda text, name: len(text))  # the cache, not the tokenizer
    for i in range(3_000):
        text = f"{i} " + "word " * (i % 200)  # up to 1 KiB: kept whole
        assert count_tokens(text) == len(text)
        assert count_tokens(_text(5_000, seed=i) if i % 50 == 0 else text) > 0
    kept = tokens._counts
    assert kept.nbytes <= 256 * 1024 and 0 < len(kept) < 3_000
    recent = f"{2_999} " + "word " * (2_999 % 200)
    assert kept.get(("o200k_base", recent)) == len(recent), "the most recent texts stay"


def test_load_counter_loads_in_a_worker_thread(monkeypatch: pytest.MonkeyPatch) -> None:
    threads: list[threading.Thread] = []
    real = tokens._load

    def watched(name: str) -> Any:
        threads.append(threading.current_thread())
        return real(name)

    monkeypatch.setattr(tokens, "_load", watched)
    counter = asyncio.run(load_counter("openai/gpt-4.1"))
    assert counter is count_tokens
    assert threads and threads[0] is not threading.main_thread()
    assert asyncio.run(load_counter("anthropic/claude-sonnet-4-5")) is estimate_tokens


def test_a_slow_load_does_not_hold_the_event_loop(monkeypatch: pytest.MonkeyPatch) -> None:
    release = threading.Event()
    started = threading.Event()
    real = tokens._load

    def slow(name: str) -> Any:
        started.set()
        if not release.wait(30):  # not an assertion: only so that a regression fails instead of hanging
            raise RuntimeError("never released")
        return real(name)

    monkeypatch.setattr(tokens, "_load", slow)

    async def go() -> str:
        task = asyncio.create_task(load_counter("openai/gpt-4.1"))
        try:
            while not started.is_set() and not task.done():  # the loop keeps turning while the load runs
                await asyncio.sleep(0)
            task.cancel()  # a Stop during the load is heard at once
            try:
                await task
            except asyncio.CancelledError:
                return "cancelled"
            return "finished"
        finally:
            release.set()  # let the worker thread end, so the loop can close

    assert asyncio.run(go()) == "cancelled"


def test_preload_reports_a_failure_instead_of_raising(monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(name: str) -> Any:
        raise OSError("no data files")

    monkeypatch.setattr(tokens, "_load", broken)
    assert asyncio.run(preload()) is False
