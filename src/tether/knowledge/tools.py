"""The knowledge base as tools an agent calls: ``search_kb``, ``lookup_exact``, ``entity_chunks``.

Every result cites ``document:start-end`` (the lines it came from) and the whole answer fits
``max_chars``; the entities the results mention are listed so the model can follow one with
``entity_chunks`` instead of searching again.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any, ClassVar

from tether.events import Retrieval, TraceOnly
from tether.harness.extension import Extension
from tether.knowledge.base import KnowledgeBase, SearchResult, shown_entities, withhold_secrets
from tether.tools.base import ToolContext, ToolResult, _in_thread

__all__ = ["KnowledgeTools", "render"]

# A line of a document that reads as a result's label ("[2] valves.md:6-14"): shown escaped, so a
# document cannot forge a result, with a citation the model would trust, inside its own text.
_LABEL = re.compile(r"^(?=\[\d+\] )", re.M)
# What breaks a line, or is unseen, in a label (a file name may hold a line break): escaped, so a
# name cannot start a result of its own.
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029]")
MAX_HEADING = 120  # of a result's heading path shown in its label
MAX_QUERY = 200  # of the query repeated at the head of an answer


def render(result: SearchResult, max_chars: int, entities: Sequence[str] = ()) -> str:
    """The results as the model reads them, never longer than ``max_chars``: whole results only
    (each shortened if need be, the count says how many are shown), and the closing lines (the
    entities, how to cite) always there."""
    if not result.hits:
        return f"No results for {_quoted(result.query)} ({result.mode}). {result.note}".strip()[:max_chars]
    # as the label has it: a minified page's is document:line:column, which "start-end" would misname
    tail = "Cite what you use as its label does (document:start-end)."
    if entities:
        shown, names = [], ""
        for e in entities[:15]:
            if len(names) + len(e) + 2 > max(0, max_chars // 4):
                break
            shown.append(e)
            names = ", ".join(shown)
        if shown:
            names = _CONTROL.sub(_escape, names)
            tail = f"Entities in these results: {names}. To follow one, call entity_chunks with its name. " + tail
    total = len(result.hits)
    blocks: list[str] = []
    shortened = 0
    for n, hit in enumerate(result.hits, 1):
        head = _head(result, n, total)
        used = len(head) + 3 + sum(len(b) + 2 for b in blocks) + len(tail) + 80
        room = max_chars - used
        heading = hit.chunk.heading
        if len(heading) > MAX_HEADING:  # a heading of thousands of characters hid every result
            heading = "…" + heading[-(MAX_HEADING - 1) :].lstrip()
        where = f" ({heading})" if heading else ""
        label = _CONTROL.sub(_escape, f"[{n}] {hit.citation}{where}") + "\n"
        if room < len(label) + 60:
            break  # not even a shortened result fits: stop at whole results
        # a base built before credentials were withheld at ingest still holds them: never shown
        text = _LABEL.sub(r"\\", withhold_secrets(hit.chunk.text)[0])
        if len(label) + len(text) > room:
            text = text[: room - len(label) - 2].rstrip() + " …"
            shortened += 1
        blocks.append(label + text)
    head = _head(result, len(blocks), total)
    note = (
        (
            f"\n({shortened} result{'s were' if shortened != 1 else ' was'} shortened to fit; "
            "search more narrowly for more.)"
        )
        if shortened
        else ""
    )
    out = f"{head}:\n\n" + "\n\n".join(blocks) + note + "\n" + tail
    return out if len(out) <= max_chars else out[: max_chars - 1] + "…"


def _escape(match: re.Match[str]) -> str:
    return f"\\x{ord(match.group()):02x}" if ord(match.group()) < 0x100 else f"\\u{ord(match.group()):04x}"


def _head(result: SearchResult, shown: int, total: int) -> str:
    count = f"{total} result{'s' if total != 1 else ''}" if shown == total else f"{shown} of {total} results shown"
    return f"{count} for {_quoted(result.query)} ({result.mode})" + (f"; {result.note}" if result.note else "")


def _quoted(query: str) -> str:
    """The query as the answer repeats it: a long one (a customer's message pasted in whole) took
    the room of every result and of the closing lines."""
    return repr(query if len(query) <= MAX_QUERY else query[: MAX_QUERY - 1] + "…")


class _KbTool:
    name: str
    read_only = True
    needs_approval = False

    def __init__(self, owner: KnowledgeTools) -> None:
        self.owner = owner

    async def execute(self, input: dict[str, Any], ctx: ToolContext) -> ToolResult | str:
        answer: tuple[SearchResult, str] = await _in_thread(self._answer, {"args": input})  # a Stop leaves it behind
        result, text = answer
        # The trace (the tool's span) records what was retrieved: where each hit is from, its score.
        hits = tuple(
            {
                "chunk_id": h.chunk.id,
                "document": h.chunk.document,
                "start_line": h.chunk.start_line,
                "end_line": h.chunk.end_line,
                "score": round(h.score, 6),
            }
            for h in result.hits
        )
        ctx.emit(TraceOnly(Retrieval(ctx.run_id, ctx.call_id, self.name, result.mode, hits)))
        return text

    def _answer(self, args: dict[str, Any]) -> tuple[SearchResult, str]:
        result = self.search(args)
        return result, render(result, self.owner.max_chars, self.owner.entities_of(result))

    def run(self, args: dict[str, Any]) -> str:
        return self._answer(args)[1]

    def search(self, args: dict[str, Any]) -> SearchResult:
        raise NotImplementedError


class _Search(_KbTool):
    input_schema: ClassVar[dict[str, Any]] = {
        "type": "object",
        "properties": {
            "query": {"type": "string", "description": "what to look for, in words"},
            "k": {"type": "integer", "minimum": 1, "maximum": 20, "description": "how many results (default 6)"},
            "filter": {
                "type": "object",
                "additionalProperties": {"type": "string"},
                "description": 'only documents whose metadata has these values, e.g. {"family": "valves"}',
            },
        },
        "required": ["query"],
        "additionalProperties": False,
    }

    def __init__(self, owner: KnowledgeTools, suffix: str) -> None:
        super().__init__(owner)
        self.name = f"search_kb{suffix}"
        self.description = (
            f"Search the knowledge base {owner.kb.name!r} (documents, manuals, notes) by meaning and "
            "keywords together. Results cite document:start-end and list the entities they mention. "
            "Identifiers in the query (part numbers, SKUs, error codes, versions) are matched exactly: "
            "passages that contain one come first. When the question is about one identifier and "
            "nothing else (what is FVAM-2050-B, error E1234), call lookup_exact with it instead: it "
            "returns only passages with that exact token, never a near twin."
        )

    def search(self, args: dict[str, Any]) -> SearchResult:
        o = self.owner
        return o.kb.search(args["query"], mode=o.mode, k=int(args.get("k") or o.k), filters=args.get("filter"))


class _Exact(_KbTool):
    input_schema: ClassVar[dict[str, Any]] = {
        "type": "object",
        "properties": {"identifier": {"type": "string", "description": "the exact identifier, e.g. FVAM-2050-B"}},
        "required": ["identifier"],
        "additionalProperties": False,
    }

    def __init__(self, owner: KnowledgeTools, suffix: str) -> None:
        super().__init__(owner)
        self.name = f"lookup_exact{suffix}"
        self.description = (
            "Find the passages about one exact identifier (a part number, a code, a model name) in "
            f"the knowledge base {owner.kb.name!r}: only passages containing exactly that token are "
            "returned, never a near twin (FVAM-2050-C for FVAM-2050-B)."
        )

    def search(self, args: dict[str, Any]) -> SearchResult:
        return self.owner.kb.search(args["identifier"], mode="exact", k=self.owner.k)


class _Entity(_KbTool):
    input_schema: ClassVar[dict[str, Any]] = {
        "type": "object",
        "properties": {"entity": {"type": "string", "description": "an entity named in earlier results"}},
        "required": ["entity"],
        "additionalProperties": False,
    }

    def __init__(self, owner: KnowledgeTools, suffix: str) -> None:
        super().__init__(owner)
        self.name = f"entity_chunks{suffix}"
        self.description = (
            "The passages linked to an entity (an identifier, a defined term, a heading) named in "
            f"earlier results from the knowledge base {owner.kb.name!r}: follow a connection "
            "between documents instead of searching again."
        )

    def search(self, args: dict[str, Any]) -> SearchResult:
        return self.owner.kb.entity_chunks(args["entity"], k=self.owner.k)


class KnowledgeTools(Extension):
    """A knowledge base given to an agent: ``Agent(extensions=[KnowledgeTools(kb)])``."""

    def __init__(
        self, kb: KnowledgeBase, *, k: int = 6, max_chars: int = 6000, mode: str = "hybrid", suffix: str = ""
    ) -> None:
        self.kb = kb
        self.k = k
        self.max_chars = max_chars
        self.mode = mode
        self.name = f"knowledge:{kb.name}"
        self._tools = (_Search(self, suffix), _Exact(self, suffix), _Entity(self, suffix))

    def tools(self) -> Sequence[Any]:
        return self._tools

    def prompt_block(self) -> str:
        stats = self.kb.stats()
        names = ", ".join(t.name for t in self._tools)
        return (
            f"# Knowledge base {self.kb.name!r}\n{stats['documents']} documents are searchable with {names}. "
            "Answer from them when the question is about their subject, and cite each fact as its "
            "result's label does (document:start-end). Use lookup_exact for identifiers; follow an entity with "
            "entity_chunks rather than searching again with reworded queries."
        )

    def entities_of(self, result: SearchResult) -> list[str]:
        if result.entities:
            return result.entities
        mentioned = self.kb.store.entities_of(h.chunk.id for h in result.hits)
        ids = [e for h in result.hits for e in mentioned.get(h.chunk.id, [])]
        names = self.kb.store.entity_names(ids)
        return shown_entities(dict.fromkeys(names[e] for e in ids if e in names))
