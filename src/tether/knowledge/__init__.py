"""The knowledge base: documents chunked at line boundaries, searched by keywords (FTS5/BM25) and
by meaning (vectors), their scores fused, with exact lookups for identifiers and a
graph of the entities that connect documents. ``Agent(extensions=[KnowledgeTools(kb)])`` gives an
agent ``search_kb``, ``lookup_exact`` and ``entity_chunks``.

Names are loaded on first use (as in :mod:`tether`): ``tether kb search`` imports neither the
graph's rules nor the chunker (only adding documents needs them), nor the agent's tool layer.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from tether._lazy import lazy_exports

_EXPORTS: dict[str, str] = {
    "Hit": "tether.knowledge.base",
    "IngestReport": "tether.knowledge.base",
    "KnowledgeBase": "tether.knowledge.base",
    "SearchResult": "tether.knowledge.base",
    "Chunk": "tether.knowledge.chunking",
    "chunk_text": "tether.knowledge.chunking",
    "Embedder": "tether.knowledge.embed",
    "HashingEmbedder": "tether.knowledge.embed",
    "MiniLMEmbedder": "tether.knowledge.embed",
    "OpenAIEmbedder": "tether.knowledge.embed",
    "default_embedder": "tether.knowledge.embed",
    "make_embedder": "tether.knowledge.embed",
    "Extraction": "tether.knowledge.graph",
    "Extractor": "tether.knowledge.graph",
    "ModelExtractor": "tether.knowledge.graph",
    "RuleExtractor": "tether.knowledge.graph",
    "KnowledgeStore": "tether.knowledge.store",
    "SqliteKnowledgeStore": "tether.knowledge.store",
    "KnowledgeTools": "tether.knowledge.tools",
}

__all__ = [
    "Chunk",
    "Embedder",
    "Extraction",
    "Extractor",
    "HashingEmbedder",
    "Hit",
    "IngestReport",
    "KnowledgeBase",
    "KnowledgeStore",
    "KnowledgeTools",
    "MiniLMEmbedder",
    "ModelExtractor",
    "OpenAIEmbedder",
    "RuleExtractor",
    "SearchResult",
    "SqliteKnowledgeStore",
    "chunk_text",
    "default_embedder",
    "make_embedder",
]

__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS, globals())

if TYPE_CHECKING:
    from tether.knowledge.base import Hit, IngestReport, KnowledgeBase, SearchResult
    from tether.knowledge.chunking import Chunk, chunk_text
    from tether.knowledge.embed import (
        Embedder,
        HashingEmbedder,
        MiniLMEmbedder,
        OpenAIEmbedder,
        default_embedder,
        make_embedder,
    )
    from tether.knowledge.graph import Extraction, Extractor, ModelExtractor, RuleExtractor
    from tether.knowledge.store import KnowledgeStore, SqliteKnowledgeStore
    from tether.knowledge.tools import KnowledgeTools
