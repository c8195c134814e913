"""``tether config path | show | check``: where the settings live, what they say, whether they load.

In the style of ``git config --list --show-origin`` and ``llm keys path``: ``path`` prints the file
(which need not exist), ``show`` prints it with every secret replaced by ``"<redacted>"`` (keys,
tokens, passwords, the password in a URL, MCP servers' environment and headers) and the
variables that override it, ``check`` loads it as every command does and says ``ok`` or what is
wrong (exit code 2).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
from typing import Any

__all__ = ["add_parsers", "redacted"]

OVERRIDES = (
    "TETHER_HOME",
    "TETHER_MODEL",
    "TETHER_DATABASE_URL",
    "TETHER_SESSION_STORE",
    "TETHER_BROKER_URL",
    "LLM_BASE_URL",
)

HELP = """\
Settings live in $TETHER_HOME/config.toml ($TETHER_HOME defaults to the platform's data
directory, e.g. ~/.local/share/tether). A missing file is fine: every setting has a default.
"""


def add_parsers(sub: Any) -> None:
    c = sub.add_parser(
        "config",
        help="where config.toml lives, what it says (secrets redacted), whether it loads",
        description=HELP,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    cs = c.add_subparsers(dest="config_command", required=True, metavar="{path,show,check}")
    cs.add_parser("path", help="print the path of config.toml (it may not exist yet)")
    show = cs.add_parser("show", help="print config.toml with secrets redacted, and the variables that override it")
    show.add_argument("--json", action="store_true", help="print it as one JSON object")
    cs.add_parser("check", help="load config.toml as every command does: ok, or what is wrong (exit code 2)")
    c.set_defaults(handler=cmd_config)


def cmd_config(args: argparse.Namespace) -> int:
    from tether.config import tether_home

    path = tether_home() / "config.toml"
    if args.config_command == "path":
        print(path)
        return 0
    if args.config_command == "check":
        return _check(path)
    return _show(path, as_json=args.json)


def _check(path: Any) -> int:
    """Load the settings as every command does, then say what the shell's sandbox will be here:
    a mode asked for that this machine cannot give is an error (every command would be refused)."""
    from tether.config import load_settings
    from tether.tools.builtin import tool_settings
    from tether.tools.sandbox import sandbox_status

    settings = load_settings()  # a ConfigError is one line and exit code 2 (tether.cli.main)
    _check_definitions(settings, path)
    _check_telemetry(settings)
    database = _check_database(settings)
    print(f"ok: {path}" if path.exists() else f"ok: {path} does not exist; every setting has its default")
    if database:
        print(database)
    status = sandbox_status(tool_settings(settings.tools).shell)
    if status.refused:
        print(f"tether: {status.sentence}", file=sys.stderr)
        return 2
    print(status.sentence)
    if not status.available:
        print("tether: no OS sandbox on this machine: run_command asks before every command", file=sys.stderr)
    return 0


def _check_database(settings: Any) -> str:
    """With ``database_url``, every command that keeps anything opens the database first: one it
    cannot reach is refused here too, with the same line (exit 2). What to say when it answers."""
    from tether.postgres.db import redact
    from tether.stores import database_of

    if database_of(settings) is None:  # connects at once: a ConfigError saying what is wrong
        return ""
    return (
        f"database: {redact(settings.database_url)} answers (runs, sessions, memory, knowledge bases "
        "and the server's records are kept there)"
    )


def _check_telemetry(settings: Any) -> None:
    """An OTLP endpoint named where OpenTelemetry is not installed refuses every run (exit 2):
    refused here too, with the same line, rather than `ok`."""
    from tether.telemetry import telemetry_from_settings

    telemetry = telemetry_from_settings(settings)
    if telemetry is not None:
        telemetry.shutdown()


def _check_definitions(settings: Any, path: Any) -> None:
    """What every run of an agent would refuse, refused here: a model no provider serves (an unknown
    provider or scripted scenario, a bare name of no known family), a tool or MCP server that does
    not exist, a schema that cannot serve. A key missing from the environment is not the file's
    mistake; knowledge bases and ``cwd`` are checked when the agent runs (where it runs)."""
    import difflib

    from tether.assembly.parts import check_mcp, load_output_schema
    from tether.config import credentials_redacted
    from tether.errors import ConfigError
    from tether.tools.builtin import builtin_tools, tool_settings
    from tether.tools.demo import DEMO_TOOLS

    models: list[tuple[str, str]] = [("model", m) for m in [settings.model] if m]
    models += [("fallback_models", m) for m in settings.fallback_models]
    for name, d in settings.agents.items():
        models += [(f"[agents.{name}] model", m) for m in [d.model] if m]
        models += [(f"[agents.{name}] fallback_models", m) for m in d.fallback_models or ()]
    models = [(f"{path}: {where}", model) for where, model in models]
    if os.environ.get("TETHER_MODEL"):  # it wins over the file's model wherever no --model is given
        models.append(("$TETHER_MODEL", os.environ["TETHER_MODEL"]))
    for where, model in models:
        try:
            _check_model(model, settings)
        except ConfigError as exc:
            raise ConfigError(credentials_redacted(f"{where}: {exc}")) from None  # a key pasted as a model
    known = [t.name for t in [*builtin_tools(tool_settings(settings.tools)), *DEMO_TOOLS]]
    for name, d in settings.agents.items():
        for tool in d.tools or ():
            if tool not in known:
                close = difflib.get_close_matches(tool, known, n=1, cutoff=0.6)
                hint = f"did you mean {close[0]}?" if close else f"known: {', '.join(known)}"
                raise ConfigError(f"{path}: [agents.{name}] tools: there is no tool {tool!r} ({hint})")
        check_mcp(settings, d.mcp, source=f"[agents.{name}] mcp")
        if d.output_schema is not None:
            load_output_schema(d.output_schema, what=f"[agents.{name}] output_schema", base=settings.home)


def _check_model(model: str, settings: Any) -> None:
    """A ConfigError when ``model`` can never be served here, whatever the environment holds."""
    from tether.providers.registry import canonical_model, resolve_provider

    provider, model_id = canonical_model(model).split("/", 1)
    endpoint = settings.endpoints.get(provider)
    from_environment = (
        endpoint.key_env and endpoint.auth not in ("oauth", "none")
        if endpoint is not None
        else provider in ("openai", "anthropic")
    )
    if model_id and from_environment:
        return  # built only with its key: whether that is set is the environment's matter
    # The scripted model and an endpoint whose key is in the file (or that needs none) are built
    # from the file alone: a key no header can carry, an unknown provider fail here as in every run.
    resolve_provider(model, settings)


def _show(path: Any, *, as_json: bool) -> int:
    import tomllib

    from tether.fileio import read_regular

    try:
        data = tomllib.loads(read_regular(path).decode("utf-8-sig")) if path.exists() or path.is_symlink() else {}
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        print(f"tether: cannot read {path}: {exc}. Fix or remove the file.", file=sys.stderr)
        return 2
    clean = redacted(data)
    overrides = {name: redacted(os.environ[name], name) for name in OVERRIDES if os.environ.get(name)}
    if as_json:
        print(json.dumps({"path": str(path), "exists": path.exists(), "config": clean, "environment": overrides}))
        return 0
    print(f"# {path}" + ("" if path.exists() else " (does not exist: every setting has its default)"))
    for name, value in overrides.items():
        print(f"# ${name} = {value}")
    text = _toml(clean)
    if text:
        print(text, end="")
    return 0


def redacted(value: Any, key: str = "") -> Any:
    """``value`` (parsed TOML) with every secret replaced by ``"<redacted>"`` (what is secret is
    :mod:`tether.config`'s to say: its one-line errors hide the same values)."""
    from tether.config import redacted as redact

    return redact(value, key)


def _toml(data: dict[str, Any], table: tuple[str, ...] = ()) -> str:
    """A small TOML writer for what tomllib read: scalars and arrays first, then each table."""
    lines = [f"{_key(k)} = {_value(v)}" for k, v in data.items() if not isinstance(v, dict)]
    out = ""
    if lines or (table and not any(isinstance(v, dict) for v in data.values())):
        out = ("\n" if table else "") + (f"[{'.'.join(_key(p) for p in table)}]\n" if table else "")
        out += "".join(line + "\n" for line in lines)
    for k, v in data.items():
        if isinstance(v, dict):
            out += _toml(v, (*table, k))
    return out


def _key(key: str) -> str:
    return key if re.fullmatch(r"[A-Za-z0-9_-]+", key) else json.dumps(key)


def _value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, list):
        return "[" + ", ".join(_value(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{_key(k)} = {_value(v)}" for k, v in value.items()) + "}"
    return json.dumps(str(value), ensure_ascii=False)
