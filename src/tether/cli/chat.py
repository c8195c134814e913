"""``tether chat``: an interactive conversation kept in a session, with a few commands.

A line that starts with ``/`` and a word (``/help``) is a command, never sent to the model; an
unknown one gets a hint. ``//text`` sends ``/text``. Ctrl-C stops a reply; Ctrl-D or ``/exit`` leaves.
"""

from __future__ import annotations

import argparse
import re
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tether.cli.common import (
    add_session_store_option,
    directory,
    open_sessions,
    positive_float,
    positive_int,
    session_name,
    text,
)
from tether.cli.common import settings as load_settings
from tether.cli.kb import check_kbs, kb_name
from tether.cli.mcp import check_mcp
from tether.cli.memory import add_memory_options, memory_for_run
from tether.cli.run import DEFAULT_MAX_TURNS, ask, drive
from tether.cli.skills import add_skills_options, skills_for_run

if TYPE_CHECKING:
    from tether.config import Settings

__all__ = ["COMMANDS", "add_parsers", "parse_line"]

COMMANDS = {
    "/help": "list these commands",
    "/session": "show the session's name (resume it later with tether chat --session NAME)",
    "/reset": "start a new session (the old one is kept)",
    "/memory": "show what the agent remembers across sessions (tether memory edits it)",
    "/exit": "leave (so do /quit and Ctrl-D)",
    "/quit": "leave",
}

CHAT_HELP = (
    "Commands inside the chat:\n"
    + "\n".join(f"  {name:10} {what}" for name, what in COMMANDS.items())
    + (
        '\n  //text     send "/text" (a message that starts with /)'
        "\nCtrl-C stops the reply being written; at the prompt it leaves."
    )
)

_COMMAND = re.compile(r"/([A-Za-z][\w-]*)(\s.*)?")


def add_parsers(sub: Any) -> None:
    ch = sub.add_parser(
        "chat",
        help="an interactive chat in the terminal, kept in a session",
        description=CHAT_HELP,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    ch.add_argument(
        "--session", metavar="NAME", type=session_name, help="the conversation to continue (default: a new one)"
    )
    add_session_store_option(ch)
    ch.add_argument("--model", help="provider/model (default: $TETHER_MODEL or config.toml)")
    ch.add_argument("--cwd", type=directory, default=".", metavar="DIR", help="the directory the file tools work in")
    ch.add_argument(
        "--max-turns",
        type=positive_int,
        metavar="N",
        help=f"model calls per message (N >= 1, default {DEFAULT_MAX_TURNS})",
    )
    ch.add_argument("--max-budget", type=positive_float, metavar="USD", help="budget per message (> 0)")
    add_memory_options(ch)
    add_skills_options(ch)
    ch.add_argument(
        "--kb",
        action="append",
        type=kb_name,
        default=[],
        metavar="NAME",
        help="give the agent this knowledge base's tools (repeatable)",
    )
    ch.add_argument(
        "--mcp",
        action="append",
        type=text,
        default=[],
        metavar="NAME",
        help="give the agent the tools of the MCP server [mcp.NAME] (repeatable; all: every enabled one)",
    )
    ch.set_defaults(handler=cmd_chat)


def parse_line(line: str) -> tuple[str | None, str | None]:
    """``(message, None)`` to send, or ``(None, "/command")``."""
    stripped = line.strip()
    if stripped.startswith("//"):
        return stripped[1:], None
    match = _COMMAND.fullmatch(stripped)
    if match:
        return None, "/" + match.group(1).lower()
    return line, None


@dataclass
class _Chat:
    settings: Settings
    model: str
    cwd: Path
    session: str
    store_spec: str | None
    max_turns: int
    max_budget: float | None
    memory: str | None = None  # the memory scope, or None when memory is off
    kb: tuple[str, ...] = ()  # knowledge bases whose tools the agent has
    skills: bool = True  # offer the skills found in cwd (False: --no-skills, or [skills] enabled = false)
    mcp: tuple[str, ...] = ()  # MCP servers whose tools the agent has (started for each message's run)


def cmd_chat(args: argparse.Namespace) -> int:
    from tether.config import resolve_model
    from tether.providers.registry import canonical_model

    settings = load_settings()
    model = canonical_model(resolve_model(args.model, settings))
    open_sessions(args.session_store, settings)  # a store that cannot open is refused now, not at the first message
    check_kbs(settings, args.kb)
    chat = _Chat(
        settings,
        model,
        args.cwd,
        args.session or _new_session_name(),
        args.session_store,
        args.max_turns or DEFAULT_MAX_TURNS,
        args.max_budget,
        memory_for_run(args, settings),
        tuple(args.kb),
        skills_for_run(args, settings),
        mcp=tuple(check_mcp(settings, args.mcp)),
    )
    print(
        f"tether chat: {model} in {chat.cwd}, session {chat.session!r} "
        "(/help lists commands, Ctrl-C stops a reply, Ctrl-D leaves)",
        file=sys.stderr,
    )
    try:
        return _loop(chat)
    except KeyboardInterrupt:  # Ctrl-C at the prompt leaves; during a reply it only stops the reply
        print(file=sys.stderr)
        return 130


def _loop(chat: _Chat) -> int:
    from tether.harness.state import RunState

    while True:
        line = ask("you> ")
        if line is None:
            return 0
        message, command = parse_line(line)
        if command in ("/exit", "/quit"):
            return 0
        if command is not None:
            _command(chat, command)
            continue
        if message is None or not message.strip():
            continue
        state = RunState(
            session_id=chat.session,
            config={
                "model": chat.model,
                "cwd": str(chat.cwd),
                "max_turns": chat.max_turns,
                "max_budget_usd": chat.max_budget,
                "session_store": chat.store_spec,
                "prompt": message[:200],
                "fallback_models": list(chat.settings.fallback_models),
                "memory": chat.memory,
                "kb": list(chat.kb),
                "skills": chat.skills,
                "mcp": list(chat.mcp),
            },
        )
        drive(state, message, chat.settings, json_out=False, asking=True)


def _command(chat: _Chat, command: str) -> None:
    if command == "/help":
        print(CHAT_HELP, file=sys.stderr)
    elif command == "/session":
        print(f"session {chat.session!r}", file=sys.stderr)
    elif command == "/memory":
        if chat.memory is None:
            print("memory is off for this chat (--no-memory, or [memory] enabled = false)", file=sys.stderr)
        else:
            from tether.cli.memory import open_memory, print_memory

            print_memory(open_memory(chat.settings, chat.memory, chat.cwd))
    elif command == "/reset":
        chat.session = _new_session_name()
        print(f"new session {chat.session!r}", file=sys.stderr)
    else:
        print(
            f"{command} is not a command (/help lists them); to send a message that starts with /, write /{command}",
            file=sys.stderr,
        )


def _new_session_name() -> str:
    import secrets
    import time

    return time.strftime("chat-%Y%m%d-%H%M%S-") + secrets.token_hex(2)
