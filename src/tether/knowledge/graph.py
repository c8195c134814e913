"""The knowledge graph: which entities each chunk mentions, and which entities go together.

An :class:`Extractor` looks at a document's chunks when it is ingested and names entities and
relations. The offline default, :class:`RuleExtractor`, finds:

* identifiers: part numbers and codes such as ``FVAM-2050-B``, ``SK-77``, ``RS485``, ``ISO 9001``;
* defined terms: ``**bold**`` terms and Markdown headings (a heading is mentioned by every chunk
  under it);
* metadata values named in ``fields`` (``item_id``, ``family``), mentioned by every chunk of the
  document;

and relates entities mentioned in the same chunk (weight 1 per chunk) and each heading to the
entities under it (``section``, weight 0.5). A model-based extractor (one that asks a model for
entities and relations through a JSON schema) fits the same protocol.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from itertools import combinations
from typing import Any, Protocol

from tether.knowledge.chunking import Chunk

__all__ = ["Extraction", "Extractor", "RuleExtractor"]


@dataclass
class Extraction:
    # name → (kind, indexes of the chunks that mention it)
    entities: dict[str, tuple[str, set[int]]] = field(default_factory=dict)
    # (name, name, kind, weight)
    relations: list[tuple[str, str, str, float]] = field(default_factory=list)

    def mention(self, name: str, kind: str, chunk: int) -> None:
        name = name.strip()
        if not name:
            return
        key = name.casefold()
        for known in self.entities:
            if known.casefold() == key:
                name = known
                break
        self.entities.setdefault(name, (kind, set()))[1].add(chunk)


class Extractor(Protocol):
    def extract(self, chunks: Sequence[Chunk], meta: dict[str, Any]) -> Extraction: ...


_IDENT = re.compile(r"(?<![\w.-])(?=[\w-]*\d)(?=[\w-]*[A-Za-z])[A-Za-z0-9]+(?:[-_/][A-Za-z0-9]+)+(?![\w-])"
                    r"|(?<![\w-])(?=\w*\d)[A-Z][A-Z0-9]*\d[A-Z0-9]*(?![\w-])"
                    r"|\b(?:ISO|IEC|EN|DIN|IEEE|RFC|ASTM|UL|IP)\s?\d{2,6}(?:-\d+)*\b")
_BOLD = re.compile(r"\*\*([^*\n]{2,60})\*\*|__([^_\n]{2,60})__")
# versions (1.2.3, v2, 2.0.0-rc1, 1.4.2-beta), measures (10mm), x2
_NOT_IDENT = re.compile(r"^(?:v?\d+(?:[._-]\d+)*[a-z]?(?:-(?:alpha|beta|rc|pre|dev|post)\.?\d*)?"
                        r"|\d+[a-z]{1,3}|[a-z]\d)$", re.I)


class RuleExtractor:
    """Identifiers, bold terms, headings and chosen metadata fields (see the module)."""

    def __init__(self, fields: Sequence[str] = ("item_id", "family"), max_per_chunk: int = 30) -> None:
        self.fields = tuple(fields)
        self.max_per_chunk = max_per_chunk

    def extract(self, chunks: Sequence[Chunk], meta: dict[str, Any]) -> Extraction:
        out = Extraction()
        for i, chunk in enumerate(chunks):
            found: dict[str, str] = {}
            for m in _IDENT.finditer(chunk.text):
                token = m.group(0)
                if not _NOT_IDENT.match(token) and len(token) >= 3:
                    found.setdefault(token, "identifier")
            for m in _BOLD.finditer(chunk.text):
                found.setdefault((m.group(1) or m.group(2)).strip(), "term")
            for name in self.fields:
                value = meta.get(name)
                if isinstance(value, str | int) and str(value).strip():
                    found.setdefault(str(value), name)
            names = list(found)[: self.max_per_chunk]
            for name in names:
                out.mention(name, found[name], i)
            for a, b in combinations(sorted(set(names), key=str.casefold), 2):
                if a.casefold() != b.casefold():
                    out.relations.append((a, b, "co_mention", 1.0))
            if chunk.heading:
                section = chunk.heading.split(" > ")[-1]
                out.mention(section, "heading", i)
                out.relations += [(section, n, "section", 0.5) for n in names if n.casefold() != section.casefold()]
        return out
