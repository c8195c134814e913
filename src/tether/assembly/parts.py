"""The features an agent is assembled from, each opened from the settings and checked before
anything runs: knowledge bases, MCP servers, memory, skills and a typed answer's schema."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tether.errors import ConfigError, UserError

if TYPE_CHECKING:
    from tether.config import Settings
    from tether.connectors import McpConnector
    from tether.knowledge import KnowledgeBase
    from tether.skills import Skills

__all__ = [
    "check_kbs",
    "check_mcp",
    "default_embedder",
    "kb_name",
    "knowledge_extensions",
    "load_output_schema",
    "mcp_extensions",
    "memory_scope",
    "open_kb",
    "skills_extension",
]


# --- knowledge bases ----------------------------------------------------------------------------


def kb_name(value: str) -> str:
    """``value`` if it can name a knowledge base (it becomes a file name); else a ValueError."""
    from tether.stores import KB_NAME

    if not KB_NAME.fullmatch(value):
        raise ValueError(f"not a knowledge base name: {value!r} (letters, digits, '.', '_', '-')")
    return value


def _no_base(settings: Settings, name: str) -> UserError:
    from tether.stores import kb_names, kb_where

    made = kb_names(settings)
    there = f"there are: {', '.join(made)}" if made else "there is none yet"
    return UserError(
        f"there is no knowledge base {name!r} ({kb_where(settings, name)}; {there}); make it with {_add_command(name)}"
    )


def _add_command(name: str) -> str:
    """The command that adds files to base ``name``, as a person would type it."""
    return "tether kb add PATH" if name == "default" else f"tether kb --name {name} add PATH"


def check_kbs(settings: Settings, names: list[str]) -> None:
    """Refuse, before anything runs, a name that is no base (or cannot be one: it would name a file
    outside $TETHER_HOME/kb, such as ``../server``)."""
    from tether.stores import kb_exists

    for name in names:
        try:
            kb_name(name)
        except ValueError as exc:
            raise ConfigError(str(exc)) from None
        if not kb_exists(settings, name):
            raise _no_base(settings, name)


def open_kb(settings: Settings, name: str, *, create_with: str | None = None, must_exist: bool = True) -> KnowledgeBase:
    """Open base ``name``; with its recorded embedder, or ``create_with`` for a new one."""
    from tether.knowledge import KnowledgeBase, make_embedder
    from tether.stores import kb_exists, knowledge_store

    exists = kb_exists(settings, name)
    if must_exist and not exists:
        raise _no_base(settings, name)
    base_url, cache_dir = settings.kb.base_url, settings.home / "cache"
    # A new base's embedder is chosen (and checked) before its file exists.
    fresh = None
    if not exists:
        chosen = create_with or settings.kb.embedder or default_embedder()
        fresh = make_embedder(chosen, base_url=base_url, cache_dir=cache_dir)
    store = knowledge_store(settings, name)
    recorded = store.get_meta("embedder")
    raced = ""
    if recorded is None:
        if exists:  # made, but its first add was cut before the embedder was recorded: chosen now
            chosen = create_with or settings.kb.embedder or default_embedder()
            fresh = make_embedder(chosen, base_url=base_url, cache_dir=cache_dir)
        # Claimed, not set: two first adds at once each recorded theirs, the later one won the
        # record and the other's vectors (another size) went in beside them.
        mine = fresh.name if fresh is not None else "none"
        recorded = store.claim_meta("embedder", mine)
        if recorded == mine:
            return KnowledgeBase(
                store,
                embedder=fresh,
                name=name,
                max_pdf_pages=_pdf_pages(settings),
                max_file_bytes=settings.kb.max_file_bytes,
            )
        raced = " (by another tether kb add, just now)"
    asked = _embedder_name(create_with) if create_with else recorded
    if asked != recorded:
        raise UserError(
            f"the base {name!r} was built with the embedder {recorded}{raced}, not {asked}; "
            "--embedder only chooses for a new "
            f"base: make another with --name, or rebuild this one (tether kb drop {name} --yes, then "
            f"{_add_command(name)})"
        )
    embedder = make_embedder(recorded, base_url=base_url, cache_dir=cache_dir)
    return KnowledgeBase(
        store,
        embedder=embedder,
        name=name,
        max_pdf_pages=_pdf_pages(settings),
        max_file_bytes=settings.kb.max_file_bytes,
    )


def _pdf_pages(settings: Settings) -> int:
    from tether.knowledge.readers import MAX_PDF_PAGES

    return settings.kb.max_pdf_pages or MAX_PDF_PAGES


def default_embedder() -> str:
    """``local`` when the local embedder is installed; else ``none``, and the person is told."""
    from tether.knowledge.embed import LOCAL_EXTRA, MiniLMEmbedder

    if MiniLMEmbedder.available():
        return "local"
    print(
        f"(keyword search only: the local embedder is not installed; {LOCAL_EXTRA} adds vector search to new bases)",
        file=sys.stderr,
    )
    return "none"


def _embedder_name(spec: str) -> str:
    from tether.knowledge import make_embedder

    made = make_embedder(spec)
    return made.name if made is not None else "none"


def knowledge_extensions(settings: Settings, names: list[str]) -> list[Any]:
    """The tools of each named base, for an agent (suffixed with the name when there are several)."""
    if not names:
        return []  # and the knowledge package is not imported
    from tether.knowledge import KnowledgeTools

    max_chars, k = settings.kb.max_chars or 6000, settings.kb.results or 6
    suffix = len(names) > 1
    return [
        KnowledgeTools(open_kb(settings, name), suffix=f"_{name}" if suffix else "", k=k, max_chars=max_chars)
        for name in names
    ]


# --- MCP servers --------------------------------------------------------------------------------


def check_mcp(settings: Settings, names: list[str], *, source: str = "--mcp") -> list[str]:
    """The servers ``names`` lists (``all``: every enabled one), refused before anything runs when
    one is not configured, is disabled, or the mcp package is missing. Recorded with the run, so a
    resume starts the same servers."""
    if not names:
        return []
    import importlib.util

    config = settings.home / "config.toml"
    chosen: list[str] = []
    for name in names:
        if name == "all":
            chosen += [n for n, table in settings.mcp.items() if table.enabled]
            continue
        table = settings.mcp.get(name)
        if table is None:
            known = ", ".join(settings.mcp) or "none"
            raise UserError(
                f"{source} {name}: no [mcp.{name}] in {config} (configured: {known}){_one_each(source, name, settings)}"
            )
        if not table.enabled:
            raise UserError(f"{source} {name}: [mcp.{name}] has enabled = false in {config}")
        chosen.append(name)
    if not chosen:
        raise UserError(f"{source} all: no enabled [mcp.NAME] server in {config}")
    if importlib.util.find_spec("mcp") is None:
        raise UserError(f"{source} needs the mcp package: pip install 'tether[mcp]'")
    return list(dict.fromkeys(chosen))


def _one_each(source: str, name: str, settings: Settings) -> str:
    """A hint for several configured servers given as one comma-separated name (``--mcp a,b``)."""
    parts = [part.strip() for part in name.split(",") if part.strip()]
    if len(parts) < 2 or not all(part in settings.mcp for part in parts):
        return ""
    if source.startswith("--"):
        return "; name each server on its own: " + " ".join(f"{source} {part}" for part in parts)
    return "; list each server on its own: mcp = [" + ", ".join(f'"{part}"' for part in parts) + "]"


def mcp_extensions(settings: Settings, names: list[str]) -> list[McpConnector]:
    """A connector for each server (by the names a run recorded)."""
    from tether.connectors import McpConnector

    missing = [n for n in names if n not in settings.mcp]
    if missing:
        raise UserError(
            f"the run uses the MCP server {missing[0]}, and {settings.home / 'config.toml'} no "
            f"longer has [mcp.{missing[0]}]"
        )
    return [McpConnector(name, settings.mcp[name].model_dump(), home=settings.home) for name in names]


# --- memory and skills --------------------------------------------------------------------------


def memory_scope(settings: Settings, asked: str | None = None, *, off: bool = False) -> str | None:
    """The memory scope a run records (None: memory off): ``asked`` (a flag or a definition's
    ``memory``), else ``[memory]``'s; ``[memory] enabled = false`` turns it off everywhere."""
    if off or asked == "off" or not settings.memory.enabled:
        return None
    return asked or settings.memory.scope


def skills_extension(settings: Settings, cwd: Path | str) -> Skills | None:
    """The ``Skills`` extension for a run in ``cwd``, or None when no skill exists. Problems with
    a skill folder go to stderr (once per process)."""
    from tether.skills import SkillFolders, Skills, report_problems

    folders = SkillFolders.default(settings.home, cwd, settings.skills.paths)
    found = folders.find()
    report_problems(found.problems, echo=sys.stderr)
    return Skills(folders, found=found) if found.skills else None


# --- a typed answer -----------------------------------------------------------------------------


def load_output_schema(source: str | dict[str, Any], *, what: str, base: Path | None = None) -> dict[str, Any]:
    """The JSON Schema ``source`` gives (a table, or a file's path relative to ``base``), checked:
    one that cannot serve is a configuration error naming ``what`` gave it."""
    from tether.harness.structured import spec_for

    label = f"{what}: {source}" if isinstance(source, str) else what
    if isinstance(source, str):
        from tether.config import expand_user
        from tether.fileio import read_regular

        path = expand_user(source, what)
        path = path if path.is_absolute() or base is None else base / path
        try:
            schema = json.loads(read_regular(path).decode("utf-8"))  # a named pipe there is not waited on
        except (OSError, UnicodeDecodeError) as exc:
            raise ConfigError(f"{what}: cannot read {source}: {getattr(exc, 'strerror', None) or exc}") from None
        except ValueError as exc:
            raise ConfigError(f"{what}: {source} is not JSON: {exc}") from None
        if not isinstance(schema, dict):
            raise ConfigError(f"{what}: {source} must hold a JSON Schema object, not {type(schema).__name__}")
        source = schema
    try:
        spec_for(source)
    except ConfigError as exc:
        raise ConfigError(f"{label}: {exc}") from None
    return source
