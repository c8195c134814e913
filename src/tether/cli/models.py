"""``tether models`` (what is configured, and whether its credentials validate) and
``tether auth import`` (OAuth tokens for an endpoint)."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from tether.cli.common import non_negative_float, text, usage_error
from tether.cli.common import settings as load_settings

__all__ = ["add_parsers"]


def add_parsers(sub: Any) -> None:
    m = sub.add_parser("models", help="list configured models and whether their credentials validate")
    m.set_defaults(handler=cmd_models)
    au = sub.add_parser("auth", help="OAuth tokens for endpoints with auth = \"oauth\"")
    aus = au.add_subparsers(dest="auth_command", required=True)
    imp = aus.add_parser("import", help="store tokens for an endpoint (mode 0600 under $TETHER_HOME/auth)")
    imp.add_argument("endpoint", metavar="ENDPOINT")
    imp.add_argument("--refresh-token", required=True, type=text)
    imp.add_argument("--access-token", default="")
    imp.add_argument("--expires-in", type=non_negative_float, default=0.0, metavar="S",
                     help="seconds the access token stays valid (>= 0)")
    au.set_defaults(handler=cmd_auth)


def cmd_models(args: argparse.Namespace) -> int:
    import asyncio

    from tether.errors import TetherError
    from tether.providers.registry import configured_models, resolve_provider

    settings = load_settings()

    async def check(model: str) -> str:
        try:
            resolved = resolve_provider(model, settings)
        except TetherError as exc:
            return f"not configured: {str(exc).splitlines()[0]}"
        try:
            await resolved.provider.validate_auth()
            return "ok"
        except TetherError as exc:
            return f"auth failed: {str(exc).splitlines()[0]}"
        finally:
            await resolved.provider.aclose()

    async def run_checks() -> list[tuple[str, str]]:
        by_provider: dict[str, str] = {}
        rows = []
        for model in configured_models(settings):
            provider = model.split("/", 1)[0]
            if provider not in by_provider:  # one credential check per provider
                by_provider[provider] = await check(model)
            rows.append((model, by_provider[provider]))
        return rows

    for model, status in asyncio.run(run_checks()):
        print(f"{model:40} {status}")
    return 0


def cmd_auth(args: argparse.Namespace) -> int:
    import time

    from tether.providers.auth import save_oauth_tokens

    settings = load_settings()
    if args.endpoint not in settings.endpoints:
        raise usage_error(f"no [endpoints.{args.endpoint}] in {settings.home / 'config.toml'}")
    path = settings.home / "auth" / f"{args.endpoint}.json"
    save_oauth_tokens(path, {"access_token": args.access_token, "refresh_token": args.refresh_token,
                             "expires_at": time.time() + args.expires_in if args.access_token else 0})
    print(f"stored tokens for {args.endpoint} in {path} (mode 0600)", file=sys.stderr)
    return 0
