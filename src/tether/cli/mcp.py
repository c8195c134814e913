"""``tether mcp``: the MCP servers of config.toml (``[mcp.NAME]``) whose tools agents may use.

``list`` tries each server and shows its tools with their approval policy; ``login`` stores the
OAuth tokens of a server with ``auth = "oauth"``; ``tether run --mcp NAME`` gives an agent a
server's tools (``--mcp all``: every enabled server). See tether.connectors.
"""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING, Any

from tether.cli.common import (
    non_negative_float,
    one_word,
    port_number,
    positive_float,
    secret_token,
    stops_in_words,
    text,
    usage_error,
)
from tether.cli.common import settings as load_settings

if TYPE_CHECKING:
    from pathlib import Path

    from tether.config import McpTable, Settings
    from tether.connectors import McpTool

__all__ = ["add_parsers"]

LIST_TIMEOUT_S = 10.0
REFRESH_ENV = "TETHER_MCP_REFRESH_TOKEN"
ACCESS_ENV = "TETHER_MCP_ACCESS_TOKEN"
LOGIN_DESCRIPTION = f"""Sign in to a server with auth = "oauth"; its tokens are stored readable only by you.

Without token_url in its [mcp.NAME], tether discovers the server's authorization server, registers
itself there and opens the sign-in page in your browser (the redirect comes back to 127.0.0.1).

With token_url, give the refresh token from stdin, from ${REFRESH_ENV}, or on the command line:

  tether mcp login calendar --refresh-token - < token.txt
  {REFRESH_ENV}=... tether mcp login calendar
  tether mcp login calendar --refresh-token TOKEN   (shows in ps and in your shell's history)
"""


def add_parsers(sub: Any) -> None:
    m = sub.add_parser(
        "mcp",
        help="MCP servers whose tools agents can use ([mcp.NAME] in config.toml)",
        description=(__doc__ or "").replace("``", ""),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    ms = m.add_subparsers(dest="mcp_command", required=True)
    ls = ms.add_parser("list", help="each configured server: how it is reached, whether it answers, its tools")
    ls.add_argument(
        "--timeout",
        type=positive_float,
        default=LIST_TIMEOUT_S,
        metavar="S",
        help=f"how long to wait for each server to answer (> 0, default {LIST_TIMEOUT_S:g})",
    )
    ls.set_defaults(handler=cmd_list)
    login = ms.add_parser(
        "login",
        help='store OAuth tokens for a server with auth = "oauth" (mode 0600 under $TETHER_HOME/auth)',
        description=LOGIN_DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    login.add_argument("server", metavar="NAME")
    login.add_argument(
        "--refresh-token",
        type=text,
        metavar="TOKEN",
        help=f"'-' reads it from stdin (recommended), or leave it out and set {REFRESH_ENV}; "
        "a token written here shows in ps and in the shell's history",
    )
    login.add_argument("--access-token", default=None, metavar="TOKEN", help=f"optional; default ${ACCESS_ENV}, if set")
    login.add_argument(
        "--expires-in",
        type=non_negative_float,
        default=0.0,
        metavar="S",
        help="seconds the access token stays valid (>= 0)",
    )
    login.set_defaults(handler=cmd_login)
    res = ms.add_parser("resources", help="a server's resources and templates, or one resource read (URI)")
    res.add_argument("server", metavar="NAME")
    res.add_argument("uri", nargs="?", metavar="URI", help="read this resource instead of listing them")
    res.add_argument(
        "--watch",
        action="store_true",
        help="with URI: subscribe, and read it again each time the server says it changed (Ctrl-C stops)",
    )
    res.set_defaults(handler=cmd_resources)
    prompts = ms.add_parser("prompts", help="a server's prompts, or one prompt's messages (PROMPT KEY=VALUE ...)")
    prompts.add_argument("server", metavar="NAME")
    prompts.add_argument("prompt", nargs="?", metavar="PROMPT", help="show this prompt's messages, filled in")
    prompts.add_argument("arguments", nargs="*", metavar="KEY=VALUE", help="the prompt's arguments")
    prompts.set_defaults(handler=cmd_prompts)
    _add_serve(ms)


# --- `tether mcp serve`: the command line of the MCP door (tether.connectors.serve) ---------------


def _add_serve(subparsers: Any) -> None:
    from tether.connectors.serve import DEFAULT_PORT, HELP

    s = subparsers.add_parser(
        "serve",
        help="serve tether's knowledge bases, memory and agents over MCP",
        description=HELP,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    s.add_argument("--http", action="store_true", help="streamable HTTP at http://HOST:PORT/mcp instead of stdio")
    s.add_argument("--host", help="with --http: the address to listen on (default 127.0.0.1)")
    s.add_argument(
        "--port",
        type=port_number,
        help=f"with --http: the port to listen on (default {DEFAULT_PORT}; 0: any free port)",
    )
    s.add_argument(
        "--agent",
        metavar="FILE_OR_MODULE",
        help="a Python file or module defining `agent` or `agents` to offer as tools (default: [agents.NAME])",
    )
    s.add_argument(
        "--allow-remote",
        action="store_true",
        help="with --http: listen beyond loopback; needs tokens (tether serve token create NAME)",
    )
    s.set_defaults(handler=_cmd_serve)


def _cmd_serve(args: argparse.Namespace) -> int:
    from tether.cli.serve import EXIT_CANNOT_LISTEN, cannot_listen
    from tether.connectors.serve import CannotListen, cmd_serve

    if not args.http and sys.stdin is None:  # started with stdin closed (<&-): no client can speak
        raise usage_error(
            "tether mcp serve speaks MCP on standard input and output, and standard input is closed: "
            "let an MCP client start it (it connects to both), or serve over HTTP with --http"
        )
    try:
        return cmd_serve(args)
    except CannotListen as exc:  # as `tether serve` says it, with its exit code
        print(f"tether mcp serve: {cannot_listen(exc.host, exc.port, exc.error)}", file=sys.stderr)
        return EXIT_CANNOT_LISTEN


# --- the commands ---------------------------------------------------------------------------------


@stops_in_words  # while it waits for the servers: each one it started is stopped first
def cmd_list(args: argparse.Namespace) -> int:
    from tether.cli.signals import run_stoppable

    settings = load_settings()
    if not settings.mcp:
        print(f"no MCP servers: add an [mcp.NAME] table to {settings.home / 'config.toml'}", file=sys.stderr)
        return 0
    from tether.harness.context import without_secrets  # a server's last words may quote a secret of its args

    reports = run_stoppable(_probe_all(settings, args.timeout))
    for lines in reports:
        print(without_secrets("\n".join(lines)))
    clashes = _clashes(settings)
    for clash in clashes:
        print(f"not usable together: {clash}")
    return 1 if clashes or any(" not working: " in lines[1] for lines in reports) else 0


def _clashes(settings: Settings) -> list[str]:
    """Why two enabled servers cannot be given to one agent (their tools' names would be alike)."""
    from tether.connectors.mcp import name_clash

    names = [name for name, table in settings.mcp.items() if table.enabled]
    return [c for i, a in enumerate(names) for b in names[i + 1 :] if (c := name_clash(a, b)) is not None]


async def _probe_all(settings: Settings, timeout: float) -> list[list[str]]:
    import asyncio

    return list(await asyncio.gather(*(_probe(settings, name, timeout) for name in settings.mcp)))


async def _probe(settings: Settings, name: str, timeout: float) -> list[str]:
    from tether.config import redacted
    from tether.connectors import McpConnector
    from tether.errors import TetherError

    table = settings.mcp[name]
    # A secret in its arguments or URL (--api-key X, ?token=X) is shown <redacted>.
    if table.command is not None:
        head = f"{name}  stdio  {' '.join([table.command, *redacted(table.args, 'args')])}"
    else:
        head = f"{name}  http  {redacted(table.url, 'url')}" + ("  (oauth)" if table.auth == "oauth" else "")
    if not table.enabled:
        return [head, "  disabled (enabled = false)"]
    connector = McpConnector(name, table.model_dump(), home=settings.home, start_timeout_s=timeout)
    try:
        await connector.start()
    except TetherError as exc:
        return [head, f"  not working: {exc}"]
    try:
        from tether.connectors import McpTool
        from tether.connectors.mcp import lends, near_name

        def lent(unknown: str, tool: str) -> bool:
            return lends(table.tools[unknown], table.approval) and near_name(unknown, tool)

        tools = [t for t in connector.tools() if isinstance(t, McpTool)]
        extra = [t.name for t in connector.tools() if not isinstance(t, McpTool)]
        lines = [head, f"  ok: {len(tools)} tool{'s' if len(tools) != 1 else ''}"]
        width = max((len(t.name) for t in tools), default=0)
        for t in tools:
            lender = next((u for u in connector.unknown_overrides if lent(u, t.server_tool)), None)
            written = t.server_tool if t.server_tool in table.tools else lender
            lines.append(f"  {t.name:{width}}  {approval_words(t, written)}")
        lines += [f"  resources: {', '.join(extra)} (read-only: runs without asking)"] if extra else []
        lines += [f"  left out: {tool}: {why}" for tool, why in connector.refused.items()]
        lines += [f"  trimmed: {tool}: {what}" for tool, what in connector.trimmed.items()]
        lines += [
            f"  [mcp.{name}] tools names {unknown}: the server has no such tool"
            + (f" (did you mean {', '.join(near)}? it asks as {unknown} says meanwhile)" if near else "")
            for unknown in connector.unknown_overrides
            for near in [[t.server_tool for t in tools if lent(unknown, t.server_tool)]]
        ]
        return lines
    finally:
        await connector.stop()


def approval_words(tool: McpTool, written: str | None) -> str:
    """How a tool's calls are approved, in words; ``written``: the ``tools`` entry its policy
    comes from (its own name, or a misspelling of it), if any."""
    source = f'tools.{written} = "{tool.policy}"' if written else f'approval = "{tool.policy}"'
    if tool.policy == "always":
        return f"asks first ({source})"
    if tool.policy == "never":
        return f"runs without asking ({source})"
    if tool.read_only:
        return "read-only: runs without asking" + ("; answers reused in a run (cache)" if tool.cacheable else "")
    return "asks first (destructive)" if tool.needs_approval else "runs without asking (marked not destructive)"


@stops_in_words  # at the token's question (its echo put back) and while the browser's sign-in is awaited
def cmd_login(args: argparse.Namespace) -> int:
    import os
    import time

    from tether.connectors import token_path
    from tether.providers.auth import save_oauth_tokens

    settings = load_settings()
    table = settings.mcp.get(args.server)
    if table is None:
        raise _no_server(settings, args.server)
    if table.auth != "oauth":
        raise usage_error(f'[mcp.{args.server}] has auth = "{table.auth}": tokens are for auth = "oauth"')
    if table.token_url is None and args.refresh_token is None and not os.environ.get(REFRESH_ENV):
        return _browser_login(settings, args.server, table)
    refresh_token = secret_token(args.refresh_token, "--refresh-token", REFRESH_ENV)
    if args.access_token is not None:
        access_token = one_word(args.access_token, "--access-token")
    else:
        access_token = one_word(os.environ.get(ACCESS_ENV, ""), f"${ACCESS_ENV}")
    path = token_path(settings.home, args.server)
    save_oauth_tokens(
        path,
        {
            "access_token": access_token,
            "refresh_token": refresh_token,
            "expires_at": time.time() + args.expires_in if access_token else 0,
        },
    )
    print(f"stored tokens for the MCP server {args.server} in {path} (mode 0600)", file=sys.stderr)
    return 0


def _no_server(settings: Any, name: str) -> Exception:
    """No ``[mcp.NAME]``: said with the servers there are, as ``--mcp NAME`` says it."""
    known = ", ".join(settings.mcp) or "none"
    return usage_error(f"no [mcp.{name}] in {settings.home / 'config.toml'} (configured: {known})")


# --- resources and prompts ------------------------------------------------------------------------


def _with_server(name: str, work: Any) -> Any:
    """``await work(connector)`` with the server ``name`` started, then stopped."""
    from tether.errors import TetherError

    settings = load_settings()
    table = settings.mcp.get(name)
    if table is None:
        raise _no_server(settings, name)
    from tether.connectors import McpConnector

    connector = McpConnector(name, table.model_dump(), home=settings.home)

    async def go() -> Any:
        await connector.start()
        try:
            return await work(connector)
        finally:
            await connector.stop()

    from tether.cli.signals import run_stoppable

    try:
        return run_stoppable(go())  # SIGTERM stops it (a --watch waits until then), the server stopped
    except TetherError as exc:
        raise usage_error(str(exc)) from None


def _printable(text: str) -> str:
    """A server's text with its control characters shown, not obeyed (an escape sequence could set
    the window title, write the clipboard or clear the screen)."""
    return "".join(c if c in "\n\t" or c.isprintable() else repr(c)[1:-1] for c in text)


@stops_in_words
def cmd_resources(args: argparse.Namespace) -> int:
    from tether.connectors._resources import list_text, read_parts
    from tether.messages import TextPart

    if args.uri is None:
        if args.watch:
            raise usage_error("--watch needs the URI of the resource to watch")
        print(_printable(_with_server(args.server, list_text)))
        return 0

    def show(parts: list[Any]) -> None:
        for part in parts:
            print(_printable(part.text) if isinstance(part, TextPart) else f"[image ({part.media_type})]", flush=True)

    async def watch(connector: Any) -> None:
        show(await read_parts(connector, args.uri))
        async for uri in connector.watch(args.uri):
            print(f"--- {uri} changed ---", flush=True)
            show(await read_parts(connector, uri))

    if args.watch:
        try:
            _with_server(args.server, watch)
        except KeyboardInterrupt:
            return 130
        return 0
    show(_with_server(args.server, lambda c: read_parts(c, args.uri)))
    return 0


@stops_in_words
def cmd_prompts(args: argparse.Namespace) -> int:
    from tether.connectors._resources import prompts_text
    from tether.connectors.prompts import filled_prompt

    if args.prompt is None:
        print(_printable(_with_server(args.server, prompts_text)))
        return 0
    bad = [a for a in args.arguments if "=" not in a]
    if bad:
        raise usage_error(f"prompt arguments are KEY=VALUE, not {bad[0]!r}")
    arguments = dict(a.split("=", 1) for a in args.arguments)
    for role, said in _with_server(args.server, lambda c: filled_prompt(c, args.prompt, arguments)):
        print(f"[{role}]\n{_printable(said)}")
    return 0


def _browser_login(settings: Settings, name: str, table: McpTable) -> int:
    """The MCP authorization flow: discover the server's authorization server, register tether
    with it, and sign in through the browser, the redirect caught on loopback."""
    import asyncio
    import webbrowser

    from tether.cli.signals import Terminated, run_stoppable
    from tether.connectors import McpConnector, token_path
    from tether.connectors._oauth import Loopback, oauth_provider
    from tether.errors import TetherError

    path = token_path(settings.home, name)
    loopback = Loopback()

    async def open_page(url: str) -> None:
        print(f"Sign in to the MCP server {name} in your browser (opening it now):\n  {url}", file=sys.stderr)
        await asyncio.to_thread(webbrowser.open, url)

    connector = McpConnector(name, table.model_dump(), home=settings.home)
    connector.oauth_flow = oauth_provider(
        name, str(table.url), path, list(table.scopes), loopback=loopback, open_page=open_page
    )

    async def sign_in() -> int:
        await connector.start()
        await connector.stop()
        return len(connector.tools())

    before = _tokens_of(path)
    try:
        tools = run_stoppable(sign_in())
    except TetherError as exc:
        raise usage_error(f"signing in to the MCP server {name} failed: {exc}") from None
    except Terminated:
        kept = "no new tokens were stored" if _tokens_of(path) == before else f"its tokens are stored in {path}"
        raise Terminated(f"the sign-in to the MCP server {name} was stopped; {kept}") from None
    finally:
        loopback.close()
    print(f"signed in to the MCP server {name} ({tools} tools); tokens stored in {path} (mode 0600)", file=sys.stderr)
    return 0


def _tokens_of(path: Path) -> Any:
    """The tokens a token file holds now (None: none), to say whether a stopped sign-in stored any."""
    import json

    try:
        return json.loads(path.read_bytes()).get("tokens")
    except (OSError, ValueError, AttributeError):
        return None
