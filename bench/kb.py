"""The knowledge base measured: retrieval quality, ingest speed, query latency.

Quality: the man-page set of ``bench/_kb_corpus.py`` (906 Linux man pages that Debian installs,
one query per page: its own NAME line, which is never indexed; known-item search). For each
embedder, recall@10 and MRR@10 at the document level (a document ranks where its best chunk
does) for keyword, vector, hybrid and hierarchical search. Ingest: chunks per second with and
without embeddings. Latency: p50/p95 per mode over 200 queries, at about 10k and 100k chunks
(the corpus repeated, each copy a new document, so the index really holds that many chunks);
each query is embedded afresh inside the timed search, and the embedding alone is reported too
(``embed``). The machine's load average is recorded at the start and the end.

    python bench/kb.py [--quick] [--embedders local,hashing,wordllama] [--sizes 10000,50000,100000]

``local`` is the default embedder (all-MiniLM-L6-v2 in int8 ONNX: also the quality reference the
targets name); ``hashing`` a floor with no model; ``wordllama`` the fast static candidate, measured
when ``pip install wordllama`` has been run (skipped with the reason otherwise).
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from bench._kb_corpus import CorpusMissing, Doc, Query, build
from bench._results import tether_commit, write_results


def make(spec: str) -> Any:
    from tether.knowledge import make_embedder

    if spec == "wordllama":
        return _wordllama()
    return make_embedder(spec)


def _wordllama() -> Any:
    """WordLlama's static embeddings (``pip install wordllama``): the fast candidate measured
    against the default; its weights are inside its wheel."""
    import wordllama  # type: ignore[import-not-found]

    from tether.knowledge.embed import normalise

    model = wordllama.WordLlama.load(cache_dir=Path(wordllama.__file__).parent, disable_download=True)

    class WordLlama:
        name = "candidate/wordllama-l2-256"

        def embed(self, texts: Any) -> Any:
            return normalise(model.embed(list(texts), norm=True, batch_size=64))

    return WordLlama()


class Cached:
    """The same embedder, remembering each chunk's vector while ``ingesting``: the copies that
    take the latency table to 100k chunks repeat the corpus's texts, and are embedded once.
    Queries are never remembered: every measured query is embedded afresh, as a real one is."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.name = inner.name
        self.memo: dict[str, Any] = {}
        self.ingesting = False

    def embed(self, texts: Any) -> Any:
        import numpy as np

        if not self.ingesting:
            return self.inner.embed(texts)
        missing = [t for t in dict.fromkeys(texts) if t not in self.memo]
        if missing:
            for t, v in zip(missing, self.inner.embed(missing), strict=True):
                self.memo[t] = v
        return np.stack([self.memo[t] for t in texts])


def ingest(kb: Any, docs: list[Doc], suffix: str = "") -> tuple[int, float]:
    if isinstance(kb.embedder, Cached):
        kb.embedder.ingesting = True
    try:
        t = time.perf_counter()
        for d in docs:
            kb.add_text(d.doc_id + suffix, d.text, title=d.title, markdown=False)
        elapsed = time.perf_counter() - t
    finally:
        if isinstance(kb.embedder, Cached):
            kb.embedder.ingesting = False
    return kb.stats()["chunks"], elapsed


def quality(kb: Any, queries: list[Query], mode: str) -> dict[str, Any]:
    """MRR@10 and recall@10 over all the queries, and per kind of query (description, name)."""
    out: dict[str, Any] = _quality(kb, queries, mode)
    for kind in sorted({q.kind for q in queries}):
        out[kind] = _quality(kb, [q for q in queries if q.kind == kind], mode)
    return out


def _quality(kb: Any, queries: list[Query], mode: str) -> dict[str, float]:
    rr, hits = [], 0
    for q in queries:
        result = kb.search(q.text, mode=mode, k=40)
        ranked = list(dict.fromkeys(h.chunk.document for h in result.hits))[:10]
        if q.doc_id in ranked:
            hits += 1
            rr.append(1.0 / (ranked.index(q.doc_id) + 1))
        else:
            rr.append(0.0)
    return {"mrr10": round(statistics.fmean(rr), 4), "recall10": round(hits / len(queries), 4)}


def latency(kb: Any, queries: list[Query], mode: str, n: int = 200) -> dict[str, float]:
    """p50/p95 of whole searches, each query embedded afresh (the embedder remembers none)."""
    sample = random.Random(7).sample(queries, min(n, len(queries)))
    kb.search(sample[0].text, mode=mode, k=10)  # the vector matrix is loaded once
    times = []
    for q in sample:
        t = time.perf_counter()
        kb.search(q.text, mode=mode, k=10)
        times.append((time.perf_counter() - t) * 1000)
    return _percentiles(times)


def embed_latency(embedder: Any, queries: list[Query], n: int = 200) -> dict[str, float]:
    """The query's embedding alone, the part of a vector or hybrid search that no index size changes."""
    sample = random.Random(7).sample(queries, min(n, len(queries)))
    times = []
    for q in sample:
        t = time.perf_counter()
        embedder.embed([q.text])
        times.append((time.perf_counter() - t) * 1000)
    return _percentiles(times)


def _percentiles(times: list[float]) -> dict[str, float]:
    times.sort()
    return {"p50_ms": round(times[len(times) // 2], 2), "p95_ms": round(times[int(len(times) * 0.95)], 2)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="200 pages, sizes 10k only (to results/kb_quick.json)")
    parser.add_argument("--embedders", default="local,hashing,wordllama")
    parser.add_argument("--sizes", default="10000,50000,100000", help="chunk counts for the latency table")
    parser.add_argument("--large", action="store_true", help="the large set (about 4,500 pages of 25 Debian packages)")
    parser.add_argument(
        "--incremental-only",
        action="store_true",
        help="only the corpus as files: ingest, re-adding, one file changed (its re-embedded chunks counted "
        "with hashing/256, which embeds what the local embedder would, in seconds instead of minutes)",
    )
    args = parser.parse_args()

    from tether.knowledge import KnowledgeBase

    try:
        docs, queries = build(max_pages=200 if args.quick else None, large=args.large)
    except CorpusMissing as exc:
        raise SystemExit(str(exc)) from None
    print(f"corpus: {len(docs)} man pages, {len(queries)} queries (tether {tether_commit()})")
    if args.incremental_only:
        counted = incremental(docs, make("hashing/256"), Path(tempfile.mkdtemp(prefix="tether-kb-bench-")))
        print(f"incremental (files on disk): {counted}")
        write_results(
            "kb_incremental" + ("_large" if args.large else ""),
            {"commit": tether_commit(), "docs": len(docs), "incremental": counted},
        )
        return
    results: dict[str, Any] = {
        "commit": tether_commit(),
        "docs": len(docs),
        "queries": len(queries),
        "quality": {},
        "ingest": {},
        "latency": {},
        # other work on the machine slows every figure: the load says how much
        "load_average_at_start": [round(x, 2) for x in os.getloadavg()],
    }
    tmp = Path(tempfile.mkdtemp(prefix="tether-kb-bench-"))

    # Keyword only: ingest without embeddings, and the keyword baseline.
    kb = KnowledgeBase.open(tmp / "none.db")
    chunks, secs = ingest(kb, docs)
    results["ingest"]["none"] = {"chunks": chunks, "chunks_per_s": round(chunks / secs, 1)}
    results["quality"]["keyword"] = quality(kb, queries, "keyword")
    print(
        f"\n{'embedder':10} {'ingest chunks/s':>16}   "
        + "   ".join(f"{m:>22}" for m in ("keyword", "vector", "hybrid", "hierarchical"))
    )
    kw = results["quality"]["keyword"]
    print(f"{'none':10} {chunks / secs:16.0f}   {_fmt(kw):>22}")

    made: dict[str, Cached] = {}
    for spec in [s for s in args.embedders.split(",") if s]:
        try:
            embedder = made[spec] = Cached(make(spec))
        except Exception as exc:  # a reference that is not installed is reported, not fatal
            print(f"{spec:10} skipped: {type(exc).__name__}: {exc}")
            results["quality"][spec] = {"skipped": str(exc)}
            continue
        kb = KnowledgeBase.open(tmp / f"{spec.replace('/', '_')}.db", embedder=embedder)
        chunks, secs = ingest(kb, docs)
        results["ingest"][spec] = {"chunks": chunks, "chunks_per_s": round(chunks / secs, 1)}
        row = {mode: quality(kb, queries, mode) for mode in ("vector", "hybrid", "hierarchical")}
        results["quality"][spec] = row
        print(
            f"{spec:10} {chunks / secs:16.0f}   {_fmt(kw):>22}   "
            + "   ".join(f"{_fmt(row[m]):>22}" for m in ("vector", "hybrid", "hierarchical"))
        )

    results["incremental"] = incremental(docs, made.get("local") or next(iter(made.values()), None), tmp)
    print(f"\nincremental (files on disk): {results['incremental']}")

    # Latency at scale, with the default embedder: the corpus copied until it holds N chunks.
    spec = next((s for s in args.embedders.split(",") if s and "skipped" not in results["quality"].get(s, {})), None)
    sizes = [10000] if args.quick else [int(s) for s in args.sizes.split(",")]
    if spec is not None:
        kb = KnowledgeBase.open(tmp / "scale.db", embedder=made[spec])
        copies = 0
        print(f"\nlatency ({spec}), 200 queries, k=10:")
        print(
            f"{'chunks':>8} "
            + " ".join(
                f"{m + ' p50/p95 ms':>24}" for m in ("embed", "keyword", "vector", "hybrid", "exact", "hierarchical")
            )
        )
        for size in sizes:
            while kb.stats()["chunks"] < size:
                ingest(kb, docs, suffix=f"#{copies}" if copies else "")
                copies += 1
            n = kb.stats()["chunks"]
            row = {"embed": embed_latency(made[spec], queries)}  # the query's embedding alone
            for mode in ("keyword", "vector", "hybrid", "exact", "hierarchical"):
                qs = [Query(q.doc_id.split(".")[0], q.doc_id) for q in queries] if mode == "exact" else queries
                row[mode] = latency(kb, qs, mode)
            results["latency"][str(n)] = row
            print(f"{n:>8} " + " ".join(f"{row[m]['p50_ms']:>14.1f} /{row[m]['p95_ms']:>7.1f}" for m in row))
    results["load_average_at_end"] = [round(x, 2) for x in os.getloadavg()]
    write_results("kb_quick" if args.quick else "kb", results)  # a quick run never hides the full figures


def incremental(docs: list[Doc], embedder: Any, tmp: Path) -> dict[str, Any]:
    """The corpus as files: keyword-searchable ingest (chunks/s, reading included), re-adding it
    unchanged, after touching every file, and after changing one (how many chunks are embedded again)."""
    from tether.knowledge import KnowledgeBase

    folder = tmp / "pages"
    folder.mkdir()
    for d in docs:
        (folder / f"{d.doc_id}.txt").write_text(d.text)
    kb = KnowledgeBase.open(tmp / "files.db", embedder=embedder)
    t = time.perf_counter()
    kb.add_path(folder, embed=False)
    first = time.perf_counter() - t
    chunks = kb.stats()["chunks"]
    t = time.perf_counter()
    kb.add_path(folder, embed=False)
    again = time.perf_counter() - t
    for f in folder.iterdir():
        os.utime(f)
    t = time.perf_counter()
    kb.add_path(folder, embed=False)
    touched = time.perf_counter() - t
    out = {
        "chunks": chunks,
        "keyword_chunks_per_s": round(chunks / first, 1),
        "re_add_unchanged_s": round(again, 3),
        "re_add_touched_s": round(touched, 3),
    }
    if embedder is not None:
        kb.fill_vectors()
        counted: list[str] = []
        inner = kb.embedder
        kb.embedder = type(
            "Count", (), {"name": inner.name, "embed": lambda self, t: counted.extend(t) or inner.embed(t)}
        )()
        victim = folder / f"{docs[0].doc_id}.txt"
        victim.write_text(victim.read_text() + "\nOne more line at the end.\n")
        kb.add_path(folder)
        out["changed_one_file_chunks"] = kb.store.document(_name(victim)).chunks
        out["changed_one_file_embedded"] = len(counted)
    return out


def _name(path: Path) -> str:
    from tether.knowledge.base import _doc_name

    return _doc_name(path)


def _fmt(q: dict[str, float]) -> str:
    return f"MRR {q['mrr10']:.3f} R@10 {q['recall10']:.3f}"


if __name__ == "__main__":
    main()
