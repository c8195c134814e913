"""How the knowledge base fuses its keyword and vector rankings, measured per kind of query, with the
fusion's settings chosen on one part of the queries and reported on the rest.

    python bench/kb_fusion.py            # the man-page set of bench/kb.py (906 pages)
    python bench/kb_fusion.py --large    # the large set (about 4,500 pages of 25 packages)

Each query's two rankings (chunk ids with their BM25 and cosine scores, 100 deep) are computed once
with the local embedder and kept in ``~/.cache/tether/kb-fusion/`` (with the base, so a second run
embeds nothing); every fusion is then scored on the same rankings, at the document level (a
document ranks where its best chunk does), by MRR@10.

**The split.** Settings are tuned only on the *tuning* queries: the description queries of pages
whose doc id hashes into the first half (``md5(doc_id) % 2 == 0``) of the Linux man-pages project
(``manpages``, ``manpages-dev``). Everything else is *held out*: every name query, the other half of
the description queries, and, with ``--large``, every query of the other packages (other authors,
other vocabularies). Only held-out figures decide; the tuning figures are printed for reference.

Fusions: RRF with the weight it shipped with before (``rrf (before)``), tether's hybrid as it ships
(``_score_fuse`` with ``HYBRID_ALPHA``), and, each with a weight on the vector side tuned here, RRF,
the score fusions min-max and z-score, distribution-based score fusion (``dbsf``: each list's
scores mapped from mean ± 3 standard deviations to [0, 1], as Qdrant does), ``gap`` (min-max with
the weight moved per query toward the list whose top stands out) and ``mixed`` (the shipped
formula itself, half min-max score and half reciprocal rank, with its weight tuned here). Writes
bench/results/kb_fusion.json.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from bench._kb_corpus import CorpusMissing, Query, build
from bench._results import tether_commit, write_results

CACHE = Path.home() / ".cache" / "tether" / "kb-fusion"
DEPTH = 100
TUNING_PACKAGES = ("manpages", "manpages-dev")

Ranked = list[tuple[int, float]]  # chunk ids, best first, with the list's own score


def tuning(q: Query) -> bool:
    half = int(hashlib.md5(q.doc_id.encode()).hexdigest(), 16) % 2 == 0
    return q.kind == "description" and q.package in TUNING_PACKAGES and half


def rankings(large: bool, log: Callable[[str], None]) -> tuple[list[Query], dict[str, Any]]:
    """Every query's keyword and vector rankings, and each chunk's document (cached)."""
    from tether.knowledge import KnowledgeBase, make_embedder
    from tether.knowledge.base import query_terms

    docs, queries = build(large=large)
    name = "large" if large else "default"
    CACHE.mkdir(parents=True, exist_ok=True)
    saved = CACHE / f"{name}-rankings.json"
    if saved.is_file():
        data = json.loads(saved.read_text())
        if data.get("queries") == len(queries) and data.get("docs") == len(docs):
            return queries, data
    kb = KnowledgeBase.open(CACHE / f"{name}-local.db", embedder=make_embedder("local"))
    t = time.perf_counter()
    for i, d in enumerate(docs, 1):
        kb.add_text(d.doc_id, d.text, title=d.title, markdown=False, embed=False)
        if i % 500 == 0:
            log(f"  keyword index: {i}/{len(docs)} pages")
    started = time.perf_counter()
    kb.fill_vectors(lambda done, todo: log(f"  vectors: {done}/{todo}") if done % 2048 < 32 else None, batch=32)
    log(f"  indexed in {started - t:.0f} s, vectors in {time.perf_counter() - started:.0f} s")
    store = kb.store
    out: dict[str, Any] = {"docs": len(docs), "queries": len(queries), "keyword": [], "vector": []}
    for q in queries:
        out["keyword"].append(store.keyword(query_terms(q.text), DEPTH, None))
        vec = kb.embedder.embed([q.text])[0]
        out["vector"].append([(cid, float(s)) for cid, s in store.nearest(vec, DEPTH, None)])
    ids = {cid for side in ("keyword", "vector") for ranked in out[side] for cid, _ in ranked}
    rows = store.chunks(ids)
    names = {doc.id: doc.name for doc in store.documents()}
    out["doc_of"] = {str(cid): names[row.doc_id] for cid, row in rows.items()}
    saved.write_text(json.dumps(out))
    return queries, out


# --- fusions: (keyword ranking, vector ranking, weight on the vector side) -> chunk ids ----------


def rrf(kw: Ranked, vec: Ranked, w: float, k: int = 60) -> list[int]:
    scores: dict[int, float] = {}
    for side, weight in ((kw, 1 - w), (vec, w)):
        for rank, (cid, _) in enumerate(side, 1):
            scores[cid] = scores.get(cid, 0.0) + weight / (k + rank)
    return sorted(scores, key=lambda c: (-scores[c], c))


def _score_fusion(normal: Callable[[list[float]], Callable[[float], float]]) -> Callable[..., list[int]]:
    def fuse(kw: Ranked, vec: Ranked, w: float) -> list[int]:
        scores: dict[int, float] = {}
        for side, weight in ((kw, 1 - w), (vec, w)):
            if not side:
                continue
            f = normal([s for _, s in side])
            for cid, s in side:
                scores[cid] = scores.get(cid, 0.0) + weight * f(s)
        return sorted(scores, key=lambda c: (-scores[c], c))

    return fuse


def _minmax(values: list[float]) -> Callable[[float], float]:
    lo, hi = min(values), max(values)
    return (lambda s: (s - lo) / (hi - lo)) if hi > lo else (lambda s: 1.0)


def _z(values: list[float]) -> Callable[[float], float]:
    mean = statistics.fmean(values)
    sd = statistics.pstdev(values) or 1.0
    return lambda s: (s - mean) / sd


def _dbsf(values: list[float]) -> Callable[[float], float]:
    mean = statistics.fmean(values)
    sd = statistics.pstdev(values)
    lo, hi = mean - 3 * sd, mean + 3 * sd
    return (lambda s: min(1.0, max(0.0, (s - lo) / (hi - lo)))) if hi > lo else (lambda s: 1.0)


def gap_weighted(kw: Ranked, vec: Ranked, w: float) -> list[int]:
    """Min-max fusion whose weight moves, per query, toward the list whose best results stand out
    from the rest of its top ten (the gap between its first score and its tenth, over its range)."""

    def gap(side: Ranked) -> float:
        scores = [s for _, s in side]
        if len(scores) < 2 or scores[0] == scores[-1]:
            return 0.0
        return (scores[0] - scores[min(9, len(scores) - 1)]) / (scores[0] - scores[-1])

    gk, gv = gap(kw), gap(vec)
    wq = w * (0.5 + gv) / ((w * (0.5 + gv)) + (1 - w) * (0.5 + gk)) if (gk or gv) else w
    return FUSIONS["minmax"](kw, vec, wq)


def shipped(kw: Ranked, vec: Ranked, w: float) -> list[int]:
    """tether's own fusion (:func:`tether.knowledge.base._score_fuse`: half min-max scaled score,
    half reciprocal rank, per list), with the weight given."""
    from tether.knowledge.base import _score_fuse

    return [cid for cid, _, _ in _score_fuse(kw, vec, w)]


FUSIONS: dict[str, Callable[..., list[int]]] = {
    "rrf": rrf,
    "minmax": _score_fusion(_minmax),
    "zscore": _score_fusion(_z),
    "dbsf": _score_fusion(_dbsf),
    "gap": gap_weighted,
    "mixed": shipped,
}


def mrr(ranked_chunks: list[int], doc_of: dict[str, str], want: str) -> float:
    docs = list(dict.fromkeys(doc_of[str(c)] for c in ranked_chunks if str(c) in doc_of))[:10]
    return 1.0 / (docs.index(want) + 1) if want in docs else 0.0


def score(
    fuse: Callable[..., list[int]] | None,
    side: str,
    w: float,
    idx: list[int],
    queries: list[Query],
    data: dict[str, Any],
) -> float:
    out = []
    for i in idx:
        kw, vec = data["keyword"][i], data["vector"][i]
        ranked = [c for c, _ in (kw if side == "keyword" else vec)] if fuse is None else fuse(kw, vec, w)
        out.append(mrr(ranked, data["doc_of"], queries[i].doc_id))
    return statistics.fmean(out) if out else math.nan


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--large", action="store_true", help="the large set (about 4,500 pages of 25 Debian packages)")
    args = parser.parse_args()
    try:
        queries, data = rankings(args.large, lambda line: print(line, flush=True))
    except CorpusMissing as exc:
        raise SystemExit(str(exc)) from None
    from tether.knowledge.base import DEFAULT_ALPHA, HYBRID_ALPHA

    tune = [i for i, q in enumerate(queries) if tuning(q)]
    groups: dict[str, list[int]] = {"tuning": tune}
    held = [i for i, q in enumerate(queries) if not tuning(q)]
    groups["held out, all"] = held
    for kind in ("description", "name"):
        groups[f"held out, {kind}"] = [i for i in held if queries[i].kind == kind]
    for package in sorted({q.package for q in queries} - set(TUNING_PACKAGES)):
        for kind in ("description", "name"):
            groups[f"held out, {package} {kind}"] = [
                i for i in held if queries[i].package == package and queries[i].kind == kind
            ]
    hard = sorted(held, key=lambda i: queries[i].doc_id)[:300]
    groups["held out, first 300 by page"] = hard

    # Each fusion's weight, tuned on the tuning queries only.
    weights = [round(0.05 * i, 2) for i in range(21)]
    chosen = {"rrf (before)": ("rrf", DEFAULT_ALPHA), "tether hybrid": ("mixed", HYBRID_ALPHA)}
    for name, fuse in FUSIONS.items():
        best = max(weights, key=lambda w: score(fuse, "", w, tune, queries, data))
        chosen[f"{name} (w={best})"] = (name, best)

    results: dict[str, Any] = {"commit": tether_commit(), "set": "large" if args.large else "default", "groups": {}}
    header = f"{'queries':38} {'n':>5} {'keyword':>8} {'vector':>8} " + " ".join(f"{c:>17}" for c in chosen)
    print(header)
    for label, idx in groups.items():
        if not idx:
            continue
        row = {
            "n": len(idx),
            "keyword": score(None, "keyword", 0, idx, queries, data),
            "vector": score(None, "vector", 0, idx, queries, data),
        }
        for col, (name, w) in chosen.items():
            row[col] = score(FUSIONS[name], "", w, idx, queries, data)
        results["groups"][label] = {k: round(v, 4) if isinstance(v, float) else v for k, v in row.items()}
        better_half = max(row["keyword"], row["vector"])
        cells = " ".join(f"{row[c]:>16.3f}{'' if row[c] >= better_half - 1e-9 else '<'}" for c in chosen)
        print(f"{label:38} {len(idx):>5} {row['keyword']:>8.3f} {row['vector']:>8.3f} {cells}")
    print("\n'<': below the better of keyword and vector on that set")
    write_results(f"kb_fusion{'_large' if args.large else ''}", results)


if __name__ == "__main__":
    main()
