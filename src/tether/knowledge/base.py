"""A knowledge base: ingest documents, search them six ways, walk the graph.

Search modes (``KnowledgeBase.search``):

* ``keyword`` — BM25 (FTS5's, on either store) over the query's words, stop words dropped, OR-ed;
* ``vector`` — cosine similarity against every chunk's vector;
* ``hybrid`` (default) — each list's scores (BM25, cosine) scaled to [0, 1] and its ranks as
  reciprocal rank fusion counts them, half and half, the lists summed with ``alpha`` (0.6) on the
  vector side (see ``_score_fuse``);
* ``exact`` — for identifiers: only chunks that contain the literal token (or whose document's
  metadata names it), alpha 0.15, so ``FVAM-2050-B`` never returns ``FVAM-2050-C``;
* ``neighborhood`` — the best hybrid matches, then the chunks of the entities they mention and of
  those one or two relations away;
* ``hierarchical`` — vector, keyword and the graph walk fused in one ranking.

Results are deduplicated by (document, start line), cut at ``min_score`` and ``k``, and cite
``document:start-end``. With no embedder, vector rankings are skipped and results say so.
"""

from __future__ import annotations

import errno
import hashlib
import io
import itertools
import os
import re
import stat
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from tether.errors import ConfigError, StoreError, UserError
from tether.knowledge.embed import Embedder
from tether.knowledge.exact import identifiers, literal
from tether.knowledge.readers import CANNOT_READ, HTML_SUFFIXES, MAX_PDF_PAGES
from tether.knowledge.store import (
    ANY_DOCUMENT,
    ChunkRow,
    DocumentInfo,
    KnowledgeStore,
    NameTaken,
    SqliteKnowledgeStore,
    tokens,
)

if TYPE_CHECKING:
    from tether.knowledge.chunking import Chunk
    from tether.knowledge.graph import Extractor
    from tether.knowledge.readers import Document

__all__ = ["Hit", "IngestReport", "KnowledgeBase", "Mode", "SearchResult"]

Mode = Literal["hybrid", "keyword", "vector", "exact", "neighborhood", "hierarchical"]
Fused = list[tuple[int, float, dict[str, int]]]  # (chunk id, score, its rank in each ranking), best first
MODES: tuple[str, ...] = ("hybrid", "keyword", "vector", "exact", "neighborhood", "hierarchical")
RRF_K = 60
DEFAULT_ALPHA = 0.55  # reciprocal rank fusion's weight on the vector side (hierarchical, neighborhood)
HYBRID_ALPHA = 0.6  # hybrid search's weight on the vector side (tuned in bench/kb_fusion.py)
EXACT_ALPHA = 0.15
GRAPH_WEIGHT = 0.5
# More results than any search returns: k is cut to it, since a search asks its store for 5 to 20
# times k rows and SQLite's integers end at 2**63 (-k 99999999999999999999 was a traceback).
MAX_K = 1_000_000
# A file modified less than this before an add is read is hashed again by the next add: its file
# system's clock may not have moved when it is written again (see _add_file).
RECENT_NS = 3_000_000_000
# The most chunks holding an identifier's words in order that are read to find those holding the
# identifier itself (twins that share its words come first by BM25: see _holding)
MAX_PHRASE_SCAN = 20_000
# The most entities a graph walk goes on from at each hop, its best: a hub (a family every chunk
# of a catalogue names) reaches every part number, and the next hop read the whole graph
MAX_FRONTIER = 500
NAME_TRIES = 5  # an add's file named again at most this often when other adds take its name meanwhile

_STOP_WORDS = """
a about above after again against all also am an and any are as at be because been before being below between
both but by can could did do does doing down during each few for from further had has have having he her here
hers herself him himself his how i if in into is it its itself just me more most my myself no nor not now of
off on once only or other our ours ourselves out over own same she should so some such than that the their
theirs them themselves then there these they this those through to too under until up very was we were what
when where which while who whom why will with would you your yours yourself yourselves s t don get got use
used using el la los las un una unos unas y o de del al en por para con sin que es son se su sus lo como mas
pero le les des du et ou en au aux ce ces cet cette est sont pour par avec sans qui que dans sur une der die
das den dem des ein eine einer und oder zu im in mit von fur ist sind auf nicht auch als o os as um uma e do
da dos das em no na nos nas por para com sem que
"""
_STOP = frozenset(_STOP_WORDS.split())


def query_terms(text: str) -> list[str]:
    """The words worth searching for: stop words dropped (unless nothing else is left), each once."""
    words = [w for w in tokens(text) if w not in _STOP] or tokens(text)
    return list(dict.fromkeys(words))[:32]


@dataclass(frozen=True)
class Hit:
    chunk: ChunkRow
    score: float
    ranks: dict[str, int] = field(default_factory=dict)  # the chunk's rank in each fused ranking

    @property
    def citation(self) -> str:
        return self.chunk.citation


@dataclass(frozen=True)
class SearchResult:
    query: str
    mode: str
    hits: list[Hit]
    note: str = ""  # e.g. "keyword only: this base has no embedder"
    entities: list[str] = field(default_factory=list)  # for graph modes: the entities walked


@dataclass
class IngestReport:
    added: list[str] = field(default_factory=list)
    updated: list[str] = field(default_factory=list)
    unchanged: list[str] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)  # gone from a directory that was added again, pruned
    gone: list[str] = field(default_factory=list)  # gone from a directory that was added again, kept
    skipped: list[tuple[str, str]] = field(default_factory=list)  # (path, why)
    cut: list[tuple[str, str]] = field(default_factory=list)  # read in part (a huge PDF): (path, why)
    passed_over: dict[str, int] = field(default_factory=dict)  # entries of a folder not read: why -> how many
    withheld: list[tuple[str, int]] = field(default_factory=list)  # documents with credentials masked: (name, how many)
    undecoded: list[tuple[str, int]] = field(default_factory=list)  # text not UTF-8: (name, characters read as U+FFFD)

    def summary(self) -> str:
        parts = [f"{len(self.added)} added", f"{len(self.updated)} updated", f"{len(self.unchanged)} unchanged"]
        if self.removed:
            parts.append(f"{len(self.removed)} removed (no longer on disk)")
        if self.gone:
            parts.append(f"{len(self.gone)} no longer on disk (kept)")
        if self.skipped:
            parts.append(f"{len(self.skipped)} skipped")
        if self.cut:
            parts.append(f"{len(self.cut)} read in part")
        return ", ".join(parts)


class KnowledgeBase:
    """Documents, their chunks, indexes and graph, behind :class:`KnowledgeStore`."""

    def __init__(
        self,
        store: KnowledgeStore,
        *,
        embedder: Embedder | None = None,
        extractor: Extractor | None = None,
        chunk_size: int = 512,
        overlap: int = 64,
        exact_fields: Sequence[str] = ("item_id",),
        name: str = "kb",
        common_fraction: float | None = None,
        max_pdf_pages: int = MAX_PDF_PAGES,
        max_file_bytes: int | None = None,
    ) -> None:
        self.store = store
        self.embedder = embedder
        self._extractor = extractor  # the rule extractor when None, made on the first add
        self.chunk_size = chunk_size
        self.overlap = overlap
        self.exact_fields = tuple(exact_fields)
        self.common_fraction = common_fraction
        self.max_pdf_pages = max_pdf_pages  # a PDF's pages past it are not read, and the add says so
        # the most read of one file (None: 64 MB): a larger one is skipped, a PDF's page content cut there
        self.max_file_bytes = max_file_bytes
        self.name = name
        self.last_withheld = 0  # how many credentials the last add_text masked
        recorded = store.get_meta("embedder")
        self._embedder_claimed = embedder is not None and recorded == embedder.name
        if embedder is not None and recorded not in (None, "", embedder.name):
            raise self._other_embedder(recorded)
        if embedder is not None and not recorded and not store.documents():
            self._claim_embedder()

    def _other_embedder(self, recorded: str) -> ConfigError:
        assert self.embedder is not None
        return ConfigError(
            f"the knowledge base {self.name!r} was built with the embedder {recorded}, not "
            f"{self.embedder.name}: their vectors do not compare. Use {recorded}, or build a new base"
        )

    def _claim_embedder(self) -> None:
        """Record this base's embedder unless one is (another process may be making the base at
        the same moment: the first to record wins, and the other is refused here)."""
        assert self.embedder is not None
        if self._embedder_claimed:
            return
        recorded = self.store.claim_meta("embedder", self.embedder.name)
        if recorded == "":  # an empty record counts as none
            self.store.set_meta("embedder", self.embedder.name)
        elif recorded != self.embedder.name:
            raise self._other_embedder(recorded)
        self._embedder_claimed = True

    @classmethod
    def open(cls, path: Path | str = ":memory:", **kwargs: Any) -> KnowledgeBase:
        return cls(SqliteKnowledgeStore(path), **kwargs)

    def close(self) -> None:
        """Close the store (a SQLite base's connection: its -wal and -shm files go with it)."""
        self.store.close()

    @property
    def extractor(self) -> Extractor:
        """What finds entities and relations in what is added (tether.knowledge.graph's rules
        unless given; imported on first use, so a search does not load them)."""
        if self._extractor is None:
            from tether.knowledge.graph import RuleExtractor

            self._extractor = RuleExtractor()
        return self._extractor

    @extractor.setter
    def extractor(self, extractor: Extractor) -> None:
        self._extractor = extractor

    # -- ingest ------------------------------------------------------------------------------

    def add_text(
        self,
        name: str,
        text: str,
        *,
        title: str = "",
        path: str | None = None,
        meta: dict[str, Any] | None = None,
        markdown: bool | None = None,
        digest: str | None = None,
        embed: bool = True,
    ) -> bool:
        """Index ``text`` as document ``name``; False (and nothing done) when an identical
        version is already indexed with the same metadata. ``digest`` identifies the version
        (default: a hash of the text; a file's is a hash of its bytes). Credentials in the text and
        the title (memory's shapes: API keys, tokens, private keys) are replaced by ``[credential
        withheld: ...]`` before anything is stored.

        The chunks are searchable by keyword once this returns. A new version keeps the vectors
        of its chunks whose text did not change; with ``embed`` the others are embedded before
        it returns, else they wait for :meth:`fill_vectors`."""
        return self._index_text(
            name, text, title=title, path=path, meta=meta, markdown=markdown, digest=digest, embed=embed
        )

    def _index_text(
        self,
        name: str,
        text: str,
        *,
        title: str = "",
        path: str | None = None,
        meta: dict[str, Any] | None = None,
        markdown: bool | None = None,
        digest: str | None = None,
        embed: bool = True,
        replacing: int | None = ANY_DOCUMENT,
        source_lines: Sequence[tuple[int, int, int]] | None = None,
    ) -> bool:
        """:meth:`add_text`; with ``replacing`` (the id of the document the caller found under
        ``name``, None: none), :class:`NameTaken` and nothing written when another holds it now.
        With ``source_lines`` (a converted file's: the file's lines each line of ``text`` came
        from, and the column where it starts), the chunks cite the file's lines, or where two
        would start on one line (a minified page), the line and column each starts at."""
        meta = dict(meta or {})
        digest = digest or hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()
        text, masked = withhold_secrets(text)
        self.last_withheld = masked
        title = withhold_secrets(title)[0] or _title(text, name)  # a PDF's title is its metadata's
        known = self.store.document(name)
        if known is not None and known.hash == digest and known.meta == meta and known.title == title:
            return False
        if markdown is None:
            markdown = name.lower().endswith((".md", ".markdown"))
        from tether.knowledge.chunking import chunk_text  # imported by what adds, not by a search

        chunks = chunk_text(text, size=self.chunk_size, overlap=self.overlap, markdown=markdown)
        ends = [c.end_line for c in chunks]
        if source_lines is not None:
            chunks, ends = _in_source(chunks, source_lines)
        if self.embedder is not None:
            self._claim_embedder()  # before any chunk is written
        kept = self.store.kept_vectors(name) if known is not None and self.embedder is not None else {}
        graph = self.extractor.extract(chunks, meta)
        self.store.replace_document(
            name,
            path=path,
            title=title,
            hash=digest,
            meta=meta,
            chunks=[
                (c.start_line, end, c.heading, c.text, kept.get(c.indexed_text))
                for c, end in zip(chunks, ends, strict=True)
            ],
            entities=[(n, kind, sorted(at)) for n, (kind, at) in graph.entities.items()],
            relations=graph.relations,
            replacing=replacing,
        )
        if self.embedder is not None and embed:
            self.fill_vectors()
        return True

    def add_path(
        self,
        path: Path | str,
        *,
        meta: dict[str, Any] | None = None,
        prune: bool = False,
        progress: Callable[[int, int, str], None] | None = None,
        embed: bool = True,
        hidden: bool = False,
        exclude: Sequence[Path] = (),
    ) -> IngestReport:
        """Ingest a file, or a directory recursively (ignore files honoured; hidden files and
        folders only with ``hidden``; files holding credentials by their names, and the folders in
        ``exclude``, never: the report's ``passed_over`` counts them). Each document is
        named by its path relative to the current directory (absolute when outside it). A file
        whose size and modification time are those recorded is not opened; one whose bytes hash
        as recorded is not parsed again; a file ingested before under another name (from another
        directory) keeps only this one. Documents once ingested from this directory whose files
        are gone are listed in the report's ``gone``, and removed with ``prune``.

        Every file read is searchable by keyword before the next is read; vectors are made after
        them all (with ``embed``), or later by :meth:`fill_vectors`."""
        from tether.knowledge.readers import iter_files

        root = Path(path)
        if not root.exists():
            raise UserError(f"{root} does not exist")
        unlisted: list[tuple[Path, str]] = []
        report = IngestReport()
        files = list(iter_files(root, unlisted, hidden=hidden, exclude=exclude, passed=report.passed_over))
        for where, why in unlisted:
            report.skipped.append((_doc_name(where) + "/", f"cannot list this folder: {why}"))
        # A file is one document whatever folder the add ran from: added from another, its name
        # differed (docs/a.md, a.md) and the earlier copy stayed, returned before the new text
        # once the file changed, and --sync kept it (its file is there).
        named: dict[str, list[str]] = {}
        for info in self.store.documents():
            if info.path:
                named.setdefault(info.path, []).append(info.name)
        folder = root if root.is_dir() else None  # links below it are not followed
        held: list[Path] = []  # the files whose documents stand for them: read, or not readable now
        for n, file in enumerate(files, 1):
            name, known = self._name_for(file)
            if progress is not None:
                progress(n, len(files), name)
            skipped = len(report.skipped)
            name = self._add_file_named(file, name, known, dict(meta or {}), report, folder)
            others = [o for o in named.get(str(file.resolve()), []) if o != name]
            if others and len(report.skipped) == skipped:
                self._forget_names(others, name, report)
            # A file skipped for what it is now (binary, too large, a named pipe) is gone as a
            # document: its earlier text stayed, --sync or not, and searches cited it.
            if len(report.skipped) == skipped or report.skipped[-1][1].startswith(CANNOT_READ):
                held.append(file)
        self._gone(root, held, [where for where, _ in unlisted], prune, report)  # a file named: itself
        if embed:
            self.fill_vectors()
        return report

    def _name_for(self, file: Path) -> tuple[str, DocumentInfo | None]:
        """The document name of ``file`` and the base's record of that name: its path relative to
        the current directory, or its absolute path when that name is another file's that is still
        there. ``cd a && kb add README.md``, then ``cd b && kb add README.md``, replaced a's
        document with b's (reported as updated), and nothing found a's text again. A document whose
        file is gone gives its name up (a folder moved, its files added again from the new place)."""
        from tether.messages import clean_text

        name = _doc_name(file)
        if clean_text(name) != name:  # not UTF-8: no database holds it, and _add_file says so
            return name, None
        known = self.store.document(name)
        if known is None or not known.path or known.path == str(file.resolve()) or not os.path.isfile(known.path):
            return name, known
        absolute = file.absolute().as_posix()
        return absolute, self.store.document(absolute)

    def _add_file_named(
        self,
        file: Path,
        name: str,
        known: DocumentInfo | None,
        meta: dict[str, Any],
        report: IngestReport,
        folder: Path | None,
    ) -> str:
        """:meth:`_add_file`, named again when another add (another process) took the name between
        the look-up and the write: two ``kb add README.md`` run at once from two folders both named
        their file README.md, and the later write replaced the other's document (both said "1
        added"). Returns the name it went under."""
        for _ in range(NAME_TRIES - 1):
            try:
                self._add_file(file, name, known, meta, report, folder)
                return name
            except NameTaken:
                name, known = self._name_for(file)
        self._add_file(file, name, known, meta, report, folder)  # taken again: NameTaken says to add it again
        return name

    def _gone(self, root: Path, files: list[Path], unlisted: list[Path], prune: bool, report: IngestReport) -> None:
        """The documents once read from ``root`` (a folder, or a file named on its own) whose files
        were not found now, or not read for what they hold now: listed as gone, or removed with
        ``prune``. A file in a folder that could not be listed (its permissions, a
        network mount gone) is not known to be gone: it is kept (``--sync`` removed it, where
        rsync --delete does not)."""
        seen = {str(f.resolve()) for f in files}
        base = root.resolve()
        unknown = [folder.resolve() for folder in unlisted]
        for info in self.store.documents():
            if info.path and Path(info.path).is_relative_to(base) and info.path not in seen:
                if prune and not any(Path(info.path).is_relative_to(f) for f in unknown):
                    self.store.remove_document(info.name)  # deleted, or now ignored
                    report.removed.append(info.name)
                else:
                    report.gone.append(info.name)

    def _forget_names(self, others: list[str], name: str, report: IngestReport) -> None:
        """Remove the documents ``others``, earlier names of the file just added as ``name``: the
        chunks of ``name`` whose text they held take their vectors, as a changed file's do."""
        kept: dict[str, bytes] = {}
        if self.embedder is not None:
            for other in others:
                kept |= self.store.kept_vectors(other)
        info = self.store.document(name)
        if kept and info is not None:
            rows = self.store.chunks(self.store.chunk_ids([info.id])).values()
            same = [(r.id, r.indexed_text, kept[r.indexed_text]) for r in rows if r.indexed_text in kept]
            self.store.set_vectors(same)
        for other in others:
            self.store.remove_document(other)
        if name in report.added:
            report.added.remove(name)
            report.updated.append(name)

    def _read_opened(
        self, f: io.BufferedReader, file: Path, name: str, stamp: str, known: DocumentInfo | None, report: IngestReport
    ) -> tuple[Document, str] | None:
        """The document in the open file ``f`` and its version's digest; None when it is not read
        (the report says why), or ``known`` (its record, when the metadata is the same) holds it."""
        from tether.knowledge.readers import Skipped, read_document

        try:
            if not stat.S_ISREG(os.fstat(f.fileno()).st_mode):  # swapped for a named pipe meanwhile
                report.skipped.append((name, "not a regular file (a named pipe, socket or device)"))
                return None
            digest = stamp + hashlib.file_digest(f, hashlib.sha256).hexdigest()  # never held whole
            f.seek(0)
        except OSError as exc:
            report.skipped.append((name, f"{CANNOT_READ}{exc.strerror or exc}"))
            return None
        if known is not None and known.hash.rsplit(":", 1)[-1] == digest.rsplit(":", 1)[-1]:
            # Touched, not changed: not parsed again; the new time is recorded, so the next add
            # does not hash it again.
            self.store.set_document_hash(name, digest)
            report.unchanged.append(name)
            return None
        try:
            doc = read_document(file, max_pdf_pages=self.max_pdf_pages, stream=f, max_bytes=self.max_file_bytes)
        except Skipped as why:
            report.skipped.append((name, str(why)))
            return None
        if doc.cut:
            report.cut.append((name, doc.cut))
        if doc.undecoded > 0:
            report.undecoded.append((name, doc.undecoded))
        return doc, digest

    def _add_file(
        self,
        file: Path,
        name: str,
        known: DocumentInfo | None,
        meta: dict[str, Any],
        report: IngestReport,
        root: Path | None = None,
    ) -> None:
        """Read ``file`` into document ``name``, whose record is ``known`` (None: a new one); with
        ``root``, the folder it was found in, no symbolic link below ``root`` is followed (one may
        be put in a file's place after the folder was listed)."""
        from tether.knowledge.readers import open_below, too_large
        from tether.messages import clean_text

        if clean_text(name) != name or clean_text(str(file)) != str(file):  # not UTF-8: no database holds it
            report.skipped.append((name, "its name is not valid UTF-8: rename it to read it"))
            return
        same_meta = known is not None and known.meta == meta
        try:
            info = file.lstat() if root is not None else file.stat()
            if stat.S_ISLNK(info.st_mode):
                report.skipped.append((name, "a symbolic link (links inside a folder are not followed)"))
                return
            if not stat.S_ISREG(info.st_mode):  # a named pipe would block the read; a device never ends
                report.skipped.append((name, "not a regular file (a named pipe, socket or device)"))
                return
            stamp = f"file:{info.st_size}:{info.st_mtime_ns}:"
            if file.suffix.lower() in HTML_SUFFIXES:
                # read again once by this tether: an earlier one cited the lines of its Markdown, or
                # in a minified page, where chunks share a line, those lines still
                stamp += "lines.columns."
            if same_meta and known is not None and known.hash.startswith(stamp):
                report.unchanged.append(name)  # same size and time: not even opened
                return
            why = too_large(file, info.st_size, self.max_file_bytes)
            if why is not None:
                report.skipped.append((name, why))
                return
            if info.st_mtime_ns > time.time_ns() - RECENT_NS:
                # Written moments ago: written again within the same tick of its file system's
                # clock (whole seconds on HFS+ and network mounts, two on FAT) at the same size,
                # the stamp would not change and the new text was never read. Such a file is
                # hashed again by the next add rather than trusted by its stamp (git's "racy
                # clean" rule).
                stamp = "file:recent:" + stamp.rsplit(":", 1)[1]
            # Hashed and read through one descriptor, opened without following a link below the
            # folder: the file named when it was listed is the one read.
            fd = open_below(root, file) if root is not None else os.open(file, os.O_RDONLY | os.O_NONBLOCK)
            f = os.fdopen(fd, "rb")
        except OSError as exc:
            why = "a symbolic link (links inside a folder are not followed)" if exc.errno == errno.ELOOP else ""
            report.skipped.append((name, why or f"{CANNOT_READ}{exc.strerror or exc}"))
            return
        with f:
            read = self._read_opened(f, file, name, stamp, known if same_meta else None, report)
        if read is None:
            return
        doc, digest = read
        self.last_withheld = 0
        added = self._index_text(
            name,
            doc.text,
            title=doc.title,
            path=str(file.resolve()),
            meta=meta,
            markdown=doc.markdown,
            digest=digest,
            embed=False,
            replacing=None if known is None else known.id,
            source_lines=doc.lines,
        )
        if added:
            (report.updated if known is not None else report.added).append(name)
            if self.last_withheld:
                report.withheld.append((name, self.last_withheld))
        else:
            report.unchanged.append(name)

    def fill_vectors(self, progress: Callable[[int, int], None] | None = None, *, batch: int = 32) -> int:
        """Embed the chunks that have no vector yet, ``batch`` at a time, each batch saved in
        one transaction: stopped at any point (Ctrl-C, a kill), the base is whole, every chunk
        is searchable by keyword, and calling this again goes on where it stopped. ``progress``
        gets (chunks done, chunks to do) after each batch. Returns how many chunks it embedded."""
        if self.embedder is None:
            return 0
        total, done, after = 0, 0, 0
        turned = -1  # how many were done when the cursor last went back to the start
        if progress is not None:
            stats = self.store.stats()
            total = max(0, int(stats["chunks"]) - int(stats["embedded_chunks"]))
            progress(0, total)
        while True:
            rows = self.store.unembedded(batch, after)
            if not rows and after and done > turned:
                # Chunk ids do not grow in the order they are written (SQLite gives a replaced
                # document's chunks the ids it freed; a Postgres transaction may commit after one
                # that took later ids): an add meanwhile may have put chunks behind the cursor.
                turned, after = done, 0
                rows = self.store.unembedded(batch, after)
            if not rows:
                return done
            if any(cid <= after for cid, _ in rows):
                raise self._out_of_order(after)
            # A chunk stored before credentials were withheld holds them: an embeddings endpoint
            # (openai/...) is a way out of the base too.
            matrix = self.embedder.embed([withhold_secrets(text)[0] for _, text in rows])
            vectors = [row.astype("float32").tobytes() for row in matrix]
            done += self.store.set_vectors([(cid, text, v) for (cid, text), v in zip(rows, vectors, strict=True)])
            after = max(cid for cid, _ in rows)
            if progress is not None:
                progress(done, max(total, done))

    def _out_of_order(self, after: int) -> StoreError:
        """A store that gives chunks at or before the one asked to come after is damaged (bytes
        overwritten in a SQLite table, which SQLite's own checks passed): the fill's cursor never
        moved, and kb add and kb fill spun for ever at full speed."""
        return StoreError(
            f"the knowledge base {self.name!r} is damaged: asked for the chunks after {after} without a vector, "
            f"it gave them again. The documents' own files are untouched: drop the base (tether kb drop "
            f"{self.name} --yes) and add them again"
        )

    def remove(self, name: str) -> bool:
        return self.store.remove_document(name)

    def documents(self) -> list[DocumentInfo]:
        """The documents, each title with its credentials withheld (see :meth:`search`)."""
        return [replace(d, title=withhold_secrets(d.title)[0]) for d in self.store.documents()]

    def stats(self) -> dict[str, Any]:
        return self.store.stats()

    # -- search ------------------------------------------------------------------------------

    def search(
        self,
        query: str,
        *,
        mode: str = "hybrid",
        k: int = 8,
        alpha: float | None = None,
        filters: dict[str, str] | None = None,
        min_score: float | None = None,
        hops: int = 2,
    ) -> SearchResult:
        """The best ``k`` chunks for ``query`` in ``mode`` (see the module's docstring). Whatever
        tether stored them, the hits' text and headings have their credentials withheld
        (:func:`withhold_secrets`), and an entity whose name holds one is not listed."""
        from tether.messages import clean_text

        _check_search(query, mode, k, alpha)
        k = min(k, MAX_K)
        # Lone surrogates (undecodable bytes in an argument, "\ud800" in JSON) as U+FFFD: the
        # databases take only UTF-8, and refused the whole search.
        query = clean_text(query)
        allowed = self.store.doc_ids({clean_text(key): clean_text(value) for key, value in (filters or {}).items()})
        depth = max(50, 5 * k)
        can_embed = self._has_vectors()
        if mode == "vector" and not can_embed:
            if self.embedder is None:
                raise UserError(f"the knowledge base {self.name!r} has no vectors (no embedder): use keyword or hybrid")
            # Its embedder is there, the vectors not made yet (--no-vectors, a fill under way or
            # stopped): "no embedder" sent people to rebuild a base that lacked only a fill.
            raise UserError(
                f"the knowledge base {self.name!r} has no vectors yet: tether kb --name {self.name} fill makes "
                "them; keyword and hybrid search work meanwhile"
            )
        note = self._coverage_note() if mode in ("vector", "hybrid", "hierarchical", "neighborhood") else ""
        entities: list[str] = []
        if mode == "exact":
            return self._exact(query, k, alpha, allowed, min_score)
        weights: dict[str, float] = {}
        scored: dict[str, list[tuple[int, float]]] = {}
        a = DEFAULT_ALPHA if alpha is None else alpha
        by_vector = None
        if mode in ("vector", "hybrid", "hierarchical", "neighborhood") and can_embed:
            by_vector = self._vector_meanwhile(query, depth, allowed)
        if mode in ("keyword", "hybrid", "hierarchical", "neighborhood"):
            try:
                scored["keyword"] = self._keyword(query, depth, allowed)
            except BaseException:
                # The vector thread still reads the store: a caller that closes it on this error
                # (kb search does) pulled the connection from under it, a segmentation fault
                if by_vector is not None:
                    wait([by_vector])
                raise
            weights["keyword"] = 1.0 if mode == "keyword" or not can_embed else 1.0 - a
        if by_vector is not None:
            scored["vector"] = by_vector.result()
            weights["vector"] = 1.0 if mode == "vector" else a
        rankings = {source: [cid for cid, _ in ranked] for source, ranked in scored.items()}
        if mode == "hybrid" and len(scored) == 2:
            hybrid = _score_fuse(scored["keyword"], scored["vector"], HYBRID_ALPHA if alpha is None else alpha)
            fused = self._pin(query, hybrid, depth, allowed)
            return SearchResult(query, mode, self._hits(fused, k, min_score), note, entities)
        if mode in ("neighborhood", "hierarchical"):
            seeds = _fuse(rankings, weights)[:5]
            seed_ids = [cid for cid, _, _ in seeds]
            graph_ranking, entities = self._walk(seed_ids, hops, depth, allowed)
            connected = [c for c in graph_ranking if c not in seed_ids]  # the seeds are ranked already
            if mode == "neighborhood":
                rankings, weights = {"seed": seed_ids, "graph": connected}, {"seed": 1.0, "graph": 1.0}
            else:
                rankings["graph"], weights["graph"] = connected, GRAPH_WEIGHT
        fused = self._pin(query, _fuse(rankings, weights), depth, allowed)
        return SearchResult(query, mode, self._hits(fused, k, min_score), note, entities)

    def _coverage_note(self) -> str:
        if self.embedder is None:
            return "keyword only: this knowledge base has no embedder"
        embedded, chunks = self.store.coverage()
        if embedded == 0 and chunks:
            return f"keyword only: no chunk has its vector yet (tether kb --name {self.name} fill makes them)"
        if embedded < chunks:
            return f"vectors cover {embedded} of {chunks} chunks; the rest are searched by keyword only"
        return ""

    def _has_vectors(self) -> bool:
        return self.embedder is not None and self.store.has_vectors()

    def _keyword(self, query: str, depth: int, allowed: set[int] | None) -> list[tuple[int, float]]:
        """BM25 over the query's words. With ``common_fraction`` set, words in more than that
        share of the chunks are left out while rarer ones remain: matching them means scoring
        most of the index. Measured on the man-page set at 100k chunks, 0.1 takes keyword p50
        from 18 to 8 ms and p95 from 46 to 19 ms, and costs 0.04 MRR: off by default."""
        words = query_terms(query)
        if self.common_fraction is not None and len(words) > 1:
            total, counts = self.store.term_counts(words)
            present = [w for w in words if counts.get(w, 0) > 0]
            rare = [w for w in present if counts[w] <= self.common_fraction * total]
            words = rare or sorted(present, key=lambda w: counts[w])[:2]
        return self.store.keyword(words, depth, allowed)

    def _vector(
        self, query: str, depth: int, allowed: set[int] | None, among: set[int] | None = None
    ) -> list[tuple[int, float]]:
        assert self.embedder is not None
        q = self.embedder.embed([query])[0]
        return [(cid, float(sim)) for cid, sim in self.store.nearest(q, depth, allowed, among)]

    def _vector_meanwhile(self, query: str, depth: int, allowed: set[int] | None) -> Future[list[tuple[int, float]]]:
        """The vector ranking, computed in a worker thread while the caller runs the full-text
        query: onnxruntime, numpy and the databases' drivers release the GIL, so a hybrid search
        takes about the longer of the two instead of their sum (see docs/knowledge.md#figures).
        Both stores may be used from two threads at once (SQLite's module is serialized,
        Postgres hands out pooled connections)."""
        global _POOL
        with _POOL_LOCK:
            if _POOL is None:
                _POOL = ThreadPoolExecutor(max_workers=4, thread_name_prefix="tether-kb-vector")
        return _POOL.submit(self._vector, query, depth, allowed)

    def _holding(self, token: str, limit: int, allowed: set[int] | None) -> list[int]:
        """Chunks that hold ``token`` exactly (see :mod:`tether.knowledge.exact`), best BM25 of
        its words as a phrase first, then the chunks of documents filed under it by metadata
        (``exact_fields``), where the text need not spell it."""
        words = tokens(token)
        if not words:
            return []
        pattern = literal(token)
        asked = limit
        while True:
            # A family of twins (SK-77-0001 ... for SK-77) holds the token's words in that order, in
            # shorter chunks: the first ``limit`` phrase matches may all be twins. Ask for more until
            # ``limit`` hold the token, the matches end, or MAX_PHRASE_SCAN were read.
            candidates = [cid for cid, _ in self.store.keyword(words, asked, allowed, phrase=True)]
            rows = self.store.chunks(candidates)
            held = [cid for cid in candidates if cid in rows and pattern.search(rows[cid].indexed_text)]
            if len(held) >= limit or len(candidates) < asked or asked >= MAX_PHRASE_SCAN:
                break
            asked = min(asked * 4, MAX_PHRASE_SCAN)
        by_field: set[int] = set()
        for name in self.exact_fields:
            by_field |= self.store.doc_ids({name: token}) or set()
        if allowed is not None:
            by_field &= allowed
        if by_field:
            held += [cid for cid in self.store.chunk_ids(by_field) if cid not in held]
        return held

    def _exact(
        self, token: str, k: int, alpha: float | None, allowed: set[int] | None, min_score: float | None
    ) -> SearchResult:
        # Quotes and a sentence's punctuation around it are not part of it (a model passes
        # '"FVAM-2050-B"' or 'FVAM-2050-B.'): kept, nothing matched and the answer was "not there".
        token = token.strip().strip(_AROUND).strip() or token.strip()
        strict = self._holding(token, 2000, allowed)
        if not strict:
            return SearchResult(token, "exact", [], f"no chunk contains {token!r} exactly")
        rankings = {"keyword": strict}
        weights = {"keyword": 1.0 - (EXACT_ALPHA if alpha is None else alpha)}
        if self._has_vectors():
            rankings["vector"] = [cid for cid, _ in self._vector(token, len(strict), None, among=set(strict))]
            weights["vector"] = EXACT_ALPHA if alpha is None else alpha
        return SearchResult(token, "exact", self._hits(_fuse(rankings, weights), k, min_score))

    def _pin(self, query: str, fused: Fused, depth: int, allowed: set[int] | None) -> Fused:
        """``fused`` with the chunks that hold the query's identifiers exactly moved to the top
        (those holding more of them first, then in ``fused``'s order), so a near twin never
        outranks the part asked about. A pinned chunk that neither ranking reached joins with
        the score of the ranking's last place, and its place in the exact ranking."""
        held: dict[int, int] = {}
        order: dict[int, int] = {}
        for token in identifiers(query):
            for n, cid in enumerate(self._holding(token, 2 * depth, allowed)):
                held[cid] = held.get(cid, 0) + 1
                order.setdefault(cid, n)
        if not held:
            return fused
        place = {cid: n for n, (cid, _, _) in enumerate(fused)}
        floor = fused[-1][1] if fused else 1.0 / (RRF_K + 1)
        entry = {cid: (cid, score, ranks) for cid, score, ranks in fused}
        pinned = sorted(held, key=lambda c: (-held[c], place.get(c, len(fused)), order[c]))
        top = []
        for n, cid in enumerate(pinned, 1):
            _, score, ranks = entry.get(cid, (cid, floor, {}))
            top.append((cid, score, {**ranks, "exact": n}))
        return top + [e for e in fused if e[0] not in held]

    def _walk(self, seeds: list[int], hops: int, depth: int, allowed: set[int] | None) -> tuple[list[int], list[str]]:
        """Chunks reached from the seeds' entities, one or two relations away, best first."""
        mentioned = self.store.entities_of(seeds)
        score: dict[int, float] = {}
        for rank, cid in enumerate(seeds):
            for eid in mentioned.get(cid, []):
                score[eid] = score.get(eid, 0.0) + 1.0 / (1 + rank)
        frontier = dict(score)
        for hop in range(max(0, hops)):
            reached: dict[int, float] = {}
            for a, b, w in self.store.neighbours(frontier):
                gain = frontier[a] * min(w, 3.0) / 3.0 / (2 ** (hop + 1))
                if b not in score:
                    reached[b] = reached.get(b, 0.0) + gain
            if not reached:
                break
            for eid, s in reached.items():
                score[eid] = score.get(eid, 0.0) + s
            frontier = dict(sorted(reached.items(), key=lambda e: -e[1])[:MAX_FRONTIER])
        best = sorted(score, key=lambda e: -score[e])[:20]
        chunk_ids = self.store.chunks_of_entities(best, depth * 4)
        rows = self.store.chunks(chunk_ids)
        ents = self.store.entities_of(chunk_ids)
        ranked = sorted(
            (c for c in chunk_ids if c in rows and (allowed is None or rows[c].doc_id in allowed)),
            key=lambda c: -sum(score.get(e, 0.0) for e in ents.get(c, [])),
        )
        if allowed is not None:  # named by the documents the filter keeps: not another's parts, people
            seen = {e for c in [*seeds, *ranked[:depth]] for e in (mentioned.get(c) or ents.get(c) or [])}
            best = [e for e in best if e in seen]
        names = self.store.entity_names(best)
        return ranked[:depth], shown_entities(names[e] for e in best if e in names)

    def entity_chunks(self, entity: str, *, k: int = 8) -> SearchResult:
        """The chunks linked to an entity: walk a relation instead of searching again."""
        from tether.messages import clean_text

        entity = clean_text(entity)
        k = min(k, MAX_K)
        found = self.store.entity(entity.strip())
        if found is None:
            return SearchResult(entity, "entity", [], f"no entity named {entity!r} in the knowledge base")
        ids = self.store.chunks_of_entities([found[0]], k)
        return SearchResult(
            entity,
            "entity",
            self._hits([(c, 1.0 / (RRF_K + i + 1), {"entity": i + 1}) for i, c in enumerate(ids)], k, None),
            entities=shown_entities([found[1]]),
        )

    def _hits(self, fused: Fused, k: int, min_score: float | None) -> list[Hit]:
        rows = self.store.chunks(cid for cid, _, _ in fused[: k * 4])
        hits: list[Hit] = []
        seen: set[tuple[int, int, int]] = set()
        for cid, score, ranks in fused:
            row = rows.get(cid)
            if row is None:
                continue
            if min_score is not None and score < min_score:
                continue  # pinned identifiers come first whatever their score: the rest may be higher
            where = (row.doc_id, row.start_line, row.column)
            if where in seen:
                continue  # the same place twice: the better one is already in
            seen.add(where)
            hits.append(Hit(_withheld(row), score, ranks))
            if len(hits) == k:
                break
        return hits


def _check_search(query: str, mode: str, k: int, alpha: float | None) -> None:
    if mode not in MODES:
        raise UserError(f"unknown search mode {mode!r}: use one of {', '.join(MODES)}")
    if not query.strip():
        raise UserError("the query is empty: give the words to search for")
    if alpha is not None and not 0.0 <= alpha <= 1.0:
        raise UserError(f"alpha must be between 0 (keyword only) and 1 (vector only), not {alpha}")
    if k <= 0:
        raise UserError(f"k must be at least 1, not {k}")


_AROUND = "\"'`\u2018\u2019\u201c\u201d\u00ab\u00bb.,;:!?()[]{}<>"  # what surrounds an identifier in a sentence
_POOL: ThreadPoolExecutor | None = None  # made on the first search that embeds, never at import
_POOL_LOCK = threading.Lock()


def _score_fuse(keyword: list[tuple[int, float]], vector: list[tuple[int, float]], alpha: float) -> Fused:
    """Hybrid search's fusion: for each list, half its score (BM25, cosine) scaled to [0, 1] over
    its own results (min-max), half its rank as reciprocal rank fusion counts it (``61 / (60 +
    rank)``, so 1 at the top); the two lists summed with weight ``alpha`` on the vector side. The
    scores say how far apart two results are, the ranks keep one list's odd scale (a single rare
    word's huge BM25) from swamping the other. Chosen over reciprocal rank fusion alone, min-max,
    z-score and distribution-based fusion by held-out MRR@10 (bench/kb_fusion.py;
    docs/knowledge.md#figures)."""
    scores: dict[int, float] = {}
    ranks: dict[int, dict[str, int]] = {}
    for source, ranked, weight in (("keyword", keyword, 1 - alpha), ("vector", vector, alpha)):
        if not ranked:
            continue
        top, low = ranked[0][1], ranked[-1][1]
        span = top - low
        for rank, (cid, score) in enumerate(ranked, 1):
            scaled = (score - low) / span if span > 0 else 1.0
            scores[cid] = scores.get(cid, 0.0) + weight * (0.5 * scaled + 0.5 * (RRF_K + 1) / (RRF_K + rank))
            ranks.setdefault(cid, {})[source] = rank
    return [(cid, scores[cid], ranks[cid]) for cid in sorted(scores, key=lambda c: (-scores[c], c))]


def _fuse(rankings: dict[str, list[int]], weights: dict[str, float]) -> Fused:
    """Weighted reciprocal rank fusion: ``Σ w / (k + rank)``, ranks from 1; best first, ties by
    chunk id so the order is stable."""
    scores: dict[int, float] = {}
    ranks: dict[int, dict[str, int]] = {}
    for source, ranking in rankings.items():
        w = weights.get(source, 1.0)
        for rank, cid in enumerate(ranking, 1):
            scores[cid] = scores.get(cid, 0.0) + w / (RRF_K + rank)
            ranks.setdefault(cid, {})[source] = rank
    return [(cid, scores[cid], ranks[cid]) for cid in sorted(scores, key=lambda c: (-scores[c], c))]


def withhold_secrets(text: str) -> tuple[str, int]:
    """``text`` with each credential in the shapes memory refuses withheld (see
    :func:`tether._secrets.withhold_credentials`), and how many were. A base's chunks are handed to
    any agent that searches it, and through it to its model provider."""
    from tether._secrets import withhold_credentials

    return withhold_credentials(text)


def _withheld(row: ChunkRow) -> ChunkRow:
    """``row`` as it leaves the base: a base built before credentials were withheld at ingest
    (or before a shape was known) still holds them, and every way out (kb search, its JSON, the
    agent's tools, the MCP server) shows the text and heading of a hit."""
    text, n = withhold_secrets(row.text)
    heading, m = withhold_secrets(row.heading)
    return replace(row, text=text, heading=heading) if n or m else row


def shown_entities(names: Iterable[str]) -> list[str]:
    """``names`` without those that hold a credential (an entity of a base built before they were
    withheld: the key itself, or the heading it was in)."""
    return [name for name in names if not withhold_secrets(name)[1]]


def _in_source(chunks: list[Chunk], source_lines: Sequence[tuple[int, int, int]]) -> tuple[list[Chunk], list[int]]:
    """The chunks of a converted text citing the file it came from, and the end line each is
    stored with: the file's lines; or, where two would start on one line of the file (a minified
    page), the line each starts on and, stored as its end line negated (see :class:`ChunkRow`),
    the column (a search gives one result per place: they must differ). Where even those do
    not differ, the converted text's lines."""
    placed: list[Chunk] = []
    starts: list[tuple[int, int]] = []  # (line, column) where each chunk's text starts in the file
    for chunk in chunks:
        spans = source_lines[chunk.start_line - 1 : chunk.end_line]
        if not spans:
            return chunks, [c.end_line for c in chunks]
        placed.append(replace(chunk, start_line=min(s[0] for s in spans), end_line=max(s[1] for s in spans)))
        starts.append((spans[0][0], spans[0][2]))
    if all(a.start_line < b.start_line for a, b in itertools.pairwise(placed)):
        return placed, [c.end_line for c in placed]
    if all(a < b for a, b in itertools.pairwise(starts)):
        return [replace(c, start_line=line) for c, (line, _) in zip(placed, starts, strict=True)], [
            -column for _, column in starts
        ]
    return chunks, [c.end_line for c in chunks]


def _doc_name(file: Path) -> str:
    absolute = file.absolute()
    try:
        return absolute.relative_to(Path.cwd()).as_posix()
    except ValueError:
        return absolute.as_posix()


# What str.splitlines() splits at: a title is looked for in the first 50 of its lines
_LINE_BREAK = re.compile("\r\n|[\n\r\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029]")


def _title(text: str, name: str) -> str:
    # The first 50 lines, not all of them: text.splitlines() made one string per line of the whole
    # document first, 370 MB for a file of 20 MB of short lines.
    ends = [m.end() for m, _ in zip(_LINE_BREAK.finditer(text), range(50), strict=False)]
    head = text[: ends[-1]] if len(ends) == 50 else text
    for line in head.splitlines()[:50]:
        m = re.match(r"#\s+(.+)", line.strip())
        if m:
            return m.group(1).strip()
    return Path(name).name
