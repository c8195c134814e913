"""Embedders: text in, unit vectors out. One small protocol, three kinds.

* :class:`OpenAIEmbedder` — any OpenAI-compatible ``/v1/embeddings`` endpoint;
* :class:`HashingEmbedder` — a bag of hashed words and character trigrams; no model, no weights,
  deterministic: for tests, and as a floor in the benchmark;
* the local default, :func:`default_embedder` (see its description for why this one).

Every embedder has a ``name`` that is saved with a knowledge base: a base built with one embedder
refuses queries embedded by another (their vectors do not share a space).
"""

from __future__ import annotations

import hashlib
import os
import re
from collections.abc import Sequence
from typing import Any, Protocol

from tether.errors import ConfigError, ProviderError

__all__ = ["Embedder", "HashingEmbedder", "OpenAIEmbedder", "default_embedder", "make_embedder", "normalise"]


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
            grams = [w[i:i + 3] for w in words for i in range(max(1, len(w) - 2))]
            for token in (*words, *grams):
                h = int.from_bytes(hashlib.blake2b(token.encode(), digest_size=8).digest(), "little")
                out[row, h % self.dim] += 1.0 if (h >> 63) else -1.0
        return normalise(out)


class OpenAIEmbedder:
    """``POST {base_url}/embeddings`` with ``{"model": ..., "input": [...]}``, in batches."""

    def __init__(self, model: str, *, base_url: str | None = None, api_key: str | None = None,
                 batch: int = 128, timeout_s: float = 60.0) -> None:
        self.model = model
        self.base_url = (base_url or os.environ.get("OPENAI_BASE_URL") or "https://api.openai.com/v1").rstrip("/")
        self.api_key = api_key if api_key is not None else os.environ.get("OPENAI_API_KEY")
        self.batch = batch
        self.timeout_s = timeout_s
        self.name = f"openai/{model}"

    def embed(self, texts: Sequence[str]) -> Any:
        import httpx

        headers = {"Authorization": f"Bearer {self.api_key}"} if self.api_key else {}
        rows: list[list[float]] = []
        with httpx.Client(timeout=self.timeout_s) as client:
            for i in range(0, len(texts), self.batch):
                part = list(texts[i:i + self.batch])
                try:
                    response = client.post(f"{self.base_url}/embeddings", headers=headers,
                                           json={"model": self.model, "input": part})
                except httpx.HTTPError as exc:
                    raise ProviderError(f"embeddings at {self.base_url}: {type(exc).__name__}: {exc}") from exc
                if response.status_code != 200:
                    raise ProviderError(f"embeddings at {self.base_url} answered {response.status_code}: "
                                        f"{response.text[:300]}")
                try:
                    data = sorted(response.json()["data"], key=lambda d: d["index"])
                    rows.extend(d["embedding"] for d in data)
                except (ValueError, KeyError, TypeError) as exc:
                    raise ProviderError(f"embeddings at {self.base_url}: not an embeddings response "
                                        f"({response.text[:200]!r})") from exc
                if len(rows) != i + len(part):
                    raise ProviderError(f"embeddings at {self.base_url}: {len(part)} texts sent, "
                                        f"{len(rows) - i} vectors back")
        return normalise(rows)


def default_embedder() -> Embedder:
    """The offline local embedder (see the module's description)."""
    raise ConfigError("no local embedder is installed")


def make_embedder(spec: str | None, *, base_url: str | None = None, api_key: str | None = None) -> Embedder | None:
    """An embedder from its name as a base records it: ``local`` (or ``local/...``), ``none``,
    ``hashing/DIM``, ``openai/MODEL`` (``base_url``/``api_key``, else the OpenAI environment)."""
    if spec in (None, "", "none"):
        return None
    if spec == "local" or spec.startswith("local/"):
        return default_embedder()
    kind, _, rest = spec.partition("/")
    if kind == "hashing":
        return HashingEmbedder(int(rest or 256))
    if kind == "openai" and rest:
        return OpenAIEmbedder(rest, base_url=base_url, api_key=api_key)
    raise ConfigError(f"unknown embedder {spec!r}: use local, none, openai/MODEL or hashing/DIM")
