"""``tether memory``: what the agent remembers across sessions, for the person to see and change.

The same checks as the model's ``memory`` tool (the injection scan, the limits, duplicates,
ambiguous matches); a refused write is one line saying why, and exit code 2.
"""

from __future__ import annotations

import argparse
import glob
import json
import re
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tether.cli.common import directory, stops_in_words
from tether.cli.common import settings as load_settings
from tether.cli.display import json_shown, shown

if TYPE_CHECKING:
    from tether.config import Settings
    from tether.memory import Memory

__all__ = ["add_memory_options", "add_parsers", "memory_override", "open_memory", "print_memory"]

HELP = """\
Memory is two plain Markdown files under $TETHER_HOME/memory: profile.md (who you are, your
preferences) and notes.md (decisions and conventions), one "- " entry each. Edit them by hand if
you like; every line is kept. With scope "project" (--scope project, or [memory] scope in
config.toml) the notes belong to the project directory and the profile stays yours everywhere.
What the agent sees is a snapshot taken when a session begins.
"""


def add_memory_options(parser: argparse.ArgumentParser) -> None:
    """``--memory-scope`` or ``--no-memory`` (not both) for the commands that run an agent."""
    either = parser.add_mutually_exclusive_group()  # both: which one wins would go unsaid
    either.add_argument(
        "--memory-scope",
        choices=("user", "project"),
        help="whose notes the agent remembers: yours everywhere (user) or this --cwd's "
        "(project); default: [memory] scope in config.toml, else user",
    )
    either.add_argument(
        "--no-memory",
        action="store_true",
        help="run without cross-session memory (no memory tool, nothing in the prompt)",
    )


def memory_override(args: argparse.Namespace) -> str | None:
    """What ``--no-memory`` and ``--memory-scope`` change in an agent's memory (None: nothing)."""
    return "off" if args.no_memory else args.memory_scope


def open_memory(settings: Settings, scope: str, cwd: Path | str) -> Memory:
    from tether.stores import memory

    return memory(settings, scope, cwd)


def add_parsers(sub: Any) -> None:
    m = sub.add_parser(
        "memory",
        help="show or change what the agent remembers across sessions",
        description=HELP,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    ms = m.add_subparsers(dest="memory_command", required=True)

    def common(p: argparse.ArgumentParser, *, which: str) -> None:
        p.add_argument("--scope", choices=("user", "project"), help="default: [memory] scope in config.toml, else user")
        p.add_argument(
            "--cwd",
            type=directory,
            default=".",
            metavar="DIR",
            help="the project, for --scope project (default: the current directory)",
        )
        group = p.add_mutually_exclusive_group()
        group.add_argument(
            "--profile",
            dest="store",
            action="store_const",
            const="profile",
            help=f"the user profile{' (default: notes)' if which == 'one' else ''}",
        )
        group.add_argument("--notes", dest="store", action="store_const", const="notes", help="the fact notes")

    show = ms.add_parser("show", help="print both stores with their usage and where they live")
    common(show, which="both")
    show.add_argument("--json", action="store_true", help="print the stores as one JSON array")
    show.set_defaults(handler=cmd_show, read_only=True)
    add = ms.add_parser("add", help="add an entry (scanned first)")
    add.add_argument("text", metavar="TEXT")
    common(add, which="one")
    add.set_defaults(handler=cmd_add)
    rep = ms.add_parser("replace", help="replace the one entry containing OLD with NEW")
    rep.add_argument("old", metavar="OLD")
    rep.add_argument("new", metavar="NEW")
    common(rep, which="one")
    rep.set_defaults(handler=cmd_replace)
    rem = ms.add_parser("remove", help="remove the one entry containing TEXT")
    rem.add_argument("text", metavar="TEXT")
    common(rem, which="one")
    rem.set_defaults(handler=cmd_remove)
    clr = ms.add_parser("clear", help="empty a store (both without --profile or --notes); asks first, or pass --yes")
    common(clr, which="both")
    clr.add_argument("--yes", "-y", action="store_true", help="do not ask (needed when not at a terminal)")
    clr.set_defaults(handler=cmd_clear)


def _memory(args: argparse.Namespace) -> Memory:
    settings = load_settings()
    return open_memory(settings, args.scope or settings.memory.scope, args.cwd)


def cmd_show(args: argparse.Namespace) -> int:
    memory = _memory(args)
    if args.json:
        print(json_shown(json.dumps(_memory_json(memory, args.store), ensure_ascii=False, indent=1)))
    else:
        print_memory(memory, args.store)
    if args.store != "profile":
        _say_where_notes_went(memory)
    return 0


def _say_where_notes_went(memory: Memory) -> None:
    """Project notes are kept by the folder's real path: a project moved or renamed found none,
    without a word. When this folder has none, say so, and name the notes of folders of its name."""
    import stat

    from tether.memory.store import TextStore

    store = memory.stores["notes"]
    if not isinstance(store, TextStore) or store.path.parent.parent.name != "projects" or store.path.exists():
        return
    projects, here = store.path.parent.parent, store.path.parent.name
    slug = here.rsplit("-", 1)[0]
    others = []
    same_name = re.compile(rf"{re.escape(slug)}-[0-9a-f]{{10}}")  # not "a-b-<hash>" for "a": another name
    for folder in sorted(projects.glob(f"{glob.escape(slug)}-*")):
        try:
            if (
                folder.name != here
                and same_name.fullmatch(folder.name)
                and stat.S_ISREG((folder / "notes.md").lstat().st_mode)
            ):
                others.append(folder / "notes.md")
        except OSError:
            continue
    print(
        f"(no notes for this folder yet: project notes are kept by the folder's path, so a project moved or "
        f"renamed starts without them; every project's are under {shown(projects)})",
        file=sys.stderr,
    )
    for path in others[:5]:
        print(
            f"(notes of another folder named {shown(repr(slug))}: {shown(path)}; move that file to "
            f"{shown(store.path)} to keep them here)",
            file=sys.stderr,
        )


def _memory_json(memory: Memory, only: str | None) -> list[dict[str, Any]]:
    items = []
    for name in [only] if only else list(memory.stores):
        store = memory.store(name)
        entries = store.entries()
        usage = store.usage(entries)
        items.append(
            {
                "store": name,
                "path": str(store.path),
                "chars": usage.chars,
                "limit": usage.limit,
                "entries": [
                    {"text": e, "withheld": why}
                    for e, why in zip(entries, _left_out(memory, name, entries), strict=True)
                ],
            }
        )
    return items


def _left_out(memory: Memory, name: str, entries: list[str]) -> list[str | None]:
    """Why the agent's prompt leaves out each entry (None: it shows it), in the person's words."""
    out: list[str | None] = []
    for entry, why in zip(entries, memory._left_out(memory.store(name), entries), strict=True):
        finding = memory.withheld(entry) if why is not None else None
        if finding is not None:  # written by hand past the checks (also when past the limit)
            out.append(finding.message)
        elif why == "limit":
            out.append(f"past the {name} limit: shown to the agent once the entries before it are consolidated")
        elif why is not None:  # shown next to another entry, the two read as one text
            out.append(f"read together with the entry next to it, {why.removeprefix('joined: ')}")
        else:
            out.append(None)
    return out


def print_memory(memory: Memory, only: str | None = None) -> None:
    """Each store with its usage and file, its entries, and any the scan withholds from the agent."""
    for name in [only] if only else list(memory.stores):
        store = memory.store(name)
        entries = store.entries()
        print(f"{store.usage(entries).label()}  {store.path}")
        for entry, why in zip(entries, _left_out(memory, name, entries), strict=True):
            print("- " + shown(entry, keep_newlines=True).replace("\n", "\n  "))  # a file edited by hand
            if why is not None:  # written by hand past the checks or the limit: kept, but not shown to the model
                print(f"  ! withheld from the agent: {shown(why)}")
        if not entries:
            print("(empty)")


def _write(args: argparse.Namespace, action: str, *values: str) -> int:
    from tether.memory import MemoryRefused

    memory = _memory(args)
    try:
        change = getattr(memory, action)(args.store or "notes", *values)
    except MemoryRefused as exc:
        print(f"tether: {shown(exc, keep_newlines=True)}", file=sys.stderr)  # it may quote entries
        if exc.rule == "not_found" and args.store is None and action != "add":
            needle = values[0].strip().casefold()  # what was looked for in the notes, the default
            if needle and any(needle in entry.casefold() for entry in memory.store("profile").entries()):
                print(f"The profile has an entry containing it: tether memory {action} --profile ...", file=sys.stderr)
        return 2
    print(shown(change.message.split(" Memory is a snapshot")[0] if change.changed else change.message))
    return 0


def cmd_add(args: argparse.Namespace) -> int:
    return _write(args, "add", args.text)


def cmd_replace(args: argparse.Namespace) -> int:
    return _write(args, "replace", args.old, args.new)


def cmd_remove(args: argparse.Namespace) -> int:
    return _write(args, "remove", args.text)


@stops_in_words
def cmd_clear(args: argparse.Namespace) -> int:
    from tether.cli.signals import Terminated, sigterm_held, terminated

    memory = _memory(args)
    names = [args.store] if args.store else list(memory.stores)
    try:
        if not args.yes and not _confirmed(memory, names):
            return 2
    except Terminated:
        raise Terminated("nothing was cleared") from None
    with sigterm_held():  # a clear the person confirmed is made whole: every store named, not the first alone
        cleared = [memory.clear(name) for name in names]  # before a word: stdout's reader may be gone (| head)
    for change in cleared:
        print(change.message, flush=True)
    if terminated():
        empty = f"{' and '.join(names)} {'are' if len(names) > 1 else 'is'} empty"
        raise Terminated(f"it came while clearing, which was finished first: {empty}")
    return 0


def _confirmed(memory: Memory, names: list[str]) -> bool:
    """Ask at a terminal; anywhere else, refuse without --yes (nothing is cleared)."""
    what = " and ".join(f"{name} ({memory.store(name).path})" for name in names)
    if sys.stdin is None or not sys.stdin.isatty():  # None: started with stdin closed
        print(f"tether: clearing {what} needs --yes when not at a terminal; nothing was cleared", file=sys.stderr)
        return False
    from tether.cli.signals import reads_hear_signals

    with reads_hear_signals():  # SIGTERM just before the read still stops it
        print(f"Clear {what}? Every entry is deleted. [y/N] ", end="", file=sys.stderr, flush=True)
        answer = sys.stdin.readline()  # "" at end of input: no
    if answer.strip().lower() in ("y", "yes"):
        return True
    print("nothing was cleared", file=sys.stderr)
    return False
