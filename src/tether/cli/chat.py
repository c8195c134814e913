"""``tether chat``: an interactive conversation kept in a session, with a few commands.

A line that starts with ``/`` and a word (``/help``) is a command, never sent to the model; an
unknown one gets a hint. ``//text`` sends ``/text``. Ctrl-C stops a reply; Ctrl-D or ``/exit`` leaves.
"""

from __future__ import annotations

import argparse
import re
import sys
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from tether.cli.common import add_session_store_option, open_sessions, session_name
from tether.cli.common import settings as load_settings
from tether.cli.run import (
    READER_GONE,
    STDOUT_FAILED,
    Printer,
    add_agent_options,
    at_terminal,
    check_home,
    drive,
    is_utf8,
    overrides,
)
from tether.cli.signals import TERMINATED, Terminated, ask, run_stoppable, sigterm_held, terminated

if TYPE_CHECKING:
    from tether.assembly import Recipe
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
        "\n  /PROMPT k=v  an MCP server's prompt (or /SERVER:PROMPT), sent as your message"
        "\n  @SERVER:URI  in a message: that MCP resource is read and sent with it"
        '\n  //text     send "/text" (a message that starts with /)'
        "\nCtrl-C stops the reply being written; at the prompt it leaves."
    )
)

_COMMAND = re.compile(r"/([A-Za-z][\w:.-]*)(\s.*)?")


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
    add_agent_options(ch, per=" per message")
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
    recipe: Recipe  # the agent, resolved once: every message's run builds the same one
    session: str
    store_spec: str | None


def cmd_chat(args: argparse.Namespace) -> int:
    from tether.assembly import plan

    settings = load_settings()
    recipe = plan(settings, args.agent, overrides(args, completed_turns="answers"))
    open_sessions(args.session_store, settings)  # a store that cannot open is refused now, not at the first message
    check_home(settings)  # so are runs that cannot be kept: before the person types a message it would lose
    from tether.providers.registry import resolve_provider

    for model in (recipe.model, *recipe.fallback_models):
        resolve_provider(model, settings)  # and a model that cannot run here: a key not set, an unknown name
    chat = _Chat(settings, recipe, args.session or _new_session_name(), args.session_store)
    print(
        f"tether chat: {recipe.model} in {recipe.cwd}, session {chat.session!r} "
        "(/help lists commands, Ctrl-C stops a reply, Ctrl-D leaves)",
        file=sys.stderr,
    )
    Printer(settings, quiet=False, asking=False).show_sandbox()  # once, not before every reply
    try:
        with sigterm_held():  # SIGTERM at the prompt or a question ends the chat in words (exit 130)
            return _loop(chat)
    except (KeyboardInterrupt, Terminated):  # Ctrl-C at the prompt leaves; during a reply it only stops the reply
        print(file=sys.stderr)
        return 130


def _loop(chat: _Chat) -> int:
    from tether.harness.state import RunState

    while True:
        line = ask("you> ")
        if line is None:
            return 0
        if not is_utf8(line):  # as tether run refuses it: sent, each such byte would reach the model as "\ufffd"
            print(
                "that line is not UTF-8 text (a byte of another encoding, such as Latin-1's é); nothing was "
                "sent. Convert it (iconv -f LATIN1 -t UTF-8) and send it again",
                file=sys.stderr,
            )
            continue
        message, command = parse_line(line)
        if command in ("/exit", "/quit"):
            return 0
        if command is not None and command not in COMMANDS and chat.recipe.mcp:
            message = _prompt(chat, line)  # an MCP server's prompt, filled in, is the message
        elif command is not None:
            _command(chat, command)
            continue
        if message is None or not message.strip():
            continue
        if chat.recipe.mcp:
            message = _with_mentions(chat, message)  # the resources it mentions go with it
            if message is None:
                continue
        config = {**chat.recipe.config(), "session_store": chat.store_spec, "prompt": message[:200]}
        state = RunState(session_id=chat.session, ext={"config": config})
        # Approvals are asked at a terminal only: from a pipe the next line is the next message,
        # never an answer ("yes" would allow the call), and the run waits for `tether resume`.
        code = drive(state, message, chat.settings, json_out=False, asking=at_terminal(False), sandbox_line=False)
        if code == READER_GONE or str(getattr(state.interruption, "reason", "")).startswith(STDOUT_FAILED):
            return code  # stdout's reader gone, or it cannot be written (a full disk): the chat ends (141, 1)
        if getattr(state.interruption, "reason", None) == TERMINATED or terminated():
            return 130  # stopped from outside (kill, a service manager), during the reply or at its question


def _command(chat: _Chat, command: str) -> None:
    if command == "/help":
        print(CHAT_HELP, file=sys.stderr)
    elif command == "/session":
        print(f"session {chat.session!r}", file=sys.stderr)
    elif command == "/memory":
        if chat.recipe.memory is None:
            print("memory is off for this chat (--no-memory, or [memory] enabled = false)", file=sys.stderr)
        else:
            from tether.cli.memory import open_memory, print_memory

            print_memory(open_memory(chat.settings, chat.recipe.memory, chat.recipe.cwd))
    elif command == "/reset":
        chat.session = _new_session_name()
        print(f"new session {chat.session!r}", file=sys.stderr)
    else:
        import difflib

        near = difflib.get_close_matches(command, list(COMMANDS), n=1, cutoff=0.6)
        meant = f"did you mean {near[0]}? " if near else ""
        print(
            f"{command} is not a command ({meant}/help lists them); to send a message that starts with /, "
            f"write /{command}",
            file=sys.stderr,
        )


def _prompt(chat: _Chat, line: str) -> str | None:
    """``/PROMPT key=value ...`` (or ``/SERVER:PROMPT``): the prompt of one of the agent's MCP
    servers, filled in, as the user's message; None (and why, on stderr) when there is none."""

    from tether.connectors.prompts import expand_prompt, parse_prompt_line
    from tether.errors import TetherError

    name = line.strip()[1:].partition(" ")[0]
    try:
        server, _, _ = parse_prompt_line(line)
        # SIGTERM while a server starts or answers stops it there (Terminated: the chat ends, exit 130)
        found = run_stoppable(expand_prompt(_chat_connectors(chat, [server] if server else chat.recipe.mcp), line))
    except TetherError as exc:
        print(exc if str(exc).startswith("/") else f"/{name}: {exc}", file=sys.stderr)
        return None
    if found is None:
        where = ", ".join([server] if server else chat.recipe.mcp)
        print(f"/{name} is neither a command (/help lists them) nor a prompt of {where}", file=sys.stderr)
    return found


def _with_mentions(chat: _Chat, message: str) -> str | None:
    """``message`` with the resources it mentions (``@SERVER:URI``) appended; None (and why, on
    stderr) when one cannot be read: nothing is sent."""

    from tether.connectors.mentions import expand_mentions, mentions
    from tether.errors import TetherError

    named = {server for server, _ in mentions(message)} & set(chat.recipe.mcp)
    if not named:
        return message
    try:
        return run_stoppable(expand_mentions(_chat_connectors(chat, sorted(named)), message))
    except TetherError as exc:
        print(f"{exc}; nothing was sent", file=sys.stderr)
        return None


def _chat_connectors(chat: _Chat, servers: list[str]) -> list[Any]:
    """Fresh connections to these of the chat's MCP servers (never the ones its runs use)."""
    from tether.connectors import McpConnector

    tables = [(s, chat.settings.mcp.get(s)) for s in servers if s in chat.recipe.mcp]
    return [McpConnector(s, t.model_dump(), home=chat.settings.home) for s, t in tables if t is not None]


def _new_session_name() -> str:
    import secrets
    import time

    return time.strftime("chat-%Y%m%d-%H%M%S-") + secrets.token_hex(2)
