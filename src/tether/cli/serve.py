"""``tether serve``: the HTTP API and the page (uvicorn); ``tether serve token create NAME | list |
revoke NAME``: the bearer tokens that let users in (stored hashed; shown once)."""

from __future__ import annotations

import argparse
import errno
import ipaddress
import socket
import sys
from typing import Any

from tether.cli.common import directory, usage_error
from tether.cli.common import settings as load_settings
from tether.cli.signals import hand_over_sigterm

__all__ = ["EXIT_CANNOT_LISTEN", "add_parsers", "cannot_listen", "check_models", "default_agent_flags"]

EXIT_CANNOT_LISTEN = 6  # the address is busy or not allowed; 3 is max_turns_exceeded everywhere else

SERVE_HELP = """\
Serves the agents of --agent FILE_OR_MODULE (which defines `agent` or `agents`), else those of
[agents.NAME] in config.toml (the same agents `tether run --agent NAME` runs), else one agent
like `tether run`'s (--model, --cwd).
The API is under /v1 (its OpenAPI document at /openapi.json), the page at /.
Without tokens the server answers on loopback only; create one with `tether serve token create NAME`.
"""


def add_parsers(sub: Any) -> None:
    s = sub.add_parser(
        "serve",
        help="serve agents over HTTP, with a web page",
        description=SERVE_HELP,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    s.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1)")
    s.add_argument("--port", type=_port, default=8000, help="port to listen on (default 8000; 0: any free port)")
    s.add_argument("--agent", metavar="FILE_OR_MODULE", help="a Python file or module defining `agent` or `agents`")
    s.add_argument("--model", help="the default agent's model (when no agent is configured)")
    s.add_argument("--cwd", type=directory, metavar="DIR", help="the default agent's working directory")
    s.add_argument(
        "--workers",
        choices=("internal", "external"),
        default="internal",
        help="internal: runs run in this process (default); external: queued for `tether worker` "
        "processes (needs database_url and [dispatch] broker_url)",
    )
    s.add_argument(
        "--run-processes",
        type=_count,
        metavar="N",
        help="drive the runs in N processes of their own, to use more cores (default: [serve] "
        "run_processes, else 0: in the server's process)",
    )
    s.set_defaults(handler=cmd_serve)
    ss = s.add_subparsers(dest="serve_command", metavar="{token}")
    tok = ss.add_parser("token", help="create, list or revoke API tokens")
    ts = tok.add_subparsers(dest="token_command", required=True, metavar="{create,list,revoke}")
    create = ts.add_parser("create", help="make a token for user NAME (printed once)")
    create.add_argument("name", metavar="NAME", type=_user)
    ts.add_parser("list", help="the users that have a token")
    revoke = ts.add_parser("revoke", help="revoke NAME's token")
    revoke.add_argument("name", metavar="NAME", type=_user)
    tok.set_defaults(handler=cmd_token)


def _whole(what: str, low: int, high: int) -> Any:
    """An argparse type: a whole number from ``low`` to ``high``, else an error naming ``what``."""

    def parse(value: str) -> int:
        try:
            n = int(value)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{value!r} is not {what}") from None
        if not low <= n <= high:
            raise argparse.ArgumentTypeError(f"{n} is not {what} ({low}-{high})")
        return n

    return parse


_port = _whole("a port number", 0, 65535)
_count = _whole("a number of processes", 0, 64)


def _user(value: str) -> str:
    import re

    if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_.@-]{0,63}", value):
        raise argparse.ArgumentTypeError(f"{value!r} is not a user name (letters, digits, '_', '.', '@', '-')")
    if value == "local":  # tether.connectors._acting.LOCAL_USER, not imported for a parser
        raise argparse.ArgumentTypeError(
            "'local' is the one user of a server without tokens, who acts with this machine's own "
            "tether mcp login accounts: give the token another name"
        )
    return value


def _store(settings: Any) -> Any:
    from tether.stores import server_store

    return server_store(settings)


def cmd_token(args: argparse.Namespace) -> int:
    settings = load_settings()
    store = _store(settings)
    try:
        if args.token_command == "create":
            replaced = any(name == args.name for name, _ in store.token_names())
            token = store.add_token(args.name)
            print(token)
            print(
                f"token for {args.name} (shown once; only its hash is kept). Send it as: "
                f"Authorization: Bearer {token[:6]}...",
                file=sys.stderr,
            )
            if replaced:  # one token per name: a client still sending the old one now gets 401
                print(f"{args.name}'s earlier token no longer works: this one replaces it", file=sys.stderr)
        elif args.token_command == "list":
            from datetime import datetime

            names = store.token_names()
            for name, created in names:
                print(f"{name}\t{datetime.fromtimestamp(created).isoformat(timespec='seconds')}")
            if not names:
                print(_no_tokens(store.auth_required()), file=sys.stderr)
        elif not store.revoke_token(args.name):
            raise usage_error(f"{args.name} has no token")
        else:
            print(f"revoked {args.name}'s token", file=sys.stderr)
    finally:
        store.close()
    return 0


def _no_tokens(auth_required: bool) -> str:
    """What the server does with no token, in the words its guard uses."""
    if auth_required:  # a token existed once: revoking the last one locks everyone out, never opens up
        return (
            "no tokens: the server refuses every request (401) until one is created with "
            "`tether serve token create NAME`; once a token has existed it never answers without one"
        )
    return "no tokens: the server answers on loopback only, as user `local`"


def _loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def cmd_serve(args: argparse.Namespace) -> int:
    try:
        import uvicorn
    except ImportError:
        raise usage_error('tether serve needs the serve extra: pip install "tether[serve]"') from None
    settings = load_settings()
    default_agent_flags(args, settings, "tether serve")
    store = _store(settings)
    if not _loopback(args.host) and not store.has_tokens():
        revoked = store.auth_required()  # a token existed: it would refuse everyone, not open up
        store.close()
        why = (
            "every token was revoked, so it would refuse everyone"
            if revoked
            else "anyone who reaches it could run agents"
        )
        raise usage_error(
            f"refusing to listen on {args.host} without tokens: {why}. Create one with "
            "`tether serve token create NAME`, or listen on 127.0.0.1"
        )
    from tether.server.app import create_app

    app = create_app(
        settings,
        agent_spec=args.agent,
        model=args.model,
        cwd=str(args.cwd) if args.cwd else None,
        store=store,
        workers=args.workers,
        run_processes=args.run_processes,
    )
    if args.workers != "external":  # external workers build the models with their own keys
        try:
            check_models(app.state.core.agents)
        except Exception:
            store.close()
            raise
    from tether.server.connections import DEFAULT_HEADER_TIMEOUT_S, DEFAULT_PER_CLIENT, guarded_protocol

    serve = settings.serve
    per_client = serve.max_connections_per_client
    config = uvicorn.Config(
        app,
        host=args.host,
        port=args.port,
        log_level="warning",
        lifespan="on",
        timeout_graceful_shutdown=15,
        timeout_keep_alive=75,
        backlog=_backlog(),
        http=guarded_protocol(
            float(serve.header_timeout_s or DEFAULT_HEADER_TIMEOUT_S),
            DEFAULT_PER_CLIENT if per_client is None else int(per_client),
        ),
    )
    try:
        sock = _listen(args.host, args.port)
    except OSError as exc:
        store.close()
        print(f"tether serve: {cannot_listen(args.host, args.port, exc)}", file=sys.stderr)
        return EXIT_CANNOT_LISTEN
    server = uvicorn.Server(config)
    _announce(server, args.host, sock)
    _stop_runs_first(server, app)
    server.run(sockets=[sock])
    return 0


def default_agent_flags(args: argparse.Namespace, settings: Any, command: str) -> None:
    """``--model`` and ``--cwd`` make the one default agent; with agents from ``--agent`` (or
    ``[serve] agent``) or ``[agents.NAME]`` there is none, and the flags would be dropped without a
    word: refused, saying where the agents' own models and folders are set."""
    given = [flag for flag, value in (("--model", args.model), ("--cwd", args.cwd)) if value]
    spec = args.agent or settings.serve.agent
    if not given or not (spec or settings.agents):
        return
    source = (
        f"the agents of {spec}"
        if spec
        else f"the [agents.NAME] tables of {settings.home / 'config.toml'} ({', '.join(settings.agents)})"
    )
    flags = " and ".join(given)
    raise usage_error(
        f"{flags} {'are' if len(given) > 1 else 'is'} for {command}'s default agent, and it has none here: "
        f"the agents are {source}. Set each agent's model and cwd there, or leave {flags} out"
    )


def check_models(agents: dict[str, Any]) -> None:
    """Each agent's models resolved as its runs will resolve them, before a server listens or a
    worker takes a job: an unknown provider or scenario, or a key not set, is said once here (as
    `tether run` says it), not as a failed run for every message."""
    from tether.errors import ConfigError
    from tether.providers.registry import resolve_provider

    for name, agent in agents.items():
        for model in (agent.model, *agent.fallback_models):
            if not isinstance(model, str):
                continue
            try:
                resolve_provider(model, agent.settings)
            except ConfigError as exc:
                raise ConfigError(f"agent {name!r} cannot run: {exc}") from None


LISTEN_QUEUE = 2048  # connections the kernel holds for us (uvicorn's default)


def _backlog() -> int:
    """How many pending connections to accept in one go. asyncio accepts up to its backlog at once,
    before any of them can be answered or closed, so a burst of clients (slowloris) larger than the
    free file descriptors ran the process out of them, and a normal request waited behind the
    retries. An eighth of the descriptor limit per go leaves room for the files, the connections
    being closed and the answers; the kernel still queues LISTEN_QUEUE (see :func:`_announce`)."""
    import resource

    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    return LISTEN_QUEUE if soft == resource.RLIM_INFINITY else max(8, min(LISTEN_QUEUE, soft // 8))


def _listen(host: str, port: int) -> socket.socket:
    """The listening socket, bound here so that a busy port is this command's clear error (uvicorn
    would print its raw message and exit 3, which tether uses for max_turns_exceeded)."""
    infos = socket.getaddrinfo(host.strip("[]"), port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    family, _, _, _, address = infos[0]
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as uvicorn does: restarts reuse the port
        sock.bind(address)
        sock.listen(2048)
    except OSError:
        sock.close()
        raise
    sock.set_inheritable(True)
    return sock


def cannot_listen(host: str, port: int, exc: OSError) -> str:
    """Why a server cannot listen at ``host:port``, and what to do (`tether serve`, `scripted serve`)."""
    where = f"{host}:{port}"
    if exc.errno == errno.EADDRINUSE:
        return (
            f"cannot listen on {where}: another process already listens there. Stop it, or choose another "
            "port with --port (--port 0 picks a free one)"
        )
    if exc.errno == errno.EACCES:
        return f"cannot listen on {where}: not allowed (ports below 1024 need privileges); choose --port 8000 or above"
    if exc.errno == errno.EADDRNOTAVAIL:
        return f"cannot listen on {where}: this machine has no such address; use --host 127.0.0.1 or 0.0.0.0"
    return f"cannot listen on {where}: {exc.strerror or exc}"


def _stop_runs_first(server: Any, app: Any) -> None:
    """On Ctrl-C or SIGTERM, stop the live runs (saved ``interrupted``, resumable) before uvicorn
    waits for connections to close: their streams end with their ``done`` events instead of
    holding the shutdown until its timeout."""
    shutdown = server.shutdown

    async def stop(sockets: Any = None) -> None:
        await app.state.core.manager.shutdown()
        await shutdown(sockets=sockets)

    server.shutdown = stop


def _announce(server: Any, host: str, listening: socket.socket) -> None:
    """Say where the server listens once it does (the port may have been 0: any free one)."""
    started = server.startup

    async def startup(sockets: Any = None) -> None:
        from tether.server.runs import tune_collector

        hand_over_sigterm()  # uvicorn holds SIGTERM now: a shutdown ends the process as it always has
        await started(sockets=sockets)
        tune_collector()  # the app and its agents are built: what they made is not walked again
        listening.listen(LISTEN_QUEUE)  # asyncio set the kernel's queue to its accept batch: widen it again
        for s in getattr(server, "servers", ()):
            for sock in s.sockets:
                addr = sock.getsockname()
                shown = f"[{addr[0]}]" if ":" in addr[0] else addr[0]
                print(
                    f"tether serve: listening on http://{shown}:{addr[1]}/ (Ctrl-C to stop)",
                    file=sys.stderr,
                    flush=True,
                )

    server.startup = startup
