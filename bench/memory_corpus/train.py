"""Train the memory scan's classifier on the TUNING part of the corpus, and ship its weights.

    python bench/memory_corpus/build.py   # the corpus (deterministic)
    python bench/memory_corpus/train.py   # writes src/tether/memory/_model/scan_model.{json,bin}

What it fits on: the rows of ``corpus.jsonl`` whose ``part`` is "tune", plus the rows of the old
scan table (``tests/memory/scan_table.jsonl``) marked "tune". Nothing held out is read. Rows whose
attack lives only in invisible characters or in base64 are left out: the scan's structural
checks refuse those before the model is asked, and their visible text is harmless.

The model: multinomial logistic regression over the features of
:func:`tether.memory._model.features` (binary, scaled to unit length), full-batch Adam with L2,
a fixed number of steps from zero weights: deterministic. The refusal threshold is chosen by
4-fold cross-validation grouped by template, inside the tuning part: the lowest threshold that
keeps at least 99.5 % of the out-of-fold ordinary notes. Weights are pruned (features whose largest
weight is under 2 % of the largest) and stored as int8 with one scale per kind.

The settings were chosen by that cross-validated figure alone (attacks refused at 99.4 % of notes
kept, ``--cv-only``): L2 1e-5: 67.3 %; 1e-6: 75.3 % (chosen); 1e-7: 72.1 %; n-grams up to 5
(L2 1e-5): 63.5 %; ordinary notes weighted 1.5 instead of 3: 67.8 %; 400 steps (L2 1e-6): 75.1 %;
``--augment`` (each row also after an ordinary note): 61.3 %, on rows that include the harder
augmented ones, so not comparable one for one; not used. After the corpus gained fillers and short
notes the chosen settings give 70.9 %.

Round two (folds now by a hash of the template, so that adding templates does not reshuffle them):
intent frames as features (``tether.memory._frames``): 70.9 -> 75.2 % (old folds); with folds by hash,
71.4 % without round two's templates, 76.0 % with its attack templates (chosen), 72.9 % with its
attack and note templates. ``fresh.jsonl``, the second held-out set, was frozen before any of this.
"""

from __future__ import annotations

import json
import sys
import zlib
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "src"))
from tether.memory._model import KINDS, feature_key, features  # noqa: E402
from tether.memory._normal import normalise  # noqa: E402

CORPUS = Path(__file__).with_name("corpus.jsonl")
# The second held-out set (round two), frozen before that round's tuning: never fitted on. Its
# hash is checked so that an edit to it shows; a tuning row equal to one of its rows stops training.
FRESH = Path(__file__).with_name("fresh.jsonl")
FRESH_SHA256 = "85796f8bfdd8fc44ea06e1e6e8cf1fcb169a7495422967620034348ce7ba33ae"
TABLE = ROOT / "tests" / "memory" / "scan_table.jsonl"
OUT = ROOT / "src" / "tether" / "memory" / "_model"
STRUCTURAL = {"base64", "base64x3", "tag_smuggling", "variation_selectors", "invisible"}
TABLE_KIND = {"override", "role_hijack", "exfiltration", "persistence", "fake_system"}
STEPS, LR, L2, NOTE_WEIGHT, KEEP, MAX_N, AUGMENT = 200, 0.05, 1e-6, 3.0, 0.995, 4, False


def augmented(rows: list[tuple[str, str, str, str]]) -> list[tuple[str, str, str]]:
    """Each tuning row, and the same row inside ordinary context: after an ordinary note of its own
    language (an injection hidden in a longer note still counts; two ordinary notes together are
    still ordinary). Deterministic; built from tuning rows only."""
    import random

    rng = random.Random(0)
    notes: dict[str, list[str]] = {}
    for text, kind, _, lang in rows:
        if kind == "note" and len(text.split()) >= 4:
            notes.setdefault(lang, []).append(text)
    out = [(text, kind, group) for text, kind, group, _ in rows]
    for text, kind, group, lang in rows:
        pool = notes.get(lang)
        if pool and rng.random() < 0.5:
            out.append((f"{rng.choice(pool)} {text}", kind, group))
    return out


def tuning_rows() -> list[tuple[str, str, str]]:
    """(text, kind, group) for every tuning row the model may learn from."""
    out: list[tuple[str, str, str, str]] = []
    for line in CORPUS.read_text(encoding="utf-8").splitlines():
        r = json.loads(line)
        if r["part"] == "tune" and r["obfuscation"] not in STRUCTURAL:
            out.append((r["text"], r["kind"], r["template"], r["lang"]))
    for line in TABLE.read_text(encoding="utf-8").splitlines():
        if not line.strip():
            continue
        r = json.loads(line)
        if r["set"] == "tune" and r["obfuscation"] not in STRUCTURAL:
            kind = r["category"] if r["label"] == "attack" and r["category"] in TABLE_KIND else "note"
            if r["label"] == "attack" and kind == "note":
                kind = "override"
            out.append((r["text"], kind, f"table{zlib.crc32(r['text'].encode()) % 8}", r["lang"]))
    _check_fresh({t for t, _, _, _ in out})
    return augmented(out) if AUGMENT else [(t, k, g) for t, k, g, _ in out]


def _check_fresh(tuning: set[str]) -> None:
    import hashlib

    data = FRESH.read_bytes()
    if hashlib.sha256(data).hexdigest() != FRESH_SHA256:
        raise SystemExit(f"{FRESH.name} changed since it was frozen: restore it (git checkout) before training")
    plain = [r["text"] for line in data.decode().splitlines() if (r := json.loads(line))["obfuscation"] == "none"]
    leaked = [t for t in plain if t in tuning]
    if leaked:
        raise SystemExit(f"{len(leaked)} tuning rows are rows of {FRESH.name}: {leaked[0][:80]!r}")


class Data:
    def __init__(self, rows: list[tuple[str, str, str]], vocab: dict[str, int]) -> None:
        ids, ptr, vals = [], [0], []
        for text, _, _ in rows:
            row = sorted(i for f in features(normalise(text), MAX_N) if (i := vocab.get(f)) is not None)
            ids.extend(row)
            vals.extend([1.0 / np.sqrt(max(len(row), 1))] * len(row))
            ptr.append(len(ids))
        self.ids = np.array(ids, dtype=np.int64)
        self.vals = np.array(vals)
        self.rowof = np.repeat(np.arange(len(rows)), np.diff(ptr))
        self.n = len(rows)
        self.y = np.array([KINDS.index(k) for _, k, _ in rows])
        self.w = np.where(self.y == 0, NOTE_WEIGHT, 1.0)
        self.w = self.w / self.w.sum()

    def logits(self, W: np.ndarray, b: np.ndarray) -> np.ndarray:
        contrib = W[:, self.ids] * self.vals  # (K, nnz)
        out = np.stack([np.bincount(self.rowof, weights=c, minlength=self.n) for c in contrib], axis=1)
        return out + b


def fit(data: Data, n_features: int) -> tuple[np.ndarray, np.ndarray]:
    K = len(KINDS)
    W, b = np.zeros((K, n_features)), np.zeros(K)
    mW, vW, mb, vb = np.zeros_like(W), np.zeros_like(W), np.zeros_like(b), np.zeros_like(b)
    onehot = np.eye(K)[data.y]
    for step in range(1, STEPS + 1):
        z = data.logits(W, b)
        p = np.exp(z - z.max(axis=1, keepdims=True))
        p /= p.sum(axis=1, keepdims=True)
        g = (p - onehot) * data.w[:, None]  # (n, K)
        gW = np.stack(
            [np.bincount(data.ids, weights=g[data.rowof, k] * data.vals, minlength=n_features) for k in range(K)]
        )
        gW += 2 * L2 * W
        gb = g.sum(axis=0)
        for P, G, m, v in ((W, gW, mW, vW), (b, gb, mb, vb)):
            m *= 0.9
            m += 0.1 * G
            v *= 0.999
            v += 0.001 * G * G
            P -= LR * (m / (1 - 0.9**step)) / (np.sqrt(v / (1 - 0.999**step)) + 1e-8)
    return W, b


def probabilities(data: Data, W: np.ndarray, b: np.ndarray) -> np.ndarray:
    z = data.logits(W, b)
    p = np.exp(z - z.max(axis=1, keepdims=True))
    return p / p.sum(axis=1, keepdims=True)


def build_vocab(rows: list[tuple[str, str, str]]) -> dict[str, int]:
    counts: dict[str, int] = {}
    for text, _, _ in rows:
        for f in features(normalise(text), MAX_N):
            counts[f] = counts.get(f, 0) + 1
    return {f: i for i, f in enumerate(sorted(f for f, c in counts.items() if c >= 2))}


def threshold(rows: list[tuple[str, str, str]]) -> float:
    """The refusal threshold from out-of-fold scores, folds grouped by template."""
    groups = sorted({g for _, _, g in rows})
    fold = {g: zlib.crc32(g.encode()) % 4 for g in groups}  # stable when templates are added
    attack_p = np.zeros(len(rows))
    for k in range(4):
        train = [r for r in rows if fold[r[2]] != k]
        test_idx = [i for i, r in enumerate(rows) if fold[r[2]] == k]
        vocab = build_vocab(train)
        W, b = fit(Data(train, vocab), len(vocab))
        p = probabilities(Data([rows[i] for i in test_idx], vocab), W, b)
        attack_p[test_idx] = 1 - p[:, 0]
    is_note = np.array([k == "note" for _, k, _ in rows])
    t = float(np.quantile(attack_p[is_note], KEEP)) + 1e-6
    caught = (attack_p[~is_note] >= t).mean()
    kept = (attack_p[is_note] < t).mean()
    print(
        f"cross-validated on the tuning part: threshold {t:.3f}: {caught:.1%} of attacks refused, {kept:.1%} of notes kept"
    )
    return t


def main() -> None:
    import argparse

    global STEPS, L2, NOTE_WEIGHT, MAX_N, AUGMENT
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, default=STEPS)
    parser.add_argument("--l2", type=float, default=L2)
    parser.add_argument("--note-weight", type=float, default=NOTE_WEIGHT)
    parser.add_argument("--max-n", type=int, default=MAX_N)
    parser.add_argument("--augment", action="store_true", help="also each row after an ordinary note (not used)")
    parser.add_argument("--cv-only", action="store_true", help="print the cross-validated figure, write nothing")
    args = parser.parse_args()
    STEPS, L2, NOTE_WEIGHT, MAX_N, AUGMENT = args.steps, args.l2, args.note_weight, args.max_n, args.augment
    print(f"steps {STEPS}, l2 {L2}, note weight {NOTE_WEIGHT}, n-grams up to {MAX_N}, augmented {AUGMENT}")
    rows = tuning_rows()
    print(f"{len(rows)} tuning rows ({sum(k == 'note' for _, k, _ in rows)} ordinary notes)")
    t = threshold(rows)
    if args.cv_only:
        return
    vocab = build_vocab(rows)
    W, b = fit(Data(rows, vocab), len(vocab))
    keep = np.abs(W).max(axis=0) >= 0.02 * np.abs(W).max()
    names = sorted(vocab, key=vocab.__getitem__)
    keys, columns, seen = [], [], set()
    for column, (name, kept) in enumerate(zip(names, keep, strict=True)):
        key = feature_key(name)
        if kept and key not in seen:  # two features with one CRC-32: the first keeps it
            seen.add(key)
            keys.append(key)
            columns.append(column)
    W = W[:, columns]
    kept_names = [names[c] for c in columns]
    scales = np.abs(W).max(axis=1) / 127
    q = np.round(W / scales[:, None]).astype(np.int8)
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / "scan_model.bin").write_bytes(np.ascontiguousarray(q).tobytes())
    (OUT / "scan_model.keys").write_bytes(np.array(keys, dtype="<u4").tobytes())
    header = {
        "kinds": list(KINDS),
        "threshold": round(t, 6),
        "bias": [round(float(x), 6) for x in b],
        "scales": [float(x) for x in scales],
        "max_n": MAX_N,
        "trained_on": "bench/memory_corpus/corpus.jsonl part=tune + tests/memory/scan_table.jsonl set=tune",
        "features": len(keys),
    }
    (OUT / "scan_model.json").write_text(
        json.dumps(header, ensure_ascii=False, separators=(",", ":")), encoding="utf-8"
    )
    print(f"wrote {len(kept_names)} features of {len(vocab)} to {OUT.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
