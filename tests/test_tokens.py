"""Token counting is the real o200k_base BPE, shipped in a package: it works with no network."""

from __future__ import annotations

import pytest

from tether.tokens import count_tokens, encoding, estimate_tokens


def test_o200k_base_ids_are_the_real_ones() -> None:
    # These ids are o200k_base's; cl100k_base gives [15339, 1917] for the same text.
    assert encoding("o200k_base").encode("hello world") == [24912, 2375]
    assert count_tokens("errors.log mentions a timeout") > 3


def test_estimate_weights_cjk_more_than_latin() -> None:
    assert estimate_tokens("a" * 400) == 100
    assert estimate_tokens("你" * 100) == 150
    assert estimate_tokens("") == 0


def test_the_direct_tokenizer_counts_as_the_package_does() -> None:
    # tether loads bpe-openai's Rust tokenizer without the package's wrapper (whose import decodes
    # three rank tables); every kind of text must give the wrapper's encode_ordinary ids.
    import bpe_openai  # type: ignore[import-untyped]

    from tether import tokens

    direct = tokens._rust_backend("o200k_base")
    assert isinstance(direct, tokens._RustEncoding)
    wrapper = bpe_openai.get_encoding("o200k_base")
    texts = [
        "hello world",
        "<|endoftext|> is text here, and so is <|endofprompt|>",
        "日本語のテキストと한국어",
        "  \n\n\t  trailing spaces   \n",
        "a lone \ud800 surrogate",
        "x" * 5_000,
        "def f(x):\n    return x ** 2  # comment\n" * 50,
        "emoji 👩‍👩‍👧 and accents: café naïve",
    ]
    for text in texts:
        assert direct.encode_ordinary(text) == wrapper.encode_ordinary(text), text[:40]


def test_loading_the_tokenizer_does_not_import_the_package_wrapper() -> None:
    import subprocess
    import sys

    code = (
        "import sys\nfrom tether.tokens import count_tokens, encoding\nencoding()\n"
        "print(count_tokens('hello world'), 'bpe_openai' in sys.modules, type(encoding()).__name__)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    assert out == ["2", "False", "_RustEncoding"]


def test_the_package_api_is_the_fallback(monkeypatch: pytest.MonkeyPatch) -> None:
    from tether import tokens

    monkeypatch.setattr(tokens, "_rust_backend", lambda name: None)
    tokens._load.cache_clear()
    try:
        enc = tokens.encoding()
        assert type(enc).__name__ == "Encoding"  # bpe_openai's own
        assert enc.encode_ordinary("hello world") == [24912, 2375]
    finally:
        tokens._load.cache_clear()
