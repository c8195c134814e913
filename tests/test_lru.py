"""The byte-bounded LRU: what it keeps never passes its bound, whatever the sizes of the entries."""

from __future__ import annotations

import sys

from tether._lru import ENTRY_OVERHEAD, ByteLRU


def test_bounded_by_bytes_dropping_the_least_recently_used() -> None:
    lru: ByteLRU[str, int] = ByteLRU(max_bytes=3 * (100 + ENTRY_OVERHEAD))
    for key in ("a", "b", "c"):
        lru.put(key, 1, 100)
    assert lru.get("a") == 1  # "a" is now the most recent: "b" goes first
    lru.put("d", 1, 100)
    assert lru.get("b") is None and [lru.get(k) for k in ("a", "c", "d")] == [1, 1, 1]
    assert lru.nbytes == 3 * (100 + ENTRY_OVERHEAD)
    lru.put("big", 2, 250)  # one large entry takes the room of two small ones
    assert len(lru) == 2 and lru.get("big") == 2 and lru.nbytes <= lru.max_bytes


def test_an_entry_larger_than_the_bound_is_not_kept_and_a_replaced_one_is_recharged() -> None:
    lru: ByteLRU[str, str] = ByteLRU(max_bytes=1_000)
    lru.put("k", "small", 10)
    lru.put("k", "huge", 5_000)
    assert lru.get("k") is None and lru.nbytes == 0 and len(lru) == 0
    lru.put("k", "v", 10)
    lru.put("k", "w", 20)
    assert lru.get("k") == "w" and lru.nbytes == 20 + ENTRY_OVERHEAD


def test_many_texts_of_any_size_stay_within_the_bound() -> None:
    lru: ByteLRU[str, int] = ByteLRU(max_bytes=1 << 20)
    for i in range(5_000):
        text = f"{i}:" + "x" * (i % 3_000)
        lru.put(text, i, sys.getsizeof(text))
        assert lru.nbytes <= lru.max_bytes
    assert 0 < len(lru) < 5_000
