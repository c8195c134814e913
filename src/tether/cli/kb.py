"""``tether kb``: build a knowledge base, search it, and (``tether run --kb NAME``) give it to an agent.

A base is one SQLite file, ``$TETHER_HOME/kb/NAME.db`` (NAME defaults to ``default``). The embedder
is chosen when the base is created (``--embedder``, else ``[kb] embedder`` in config.toml, else the
local default) and recorded in it; later commands use the one recorded.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import re
import sys
from typing import TYPE_CHECKING, Any, NoReturn

from tether.cli.common import positive_float, positive_int, stops_in_words, usage_error
from tether.cli.common import settings as load_settings
from tether.cli.display import json_shown, shown
from tether.stores import kb_names, kb_where

if TYPE_CHECKING:
    from tether.config import Settings
    from tether.knowledge import KnowledgeBase

__all__ = ["add_parsers", "kb_name"]

MODES = ("hybrid", "keyword", "vector", "exact", "neighborhood", "hierarchical")
# The defaults are tether.knowledge.base's HYBRID_ALPHA, DEFAULT_ALPHA and EXACT_ALPHA (a test
# keeps them equal; the knowledge package is not imported to build the parser).
ALPHA_HELP = "0 keyword only … 1 vector only (default 0.6; hierarchical and neighborhood 0.55; exact 0.15)"


def open_kb(settings: Settings, name: str, **how: Any) -> KnowledgeBase:
    from tether.assembly import open_kb as opened

    return opened(settings, name, **how)


def kb_name(value: str) -> str:
    from tether.assembly import kb_name as checked

    try:
        return checked(value)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _alpha(value: str) -> float:
    try:
        a = float(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {value!r}") from None
    if not 0.0 <= a <= 1.0:
        raise argparse.ArgumentTypeError(f"alpha must be between 0 (keyword only) and 1 (vector only), not {value}")
    return a


def _filter(value: str) -> tuple[str, str]:
    key, sep, val = value.partition("=")
    if not sep or not key.strip():
        raise argparse.ArgumentTypeError(f"a filter is key=value, not {value!r}")
    return key.strip(), val


def _add_parser(ks: Any) -> Any:
    """``tether kb add``: its paths, metadata, embedder, graph extraction and when vectors are made."""
    add = ks.add_parser("add", help="ingest files and directories (only what changed is read again)")
    add.add_argument("paths", nargs="+", metavar="PATH")
    add.add_argument(
        "--meta",
        action="append",
        type=_filter,
        default=[],
        metavar="KEY=VALUE",
        help="metadata for these documents (e.g. family=valves); repeatable",
    )
    add.add_argument(
        "--embedder", metavar="SPEC", help="for a new base: local (default), none (keyword only), openai/MODEL"
    )
    add.add_argument(
        "--extract-with",
        metavar="MODEL",
        help="a model that names each chunk's entities and relations for the graph (one request "
        "per chunk of the files read now), over the built-in rules",
    )
    add.add_argument(
        "--extract-budget",
        type=positive_float,
        metavar="USD",
        help="the most --extract-with may spend; chunks past it keep the rules' findings",
    )
    add.add_argument("--sync", action="store_true", help="remove documents whose files are gone from these folders")
    add.add_argument(
        "--hidden",
        action="store_true",
        help="read hidden files and folders (.name) in these folders too; files holding credentials "
        "by their names (.env, .ssh, *.pem...) are never read",
    )
    when = add.add_mutually_exclusive_group()
    when.add_argument(
        "--background",
        action="store_true",
        help="make the vectors in a background process (tether kb stats shows how far it is)",
    )
    when.add_argument("--no-vectors", action="store_true", help="leave the vectors for a later tether kb fill")
    add.set_defaults(handler=cmd_add)
    return add


def add_parsers(sub: Any) -> None:
    kb = sub.add_parser(
        "kb",
        help="build and search a knowledge base",
        description=(__doc__ or "").replace("``", ""),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    kb.add_argument(  # --kb: the name `tether run --kb NAME` gives it
        "--name", "--kb", dest="name", type=kb_name, default="default", help="which base (default: default)"
    )
    ks = kb.add_subparsers(dest="kb_command", required=True)

    add = _add_parser(ks)
    fill = ks.add_parser("fill", help="make the vectors the base still lacks (resumes a stopped add)")
    fill.set_defaults(handler=cmd_fill)

    search = ks.add_parser("search", help="search the base")
    # Optional here, so that a query argparse takes for an option (-SK-77) is "unrecognized", which
    # _dash_hint answers with the `--` it needs; a search with no query at all says so in cmd_search.
    search.add_argument("query", metavar="QUERY", nargs="?", help="a query starting with '-' goes after --")
    _dash_hint(search)
    search.add_argument(
        "--mode",
        choices=MODES,
        default="hybrid",
        help="hybrid (default: keyword and vector fused), keyword, vector, exact (chunks holding the "
        "literal identifier), neighborhood or hierarchical (see docs/knowledge.md)",
    )
    search.add_argument("--alpha", type=_alpha, help=ALPHA_HELP)
    search.add_argument("-k", type=positive_int, default=8, help="how many results (default 8)")
    search.add_argument(
        "--filter",
        action="append",
        type=_filter,
        default=[],
        metavar="KEY=VALUE",
        help="only documents whose metadata has this value; repeatable",
    )
    search.add_argument("--json", action="store_true", help="results as JSON")
    search.set_defaults(handler=cmd_search, read_only=True)

    listing = ks.add_parser("list", help="documents in the base")
    listing.set_defaults(handler=cmd_list, read_only=True)
    rm = ks.add_parser("remove", help="remove a document (its name as `kb list` shows it)")
    rm.add_argument("doc", metavar="DOC")
    rm.set_defaults(handler=cmd_remove)
    stats = ks.add_parser("stats", help="documents, chunks, entities, the embedder, vectors made")
    stats.set_defaults(handler=cmd_stats, read_only=True)
    bases = ks.add_parser("bases", help="the knowledge bases there are")
    bases.set_defaults(handler=cmd_bases, read_only=True)
    drop = ks.add_parser("drop", help="delete a whole knowledge base")
    drop.add_argument("base", type=kb_name, metavar="NAME")
    drop.add_argument("--yes", action="store_true", help="do not ask")
    drop.set_defaults(handler=cmd_drop)
    for p in (add, fill, search, listing, rm, stats):  # --name after the command works too
        p.add_argument("--name", "--kb", dest="name", type=kb_name, default=argparse.SUPPRESS, help=argparse.SUPPRESS)


def _dash_hint(parser: argparse.ArgumentParser) -> None:
    """``parser``'s errors for an argument starting with ``-`` that it does not know also say how to
    search for it: ``tether kb search -SK-77`` (an error code, a part number) was "the following
    arguments are required: QUERY", with no word of ``--``."""
    said = parser.error

    def error(message: str) -> NoReturn:
        found = re.match(r"unrecognized arguments: (-\S*)", message)
        if found and "did you mean" not in message:
            message += f"; a query that starts with '-' goes after --: tether kb search -- {found.group(1)}"
        said(message)

    parser.error = error  # type: ignore[method-assign]


def _bar(done: int, total: int, label: str) -> None:
    if not sys.stderr.isatty():
        return
    width = 24
    filled = int(width * done / total) if total else width
    line = f"\r[{'#' * filled}{'.' * (width - filled)}] {label}"
    print(f"{line:<80}", end="" if done < total else "\n", file=sys.stderr, flush=True)


def _progress(n: int, total: int, name: str) -> None:
    _bar(n, total, f"{n}/{total} files {shown(name[-40:])}")


def _fill_progress(done: int, total: int) -> None:
    _bar(done, total, f"vectors {done}/{total} chunks")


@stops_in_words  # SIGTERM stops it as Ctrl-C does
def cmd_add(args: argparse.Namespace) -> int:

    _pdf_warnings_escaped()
    settings = load_settings()
    if args.extract_budget is not None and not args.extract_with:
        raise usage_error("--extract-budget limits --extract-with; give the model too")
    from pathlib import Path

    missing = [p for p in args.paths if not Path(p).exists()]
    if missing:  # checked before the base is opened, so a typo makes nothing
        raise usage_error(f"{_missing(missing[0])}; nothing was added")
    extractor = None
    if args.extract_with:
        from tether.knowledge import ModelExtractor

        extractor = ModelExtractor(args.extract_with, settings=settings, max_budget_usd=args.extract_budget)
    writing = _writing(settings, args.name)
    with writing as held:
        if not held:
            raise _being_dropped(args.name)
        return _add(settings, args, extractor, writing)


def _missing(path: str) -> str:
    """Why ``path`` cannot be added: it is not there, or it is a link that leads nowhere (``ls``
    shows it, and "does not exist" left a person looking at it)."""
    import os

    if not os.path.islink(path):
        return f"{shown(path)} does not exist"
    return (
        f"{shown(path)} is a symbolic link to {shown(os.readlink(path))}, which does not exist (or leads "
        "back to a link on the way): point it at a file or a folder, or name the file itself"
    )


def _add(settings: Settings, args: argparse.Namespace, extractor: Any, writing: _base_lock) -> int:
    from tether.cli.signals import Terminated
    from tether.stores import kb_exists

    new = not kb_exists(settings, args.name)
    kb = open_kb(settings, args.name, create_with=args.embedder, must_exist=False)
    if extractor is not None:
        kb.extractor = extractor
    try:
        args.home = settings.home  # never read into the base: its sessions, bases and logs
        read = _read_paths(kb, args)
    except (KeyboardInterrupt, Terminated):
        _say(
            "\nstopped: what was read is in the base (each file whole or not at all); run the same "
            "tether kb add again to go on (files already read are skipped)",
            err=True,
        )
        return 130
    if new and not kb.documents():
        # Another kb add may be writing to the base this one made, its first file not yet in:
        # dropping it then lost all it added (it went on writing into a deleted file).
        if not writing.alone() or kb.documents():
            _say(f"nothing was added to {args.name!r} by this add (another is adding to it)", err=True)
            return 1
        _drop(settings, args.name)
        _say(f"nothing was added, so no base {args.name!r} was made", err=True)
        return 1
    if extractor is not None:
        _say(_extractor_line(extractor, read))
    stats = kb.stats()
    _say(
        f"base {args.name!r}: {stats['documents']} documents, {stats['chunks']} chunks, "
        f"{stats['entities']} entities ({kb_where(settings, args.name)})"
    )
    if kb.embedder is None or args.no_vectors:
        return 0
    if args.background:
        return _fill_in_background(settings, args.name)
    return _fill(settings, kb, args.name)


def _pdf_warnings_escaped() -> None:
    """pypdf's warnings about a damaged PDF, one line each on stderr with control characters
    escaped. They quote the file's own strings: written by Python's last-resort handler, a PDF's
    escape sequences reached the terminal as they were (a window title set, colours changed). Not
    when the program running this has logging of its own set up."""
    import logging

    class Escaped(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            try:
                _say(f"tether: pypdf: {shown(record.getMessage())}", err=True)
            except Exception:  # a record that cannot be written is not the add's error
                self.handleError(record)

    logger = logging.getLogger("pypdf")
    if not logger.hasHandlers():
        logger.addHandler(Escaped(logging.WARNING))


def _say(line: str, *, err: bool = False) -> None:
    """A line of what ``kb add`` (and ``fill``) reports, on stdout or with ``err`` stderr. Its reader
    gone (``kb add DIR | head -1``) or its file not writable (a full disk), this line and the rest
    go nowhere and the command goes on: the first line that could not be written stopped it, the
    other paths unread and every vector unmade, with no word (a pipe) or a traceback (a full disk)."""
    import os

    stream = sys.stderr if err else sys.stdout
    try:
        print(line, file=stream, flush=True)
    except OSError as exc:
        os.dup2(os.open(os.devnull, os.O_WRONLY), stream.fileno())
        if not err and not isinstance(exc, BrokenPipeError):  # a reader that left needs no word
            _say(f"tether: stdout cannot be written ({exc.strerror or exc}); the command goes on", err=True)


def _read_paths(kb: KnowledgeBase, args: argparse.Namespace) -> int:
    """Add ``args.paths`` to ``kb``, saying what each did; how many documents were read (added or
    updated)."""
    meta, read = dict(args.meta), 0
    for path in args.paths:
        report = kb.add_path(
            path,
            meta=meta,
            progress=_progress,
            prune=args.sync,
            embed=False,
            hidden=args.hidden,
            exclude=[args.home],
        )
        _say(f"{shown(path)}: {report.summary()}")
        read += len(report.added) + len(report.updated)
        if report.passed_over:
            counts = "; ".join(f"{n} {why}" for why, n in report.passed_over.items())
            _say(f"  passed over: {counts}")
        if report.withheld:
            many = sum(n for _, n in report.withheld)
            _say(
                f"  {many} credentials (API keys, tokens, private keys) in {len(report.withheld)} files were "
                "withheld from the base: each is replaced by [credential withheld: ...]"
            )
        for name, n in report.withheld:
            _say(f"  withheld {n} credentials in {shown(name)}: keep them out of the file", err=True)
        for name, why in report.skipped:
            _say(f"  skipped {shown(name)}: {why}", err=True)
        for name, why in report.cut:
            _say(f"  read in part {shown(name)}: {why}", err=True)
        for name, n in report.undecoded:
            why = f"{n} characters read as \ufffd; save it as UTF-8 and add it again"
            _say(f"  not UTF-8 {shown(name)}: {why}", err=True)
        if report.gone and args.sync:  # kept by --sync: each in a folder it named as skipped
            _say(
                f"  {len(report.gone)} documents kept: their folders could not be read (named above), so "
                "--sync did not remove them",
                err=True,
            )
        elif report.gone:
            _say(
                f"  {len(report.gone)} documents' files are gone from {shown(path)} (kept; --sync removes them)",
                err=True,
            )
    return read


def _extractor_line(extractor: Any, read: int) -> str:
    cost = f"${extractor.cost_usd:.6f}" if extractor.price is not None else "cost unknown (no price)"
    line = (
        f"graph extractor {extractor.model_name}: {extractor.calls} calls, "
        f"{extractor.usage.total_tokens} tokens, {cost}"
    )
    if extractor.skipped:
        line += f"; {extractor.skipped} chunks past --extract-budget kept the rules' findings"
    if extractor.failures:
        line += f"; {extractor.failures} failed (last: {extractor.last_error})"
    if not read:  # the README's order (kb add, then kb add --extract-with) met a silent no-op here
        line += (
            "; no file changed, so none was read: a file keeps the graph it was added with "
            "(tether kb remove DOC, then add it again, to extract from it)"
        )
    return line


def _fill(settings: Settings, kb: KnowledgeBase, name: str) -> int:
    """Make the missing vectors here, one filler per base at a time; Ctrl-C leaves a resumable base.

    An add that finishes while another process fills leaves its chunks to that filler; one that
    found the lock held just before the filler let go wrote chunks the filler had stopped looking
    for, and they were never made. So a filler looks again once it has let go, and makes them."""
    from tether.cli.signals import Terminated

    made, rounds = 0, 0
    while True:
        with _fill_lock(settings, name) as held:
            if not held:
                if rounds == 0:
                    _say(f"the vectors of {name!r} are being made by another process (tether kb stats shows how far)")
                    return 0
                break  # another filler took it after this one let go: it makes the rest
            try:
                done = kb.fill_vectors(_fill_progress)
            except (KeyboardInterrupt, Terminated):
                embedded, chunks = kb.store.coverage()
                _say(
                    f"\nstopped: vectors for {embedded} of {chunks} chunks (every chunk is searchable by keyword); "
                    f"tether kb --name {name} fill goes on from there",
                    err=True,
                )
                return 130
        made, rounds = made + done, rounds + 1
        embedded, chunks = kb.store.coverage()
        if embedded >= chunks or (done == 0 and rounds > 1):
            break
    embedded, chunks = kb.store.coverage()
    _say(f"vectors: {made} made, {embedded} of {chunks} chunks covered")
    return 0


def _fill_in_background(settings: Settings, name: str) -> int:
    import os
    import subprocess

    from tether.errors import ConfigError
    from tether.fileio import open_own

    log = settings.home / "kb" / f"{name}.fill.log"
    try:  # a link put at the name is refused, never appended through; a named pipe is not waited on
        fd = open_own(log, os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_CLOEXEC)
    except OSError as exc:
        raise ConfigError(
            f"cannot open the fill log {log}: {exc.strerror or exc}. It must be a regular file (not a link, "
            "a named pipe or a folder): move it away and run this again"
        ) from None
    with os.fdopen(fd, "ab") as out:
        child = subprocess.Popen(
            [sys.executable, "-m", "tether", "kb", "--name", name, "fill"],
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=out,
            start_new_session=True,  # Ctrl-C in this terminal does not reach it
        )
    _say(f"making the vectors in the background (pid {child.pid}, log {log}); tether kb stats shows how far")
    return 0


class _base_lock:
    """A lock on ``$TETHER_HOME/kb/NAME.<kind>.lock``, taken without waiting; False (not held) when
    another process holds it in a conflicting way. The kernel lets go of it when the holder dies.

    ``fill``, exclusive: one filler per base. ``use``, shared by every ``kb add``, ``remove`` and
    ``fill`` while they write, exclusive for ``kb drop``: a base is not deleted under a writer (it would go on
    writing into a deleted file, and lose its work)."""

    def __init__(self, settings: Settings, name: str, kind: str, *, shared: bool = False) -> None:
        self.path = settings.home / "kb" / f"{name}.{kind}.lock"
        self.shared = shared
        self.fd = -1

    def __enter__(self) -> bool:
        import fcntl
        import os

        from tether.errors import ConfigError
        from tether.fileio import open_own

        try:  # 0600, its folder 0700; a link, a pipe or a folder put at its name is refused
            self.fd = open_own(self.path, os.O_RDWR | os.O_CREAT)
        except OSError as exc:
            import errno

            if exc.errno in (errno.EROFS, errno.EACCES, errno.EPERM):
                raise ConfigError(
                    f"cannot write to {self.path.parent} ({exc.strerror or exc}): a knowledge base there can be "
                    "searched, not changed. Make the folder writable, or set TETHER_HOME to another"
                ) from None
            raise ConfigError(
                f"cannot open the knowledge base's lock {self.path}: {exc.strerror or exc}; move it away "
                "and run this again"
            ) from None
        try:
            fcntl.flock(self.fd, (fcntl.LOCK_SH if self.shared else fcntl.LOCK_EX) | fcntl.LOCK_NB)
        except BlockingIOError:
            return False
        return True

    def alone(self) -> bool:
        """Turn a shared lock held into an exclusive one, without waiting: False when another
        process holds it too (the shared lock may then be gone: only for a holder about to end)."""
        import fcntl

        try:
            fcntl.flock(self.fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return False
        return True

    def __exit__(self, *exc: object) -> None:
        import os

        os.close(self.fd)


def _fill_lock(settings: Settings, name: str) -> _base_lock:
    return _base_lock(settings, name, "fill")


def _writing(settings: Settings, name: str) -> _base_lock:
    return _base_lock(settings, name, "use", shared=True)


def _being_dropped(name: str) -> Exception:
    return usage_error(f"the base {name!r} is being dropped by another process; nothing was written")


@stops_in_words  # SIGTERM stops it as Ctrl-C does
def cmd_fill(args: argparse.Namespace) -> int:
    from tether.stores import kb_exists

    settings = load_settings()
    if not kb_exists(settings, args.name):
        open_kb(settings, args.name)  # says there is no such base, and how to make one
    with _writing(settings, args.name) as held:  # before the base is opened, as for kb remove
        if not held:
            raise _being_dropped(args.name)
        kb = open_kb(settings, args.name)
        if kb.embedder is None:
            print(
                f"the base {args.name!r} has no embedder: it is searched by keyword only. To search it by "
                f"meaning too, drop it (tether kb drop {args.name} --yes) and add its files again with an "
                "embedder (--embedder local needs pip install 'tether[embeddings]')"
            )
            return 0
        return _fill(settings, kb, args.name)


def cmd_search(args: argparse.Namespace) -> int:
    from tether.errors import UserError

    if args.query is None:
        raise usage_error("no query: tether kb search WORDS (a query that starts with '-' goes after --)")
    with contextlib.closing(open_kb(load_settings(), args.name)) as kb:
        try:
            result = kb.search(args.query, mode=args.mode, k=args.k, alpha=args.alpha, filters=dict(args.filter))
        except UserError as exc:
            raise usage_error(str(exc)) from None
        embedded, chunks = kb.store.coverage() if args.json else (0, 0)
    if args.json:
        print(json_shown(json.dumps(_as_json(result, embedded, chunks), ensure_ascii=False, indent=2)))
        return 0
    if result.note:
        print(f"({shown(result.note)})", file=sys.stderr)
    if not result.hits:
        print(f"no results for {shown(repr(result.query))}", file=sys.stderr)
        return 0
    for n, hit in enumerate(result.hits, 1):
        where = f"  [{shown(hit.chunk.heading)}]" if hit.chunk.heading else ""
        print(f"{n}. {shown(hit.citation)}  {hit.score:.4f}{where}")
        for line in hit.chunk.text.splitlines()[:6]:
            print(f"   {shown(line[:110])}")
    if result.entities:
        print(f"entities walked: {shown(', '.join(result.entities[:12]))}")
    return 0


def _as_json(result: Any, embedded: int, chunks: int) -> dict[str, Any]:
    return {
        "query": result.query,
        "mode": result.mode,
        "note": result.note,
        "coverage": {"embedded_chunks": embedded, "chunks": chunks},
        "entities": result.entities,
        "hits": [
            {
                "citation": h.citation,
                "score": round(h.score, 6),
                "ranks": h.ranks,
                "heading": h.chunk.heading,
                "text": h.chunk.text,
                "meta": h.chunk.meta,
            }
            for h in result.hits
        ],
    }


def cmd_list(args: argparse.Namespace) -> int:
    with contextlib.closing(open_kb(load_settings(), args.name)) as kb:
        docs = kb.documents()
    for d in docs:
        meta = " ".join(f"{k}={v}" for k, v in d.meta.items())
        print(shown(f"{d.name}  {d.chunks} chunks  {d.title!r}{'  ' + meta if meta else ''}"))
    if not docs:
        print("(no documents)", file=sys.stderr)
    return 0


def cmd_remove(args: argparse.Namespace) -> int:
    from tether.stores import kb_exists

    settings = load_settings()
    if not kb_exists(settings, args.name):
        open_kb(settings, args.name)  # says there is no such base, and how to make one
    # Held as an add holds it, before the base is opened: a drop meanwhile deleted the base under
    # the remove (which then wrote into the deleted file), or between the check that the base is
    # there and its opening, which then made a new empty base in its place.
    with _writing(settings, args.name) as held:
        if not held:
            raise _being_dropped(args.name)
        with contextlib.closing(open_kb(settings, args.name)) as kb:
            if kb.remove(args.doc):
                print(f"removed {shown(args.doc)}")
                return 0
            names = [d.name for d in kb.documents()]
    close = [shown(n) for n in names if args.doc in n][:5]
    hint = f"; did you mean {', '.join(close)}?" if close else " (tether kb list shows the names)"
    raise usage_error(f"no document named {shown(repr(args.doc))} in {args.name!r}{hint}")


def cmd_stats(args: argparse.Namespace) -> int:
    with contextlib.closing(open_kb(load_settings(), args.name)) as kb:
        stats = kb.stats()
    for key, value in stats.items():
        print(f"{key}: {shown(value)}")
    return 0


def cmd_bases(args: argparse.Namespace) -> int:
    from tether.errors import ConfigError, StoreError

    settings = load_settings()
    names = kb_names(settings)
    for name in names:
        try:
            with contextlib.closing(open_kb(settings, name)) as kb:
                stats = kb.stats()
        except (ConfigError, StoreError) as exc:  # one damaged base does not hide the others
            print(f"{name}  {shown(str(exc))}")
            continue
        print(
            f"{name}  {stats['documents']} documents  {stats['chunks']} chunks  "
            f"vectors {stats['embedded_chunks']}/{stats['chunks']}  embedder {shown(stats['embedder'])}"
        )
    if not names:
        print("(no knowledge bases; tether kb add PATH makes one)", file=sys.stderr)
    return 0


@stops_in_words  # SIGTERM stops it as Ctrl-C does
def cmd_drop(args: argparse.Namespace) -> int:
    from tether.cli.signals import Terminated, reads_hear_signals, sigterm_held, terminated
    from tether.stores import kb_exists

    settings = load_settings()
    if not kb_exists(settings, args.base):
        names = ", ".join(kb_names(settings)) or "none"
        raise usage_error(f"there is no knowledge base {args.base!r} (there are: {names})")
    what = f"{args.base!r} ({_size(settings, args.base)})"
    if not args.yes:
        if sys.stdin is None or not sys.stdin.isatty():  # None: started with stdin closed (<&-)
            raise usage_error(f"dropping {what} cannot be undone: add --yes to confirm")
        try:
            with reads_hear_signals():  # the question on stderr: stdout may be a file (> out.txt)
                print(f"drop the knowledge base {what}? [y/N] ", end="", file=sys.stderr, flush=True)
                answer = sys.stdin.readline()
        except Terminated:
            raise Terminated(f"the knowledge base {args.base!r} was kept") from None
        if not answer:  # Ctrl-D: no
            print(file=sys.stderr)
        if answer.strip().lower() not in ("y", "yes"):
            print("kept", file=sys.stderr)
            return 1
    with _base_lock(settings, args.base, "use") as held:  # a writer into a deleted file loses its work
        if not held:
            raise usage_error(
                f"another process is adding to {args.base!r}, removing from it or making its vectors (tether kb "
                "stats shows how far): stop it or let it finish, then drop the base"
            )
        with sigterm_held():  # its files go together: never the base without its log, or half of them
            _drop(settings, args.base)
    print(f"dropped {what}")
    if terminated():
        raise Terminated("it came while dropping the base, which was finished first")
    return 0


def _size(settings: Settings, name: str) -> str:
    """How much a base holds, in words; a damaged base (which drop is the way out of) says so."""
    from tether.errors import ConfigError, StoreError

    try:
        with contextlib.closing(open_kb(settings, name)) as kb:
            stats = kb.stats()
    except (ConfigError, StoreError):
        return "damaged: it cannot be read"
    return f"{stats['documents']} documents, {stats['chunks']} chunks"


def _drop(settings: Settings, name: str) -> None:
    from tether.stores import database_of

    db = database_of(settings)
    if db is not None:
        from tether.postgres.knowledge import PgKnowledgeStore

        PgKnowledgeStore.drop(db, name)
        return
    folder = settings.home / "kb"
    for suffix in (".db", ".db-wal", ".db-shm", ".fill.lock", ".fill.log", ".use.lock"):
        (folder / f"{name}{suffix}").unlink(missing_ok=True)
