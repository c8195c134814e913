"""The knowledge base: documents chunked at line boundaries, searched by keywords (FTS5/BM25) and
by meaning (vectors), their scores fused, with exact lookups for identifiers and a
graph of the entities that connect documents. ``Agent(extensions=[KnowledgeTools(kb)])`` gives an
agent ``search_kb``, ``lookup_exact`` and ``entity_chunks``.
"""

from typing import TYPE_CHECKING, Any

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

if TYPE_CHECKING:
    from tether.knowledge.tools import KnowledgeTools

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


def __getattr__(name: str) -> Any:
    """``KnowledgeTools`` is imported when first asked for: ``tether kb`` searches without the
    agent's tool layer (events, statuses)."""
    if name == "KnowledgeTools":
        from tether.knowledge.tools import KnowledgeTools

        globals()[name] = KnowledgeTools
        return KnowledgeTools
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
