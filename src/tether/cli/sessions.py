"""``tether sessions list | show NAME | export NAME | delete NAME``.

``--session-store`` may come before or after the subcommand (``tether sessions list
--session-store sqlite`` and ``tether sessions --session-store sqlite list`` are the same).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
from typing import TYPE_CHECKING, Any

from tether.cli.common import add_session_store_option, open_sessions, run_store, session_name, usage_error
from tether.cli.common import settings as load_settings

if TYPE_CHECKING:
    from tether.config import Settings
    from tether.sessions import SessionStore

__all__ = ["add_parsers"]


def add_parsers(sub: Any) -> None:
    ss = sub.add_parser("sessions", help="list, show, export or delete sessions")
    add_session_store_option(ss)
    sss = ss.add_subparsers(dest="sessions_command", required=True, metavar="{list,show,export,delete}")
    listing = sss.add_parser("list", help="sessions with their message counts")
    add_session_store_option(listing, nested=True)
    listing.add_argument("--json", action="store_true", help="print the sessions as one JSON array")
    for name, help_text in (
        ("show", "print a session's transcript"),
        ("export", "print it as JSON lines"),
        ("delete", "delete a session"),
    ):
        sp = sss.add_parser(name, help=help_text)
        sp.add_argument("session", metavar="NAME", type=session_name)
        add_session_store_option(sp, nested=True)
        if name == "show":
            sp.add_argument("--full", action="store_true", help="print long messages whole")
    ss.set_defaults(handler=cmd_sessions)


def cmd_sessions(args: argparse.Namespace) -> int:
    from tether.errors import StoreError

    try:
        return _sessions(args)
    except BrokenPipeError:  # stdout's reader left (| head): not the store's problem (tether.cli.main)
        raise
    except OSError as exc:  # a file the store cannot read or write (its mode, its owner, a full disk)
        what = f"{exc.strerror or exc}: {exc.filename}" if exc.filename else str(exc.strerror or exc)
        raise StoreError(
            f"cannot use the sessions: {what}. Check that file's owner and mode, and the disk's room"
        ) from exc
    except Exception as exc:
        import sqlite3

        if not isinstance(exc, sqlite3.Error):
            raise
        # The SQLite store's database refused (full, locked by another process for too long, damaged).
        raise StoreError(f"the session database refused: {exc}. Check the disk's room and the database") from exc


def _sessions(args: argparse.Namespace) -> int:
    from tether.sessions import export_jsonl

    settings = load_settings()
    store = open_sessions(args.session_store, settings)
    command = args.sessions_command
    if command == "list":
        rows = store.list()
        if args.json:
            items = [{"session_id": i.session_id, "messages": i.messages, "updated_at": i.updated_at} for i in rows]
            print(json.dumps(items, ensure_ascii=False, indent=1))
            return 0
        if not rows:
            print("no sessions yet", file=sys.stderr)
        for info in rows:
            print(f"{info.session_id:30} {info.messages:>6} messages")
        return 0
    _check_exists(store, args.session, args.session_store)
    if command == "delete":
        with _not_continued(args.session, settings):
            store.delete(args.session)
        print(f"deleted session {args.session}", file=sys.stderr)
        return 0
    messages = store.load(args.session)
    if command == "export":
        sys.stdout.write(export_jsonl(messages))
        return 0
    from tether.cli.display import transcript_lines

    if not messages:
        print(f"session {args.session} has no messages", file=sys.stderr)
    for line in transcript_lines(messages, full=args.full, full_hint=f"tether sessions show {args.session} --full"):
        print(line)  # control characters escaped (a tool's result is text from outside)
    return 0


def _not_continued(name: str, settings: Settings) -> contextlib.AbstractContextManager[None]:
    """The session held as a run holds it (its run store's session lock), so that no run continues
    it while it is deleted: the run's next messages would make it again, a fragment without its
    beginning, after `deleted session`. A run on it now refuses the deletion, and names itself."""
    return run_store(settings).lock_session(  # files or Postgres: each holds it as a run does
        name,
        "",
        holder="tether sessions delete",
        then="nothing was deleted. Wait for that run to stop (or stop it), then delete the session",
    )


def _check_exists(store: SessionStore, name: str, spec: str | None) -> None:
    """Listing first: loading a session that does not exist would create its files."""
    from tether.sessions import JsonlSessionStore

    if any(info.session_id == name for info in store.list()):
        return
    if (
        isinstance(store, JsonlSessionStore)
        and os.path.isfile(store.path(name))
        and not os.path.islink(store.path(name))
    ):
        return  # a file the listing could not read: the command says why (not that there is none)
    elsewhere = "" if spec else " (sessions kept elsewhere need --session-store)"
    raise usage_error(f"there is no session {name!r}{elsewhere}; `tether sessions list` lists them")
