"""``tether models`` (what is configured, and whether its credentials validate) and
``tether auth import`` (OAuth tokens for an endpoint)."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from tether.cli.common import non_negative_float, one_word, secret_token, stops_in_words, text, usage_error
from tether.cli.common import settings as load_settings

__all__ = ["add_parsers"]


REFRESH_ENV = "TETHER_REFRESH_TOKEN"
ACCESS_ENV = "TETHER_ACCESS_TOKEN"


def add_parsers(sub: Any) -> None:
    m = sub.add_parser(
        "models",
        help="list configured models and whether their credentials validate",
        description="Each configured model and whether its provider answers. Exit code 1 when "
        "providers are configured and none of them answers (unreachable, key refused, out of quota); "
        "the scripted model and providers with no credentials set do not count.",
    )
    m.add_argument("--json", action="store_true", help="print the models as one JSON array")
    m.set_defaults(handler=cmd_models)
    au = sub.add_parser("auth", help='OAuth tokens for endpoints with auth = "oauth"')
    aus = au.add_subparsers(dest="auth_command", required=True)
    imp = aus.add_parser("import", help="store tokens for an endpoint (mode 0600 under $TETHER_HOME/auth)")
    imp.add_argument("endpoint", metavar="ENDPOINT")
    imp.add_argument(
        "--refresh-token",
        type=text,
        metavar="TOKEN",
        help=f"'-' reads it from stdin (recommended), or leave it out and set {REFRESH_ENV}; "
        "a token written here shows in ps and in the shell's history",
    )
    imp.add_argument("--access-token", default=None, metavar="TOKEN", help=f"optional; default ${ACCESS_ENV}, if set")
    imp.add_argument(
        "--expires-in",
        type=non_negative_float,
        default=0.0,
        metavar="S",
        help="seconds the access token stays valid (>= 0)",
    )
    au.set_defaults(handler=cmd_auth)


def cmd_models(args: argparse.Namespace) -> int:
    import asyncio

    from tether.providers.registry import configured_models

    settings = load_settings()
    models = configured_models(settings)
    # An endpoint that names no models is asked for its own all the same (it is checked once).
    models += [f"{name}/*" for name in settings.endpoints if not any(m.startswith(f"{name}/") for m in models)]
    rows = asyncio.run(_check_models(models, settings))
    if args.json:
        items = [{"model": model, "ok": status.startswith("ok"), "status": status} for model, status in rows]
        print(json.dumps(items, ensure_ascii=False, indent=1))
    for model, status in rows if not args.json else ():
        print(f"{model:40} {status}")
    return _exit_code(rows)


def _exit_code(rows: list[tuple[str, str]]) -> int:
    """1 when providers were configured and none of them answered. The scripted model (always
    there, needing nothing) and providers with no credentials at all do not count."""
    checked = [(m, s) for m, s in rows if not m.startswith("scripted/") and not s.startswith("not configured")]
    if not checked or any(status.startswith("ok") for _, status in checked):
        return 0
    print(
        "tether: no configured provider answered (see each one's status above); fix that, then run "
        "`tether models` again",
        file=sys.stderr,
    )
    return 1


async def _check_models(models: list[str], settings: Any) -> list[tuple[str, str]]:
    """One credential check per provider; a provider that points at a server (``LLM_BASE_URL``,
    an endpoint) is asked for its own models instead of tether's catalogue."""
    from tether.providers.base import ModelLister
    from tether.providers.http import close_clients
    from tether.providers.registry import canonical_model, resolve_provider
    from tether.usage import CATALOG

    by_provider: dict[str, tuple[str, list[str] | None]] = {}
    rows: list[tuple[str, str]] = []
    chosen = {canonical_model(m) for m in [settings.model, *settings.fallback_models] if m}
    try:
        for model in models:
            provider = model.split("/", 1)[0]
            if provider not in by_provider:
                by_provider[provider] = await _check_provider(model, settings, resolve_provider, ModelLister)
            status, served = by_provider[provider]
            if served is None and _asks_server(model, settings) and model in CATALOG and model not in chosen:
                continue  # tether's catalogue is not what the server there serves
            if served is None:
                rows.append((model, status))
        for provider, (status, served) in by_provider.items():
            rows += [(f"{provider}/{name}", status) for name in served or ()]
            if served is None and not any(m.startswith(f"{provider}/") for m, _ in rows):
                rows.append((f"{provider}/*", status))  # the server there did not say what it serves
    finally:
        await close_clients()
    return rows


async def _check_provider(model: str, settings: Any, resolve: Any, lister: Any) -> tuple[str, list[str] | None]:
    from tether.errors import AuthError, QuotaExceededError, TetherError, UnreachableError

    try:
        resolved = resolve(model, settings)
    except TetherError as exc:
        return f"not configured: {str(exc).splitlines()[0]}", None
    provider = resolved.provider
    asks_server = _asks_server(model, settings)
    try:
        await provider.validate_auth()
        if asks_server and isinstance(provider, lister):
            return "ok (served)", await provider.list_models()
        return "ok", None
    except UnreachableError as exc:
        said = str(exc).splitlines()[0].removeprefix(f"{exc.provider}: ")
        return (said if said.startswith(f"cannot reach {exc.host}") else f"cannot reach {exc.host}: {said}"), None
    except AuthError as exc:
        return f"auth failed: {str(exc).splitlines()[0]}", None
    except QuotaExceededError as exc:
        return f"out of quota: {str(exc).splitlines()[0]}", None
    except TetherError as exc:
        return f"error: {str(exc).splitlines()[0]}", None
    finally:
        await provider.aclose()


def _asks_server(model: str, settings: Any) -> bool:
    """Whether ``model``'s provider points at a server (an endpoint, ``LLM_BASE_URL``), which is
    asked for its own models."""
    import os

    return model.split("/", 1)[0] in (getattr(settings, "endpoints", None) or {}) or (
        model.startswith("openai/") and bool(os.environ.get("LLM_BASE_URL"))
    )


@stops_in_words  # at the token's question: its echo is put back
def cmd_auth(args: argparse.Namespace) -> int:
    import os
    import time

    from tether.providers.auth import save_oauth_tokens

    settings = load_settings()
    if args.endpoint not in settings.endpoints:
        raise usage_error(f"no [endpoints.{args.endpoint}] in {settings.home / 'config.toml'}")
    refresh_token = secret_token(args.refresh_token, "--refresh-token", REFRESH_ENV)
    if args.access_token is not None:
        access_token = one_word(args.access_token, "--access-token")
    else:
        access_token = one_word(os.environ.get(ACCESS_ENV, ""), f"${ACCESS_ENV}")
    path = settings.home / "auth" / f"{args.endpoint}.json"
    save_oauth_tokens(
        path,
        {
            "access_token": access_token,
            "refresh_token": refresh_token,
            "expires_at": time.time() + args.expires_in if access_token else 0,
        },
    )
    print(f"stored tokens for {args.endpoint} in {path} (mode 0600)", file=sys.stderr)
    return 0
