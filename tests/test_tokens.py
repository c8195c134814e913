"""Token counting is the real o200k_base BPE, shipped in a package: it works with no network."""

from __future__ import annotations

from tether.tokens import count_tokens, encoding, estimate_tokens


def test_o200k_base_ids_are_the_real_ones() -> None:
    # These ids are o200k_base's; cl100k_base gives [15339, 1917] for the same text.
    assert encoding("o200k_base").encode("hello world") == [24912, 2375]
    assert count_tokens("errors.log mentions a timeout") > 3


def test_estimate_weights_cjk_more_than_latin() -> None:
    assert estimate_tokens("a" * 400) == 100
    assert estimate_tokens("你" * 100) == 150
    assert estimate_tokens("") == 0
