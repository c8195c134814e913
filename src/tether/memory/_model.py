"""The scan's learned part: a linear classifier over character n-grams, shipped with tether.

It reads the normalised text (:func:`tether.memory._normal.normalise`) as character 1- to
4-grams, word pairs and intent frames (:mod:`tether.memory._frames`, weighed ``frame_scale``
times a character feature, so that what transfers across languages counts), scaled by the square
root of all the text's features (``dilute``: what the model never saw is no evidence either way),
and gives each kind of injection a score (multinomial logistic regression). Trained in the repository by
``bench/memory_corpus/train.py`` on the tuning part of the corpus only; the weights (int8, one
scale per kind) and the vocabulary live in ``_model/``: ``scan_model.json`` (kinds, biases,
scales, threshold), ``scan_model.keys`` (the CRC-32 of each feature, unsigned 32-bit
little-endian, sorted; the weights are in this order), ``scan_model.index`` (65,537 offsets:
where each value of a key's top 16 bits begins), ``scan_model.bin`` (int8, one row per kind) and
``scan_frames.json`` (the intent frames' look-up tables, :func:`tether.memory._lexicon.tables`).
Standard library only at run time: loading takes a few milliseconds, scoring a note well under
one, nothing is downloaded.
"""

from __future__ import annotations

import array
import bisect
import functools
import itertools
import json
import math
import operator
import sys
import zlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from tether.memory._frames import frames
from tether.memory._normal import SENTENCE_END

__all__ = [
    "KINDS",
    "SHORT_WORDS",
    "WINDOW_WORDS",
    "Index",
    "Model",
    "feature_key",
    "features",
    "load",
    "sentences",
    "short",
    "word_windows",
]

# The kinds the model tells apart; "note" is an ordinary note.
KINDS = ("note", "override", "obsolete", "system_override", "role_hijack", "exfiltration", "persistence", "fake_system")
MAX_N = 4
MIN_EVIDENCE = 24  # known features a text needs before the model judges it
SHORT_WORDS = 6  # a text of this many words or fewer is judged at the model's short_threshold
WINDOW_WORDS = 12  # a longer text is also read in runs of this many words (half of them shared)


def features(norm: str, max_n: int = MAX_N) -> set[str]:
    """Character 1..max_n-grams of the padded text, adjacent word pairs, and intent frames
    (:mod:`tether.memory._frames`)."""
    padded = f" {norm} "
    out: set[str] = set()
    size = len(padded)
    for n in range(1, max_n + 1):
        out.update(padded[i : i + n] for i in range(size - n + 1))
    words = norm.split()
    out.update(f"{a}\x00{b}" for a, b in itertools.pairwise(words))
    out.update(frames(norm))
    return out


def word_windows(norm: str, size: int = WINDOW_WORDS) -> list[str]:
    """Runs of ``size`` words, each sharing half with the one before, when ``norm`` has more than
    ``size`` words; else none. An order padded with harmless words in the same sentence is read
    without them."""
    words = norm.split()
    if len(words) <= size:
        return []
    step = max(1, size // 2)
    starts = list(range(0, len(words) - size + 1, step))
    if starts[-1] != len(words) - size:
        starts.append(len(words) - size)  # the last words too
    return [" ".join(words[i : i + size]) for i in starts]


def sentences(norm: str, lines: Sequence[str] = ()) -> list[str]:
    """The sentences of ``norm`` when it has more than one; else none. An order buried among
    ordinary facts in one note is read without them. ``lines``, the text's lines normalised one by
    one (normalising joins lines), end sentences too: an order on a line of its own after a line
    with no full stop (a chat message after an earlier one, a note's second line) is read alone."""
    pieces = lines if len(lines) > 1 else (norm,)
    parts = [p.strip() for piece in pieces for p in SENTENCE_END.split(piece) if p.strip()]
    return parts if len(parts) > 1 else []


def _too_short(norm: str) -> bool:
    """Fewer than three words (four characters in scripts written without spaces): a name, a
    label, a fragment; it cannot say much, and a word alone (\u201cdeveloper\u201d) is not an order."""
    if len(norm.split()) >= 3:
        return False
    return sum(map(_unspaced, norm)) < 4


def short(norm: str) -> bool:
    """Six words or fewer, in a script written with spaces: little to go on, so the model must be
    surer (``Model.short_threshold``) before it refuses."""
    return len(norm.split()) <= SHORT_WORDS and not any(map(_unspaced, norm))


def _unspaced(ch: str) -> bool:
    """A kana, CJK or Hangul character: scripts whose words are not counted by spaces here."""
    return "\u3040" <= ch <= "\u9fff" or "\uac00" <= ch <= "\ud7af"


class Index:
    """The vocabulary: feature CRC-32 -> column, read straight from the shipped arrays. The keys
    are sorted; ``starts[b]`` is where the keys whose top 16 bits are ``b`` begin (65,537 entries,
    the last ``len(keys)``). Nothing is built at load (a dict of 200k large ints takes tens of
    milliseconds); a look-up bisects a bucket of about three."""

    __slots__ = ("keys", "starts")

    def __init__(self, keys: array.array[int], starts: array.array[int]) -> None:
        self.keys = keys
        self.starts = starts

    def get(self, key: int) -> int | None:
        b = key >> 16
        hi = self.starts[b + 1]
        j = bisect.bisect_left(self.keys, key, self.starts[b], hi)  # in C: a third less than a loop here
        return j if j < hi and self.keys[j] == key else None

    def __len__(self) -> int:
        return len(self.keys)


@dataclass(frozen=True)
class Model:
    vocab: Index  # CRC-32 of a feature -> its column
    weights: tuple[memoryview, ...]  # per kind: int8 per vocabulary entry
    scales: tuple[float, ...]  # per kind: what one int8 step is worth
    bias: tuple[float, ...]
    threshold: float  # refuse when the probability of "note" is below 1 - threshold
    kinds: tuple[str, ...]
    max_n: int = MAX_N
    frame_scale: float = 1.0
    dilute: bool = False  # scale by all of a text's features, not only the known ones
    window_threshold: float | None = None  # for runs of WINDOW_WORDS words inside a longer text
    short_threshold: float | None = None  # for a text of SHORT_WORDS words or fewer (see short())
    sentence_threshold: float | None = None  # for each sentence of a text of several

    def known(self, norm: str) -> tuple[list[int], list[int], int]:
        """The columns of the features of ``norm`` that the model has weights for: character and
        word features, and intent frames (which weigh ``frame_scale`` times as much); and how many
        features the text has in all."""
        get = self.vocab.get
        grams: list[int] = []
        framed: list[int] = []
        every = features(norm, self.max_n)
        for f in every:
            i = get(zlib.crc32(f.encode()))
            if i is not None:
                (framed if f[:1] == "\x01" else grams).append(i)
        return grams, framed, len(every)

    def scores(self, norm: str, known: tuple[list[int], list[int], int] | None = None) -> dict[str, float]:
        """The probability of each kind for a normalised text (``known``: its :meth:`known`, when
        the caller has it already). With ``dilute``, what the model never saw counts in the scale:
        a text in a language or a wording it does not know leans on what it does know only as much
        as that is of the whole, and is not refused on a few familiar letters."""
        grams, framed, every = known if known is not None else self.known(norm)
        scale = 1.0 / math.sqrt(max(every if self.dilute else len(grams) + len(framed), 1))
        fs = self.frame_scale
        of_grams, of_frames = _picker(grams), _picker(framed)
        logits = [
            b + s * scale * (of_grams(w) + fs * of_frames(w))
            for w, s, b in zip(self.weights, self.scales, self.bias, strict=True)
        ]
        top = max(logits)
        exps = [math.exp(v - top) for v in logits]
        total = sum(exps)
        return {k: e / total for k, e in zip(self.kinds, exps, strict=True)}

    def judge(self, norm: str, threshold: float | None = None) -> tuple[str, float] | None:
        """(kind, probability that it is an injection) when the text reads as one (at
        ``threshold``; by default the model's, or its ``short_threshold`` for a short text), else
        None. A text with too little the model knows (``yyyy``, an identifier) is not judged: it
        says nothing."""
        if _too_short(norm):
            return None
        known = self.known(norm)
        if len(known[0]) + len(known[1]) < MIN_EVIDENCE:
            return None
        p = self.scores(norm, known)
        attack = 1.0 - p["note"]
        if threshold is None:
            threshold = self.threshold
            if self.short_threshold is not None and short(norm):
                threshold = max(threshold, self.short_threshold)
        if attack < threshold:
            return None
        kind = max((k for k in self.kinds if k != "note"), key=p.__getitem__)
        return kind, attack


def _picker(columns: list[int]) -> Callable[[memoryview], int]:
    """The sum of a kind's weights at ``columns``, taken in C (``itemgetter``) for every kind."""
    if len(columns) > 1:
        pick = operator.itemgetter(*columns)
        return lambda w: sum(pick(w))
    if columns:
        return operator.itemgetter(columns[0])
    return lambda w: 0


def feature_key(feature: str) -> int:
    return zlib.crc32(feature.encode())


HERE = Path(__file__).with_name("_model")


@functools.lru_cache(maxsize=1)
def load() -> Model:
    data = json.loads((HERE / "scan_model.json").read_text(encoding="utf-8"))
    keys, starts = array.array("I"), array.array("I")
    keys.frombytes((HERE / "scan_model.keys").read_bytes())
    starts.frombytes((HERE / "scan_model.index").read_bytes())
    if sys.byteorder != "little":
        keys.byteswap()
        starts.byteswap()
    n = len(keys)
    whole = memoryview((HERE / "scan_model.bin").read_bytes()).cast("b")
    if len(starts) != 0x10001 or starts[-1] != n or len(whole) != n * len(data["kinds"]):
        from tether.errors import ConfigError

        raise ConfigError(f"the memory scan's model files in {HERE} do not match each other: reinstall tether")
    return Model(
        Index(keys, starts),
        tuple(whole[k * n : (k + 1) * n] for k in range(len(data["kinds"]))),
        tuple(data["scales"]),
        tuple(data["bias"]),
        float(data["threshold"]),
        tuple(data["kinds"]),
        int(data.get("max_n", MAX_N)),
        float(data.get("frame_scale", 1.0)),
        bool(data.get("dilute", False)),
        data.get("window_threshold"),
        data.get("short_threshold"),
        data.get("sentence_threshold"),
    )
