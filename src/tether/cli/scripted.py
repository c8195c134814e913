"""``tether scripted serve``: the scripted model as an OpenAI- and Anthropic-compatible server."""

from __future__ import annotations

import argparse
import contextlib
import sys
from typing import Any

from tether.cli.common import port_number, positive_int

__all__ = ["add_parsers"]


def add_parsers(sub: Any) -> None:
    sc = sub.add_parser("scripted", help="the scripted model as an OpenAI- and Anthropic-compatible server")
    scs = sc.add_subparsers(dest="scripted_command", required=True, metavar="{serve}")
    serve = scs.add_parser(
        "serve",
        help="serve the scripted model as an OpenAI- and Anthropic-compatible API",
        description="The scripted model behind HTTP, for trying tether's wires (and your own client) with "
        "no key and no network: Chat Completions under URL/v1, Anthropic Messages under URL; the "
        "model's name is the scenario (openai/plan, anthropic/hello).",
    )
    serve.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1)")
    serve.add_argument("--port", type=port_number, default=0, help="0 to 65535; 0 picks a free port")
    serve.add_argument(
        "--fault",
        action="append",
        default=[],
        metavar="FAULT",
        help="fail the next request this way: 429[:retry_after=S], 500, 503, 529, 401, "
        "overflow, cut, cut_after_text, stall:S, malformed, error_event (repeatable, in order)",
    )
    serve.add_argument(
        "--context-window",
        type=positive_int,
        metavar="N",
        help="answer prompts longer than N tokens with a context-length error",
    )
    sc.set_defaults(handler=cmd_scripted)


def cmd_scripted(args: argparse.Namespace) -> int:
    from tether.cli.serve import EXIT_CANNOT_LISTEN, cannot_listen
    from tether.testing.server import ScriptedServer

    try:
        server = ScriptedServer(args.host, args.port, faults=args.fault, context_window=args.context_window)
    except OSError as exc:  # the port is taken, the address is not this machine's: said as `tether serve` says it
        print(f"tether scripted serve: {cannot_listen(args.host, args.port, exc)}", file=sys.stderr)
        return EXIT_CANNOT_LISTEN
    print(f"scripted OpenAI-compatible server on {server.base_url}", flush=True)
    print(
        f"try: LLM_BASE_URL={server.base_url} tether run --model openai/plan ...  (Anthropic's wire: "
        f"ANTHROPIC_BASE_URL={server.root_url} --model anthropic/plan); Ctrl-C stops it",
        file=sys.stderr,
        flush=True,
    )
    with contextlib.suppress(KeyboardInterrupt):
        server.serve_forever()
    return 0
